/*
 * vmproxy: one per VM, spawned by vmmd as that VM's jail uid with no
 * capabilities and a seccomp allowlist.  It owns the guest link (the
 * virtio-serial socket QEMU serves) and is the only process that parses
 * bytes a guest sends.  It is also QEMU's QMP client and keeps QEMU's
 * output (vmproxy_qmp.c): root vmmd reads no byte that QEMU, which a
 * guest may have taken over, writes.  To vmmd it speaks IPC on an
 * inherited socketpair: tool-shaped calls in, checked tool-shaped results
 * out, one end of a socketpair per guest stream, and typed QEMU
 * operations and their typed results.  What vmmd sends is decoded first
 * (vmproxy_decode.c, dispatched from vmmd_msgs[]); what the guest answers
 * is translated by guestreply.c.  Both are pure, and unit-tested and
 * fuzzed on their own.
 *
 * A guest that breaks the link protocol ends this process (vmmd then
 * fails that VM); a link that merely drops (hibernation, restore) is
 * reconnected.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "console.h"
#include "glink.h"
#include "guest.h"
#include "guestreply.h"
#include "ipc.h"
#include "log.h"
#include "privdrop.h"
#include "utf8.h"
#include "vmproxy_decode.h"
#include "vmproxy_qmp.h"
#include "vmproxy_broker.h"

#if defined(__SANITIZE_ADDRESS__)
#define VMPROXY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VMPROXY_SANITIZED 1
#endif
#endif

/*
 * Nothing beyond the common base, except under ASan: LeakSanitizer's
 * exit-time tracer lists threads with getdents, and a tracer the filter
 * kills leaves the process waiting for it forever.  The QMP client needs
 * nothing more either (socket, connect, sendmsg with SCM_RIGHTS are in the
 * base; it reads without libevent's FIONREAD ioctl).
 */
static const char *const vmproxy_syscalls[] = {
	"ftruncate",		/* console.log keeps its newest bytes */
#ifdef VMPROXY_SANITIZED
	"getdents",
#endif
	NULL
};

#define LINK_RETRY_MS		200
#define HELLO_WAIT_MS		3000
#define LINK_READ_MAX		(64 * 1024)

struct pcall {
	TAILQ_ENTRY(pcall)	 entry;
	uint32_t		 gid;		/* guest request id */
	uint32_t		 ipc_id;	/* vmmd's request id */
	struct guest_call	 call;		/* its arguments, decoded */
	struct json_object	*args;		/* what vmmd asked: call's strings */
};

struct pstream {
	TAILQ_ENTRY(pstream)	 entry;
	uint32_t		 ch;
	uint32_t		 ipc_id;	/* while OPEN is pending */
	int			 fd;		/* our end; -1 when closed */
	int			 peer_fd;	/* vmmd's end until OPEN_OK */
	struct event		*rev, *wev;
	uint8_t			*wbuf;		/* guest bytes for the socket */
	size_t			 wlen, wcap;
	int			 open;		/* OPEN_OK seen */
	int			 guest_eof;	/* guest half-closed */
	int			 sock_eof;	/* socket half-closed */
	int			 stalled;	/* reading paused: no credit */
};

static struct {
	struct event_base	*base;
	struct ipc_conn		*vmmd;
	const char		*link_path;
	const char		*vm_id;
	int			 link_fd;
	struct event		*link_rev, *link_wev, *retry;
	struct event		*hello_wait;	/* no answer: reconnect */
	struct glink		*g;
	int			 hello;		/* our hello was answered */
	uint32_t		 hello_gid;	/* its request id */
	uint32_t		 next_gid;
	TAILQ_HEAD(, pcall)	 calls;
	TAILQ_HEAD(, pstream)	 streams;
} px;

static void link_connect(void);
static void link_drop(const char *why, int fatal_guest);
static void link_want_write(void);
static void stream_free(struct pstream *, int send_close);
static void streams_report(void);

/* ---- replies to vmmd ---------------------------------------------------- */

