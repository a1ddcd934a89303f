/*
 * Unit tests for vmmd's spawner (vmmd/spawn.c), with a real spawner
 * process and real children (spawn_probe): a child runs as its slot's uid
 * with exactly the descriptors it was given, in its own session, with
 * NoNewPrivs and no capability, and is the caller's child; the spawner
 * keeps only CAP_SETUID and CAP_SETGID; a jailed child sees its own /tmp,
 * /dev/shm and VM directories alone; and every request outside what it
 * was configured with is refused before anything starts.  Needs root.
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "spawn.h"
#include "../check_run.h"

#define NSLOTS	4

static char probe[4096];
static uid_t base;

/* A uid range of NSLOTS that no account uses. */
static uid_t
free_base(void)
{
	for (uid_t b = 3950000; b < 4000000; b += 100) {
		int used = 0;

		for (uid_t u = b; u < b + NSLOTS; u++)
			if (getpwuid(u) != NULL)
				used = 1;
		if (!used)
			return b;
	}
	return 0;
}

static void
setup(void)
{
	const char *p = getenv("SPAWN_PROBE");

	if (geteuid() != 0) {
		fprintf(stderr, "needs root (the spawner switches uids)\n");
		exit(77);
	}
	log_init("test_spawn", 1, 0);
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(realpath(p, probe));
	ck_assert_uint_ne(base = free_base(), 0);
	spawn_start(&(struct spawn_conf){
		.qemu = probe,
		.vmproxy = probe,
		.uid_base = base,
		.nslots = NSLOTS,
		.cg = NULL,
	});
}

static void
teardown(void)
{
	spawn_stop();
}

/* Runs r with a pipe at pipe_at; returns the child's report. */
static pid_t
run(struct spawn_req *r, int pipe_at, char *out, size_t outlen, char *err,
    size_t errlen)
{
	struct spawn_fd fds[SPAWN_MAX_FDS];
	int p[2], st;
	size_t n = 0, k;
	ssize_t got;
	pid_t pid;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	fds[n++] = (struct spawn_fd){ p[1], pipe_at };
	for (k = 0; k < r->nfds; k++)
		fds[n++] = r->fds[k];
	r->fds = fds;
	r->nfds = n;
	pid = spawn_run(r, err, errlen);
	close(p[1]);
	out[0] = '\0';
	if (pid != -1) {
		got = read(p[0], out, outlen - 1);
		out[got > 0 ? got : 0] = '\0';
		/* CLONE_PARENT: the child is ours to reap. */
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	close(p[0]);
	return pid;
}

START_TEST(child_is_jailed_with_exactly_its_descriptors)
{
	char *argv[] = { "vmproxy", "--probe", NULL };
	char out[1024], err[256], want[256];
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	int leak = open("/dev/null", O_RDONLY);	/* not CLOEXEC: must not leak */
	struct spawn_fd extra = { zero, 7 };
	struct spawn_req r = { .kind = SPAWN_VMPROXY, .slot = 2,
	    .kvm_gid = (gid_t)-1, .argv = argv, .fds = &extra, .nfds = 1 };

	ck_assert_int_ge(zero, 0);
	ck_assert_int_ge(leak, 0);
	ck_assert_msg(run(&r, 3, out, sizeof(out), err, sizeof(err)) > 0,
	    "%s", err);
	snprintf(want, sizeof(want), "uid=%u gid=%u euid=%u ppid=%d "
	    "sid_is_pid=1 nnp=1 capeff=0000000000000000 "
	    "capprm=0000000000000000 groups=[] fds=0,1,2,3,7 argc=2\n",
	    (unsigned)(base + 2), (unsigned)(base + 2), (unsigned)(base + 2),
	    (int)getpid());
	ck_assert_str_eq(out, want);
	close(zero);
	close(leak);
}
END_TEST

START_TEST(version_runs_as_nobody)
{
	char *argv[] = { probe, "--version", NULL };
	char out[1024], err[256], want[64];
	struct spawn_req r = { .kind = SPAWN_VERSION, .kvm_gid = (gid_t)-1,
	    .argv = argv };
	struct passwd *pw = getpwnam("nobody");

	ck_assert_msg(run(&r, 1, out, sizeof(out), err, sizeof(err)) > 0,
	    "%s", err);
	snprintf(want, sizeof(want), "uid=%u ",
	    pw != NULL ? (unsigned)pw->pw_uid : 65534u);
	ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
	ck_assert_ptr_nonnull(strstr(out, " fds=0,1,2 "));
}
END_TEST

/* Expects r to be refused without starting anything. */
static void
refused(struct spawn_req *r, const char *why)
{
	char out[1024], err[256];

	ck_assert_msg(run(r, 3, out, sizeof(out), err, sizeof(err)) == -1,
	    "%s: started: %s", why, out);
	ck_assert_msg(strstr(err, "refused") != NULL, "%s: %s", why, err);
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), 0);	/* nothing ran */
}

