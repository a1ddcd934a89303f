/*
 * Integration tests of vmmd's storage limits on btrfs (storage_quota,
 * quota.h), on real loop-mounted btrfs volumes the test makes, one with
 * quotas enabled and one without, in a private mount namespace so the
 * mounts die with the test however it ends.  The probe tells the two
 * apart; a VM directory is a subvolume with its qgroup's limit, clones
 * go in and out of it, a snapshot's memory file leaves it by a clone,
 * and it goes with rmdir without CAP_SYS_ADMIN; as the VM's uid, growing
 * disk.raw and writing through a held checkpoint or memory file
 * descriptor stop at the reservation with EDQUOT while another VM's uid
 * writes on.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <unistd.h>

#include "conf.h"
#include "disk.h"
#include "itest.h"
#include "log.h"
#include "quota.h"
#include "../check_run.h"

#define MIB		(1024ULL * 1024)
#define IMG_MIB		16	/* the image's disk */
#define MEM_MIB		32	/* the VM's memory */

static char tmp[] = "/tmp/mcpvm-btrfs-XXXXXX";
static char mnt[256], mntoff[256];
static uid_t vm_uid;

static int
make_btrfs(const char *img, const char *dir, int quotas)
{
	char *mkfs[] = { "mkfs.btrfs", "-q", "-f", (char *)img, NULL };
	char *enable[] = { "btrfs", "quota", "enable", (char *)dir, NULL };

	if (itest_loop_volume(img, dir, mkfs) == -1)
		return -1;
	/* What the operator does once (vmmd(8)). */
	return quotas && itest_run(enable) != 0 ? -1 : 0;
}

/* Runs once, in the parent: the volumes outlive each forked test. */
static void
volumes_up(void)
{
	char img[300];

	log_init("test_disk_btrfs", 1, 0);
	vm_uid = itest_free_uid(3910000);
	if (mkdtemp(tmp) == NULL)
		abort();
	snprintf(mnt, sizeof(mnt), "%s/btrfs", tmp);
	snprintf(img, sizeof(img), "%s/btrfs.img", tmp);
	if (make_btrfs(img, mnt, 1) == -1) {
		fprintf(stderr, "cannot make the btrfs volume with quotas\n");
		exit(1);
	}
	snprintf(mntoff, sizeof(mntoff), "%s/btrfs-noquota", tmp);
	snprintf(img, sizeof(img), "%s/btrfs-noquota.img", tmp);
	if (make_btrfs(img, mntoff, 0) == -1) {
		fprintf(stderr, "cannot make the btrfs volume without quotas\n");
		exit(1);
	}
}

static void
volumes_down(void)
{
	umount2(mnt, MNT_DETACH);
	umount2(mntoff, MNT_DETACH);
	itest_rmtree(tmp);
}

/* A VM's limit as vmmd sets it at startup (vmmd.c). */
static uint64_t
slot_bytes(void)
{
	return quota_slot_bytes(IMG_MIB * MIB, MEM_MIB);
}

/* As storage_quota_setup does on btrfs, strict (require). */
static void
limits_on(void)
{
	quota_enable(1, 1);
	quota_use_subvolumes(slot_bytes());
}

/* A qgroup figure of path's subvolume, read from the kernel's sysfs. */
static uint64_t
qgroup_value(const char *path, const char *what)
{
	struct btrfs_ioctl_fs_info_args fi;
	struct btrfs_ioctl_ino_lookup_args il;
	char file[PATH_MAX], buf[64];
	const unsigned char *u;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ne(fd, -1);
	memset(&fi, 0, sizeof(fi));
	ck_assert_int_eq(ioctl(fd, BTRFS_IOC_FS_INFO, &fi), 0);
	memset(&il, 0, sizeof(il));
	il.objectid = BTRFS_FIRST_FREE_OBJECTID;
	ck_assert_int_eq(ioctl(fd, BTRFS_IOC_INO_LOOKUP, &il), 0);
	close(fd);
	u = fi.fsid;
	snprintf(file, sizeof(file), "/sys/fs/btrfs/%02x%02x%02x%02x-%02x%02x-"
	    "%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x/qgroups/0_%llu/%s",
	    u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
	    u[11], u[12], u[13], u[14], u[15], (unsigned long long)il.treeid,
	    what);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd != -1, "%s: %s", file, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	return strtoull(buf, NULL, 10);
}

