/*
 * Each VM's share of the state volume (storage_quota, vmmd(8)), so that
 * QEMU and vmproxy cannot write past their VM's reservation through
 * disk.raw, a checkpoint or a memory file's descriptor.  On XFS every VM
 * directory is a project whose id is the VM's uid, with a hard block
 * limit: quota_set_limits runs once at startup, while vmmd still holds
 * CAP_SYS_ADMIN.  On btrfs every VM directory is a subvolume whose qgroup
 * gets its referenced limit as the subvolume is made.  The rest needs no
 * capability.
 */
#ifndef VMMD_QUOTA_H
#define VMMD_QUOTA_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

/* tools.json's largest memory_mib for one VM. */
#define QUOTA_VM_MEMORY_MAX_MIB	16384

/*
 * The hard limit of a VM's project: its largest files (disk, kernel and
 * initrd of the largest image), its memory once (a checkpoint or a
 * snapshot's memory file, with QEMU's stream headers), and a margin for
 * XFS's preallocation.
 */
uint64_t quota_slot_bytes(uint64_t files_bytes, long long memory_mib);

/* What storage_quota and the volume decide: enforce, go on without, stop. */
enum quota_verdict { QUOTA_ENFORCE, QUOTA_WITHOUT, QUOTA_REFUSE };

/*
 * mode is enum conf_storage_quota; fs is the volume's file system name
 * (disk_fs_name), state 0 when its quotas are enforced, else the errno of
 * the probe (ENOTSUP: XFS mounted without prjquota, btrfs without quotas
 * enabled).  msg says why when the verdict is not QUOTA_ENFORCE and mode
 * is not off.
 */
enum quota_verdict quota_decide(int mode, const char *fs, int state,
	    const char *dir, char *msg, size_t msglen);

/*
 * 0 when dir's volume enforces project quotas (XFS) or qgroup limits
 * (btrfs), else an errno.  On btrfs it makes and removes a subvolume
 * limited to 1 MiB in dir, and a write of 8 MiB there must fail with
 * EDQUOT: the very calls a VM directory takes, with this process's
 * capabilities.
 */
int	quota_probe(const char *dir);

/*
 * Sets the hard limit of projects base .. base + n - 1 to bytes each.
 * Needs CAP_SYS_ADMIN: called before vmmd drops it.
 */
int	quota_set_limits(const char *dir, uint32_t base, unsigned n,
	    uint64_t bytes, char *err, size_t errlen);

/*
 * Whether VM directories are made projects (set once, at startup), and
 * whether a failure to make one fails the VM (storage_quota = require).
 */
void	quota_enable(int on, int strict);
int	quota_enabled(void);

/*
 * On btrfs (after quota_enable): VM directories are subvolumes whose
 * qgroup may reference bytes, their slot's quota_slot_bytes.
 */
void	quota_use_subvolumes(uint64_t bytes);
/* Whether VM directories are subvolumes, each limited (btrfs). */
int	quota_subvolumes(void);

/*
 * Makes a VM's directory, path, with mode.  With subvolumes, a subvolume
 * whose qgroup's referenced limit is set as it is made
 * (BTRFS_QGROUP_INHERIT_SET_LIMITS, which takes no capability); else a
 * directory made project projid (quota_assign).  err says what failed,
 * "storage_quota: " first when it is the limit; with storage_quota =
 * auto a subvolume the kernel refuses is logged and a plain directory
 * made instead.
 */
int	quota_mkdir(const char *path, mode_t mode, uint32_t projid,
	    char *err, size_t errlen);

/*
 * With subvolumes: commits the volume's transaction, so that the extents
 * cloned into dir's subvolume count against its limit before its VM's
 * QEMU starts (btrfs accounts shared extents at a commit, and until then
 * the VM could write its whole limit beside them).  Else a no-op.
 */
int	quota_settle(const char *dir, char *err, size_t errlen);

/*
 * Makes fd (a directory or a file vmmd owns) part of project projid; a
 * directory also passes it to everything made in it.  No-op when quotas
 * are off or VM directories are subvolumes (a file counts against the
 * subvolume it is in); a failure is logged and ignored unless strict.
 */
int	quota_assign(int fd, uint32_t projid, char *err, size_t errlen);
int	quota_assign_path(const char *path, uint32_t projid, char *err,
	    size_t errlen);

#endif
