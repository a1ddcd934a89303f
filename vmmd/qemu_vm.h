/*
 * The QEMU backend's own state, shared by its three files and nobody
 * else: backend_qemu.c (the backend, launching QEMU, the entry points),
 * qemu_op.c (one operation at a time, monitor calls, QEMU's exit) and
 * qemu_migrate.c (snapshot and restore through QEMU's migration).  What
 * QEMU says reaches these only as vmproxy's typed results (vmqmp.h).
 */
#ifndef VMMD_QEMU_VM_H
#define VMMD_QEMU_VM_H

#include <sys/queue.h>
#include <sys/types.h>

#include <limits.h>

#include <event2/event.h>

#include "backend.h"

#define MIGRATE_POLL_MS		20

struct mig_way;

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

/* Each op by name, for the log. */
extern const char *const qvm_op_names[];

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
	/*
	 * Started by an earlier vmmd and taken up (qvm_adopt): not our
	 * child, so its exit is seen on the pidfd but never reaped, and its
	 * status is not known.
	 */
	int			 adopted;
	struct vmm_monitor	*mon;
	int			 mon_up;	/* connected, not lost since */
	int			 held;		/* a restore waits for release */
	LIST_HEAD(, qcmd)	 cmds;		/* monitor calls still out */

	enum op			 op;
	vmm_done_cb		 done;
	void			*done_arg;
	int			 quitting;	/* quit sent: exit is success */
	int			 was_running;	/* snapshot: to undo the stop */
	int			 keep;		/* save: stopped, not quit */
	int			 ckpt_fd;
	int			 dying;		/* exited mid-op: asked last words */
	char			 ckpt[PATH_MAX], ckpt_part[PATH_MAX + 8];
	const struct mig_way	*mig;		/* the migration's way */
	struct event		*timer;		/* migrate polls, stop timeout */
	struct event		*deadline;	/* whole-operation timeout */
	int			 fsync_rc, fsync_errno;
	int			 freed;		/* freed while fsync ran */
	int			 in_worker;
	int			 busy;		/* in qvm_pidfd_cb */
	int			 doomed;	/* freed from inside it: the
						 * last one out frees it, with
						 * vmm_free, as its owner
						 * asked */
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

/* qemu_op.c */
void	qvm_clear_op(struct qvm *);
void	qvm_op_done(struct qvm *);
void	qvm_op_fail(struct qvm *, const char *, ...)
	    __attribute__((format(printf, 2, 3)));
int	qvm_begin(struct qvm *, enum op, vmm_done_cb, void *, int ms);
void	qvm_deadline_cb(evutil_socket_t, short, void *);
void	qvm_pidfd_cb(evutil_socket_t, short, void *);
void	qvm_mon_lost(void *, const char *why);
void	qvm_mon_event(void *, enum vmq_event);
int	cmd_failed(struct qvm *, const struct vmq_result *, const char *what);
int	qvm_send(struct qvm *, enum vmq_op, int fd, int timeout_ms, qcmd_cb,
	    struct qcmd **);
void	qvm_mon_release(struct qvm *);
int	qvm_cmd(struct qvm *, enum vmq_op, int fd, qcmd_cb);
void	reply_finish(struct qvm *, const struct vmq_result *);
void	qvm_quit(struct qvm *);
int	qvm_signal(struct qvm *, int sig);

/* qemu_migrate.c */
void	mig_poll(evutil_socket_t, short, void *);
void	restore_begin(struct qvm *);
int	qvm_snapshot(struct vmm *, const char *path, vmm_done_cb, void *);
int	qvm_save(struct vmm *, const char *path, vmm_done_cb, void *);

#endif