static void
reply_result(uint32_t id, struct json_object *result)
{
	struct json_object *body = json_object_new_object();

	json_object_object_add(body, "result", result);
	ipc_reply(px.vmmd, IPC_PROXY_RESULT, id, body, -1);
	json_object_put(body);
}

static void
send_event(const char *event, const char *key, struct json_object *val)
{
	struct json_object *body = json_object_new_object();

	json_object_object_add(body, "event", json_object_new_string(event));
	if (key != NULL)
		json_object_object_add(body, key, val);
	ipc_send(px.vmmd, IPC_PROXY_EVENT, 0, body, -1);
	json_object_put(body);
}

/* A guest reply to call c: translated (guestreply.c) and sent on. */
static int
call_complete(struct pcall *c, struct json_object *r,
    const struct glink_reply *rep, const uint8_t *body, size_t body_len)
{
	struct guestreply gr;

	switch (guestreply_translate(&c->call, r, rep, body, body_len, &gr)) {
	case GUESTREPLY_RESULT:
		reply_result(c->ipc_id, gr.result);
		return 0;
	case GUESTREPLY_ERROR:
		ipc_reply_error(px.vmmd, c->ipc_id, gr.code, "%s", gr.message);
		return 0;
	case GUESTREPLY_BROKEN:
		break;
	}
	log_warnx("vm %s: guest: %s", px.vm_id, gr.why);
	ipc_reply_error(px.vmmd, c->ipc_id, "internal",
	    "the guest sent a reply that breaks the protocol");
	return -1;
}

/* ---- link -------------------------------------------------------------- */

static void
calls_fail_all(const char *why)
{
	struct pcall *c;

	while ((c = TAILQ_FIRST(&px.calls)) != NULL) {
		TAILQ_REMOVE(&px.calls, c, entry);
		ipc_reply_error(px.vmmd, c->ipc_id, "unavailable", "%s", why);
		json_object_put(c->args);
		free(c);
	}
}

/* The answer to our hello: the session is ours from here on. */
static int
on_hello_reply(struct json_object *r, const struct glink_reply *rep)
{
	struct json_object *info;
	char err[256];

	if (guestreply_hello(r, rep, &info, err, sizeof(err)) == -1) {
		log_warnx("vm %s: guest hello: %s", px.vm_id, err);
		json_object_put(r);
		return -1;
	}
	px.hello = 1;
	glink_set_lenient(px.g, 0);
	send_event("hello", "guest", info);
	json_object_put(r);
	return 0;
}

static int
on_ctrl(const struct glink_frame *f)
{
	struct glink_reply rep;
	struct json_object *r;
	struct pcall *c;
	char err[256];
	int rc = 0;

	if ((r = glink_json_parse(f->data, f->len, err, sizeof(err))) == NULL ||
	    glink_reply_decode(r, &rep, err, sizeof(err)) == -1) {
		log_warnx("vm %s: guest control message: %s", px.vm_id, err);
		json_object_put(r);
		return -1;
	}
	if (rep.event != NULL) {
		/* The guest's own hello may predate this connection; only the
		 * answer to ours says the session is new.  Other events are for
		 * newer hosts. */
		json_object_put(r);
		return 0;
	}
	if (rep.id == px.hello_gid && !px.hello)
		return on_hello_reply(r, &rep);
	if (!px.hello) {
		/* A reply from the guest's previous session, in flight when a
		 * checkpoint was taken: it answers no one now. */
		json_object_put(r);
		return 0;
	}
	TAILQ_FOREACH(c, &px.calls, entry)
		if (c->gid == rep.id)
			break;
	if (c == NULL) {
		log_warnx("vm %s: guest answered request %u that was never "
		    "made", px.vm_id, rep.id);
		json_object_put(r);
		return -1;
	}
	TAILQ_REMOVE(&px.calls, c, entry);
	rc = call_complete(c, r, &rep, f->body, f->body_len);
	json_object_put(c->args);
	free(c);
	json_object_put(r);
	return rc;
}

static struct pstream *
stream_find(uint32_t ch)
{
	struct pstream *s;

	TAILQ_FOREACH(s, &px.streams, entry)
		if (s->ch == ch)
			return s;
	return NULL;
}

