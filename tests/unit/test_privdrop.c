/*
 * Unit tests for common/privdrop (user, groups, capabilities, NoNewPrivs,
 * seccomp) and common/sdnotify.  Each drop runs in a forked child and is
 * checked from the kernel's view in /proc/self/status.  Needs root, which
 * tests/run has.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "privdrop.h"
#include "sdnotify.h"
#include "../check_run.h"

/* Returns the value of a /proc/self/status field, e.g. "CapEff". */
static char *
status_field(const char *name, char *buf, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/self/status", "re");
	size_t nl = strlen(name);

	buf[0] = '\0';
	if (f == NULL)
		return buf;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, name, nl) == 0 && line[nl] == ':') {
			char *v = line + nl + 1;

			while (*v == ' ' || *v == '\t')
				v++;
			v[strcspn(v, "\n")] = '\0';
			/* The kernel ends some lists with a space. */
			while (*v != '\0' && v[strlen(v) - 1] == ' ')
				v[strlen(v) - 1] = '\0';
			snprintf(buf, len, "%s", v);
			break;
		}
	fclose(f);
	return buf;
}

/* Runs fn in a child; returns its wait status. */
static int
in_child(void (*fn)(void))
{
	pid_t pid;
	int status;

	if ((pid = fork()) == 0) {
		fn();
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

#define CHILD_CHECK(cond, code)	do { if (!(cond)) _exit(code); } while (0)

static void
drop_to_nobody(void)
{
	static const struct privdrop p = { "nobody", NULL, 0 };
	char b[128];

	privdrop(&p);
	CHILD_CHECK(getuid() == 65534 && geteuid() == 65534, 10);
	CHILD_CHECK(strcmp(status_field("CapEff", b, sizeof(b)),
	    "0000000000000000") == 0, 11);
	CHILD_CHECK(strcmp(status_field("CapPrm", b, sizeof(b)),
	    "0000000000000000") == 0, 12);
	CHILD_CHECK(strcmp(status_field("CapBnd", b, sizeof(b)),
	    "0000000000000000") == 0, 13);
	CHILD_CHECK(strcmp(status_field("NoNewPrivs", b, sizeof(b)), "1") ==
	    0, 14);
	CHILD_CHECK(setuid(0) == -1, 15);
	/* Supplementary groups: only the user's own primary group. */
	CHILD_CHECK(strcmp(status_field("Groups", b, sizeof(b)), "65534") ==
	    0, 16);
}

START_TEST(drops_everything)
{
	int st;

	ck_assert_msg(geteuid() == 0, "this test needs root");
	st = in_child(drop_to_nobody);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "child status %d", WEXITSTATUS(st));
}
END_TEST

static void
drop_keep_net_admin(void)
{
	static const cap_value_t keep[] = { CAP_NET_ADMIN };
	static const struct privdrop p = { "nobody", keep, 1 };
	char b[128];
	unsigned long long want = 1ULL << CAP_NET_ADMIN;

	privdrop(&p);
	CHILD_CHECK(geteuid() == 65534, 20);
	CHILD_CHECK(strtoull(status_field("CapEff", b, sizeof(b)), NULL, 16) ==
	    want, 21);
	CHILD_CHECK(strtoull(status_field("CapPrm", b, sizeof(b)), NULL, 16) ==
	    want, 22);
	CHILD_CHECK(strtoull(status_field("CapBnd", b, sizeof(b)), NULL, 16) ==
	    want, 23);
	CHILD_CHECK(strtoull(status_field("CapInh", b, sizeof(b)), NULL, 16) ==
	    0, 24);
	CHILD_CHECK(strcmp(status_field("NoNewPrivs", b, sizeof(b)), "1") ==
	    0, 25);
}

START_TEST(keeps_named_capability)
{
	int st;

	ck_assert_msg(geteuid() == 0, "this test needs root");
	st = in_child(drop_keep_net_admin);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "child status %d", WEXITSTATUS(st));
}
END_TEST

static void
drop_unknown_user(void)
{
	static const struct privdrop p = { "no-such-user-mcpvm", NULL, 0 };

	privdrop(&p);	/* fatal: exits 1 */
	_exit(0);
}

START_TEST(unknown_user_is_fatal)
{
	int st = in_child(drop_unknown_user);

	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 1);
}
END_TEST

static void
seccomp_then_forbidden(void)
{
	static const char *const extra[] = { "getcwd" };
	char b[64];

	/* Seccomp requires NoNewPrivs (or CAP_SYS_ADMIN): drop first. */
	static const struct privdrop p = { "nobody", NULL, 0 };

	CHILD_CHECK(strcmp(status_field("Seccomp", b, sizeof(b)), "0") == 0,
	    30);
	privdrop(&p);
	sandbox_seccomp(extra, 1, 0);
	/* Allowed calls work... */
	CHILD_CHECK(getcwd(b, sizeof(b)) != NULL || errno != 0, 31);
	CHILD_CHECK(write(STDERR_FILENO, "", 0) == 0, 32);
	/* ...and one outside the list kills the process. */
	(void)mkdir("/tmp/mcpvm-never", 0700);
	_exit(33);
}

START_TEST(seccomp_kills_on_forbidden_syscall)
{
	int st;

	ck_assert_msg(geteuid() == 0, "this test needs root");
	st = in_child(seccomp_then_forbidden);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS,
	    "expected SIGSYS, got status %d", st);
	ck_assert_int_eq(access("/tmp/mcpvm-never", F_OK), -1);
}
END_TEST

START_TEST(sd_notify_sends_state)
{
	char dir[] = "/tmp/mcpvm-notify-XXXXXX";
	char path[128], buf[64];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	pid_t pid;
	ssize_t n;
	int fd, st;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/notify", dir);
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	if ((pid = fork()) == 0) {
		setenv("NOTIFY_SOCKET", path, 1);
		setenv("WATCHDOG_USEC", "2000000", 1);
		sd_notify_init();
		/* Children must not inherit it. */
		CHILD_CHECK(getenv("NOTIFY_SOCKET") == NULL, 40);
		CHILD_CHECK(sd_watchdog_usec() == 2000000, 41);
		CHILD_CHECK(sd_notify_send("READY=1") == 0, 42);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	ck_assert_int_eq(n, 7);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "READY=1");
	close(fd);
	unlink(path);
	rmdir(dir);
	/* Without systemd it is a quiet no-op. */
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	ck_assert_int_eq(sd_notify_send("READY=1"), 0);
	ck_assert_uint_eq(sd_watchdog_usec(), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("privdrop");
	TCase *tc = tcase_create("core");

	log_init("test_privdrop", 1, 0);
	tcase_add_test(tc, drops_everything);
	tcase_add_test(tc, keeps_named_capability);
	tcase_add_test(tc, unknown_user_is_fatal);
	tcase_add_test(tc, seccomp_kills_on_forbidden_syscall);
	tcase_add_test(tc, sd_notify_sends_state);
	suite_add_tcase(s, tc);
	return check_run(s);
}
