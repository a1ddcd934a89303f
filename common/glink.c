/*
 * The host <-> guest link protocol, shared by guestd (guest) and vmproxy
 * (host); see proto/guest.h for the rules and glink.h for the interface.
 * Everything received is hostile: each rule is checked before state changes.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "glink.h"
#include "jsonx.h"
#include "utf8.h"

#define CH_OPENING	0x01	/* OPEN sent/received, no OPEN_OK yet */
#define CH_LOCAL_EOF	0x02
#define CH_REMOTE_EOF	0x04
#define CH_LOCAL_CLOSED	0x08

struct glink_chan {
	uint32_t	 id;		/* 0: slot free */
	uint8_t		 state;
	uint32_t	 send_credit;	/* bytes we may still send */
	uint32_t	 recv_credit;	/* bytes the peer may still send */
	uint32_t	 unacked;	/* consumed, not yet granted back */
	void		*udata;
};

struct glink_chunk {
	struct glink_chunk	*next;
	size_t			 len;
	size_t			 data_bytes;	/* of DATA payload */
	uint8_t			 buf[];
};

struct glink_queue {
	struct glink_chunk	*head;
	struct glink_chunk	*tail;
};

struct glink {
	enum glink_role		 role;
	char			 err[256];

	/* reader */
	uint8_t			 hdrbuf[GLINK_HDR_LEN];
	size_t			 hdrlen;
	struct glink_hdr	 hdr;
	int			 have_hdr;
	uint8_t			*payload;	/* GLINK_MAX_PAYLOAD */
	size_t			 paylen;

	/* CTRL awaiting its body */
	uint8_t			*pend_ctrl;
	size_t			 pend_ctrl_len;
	uint8_t			*body;
	size_t			 body_len;

	struct glink_chan	 chans[GLINK_MAX_CHANNELS + GLINK_MAX_ACCEPTED];
	int			 nchans;
	int			 naccepted;	/* of nchans, GLINK_GUEST_CHAN */
	int			 lenient;	/* drop unknown-channel frames */

	/* writer: cur is the frame being written, off bytes of it are out */
	struct glink_queue	 ctrlq;
	struct glink_queue	 dataq;
	struct glink_chunk	*cur;
	size_t			 off;
	size_t			 pending;
	size_t			 data_pending;
};

static struct glink_chunk *dequeue(struct glink_queue *);

static int __attribute__((format(printf, 2, 3)))
glink_fail(struct glink *l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l->err, sizeof(l->err), fmt, ap);
	va_end(ap);
	return -1;
}

