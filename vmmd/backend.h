/*
 * The interface between vmmd's VM state machine and a VMM (QEMU today,
 * Firecracker later).  Every operation is asynchronous: it returns at once
 * and its callback runs later in the event loop.  One operation at a time
 * per VM; a second one while the first runs fails with EBUSY.
 */
#ifndef VMMD_BACKEND_H
#define VMMD_BACKEND_H

#include <sys/types.h>

#include "vmqmp.h"

struct cg_host;
struct event_base;
struct json_object;
struct vmm;
struct worker_pool;

/*
 * The VMM's monitor, as the backend reaches it.  QEMU's QMP is spoken by
 * the VM's vmproxy, never by root vmmd (#14): the backend asks for typed
 * operations (vmqmp.h) and gets typed results.  vmmd's to_vmproxy.c
 * provides one per VM; a test may provide its own.
 */
typedef void (*vmm_mon_cb)(const struct vmq_result *, void *arg);

struct vmm_monitor {
	/*
	 * Starts op.  fd (VMQ_GETFD only, else -1) is not consumed.  cb runs
	 * exactly once, later, also when the monitor goes away
	 * (VMQE_DISCONNECTED).  -1: not sent, and cb will not run.
	 */
	int	(*call)(struct vmm_monitor *, enum vmq_op, int fd,
		    int timeout_ms, vmm_mon_cb cb, void *arg);
	/* Set by the backend while a VMM uses this monitor: */
	void	(*event)(void *owner, enum vmq_event);
	/* The monitor's connection to the VMM ended (or its vmproxy). */
	void	(*lost)(void *owner, const char *why);
	void	*owner;
};

/* What to run; strings are copied by start/restore. */
struct vm_spec {
	unsigned		 slot;
	uid_t			 uid;		/* QEMU runs as uid:gid */
	gid_t			 gid;
	unsigned		 vcpus;
	unsigned		 memory_mib;
	const char		*kernel;	/* NULL: firmware only (tests) */
	const char		*initrd;	/* may be NULL */
	const char		*append;	/* may be NULL */
	const char		*disk;		/* raw image; NULL: none */
	/*
	 * Directory owned by uid (mode 0700) for the QMP and link sockets,
	 * the pid file and the console log; vmmd creates it.
	 */
	const char		*rundir;
	/*
	 * The VM's name in vmmd's directories: QEMU's jail shows it those
	 * two alone (spawn.h).  NULL: no jail (tests of the backend alone).
	 */
	const char		*vm;
	int			 tap_fd;	/* -1: no network device at all */
	const char		*mac;		/* the NIC's, with tap_fd */
	/*
	 * The write end of a pipe for the serial console, which vmproxy
	 * drains into a bounded console.log; -1: QEMU writes the file in
	 * rundir itself, without bound (tests of the backend alone).
	 */
	int			 console_fd;
	/*
	 * The write end of a pipe for QEMU's stdout and stderr, which
	 * vmproxy drains into a bounded qemu.log; -1: /dev/null.  Root
	 * never reads what QEMU writes.
	 */
	int			 log_fd;
	struct vmm_monitor	*mon;		/* QEMU's QMP, through vmproxy */
	const struct cg_host	*cg;		/* NULL: no cgroup (tests) */
	/*
	 * The vmgenid device's GUID (a lowercase UUID); NULL: no device.
	 * A restore must have the device exactly when the boot had it; a
	 * new GUID on a restore tells the guest it is a copy.
	 */
	const char		*vmgenid;
	/*
	 * A restore only: QEMU starts and waits with the checkpoint unread
	 * until release.  vmmd checks a snapshot's files meanwhile, so QEMU's
	 * own start overlaps the check and nothing unchecked is read.
	 */
	int			 hold;
};

/* Files a VM's rundir holds, by name. */
#define VMM_QMP_SOCK	"qmp.sock"
#define VMM_LINK_SOCK	"link.sock"
#define VMM_CONSOLE_LOG	"console.log"
#define VMM_STDERR_LOG	"qemu.log"
#define VMM_PIDFILE	"qemu.pid"
#define VMM_LINK_PORT	"org.mcpvm.link.0"

/* ok is 1 or 0; err says why not and is valid only during the call. */
typedef void (*vmm_done_cb)(struct vmm *, int ok, const char *err,
	    void *arg);

/* status is the VMM's own word for it (QEMU: "running", "paused"...). */
typedef void (*vmm_status_cb)(struct vmm *, int ok, const char *status,
	    void *arg);

struct vmm_cbs {
	/* The VMM process ended (wait status), whatever the reason. */
	void	(*exited)(struct vmm *, int wstatus, void *arg);
	/* Monitor events as the VMM names them (QEMU: "STOP", "RESUME"...). */
	void	(*event)(struct vmm *, const char *name, void *arg);
};

