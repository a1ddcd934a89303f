/*
 * Internal IPC: framing, descriptor passing, peer policies, HELLO, request
 * correlation.  Used by every mcpvm daemon (event-driven side) and by the
 * operator CLIs and tests (blocking side).  See ipc.h and proto/ipc.h.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc.h"
#include "jsonx.h"
#include "log.h"

#define IPC_JSON_DEPTH		32
#define IPC_OUTQ_MAX		(16 * 1024 * 1024)	/* unread by peer */
#define IPC_ROLE_MAX		32

struct ipc_out {
	TAILQ_ENTRY(ipc_out)	 entry;
	uint8_t			*buf;
	size_t			 len, off;
	int			 fd;
};

struct ipc_pending {
	TAILQ_ENTRY(ipc_pending) entry;
	struct ipc_conn		*conn;
	uint32_t		 id;
	uint32_t		 want;	/* the reply's type; 0: any */
	struct event		*timer;
	ipc_reply_cb		 cb;
	void			*arg;
};

struct ipc_conn {
	struct event_base		*base;
	int				 fd;
	struct event			*rev, *wev;
	struct event			*fev;	/* flush at the end of the turn */
	char				 role[IPC_ROLE_MAX];
	char				 peer_role[IPC_ROLE_MAX];
	int				 hello_seen;
	const struct ipc_policy		*policy;
	const struct ipc_handlers	*h;
	void				*arg;
	struct ucred			 cred;
	struct ipc_reader		 rd;
	TAILQ_HEAD(, ipc_out)		 outq;
	size_t				 out_bytes;
	TAILQ_HEAD(, ipc_pending)	 pending;
	uint32_t			 next_id;
	int				 busy;	/* inside a callback */
	int				 dead;	/* free once callbacks return */
};

struct ipc_server {
	struct event_base		*base;
	int				 fd;
	struct event			*ev;
	char				*path;
	char				 role[IPC_ROLE_MAX];
	ipc_accept_cb			 accept;
	const struct ipc_handlers	*h;
	void				*arg;
};

/* ---- frame reader ------------------------------------------------------ */

void
ipc_reader_init(struct ipc_reader *r)
{
	memset(r, 0, sizeof(*r));
	r->saved = -1;
	r->in_fd = -1;
}

void
ipc_reader_set_bulk(struct ipc_reader *r)
{
	r->bulk = 1;
}

/* Frames may carry credentials: nothing of them stays in freed memory. */
static void
wipe_free(uint8_t *buf, size_t len)
{
	if (buf != NULL)
		explicit_bzero(buf, len);
	free(buf);
}

void
ipc_reader_reset(struct ipc_reader *r)
{
	wipe_free(r->buf, r->cap);
	if (r->in_fd != -1)
		close(r->in_fd);
	for (size_t i = 0; i < r->nfds; i++)
		close(r->fds[i].fd);
	ipc_reader_init(r);
}

static uint32_t
get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Puts back the byte a handed-out payload's NUL covered. */
static void
restore_saved(struct ipc_reader *r)
{
	if (r->saved != -1) {
		r->buf[r->saved_at] = (uint8_t)r->saved;
		r->saved = -1;
	}
}

/* Bytes the frame at r->start needs in all, once its header is in. */
static size_t
frame_size(const struct ipc_reader *r)
{
	if (r->end - r->start < IPC_HDR_LEN)
		return IPC_HDR_LEN;
	return IPC_HDR_LEN + (size_t)get_u32(r->buf + r->start + 4);
}

/* How many bytes the next read may bring. */
static size_t
room(const struct ipc_reader *r)
{
	size_t upto;

	if (r->buf == NULL)
		return 0;
	upto = r->bulk ? r->cap - 1 : r->start + frame_size(r);
	if (upto > r->cap - 1)
		upto = r->cap - 1;
	return upto > r->end ? upto - r->end : 0;
}