static void
put32(uint8_t *p, uint32_t v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = (v >> 24) & 0xff;
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

void
glink_hdr_encode(uint8_t out[GLINK_HDR_LEN], const struct glink_hdr *h)
{
	out[0] = h->type;
	out[1] = h->flags;
	out[2] = h->reserved & 0xff;
	out[3] = h->reserved >> 8;
	put32(out + 4, h->channel);
	put32(out + 8, h->len);
}

void
glink_hdr_decode(const uint8_t in[GLINK_HDR_LEN], struct glink_hdr *h)
{
	h->type = in[0];
	h->flags = in[1];
	h->reserved = (uint16_t)(in[2] | in[3] << 8);
	h->channel = get32(in + 4);
	h->len = get32(in + 8);
}

struct glink *
glink_new(enum glink_role role)
{
	struct glink *l;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return NULL;
	if ((l->payload = malloc(GLINK_MAX_PAYLOAD)) == NULL) {
		free(l);
		return NULL;
	}
	l->role = role;
	return l;
}

static void
queue_free(struct glink_queue *q)
{
	struct glink_chunk *c, *n;

	for (c = q->head; c != NULL; c = n) {
		n = c->next;
		free(c);
	}
	q->head = q->tail = NULL;
}

void
glink_reset(struct glink *l)
{
	l->hdrlen = 0;
	l->have_hdr = 0;
	l->paylen = 0;
	free(l->pend_ctrl);
	l->pend_ctrl = NULL;
	l->pend_ctrl_len = 0;
	free(l->body);
	l->body = NULL;
	l->body_len = 0;
	memset(l->chans, 0, sizeof(l->chans));
	l->nchans = 0;
	l->naccepted = 0;
	queue_free(&l->ctrlq);
	queue_free(&l->dataq);
	free(l->cur);
	l->cur = NULL;
	l->off = 0;
	l->pending = 0;
	l->data_pending = 0;
	l->lenient = 0;
	l->err[0] = '\0';
}

void
glink_reset_channels(struct glink *l)
{
	struct glink_chunk *c;

	memset(l->chans, 0, sizeof(l->chans));
	l->nchans = 0;
	l->naccepted = 0;
	/* Unsent stream frames go; one already half written must finish. */
	while ((c = dequeue(&l->dataq)) != NULL) {
		l->pending -= c->len;
		l->data_pending -= c->data_bytes;
		free(c);
	}
	if (l->cur != NULL && l->off == 0 && l->cur->buf[0] != GLINK_CTRL &&
	    l->cur->buf[0] != GLINK_BODY) {
		l->pending -= l->cur->len;
		l->data_pending -= l->cur->data_bytes;
		free(l->cur);
		l->cur = NULL;
	}
}

void
glink_set_lenient(struct glink *l, int on)
{
	l->lenient = on;
}

void
glink_free(struct glink *l)
{
	if (l == NULL)
		return;
	glink_reset(l);
	free(l->payload);
	free(l);
}

const char *
glink_error(const struct glink *l)
{
	return l->err;
}

/* Channels */

static struct glink_chan *
chan_find(const struct glink *l, uint32_t id)
{
	int i;

	if (id == 0)
		return NULL;
	for (i = 0; i < GLINK_MAX_CHANNELS + GLINK_MAX_ACCEPTED; i++)
		if (l->chans[i].id == id)
			return (struct glink_chan *)&l->chans[i];
	return NULL;
}

static struct glink_chan *
chan_new(struct glink *l, uint32_t id)
{
	int i, guest = (id & GLINK_GUEST_CHAN) != 0;

	/* Each side's share is bounded, so neither can starve the other. */
	if (guest ? l->naccepted >= GLINK_MAX_ACCEPTED :
	    l->nchans - l->naccepted >= GLINK_MAX_CHANNELS)
		return NULL;
	for (i = 0; i < GLINK_MAX_CHANNELS + GLINK_MAX_ACCEPTED; i++)
		if (l->chans[i].id == 0) {
			memset(&l->chans[i], 0, sizeof(l->chans[i]));
			l->chans[i].id = id;
			l->chans[i].state = CH_OPENING;
			l->nchans++;
			l->naccepted += guest;
			return &l->chans[i];
		}
	return NULL;
}

static void
chan_release(struct glink *l, struct glink_chan *c)
{
	if (c->id & GLINK_GUEST_CHAN)
		l->naccepted--;
	memset(c, 0, sizeof(*c));
	l->nchans--;
}

size_t
glink_credit(const struct glink *l, uint32_t id)
{
	struct glink_chan *c = chan_find(l, id);

	if (c == NULL || c->state & (CH_OPENING | CH_LOCAL_EOF |
	    CH_LOCAL_CLOSED))
		return 0;
	return c->send_credit;
}

int
glink_chan_exists(const struct glink *l, uint32_t id)
{
	return chan_find(l, id) != NULL;
}

int
glink_chan_set_udata(struct glink *l, uint32_t id, void *udata)
{
	struct glink_chan *c = chan_find(l, id);

	if (c == NULL)
		return -1;
	c->udata = udata;
	return 0;
}

void *
glink_chan_udata(const struct glink *l, uint32_t id)
{
	struct glink_chan *c = chan_find(l, id);

	return c == NULL ? NULL : c->udata;
}

int
glink_nchannels(const struct glink *l)
{
	return l->nchans;
}

uint32_t
glink_free_channel(const struct glink *l)
{
	uint32_t id;

	if (l->nchans - l->naccepted >= GLINK_MAX_CHANNELS)
		return 0;
	for (id = 1; id <= GLINK_MAX_CHANNELS; id++)
		if (chan_find(l, id) == NULL)
			return id;
	return 0;
}

/* Output queue */

static int
enqueue(struct glink *l, uint8_t type, uint8_t flags, uint32_t ch,
    const void *p1, size_t n1, const void *p2, size_t n2)
{
	struct glink_hdr h = { type, flags, 0, ch, (uint32_t)(n1 + n2) };
	struct glink_queue *q;
	struct glink_chunk *c;

	if (n1 + n2 > GLINK_MAX_PAYLOAD)
		return glink_fail(l, "frame of %zu bytes exceeds %u", n1 + n2,
		    GLINK_MAX_PAYLOAD);
	if ((c = malloc(sizeof(*c) + GLINK_HDR_LEN + n1 + n2)) == NULL)
		return glink_fail(l, "out of memory");
	c->next = NULL;
	c->len = GLINK_HDR_LEN + n1 + n2;
	c->data_bytes = type == GLINK_DATA ? n1 + n2 : 0;
	glink_hdr_encode(c->buf, &h);
	if (n1 > 0)
		memcpy(c->buf + GLINK_HDR_LEN, p1, n1);
	if (n2 > 0)
		memcpy(c->buf + GLINK_HDR_LEN + n1, p2, n2);
	/* Channel 0 jumps the stream data so control never waits for it. */
	q = (type == GLINK_CTRL || type == GLINK_BODY) ? &l->ctrlq : &l->dataq;
	if (q->tail != NULL)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	l->pending += c->len;
	l->data_pending += c->data_bytes;
	return 0;
}

size_t
glink_out_pending(const struct glink *l)
{
	return l->pending;
}

size_t
glink_out_data_pending(const struct glink *l)
{
	return l->data_pending;
}

static struct glink_chunk *
dequeue(struct glink_queue *q)
{
	struct glink_chunk *c = q->head;

	if (c != NULL) {
		q->head = c->next;
		if (q->head == NULL)
			q->tail = NULL;
	}
	return c;
}

void
glink_out_peek(const struct glink *cl, const uint8_t **p, size_t *n)
{
	struct glink *l = (struct glink *)cl;

	/* A frame already started must finish before another begins. */
	if (l->cur == NULL) {
		if ((l->cur = dequeue(&l->ctrlq)) == NULL)
			l->cur = dequeue(&l->dataq);
		l->off = 0;
	}
	if (l->cur == NULL) {
		*p = NULL;
		*n = 0;
		return;
	}
	*p = l->cur->buf + l->off;
	*n = l->cur->len - l->off;
}

void
glink_out_consume(struct glink *l, size_t n)
{
	while (n > 0 && l->cur != NULL) {
		size_t left = l->cur->len - l->off;
		size_t take = n < left ? n : left;

		l->off += take;
		l->pending -= take;
		n -= take;
		if (l->off == l->cur->len) {
			l->data_pending -= l->cur->data_bytes;
			free(l->cur);
			l->cur = NULL;
			l->off = 0;
			if (n > 0) {
				const uint8_t *p;
				size_t m;

				glink_out_peek(l, &p, &m);
			}
		}
	}
}

ssize_t
glink_flush(struct glink *l, int fd)
{
	ssize_t total = 0, w;
	const uint8_t *p;
	size_t n;

	for (;;) {
		glink_out_peek(l, &p, &n);
		if (n == 0)
			break;
		w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -1;
		}
		if (w == 0)
			break;
		glink_out_consume(l, (size_t)w);
		total += w;
	}
	return total;
}

