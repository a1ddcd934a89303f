/*
 * vmmd's snapshots (snapshot.c): making, listing, deleting, the checks
 * before a VM is created from one, and what startup settles.  Private to
 * vmmd's daemon.
 */
#ifndef VMMD_SNAPSHOT_H
#define VMMD_SNAPSHOT_H

#include <stddef.h>

#include "vmmd_shared.h"

/* At startup, once the store is open and before any VM: see snapshot.c. */
void	snap_init(void);
/* A snapshot's files are still being finished: vmmd does not exit yet. */
int	snap_work_pending(void);
/* Bytes all snapshots hold, and the workspace's bytes and count. */
void	snap_usage(const char *workspace, long long *host_bytes,
	    long long *ws_bytes, long long *ws_count);
/* The workspace's ready snapshot id into *r; -1 for any other. */
int	snap_find_owned(const char *id, const char *workspace,
	    struct snap_record *r);
/* The path of its disk.raw, or (memory) its memory.bin. */
void	snap_file(const struct snap_record *, int memory, char *buf,
	    size_t len);
/*
 * Checks a snapshot's files against its manifest and record on the
 * worker pool: the manifest itself, the image it was made with, the
 * disk's size, and the memory file's size and SHA-256.  cb on the loop;
 * err names the file that is wrong.  -1: not queued.
 */
typedef void (*snap_verify_cb)(int rc, const char *err, void *arg);
int	snap_verify_async(const struct snap_record *,
	    const struct conf_image *, snap_verify_cb, void *);

/* The tools (tools.c's table). */
void	tool_vm_snapshot(struct request *);
void	tool_vm_snapshot_list(struct request *);
void	tool_vm_snapshot_delete(struct request *);

/* vmctl (control.c). */
void	snap_ctl_list(struct request *, const char *workspace_or_null);
void	snap_ctl_delete(struct request *, const char *id);

/*
 * Making one, for vm_snapshot and vm_fork (fork.c): check that vm can be
 * snapshotted (0, or an error reply and -1), then start it, already
 * admitted.  made (NULL: reply with the snapshot) runs once it is
 * complete, with when the source ran on; a failure is replied to req, and
 * made's arg freed.  hidden: recorded as 'fork', never listed.  -1: failed
 * at once, replied, arg still the caller's.
 */
int	snap_make_check(struct request *, struct vm *, int memory);
typedef void (*snap_made_cb)(const struct snap_record *,
	    long long cont_wall_ms, void *arg);
int	snap_make_begin(struct request *, struct vm *, const char *name,
	    int memory, int hidden, snap_made_cb, void *arg);
/* The warm pool's (warmpool.c): see snapshot.c. */
typedef void (*snap_failed_cb)(const char *why, void *arg);
int	snap_make_pool(struct request *, struct vm *, const char *key,
	    snap_made_cb, snap_failed_cb, void *arg);
int	snap_take(struct snap_record *);
/* Renamed away, its row dropped, its files removed on the worker pool. */
int	snap_delete(const struct snap_record *, char *err, size_t errlen);

/*
 * snapshot_revoke.c: a workspace's snapshots go with it.  The event and
 * subscription callbacks of vmmd's authclient; and, from snap_finished,
 * 1 when r became ready after its workspace was revoked (and is now
 * deleted, audited), else 0.
 */
void	snap_revoke_event(const char *ws, const char *credential_id,
	    const char *reason, void *arg);
void	snap_revoke_subscribed(void *arg);
int	snap_revoke_made(const struct snap_record *r);

/* fork.c: vm_fork (tools.c's table). */
void	tool_vm_fork(struct request *);
/* Job copies of forks still on the worker pool (vmmd_pending_register). */
int	fork_work_pending(void);

/*
 * admit.c: a snapshot of bytes more, against the same limits as a VM's (and,
 * counted, against max_snapshots_per_workspace); n new VMs at once.
 */
int	snap_admit(const struct request *, long long bytes, int counted,
	    char *code, size_t codelen, char *msg, size_t msglen);
int	vm_admit_n(const struct request *, const struct conf_image *,
	    int vcpus, int memory_mib, int n, char *code, size_t, char *msg,
	    size_t);

#endif
