/*
 * One cgroup per VM for vmmd, holding the VM's QEMU and vmproxy with memory,
 * CPU and PID limits.  Works on the unified (v2) hierarchy when it has the
 * controllers, and on the v1 layout (one hierarchy per controller, as on
 * hybrid hosts) otherwise.  The layout is detected once, at startup.
 */
#ifndef VMMD_CGROUP_H
#define VMMD_CGROUP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

enum cg_layout {
	CG_LAYOUT_NONE,
	CG_LAYOUT_V2,
	CG_LAYOUT_V1,
};

/* The v1 hierarchies a VM cgroup lives in. */
enum cg_ctrl {
	CG_MEMORY,
	CG_CPU,
	CG_PIDS,
	CG_FREEZER,	/* kill on v1: freeze, SIGKILL, thaw */
	CG_NCTRL,
};

#define CG_PARENT_MAX	64

struct cg_host {
	enum cg_layout	 layout;
	char		 v2[PATH_MAX];		/* cgroup2 mount, "" if none */
	int		 v2_has_ctrls;		/* memory, cpu, pids all there */
	/*
	 * v2: the cgroup the parent is made in: the mount itself, or a
	 * delegated one (cg_delegate): the holder unit's, or vmmd's own.  v2_ctrls has a bit
	 * (1 << CG_MEMORY, CG_CPU, CG_PIDS) for each controller v2_base has:
	 * cg_detect and cg_delegate insist on all three; only a test that
	 * builds a cg_host by hand, on a host whose controllers are bound to
	 * v1, has fewer, and then no limit of a missing one is written.
	 */
	char		 v2_base[PATH_MAX];
	unsigned	 v2_ctrls;
	int		 delegated;
	int		 daemon_inside;	/* delegated is vmmd's own cgroup */
	/*
	 * v1 with a holder unit (hybrid host under systemd): systemd tracks
	 * and kills a unit's processes in the unified hierarchy, so each VM
	 * also gets <v2_track>/<parent>/vm-N there; "" otherwise.
	 */
	char		 v2_track[PATH_MAX];
	char		 v1[CG_NCTRL][PATH_MAX]; /* v1 mounts, "" if missing */
	char		 parent[CG_PARENT_MAX];	/* e.g. "mcpvm" */
};

/* On a delegated v2 cgroup, vmmd (and its spawner) live in this leaf. */
#define CG_DAEMON_LEAF	"vmmd"
/* In the holder unit's cgroup (mcpvm-vms.service), vmhold lives here. */
#define CG_HOLDER_LEAF	"hold"

/* 0 in a field means no limit. */
struct cg_limits {
	uint64_t	memory_bytes;
	uint64_t	cpu_quota_us;	/* per cpu_period_us */
	uint64_t	cpu_period_us;	/* 0: 100000 */
	uint64_t	pids_max;
};

/* Paths prepared before fork, for cg_attach_apply in the child. */
struct cg_attach {
	unsigned	n;
	char		procs[CG_NCTRL + 1][PATH_MAX];	/* + v2_track's */
};

const char *cg_layout_name(enum cg_layout);
const char *cg_ctrl_name(enum cg_ctrl);

/*
 * Fills h from a mounts table (/proc/self/mounts format) and picks the
 * layout: v2 when the cgroup2 mount has memory, cpu and pids, else v1 when
 * every needed v1 hierarchy is mounted.  Otherwise err names what is
 * missing.  Exposed so tests can feed made-up tables.
 */
int	cg_detect_from(FILE *mounts, struct cg_host *h, const char *parent,
	    char *err, size_t errlen);
int	cg_detect(struct cg_host *h, const char *parent, char *err,
	    size_t errlen);

