/*
 * Per-VM disks and kernels for vmmd (see disk.h).  Runs in vmmd's worker
 * threads: nothing here touches the event loop.
 */
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include <linux/fs.h>
#include <linux/magic.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk.h"
#include "util.h"
#include "worker.h"

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC		0x58465342
#endif
#ifndef OVERLAYFS_SUPER_MAGIC
#define OVERLAYFS_SUPER_MAGIC	0x794c7630
#endif

#define COPY_CHUNK	(1024 * 1024)

static const struct {
	unsigned long	 magic;
	const char	*name;
} fs_names[] = {
	{ XFS_SUPER_MAGIC,	"xfs" },
	{ BTRFS_SUPER_MAGIC,	"btrfs" },
	{ EXT4_SUPER_MAGIC,	"ext4" },	/* also ext2 and ext3 */
	{ TMPFS_MAGIC,		"tmpfs" },
	{ OVERLAYFS_SUPER_MAGIC, "overlayfs" },
	{ NFS_SUPER_MAGIC,	"nfs" },
	{ 0x2fc12fc1,		"zfs" },
	{ 0xf2f52010,		"f2fs" },
	{ 0xca451a4e,		"bcachefs" },
};

static const char *
fs_name_of(unsigned long magic)
{
	size_t i;

	for (i = 0; i < sizeof(fs_names) / sizeof(fs_names[0]); i++)
		if (fs_names[i].magic == magic)
			return fs_names[i].name;
	return "unknown";
}

const char *
disk_fs_name(const char *path)
{
	struct statfs sf;

	if (statfs(path, &sf) == -1)
		return "unknown";
	return fs_name_of((unsigned long)sf.f_type);
}

/* Explains a failed FICLONE on the volume holding dir. */
static int
reflink_error(int e, const char *dir, const char *what, char *err,
    size_t errlen)
{
	struct statfs sf;
	unsigned long magic = 0;

	if (statfs(dir, &sf) == 0)
		magic = (unsigned long)sf.f_type;
	if (e == EXDEV)
		return errf(err, errlen, "%s %s: image and clone are on "
		    "different file systems; a reflink needs both on the same "
		    "XFS or btrfs volume", what, dir);
	if (e != EOPNOTSUPP && e != EINVAL && e != ENOTTY)
		return errf(err, errlen, "%s %s: reflink clone: %s", what, dir,
		    strerror(e));
	if (magic == XFS_SUPER_MAGIC)
		return errf(err, errlen, "%s %s is on XFS made without reflink "
		    "support (xfs_info shows reflink=0): recreate the volume "
		    "with mkfs.xfs -m reflink=1", what, dir);
	return errf(err, errlen, "%s %s is on %s, which cannot reflink: put it "
	    "on XFS (mkfs.xfs -m reflink=1) or btrfs", what, dir,
	    fs_name_of(magic));
}

int
disk_reflink_probe(const char *dir, const char *what, char *err,
    size_t errlen)
{
	char a[PATH_MAX], b[PATH_MAX];
	static const char data[4096] = "mcpvm reflink probe";
	int fa = -1, fb = -1, rc = -1;

	if (snprintf(a, sizeof(a), "%s/.mcpvm-probe-XXXXXX", dir) >=
	    (int)sizeof(a))
		return errf(err, errlen, "%s %s: path too long", what, dir);
	strcpy(b, a);
	if ((fa = mkostemp(a, O_CLOEXEC)) == -1) {
		errf(err, errlen, "%s %s: cannot create a file there: %s",
		    what, dir, strerror(errno));
		goto out;
	}
	if ((fb = mkostemp(b, O_CLOEXEC)) == -1) {
		errf(err, errlen, "%s %s: cannot create a file there: %s",
		    what, dir, strerror(errno));
		goto out;
	}
	/* One block, so a file system that clones only extents has one. */
	if (write(fa, data, sizeof(data)) != (ssize_t)sizeof(data) ||
	    fsync(fa) == -1) {
		errf(err, errlen, "%s %s: write: %s", what, dir,
		    strerror(errno));
		goto out;
	}
	if (ioctl(fb, FICLONE, fa) == -1) {
		reflink_error(errno, dir, what, err, errlen);
		goto out;
	}
	rc = 0;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
out:
	if (fa != -1) {
		close(fa);
		unlink(a);
	}
	if (fb != -1) {
		close(fb);
		unlink(b);
	}
	return rc;
}

