/*
 * The QEMU backend of vmmd (see backend.h): starts QEMU through
 * qemu_exec.c and drives it through its monitor: pause, resume, hibernate
 * (migrate to a file), restore, stop, kill.  The monitor is the VM's
 * vmproxy, which speaks QMP to QEMU (root reads no byte QEMU writes, #14):
 * each step is one typed operation (vmqmp.h) with a typed result.  Runs in
 * vmmd's event loop; fsyncs go to worker threads.
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
#include "util.h"
#include "worker.h"

#define DEFAULT_MACHINE		"q35"
#define DEFAULT_CONNECT_MS	10000
#define DEFAULT_COMMAND_MS	10000
#define DEFAULT_MIGRATE_MS	600000
#define DEFAULT_STOP_MS		10000
#define MIGRATE_POLL_MS		20

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
	struct vmm_monitor	*mon;
	int			 mon_up;	/* connected, not lost since */
	LIST_HEAD(, qcmd)	 cmds;		/* monitor calls still out */

	enum op			 op;
	vmm_done_cb		 done;
	void			*done_arg;
	int			 quitting;	/* quit sent: exit is success */
	int			 was_running;	/* snapshot: to undo the stop */
	int			 ckpt_fd;
	int			 dying;		/* exited mid-op: asked last words */
	char			 ckpt[PATH_MAX], ckpt_part[PATH_MAX + 8];
	struct event		*timer;		/* migrate polls, stop timeout */
	struct event		*deadline;	/* whole-operation timeout */
	int			 fsync_rc, fsync_errno;
	int			 freed;		/* freed while fsync ran */
	int			 in_worker;
	int			 busy;		/* in qvm_pidfd_cb */
	int			 doomed;	/* freed from inside it */
	char			 qmp_why[256];	/* why QMP went away */
};

/*
 * One monitor call.  It outlives the qvm if need be: the monitor answers
 * every call, and one whose qvm is gone (v NULL) is just freed.
 */
typedef void (*qcmd_cb)(struct qvm *, const struct vmq_result *);

struct qcmd {
	LIST_ENTRY(qcmd)	 entry;
	struct qvm		*v;
	qcmd_cb			 cb;		/* may be NULL */
	vmm_status_cb		 scb;		/* a status query's */
	void			*sarg;
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
static int	qmp_lost(struct qvm *, const struct vmq_result *);
static int	qvm_send(struct qvm *, enum vmq_op, int, int, qcmd_cb,
		    struct qcmd **);
static void	qvm_exit_fail(struct qvm *, const char *);
static void	qvm_exit_settle(struct qvm *, const char *);
static void	last_words_cb(struct qvm *, const struct vmq_result *);

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
	if (op == OP_SNAPSHOT && !v->quitting && !v->exited && v->mon_up) {
		qvm_send(v, VMQ_MIGRATE_CANCEL, -1, v->be->conf.command_ms,
		    NULL, NULL);
		if (v->was_running)
			qvm_send(v, VMQ_CONT, -1, v->be->conf.command_ms, NULL,
			    NULL);
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
	    !v->mon_up)) {
		errno = ESRCH;
		return -1;
	}
	v->op = op;
	v->done = cb;
	v->done_arg = arg;
	v->was_running = 0;
	v->dying = 0;
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
	if (v->dying)
		qvm_exit_settle(v, " (vmproxy did not give QEMU's last "
		    "words)");
	else if (v->qmp_why[0] != '\0')
		qvm_op_fail(v, "QMP: %s", v->qmp_why);
	else
		qvm_op_fail(v, "timed out");
}

