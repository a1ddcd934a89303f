/*
 * The QEMU backend of vmmd (see backend.h): decides the accelerator,
 * starts QEMU through qemu_exec.c and offers the operations of
 * backend_ops: start, restore, pause, resume, snapshot, stop, kill,
 * status.  The monitor is the VM's vmproxy, which speaks QMP to QEMU
 * (root reads no byte QEMU writes, #14): each step is one typed operation
 * (vmqmp.h) with a typed result.  The machinery of an operation is in
 * qemu_op.c, snapshot and restore in qemu_migrate.c (qemu_vm.h).  Runs in
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "cgroup.h"
#include "log.h"
#include "qemu_exec.h"
#include "qemu_vm.h"
#include "util.h"

#define DEFAULT_MACHINE		"q35"
#define DEFAULT_CONNECT_MS	10000
#define DEFAULT_COMMAND_MS	10000
#define DEFAULT_MIGRATE_MS	600000
#define DEFAULT_STOP_MS		10000

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
	if (v->op != OP_RESTORE || v->held)
		return;
	restore_begin(v);
}

static void
qvm_release(struct vmm *vm)
{
	struct qvm *v = (struct qvm *)vm;

	if (!v->held)
		return;
	v->held = 0;
	/* Otherwise qvm_connected begins it. */
	if (v->mon_up && v->op == OP_RESTORE && !v->dying)
		restore_begin(v);
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
	pid = qemu_spawn(a.v, s->vm, s->slot, s->cg != NULL, be->kvm_gid,
	    s->tap_fd, s->console_fd, s->log_fd != -1 ? s->log_fd : devnull,
	    err, errlen);
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

static void	qvm_discard(struct qvm *);

/*
 * A new qvm for spec: its fields, timers and monitor slot, nothing
 * started.  NULL with errno when spec cannot be used or memory is short.
 */
static struct qvm *
qvm_alloc(struct qemu_backend *be, const struct vm_spec *s,
    const struct vmm_cbs *cbs, void *cbarg)
{
	struct qvm *v;

	if (strlen(s->rundir) >= sizeof(v->rundir)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if (s->mon == NULL || s->mon->owner != NULL) {
		errno = EINVAL;		/* no monitor, or one in use */
		return NULL;
	}
	if ((v = calloc(1, sizeof(*v))) == NULL)
		return NULL;
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
	v->timer = evtimer_new(be->base, mig_poll, v);
	v->deadline = evtimer_new(be->base, qvm_deadline_cb, v);
	if (v->timer == NULL || v->deadline == NULL) {
		qvm_discard(v);
		errno = ENOMEM;
		return NULL;
	}
	return v;
}

/* The exit watch and the timers go (both qvm_discard and qvm_free). */
static void
qvm_close_events(struct qvm *v)
{
	if (v->pidev != NULL)
		event_free(v->pidev);
	v->pidev = NULL;
	if (v->pidfd != -1)
		close(v->pidfd);
	v->pidfd = -1;
	if (v->timer != NULL)
		event_free(v->timer);
	v->timer = NULL;
	if (v->deadline != NULL)
		event_free(v->deadline);
	v->deadline = NULL;
}

/* Undoes qvm_alloc and what followed it, before the qvm was handed out. */
static void
qvm_discard(struct qvm *v)
{
	qvm_close_events(v);
	if (v->ckpt_fd != -1)
		close(v->ckpt_fd);
	free(v);
}

/* Watches v->pid's exit through a pidfd: -1 if it cannot. */
static int
qvm_watch(struct qvm *v)
{
	v->pidfd = (int)syscall(SYS_pidfd_open, v->pid, 0);
	if (v->pidfd == -1 || (v->pidev = event_new(v->be->base, v->pidfd,
	    EV_READ | EV_PERSIST, qvm_pidfd_cb, v)) == NULL ||
	    event_add(v->pidev, NULL) == -1)
		return -1;
	return 0;
}

/*
 * Takes the monitor and asks vmproxy to connect to QEMU's QMP socket
 * (retrying while QEMU makes it); qvm_connected hears once
 * qmp_capabilities is through.  -1 (the monitor let go) if not sent.
 */
static int
qvm_monitor(struct qvm *v)
{
	v->mon->owner = v;
	v->mon->event = qvm_mon_event;
	v->mon->lost = qvm_mon_lost;
	if (qvm_send(v, VMQ_CONNECT, -1, v->be->conf.connect_ms,
	    qvm_connected, NULL) == -1) {
		qvm_mon_release(v);
		return -1;
	}
	return 0;
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
	if ((v = qvm_alloc(be, s, cbs, cbarg)) == NULL)
		return -1;
	v->held = ckpt != NULL && s->hold;
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
	if (qvm_watch(v) == -1) {
		log_warn("vm %u: pidfd", s->slot);
		kill(v->pid, SIGKILL);
		waitpid(v->pid, NULL, 0);
		goto fail;
	}
	if (qvm_monitor(v) == -1) {
		log_warnx("vm %u: QEMU's monitor cannot be reached", s->slot);
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
	qvm_discard(v);
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

/*
 * Takes up a QEMU that an earlier vmmd started and that still runs: pid
 * was checked by the caller (its uid and cgroup are the VM's).  Its
 * monitor is a new vmproxy's, which connects to the QMP socket QEMU still
 * serves; done runs once it answers.  QEMU is not our child: its exit is
 * seen on a pidfd, and it is signalled only through that pidfd.
 */
static int
qvm_adopt(void *bep, const struct vm_spec *s, pid_t pid,
    const struct vmm_cbs *cbs, void *cbarg, vmm_done_cb done, void *arg,
    struct vmm **out)
{
	struct qemu_backend *be = bep;
	struct qvm *v;

	*out = NULL;
	if (pid <= 0) {
		errno = EINVAL;
		return -1;
	}
	if ((v = qvm_alloc(be, s, cbs, cbarg)) == NULL)
		return -1;
	v->pid = pid;
	v->adopted = 1;
	if (qvm_watch(v) == -1 || qvm_monitor(v) == -1) {
		qvm_discard(v);
		return -1;
	}
	qvm_begin(v, OP_START, done, arg, be->conf.connect_ms +
	    be->conf.command_ms);
	log_info("vm %u: QEMU pid %ld taken up from an earlier vmmd",
	    s->slot, (long)pid);
	*out = &v->vmm;
	return 0;
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

	return qvm_signal(v, SIGKILL);
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
	qvm_signal(v, SIGKILL);
	/* init reaps an adopted QEMU. */
	if (v->adopted || waitpid(v->pid, NULL, WNOHANG) != 0 || v->pidfd == -1)
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
	qvm_close_events(v);
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
	.adopt = qvm_adopt,
	.release = qvm_release,
	.pause = qvm_pause,
	.resume = qvm_resume,
	.snapshot = qvm_snapshot,
	.save = qvm_save,
	.stop = qvm_stop,
	.kill = qvm_kill,
	.status = qvm_status,
	.pid = qvm_pid,
	.free = qvm_free,
};

