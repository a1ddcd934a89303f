/*
 * guestd --broker-relay <job_id>: the job broker pipe's relay, started by
 * guestd/guestd_broker.c in the job's mount namespace and in a cgroup beside the
 * job's.  It drops to BROKER_RELAY_UID, reads the route secret from a pipe,
 * and for each connection to the listener whose peer is in the job's cgroup
 * sends guestd the preamble and the socket.  It copies no payload.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdmsg.h"
#include "guestd.h"

#define RELAY_LISTEN_FD	3
#define RELAY_SECRET_FD	4
#define RELAY_CTL_FD	5
#define RELAY_READY_FD	6

static const char *job;

static void __attribute__((format(printf, 1, 2)))
relay_log(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "guestd broker relay: job %s: %s\n", job, buf);
}

static void __attribute__((noreturn, format(printf, 1, 2)))
relay_fail(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	dprintf(RELAY_READY_FD, "%s", buf);
	_exit(1);
}

/* The unified cgroup line of /proc/<pid>/cgroup ("0::<path>"). */
static int
read_cgroup(const char *pid, char *out, size_t outlen)
{
	char path[64], buf[4096];
	ssize_t n;
	char *p, *nl;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/cgroup", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	for (p = buf; p != NULL && *p != '\0'; p = nl) {
		if ((nl = strchr(p, '\n')) != NULL)
			*nl++ = '\0';
		if (strncmp(p, "0::", 3) == 0) {
			if (strlen(p + 3) >= outlen)
				return -1;
			snprintf(out, outlen, "%s", p + 3);
			return 0;
		}
	}
	return -1;
}

static void
drop_privileges(void)
{
	gid_t g = BROKER_RELAY_UID;
	uid_t u = BROKER_RELAY_UID;

	if (setgroups(0, NULL) == -1 || setresgid(g, g, g) == -1 ||
	    setresuid(u, u, u) == -1 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1)
		relay_fail("drop privileges: %s", strerror(errno));
	if (setresuid(0, 0, 0) == 0)
		relay_fail("drop privileges: uid 0 came back");
}

/* One connection: refused unless its process is in the job's cgroup. */
static void
relay_accept(const char *jobcg, const char *pre, size_t prelen)
{
	FDMSG_BUF(cm, 1);
	struct iovec iov = { (void *)pre, prelen };
	char pidstr[16], cg[4096];
	struct msghdr msg;
	struct ucred uc;
	socklen_t len = sizeof(uc);
	int fd;

	if ((fd = accept4(RELAY_LISTEN_FD, NULL, NULL, SOCK_CLOEXEC)) == -1)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == -1 ||
	    uc.pid <= 0) {
		relay_log("refused a connection without peer credentials");
		goto out;
	}
	snprintf(pidstr, sizeof(pidstr), "%d", (int)uc.pid);
	/*
	 * The cgroup, not the uid: every job runs as the same user, and
	 * another job can reach this socket through /proc/<pid>/root.
	 */
	if (read_cgroup(pidstr, cg, sizeof(cg)) == -1 ||
	    strcmp(cg, jobcg) != 0) {
		relay_log("refused pid %d (uid %d): not in the job's cgroup",
		    (int)uc.pid, (int)uc.uid);
		goto out;
	}
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	fdmsg_attach(&msg, &cm, sizeof(cm), &fd, 1);
	if (sendmsg(RELAY_CTL_FD, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == -1) {
		if (errno == EPIPE || errno == ECONNRESET)
			_exit(0);
		relay_log("dropped a connection: %s", strerror(errno));
	}
out:
	close(fd);
}

int
broker_relay_main(int argc, char **argv)
{
	char secret[BROKER_SECRET_HEX + 1], self[4096], pre[BROKER_PREAMBLE_MAX];
	struct pollfd pfd[2];
	size_t got = 0, n, prelen;
	ssize_t r;

	if (argc != 3 || !valid_job_id(argv[2]))
		_exit(2);
	job = argv[2];
	/* Our cgroup is the job's with ".broker" appended. */
	if (read_cgroup("self", self, sizeof(self)) == -1 ||
	    (n = strlen(self)) <= 7 || strcmp(self + n - 7, ".broker") != 0)
		relay_fail("not in a broker cgroup");
	self[n - 7] = '\0';
	drop_privileges();
	if (fcntl(RELAY_LISTEN_FD, F_SETFL, O_NONBLOCK) == -1)
		relay_fail("listener: %s", strerror(errno));
	while (got < BROKER_SECRET_HEX) {
		r = read(RELAY_SECRET_FD, secret + got, BROKER_SECRET_HEX - got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			relay_fail("no route secret");
		got += (size_t)r;
	}
	close(RELAY_SECRET_FD);
	secret[BROKER_SECRET_HEX] = '\0';
	prelen = (size_t)snprintf(pre, sizeof(pre), "%s %s\n", job, secret);
	explicit_bzero(secret, sizeof(secret));
	if (prelen >= sizeof(pre))
		relay_fail("preamble too long");
	if (write(RELAY_READY_FD, "ok", 2) != 2)
		_exit(1);
	close(RELAY_READY_FD);
	for (;;) {
		pfd[0].fd = RELAY_LISTEN_FD;
		pfd[0].events = POLLIN;
		pfd[1].fd = RELAY_CTL_FD;
		pfd[1].events = 0;	/* POLLHUP: guestd let go of us */
		if (poll(pfd, 2, -1) == -1) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (pfd[1].revents & (POLLHUP | POLLERR))
			_exit(0);
		if (pfd[0].revents & POLLIN)
			relay_accept(self, pre, prelen);
	}
}
