/*
 * vmmd's spawner (see spawn.h): the request vmmd sends, the spawner's
 * loop that checks it, and the cloned child's steps up to exec.
 *
 * The wire format is one fixed struct per SOCK_SEQPACKET message, with
 * the descriptors in SCM_RIGHTS; the reply is another fixed struct.  The
 * spawner decodes and bounds the whole request before it acts on any of
 * it, and answers a bad one with step "request" and EINVAL.  A jail's
 * paths are built here too, before the clone: the child only makes
 * system calls with them.
 */
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "fdmsg.h"
#include "log.h"
#include "privdrop.h"
#include "spawn.h"

extern char **environ;

/* Where the child parks descriptors before placing them. */
#define PARK_FD		64
#define NOBODY_UID	65534

struct spawn_msg {
	uint32_t	kind;
	uint32_t	slot;
	uint32_t	cgroup;
	uint32_t	keep_stderr;
	uint32_t	kvm_gid;
	uint32_t	nfds;
	int32_t		fd_at[SPAWN_MAX_FDS];
	char		vm[SPAWN_VM_MAX + 1];	/* NUL-ended; "": none */
	uint32_t	argc;
	uint32_t	args_len;
	char		args[SPAWN_ARGS_MAX];
};

struct spawn_reply {
	int32_t		pid;	/* the child's, also when it failed */
	int32_t		step;	/* 0: exec'd; else the step that failed */
	int32_t		err;	/* errno of that step */
};

enum step {
	STEP_OK,
	STEP_REQUEST,
	STEP_CLONE,
	STEP_SETSID,
	STEP_CGROUP,
	STEP_FDS,
	STEP_UNSHARE,
	STEP_SLAVE,
	STEP_JAIL_DIRS,
	STEP_TMP,
	STEP_SHM,
	STEP_HIDE,
	STEP_BIND,
	STEP_SETGROUPS,
	STEP_SETRESGID,
	STEP_SETRESUID,
	STEP_NNP,
	STEP_PDEATHSIG,
	STEP_EXEC,
	STEP_GONE,	/* the spawner did not answer */
	STEP_MAX,
};

static const char *const step_names[STEP_MAX] = {
	"ok",
	("the spawner refused the request (not the configured binary, "
	    "or out of bounds)"),
	"clone", "setsid", "cgroup", "descriptors",
	"jail: unshare of the mount namespace",
	"jail: making / a slave mount",
	"jail: opening the VM's directories",
	"jail: a private tmpfs on /tmp",
	"jail: a private tmpfs on /dev/shm",
	"jail: an empty tmpfs over the VMs' directories",
	"jail: binding the VM's own directory back",
	"setgroups", "setresgid", "setresuid", "no_new_privs", "pdeathsig",
	"exec", "the spawner is gone",
};

/* vmmd's side. */
static int		 sp_sock = -1;
static pid_t		 sp_pid = -1;
static pthread_mutex_t	 sp_lock = PTHREAD_MUTEX_INITIALIZER;

/* The spawner's side: what it was told at startup. */
static struct spawn_conf sp_conf;
static pid_t		 sp_vmmd;
static uid_t		 sp_nobody = NOBODY_UID;
static gid_t		 sp_nobody_gid = NOBODY_UID;
static int		 sp_devnull = -1;

/*
 * A private /tmp or /dev/shm, and small.  Root's, mode 1777 as usual: the
 * child, root without CAP_DAC_OVERRIDE, makes the path of a parent below
 * /tmp in it before it becomes the VM's uid.
 */
#define JAIL_TMP_OPTS	"mode=1777,size=16m,nr_inodes=1024"
/* What covers vm_dir and run_dir: nothing but the mount points made in it. */
#define JAIL_HIDE_OPTS	"mode=0711,size=64k,nr_inodes=16"

/* One directory of the VM's: its parent hidden, itself bound back. */
struct jail_dir {
	char		 parent[PATH_MAX];
	char		 own[PATH_MAX];
};

