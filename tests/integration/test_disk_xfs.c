/*
 * Integration tests of vmmd's disks on a real, loop-mounted XFS volume the
 * test makes (mkfs.xfs -m reflink=1) in a private mount namespace, so the
 * mount dies with the test however it ends: reflink clones share extents,
 * copies do not, ownership and modes are the VM's, and file systems that
 * cannot reflink are refused with a message saying how to fix it.  A VM
 * directory made an XFS project passes it to the clones made in it, and
 * clones out of it and memory files given to a project and back work.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <linux/fiemap.h>
#include <linux/fs.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "disk.h"
#include "itest.h"
#include "log.h"
#include "quota.h"
#include "worker.h"
#include "../check_run.h"

#define IMG_MIB	64

static char tmp[] = "/tmp/mcpvm-xfs-XXXXXX";
static char mnt[256], mnt0[256], tmpfs[256];
static uid_t vm_uid;

static int
make_xfs(const char *img, const char *dir, const char *reflink)
{
	char *mkfs[] = { "mkfs.xfs", "-q", "-f", "-m", (char *)reflink,
	    (char *)img, NULL };

	return itest_loop_volume(img, dir, mkfs);
}

/* Runs once, in the parent: the volumes outlive each forked test. */
static void
volumes_up(void)
{
	char img[300];

	log_init("test_disk_xfs", 1, 0);
	vm_uid = itest_free_uid(3900000);
	if (mkdtemp(tmp) == NULL)
		abort();
	snprintf(mnt, sizeof(mnt), "%s/xfs", tmp);
	snprintf(img, sizeof(img), "%s/xfs.img", tmp);
	if (make_xfs(img, mnt, "reflink=1") == -1) {
		fprintf(stderr, "cannot make the reflink XFS volume\n");
		exit(1);
	}
	snprintf(mnt0, sizeof(mnt0), "%s/xfs0", tmp);
	snprintf(img, sizeof(img), "%s/xfs0.img", tmp);
	if (make_xfs(img, mnt0, "reflink=0") == -1) {
		fprintf(stderr, "cannot make the XFS volume without reflink\n");
		exit(1);
	}
	snprintf(tmpfs, sizeof(tmpfs), "%s/tmpfs", tmp);
	if (mkdir(tmpfs, 0755) == -1 ||
	    mount("tmpfs", tmpfs, "tmpfs", 0, "size=16m") == -1) {
		fprintf(stderr, "cannot mount tmpfs\n");
		exit(1);
	}
}

static void
volumes_down(void)
{
	umount2(mnt, MNT_DETACH);
	umount2(mnt0, MNT_DETACH);
	umount2(tmpfs, MNT_DETACH);
	itest_rmtree(tmp);
}

/* Writes mib MiB of varied data to path. */
static void
make_image(const char *path, size_t mib)
{
	ck_assert_int_eq(itest_write_file(path, mib), 0);
}

/* Counts bytes in extents with and without FIEMAP_EXTENT_SHARED. */
static void
extents(const char *path, uint64_t *shared, uint64_t *own)
{
	struct fiemap *fm;
	size_t sz = sizeof(*fm) + 256 * sizeof(struct fiemap_extent);
	uint64_t start = 0;
	unsigned i;
	int fd, last = 0;

	*shared = *own = 0;
	fm = calloc(1, sz);
	ck_assert_ptr_nonnull(fm);
	fd = open(path, O_RDONLY);
	ck_assert_int_ne(fd, -1);
	while (!last) {
		memset(fm, 0, sz);
		fm->fm_start = start;
		fm->fm_length = FIEMAP_MAX_OFFSET;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = 256;
		ck_assert_int_eq(ioctl(fd, FS_IOC_FIEMAP, fm), 0);
		if (fm->fm_mapped_extents == 0)
			break;
		for (i = 0; i < fm->fm_mapped_extents; i++) {
			struct fiemap_extent *e = &fm->fm_extents[i];

			if (e->fe_flags & FIEMAP_EXTENT_SHARED)
				*shared += e->fe_length;
			else
				*own += e->fe_length;
			if (e->fe_flags & FIEMAP_EXTENT_LAST)
				last = 1;
			start = e->fe_logical + e->fe_length;
		}
	}
	close(fd);
	free(fm);
}

START_TEST(probe_passes_on_reflink_xfs)
{
	char err[512] = "x";

	ck_assert_str_eq(disk_fs_name(mnt), "xfs");
	ck_assert_msg(disk_reflink_probe(mnt, "state_dir", err, sizeof(err)) ==
	    0, "%s", err);
	ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(probe_refuses_tmpfs_and_xfs_without_reflink)
{
	char err[512], want[512];

	ck_assert_int_eq(disk_reflink_probe(tmpfs, "state_dir", err,
	    sizeof(err)), -1);
	snprintf(want, sizeof(want), "state_dir %s is on tmpfs, which cannot "
	    "reflink: put it on XFS (mkfs.xfs -m reflink=1) or btrfs", tmpfs);
	ck_assert_str_eq(err, want);
	ck_assert_int_eq(disk_reflink_probe(mnt0, "state_dir", err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "mkfs.xfs -m reflink=1") != NULL &&
	    strstr(err, "reflink=0") != NULL, "%s", err);
	/* The probe leaves nothing behind. */
	{
		char *ls[] = { "sh", "-c", NULL, NULL };
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s | grep -v "
		    "lost+found)\"", tmpfs);
		ls[2] = cmd;
		ck_assert_int_eq(itest_run(ls), 0);
	}
}
END_TEST

