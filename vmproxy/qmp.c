/*
 * QMP client for vmproxy's QEMU side (see qmp.h, vmproxy_qmp.c).  Runs in
 * vmproxy's event loop, as the VM's uid: root vmmd links none of it.  One
 * connection per VM.  Reads lines of JSON, writes commands with sendmsg
 * so that a descriptor can travel with one (SCM_RIGHTS).
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <json-c/json.h>

#include "errf.h"
#include "fdmsg.h"
#include "log.h"
#include "qmp.h"

#define CONNECT_RETRY_MS	10
#define CAPS_TIMEOUT_MS		5000
#define READ_CHUNK		65536

enum qmp_state {
	QS_CONNECTING,
	QS_GREETING,	/* connected, waiting for QEMU's greeting */
	QS_CAPS,	/* qmp_capabilities sent */
	QS_READY,
	QS_CLOSED,
};

struct pending {
	TAILQ_ENTRY(pending)	 entry;
	struct qmp		*q;
	uint64_t		 id;
	char			 cmd[48];
	int			 timeout_ms;
	qmp_reply_cb		 cb;	/* NULL once timed out: reply dropped */
	void			*arg;
	struct event		*timer;
};

struct outmsg {
	TAILQ_ENTRY(outmsg)	 entry;
	char			*buf;
	size_t			 len, off;
	int			 fd;	/* -1, or sent with the first byte */
};

struct qmp {
	struct event_base	*base;
	struct sockaddr_un	 sun;
	struct qmp_cbs		 cbs;
	void			*arg;
	enum qmp_state		 state;
	int			 fd;
	struct event		*rev, *wev, *tev;
	struct timespec		 deadline;
	struct evbuffer		*in;
	TAILQ_HEAD(, outmsg)	 outq;
	TAILQ_HEAD(, pending)	 pending;
	uint64_t		 next_id;
	int			 busy;	/* inside one of our callbacks */
	int			 doomed; /* qmp_free called while busy */
};

/* ---------- parsing ---------- */

static int
get_string(struct json_object *o, const char *key, const char **out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return -1;
	*out = json_object_get_string(v);
	return 0;
}