/* The root of a subvolume is inode 256 (BTRFS_FIRST_FREE_OBJECTID). */
static int
is_subvolume(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
	    st.st_ino == BTRFS_FIRST_FREE_OBJECTID;
}

/* A VM's directory as vm_boot.c makes it, with its disk cloned in. */
static void
make_vm_dir(const char *dir, const char *image)
{
	char disk[PATH_MAX], err[512];

	ck_assert_msg(quota_mkdir(dir, 0711, vm_uid, err, sizeof(err)) == 0,
	    "%s", err);
	snprintf(disk, sizeof(disk), "%s/disk.raw", dir);
	ck_assert_msg(disk_clone(image, disk, vm_uid, vm_uid, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_msg(quota_settle(dir, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(probe_tells_quotas_on_from_off)
{
	char probe[300], msg[512];

	ck_assert_str_eq(disk_fs_name(mnt), "btrfs");
	ck_assert_int_eq(quota_probe(mnt), 0);
	ck_assert_int_eq(quota_probe(mntoff), ENOTSUP);
	/* Each probe removed its subvolume. */
	snprintf(probe, sizeof(probe), "%s/.mcpvm-quota-probe", mnt);
	ck_assert_int_eq(access(probe, F_OK), -1);
	snprintf(probe, sizeof(probe), "%s/.mcpvm-quota-probe", mntoff);
	ck_assert_int_eq(access(probe, F_OK), -1);
	/* Without quotas, auto goes on with a warning that says what to
	 * do, and require refuses with it. */
	ck_assert_int_eq(quota_decide(CONF_QUOTA_AUTO, "btrfs", ENOTSUP,
	    mntoff, msg, sizeof(msg)), QUOTA_WITHOUT);
	ck_assert_msg(strstr(msg, "is on btrfs without quotas: run `btrfs "
	    "quota enable`") != NULL, "%s", msg);
	ck_assert_int_eq(quota_decide(CONF_QUOTA_REQUIRE, "btrfs", ENOTSUP,
	    mntoff, msg, sizeof(msg)), QUOTA_REFUSE);
	ck_assert_int_eq(quota_decide(CONF_QUOTA_REQUIRE, "btrfs", 0, mnt,
	    msg, sizeof(msg)), QUOTA_ENFORCE);
}
END_TEST

/* In a child without CAP_SYS_ADMIN, as vmmd runs: rmdir's errno. */
static int
rmdir_unprivileged(const char *dir)
{
	cap_value_t v = CAP_SYS_ADMIN;
	int status;
	pid_t pid;

	if ((pid = fork()) == 0) {
		cap_t c = cap_get_proc();

		if (c == NULL || cap_set_flag(c, CAP_EFFECTIVE, 1, &v,
		    CAP_CLEAR) == -1 || cap_set_flag(c, CAP_PERMITTED, 1, &v,
		    CAP_CLEAR) == -1 || cap_set_proc(c) == -1)
			_exit(100);
		_exit(rmdir(dir) == 0 ? 0 : errno);
	}
	ck_assert_int_ne(pid, -1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(vm_subvolume_life_cycle)
{
	char dir[300], image[300], disk[320], out[300], mem[320], smem[300];
	char moved[320], err[512];
	uint64_t before;
	struct stat st;

	limits_on();
	snprintf(dir, sizeof(dir), "%s/vm-life", mnt);
	snprintf(image, sizeof(image), "%s/life-image.raw", mnt);
	snprintf(disk, sizeof(disk), "%s/disk.raw", dir);
	snprintf(out, sizeof(out), "%s/life-snap.raw", mnt);
	snprintf(mem, sizeof(mem), "%s/snapshot-memory.bin", dir);
	snprintf(smem, sizeof(smem), "%s/life-memory.bin", mnt);
	snprintf(moved, sizeof(moved), "%s/moved", dir);
	ck_assert_int_eq(itest_write_file(image, IMG_MIB), 0);

	/* Made a subvolume, vmmd's, 0711, with the slot's limit already. */
	ck_assert_msg(quota_mkdir(dir, 0711, vm_uid, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert(is_subvolume(dir));
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_int_eq(st.st_uid, 0);
	ck_assert_int_eq(st.st_mode & 07777, 0711);
	ck_assert_uint_eq(qgroup_value(dir, "max_referenced"), slot_bytes());
	/* As a second mkdir would. */
	ck_assert_int_eq(quota_mkdir(dir, 0711, vm_uid, err, sizeof(err)), -1);
	ck_assert_str_eq(err, strerror(EEXIST));

	/* The image's disk cloned in (a reflink across subvolumes), and
	 * counted against the VM once quota_settle commits. */
	before = qgroup_value(dir, "referenced");
	ck_assert_msg(disk_clone(image, disk, vm_uid, vm_uid, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_msg(quota_settle(dir, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_ge(qgroup_value(dir, "referenced"),
	    before + IMG_MIB * MIB);
	ck_assert(itest_same_content(image, disk));
	ck_assert_int_eq(stat(disk, &st), 0);
	ck_assert_int_eq(st.st_uid, vm_uid);

	/* A snapshot's clone out of it. */
	ck_assert_msg(disk_clone(disk, out, 0, 0, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert(itest_same_content(disk, out));

	/* A memory snapshot's file: written in the VM's subvolume, counted
	 * there, then cloned out and removed, as snapshot.c does; a rename
	 * out is what btrfs refuses across subvolumes. */
	ck_assert_int_eq(itest_write_file(mem, 4), 0);
	ck_assert_int_eq(chmod(mem, 0600), 0);
	ck_assert_msg(quota_settle(dir, err, sizeof(err)) == 0, "%s", err);
	before = qgroup_value(dir, "referenced");
	ck_assert_int_eq(rename(mem, smem), -1);
	ck_assert_int_eq(errno, EXDEV);
	ck_assert_msg(disk_clone(mem, smem, 0, 0, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert(itest_same_content(mem, smem));
	ck_assert_int_eq(unlink(mem), 0);
	ck_assert_msg(quota_settle(dir, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_le(qgroup_value(dir, "referenced"), before - 4 * MIB);
	/* Within the subvolume, a rename is as before. */
	ck_assert_int_eq(rename(disk, moved), 0);
	ck_assert_int_eq(rename(moved, disk), 0);
	/* XFS projects are not used on btrfs. */
	ck_assert_int_eq(quota_assign_path(disk, 0, err, sizeof(err)), 0);

	/* The VM goes: its files, then the empty subvolume by rmdir,
	 * without CAP_SYS_ADMIN (vmmd has none by then). */
	ck_assert_int_eq(rmdir_unprivileged(dir), ENOTEMPTY);
	ck_assert_int_eq(unlink(disk), 0);
	ck_assert_int_eq(rmdir_unprivileged(dir), 0);
	ck_assert_int_eq(access(dir, F_OK), -1);
	ck_assert(itest_same_content(out, image));
	quota_enable(0, 0);
	quota_use_subvolumes(0);
}
END_TEST

struct fill {
	int	fe, we;		/* the errnos that stopped each way */
	long long bytes;	/* what the VM's uid wrote */
};

/*
 * As the VM's uid (a forked child, as vmmd's spawner runs QEMU): grows
 * fd's file from its end until the volume refuses, by fallocate in 1 MiB
 * steps and then by 64 KiB writes, as a guest filling its disk or a
 * QEMU writing its migration stream would.
 */
static struct fill
fill_as_vm(int fd)
{
	struct fill f;
	int p[2], status;
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	if ((pid = fork()) == 0) {
		static char buf[65536];
		off_t off;

		memset(&f, 0, sizeof(f));
		if (setgroups(0, NULL) == -1 ||
		    setresgid(vm_uid, vm_uid, vm_uid) == -1 ||
		    setresuid(vm_uid, vm_uid, vm_uid) == -1)
			_exit(100);
		off = lseek(fd, 0, SEEK_END);
		while ((f.fe = posix_fallocate(fd, off, MIB)) == 0) {
			off += MIB;
			f.bytes += MIB;
		}
		/* A write short of the limit returns what it wrote; the
		 * next one fails. */
		for (int i = 0; i < 1024; i++) {
			ssize_t n = pwrite(fd, buf, sizeof(buf), off);

			if (n == -1) {
				f.we = errno;
				break;
			}
			off += n;
			f.bytes += n;
		}
		_exit(write(p[1], &f, sizeof(f)) == sizeof(f) ? 0 : 101);
	}
	ck_assert_int_ne(pid, -1);
	close(p[1]);
	ck_assert_int_eq(read(p[0], &f, sizeof(f)), sizeof(f));
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return f;
}

START_TEST(vm_uid_stops_at_the_reservation)
{
	char a[300], b[300], c[300], image[300], disk[320], cp[340];
	char err[512];
	uint64_t lim = slot_bytes(), used;
	struct fill f;
	int fd;

	limits_on();
	snprintf(a, sizeof(a), "%s/vm-a", mnt);
	snprintf(b, sizeof(b), "%s/vm-b", mnt);
	snprintf(c, sizeof(c), "%s/vm-c", mnt);
	snprintf(image, sizeof(image), "%s/edquot-image.raw", mnt);
	ck_assert_int_eq(itest_write_file(image, IMG_MIB), 0);
	make_vm_dir(a, image);
	make_vm_dir(b, image);

	/* VM a's uid grows its disk.raw. */
	snprintf(disk, sizeof(disk), "%s/disk.raw", a);
	fd = open(disk, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ne(fd, -1);
	f = fill_as_vm(fd);
	close(fd);
	ck_assert_msg(quota_settle(a, err, sizeof(err)) == 0, "%s", err);
	used = qgroup_value(a, "referenced");
	fprintf(stderr, "disk.raw: %lld bytes written past the clone, "
	    "stopped by %s/%s; the subvolume holds %llu of its %llu\n",
	    f.bytes, strerror(f.fe), strerror(f.we),
	    (unsigned long long)used, (unsigned long long)lim);
	ck_assert_int_eq(f.fe, EDQUOT);
	ck_assert_int_eq(f.we, EDQUOT);
	ck_assert_uint_le(used, lim);
	ck_assert_uint_ge(used, lim - 4 * MIB);
	ck_assert_int_ge(f.bytes, (long long)(lim - IMG_MIB * MIB - 4 * MIB));

	/*
	 * VM b's checkpoint and VM c's memory snapshot as QEMU writes it
	 * (snapshot.c, on btrfs): vmmd's files (root's, 0600) that the
	 * VM's QEMU writes only through the descriptor vmmd passes, held
	 * here by a child as the VM's uid, while a is full.
	 */
	for (int i = 0; i < 2; i++) {
		const char *vm = i == 0 ? b : c;
		const char *name = i == 0 ? "checkpoint.bin" :
		    "memory-snap1.bin.part";

		if (i == 1)
			make_vm_dir(c, image);
		snprintf(cp, sizeof(cp), "%s/%s", vm, name);
		fd = open(cp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		ck_assert_int_ne(fd, -1);
		f = fill_as_vm(fd);
		close(fd);
		ck_assert_msg(quota_settle(vm, err, sizeof(err)) == 0, "%s",
		    err);
		used = qgroup_value(vm, "referenced");
		fprintf(stderr, "%s: %lld bytes written, stopped by %s/%s; "
		    "the subvolume holds %llu of its %llu\n", name, f.bytes,
		    strerror(f.fe), strerror(f.we), (unsigned long long)used,
		    (unsigned long long)lim);
		ck_assert_int_eq(f.fe, EDQUOT);
		ck_assert_int_eq(f.we, EDQUOT);
		ck_assert_uint_le(used, lim);
		ck_assert_uint_ge(used, lim - 4 * MIB);
		ck_assert_int_ge(f.bytes, (long long)(lim - IMG_MIB * MIB -
		    4 * MIB));
	}
	quota_enable(0, 0);
	quota_use_subvolumes(0);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("disk_btrfs");
	TCase *tc = tcase_create("btrfs");

	tcase_add_unchecked_fixture(tc, volumes_up, volumes_down);
	tcase_add_test(tc, probe_tells_quotas_on_from_off);
	tcase_add_test(tc, vm_subvolume_life_cycle);
	tcase_add_test(tc, vm_uid_stops_at_the_reservation);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc;

	if ((rc = itest_loop_volume_ready("btrfs", "btrfs-progs")) != 0)
		return rc;
	return check_run(suite());
}
