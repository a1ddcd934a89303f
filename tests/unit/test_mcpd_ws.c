/*
 * Unit tests for mcpd's RFC 6455 codec (mcpd/ws.c) and UTF-8 validator.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ws.h"
#include "../check_run.h"

/* Builds a client frame into out; returns its length. */
static size_t
frame(uint8_t *out, int fin, int rsv, int op, const void *payload,
    size_t len, int mask)
{
	static const uint8_t key[4] = { 0x37, 0xfa, 0x21, 0x3d };
	size_t h = 2, i;

	out[0] = (uint8_t)((fin ? 0x80 : 0) | (rsv << 4) | op);
	if (len < 126) {
		out[1] = (uint8_t)len;
	} else if (len < 65536) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		h = 4;
	} else {
		out[1] = 127;
		for (i = 0; i < 8; i++)
			out[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
		h = 10;
	}
	if (mask) {
		out[1] |= 0x80;
		memcpy(out + h, key, 4);
		h += 4;
	}
	for (i = 0; i < len; i++)
		out[h + i] = ((const uint8_t *)payload)[i] ^
		    (mask ? key[i & 3] : 0);
	return h + len;
}

static struct ws_rx rx;

static void
setup(void)
{
	ws_rx_init(&rx, WS_MAX_MESSAGE);
}

static long
parse(uint8_t *buf, size_t len, struct ws_event *ev, uint16_t *code)
{
	return ws_rx_parse(&rx, buf, len, ev, code);
}

START_TEST(accept_key_rfc_example)
{
	char out[WS_ACCEPT_LEN + 1];

	/* The example of RFC 6455 section 1.3. */
	ck_assert_int_eq(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
	ck_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}
END_TEST

START_TEST(handshake_checks)
{
	const char *why;
	const char *k = "dGhlIHNhbXBsZSBub25jZQ==";

	ck_assert_int_eq(ws_handshake_check("websocket", "Upgrade", k, "13",
	    &why), 0);
	ck_assert_int_eq(ws_handshake_check("WebSocket", "keep-alive, Upgrade",
	    k, "13", &why), 0);
	ck_assert_int_eq(ws_handshake_check(NULL, "Upgrade", k, "13", &why),
	    400);
	ck_assert_int_eq(ws_handshake_check("h2c", "Upgrade", k, "13", &why),
	    400);
	ck_assert_int_eq(ws_handshake_check("websocket", "close", k, "13",
	    &why), 400);
	ck_assert_int_eq(ws_handshake_check("websocket", "Upgrade", k, "8",
	    &why), 426);
	ck_assert_int_eq(ws_handshake_check("websocket", "Upgrade", k, NULL,
	    &why), 426);
	ck_assert_int_eq(ws_handshake_check("websocket", "Upgrade", "abc",
	    "13", &why), 400);
	ck_assert_int_eq(ws_handshake_check("websocket", "Upgrade",
	    "dGhlIHNhbXBsZSBub25jZQ=A", "13", &why), 400);
	ck_assert_int_eq(ws_handshake_check("websocket", "Upgrade",
	    "dGhlIHNhbXBsZSBub25j!Q==", "13", &why), 400);
	ck_assert_int_eq(ws_handshake_check("websocket", "Upgrade", NULL,
	    "13", &why), 400);
}
END_TEST

START_TEST(masked_binary_frame)
{
	uint8_t buf[64];
	struct ws_event ev;
	uint16_t code;
	size_t n = frame(buf, 1, 0, WS_OP_BINARY, "hello", 5, 1);

	/* Every strict prefix asks for more. */
	for (size_t i = 0; i < n; i++) {
		uint8_t tmp[64];

		memcpy(tmp, buf, n);
		ck_assert_int_eq(parse(tmp, i, &ev, &code), 0);
	}
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	ck_assert_int_eq(ev.kind, WS_EV_DATA);
	ck_assert_int_eq(ev.opcode, WS_OP_BINARY);
	ck_assert_int_eq(ev.fin, 1);
	ck_assert_uint_eq(ev.len, 5);
	ck_assert_mem_eq(ev.payload, "hello", 5);
}
END_TEST

START_TEST(unmasked_client_frame_refused)
{
	uint8_t buf[64];
	struct ws_event ev;
	uint16_t code = 0;
	size_t n = frame(buf, 1, 0, WS_OP_TEXT, "hi", 2, 0);

	ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
	ck_assert_uint_eq(code, WS_CLOSE_PROTOCOL);
}
END_TEST

START_TEST(rsv_and_reserved_opcodes_refused)
{
	static const int ops[] = { 3, 4, 5, 6, 7, 0xb, 0xc, 0xd, 0xe, 0xf };
	uint8_t buf[64];
	struct ws_event ev;
	uint16_t code;
	size_t i, n;

	for (i = 1; i < 8; i++) {
		setup();
		n = frame(buf, 1, (int)i, WS_OP_BINARY, "x", 1, 1);
		ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
		ck_assert_uint_eq(code, WS_CLOSE_PROTOCOL);
	}
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		setup();
		n = frame(buf, 1, 0, ops[i], "x", 1, 1);
		ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
	}
}
END_TEST

