/*
 * VM storage limits as XFS project quotas or btrfs qgroups (see
 * quota.h).  quota_probe and quota_set_limits run in vmmd's main thread
 * at startup (vmmd.c's storage_quota_setup); quota_mkdir in its loop,
 * quota_assign and quota_settle in its loop and worker threads.
 */
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include <linux/btrfs.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/quota.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "errf.h"
#include "log.h"
#include "quota.h"

#define MIB	(1024ULL * 1024)

static atomic_int enabled, strict;
/* btrfs: each VM subvolume's referenced limit; 0: XFS projects. */
static _Atomic uint64_t subvol_bytes;

/* What quota_probe makes and removes in the VM directory on btrfs. */
#define PROBE_NAME	".mcpvm-quota-probe"
#define PROBE_LIMIT	MIB

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
	if (strcmp(fs, "btrfs") == 0 && state == ENOTSUP)
		snprintf(msg, msglen, "storage_quota: %s is on btrfs without "
		    "quotas: run `btrfs quota enable` on it once so that a "
		    "VM's QEMU cannot write past its reservation", dir);
	else if (strcmp(fs, "btrfs") == 0)
		snprintf(msg, msglen, "storage_quota: %s is on btrfs, but a "
		    "subvolume with a qgroup limit cannot be made there: %s: "
		    "a VM's QEMU can fill the volume", dir, strerror(state));
	else if (strcmp(fs, "xfs") != 0)
		snprintf(msg, msglen, "storage_quota: %s is on %s, where vmmd "
		    "sets no per-VM limit (only XFS project quotas and btrfs "
		    "qgroups are used): a VM's QEMU can fill the volume", dir,
		    fs);
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

/*
 * Makes name in the directory dfd a subvolume whose level-0 qgroup may
 * reference bytes.  The limit comes with the subvolume (the kernel
 * checks no capability for it, unlike BTRFS_IOC_QGROUP_LIMIT), so it is
 * there before any file is.  With quotas disabled the kernel makes the
 * subvolume and ignores the limit: quota_probe tells.
 */
