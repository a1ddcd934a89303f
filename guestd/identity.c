/*
 * guestd: the identity op (proto/guest.h), which makes a VM restored from
 * a memory snapshot a machine of its own: host entropy into the kernel's
 * RNG, a new machine-id, hostname and boot id, and with "net" eth0 in
 * its own network slot (init.c).  Runs in guestd as PID 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guestd.h"
#include "log.h"

#define MACHINE_ID_PATH	"/etc/machine-id"
#define HOSTNAME_PATH	"/etc/hostname"
#define BOOT_ID_PROC	"/proc/sys/kernel/random/boot_id"
#define IDENTITY_DIR	"/run/mcpvm-identity"
#define BOOT_ID_FILE	IDENTITY_DIR "/boot_id"
#define OVERLAYS_MAX	16	/* layers unmounted before giving up */

/*
 * Clones share the pool's state and the CRNG key of the snapshot.  Mixing
 * in bytes that differ per clone is not enough on its own: a ready CRNG
 * takes from the pool only at its next scheduled reseed.  RNDRESEEDCRNG
 * makes that happen now, so every draw after the reply differs.
 */
static int
reseed(const uint8_t *bytes, size_t len, char *err, size_t errlen)
{
	struct rand_pool_info *info;
	int fd, rc = -1;

	if ((info = calloc(1, sizeof(*info) + len)) == NULL) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	info->entropy_count = (int)(len * 8);
	info->buf_size = (int)len;
	memcpy(info->buf, bytes, len);
	if ((fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "open /dev/urandom: %s",
		    strerror(errno));
		goto out;
	}
	if (write(fd, bytes, len) != (ssize_t)len) {
		snprintf(err, errlen, "write /dev/urandom: %s",
		    strerror(errno));
		goto out;
	}
	if (ioctl(fd, RNDADDENTROPY, info) == -1) {
		snprintf(err, errlen, "RNDADDENTROPY: %s", strerror(errno));
		goto out;
	}
	if (ioctl(fd, RNDRESEEDCRNG) == -1) {
		snprintf(err, errlen, "RNDRESEEDCRNG: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd != -1)
		close(fd);
	explicit_bzero(info, sizeof(*info) + len);
	free(info);
	return rc;
}

/*
 * path holds exactly line and a newline, or is as it was.  Not yet on
 * the disk: identity_apply syncs the file system once for all of them,
 * one flush through QEMU instead of two per file.
 */
static int
write_atomic(const char *path, const char *line, mode_t mode, char *err,
    size_t errlen)
{
	size_t len = strlen(line);
	char tmp[128];
	int fd;

	snprintf(tmp, sizeof(tmp), "%.100s.mcpvm-new", path);
	unlink(tmp);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, mode)) == -1) {
		snprintf(err, errlen, "create %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (fchmod(fd, mode) == -1 || write(fd, line, len) != (ssize_t)len ||
	    write(fd, "\n", 1) != 1) {
		snprintf(err, errlen, "write %s: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return -1;
	}
	close(fd);
	if (rename(tmp, path) == -1) {
		snprintf(err, errlen, "rename to %s: %s", path,
		    strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* The files written and renamed in the file system holding path, on
 * its disk. */
static int
sync_fs_of(const char *path, char *err, size_t errlen)
{
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "open %s: %s", path, strerror(errno));
		return -1;
	}
	if ((rc = syncfs(fd)) == -1)
		snprintf(err, errlen, "syncfs %s: %s", path, strerror(errno));
	close(fd);
	return rc;
}

/*
 * The kernel's boot id is fixed at boot, and a restored clone has its
 * snapshot's.  A file bind-mounted over it is what every reader in the
 * guest sees; an earlier overlay goes first so the op can be repeated.
 */
static int
overlay_boot_id(const char *id, char *err, size_t errlen)
{
	int i;

	if (mkdir(IDENTITY_DIR, 0755) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "mkdir %s: %s", IDENTITY_DIR,
		    strerror(errno));
		return -1;
	}
	for (i = 0; i < OVERLAYS_MAX; i++)
		if (umount2(BOOT_ID_PROC, MNT_DETACH) == -1)
			break;
	/* EINVAL: nothing (more) is mounted there. */
	if (i == OVERLAYS_MAX || errno != EINVAL) {
		snprintf(err, errlen, "umount %s: %s", BOOT_ID_PROC,
		    i == OVERLAYS_MAX ? "too many overlays" : strerror(errno));
		return -1;
	}
	if (write_atomic(BOOT_ID_FILE, id, 0444, err, errlen) == -1)
		return -1;
	if (mount(BOOT_ID_FILE, BOOT_ID_PROC, NULL, MS_BIND, NULL) == -1) {
		snprintf(err, errlen, "bind %s over %s: %s", BOOT_ID_FILE,
		    BOOT_ID_PROC, strerror(errno));
		return -1;
	}
	if (mount(NULL, BOOT_ID_PROC, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY,
	    NULL) == -1) {
		snprintf(err, errlen, "remount %s read-only: %s", BOOT_ID_PROC,
		    strerror(errno));
		return -1;
	}
	return 0;
}

struct json_object *
identity_apply(const struct req *q)
{
	struct json_object *r;
	char err[384];

	/*
	 * In a test harness on the host (a pid namespace, even as its PID 1)
	 * these files and the RNG are the host's.
	 */
	if (!opts.init || !in_initial_pidns())
		return reply_error(q->id, "invalid_argument", "identity: "
		    "only guestd as PID 1 of a guest takes a new identity");
	err[0] = '\0';
	if (reseed(q->entropy, sizeof(q->entropy), err, sizeof(err)) == -1)
		return reply_error(q->id, "io_error", "entropy: %s", err);
	if (write_atomic(MACHINE_ID_PATH, q->machine_id, 0444, err,
	    sizeof(err)) == -1)
		return reply_error(q->id, "io_error", "machine_id: %s", err);
	if (sethostname(q->hostname, strlen(q->hostname)) == -1)
		return reply_error(q->id, "io_error", "hostname: "
		    "sethostname: %s", strerror(errno));
	if (write_atomic(HOSTNAME_PATH, q->hostname, 0644, err,
	    sizeof(err)) == -1)
		return reply_error(q->id, "io_error", "hostname: %s", err);
	if (sync_fs_of(MACHINE_ID_PATH, err, sizeof(err)) == -1)
		return reply_error(q->id, "io_error", "machine_id: %s", err);
	if (q->has_net && init_eth0_renew(&q->net, err, sizeof(err)) == -1)
		return reply_error(q->id, "io_error", "net: %s", err);
	if (overlay_boot_id(q->boot_id, err, sizeof(err)) == -1)
		return reply_error(q->id, "io_error", "boot_id: %s", err);
	guestd_set_boot_id(q->boot_id);
	log_info("identity: new machine-id, hostname %s, boot id %s%s",
	    q->hostname, q->boot_id, q->has_net ? ", eth0 renewed" : "");
	r = reply_new(q->id);
	json_object_object_add(r, "boot_id",
	    json_object_new_string(q->boot_id));
	return r;
}
