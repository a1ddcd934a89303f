/*
 * Internal IPC on the socket: writing queued frames with sendmsg, a
 * frame's descriptor (SCM_RIGHTS) with its first byte and alone in its
 * sendmsg, and reading with recvmsg into the frame reader, every
 * descriptor received kept or closed.  For connections and the blocking
 * client alike; see ipc.h for the rule the reader relies on.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fdmsg.h"
#include "ipc.h"
#include "ipc_priv.h"

/* Descriptors one recvmsg takes at most: more is a broken message. */
#define IPC_RECV_FDS	8
int
ipc_sockaddr(struct sockaddr_un *sun, const char *path)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun->sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sun->sun_path, path, strlen(path) + 1);
	return 0;
}

/*
 * Sends as much of o as the socket takes (for the blocking client).  The
 * descriptor goes with the first byte of the frame.  Returns 1 when done, 0 on EAGAIN, -1 on error.
 */
int
ipc_out_write(int sock, struct ipc_out *o)
{
	FDMSG_BUF(cmsgbuf, 1);
	struct msghdr msg;
	struct iovec iov;
	ssize_t n;

	while (o->off < o->len) {
		memset(&msg, 0, sizeof(msg));
		iov.iov_base = o->buf + o->off;
		iov.iov_len = o->len - o->off;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		if (o->off == 0 && o->fd != -1)
			fdmsg_attach(&msg, &cmsgbuf, sizeof(cmsgbuf), &o->fd, 1);
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -1;
		}
		o->off += (size_t)n;
		if (o->fd != -1) {
			close(o->fd);
			o->fd = -1;
		}
	}
	return 1;
}

/* Frames per sendmsg when several are queued. */
#define IPC_WRITE_BATCH	64

/*
 * Sends as much of the queue as the socket takes, several frames to a
 * sendmsg.  A frame with a descriptor starts a sendmsg of its own and ends
 * it, the descriptor going with its first byte: the reader relies on that
 * to know whose descriptor it is.  Returns 1 when the queue is empty, 0 on
 * EAGAIN, -1 on error (errno).
 */
int
ipc_outq_write(int sock, struct ipc_outq *q, size_t *bytes)
{
	FDMSG_BUF(cmsgbuf, 1);
	struct iovec iov[IPC_WRITE_BATCH];
	struct msghdr msg;
	struct ipc_out *o;
	size_t n;
	ssize_t w;
	int niov;

	while ((o = TAILQ_FIRST(q)) != NULL) {
		memset(&msg, 0, sizeof(msg));
		niov = 0;
		if (o->off == 0 && o->fd != -1) {
			fdmsg_attach(&msg, &cmsgbuf, sizeof(cmsgbuf), &o->fd, 1);
			iov[niov].iov_base = o->buf;
			iov[niov++].iov_len = o->len;
		} else {
			for (; o != NULL && niov < IPC_WRITE_BATCH &&
			    (niov == 0 || o->fd == -1);
			    o = TAILQ_NEXT(o, entry)) {
				iov[niov].iov_base = o->buf + o->off;
				iov[niov++].iov_len = o->len - o->off;
			}
		}
		msg.msg_iov = iov;
		msg.msg_iovlen = (size_t)niov;
		w = sendmsg(sock, &msg, MSG_NOSIGNAL);
		if (w == -1) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -1;
		}
		for (n = (size_t)w; n > 0 &&
		    (o = TAILQ_FIRST(q)) != NULL; ) {
			size_t take = o->len - o->off < n ? o->len - o->off : n;

			o->off += take;
			n -= take;
			if (o->fd != -1) {
				close(o->fd);	/* it went with the first byte */
				o->fd = -1;
			}
			if (o->off < o->len)
				break;
			TAILQ_REMOVE(q, o, entry);
			*bytes -= o->len;
			ipc_out_free(o);
		}
	}
	return 1;
}

/*
 * Reads at most `want` bytes with recvmsg, collecting descriptors into the
 * reader.  Returns bytes read, 0 at EOF, -1 with errno (EAGAIN included),
 * or -2 with *err for a descriptor that breaks the rules.
 */
ssize_t
ipc_recv(int sock, struct ipc_reader *r, void *buf, size_t want,
    const char **err)
{
	/* Room for several, so that extra ones are seen and closed. */
	FDMSG_BUF(cmsgbuf, IPC_RECV_FDS);
	struct msghdr msg;
	struct iovec iov;
	ssize_t n;
	int fds[IPC_RECV_FDS], nfd, i;

	memset(&msg, 0, sizeof(msg));
	iov.iov_base = buf;
	iov.iov_len = want;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cmsgbuf.buf;
	msg.msg_controllen = sizeof(cmsgbuf.buf);
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n == -1 && errno == EINTR);
	if (n == -1)
		return -1;
	if ((nfd = fdmsg_take(&msg, fds, IPC_RECV_FDS)) == -1) {
		*err = "too many descriptors in one message";
		return -2;
	}
	/* Every one received is ours to keep or close. */
	for (i = 0; i < nfd; i++)
		if (ipc_reader_add_fd(r, fds[i], err) == -1)
			break;
	if (i < nfd) {
		while (++i < nfd)
			close(fds[i]);
		return -2;
	}
	return n;
}

/* ---- connections ------------------------------------------------------- */