/* fsync the directory holding path, so a rename or create is durable. */
static int
fsync_parent(const char *path)
{
	char dir[PATH_MAX];
	char *slash;
	int fd, rc;

	if (strlen(path) >= sizeof(dir))
		return -1;
	strcpy(dir, path);
	if ((slash = strrchr(dir, '/')) == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

static int
plain_copy(int in, int out)
{
	char *buf;
	ssize_t n, w, off;
	int rc = -1;

	if ((buf = malloc(COPY_CHUNK)) == NULL)
		return -1;
	for (;;) {
		n = read(in, buf, COPY_CHUNK);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			goto out;
		if (n == 0)
			break;
		for (off = 0; off < n; off += w) {
			w = write(out, buf + off, (size_t)(n - off));
			if (w == -1 && errno == EINTR) {
				w = 0;
				continue;
			}
			if (w == -1)
				goto out;
		}
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

/* The common body of disk_clone and disk_copy. */
static int
make_copy(const char *src, const char *dst, uid_t uid, gid_t gid, int reflink,
    char *err, size_t errlen)
{
	char part[PATH_MAX], dir[PATH_MAX], *slash;
	struct stat st;
	int in = -1, out = -1, rc = -1, e;

	if (snprintf(part, sizeof(part), "%s.part", dst) >= (int)sizeof(part))
		return errf(err, errlen, "%s: path too long", dst);
	if ((in = open(src, O_RDONLY | O_CLOEXEC)) == -1)
		return errf(err, errlen, "%s: %s", src, strerror(errno));
	if (fstat(in, &st) == -1 || !S_ISREG(st.st_mode)) {
		errf(err, errlen, "%s: not a regular file", src);
		goto out;
	}
	if (access(dst, F_OK) == 0) {
		errf(err, errlen, "%s: already exists", dst);
		goto out;
	}
	/* A .part file is debris of an earlier crash: it was never renamed. */
	unlink(part);
	out = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (out == -1) {
		errf(err, errlen, "%s: %s", part, strerror(errno));
		goto out;
	}
	if (reflink) {
		if (ioctl(out, FICLONE, in) == -1) {
			e = errno;
			strcpy(dir, dst);
			if ((slash = strrchr(dir, '/')) != NULL && slash != dir)
				*slash = '\0';
			reflink_error(e, dir, "disk clone", err, errlen);
			goto out;
		}
	} else if (plain_copy(in, out) == -1) {
		errf(err, errlen, "copy %s to %s: %s", src, part,
		    strerror(errno));
		goto out;
	}
	/* The mode while the file is still vmmd's: changing a file of the
	 * VM's uid would take CAP_FOWNER, which vmmd does not keep. */
	if (fchmod(out, 0600) == -1 || fchown(out, uid, gid) == -1) {
		errf(err, errlen, "%s: chown: %s", part, strerror(errno));
		goto out;
	}
	if (fsync(out) == -1) {
		errf(err, errlen, "%s: fsync: %s", part, strerror(errno));
		goto out;
	}
	/* NOREPLACE: a disk that appeared meanwhile is never overwritten. */
	if (renameat2(AT_FDCWD, part, AT_FDCWD, dst, RENAME_NOREPLACE) == -1) {
		errf(err, errlen, "rename %s: %s", dst, strerror(errno));
		goto out;
	}
	if (fsync_parent(dst) == -1) {
		errf(err, errlen, "%s: fsync directory: %s", dst,
		    strerror(errno));
		unlink(dst);
		goto out;
	}
	rc = 0;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
out:
	if (out != -1) {
		close(out);
		if (rc == -1)
			unlink(part);
	}
	close(in);
	return rc;
}

int
disk_clone(const char *src, const char *dst, uid_t uid, gid_t gid, char *err,
    size_t errlen)
{
	return make_copy(src, dst, uid, gid, 1, err, errlen);
}

int
disk_copy(const char *src, const char *dst, uid_t uid, gid_t gid, char *err,
    size_t errlen)
{
	return make_copy(src, dst, uid, gid, 0, err, errlen);
}

int
disk_space(const char *dir, uint64_t *avail, uint64_t *total, char *err,
    size_t errlen)
{
	struct statvfs sv;

	if (statvfs(dir, &sv) == -1)
		return errf(err, errlen, "%s: statvfs: %s", dir,
		    strerror(errno));
	/* f_bavail: what an unprivileged writer (QEMU as the VM uid) gets. */
	if (avail != NULL)
		*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (total != NULL)
		*total = (uint64_t)sv.f_blocks * sv.f_frsize;
	return 0;
}

int
disk_chown(const char *path, uid_t uid, gid_t gid, char *err, size_t errlen)
{
	if (fchownat(AT_FDCWD, path, uid, gid, AT_SYMLINK_NOFOLLOW) == -1)
		return errf(err, errlen, "%s: chown: %s", path,
		    strerror(errno));
	return 0;
}

/*
 * A test's failpoint: MCPVM_TEST_DISK_DELAY_MS holds every disk job on its
 * worker thread that long first, so that a test can act while a create's
 * disk is still being made (a reflink clone is otherwise over in
 * milliseconds).  Read once, on the loop; 0 (unset) in production.
 */
static long
disk_test_delay_ms(void)
{
	static long ms = -1;
	const char *v;
	char *end;

	if (ms == -1) {
		ms = 0;
		if ((v = getenv("MCPVM_TEST_DISK_DELAY_MS")) != NULL) {
			errno = 0;
			ms = strtol(v, &end, 10);
			if (errno != 0 || *end != '\0' || ms < 0 ||
			    ms > 600000)
				ms = 0;
		}
	}
	return ms;
}

struct disk_job {
	char		*src, *dst;
	long		 delay_ms;
	uid_t		 uid;
	gid_t		 gid;
	int		 reflink;
	int		 rc;
	char		 err[512];
	disk_done_cb	 cb;
	void		*arg;
};

static void
disk_job_run(void *arg)
{
	struct disk_job *j = arg;

	if (j->delay_ms > 0)
		usleep((useconds_t)j->delay_ms * 1000);
	j->rc = make_copy(j->src, j->dst, j->uid, j->gid, j->reflink, j->err,
	    sizeof(j->err));
}

static void
disk_job_done(void *arg)
{
	struct disk_job *j = arg;

	j->cb(j->rc, j->err, j->arg);
	free(j->src);
	free(j->dst);
	free(j);
}

static int
submit(struct worker_pool *wp, const char *src, const char *dst, uid_t uid,
    gid_t gid, int reflink, disk_done_cb cb, void *arg)
{
	struct disk_job *j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		return -1;
	j->src = strdup(src);
	j->dst = strdup(dst);
	if (j->src == NULL || j->dst == NULL)
		goto fail;
	j->uid = uid;
	j->gid = gid;
	j->reflink = reflink;
	j->delay_ms = disk_test_delay_ms();
	j->cb = cb;
	j->arg = arg;
	if (worker_submit(wp, disk_job_run, disk_job_done, j) == -1)
		goto fail;
	return 0;
fail:
	free(j->src);
	free(j->dst);
	free(j);
	return -1;
}

int
disk_clone_async(struct worker_pool *wp, const char *src, const char *dst,
    uid_t uid, gid_t gid, disk_done_cb cb, void *arg)
{
	return submit(wp, src, dst, uid, gid, 1, cb, arg);
}

int
disk_copy_async(struct worker_pool *wp, const char *src, const char *dst,
    uid_t uid, gid_t gid, disk_done_cb cb, void *arg)
{
	return submit(wp, src, dst, uid, gid, 0, cb, arg);
}
