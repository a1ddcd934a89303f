/*
 * vmproxy's guest link (vmproxy.h): the connection to the virtio-serial
 * socket QEMU serves, the hello that opens each session, the control
 * channel's replies, and vmmd's calls on it.  Frames come in through
 * vmproxy_dispatch_guest, which hands stream channels to streams.c and
 * the guest's own connections to vmproxy_broker.c; replies are
 * translated by guestreply.c.  A guest that breaks the protocol ends the
 * process; a link that merely drops is reconnected.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "glink.h"
#include "guestreply.h"
#include "ipc.h"
#include "log.h"
#include "vmproxy.h"
#include "vmproxy_broker.h"
#include "vmproxy_decode.h"

/*
 * Connecting to QEMU's socket is retried from LINK_RETRY_FIRST_MS,
 * doubling up to LINK_RETRY_MS: vmproxy starts just before QEMU, whose
 * socket appears tens of milliseconds later, and a restore's guest is
 * waiting for it.
 */
#define LINK_RETRY_FIRST_MS	10
#define LINK_RETRY_MS		200
#define HELLO_WAIT_MS		3000
#define LINK_READ_MAX		(64 * 1024)

/* A call of vmmd's out at the guest. */
struct pcall {
	TAILQ_ENTRY(pcall)	 entry;
	uint32_t		 gid;		/* guest request id */
	uint32_t		 ipc_id;	/* vmmd's request id */
	struct guest_call	 call;		/* its arguments, decoded */
	struct json_object	*args;		/* what vmmd asked: call's strings */
};

static struct {
	const char		*path;
	int			 fd;		/* -1: not connected */
	struct event		*rev, *wev, *retry;
	int			 retry_ms;	/* the next wait to connect */
	struct event		*hello_wait;	/* no answer: reconnect */
	int			 hello;		/* our hello was answered */
	uint32_t		 hello_gid;	/* its request id */
	uint32_t		 next_gid;
	TAILQ_HEAD(, pcall)	 calls;
} lk = { .fd = -1, .calls = TAILQ_HEAD_INITIALIZER(lk.calls) };

static void link_connect(void);
static void link_hello(void);
static void link_drop(const char *why, int fatal_guest);

int
link_up(void)
{
	return lk.fd != -1 && lk.hello;
}

static void
reply_result(uint32_t id, struct json_object *result)
{
	struct json_object *body = json_object_new_object();

	json_object_object_add(body, "result", result);
	ipc_reply(px.vmmd, IPC_PROXY_RESULT, id, body, -1);
	json_object_put(body);
}

