/*
 * Unit tests for common/glink: framing, bodies, channel rules and credit
 * windows, output priorities and the bounded JSON helpers.  Two glink ends
 * (host and guest) are wired together in memory.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glink.h"
#include "../check_run.h"

#define P(s)	(s), strlen(s)

struct seen {
	int		 n;
	uint8_t		 type[64];
	uint32_t	 chan[64];
	size_t		 len[64];
	uint8_t		*body;
	size_t		 body_len;
	char		 json[256];
	size_t		 data_total;
};

static int
record(struct glink *l, const struct glink_frame *f, void *arg)
{
	struct seen *s = arg;

	if (s->n < 64) {
		s->type[s->n] = f->type;
		s->chan[s->n] = f->channel;
		s->len[s->n] = f->len;
	}
	s->n++;
	if (f->type == GLINK_DATA)
		s->data_total += f->len;
	if (f->type == GLINK_CTRL) {
		snprintf(s->json, sizeof(s->json), "%.*s", (int)f->len,
		    (const char *)f->data);
		free(s->body);
		s->body = NULL;
		s->body_len = f->body_len;
		if (f->body != NULL) {
			s->body = malloc(f->body_len + 1);
			memcpy(s->body, f->body, f->body_len);
		}
	}
	return 0;
}

/* Moves everything queued on a into b, in pieces of at most step bytes. */
static int
pump(struct glink *a, struct glink *b, struct seen *s, size_t step)
{
	const uint8_t *p;
	size_t n;

	for (;;) {
		glink_out_peek(a, &p, &n);
		if (n == 0)
			return 0;
		if (n > step)
			n = step;
		if (glink_feed(b, p, n, record, s) == -1)
			return -1;
		glink_out_consume(a, n);
	}
}

static int
feed_frame(struct glink *l, uint8_t type, uint8_t flags, uint16_t res,
    uint32_t ch, const void *payload, uint32_t len, struct seen *s)
{
	struct glink_hdr h = { type, flags, res, ch, len };
	uint8_t hdr[GLINK_HDR_LEN];

	glink_hdr_encode(hdr, &h);
	if (glink_feed(l, hdr, sizeof(hdr), record, s) == -1)
		return -1;
	return glink_feed(l, payload, len, record, s);
}

START_TEST(header_is_little_endian)
{
	struct glink_hdr h = { GLINK_DATA, 0x01, 0, 0x01020304, 0x00010000 }, d;
	uint8_t b[GLINK_HDR_LEN];
	static const uint8_t want[GLINK_HDR_LEN] = { 6, 1, 0, 0,
	    4, 3, 2, 1, 0, 0, 1, 0 };

	glink_hdr_encode(b, &h);
	ck_assert_mem_eq(b, want, sizeof(want));
	glink_hdr_decode(b, &d);
	ck_assert_uint_eq(d.type, GLINK_DATA);
	ck_assert_uint_eq(d.channel, 0x01020304);
	ck_assert_uint_eq(d.len, 65536);
}
END_TEST