int
qmp_parse(const char *buf, size_t len, struct qmp_msg *msg, char *err,
    size_t errlen)
{
	struct json_tokener *tok;
	struct json_object *root, *v, *e;
	enum json_tokener_error jerr;
	size_t end;
	int keys = 0;

	memset(msg, 0, sizeof(*msg));
	if (len > QMP_MSG_MAX)
		return errf(err, errlen, "message of %zu bytes exceeds the "
		    "%d byte limit", len, QMP_MSG_MAX);
	if ((tok = json_tokener_new_ex(QMP_DEPTH_MAX)) == NULL)
		return errf(err, errlen, "out of memory");
	root = json_tokener_parse_ex(tok, buf, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (root == NULL || jerr != json_tokener_success) {
		json_object_put(root);
		if (jerr == json_tokener_continue)
			return errf(err, errlen, "truncated JSON");
		if (jerr == json_tokener_error_depth)
			return errf(err, errlen, "JSON nested deeper than %d",
			    QMP_DEPTH_MAX);
		return errf(err, errlen, "bad JSON: %s",
		    json_tokener_error_desc(jerr));
	}
	for (; end < len; end++)
		if (buf[end] != ' ' && buf[end] != '\t' && buf[end] != '\r' &&
		    buf[end] != '\n') {
			json_object_put(root);
			return errf(err, errlen, "bytes after the JSON value");
		}
	msg->root = root;
	if (!json_object_is_type(root, json_type_object)) {
		errf(err, errlen, "message is not a JSON object");
		goto bad;
	}
	if (json_object_object_get_ex(root, "id", &v)) {
		if (!json_object_is_type(v, json_type_int) ||
		    json_object_get_int64(v) < 0) {
			errf(err, errlen, "\"id\" is not one of our ids");
			goto bad;
		}
		msg->has_id = 1;
		msg->id = (uint64_t)json_object_get_int64(v);
	}
	if (json_object_object_get_ex(root, "QMP", &v)) {
		keys++;
		if (!json_object_is_type(v, json_type_object)) {
			errf(err, errlen, "greeting \"QMP\" is not an object");
			goto bad;
		}
		msg->kind = QMP_GREETING;
	}
	if (json_object_object_get_ex(root, "return", &v)) {
		keys++;
		msg->kind = QMP_RETURN;
		msg->ret = v;
	}
	if (json_object_object_get_ex(root, "error", &e)) {
		keys++;
		msg->kind = QMP_ERROR;
		if (!json_object_is_type(e, json_type_object) ||
		    get_string(e, "class", &msg->err_class) == -1 ||
		    get_string(e, "desc", &msg->err_desc) == -1) {
			errf(err, errlen, "\"error\" lacks string \"class\" and "
			    "\"desc\"");
			goto bad;
		}
	}
	if (json_object_object_get_ex(root, "event", &v)) {
		keys++;
		msg->kind = QMP_EVENT;
		if (!json_object_is_type(v, json_type_string)) {
			errf(err, errlen, "\"event\" is not a string");
			goto bad;
		}
		msg->event = json_object_get_string(v);
		if (json_object_object_get_ex(root, "data", &v)) {
			if (!json_object_is_type(v, json_type_object)) {
				errf(err, errlen, "event \"data\" is not an "
				    "object");
				goto bad;
			}
			msg->data = v;
		}
	}
	if (keys != 1) {
		errf(err, errlen, "message is %s of greeting, return, error "
		    "and event", keys == 0 ? "none" : "more than one");
		goto bad;
	}
	return 0;
bad:
	qmp_msg_free(msg);
	return -1;
}

void
qmp_msg_free(struct qmp_msg *msg)
{
	json_object_put(msg->root);
	memset(msg, 0, sizeof(*msg));
}

/* ---------- connection ---------- */

static void	qmp_fail(struct qmp *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	qmp_destroy(struct qmp *);
static void	qmp_try_connect(struct qmp *);

static void
leave(struct qmp *q)
{
	if (--q->busy == 0 && q->doomed)
		qmp_destroy(q);
}

static int
past(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec ||
	    (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static void
reply_fail(struct qmp *q, struct pending *p, const char *cls,
    const char *desc)
{
	struct qmp_reply r = { 0, NULL, cls, desc };

	if (p->cb != NULL)
		p->cb(q, &r, p->arg);
}

static void
pending_free(struct pending *p)
{
	if (p->timer != NULL)
		event_free(p->timer);
	free(p);
}

static void
qmp_close_fd(struct qmp *q)
{
	struct outmsg *m;

	if (q->rev != NULL)
		event_free(q->rev);
	if (q->wev != NULL)
		event_free(q->wev);
	q->rev = q->wev = NULL;
	if (q->fd != -1)
		close(q->fd);
	q->fd = -1;
	while ((m = TAILQ_FIRST(&q->outq)) != NULL) {
		TAILQ_REMOVE(&q->outq, m, entry);
		free(m->buf);
		free(m);
	}
}

/* Closes the connection, fails every pending command, then tells the user. */
static void
qmp_fail(struct qmp *q, const char *fmt, ...)
{
	char why[512];
	struct pending *p;
	va_list ap;

	if (q->state == QS_CLOSED)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	q->state = QS_CLOSED;
	qmp_close_fd(q);
	if (q->tev != NULL)
		event_del(q->tev);
	q->busy++;
	while ((p = TAILQ_FIRST(&q->pending)) != NULL && !q->doomed) {
		TAILQ_REMOVE(&q->pending, p, entry);
		reply_fail(q, p, "disconnected", why);
		pending_free(p);
	}
	if (!q->doomed && q->cbs.closed != NULL)
		q->cbs.closed(q, why, q->arg);
	leave(q);
}

static void
qmp_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct qmp *q = arg;
	struct outmsg *m;
	struct msghdr mh;
	struct iovec iov;
	FDMSG_BUF(cm, 1);
	ssize_t n;

	q->busy++;
	while ((m = TAILQ_FIRST(&q->outq)) != NULL) {
		memset(&mh, 0, sizeof(mh));
		iov.iov_base = m->buf + m->off;
		iov.iov_len = m->len - m->off;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		if (m->fd != -1)
			fdmsg_attach(&mh, &cm, sizeof(cm), &m->fd, 1);
		n = sendmsg(q->fd, &mh, MSG_NOSIGNAL);
		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n == -1) {
			/* One wording for QEMU going away, however noticed. */
			if (errno == EPIPE || errno == ECONNRESET)
				qmp_fail(q, "QEMU closed the QMP connection "
				    "(write: %s)", strerror(errno));
			else
				qmp_fail(q, "write to QEMU: %s",
				    strerror(errno));
			goto out;
		}
		m->fd = -1;
		m->off += (size_t)n;
		if (m->off < m->len)
			continue;
		TAILQ_REMOVE(&q->outq, m, entry);
		free(m->buf);
		free(m);
	}
	if (TAILQ_EMPTY(&q->outq))
		event_del(q->wev);
	else
		event_add(q->wev, NULL);
out:
	leave(q);
}

static void
qmp_flush(struct qmp *q)
{
	if (q->wev != NULL && q->state >= QS_CAPS && q->state != QS_CLOSED &&
	    !TAILQ_EMPTY(&q->outq))
		event_add(q->wev, NULL);
}

static void
pending_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;
	struct qmp *q = p->q;
	char desc[128];

	snprintf(desc, sizeof(desc), "no reply to %s within %d ms", p->cmd,
	    p->timeout_ms);
	q->busy++;
	reply_fail(q, p, "timeout", desc);
	/* Keep the entry: QEMU may still answer, and that answer is dropped. */
	p->cb = NULL;
	leave(q);
}

/* Builds the command line and queues it; caps goes before everything. */
static struct pending *
qmp_enqueue(struct qmp *q, const char *cmd, struct json_object *args, int fd,
    int timeout_ms, qmp_reply_cb cb, void *arg, int first)
{
	struct json_object *o;
	struct pending *p = NULL;
	struct outmsg *m = NULL;
	const char *s;

	if ((o = json_object_new_object()) == NULL) {
		json_object_put(args);
		return NULL;
	}
	json_object_object_add(o, "execute", json_object_new_string(cmd));
	if (args != NULL)
		json_object_object_add(o, "arguments", args);
	json_object_object_add(o, "id", json_object_new_int64(
	    (int64_t)q->next_id));
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (m = calloc(1, sizeof(*m))) == NULL ||
	    (m->buf = malloc(strlen(s) + 2)) == NULL)
		goto fail;
	m->len = (size_t)sprintf(m->buf, "%s\n", s);
	m->fd = fd;
	p->q = q;
	p->id = q->next_id++;
	snprintf(p->cmd, sizeof(p->cmd), "%s", cmd);
	p->timeout_ms = timeout_ms;
	p->cb = cb;
	p->arg = arg;
	if (timeout_ms > 0) {
		struct timeval tv = { timeout_ms / 1000,
		    (timeout_ms % 1000) * 1000 };

		if ((p->timer = evtimer_new(q->base, pending_timeout, p)) ==
		    NULL || evtimer_add(p->timer, &tv) == -1)
			goto fail;
	}
	json_object_put(o);
	if (first)
		TAILQ_INSERT_HEAD(&q->outq, m, entry);
	else
		TAILQ_INSERT_TAIL(&q->outq, m, entry);
	TAILQ_INSERT_TAIL(&q->pending, p, entry);
	qmp_flush(q);
	return p;
fail:
	json_object_put(o);
	if (p != NULL && p->timer != NULL)
		event_free(p->timer);
	free(p);
	if (m != NULL)
		free(m->buf);
	free(m);
	return NULL;
}