START_TEST(requests_outside_the_configuration_are_refused)
{
	char *vm[] = { "vmproxy", NULL };
	char *qemu_other[] = { "/bin/sh", "-c", "id", NULL };
	char *qemu[] = { probe, NULL };
	char *version_more[] = { probe, "--version", "--help", NULL };
	char *version_other[] = { "/bin/sh", "--version", NULL };
	struct spawn_fd high = { 0, SPAWN_FD_LIMIT };
	struct spawn_req r;

	r = (struct spawn_req){ .kind = SPAWN_VMPROXY, .slot = NSLOTS,
	    .kvm_gid = (gid_t)-1, .argv = vm };
	refused(&r, "a slot past the last");
	r = (struct spawn_req){ .kind = SPAWN_QEMU, .kvm_gid = (gid_t)-1,
	    .argv = qemu_other };
	refused(&r, "a binary that is not the configured QEMU");
	r = (struct spawn_req){ .kind = SPAWN_QEMU, .kvm_gid = 0,
	    .argv = qemu };
	refused(&r, "group 0 as /dev/kvm's");
	r = (struct spawn_req){ .kind = SPAWN_VMPROXY, .kvm_gid = 0,
	    .argv = vm };
	refused(&r, "an extra group for vmproxy");
	r = (struct spawn_req){ .kind = SPAWN_VMPROXY, .kvm_gid = (gid_t)-1,
	    .cgroup = 1, .argv = vm };
	refused(&r, "a cgroup the spawner has none of");
	r = (struct spawn_req){ .kind = SPAWN_VERSION, .kvm_gid = (gid_t)-1,
	    .argv = version_more };
	refused(&r, "--version with more arguments");
	r = (struct spawn_req){ .kind = SPAWN_VERSION, .kvm_gid = (gid_t)-1,
	    .argv = version_other };
	refused(&r, "--version of another binary");
	r = (struct spawn_req){ .kind = 99, .kvm_gid = (gid_t)-1, .argv = vm };
	refused(&r, "an unknown kind");
	r = (struct spawn_req){ .kind = SPAWN_VMPROXY, .kvm_gid = (gid_t)-1,
	    .argv = vm, .fds = &high, .nfds = 1 };
	refused(&r, "a descriptor placed past the limit");
	r = (struct spawn_req){ .kind = SPAWN_VMPROXY, .kvm_gid = (gid_t)-1,
	    .vm = "vm-a", .argv = vm };
	refused(&r, "a VM's jail from a spawner that has none");
}
END_TEST

/* The spawner's CapEff, CapPrm and CapBnd are want, each. */
static void
spawner_caps_are(unsigned long long want)
{
	char path[64], line[256];
	int seen = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)spawn_pid());
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long long v;

		if (sscanf(line, "CapEff: %llx", &v) == 1 ||
		    sscanf(line, "CapPrm: %llx", &v) == 1 ||
		    sscanf(line, "CapBnd: %llx", &v) == 1) {
			ck_assert_msg(v == want, "%s", line);
			seen++;
		}
	}
	fclose(f);
	ck_assert_int_eq(seen, 3);
}

