/*
 * Integration tests of vmmd's per-VM cgroups on this real host (root):
 * limits land in the controller files, a process tree including a setsid
 * double-fork is killed as a whole, the pids limit stops a fork bomb,
 * leftovers are found for crash recovery, a root without
 * CAP_DAC_OVERRIDE (vmmd under its unit) works once `vmmd -P` made the
 * parent, and a delegated v2 cgroup (vmmd -D) holds all of it: vmmd's
 * own, or the holder unit's, where VMs outlive the death of vmmd's unit.
 */
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
	snprintf(h.v2_base, sizeof(h.v2_base), "%s", cg.v2);
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

/* Drops CAP_DAC_OVERRIDE (and _READ_SEARCH) as vmmd's unit does. */
static void
drop_dac_override(void)
{
	cap_value_t v[2] = { CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH };
	cap_t c = cap_get_proc();

	if (c == NULL ||
	    cap_set_flag(c, CAP_EFFECTIVE, 2, v, CAP_CLEAR) == -1 ||
	    cap_set_flag(c, CAP_PERMITTED, 2, v, CAP_CLEAR) == -1 ||
	    cap_set_proc(c) == -1)
		_exit(90);
	cap_free(c);
}

/*
 * What failed on a fresh host (issue 24): vmmd, root without
 * CAP_DAC_OVERRIDE as its unit starts it, cannot make its parent under a
 * v1 root of mode 0555, and says that `vmmd -P` is the way.  Once
 * cg_prepare ran with full privileges (vmmd -P), the same restricted
 * process finds the parent and makes, joins and removes a VM's cgroup.
 */
START_TEST(restricted_root_needs_the_parent_prepared)
{
	struct cg_limits l = { 64 << 20, 0, 0, 16 };
	struct stat st;
	char err[512], path[4200];
	int p[2], c, ro = 0, status;
	pid_t child;

	if (cg.layout != CG_LAYOUT_V1) {
		fprintf(stderr, "cgroups are v2 here: the v1 roots' mode "
		    "does not apply\n");
		return;
	}
	for (c = 0; c < CG_NCTRL; c++) {
		ck_assert_int_eq(stat(cg.v1[c], &st), 0);
		ro |= !(st.st_mode & S_IWUSR);
		fprintf(stderr, "%s: mode %o\n", cg.v1[c],
		    (unsigned)(st.st_mode & 07777));
	}
	cg_remove_parent(&cg);
	ck_assert_int_eq(pipe(p), 0);
	if ((child = fork()) == 0) {
		close(p[0]);
		drop_dac_override();
		c = cg_prepare(&cg, err, sizeof(err));
		(void)!write(p[1], err, c == -1 ? strlen(err) + 1 : 1);
		_exit(c == -1 ? 1 : 0);
	}
	close(p[1]);
	memset(err, 0, sizeof(err));
	(void)!read(p[0], err, sizeof(err) - 1);
	close(p[0]);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	if (ro) {
		/* The fresh host's case: refused, naming the fix. */
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
		    "status %d", status);
		ck_assert_msg(strstr(err, "vmmd -P") != NULL &&
		    strstr(err, "Permission denied") != NULL, "%s", err);
	} else
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "the v1 roots are writable here, yet: %s", err);

	/* vmmd -P, with full privileges. */
	ck_assert_msg(cg_prepare(&cg, err, sizeof(err)) == 0, "%s", err);
	for (c = 0; c < CG_NCTRL; c++) {
		snprintf(path, sizeof(path), "%s/%s", cg.v1[c], cg.parent);
		ck_assert_msg(stat(path, &st) == 0 && S_ISDIR(st.st_mode),
		    "%s", path);
	}
	if ((child = fork()) == 0) {
		drop_dac_override();
		if (cg_prepare(&cg, err, sizeof(err)) == -1)
			_exit(2);
		if (cg_create(&cg, SLOT, &l, err, sizeof(err)) == -1)
			_exit(3);
		if (cg_attach_pid(&cg, SLOT, getpid(), err, sizeof(err)) == -1)
			_exit(4);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "restricted vmmd after -P: status %d", status);
	ck_assert_msg(cg_remove(&cg, SLOT, err, sizeof(err)) == 0, "%s", err);
}
END_TEST

