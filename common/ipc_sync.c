/*
 * Internal IPC, the blocking client: one connection, one call at a time,
 * each bounded by a deadline.  For the operator CLIs (authctl, vmctl) and
 * tests; no daemon blocks on it.  See ipc.h.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc.h"
#include "ipc_priv.h"
/* ---- blocking client --------------------------------------------------- */

static int
deadline_left(const struct timespec *deadline)
{
	struct timespec now;
	long long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (deadline->tv_sec - now.tv_sec) * 1000LL +
	    (deadline->tv_nsec - now.tv_nsec) / 1000000;
	return ms < 0 ? 0 : (int)ms;
}

static void
deadline_set(struct timespec *deadline, int timeout_ms)
{
	clock_gettime(CLOCK_MONOTONIC, deadline);
	deadline->tv_sec += timeout_ms / 1000;
	deadline->tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (deadline->tv_nsec >= 1000000000) {
		deadline->tv_sec++;
		deadline->tv_nsec -= 1000000000;
	}
}

static int
sync_write(int fd, struct ipc_out *o, const struct timespec *deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int rc;

	while ((rc = ipc_out_write(fd, o)) == 0) {
		if (poll(&pfd, 1, deadline_left(deadline)) <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
	}
	return rc == 1 ? 0 : -1;
}

/* Reads one whole frame; f->payload stays valid until r is reset. */
static int
sync_read(int fd, struct ipc_reader *r, struct ipc_frame *f,
    const struct timespec *deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	const char *err;

	for (;;) {
		size_t want;
		ssize_t n;
		void *dst;
		int rc;

		if ((dst = ipc_reader_space(r, &want)) == NULL)
			return -1;
		if (poll(&pfd, 1, deadline_left(deadline)) <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		n = ipc_recv(fd, r, dst, want, &err);
		if (n == -1 && errno == EAGAIN)
			continue;
		if (n == -2) {
			errno = EPROTO;
			return -1;
		}
		if (n == -1)
			return -1;
		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if ((rc = ipc_reader_commit(r, (size_t)n, f, &err)) == -1) {
			errno = EPROTO;
			return -1;
		}
		if (rc == 1)
			return 0;
	}
}

int
ipc_sync_connect(const char *path, const char *role, int timeout_ms)
{
	struct sockaddr_un sun;
	struct timespec deadline;
	struct json_object *hello;
	struct ipc_reader r;
	struct ipc_frame f;
	struct ipc_out *o;
	char peer[IPC_ROLE_MAX], err[256];
	int fd, saved;

	if (ipc_sockaddr(&sun, path) == -1)
		return -1;
	deadline_set(&deadline, timeout_ms);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
		goto fail;
	hello = json_object_new_object();
	json_object_object_add(hello, "version",
	    json_object_new_int(IPC_VERSION));
	json_object_object_add(hello, "role", json_object_new_string(role));
	o = ipc_encode(IPC_HELLO, 0, 0, hello, -1);
	json_object_put(hello);
	if (o == NULL)
		goto fail;
	if (sync_write(fd, o, &deadline) == -1) {
		ipc_out_free(o);
		goto fail;
	}
	ipc_out_free(o);
	ipc_reader_init(&r);
	if (sync_read(fd, &r, &f, &deadline) == -1) {
		saved = errno;
		ipc_reader_reset(&r);
		errno = saved;
		goto fail;
	}
	if (f.fd != -1)
		close(f.fd);
	if (ipc_hello_check(&f, peer, sizeof(peer), err, sizeof(err)) == -1) {
		ipc_reader_reset(&r);
		errno = EPROTO;
		goto fail;
	}
	ipc_reader_reset(&r);
	return fd;
 fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

int
ipc_sync_call(int fd, uint32_t type, struct json_object *req, int send_fd,
    uint32_t *rtype, struct json_object **reply, int *recv_fd, int timeout_ms)
{
	static uint32_t next_id = 1;
	struct timespec deadline;
	struct ipc_reader r;
	struct ipc_frame f;
	struct ipc_out *o;
	char err[256];
	uint32_t id = next_id++;
	int saved;

	*reply = NULL;
	if (recv_fd != NULL)
		*recv_fd = -1;
	deadline_set(&deadline, timeout_ms);
	if ((o = ipc_encode(type, id, 0, req, send_fd)) == NULL) {
		saved = errno;
		if (send_fd != -1)
			close(send_fd);
		errno = saved;
		return -1;
	}
	if (sync_write(fd, o, &deadline) == -1) {
		saved = errno;
		ipc_out_free(o);
		errno = saved;
		return -1;
	}
	ipc_out_free(o);
	ipc_reader_init(&r);
	for (;;) {
		if (sync_read(fd, &r, &f, &deadline) == -1) {
			saved = errno;
			ipc_reader_reset(&r);
			errno = saved;
			return -1;
		}
		/* Pushed events are not ours to answer here. */
		if (!(f.flags & IPC_FLAG_REPLY) || f.id != id) {
			if (f.fd != -1)
				close(f.fd);
			continue;
		}
		if ((*reply = ipc_parse_json(f.payload, f.len, err,
		    sizeof(err))) == NULL) {
			if (f.fd != -1)
				close(f.fd);
			ipc_reader_reset(&r);
			errno = EPROTO;
			return -1;
		}
		*rtype = f.type;
		if (recv_fd != NULL)
			*recv_fd = f.fd;
		else if (f.fd != -1)
			close(f.fd);
		ipc_reader_reset(&r);
		return 0;
	}
}

