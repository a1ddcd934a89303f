/*
 * The QEMU backend of vmmd (see backend.h): starts QEMU through
 * qemu_exec.c and drives it over QMP: pause, resume, hibernate (migrate to
 * a file), restore, stop, kill.  Runs in vmmd's event loop; fsyncs go to
 * worker threads.
 */
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "backend.h"
#include "cgroup.h"
#include "log.h"
#include "qemu_exec.h"
#include "qmp.h"
#include "util.h"
#include "worker.h"

#define DEFAULT_MACHINE		"q35"
#define DEFAULT_CONNECT_MS	10000
#define DEFAULT_COMMAND_MS	10000
#define DEFAULT_MIGRATE_MS	600000
#define DEFAULT_STOP_MS		10000
#define MIGRATE_POLL_MS		20
/* QEMU throttles migration to 32 MiB/s unless told otherwise. */
#define MIGRATE_BANDWIDTH	(1LL << 40)
#define CKPT_FDNAME		"mcpvm-ckpt"

struct qemu_backend {
	struct event_base	*base;
	struct worker_pool	*pool;
	struct qemu_conf	 conf;
	char			*binary, *machine;
	int			 kvm;
	gid_t			 kvm_gid;
};

enum op {
	OP_NONE,
	OP_START,
	OP_RESTORE,
	OP_PAUSE,
	OP_RESUME,
	OP_SNAPSHOT,
	OP_STOP,
};

static const char *op_names[] = {
	"none", "start", "restore", "pause", "resume", "snapshot", "stop",
};

struct qvm {
	struct vmm		 vmm;		/* first: a qvm is a vmm */
	struct qemu_backend	*be;
	unsigned		 slot;
	uid_t			 uid;
	gid_t			 gid;
	char			 rundir[PATH_MAX];
	struct vmm_cbs		 cbs;
	void			*cbarg;

	pid_t			 pid;
	int			 pidfd;
	struct event		*pidev;
	int			 exited;
	int			 wstatus;
	struct qmp		*qmp;

	enum op			 op;
	vmm_done_cb		 done;
	void			*done_arg;
	int			 quitting;	/* quit sent: exit is success */
	int			 was_running;	/* snapshot: to undo the stop */
	int			 ckpt_fd;
	/* QEMU's stderr log, kept open: the rundir belongs to the VM's
	 * uid, so the name may by now be anything (a FIFO, a hard link). */
	int			 logfd;
	char			 ckpt[PATH_MAX], ckpt_part[PATH_MAX + 8];
	struct event		*timer;		/* migrate polls, stop timeout */
	struct event		*deadline;	/* whole-operation timeout */
	int			 fsync_rc, fsync_errno;
	int			 freed;		/* freed while fsync ran */
	int			 in_worker;
	int			 busy;		/* in qvm_pidfd_cb */
	int			 doomed;	/* freed from inside it */
	LIST_HEAD(, status_req)	 sreqs;		/* unanswered status queries */
	char			 qmp_why[256];	/* why QMP went away */
};

struct qemu_backend *
qemu_backend_new(struct event_base *base, struct worker_pool *pool,
    const struct qemu_conf *conf, char *err, size_t errlen)
{
	struct qemu_backend *be;
	char why[256];

	if (conf->binary == NULL || access(conf->binary, X_OK) == -1) {
		errf(err, errlen, "QEMU binary %s: %s",
		    conf->binary ? conf->binary : "(none)",
		    conf->binary ? strerror(errno) : "not configured");
		return NULL;
	}
	if ((be = calloc(1, sizeof(*be))) == NULL)
		return NULL;
	be->base = base;
	be->pool = pool;
	be->conf = *conf;
	be->binary = strdup(conf->binary);
	be->machine = strdup(conf->machine ? conf->machine : DEFAULT_MACHINE);
	if (be->binary == NULL || be->machine == NULL) {
		qemu_backend_free(be);
		return NULL;
	}
	be->conf.binary = be->binary;
	be->conf.machine = be->machine;
	if (be->conf.connect_ms <= 0)
		be->conf.connect_ms = DEFAULT_CONNECT_MS;
	if (be->conf.command_ms <= 0)
		be->conf.command_ms = DEFAULT_COMMAND_MS;
	if (be->conf.migrate_ms <= 0)
		be->conf.migrate_ms = DEFAULT_MIGRATE_MS;
	if (be->conf.stop_ms <= 0)
		be->conf.stop_ms = DEFAULT_STOP_MS;
	be->kvm_gid = (gid_t)-1;
	switch (conf->accel) {
	case QEMU_ACCEL_TCG:
		log_info("qemu: accelerator tcg (configured)");
		break;
	case QEMU_ACCEL_KVM:
		if (!qemu_kvm_usable(&be->kvm_gid, why, sizeof(why))) {
			errf(err, errlen, "accel kvm configured, but %s", why);
			qemu_backend_free(be);
			return NULL;
		}
		be->kvm = 1;
		log_info("qemu: accelerator kvm (configured)");
		break;
	default:
		be->kvm = qemu_kvm_usable(&be->kvm_gid, why, sizeof(why));
		if (be->kvm)
			log_info("qemu: accelerator kvm");
		else
			log_info("qemu: accelerator tcg, no KVM: %s", why);
		break;
	}
	return be;
}