/*
 * A unit with Delegate=yes on a cgroup v2 host (vmmd -D).  This machine's
 * cgroup2 has no controllers (memory, cpu and pids are bound to its v1
 * hierarchies), so on a cgroup2 mount of the test's own it checks what
 * delegation changes: where things go, and that nothing is written
 * outside the delegated cgroup; the limits are checked on v1 above and
 * cg_delegate's refusals (no controllers, the root cgroup) in
 * tests/unit/test_cgroup.c.  The delegated cgroup is made here as systemd
 * makes a unit's.
 */
/* Has the file this line (a /proc/PID/cgroup's v2 line, say)? */
static int
has_line(const char *path, const char *want)
{
	char line[4300];
	int found = 0;
	FILE *f;

	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strcmp(line, want) == 0;
	fclose(f);
	return found;
}

/* rmdir of a cgroup tree, deepest first; EBUSY while tasks leave. */
static void
rmdir_tree(const char *dir)
{
	char sub[4300];
	struct dirent *de;
	DIR *d;
	int i;

	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (de->d_type == DT_DIR && de->d_name[0] != '.') {
				snprintf(sub, sizeof(sub), "%s/%s", dir,
				    de->d_name);
				rmdir_tree(sub);
			}
		closedir(d);
	}
	for (i = 0; rmdir(dir) == -1 && errno == EBUSY && i < 200; i++)
		usleep(5000);
}

START_TEST(v2_delegated_cgroup_holds_everything)
{
	char mnt[] = "/tmp/cg2.XXXXXX", unit[1024], path[4300], err[512];
	char self[256], line[4300];
	struct cg_host h;
	struct cg_limits l = { 0, 0, 0, 0 };
	pid_t child, vm, pids[4];
	int status, found;
	FILE *f;
	DIR *d;
	struct dirent *de;
	unsigned before = 0, after = 0;

	ck_assert_ptr_nonnull(mkdtemp(mnt));
	if (mount("none", mnt, "cgroup2", 0, NULL) == -1) {
		rmdir(mnt);
		ck_abort_msg("mount cgroup2 on %s: %s", mnt, strerror(errno));
	}
	snprintf(unit, sizeof(unit), "%s/mcpvm-test-unit-%d.service", mnt,
	    (int)getpid());
	ck_assert_int_eq(mkdir(unit, 0755), 0);
	ck_assert_ptr_nonnull(d = opendir(mnt));
	while ((de = readdir(d)) != NULL)
		before++;
	closedir(d);

	/* vmmd, started in its unit's cgroup. */
	if ((child = fork()) == 0) {
		snprintf(path, sizeof(path), "%s/cgroup.procs", unit);
		if (write_file_str(path, "0") == -1)
			_exit(10);
		memset(&h, 0, sizeof(h));
		h.layout = CG_LAYOUT_V2;
		snprintf(h.v2, sizeof(h.v2), "%s", mnt);
		snprintf(h.parent, sizeof(h.parent), "mcpvm");
		/* Its own cgroup as /proc/self/cgroup names it. */
		snprintf(self, sizeof(self), "0::/%s\n", unit + strlen(mnt) + 1);
		f = fmemopen(self, strlen(self), "r");
		/* Refused as a real host would refuse it: no controllers. */
		if (cg_delegate_from(&h, f, "self", err, sizeof(err)) != -1 ||
		    strstr(err, "lacks memory cpu pids") == NULL)
			_exit(11);
		fclose(f);
		/* So the fields cg_delegate sets, by hand (no controllers). */
		snprintf(h.v2_base, sizeof(h.v2_base), "%s", unit);
		h.delegated = 1;
		h.daemon_inside = 1;
		if (cg_prepare(&h, err, sizeof(err)) == -1)
			_exit(12);
		if (cg_create(&h, SLOT, &l, err, sizeof(err)) == -1)
			_exit(13);
		if ((vm = fork()) == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (;;)
				pause();
		}
		if (cg_attach_pid(&h, SLOT, vm, err, sizeof(err)) == -1)
			_exit(14);
		/* vmmd sits in its leaf, the VM in parent/vm-N, both inside. */
		snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)vm);
		snprintf(line, sizeof(line), "0::/%s/mcpvm/vm-%d\n",
		    unit + strlen(mnt) + 1, SLOT);
		if (!has_line(path, line))
			_exit(16);
		snprintf(line, sizeof(line), "0::/%s/" CG_DAEMON_LEAF "\n",
		    unit + strlen(mnt) + 1);
		if (!has_line("/proc/self/cgroup", line))
			_exit(17);
		if (cg_procs(&h, SLOT, pids, 4) != 1 || pids[0] != vm)
			_exit(18);
		if (cg_kill(&h, SLOT, err, sizeof(err)) == -1)
			_exit(19);
		waitpid(vm, NULL, 0);
		if (cg_remove(&h, SLOT, err, sizeof(err)) == -1)
			_exit(20);
		cg_remove_parent(&h);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_ptr_nonnull(d = opendir(mnt));
	while ((de = readdir(d)) != NULL)
		after++;
	closedir(d);
	/* What the unit's cgroup still holds; then it goes, as systemd
	 * removes it when the unit stops. */
	snprintf(path, sizeof(path), "%s/mcpvm", unit);
	found = access(path, F_OK) == 0;
	rmdir_tree(unit);
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the delegated vmmd failed at step %d", WEXITSTATUS(status));
	ck_assert_msg(!found, "the VMs' parent was left behind");
	ck_assert_msg(before == after, "%u entries at the cgroup2 root "
	    "before, %u after: something was made outside the unit's cgroup",
	    before, after);
}
END_TEST