static void
send_event(uint32_t type, const char *key, struct json_object *val)
{
	struct json_object *body = json_object_new_object();

	if (key != NULL)
		json_object_object_add(body, key, val);
	ipc_send(px.vmmd, type, 0, body, -1);
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

static void
calls_fail_all(const char *why)
{
	struct pcall *c;

	while ((c = TAILQ_FIRST(&lk.calls)) != NULL) {
		TAILQ_REMOVE(&lk.calls, c, entry);
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
	lk.hello = 1;
	glink_set_lenient(px.g, 0);
	send_event(IPC_PROXY_GUEST_HELLO, "guest", info);
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
		 * answer to ours says the session is new.  But the guest's
		 * hello while ours is unanswered says guestd has just opened
		 * the port, and it may never have seen ours (written before
		 * anyone read the port, or lost with a restore): ask again now
		 * instead of waiting out HELLO_WAIT_MS.  Only once everything
		 * sent before has left, so that a guest repeating hellos
		 * without reading gets nothing queued.  Other events are for
		 * newer hosts. */
		if (!lk.hello && strcmp(rep.event, "hello") == 0 &&
		    glink_out_pending(px.g) == 0) {
			log_debug("vm %s: the guest said hello first; asking "
			    "again", px.vm_id);
			link_hello();
			link_want_write();
		}
		json_object_put(r);
		return 0;
	}
	if (rep.id == lk.hello_gid && !lk.hello)
		return on_hello_reply(r, &rep);
	if (!lk.hello) {
		/* A reply from the guest's previous session, in flight when a
		 * checkpoint was taken: it answers no one now. */
		json_object_put(r);
		return 0;
	}
	TAILQ_FOREACH(c, &lk.calls, entry)
		if (c->gid == rep.id)
			break;
	if (c == NULL) {
		log_warnx("vm %s: guest answered request %u that was never "
		    "made", px.vm_id, rep.id);
		json_object_put(r);
		return -1;
	}
	TAILQ_REMOVE(&lk.calls, c, entry);
	rc = call_complete(c, r, &rep, f->body, f->body_len);
	json_object_put(c->args);
	free(c);
	json_object_put(r);
	return rc;
}

/* Every frame the guest sends, after glink.c has checked its framing. */
static int
vmproxy_dispatch_guest(struct glink *g, const struct glink_frame *f,
    void *arg)
{
	if (f->type == GLINK_CTRL)
		return on_ctrl(f);
	/* Connections made in the guest: the job broker pipe. */
	if (f->channel & GLINK_GUEST_CHAN)
		return vpb_link_frame(f);
	return streams_frame(f);
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
	if (glink_feed(px.g, buf, (size_t)n, vmproxy_dispatch_guest, NULL) == -1) {
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

void
link_want_write(void)
{
	if (lk.fd != -1 && glink_out_pending(px.g) > 0)
		event_add(lk.wev, NULL);
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
	if (lk.fd == -1 || lk.hello)
		return;
	log_debug("vm %s: no answer to hello in %d ms; reconnecting",
	    px.vm_id, HELLO_WAIT_MS);
	link_drop("no answer to hello", 0);
}

static void
link_schedule_retry(void)
{
	struct timeval tv = { 0, lk.retry_ms * 1000 };

	evtimer_add(lk.retry, &tv);
	if ((lk.retry_ms *= 2) > LINK_RETRY_MS)
		lk.retry_ms = LINK_RETRY_MS;
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

	if (++lk.next_gid == 0)
		lk.next_gid = 1;
	lk.hello_gid = lk.next_gid;
	json_object_object_add(req, "id", json_object_new_int64(lk.hello_gid));
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

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", lk.path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0)) == -1)
		fatal("socket");
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		close(fd);
		link_schedule_retry();
		return;
	}
	lk.fd = fd;
	lk.retry_ms = LINK_RETRY_FIRST_MS;
	lk.rev = event_new(px.base, fd, EV_READ | EV_PERSIST,
	    link_readcb, NULL);
	lk.wev = event_new(px.base, fd, EV_WRITE, link_writecb, NULL);
	event_add(lk.rev, NULL);
	log_debug("vm %s: guest link connected", px.vm_id);
	link_hello();
	{
		struct timeval tv = { HELLO_WAIT_MS / 1000,
		    (HELLO_WAIT_MS % 1000) * 1000 };

		evtimer_add(lk.hello_wait, &tv);
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
	if (lk.fd != -1) {
		event_free(lk.rev);
		event_free(lk.wev);
		close(lk.fd);
		lk.fd = -1;
	}
	glink_reset(px.g);
	vpb_link_reset();
	streams_drop();
	calls_fail_all("the guest link dropped");
	if (guest_fault) {
		log_warnx("vm %s: guest broke the link protocol: %s; giving "
		    "up on this VM", px.vm_id, why);
		send_event(IPC_PROXY_GUEST_ERROR, "message",
		    json_object_new_string(why));
		/* Give the event a moment to reach vmmd, then go. */
		{
			struct timeval tv = { 0, 200000 };

			event_base_loopexit(px.base, &tv);
		}
		return;
	}
	if (lk.hello)
		send_event(IPC_PROXY_LINK_DOWN, NULL, NULL);
	lk.hello = 0;
	log_debug("vm %s: guest link dropped: %s", px.vm_id, why);
	link_schedule_retry();
}

/* A call from vmmd, decoded: its request goes to the guest. */
void
link_call(struct ipc_msg *msg, struct vmmd_msg *m)
{
	struct pcall *c;

	if (!link_up()) {
		ipc_reply_error(px.vmmd, msg->id, "unavailable",
		    "the guest link is not up");
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("calloc");
	if (++lk.next_gid == 0)
		lk.next_gid = 1;
	c->gid = lk.next_gid;
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
		TAILQ_INSERT_TAIL(&lk.calls, c, entry);
		link_want_write();
	}
}

void
link_init(const char *path)
{
	lk.path = path;
	lk.retry_ms = LINK_RETRY_FIRST_MS;
	lk.retry = evtimer_new(px.base, retry_cb, NULL);
	lk.hello_wait = evtimer_new(px.base, hello_wait_cb, NULL);
	if (lk.retry == NULL || lk.hello_wait == NULL)
		fatalx("link: evtimer_new");
	link_connect();
}