void *
ipc_reader_space(struct ipc_reader *r, size_t *want)
{
	size_t keep = r->end - r->start, need;
	uint8_t *nb;

	restore_saved(r);
	/* Frames handed out are done with: wipe them, keep what follows. */
	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, keep);
		explicit_bzero(r->buf + keep, r->end - keep);
		/* A read begun in a frame handed out began before any left. */
		for (size_t i = 0; i < r->nfds; i++) {
			r->fds[i].from = r->fds[i].from > r->start ?
			    r->fds[i].from - r->start : 0;
			r->fds[i].to = r->fds[i].to > r->start ?
			    r->fds[i].to - r->start : 0;
		}
		r->start = 0;
		r->end = keep;
	}
	/*
	 * Room for the frame begun (its header says how big; the length is
	 * checked when the header is whole, so this is at most the limit)
	 * and its NUL; a bulk reader keeps IPC_READ_BUF at least.
	 */
	need = frame_size(r);
	if (need > IPC_HDR_LEN + IPC_MAX_PAYLOAD)
		need = IPC_HDR_LEN;
	need++;
	if (r->bulk && need < IPC_READ_BUF)
		need = IPC_READ_BUF;
	if (r->cap < need || (keep == 0 && r->cap > need &&
	    r->cap > IPC_READ_BUF)) {
		/* Grown for a big frame, or back to size once it is gone. */
		if ((nb = malloc(need)) == NULL)
			return NULL;
		if (keep > 0)
			memcpy(nb, r->buf, keep);
		wipe_free(r->buf, r->cap);
		r->buf = nb;
		r->cap = need;
	}
	*want = room(r);
	return r->buf + r->end;
}

int
ipc_reader_commit(struct ipc_reader *r, size_t n, struct ipc_frame *f,
    const char **err)
{
	if (n > room(r)) {
		*err = "reader given more than it asked for";
		return -1;
	}
	if (r->in_fd != -1) {
		if (n == 0 || r->nfds == sizeof(r->fds) / sizeof(r->fds[0])) {
			*err = "descriptor arrived that no frame can carry";
			return -1;
		}
		r->fds[r->nfds].fd = r->in_fd;
		r->fds[r->nfds].from = r->end;
		r->fds[r->nfds].to = r->end + n;
		r->nfds++;
		r->in_fd = -1;
	}
	r->end += n;
	return ipc_reader_next(r, f, err);
}

int
ipc_reader_next(struct ipc_reader *r, struct ipc_frame *f, const char **err)
{
	const uint8_t *h;
	size_t size;
	uint32_t len, flags;
	int fd = -1;

	restore_saved(r);
	if (r->end - r->start < IPC_HDR_LEN)
		return 0;
	h = r->buf + r->start;
	len = get_u32(h + 4);
	flags = get_u32(h + 12);
	if (len > IPC_MAX_PAYLOAD) {
		*err = "frame payload exceeds 1 MiB";
		return -1;
	}
	if (flags & ~IPC_FLAGS_KNOWN) {
		*err = "unknown frame flags";
		return -1;
	}
	size = IPC_HDR_LEN + (size_t)len;
	/* The descriptor of a read that ends within this frame is its own. */
	if (r->nfds > 0 && r->fds[0].to <= r->start) {
		*err = "descriptor arrived that no frame can carry";
		return -1;
	}
	if (r->nfds > 0 && r->fds[0].to - 1 < r->start + size) {
		if (r->fds[0].from > r->start) {
			*err = "descriptor arrived in the middle of a frame";
			return -1;
		}
	}
	if (r->end - r->start < size)
		return 0;
	if (r->nfds > 0 && r->fds[0].to - 1 < r->start + size) {
		fd = r->fds[0].fd;
		r->nfds--;
		memmove(&r->fds[0], &r->fds[1], r->nfds * sizeof(r->fds[0]));
	}
	/* The frame is complete: its descriptor must match its flag. */
	if ((flags & IPC_FLAG_FD) && fd == -1) {
		*err = "frame announces a descriptor that did not arrive";
		return -1;
	}
	if (!(flags & IPC_FLAG_FD) && fd != -1) {
		close(fd);
		*err = "descriptor arrived with a frame that announces none";
		return -1;
	}
	f->type = get_u32(h);
	f->id = get_u32(h + 8);
	f->flags = flags;
	f->payload = (const char *)h + IPC_HDR_LEN;
	f->len = len;
	f->fd = fd;		/* the caller's now */
	/* NUL-terminated for the caller: borrow the next byte meanwhile. */
	r->saved_at = r->start + size;
	r->saved = r->buf[r->saved_at];
	r->buf[r->saved_at] = '\0';
	r->start += size;
	return 1;
}

int
ipc_reader_add_fd(struct ipc_reader *r, int fd, const char **err)
{
	if (r->in_fd != -1) {
		close(fd);
		*err = "more than one descriptor for one frame";
		return -1;
	}
	r->in_fd = fd;
	return 0;
}

/*
 * One JSON object, parsed strictly (jsonx: RFC 8259 grammar, UTF-8, no NUL,
 * bounded depth, nothing after it), so that what json-c alone would let
 * through (NaN, single quotes, clamped integers) never reaches a handler.
 */
