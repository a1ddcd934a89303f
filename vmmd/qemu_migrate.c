/*
 * The QEMU backend's snapshot and restore (qemu_vm.h), both through
 * QEMU's migration: a snapshot stops the guest and migrates it into a
 * file vmmd opened, fsyncs and renames it into place, then quits; a
 * restore hands a started QEMU the checkpoint's descriptor and has it
 * read the state back before it continues.  A save is a snapshot that
 * leaves QEMU stopped instead of quitting it.  Both ways share one poll of
 * the migration (struct mig_way says what differs).  QEMU gets
 * descriptors, never paths; what it reports of a migration arrives as
 * vmproxy's typed status.
 */
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "log.h"
#include "qemu_vm.h"
#include "worker.h"

/*
 * One migration, either way.  A snapshot and a restore both hand QEMU the
 * checkpoint's descriptor (getfd), start the migration and poll
 * query-migrate until it ends; what differs is written down here.
 */
struct mig_way {
	const char	*name;		/* "migration failed: ..." */
	enum vmq_op	 start;		/* what starts it */
	const char	*start_name;	/* QEMU's name for that, in errors */
	/* Once started, QEMU has its own copy of the descriptor; a snapshot
	 * keeps vmmd's to fsync what QEMU wrote. */
	int		 keep_fd;
	void		(*completed)(struct qvm *);
};

static void	restore_completed(struct qvm *);
static void	snap_completed(struct qvm *);

static const struct mig_way restore_way = {
	"incoming migration", VMQ_MIGRATE_INCOMING, "migrate-incoming", 0,
	restore_completed,
};

static const struct mig_way snap_way = {
	"migration", VMQ_MIGRATE, "migrate", 1, snap_completed,
};

/*
 * A query-migrate answer: the way's completion when the migration has
 * completed; a failed operation (with QEMU's reason) when it failed or
 * was cancelled; otherwise another poll, later.  No status yet means the
 * incoming side has not started.
 */
static void
mig_status(struct qvm *v, const struct vmq_result *r)
{
	struct timeval tv = { 0, MIGRATE_POLL_MS * 1000 };
	const char *what = v->mig->name;

	if (cmd_failed(v, r, "query-migrate"))
		return;
	if (r->mig == VMQM_COMPLETED) {
		v->mig->completed(v);
		return;
	}
	if (r->mig == VMQM_FAILED || r->mig == VMQM_CANCELLED) {
		if (r->msg[0] != '\0')
			qvm_op_fail(v, "%s %s: %s", what,
			    vmq_mig_names[r->mig], r->msg);
		else
			qvm_op_fail(v, "%s %s", what, vmq_mig_names[r->mig]);
		return;
	}
	evtimer_add(v->timer, &tv);
}

void
mig_poll(evutil_socket_t fd, short what, void *arg)
{
	struct qvm *v = arg;

	qvm_cmd(v, VMQ_QUERY_MIGRATE, -1, mig_status);
}

static void
mig_started(struct qvm *v, const struct vmq_result *r)
{
	if (cmd_failed(v, r, v->mig->start_name))
		return;
	if (!v->mig->keep_fd) {
		close(v->ckpt_fd);
		v->ckpt_fd = -1;
	}
	mig_poll(-1, 0, v);
}

static void
mig_getfd(struct qvm *v, const struct vmq_result *r)
{
	if (cmd_failed(v, r, "getfd"))
		return;
	qvm_cmd(v, v->mig->start, -1, mig_started);
}

/* getfd, start, poll until it ends, then the way's completion. */
static void
mig_begin(struct qvm *v, const struct mig_way *way)
{
	v->mig = way;
	evtimer_assign(v->timer, v->be->base, mig_poll, v);
	qvm_cmd(v, VMQ_GETFD, v->ckpt_fd, mig_getfd);
}

/* --- restore: the migration in, then cont --- */

static void
restore_cont(struct qvm *v, const struct vmq_result *r)
{
	if (!cmd_failed(v, r, "cont"))
		qvm_op_done(v);
}

static void
restore_completed(struct qvm *v)
{
	qvm_cmd(v, VMQ_CONT, -1, restore_cont);
}

/* QEMU's monitor is up: hand it the checkpoint and let it read. */
void
restore_begin(struct qvm *v)
{
	mig_begin(v, &restore_way);
}

/* --- snapshot: stop, the migration out, fsync, rename, quit --- */

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
	if (v->keep) {
		/* A save: QEMU stays, stopped, for the caller's resume. */
		qvm_op_done(v);
		return;
	}
	qvm_quit(v);
}

static void
snap_completed(struct qvm *v)
{
	v->in_worker = 1;
	if (worker_submit(v->be->pool, snap_fsync_run, snap_fsync_done,
	    v) == -1) {
		v->in_worker = 0;
		qvm_op_fail(v, "fsync: cannot queue: %s", strerror(errno));
	}
}

static void
snap_params(struct qvm *v, const struct vmq_result *r)
{
	if (cmd_failed(v, r, "migrate-set-parameters"))
		return;
	mig_begin(v, &snap_way);
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
snap_start(struct vmm *vm, const char *path, int keep, vmm_done_cb cb,
    void *arg)
{
	struct qvm *v = (struct qvm *)vm;

	if (strlen(path) >= sizeof(v->ckpt)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (qvm_begin(v, OP_SNAPSHOT, cb, arg, v->be->conf.migrate_ms) == -1)
		return -1;
	v->keep = keep;
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
	qvm_cmd(v, VMQ_QUERY_STATUS, -1, snap_status_before);
	return 0;
}


int
qvm_snapshot(struct vmm *vm, const char *path, vmm_done_cb cb, void *arg)
{
	return snap_start(vm, path, 0, cb, arg);
}

/* A snapshot that leaves QEMU stopped (vmmd's vm_snapshot with memory):
 * the migration completes into postmigrate, from which cont resumes. */
int
qvm_save(struct vmm *vm, const char *path, vmm_done_cb cb, void *arg)
{
	return snap_start(vm, path, 1, cb, arg);
}