void
qemu_backend_free(struct qemu_backend *be)
{
	if (be == NULL)
		return;
	free(be->binary);
	free(be->machine);
	free(be);
}

int
qemu_backend_kvm(const struct qemu_backend *be)
{
	return be->kvm;
}

/* ---------- operations ---------- */

static void	qvm_op_fail(struct qvm *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	qvm_free(struct vmm *);
static void	last_words(const struct qvm *, char *, size_t);
static int	qmp_lost(struct qvm *, const struct qmp_reply *);

static void
qvm_clear_op(struct qvm *v)
{
	v->op = OP_NONE;
	v->done = NULL;
	v->quitting = 0;
	if (v->timer != NULL)
		event_del(v->timer);
	if (v->deadline != NULL)
		event_del(v->deadline);
	/* While a worker fsyncs it, the descriptor is the worker's. */
	if (v->ckpt_fd != -1 && !v->in_worker) {
		close(v->ckpt_fd);
		v->ckpt_fd = -1;
	}
}

static void
qvm_op_done(struct qvm *v)
{
	vmm_done_cb cb = v->done;
	void *arg = v->done_arg;

	qvm_clear_op(v);
	if (cb != NULL)
		cb(&v->vmm, 1, "", arg);
}

static void
qvm_op_fail(struct qvm *v, const char *fmt, ...)
{
	char err[512];
	vmm_done_cb cb = v->done;
	void *arg = v->done_arg;
	enum op op = v->op;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, sizeof(err), fmt, ap);
	va_end(ap);
	if (op == OP_SNAPSHOT && v->ckpt_part[0] != '\0')
		unlink(v->ckpt_part);
	/*
	 * A snapshot that failed before quit leaves the VM as it found it:
	 * any migration still writing is cancelled, a running guest runs on.
	 */
	if (op == OP_SNAPSHOT && !v->quitting && !v->exited && v->qmp != NULL &&
	    qmp_is_ready(v->qmp)) {
		qmp_command(v->qmp, "migrate_cancel", NULL, -1,
		    v->be->conf.command_ms, NULL, NULL);
		if (v->was_running)
			qmp_command(v->qmp, "cont", NULL, -1,
			    v->be->conf.command_ms, NULL, NULL);
	}
	qvm_clear_op(v);
	log_warnx("vm %u: %s: %s", v->slot, op_names[op], err);
	if (cb != NULL)
		cb(&v->vmm, 0, err, arg);
}

static int
qvm_begin(struct qvm *v, enum op op, vmm_done_cb cb, void *arg, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (v->op != OP_NONE) {
		errno = EBUSY;
		return -1;
	}
	if (v->exited || (op != OP_START && op != OP_RESTORE &&
	    (v->qmp == NULL || !qmp_is_ready(v->qmp)))) {
		errno = ESRCH;
		return -1;
	}
	v->op = op;
	v->done = cb;
	v->done_arg = arg;
	v->was_running = 0;
	v->qmp_why[0] = '\0';
	evtimer_add(v->deadline, &tv);
	return 0;
}

static void
qvm_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct qvm *v = arg;

	/* The fsync holds ckpt_fd; it ends by itself, later. */
	if (v->in_worker)
		return;
	if (v->qmp_why[0] != '\0')
		qvm_op_fail(v, "QMP: %s", v->qmp_why);
	else
		qvm_op_fail(v, "timed out");
}

