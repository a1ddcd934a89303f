/*
 * Privilege drop and seccomp allowlists for every mcpvm daemon; see
 * privdrop.h.  Modelled on the order OpenSSH's privsep child uses.
 */
#include <sys/prctl.h>
#include <sys/types.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <seccomp.h>
#include <sys/capability.h>

#include "log.h"
#include "privdrop.h"

int
privdrop_lookup(const char *user, uid_t *uid, gid_t *gid, char *err,
    size_t errlen)
{
	struct passwd *pw;

	errno = 0;
	if ((pw = getpwnam(user)) == NULL) {
		snprintf(err, errlen, "user %s: %s", user,
		    errno != 0 ? strerror(errno) : "no such user");
		return -1;
	}
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return 0;
}

static int
kept(const struct privdrop *p, cap_value_t c)
{
	for (size_t i = 0; i < p->nkeep; i++)
		if (p->keep[i] == c)
			return 1;
	return 0;
}

/*
 * Threads of the process: capset() and PR_SET_NO_NEW_PRIVS act on the
 * calling thread alone, so a thread started before privdrop would keep
 * every capability.  -1 if /proc cannot say.
 */
static int
thread_count(void)
{
	char line[128];
	FILE *f;
	int n = -1;

	if ((f = fopen("/proc/self/status", "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

void
privdrop(const struct privdrop *p)
{
	uid_t uid = getuid(), ruid, euid, suid;
	gid_t gid = getgid(), rgid, egid, sgid;
	int was_root = geteuid() == 0;
	cap_t caps;
	char err[256];

	if (thread_count() != 1)
		fatalx("privdrop: must run before any thread starts (threads "
		    "started earlier would keep every capability)");
	if (p->user != NULL && p->user[0] != '\0' &&
	    privdrop_lookup(p->user, &uid, &gid, err, sizeof(err)) == -1)
		fatalx("privdrop: %s", err);

	/* The bounding set can only shrink while we hold CAP_SETPCAP. */
	if (was_root) {
		for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++) {
			if (kept(p, c))
				continue;
			if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == -1 &&
			    errno != EINVAL)
				fatal("privdrop: dropping capability %d from "
				    "the bounding set", c);
		}
	}

	if (was_root && uid != 0) {
		if (p->nkeep > 0 && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) == -1)
			fatal("privdrop: PR_SET_KEEPCAPS");
		if (setgroups(1, &gid) == -1)
			fatal("privdrop: setgroups");
		if (setresgid(gid, gid, gid) == -1)
			fatal("privdrop: setresgid");
		if (setresuid(uid, uid, uid) == -1)
			fatal("privdrop: setresuid");
	} else if (!was_root && (uid != getuid() || gid != getgid()))
		fatalx("privdrop: must start as root to become %s", p->user);

	/* Verify: the ids hold, and the way back is closed. */
	if (getresuid(&ruid, &euid, &suid) == -1 ||
	    getresgid(&rgid, &egid, &sgid) == -1)
		fatal("privdrop: getresuid");
	if (ruid != uid || euid != uid || suid != uid || rgid != gid ||
	    egid != gid || sgid != gid)
		fatalx("privdrop: ids did not change as asked");
	if (uid != 0 && (setresuid(0, 0, 0) != -1 || setegid(0) != -1))
		fatalx("privdrop: could regain root after dropping it");

	/* Exactly the kept capabilities, permitted and effective. */
	if ((caps = cap_init()) == NULL)
		fatal("privdrop: cap_init");
	if (p->nkeep > 0 && (cap_set_flag(caps, CAP_PERMITTED, (int)p->nkeep,
	    p->keep, CAP_SET) == -1 || cap_set_flag(caps, CAP_EFFECTIVE,
	    (int)p->nkeep, p->keep, CAP_SET) == -1))
		fatal("privdrop: cap_set_flag");
	if (cap_set_proc(caps) == -1)
		fatal("privdrop: cap_set_proc");
	cap_free(caps);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1 &&
	    errno != EINVAL)
		fatal("privdrop: clearing ambient capabilities");
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) == -1)
		fatal("privdrop: clearing PR_SET_KEEPCAPS");
	if ((caps = cap_get_proc()) == NULL)
		fatal("privdrop: cap_get_proc");
	for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++) {
		cap_flag_value_t perm, eff, inh;

		if (cap_get_flag(caps, c, CAP_PERMITTED, &perm) == -1 ||
		    cap_get_flag(caps, c, CAP_EFFECTIVE, &eff) == -1 ||
		    cap_get_flag(caps, c, CAP_INHERITABLE, &inh) == -1)
			fatal("privdrop: cap_get_flag");
		if (inh == CAP_SET || (perm == CAP_SET) != kept(p, c) ||
		    (eff == CAP_SET) != kept(p, c))
			fatalx("privdrop: capability %d did not end as asked",
			    c);
	}
	cap_free(caps);

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		fatal("privdrop: PR_SET_NO_NEW_PRIVS");
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		fatalx("privdrop: NoNewPrivs did not stick");
	log_debug("privdrop: now uid %d gid %d with %zu capabilities",
	    (int)uid, (int)gid, p->nkeep);
}