static void
caps_done(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	if (!r->ok) {
		qmp_fail(q, "qmp_capabilities: %s: %s", r->err_class,
		    r->err_desc);
		return;
	}
	q->state = QS_READY;
	if (q->tev != NULL)
		event_del(q->tev);
	if (q->cbs.ready != NULL)
		q->cbs.ready(q, q->arg);
}

static void
qmp_dispatch(struct qmp *q, struct qmp_msg *msg)
{
	struct pending *p;
	struct qmp_reply r;

	switch (msg->kind) {
	case QMP_GREETING:
		if (q->state != QS_GREETING) {
			qmp_fail(q, "unexpected second greeting");
			return;
		}
		q->state = QS_CAPS;
		if (qmp_enqueue(q, "qmp_capabilities", NULL, -1,
		    CAPS_TIMEOUT_MS, caps_done, NULL, 1) == NULL)
			qmp_fail(q, "out of memory");
		return;
	case QMP_EVENT:
		if (q->state == QS_READY && q->cbs.event != NULL)
			q->cbs.event(q, msg->event, msg->data, q->arg);
		return;
	case QMP_RETURN:
	case QMP_ERROR:
		break;
	}
	/* QEMU answers in order; a reply without an id is the oldest one. */
	TAILQ_FOREACH(p, &q->pending, entry)
		if (!msg->has_id || p->id == msg->id)
			break;
	if (p == NULL) {
		qmp_fail(q, "reply to a command we did not send (id %llu)",
		    (unsigned long long)msg->id);
		return;
	}
	TAILQ_REMOVE(&q->pending, p, entry);
	memset(&r, 0, sizeof(r));
	r.ok = msg->kind == QMP_RETURN;
	r.ret = msg->ret;
	r.err_class = msg->err_class;
	r.err_desc = msg->err_desc;
	if (p->cb != NULL)
		p->cb(q, &r, p->arg);
	pending_free(p);
}

