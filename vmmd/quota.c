/*
 * VM storage limits as XFS project quotas (see quota.h).  quota_probe
 * and quota_set_limits run in vmmd's main thread at startup (vmmd.c's
 * storage_quota_setup); quota_assign in its loop and worker threads.
 */
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/quota.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "errf.h"
#include "log.h"
#include "quota.h"

#define MIB	(1024ULL * 1024)

static atomic_int enabled, strict;

uint64_t
quota_slot_bytes(uint64_t files_bytes, long long memory_mib)
{
	uint64_t mem;

	if (memory_mib < 0)
		memory_mib = 0;
	if (memory_mib > QUOTA_VM_MEMORY_MAX_MIB)
		memory_mib = QUOTA_VM_MEMORY_MAX_MIB;
	mem = (uint64_t)memory_mib * MIB;
	/*
	 * QEMU's migration stream carries 8 bytes of header per 4 KiB page
	 * (1/512) and the devices' state; 1/256 of each part and 64 MiB
	 * cover that and the blocks XFS preallocates past a file's end or
	 * for a copy-on-write of a cloned disk.
	 */
	return files_bytes + mem + (files_bytes >> 8) + (mem >> 8) + 64 * MIB;
}

enum quota_verdict
quota_decide(int mode, const char *fs, int state, const char *dir,
    char *msg, size_t msglen)
{
	if (msglen > 0)
		msg[0] = '\0';
	if (mode == CONF_QUOTA_OFF)
		return QUOTA_WITHOUT;
	if (state == 0)
		return QUOTA_ENFORCE;
	if (strcmp(fs, "xfs") != 0)
		snprintf(msg, msglen, "storage_quota: %s is on %s, where vmmd "
		    "sets no per-VM limit (only XFS project quotas are "
		    "used): a VM's QEMU can fill the volume", dir, fs);
	else if (state == ENOSYS)
		snprintf(msg, msglen, "storage_quota: %s is on XFS, but this "
		    "kernel's XFS has no quota support (CONFIG_XFS_QUOTA): a "
		    "VM's QEMU can fill the volume; a per-VM limit needs a "
		    "kernel with it and the mount option prjquota", dir);
	else if (state == ENOTSUP)
		snprintf(msg, msglen, "storage_quota: %s is on XFS mounted "
		    "without project quotas: add the mount option prjquota "
		    "(pquota) so that a VM's QEMU cannot write past its "
		    "reservation", dir);
	else
		snprintf(msg, msglen, "storage_quota: %s: the project quotas "
		    "cannot be used: %s", dir, strerror(state));
	return mode == CONF_QUOTA_REQUIRE ? QUOTA_REFUSE : QUOTA_WITHOUT;
}

/* quotactl_fd(2), Linux 5.14, which glibc 2.36 does not wrap. */
static int
qctl(int fd, int cmd, uint32_t id, void *addr)
{
#ifdef SYS_quotactl_fd
	return (int)syscall(SYS_quotactl_fd, fd, QCMD(cmd, PRJQUOTA), id,
	    addr);
#else
	errno = ENOSYS;
	return -1;
#endif
}

int
quota_probe(const char *dir)
{
	struct fs_quota_stat qs;
	int fd, e = 0;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return errno;
	memset(&qs, 0, sizeof(qs));
	if (qctl(fd, Q_XGETQSTAT, 0, &qs) == -1)
		e = errno == ESRCH ? ENOTSUP : errno;
	else if ((qs.qs_flags & FS_QUOTA_PDQ_ACCT) == 0 ||
	    (qs.qs_flags & FS_QUOTA_PDQ_ENFD) == 0)
		e = ENOTSUP;
	close(fd);
	return e;
}

int
quota_set_limits(const char *dir, uint32_t base, unsigned n, uint64_t bytes,
    char *err, size_t errlen)
{
	struct fs_disk_quota dq;
	int fd, rc = 0;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return errf(err, errlen, "%s: %s", dir, strerror(errno));
	for (unsigned i = 0; i < n && rc == 0; i++) {
		memset(&dq, 0, sizeof(dq));
		dq.d_version = FS_DQUOT_VERSION;
		dq.d_flags = FS_PROJ_QUOTA;
		dq.d_fieldmask = FS_DQ_BHARD | FS_DQ_BSOFT;
		dq.d_id = base + i;
		dq.d_blk_hardlimit = bytes / 512;	/* basic blocks */
		if (qctl(fd, Q_XSETQLIM, base + i, &dq) == -1)
			rc = errf(err, errlen, "%s: project %u's limit: %s",
			    dir, base + i, strerror(errno));
	}
	close(fd);
	return rc;
}

void
quota_enable(int on, int must)
{
	atomic_store(&enabled, on);
	atomic_store(&strict, must);
}

int
quota_enabled(void)
{
	return atomic_load(&enabled);
}

int
quota_assign(int fd, uint32_t projid, char *err, size_t errlen)
{
	struct fsxattr fa;
	struct stat st;

	if (!quota_enabled())
		return 0;
	/* An owner may change its file's project in the initial user
	 * namespace: no capability. */
	if (fstat(fd, &st) == 0 && ioctl(fd, FS_IOC_FSGETXATTR, &fa) == 0) {
		fa.fsx_projid = projid;
		if (S_ISDIR(st.st_mode))
			fa.fsx_xflags |= FS_XFLAG_PROJINHERIT;
		if (ioctl(fd, FS_IOC_FSSETXATTR, &fa) == 0)
			return 0;
	}
	if (atomic_load(&strict))
		return errf(err, errlen, "project %u: %s", projid,
		    strerror(errno));
	/* storage_quota = auto: the VM goes on, as on a volume without. */
	log_warn("storage_quota: project %u not set, no limit on its files",
	    projid);
	return 0;
}

int
quota_assign_path(const char *path, uint32_t projid, char *err,
    size_t errlen)
{
	int fd, rc;

	if (!quota_enabled())
		return 0;
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	rc = quota_assign(fd, projid, err, errlen);
	close(fd);
	return rc;
}