/* The process is gone: reap it, settle the operation, tell the owner. */
static void
qvm_pidfd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct qvm *v = arg;
	int st;

	if (waitpid(v->pid, &st, WNOHANG) <= 0)
		return;
	v->exited = 1;
	v->wstatus = st;
	event_del(v->pidev);
	v->busy++;
	if (v->op != OP_NONE && !v->in_worker) {
		char words[300];

		last_words(v, words, sizeof(words));
		if (v->quitting)
			qvm_op_done(v);
		else if (WIFSIGNALED(st))
			qvm_op_fail(v, "QEMU died (signal %d)%s", WTERMSIG(st),
			    words);
		else
			qvm_op_fail(v, "QEMU exited with status %d%s",
			    WEXITSTATUS(st), words);
	}
	if (!v->doomed && v->cbs.exited != NULL)
		v->cbs.exited(&v->vmm, st, v->cbarg);
	if (--v->busy == 0 && v->doomed) {
		v->doomed = 0;
		qvm_free(&v->vmm);
	}
}

static void
qvm_qmp_closed(struct qmp *q, const char *why, void *arg)
{
	struct qvm *v = arg;
	struct timeval tv = { 1, 0 };

	snprintf(v->qmp_why, sizeof(v->qmp_why), "%s", why);
	/*
	 * While quitting, the exit itself settles the operation.  Otherwise
	 * QEMU is most likely exiting: give its exit status (and its last
	 * words) a moment to arrive, they say more than a closed socket.
	 */
	if (v->op != OP_NONE && !v->quitting && !v->in_worker)
		evtimer_add(v->deadline, &tv);
}

/*
 * A reply that failed because the connection dropped: the operation waits
 * for QEMU's exit (qvm_pidfd_cb) to say why.  Returns 1 if so.
 */
static int
qmp_lost(struct qvm *v, const struct qmp_reply *r)
{
	struct timeval tv = { 1, 0 };

	if (strcmp(r->err_class, "disconnected") != 0)
		return 0;
	snprintf(v->qmp_why, sizeof(v->qmp_why), "%s", r->err_desc);
	evtimer_add(v->deadline, &tv);
	return 1;
}

/*
 * A QMP command's answer: 1 when it failed, having failed the operation
 * with what it says (or found QEMU gone); 0 to go on.
 */
static int
cmd_failed(struct qvm *v, const struct qmp_reply *r, const char *what)
{
	if (r->ok)
		return 0;
	if (!qmp_lost(v, r))
		qvm_op_fail(v, "%s: %s", what, r->err_desc);
	return 1;
}

/*
 * The last line QEMU wrote to its stderr log, for error messages.  Read
 * from the descriptor vmmd created the file with, never by name.
 */
static void
last_words(const struct qvm *v, char *buf, size_t len)
{
	char tail[512], *p, *e;
	struct stat st;
	ssize_t n;
	off_t at = 0;

	buf[0] = '\0';
	if (v->logfd == -1 || fstat(v->logfd, &st) == -1 ||
	    !S_ISREG(st.st_mode))
		return;
	if (st.st_size > (off_t)sizeof(tail) - 1)
		at = st.st_size - (off_t)sizeof(tail) + 1;
	n = pread(v->logfd, tail, sizeof(tail) - 1, at);
	if (n <= 0)
		return;
	tail[n] = '\0';
	while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r'))
		tail[--n] = '\0';
	p = (e = strrchr(tail, '\n')) != NULL ? e + 1 : tail;
	/* Only printable bytes travel on into logs and replies. */
	for (e = p; *e != '\0'; e++)
		if (*e < 0x20 || *e > 0x7e)
			*e = '?';
	/* A long line is cut: the start of it says what went wrong. */
	if (snprintf(buf, len, ": %s", p) >= (int)len)
		buf[len - 1] = '\0';
}

static void
qvm_qmp_event(struct qmp *q, const char *name, struct json_object *data,
    void *arg)
{
	struct qvm *v = arg;

	if (v->cbs.event != NULL)
		v->cbs.event(&v->vmm, name, v->cbarg);
}

