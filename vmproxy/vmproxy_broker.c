/*
 * vmproxy: the job broker pipe.  Each guest connection arrives on its own
 * ACCEPT channel and starts with a preamble naming a job and its route
 * secret; it is routed only when the secret matches the one vmmd gave for
 * that job.  Routed connections wait for the job's controller, then travel
 * multiplexed (common/brokermux.h) over the socket that vmmd hands to mcpd.
 * Every byte from the guest and from the controller is bounded here.
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brokermux.h"
#include "jsonx.h"
#include "log.h"
#include "vmproxy_broker.h"

#define VPB_MAX_ROUTES	GUEST_MAX_JOBS
#define VPB_READ_MAX	(BMUX_MAX_DATA + BMUX_HDR_MAX)

enum bc_state {
	BC_PENDING,	/* reading its preamble */
	BC_WAITING,	/* routed, no controller yet */
	BC_ACTIVE,	/* carried, has a conn_id */
	BC_DRAINING,	/* the controller closed it: EOF after its data */
};

struct broute;

struct bconn {
	TAILQ_ENTRY(bconn)	 entry;
	uint32_t		 ch;
	enum bc_state		 state;
	struct broute		*r;
	uint32_t		 id;
	time_t			 since;		/* accepted; last progress */
	uint8_t			 pre[BROKER_PREAMBLE_MAX];
	size_t			 prelen;
	uint8_t			*gbuf;		/* guest bytes before open */
	size_t			 glen;
	uint8_t			*tx;		/* controller bytes */
	size_t			 txlen;
	int			 eof_sent;
};

struct bchunk {
	struct bchunk		*next;
	uint32_t		 ch;		/* credit to grant once written */
	size_t			 credit;
	size_t			 len, off;
	uint8_t			 buf[];
};

struct battach {
	int			 fd;
	struct event		*rev, *wev;
	struct bmux_dec		 dec;
	struct bchunk		*head, *tail;
	uint32_t		 next_id;
	int			 paused;	/* reading stopped: a slow guest */
	struct broute		*r;
	uint64_t		 bytes_in, bytes_out;
};

struct broute {
	TAILQ_ENTRY(broute)	 entry;
	char			 job_id[GUEST_JOB_ID_MAX + 1];
	uint8_t			 secret[BROKER_SECRET_HEX / 2];
	struct battach		*att;
};

static struct {
	struct vpb_hooks	 h;
	TAILQ_HEAD(, bconn)	 conns;
	TAILQ_HEAD(, broute)	 routes;
	struct event		*tick;
	int			 nroutes;
	struct vpb_limits	 lim;
} vb = {
	.lim = { 4, 64, 32, 1024 * 1024, 10, 64, 2 },
};

static void	conn_pump(struct bconn *);
static void	att_detach(struct battach *, const char *);
static void	att_maybe_resume(struct battach *);

static time_t
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static void
tick_arm(void)
{
	struct timeval tv = { 1, 0 };

	if (!evtimer_pending(vb.tick, NULL) && !TAILQ_EMPTY(&vb.conns))
		evtimer_add(vb.tick, &tv);
}

static int
count_state(const struct broute *r, enum bc_state st)
{
	struct bconn *c;
	int n = 0;

	TAILQ_FOREACH(c, &vb.conns, entry)
		if (c->state == st && (r == NULL || c->r == r))
			n++;
	return n;
}

int
vpb_attached(void)
{
	struct broute *r;
	int n = 0;

	TAILQ_FOREACH(r, &vb.routes, entry)
		n += r->att != NULL;
	return n;
}

/* ---- the socket to mcpd ------------------------------------------------ */

static void
att_queue(struct battach *a, uint8_t type, uint32_t id, const void *data,
    size_t len, uint32_t ch)
{
	struct bchunk *k;
	size_t hl;

	if ((k = malloc(sizeof(*k) + BMUX_HDR_MAX + len)) == NULL)
		fatal("malloc");
	hl = bmux_encode(k->buf, type, id, (uint32_t)len);
	if (len > 0)
		memcpy(k->buf + hl, data, len);
	k->next = NULL;
	k->ch = ch;
	k->credit = type == BMUX_DATA ? len : 0;
	k->len = hl + len;
	k->off = 0;
	if (a->tail != NULL)
		a->tail->next = k;
	else
		a->head = k;
	a->tail = k;
	a->bytes_out += len;
	event_add(a->wev, NULL);
}

