/*
 * A stand-in stage two for the image boot test and the boot benchmark: PID 1
 * in the guest after guestd stage one.  It says hello on the link port, runs
 * python3 (or, with "mcpvm.trivial" on the kernel command line, nothing) and
 * reports on the link, then powers the guest off.  Test-only; static.
 */
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

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

#define PORT_NAME	"org.mcpvm.link.0"
#define PORTS_SYSFS	"/sys/class/virtio-ports"

static void	out(int, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

static long
uptime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static void
out(int fd, const char *fmt, ...)
{
	char	 buf[512];
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	(void)write(fd, buf, n);
}

static void __attribute__((noreturn))
poweroff(void)
{
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

/*
 * There is no udev in the guest, so no /dev/virtio-ports/<name> symlink:
 * the port's name is in sysfs and its node is /dev/<vportNpM>.
 */
static int
port_open(char *path, size_t len)
{
	DIR		*d;
	struct dirent	*de;
	char		 p[PATH_MAX], name[128];
	ssize_t		 n;
	int		 fd, found = 0;

	if ((d = opendir(PORTS_SYSFS)) == NULL)
		return (-1);
	while (!found && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), PORTS_SYSFS "/%s/name", de->d_name);
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n <= 0)
			continue;
		name[n] = '\0';
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, PORT_NAME) == 0) {
			snprintf(path, len, "/dev/%s", de->d_name);
			found = 1;
		}
	}
	closedir(d);
	if (!found)
		return (-1);
	return (open(path, O_RDWR | O_NOCTTY | O_CLOEXEC));
}

/* Runs argv with stdout into buf; returns the exit status or -1. */
static int
capture(char *const argv[], char *buf, size_t len)
{
	size_t	 off = 0;
	ssize_t	 n;
	pid_t	 pid;
	int	 p[2], status;

	if (pipe2(p, O_CLOEXEC) == -1)
		return (-1);
	if ((pid = fork()) == -1)
		return (-1);
	if (pid == 0) {
		dup2(p[1], STDOUT_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	while (off < len - 1 &&
	    (n = read(p[0], buf + off, len - 1 - off)) > 0)
		off += n;
	buf[off] = '\0';
	close(p[0]);
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			return (-1);
	return (WIFEXITED(status) ? WEXITSTATUS(status) : 128);
}

static int
cmdline_has(const char *word)
{
	char	 buf[4096], *tok, *save;
	ssize_t	 n;
	int	 fd;

	if ((fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC)) == -1)
		return (0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return (0);
	buf[n] = '\0';
	for (tok = strtok_r(buf, " \n", &save); tok != NULL;
	    tok = strtok_r(NULL, " \n", &save))
		if (strcmp(tok, word) == 0)
			return (1);
	return (0);
}

int
main(void)
{
	char *const	 py[] = { "/usr/bin/python3", "-c", "print(2+2)", NULL };
	char		 path[PATH_MAX], res[256];
	long		 t0, t1;
	int		 fd, rc, tries;

	for (tries = 0; (fd = port_open(path, sizeof(path))) == -1; tries++) {
		if (tries == 1000) {
			out(2, "boot_init: no virtio port named %s\n",
			    PORT_NAME);
			poweroff();
		}
		usleep(10000);
	}
	/* The write blocks until the host side of the port is connected. */
	t0 = uptime_ms();
	out(fd, "hello boot_init uptime_ms=%ld\n", t0);
	if (cmdline_has("mcpvm.trivial")) {
		out(fd, "bye\n");
		poweroff();
	}
	rc = capture(py, res, sizeof(res));
	t1 = uptime_ms();
	res[strcspn(res, "\n")] = '\0';
	out(fd, "python3 rc=%d ms=%ld out=%s\n", rc, t1 - t0, res);
	out(fd, "bye\n");
	close(fd);
	poweroff();
}