static int
qvm_cmd(struct qvm *v, const char *cmd, struct json_object *args, int fd,
    qmp_reply_cb cb)
{
	if (qmp_command(v->qmp, cmd, args, fd, v->be->conf.command_ms, cb,
	    v) == -1) {
		qvm_op_fail(v, "%s: QMP connection is closed", cmd);
		return -1;
	}
	return 0;
}

/* A reply callback that ends the operation successfully on "return". */
static void
reply_finish(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;

	if (!cmd_failed(v, r, r->err_class))
		qvm_op_done(v);
}

/* Sends quit; the operation completes when the process has exited. */
static void
stop_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct qvm *v = arg;

	log_warnx("vm %u: QEMU did not exit %d ms after quit; killing it",
	    v->slot, v->be->conf.stop_ms);
	kill(v->pid, SIGKILL);
}

static void
quit_reply(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;

	/* A lost connection here is QEMU exiting before it could answer. */
	if (!r->ok && strcmp(r->err_class, "disconnected") != 0)
		log_warnx("vm %u: quit: %s", v->slot, r->err_desc);
}

static void
qvm_quit(struct qvm *v)
{
	struct timeval tv = { v->be->conf.stop_ms / 1000,
	    (v->be->conf.stop_ms % 1000) * 1000 };

	v->quitting = 1;
	event_del(v->timer);
	evtimer_assign(v->timer, v->be->base, stop_timeout_cb, v);
	evtimer_add(v->timer, &tv);
	if (v->exited) {
		qvm_op_done(v);
		return;
	}
	if (v->qmp == NULL || qmp_command(v->qmp, "quit", NULL, -1,
	    v->be->conf.command_ms, quit_reply, v) == -1)
		kill(v->pid, SIGKILL);
}

/*
 * A query-migrate answer, for either direction: 1 when the migration has
 * completed; otherwise 0, having failed the operation (with QEMU's
 * reason) or polled again later.  No status yet means the incoming side
 * has not started.
 */
static int
migration_done(struct qvm *v, const struct qmp_reply *r, const char *what)
{
	struct timeval tv = { 0, MIGRATE_POLL_MS * 1000 };
	struct json_object *st, *ed;
	const char *s;

	if (cmd_failed(v, r, "query-migrate"))
		return 0;
	if (!json_object_is_type(r->ret, json_type_object) ||
	    !json_object_object_get_ex(r->ret, "status", &st) ||
	    !json_object_is_type(st, json_type_string)) {
		evtimer_add(v->timer, &tv);
		return 0;
	}
	s = json_object_get_string(st);
	if (strcmp(s, "completed") == 0)
		return 1;
	if (strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0) {
		if (json_object_object_get_ex(r->ret, "error-desc", &ed) &&
		    json_object_is_type(ed, json_type_string))
			qvm_op_fail(v, "%s %s: %s", what, s,
			    json_object_get_string(ed));
		else
			qvm_op_fail(v, "%s %s", what, s);
		return 0;
	}
	evtimer_add(v->timer, &tv);
	return 0;
}

/* --- restore: getfd, migrate-incoming, poll, cont --- */

static void	restore_poll(evutil_socket_t, short, void *);

static void
restore_cont(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	reply_finish(q, r, arg);
}

static void
restore_status(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;

	if (migration_done(v, r, "incoming migration"))
		qvm_cmd(v, "cont", NULL, -1, restore_cont);
}

static void
restore_poll(evutil_socket_t fd, short what, void *arg)
{
	struct qvm *v = arg;

	qvm_cmd(v, "query-migrate", NULL, -1, restore_status);
}

static void
restore_incoming(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;

	if (cmd_failed(v, r, "migrate-incoming"))
		return;
	/* QEMU has its own copy of the descriptor now. */
	close(v->ckpt_fd);
	v->ckpt_fd = -1;
	restore_poll(-1, 0, v);
}

static void
restore_getfd(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;
	struct json_object *a;

	if (cmd_failed(v, r, "getfd"))
		return;
	a = json_object_new_object();
	json_object_object_add(a, "uri", json_object_new_string("fd:"
	    CKPT_FDNAME));
	qvm_cmd(v, "migrate-incoming", a, -1, restore_incoming);
}

