/*
 * The host <-> guest link protocol, shared by guestd (guest) and vmproxy
 * (host); see proto/guest.h for the rules and glink.h for the interface.
 * This file: the link's life, its channel table, and the receiver, where
 * everything is hostile and each rule is checked before state changes.
 * The output queue and senders are in glink_send.c, the channel 0 JSON
 * helpers in glink_json.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "glink.h"
#include "glink_priv.h"

int
glink_fail(struct glink *l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l->err, sizeof(l->err), fmt, ap);
	va_end(ap);
	return -1;
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
glink_queue_free(struct glink_queue *q)
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
	glink_queue_free(&l->ctrlq);
	glink_queue_free(&l->dataq);
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
	while ((c = glink_dequeue(&l->dataq)) != NULL) {
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

struct glink_chan *
glink_chan_find(const struct glink *l, uint32_t id)
{
	int i;

	if (id == 0)
		return NULL;
	for (i = 0; i < GLINK_MAX_CHANNELS + GLINK_MAX_ACCEPTED; i++)
		if (l->chans[i].id == id)
			return (struct glink_chan *)&l->chans[i];
	return NULL;
}

struct glink_chan *
glink_chan_new(struct glink *l, uint32_t id)
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

void
glink_chan_release(struct glink *l, struct glink_chan *c)
{
	if (c->id & GLINK_GUEST_CHAN)
		l->naccepted--;
	memset(c, 0, sizeof(*c));
	l->nchans--;
}

size_t
glink_credit(const struct glink *l, uint32_t id)
{
	struct glink_chan *c = glink_chan_find(l, id);

	if (c == NULL || c->state & (CH_OPENING | CH_LOCAL_EOF |
	    CH_LOCAL_CLOSED))
		return 0;
	return c->send_credit;
}

int
glink_chan_exists(const struct glink *l, uint32_t id)
{
	return glink_chan_find(l, id) != NULL;
}

int
glink_chan_set_udata(struct glink *l, uint32_t id, void *udata)
{
	struct glink_chan *c = glink_chan_find(l, id);

	if (c == NULL)
		return -1;
	c->udata = udata;
	return 0;
}

void *
glink_chan_udata(const struct glink *l, uint32_t id)
{
	struct glink_chan *c = glink_chan_find(l, id);

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
		if (glink_chan_find(l, id) == NULL)
			return id;
	return 0;
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
	struct glink_chan *c = glink_chan_find(l, h->channel);
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
		if ((c = glink_chan_new(l, h->channel)) == NULL) {
			/* Refusal, not a violation: the host may retry. */
			static const char full[] = "too many open channels";

			return glink_enqueue(l, GLINK_OPEN_FAIL, 0, h->channel,
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
		if ((c = glink_chan_new(l, h->channel)) == NULL)
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
		glink_chan_release(l, c);
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
			glink_chan_release(l, c);
			return 0;
		}
		/* Answer, release, then tell the application. */
		if (glink_enqueue(l, GLINK_CLOSE, 0, h->channel, NULL, 0, NULL,
		    0) == -1)
			return -1;
		glink_chan_release(l, c);
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

