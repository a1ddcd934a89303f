/*
 * Integration tests of vmmd's QEMU backend against the real
 * qemu-system-x86_64 under TCG: a firmware-only guest (SeaBIOS idling, no
 * kernel yet) started as an unprivileged uid in a real cgroup, paused,
 * resumed, hibernated to a file and restored from it.  Needs root.
 *
 * The backend's monitor is vmproxy's QEMU side (vmproxy_qmp.c) run in
 * this process, without the IPC between: the same typed operations over
 * the same QMP client, and QEMU's output drained into a bounded log.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <linux/if.h>
#include <linux/if_tun.h>

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "cgroup.h"
#include "console.h"
#include "itest.h"
#include "log.h"
#include "spawn.h"
#include "vmproxy_qmp.h"
#include "worker.h"
#include "../check_run.h"

#define SLOT	9001	/* far from any slot a real vmmd would use */

static struct event_base *base;
static struct worker_pool *pool;
static struct qemu_backend *be;
static struct cg_host cg;
static char tmp[] = "/tmp/mcpvm-qemu-XXXXXX";
static char cgparent[32];
static char rundir[256], ckpt[256];
static uid_t vm_uid;

struct res {
	int	 done, ok, exited, wstatus;
	int	 at;		/* when its callback ran, in callbacks */
	char	 err[512], status[64];
};

static int ncallbacks;

static void
done_cb(struct vmm *v, int ok, const char *err, void *arg)
{
	struct res *r = arg;

	r->done = 1;
	r->ok = ok;
	r->at = ++ncallbacks;
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
	r->at = ++ncallbacks;
}

static const struct vmm_cbs cbs = { exited_cb, NULL };

/* The monitor: vmproxy's QEMU side, in process. */
static struct tmon {
	struct vmm_monitor	 mon;
	struct vpq		*q;
	struct console		*log;
	int			 log_wr;	/* QEMU's stdout and stderr */
	int			 lost;		/* lost events seen */
} tm = { .log_wr = -1 };

static void
tmon_event(enum vmq_event ev, void *arg)
{
	if (tm.mon.owner != NULL && tm.mon.event != NULL)
		tm.mon.event(tm.mon.owner, ev);
}

static void
tmon_lost(const char *why, void *arg)
{
	tm.lost++;
	if (tm.mon.owner != NULL && tm.mon.lost != NULL)
		tm.mon.lost(tm.mon.owner, why);
}

static const struct vpq_cbs tmon_cbs = { tmon_event, tmon_lost };

static int
tmon_call(struct vmm_monitor *mon, enum vmq_op op, int fd, int timeout_ms,
    vmm_mon_cb cb, void *arg)
{
	return vpq_call(tm.q, op, fd, timeout_ms, cb, arg);
}

static void
tmon_free(void)
{
	vpq_free(tm.q);
	console_free(tm.log);
	if (tm.log_wr != -1)
		close(tm.log_wr);
	memset(&tm, 0, sizeof(tm));
	tm.log_wr = -1;
}

static void
tmon_init(void)
{
	char path[300];
	int p[2], file;

	tmon_free();
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	snprintf(path, sizeof(path), "%s/qemu.log", tmp);
	file = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(file, 0);
	tm.log = console_new(base, p[0], file, 64 * 1024);
	ck_assert_ptr_nonnull(tm.log);
	tm.log_wr = p[1];
	snprintf(path, sizeof(path), "%s/%s", rundir, VMM_QMP_SOCK);
	tm.q = vpq_new(base, path, tm.log, &tmon_cbs, NULL);
	ck_assert_ptr_nonnull(tm.q);
	tm.mon.call = tmon_call;
}

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
	/* A parent of this run's own: teardown kills everything in the
	 * slot's cgroup, and another run of this test (another build, a
	 * benchmark) may be using the same slot number at the same time. */
	snprintf(cgparent, sizeof(cgparent), "mcpvm-test-%d", (int)getpid());
	ck_assert_msg(cg_detect(&cg, cgparent, err, sizeof(err)) == 0,
	    "%s", err);
	/* QEMU starts through the spawner, as in vmmd: the test's VM uid is
	 * uid_base + SLOT, the only slot it may use. */
	spawn_start(&(struct spawn_conf){
		.qemu = "/usr/bin/qemu-system-x86_64",
		.uid_base = vm_uid - SLOT,
		.nslots = SLOT + 1,
		.cg = &cg,
	});
	base = event_base_new();
	pool = worker_pool_new(base, 2);
	qc.binary = "/usr/bin/qemu-system-x86_64";
	qc.accel = QEMU_ACCEL_TCG;
	qc.command_ms = 20000;
	qc.tcg_tb_mib = 64;	/* exercised for real, and keeps RSS small */
	be = qemu_backend_new(base, pool, &qc, err, sizeof(err));
	ck_assert_msg(be != NULL, "%s", err);
}