/*
 * With a jail, the child has a mount namespace of its own: a /tmp and a
 * /dev/shm of its own (the host's file is not there, its files are not in
 * the host's), and of the VMs' directories only its own two, with what
 * they hold.  The directories lie below /tmp here, so the jail also
 * makes their path in its own /tmp.
 */
START_TEST(jailed_child_sees_its_own_directories_alone)
{
	char dir[] = "/tmp/spawn-jail.XXXXXX";
	char vms[PATH_MAX], runs[PATH_MAX], d[4][PATH_MAX + 8];
	char mark[PATH_MAX + 16], host[64], ns[64], want[PATH_MAX];
	char out[2048], err[256], *line;
	char *argv[] = { "vmproxy", "--paths", mark, d[1], d[2], d[3], host,
	    NULL };
	char *vm[] = { "vmproxy", NULL };
	char *version[] = { probe, "--version", NULL };
	struct spawn_req r = { .kind = SPAWN_VMPROXY, .slot = 1,
	    .kvm_gid = (gid_t)-1, .vm = "vm-a", .argv = argv };
	ssize_t n;
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	snprintf(vms, sizeof(vms), "%s/vms", dir);
	snprintf(runs, sizeof(runs), "%s/run", dir);
	ck_assert_int_eq(mkdir(vms, 0711), 0);
	ck_assert_int_eq(mkdir(runs, 0755), 0);
	snprintf(runs, sizeof(runs), "%s/run/vms", dir);
	ck_assert_int_eq(mkdir(runs, 0711), 0);
	/* vm-a's two, then vm-b's two. */
	for (int i = 0; i < 4; i++) {
		snprintf(d[i], sizeof(d[i]), "%s/vm-%c", i % 2 ? runs : vms,
		    i < 2 ? 'a' : 'b');
		ck_assert_int_eq(mkdir(d[i], 0755), 0);
	}
	snprintf(mark, sizeof(mark), "%s/mark", d[0]);
	ck_assert_int_ge(fd = open(mark, O_WRONLY | O_CREAT, 0644), 0);
	close(fd);
	snprintf(host, sizeof(host), "/tmp/spawn-jail-host.%d", (int)getpid());
	ck_assert_int_ge(fd = open(host, O_WRONLY | O_CREAT, 0644), 0);
	close(fd);
	unlink("/tmp/probe-made");
	unlink("/dev/shm/probe-made");
	n = readlink("/proc/self/ns/mnt", ns, sizeof(ns) - 1);
	ck_assert_int_gt(n, 0);
	ns[n] = '\0';

	spawn_stop();
	spawn_start(&(struct spawn_conf){
		.qemu = probe,
		.vmproxy = probe,
		.uid_base = base,
		.nslots = NSLOTS,
		.vm_dir = vms,
		.run_dir = runs,
	});
	/* CAP_SYS_ADMIN too, for the mount namespace. */
	spawner_caps_are((1ULL << 6) | (1ULL << 7) | (1ULL << 21));
	ck_assert_msg(run(&r, 3, out, sizeof(out), err, sizeof(err)) > 0,
	    "%s", err);
	/* Still no capability, after all that. */
	ck_assert_msg(strstr(out, " capeff=0000000000000000 capprm="
	    "0000000000000000 ") != NULL, "%s", out);
	ck_assert_ptr_nonnull(line = strchr(out, '\n'));
	line++;
	ck_assert_msg(strncmp(line, "mnt:[", 5) == 0 &&
	    strncmp(line, ns, strlen(ns)) != 0, "the same mount namespace as "
	    "the caller's: %s", line);
	/* Its files in its /tmp and /dev/shm; its own VM's file; neither
	 * vm-b's directories nor the host's /tmp file. */
	snprintf(want, sizeof(want), " made=1 1 1 0 0 0\n");
	ck_assert_msg(strstr(line, want) != NULL, "%s", line);
	ck_assert_int_eq(access("/tmp/probe-made", F_OK), -1);
	ck_assert_int_eq(access("/dev/shm/probe-made", F_OK), -1);

	r = (struct spawn_req){ .kind = SPAWN_VMPROXY, .kvm_gid = (gid_t)-1,
	    .argv = vm };
	refused(&r, "no VM for a spawner with a jail");
	r.vm = "../vm-a";
	refused(&r, "a VM's name that leaves its parent");
	r.vm = "";
	refused(&r, "an empty VM's name");
	r = (struct spawn_req){ .kind = SPAWN_VERSION, .kvm_gid = (gid_t)-1,
	    .vm = "vm-a", .argv = version };
	refused(&r, "a jail for QEMU's --version");

	unlink(host);
	unlink(mark);
	for (int i = 3; i >= 0; i--)
		rmdir(d[i]);
	rmdir(runs);
	snprintf(runs, sizeof(runs), "%s/run", dir);
	rmdir(runs);
	rmdir(vms);
	rmdir(dir);
}
END_TEST