/*
 * The packaged units: vmhold (mcpvm-vms.service) holds the VMs' cgroups
 * and vmmd runs in a unit of its own.  When vmmd's main process dies,
 * systemd kills what is left in vmmd's unit cgroup (KillMode=mixed), in
 * the unified hierarchy: here that kill is cgroup.kill on the unit's
 * cgroup.  The VM must live through it, the unit's cgroup must take a new
 * vmmd, and that vmmd must find the VM where it left it.  vmmd's stand-in
 * runs in its unit's cgroup and starts the VM there, which joins its
 * cgroups as the spawner's child does (cg_attach_apply).  The real vmhold
 * binary is started as systemd starts it: in its unit's cgroup, with
 * $NOTIFY_SOCKET, ready only once in its leaf.
 */
struct units {
	char	 mnt[64];		/* the unified hierarchy */
	char	 vms[1024];		/* mcpvm-vms.service's cgroup */
	char	 vmmd[1024];		/* mcpvm-vmmd.service's cgroup */
	char	 notify[100];
	int	 nfd;
	pid_t	 hold;
};

static void
make_unit(const char *mnt, const char *name, char *path, size_t len)
{
	snprintf(path, len, "%s/mcpvm-test-%s-%d.service", mnt, name,
	    (int)getpid());
	ck_assert_msg(mkdir(path, 0755) == 0, "mkdir %s: %s", path,
	    strerror(errno));
}

/* Waits (at most 10 s) for a datagram with want in it. */
static int
notified(int fd, const char *want)
{
	struct pollfd p = { fd, POLLIN, 0 };
	char msg[512];
	ssize_t n;

	while (poll(&p, 1, 10000) == 1) {
		if ((n = recv(fd, msg, sizeof(msg) - 1, 0)) <= 0)
			return 0;
		msg[n] = '\0';
		if (strstr(msg, want) != NULL)
			return 1;
	}
	return 0;
}

/* Both units' cgroups under mnt, and vmhold started in the holder's. */
static void
units_start(struct units *u, const char *mnt)
{
	const char *vmhold = getenv("VMHOLD");
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char path[4300], line[4300], procs[64];

	ck_assert_msg(vmhold != NULL, "VMHOLD (the vmhold binary) is unset");
	snprintf(u->mnt, sizeof(u->mnt), "%s", mnt);
	make_unit(mnt, "vms", u->vms, sizeof(u->vms));
	make_unit(mnt, "vmmd", u->vmmd, sizeof(u->vmmd));
	u->nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(u->nfd, 0);
	snprintf(u->notify, sizeof(u->notify), "/tmp/vmhold-%d.notify",
	    (int)getpid());
	unlink(u->notify);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", u->notify);
	ck_assert_int_eq(bind(u->nfd, (struct sockaddr *)&sun, sizeof(sun)),
	    0);
	snprintf(path, sizeof(path), "%s/cgroup.procs", u->vms);
	if ((u->hold = fork()) == 0) {
		if (write_file_str(path, "0") == -1)
			_exit(120);
		setenv("NOTIFY_SOCKET", u->notify, 1);
		execl(vmhold, vmhold, (char *)NULL);
		_exit(121);
	}
	ck_assert_int_gt(u->hold, 0);
	ck_assert_msg(notified(u->nfd, "READY=1"), "vmhold sent no READY=1");
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)u->hold);
	snprintf(line, sizeof(line), "0::/%s/" CG_HOLDER_LEAF "\n",
	    u->vms + strlen(mnt) + 1);
	ck_assert_msg(has_line(path, line), "vmhold is not in its leaf");
	snprintf(path, sizeof(path), "%s/cgroup.procs", u->vms);
	ck_assert_msg(read_file_str(path, procs, sizeof(procs)) == 0,
	    "a process is left in the holder's own cgroup: %s", procs);
}