static void stream_readcb(int, short, void *);
static void stream_writecb(int, short, void *);

/* Closes the stream when both directions are done and drained. */
static void
stream_maybe_done(struct pstream *s)
{
	if (s->guest_eof && s->sock_eof && s->wlen == 0)
		stream_free(s, 1);
}

static void
stream_write(struct pstream *s)
{
	ssize_t n;

	while (s->wlen > 0) {
		n = send(s->fd, s->wbuf, s->wlen, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EAGAIN) {
				event_add(s->wev, NULL);
				return;
			}
			/* The other side is gone: abort the channel. */
			stream_free(s, 1);
			return;
		}
		memmove(s->wbuf, s->wbuf + n, s->wlen - (size_t)n);
		s->wlen -= (size_t)n;
		/* Grant the guest what the socket took. */
		if (s->ch != 0) {
			glink_consumed(px.g, s->ch, (size_t)n);
			link_want_write();
		}
	}
	if (s->guest_eof) {
		shutdown(s->fd, SHUT_WR);
		if (s->ch == 0) {
			/* The guest closed the channel; its bytes are out. */
			stream_free(s, 0);
			return;
		}
		stream_maybe_done(s);
	}
}

static int
on_stream_frame(const struct glink_frame *f)
{
	struct pstream *s = stream_find(f->channel);

	if (s == NULL)
		return 0;	/* frames crossing our CLOSE */
	switch (f->type) {
	case GLINK_OPEN_OK: {
		struct json_object *b = json_object_new_object();

		s->open = 1;
		json_object_object_add(b, "channel",
		    json_object_new_int64(s->ch));
		/* vmmd's end goes with the reply (and is closed by it). */
		ipc_reply(px.vmmd, IPC_PROXY_STREAM_OPEN_RESULT, s->ipc_id, b,
		    s->peer_fd);
		json_object_put(b);
		s->peer_fd = -1;
		event_add(s->rev, NULL);
		streams_report();
		break;
	}
	case GLINK_OPEN_FAIL: {
		char why[GLINK_OPEN_FAIL_MAX + 1];
		size_t n = f->len < GLINK_OPEN_FAIL_MAX ? f->len :
		    GLINK_OPEN_FAIL_MAX;

		memcpy(why, f->data, n);
		why[n] = '\0';
		if (memchr(why, '\0', n) != NULL ||
		    !utf8_valid((const uint8_t *)why, n))
			snprintf(why, sizeof(why), "refused");
		ipc_reply_error(px.vmmd, s->ipc_id, "conflict",
		    "nothing in the guest accepted the stream (%s)", why);
		/* The channel is already released on both sides. */
		s->ch = 0;
		stream_free(s, 0);
		break;
	}
	case GLINK_DATA:
		if (s->wlen + f->len > s->wcap) {
			size_t cap = s->wcap ? s->wcap : 64 * 1024;
			uint8_t *nb;

			while (cap < s->wlen + f->len)
				cap *= 2;
			if ((nb = realloc(s->wbuf, cap)) == NULL) {
				stream_free(s, 1);
				return 0;
			}
			s->wbuf = nb;
			s->wcap = cap;
		}
		memcpy(s->wbuf + s->wlen, f->data, f->len);
		s->wlen += f->len;
		stream_write(s);
		break;
	case GLINK_EOF:
		s->guest_eof = 1;
		if (s->wlen == 0)
			stream_write(s);
		break;
	case GLINK_CLOSE:
		/*
		 * After its EOF the guest closes the channel once both ways
		 * are done, while what it sent last may still wait for the
		 * socket: that goes out first.  A CLOSE before EOF is an
		 * abort.  The channel is released either way.
		 */
		if (s->guest_eof && s->wlen > 0) {
			s->ch = 0;
			event_del(s->rev);
			break;
		}
		stream_free(s, 0);
		break;
	}
	return 0;
}