static struct json_object *
ipc_parse_json(const char *buf, size_t len, char *err, size_t errlen)
{
	struct json_object *obj;
	struct jsonx_err jerr;

	if (len == 0) {
		snprintf(err, errlen, "empty payload");
		return NULL;
	}
	if ((obj = jsonx_parse_object(buf, len, IPC_JSON_DEPTH, &jerr)) ==
	    NULL && (size_t)snprintf(err, errlen, "%s", jerr.msg) >= errlen)
		err[errlen - 1] = '\0';	/* cut, but said */
	return obj;
}

int
ipc_frame_check(const struct ipc_frame *f, const struct ipc_policy *pol,
    struct json_object **body, struct jsonx_members *mem, char *err,
    size_t errlen)
{
	const struct ipc_rule *rule = NULL;
	size_t i;

	*body = NULL;
	for (i = 0; i < pol->nrules; i++)
		if (pol->rules[i].type == f->type) {
			rule = &pol->rules[i];
			break;
		}
	if (rule == NULL) {
		snprintf(err, errlen, "message type %u is not allowed from %s",
		    f->type, pol->peer);
		return -1;
	}
	if ((f->flags & IPC_FLAG_FD) && !(rule->flags & IPC_RULE_FD)) {
		snprintf(err, errlen, "message type %u may not carry a "
		    "descriptor", f->type);
		return -1;
	}
	if (rule->flags & IPC_RULE_TEXT) {
		struct jsonx_err jerr;

		if (f->len == 0) {
			snprintf(err, errlen, "empty payload");
			return -1;
		}
		if (jsonx_check_object_members(f->payload, f->len,
		    IPC_JSON_DEPTH, mem, &jerr) == -1) {
			if ((size_t)snprintf(err, errlen, "%s", jerr.msg) >=
			    errlen)
				err[errlen - 1] = '\0';
			return -1;
		}
		return 0;
	}
	if ((*body = ipc_parse_json(f->payload, f->len, err, errlen)) == NULL)
		return -1;
	return 0;
}

/* Checks a HELLO frame: right type, no descriptor, our version. */
static int
ipc_hello_check(const struct ipc_frame *f, char *role, size_t rolelen,
    char *err, size_t errlen)
{
	struct json_object *body, *v, *r;
	int rc = -1;

	if (f->type != IPC_HELLO) {
		snprintf(err, errlen, "first message is type %u, not HELLO",
		    f->type);
		return -1;
	}
	if (f->flags & IPC_FLAG_FD) {
		snprintf(err, errlen, "HELLO may not carry a descriptor");
		return -1;
	}
	if ((body = ipc_parse_json(f->payload, f->len, err, errlen)) == NULL)
		return -1;
	if (!json_object_object_get_ex(body, "version", &v) ||
	    !json_object_is_type(v, json_type_int)) {
		snprintf(err, errlen, "HELLO without an integer version");
		goto out;
	}
	if (json_object_get_int64(v) != IPC_VERSION) {
		snprintf(err, errlen, "peer speaks IPC version %lld, we "
		    "speak %d", (long long)json_object_get_int64(v),
		    IPC_VERSION);
		goto out;
	}
	if (!json_object_object_get_ex(body, "role", &r) ||
	    !json_object_is_type(r, json_type_string) ||
	    json_object_get_string_len(r) == 0 ||
	    (size_t)json_object_get_string_len(r) >= rolelen) {
		snprintf(err, errlen, "HELLO without a valid role");
		goto out;
	}
	snprintf(role, rolelen, "%s", json_object_get_string(r));
	for (char *c = role; *c != '\0'; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		    *c == '-' || *c == '_'))
			*c = '?';
	rc = 0;
 out:
	json_object_put(body);
	return rc;
}

/* ---- encoding ---------------------------------------------------------- */

static struct ipc_out *
ipc_encode(uint32_t type, uint32_t id, uint32_t flags,
    struct json_object *body, int fd)
{
	struct ipc_out *o;
	const char *js = "{}";
	size_t jlen = 2;
	uint32_t hdr[4];