/* A checked request, ready for the child. */
struct job {
	const char	*binary;
	char		*argv[SPAWN_ARGC_MAX + 1];
	char *const	*envp;
	uid_t		 uid;
	gid_t		 gid;
	gid_t		 groups[1];
	int		 ngroups;
	struct cg_attach cga;
	int		 have_cg;
	int		 keep_stderr;
	int		 pdeathsig;
	int		 fds[SPAWN_MAX_FDS];
	int		 at[SPAWN_MAX_FDS];
	int		 nfds;
	int		 jail;
	/* The shorter parent first: a parent below the other stays seen. */
	struct jail_dir	 dirs[2];
};

/* ---------- the child, between clone and exec ---------- */

static void __attribute__((noreturn))
child_fail(int errfd, int step)
{
	struct spawn_reply r = { 0, step, errno };

	(void)!write(errfd, &r, sizeof(r));
	_exit(127);
}

static int
is_target(const struct job *j, int fd)
{
	for (int i = 0; i < j->nfds; i++)
		if (j->at[i] == fd)
			return 1;
	return 0;
}

/*
 * Makes each missing directory of path, as mkdir -p: a parent of the
 * VMs' directories may lie below /tmp, now an empty tmpfs.  Writes into
 * path and restores it.
 */
static int
mkpath(char *path)
{
	char *p, c;
	int rc;

	for (p = path + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		c = *p;
		*p = '\0';
		rc = mkdir(path, 0755);
		*p = c;
		if (rc == -1 && errno != EEXIST)
			return -1;
		if (c == '\0')
			return 0;
	}
}

/* "/proc/self/fd/<fd>" into buf (32 bytes), without stdio. */
static void
fd_path(char *buf, int fd)
{
	static const char pre[] = "/proc/self/fd/";
	char digits[12];
	size_t k = sizeof(pre) - 1;
	int n = 0;

	memcpy(buf, pre, k);
	do {
		digits[n++] = (char)('0' + fd % 10);
		fd /= 10;
	} while (fd > 0 && n < (int)sizeof(digits));
	while (n > 0)
		buf[k++] = digits[--n];
	buf[k] = '\0';
}

/*
 * The VM's own mount namespace (see spawn.h), while the child is still
 * root.  Each directory of the VM's is held open before anything covers
 * it, then bound back from that descriptor: the path cannot be swapped
 * in between.
 */