/* Senders */

int
glink_send_ctrl(struct glink *l, const char *json, size_t len,
    const void *body, size_t body_len)
{
	const uint8_t *b = body;

	if (len > GLINK_MAX_PAYLOAD || body_len > GLINK_MAX_BODY)
		return glink_fail(l, "control message too large");
	if (enqueue(l, GLINK_CTRL, body != NULL ? GLINK_F_BODY : 0, 0, json,
	    len, NULL, 0) == -1)
		return -1;
	if (body == NULL)
		return 0;
	do {
		size_t n = body_len > GLINK_MAX_PAYLOAD ? GLINK_MAX_PAYLOAD :
		    body_len;

		if (enqueue(l, GLINK_BODY, n == body_len ? GLINK_F_END : 0, 0,
		    b, n, NULL, 0) == -1)
			return -1;
		b += n;
		body_len -= n;
	} while (body_len > 0);
	return 0;
}

int
glink_send_json(struct glink *l, struct json_object *o, const void *body,
    size_t body_len)
{
	size_t len;
	const char *s;

	s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
	if (s == NULL)
		return glink_fail(l, "out of memory");
	return glink_send_ctrl(l, s, len, body, body_len);
}

int
glink_send_open(struct glink *l, uint32_t ch, uint16_t port)
{
	struct glink_chan *c;
	uint8_t p[4];

	if (l->role != GLINK_ROLE_HOST)
		return glink_fail(l, "only the host opens channels");
	if (ch == 0 || (ch & GLINK_GUEST_CHAN) || port == 0 ||
	    chan_find(l, ch) != NULL)
		return glink_fail(l, "channel %u not free", ch);
	if ((c = chan_new(l, ch)) == NULL)
		return glink_fail(l, "channel table full");
	c->recv_credit = GLINK_INITIAL_WINDOW;
	put32(p, port);
	return enqueue(l, GLINK_OPEN, 0, ch, p, 4, NULL, 0);
}

