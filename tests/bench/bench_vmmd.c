/*
 * Benchmarks of vmmd's building blocks, each beside its baseline in the
 * same run: a reflink clone of a 1 GiB image against a plain copy of it
 * (on a loop-mounted XFS made for the run), and hibernate/restore of a
 * TCG guest through the QEMU backend against bare QEMU driven by a minimal
 * QMP script (bare_qmp.py) with the same command line.  Needs root.
 *
 * The backend's monitor here is vmproxy's QEMU side (vmproxy_qmp.c) in
 * this process, as vmmd reaches it through the VM's vmproxy: the figures
 * hold the typed operations and QMP client, not the IPC hop between vmmd
 * and vmproxy (tests/bench/vmmd_vm.py measures the whole daemon).
 */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "backend.h"
#include "cgroup.h"
#include "disk.h"
#include "log.h"
#include "spawn.h"
#include "vmproxy_qmp.h"
#include "worker.h"

#define QEMU		"/usr/bin/qemu-system-x86_64"
#define ITER		5
#define GUEST_MIB	256
#define SLOT		9201

static char tmp[] = "/tmp/mcpvm-bench-XXXXXX";

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int
run(char *const argv[], const char *out)
{
	pid_t pid;
	int st, fd;

	if ((pid = fork()) == 0) {
		fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC,
		    0600);
		dup2(fd, 1);
		if (out == NULL)
			dup2(fd, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void
fsync_path(const char *p)
{
	int fd = open(p, O_RDONLY);

	if (fd != -1) {
		fsync(fd);
		close(fd);
	}
}

static void
bench_disk(void)
{
	char img[128], mnt[128], src[256], dst[320], err[512], *buf;
	char *mkfs[] = { "mkfs.xfs", "-q", "-f", "-m", "reflink=1", img, NULL };
	char *mnt_argv[] = { "mount", "-o", "loop", img, mnt, NULL };
	double clone[ITER], copy[2], ours[2], t;
	size_t i, j;
	int fd;

	snprintf(img, sizeof(img), "%s/xfs.img", tmp);
	snprintf(mnt, sizeof(mnt), "%s/xfs", tmp);
	fd = open(img, O_CREAT | O_WRONLY, 0600);
	if (fd == -1 || ftruncate(fd, 4LL << 30) == -1)
		fatal("%s", img);
	close(fd);
	mkdir(mnt, 0755);
	if (run(mkfs, NULL) != 0 || run(mnt_argv, NULL) != 0)
		fatalx("cannot make the XFS volume");
	snprintf(src, sizeof(src), "%s/image.raw", mnt);
	/* Real data: a sparse image would flatter the plain copy. */
	buf = malloc(1 << 20);
	fd = open(src, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	for (i = 0; i < 1024; i++) {
		for (j = 0; j < (1 << 20); j += 8)
			*(uint64_t *)(buf + j) = (i << 20 | j) *
			    0x9e3779b97f4a7c15ULL;
		if (write(fd, buf, 1 << 20) != 1 << 20)
			fatal("write %s", src);
	}
	fsync(fd);
	close(fd);
	free(buf);
	for (i = 0; i < ITER; i++) {
		snprintf(dst, sizeof(dst), "%s/clone-%zu.raw", mnt, i);
		t = now_ms();
		if (disk_clone(src, dst, 0, 0, err, sizeof(err)) == -1)
			fatalx("%s", err);
		clone[i] = now_ms() - t;
	}
	for (i = 0; i < 2; i++) {
		char *cp[] = { "cp", "--reflink=never", src, dst, NULL };

		snprintf(dst, sizeof(dst), "%s/cp-%zu.raw", mnt, i);
		t = now_ms();
		run(cp, NULL);
		fsync_path(dst);	/* the clone is durable too */
		copy[i] = now_ms() - t;
		unlink(dst);
		snprintf(dst, sizeof(dst), "%s/copy-%zu.raw", mnt, i);
		t = now_ms();
		if (disk_copy(src, dst, 0, 0, err, sizeof(err)) == -1)
			fatalx("%s", err);
		ours[i] = now_ms() - t;
		unlink(dst);
	}
	printf("disk, 1 GiB image on loop-mounted XFS (page-cached source):\n");
	printf("  %-44s %9.1f ms (median of %d)\n", "reflink clone "
	    "(disk_clone, FICLONE + fsync)", median(clone, ITER), ITER);
	printf("  %-44s %9.1f ms (median of 2)\n", "cp --reflink=never + fsync",
	    median(copy, 2));
	printf("  %-44s %9.1f ms (median of 2)\n", "plain copy (disk_copy)",
	    median(ours, 2));
	printf("BENCH\treflink clone of a 1 GiB disk\t%.1f\tms\t"
	    "cp --reflink=never + fsync\t%.1f\n", median(clone, ITER),
	    median(copy, 2));
	umount2(mnt, MNT_DETACH);
	unlink(img);
}

struct res {
	int	done, ok, exited;
	char	err[512];
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
	r->ok = ok && strcmp(status, "running") == 0;
}

static void
exited_cb(struct vmm *v, int st, void *arg)
{
	((struct res *)arg)->exited = 1;
}

static void
wait_for(struct event_base *base, const int *flag)
{
	while (!*flag)
		event_base_loop(base, EVLOOP_ONCE);
}

static void
settle(struct event_base *base, int ms)
{
	struct timeval tv = { 0, ms * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* The monitor: vmproxy's QEMU side, in process. */
static struct vmm_monitor bmon;
static struct vpq *arg_vpq;

static void
bmon_event(enum vmq_event ev, void *arg)
{
	if (bmon.owner != NULL && bmon.event != NULL)
		bmon.event(bmon.owner, ev);
}

static void
bmon_lost(const char *why, void *arg)
{
	if (bmon.owner != NULL && bmon.lost != NULL)
		bmon.lost(bmon.owner, why);
}

static const struct vpq_cbs bmon_cbs = { bmon_event, bmon_lost };

static int
bmon_call(struct vmm_monitor *mon, enum vmq_op op, int fd, int timeout_ms,
    vmm_mon_cb cb, void *arg)
{
	return vpq_call(arg_vpq, op, fd, timeout_ms, cb, arg);
}

static void
bench_qemu(const char *bare)
{
	struct event_base *base;
	struct worker_pool *wp;
	struct qemu_conf qc = { .binary = QEMU, .accel = QEMU_ACCEL_TCG };
	struct vmm_cbs cbs = { exited_cb, NULL };
	struct qemu_backend *be;
	struct cg_limits lim = { (GUEST_MIB + 256ULL) << 20, 0, 0, 128 };
	struct cg_host cg;
	struct vm_spec s = { 0 };
	struct qemu_argv a;
	struct vmm *v;
	struct res r, ex, st;
	struct stat sb;
	double hib[ITER], res[ITER], t;
	char rundir[128], ckpt[128], cfg[128], out[128], err[512];
	char qmp[160];
	json_object *o, *arr, *x;
	FILE *f;
	size_t i;
	char *py[] = { "python3", (char *)bare, cfg, NULL };

	if (cg_detect(&cg, "mcpvm-bench", err, sizeof(err)) == -1 ||
	    cg_create(&cg, SLOT, &lim, err, sizeof(err)) == -1)
		fatalx("%s", err);
	/* QEMU starts through the spawner, as in vmmd, before any thread:
	 * the VM uid is uid_base + SLOT. */
	spawn_start(&(struct spawn_conf){
		.qemu = QEMU,
		.uid_base = 3990000 - SLOT,
		.nslots = SLOT + 1,
		.cg = &cg,
	});
	base = event_base_new();
	wp = worker_pool_new(base, 2);
	if ((be = qemu_backend_new(base, wp, &qc, err, sizeof(err))) == NULL)
		fatalx("%s", err);
	snprintf(rundir, sizeof(rundir), "%s/run", tmp);
	snprintf(ckpt, sizeof(ckpt), "%s/ckpt", tmp);
	mkdir(rundir, 0700);
	chown(rundir, 3990000, 3990000);
	s.slot = SLOT;
	s.uid = s.gid = 3990000;
	s.vcpus = 1;
	s.memory_mib = GUEST_MIB;
	s.rundir = rundir;
	s.tap_fd = -1;
	s.console_fd = -1;
	s.log_fd = -1;
	s.cg = &cg;
	snprintf(qmp, sizeof(qmp), "%s/%s", rundir, VMM_QMP_SOCK);
	if ((arg_vpq = vpq_new(base, qmp, NULL, &bmon_cbs, NULL)) == NULL)
		fatalx("vpq_new");
	bmon.call = bmon_call;
	s.mon = &bmon;
	for (i = 0; i < ITER; i++) {
		memset(&r, 0, sizeof(r));
		memset(&ex, 0, sizeof(ex));
		if (qemu_backend_ops.start(be, &s, &cbs, &ex, done_cb, &r,
		    &v) == -1)
			fatal("start");
		wait_for(base, &r.done);
		if (!r.ok)
			fatalx("start: %s", r.err);
		settle(base, 200);
		memset(&r, 0, sizeof(r));
		t = now_ms();
		vmm_snapshot(v, ckpt, done_cb, &r);
		wait_for(base, &r.done);
		hib[i] = now_ms() - t;
		if (!r.ok)
			fatalx("snapshot: %s", r.err);
		wait_for(base, &ex.exited);
		vmm_free(v);
		memset(&r, 0, sizeof(r));
		memset(&ex, 0, sizeof(ex));
		memset(&st, 0, sizeof(st));
		t = now_ms();
		qemu_backend_ops.restore(be, &s, ckpt, &cbs, &ex, done_cb, &r,
		    &v);
		wait_for(base, &r.done);
		if (!r.ok)
			fatalx("restore: %s", r.err);
		vmm_status(v, status_cb, &st);
		wait_for(base, &st.done);
		res[i] = now_ms() - t;
		if (!st.ok)
			fatalx("restored VM is not running");
		vmm_kill(v);
		wait_for(base, &ex.exited);
		vmm_free(v);
	}
	vpq_free(arg_vpq);
	stat(ckpt, &sb);

	/* Bare QEMU: same argv, run as root, no cgroup, no uid change. */
	if (qemu_build_argv(&qc, &s, 0, 0, &a) == -1)
		fatalx("argv");
	o = json_object_new_object();
	arr = json_object_new_array();
	for (i = 0; i < a.n; i++)
		json_object_array_add(arr, json_object_new_string(a.v[i]));
	json_object_object_add(o, "argv", arr);
	json_object_object_add(o, "rundir", json_object_new_string(rundir));
	json_object_object_add(o, "ckpt", json_object_new_string(ckpt));
	json_object_object_add(o, "iterations", json_object_new_int(ITER));
	snprintf(cfg, sizeof(cfg), "%s/bare.json", tmp);
	snprintf(out, sizeof(out), "%s/bare.out", tmp);
	f = fopen(cfg, "w");
	fputs(json_object_to_json_string(o), f);
	fclose(f);
	json_object_put(o);
	qemu_argv_free(&a);
	if (run(py, out) != 0)
		fatalx("bare_qmp.py failed");
	o = json_object_from_file(out);
	if (o == NULL)
		fatalx("bare_qmp.py: no result");
	printf("QEMU %s TCG, %d MiB firmware-only guest, checkpoint %lld KiB "
	    "(median of %d):\n", "7.2", GUEST_MIB, (long long)sb.st_size >> 10,
	    ITER);
	printf("  %-28s %12s %12s\n", "", "vmmd backend", "bare QEMU");
	json_object_object_get_ex(o, "hibernate_ms", &x);
	{
		double b[ITER];

		for (i = 0; i < ITER; i++)
			b[i] = json_object_get_double(
			    json_object_array_get_idx(x, i));
		printf("  %-28s %9.1f ms %9.1f ms\n", "hibernate (stop..exited)",
		    median(hib, ITER), median(b, ITER));
		printf("BENCH\tbackend hibernate, idle firmware guest\t%.1f\t"
		    "ms\tbare QEMU stop+migrate+quit\t%.1f\n",
		    median(hib, ITER), median(b, ITER));
		json_object_object_get_ex(o, "restore_ms", &x);
		for (i = 0; i < ITER; i++)
			b[i] = json_object_get_double(
			    json_object_array_get_idx(x, i));
		printf("  %-28s %9.1f ms %9.1f ms\n", "restore (spawn..running)",
		    median(res, ITER), median(b, ITER));
		printf("BENCH\tbackend restore, idle firmware guest\t%.1f\t"
		    "ms\tbare QEMU -incoming + cont\t%.1f\n",
		    median(res, ITER), median(b, ITER));
	}
	json_object_put(o);
	cg_kill(&cg, SLOT, NULL, 0);
	cg_remove(&cg, SLOT, NULL, 0);
	cg_remove_parent(&cg);
	qemu_backend_free(be);
	worker_pool_free(wp);
	event_base_free(base);
	spawn_stop();
}

int
main(int argc, char *argv[])
{
	const char *bare = getenv("BARE_QMP");
	char *rm[] = { "rm", "-rf", tmp, NULL };

	if (geteuid() != 0) {
		fprintf(stderr, "bench_vmmd: needs root\n");
		return 77;
	}
	if (bare == NULL)
		bare = "tests/bench/bare_qmp.py";
	log_init("bench_vmmd", 1, 0);
	if (unshare(CLONE_NEWNS) == -1 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1)
		fatal("mount namespace");
	if (mkdtemp(tmp) == NULL)
		fatal("mkdtemp");
	chmod(tmp, 0711);
	if (argc < 2 || strcmp(argv[1], "qemu") != 0)
		bench_disk();
	if (argc < 2 || strcmp(argv[1], "disk") != 0)
		bench_qemu(bare);
	run(rm, NULL);
	return 0;
}
