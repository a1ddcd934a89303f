/*
 * Integration tests of vmmd's per-VM cgroups on this real host (root):
 * limits land in the controller files, a process tree including a setsid
 * double-fork is killed as a whole, the pids limit stops a fork bomb, and
 * leftovers are found for crash recovery.
 */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "cgroup.h"
#include "itest.h"
#include "log.h"
#include "util.h"
#include "worker.h"
#include "../check_run.h"

/* This run's own parent: another run may use the same slot at once. */
static char parent_name[32];
#define SLOT	9101

static struct cg_host cg;

static void
setup(void)
{
	char err[512];

	log_init("test_cgroup_host", 1, 0);
	snprintf(parent_name, sizeof(parent_name), "mcpvm-test-%d",
	    (int)getpid());
	ck_assert_msg(cg_detect(&cg, parent_name, err, sizeof(err)) == 0, "%s",
	    err);
	/* Orphans of the double fork come back to us, so we can reap them. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
}

static void
teardown(void)
{
	cg_kill(&cg, SLOT, NULL, 0);
	cg_kill(&cg, SLOT + 1, NULL, 0);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	cg_remove(&cg, SLOT, NULL, 0);
	cg_remove(&cg, SLOT + 1, NULL, 0);
	cg_remove_parent(&cg);
}

static void
knob(unsigned slot, enum cg_ctrl c, const char *name, char *buf, size_t len)
{
	char dir[4096], path[4200];

	ck_assert_int_eq(cg_path(&cg, slot, c, dir, sizeof(dir)), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_msg(read_file_str(path, buf, len) > 0, "%s", path);
	buf[strcspn(buf, "\n")] = '\0';
}

START_TEST(detects_host_layout)
{
	/* This CI host keeps its controllers on v1, cgroup2 has none. */
	if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0 &&
	    !cg.v2_has_ctrls)
		ck_assert_int_eq(cg.layout, CG_LAYOUT_V1);
	ck_assert_int_ne(cg.layout, CG_LAYOUT_NONE);
	fprintf(stderr, "cgroup layout: %s\n", cg_layout_name(cg.layout));
}
END_TEST

START_TEST(limits_are_written)
{
	struct cg_limits l = { 256ULL << 20, 50000, 100000, 32 };
	char err[512], buf[128];

	ck_assert_msg(cg_create(&cg, SLOT, &l, err, sizeof(err)) == 0, "%s",
	    err);
	if (cg.layout == CG_LAYOUT_V1) {
		knob(SLOT, CG_MEMORY, "memory.limit_in_bytes", buf, sizeof(buf));
		ck_assert_str_eq(buf, "268435456");
		knob(SLOT, CG_CPU, "cpu.cfs_quota_us", buf, sizeof(buf));
		ck_assert_str_eq(buf, "50000");
		knob(SLOT, CG_CPU, "cpu.cfs_period_us", buf, sizeof(buf));
		ck_assert_str_eq(buf, "100000");
		knob(SLOT, CG_PIDS, "pids.max", buf, sizeof(buf));
		ck_assert_str_eq(buf, "32");
	} else {
		knob(SLOT, 0, "memory.max", buf, sizeof(buf));
		ck_assert_str_eq(buf, "268435456");
		knob(SLOT, 0, "cpu.max", buf, sizeof(buf));
		ck_assert_str_eq(buf, "50000 100000");
		knob(SLOT, 0, "pids.max", buf, sizeof(buf));
		ck_assert_str_eq(buf, "32");
	}
	/* Creating again (a restart) reuses the cgroup and resets limits. */
	l.pids_max = 0;
	ck_assert_msg(cg_create(&cg, SLOT, &l, err, sizeof(err)) == 0, "%s",
	    err);
	knob(SLOT, cg.layout == CG_LAYOUT_V1 ? CG_PIDS : 0, "pids.max", buf,
	    sizeof(buf));
	ck_assert_str_eq(buf, "max");
}
END_TEST

static int
proc_gone(pid_t pid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (read_file_str(path, buf, sizeof(buf)) <= 0)
		return 1;
	p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && p[2] == 'Z';
}