/*
 * A v2 cgroup was delegated (systemd's Delegate=yes, vmmd -D): the parent
 * is made inside it, never outside it.  Which one is holder's to say: a
 * path from the cgroup2 mount, that of the unit mcpvm-vms.service whose
 * process (vmhold) sits in CG_HOLDER_LEAF, so that the VMs outlive a
 * crash of vmmd's own unit; or "self" (NULL, ""): vmmd's own cgroup, read
 * from self (/proc/self/cgroup's format), which vmmd then leaves for
 * CG_DAEMON_LEAF.  Checks that the cgroup has the memory, cpu and pids
 * controllers.  On v1 (systemd delegates no freezer there) the parents
 * are made at the hierarchies' roots by cg_prepare with full privileges
 * (vmmd -P); with a holder unit each VM's processes also go into the
 * holder's cgroup of the unified hierarchy (v2_track), where a hybrid
 * host's systemd tracks units, and so they outlive vmmd's unit there too.
 */
/* The cgroup2 path ("0::" line) of a /proc/PID/cgroup; 0, or -1. */
int	cg_own_from(FILE *self, char *buf, size_t len);
int	cg_delegate_from(struct cg_host *h, FILE *self, const char *holder,
	    char *err, size_t errlen);
int	cg_delegate(struct cg_host *h, const char *holder, char *err,
	    size_t errlen);

/*
 * Makes the parent cgroup (and, on v2, delegates the controllers to it).
 * Idempotent.  On v1 a hierarchy's root is mode 0555, so only a root with
 * CAP_DAC_OVERRIDE can make the parent there: `vmmd -P` does it before
 * vmmd starts without that capability (the unit's ExecStartPre=+ and
 * packaging/dev/up both run it), and vmmd calls it again at startup,
 * which then finds everything made.  On vmmd's own delegated v2 cgroup it
 * first moves the calling process into <own cgroup>/CG_DAEMON_LEAF, since a
 * cgroup that hands controllers to its children may hold no process: call
 * it before any thread or child is made.
 */
int	cg_prepare(const struct cg_host *, char *err, size_t errlen);
/* Creates (or reuses) <parent>/vm-<slot> everywhere and sets the limits. */
int	cg_create(const struct cg_host *, unsigned slot,
	    const struct cg_limits *, char *err, size_t errlen);
/* Path of the VM's cgroup in hierarchy c (v2: c is ignored). */
int	cg_path(const struct cg_host *, unsigned slot, enum cg_ctrl c,
	    char *buf, size_t len);

int	cg_attach_prepare(const struct cg_host *, unsigned slot,
	    struct cg_attach *);
/* Moves the calling process in: only open/write/close, safe after fork. */
int	cg_attach_apply(const struct cg_attach *);
int	cg_attach_pid(const struct cg_host *, unsigned slot, pid_t pid,
	    char *err, size_t errlen);

/* Processes in the VM's cgroup; returns how many (may exceed max) or -1. */
ssize_t	cg_procs(const struct cg_host *, unsigned slot, pid_t *pids,
	    size_t max);
/*
 * Kills every process in the cgroup, setsid descendants included, and
 * waits (at most a few seconds) until it is empty.  Blocking; a missing
 * cgroup counts as empty.  Processes that are our own children remain
 * zombies until the caller reaps them; they no longer count.
 */
int	cg_kill(const struct cg_host *, unsigned slot, char *err,
	    size_t errlen);
/* cg_kill then cg_remove in a worker thread; cb runs in the loop thread
 * with rc 0 or -1 and a message valid only during the call. */
struct worker_pool;
int	cg_destroy_async(struct worker_pool *, const struct cg_host *,
	    unsigned slot, void (*cb)(int rc, const char *err, void *arg),
	    void *arg);
/* Removes the (empty) cgroup everywhere; a missing one is not an error. */
int	cg_remove(const struct cg_host *, unsigned slot, char *err,
	    size_t errlen);
/* Removes the parent in every hierarchy if it is empty (tests, uninstall). */
void	cg_remove_parent(const struct cg_host *);
/*
 * Slots that have a vm-<slot> cgroup in any hierarchy, sorted, for crash
 * recovery.  Returns how many were found (may exceed max) or -1.
 */
ssize_t	cg_list(const struct cg_host *, unsigned *slots, size_t max);

#endif
