/*
 * guestd: the guest's file systems frozen for a disk-only snapshot.
 *
 * The host clones the VM's disk while QEMU is stopped; what the guest
 * wrote but its kernel still holds in the page cache is not on that disk.
 * So the freeze op, asked with "filesystems", syncs and then freezes
 * (FIFREEZE) every writable file system on a block device: each has
 * written back everything and journalled a clean state, and no write can
 * reach it until the thaw op (FITHAW).
 *
 * A host that never thaws (vmmd died between the two) must not leave the
 * guest unable to write: each freeze carries a bound, counted on the
 * guest's own clock (which stops while QEMU is stopped, so the clone's
 * time does not count), after which guestd thaws everything by itself and
 * says so.  While frozen, guestd refuses the ops that would write to a
 * frozen file system (file_write, identity, exec) instead of blocking its
 * loop on them.
 */
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <mntent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "guestd.h"
#include "log.h"

#define FS_MAX	32

static struct {
	char	path[PATH_MAX];
	dev_t	dev;
} fz[FS_MAX];
static int nfz;
static int64_t thaw_at_ns;	/* 0: nothing frozen */

int
fsfreeze_active(void)
{
	return nfz > 0;
}

/* Thaws what this freeze froze, last first. */
static void
thaw_all(void)
{
	int fd;

	while (nfz > 0) {
		nfz--;
		if ((fd = open(fz[nfz].path, O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC)) == -1 || ioctl(fd, FITHAW, 0) == -1)
			log_warn("fsfreeze: thaw %s", fz[nfz].path);
		if (fd != -1)
			close(fd);
	}
	thaw_at_ns = 0;
}

void
fsfreeze_thaw(void)
{
	if (nfz > 0)
		log_info("fsfreeze: thawing %d file system%s", nfz,
		    nfz == 1 ? "" : "s");
	thaw_all();
}

/* Is this mount one whose writes a disk snapshot must hold? */
static int
wanted(const struct mntent *m)
{
	return strncmp(m->mnt_fsname, "/dev/", 5) == 0 &&
	    hasmntopt(m, "rw") != NULL;
}

int
fsfreeze_all(int64_t thaw_after_ms, char *err, size_t errlen)
{
	struct mntent *m;
	struct stat st;
	FILE *f;
	int fd, i, dup;

	if (nfz > 0) {
		snprintf(err, errlen, "the file systems are frozen already");
		return -1;
	}
	/* Run by a test on a host, the mounts would be the host's. */
	if (!opts.init) {
		snprintf(err, errlen, "guestd is not the guest's init: it "
		    "freezes no file system");
		return -1;
	}
	if ((f = setmntent("/proc/self/mounts", "re")) == NULL) {
		snprintf(err, errlen, "/proc/self/mounts: %s",
		    strerror(errno));
		return -1;
	}
	/* Everything written so far goes to the disks first. */
	sync();
	while ((m = getmntent(f)) != NULL) {
		if (!wanted(m))
			continue;
		if (stat(m->mnt_dir, &st) == -1)
			continue;
		for (dup = 0, i = 0; i < nfz; i++)
			dup |= fz[i].dev == st.st_dev;
		if (dup)
			continue;	/* one file system, mounted twice */
		if (nfz == FS_MAX) {
			snprintf(err, errlen, "more than %d file systems",
			    FS_MAX);
			goto fail;
		}
		if ((fd = open(m->mnt_dir, O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC)) == -1) {
			snprintf(err, errlen, "%s: %s", m->mnt_dir,
			    strerror(errno));
			goto fail;
		}
		if (ioctl(fd, FIFREEZE, 0) == -1) {
			snprintf(err, errlen, "FIFREEZE %s (%s): %s",
			    m->mnt_dir, m->mnt_type, strerror(errno));
			close(fd);
			goto fail;
		}
		close(fd);
		snprintf(fz[nfz].path, sizeof(fz[nfz].path), "%s", m->mnt_dir);
		fz[nfz].dev = st.st_dev;
		nfz++;
	}
	endmntent(f);
	thaw_at_ns = now_ns() + thaw_after_ms * 1000000;
	log_info("fsfreeze: %d file system%s frozen, thawed in %lld ms "
	    "unless the host thaws them first", nfz, nfz == 1 ? "" : "s",
	    (long long)thaw_after_ms);
	return nfz;
fail:
	endmntent(f);
	thaw_all();
	return -1;
}

void
fsfreeze_poll(void)
{
	int64_t now;

	if (nfz == 0)
		return;
	now = now_ns();
	if (now >= thaw_at_ns) {
		log_warnx("fsfreeze: the host did not thaw within its bound; "
		    "thawing %d file system%s and the jobs", nfz,
		    nfz == 1 ? "" : "s");
		thaw_all();
		jobs_thaw();
		return;
	}
	loop_timeout((thaw_at_ns - now + 999999) / 1000000);
}
