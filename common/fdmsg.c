/*
 * SCM_RIGHTS packing and unpacking; see fdmsg.h.  No allocation and no
 * state: guestd (static, PID 1) links it as well as the host daemons.
 */
#include <string.h>
#include <unistd.h>

#include "fdmsg.h"

void
fdmsg_attach(struct msghdr *msg, void *buf, size_t buflen, const int *fds,
    size_t nfds)
{
	struct cmsghdr *c;

	if (nfds == 0 || buflen < CMSG_SPACE(sizeof(int) * nfds)) {
		msg->msg_control = NULL;
		msg->msg_controllen = 0;
		return;
	}
	memset(buf, 0, buflen);
	msg->msg_control = buf;
	msg->msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
	c = CMSG_FIRSTHDR(msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
}

int
fdmsg_take(struct msghdr *msg, int *fds, size_t max)
{
	struct cmsghdr *c;
	size_t n = 0;
	int bad = (msg->msg_flags & MSG_CTRUNC) != 0;

	for (c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			bad = 1;
			continue;
		}
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (n < max)
				fds[n++] = fd;
			else {
				close(fd);
				bad = 1;
			}
		}
	}
	if (bad) {
		while (n > 0)
			close(fds[--n]);
		return -1;
	}
	return (int)n;
}
