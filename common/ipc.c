/*
 * Internal IPC, the event-driven connection: HELLO both ways, the policy
 * check of every frame before its handler runs, the output queue and its
 * limit, and request correlation with timeouts.  Used by every mcpvm
 * daemon.  Framing is in ipc_frame.c, the socket side in ipc_fdpass.c,
 * listening sockets in ipc_server.c, the blocking client in ipc_sync.c.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc.h"
#include "ipc_priv.h"
#include "log.h"

#define IPC_OUTQ_MAX		(16 * 1024 * 1024)	/* unread by peer */

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
	struct ipc_outq			 outq;
	size_t				 out_bytes;
	TAILQ_HEAD(, ipc_pending)	 pending;
	uint32_t			 next_id;
	int				 busy;	/* inside a callback */
	int				 dead;	/* free once callbacks return */
};

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

static void	(*write_barrier)(void);

void
ipc_set_write_barrier(void (*fn)(void))
{
	write_barrier = fn;
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

	if (write_barrier != NULL)
		write_barrier();
	if ((rc = ipc_outq_write(c->fd, &c->outq, &c->out_bytes)) == 0)
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

	if (ipc_sockaddr(&sun, path) == -1)
		return NULL;
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
		(void)ipc_outq_write(c->fd, &c->outq, &c->out_bytes);
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