	if (body != NULL) {
		js = json_object_to_json_string_ext(body,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
		jlen = strlen(js);
	}
	if (jlen > IPC_MAX_PAYLOAD) {
		errno = EMSGSIZE;
		return NULL;
	}
	if ((o = calloc(1, sizeof(*o))) == NULL)
		return NULL;
	if ((o->buf = malloc(IPC_HDR_LEN + jlen)) == NULL) {
		free(o);
		return NULL;
	}
	if (fd != -1)
		flags |= IPC_FLAG_FD;
	hdr[0] = type;
	hdr[1] = (uint32_t)jlen;
	hdr[2] = id;
	hdr[3] = flags;
	memcpy(o->buf, hdr, IPC_HDR_LEN);
	memcpy(o->buf + IPC_HDR_LEN, js, jlen);
	o->len = IPC_HDR_LEN + jlen;
	o->fd = fd;
	return o;
}

/* Frames may carry credentials: nothing of them stays in freed memory. */
static void
ipc_out_free(struct ipc_out *o)
{
	if (o->fd != -1)
		close(o->fd);
	explicit_bzero(o->buf, o->len);
	free(o->buf);
	free(o);
}

/* Puts fd in msg as SCM_RIGHTS, using buf (CMSG_SPACE(sizeof(int))). */
static void
attach_fd(struct msghdr *msg, void *buf, size_t buflen, int fd)
{
	struct cmsghdr *c;

	memset(buf, 0, buflen);
	msg->msg_control = buf;
	msg->msg_controllen = buflen;
	c = CMSG_FIRSTHDR(msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
}

/*
 * Sends as much of o as the socket takes (for the blocking client below).  The descriptor goes with the
 * first byte of the frame.  Returns 1 when done, 0 on EAGAIN, -1 on error.
 */
static int
ipc_out_write(int sock, struct ipc_out *o)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	} cmsgbuf;
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
			attach_fd(&msg, &cmsgbuf, sizeof(cmsgbuf), o->fd);
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
static int
ipc_outq_write(struct ipc_conn *c)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	} cmsgbuf;
	struct iovec iov[IPC_WRITE_BATCH];
	struct msghdr msg;
	struct ipc_out *o;
	size_t n;
	ssize_t w;
	int niov;

	while ((o = TAILQ_FIRST(&c->outq)) != NULL) {
		memset(&msg, 0, sizeof(msg));
		niov = 0;
		if (o->off == 0 && o->fd != -1) {
			attach_fd(&msg, &cmsgbuf, sizeof(cmsgbuf), o->fd);
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
		w = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
		if (w == -1) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -1;
		}
		for (n = (size_t)w; n > 0 &&
		    (o = TAILQ_FIRST(&c->outq)) != NULL; ) {
			size_t take = o->len - o->off < n ? o->len - o->off : n;

			o->off += take;
			n -= take;
			if (o->fd != -1) {
				close(o->fd);	/* it went with the first byte */
				o->fd = -1;
			}
			if (o->off < o->len)
				break;
			TAILQ_REMOVE(&c->outq, o, entry);
			c->out_bytes -= o->len;
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
static ssize_t
ipc_recv(int sock, struct ipc_reader *r, void *buf, size_t want,
    const char **err)
{
	union {
		struct cmsghdr	hdr;
		/* Room for several, so that extra ones are seen and closed. */
		char		buf[CMSG_SPACE(sizeof(int) * 8)];
	} cmsgbuf;
	struct msghdr msg;
	struct iovec iov;
	struct cmsghdr *c;
	ssize_t n;
	int bad = 0;

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
	for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
		size_t nfd, i;
		int fd;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfd; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			/* Every one received is ours to keep or close. */
			if (bad)
				close(fd);
			else if (ipc_reader_add_fd(r, fd, err) == -1)
				bad = 1;
		}
	}
	if (msg.msg_flags & MSG_CTRUNC) {
		*err = "too many descriptors in one message";
		bad = 1;
	}
	return bad ? -2 : n;
}

/* ---- connections ------------------------------------------------------- */

static void ipc_conn_readcb(int, short, void *);
static void ipc_conn_writecb(int, short, void *);
static void ipc_conn_destroy(struct ipc_conn *);

static void
ipc_conn_fail(struct ipc_conn *c, const char *why)
{
	if (c->dead)
		return;
	log_warnx("%s: %s peer pid %d uid %d: %s; closing connection",
	    c->role, c->policy != NULL ? c->policy->peer : "unknown",
	    (int)c->cred.pid, (int)c->cred.uid, why);
	c->dead = 1;
}

static int
ipc_enqueue(struct ipc_conn *c, struct ipc_out *o)
{
	if (c->out_bytes + o->len > IPC_OUTQ_MAX) {
		ipc_out_free(o);
		ipc_conn_fail(c, "peer is not reading its replies");
		errno = ENOBUFS;
		return -1;
	}
	TAILQ_INSERT_TAIL(&c->outq, o, entry);
	c->out_bytes += o->len;
	/*
	 * Written once the callbacks already due this loop turn have run, so
	 * that the frames they queue go out together: one sendmsg for many
	 * requests or replies under load, with no epoll round trip.  When the
	 * socket is full, the write event takes over.
	 */
	if (!event_pending(c->wev, EV_WRITE, NULL))
		event_active(c->fev, EV_WRITE, 0);	/* once, if already */
	return 0;
}

/*
 * Writes what the socket takes now; the write event waits for the rest.
 * -1 when the connection broke: it is marked dead (or failed), for the
 * caller to free when it may.
 */