static void
qvm_qmp_ready(struct qmp *q, void *arg)
{
	struct qvm *v = arg;
	struct json_object *a;

	if (v->op == OP_START) {
		qvm_op_done(v);
		return;
	}
	if (v->op != OP_RESTORE)
		return;
	evtimer_assign(v->timer, v->be->base, restore_poll, v);
	a = json_object_new_object();
	json_object_object_add(a, "fdname", json_object_new_string(
	    CKPT_FDNAME));
	qvm_cmd(v, "getfd", a, v->ckpt_fd, restore_getfd);
}

static int
qvm_spawn(struct qvm *v, const struct vm_spec *s, int incoming, char *err,
    size_t errlen)
{
	struct qemu_backend *be = v->be;
	struct qemu_argv a;
	char path[PATH_MAX + 32];
	int logfd = -1, rc = -1;
	pid_t pid;

	if (qemu_build_argv(&be->conf, s, be->kvm, incoming, &a) == -1)
		return errf(err, errlen, "cannot build QEMU's command line");
	/* Sockets of an earlier run would make QEMU's bind fail. */
	snprintf(path, sizeof(path), "%s/%s", s->rundir, VMM_QMP_SOCK);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%s", s->rundir, VMM_LINK_SOCK);
	unlink(path);
	/*
	 * A new file of root's, whatever the VM's uid left under that name:
	 * O_EXCL and O_NOFOLLOW refuse a planted link, O_NONBLOCK a planted
	 * FIFO.  vmmd reads it back only through this descriptor.
	 */
	snprintf(path, sizeof(path), "%s/%s", s->rundir, VMM_STDERR_LOG);
	unlink(path);
	logfd = open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW |
	    O_NONBLOCK | O_CLOEXEC, 0640);
	if (logfd == -1) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	pid = qemu_spawn(a.v, s->slot, s->cg != NULL, be->kvm_gid, s->tap_fd,
	    s->console_fd, logfd, err, errlen);
	if (pid == -1)
		goto out;
	v->pid = pid;
	if (v->logfd != -1)
		close(v->logfd);
	v->logfd = logfd;
	logfd = -1;
	rc = 0;
out:
	qemu_argv_free(&a);
	if (logfd != -1)
		close(logfd);
	return rc;
}

static const struct qmp_cbs qvm_qmp_cbs = {
	qvm_qmp_ready, qvm_qmp_event, qvm_qmp_closed,
};