static int
link_frame_cb(struct glink *g, const struct glink_frame *f, void *arg)
{
	if (f->type == GLINK_CTRL)
		return on_ctrl(f);
	/* Connections made in the guest: the job broker pipe. */
	if (f->channel & GLINK_GUEST_CHAN)
		return vpb_link_frame(f);
	return on_stream_frame(f);
}

/* Streams paused for want of credit start again once credit returns. */
static void
streams_resume(void)
{
	struct pstream *s;

	TAILQ_FOREACH(s, &px.streams, entry)
		if (s->stalled && glink_credit(px.g, s->ch) > 0) {
			s->stalled = 0;
			event_add(s->rev, NULL);
		}
}

static void
link_readcb(int fd, short ev, void *arg)
{
	static uint8_t buf[LINK_READ_MAX];
	ssize_t n;

	n = read(fd, buf, sizeof(buf));
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		link_drop(n == 0 ? "the guest link closed" : strerror(errno),
		    0);
		return;
	}
	if (glink_feed(px.g, buf, (size_t)n, link_frame_cb, NULL) == -1) {
		link_drop(glink_error(px.g) != NULL ? glink_error(px.g) :
		    "the guest broke the link protocol", 1);
		return;
	}
	streams_resume();
	vpb_resume();
	link_want_write();
}

static void
link_writecb(int fd, short ev, void *arg)
{
	if (glink_flush(px.g, fd) == -1) {
		link_drop(strerror(errno), 0);
		return;
	}
	link_want_write();
}

static void
link_want_write(void)
{
	if (px.link_fd != -1 && glink_out_pending(px.g) > 0)
		event_add(px.link_wev, NULL);
}

static void
retry_cb(int fd, short ev, void *arg)
{
	link_connect();
}

/*
 * Connected, but the guest has not answered our hello.  Seen after a
 * restore: the guest's idea of whether a host is on the port can lag
 * behind the new connection, and it then waits for a host that is already
 * there.  Closing and reconnecting makes QEMU tell the guest both edges,
 * and guestd opens a fresh session.  During a boot this merely repeats
 * until guestd is up.
 */
static void
hello_wait_cb(int fd, short ev, void *arg)
{
	if (px.link_fd == -1 || px.hello)
		return;
	log_debug("vm %s: no answer to hello in %d ms; reconnecting",
	    px.vm_id, HELLO_WAIT_MS);
	link_drop("no answer to hello", 0);
}

static void
link_schedule_retry(void)
{
	struct timeval tv = { 0, LINK_RETRY_MS * 1000 };

	evtimer_add(px.retry, &tv);
}

/*
 * The first thing on every connection: a hello request (guest.h).  After a
 * restore from a checkpoint the guest never saw the old host side go, so
 * only this tells it that the session is new.  Until its answer, frames
 * from the guest's old session are dropped rather than fatal.
 */
static void
link_hello(void)
{
	struct json_object *req = json_object_new_object();

	if (++px.next_gid == 0)
		px.next_gid = 1;
	px.hello_gid = px.next_gid;
	json_object_object_add(req, "id", json_object_new_int64(px.hello_gid));
	json_object_object_add(req, "op", json_object_new_string("hello"));
	glink_set_lenient(px.g, 1);
	if (glink_send_json(px.g, req, NULL, 0) == -1)
		fatalx("hello: %s", glink_error(px.g));
	json_object_put(req);
}

static void
link_connect(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", px.link_path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0)) == -1)
		fatal("socket");
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		close(fd);
		link_schedule_retry();
		return;
	}
	px.link_fd = fd;
	px.link_rev = event_new(px.base, fd, EV_READ | EV_PERSIST,
	    link_readcb, NULL);
	px.link_wev = event_new(px.base, fd, EV_WRITE, link_writecb, NULL);
	event_add(px.link_rev, NULL);
	log_debug("vm %s: guest link connected", px.vm_id);
	link_hello();
	{
		struct timeval tv = { HELLO_WAIT_MS / 1000,
		    (HELLO_WAIT_MS % 1000) * 1000 };

		evtimer_add(px.hello_wait, &tv);
	}
	link_want_write();
}

