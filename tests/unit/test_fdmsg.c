/*
 * Unit tests for common/fdmsg: descriptors sent with fdmsg_attach arrive
 * through fdmsg_take; more than asked for, or control data cut short, is
 * refused with every received descriptor closed (counted in /proc/self/fd).
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fdmsg.h"
#include "../check_run.h"

static int
open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;		/* the directory's own */
}

/* Sends one byte with nfds fresh descriptors of /dev/null, then closes
 * ours, so that only the receiver's copies remain. */
static void
send_nulls(int sock, int nfds)
{
	FDMSG_BUF(buf, 8);
	char byte = 'x';
	struct iovec iov = { &byte, 1 };
	struct msghdr msg;
	int fds[8];

	ck_assert_int_le(nfds, 8);
	for (int i = 0; i < nfds; i++)
		ck_assert_int_ge(fds[i] = open("/dev/null", O_RDONLY), 0);
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	fdmsg_attach(&msg, &buf, sizeof(buf), fds, (size_t)nfds);
	ck_assert_int_eq(sendmsg(sock, &msg, 0), 1);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

/* recvmsg with room for room descriptors, then fdmsg_take of max. */
static int
recv_take(int sock, size_t room, int *fds, size_t max)
{
	FDMSG_BUF(buf, 8);
	char byte;
	struct iovec iov = { &byte, 1 };
	struct msghdr msg;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = buf.buf;
	msg.msg_controllen = CMSG_SPACE(sizeof(int) * room);
	ck_assert_int_eq(recvmsg(sock, &msg, MSG_CMSG_CLOEXEC), 1);
	return fdmsg_take(&msg, fds, max);
}

START_TEST(descriptors_arrive)
{
	int sv[2], fds[4], before;
	struct stat st;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	before = open_fds();
	send_nulls(sv[0], 3);
	ck_assert_int_eq(recv_take(sv[1], 8, fds, 4), 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(fstat(fds[i], &st), 0);
		ck_assert(S_ISCHR(st.st_mode));
		close(fds[i]);
	}
	send_nulls(sv[0], 0);
	ck_assert_int_eq(recv_take(sv[1], 8, fds, 4), 0);
	ck_assert_int_eq(open_fds(), before);
}
END_TEST

START_TEST(more_than_asked_is_refused_and_closed)
{
	int sv[2], fds[2], before;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	before = open_fds();
	send_nulls(sv[0], 5);
	ck_assert_int_eq(recv_take(sv[1], 8, fds, 2), -1);
	ck_assert_int_eq(open_fds(), before);
}
END_TEST

START_TEST(cut_short_is_refused_and_closed)
{
	int sv[2], fds[8], before;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	before = open_fds();
	/* Room for one: the kernel installs one and says MSG_CTRUNC. */
	send_nulls(sv[0], 4);
	ck_assert_int_eq(recv_take(sv[1], 1, fds, 8), -1);
	ck_assert_int_eq(open_fds(), before);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("fdmsg");
	TCase *tc = tcase_create("fdmsg");

	tcase_add_test(tc, descriptors_arrive);
	tcase_add_test(tc, more_than_asked_is_refused_and_closed);
	tcase_add_test(tc, cut_short_is_refused_and_closed);
	suite_add_tcase(s, tc);
	return check_run(s);
}