static int
subvol_create(int dfd, const char *name, uint64_t bytes)
{
	struct btrfs_ioctl_vol_args_v2 va;
	struct btrfs_qgroup_inherit in;

	if (strlen(name) >= sizeof(va.name)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memset(&in, 0, sizeof(in));
	in.flags = BTRFS_QGROUP_INHERIT_SET_LIMITS;
	in.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
	in.lim.max_rfer = bytes;
	memset(&va, 0, sizeof(va));
	va.flags = BTRFS_SUBVOL_QGROUP_INHERIT;
	va.size = sizeof(in);
	va.qgroup_inherit = &in;
	strcpy(va.name, name);
	return ioctl(dfd, BTRFS_IOC_SUBVOL_CREATE_V2, &va);
}

static int
btrfs_probe(int dfd)
{
	static const size_t len = 8 * MIB;
	char *buf;
	size_t off = 0;
	ssize_t n = 0;
	int fd = -1, sfd, e;

	/* What a probe killed half-way left. */
	if ((sfd = openat(dfd, PROBE_NAME, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) != -1) {
		(void)unlinkat(sfd, "f", 0);
		close(sfd);
		(void)unlinkat(dfd, PROBE_NAME, AT_REMOVEDIR);
	}
	if ((buf = calloc(1, len)) == NULL)
		return ENOMEM;
	if (subvol_create(dfd, PROBE_NAME, PROBE_LIMIT) == -1) {
		e = errno;
		free(buf);
		return e;
	}
	/* 8 times the limit: refused on the way if it is enforced. */
	if ((sfd = openat(dfd, PROBE_NAME, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) != -1 && (fd = openat(sfd, "f",
	    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) != -1)
		while (off < len && (n = write(fd, buf + off, len - off)) > 0)
			off += (size_t)n;
	if (sfd == -1 || fd == -1 || n == -1)
		e = errno == EDQUOT ? 0 : errno;
	else
		e = ENOTSUP;
	if (fd != -1) {
		close(fd);
		(void)unlinkat(sfd, "f", 0);
	}
	if (sfd != -1)
		close(sfd);
	/* An empty subvolume goes with rmdir, without CAP_SYS_ADMIN. */
	if (unlinkat(dfd, PROBE_NAME, AT_REMOVEDIR) == -1 && e == 0)
		e = errno;
	free(buf);
	return e;
}

int
quota_probe(const char *dir)
{
	struct fs_quota_stat qs;
	struct statfs sf;
	int fd, e = 0;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return errno;
	if (fstatfs(fd, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC) {
		e = btrfs_probe(fd);
		close(fd);
		return e;
	}
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

void
quota_use_subvolumes(uint64_t bytes)
{
	atomic_store(&subvol_bytes, bytes);
}

int
quota_subvolumes(void)
{
	return quota_enabled() && atomic_load(&subvol_bytes) != 0;
}

int
quota_mkdir(const char *path, mode_t mode, uint32_t projid, char *err,
    size_t errlen)
{
	char parent[PATH_MAX], *name;
	int dfd, fd, rc = -1;

	if (!quota_subvolumes()) {
		if (mkdir(path, mode) == -1)
			return errf(err, errlen, "%s", strerror(errno));
		if (quota_assign_path(path, projid, err, errlen) == -1) {
			char why[256];

			snprintf(why, sizeof(why), "%s", err);
			return errf(err, errlen, "storage_quota: %s", why);
		}
		return 0;
	}
	if ((size_t)snprintf(parent, sizeof(parent), "%s", path) >=
	    sizeof(parent) || (name = strrchr(parent, '/')) == NULL ||
	    name == parent || name[1] == '\0')
		return errf(err, errlen, "%s: not a path vmmd makes", path);
	*name++ = '\0';
	if ((dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return errf(err, errlen, "%s: %s", parent, strerror(errno));
	if (subvol_create(dfd, name, atomic_load(&subvol_bytes)) == -1) {
		/* What a mkdir would have failed with too. */
		if (errno == EEXIST || errno == ENOSPC) {
			errf(err, errlen, "%s", strerror(errno));
			goto out;
		}
		if (atomic_load(&strict)) {
			errf(err, errlen, "storage_quota: a btrfs subvolume: "
			    "%s", strerror(errno));
			goto out;
		}
		/* storage_quota = auto: the VM goes on, as on a volume
		 * without quotas. */
		log_warn("storage_quota: %s: not made a btrfs subvolume, no "
		    "limit on its files", path);
		if (mkdir(path, mode) == -1)
			errf(err, errlen, "%s", strerror(errno));
		else
			rc = 0;
		goto out;
	}
	/* The kernel made it 0777 less the umask. */
	if ((fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1 || fchmod(fd, mode) == -1)
		errf(err, errlen, "%s: %s", path, strerror(errno));
	else
		rc = 0;
	if (fd != -1)
		close(fd);
out:
	close(dfd);
	return rc;
}

int
quota_settle(const char *dir, char *err, size_t errlen)
{
	__u64 transid = 0;
	int fd, rc = 0;

	if (!quota_subvolumes())
		return 0;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return errf(err, errlen, "%s: %s", dir, strerror(errno));
	/* No capability, and unlike syncfs no writeback of every dirty
	 * file of the volume first: only the commit. */
	if (ioctl(fd, BTRFS_IOC_START_SYNC, &transid) == -1 ||
	    ioctl(fd, BTRFS_IOC_WAIT_SYNC, &transid) == -1) {
		if (atomic_load(&strict))
			rc = errf(err, errlen, "storage_quota: %s: the btrfs "
			    "commit: %s", dir, strerror(errno));
		else
			log_warn("storage_quota: %s: the btrfs commit", dir);
	}
	close(fd);
	return rc;
}

int
quota_assign(int fd, uint32_t projid, char *err, size_t errlen)
{
	struct fsxattr fa;
	struct stat st;

	if (!quota_enabled() || atomic_load(&subvol_bytes) != 0)
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

	if (!quota_enabled() || atomic_load(&subvol_bytes) != 0)
		return 0;
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	rc = quota_assign(fd, projid, err, errlen);
	close(fd);
	return rc;
}