/*
 * The link is gone: every stream and pending call with it.  A guest that
 * broke the protocol ends this process; otherwise we reconnect.
 */
static void
link_drop(const char *why, int guest_fault)
{
	struct pstream *s;

	if (px.link_fd != -1) {
		event_free(px.link_rev);
		event_free(px.link_wev);
		close(px.link_fd);
		px.link_fd = -1;
	}
	glink_reset(px.g);
	vpb_link_reset();
	while ((s = TAILQ_FIRST(&px.streams)) != NULL) {
		if (!s->open)
			ipc_reply_error(px.vmmd, s->ipc_id, "unavailable",
			    "the guest link dropped");
		s->ch = 0;
		stream_free(s, 0);
	}
	calls_fail_all("the guest link dropped");
	if (guest_fault) {
		log_warnx("vm %s: guest broke the link protocol: %s; giving "
		    "up on this VM", px.vm_id, why);
		send_event("guest_error", "message",
		    json_object_new_string(why));
		/* Give the event a moment to reach vmmd, then go. */
		{
			struct timeval tv = { 0, 200000 };

			event_base_loopexit(px.base, &tv);
		}
		return;
	}
	if (px.hello)
		send_event("link_down", NULL, NULL);
	px.hello = 0;
	log_debug("vm %s: guest link dropped: %s", px.vm_id, why);
	link_schedule_retry();
}

/* ---- streams ----------------------------------------------------------- */

static void
streams_report(void)
{
	struct json_object *body;
	struct pstream *s;
	int n = 0;

	if (px.vmmd == NULL)
		return;

	TAILQ_FOREACH(s, &px.streams, entry)
		if (s->open)
			n++;
	body = json_object_new_object();
	json_object_object_add(body, "event",
	    json_object_new_string("streams"));
	json_object_object_add(body, "open", json_object_new_int(n));
	/* Attached broker pipes are activity too. */
	if ((n = vpb_attached()) > 0)
		json_object_object_add(body, "pipes", json_object_new_int(n));
	ipc_send(px.vmmd, IPC_PROXY_EVENT, 0, body, -1);
	json_object_put(body);
}

static void
stream_free(struct pstream *s, int send_close)
{
	int was_open = s->open;

	if (send_close && s->ch != 0 && glink_chan_exists(px.g, s->ch)) {
		glink_send_close(px.g, s->ch);
		link_want_write();
	}
	TAILQ_REMOVE(&px.streams, s, entry);
	if (s->rev != NULL)
		event_free(s->rev);
	if (s->wev != NULL)
		event_free(s->wev);
	if (s->fd != -1)
		close(s->fd);
	if (s->peer_fd != -1)
		close(s->peer_fd);
	free(s->wbuf);
	free(s);
	/* vmmd counts open streams as activity. */
	if (was_open && px.vmmd != NULL)
		streams_report();
}

static void
stream_readcb(int fd, short ev, void *arg)
{
	struct pstream *s = arg;
	uint8_t buf[GLINK_MAX_PAYLOAD];
	size_t credit = glink_credit(px.g, s->ch), want;
	ssize_t n;

	if (credit == 0) {
		s->stalled = 1;
		event_del(s->rev);
		return;
	}
	want = credit < sizeof(buf) ? credit : sizeof(buf);
	n = recv(fd, buf, want, 0);
	if (n == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		stream_free(s, 1);
		return;
	}
	if (n == 0) {
		s->sock_eof = 1;
		event_del(s->rev);
		glink_send_eof(px.g, s->ch);
		link_want_write();
		stream_maybe_done(s);
		return;
	}
	if (glink_send_data(px.g, s->ch, buf, (size_t)n) != n) {
		stream_free(s, 1);
		return;
	}
	link_want_write();
}

static void
stream_writecb(int fd, short ev, void *arg)
{
	stream_write(arg);
}