uint32_t
glink_free_accept_channel(const struct glink *l)
{
	uint32_t id;

	if (l->naccepted >= GLINK_MAX_ACCEPTED)
		return 0;
	for (id = GLINK_GUEST_CHAN | 1; id <= (GLINK_GUEST_CHAN |
	    GLINK_MAX_ACCEPTED); id++)
		if (chan_find(l, id) == NULL)
			return id;
	return 0;
}

int
glink_send_accept(struct glink *l, uint32_t ch)
{
	struct glink_chan *c;

	if (l->role != GLINK_ROLE_GUEST)
		return glink_fail(l, "only the guest accepts connections");
	if (!(ch & GLINK_GUEST_CHAN) || chan_find(l, ch) != NULL)
		return glink_fail(l, "channel %u not free", ch);
	if ((c = chan_new(l, ch)) == NULL)
		return glink_fail(l, "too many accepted channels");
	c->state = 0;
	c->send_credit = GLINK_INITIAL_WINDOW;
	c->recv_credit = GLINK_INITIAL_WINDOW;
	return enqueue(l, GLINK_ACCEPT, 0, ch, NULL, 0, NULL, 0);
}

int
glink_send_open_ok(struct glink *l, uint32_t ch)
{
	struct glink_chan *c = chan_find(l, ch);

	if (l->role != GLINK_ROLE_GUEST || c == NULL ||
	    !(c->state & CH_OPENING) || (c->state & CH_LOCAL_CLOSED))
		return glink_fail(l, "channel %u is not opening", ch);
	c->state &= ~CH_OPENING;
	c->send_credit = GLINK_INITIAL_WINDOW;
	c->recv_credit = GLINK_INITIAL_WINDOW;
	return enqueue(l, GLINK_OPEN_OK, 0, ch, NULL, 0, NULL, 0);
}

int
glink_send_open_fail(struct glink *l, uint32_t ch, const char *reason)
{
	struct glink_chan *c = chan_find(l, ch);
	size_t n = strlen(reason);

	if (l->role != GLINK_ROLE_GUEST || c == NULL ||
	    !(c->state & CH_OPENING) || (c->state & CH_LOCAL_CLOSED))
		return glink_fail(l, "channel %u is not opening", ch);
	if (n > GLINK_OPEN_FAIL_MAX)
		n = GLINK_OPEN_FAIL_MAX;
	chan_release(l, c);
	return enqueue(l, GLINK_OPEN_FAIL, 0, ch, reason, n, NULL, 0);
}

ssize_t
glink_send_data(struct glink *l, uint32_t ch, const void *buf, size_t n)
{
	struct glink_chan *c = chan_find(l, ch);
	const uint8_t *p = buf;
	size_t done = 0;

	if (c == NULL || (c->state & (CH_OPENING | CH_LOCAL_EOF |
	    CH_LOCAL_CLOSED)))
		return glink_fail(l, "channel %u cannot send data", ch);
	if (n > c->send_credit)
		n = c->send_credit;
	while (done < n) {
		size_t m = n - done;

		if (m > GLINK_MAX_PAYLOAD)
			m = GLINK_MAX_PAYLOAD;
		if (enqueue(l, GLINK_DATA, 0, ch, p + done, m, NULL, 0) == -1)
			return -1;
		c->send_credit -= (uint32_t)m;
		done += m;
	}
	return (ssize_t)done;
}

int
glink_send_eof(struct glink *l, uint32_t ch)
{
	struct glink_chan *c = chan_find(l, ch);

	if (c == NULL || (c->state & (CH_OPENING | CH_LOCAL_EOF |
	    CH_LOCAL_CLOSED)))
		return glink_fail(l, "channel %u cannot send EOF", ch);
	c->state |= CH_LOCAL_EOF;
	return enqueue(l, GLINK_EOF, 0, ch, NULL, 0, NULL, 0);
}