START_TEST(clone_shares_extents)
{
	char src[300], dst[300], err[512];
	uint64_t shared, own, before, after;
	struct stat st;
	int fd;

	snprintf(src, sizeof(src), "%s/image.raw", mnt);
	snprintf(dst, sizeof(dst), "%s/vm-1.raw", mnt);
	make_image(src, IMG_MIB);
	ck_assert_int_eq(disk_space(mnt, &before, NULL, err, sizeof(err)), 0);
	ck_assert_msg(disk_clone(src, dst, vm_uid, vm_uid, err, sizeof(err)) ==
	    0, "%s", err);
	ck_assert_int_eq(disk_space(mnt, &after, NULL, err, sizeof(err)), 0);
	/* A 64 MiB copy would take 64 MiB; a clone takes metadata only. */
	ck_assert_uint_lt(before - after, 4 << 20);
	ck_assert_int_eq(stat(dst, &st), 0);
	ck_assert_int_eq(st.st_uid, vm_uid);
	ck_assert_int_eq(st.st_gid, vm_uid);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(st.st_size, (off_t)IMG_MIB << 20);
	ck_assert(itest_same_content(src, dst));
	extents(dst, &shared, &own);
	ck_assert_uint_eq(shared, (uint64_t)IMG_MIB << 20);
	ck_assert_uint_eq(own, 0);
	/* Copy on write: the guest's writes never reach the image. */
	fd = open(dst, O_WRONLY);
	ck_assert_int_eq(pwrite(fd, "guest", 5, 4096), 5);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	ck_assert(!itest_same_content(src, dst));
	extents(dst, &shared, &own);
	ck_assert_uint_gt(own, 0);
	/* An existing disk is never overwritten. */
	ck_assert_int_eq(disk_clone(src, dst, vm_uid, vm_uid, err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "already exists") != NULL, "%s", err);
	{
		char part[320];

		snprintf(part, sizeof(part), "%s.part", dst);
		ck_assert_int_eq(access(part, F_OK), -1);
	}
}
END_TEST

START_TEST(clone_refused_across_volumes_and_on_tmpfs)
{
	char src[300], dst[300], err[512];

	snprintf(src, sizeof(src), "%s/image.raw", mnt);
	make_image(src, 1);
	snprintf(dst, sizeof(dst), "%s/vm-2.raw", mnt0);
	ck_assert_int_eq(disk_clone(src, dst, vm_uid, vm_uid, err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "same XFS or btrfs volume") != NULL, "%s",
	    err);
	ck_assert_int_eq(access(dst, F_OK), -1);
	snprintf(src, sizeof(src), "%s/image.raw", tmpfs);
	snprintf(dst, sizeof(dst), "%s/vm-2.raw", tmpfs);
	make_image(src, 1);
	ck_assert_int_eq(disk_clone(src, dst, vm_uid, vm_uid, err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "tmpfs, which cannot reflink") != NULL, "%s",
	    err);
	ck_assert_int_eq(access(dst, F_OK), -1);
}
END_TEST