static void
stream_open(struct ipc_msg *msg, struct vmmd_msg *m)
{
	struct pstream *s;
	uint32_t ipc_id = msg->id, ch;
	int sp[2];

	if (px.link_fd == -1 || !px.hello) {
		ipc_reply_error(px.vmmd, ipc_id, "unavailable",
		    "the guest link is not up");
		return;
	}
	if ((ch = glink_free_channel(px.g)) == 0) {
		ipc_reply_error(px.vmmd, ipc_id, "quota_exceeded",
		    "every link channel of this VM is in use");
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == -1) {
		ipc_reply_error(px.vmmd, ipc_id, "internal", "socketpair: %s",
		    strerror(errno));
		return;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL)
		fatal("calloc");
	s->ch = ch;
	s->ipc_id = ipc_id;
	s->fd = sp[0];
	s->peer_fd = sp[1];
	fcntl(s->fd, F_SETFL, O_NONBLOCK);
	s->rev = event_new(px.base, s->fd, EV_READ | EV_PERSIST,
	    stream_readcb, s);
	s->wev = event_new(px.base, s->fd, EV_WRITE, stream_writecb, s);
	TAILQ_INSERT_TAIL(&px.streams, s, entry);
	if (glink_send_open(px.g, ch, (uint16_t)m->port) == -1) {
		ipc_reply_error(px.vmmd, ipc_id, "internal", "%s",
		    glink_error(px.g));
		s->ch = 0;
		stream_free(s, 0);
		return;
	}
	link_want_write();
}

/* ---- calls from vmmd --------------------------------------------------- */