static void
att_writecb(int fd, short ev, void *arg)
{
	struct battach *a = arg;
	struct bchunk *k;
	ssize_t n;

	while ((k = a->head) != NULL) {
		n = send(fd, k->buf + k->off, k->len - k->off, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EAGAIN || errno == EINTR) {
				event_add(a->wev, NULL);
				return;
			}
			att_detach(a, "controller gone");
			return;
		}
		k->off += (size_t)n;
		if (k->off < k->len) {
			event_add(a->wev, NULL);
			return;
		}
		a->head = k->next;
		if (a->head == NULL)
			a->tail = NULL;
		/* The guest may send as much again once mcpd took it. */
		if (k->credit > 0 && glink_chan_exists(vb.h.g, k->ch)) {
			glink_consumed(vb.h.g, k->ch, k->credit);
			vb.h.want_write();
		}
		free(k);
	}
}

/* ---- guest connections ------------------------------------------------- */

static struct bconn *
conn_by_id(const struct broute *r, uint32_t id)
{
	struct bconn *c;

	TAILQ_FOREACH(c, &vb.conns, entry)
		if (c->r == r && c->id == id && (c->state == BC_ACTIVE ||
		    c->state == BC_DRAINING))
			return c;
	return NULL;
}

/*
 * Ends a connection.  close_link: tell the guest (the channel is still
 * ours); a carried connection's controller always hears of it.
 */
static void
conn_free(struct bconn *c, int close_link)
{
	struct battach *a = c->r != NULL ? c->r->att : NULL;

	if (close_link && glink_chan_exists(vb.h.g, c->ch)) {
		glink_send_close(vb.h.g, c->ch);
		vb.h.want_write();
	}
	if (c->state == BC_ACTIVE && a != NULL)
		att_queue(a, BMUX_CLOSE, c->id, NULL, 0, 0);
	TAILQ_REMOVE(&vb.conns, c, entry);
	explicit_bzero(c->pre, sizeof(c->pre));
	free(c->gbuf);
	free(c->tx);
	free(c);
	if (a != NULL)
		att_maybe_resume(a);
}

/* Waiting connections of r get conn_ids while the attachment has room. */
static void
route_activate(struct broute *r)
{
	struct battach *a = r->att;
	struct bconn *c;

	if (a == NULL)
		return;
	TAILQ_FOREACH(c, &vb.conns, entry) {
		if (c->r != r || c->state != BC_WAITING)
			continue;
		if (count_state(r, BC_ACTIVE) >= vb.lim.max_connections)
			return;
		if (a->next_id == UINT32_MAX) {
			att_detach(a, "conn_id space used up");
			return;
		}
		c->id = a->next_id++;
		c->state = BC_ACTIVE;
		c->since = now_s();
		att_queue(a, BMUX_OPEN, c->id, NULL, 0, 0);
		if (c->glen > 0)
			att_queue(a, BMUX_DATA, c->id, c->gbuf, c->glen, c->ch);
		free(c->gbuf);
		c->gbuf = NULL;
		c->glen = 0;
	}
}