static int
qvm_launch(struct qemu_backend *be, const struct vm_spec *s,
    const char *ckpt, const struct vmm_cbs *cbs, void *cbarg,
    vmm_done_cb done, void *arg, struct vmm **out)
{
	struct qvm *v;
	char err[512], path[PATH_MAX + 32];
	enum op op = ckpt != NULL ? OP_RESTORE : OP_START;

	*out = NULL;
	if (strlen(s->rundir) >= sizeof(v->rundir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((v = calloc(1, sizeof(*v))) == NULL)
		return -1;
	v->vmm.ops = &qemu_backend_ops;
	v->be = be;
	v->slot = s->slot;
	v->uid = s->uid;
	v->gid = s->gid;
	strcpy(v->rundir, s->rundir);
	if (cbs != NULL)
		v->cbs = *cbs;
	v->cbarg = cbarg;
	v->pidfd = -1;
	v->ckpt_fd = -1;
	v->logfd = -1;
	v->pid = -1;
	v->timer = evtimer_new(be->base, restore_poll, v);
	v->deadline = evtimer_new(be->base, qvm_deadline_cb, v);
	if (v->timer == NULL || v->deadline == NULL)
		goto fail;
	if (ckpt != NULL) {
		v->ckpt_fd = open(ckpt, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (v->ckpt_fd == -1) {
			log_warn("vm %u: restore: %s", s->slot, ckpt);
			goto fail;
		}
	}
	if (qvm_spawn(v, s, ckpt != NULL, err, sizeof(err)) == -1) {
		log_warnx("vm %u: %s", s->slot, err);
		errno = ECHILD;
		goto fail;
	}
	v->pidfd = (int)syscall(SYS_pidfd_open, v->pid, 0);
	if (v->pidfd == -1 || (v->pidev = event_new(be->base, v->pidfd,
	    EV_READ | EV_PERSIST, qvm_pidfd_cb, v)) == NULL ||
	    event_add(v->pidev, NULL) == -1) {
		log_warn("vm %u: pidfd", s->slot);
		kill(v->pid, SIGKILL);
		waitpid(v->pid, NULL, 0);
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/%s", s->rundir, VMM_QMP_SOCK);
	v->qmp = qmp_open(be->base, path, be->conf.connect_ms, &qvm_qmp_cbs,
	    v);
	if (v->qmp == NULL) {
		kill(v->pid, SIGKILL);
		waitpid(v->pid, NULL, 0);
		goto fail;
	}
	qvm_begin(v, op, done, arg, op == OP_RESTORE ? be->conf.migrate_ms :
	    be->conf.connect_ms + be->conf.command_ms);
	log_info("vm %u: QEMU pid %ld started (%s)", s->slot, (long)v->pid,
	    op == OP_RESTORE ? "restoring" : "fresh");
	*out = &v->vmm;
	return 0;
fail:
	if (v->pidev != NULL)
		event_free(v->pidev);
	if (v->pidfd != -1)
		close(v->pidfd);
	if (v->ckpt_fd != -1)
		close(v->ckpt_fd);
	if (v->logfd != -1)
		close(v->logfd);
	if (v->timer != NULL)
		event_free(v->timer);
	if (v->deadline != NULL)
		event_free(v->deadline);
	free(v);
	return -1;
}

static int
qvm_start(void *be, const struct vm_spec *s, const struct vmm_cbs *cbs,
    void *cbarg, vmm_done_cb done, void *arg, struct vmm **out)
{
	return qvm_launch(be, s, NULL, cbs, cbarg, done, arg, out);
}

static int
qvm_restore(void *be, const struct vm_spec *s, const char *path,
    const struct vmm_cbs *cbs, void *cbarg, vmm_done_cb done, void *arg,
    struct vmm **out)
{
	return qvm_launch(be, s, path, cbs, cbarg, done, arg, out);
}

static int
qvm_pause(struct vmm *vm, vmm_done_cb cb, void *arg)
{
	struct qvm *v = (struct qvm *)vm;

	if (qvm_begin(v, OP_PAUSE, cb, arg, v->be->conf.command_ms) == -1)
		return -1;
	/* A failed send already ran cb; the call itself succeeded. */
	qvm_cmd(v, "stop", NULL, -1, reply_finish);
	return 0;
}

static int
qvm_resume(struct vmm *vm, vmm_done_cb cb, void *arg)
{
	struct qvm *v = (struct qvm *)vm;

	if (qvm_begin(v, OP_RESUME, cb, arg, v->be->conf.command_ms) == -1)
		return -1;
	qvm_cmd(v, "cont", NULL, -1, reply_finish);
	return 0;
}

static int
qvm_stop(struct vmm *vm, vmm_done_cb cb, void *arg)
{
	struct qvm *v = (struct qvm *)vm;

	if (v->op != OP_NONE) {
		errno = EBUSY;
		return -1;
	}
	/* No QMP needed: a VM whose monitor broke can still be stopped. */
	if (v->exited) {
		errno = ESRCH;
		return -1;
	}
	v->op = OP_STOP;
	v->done = cb;
	v->done_arg = arg;
	qvm_quit(v);
	return 0;
}

static int
qvm_kill(struct vmm *vm)
{
	struct qvm *v = (struct qvm *)vm;

	if (v->exited)
		return 0;
	return kill(v->pid, SIGKILL);
}

struct status_req {
	LIST_ENTRY(status_req) entry;
	struct qvm	*v;
	vmm_status_cb	 cb;
	void		*arg;
};

static void
status_reply(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct status_req *sr = arg;
	struct json_object *st;

	LIST_REMOVE(sr, entry);
	if (r->ok && json_object_is_type(r->ret, json_type_object) &&
	    json_object_object_get_ex(r->ret, "status", &st) &&
	    json_object_is_type(st, json_type_string))
		sr->cb(&sr->v->vmm, 1, json_object_get_string(st), sr->arg);
	else
		sr->cb(&sr->v->vmm, 0, r->ok ? "malformed query-status reply" :
		    r->err_desc, sr->arg);
	free(sr);
}

static int
qvm_status(struct vmm *vm, vmm_status_cb cb, void *arg)
{
	struct qvm *v = (struct qvm *)vm;
	struct status_req *sr;

	if (v->qmp == NULL || !qmp_is_ready(v->qmp)) {
		errno = ESRCH;
		return -1;
	}
	if ((sr = calloc(1, sizeof(*sr))) == NULL)
		return -1;
	sr->v = v;
	sr->cb = cb;
	sr->arg = arg;
	if (qmp_command(v->qmp, "query-status", NULL, -1,
	    v->be->conf.command_ms, status_reply, sr) == -1) {
		free(sr);
		return -1;
	}
	LIST_INSERT_HEAD(&v->sreqs, sr, entry);
	return 0;
}

static pid_t
qvm_pid(const struct vmm *vm)
{
	const struct qvm *v = (const struct qvm *)vm;

	return v->exited ? -1 : v->pid;
}

/* --- snapshot: stop, getfd, migrate, poll, fsync, rename, quit --- */

static void	snap_poll(evutil_socket_t, short, void *);

static void
snap_fsync_run(void *arg)
{
	struct qvm *v = arg;

	v->fsync_rc = fsync(v->ckpt_fd);
	v->fsync_errno = errno;
	if (v->fsync_rc == 0) {
		v->fsync_rc = rename(v->ckpt_part, v->ckpt);
		v->fsync_errno = errno;
	}
	if (v->fsync_rc == 0) {
		char dir[PATH_MAX], *slash;
		int dfd;

		strcpy(dir, v->ckpt);
		if ((slash = strrchr(dir, '/')) != NULL && slash != dir)
			*slash = '\0';
		else
			strcpy(dir, slash == dir ? "/" : ".");
		if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) ==
		    -1 || fsync(dfd) == -1) {
			v->fsync_rc = -1;
			v->fsync_errno = errno;
		}
		if (dfd != -1)
			close(dfd);
	}
}

static void
snap_fsync_done(void *arg)
{
	struct qvm *v = arg;

	v->in_worker = 0;
	if (v->freed) {
		close(v->ckpt_fd);
		free(v);
		return;
	}
	if (v->fsync_rc == -1) {
		qvm_op_fail(v, "checkpoint %s: %s", v->ckpt,
		    strerror(v->fsync_errno));
		return;
	}
	v->ckpt_part[0] = '\0';	/* complete: never unlink it now */
	qvm_quit(v);
}

static void
snap_status(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;

	if (!migration_done(v, r, "migration"))
		return;
	v->in_worker = 1;
	if (worker_submit(v->be->pool, snap_fsync_run, snap_fsync_done,
	    v) == -1) {
		v->in_worker = 0;
		qvm_op_fail(v, "fsync: cannot queue: %s", strerror(errno));
	}
}

static void
snap_poll(evutil_socket_t fd, short what, void *arg)
{
	struct qvm *v = arg;

	qvm_cmd(v, "query-migrate", NULL, -1, snap_status);
}

static void
snap_migrate(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;

	if (cmd_failed(v, r, "migrate"))
		return;
	snap_poll(-1, 0, v);
}

static void
snap_getfd(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;
	struct json_object *a;

	if (cmd_failed(v, r, "getfd"))
		return;
	a = json_object_new_object();
	json_object_object_add(a, "uri", json_object_new_string("fd:"
	    CKPT_FDNAME));
	qvm_cmd(v, "migrate", a, -1, snap_migrate);
}

static void
snap_params(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;
	struct json_object *a;

	if (cmd_failed(v, r, "migrate-set-parameters"))
		return;
	a = json_object_new_object();
	json_object_object_add(a, "fdname", json_object_new_string(
	    CKPT_FDNAME));
	qvm_cmd(v, "getfd", a, v->ckpt_fd, snap_getfd);
}

static void
snap_stopped(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;
	struct json_object *a;

	if (cmd_failed(v, r, "stop"))
		return;
	a = json_object_new_object();
	json_object_object_add(a, "max-bandwidth",
	    json_object_new_int64(MIGRATE_BANDWIDTH));
	qvm_cmd(v, "migrate-set-parameters", a, -1, snap_params);
}

static void
snap_status_before(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct qvm *v = arg;
	struct json_object *run;

	if (cmd_failed(v, r, "query-status"))
		return;
	v->was_running = json_object_is_type(r->ret, json_type_object) &&
	    json_object_object_get_ex(r->ret, "running", &run) &&
	    json_object_get_boolean(run);
	qvm_cmd(v, "stop", NULL, -1, snap_stopped);
}

static int
qvm_snapshot(struct vmm *vm, const char *path, vmm_done_cb cb, void *arg)
{
	struct qvm *v = (struct qvm *)vm;

	if (strlen(path) >= sizeof(v->ckpt)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (qvm_begin(v, OP_SNAPSHOT, cb, arg, v->be->conf.migrate_ms) == -1)
		return -1;
	strcpy(v->ckpt, path);
	snprintf(v->ckpt_part, sizeof(v->ckpt_part), "%s.part", path);
	/* vmmd opens it: QEMU gets a descriptor, never the directory. */
	v->ckpt_fd = open(v->ckpt_part, O_WRONLY | O_CREAT | O_TRUNC |
	    O_NOFOLLOW | O_CLOEXEC, 0600);
	if (v->ckpt_fd == -1) {
		int e = errno;

		v->ckpt_part[0] = '\0';
		qvm_clear_op(v);
		errno = e;
		return -1;
	}
	/* The snapshot belongs to the VM's uid, like its disk. */
	if (fchown(v->ckpt_fd, v->uid, v->gid) == -1)
		log_warn("vm %u: chown %s", v->slot, v->ckpt_part);
	evtimer_assign(v->timer, v->be->base, snap_poll, v);
	qvm_cmd(v, "query-status", NULL, -1, snap_status_before);
	return 0;
}

/* A QEMU whose owner let go before it exited: reaped when it goes. */
struct reaper {
	pid_t		 pid;
	int		 pidfd;
	struct event	*ev;
};

static void
reaper_cb(evutil_socket_t fd, short what, void *arg)
{
	struct reaper *r = arg;

	if (waitpid(r->pid, NULL, WNOHANG) == 0)
		return;
	event_free(r->ev);
	close(r->pidfd);
	free(r);
}

/*
 * Kills QEMU if it still runs and makes sure it is reaped: a child nobody
 * waits for stays a zombie as long as vmmd lives, one per failed VM.
 * Handing the pidfd to a reaper keeps the loop from blocking on it.
 */
static void
qvm_reap_later(struct qvm *v)
{
	struct reaper *r;

	if (v->exited || v->pid <= 0)
		return;
	kill(v->pid, SIGKILL);
	if (waitpid(v->pid, NULL, WNOHANG) != 0 || v->pidfd == -1)
		return;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return;
	r->pid = v->pid;
	r->pidfd = v->pidfd;
	if ((r->ev = event_new(v->be->base, r->pidfd, EV_READ | EV_PERSIST,
	    reaper_cb, r)) == NULL || event_add(r->ev, NULL) == -1) {
		if (r->ev != NULL)
			event_free(r->ev);
		free(r);
		return;
	}
	v->pidfd = -1;		/* the reaper's now */
}

static void
qvm_free(struct vmm *vm)
{
	struct qvm *v = (struct qvm *)vm;
	struct status_req *sr;

	if (v == NULL)
		return;
	if (v->busy > 0) {
		v->doomed = 1;
		return;
	}
	if (v->pidev != NULL) {
		event_free(v->pidev);
		v->pidev = NULL;
	}
	qvm_reap_later(v);
	qmp_free(v->qmp);
	v->qmp = NULL;
	while ((sr = LIST_FIRST(&v->sreqs)) != NULL) {
		LIST_REMOVE(sr, entry);
		free(sr);
	}
	if (v->pidev != NULL)
		event_free(v->pidev);
	if (v->pidfd != -1)
		close(v->pidfd);
	if (v->timer != NULL)
		event_free(v->timer);
	if (v->deadline != NULL)
		event_free(v->deadline);
	if (v->logfd != -1) {
		close(v->logfd);
		v->logfd = -1;
	}
	/* A worker still fsyncs our checkpoint: it frees us when done. */
	if (v->in_worker) {
		v->freed = 1;
		return;
	}
	if (v->ckpt_fd != -1)
		close(v->ckpt_fd);
	free(v);
}

const struct backend_ops qemu_backend_ops = {
	.name = "qemu",
	.start = qvm_start,
	.restore = qvm_restore,
	.pause = qvm_pause,
	.resume = qvm_resume,
	.snapshot = qvm_snapshot,
	.stop = qvm_stop,
	.kill = qvm_kill,
	.status = qvm_status,
	.pid = qvm_pid,
	.free = qvm_free,
};