/* The process is gone: reap it, settle the operation, tell the owner. */
static void
qvm_pidfd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct qvm *v = arg;
	int st, notify = 1;

	if (waitpid(v->pid, &st, WNOHANG) <= 0)
		return;
	v->exited = 1;
	v->wstatus = st;
	event_del(v->pidev);
	v->busy++;
	if (v->op != OP_NONE && !v->in_worker) {
		struct timeval tv = { 2, 0 };

		/* What QEMU last printed says more than its exit status:
		 * vmproxy, which keeps its log, is asked for it. */
		if (v->quitting)
			qvm_op_done(v);
		else if (qvm_send(v, VMQ_LAST_WORDS, -1, 1000, last_words_cb,
		    NULL) == -1)
			qvm_exit_fail(v, " (vmproxy, which keeps QEMU's log, "
			    "is gone)");
		else {
			/* The owner hears of the exit with the failure. */
			v->dying = 1;
			notify = 0;
			evtimer_add(v->deadline, &tv);
		}
	}
	if (notify && !v->doomed && v->cbs.exited != NULL)
		v->cbs.exited(&v->vmm, st, v->cbarg);
	if (--v->busy == 0 && v->doomed) {
		v->doomed = 0;
		qvm_free(&v->vmm);
	}
}

static void
qvm_mon_lost(void *arg, const char *why)
{
	struct qvm *v = arg;
	struct timeval tv = { 1, 0 };

	v->mon_up = 0;
	snprintf(v->qmp_why, sizeof(v->qmp_why), "%s", why);
	/*
	 * While quitting, the exit itself settles the operation.  Otherwise
	 * QEMU is most likely exiting: give its exit status (and its last
	 * words) a moment to arrive, they say more than a closed socket.
	 */
	if (v->op != OP_NONE && !v->quitting && !v->in_worker && !v->dying)
		evtimer_add(v->deadline, &tv);
}

/*
 * A reply that failed because the connection dropped: the operation waits
 * for QEMU's exit (qvm_pidfd_cb) to say why.  Returns 1 if so.
 */
static int
qmp_lost(struct qvm *v, const struct vmq_result *r)
{
	struct timeval tv = { 1, 0 };

	if (r->err != VMQE_DISCONNECTED)
		return 0;
	snprintf(v->qmp_why, sizeof(v->qmp_why), "%s", r->msg);
	if (!v->dying)
		evtimer_add(v->deadline, &tv);
	return 1;
}

/*
 * A QMP command's answer: 1 when it failed, having failed the operation
 * with what it says (or found QEMU gone); 0 to go on.
 */
static int
cmd_failed(struct qvm *v, const struct vmq_result *r, const char *what)
{
	if (r->ok)
		return 0;
	if (!qmp_lost(v, r))
		qvm_op_fail(v, "%s: %s", what, r->msg[0] != '\0' ? r->msg :
		    vmq_err_names[r->err]);
	return 1;
}

/*
 * QEMU exited in the middle of an operation: fail it with how, and with
 * what QEMU last printed (words: from vmproxy, which keeps qemu.log).
 */
static void
qvm_exit_fail(struct qvm *v, const char *words)
{
	int st = v->wstatus;

	v->dying = 0;
	if (WIFSIGNALED(st))
		qvm_op_fail(v, "QEMU died (signal %d)%s", WTERMSIG(st), words);
	else
		qvm_op_fail(v, "QEMU exited with status %d%s", WEXITSTATUS(st),
		    words);
}

/*
 * The words came (or will not): the operation fails, and only then does
 * the owner hear of the exit, as when both happen at once; an owner that
 * frees us in the first callback does not get the second.
 */
static void
qvm_exit_settle(struct qvm *v, const char *words)
{
	v->busy++;
	qvm_exit_fail(v, words);
	if (!v->doomed && v->cbs.exited != NULL)
		v->cbs.exited(&v->vmm, v->wstatus, v->cbarg);
	if (--v->busy == 0 && v->doomed) {
		v->doomed = 0;
		qvm_free(&v->vmm);
	}
}

static void
last_words_cb(struct qvm *v, const struct vmq_result *r)
{
	char words[VMQ_MSG_MAX + 32];

	if (!v->dying)
		return;		/* settled meanwhile (the deadline) */
	if (!r->ok)
		snprintf(words, sizeof(words), " (QEMU's log: %s)", r->msg);
	else if (r->msg[0] == '\0')
		snprintf(words, sizeof(words), " (QEMU printed nothing)");
	else
		snprintf(words, sizeof(words), ": %s", r->msg);
	qvm_exit_settle(v, words);
}

static void
qvm_mon_event(void *arg, enum vmq_event ev)
{
	struct qvm *v = arg;

	if (v->cbs.event != NULL)
		v->cbs.event(&v->vmm, vmq_event_names[ev], v->cbarg);
}