START_TEST(spawner_keeps_only_setuid_and_setgid)
{
	char path[64], line[256];
	int seen = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)spawn_pid());
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long long v;

		if (sscanf(line, "CapEff: %llx", &v) == 1 ||
		    sscanf(line, "CapPrm: %llx", &v) == 1 ||
		    sscanf(line, "CapBnd: %llx", &v) == 1) {
			ck_assert_msg(v == ((1ULL << 6) | (1ULL << 7)), "%s",
			    line);
			seen++;
		}
		if (strncmp(line, "NoNewPrivs:", 11) == 0) {
			ck_assert_str_eq(line, "NoNewPrivs:\t1\n");
			seen++;
		}
		if (strncmp(line, "PPid:", 5) == 0) {
			ck_assert_int_eq(atoi(line + 5), (int)getpid());
			seen++;
		}
	}
	fclose(f);
	ck_assert_int_eq(seen, 5);
}
END_TEST

START_TEST(without_the_spawner_nothing_starts)
{
	char *vm[] = { "vmproxy", NULL };
	struct spawn_req r = { .kind = SPAWN_VMPROXY, .kvm_gid = (gid_t)-1,
	    .argv = vm };
	char err[256];

	spawn_stop();
	ck_assert_int_eq(spawn_pid(), -1);
	ck_assert_int_eq(spawn_run(&r, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "spawner is gone") != NULL, "%s", err);
}
END_TEST

/*
 * A caller with nothing open beyond stdio: the spawner's socket and its
 * /dev/null are then 3 and 4 in the spawner, in either order.  Run in a
 * child of its own, which may close what check holds open.
 */
START_TEST(starts_with_only_stdio_open)
{
	char *vm[] = { "vmproxy", NULL };
	struct spawn_req r = { .kind = SPAWN_VMPROXY, .kvm_gid = (gid_t)-1,
	    .argv = vm };
	char err[256];
	pid_t pid, child;
	int st;

	spawn_stop();
	if ((pid = fork()) == 0) {
		syscall(SYS_close_range, 3, ~0U, 0);
		spawn_start(&(struct spawn_conf){
			.qemu = probe,
			.vmproxy = probe,
			.uid_base = base,
			.nslots = NSLOTS,
			.cg = NULL,
		});
		if ((child = spawn_run(&r, err, sizeof(err))) == -1) {
			fprintf(stderr, "spawn_run: %s\n", err);
			_exit(1);
		}
		waitpid(child, NULL, 0);
		spawn_stop();
		_exit(0);
	}
	ck_assert_int_ne(pid, -1);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "the spawner did not serve (wait status %d)", st);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("spawn");
	TCase *tc = tcase_create("spawner");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, child_is_jailed_with_exactly_its_descriptors);
	tcase_add_test(tc, version_runs_as_nobody);
	tcase_add_test(tc, requests_outside_the_configuration_are_refused);
	tcase_add_test(tc, spawner_keeps_only_setuid_and_setgid);
	tcase_add_test(tc, jailed_child_sees_its_own_directories_alone);
	tcase_add_test(tc, without_the_spawner_nothing_starts);
	tcase_add_test(tc, starts_with_only_stdio_open);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
