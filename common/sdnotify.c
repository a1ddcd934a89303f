/*
 * sd_notify protocol: one datagram per state change to the AF_UNIX socket
 * systemd names in $NOTIFY_SOCKET ('@' for the abstract namespace).
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "sdnotify.h"

static int notify_fd = -1;
static struct sockaddr_un notify_addr;
static socklen_t notify_len;

void
sd_notify_init(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	size_t len;

	if (notify_fd != -1 || path == NULL || path[0] == '\0')
		return;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') ||
	    len >= sizeof(notify_addr.sun_path)) {
		log_warnx("sd_notify: ignoring NOTIFY_SOCKET that is not a "
		    "Unix socket path");
		return;
	}
	memset(&notify_addr, 0, sizeof(notify_addr));
	notify_addr.sun_family = AF_UNIX;
	memcpy(notify_addr.sun_path, path, len);
	if (path[0] == '@')
		notify_addr.sun_path[0] = '\0';
	notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
	    (path[0] == '@' ? 0 : 1));
	if ((notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		log_warn("sd_notify: socket");
	/* Children (QEMU, vmproxy) must not talk to systemd for us. */
	unsetenv("NOTIFY_SOCKET");
}

int
sd_notify_send(const char *state)
{
	ssize_t n;

	if (notify_fd == -1)
		return 0;
	n = sendto(notify_fd, state, strlen(state), MSG_NOSIGNAL,
	    (struct sockaddr *)&notify_addr, notify_len);
	if (n == -1) {
		log_warn("sd_notify: %s", state);
		return -1;
	}
	return 0;
}

uint64_t
sd_watchdog_usec(void)
{
	const char *v = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long usec;
	char *end;

	if (v == NULL)
		return 0;
	/* The watchdog is ours only if no PID is named, or ours is. */
	if (pid != NULL && strtol(pid, NULL, 10) != (long)getpid())
		return 0;
	errno = 0;
	usec = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || end == v)
		return 0;
	return usec;
}