/* A call from vmmd, decoded: its request goes to the guest. */
static void
proxy_call(struct ipc_msg *msg, struct vmmd_msg *m)
{
	struct pcall *c;

	if (px.link_fd == -1 || !px.hello) {
		ipc_reply_error(px.vmmd, msg->id, "unavailable",
		    "the guest link is not up");
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("calloc");
	if (++px.next_gid == 0)
		px.next_gid = 1;
	c->gid = px.next_gid;
	c->ipc_id = msg->id;
	c->call = m->call;
	c->args = json_object_get(msg->body);
	json_object_object_add(m->request, "id", json_object_new_int64(c->gid));
	if (glink_send_json(px.g, m->request, m->body, m->body_len) == -1) {
		ipc_reply_error(px.vmmd, msg->id, "internal", "%s",
		    glink_error(px.g));
		json_object_put(c->args);
		free(c);
	} else {
		TAILQ_INSERT_TAIL(&px.calls, c, entry);
		link_want_write();
	}
}

static void
qmp_request(struct ipc_msg *msg, struct vmmd_msg *m)
{
	vmproxy_qmp_request(px.vmmd, msg, m->qmp_op, m->qmp_timeout_ms);
}

/* The broker's members were checked (vmproxy_decode_broker_*); vpb_*
 * reads their values. */
static void
broker_route(struct ipc_msg *msg, struct vmmd_msg *m)
{
	vpb_route(px.vmmd, msg->id, msg->body);
}

static void
broker_attach(struct ipc_msg *msg, struct vmmd_msg *m)
{
	vpb_attach(px.vmmd, msg->id, msg->body);
}

static void
broker_limits(struct ipc_msg *msg, struct vmmd_msg *m)
{
	vpb_limits(px.vmmd, msg->id, msg->body);
}

/*
 * Everything vmmd may send, one line each: the message type, its rule
 * flags for ipc's policy, its decoder and its handler.  No handler sees
 * a body its decoder did not accept.
 */
static const struct {
	uint32_t		 type;
	unsigned int		 flags;
	enum decode_verdict	(*decode)(struct json_object *,
				    struct vmmd_msg *, struct decode_err *);
	void			(*handle)(struct ipc_msg *, struct vmmd_msg *);
} vmmd_msgs[] = {
	{ IPC_PROXY_CALL, 0, vmproxy_decode_call, proxy_call },
	{ IPC_PROXY_STREAM_OPEN, 0, vmproxy_decode_stream_open, stream_open },
	/* getfd's checkpoint is the one descriptor vmmd sends. */
	{ IPC_PROXY_QMP, IPC_RULE_FD, vmproxy_decode_qmp, qmp_request },
	/* The job broker pipe (vmproxy_broker.c). */
	{ IPC_PROXY_BROKER_ROUTE, 0, vmproxy_decode_broker_route,
	    broker_route },
	{ IPC_PROXY_BROKER_ATTACH, 0, vmproxy_decode_broker_attach,
	    broker_attach },
	{ IPC_PROXY_BROKER_LIMITS, 0, vmproxy_decode_broker_limits,
	    broker_limits },
};
#define NVMMD_MSGS	(sizeof(vmmd_msgs) / sizeof(vmmd_msgs[0]))

static void
vmproxy_dispatch_vmmd(struct ipc_conn *conn, struct ipc_msg *msg, void *arg)
{
	struct vmmd_msg m;
	struct decode_err de;
	size_t i;

	for (i = 0; i < NVMMD_MSGS; i++)
		if (vmmd_msgs[i].type == msg->type)
			break;
	if (i == NVMMD_MSGS) {
		/* ipc's policy admits only the table's types. */
		log_warnx("vm %s: vmmd sent message type %u, which is not "
		    "in the table; closing", px.vm_id, msg->type);
		ipc_conn_free(conn);
		return;
	}
	switch (vmmd_msgs[i].decode(msg->body, &m, &de)) {
	case DECODE_BAD:
		log_warnx("vm %s: vmmd sent a malformed message (type %u): "
		    "%s; closing its connection", px.vm_id, msg->type, de.msg);
		vmmd_msg_clear(&m);
		ipc_conn_free(conn);
		return;
	case DECODE_REFUSE:
		ipc_reply_error(conn, msg->id, de.code, "%s", de.msg);
		break;
	case DECODE_OK:
		vmmd_msgs[i].handle(msg, &m);
		break;
	}
	vmmd_msg_clear(&m);
}

static void
vmproxy_closed_vmmd(struct ipc_conn *conn, void *arg)
{
	/* vmmd is gone or let us go: nothing to serve any more. */
	px.vmmd = NULL;
	event_base_loopbreak(px.base);
}

/* ipc's policy for vmmd, from vmmd_msgs[] (filled in main). */
static struct ipc_rule vmmd_rules[NVMMD_MSGS];
static const struct ipc_policy vmmd_policy = {
	"vmmd", vmmd_rules, NVMMD_MSGS
};
static const struct ipc_handlers vmmd_handlers = {
	vmproxy_dispatch_vmmd, vmproxy_closed_vmmd
};

static __attribute__((noreturn)) void
usage(void)
{
	fprintf(stderr, "usage: vmproxy [-dv] --ipc-fd N --link PATH --vm ID "
	    "[--console-fd N --console PATH --console-max BYTES]\n"
	    "\t[--qmp PATH] [--qemu-log-fd N --qemu-log PATH "
	    "--qemu-log-max BYTES]\n");
	exit(2);
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "ipc-fd", required_argument, NULL, 'f' },
		{ "link", required_argument, NULL, 'l' },
		{ "vm", required_argument, NULL, 'm' },
		{ "console-fd", required_argument, NULL, 'c' },
		{ "console", required_argument, NULL, 'C' },
		{ "console-max", required_argument, NULL, 'M' },
		{ "qmp", required_argument, NULL, 'q' },
		{ "qemu-log-fd", required_argument, NULL, 'g' },
		{ "qemu-log", required_argument, NULL, 'G' },
		{ "qemu-log-max", required_argument, NULL, 'X' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct privdrop keep_none = { NULL, NULL, 0 };
	int ch, foreground = 0, verbose = 0, ipc_fd = -1, con_fd = -1;
	int con_file = -1, qlog_fd = -1, qlog_file = -1;
	const char *con_path = NULL, *qmp_path = NULL, *qlog_path = NULL;
	long long con_max = 0, qlog_max = 0;
	struct console *con = NULL, *qlog = NULL;
	char *end;

	while ((ch = getopt_long(argc, argv, "dv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			foreground = 1;
			break;
		case 'v':
			verbose++;
			break;
		case 'f':
			ipc_fd = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || ipc_fd < 3)
				usage();
			break;
		case 'l':
			px.link_path = optarg;
			break;
		case 'm':
			px.vm_id = optarg;
			break;
		case 'c':
			con_fd = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || con_fd < 3)
				usage();
			break;
		case 'C':
			con_path = optarg;
			break;
		case 'M':
			con_max = strtoll(optarg, &end, 10);
			if (*end != '\0' || con_max < 2 || con_max > 1LL << 30)
				usage();
			break;
		case 'q':
			qmp_path = optarg;
			break;
		case 'g':
			qlog_fd = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || qlog_fd < 3)
				usage();
			break;
		case 'G':
			qlog_path = optarg;
			break;
		case 'X':
			qlog_max = strtoll(optarg, &end, 10);
			if (*end != '\0' || qlog_max < 2 || qlog_max > 1LL << 30)
				usage();
			break;
		default:
			usage();
		}
	}
	if (ipc_fd == -1 || px.link_path == NULL || px.vm_id == NULL ||
	    (con_fd != -1) != (con_path != NULL) ||
	    (con_fd != -1) != (con_max != 0) ||
	    (qlog_fd != -1) != (qlog_path != NULL) ||
	    (qlog_fd != -1) != (qlog_max != 0))
		usage();
	log_init("vmproxy", foreground, verbose);
	signal(SIGPIPE, SIG_IGN);

	/* vmmd started us as the VM's uid: we keep nothing, and say so. */
	if (geteuid() == 0)
		fatalx("vmproxy must not run as root");
	privdrop(&keep_none);
	/* Opened before the filter, which has no open of any kind. */
	if (con_path != NULL && (con_file = open(con_path, O_RDWR | O_CREAT |
	    O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
		fatal("%s", con_path);
	/*
	 * QEMU's stdout and stderr: root vmmd never reads them (#14).  A
	 * new file of ours, whatever is under that name now.
	 */
	if (qlog_path != NULL) {
		(void)unlink(qlog_path);
		if ((qlog_file = open(qlog_path, O_RDWR | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
			fatal("%s", qlog_path);
	}
	sandbox_seccomp(vmproxy_syscalls, sizeof(vmproxy_syscalls) /
	    sizeof(vmproxy_syscalls[0]) - 1, 0);

	TAILQ_INIT(&px.calls);
	TAILQ_INIT(&px.streams);
	px.link_fd = -1;
	if ((px.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	if ((px.g = glink_new(GLINK_ROLE_HOST)) == NULL)
		fatalx("glink_new");
	if (con_fd != -1 && (con = console_new(px.base, con_fd, con_file,
	    (size_t)con_max)) == NULL)
		fatal("console");
	if (qlog_fd != -1 && (qlog = console_new(px.base, qlog_fd, qlog_file,
	    (size_t)qlog_max)) == NULL)
		fatal("qemu log");
	{
		struct vpb_hooks h = { px.base, px.g, px.vm_id,
		    link_want_write, streams_report };

		vpb_init(&h);
	}
	px.retry = evtimer_new(px.base, retry_cb, NULL);
	px.hello_wait = evtimer_new(px.base, hello_wait_cb, NULL);
	for (size_t i = 0; i < NVMMD_MSGS; i++) {
		vmmd_rules[i].type = vmmd_msgs[i].type;
		vmmd_rules[i].flags = vmmd_msgs[i].flags;
	}
	if ((px.vmmd = ipc_conn_new(px.base, ipc_fd, "vmproxy", &vmmd_policy,
	    &vmmd_handlers, NULL)) == NULL)
		fatal("ipc to vmmd");
	if (vmproxy_qmp_init(px.base, px.vmmd, qmp_path, qlog) == -1)
		fatal("qmp");
	link_connect();
	event_base_dispatch(px.base);
	vmproxy_qmp_free();
	console_free(qlog);
	console_free(con);
	/* A guest that broke the protocol: exit status 3 tells vmmd so. */
	return px.vmmd != NULL ? 3 : 0;
}