static void
units_stop(struct units *u)
{
	int status;

	ck_assert_int_eq(kill(u->hold, SIGTERM), 0);
	ck_assert_int_eq(waitpid(u->hold, &status, 0), u->hold);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "vmhold ended with status %d", status);
	close(u->nfd);
	unlink(u->notify);
	rmdir_tree(u->vms);
	rmdir_tree(u->vmmd);
}

/*
 * vmmd's stand-in, in its unit's cgroup: starts a VM in slot's cgroups
 * and waits to be killed.  Returns its pid; *vm is the VM's, once the VM
 * is in.
 */
static pid_t
start_vmmd(const struct units *u, const struct cg_host *h, unsigned slot,
    pid_t *vm)
{
	struct cg_attach a;
	char path[4300];
	pid_t pid, v;
	int p[2];

	ck_assert_int_eq(cg_attach_prepare(h, slot, &a), 0);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	snprintf(path, sizeof(path), "%s/cgroup.procs", u->vmmd);
	if ((pid = fork()) == 0) {
		if (write_file_str(path, "0") == -1)
			_exit(120);
		if (fork() == 0) {
			if (cg_attach_apply(&a) == -1)
				_exit(122);
			v = getpid();
			if (write(p[1], &v, sizeof(v)) != sizeof(v))
				_exit(123);
			for (;;)
				pause();
		}
		for (;;)
			pause();
	}
	close(p[1]);
	ck_assert_msg(read(p[0], vm, sizeof(*vm)) == sizeof(*vm),
	    "the VM did not join its cgroups");
	close(p[0]);
	return pid;
}

/* systemd's kill of vmmd's unit after its main process died. */
static void
kill_unit(const struct units *u, pid_t daemon)
{
	char path[4300];
	int status;

	snprintf(path, sizeof(path), "%s/cgroup.kill", u->vmmd);
	ck_assert_msg(write_file_str(path, "1") == 0, "%s: %s", path,
	    strerror(errno));
	ck_assert_int_eq(waitpid(daemon, &status, 0), daemon);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* Reaps pid, a child of ours (we are subreaper), if it dies within 5 s. */
static int
reaped(pid_t pid)
{
	int i;

	for (i = 0; i < 1000; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return 1;
		usleep(5000);
	}
	return 0;
}

/* Is pid, a child of ours (we are subreaper), still running? */
static int
alive(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, WNOHANG) != 0)
		return 0;
	return kill(pid, 0) == 0;
}

START_TEST(v2_holder_unit_outlives_vmmd_unit)
{
	char mnt[] = "/tmp/cg2.XXXXXX", path[4300], line[4300], err[512];
	struct units u;
	struct cg_host h;
	struct cg_limits l = { 0, 0, 0, 0 };
	pid_t daemon, vm, again, pids[4];
	int status;

	ck_assert_ptr_nonnull(mkdtemp(mnt));
	if (mount("none", mnt, "cgroup2", 0, NULL) == -1) {
		rmdir(mnt);
		ck_abort_msg("mount cgroup2 on %s: %s", mnt, strerror(errno));
	}
	units_start(&u, mnt);
	/* What cg_delegate sets with cgroup_holder, by hand: this hierarchy
	 * has no controllers to check. */
	memset(&h, 0, sizeof(h));
	h.layout = CG_LAYOUT_V2;
	snprintf(h.v2, sizeof(h.v2), "%s", mnt);
	snprintf(h.parent, sizeof(h.parent), "mcpvm");
	snprintf(h.v2_base, sizeof(h.v2_base), "%s", u.vms);
	h.delegated = 1;
	h.daemon_inside = 0;
	ck_assert_msg(cg_prepare(&h, err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(cg_create(&h, SLOT, &l, err, sizeof(err)) == 0, "%s",
	    err);
	daemon = start_vmmd(&u, &h, SLOT, &vm);

	kill_unit(&u, daemon);
	ck_assert_msg(alive(vm), "the VM died with vmmd's unit");
	ck_assert_msg(alive(u.hold), "vmhold died with vmmd's unit");

	/* The unit's cgroup takes the next vmmd, which finds the VM. */
	snprintf(path, sizeof(path), "%s/cgroup.procs", u.vmmd);
	if ((again = fork()) == 0) {
		if (write_file_str(path, "0") == -1)
			_exit(120);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(again, &status, 0), again);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "vmmd's unit cgroup refused the next vmmd");
	ck_assert_int_eq(cg_procs(&h, SLOT, pids, 4), 1);
	ck_assert_int_eq(pids[0], vm);
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)vm);
	snprintf(line, sizeof(line), "0::/%s/mcpvm/vm-%d\n",
	    u.vms + strlen(mnt) + 1, SLOT);
	ck_assert_msg(has_line(path, line), "the VM left the holder's cgroup");

	ck_assert_msg(cg_kill(&h, SLOT, err, sizeof(err)) == 0, "%s", err);
	waitpid(vm, NULL, 0);
	ck_assert_msg(cg_remove(&h, SLOT, err, sizeof(err)) == 0, "%s", err);
	cg_remove_parent(&h);
	units_stop(&u);
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
}
END_TEST