static void
child_jail(int errfd, struct job *j)
{
	char src[32];
	int own[2];

	if (unshare(CLONE_NEWNS) == -1)
		child_fail(errfd, STEP_UNSHARE);
	/* Nothing mounted here reaches the host; the host's unmounts (a
	 * volume taken away) still reach here. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == -1)
		child_fail(errfd, STEP_SLAVE);
	for (int i = 0; i < 2; i++)
		if ((own[i] = open(j->dirs[i].own, O_PATH | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) == -1)
			child_fail(errfd, STEP_JAIL_DIRS);
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    JAIL_TMP_OPTS) == -1)
		child_fail(errfd, STEP_TMP);
	if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, JAIL_TMP_OPTS) == -1)
		child_fail(errfd, STEP_SHM);
	for (int i = 0; i < 2; i++) {
		if (mkpath(j->dirs[i].parent) == -1 ||
		    mount("tmpfs", j->dirs[i].parent, "tmpfs", MS_NOSUID |
		    MS_NODEV | MS_NOEXEC, JAIL_HIDE_OPTS) == -1)
			child_fail(errfd, STEP_HIDE);
		fd_path(src, own[i]);
		if ((mkdir(j->dirs[i].own, 0700) == -1 && errno != EEXIST) ||
		    mount(src, j->dirs[i].own, NULL, MS_BIND, NULL) == -1)
			child_fail(errfd, STEP_BIND);
		close(own[i]);
	}
}

/* Async-signal-safe calls only: everything was prepared in the parent. */
static void __attribute__((noreturn))
child_exec(int errfd, struct job *j)
{
	static char *const qemu_env[] = { "PATH=/usr/bin:/bin", "LC_ALL=C",
	    NULL };
	int parked[SPAWN_MAX_FDS], top = 2, fd, bfd = -1;

	/* The error pipe first, at PARK_FD, then the rest above it, so
	 * that no dup2 below lands on a descriptor still to be placed. */
	if ((fd = fcntl(errfd, F_DUPFD_CLOEXEC, PARK_FD)) == -1)
		child_fail(errfd, STEP_FDS);
	errfd = fd;
	for (int i = 0; i < j->nfds; i++)
		if ((parked[i] = fcntl(j->fds[i], F_DUPFD_CLOEXEC,
		    PARK_FD + 1)) == -1)
			child_fail(errfd, STEP_FDS);
	if (setsid() == -1)
		child_fail(errfd, STEP_SETSID);
	if (j->have_cg && cg_attach_apply(&j->cga) == -1)
		child_fail(errfd, STEP_CGROUP);
	for (fd = 0; fd <= 2; fd++) {
		if (is_target(j, fd) || (fd == 2 && j->keep_stderr))
			continue;
		if (dup2(sp_devnull, fd) == -1)
			child_fail(errfd, STEP_FDS);
	}
	for (int i = 0; i < j->nfds; i++) {
		if (dup2(parked[i], j->at[i]) == -1)
			child_fail(errfd, STEP_FDS);
		if (j->at[i] > top)
			top = j->at[i];
	}
	/* Nothing else of the spawner's or vmmd's reaches the program. */
	for (fd = 3; fd <= top; fd++)
		if (!is_target(j, fd))
			close(fd);
	if (syscall(SYS_close_range, top + 1, errfd - 1, 0) == -1 ||
	    syscall(SYS_close_range, errfd + 1, ~0U, 0) == -1)
		child_fail(errfd, STEP_FDS);
	/*
	 * The binary is opened before the jail: under /tmp (a build tree,
	 * say) it is hidden once the jail is in place.  As root, so its
	 * directories' search permission is not asked of the VM's uid;
	 * exec permission still is, at execveat.
	 */
	if (j->jail && (bfd = open(j->binary, O_PATH | O_CLOEXEC)) == -1)
		child_fail(errfd, STEP_EXEC);
	if (j->jail)
		child_jail(errfd, j);
	if (setgroups(j->ngroups, j->groups) == -1)
		child_fail(errfd, STEP_SETGROUPS);
	if (setresgid(j->gid, j->gid, j->gid) == -1)
		child_fail(errfd, STEP_SETRESGID);
	if (setresuid(j->uid, j->uid, j->uid) == -1)
		child_fail(errfd, STEP_SETRESUID);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		child_fail(errfd, STEP_NNP);
	if (j->pdeathsig) {
		/* The parent is vmmd (CLONE_PARENT); if it is already gone,
		 * the signal would never come. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) == -1)
			child_fail(errfd, STEP_PDEATHSIG);
		if (getppid() != sp_vmmd) {
			errno = ESRCH;
			child_fail(errfd, STEP_PDEATHSIG);
		}
	}
	if (bfd != -1) {
		syscall(SYS_execveat, bfd, "", j->argv, j->envp != NULL ?
		    j->envp : qemu_env, AT_EMPTY_PATH);
		/* ENOENT: a script, whose interpreter cannot open a
		 * close-on-exec descriptor; it is run by its path. */
		if (errno != ENOENT)
			child_fail(errfd, STEP_EXEC);
	}
	execve(j->binary, j->argv, j->envp != NULL ? j->envp : qemu_env);
	child_fail(errfd, STEP_EXEC);
}

/* ---------- the spawner ---------- */

/* A VM's name as the jail takes it: a single path component, no dots. */
static int
vm_name_ok(const char *s)
{
	size_t n = 0;

	for (; s[n] != '\0'; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' &&
		    s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
		    s[n] == '-' || s[n] == '_'))
			return 0;
	return n > 0 && n <= SPAWN_VM_MAX;
}