static int
ipc_conn_write_now(struct ipc_conn *c)
{
	int rc;

	if ((rc = ipc_outq_write(c)) == 0)
		event_add(c->wev, NULL);
	if (rc != -1)
		return 0;
	if (errno == EPIPE || errno == ECONNRESET) {
		log_debug("%s: %s went away", c->role, c->policy->peer);
		c->dead = 1;
	} else
		ipc_conn_fail(c, strerror(errno));
	return -1;
}

void
ipc_conn_flush(struct ipc_conn *c)
{
	if (c->dead || TAILQ_EMPTY(&c->outq) ||
	    event_pending(c->wev, EV_WRITE, NULL))
		return;
	/* The read side frees it, outside of whatever called us. */
	if (ipc_conn_write_now(c) == -1)
		event_active(c->rev, EV_READ, 0);
}

static int
ipc_send_flags(struct ipc_conn *c, uint32_t type, uint32_t id,
    uint32_t flags, struct json_object *body, int fd)
{
	struct ipc_out *o;

	if (c->dead) {
		if (fd != -1)
			close(fd);
		errno = ENOTCONN;
		return -1;
	}
	if ((o = ipc_encode(type, id, flags, body, fd)) == NULL) {
		int saved = errno;

		if (fd != -1)
			close(fd);
		errno = saved;
		return -1;
	}
	return ipc_enqueue(c, o);
}

struct ipc_conn *
ipc_conn_new(struct event_base *base, int fd, const char *role,
    const struct ipc_policy *policy, const struct ipc_handlers *h, void *arg)
{
	struct ipc_conn *c;
	struct json_object *hello;
	socklen_t len = sizeof(c->cred);
	int flags;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->base = base;
	c->fd = fd;
	c->policy = policy;
	c->h = h;
	c->arg = arg;
	c->next_id = 1;
	snprintf(c->role, sizeof(c->role), "%s", role);
	ipc_reader_init(&c->rd);
	ipc_reader_set_bulk(&c->rd);
	TAILQ_INIT(&c->outq);
	TAILQ_INIT(&c->pending);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) == -1)
		goto fail;
	if ((flags = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1)
		goto fail;
	c->rev = event_new(base, fd, EV_READ | EV_PERSIST, ipc_conn_readcb, c);
	c->wev = event_new(base, fd, EV_WRITE, ipc_conn_writecb, c);
	c->fev = event_new(base, -1, 0, ipc_conn_writecb, c);
	if (c->rev == NULL || c->wev == NULL || c->fev == NULL)
		goto fail;
	hello = json_object_new_object();
	json_object_object_add(hello, "version",
	    json_object_new_int(IPC_VERSION));
	json_object_object_add(hello, "role", json_object_new_string(role));
	flags = ipc_send_flags(c, IPC_HELLO, 0, 0, hello, -1);
	json_object_put(hello);
	if (flags == -1)
		goto fail;
	event_add(c->rev, NULL);
	return c;
 fail:
	if (c->rev != NULL)
		event_free(c->rev);
	if (c->wev != NULL)
		event_free(c->wev);
	if (c->fev != NULL)
		event_free(c->fev);
	while (!TAILQ_EMPTY(&c->outq)) {
		struct ipc_out *o = TAILQ_FIRST(&c->outq);

		TAILQ_REMOVE(&c->outq, o, entry);
		ipc_out_free(o);
	}
	free(c);
	return NULL;
}

struct ipc_conn *
ipc_connect(struct event_base *base, const char *path, const char *role,
    const struct ipc_policy *policy, const struct ipc_handlers *h, void *arg)
{
	struct sockaddr_un sun;
	struct ipc_conn *c;
	int fd, saved;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	strcpy(sun.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return NULL;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		saved = errno;
		close(fd);
		errno = saved;
		return NULL;
	}
	if ((c = ipc_conn_new(base, fd, role, policy, h, arg)) == NULL) {
		saved = errno;
		close(fd);
		errno = saved;
	}
	return c;
}

const struct ucred *
ipc_conn_peercred(const struct ipc_conn *c)
{
	return &c->cred;
}

const char *
ipc_conn_peer_role(const struct ipc_conn *c)
{
	return c->hello_seen ? c->peer_role : NULL;
}

void
ipc_conn_set_arg(struct ipc_conn *c, void *arg)
{
	c->arg = arg;
}