START_TEST(kills_whole_tree_including_setsid_double_fork)
{
	struct cg_limits l = { 0, 0, 0, 0 };
	struct cg_attach a;
	char err[512];
	pid_t child, pids[64];
	pid_t grandchild = 0;
	int p[2], i;
	ssize_t n;

	ck_assert_msg(cg_create(&cg, SLOT, &l, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_int_eq(cg_attach_prepare(&cg, SLOT, &a), 0);
	ck_assert_int_eq(pipe(p), 0);
	if ((child = fork()) == 0) {
		/* As the QEMU child does: join the cgroup before anything. */
		if (cg_attach_apply(&a) == -1)
			_exit(1);
		if (fork() == 0) {
			setsid();
			if (fork() == 0) {
				pid_t me = getpid();

				(void)!write(p[1], &me, sizeof(me));
				for (;;)
					pause();
			}
			_exit(0);	/* the daemonizing parent leaves */
		}
		for (i = 0; i < 3; i++)
			if (fork() == 0)
				for (;;)
					pause();
		for (;;)
			pause();
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], &grandchild, sizeof(grandchild)),
	    sizeof(grandchild));
	close(p[0]);
	/* child, 3 sleepers, the daemon; the middle one may linger. */
	for (i = 0; i < 100; i++) {
		n = cg_procs(&cg, SLOT, pids, 64);
		if (n == 5)
			break;
		usleep(10000);
	}
	ck_assert_int_eq(n, 5);
	ck_assert_msg(cg_kill(&cg, SLOT, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(cg_procs(&cg, SLOT, pids, 64), 0);
	/* The setsid grandchild is dead too, not merely out of the group. */
	for (i = 0; i < 100 && !proc_gone(grandchild); i++)
		usleep(10000);
	ck_assert(proc_gone(grandchild));
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	ck_assert_int_eq(kill(grandchild, 0), -1);
	ck_assert_msg(cg_remove(&cg, SLOT, err, sizeof(err)) == 0, "%s", err);
	{
		char dir[4096];

		cg_path(&cg, SLOT, 0, dir, sizeof(dir));
		ck_assert_int_eq(access(dir, F_OK), -1);
	}
	/* Killing or removing what is not there is fine (idempotent). */
	ck_assert_int_eq(cg_kill(&cg, SLOT, err, sizeof(err)), 0);
	ck_assert_int_eq(cg_remove(&cg, SLOT, err, sizeof(err)), 0);
}
END_TEST

START_TEST(pids_limit_stops_fork_bomb)
{
	struct cg_limits l = { 0, 0, 0, 8 };
	struct cg_attach a;
	char err[512];
	int p[2], made = -1, i;
	pid_t child;

	ck_assert_msg(cg_create(&cg, SLOT, &l, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_int_eq(cg_attach_prepare(&cg, SLOT, &a), 0);
	ck_assert_int_eq(pipe(p), 0);
	if ((child = fork()) == 0) {
		int ok = 0;

		if (cg_attach_apply(&a) == -1)
			_exit(1);
		for (i = 0; i < 50; i++) {
			pid_t c = fork();

			if (c == 0)
				for (;;)
					pause();
			if (c > 0)
				ok++;
		}
		(void)!write(p[1], &ok, sizeof(ok));
		for (;;)
			pause();
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], &made, sizeof(made)), sizeof(made));
	close(p[0]);
	/* The child itself is one of the 8. */
	ck_assert_int_eq(made, 7);
	ck_assert_msg(cg_kill(&cg, SLOT, err, sizeof(err)) == 0, "%s", err);
	waitpid(child, NULL, 0);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	ck_assert_msg(cg_remove(&cg, SLOT, err, sizeof(err)) == 0, "%s", err);
}
END_TEST

START_TEST(lists_leftovers_and_attaches_pid)
{
	struct cg_limits l = { 0, 0, 0, 0 };
	unsigned slots[16];
	pid_t child, pids[4];
	char err[512];
	ssize_t n, i;
	int a = 0, b = 0;

	ck_assert_int_eq(cg_create(&cg, SLOT, &l, err, sizeof(err)), 0);
	ck_assert_int_eq(cg_create(&cg, SLOT + 1, &l, err, sizeof(err)), 0);
	n = cg_list(&cg, slots, 16);
	ck_assert_int_ge(n, 2);
	for (i = 0; i < n && i < 16; i++) {
		a |= slots[i] == SLOT;
		b |= slots[i] == SLOT + 1;
		if (i > 0)
			ck_assert_uint_lt(slots[i - 1], slots[i]);
	}
	ck_assert(a && b);
	if ((child = fork()) == 0)
		for (;;)
			pause();
	ck_assert_msg(cg_attach_pid(&cg, SLOT + 1, child, err, sizeof(err)) ==
	    0, "%s", err);
	ck_assert_int_eq(cg_procs(&cg, SLOT + 1, pids, 4), 1);
	ck_assert_int_eq(pids[0], child);
	ck_assert_int_eq(cg_kill(&cg, SLOT + 1, err, sizeof(err)), 0);
	waitpid(child, NULL, 0);
	ck_assert_int_eq(cg_remove(&cg, SLOT, err, sizeof(err)), 0);
	ck_assert_int_eq(cg_remove(&cg, SLOT + 1, err, sizeof(err)), 0);
	n = cg_list(&cg, slots, 16);
	for (i = 0; i < n && i < 16; i++)
		ck_assert_uint_ne(slots[i], SLOT);
}
END_TEST

struct dres {
	int	done, rc;
};

static void
destroyed(int rc, const char *err, void *arg)
{
	struct dres *d = arg;

	d->done = 1;
	d->rc = rc;
}

START_TEST(destroy_async_kills_and_removes_off_loop)
{
	struct cg_limits l = { 0, 0, 0, 0 };
	struct event_base *base = event_base_new();
	struct worker_pool *wp = worker_pool_new(base, 1);
	struct dres d = { 0 };
	char err[512], dir[4096];
	pid_t child;

	ck_assert_int_eq(cg_create(&cg, SLOT, &l, err, sizeof(err)), 0);
	if ((child = fork()) == 0)
		for (;;)
			pause();
	ck_assert_int_eq(cg_attach_pid(&cg, SLOT, child, err, sizeof(err)), 0);
	ck_assert_int_eq(cg_destroy_async(wp, &cg, SLOT, destroyed, &d), 0);
	ck_assert(itest_run_until(base, &d.done, 10000));
	ck_assert_int_eq(d.rc, 0);
	waitpid(child, NULL, 0);
	cg_path(&cg, SLOT, 0, dir, sizeof(dir));
	ck_assert_int_eq(access(dir, F_OK), -1);
	worker_pool_free(wp);
	event_base_free(base);
}
END_TEST

/*
 * The v2 kill path (cgroup.kill) on the real kernel: this host's cgroup2
 * mount has no controllers, so limits cannot be set there, but creating,
 * joining, killing and removing work as on a v2 host.
 */
START_TEST(v2_kill_path_on_real_cgroup2)
{
	struct cg_host h;
	struct cg_attach a;
	char dir[4200], err[512];
	pid_t child, gc = 0, pids[16];
	unsigned slots[8];
	int p[2], i;

	if (cg.v2[0] == '\0') {
		fprintf(stderr, "no cgroup2 mount: v2 kill path not run\n");
		return;
	}
	memset(&h, 0, sizeof(h));
	h.layout = CG_LAYOUT_V2;
	snprintf(h.v2, sizeof(h.v2), "%s", cg.v2);
	snprintf(h.parent, sizeof(h.parent), "%s", parent_name);
	snprintf(dir, sizeof(dir), "%s/%s", h.v2, parent_name);
	ck_assert(mkdir(dir, 0755) == 0 || errno == EEXIST);
	ck_assert_int_eq(cg_path(&h, SLOT, 0, dir, sizeof(dir)), 0);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	ck_assert_int_eq(cg_attach_prepare(&h, SLOT, &a), 0);
	ck_assert_int_eq(pipe(p), 0);
	if ((child = fork()) == 0) {
		if (cg_attach_apply(&a) == -1)
			_exit(1);
		if (fork() == 0) {
			setsid();
			if (fork() == 0) {
				pid_t me = getpid();

				(void)!write(p[1], &me, sizeof(me));
				for (;;)
					pause();
			}
			_exit(0);
		}
		for (;;)
			pause();
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], &gc, sizeof(gc)), sizeof(gc));
	close(p[0]);
	ck_assert_int_ge(cg_procs(&h, SLOT, pids, 16), 2);
	ck_assert_int_eq(cg_list(&h, slots, 8), 1);
	ck_assert_uint_eq(slots[0], SLOT);
	ck_assert_msg(cg_kill(&h, SLOT, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(cg_procs(&h, SLOT, pids, 16), 0);
	for (i = 0; i < 100 && !proc_gone(gc); i++)
		usleep(10000);
	ck_assert(proc_gone(gc));
	waitpid(child, NULL, 0);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	ck_assert_msg(cg_remove(&h, SLOT, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(access(dir, F_OK), -1);
	cg_remove_parent(&h);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("cgroup_host");
	TCase *tc = tcase_create("host");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, detects_host_layout);
	tcase_add_test(tc, limits_are_written);
	tcase_add_test(tc, kills_whole_tree_including_setsid_double_fork);
	tcase_add_test(tc, pids_limit_stops_fork_bomb);
	tcase_add_test(tc, lists_leftovers_and_attaches_pid);
	tcase_add_test(tc, destroy_async_kills_and_removes_off_loop);
	tcase_add_test(tc, v2_kill_path_on_real_cgroup2);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{

	if (geteuid() != 0) {
		fprintf(stderr, "skip: cgroups need root\n");
		return 77;
	}
	return check_run(suite());
}