static void
qmp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	static char rbuf[READ_CHUNK];
	struct qmp *q = arg;
	struct evbuffer_ptr eol;
	struct qmp_msg msg;
	char err[256];
	size_t eol_len, len;
	char *line;
	int n;

	q->busy++;
	/*
	 * read(2) and a copy, not evbuffer_read: that asks the socket's size
	 * with ioctl(FIONREAD), which vmproxy's seccomp filter does not
	 * allow (no ioctl at all).
	 */
	n = (int)read(q->fd, rbuf, sizeof(rbuf));
	if (n > 0 && evbuffer_add(q->in, rbuf, (size_t)n) == -1) {
		qmp_fail(q, "out of memory");
		goto out;
	}
	if (n == 0) {
		qmp_fail(q, "QEMU closed the QMP connection");
		goto out;
	}
	if (n == -1 && errno == ECONNRESET) {
		qmp_fail(q, "QEMU closed the QMP connection (read: %s)",
		    strerror(errno));
		goto out;
	}
	if (n == -1 && errno != EAGAIN && errno != EINTR) {
		qmp_fail(q, "read from QEMU: %s", strerror(errno));
		goto out;
	}
	while (q->state != QS_CLOSED && !q->doomed) {
		eol = evbuffer_search_eol(q->in, NULL, &eol_len,
		    EVBUFFER_EOL_LF);
		if (eol.pos == -1) {
			if (evbuffer_get_length(q->in) > QMP_MSG_MAX)
				qmp_fail(q, "QEMU sent a message longer than "
				    "the %d byte limit", QMP_MSG_MAX);
			break;
		}
		len = (size_t)eol.pos;
		if (len > QMP_MSG_MAX) {
			qmp_fail(q, "QEMU sent a message longer than the %d "
			    "byte limit", QMP_MSG_MAX);
			break;
		}
		line = (char *)evbuffer_pullup(q->in, (ev_ssize_t)len);
		if (len > 0 && line == NULL) {
			qmp_fail(q, "out of memory");
			break;
		}
		if (qmp_parse(line, len, &msg, err, sizeof(err)) == -1) {
			qmp_fail(q, "QEMU sent a malformed message: %s", err);
			break;
		}
		evbuffer_drain(q->in, len + eol_len);
		qmp_dispatch(q, &msg);
		qmp_msg_free(&msg);
	}
out:
	leave(q);
}

static void
qmp_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct qmp *q = arg;

	q->busy++;
	if (q->state == QS_CONNECTING)
		qmp_try_connect(q);
	else if (q->state == QS_GREETING || q->state == QS_CAPS)
		qmp_fail(q, "no QMP greeting from QEMU within the connect "
		    "timeout");
	leave(q);
}