int
ipc_conn_set_priority(struct ipc_conn *c, int pri)
{
	int queued;

	/*
	 * libevent refuses to change an active event's priority, and the
	 * flush event is active from the HELLO ipc_conn_new queues: take it
	 * off the active queue for the change and put it back.
	 */
	queued = event_pending(c->fev, EV_WRITE, NULL) != 0;
	if (queued && event_del(c->fev) == -1)
		return -1;
	if (event_priority_set(c->fev, pri) == -1)
		return -1;
	if (queued)
		event_active(c->fev, EV_WRITE, 0);
	return event_priority_set(c->rev, pri);
}

void *
ipc_conn_arg(const struct ipc_conn *c)
{
	return c->arg;
}

int
ipc_send(struct ipc_conn *c, uint32_t type, uint32_t id,
    struct json_object *body, int fd)
{
	return ipc_send_flags(c, type, id, 0, body, fd);
}

int
ipc_reply(struct ipc_conn *c, uint32_t type, uint32_t id,
    struct json_object *body, int fd)
{
	return ipc_send_flags(c, type, id, IPC_FLAG_REPLY, body, fd);
}

struct json_object *
ipc_error_body(const char *code, const char *message)
{
	struct json_object *body, *e;

	body = json_object_new_object();
	e = json_object_new_object();
	json_object_object_add(e, "code", json_object_new_string(code));
	json_object_object_add(e, "message", json_object_new_string(message));
	json_object_object_add(body, "error", e);
	return body;
}

int
ipc_reply_error(struct ipc_conn *c, uint32_t id, const char *code,
    const char *fmt, ...)
{
	struct json_object *body;
	char message[512];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	body = ipc_error_body(code, message);
	rc = ipc_reply(c, IPC_ERROR, id, body, -1);
	json_object_put(body);
	return rc;
}

static void
ipc_pending_timeout(int fd, short ev, void *arg)
{
	struct ipc_pending *p = arg;
	struct ipc_conn *c = p->conn;

	TAILQ_REMOVE(&c->pending, p, entry);
	event_free(p->timer);
	c->busy++;
	p->cb(c, NULL, p->arg);
	c->busy--;
	free(p);
	if (c->dead && c->busy == 0)
		ipc_conn_destroy(c);
}

static int
ipc_request_full(struct ipc_conn *c, uint32_t type, struct json_object *body,
    int fd, int timeout_ms, uint32_t want, ipc_reply_cb cb, void *arg,
    uint32_t *idp)
{
	struct ipc_pending *p;
	struct timeval tv;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		if (fd != -1)
			close(fd);
		return -1;
	}
	p->conn = c;
	p->want = want;
	p->cb = cb;
	p->arg = arg;
	p->id = c->next_id++;
	if (c->next_id == 0)
		c->next_id = 1;
	if ((p->timer = evtimer_new(c->base, ipc_pending_timeout, p)) == NULL) {
		free(p);
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (ipc_send(c, type, p->id, body, fd) == -1) {
		event_free(p->timer);
		free(p);
		return -1;
	}
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	evtimer_add(p->timer, &tv);
	TAILQ_INSERT_TAIL(&c->pending, p, entry);
	if (idp != NULL)
		*idp = p->id;
	return 0;
}

int
ipc_request_id(struct ipc_conn *c, uint32_t type, struct json_object *body,
    int fd, int timeout_ms, ipc_reply_cb cb, void *arg, uint32_t *idp)
{
	return ipc_request_full(c, type, body, fd, timeout_ms, 0, cb, arg,
	    idp);
}

int
ipc_request(struct ipc_conn *c, uint32_t type, struct json_object *body,
    int fd, int timeout_ms, ipc_reply_cb cb, void *arg)
{
	return ipc_request_full(c, type, body, fd, timeout_ms, 0, cb, arg,
	    NULL);
}

int
ipc_request_want(struct ipc_conn *c, uint32_t type, struct json_object *body,
    int fd, int timeout_ms, uint32_t want, ipc_reply_cb cb, void *arg)
{
	return ipc_request_full(c, type, body, fd, timeout_ms, want, cb, arg,
	    NULL);
}

/* Outstanding requests learn that no reply will come. */
static void
ipc_fail_pending(struct ipc_conn *c)
{
	struct ipc_pending *p;

	while ((p = TAILQ_FIRST(&c->pending)) != NULL) {
		TAILQ_REMOVE(&c->pending, p, entry);
		event_free(p->timer);
		p->cb(c, NULL, p->arg);
		free(p);
	}
}

/* Frees everything; callers have made sure no callback is running. */
static void
ipc_conn_destroy(struct ipc_conn *c)
{
	struct ipc_out *o;

	c->busy++;
	ipc_fail_pending(c);
	if (c->h != NULL && c->h->closed != NULL)
		c->h->closed(c, c->arg);
	/* What was sent just before the end still goes, if it can. */
	if (!TAILQ_EMPTY(&c->outq))
		(void)ipc_outq_write(c);
	while ((o = TAILQ_FIRST(&c->outq)) != NULL) {
		TAILQ_REMOVE(&c->outq, o, entry);
		ipc_out_free(o);
	}
	event_free(c->rev);
	event_free(c->wev);
	event_free(c->fev);
	ipc_reader_reset(&c->rd);
	close(c->fd);
	free(c);
}

