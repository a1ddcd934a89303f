/*
 * Helpers for vmmd's C integration tests (see itest.h).
 */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "itest.h"

long
itest_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void
tick(evutil_socket_t fd, short what, void *arg)
{
}

int
itest_run_until(struct event_base *base, const int *flag, int ms)
{
	struct timeval tv = { 0, 20000 };
	struct event *ev;
	long deadline = itest_now_ms() + ms;

	/* A ticking timer, so EVLOOP_ONCE returns to check the clock. */
	ev = event_new(base, -1, EV_PERSIST, tick, NULL);
	event_add(ev, &tv);
	while (!*flag && itest_now_ms() < deadline)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(ev);
	return *flag;
}

static int
run(char *const argv[], int quiet)
{
	pid_t pid;
	int st, fd;

	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0) {
		if (quiet && (fd = open("/dev/null", O_WRONLY)) != -1) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) == -1)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int
itest_run(char *const argv[])
{
	return run(argv, 0);
}

int
itest_run_quiet(char *const argv[])
{
	return run(argv, 1);
}

void
itest_rmtree(const char *path)
{
	char *argv[] = { "rm", "-rf", "--one-file-system", (char *)path, NULL };

	run(argv, 1);
}

uid_t
itest_free_uid(uid_t from)
{
	uid_t u;

	for (u = from; getpwuid(u) != NULL; u++)
		;
	return u;
}

int
itest_write_file(const char *path, size_t mib)
{
	char *buf;
	size_t i, j;
	int fd, rc = -1;

	if ((buf = malloc(1 << 20)) == NULL)
		return -1;
	if ((fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644)) == -1) {
		free(buf);
		return -1;
	}
	for (i = 0; i < mib; i++) {
		for (j = 0; j < (1 << 20); j += 8)
			*(uint64_t *)(buf + j) = (i << 20 | j) *
			    0x9e3779b97f4a7c15ULL;
		if (write(fd, buf, 1 << 20) != 1 << 20)
			goto out;
	}
	if (fsync(fd) == 0)
		rc = 0;
out:
	close(fd);
	free(buf);
	return rc;
}

int
itest_same_content(const char *a, const char *b)
{
	char *ba = malloc(1 << 20), *bb = malloc(1 << 20);
	ssize_t na, nb;
	int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY), same = 1;

	if (fa == -1 || fb == -1 || ba == NULL || bb == NULL)
		same = 0;
	else
		do {
			na = read(fa, ba, 1 << 20);
			nb = read(fb, bb, 1 << 20);
			if (na != nb || (na > 0 &&
			    memcmp(ba, bb, (size_t)na) != 0))
				same = 0;
		} while (same && na > 0);
	if (fa != -1)
		close(fa);
	if (fb != -1)
		close(fb);
	free(ba);
	free(bb);
	return same;
}

int
itest_loop_volume_ready(const char *fs, const char *pkg)
{
	char a[64], b[64];

	if (geteuid() != 0) {
		fprintf(stderr, "skip: mounting a loop %s needs root\n", fs);
		return 77;
	}
	snprintf(a, sizeof(a), "/usr/sbin/mkfs.%s", fs);
	snprintf(b, sizeof(b), "/sbin/mkfs.%s", fs);
	if (access(a, X_OK) == -1 && access(b, X_OK) == -1) {
		fprintf(stderr, "skip: mkfs.%s (%s) not installed; "
		    "packaging/dev/install-deps installs it\n", fs, pkg);
		return 77;
	}
	if (unshare(CLONE_NEWNS) == -1 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1) {
		perror("unshare mount namespace");
		return 1;
	}
	return 0;
}

int
itest_loop_volume(const char *img, const char *dir, char *const mkfs[])
{
	char *mnt_argv[] = { "mount", "-o", "loop", (char *)img, (char *)dir,
	    NULL };
	int fd;

	if ((fd = open(img, O_CREAT | O_WRONLY | O_EXCL, 0600)) == -1)
		return -1;
	/* Sparse: 1 GiB of address space costs what is written. */
	if (ftruncate(fd, 1LL << 30) == -1) {
		close(fd);
		return -1;
	}
	close(fd);
	if (mkdir(dir, 0755) == -1)
		return -1;
	if (itest_run_quiet(mkfs) != 0)
		return -1;
	return itest_run(mnt_argv) == 0 ? 0 : -1;
}
