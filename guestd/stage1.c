/*
 * guestd stage one: the initramfs /init, PID 1 in the guest until the root
 * disk is up.  It loads the modules the image lists, mounts root= and hands
 * PID 1 over to stage two (/usr/sbin/guestd) the way switch_root does.
 * Static, libc only: the initramfs holds nothing else.
 */
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>

#define PROG		"mcpvm-stage1"
#define MODULES_DIR	"/lib/modules/mcpvm"
#define MODULES_LIST	MODULES_DIR "/modules.list"
#define NEWROOT		"/root"
#define DEFAULT_INIT	"/usr/sbin/guestd"
#define DEFAULT_FSTYPE	"ext4"
#define ROOTWAIT_SECS	30
#define CMDLINE_MAX	4096
#define PARAM_MAX	256

static void	vsay(const char *, const char *, va_list)
		    __attribute__((format(printf, 2, 0)));
static void	say(const char *, ...) __attribute__((format(printf, 1, 2)));
static void	die(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));

static long
uptime_ms(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_BOOTTIME, &ts) == -1)
		return (-1);
	return (ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/*
 * One write per line: the serial console is shared with the kernel's own
 * messages and a line split in two is hard to read in a boot log.
 */
static void
vsay(const char *prefix, const char *fmt, va_list ap)
{
	char	 buf[1024];
	int	 n, m;

	n = snprintf(buf, sizeof(buf), "%s: %s", PROG, prefix);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return;
	m = vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n >= sizeof(buf) - 1)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	(void)write(STDERR_FILENO, buf, n);
}

static void
say(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	vsay("", fmt, ap);
	va_end(ap);
}

/*
 * PID 1 must not exit: the kernel would panic with a message that hides
 * ours.  Say what failed, then power the VM off so the host sees it stop.
 */