START_TEST(kernel_copy_is_a_real_copy)
{
	char src[300], dst[300], err[512];
	uint64_t shared, own;
	struct stat st;

	snprintf(src, sizeof(src), "%s/vmlinuz", mnt);
	snprintf(dst, sizeof(dst), "%s/vm-3.vmlinuz", mnt);
	make_image(src, 3);
	ck_assert_msg(disk_copy(src, dst, vm_uid, vm_uid, err, sizeof(err)) ==
	    0, "%s", err);
	ck_assert(itest_same_content(src, dst));
	ck_assert_int_eq(stat(dst, &st), 0);
	ck_assert_int_eq(st.st_uid, vm_uid);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	extents(dst, &shared, &own);
	ck_assert_uint_eq(shared, 0);
	ck_assert_uint_eq(own, 3 << 20);
	ck_assert_int_eq(disk_chown(dst, 0, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(stat(dst, &st), 0);
	ck_assert_int_eq(st.st_uid, 0);
}
END_TEST

struct async_res {
	int	done, rc;
	char	err[512];
};

static void
async_done(int rc, const char *err, void *arg)
{
	struct async_res *r = arg;

	r->done = 1;
	r->rc = rc;
	snprintf(r->err, sizeof(r->err), "%s", err);
}

START_TEST(async_clone_reports_in_loop)
{
	struct event_base *base = event_base_new();
	struct worker_pool *wp = worker_pool_new(base, 2);
	struct async_res ok = { 0 }, bad = { 0 };
	char src[300], dst[300], dst2[300];

	snprintf(src, sizeof(src), "%s/image.raw", mnt);
	snprintf(dst, sizeof(dst), "%s/vm-4.raw", mnt);
	snprintf(dst2, sizeof(dst2), "%s/vm-5.raw", tmpfs);
	make_image(src, 8);
	ck_assert_int_eq(disk_clone_async(wp, src, dst, vm_uid, vm_uid,
	    async_done, &ok), 0);
	ck_assert_int_eq(disk_clone_async(wp, src, dst2, vm_uid, vm_uid,
	    async_done, &bad), 0);
	ck_assert(itest_run_until(base, &ok.done, 10000));
	ck_assert(itest_run_until(base, &bad.done, 10000));
	ck_assert_msg(ok.rc == 0, "%s", ok.err);
	ck_assert_int_eq(bad.rc, -1);
	ck_assert_msg(strstr(bad.err, "different file systems") != NULL, "%s",
	    bad.err);
	ck_assert(itest_same_content(src, dst));
	worker_pool_free(wp);
	event_base_free(base);
}
END_TEST

static uint32_t
projid_of(const char *path, int *inherit)
{
	struct fsxattr fa;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(ioctl(fd, FS_IOC_FSGETXATTR, &fa), 0);
	close(fd);
	if (inherit != NULL)
		*inherit = (fa.fsx_xflags & FS_XFLAG_PROJINHERIT) != 0;
	return fa.fsx_projid;
}

START_TEST(vm_dir_project_reaches_its_clones)
{
	char dir[300], src[300], disk[320], out[300], mem[300], moved[320];
	char out_mem[300];
	char err[512];
	int inherit;

	quota_enable(1, 1);
	snprintf(dir, sizeof(dir), "%s/vm-proj", mnt);
	snprintf(src, sizeof(src), "%s/proj-image.raw", mnt);
	snprintf(disk, sizeof(disk), "%s/disk.raw", dir);
	snprintf(out, sizeof(out), "%s/proj-snap.raw", mnt);
	snprintf(mem, sizeof(mem), "%s/proj-memory.part", mnt);
	snprintf(moved, sizeof(moved), "%s/moved", dir);
	snprintf(out_mem, sizeof(out_mem), "%s/proj-memory", mnt);
	make_image(src, 2);
	ck_assert_int_eq(mkdir(dir, 0711), 0);
	ck_assert_msg(quota_assign_path(dir, vm_uid, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_uint_eq(projid_of(dir, &inherit), vm_uid);
	ck_assert(inherit);
	/* The disk clone, made as .part in the directory and renamed there,
	 * is the VM's project and still the VM's uid's. */
	ck_assert_msg(disk_clone(src, disk, vm_uid, vm_uid, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(projid_of(disk, NULL), vm_uid);
	ck_assert_uint_eq(projid_of(src, NULL), 0);
	/* A snapshot's clone out of it is outside the project. */
	ck_assert_msg(disk_clone(disk, out, 0, 0, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_uint_eq(projid_of(out, NULL), 0);
	ck_assert(itest_same_content(disk, out));
	/* A snapshot's memory file: the VM's while QEMU writes it, then the
	 * snapshot's again. */
	close(open(mem, O_CREAT | O_WRONLY | O_EXCL, 0600));
	ck_assert_msg(quota_assign_path(mem, vm_uid, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_uint_eq(projid_of(mem, NULL), vm_uid);
	/* The backend renames it within the snapshot's directory. */
	ck_assert_int_eq(rename(mem, out_mem), 0);
	ck_assert_int_eq(rename(out_mem, mem), 0);
	ck_assert_msg(quota_assign_path(mem, 0, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_uint_eq(projid_of(mem, NULL), 0);
	/* What XFS refuses: a file of another project renamed into the
	 * directory, which is why vmmd only renames within it. */
	ck_assert_int_eq(rename(mem, moved), -1);
	ck_assert_int_eq(errno, EXDEV);
	/* This volume is mounted without prjquota (ENOSYS: the kernel has
	 * no XFS quotas at all). */
	ck_assert(quota_probe(mnt) == ENOTSUP || quota_probe(mnt) == ENOSYS);
	quota_enable(0, 0);
	ck_assert_int_eq(quota_assign_path(dir, 0, err, sizeof(err)), 0);
	ck_assert_uint_eq(projid_of(dir, NULL), vm_uid);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("disk_xfs");
	TCase *tc = tcase_create("xfs");

	tcase_add_unchecked_fixture(tc, volumes_up, volumes_down);
	tcase_add_test(tc, probe_passes_on_reflink_xfs);
	tcase_add_test(tc, probe_refuses_tmpfs_and_xfs_without_reflink);
	tcase_add_test(tc, clone_shares_extents);
	tcase_add_test(tc, clone_refused_across_volumes_and_on_tmpfs);
	tcase_add_test(tc, kernel_copy_is_a_real_copy);
	tcase_add_test(tc, async_clone_reports_in_loop);
	tcase_add_test(tc, vm_dir_project_reaches_its_clones);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc;

	if ((rc = itest_loop_volume_ready("xfs", "xfsprogs")) != 0)
		return rc;
	return check_run(suite());
}
