/*
 * vmmd's snapshots (snapshot.c): making, listing and deleting them; their
 * files on disk are snapshot_files.h's.  Private to vmmd's daemon.
 */
#ifndef VMMD_SNAPSHOT_H
#define VMMD_SNAPSHOT_H

#include <stddef.h>

#include "snapshot_files.h"
#include "vmmd_shared.h"

/* A snapshot's files are still being finished: vmmd does not exit yet. */
int	snap_work_pending(void);

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
/*
 * vm_run's commit (run.c): a disk-only snapshot of vm, a running VM,
 * named name, checked, admitted and made as vm_snapshot's with memory
 * false for req's workspace, but told to done instead of replied to req:
 * done(r, NULL, NULL, arg) once it is ready, or done(NULL, code, msg,
 * arg); once either way, possibly before snap_commit returns.
 */
typedef void (*snap_commit_cb)(const struct snap_record *, const char *code,
	    const char *msg, void *arg);
void	snap_commit(struct request *, struct vm *, const char *name,
	    snap_commit_cb, void *arg);

#endif