void
ipc_conn_cancel_requests(struct ipc_conn *c)
{
	c->busy++;
	ipc_fail_pending(c);
	c->busy--;
	if (c->dead && c->busy == 0)
		ipc_conn_destroy(c);
}

void
ipc_conn_free(struct ipc_conn *c)
{
	if (c == NULL)
		return;
	c->dead = 1;
	/* Within one of our callbacks: the loop frees it on the way out. */
	if (c->busy == 0)
		ipc_conn_destroy(c);
}

static void
ipc_conn_frame(struct ipc_conn *c, struct ipc_frame *f)
{
	struct ipc_pending *p;
	struct ipc_msg msg;
	struct jsonx_members mem;
	char err[256];

	if (!c->hello_seen) {
		if (ipc_hello_check(f, c->peer_role, sizeof(c->peer_role),
		    err, sizeof(err)) == -1) {
			if (f->fd != -1)
				close(f->fd);
			ipc_conn_fail(c, err);
			return;
		}
		c->hello_seen = 1;
		return;
	}
	memset(&msg, 0, sizeof(msg));
	if (ipc_frame_check(f, c->policy, &msg.body, &mem, err,
	    sizeof(err)) == -1) {
		if (f->fd != -1)
			close(f->fd);
		ipc_conn_fail(c, err);
		return;
	}
	msg.type = f->type;
	msg.id = f->id;
	msg.flags = f->flags;
	msg.fd = f->fd;
	msg.text = f->payload;
	msg.textlen = f->len;
	if (msg.body == NULL)
		msg.members = &mem;

	if (f->flags & IPC_FLAG_REPLY) {
		TAILQ_FOREACH(p, &c->pending, entry)
			if (p->id == f->id)
				break;
		if (p == NULL) {
			/* Late: the request already timed out. */
			log_debug("%s: reply %u from %s matches no request",
			    c->role, f->id, c->policy->peer);
		} else if (p->want != 0 && f->type != p->want &&
		    f->type != IPC_ERROR) {
			/* An answer of another kind (a descriptor where none
			 * was asked for, say) is a peer out of protocol. */
			snprintf(err, sizeof(err), "reply %u of type %u to a "
			    "request that wants type %u", f->id, f->type,
			    p->want);
			if (msg.fd != -1)
				close(msg.fd);
			json_object_put(msg.body);
			ipc_conn_fail(c, err);
			return;
		} else {
			TAILQ_REMOVE(&c->pending, p, entry);
			event_free(p->timer);
			p->cb(c, &msg, p->arg);
			free(p);
		}
	} else if (c->h != NULL && c->h->dispatch != NULL)
		c->h->dispatch(c, &msg, c->arg);
	if (msg.fd != -1)
		close(msg.fd);
	json_object_put(msg.body);
}

static void
ipc_conn_readcb(int fd, short ev, void *arg)
{
	struct ipc_conn *c = arg;
	struct ipc_frame f;
	const char *err = NULL;
	int budget = 64;	/* frames per wakeup: be fair to others */
	int drained = 0, rc = 0;

	c->busy++;
	while (!c->dead) {
		size_t want;
		void *dst;
		ssize_t n;

		/* First the frames already read. */
		while (!c->dead && budget > 0 &&
		    (rc = ipc_reader_next(&c->rd, &f, &err)) == 1) {
			ipc_conn_frame(c, &f);
			budget--;
		}
		if (rc == -1) {
			ipc_conn_fail(c, err);
			break;
		}
		if (c->dead)
			break;
		if (budget == 0) {
			/* Come back for the rest after the others. */
			event_active(c->rev, EV_READ, 0);
			break;
		}
		/* A short read emptied the socket; epoll says when there is
		 * more, saving a read that would only say EAGAIN. */
		if (drained)
			break;
		if ((dst = ipc_reader_space(&c->rd, &want)) == NULL ||
		    want == 0) {
			ipc_conn_fail(c, dst == NULL ? "out of memory" :
			    "frame reader has no room");
			break;
		}
		n = ipc_recv(fd, &c->rd, dst, want, &err);
		if (n == -2) {
			ipc_conn_fail(c, err);
			break;
		}
		if (n == -1) {
			if (errno != EAGAIN)
				ipc_conn_fail(c, strerror(errno));
			break;
		}
		if (n == 0) {
			if (c->rd.end != c->rd.start)
				ipc_conn_fail(c, "connection closed mid-frame");
			else {
				log_debug("%s: %s closed the connection",
				    c->role, c->policy->peer);
				c->dead = 1;
			}
			break;
		}
		drained = (size_t)n < want;
		if ((rc = ipc_reader_commit(&c->rd, (size_t)n, &f, &err)) ==
		    -1) {
			ipc_conn_fail(c, err);
			break;
		}
		if (rc == 1) {
			ipc_conn_frame(c, &f);
			budget--;
		}
	}
	c->busy--;
	if (c->dead && c->busy == 0)
		ipc_conn_destroy(c);
}