/* The jail of vm's QEMU or vmproxy into j. */
static int
jail_prepare(struct job *j, const char *vm)
{
	const char *parent[2] = { sp_conf.vm_dir, sp_conf.run_dir };
	int first = strlen(parent[0]) <= strlen(parent[1]) ? 0 : 1;

	if (!vm_name_ok(vm))
		return -1;
	for (int i = 0; i < 2; i++) {
		struct jail_dir *d = &j->dirs[i];
		const char *p = parent[i == 0 ? first : 1 - first];

		if ((size_t)snprintf(d->parent, sizeof(d->parent), "%s", p) >=
		    sizeof(d->parent) || (size_t)snprintf(d->own,
		    sizeof(d->own), "%s/%s", p, vm) >= sizeof(d->own))
			return -1;
	}
	j->jail = 1;
	return 0;
}

/* Decodes and bounds m into j; -1 if anything is off. */
static int
job_decode(struct spawn_msg *m, size_t len, const int *fds, int nfds,
    struct job *j)
{
	struct stat st;
	size_t off = 0;
	uint32_t i;

	memset(j, 0, sizeof(*j));
	if (len < offsetof(struct spawn_msg, args) ||
	    m->args_len > SPAWN_ARGS_MAX ||
	    len != offsetof(struct spawn_msg, args) + m->args_len)
		return -1;
	if (m->nfds > SPAWN_MAX_FDS || (int)m->nfds != nfds)
		return -1;
	for (i = 0; i < m->nfds; i++) {
		if (m->fd_at[i] < 0 || m->fd_at[i] >= SPAWN_FD_LIMIT)
			return -1;
		for (uint32_t k = 0; k < i; k++)
			if (m->fd_at[k] == m->fd_at[i])
				return -1;
		j->fds[i] = fds[i];
		j->at[i] = m->fd_at[i];
	}
	j->nfds = (int)m->nfds;
	/* argv: exactly argc strings, each NUL-terminated, nothing after. */
	if (m->argc == 0 || m->argc > SPAWN_ARGC_MAX)
		return -1;
	for (i = 0; i < m->argc; i++) {
		char *end;

		if (off >= m->args_len ||
		    (end = memchr(m->args + off, '\0', m->args_len - off)) ==
		    NULL)
			return -1;
		j->argv[i] = m->args + off;
		off = (size_t)(end - m->args) + 1;
	}
	if (off != m->args_len)
		return -1;
	j->argv[m->argc] = NULL;
	j->keep_stderr = m->keep_stderr != 0;
	if (memchr(m->vm, '\0', sizeof(m->vm)) == NULL)
		return -1;

	switch (m->kind) {
	case SPAWN_QEMU:
	case SPAWN_VMPROXY:
		if (m->slot >= sp_conf.nslots)
			return -1;
		j->uid = sp_conf.uid_base + m->slot;
		j->gid = (gid_t)j->uid;
		/* A jail when the spawner has one, and only then. */
		if (sp_conf.vm_dir != NULL ? jail_prepare(j, m->vm) == -1 :
		    m->vm[0] != '\0')
			return -1;
		if (m->cgroup) {
			if (sp_conf.cg == NULL || cg_attach_prepare(sp_conf.cg,
			    m->slot, &j->cga) == -1)
				return -1;
			j->have_cg = 1;
		}
		if (m->kind == SPAWN_QEMU) {
			/* argv[0] names the binary; only the configured one. */
			if (strcmp(j->argv[0], sp_conf.qemu) != 0)
				return -1;
			j->binary = sp_conf.qemu;
			/* QEMU's own minimal environment, not vmmd's. */
			j->envp = NULL;
			/* The one extra group is /dev/kvm's, nothing else. */
			if (m->kvm_gid != (uint32_t)-1) {
				if (stat("/dev/kvm", &st) == -1 ||
				    st.st_gid != m->kvm_gid || st.st_gid == 0)
					return -1;
				j->groups[j->ngroups++] = m->kvm_gid;
			}
		} else {
			if (m->kvm_gid != (uint32_t)-1)
				return -1;
			j->binary = sp_conf.vmproxy;
			j->envp = environ;
			j->pdeathsig = 1;
		}
		break;
	case SPAWN_VERSION:
		/* "qemu --version" as nobody, and only that. */
		if (m->argc != 2 || strcmp(j->argv[0], sp_conf.qemu) != 0 ||
		    strcmp(j->argv[1], "--version") != 0 ||
		    m->cgroup || m->kvm_gid != (uint32_t)-1 ||
		    j->keep_stderr || m->vm[0] != '\0')
			return -1;
		j->binary = sp_conf.qemu;
		j->uid = sp_nobody;
		j->gid = sp_nobody_gid;
		j->envp = NULL;
		break;
	default:
		return -1;
	}
	return 0;
}