int
glink_send_close(struct glink *l, uint32_t ch)
{
	struct glink_chan *c = chan_find(l, ch);

	if (c == NULL || (c->state & CH_LOCAL_CLOSED))
		return glink_fail(l, "channel %u already closed", ch);
	/* Kept until the peer's CLOSE so crossing frames are recognised. */
	c->state |= CH_LOCAL_CLOSED;
	c->udata = NULL;
	return enqueue(l, GLINK_CLOSE, 0, ch, NULL, 0, NULL, 0);
}

int
glink_consumed(struct glink *l, uint32_t ch, size_t n)
{
	struct glink_chan *c = chan_find(l, ch);
	uint8_t p[4];

	if (c == NULL || (c->state & CH_LOCAL_CLOSED))
		return 0;
	c->unacked += (uint32_t)n;
	/* Grant in batches: a WINDOW per DATA frame would double the frames. */
	if (c->unacked < GLINK_INITIAL_WINDOW / 4)
		return 0;
	put32(p, c->unacked);
	c->recv_credit += c->unacked;
	c->unacked = 0;
	return enqueue(l, GLINK_WINDOW, 0, ch, p, 4, NULL, 0);
}

/* Receiving */

static int
deliver(struct glink *l, const struct glink_hdr *h, const uint8_t *data,
    size_t len, glink_cb cb, void *arg, void *udata)
{
	struct glink_frame f;

	memset(&f, 0, sizeof(f));
	f.type = h->type;
	f.flags = h->flags;
	f.channel = h->channel;
	f.data = data;
	f.len = len;
	f.udata = udata;
	return cb(l, &f, arg);
}

/* The header alone: reject early so a bad len is never read. */
static int
check_header(struct glink *l, const struct glink_hdr *h)
{
	uint8_t allowed = 0;

	if (h->reserved != 0)
		return glink_fail(l, "frame reserved field is %u, not 0",
		    h->reserved);
	if (h->len > GLINK_MAX_PAYLOAD)
		return glink_fail(l, "frame length %u exceeds %u", h->len,
		    GLINK_MAX_PAYLOAD);
	switch (h->type) {
	case GLINK_CTRL:
		allowed = GLINK_F_BODY;
		/* FALLTHROUGH */
	case GLINK_BODY:
		if (h->type == GLINK_BODY)
			allowed = GLINK_F_END;
		if (h->channel != 0)
			return glink_fail(l, "frame type %u on channel %u",
			    h->type, h->channel);
		break;
	case GLINK_OPEN:
	case GLINK_OPEN_OK:
	case GLINK_OPEN_FAIL:
	case GLINK_DATA:
	case GLINK_EOF:
	case GLINK_CLOSE:
	case GLINK_WINDOW:
	case GLINK_ACCEPT:
		if (h->channel == 0)
			return glink_fail(l, "frame type %u on channel 0",
			    h->type);
		break;
	default:
		return glink_fail(l, "unknown frame type %u", h->type);
	}
	if (h->flags & ~allowed)
		return glink_fail(l, "frame type %u has unknown flags 0x%x",
		    h->type, h->flags);
	return 0;
}

static int
rx_ctrl(struct glink *l, const struct glink_hdr *h, const uint8_t *p,
    glink_cb cb, void *arg)
{
	struct glink_frame f;
	int rc;

	if (h->type == GLINK_CTRL) {
		if (l->pend_ctrl != NULL)
			return glink_fail(l, "control message before the "
			    "previous body ended");
		if (h->len == 0)
			return glink_fail(l, "empty control message");
		if (!(h->flags & GLINK_F_BODY))
			return deliver(l, h, p, h->len, cb, arg, NULL);
		if ((l->pend_ctrl = malloc(h->len)) == NULL)
			return glink_fail(l, "out of memory");
		memcpy(l->pend_ctrl, p, h->len);
		l->pend_ctrl_len = h->len;
		l->body_len = 0;
		return 0;
	}
	if (l->pend_ctrl == NULL)
		return glink_fail(l, "body frame without a control message");
	if (l->body_len + h->len > GLINK_MAX_BODY)
		return glink_fail(l, "message body exceeds %u bytes",
		    GLINK_MAX_BODY);
	if (h->len > 0) {
		uint8_t *nb = realloc(l->body, l->body_len + h->len);

		if (nb == NULL)
			return glink_fail(l, "out of memory");
		l->body = nb;
		memcpy(l->body + l->body_len, p, h->len);
		l->body_len += h->len;
	}
	if (!(h->flags & GLINK_F_END))
		return 0;
	memset(&f, 0, sizeof(f));
	f.type = GLINK_CTRL;
	f.flags = GLINK_F_BODY;
	f.data = l->pend_ctrl;
	f.len = l->pend_ctrl_len;
	/* An empty body still gets a non-NULL pointer: it was announced. */
	f.body = l->body != NULL ? l->body : l->pend_ctrl;
	f.body_len = l->body_len;
	rc = cb(l, &f, arg);
	free(l->pend_ctrl);
	l->pend_ctrl = NULL;
	l->pend_ctrl_len = 0;
	free(l->body);
	l->body = NULL;
	l->body_len = 0;
	return rc;
}