static void
ipc_conn_writecb(int fd, short ev, void *arg)
{
	struct ipc_conn *c = arg;

	if (c->dead)
		return;
	if (ipc_conn_write_now(c) == -1 && c->busy == 0)
		ipc_conn_destroy(c);
}

/* ---- servers ----------------------------------------------------------- */

/* What an accept callback's ucred points into: the peer's socket too. */
struct ipc_peer {
	struct ucred	cred;	/* first: the callback's pointer */
	int		fd;
};

#define IPC_PEER_MAX_GROUPS	256

int
ipc_peer_in_group(const struct ucred *cred, gid_t gid)
{
	const struct ipc_peer *peer = (const struct ipc_peer *)cred;
	gid_t groups[IPC_PEER_MAX_GROUPS];
	socklen_t len = sizeof(groups);

	if (cred->gid == gid)
		return 1;
	if (getsockopt(peer->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) ==
	    -1) {
		/* ERANGE: more groups than we look at; not a member then. */
		log_warn("SO_PEERGROUPS of pid %d", (int)cred->pid);
		return 0;
	}
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}

static void
ipc_server_acceptcb(int lfd, short ev, void *arg)
{
	struct ipc_server *s = arg;
	const struct ipc_policy *pol;
	struct ipc_peer peer;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd;

	if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) ==
	    -1) {
		if (errno != EAGAIN && errno != EINTR &&
		    errno != ECONNABORTED)
			log_warn("%s: accept on %s", s->role, s->path);
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		log_warn("%s: SO_PEERCRED on %s", s->role, s->path);
		close(fd);
		return;
	}
	peer.cred = cred;
	peer.fd = fd;
	if ((pol = s->accept(&peer.cred, s->arg)) == NULL) {
		log_warnx("%s: refused peer pid %d uid %d gid %d on %s",
		    s->role, (int)cred.pid, (int)cred.uid, (int)cred.gid,
		    s->path);
		close(fd);
		return;
	}
	if (ipc_conn_new(s->base, fd, s->role, pol, s->h, s->arg) == NULL) {
		log_warn("%s: new connection on %s", s->role, s->path);
		close(fd);
	}
}

struct ipc_server *
ipc_server_new(struct event_base *base, const char *path, mode_t mode,
    const char *role, ipc_accept_cb accept_cb, const struct ipc_handlers *h,
    void *arg)
{
	struct sockaddr_un sun;
	struct ipc_server *s;
	struct stat st;
	mode_t old;
	int saved;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	strcpy(sun.sun_path, path);
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->fd = -1;
	s->base = base;
	s->accept = accept_cb;
	s->h = h;
	s->arg = arg;
	snprintf(s->role, sizeof(s->role), "%s", role);
	if ((s->path = strdup(path)) == NULL)
		goto fail;
	/* Only ever replace a socket: never unlink a file of another kind. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			errno = EEXIST;
			goto fail;
		}
		if (unlink(path) == -1)
			goto fail;
	}
	if ((s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) == -1)
		goto fail;
	/* Bind under a tight umask so the socket is never briefly open. */
	old = umask(0177);
	if (bind(s->fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		saved = errno;
		umask(old);
		errno = saved;
		goto fail;
	}
	umask(old);
	if (chmod(path, mode) == -1 || listen(s->fd, 128) == -1)
		goto fail;
	s->ev = event_new(base, s->fd, EV_READ | EV_PERSIST,
	    ipc_server_acceptcb, s);
	if (s->ev == NULL || event_add(s->ev, NULL) == -1)
		goto fail;
	return s;
 fail:
	saved = errno;
	ipc_server_free(s);
	errno = saved;
	return NULL;
}

void
ipc_server_free(struct ipc_server *s)
{
	if (s == NULL)
		return;
	if (s->ev != NULL)
		event_free(s->ev);
	if (s->fd != -1) {
		close(s->fd);
		unlink(s->path);
	}
	free(s->path);
	free(s);
}

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

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sun.sun_path, path);
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
