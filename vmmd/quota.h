/*
 * Each VM's share of the state volume (storage_quota, vmmd(8)): every VM
 * directory is an XFS project whose id is the VM's uid, with a hard block
 * limit, so that QEMU and vmproxy cannot write past their VM's reservation
 * through disk.raw, a checkpoint or a memory file's descriptor.
 * quota_set_limits runs once at startup, while vmmd still holds
 * CAP_SYS_ADMIN; the rest needs no capability.
 */
#ifndef VMMD_QUOTA_H
#define VMMD_QUOTA_H

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
 * (disk_fs_name), state 0 when its project quotas are enforced, else the
 * errno of the probe (ENOTSUP: mounted without prjquota).  msg says why
 * when the verdict is not QUOTA_ENFORCE and mode is not off.
 */
enum quota_verdict quota_decide(int mode, const char *fs, int state,
	    const char *dir, char *msg, size_t msglen);

/* 0 when dir's volume enforces project quotas, else an errno. */
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
 * Makes fd (a directory or a file vmmd owns) part of project projid; a
 * directory also passes it to everything made in it.  No-op when quotas
 * are off; a failure is logged and ignored unless strict.
 */
int	quota_assign(int fd, uint32_t projid, char *err, size_t errlen);
int	quota_assign_path(const char *path, uint32_t projid, char *err,
	    size_t errlen);

#endif