static int
rx_chan(struct glink *l, const struct glink_hdr *h, const uint8_t *p,
    glink_cb cb, void *arg)
{
	struct glink_chan *c = chan_find(l, h->channel);
	uint32_t v;
	void *udata;
	int rc;

	if (h->type == GLINK_OPEN) {
		if (l->role != GLINK_ROLE_GUEST)
			return glink_fail(l, "OPEN sent to the host");
		if (c != NULL)
			return glink_fail(l, "OPEN of channel %u in use",
			    h->channel);
		if (h->channel & GLINK_GUEST_CHAN)
			return glink_fail(l, "OPEN of guest channel %u",
			    h->channel);
		if (h->len != 4 || (v = get32(p)) == 0 || v > 65535)
			return glink_fail(l, "OPEN of channel %u: bad port",
			    h->channel);
		if ((c = chan_new(l, h->channel)) == NULL) {
			/* Refusal, not a violation: the host may retry. */
			static const char full[] = "too many open channels";

			return enqueue(l, GLINK_OPEN_FAIL, 0, h->channel,
			    full, sizeof(full) - 1, NULL, 0);
		}
		return deliver(l, h, p, h->len, cb, arg, NULL);
	}
	if (h->type == GLINK_ACCEPT) {
		if (l->role != GLINK_ROLE_HOST)
			return glink_fail(l, "ACCEPT sent to the guest");
		if (!(h->channel & GLINK_GUEST_CHAN))
			return glink_fail(l, "ACCEPT of host channel %u",
			    h->channel);
		if (c != NULL)
			return glink_fail(l, "ACCEPT of channel %u in use",
			    h->channel);
		if (h->len != 0)
			return glink_fail(l, "ACCEPT with payload");
		if ((c = chan_new(l, h->channel)) == NULL)
			return glink_fail(l, "more than %d accepted channels",
			    GLINK_MAX_ACCEPTED);
		c->state = 0;
		c->send_credit = GLINK_INITIAL_WINDOW;
		c->recv_credit = GLINK_INITIAL_WINDOW;
		return deliver(l, h, p, 0, cb, arg, NULL);
	}
	if (c == NULL) {
		if (l->lenient)
			return 0;
		return glink_fail(l, "frame type %u for channel %u, which is "
		    "not open", h->type, h->channel);
	}
	udata = c->udata;
	/* Frames crossing our CLOSE: only the peer's CLOSE matters now. */
	if ((c->state & CH_LOCAL_CLOSED) && h->type != GLINK_CLOSE)
		return 0;

	switch (h->type) {
	case GLINK_OPEN_OK:
	case GLINK_OPEN_FAIL:
		if (l->role != GLINK_ROLE_HOST)
			return glink_fail(l, "OPEN_OK/OPEN_FAIL sent to the "
			    "guest");
		if (!(c->state & CH_OPENING))
			return glink_fail(l, "channel %u answered twice",
			    h->channel);
		if (h->type == GLINK_OPEN_OK) {
			if (h->len != 0)
				return glink_fail(l, "OPEN_OK with payload");
			c->state &= ~CH_OPENING;
			c->send_credit = GLINK_INITIAL_WINDOW;
			return deliver(l, h, p, 0, cb, arg, udata);
		}
		if (h->len > GLINK_OPEN_FAIL_MAX)
			return glink_fail(l, "OPEN_FAIL reason too long");
		chan_release(l, c);
		return deliver(l, h, p, h->len, cb, arg, udata);
	case GLINK_DATA:
	case GLINK_EOF:
		if (c->state & CH_OPENING)
			return glink_fail(l, "stream frame on channel %u "
			    "before OPEN_OK", h->channel);
		if (c->state & CH_REMOTE_EOF)
			return glink_fail(l, "stream frame on channel %u "
			    "after EOF", h->channel);
		if (h->type == GLINK_EOF) {
			if (h->len != 0)
				return glink_fail(l, "EOF with payload");
			c->state |= CH_REMOTE_EOF;
			return deliver(l, h, p, 0, cb, arg, udata);
		}
		if (h->len == 0)
			return glink_fail(l, "empty DATA frame");
		if (h->len > c->recv_credit)
			return glink_fail(l, "DATA of %u bytes on channel %u "
			    "exceeds its credit of %u", h->len, h->channel,
			    c->recv_credit);
		c->recv_credit -= h->len;
		return deliver(l, h, p, h->len, cb, arg, udata);
	case GLINK_WINDOW:
		if (h->len != 4 || (v = get32(p)) == 0)
			return glink_fail(l, "bad WINDOW frame");
		if (c->state & CH_OPENING)
			return glink_fail(l, "WINDOW on channel %u before "
			    "OPEN_OK", h->channel);
		if ((uint64_t)c->send_credit + v > GLINK_MAX_WINDOW)
			return glink_fail(l, "WINDOW on channel %u exceeds "
			    "%u bytes", h->channel, GLINK_MAX_WINDOW);
		c->send_credit += v;
		return deliver(l, h, p, 4, cb, arg, udata);
	case GLINK_CLOSE:
		if (h->len != 0)
			return glink_fail(l, "CLOSE with payload");
		if (c->state & CH_LOCAL_CLOSED) {
			chan_release(l, c);
			return 0;
		}
		/* Answer, release, then tell the application. */
		if (enqueue(l, GLINK_CLOSE, 0, h->channel, NULL, 0, NULL,
		    0) == -1)
			return -1;
		chan_release(l, c);
		rc = deliver(l, h, p, 0, cb, arg, udata);
		return rc;
	}
	return glink_fail(l, "unknown frame type %u", h->type);
}