int
spawn_check(const struct spawn_conf *c, const void *msg, size_t len,
    int nfds)
{
	static struct spawn_msg m;
	int fds[SPAWN_MAX_FDS] = { -1, -1, -1, -1, -1, -1 };
	struct job j;

	if (len > sizeof(m) || nfds < 0 || nfds > SPAWN_MAX_FDS)
		return -1;
	sp_conf = *c;
	memset(&m, 0, sizeof(m));
	memcpy(&m, msg, len);
	if (job_decode(&m, len, fds, nfds, &j) == -1)
		return -1;
	/* What the child relies on, whatever the bytes were. */
	if (j.binary == NULL || j.argv[0] == NULL || j.nfds != nfds ||
	    j.uid == 0 || (j.uid != sp_nobody && (j.uid < c->uid_base ||
	    j.uid >= c->uid_base + c->nslots)) || j.gid != (gid_t)j.uid ||
	    (j.binary != c->qemu && j.binary != c->vmproxy))
		abort();
	for (int i = 0; i < j.nfds; i++)
		if (j.at[i] < 0 || j.at[i] >= SPAWN_FD_LIMIT)
			abort();
	/* A jailed VM sees its own two directories, none of a sibling's. */
	if (j.jail != (c->vm_dir != NULL && j.uid != sp_nobody))
		abort();
	for (int i = 0; j.jail && i < 2; i++) {
		size_t n = strlen(j.dirs[i].parent);
		const char *name = j.dirs[i].own + n + 1;

		if (strncmp(j.dirs[i].own, j.dirs[i].parent, n) != 0 ||
		    j.dirs[i].own[n] != '/' || strchr(name, '/') != NULL ||
		    name[0] == '.' || name[0] == '\0' ||
		    strcmp(name, j.dirs[1 - i].own +
		    strlen(j.dirs[1 - i].parent) + 1) != 0)
			abort();
	}
	return 0;
}

static void
reply(int sock, pid_t pid, int step, int err)
{
	struct spawn_reply r = { (int32_t)pid, step, err };

	if (send(sock, &r, sizeof(r), MSG_NOSIGNAL) != (ssize_t)sizeof(r))
		_exit(0);	/* vmmd is gone; so is the reason to be */
}

static void
serve_one(int sock, struct spawn_msg *m)
{
	FDMSG_BUF(cbuf, SPAWN_MAX_FDS);
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr msg;
	struct spawn_reply r;
	struct job j;
	int fds[SPAWN_MAX_FDS], nfds = 0, bad = 0, p[2] = { -1, -1 };
	ssize_t n;
	pid_t pid = -1;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = sizeof(cbuf.buf);
	do {
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	} while (n == -1 && errno == EINTR);
	if (n <= 0)
		_exit(0);	/* vmmd closed its end, or died */
	if ((nfds = fdmsg_take(&msg, fds, SPAWN_MAX_FDS)) == -1) {
		nfds = 0;
		bad = 1;
	}
	if (bad || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    job_decode(m, (size_t)n, fds, nfds, &j) == -1) {
		log_warnx("spawner: refused a malformed request");
		errno = EINVAL;
		r.step = STEP_REQUEST;
		r.err = EINVAL;
		goto done;
	}
	if (pipe2(p, O_CLOEXEC) == -1) {
		r.step = STEP_CLONE;
		r.err = errno;
		goto done;
	}
	/* vmmd's child, not ours: vmmd reaps it and holds its pidfd. */
	pid = (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, NULL, NULL,
	    NULL, NULL);
	if (pid == -1) {
		log_warn("spawner: clone");
		r.step = STEP_CLONE;
		r.err = errno;
		goto done;
	}
	if (pid == 0) {
		close(p[0]);
		close(sock);
		child_exec(p[1], &j);
	}
	close(p[1]);
	p[1] = -1;
	/* The pipe closes at exec, or carries the step that failed. */
	do {
		n = read(p[0], &r, sizeof(r));
	} while (n == -1 && errno == EINTR);
	if (n != (ssize_t)sizeof(r)) {
		r.step = STEP_OK;
		r.err = 0;
	}
done:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	for (int i = 0; i < 2; i++)
		if (p[i] != -1)
			close(p[i]);
	reply(sock, pid, r.step, r.err);
}