static void
qcmd_done(const struct vmq_result *r, void *arg)
{
	struct qcmd *c = arg;
	struct qvm *v = c->v;

	if (v != NULL) {
		LIST_REMOVE(c, entry);
		if (c->scb != NULL) {
			if (r->ok)
				c->scb(&v->vmm, 1, vmq_run_names[r->status],
				    c->sarg);
			else
				c->scb(&v->vmm, 0, r->msg[0] != '\0' ? r->msg :
				    vmq_err_names[r->err], c->sarg);
		} else if (c->cb != NULL)
			c->cb(v, r);
	}
	free(c);
}

/* One monitor call; -1 if it could not be sent (no callback then). */
static int
qvm_send(struct qvm *v, enum vmq_op op, int fd, int timeout_ms, qcmd_cb cb,
    struct qcmd **out)
{
	struct qcmd *c;

	if (v->mon == NULL || (c = calloc(1, sizeof(*c))) == NULL)
		return -1;
	c->v = v;
	c->cb = cb;
	LIST_INSERT_HEAD(&v->cmds, c, entry);
	if (v->mon->call(v->mon, op, fd, timeout_ms, qcmd_done, c) == -1) {
		LIST_REMOVE(c, entry);
		free(c);
		return -1;
	}
	if (out != NULL)
		*out = c;
	return 0;
}

/* Lets go of the monitor: calls still out find no qvm when answered. */
static void
qvm_mon_release(struct qvm *v)
{
	struct qcmd *c;

	while ((c = LIST_FIRST(&v->cmds)) != NULL) {
		LIST_REMOVE(c, entry);
		c->v = NULL;
	}
	if (v->mon != NULL && v->mon->owner == v) {
		v->mon->owner = NULL;
		v->mon->event = NULL;
		v->mon->lost = NULL;
	}
	v->mon = NULL;
	v->mon_up = 0;
}

static int
qvm_cmd(struct qvm *v, enum vmq_op op, int fd, qcmd_cb cb)
{
	if (!v->mon_up || qvm_send(v, op, fd, v->be->conf.command_ms, cb,
	    NULL) == -1) {
		qvm_op_fail(v, "%s: QMP connection is closed",
		    vmq_op_names[op]);
		return -1;
	}
	return 0;
}