/*
 * What every daemon's event loop needs: libevent (epoll), memory, time,
 * signals, Unix sockets with descriptor passing, logging, exit.
 */
static const char *const base_syscalls[] = {
	"read", "write", "readv", "writev", "close", "lseek", "pread64",
	"pwrite64", "fstat", "newfstatat", "statx", "fcntl", "dup", "dup3",
	"brk", "mmap", "munmap", "mremap", "madvise", "mprotect",
	"futex", "set_robust_list", "rseq",
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "poll",
	"ppoll", "select", "pselect6", "eventfd2", "pipe2",
	"clock_gettime", "clock_getres", "gettimeofday", "nanosleep",
	"clock_nanosleep", "timerfd_create", "timerfd_settime",
	"rt_sigreturn", "rt_sigprocmask", "rt_sigaction", "sigaltstack",
	"getpid", "gettid", "getuid", "geteuid", "getgid", "getegid",
	"getppid", "getrandom", "uname", "sched_yield", "restart_syscall",
	"socket", "connect", "accept4", "sendmsg", "recvmsg", "sendto",
	"recvfrom", "shutdown", "getsockopt", "setsockopt", "getsockname",
	"getpeername", "socketpair", "bind", "listen",
	"exit", "exit_group", "kill", "tgkill",
};

/* Sanitizer runtimes read /proc and query limits when they report. */
static const char *const sanitizer_syscalls[] = {
	"openat", "open", "readlink", "readlinkat", "getrlimit", "prlimit64",
	"prctl", "sched_getaffinity", "sysinfo", "pipe", "wait4", "clone",
	"execve", "ptrace", "getdents64", "setrlimit", "rt_sigtimedwait",
	"unlink", "unlinkat", "getdents",
};

#if defined(__SANITIZE_ADDRESS__)
#define MCPVM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define MCPVM_SANITIZED 1
#endif
#endif

static void
sandbox_allow(scmp_filter_ctx ctx, const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	int rc;

	/* A name this architecture lacks (e.g. "open") is not an error. */
	if (nr == __NR_SCMP_ERROR)
		return;
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) < 0)
		fatalx("sandbox: allowing %s: %s", name, strerror(-rc));
}

void
sandbox_seccomp(const char *const *extra, size_t nextra, int log_only)
{
	sandbox_seccomp_ioctl(extra, nextra, NULL, 0, log_only);
}

void
sandbox_seccomp_ioctl(const char *const *extra, size_t nextra,
    const unsigned long *ioctls, size_t nioctls, int log_only)
{
	scmp_filter_ctx ctx;
	size_t i;
	int rc;

	if ((ctx = seccomp_init(log_only ? SCMP_ACT_LOG :
	    SCMP_ACT_KILL_PROCESS)) == NULL)
		fatalx("sandbox: seccomp_init failed");
	/* Every thread, also one started before the filter. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) < 0)
		fatalx("sandbox: seccomp TSYNC: %s", strerror(-rc));
	for (i = 0; i < sizeof(base_syscalls) / sizeof(base_syscalls[0]); i++)
		sandbox_allow(ctx, base_syscalls[i]);
	for (i = 0; i < nextra; i++)
		sandbox_allow(ctx, extra[i]);
	/* ioctl for these requests alone (the request is its 2nd argument;
	 * the kernel compares its low 32 bits, as the ABI passes them). */
	for (i = 0; i < nioctls; i++)
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl),
		    1, SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)ioctls[i]))) < 0)
			fatalx("sandbox: allowing ioctl %#lx: %s", ioctls[i],
			    strerror(-rc));
	/* Only so that the check below can ask; prctl is otherwise shut. */
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
	    SCMP_A0(SCMP_CMP_EQ, PR_GET_SECCOMP))) < 0)
		fatalx("sandbox: allowing prctl: %s", strerror(-rc));
#ifdef MCPVM_SANITIZED
	for (i = 0; i < sizeof(sanitizer_syscalls) /
	    sizeof(sanitizer_syscalls[0]); i++)
		sandbox_allow(ctx, sanitizer_syscalls[i]);
#else
	(void)sanitizer_syscalls;
#endif
	if ((rc = seccomp_load(ctx)) < 0)
		fatalx("sandbox: seccomp_load: %s", strerror(-rc));
	seccomp_release(ctx);
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 2)
		fatalx("sandbox: seccomp filter is not in force");
	log_debug("sandbox: seccomp allowlist in force%s",
	    log_only ? " (log only)" : "");
}