static void __attribute__((noreturn))
spawner_main(int sock)
{
	/* A jail's mount namespace needs CAP_SYS_ADMIN, until the child's
	 * setresuid leaves it nothing. */
	static const cap_value_t keep[] = { CAP_SETUID, CAP_SETGID,
	    CAP_SYS_ADMIN };
	const struct privdrop pd = { NULL, keep, sp_conf.vm_dir != NULL ?
	    3 : 2 };
	static struct spawn_msg m;
	struct passwd *pw;

	/* Gone with vmmd: a spawner without vmmd has no one to serve. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == -1 ||
	    getppid() != sp_vmmd)
		_exit(0);
	prctl(PR_SET_NAME, "vmmd-spawner", 0, 0, 0);
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (chdir("/") == -1)
		fatal("spawner: chdir /");
	if ((sp_devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1)
		fatal("spawner: /dev/null");
	if ((pw = getpwnam("nobody")) != NULL) {
		sp_nobody = pw->pw_uid;
		sp_nobody_gid = pw->pw_gid;
	}
	/*
	 * Only the socket, the log's stdio and /dev/null stay open, as 3 and
	 * 4.  Both move above 4 first: either may be 3 or 4 already, and a
	 * dup2 onto the other would close it.
	 */
	if ((sock = fcntl(sock, F_DUPFD_CLOEXEC, 5)) == -1 ||
	    (sp_devnull = fcntl(sp_devnull, F_DUPFD_CLOEXEC, 5)) == -1 ||
	    dup2(sock, 3) == -1 || dup2(sp_devnull, 4) == -1)
		fatal("spawner: dup2");
	sock = 3;
	sp_devnull = 4;
	fcntl(sock, F_SETFD, FD_CLOEXEC);
	fcntl(sp_devnull, F_SETFD, FD_CLOEXEC);
	syscall(SYS_close_range, 5, ~0U, 0);
	privdrop(&pd);
	/* Ready: spawn_start returns only once the drop held. */
	reply(sock, 0, STEP_OK, 0);
	for (;;)
		serve_one(sock, &m);
}

void
spawn_start(const struct spawn_conf *c)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		fatal("spawner: socketpair");
	/* The jail's parents are absolute, like the paths vmmd names. */
	if ((c->vm_dir != NULL) != (c->run_dir != NULL) ||
	    (c->vm_dir != NULL && (c->vm_dir[0] != '/' ||
	    c->run_dir[0] != '/' || c->vm_dir[1] == '\0' ||
	    c->run_dir[1] == '\0' || strlen(c->vm_dir) >= PATH_MAX - 2 -
	    SPAWN_VM_MAX || strlen(c->run_dir) >= PATH_MAX - 2 -
	    SPAWN_VM_MAX)))
		fatalx("spawner: the jail's directories must be absolute "
		    "paths below /, both or neither");
	sp_conf = *c;
	sp_vmmd = getpid();
	if ((pid = fork()) == -1)
		fatal("spawner: fork");
	if (pid == 0) {
		close(sv[0]);
		spawner_main(sv[1]);
	}
	close(sv[1]);
	sp_sock = sv[0];
	sp_pid = pid;
	{
		struct spawn_reply r;
		ssize_t n;

		do {
			n = recv(sp_sock, &r, sizeof(r), 0);
		} while (n == -1 && errno == EINTR);
		if (n != (ssize_t)sizeof(r) || r.step != STEP_OK)
			fatalx("the spawner did not start");
	}
}

