/*
 * The link's output (see glink.h): a two-priority queue, control frames
 * always before stream data, and the senders that check each frame
 * against the channel's state and credit before queueing it.  glink does
 * no I/O but glink_flush(), so guestd's and vmproxy's loops both drive it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "glink.h"
#include "glink_priv.h"

/* Output queue */

int
glink_enqueue(struct glink *l, uint8_t type, uint8_t flags, uint32_t ch,
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

struct glink_chunk *
glink_dequeue(struct glink_queue *q)
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
		if ((l->cur = glink_dequeue(&l->ctrlq)) == NULL)
			l->cur = glink_dequeue(&l->dataq);
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
	if (glink_enqueue(l, GLINK_CTRL, body != NULL ? GLINK_F_BODY : 0, 0, json,
	    len, NULL, 0) == -1)
		return -1;
	if (body == NULL)
		return 0;
	do {
		size_t n = body_len > GLINK_MAX_PAYLOAD ? GLINK_MAX_PAYLOAD :
		    body_len;

		if (glink_enqueue(l, GLINK_BODY, n == body_len ? GLINK_F_END : 0, 0,
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
	    glink_chan_find(l, ch) != NULL)
		return glink_fail(l, "channel %u not free", ch);
	if ((c = glink_chan_new(l, ch)) == NULL)
		return glink_fail(l, "channel table full");
	c->recv_credit = GLINK_INITIAL_WINDOW;
	put32(p, port);
	return glink_enqueue(l, GLINK_OPEN, 0, ch, p, 4, NULL, 0);
}

uint32_t
glink_free_accept_channel(const struct glink *l)
{
	uint32_t id;

	if (l->naccepted >= GLINK_MAX_ACCEPTED)
		return 0;
	for (id = GLINK_GUEST_CHAN | 1; id <= (GLINK_GUEST_CHAN |
	    GLINK_MAX_ACCEPTED); id++)
		if (glink_chan_find(l, id) == NULL)
			return id;
	return 0;
}

int
glink_send_accept(struct glink *l, uint32_t ch)
{
	struct glink_chan *c;

	if (l->role != GLINK_ROLE_GUEST)
		return glink_fail(l, "only the guest accepts connections");
	if (!(ch & GLINK_GUEST_CHAN) || glink_chan_find(l, ch) != NULL)
		return glink_fail(l, "channel %u not free", ch);
	if ((c = glink_chan_new(l, ch)) == NULL)
		return glink_fail(l, "too many accepted channels");
	c->state = 0;
	c->send_credit = GLINK_INITIAL_WINDOW;
	c->recv_credit = GLINK_INITIAL_WINDOW;
	return glink_enqueue(l, GLINK_ACCEPT, 0, ch, NULL, 0, NULL, 0);
}

int
glink_send_open_ok(struct glink *l, uint32_t ch)
{
	struct glink_chan *c = glink_chan_find(l, ch);

	if (l->role != GLINK_ROLE_GUEST || c == NULL ||
	    !(c->state & CH_OPENING) || (c->state & CH_LOCAL_CLOSED))
		return glink_fail(l, "channel %u is not opening", ch);
	c->state &= ~CH_OPENING;
	c->send_credit = GLINK_INITIAL_WINDOW;
	c->recv_credit = GLINK_INITIAL_WINDOW;
	return glink_enqueue(l, GLINK_OPEN_OK, 0, ch, NULL, 0, NULL, 0);
}

int
glink_send_open_fail(struct glink *l, uint32_t ch, const char *reason)
{
	struct glink_chan *c = glink_chan_find(l, ch);
	size_t n = strlen(reason);

	if (l->role != GLINK_ROLE_GUEST || c == NULL ||
	    !(c->state & CH_OPENING) || (c->state & CH_LOCAL_CLOSED))
		return glink_fail(l, "channel %u is not opening", ch);
	if (n > GLINK_OPEN_FAIL_MAX)
		n = GLINK_OPEN_FAIL_MAX;
	glink_chan_release(l, c);
	return glink_enqueue(l, GLINK_OPEN_FAIL, 0, ch, reason, n, NULL, 0);
}

ssize_t
glink_send_data(struct glink *l, uint32_t ch, const void *buf, size_t n)
{
	struct glink_chan *c = glink_chan_find(l, ch);
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
		if (glink_enqueue(l, GLINK_DATA, 0, ch, p + done, m, NULL, 0) == -1)
			return -1;
		c->send_credit -= (uint32_t)m;
		done += m;
	}
	return (ssize_t)done;
}

int
glink_send_eof(struct glink *l, uint32_t ch)
{
	struct glink_chan *c = glink_chan_find(l, ch);

	if (c == NULL || (c->state & (CH_OPENING | CH_LOCAL_EOF |
	    CH_LOCAL_CLOSED)))
		return glink_fail(l, "channel %u cannot send EOF", ch);
	c->state |= CH_LOCAL_EOF;
	return glink_enqueue(l, GLINK_EOF, 0, ch, NULL, 0, NULL, 0);
}

int
glink_send_close(struct glink *l, uint32_t ch)
{
	struct glink_chan *c = glink_chan_find(l, ch);

	if (c == NULL || (c->state & CH_LOCAL_CLOSED))
		return glink_fail(l, "channel %u already closed", ch);
	/* Kept until the peer's CLOSE so crossing frames are recognised. */
	c->state |= CH_LOCAL_CLOSED;
	c->udata = NULL;
	return glink_enqueue(l, GLINK_CLOSE, 0, ch, NULL, 0, NULL, 0);
}

int
glink_consumed(struct glink *l, uint32_t ch, size_t n)
{
	struct glink_chan *c = glink_chan_find(l, ch);
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
	return glink_enqueue(l, GLINK_WINDOW, 0, ch, p, 4, NULL, 0);
}