START_TEST(ctrl_with_large_body_byte_by_byte)
{
	struct glink *g = glink_new(GLINK_ROLE_GUEST);
	struct glink *h = glink_new(GLINK_ROLE_HOST);
	struct seen s = { 0 };
	uint8_t *body = malloc(128 * 1024);
	size_t i;

	for (i = 0; i < 128 * 1024; i++)
		body[i] = (uint8_t)(i * 7);
	ck_assert_int_eq(glink_send_ctrl(g, "{\"id\":1}", 8, body, 128 * 1024),
	    0);
	/* 1 CTRL + 2 full BODY frames + an empty END frame. */
	ck_assert_int_eq(pump(g, h, &s, 1), 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.json, "{\"id\":1}");
	ck_assert_uint_eq(s.body_len, 128 * 1024);
	ck_assert_mem_eq(s.body, body, 128 * 1024);
	/* An empty body is still announced and delivered. */
	ck_assert_int_eq(glink_send_ctrl(g, "{}", 2, "", 0), 0);
	ck_assert_int_eq(pump(g, h, &s, 7), 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_ptr_nonnull(s.body);
	ck_assert_uint_eq(s.body_len, 0);
	free(s.body);
	free(body);
	glink_free(g);
	glink_free(h);
}
END_TEST

/* Each broken rule ends the link with a message naming it. */
static void
expect_violation(enum glink_role role, uint8_t type, uint8_t flags,
    uint16_t res, uint32_t ch, const void *p, uint32_t len, const char *what)
{
	struct glink *l = glink_new(role);
	struct seen s = { 0 };

	ck_assert_int_eq(feed_frame(l, type, flags, res, ch, p, len, &s), -1);
	ck_assert_msg(strstr(glink_error(l), what) != NULL,
	    "error \"%s\" lacks \"%s\"", glink_error(l), what);
	ck_assert_int_eq(s.n, 0);
	glink_free(l);
}

START_TEST(rule_violations_end_the_link)
{
	uint8_t port[4] = { 0x88, 0x13, 0, 0 };
	uint8_t bad[4] = { 0, 0, 1, 0 };

	expect_violation(GLINK_ROLE_GUEST, GLINK_CTRL, 0, 1, 0, "{}", 2,
	    "reserved");
	expect_violation(GLINK_ROLE_GUEST, 42, 0, 0, 0, "", 0, "unknown frame");
	expect_violation(GLINK_ROLE_GUEST, GLINK_CTRL, 0x80, 0, 0, "{}", 2,
	    "flags");
	expect_violation(GLINK_ROLE_GUEST, GLINK_CTRL, 0, 0, 5, "{}", 2,
	    "on channel 5");
	expect_violation(GLINK_ROLE_GUEST, GLINK_DATA, 0, 0, 0, "x", 1,
	    "on channel 0");
	expect_violation(GLINK_ROLE_GUEST, GLINK_DATA, 0, 0, 3, "x", 1,
	    "not open");
	expect_violation(GLINK_ROLE_GUEST, GLINK_BODY, GLINK_F_END, 0, 0, "x",
	    1, "without a control");
	expect_violation(GLINK_ROLE_GUEST, GLINK_CTRL, 0, 0, 0, "", 0,
	    "empty control");
	expect_violation(GLINK_ROLE_HOST, GLINK_OPEN, 0, 0, 1, port, 4,
	    "OPEN sent to the host");
	expect_violation(GLINK_ROLE_GUEST, GLINK_OPEN, 0, 0, 1, bad, 4,
	    "bad port");
	expect_violation(GLINK_ROLE_GUEST, GLINK_OPEN_OK, 0, 0, 1, "", 0,
	    "not open");
}
END_TEST

START_TEST(oversized_length_refused_from_header)
{
	struct glink *l = glink_new(GLINK_ROLE_GUEST);
	struct glink_hdr h = { GLINK_CTRL, 0, 0, 0, GLINK_MAX_PAYLOAD + 1 };
	uint8_t hdr[GLINK_HDR_LEN];

	glink_hdr_encode(hdr, &h);
	/* Refused on the header alone: no payload needs to arrive. */
	ck_assert_int_eq(glink_feed(l, hdr, sizeof(hdr), record, NULL), -1);
	ck_assert_ptr_nonnull(strstr(glink_error(l), "exceeds"));
	glink_free(l);
}
END_TEST

START_TEST(body_limit_and_interleaving)
{
	struct glink *l = glink_new(GLINK_ROLE_GUEST);
	static uint8_t chunk[GLINK_MAX_PAYLOAD];
	struct seen s = { 0 };
	unsigned i;

	ck_assert_int_eq(feed_frame(l, GLINK_CTRL, GLINK_F_BODY, 0, 0, "{}",
	    2, &s), 0);
	for (i = 0; i < GLINK_MAX_BODY / GLINK_MAX_PAYLOAD; i++)
		ck_assert_int_eq(feed_frame(l, GLINK_BODY, 0, 0, 0, chunk,
		    sizeof(chunk), &s), 0);
	ck_assert_int_eq(feed_frame(l, GLINK_BODY, GLINK_F_END, 0, 0, chunk,
	    1, &s), -1);
	ck_assert_ptr_nonnull(strstr(glink_error(l), "body exceeds"));
	glink_reset(l);
	/* A second CTRL before the body ended is a violation. */
	ck_assert_int_eq(feed_frame(l, GLINK_CTRL, GLINK_F_BODY, 0, 0, "{}",
	    2, &s), 0);
	ck_assert_int_eq(feed_frame(l, GLINK_CTRL, 0, 0, 0, "{}", 2, &s), -1);
	ck_assert_ptr_nonnull(strstr(glink_error(l), "before the previous"));
	glink_free(l);
}
END_TEST

/* Host opens a channel on the guest; returns the pair connected. */
static void
open_pair(struct glink **h, struct glink **g, struct seen *sg,
    struct seen *sh, uint32_t ch)
{
	*h = glink_new(GLINK_ROLE_HOST);
	*g = glink_new(GLINK_ROLE_GUEST);
	ck_assert_int_eq(glink_send_open(*h, ch, 5000), 0);
	ck_assert_int_eq(pump(*h, *g, sg, 65536), 0);
	ck_assert_int_eq(sg->type[0], GLINK_OPEN);
	ck_assert_uint_eq(glink_credit(*g, ch), 0);
	ck_assert_int_eq(glink_send_open_ok(*g, ch), 0);
	ck_assert_int_eq(pump(*g, *h, sh, 65536), 0);
	ck_assert_uint_eq(glink_credit(*h, ch), GLINK_INITIAL_WINDOW);
	ck_assert_uint_eq(glink_credit(*g, ch), GLINK_INITIAL_WINDOW);
}

START_TEST(credit_windows)
{
	struct glink *h, *g;
	struct seen sg = { 0 }, sh = { 0 };
	static uint8_t big[300 * 1024];

	open_pair(&h, &g, &sg, &sh, 1);
	/* The sender is held to its credit... */
	ck_assert_int_eq(glink_send_data(h, 1, big, sizeof(big)),
	    GLINK_INITIAL_WINDOW);
	ck_assert_uint_eq(glink_credit(h, 1), 0);
	ck_assert_int_eq(glink_send_data(h, 1, big, 10), 0);
	ck_assert_uint_eq(glink_out_data_pending(h), GLINK_INITIAL_WINDOW);
	ck_assert_int_eq(pump(h, g, &sg, 65536), 0);
	ck_assert_uint_eq(sg.data_total, GLINK_INITIAL_WINDOW);
	/* ...and the receiver grants more only as it consumes. */
	ck_assert_int_eq(glink_consumed(g, 1, 1000), 0);
	ck_assert_uint_eq(glink_out_pending(g), 0);
	ck_assert_int_eq(glink_consumed(g, 1, GLINK_INITIAL_WINDOW / 2), 0);
	ck_assert_int_eq(pump(g, h, &sh, 65536), 0);
	ck_assert_uint_eq(glink_credit(h, 1), GLINK_INITIAL_WINDOW / 2 + 1000);
	glink_free(h);
	glink_free(g);
}
END_TEST

START_TEST(data_beyond_credit_is_violation)
{
	struct glink *h, *g;
	struct seen sg = { 0 }, sh = { 0 };
	static uint8_t chunk[GLINK_MAX_PAYLOAD];
	int i;

	open_pair(&h, &g, &sg, &sh, 2);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(feed_frame(g, GLINK_DATA, 0, 0, 2, chunk,
		    sizeof(chunk), &sg), 0);
	ck_assert_int_eq(feed_frame(g, GLINK_DATA, 0, 0, 2, chunk, 1, &sg),
	    -1);
	ck_assert_ptr_nonnull(strstr(glink_error(g), "exceeds its credit"));
	glink_free(h);
	glink_free(g);
}
END_TEST

START_TEST(eof_and_window_rules)
{
	struct glink *h, *g;
	struct seen sg = { 0 }, sh = { 0 };
	uint8_t huge[4] = { 0xff, 0xff, 0xff, 0x7f }, zero[4] = { 0 };

	open_pair(&h, &g, &sg, &sh, 3);
	ck_assert_int_eq(feed_frame(g, GLINK_EOF, 0, 0, 3, "", 0, &sg), 0);
	ck_assert_int_eq(feed_frame(g, GLINK_DATA, 0, 0, 3, "x", 1, &sg), -1);
	ck_assert_ptr_nonnull(strstr(glink_error(g), "after EOF"));
	glink_free(h);
	glink_free(g);

	open_pair(&h, &g, &sg, &sh, 3);
	ck_assert_int_eq(feed_frame(g, GLINK_WINDOW, 0, 0, 3, zero, 4, &sg),
	    -1);
	glink_free(g);
	glink_free(h);
	open_pair(&h, &g, &sg, &sh, 3);
	ck_assert_int_eq(feed_frame(g, GLINK_WINDOW, 0, 0, 3, huge, 4, &sg),
	    -1);
	ck_assert_ptr_nonnull(strstr(glink_error(g), "WINDOW"));
	/* Our own side refuses to send after our EOF. */
	glink_free(g);
	glink_free(h);
	open_pair(&h, &g, &sg, &sh, 3);
	ck_assert_int_eq(glink_send_eof(h, 3), 0);
	ck_assert_int_eq(glink_send_data(h, 3, "x", 1), -1);
	ck_assert_uint_eq(glink_credit(h, 3), 0);
	glink_free(g);
	glink_free(h);
}
END_TEST

START_TEST(close_crossing_data)
{
	struct glink *h, *g;
	struct seen sg = { 0 }, sh = { 0 };

	open_pair(&h, &g, &sg, &sh, 4);
	/* Both act at once: host closes while guest still sends. */
	ck_assert_int_eq(glink_send_close(h, 4), 0);
	ck_assert_int_eq(glink_send_data(g, 4, "late", 4), 4);
	ck_assert_int_eq(pump(g, h, &sh, 65536), 0);	/* ignored */
	sg.n = 0;
	ck_assert_int_eq(pump(h, g, &sg, 65536), 0);	/* CLOSE arrives */
	ck_assert_int_eq(sg.n, 1);
	ck_assert_int_eq(sg.type[0], GLINK_CLOSE);
	ck_assert_int_eq(glink_chan_exists(g, 4), 0);
	/* The host keeps it until the answer comes. */
	ck_assert_int_eq(glink_chan_exists(h, 4), 1);
	ck_assert_int_eq(pump(g, h, &sh, 65536), 0);	/* answer */
	ck_assert_int_eq(glink_chan_exists(h, 4), 0);
	ck_assert_int_eq(glink_nchannels(h), 0);
	/* The id can be opened again. */
	ck_assert_int_eq(glink_send_open(h, 4, 22), 0);
	ck_assert_int_eq(pump(h, g, &sg, 65536), 0);
	glink_free(h);
	glink_free(g);
}
END_TEST

START_TEST(open_fail_releases)
{
	struct glink *h = glink_new(GLINK_ROLE_HOST);
	struct glink *g = glink_new(GLINK_ROLE_GUEST);
	struct seen sg = { 0 }, sh = { 0 };

	ck_assert_int_eq(glink_send_open(h, 9, 80), 0);
	ck_assert_int_eq(pump(h, g, &sg, 65536), 0);
	ck_assert_int_eq(glink_send_open_fail(g, 9, "connection refused"), 0);
	ck_assert_int_eq(glink_chan_exists(g, 9), 0);
	ck_assert_int_eq(pump(g, h, &sh, 65536), 0);
	ck_assert_int_eq(sh.type[0], GLINK_OPEN_FAIL);
	ck_assert_uint_eq(sh.len[0], strlen("connection refused"));
	ck_assert_int_eq(glink_chan_exists(h, 9), 0);
	glink_free(h);
	glink_free(g);
}
END_TEST

/* A guest-made connection: open at once, data both ways, bounded share. */
START_TEST(accept_from_the_guest)
{
	struct glink *h = glink_new(GLINK_ROLE_HOST);
	struct glink *g = glink_new(GLINK_ROLE_GUEST);
	struct seen sg = { 0 }, sh = { 0 };
	uint32_t ch, i;

	ch = glink_free_accept_channel(g);
	ck_assert_uint_eq(ch, GLINK_GUEST_CHAN | 1);
	/* Only the guest accepts, only with guest ids; the host cannot open one. */
	ck_assert_int_eq(glink_send_accept(h, ch), -1);
	ck_assert_int_eq(glink_send_accept(g, 5), -1);
	ck_assert_int_eq(glink_send_open(h, ch, 80), -1);
	ck_assert_int_eq(glink_send_accept(g, ch), 0);
	ck_assert_int_eq(glink_send_data(g, ch, "pre\n", 4), 4);
	ck_assert_int_eq(pump(g, h, &sh, 3), 0);
	ck_assert_int_eq(sh.n, 2);
	ck_assert_int_eq(sh.type[0], GLINK_ACCEPT);
	ck_assert_uint_eq(sh.chan[0], ch);
	ck_assert_int_eq(sh.type[1], GLINK_DATA);
	ck_assert_uint_eq(glink_credit(h, ch), GLINK_INITIAL_WINDOW);
	ck_assert_int_eq(glink_send_data(h, ch, "ok", 2), 2);
	ck_assert_int_eq(pump(h, g, &sg, 65536), 0);
	ck_assert_int_eq(sg.type[0], GLINK_DATA);
	/* The host refuses with CLOSE; the guest answers and both forget it. */
	ck_assert_int_eq(glink_send_close(h, ch), 0);
	ck_assert_int_eq(pump(h, g, &sg, 65536), 0);
	ck_assert_int_eq(glink_chan_exists(g, ch), 0);
	ck_assert_int_eq(pump(g, h, &sh, 65536), 0);
	ck_assert_int_eq(glink_chan_exists(h, ch), 0);
	ck_assert_int_eq(glink_nchannels(h), 0);
	/* The guest's share is bounded and leaves the host's alone. */
	for (i = 0; i < GLINK_MAX_ACCEPTED; i++)
		ck_assert_int_eq(glink_send_accept(g,
		    glink_free_accept_channel(g)), 0);
	ck_assert_uint_eq(glink_free_accept_channel(g), 0);
	ck_assert_int_eq(pump(g, h, &sh, 65536), 0);
	ck_assert_int_eq(glink_nchannels(h), GLINK_MAX_ACCEPTED);
	ck_assert_uint_eq(glink_free_channel(h), 1);
	glink_free(h);
	glink_free(g);
}
END_TEST

/* Accepts the guest may not make, and one the host may not receive. */
START_TEST(accept_rule_violations)
{
	struct glink *h, *g;
	struct seen s = { 0 };
	uint32_t i;

	h = glink_new(GLINK_ROLE_HOST);
	ck_assert_int_eq(feed_frame(h, GLINK_ACCEPT, 0, 0, 7, NULL, 0, &s), -1);
	glink_free(h);
	h = glink_new(GLINK_ROLE_HOST);
	ck_assert_int_eq(feed_frame(h, GLINK_ACCEPT, 0, 0,
	    GLINK_GUEST_CHAN | 1, "x", 1, &s), -1);
	glink_free(h);
	h = glink_new(GLINK_ROLE_HOST);
	ck_assert_int_eq(feed_frame(h, GLINK_ACCEPT, 0, 0,
	    GLINK_GUEST_CHAN | 1, NULL, 0, &s), 0);
	ck_assert_int_eq(feed_frame(h, GLINK_ACCEPT, 0, 0,
	    GLINK_GUEST_CHAN | 1, NULL, 0, &s), -1);
	glink_free(h);
	h = glink_new(GLINK_ROLE_HOST);
	for (i = 1; i <= GLINK_MAX_ACCEPTED; i++)
		ck_assert_int_eq(feed_frame(h, GLINK_ACCEPT, 0, 0,
		    GLINK_GUEST_CHAN | i, NULL, 0, &s), 0);
	ck_assert_int_eq(feed_frame(h, GLINK_ACCEPT, 0, 0,
	    GLINK_GUEST_CHAN | i, NULL, 0, &s), -1);
	ck_assert_ptr_nonnull(strstr(glink_error(h), "accepted"));
	glink_free(h);
	g = glink_new(GLINK_ROLE_GUEST);
	ck_assert_int_eq(feed_frame(g, GLINK_ACCEPT, 0, 0,
	    GLINK_GUEST_CHAN | 1, NULL, 0, &s), -1);
	glink_free(g);
	g = glink_new(GLINK_ROLE_GUEST);
	ck_assert_int_eq(feed_frame(g, GLINK_OPEN, 0, 0, GLINK_GUEST_CHAN | 1,
	    "\x50\0\0\0", 4, &s), -1);
	glink_free(g);
}
END_TEST

START_TEST(control_jumps_stream_data)
{
	struct glink *h, *g;
	struct seen sg = { 0 }, sh = { 0 };
	static uint8_t big[200 * 1024];
	const uint8_t *p;
	size_t n;

	open_pair(&h, &g, &sg, &sh, 1);
	ck_assert_int_eq(glink_send_data(g, 1, big, sizeof(big)), sizeof(big));
	/* Start writing the first DATA frame, then queue a reply. */
	glink_out_peek(g, &p, &n);
	ck_assert_int_eq(p[0], GLINK_DATA);
	glink_out_consume(g, 100);
	ck_assert_int_eq(glink_send_ctrl(g, "{\"id\":7}", 8, NULL, 0), 0);
	/* The started frame finishes first; the reply comes right after. */
	glink_out_peek(g, &p, &n);
	ck_assert_uint_eq(n, GLINK_HDR_LEN + GLINK_MAX_PAYLOAD - 100);
	glink_out_consume(g, n);
	glink_out_peek(g, &p, &n);
	ck_assert_int_eq(p[0], GLINK_CTRL);
	ck_assert_uint_eq(n, GLINK_HDR_LEN + 8);
	glink_free(h);
	glink_free(g);
}
END_TEST

START_TEST(json_parse_bounds)
{
	char err[128];
	struct json_object *o;
	const char *s;
	int64_t v;

	o = glink_json_parse(P("{\"a\":1}"), err, sizeof(err));
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(glink_json_int(o, "a", 1, 0, 5, &v, err,
	    sizeof(err)), 1);
	ck_assert_int_eq(v, 1);
	ck_assert_int_eq(glink_json_int(o, "a", 1, 2, 5, &v, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(glink_json_str(o, "a", 1, 5, &s, err,
	    sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "must be a string"));
	ck_assert_int_eq(glink_json_str(o, "b", 0, 5, &s, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(glink_json_str(o, "b", 1, 5, &s, err,
	    sizeof(err)), -1);
	json_object_put(o);

	ck_assert_ptr_null(glink_json_parse(P("{\"a\":[[[[[[[[[[1]]]]]]]]]]}"),
	    err, sizeof(err)));
	ck_assert_ptr_null(glink_json_parse(P("{} x"), err, sizeof(err)));
	ck_assert_ptr_null(glink_json_parse(P("[1]"), err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "not a JSON object"));
	ck_assert_ptr_null(glink_json_parse(P("{\"a\":"), err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "truncated"));
	ck_assert_ptr_null(glink_json_parse(P("{\"a\":\"\xff\"}"), err,
	    sizeof(err)));
	o = glink_json_parse(P("{\"a\":\"x\\u0000y\"}"), err, sizeof(err));
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(glink_json_str(o, "a", 1, 50, &s, err,
	    sizeof(err)), -1);
	json_object_put(o);
	/* What json-c alone would clamp, or take for infinity. */
	ck_assert_ptr_null(glink_json_parse(P("{\"a\":18446744073709551615}"),
	    err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "integer out of range"));
	ck_assert_ptr_null(glink_json_parse(P("{\"a\":1e999}"), err,
	    sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "number out of range"));
	/* Grammar json-c's strict mode still lets through. */
	ck_assert_ptr_null(glink_json_parse(P("{\"a\":\"\\ud800\"}"), err,
	    sizeof(err)));
	ck_assert_ptr_null(glink_json_parse(P("{\"a\":\"\xc0\xaf\"}"), err,
	    sizeof(err)));
	ck_assert_ptr_null(glink_json_parse("{\"a\":1}\0", 8, err,
	    sizeof(err)));
}
END_TEST

START_TEST(reply_envelope)
{
	char err[128];
	struct glink_reply r;
	struct json_object *o;

	o = glink_json_parse(P("{\"id\":3,\"ok\":false,\"error\":{\"code\":"
	    "\"not_found\",\"message\":\"no job x\"}}"), err, sizeof(err));
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(glink_reply_decode(o, &r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.id, 3);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_str_eq(r.code, "not_found");
	json_object_put(o);
	o = glink_json_parse(P("{\"id\":0,\"ok\":true}"), err, sizeof(err));
	ck_assert_int_eq(glink_reply_decode(o, &r, err, sizeof(err)), -1);
	json_object_put(o);
	o = glink_json_parse(P("{\"event\":\"hello\"}"), err, sizeof(err));
	ck_assert_int_eq(glink_reply_decode(o, &r, err, sizeof(err)), 0);
	ck_assert_str_eq(r.event, "hello");
	json_object_put(o);
}
END_TEST

START_TEST(reset_forgets_everything)
{
	struct glink *h, *g;
	struct seen sg = { 0 }, sh = { 0 };

	open_pair(&h, &g, &sg, &sh, 1);
	glink_send_data(g, 1, "abc", 3);
	ck_assert_int_eq(feed_frame(g, GLINK_CTRL, GLINK_F_BODY, 0, 0, "{}", 2,
	    &sg), 0);
	glink_reset(g);
	ck_assert_uint_eq(glink_out_pending(g), 0);
	ck_assert_int_eq(glink_nchannels(g), 0);
	/* The pending body is gone too: a plain CTRL is fine now. */
	ck_assert_int_eq(feed_frame(g, GLINK_CTRL, 0, 0, 0, "{}", 2, &sg), 0);
	glink_free(h);
	glink_free(g);
}
END_TEST

START_TEST(new_session_keeps_control_and_started_frame)
{
	struct glink *h, *g;
	struct seen sg = { 0 }, sh = { 0 };
	static uint8_t big[200 * 1024];
	const uint8_t *p;
	size_t n;

	open_pair(&h, &g, &sg, &sh, 1);
	ck_assert_int_eq(glink_send_data(g, 1, big, sizeof(big)), sizeof(big));
	ck_assert_int_eq(glink_send_ctrl(g, "{\"id\":1}", 8, NULL, 0), 0);
	/* Reply first, then half of a DATA frame goes out. */
	glink_out_peek(g, &p, &n);
	glink_out_consume(g, n);
	glink_out_peek(g, &p, &n);
	ck_assert_int_eq(p[0], GLINK_DATA);
	glink_out_consume(g, 10);
	glink_reset_channels(g);
	ck_assert_int_eq(glink_nchannels(g), 0);
	/* Only the rest of the started frame is left, then nothing. */
	glink_out_peek(g, &p, &n);
	ck_assert_uint_eq(n, GLINK_HDR_LEN + GLINK_MAX_PAYLOAD - 10);
	glink_out_consume(g, n);
	ck_assert_uint_eq(glink_out_pending(g), 0);
	ck_assert_uint_eq(glink_out_data_pending(g), 0);
	/* A host in lenient mode drops frames for channels it forgot. */
	glink_reset_channels(h);
	glink_set_lenient(h, 1);
	ck_assert_int_eq(feed_frame(h, GLINK_DATA, 0, 0, 1, "x", 1, &sh), 0);
	glink_set_lenient(h, 0);
	ck_assert_int_eq(feed_frame(h, GLINK_DATA, 0, 0, 1, "x", 1, &sh), -1);
	glink_free(h);
	glink_free(g);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("glink");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, header_is_little_endian);
	tcase_add_test(tc, ctrl_with_large_body_byte_by_byte);
	tcase_add_test(tc, rule_violations_end_the_link);
	tcase_add_test(tc, oversized_length_refused_from_header);
	tcase_add_test(tc, body_limit_and_interleaving);
	tcase_add_test(tc, credit_windows);
	tcase_add_test(tc, data_beyond_credit_is_violation);
	tcase_add_test(tc, eof_and_window_rules);
	tcase_add_test(tc, close_crossing_data);
	tcase_add_test(tc, open_fail_releases);
	tcase_add_test(tc, accept_from_the_guest);
	tcase_add_test(tc, accept_rule_violations);
	tcase_add_test(tc, control_jumps_stream_data);
	tcase_add_test(tc, json_parse_bounds);
	tcase_add_test(tc, reply_envelope);
	tcase_add_test(tc, reset_forgets_everything);
	tcase_add_test(tc, new_session_keeps_control_and_started_frame);
	suite_add_tcase(s, tc);
	return check_run(s);
}