struct backend_ops {
	const char	*name;
	/* done runs once the VMM is up and its monitor answers. */
	int	(*start)(void *be, const struct vm_spec *,
		    const struct vmm_cbs *, void *cbarg, vmm_done_cb done,
		    void *arg, struct vmm **out);
	/* Starts from a snapshot file; done runs once the guest runs again. */
	int	(*restore)(void *be, const struct vm_spec *, const char *path,
		    const struct vmm_cbs *, void *cbarg, vmm_done_cb done,
		    void *arg, struct vmm **out);
	/*
	 * Takes up the VMM process pid, which an earlier vmmd started and
	 * which still runs (the caller checked that it is this VM's); done
	 * runs once its monitor answers.  Nothing is started.
	 */
	int	(*adopt)(void *be, const struct vm_spec *, pid_t pid,
		    const struct vmm_cbs *, void *cbarg, vmm_done_cb done,
		    void *arg, struct vmm **out);
	/* A restore started with spec.hold goes on and reads its file. */
	void	(*release)(struct vmm *);
	int	(*pause)(struct vmm *, vmm_done_cb, void *);
	int	(*resume)(struct vmm *, vmm_done_cb, void *);
	/*
	 * Hibernate: pause, write the whole machine state to path (fsynced,
	 * renamed into place only once complete), then stop the VMM.  On
	 * failure nothing is at path and the VM is left as it was.
	 */
	int	(*snapshot)(struct vmm *, const char *path, vmm_done_cb,
		    void *);
	/*
	 * Save: as snapshot (the state at path, fsynced and renamed into
	 * place), but the VMM is left stopped, not quit; resume continues
	 * it.  The caller pauses it first.  On failure nothing is at path
	 * and the VMM is still stopped.
	 */
	int	(*save)(struct vmm *, const char *path, vmm_done_cb, void *);
	/* Asks the VMM to exit; done runs once the process is gone. */
	int	(*stop)(struct vmm *, vmm_done_cb, void *);
	/* SIGKILL now; `exited` follows.  The cgroup kill is the caller's. */
	int	(*kill)(struct vmm *);
	/* Asks the VMM what state the guest is in; not an operation. */
	int	(*status)(struct vmm *, vmm_status_cb, void *);
	pid_t	(*pid)(const struct vmm *);
	/* Forgets the VM: does not kill it (vmmd may be exiting). */
	void	(*free)(struct vmm *);
};

/* Every backend's vmm starts with this. */
struct vmm {
	const struct backend_ops	*ops;
};

static inline int
vmm_pause(struct vmm *v, vmm_done_cb cb, void *arg)
{
	return v->ops->pause(v, cb, arg);
}

static inline int
vmm_resume(struct vmm *v, vmm_done_cb cb, void *arg)
{
	return v->ops->resume(v, cb, arg);
}

static inline int
vmm_snapshot(struct vmm *v, const char *path, vmm_done_cb cb, void *arg)
{
	return v->ops->snapshot(v, path, cb, arg);
}

static inline int
vmm_save(struct vmm *v, const char *path, vmm_done_cb cb, void *arg)
{
	return v->ops->save(v, path, cb, arg);
}

static inline int
vmm_stop(struct vmm *v, vmm_done_cb cb, void *arg)
{
	return v->ops->stop(v, cb, arg);
}

static inline int
vmm_kill(struct vmm *v)
{
	return v->ops->kill(v);
}

static inline int
vmm_status(struct vmm *v, vmm_status_cb cb, void *arg)
{
	return v->ops->status(v, cb, arg);
}

static inline pid_t
vmm_pid(const struct vmm *v)
{
	return v->ops->pid(v);
}

static inline void
vmm_free(struct vmm *v)
{
	if (v != NULL)
		v->ops->free(v);
}

/* ---------- QEMU ---------- */

enum qemu_accel {
	QEMU_ACCEL_AUTO,	/* KVM when the VM uids can use it, else TCG */
	QEMU_ACCEL_KVM,
	QEMU_ACCEL_TCG,
};

struct qemu_conf {
	const char	*binary;	/* e.g. /usr/bin/qemu-system-x86_64 */
	enum qemu_accel	 accel;
	const char	*machine;	/* NULL: "q35" */
	int		 connect_ms;	/* QMP up after exec; 0: 10000 */
	int		 command_ms;	/* one QMP command; 0: 10000 */
	int		 migrate_ms;	/* one snapshot or restore; 0: 600000 */
	int		 stop_ms;	/* quit to exit, then SIGKILL; 0: 10000 */
	/*
	 * TCG translation cache in MiB; 0 keeps QEMU's default (1 GiB of
	 * address space, filled as code is translated).  Counts against the
	 * VM's memory cgroup, so size the two together.
	 */
	unsigned	 tcg_tb_mib;	/* QEMU_TCG_TB_MIB */
};

/*
 * vmmd's TCG translation cache: it fits in the VM cgroup's overhead
 * (vm_boot.c), and admission counts it as QEMU's own memory (admit.c).
 */
#define QEMU_TCG_TB_MIB		256

struct qemu_backend;

extern const struct backend_ops qemu_backend_ops;

/* Decides the accelerator once (and logs which, and why). */
struct qemu_backend *qemu_backend_new(struct event_base *,
	    struct worker_pool *, const struct qemu_conf *, char *err,
	    size_t errlen);
void	qemu_backend_free(struct qemu_backend *);
/* 1 when VMs get KVM, 0 for TCG. */
int	qemu_backend_kvm(const struct qemu_backend *);

/*
 * Can a VM uid open /dev/kvm?  Returns 1 (and the group QEMU needs as a
 * supplementary group in *gid, or -1 if none) or 0 with the reason.
 */
int	qemu_kvm_usable(gid_t *gid, char *why, size_t whylen);

/* QEMU's argv for spec, NULL-terminated, for exec and for tests. */
struct qemu_argv {
	char	**v;
	size_t	  n, cap;
};
int	qemu_build_argv(const struct qemu_conf *, const struct vm_spec *,
	    int kvm, int incoming, struct qemu_argv *);
void	qemu_argv_free(struct qemu_argv *);

#endif