static int
secret_eq(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;
	size_t i;

	for (i = 0; i < BROKER_SECRET_HEX / 2; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

static int
gbuf_add(struct bconn *c, const uint8_t *p, size_t n)
{
	uint8_t *nb;

	if (n == 0)
		return 0;
	/* Within the channel's credit, which is all the guest may send. */
	if (c->glen + n > GLINK_MAX_WINDOW ||
	    (nb = realloc(c->gbuf, c->glen + n)) == NULL)
		return -1;
	c->gbuf = nb;
	memcpy(c->gbuf + c->glen, p, n);
	c->glen += n;
	return 0;
}

/* Preamble bytes: routed on a whole one, refused on a bad one. */
static void
conn_preamble(struct bconn *c, const uint8_t *p, size_t n)
{
	struct broker_preamble pr;
	struct broute *r;
	size_t take = sizeof(c->pre) - c->prelen;
	int k;

	if (take > n)
		take = n;
	memcpy(c->pre + c->prelen, p, take);
	c->prelen += take;
	k = broker_preamble_parse(c->pre, c->prelen, &pr);
	if (k == 0 && c->prelen < sizeof(c->pre))
		return;
	if (k <= 0) {
		log_warnx("vm %s: broker connection refused: bad preamble",
		    vb.h.vm_id);
		conn_free(c, 1);
		return;
	}
	TAILQ_FOREACH(r, &vb.routes, entry)
		if (strcmp(r->job_id, pr.job_id) == 0)
			break;
	/* A job id alone reaches nothing: the secret must match. */
	if (r == NULL || !secret_eq(r->secret, pr.secret)) {
		explicit_bzero(&pr, sizeof(pr));
		log_warnx("vm %s: broker connection refused: no pipe with "
		    "that route secret", vb.h.vm_id);
		conn_free(c, 1);
		return;
	}
	explicit_bzero(&pr, sizeof(pr));
	if (count_state(r, BC_WAITING) >= vb.lim.max_waiting &&
	    (r->att == NULL ||
	    count_state(r, BC_ACTIVE) >= vb.lim.max_connections)) {
		log_warnx("vm %s: job %s: broker connection refused: "
		    "broker_max_waiting (%lld) connections already wait for "
		    "the controller", vb.h.vm_id, r->job_id,
		    vb.lim.max_waiting);
		conn_free(c, 1);
		return;
	}
	/* What followed the preamble is the connection's first data. */
	if (gbuf_add(c, c->pre + k, c->prelen - (size_t)k) == -1 ||
	    gbuf_add(c, p + take, n - take) == -1) {
		conn_free(c, 1);
		return;
	}
	glink_consumed(vb.h.g, c->ch, (size_t)k);
	vb.h.want_write();
	explicit_bzero(c->pre, sizeof(c->pre));
	c->prelen = 0;
	c->r = r;
	c->state = BC_WAITING;
	route_activate(r);
}

int
vpb_link_frame(const struct glink_frame *f)
{
	struct bconn *c = f->udata;

	if (f->type == GLINK_ACCEPT) {
		if (count_state(NULL, BC_PENDING) >= vb.lim.max_pending) {
			log_warnx("vm %s: broker connection refused: "
			    "broker_max_pending (%lld) preambles are being "
			    "read", vb.h.vm_id, vb.lim.max_pending);
			glink_send_close(vb.h.g, f->channel);
			vb.h.want_write();
			return 0;
		}
		if ((c = calloc(1, sizeof(*c))) == NULL)
			fatal("calloc");
		c->ch = f->channel;
		c->state = BC_PENDING;
		c->since = now_s();
		TAILQ_INSERT_TAIL(&vb.conns, c, entry);
		glink_chan_set_udata(vb.h.g, f->channel, c);
		tick_arm();
		return 0;
	}
	if (c == NULL)
		return 0;	/* refused; frames crossing our CLOSE */
	switch (f->type) {
	case GLINK_DATA:
		switch (c->state) {
		case BC_PENDING:
			conn_preamble(c, f->data, f->len);
			break;
		case BC_WAITING:
			if (gbuf_add(c, f->data, f->len) == -1)
				conn_free(c, 1);
			break;
		case BC_ACTIVE:
			att_queue(c->r->att, BMUX_DATA, c->id, f->data, f->len,
			    c->ch);
			break;
		case BC_DRAINING:
			/* The controller closed it: nobody reads this. */
			glink_consumed(vb.h.g, c->ch, f->len);
			vb.h.want_write();
			break;
		}
		break;
	case GLINK_EOF:
		/*
		 * A half-close: the multiplexing has no such frame, and the
		 * guest client still reads the reply.  It ends with CLOSE.
		 */
		if (c->state == BC_PENDING)
			conn_free(c, 1);
		break;
	case GLINK_WINDOW:
		conn_pump(c);
		break;
	case GLINK_CLOSE:
		/* glink answered and released the channel. */
		conn_free(c, 0);
		break;
	}
	return 0;
}

/* Controller bytes go to the guest within the channel's credit. */
static void
conn_pump(struct bconn *c)
{
	size_t credit;
	ssize_t n;

	while (c->txlen > 0 && (credit = glink_credit(vb.h.g, c->ch)) > 0) {
		n = glink_send_data(vb.h.g, c->ch, c->tx, c->txlen < credit ?
		    c->txlen : credit);
		if (n <= 0)
			break;
		memmove(c->tx, c->tx + n, c->txlen - (size_t)n);
		c->txlen -= (size_t)n;
		c->since = now_s();
		vb.h.want_write();
	}
	/* The controller's close follows the data it sent before it. */
	if (c->txlen == 0 && c->state == BC_DRAINING && !c->eof_sent &&
	    glink_credit(vb.h.g, c->ch) > 0) {
		glink_send_eof(vb.h.g, c->ch);
		c->eof_sent = 1;
		vb.h.want_write();
	}
	if (c->r != NULL && c->r->att != NULL)
		att_maybe_resume(c->r->att);
}

void
vpb_resume(void)
{
	struct bconn *c, *next;

	for (c = TAILQ_FIRST(&vb.conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->txlen > 0 || (c->state == BC_DRAINING && !c->eof_sent))
			conn_pump(c);
	}
}

void
vpb_link_reset(void)
{
	struct bconn *c;

	while ((c = TAILQ_FIRST(&vb.conns)) != NULL)
		conn_free(c, 0);
}

/* Preambles that take too long; connections that stopped reading. */
static void
tick_cb(int fd, short ev, void *arg)
{
	struct bconn *c, *next;
	time_t now = now_s();

	for (c = TAILQ_FIRST(&vb.conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->state == BC_PENDING &&
		    now - c->since >= vb.lim.preamble_seconds) {
			log_warnx("vm %s: broker connection refused: no "
			    "preamble within broker_preamble_seconds (%lld)",
			    vb.h.vm_id, vb.lim.preamble_seconds);
			conn_free(c, 1);
		} else if (c->txlen > 0 && now - c->since >=
		    vb.lim.stall_seconds) {
			log_info("vm %s: job %s: broker connection %u closed: "
			    "the guest read nothing for broker_stall_seconds "
			    "(%lld)", vb.h.vm_id, c->r->job_id, c->id,
			    vb.lim.stall_seconds);
			conn_free(c, 1);
		}
	}
	tick_arm();
}

/* ---- the controller's frames ------------------------------------------- */

/* Reading stops while one connection could not take another frame. */
static int
att_must_pause(const struct battach *a)
{
	struct bconn *c;

	TAILQ_FOREACH(c, &vb.conns, entry)
		if (c->r == a->r && c->txlen + VPB_READ_MAX >
		    (size_t)vb.lim.buffer_bytes)
			return 1;
	return 0;
}

static void
att_maybe_resume(struct battach *a)
{
	if (a->paused && !att_must_pause(a)) {
		a->paused = 0;
		event_add(a->rev, NULL);
	}
}

static int
on_ctl_frame(const struct bmux_frame *f, void *arg)
{
	struct battach *a = arg;
	struct bconn *c;

	if (f->conn_id >= a->next_id) {
		snprintf(a->dec.err, sizeof(a->dec.err), "conn_id %u was "
		    "never assigned", f->conn_id);
		return -1;
	}
	/* Frames for a connection already closed are ignored. */
	if ((c = conn_by_id(a->r, f->conn_id)) == NULL ||
	    c->state == BC_DRAINING)
		return 0;
	if (f->type == BMUX_CLOSE) {
		c->state = BC_DRAINING;
		conn_pump(c);
		return 0;
	}
	if (f->len == 0)
		return 0;
	if (c->tx == NULL &&
	    (c->tx = malloc((size_t)vb.lim.buffer_bytes)) == NULL)
		fatal("malloc");
	if (c->txlen + f->len > (size_t)vb.lim.buffer_bytes) {
		/* Reading pauses before this; a frame past it is a bug. */
		conn_free(c, 1);
		return 0;
	}
	if (c->txlen == 0)
		c->since = now_s();
	memcpy(c->tx + c->txlen, f->data, f->len);
	c->txlen += f->len;
	a->bytes_in += f->len;
	conn_pump(c);
	return 0;
}

static void
att_readcb(int fd, short ev, void *arg)
{
	static uint8_t buf[VPB_READ_MAX];
	struct battach *a = arg;
	ssize_t n;

	if (att_must_pause(a)) {
		a->paused = 1;
		event_del(a->rev);
		return;
	}
	n = recv(fd, buf, sizeof(buf), 0);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		att_detach(a, n == 0 ? "controller detached" :
		    "controller socket error");
		return;
	}
	if (bmux_feed(&a->dec, buf, (size_t)n, on_ctl_frame, a) == -1) {
		log_warnx("vm %s: job %s: broker controller broke the "
		    "protocol: %s", vb.h.vm_id, a->r->job_id, a->dec.err);
		att_detach(a, "protocol error");
		return;
	}
	tick_arm();
}

static void
att_detach(struct battach *a, const char *why)
{
	struct broute *r = a->r;
	struct bconn *c, *next;
	struct bchunk *k;

	log_info("vm %s: job %s: broker pipe detached (%s), %llu bytes in, "
	    "%llu out", vb.h.vm_id, r->job_id, why,
	    (unsigned long long)a->bytes_in, (unsigned long long)a->bytes_out);
	r->att = NULL;
	/* Carried connections end with it; waiting ones keep waiting. */
	for (c = TAILQ_FIRST(&vb.conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->r == r && (c->state == BC_ACTIVE ||
		    c->state == BC_DRAINING))
			conn_free(c, 1);
	}
	while ((k = a->head) != NULL) {
		a->head = k->next;
		free(k);
	}
	event_free(a->rev);
	event_free(a->wev);
	close(a->fd);
	free(a);
	vb.h.report();
}

/* ---- vmmd's requests --------------------------------------------------- */

static int
hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

static struct broute *
route_find(const char *job_id)
{
	struct broute *r;

	TAILQ_FOREACH(r, &vb.routes, entry)
		if (strcmp(r->job_id, job_id) == 0)
			return r;
	return NULL;
}

static void
route_free(struct broute *r)
{
	struct bconn *c, *next;

	if (r->att != NULL)
		att_detach(r->att, "job finished");
	for (c = TAILQ_FIRST(&vb.conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->r == r)
			conn_free(c, 1);
	}
	TAILQ_REMOVE(&vb.routes, r, entry);
	vb.nroutes--;
	explicit_bzero(r, sizeof(*r));
	free(r);
}

static int
valid_job(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= GUEST_JOB_ID_MAX && strspn(s,
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
	    == n;
}

/* {"job_id","secret"} adds a route, {"job_id","remove":true} ends one. */
void
vpb_route(struct ipc_conn *conn, uint32_t id, struct json_object *args)
{
	struct jsonx_err jerr;
	const char *job, *sec = NULL;
	struct broute *r;
	int remove = 0;
	size_t i;

	if (jsonx_get_string(args, "job_id", 1, &job, &jerr) != 1 ||
	    !valid_job(job) ||
	    jsonx_get_bool(args, "remove", 0, &remove, &jerr) == -1 ||
	    jsonx_get_string(args, "secret", 0, &sec, &jerr) == -1 ||
	    (!remove && (sec == NULL || strlen(sec) != BROKER_SECRET_HEX))) {
		log_warnx("vm %s: malformed broker route from vmmd",
		    vb.h.vm_id);
		return;
	}
	if ((r = route_find(job)) != NULL) {
		if (remove)
			route_free(r);
		return;		/* a route is never replaced */
	}
	if (remove)
		return;
	if (vb.nroutes >= VPB_MAX_ROUTES) {
		log_warnx("vm %s: more than %d broker routes", vb.h.vm_id,
		    VPB_MAX_ROUTES);
		return;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL)
		fatal("calloc");
	snprintf(r->job_id, sizeof(r->job_id), "%s", job);
	for (i = 0; i < BROKER_SECRET_HEX / 2; i++) {
		int hi = hexval(sec[2 * i]), lo = hexval(sec[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			log_warnx("vm %s: malformed broker route from vmmd",
			    vb.h.vm_id);
			explicit_bzero(r, sizeof(*r));
			free(r);
			return;
		}
		r->secret[i] = (uint8_t)(hi << 4 | lo);
	}
	TAILQ_INSERT_TAIL(&vb.routes, r, entry);
	vb.nroutes++;
}

/* {"job_id"} -> the attachment's socket, or not_found / conflict. */
void
vpb_attach(struct ipc_conn *conn, uint32_t id, struct json_object *args)
{
	struct jsonx_err jerr;
	struct json_object *b;
	struct battach *a;
	struct broute *r;
	const char *job;
	int sp[2];

	if (jsonx_get_string(args, "job_id", 1, &job, &jerr) != 1 ||
	    !valid_job(job)) {
		ipc_reply_error(conn, id, "invalid_argument", "bad job_id");
		return;
	}
	if ((r = route_find(job)) == NULL) {
		ipc_reply_error(conn, id, "not_found", "no broker pipe");
		return;
	}
	if (r->att != NULL) {
		ipc_reply_error(conn, id, "conflict", "this job's broker pipe "
		    "is already attached");
		return;
	}
	if (vpb_attached() >= vb.lim.max_attached) {
		ipc_reply_error(conn, id, "conflict", "max_broker_pipes_per_vm:"
		    " %lld broker pipes are attached to this VM already",
		    vb.lim.max_attached);
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0,
	    sp) == -1) {
		ipc_reply_error(conn, id, "internal", "socketpair: %s",
		    strerror(errno));
		return;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL)
		fatal("calloc");
	a->fd = sp[0];
	a->r = r;
	a->next_id = 1;
	bmux_init(&a->dec, 1);
	a->rev = event_new(vb.h.base, a->fd, EV_READ | EV_PERSIST, att_readcb,
	    a);
	a->wev = event_new(vb.h.base, a->fd, EV_WRITE, att_writecb, a);
	r->att = a;
	event_add(a->rev, NULL);
	b = json_object_new_object();
	json_object_object_add(b, "job_id", json_object_new_string(job));
	/* mcpd's end goes with the reply (and is closed by it). */
	ipc_reply(conn, IPC_PROXY_BROKER_ATTACH_RESULT, id, b, sp[1]);
	json_object_put(b);
	log_info("vm %s: job %s: broker pipe attached", vb.h.vm_id, job);
	route_activate(r);
	vb.h.report();
}

/* The [vmmd] broker_* keys, once, before any route. */
void
vpb_limits(struct ipc_conn *conn, uint32_t id, struct json_object *args)
{
	static const struct {
		const char	*key;
		long long	 lo, hi;
		size_t		 off;
	} keys[] = {
#define L(k, lo, hi, f) { k, lo, hi, offsetof(struct vpb_limits, f) }
		L("max_attached", 1, 64, max_attached),
		L("max_connections", 1, 1024, max_connections),
		L("max_waiting", 0, 1024, max_waiting),
		L("buffer_bytes", 128 * 1024, 64 * 1024 * 1024, buffer_bytes),
		L("stall_seconds", 1, 3600, stall_seconds),
		L("max_pending", 1, 1024, max_pending),
		L("preamble_seconds", 1, 60, preamble_seconds),
#undef L
	};
	static int done;
	struct vpb_limits lim = vb.lim;
	struct jsonx_err jerr;
	int64_t v;
	size_t i;

	if (done || !TAILQ_EMPTY(&vb.routes)) {
		log_warnx("vm %s: broker limits after the first routes",
		    vb.h.vm_id);
		return;
	}
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (jsonx_get_int64(args, keys[i].key, 1, keys[i].lo,
		    keys[i].hi, &v, &jerr) != 1) {
			log_warnx("vm %s: broker limits: %s", vb.h.vm_id,
			    jerr.msg);
			return;
		}
		*(long long *)((char *)&lim + keys[i].off) = v;
	}
	vb.lim = lim;
	done = 1;
}

void
vpb_init(const struct vpb_hooks *h)
{
	vb.h = *h;
	TAILQ_INIT(&vb.conns);
	TAILQ_INIT(&vb.routes);
	if ((vb.tick = evtimer_new(vb.h.base, tick_cb, NULL)) == NULL)
		fatalx("evtimer_new");
}