static void
teardown(void)
{
	cg_kill(&cg, SLOT, NULL, 0);
	cg_remove(&cg, SLOT, NULL, 0);
	cg_remove_parent(&cg);
	tmon_free();
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
	s->console_fd = -1;
	s->cg = &cg;
	tmon_init();
	s->log_fd = tm.log_wr;
	s->mon = &tm.mon;
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

/* The value of one line of /proc/<pid>/status, trimmed. */
static const char *
proc_field(pid_t pid, const char *key)
{
	static char val[256];
	char path[64], line[256], *p;
	FILE *f;

	val[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return "?";
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, strlen(key)) == 0) {
			p = line + strlen(key);
			p += strspn(p, " \t");
			p[strcspn(p, "\n")] = '\0';
			snprintf(val, sizeof(val), "%s", p);
			while (val[0] != '\0' && (val[strlen(val) - 1] == ' ' ||
			    val[strlen(val) - 1] == '\t'))
				val[strlen(val) - 1] = '\0';
			break;
		}
	fclose(f);
	return val;
}

static int
connect_unix(const char *dir, const char *name)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, rc;

	if (snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/%s", dir, name) >=
	    (int)sizeof(sun.sun_path))
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	close(fd);
	return rc;
}

/* Does pid have a descriptor open on path? */
static int
holds_file(pid_t pid, const char *path)
{
	char dir[64], link[400], target[400];
	struct dirent *de;
	ssize_t n;
	DIR *d;
	int found = 0;

	snprintf(dir, sizeof(dir), "/proc/%ld/fd", (long)pid);
	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		snprintf(link, sizeof(link), "%s/%s", dir, de->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strcmp(target, path) == 0)
			found = 1;
	}
	closedir(d);
	return found;
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
	char marker[300], disk[300];
	int leak;
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
	/* Every VM vmmd makes has a vmgenid device. */
	s.vmgenid = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
	/* A raw disk as a VM has one: owned by the VM uid, O_DIRECT. */
	snprintf(disk, sizeof(disk), "%s/disk.raw", tmp);
	leak = open(disk, O_CREAT | O_RDWR, 0600);
	ck_assert_int_eq(ftruncate(leak, 16 << 20), 0);
	ck_assert_int_eq(fchown(leak, vm_uid, vm_uid), 0);
	close(leak);
	s.disk = disk;
	/* A descriptor vmmd holds without O_CLOEXEC must not reach QEMU. */
	snprintf(marker, sizeof(marker), "%s/marker", tmp);
	leak = open(marker, O_CREAT | O_RDWR, 0600);
	ck_assert_int_ge(leak, 0);
	ck_assert_int_eq(qemu_backend_ops.start(be, &s, &cbs, &ex, done_cb, &r,
	    &v), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_msg(r.ok, "start: %s", r.err);
	pid = vmm_pid(v);
	ck_assert_int_eq(holds_file(pid, marker), 0);
	ck_assert_int_eq(holds_file(pid, disk), 1);
	close(leak);
	ck_assert_int_gt(pid, 0);
	/* Jailed: the VM uid, inside the VM's cgroup. */
	ck_assert_int_eq(proc_uid(pid), vm_uid);
	ck_assert_int_eq(cg_procs(&cg, SLOT, pids, 8), 1);
	ck_assert_int_eq(pids[0], pid);
	/* No new privileges, QEMU's seccomp sandbox on. */
	ck_assert_str_eq(proc_field(pid, "NoNewPrivs:"), "1");
	ck_assert_str_eq(proc_field(pid, "Seccomp:"), "2");
	ck_assert_str_eq(proc_field(pid, "Groups:"), "");
	/* The guest link's socket is there for vmproxy to connect to. */
	ck_assert_int_eq(connect_unix(rundir, VMM_LINK_SOCK), 0);
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

	/* Hibernate: a complete file, QEMU gone. */
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
	/* vmmd's own: QEMU reaches it only through the descriptor. */
	ck_assert_int_eq(st.st_uid, 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	{
		char part[300];

		snprintf(part, sizeof(part), "%s.part", ckpt);
		ck_assert_int_eq(access(part, F_OK), -1);
	}
	ck_assert_int_eq(cg_procs(&cg, SLOT, pids, 8), 0);
	vmm_free(v);

	/* Restore: the same machine, running again; a clone's would take
	 * a GUID of its own, and QEMU must accept that too. */
	s.vmgenid = "1f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
	memset(&r, 0, sizeof(r));
	memset(&ex, 0, sizeof(ex));
	t0 = itest_now_ms();
	ck_assert_int_eq(qemu_backend_ops.restore(be, &s, ckpt, &cbs, &ex,
	    done_cb, &r, &v), 0);
	ck_assert(itest_run_until(base, &r.done, 30000));
	ck_assert_msg(r.ok, "restore: %s", r.err);
	fprintf(stderr, "restore: %ld ms\n", itest_now_ms() - t0);
	expect_status(v, "running");
	ck_assert_int_eq(connect_unix(rundir, VMM_LINK_SOCK), 0);
	ck_assert_int_eq(proc_uid(vmm_pid(v)), vm_uid);

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
	/*
	 * The operation fails first and the exit comes after, though the
	 * words for the failure come from the monitor later: an owner that
	 * sets its VM running again on a failed hibernation must then hear
	 * that QEMU is gone.
	 */
	ck_assert_int_lt(r.at, ex.at);
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

START_TEST(microvm_hibernates_and_restores)
{
	struct qemu_conf qc = { 0 };
	struct qemu_backend *mbe;
	struct vm_spec s;
	struct vmm *v = NULL;
	struct res r = { 0 }, ex = { 0 };
	char err[512];

	qc.binary = "/usr/bin/qemu-system-x86_64";
	qc.accel = QEMU_ACCEL_TCG;
	qc.machine = "microvm";
	mbe = qemu_backend_new(base, pool, &qc, err, sizeof(err));
	ck_assert_msg(mbe != NULL, "%s", err);
	spec_init(&s);
	s.cg = NULL;
	s.vmgenid = "2f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
	ck_assert_int_eq(qemu_backend_ops.start(mbe, &s, &cbs, &ex, done_cb,
	    &r, &v), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_msg(r.ok, "start: %s", r.err);
	ck_assert_int_eq(connect_unix(rundir, VMM_LINK_SOCK), 0);
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(vmm_snapshot(v, ckpt, done_cb, &r), 0);
	ck_assert(itest_run_until(base, &r.done, 60000));
	ck_assert_msg(r.ok, "snapshot: %s", r.err);
	ck_assert(itest_run_until(base, &ex.exited, 5000));
	vmm_free(v);
	memset(&r, 0, sizeof(r));
	memset(&ex, 0, sizeof(ex));
	ck_assert_int_eq(qemu_backend_ops.restore(mbe, &s, ckpt, &cbs, &ex,
	    done_cb, &r, &v), 0);
	ck_assert(itest_run_until(base, &r.done, 30000));
	ck_assert_msg(r.ok, "restore: %s", r.err);
	expect_status(v, "running");
	ck_assert_int_eq(vmm_kill(v), 0);
	ck_assert(itest_run_until(base, &ex.exited, 5000));
	vmm_free(v);
	qemu_backend_free(mbe);
}
END_TEST

START_TEST(full_disk_leaves_vm_running_and_no_checkpoint)
{
	struct vm_spec s;
	struct vmm *v = NULL;
	struct res r = { 0 }, ex = { 0 };
	char full[300], path[350];

	/* Far smaller than the machine state (about 500 KiB here). */
	snprintf(full, sizeof(full), "%s/full", tmp);
	ck_assert_int_eq(mkdir(full, 0700), 0);
	ck_assert_int_eq(mount("tmpfs", full, "tmpfs", 0, "size=64k"), 0);
	snprintf(path, sizeof(path), "%s/ckpt", full);
	spec_init(&s);
	s.cg = NULL;
	ck_assert_int_eq(qemu_backend_ops.start(be, &s, &cbs, &ex, done_cb, &r,
	    &v), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_msg(r.ok, "start: %s", r.err);
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(vmm_snapshot(v, path, done_cb, &r), 0);
	ck_assert(itest_run_until(base, &r.done, 30000));
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.err, "migration failed") != NULL, "%s", r.err);
	/* Nothing that a resume could mistake for a checkpoint. */
	ck_assert_int_eq(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/ckpt.part", full);
	ck_assert_int_eq(access(path, F_OK), -1);
	/* The guest runs on, as before the attempt. */
	expect_status(v, "running");
	ck_assert_int_eq(ex.exited, 0);
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(vmm_stop(v, done_cb, &r), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert(r.ok);
	vmm_free(v);
	umount2(full, MNT_DETACH);
}
END_TEST

START_TEST(qemu_failing_to_start_says_why)
{
	struct qemu_conf qc = { 0 };
	struct qemu_backend *fbe;
	struct vm_spec s;
	struct vmm *v = NULL;
	struct res r = { 0 }, ex = { 0 };
	char bin[300], err[512];
	FILE *f;

	snprintf(bin, sizeof(bin), "%s/fake-qemu", tmp);
	f = fopen(bin, "w");
	ck_assert_ptr_nonnull(f);
	fputs("#!/bin/sh\necho 'qemu: could not load kernel' >&2\nexit 1\n", f);
	fclose(f);
	ck_assert_int_eq(chmod(bin, 0755), 0);
	qc.binary = bin;
	qc.accel = QEMU_ACCEL_TCG;
	/* The spawner starts only the QEMU it was given: a new one. */
	spawn_stop();
	spawn_start(&(struct spawn_conf){
		.qemu = bin,
		.uid_base = vm_uid - SLOT,
		.nslots = SLOT + 1,
		.cg = &cg,
	});
	fbe = qemu_backend_new(base, pool, &qc, err, sizeof(err));
	ck_assert_ptr_nonnull(fbe);
	spec_init(&s);
	s.cg = NULL;
	ck_assert_int_eq(qemu_backend_ops.start(fbe, &s, &cbs, &ex, done_cb,
	    &r, &v), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.err, "QEMU exited with status 1: qemu: could "
	    "not load kernel") != NULL, "%s", r.err);
	ck_assert(ex.exited);
	vmm_free(v);
	qemu_backend_free(fbe);
	/* A binary that is not there is refused when the backend is made. */
	qc.binary = "/nonexistent/qemu";
	ck_assert_ptr_null(qemu_backend_new(base, pool, &qc, err,
	    sizeof(err)));
	ck_assert_msg(strstr(err, "/nonexistent/qemu") != NULL, "%s", err);
}
END_TEST

START_TEST(network_on_gets_the_tap_fd)
{
	struct ifreq ifr;
	struct vm_spec s;
	struct vmm *v = NULL;
	struct res r = { 0 }, ex = { 0 };
	char link[64], target[64];
	ssize_t n;
	int tap;

	/* A throwaway network namespace: the TAP never touches the host. */
	ck_assert_int_eq(unshare(CLONE_NEWNET), 0);
	tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(tap, 0);
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "mcpvmtest0");
	ck_assert_int_eq(ioctl(tap, TUNSETIFF, &ifr), 0);
	spec_init(&s);
	s.cg = NULL;
	s.tap_fd = tap;
	s.console_fd = -1;
	ck_assert_int_eq(qemu_backend_ops.start(be, &s, &cbs, &ex, done_cb, &r,
	    &v), 0);
	ck_assert(itest_run_until(base, &r.done, 20000));
	ck_assert_msg(r.ok, "start: %s", r.err);
	expect_status(v, "running");
	/* QEMU, as the VM uid, holds the TAP as fd 3 and nothing opened it. */
	snprintf(link, sizeof(link), "/proc/%ld/fd/3", (long)vmm_pid(v));
	n = readlink(link, target, sizeof(target) - 1);
	ck_assert_int_gt(n, 0);
	target[n] = '\0';
	ck_assert_str_eq(target, "/dev/net/tun");
	/* The caller's descriptor is still the caller's. */
	ck_assert_int_ne(fcntl(tap, F_GETFD), -1);
	ck_assert_int_eq(vmm_kill(v), 0);
	ck_assert(itest_run_until(base, &ex.exited, 5000));
	vmm_free(v);
	close(tap);
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
	tcase_add_test(tc, full_disk_leaves_vm_running_and_no_checkpoint);
	tcase_add_test(tc, microvm_hibernates_and_restores);
	tcase_add_test(tc, qemu_failing_to_start_says_why);
	tcase_add_test(tc, network_on_gets_the_tap_fd);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{

	if (geteuid() != 0) {
		fprintf(stderr, "skip: needs root\n");
		return 77;
	}
	if (access("/usr/bin/qemu-system-x86_64", X_OK) == -1) {
		fprintf(stderr, "skip: qemu-system-x86_64 not installed\n");
		return 77;
	}
	/* Private mounts (the full-disk test's tmpfs) die with us. */
	if (unshare(CLONE_NEWNS) == -1 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1) {
		perror("unshare mount namespace");
		return 1;
	}
	return check_run(suite());
}