void
spawn_stop(void)
{
	pthread_mutex_lock(&sp_lock);
	if (sp_sock != -1)
		close(sp_sock);
	sp_sock = -1;
	pthread_mutex_unlock(&sp_lock);
	/* It is vmmd's child: reaped here, not left a zombie. */
	if (sp_pid != -1)
		while (waitpid(sp_pid, NULL, 0) == -1 && errno == EINTR)
			;
	sp_pid = -1;
}

pid_t
spawn_pid(void)
{
	return sp_pid;
}

static int
spawn_fail(char *err, size_t errlen, const char *what, int step, int e)
{
	snprintf(err, errlen, "starting %s: %s%s%s", what,
	    step_names[step > 0 && step < STEP_MAX ? step : STEP_REQUEST],
	    e != 0 ? ": " : "", e != 0 ? strerror(e) : "");
	return -1;
}

/* Fills m from r: -1 if r does not fit the wire's bounds. */
static int
msg_encode(const struct spawn_req *r, struct spawn_msg *m, size_t *len)
{
	size_t off = 0, n;
	uint32_t argc = 0;

	memset(m, 0, offsetof(struct spawn_msg, args));
	if (r->nfds > SPAWN_MAX_FDS)
		return -1;
	m->kind = r->kind;
	m->slot = r->slot;
	m->cgroup = r->cgroup != 0;
	m->keep_stderr = r->keep_stderr != 0;
	m->kvm_gid = (uint32_t)r->kvm_gid;
	m->nfds = (uint32_t)r->nfds;
	if (r->vm != NULL && (size_t)snprintf(m->vm, sizeof(m->vm), "%s",
	    r->vm) >= sizeof(m->vm))
		return -1;
	for (size_t i = 0; i < r->nfds; i++)
		m->fd_at[i] = r->fds[i].at;
	for (; r->argv[argc] != NULL; argc++) {
		n = strlen(r->argv[argc]) + 1;
		if (argc == SPAWN_ARGC_MAX || n > SPAWN_ARGS_MAX - off)
			return -1;
		memcpy(m->args + off, r->argv[argc], n);
		off += n;
	}
	m->argc = argc;
	m->args_len = (uint32_t)off;
	*len = offsetof(struct spawn_msg, args) + off;
	return 0;
}

pid_t
spawn_run(const struct spawn_req *r, char *err, size_t errlen)
{
	static struct spawn_msg m;	/* under sp_lock */
	FDMSG_BUF(cbuf, SPAWN_MAX_FDS);
	int sendfds[SPAWN_MAX_FDS];
	const char *what = r->kind == SPAWN_VMPROXY ? "vmproxy" : "QEMU";
	struct spawn_reply rep;
	struct msghdr msg;
	struct iovec iov;
	size_t len;
	ssize_t n;

	if (sp_sock == -1)
		return spawn_fail(err, errlen, what, STEP_GONE, 0);
	pthread_mutex_lock(&sp_lock);
	if (msg_encode(r, &m, &len) == -1) {
		pthread_mutex_unlock(&sp_lock);
		return spawn_fail(err, errlen, what, STEP_REQUEST, E2BIG);
	}
	iov.iov_base = &m;
	iov.iov_len = len;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	for (size_t i = 0; i < r->nfds; i++)
		sendfds[i] = r->fds[i].fd;
	fdmsg_attach(&msg, &cbuf, sizeof(cbuf), sendfds, r->nfds);
	do {
		n = sendmsg(sp_sock, &msg, MSG_NOSIGNAL);
	} while (n == -1 && errno == EINTR);
	if (n == (ssize_t)len) {
		do {
			n = recv(sp_sock, &rep, sizeof(rep), 0);
		} while (n == -1 && errno == EINTR);
	}
	pthread_mutex_unlock(&sp_lock);
	if (n != (ssize_t)sizeof(rep)) {
		log_warnx("the spawner did not answer: no VM can start");
		return spawn_fail(err, errlen, what, STEP_GONE, 0);
	}
	if (rep.step != STEP_OK) {
		if (rep.pid > 0)
			while (waitpid(rep.pid, NULL, 0) == -1 &&
			    errno == EINTR)
				;
		return spawn_fail(err, errlen, what, rep.step, rep.err);
	}
	return rep.pid;
}