int
glink_feed(struct glink *l, const void *buf, size_t n, glink_cb cb, void *arg)
{
	const uint8_t *p = buf;
	size_t take;
	int rc;

	while (n > 0) {
		if (!l->have_hdr) {
			take = GLINK_HDR_LEN - l->hdrlen;
			if (take > n)
				take = n;
			memcpy(l->hdrbuf + l->hdrlen, p, take);
			l->hdrlen += take;
			p += take;
			n -= take;
			if (l->hdrlen < GLINK_HDR_LEN)
				break;
			glink_hdr_decode(l->hdrbuf, &l->hdr);
			if (check_header(l, &l->hdr) == -1)
				return -1;
			l->have_hdr = 1;
			l->paylen = 0;
		}
		take = l->hdr.len - l->paylen;
		if (take > n)
			take = n;
		if (take > 0) {
			memcpy(l->payload + l->paylen, p, take);
			l->paylen += take;
			p += take;
			n -= take;
		}
		if (l->paylen < l->hdr.len)
			break;
		/* A whole frame: the reader is ready for the next one. */
		l->have_hdr = 0;
		l->hdrlen = 0;
		if (l->hdr.channel == 0)
			rc = rx_ctrl(l, &l->hdr, l->payload, cb, arg);
		else
			rc = rx_chan(l, &l->hdr, l->payload, cb, arg);
		if (rc == -1) {
			if (l->err[0] == '\0')
				glink_fail(l, "stopped by the receiver");
			return -1;
		}
	}
	return 0;
}

/* JSON */


/* Strictly, by common/jsonx like every other peer's JSON. */
struct json_object *
glink_json_parse(const void *buf, size_t n, char *err, size_t errlen)
{
	struct jsonx_err jerr;
	struct json_object *o;

	if (n == 0 || n > GLINK_MAX_PAYLOAD) {
		snprintf(err, errlen, "control message of %zu bytes", n);
		return NULL;
	}
	if ((o = jsonx_parse(buf, n, GLINK_JSON_DEPTH, &jerr)) == NULL) {
		snprintf(err, errlen, "control message is not JSON: %s",
		    jerr.msg);
		return NULL;
	}
	if (!json_object_is_type(o, json_type_object)) {
		snprintf(err, errlen, "control message is not a JSON object");
		json_object_put(o);
		return NULL;
	}
	return o;
}

