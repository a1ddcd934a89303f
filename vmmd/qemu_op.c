/*
 * The QEMU backend's operations (qemu_vm.h): one at a time per VM, each
 * with a deadline; the monitor calls it makes through the VM's vmproxy
 * and their typed answers; quit; and QEMU's exit, whether asked for or
 * not, with its last words that vmproxy keeps.  vmproxy and QEMU are
 * trusted for nothing: a lost monitor, a late answer or an exit mid-way
 * each fail the operation with what is known.
 */
#include <sys/queue.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "log.h"
#include "qemu_vm.h"

const char *const qvm_op_names[] = {
	"none", "start", "restore", "pause", "resume", "snapshot", "stop",
};

static int	qmp_lost(struct qvm *, const struct vmq_result *);
static void	qvm_exit_fail(struct qvm *, const char *);
static void	qvm_exit_settle(struct qvm *, const char *);
static void	last_words_cb(struct qvm *, const struct vmq_result *);

void
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

void
qvm_op_done(struct qvm *v)
{
	vmm_done_cb cb = v->done;
	void *arg = v->done_arg;

	qvm_clear_op(v);
	if (cb != NULL)
		cb(&v->vmm, 1, "", arg);
}

void
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
	log_warnx("vm %u: %s: %s", v->slot, qvm_op_names[op], err);
	if (cb != NULL)
		cb(&v->vmm, 0, err, arg);
}

int
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

void
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
void
qvm_pidfd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct qvm *v = arg;
	int st = 0, notify = 1;

	/* An adopted QEMU is init's child: readable means it is gone. */
	if (!v->adopted && waitpid(v->pid, &st, WNOHANG) <= 0)
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
		vmm_free(&v->vmm);
	}
}

void
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
int
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
	if (v->adopted)
		qvm_op_fail(v, "QEMU exited (an earlier vmmd started it, so "
		    "its exit status is not known)%s", words);
	else if (WIFSIGNALED(st))
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
		vmm_free(&v->vmm);
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

void
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
int
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
void
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

int
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
void
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
	qvm_signal(v, SIGKILL);
}

static void
quit_reply(struct qvm *v, const struct vmq_result *r)
{
	/* A lost connection here is QEMU exiting before it could answer. */
	if (!r->ok && r->err != VMQE_DISCONNECTED)
		log_warnx("vm %u: quit: %s", v->slot, r->msg);
}

void
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
		qvm_signal(v, SIGKILL);
}

/*
 * Signals QEMU through its pidfd: the pid of an adopted QEMU, which init
 * reaps, could be another process's by the time a plain kill arrived.
 */
int
qvm_signal(struct qvm *v, int sig)
{
	if (v->exited)
		return 0;
	if (v->pidfd != -1)
		return (int)syscall(SYS_pidfd_send_signal, v->pidfd, sig, NULL,
		    0);
	return kill(v->pid, sig);
}