/* A reply callback that ends the operation successfully on "return". */
static void
reply_finish(struct qvm *v, const struct vmq_result *r)
{
	if (!cmd_failed(v, r, vmq_op_names[v->op == OP_PAUSE ? VMQ_STOP :
	    VMQ_CONT]))
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
quit_reply(struct qvm *v, const struct vmq_result *r)
{
	/* A lost connection here is QEMU exiting before it could answer. */
	if (!r->ok && r->err != VMQE_DISCONNECTED)
		log_warnx("vm %u: quit: %s", v->slot, r->msg);
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
	if (!v->mon_up || qvm_send(v, VMQ_QUIT, -1, v->be->conf.command_ms,
	    quit_reply, NULL) == -1)
		kill(v->pid, SIGKILL);
}

/*
 * A query-migrate answer, for either direction: 1 when the migration has
 * completed; otherwise 0, having failed the operation (with QEMU's
 * reason) or polled again later.  No status yet means the incoming side
 * has not started.
 */
static int
migration_done(struct qvm *v, const struct vmq_result *r, const char *what)
{
	struct timeval tv = { 0, MIGRATE_POLL_MS * 1000 };

	if (cmd_failed(v, r, "query-migrate"))
		return 0;
	if (r->mig == VMQM_COMPLETED)
		return 1;
	if (r->mig == VMQM_FAILED || r->mig == VMQM_CANCELLED) {
		if (r->msg[0] != '\0')
			qvm_op_fail(v, "%s %s: %s", what,
			    vmq_mig_names[r->mig], r->msg);
		else
			qvm_op_fail(v, "%s %s", what, vmq_mig_names[r->mig]);
		return 0;
	}
	evtimer_add(v->timer, &tv);
	return 0;
}

/* --- restore: getfd, migrate-incoming, poll, cont --- */

static void	restore_poll(evutil_socket_t, short, void *);

static void
restore_cont(struct qvm *v, const struct vmq_result *r)
{
	if (!cmd_failed(v, r, "cont"))
		qvm_op_done(v);
}

static void
restore_status(struct qvm *v, const struct vmq_result *r)
{
	if (migration_done(v, r, "incoming migration"))
		qvm_cmd(v, VMQ_CONT, -1, restore_cont);
}

static void
restore_poll(evutil_socket_t fd, short what, void *arg)
{
	struct qvm *v = arg;

	qvm_cmd(v, VMQ_QUERY_MIGRATE, -1, restore_status);
}

static void
restore_incoming(struct qvm *v, const struct vmq_result *r)
{
	if (cmd_failed(v, r, "migrate-incoming"))
		return;
	/* QEMU has its own copy of the descriptor now. */
	close(v->ckpt_fd);
	v->ckpt_fd = -1;
	restore_poll(-1, 0, v);
}

static void
restore_getfd(struct qvm *v, const struct vmq_result *r)
{
	if (cmd_failed(v, r, "getfd"))
		return;
	qvm_cmd(v, VMQ_MIGRATE_INCOMING, -1, restore_incoming);
}

/* vmproxy has QEMU's monitor: a start is done, a restore goes on. */
static void
qvm_connected(struct qvm *v, const struct vmq_result *r)
{
	struct timeval tv = { 1, 0 };

	if (!r->ok) {
		/* Most likely QEMU is exiting: its exit status (and last
		 * words) say more, so they get a moment to arrive. */
		snprintf(v->qmp_why, sizeof(v->qmp_why), "%s", r->msg);
		if (v->op != OP_NONE && !v->dying)
			evtimer_add(v->deadline, &tv);
		return;
	}
	v->mon_up = 1;
	if (v->op == OP_START) {
		qvm_op_done(v);
		return;
	}
	if (v->op != OP_RESTORE)
		return;
	evtimer_assign(v->timer, v->be->base, restore_poll, v);
	qvm_cmd(v, VMQ_GETFD, v->ckpt_fd, restore_getfd);
}

static int
qvm_spawn(struct qvm *v, const struct vm_spec *s, int incoming, char *err,
    size_t errlen)
{
	struct qemu_backend *be = v->be;
	struct qemu_argv a;
	char path[PATH_MAX + 32];
	int devnull = -1, rc = -1;
	pid_t pid;

	if (qemu_build_argv(&be->conf, s, be->kvm, incoming, &a) == -1)
		return errf(err, errlen, "cannot build QEMU's command line");
	/* Sockets of an earlier run would make QEMU's bind fail. */
	snprintf(path, sizeof(path), "%s/%s", s->rundir, VMM_QMP_SOCK);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%s", s->rundir, VMM_LINK_SOCK);
	unlink(path);
	/*
	 * QEMU's stdout and stderr go to vmproxy's pipe (it keeps a bounded
	 * qemu.log), or nowhere: root vmmd reads none of it (#14).
	 */
	if (s->log_fd == -1 && (devnull = open("/dev/null", O_WRONLY |
	    O_CLOEXEC)) == -1) {
		errf(err, errlen, "/dev/null: %s", strerror(errno));
		goto out;
	}
	pid = qemu_spawn(a.v, s->slot, s->cg != NULL, be->kvm_gid, s->tap_fd,
	    s->console_fd, s->log_fd != -1 ? s->log_fd : devnull, err,
	    errlen);
	if (pid == -1)
		goto out;
	v->pid = pid;
	rc = 0;
out:
	qemu_argv_free(&a);
	if (devnull != -1)
		close(devnull);
	return rc;
}

static int
qvm_launch(struct qemu_backend *be, const struct vm_spec *s,
    const char *ckpt, const struct vmm_cbs *cbs, void *cbarg,
    vmm_done_cb done, void *arg, struct vmm **out)
{
	struct qvm *v;
	char err[512];
	enum op op = ckpt != NULL ? OP_RESTORE : OP_START;

	*out = NULL;
	if (strlen(s->rundir) >= sizeof(v->rundir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (s->mon == NULL || s->mon->owner != NULL) {
		errno = EINVAL;		/* no monitor, or one in use */
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
	v->pid = -1;
	v->mon = s->mon;
	LIST_INIT(&v->cmds);
	v->timer = evtimer_new(be->base, restore_poll, v);
	v->deadline = evtimer_new(be->base, qvm_deadline_cb, v);
	if (v->timer == NULL || v->deadline == NULL)
		goto fail;
	if (ckpt != NULL) {
		/*
		 * An older vmmd gave its snapshots to the VM's uid: reclaimed
		 * first (CAP_CHOWN).  The VM's directory is root's, so the
		 * VM's uid cannot swap the file in between.
		 */
		if (fchownat(AT_FDCWD, ckpt, 0, 0, AT_SYMLINK_NOFOLLOW) == -1 &&
		    errno != ENOENT)
			log_warn("vm %u: restore: chown %s", s->slot, ckpt);
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
	/* vmproxy connects to QEMU's QMP socket, retrying while QEMU makes
	 * it, and answers once qmp_capabilities is through. */
	v->mon->owner = v;
	v->mon->event = qvm_mon_event;
	v->mon->lost = qvm_mon_lost;
	if (qvm_send(v, VMQ_CONNECT, -1, be->conf.connect_ms, qvm_connected,
	    NULL) == -1) {
		log_warnx("vm %u: QEMU's monitor cannot be reached", s->slot);
		qvm_mon_release(v);
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
	qvm_cmd(v, VMQ_STOP, -1, reply_finish);
	return 0;
}

static int
qvm_resume(struct vmm *vm, vmm_done_cb cb, void *arg)
{
	struct qvm *v = (struct qvm *)vm;

	if (qvm_begin(v, OP_RESUME, cb, arg, v->be->conf.command_ms) == -1)
		return -1;
	qvm_cmd(v, VMQ_CONT, -1, reply_finish);
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

static int
qvm_status(struct vmm *vm, vmm_status_cb cb, void *arg)
{
	struct qvm *v = (struct qvm *)vm;
	struct qcmd *c;

	if (!v->mon_up) {
		errno = ESRCH;
		return -1;
	}
	if (qvm_send(v, VMQ_QUERY_STATUS, -1, v->be->conf.command_ms, NULL,
	    &c) == -1)
		return -1;
	c->scb = cb;
	c->sarg = arg;
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
snap_status(struct qvm *v, const struct vmq_result *r)
{
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

	qvm_cmd(v, VMQ_QUERY_MIGRATE, -1, snap_status);
}

static void
snap_migrate(struct qvm *v, const struct vmq_result *r)
{
	if (cmd_failed(v, r, "migrate"))
		return;
	snap_poll(-1, 0, v);
}

static void
snap_getfd(struct qvm *v, const struct vmq_result *r)
{
	if (cmd_failed(v, r, "getfd"))
		return;
	qvm_cmd(v, VMQ_MIGRATE, -1, snap_migrate);
}

static void
snap_params(struct qvm *v, const struct vmq_result *r)
{
	if (cmd_failed(v, r, "migrate-set-parameters"))
		return;
	qvm_cmd(v, VMQ_GETFD, v->ckpt_fd, snap_getfd);
}

static void
snap_stopped(struct qvm *v, const struct vmq_result *r)
{
	if (cmd_failed(v, r, "stop"))
		return;
	qvm_cmd(v, VMQ_MIGRATE_PARAMS, -1, snap_params);
}

static void
snap_status_before(struct qvm *v, const struct vmq_result *r)
{
	if (cmd_failed(v, r, "query-status"))
		return;
	v->was_running = r->running;
	qvm_cmd(v, VMQ_STOP, -1, snap_stopped);
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
	/*
	 * The snapshot stays root's, 0600: QEMU writes it and reads it back
	 * only through the descriptor vmmd passes, and vmmd opens it again
	 * for a restore without a capability that overrides permissions.
	 */
	evtimer_assign(v->timer, v->be->base, snap_poll, v);
	qvm_cmd(v, VMQ_QUERY_STATUS, -1, snap_status_before);
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
	qvm_mon_release(v);
	if (v->pidev != NULL)
		event_free(v->pidev);
	if (v->pidfd != -1)
		close(v->pidfd);
	if (v->timer != NULL)
		event_free(v->timer);
	if (v->deadline != NULL)
		event_free(v->deadline);
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