static void
die(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	vsay("FATAL: ", fmt, ap);
	va_end(ap);
	(void)write(STDERR_FILENO, PROG ": powering off\n",
	    sizeof(PROG ": powering off\n") - 1);
	sync();
	(void)reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

/*
 * The kernel opens /dev/console from the initramfs for us; if that failed
 * (no node in the archive) we get it from devtmpfs instead.
 */
static void
console_open(void)
{
	int	 fd;

	if (fcntl(STDERR_FILENO, F_GETFD) != -1)
		return;
	if ((fd = open("/dev/console", O_RDWR | O_NOCTTY)) == -1)
		return;
	(void)dup2(fd, STDIN_FILENO);
	(void)dup2(fd, STDOUT_FILENO);
	(void)dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

static void
mount_one(const char *src, const char *dir, const char *type,
    unsigned long flags)
{
	if (mkdir(dir, 0755) == -1 && errno != EEXIST)
		die("mkdir %s: %s", dir, strerror(errno));
	if (mount(src, dir, type, flags, NULL) == -1 && errno != EBUSY)
		die("mount %s on %s: %s", type, dir, strerror(errno));
}

static void
cmdline_read(char *buf, size_t len)
{
	ssize_t	 n;
	int	 fd;

	if ((fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC)) == -1)
		die("open /proc/cmdline: %s", strerror(errno));
	n = read(fd, buf, len - 1);
	if (n == -1)
		die("read /proc/cmdline: %s", strerror(errno));
	close(fd);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/*
 * Finds "key=value" (or a bare "key" when val is NULL) among the
 * space-separated words of the command line; the last one wins, as with
 * the kernel's own parameters.  Quoted values are not supported.
 */
static int
cmdline_get(const char *cmdline, const char *key, char *val, size_t vlen)
{
	const char	*p, *end;
	size_t		 klen = strlen(key), wlen;
	int		 found = 0;

	for (p = cmdline; *p != '\0'; p = end) {
		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		end = strchr(p, ' ');
		if (end == NULL)
			end = p + strlen(p);
		wlen = end - p;
		if (val == NULL) {
			if (wlen == klen && strncmp(p, key, klen) == 0)
				found = 1;
			continue;
		}
		if (wlen <= klen || strncmp(p, key, klen) != 0 ||
		    p[klen] != '=')
			continue;
		if (wlen - klen - 1 >= vlen)
			die("kernel command line: %s= is longer than %zu bytes",
			    key, vlen - 1);
		memcpy(val, p + klen + 1, wlen - klen - 1);
		val[wlen - klen - 1] = '\0';
		found = 1;
	}
	return (found);
}

/*
 * The list is in dependency order (the image recipe resolved it from
 * modules.dep), so plain finit_module in file order is enough: no modprobe
 * in the initramfs.
 */
static int
modules_load(void)
{
	FILE	*f;
	char	 line[PATH_MAX], path[PATH_MAX + sizeof(MODULES_DIR)];
	int	 fd, n = 0;

	if ((f = fopen(MODULES_LIST, "re")) == NULL) {
		if (errno == ENOENT)
			return (0);
		die("open %s: %s", MODULES_LIST, strerror(errno));
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '\0' || line[0] == '#')
			continue;
		if (strchr(line, '/') != NULL)
			die("%s: module name with a slash: %s", MODULES_LIST,
			    line);
		snprintf(path, sizeof(path), "%s/%s", MODULES_DIR, line);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			die("module %s: open %s: %s", line, path,
			    strerror(errno));
		if (syscall(SYS_finit_module, fd, "", 0) == -1 &&
		    errno != EEXIST)
			die("module %s: finit_module: %s (is a module it "
			    "needs missing, or listed after it?)", line,
			    strerror(errno));
		close(fd);
		n++;
	}
	if (ferror(f))
		die("read %s: %s", MODULES_LIST, strerror(errno));
	fclose(f);
	return (n);
}

/* Drivers probe asynchronously: the disk node shows up a little later. */
static void
root_wait(const char *dev, int secs)
{
	struct stat	 st;
	long		 deadline = uptime_ms() + secs * 1000L;

	if (strncmp(dev, "/dev/", 5) != 0)
		die("root=%s: only /dev/ paths are supported", dev);
	for (;;) {
		if (stat(dev, &st) == 0) {
			if (!S_ISBLK(st.st_mode))
				die("root=%s is not a block device", dev);
			return;
		}
		if (errno != ENOENT)
			die("root=%s: %s", dev, strerror(errno));
		if (uptime_ms() > deadline)
			die("root=%s did not appear within %d s (is the "
			    "disk attached, and virtio_blk in the module "
			    "list?)", dev, secs);
		usleep(5000);
	}
}

/* Removes what is below dirfd on device dev, without crossing mounts. */
static void
tree_delete(int dirfd, dev_t dev)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	int		 fd;

	if ((d = fdopendir(dirfd)) == NULL) {
		close(dirfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
			continue;
		if (st.st_dev != dev)
			continue;
		if (S_ISDIR(st.st_mode)) {
			fd = openat(dirfd, de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd != -1)
				tree_delete(fd, dev);
			(void)unlinkat(dirfd, de->d_name, AT_REMOVEDIR);
		} else
			(void)unlinkat(dirfd, de->d_name, 0);
	}
	closedir(d);
}

/*
 * What switch_root(8) does: free the initramfs (it is RAM nobody can reach
 * once we chroot away from it), move the new root over / and exec.
 */
static void
switch_root(const char *init, char **argv)
{
	static const char *const moves[] = { "/dev", "/proc", "/sys" };
	struct statfs	 sfs;
	struct stat	 st;
	char		 dst[PATH_MAX];
	size_t		 i;
	int		 fd;

	for (i = 0; i < sizeof(moves) / sizeof(moves[0]); i++) {
		snprintf(dst, sizeof(dst), NEWROOT "%s", moves[i]);
		if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (mount(moves[i], dst, NULL, MS_MOVE, NULL) == -1)
				die("move %s to %s: %s", moves[i], dst,
				    strerror(errno));
		} else if (umount2(moves[i], MNT_DETACH) == -1)
			die("umount %s: %s", moves[i], strerror(errno));
	}
	if (chdir(NEWROOT) == -1)
		die("chdir %s: %s", NEWROOT, strerror(errno));

	/* Never wipe a real disk: only a RAM-backed / is ours to clear. */
	if ((fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		die("open /: %s", strerror(errno));
	if (fstatfs(fd, &sfs) == -1 || fstat(fd, &st) == -1)
		die("stat /: %s", strerror(errno));
	if (sfs.f_type == RAMFS_MAGIC || sfs.f_type == TMPFS_MAGIC)
		tree_delete(fd, st.st_dev);
	else {
		close(fd);
		say("/ is not an initramfs; not deleting it");
	}

	if (mount(".", "/", NULL, MS_MOVE, NULL) == -1)
		die("move %s to /: %s", NEWROOT, strerror(errno));
	if (chroot(".") == -1)
		die("chroot %s: %s", NEWROOT, strerror(errno));
	if (chdir("/") == -1)
		die("chdir / in the new root: %s", strerror(errno));
	argv[0] = (char *)init;
	execv(init, argv);
	die("exec %s: %s", init, strerror(errno));
}

int
main(int argc, char *argv[])
{
	char		 cmdline[CMDLINE_MAX], root[PARAM_MAX];
	char		 fstype[PARAM_MAX], flags[PARAM_MAX], init[PARAM_MAX];
	char		 wait[PARAM_MAX], path[PATH_MAX];
	unsigned long	 mflags = 0;
	long		 secs;
	char		*ep;
	int		 nmod;

	(void)argc;
	if (getpid() != 1)
		die("must run as PID 1 (the initramfs /init)");
	umask(022);
	mount_one("devtmpfs", "/dev", "devtmpfs", MS_NOSUID);
	console_open();
	mount_one("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
	mount_one("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC);

	cmdline_read(cmdline, sizeof(cmdline));
	if (!cmdline_get(cmdline, "root", root, sizeof(root)))
		die("no root= on the kernel command line (e.g. "
		    "root=/dev/vda)");
	if (!cmdline_get(cmdline, "rootfstype", fstype, sizeof(fstype)))
		strcpy(fstype, DEFAULT_FSTYPE);
	if (!cmdline_get(cmdline, "rootflags", flags, sizeof(flags)))
		flags[0] = '\0';
	if (!cmdline_get(cmdline, "init", init, sizeof(init)))
		strcpy(init, DEFAULT_INIT);
	if (init[0] != '/')
		die("init=%s: not an absolute path", init);
	secs = ROOTWAIT_SECS;
	if (cmdline_get(cmdline, "rootwait", wait, sizeof(wait))) {
		errno = 0;
		secs = strtol(wait, &ep, 10);
		if (errno != 0 || ep == wait || *ep != '\0' || secs < 1 ||
		    secs > 3600)
			die("rootwait=%s: must be 1 to 3600 seconds", wait);
	}
	/* Stage two writes to its root; "ro" is there for debugging. */
	if (cmdline_get(cmdline, "ro", NULL, 0))
		mflags |= MS_RDONLY;

	nmod = modules_load();

	root_wait(root, (int)secs);
	if (mkdir(NEWROOT, 0755) == -1 && errno != EEXIST)
		die("mkdir %s: %s", NEWROOT, strerror(errno));
	if (mount(root, NEWROOT, fstype, mflags,
	    flags[0] != '\0' ? flags : NULL) == -1)
		die("mount root=%s (%s%s%s) on %s: %s", root, fstype,
		    flags[0] != '\0' ? ", " : "", flags, NEWROOT,
		    strerror(errno));
	snprintf(path, sizeof(path), NEWROOT "%s", init);
	if (access(path, X_OK) == -1)
		die("stage two %s on root=%s: %s", init, root,
		    strerror(errno));
	/* The one line a healthy boot prints: it dates the handover. */
	say("%d modules loaded, root=%s mounted, exec %s at %ld ms", nmod,
	    root, init, uptime_ms());
	switch_root(init, argv);
	return (1);
}