START_TEST(fragmentation)
{
	uint8_t buf[256];
	struct ws_event ev;
	uint16_t code;
	size_t n;

	n = frame(buf, 0, 0, WS_OP_TEXT, "ab", 2, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	ck_assert_int_eq(ev.fin, 0);
	ck_assert_int_eq(ev.opcode, WS_OP_TEXT);
	/* A control frame may come between fragments. */
	n = frame(buf, 1, 0, WS_OP_PING, "p", 1, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	ck_assert_int_eq(ev.kind, WS_EV_PING);
	/* A new data message may not. */
	n = frame(buf, 1, 0, WS_OP_BINARY, "x", 1, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
	setup();
	n = frame(buf, 0, 0, WS_OP_TEXT, "ab", 2, 1);
	parse(buf, n, &ev, &code);
	n = frame(buf, 0, 0, WS_OP_CONT, "cd", 2, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	ck_assert_int_eq(ev.opcode, WS_OP_TEXT);
	n = frame(buf, 1, 0, WS_OP_CONT, "e", 1, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	ck_assert_int_eq(ev.fin, 1);
	ck_assert_uint_eq(ev.msg_len, 5);
	/* A continuation with nothing to continue. */
	n = frame(buf, 1, 0, WS_OP_CONT, "e", 1, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
	ck_assert_uint_eq(code, WS_CLOSE_PROTOCOL);
}
END_TEST

START_TEST(control_frames_short_and_whole)
{
	uint8_t buf[300], payload[126];
	struct ws_event ev;
	uint16_t code;
	size_t n;

	memset(payload, 'a', sizeof(payload));
	n = frame(buf, 1, 0, WS_OP_PING, payload, 125, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	ck_assert_uint_eq(ev.len, 125);
	n = frame(buf, 1, 0, WS_OP_PING, payload, 126, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
	n = frame(buf, 0, 0, WS_OP_PONG, payload, 1, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
	n = frame(buf, 0, 0, WS_OP_CLOSE, "\x03\xe8", 2, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
	n = frame(buf, 1, 0, WS_OP_PONG, "", 0, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	ck_assert_int_eq(ev.kind, WS_EV_PONG);
}
END_TEST

START_TEST(close_codes)
{
	static const struct {
		const char *p;
		size_t len;
		long ok;
		uint16_t code;
	} cases[] = {
		{ "", 0, 1, WS_CLOSE_NO_STATUS },
		{ "\x03", 1, -1, WS_CLOSE_PROTOCOL },
		{ "\x03\xe8", 2, 1, 1000 },
		{ "\x03\xe9" "bye", 5, 1, 1001 },
		{ "\x03\xeb", 2, 1, 1003 },
		{ "\x03\xec", 2, -1, WS_CLOSE_PROTOCOL },	/* 1004 */
		{ "\x03\xed", 2, -1, WS_CLOSE_PROTOCOL },	/* 1005 */
		{ "\x03\xee", 2, -1, WS_CLOSE_PROTOCOL },	/* 1006 */
		{ "\x03\xef", 2, 1, 1007 },
		{ "\x03\xf3", 2, 1, 1011 },
		{ "\x03\xf7", 2, -1, WS_CLOSE_PROTOCOL },	/* 1015 */
		{ "\x03\xe7", 2, -1, WS_CLOSE_PROTOCOL },	/* 999 */
		{ "\x07\xd0", 2, -1, WS_CLOSE_PROTOCOL },	/* 2000 */
		{ "\x0b\xb8", 2, 1, 3000 },
		{ "\x13\x87", 2, 1, 4999 },
		{ "\x13\x88", 2, -1, WS_CLOSE_PROTOCOL },	/* 5000 */
		{ "\x03\xe8\xff", 3, -1, WS_CLOSE_BAD_DATA },	/* bad reason */
	};
	uint8_t buf[64];
	struct ws_event ev;
	uint16_t code;
	size_t i, n;
	long r;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		setup();
		n = frame(buf, 1, 0, WS_OP_CLOSE, cases[i].p, cases[i].len, 1);
		r = parse(buf, n, &ev, &code);
		if (cases[i].ok == 1) {
			ck_assert_int_eq(r, (long)n);
			ck_assert_int_eq(ev.kind, WS_EV_CLOSE);
			ck_assert_uint_eq(ev.close_code, cases[i].code);
		} else {
			ck_assert_int_eq(r, -1);
			ck_assert_uint_eq(code, cases[i].code);
		}
	}
	setup();
	n = frame(buf, 1, 0, WS_OP_CLOSE, "\x03\xe9" "bye", 5, 1);
	parse(buf, n, &ev, &code);
	ck_assert_uint_eq(ev.reason_len, 3);
	ck_assert_mem_eq(ev.reason, "bye", 3);
}
END_TEST

START_TEST(message_size_limit)
{
	uint8_t *buf = malloc(WS_MAX_MESSAGE + 32);
	uint8_t *payload = calloc(1, WS_MAX_MESSAGE + 1);
	struct ws_event ev;
	uint16_t code;
	size_t n;

	n = frame(buf, 1, 0, WS_OP_BINARY, payload, WS_MAX_MESSAGE, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	/* One byte more is refused from the header alone. */
	n = frame(buf, 1, 0, WS_OP_BINARY, payload, WS_MAX_MESSAGE + 1, 1);
	ck_assert_int_eq(parse(buf, 14, &ev, &code), -1);
	ck_assert_uint_eq(code, WS_CLOSE_TOO_BIG);
	/* The limit is per message, across fragments. */
	setup();
	n = frame(buf, 0, 0, WS_OP_BINARY, payload, WS_MAX_MESSAGE, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	n = frame(buf, 1, 0, WS_OP_CONT, payload, 1, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
	ck_assert_uint_eq(code, WS_CLOSE_TOO_BIG);
	/* A 64-bit length with the top bit set, and non-minimal lengths. */
	setup();
	memcpy(buf, "\x82\xff\x80\0\0\0\0\0\0\0", 10);
	ck_assert_int_eq(parse(buf, 10, &ev, &code), -1);
	memcpy(buf, "\x82\xfe\x00\x05", 4);
	ck_assert_int_eq(parse(buf, 4, &ev, &code), -1);
	memcpy(buf, "\x82\xff\0\0\0\0\0\0\0\x05", 10);
	ck_assert_int_eq(parse(buf, 10, &ev, &code), -1);
	free(buf);
	free(payload);
}
END_TEST

START_TEST(text_utf8)
{
	uint8_t buf[64];
	struct ws_event ev;
	uint16_t code;
	size_t n;
	const char check[] = "\xe2\x9c\x93";

	n = frame(buf, 1, 0, WS_OP_TEXT, "\xff", 1, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
	ck_assert_uint_eq(code, WS_CLOSE_BAD_DATA);
	/* Split in a character across fragments: fine... */
	setup();
	n = frame(buf, 0, 0, WS_OP_TEXT, check, 1, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	n = frame(buf, 1, 0, WS_OP_CONT, check + 1, 2, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
	/* ...but not at the end of the message. */
	setup();
	n = frame(buf, 1, 0, WS_OP_TEXT, check, 2, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), -1);
	ck_assert_uint_eq(code, WS_CLOSE_BAD_DATA);
	/* Binary messages are not checked. */
	setup();
	n = frame(buf, 1, 0, WS_OP_BINARY, "\xff", 1, 1);
	ck_assert_int_eq(parse(buf, n, &ev, &code), (long)n);
}
END_TEST


START_TEST(server_frames)
{
	uint8_t h[WS_MAX_HEADER], p[125];
	char longreason[200];
	size_t n;

	ck_assert_uint_eq(ws_frame_header(h, 1, WS_OP_BINARY, 5), 2);
	ck_assert_uint_eq(h[0], 0x82);
	ck_assert_uint_eq(h[1], 5);
	ck_assert_uint_eq(ws_frame_header(h, 1, WS_OP_TEXT, 126), 4);
	ck_assert_uint_eq(h[1], 126);
	ck_assert_uint_eq(ws_frame_header(h, 0, WS_OP_BINARY, 70000), 10);
	ck_assert_uint_eq(h[0], 0x02);
	ck_assert_uint_eq(h[1], 127);
	ck_assert_uint_eq(ws_frame_size(h, 10), 10 + 70000);
	ck_assert_uint_eq(ws_frame_size(h, 5), 0);
	n = ws_close_payload(p, 1001, "suspended");
	ck_assert_uint_eq(n, 11);
	ck_assert_mem_eq(p, "\x03\xe9suspended", 11);
	/* A long reason is cut at a character boundary within 125 bytes. */
	memset(longreason, 0, sizeof(longreason));
	for (n = 0; n + 3 < 190; n += 3)
		memcpy(longreason + n, "\xe2\x9c\x93", 3);
	n = ws_close_payload(p, 1000, longreason);
	ck_assert_uint_le(n, 125);
	ck_assert_uint_eq((n - 2) % 3, 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("mcpd_ws");
	TCase *tc = tcase_create("codec");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, accept_key_rfc_example);
	tcase_add_test(tc, handshake_checks);
	tcase_add_test(tc, masked_binary_frame);
	tcase_add_test(tc, unmasked_client_frame_refused);
	tcase_add_test(tc, rsv_and_reserved_opcodes_refused);
	tcase_add_test(tc, fragmentation);
	tcase_add_test(tc, control_frames_short_and_whole);
	tcase_add_test(tc, close_codes);
	tcase_add_test(tc, message_size_limit);
	tcase_add_test(tc, text_utf8);
	tcase_add_test(tc, server_frames);
	suite_add_tcase(s, tc);
	return check_run(s);
}
