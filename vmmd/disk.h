/*
 * Per-VM files for vmmd: reflink clones of image disks (FICLONE), plain
 * copies of kernels, the reflink probe behind preflight, free space and
 * ownership.  The blocking functions run in worker threads (worker.h); the
 * _async variants do that for the caller.
 */
#ifndef VMMD_DISK_H
#define VMMD_DISK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct worker_pool;

/* Name of the file system holding path ("xfs", "ext4", ...), or "unknown". */
const char *disk_fs_name(const char *path);

/*
 * Creates two files in dir, clones one into the other with FICLONE and
 * removes both.  On failure err says why and how to fix it; `what` names
 * the directory for the operator (e.g. "state_dir").  Blocking.
 */
int	disk_reflink_probe(const char *dir, const char *what, char *err,
	    size_t errlen);

/*
 * Makes dst a reflink clone of src (same XFS or btrfs volume), mode 0600,
 * owned by uid:gid, fsynced.  dst must not exist.  The clone is built as
 * "<dst>.part" and renamed into place, so a crash never leaves a dst that
 * looks complete.  Blocking: call from a worker thread.
 */
int	disk_clone(const char *src, const char *dst, uid_t uid, gid_t gid,
	    char *err, size_t errlen);
/* Same contract as disk_clone with a plain byte copy (kernels, initrds). */
int	disk_copy(const char *src, const char *dst, uid_t uid, gid_t gid,
	    char *err, size_t errlen);
/* Bytes available to root and total size of the volume holding dir. */
int	disk_space(const char *dir, uint64_t *avail, uint64_t *total,
	    char *err, size_t errlen);
/* chown without following a symlink planted at path. */
int	disk_chown(const char *path, uid_t uid, gid_t gid, char *err,
	    size_t errlen);

/* rc is 0 or -1; err is empty on success and valid only during the call. */
typedef void (*disk_done_cb)(int rc, const char *err, void *arg);
int	disk_clone_async(struct worker_pool *, const char *src,
	    const char *dst, uid_t uid, gid_t gid, disk_done_cb cb, void *arg);
int	disk_copy_async(struct worker_pool *, const char *src,
	    const char *dst, uid_t uid, gid_t gid, disk_done_cb cb, void *arg);

#endif
