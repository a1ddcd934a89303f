/*
 * Unit tests for vmmd/disk that need no root: the reflink probe refuses
 * tmpfs (/dev/shm) with the fix in its message, plain copies are exact and
 * atomic, and a failed clone leaves nothing behind.  Clones on real XFS
 * are in the integration suite.
 */
#include <sys/stat.h>
#include <sys/statfs.h>

#include <linux/magic.h>

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk.h"
#include "../check_run.h"

static char dir[] = "/dev/shm/mcpvm-disk-XXXXXX";

static void
setup(void)
{
	struct statfs sf;

	if (statfs("/dev/shm", &sf) == -1 || sf.f_type != TMPFS_MAGIC) {
		fprintf(stderr, "skip: /dev/shm is not tmpfs here\n");
		exit(77);
	}
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	DIR *d;
	struct dirent *de;
	char p[300];

	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
}

static int
entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

START_TEST(probe_refuses_tmpfs_with_fix)
{
	char err[512], want[512];

	ck_assert_str_eq(disk_fs_name(dir), "tmpfs");
	ck_assert_int_eq(disk_reflink_probe(dir, "state_dir", err, sizeof(err)),
	    -1);
	snprintf(want, sizeof(want), "state_dir %s is on tmpfs, which cannot "
	    "reflink: put it on XFS (mkfs.xfs -m reflink=1) or btrfs", dir);
	ck_assert_str_eq(err, want);
	ck_assert_int_eq(entries(), 0);
}
END_TEST

START_TEST(probe_reports_missing_dir)
{
	char err[512];

	ck_assert_int_eq(disk_reflink_probe("/nonexistent/mcpvm", "state_dir",
	    err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "/nonexistent/mcpvm") != NULL &&
	    strstr(err, "No such file") != NULL, "%s", err);
}
END_TEST

START_TEST(clone_on_tmpfs_leaves_nothing)
{
	char src[300], dst[300], err[512];
	FILE *f;

	snprintf(src, sizeof(src), "%s/image", dir);
	snprintf(dst, sizeof(dst), "%s/clone", dir);
	f = fopen(src, "w");
	fputs("disk", f);
	fclose(f);
	ck_assert_int_eq(disk_clone(src, dst, getuid(), getgid(), err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "cannot reflink") != NULL, "%s", err);
	ck_assert_int_eq(entries(), 1);
	ck_assert_int_eq(disk_clone("/nonexistent", dst, getuid(), getgid(),
	    err, sizeof(err)), -1);
	ck_assert_int_eq(disk_clone(dir, dst, getuid(), getgid(), err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "not a regular file") != NULL, "%s", err);
}
END_TEST

START_TEST(copy_is_exact_private_and_atomic)
{
	char src[300], dst[300], err[512], buf[200000], back[200000];
	struct stat st;
	size_t i;
	FILE *f;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7 + i / 251);
	snprintf(src, sizeof(src), "%s/vmlinuz", dir);
	snprintf(dst, sizeof(dst), "%s/vm.vmlinuz", dir);
	f = fopen(src, "w");
	ck_assert_uint_eq(fwrite(buf, 1, sizeof(buf), f), sizeof(buf));
	fclose(f);
	ck_assert_int_eq(chmod(src, 0644), 0);
	ck_assert_msg(disk_copy(src, dst, getuid(), getgid(), err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(stat(dst, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(st.st_size, sizeof(buf));
	f = fopen(dst, "r");
	ck_assert_uint_eq(fread(back, 1, sizeof(back), f), sizeof(back));
	fclose(f);
	ck_assert_int_eq(memcmp(buf, back, sizeof(buf)), 0);
	/* No .part left; a second copy to the same name is refused. */
	ck_assert_int_eq(entries(), 2);
	ck_assert_int_eq(disk_copy(src, dst, getuid(), getgid(), err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "already exists") != NULL, "%s", err);
}
END_TEST

START_TEST(space_is_reported)
{
	uint64_t avail = 0, total = 0;
	char err[256];

	ck_assert_int_eq(disk_space(dir, &avail, &total, err, sizeof(err)), 0);
	ck_assert_uint_gt(total, 0);
	ck_assert_uint_le(avail, total);
	ck_assert_int_eq(disk_space("/nonexistent", &avail, &total, err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "statvfs") != NULL, "%s", err);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("disk");
	TCase *tc = tcase_create("tmpfs");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, probe_refuses_tmpfs_with_fix);
	tcase_add_test(tc, probe_reports_missing_dir);
	tcase_add_test(tc, clone_on_tmpfs_leaves_nothing);
	tcase_add_test(tc, copy_is_exact_private_and_atomic);
	tcase_add_test(tc, space_is_reported);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