static int
field(struct json_object *o, const char *key, int required,
    enum json_type type, const char *tname, struct json_object **v, char *err,
    size_t errlen)
{
	if (!json_object_object_get_ex(o, key, v) || *v == NULL) {
		if (required) {
			snprintf(err, errlen, "missing field \"%s\"", key);
			return -1;
		}
		return 0;
	}
	if (!json_object_is_type(*v, type)) {
		snprintf(err, errlen, "field \"%s\" must be %s", key, tname);
		return -1;
	}
	return 1;
}

int
glink_json_str(struct json_object *o, const char *key, int required,
    size_t max, const char **out, char *err, size_t errlen)
{
	struct json_object *v;
	size_t n;
	int rc;

	if ((rc = field(o, key, required, json_type_string, "a string", &v,
	    err, errlen)) != 1)
		return rc;
	n = (size_t)json_object_get_string_len(v);
	if (n > max) {
		snprintf(err, errlen, "field \"%s\" exceeds %zu bytes", key,
		    max);
		return -1;
	}
	*out = json_object_get_string(v);
	if (memchr(*out, '\0', n) != NULL ||
	    !utf8_valid((const uint8_t *)*out, n)) {
		snprintf(err, errlen, "field \"%s\" is not valid UTF-8 text",
		    key);
		return -1;
	}
	return 1;
}

int
glink_json_int(struct json_object *o, const char *key, int required,
    int64_t min, int64_t max, int64_t *out, char *err, size_t errlen)
{
	struct json_object *v;
	int64_t x;
	int rc;

	if ((rc = field(o, key, required, json_type_int, "an integer", &v,
	    err, errlen)) != 1)
		return rc;
	errno = 0;
	x = json_object_get_int64(v);
	/* json-c clamps out-of-range numbers; an unsigned one is too big. */
	if (errno != 0 || x < min || x > max ||
	    (json_object_get_uint64(v) > (uint64_t)INT64_MAX)) {
		snprintf(err, errlen, "field \"%s\" out of range", key);
		return -1;
	}
	*out = x;
	return 1;
}

int
glink_json_bool(struct json_object *o, const char *key, int required,
    int *out, char *err, size_t errlen)
{
	struct json_object *v;
	int rc;

	if ((rc = field(o, key, required, json_type_boolean, "a boolean", &v,
	    err, errlen)) != 1)
		return rc;
	*out = json_object_get_boolean(v) ? 1 : 0;
	return 1;
}

int
glink_json_obj(struct json_object *o, const char *key, int required,
    struct json_object **out, char *err, size_t errlen)
{
	return field(o, key, required, json_type_object, "an object", out,
	    err, errlen);
}

int
glink_json_array(struct json_object *o, const char *key, int required,
    size_t max, struct json_object **out, char *err, size_t errlen)
{
	int rc;

	if ((rc = field(o, key, required, json_type_array, "an array", out,
	    err, errlen)) != 1)
		return rc;
	if (json_object_array_length(*out) > max) {
		snprintf(err, errlen, "field \"%s\" has more than %zu items",
		    key, max);
		return -1;
	}
	return 1;
}

int
glink_reply_decode(struct json_object *o, struct glink_reply *r, char *err,
    size_t errlen)
{
	struct json_object *e;
	int64_t id;
	int rc;

	memset(r, 0, sizeof(*r));
	if ((rc = glink_json_str(o, "event", 0, 64, &r->event, err,
	    errlen)) != 0)
		return rc == 1 ? 0 : -1;
	if (glink_json_int(o, "id", 1, 1, UINT32_MAX, &id, err, errlen) != 1)
		return -1;
	r->id = (uint32_t)id;
	if (glink_json_bool(o, "ok", 1, &r->ok, err, errlen) != 1)
		return -1;
	if (r->ok)
		return 0;
	if (glink_json_obj(o, "error", 1, &e, err, errlen) != 1 ||
	    glink_json_str(e, "code", 1, 64, &r->code, err, errlen) != 1 ||
	    glink_json_str(e, "message", 1, 4096, &r->message, err,
	    errlen) != 1)
		return -1;
	return 0;
}