/*
 * The same on this hybrid host's real hierarchies: the limits are on v1,
 * and a hybrid systemd tracks and kills units in the unified hierarchy,
 * so cg_delegate puts each VM also in the holder's cgroup there.  A VM
 * started without the holder (the control) dies with vmmd's unit.
 */
START_TEST(hybrid_holder_unit_outlives_vmmd_unit)
{
	char holder[1100], err[512], path[4300], line[4300];
	struct units u;
	struct cg_host h, bare;
	struct cg_limits l = { 0, 0, 0, 0 };
	pid_t daemon, vm, daemon2, vm2;
	FILE *f;

	if (cg.layout != CG_LAYOUT_V1 || cg.v2[0] == '\0') {
		fprintf(stderr, "# not a hybrid host (%s): the v2 case "
		    "covers it\n", cg_layout_name(cg.layout));
		return;
	}
	units_start(&u, cg.v2);
	h = cg;
	snprintf(holder, sizeof(holder), "%s", u.vms + strlen(cg.v2));
	ck_assert_ptr_nonnull(f = fmemopen((void *)"0::/\n", 5, "r"));
	ck_assert_msg(cg_delegate_from(&h, f, holder, err, sizeof(err)) == 0,
	    "%s", err);
	fclose(f);
	ck_assert_str_eq(h.v2_track, u.vms);
	ck_assert_msg(cg_create(&h, SLOT, &l, err, sizeof(err)) == 0, "%s",
	    err);
	bare = cg;
	ck_assert_msg(cg_create(&bare, SLOT + 1, &l, err, sizeof(err)) == 0,
	    "%s", err);
	daemon = start_vmmd(&u, &h, SLOT, &vm);
	daemon2 = start_vmmd(&u, &bare, SLOT + 1, &vm2);
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)vm);
	snprintf(line, sizeof(line), "0::%s/mcpvm-test-%d/vm-%d\n", holder,
	    (int)getpid(), SLOT);
	ck_assert_msg(has_line(path, line), "the VM is not in the holder's "
	    "unified cgroup");

	kill_unit(&u, daemon);
	waitpid(daemon2, NULL, 0);
	/* The kill signalled the whole unit at once: once the control VM
	 * is gone, a held VM that it reached would be gone too. */
	ck_assert_msg(reaped(vm2), "the control VM, not held, outlived "
	    "vmmd's unit: the kill reached nothing");
	ck_assert_msg(alive(vm), "the held VM died with vmmd's unit");
	ck_assert_msg(alive(u.hold), "vmhold died with vmmd's unit");

	ck_assert_msg(cg_kill(&h, SLOT, err, sizeof(err)) == 0, "%s", err);
	waitpid(vm, NULL, 0);
	ck_assert_msg(cg_remove(&h, SLOT, err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(cg_remove(&bare, SLOT + 1, err, sizeof(err)) == 0, "%s",
	    err);
	cg_remove_parent(&h);
	snprintf(path, sizeof(path), "%s/mcpvm-test-%d", u.vms, (int)getpid());
	ck_assert_msg(access(path, F_OK) == -1, "%s was left behind", path);
	units_stop(&u);
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
	tcase_add_test(tc, restricted_root_needs_the_parent_prepared);
	tcase_add_test(tc, v2_delegated_cgroup_holds_everything);
	tcase_add_test(tc, v2_holder_unit_outlives_vmmd_unit);
	tcase_add_test(tc, hybrid_holder_unit_outlives_vmmd_unit);
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