static void
qmp_try_connect(struct qmp *q)
{
	struct timeval retry = { 0, CONNECT_RETRY_MS * 1000 };
	struct timeval rest;
	struct timespec now;
	int fd, e;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		qmp_fail(q, "socket: %s", strerror(errno));
		return;
	}
	if (connect(fd, (struct sockaddr *)&q->sun, sizeof(q->sun)) == -1) {
		e = errno;
		close(fd);
		if (e != ENOENT && e != ECONNREFUSED && e != EAGAIN) {
			qmp_fail(q, "connect %s: %s", q->sun.sun_path,
			    strerror(e));
			return;
		}
		if (past(&q->deadline)) {
			qmp_fail(q, "connect %s: %s (gave up waiting for "
			    "QEMU)", q->sun.sun_path, strerror(e));
			return;
		}
		evtimer_add(q->tev, &retry);
		return;
	}
	q->fd = fd;
	q->state = QS_GREETING;
	q->rev = event_new(q->base, fd, EV_READ | EV_PERSIST, qmp_read_cb, q);
	q->wev = event_new(q->base, fd, EV_WRITE, qmp_write_cb, q);
	if (q->rev == NULL || q->wev == NULL || event_add(q->rev, NULL) == -1) {
		qmp_fail(q, "out of memory");
		return;
	}
	/* The greeting and capabilities share what is left of the budget. */
	clock_gettime(CLOCK_MONOTONIC, &now);
	rest.tv_sec = q->deadline.tv_sec - now.tv_sec;
	rest.tv_usec = (q->deadline.tv_nsec - now.tv_nsec) / 1000;
	if (rest.tv_usec < 0) {
		rest.tv_sec--;
		rest.tv_usec += 1000000;
	}
	if (rest.tv_sec < 0)
		rest.tv_sec = rest.tv_usec = 0;
	rest.tv_sec += CAPS_TIMEOUT_MS / 1000;
	evtimer_add(q->tev, &rest);
}

struct qmp *
qmp_open(struct event_base *base, const char *path, int connect_ms,
    const struct qmp_cbs *cbs, void *arg)
{
	struct qmp *q;
	struct timeval now0 = { 0, 0 };

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return NULL;
	q->sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(q->sun.sun_path)) {
		free(q);
		errno = ENAMETOOLONG;
		return NULL;
	}
	strcpy(q->sun.sun_path, path);
	q->base = base;
	q->cbs = *cbs;
	q->arg = arg;
	q->fd = -1;
	q->next_id = 1;
	q->state = QS_CONNECTING;
	TAILQ_INIT(&q->outq);
	TAILQ_INIT(&q->pending);
	clock_gettime(CLOCK_MONOTONIC, &q->deadline);
	q->deadline.tv_sec += connect_ms / 1000;
	q->deadline.tv_nsec += (long)(connect_ms % 1000) * 1000000L;
	if (q->deadline.tv_nsec >= 1000000000L) {
		q->deadline.tv_sec++;
		q->deadline.tv_nsec -= 1000000000L;
	}
	if ((q->in = evbuffer_new()) == NULL ||
	    (q->tev = evtimer_new(base, qmp_timer_cb, q)) == NULL) {
		if (q->in != NULL)
			evbuffer_free(q->in);
		free(q);
		return NULL;
	}
	/* First attempt from the loop, so callbacks never run inside open. */
	evtimer_add(q->tev, &now0);
	return q;
}

int
qmp_command(struct qmp *q, const char *cmd, struct json_object *args, int fd,
    int timeout_ms, qmp_reply_cb cb, void *arg)
{
	if (q->state == QS_CLOSED || q->doomed) {
		json_object_put(args);
		errno = EPIPE;
		return -1;
	}
	if (qmp_enqueue(q, cmd, args, fd, timeout_ms, cb, arg, 0) == NULL)
		return -1;
	return 0;
}

int
qmp_is_ready(const struct qmp *q)
{
	return q->state == QS_READY;
}

static void
qmp_destroy(struct qmp *q)
{
	struct pending *p;

	qmp_close_fd(q);
	while ((p = TAILQ_FIRST(&q->pending)) != NULL) {
		TAILQ_REMOVE(&q->pending, p, entry);
		pending_free(p);
	}
	if (q->tev != NULL)
		event_free(q->tev);
	evbuffer_free(q->in);
	free(q);
}

void
qmp_free(struct qmp *q)
{
	if (q == NULL)
		return;
	if (q->busy > 0) {
		/* Inside our own callback: the outermost frame frees. */
		q->doomed = 1;
		q->state = QS_CLOSED;
		qmp_close_fd(q);
		return;
	}
	qmp_destroy(q);
}
