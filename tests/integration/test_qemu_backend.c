/*
 * Integration tests of vmmd's QEMU backend against the real
 * qemu-system-x86_64 under TCG: a firmware-only guest (SeaBIOS idling, no
 * kernel yet) started as an unprivileged uid in a real cgroup, paused,
 * resumed, hibernated to a file and restored from it.  Needs root.
 */
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

#include "backend.h"
#include "cgroup.h"
#include "itest.h"
#include "log.h"
#include "worker.h"

#define SLOT	9001	/* far from any slot a real vmmd would use */

static struct event_base *base;
static struct worker_pool *pool;
static struct qemu_backend *be;
static struct cg_host cg;
static char tmp[] = "/tmp/mcpvm-qemu-XXXXXX";
static char rundir[256], ckpt[256];
static uid_t vm_uid;

struct res {
	int	 done, ok, exited, wstatus;
	char	 err[512], status[64];
};

static void
done_cb(struct vmm *v, int ok, const char *err, void *arg)
{
	struct res *r = arg;

	r->done = 1;
	r->ok = ok;
	snprintf(r->err, sizeof(r->err), "%s", err);
}

static void
status_cb(struct vmm *v, int ok, const char *status, void *arg)
{
	struct res *r = arg;

	r->done = 1;
	r->ok = ok;
	snprintf(r->status, sizeof(r->status), "%s", status);
}

static void
exited_cb(struct vmm *v, int wstatus, void *arg)
{
	struct res *r = arg;

	r->exited = 1;
	r->wstatus = wstatus;
}

static const struct vmm_cbs cbs = { exited_cb, NULL };

static void
setup(void)
{
	struct qemu_conf qc = { 0 };
	char err[512];

	if (geteuid() != 0) {
		fprintf(stderr, "needs root (cgroups, setuid to a VM uid)\n");
		exit(77);
	}
	log_init("test_qemu_backend", 1, 0);
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	ck_assert_int_eq(chmod(tmp, 0711), 0);
	vm_uid = itest_free_uid(3900000);
	snprintf(rundir, sizeof(rundir), "%s/run", tmp);
	snprintf(ckpt, sizeof(ckpt), "%s/ckpt", tmp);
	ck_assert_int_eq(mkdir(rundir, 0700), 0);
	ck_assert_int_eq(chown(rundir, vm_uid, vm_uid), 0);
	base = event_base_new();
	pool = worker_pool_new(base, 2);
	qc.binary = "/usr/bin/qemu-system-x86_64";
	qc.accel = QEMU_ACCEL_TCG;
	qc.command_ms = 20000;
	be = qemu_backend_new(base, pool, &qc, err, sizeof(err));
	ck_assert_msg(be != NULL, "%s", err);
	ck_assert_msg(cg_detect(&cg, "mcpvm-test", err, sizeof(err)) == 0,
	    "%s", err);
}

static void
teardown(void)
{
	cg_kill(&cg, SLOT, NULL, 0);
	cg_remove(&cg, SLOT, NULL, 0);
	cg_remove_parent(&cg);
	qemu_backend_free(be);
	worker_pool_free(pool);
	event_base_free(base);
	itest_rmtree(tmp);
}

static void
spec_init(struct vm_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->slot = SLOT;
	s->uid = vm_uid;
	s->gid = vm_uid;
	s->vcpus = 1;
	s->memory_mib = 64;
	s->rundir = rundir;
	s->tap_fd = -1;
	s->cg = &cg;
}

static void
expect_status(struct vmm *v, const char *want)
{
	struct res r = { 0 };

	ck_assert_int_eq(vmm_status(v, status_cb, &r), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_int_eq(r.ok, 1);
	ck_assert_str_eq(r.status, want);
}

static uid_t
proc_uid(pid_t pid)
{
	char path[64], line[256];
	unsigned long r = 0, e = 0, s = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return (uid_t)-1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Uid: %lu %lu %lu", &r, &e, &s) == 3)
			break;
	fclose(f);
	return r == e && e == s ? (uid_t)r : (uid_t)-1;
}

START_TEST(start_pause_resume_hibernate_restore)
{
	struct cg_limits lim = { 512ULL << 20, 0, 0, 64 };
	struct vm_spec s;
	struct vmm *v = NULL;
	struct res r = { 0 }, ex = { 0 };
	struct stat st;
	pid_t pids[8], pid;
	char err[512];
	long t0;

	ck_assert_msg(cg_create(&cg, SLOT, &lim, err, sizeof(err)) == 0, "%s",
	    err);
	spec_init(&s);
	ck_assert_int_eq(qemu_backend_ops.start(be, &s, &cbs, &ex, done_cb, &r,
	    &v), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_msg(r.ok, "start: %s", r.err);
	pid = vmm_pid(v);
	ck_assert_int_gt(pid, 0);
	/* Jailed: the VM uid, inside the VM's cgroup. */
	ck_assert_int_eq(proc_uid(pid), vm_uid);
	ck_assert_int_eq(cg_procs(&cg, SLOT, pids, 8), 1);
	ck_assert_int_eq(pids[0], pid);
	expect_status(v, "running");

	/* A second operation while one runs is refused. */
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(vmm_pause(v, done_cb, &r), 0);
	ck_assert_int_eq(vmm_resume(v, done_cb, &r), -1);
	ck_assert_int_eq(errno, EBUSY);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_msg(r.ok, "pause: %s", r.err);
	expect_status(v, "paused");
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(vmm_resume(v, done_cb, &r), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_msg(r.ok, "resume: %s", r.err);
	expect_status(v, "running");

	/* Hibernate: a complete file, owned by the VM uid, QEMU gone. */
	memset(&r, 0, sizeof(r));
	t0 = itest_now_ms();
	ck_assert_int_eq(vmm_snapshot(v, ckpt, done_cb, &r), 0);
	ck_assert(itest_run_until(base, &r.done, 60000));
	ck_assert_msg(r.ok, "snapshot: %s", r.err);
	fprintf(stderr, "hibernate: %ld ms\n", itest_now_ms() - t0);
	ck_assert(itest_run_until(base, &ex.exited, 5000));
	ck_assert(WIFEXITED(ex.wstatus) && WEXITSTATUS(ex.wstatus) == 0);
	ck_assert_int_eq(stat(ckpt, &st), 0);
	ck_assert_int_gt(st.st_size, 64 * 1024);
	{
		/* A QEMU migration stream starts with the magic "QEVM". */
		char magic[4];
		FILE *f = fopen(ckpt, "r");

		ck_assert_ptr_nonnull(f);
		ck_assert_int_eq(fread(magic, 1, 4, f), 4);
		fclose(f);
		ck_assert_int_eq(memcmp(magic, "QEVM", 4), 0);
	}
	ck_assert_int_eq(st.st_uid, vm_uid);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	{
		char part[300];

		snprintf(part, sizeof(part), "%s.part", ckpt);
		ck_assert_int_eq(access(part, F_OK), -1);
	}
	ck_assert_int_eq(cg_procs(&cg, SLOT, pids, 8), 0);
	vmm_free(v);

	/* Restore: the same machine, running again. */
	memset(&r, 0, sizeof(r));
	memset(&ex, 0, sizeof(ex));
	t0 = itest_now_ms();
	ck_assert_int_eq(qemu_backend_ops.restore(be, &s, ckpt, &cbs, &ex,
	    done_cb, &r, &v), 0);
	ck_assert(itest_run_until(base, &r.done, 30000));
	ck_assert_msg(r.ok, "restore: %s", r.err);
	fprintf(stderr, "restore: %ld ms\n", itest_now_ms() - t0);
	expect_status(v, "running");

	/* Stop: quit, and the process is gone when done runs. */
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(vmm_stop(v, done_cb, &r), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_msg(r.ok, "stop: %s", r.err);
	ck_assert_int_eq(kill(pid, 0) == -1 || proc_uid(pid) != vm_uid, 1);
	vmm_free(v);
}
END_TEST

START_TEST(qemu_killed_fails_operation_cleanly)
{
	struct vm_spec s;
	struct vmm *v = NULL;
	struct res r = { 0 }, ex = { 0 };
	char err[512];
	struct cg_limits lim = { 0, 0, 0, 0 };

	ck_assert_msg(cg_create(&cg, SLOT, &lim, err, sizeof(err)) == 0, "%s",
	    err);
	spec_init(&s);
	ck_assert_int_eq(qemu_backend_ops.start(be, &s, &cbs, &ex, done_cb, &r,
	    &v), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_msg(r.ok, "start: %s", r.err);
	/* Snapshot under way, then QEMU dies: a clean failure, no file. */
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(vmm_snapshot(v, ckpt, done_cb, &r), 0);
	ck_assert_int_eq(vmm_kill(v), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.err, "QEMU died (signal 9)") != NULL, "%s",
	    r.err);
	ck_assert(itest_run_until(base, &ex.exited, 5000));
	ck_assert(WIFSIGNALED(ex.wstatus));
	ck_assert_int_eq(access(ckpt, F_OK), -1);
	/* Nothing more can be asked of a dead VMM. */
	ck_assert_int_eq(vmm_pause(v, done_cb, &r), -1);
	vmm_free(v);
}
END_TEST

START_TEST(restore_from_garbage_fails)
{
	struct vm_spec s;
	struct vmm *v = NULL;
	struct res r = { 0 }, ex = { 0 };
	FILE *f;

	f = fopen(ckpt, "w");
	ck_assert_ptr_nonnull(f);
	fputs("this is not a QEMU migration stream\n", f);
	fclose(f);
	spec_init(&s);
	s.cg = NULL;
	ck_assert_int_eq(qemu_backend_ops.restore(be, &s, ckpt, &cbs, &ex,
	    done_cb, &r, &v), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_int_eq(r.ok, 0);
	/* QEMU's own reason reaches the caller. */
	ck_assert_msg(strstr(r.err, "QEMU exited with status 1: ") != NULL &&
	    strstr(r.err, "migration") != NULL, "%s", r.err);
	vmm_kill(v);
	itest_run_until(base, &ex.exited, 5000);
	vmm_free(v);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("qemu_backend");
	TCase *tc = tcase_create("tcg");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, start_pause_resume_hibernate_restore);
	tcase_add_test(tc, qemu_killed_fails_operation_cleanly);
	tcase_add_test(tc, restore_from_garbage_fails);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	if (geteuid() != 0) {
		fprintf(stderr, "skip: needs root\n");
		return 77;
	}
	if (access("/usr/bin/qemu-system-x86_64", X_OK) == -1) {
		fprintf(stderr, "skip: qemu-system-x86_64 not installed\n");
		return 77;
	}
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
