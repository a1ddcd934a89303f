/*
 * Unit tests for common/brokermux: the broker pipe's big-endian frames, split
 * and combined any way, every rule a controller can break, and the guest
 * preamble.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokermux.h"

struct got {
	int		 n;
	uint8_t		 type[16];
	uint32_t	 id[16];
	char		 data[256];
	size_t		 dlen;
};

static int
rec(const struct bmux_frame *f, void *arg)
{
	struct got *g = arg;

	if (g->n < 16) {
		g->type[g->n] = f->type;
		g->id[g->n] = f->conn_id;
	}
	g->n++;
	if (g->dlen + f->len <= sizeof(g->data)) {
		memcpy(g->data + g->dlen, f->data, f->len);
		g->dlen += f->len;
	}
	return 0;
}

static size_t
build(uint8_t *out)
{
	size_t n = 0;

	n += bmux_encode(out + n, BMUX_DATA, 0x01020304, 5);
	memcpy(out + n, "hello", 5);
	n += 5;
	n += bmux_encode(out + n, BMUX_DATA, 9, 0);
	n += bmux_encode(out + n, BMUX_CLOSE, 0x01020304, 0);
	return n;
}

START_TEST(split_and_combined)
{
	static struct bmux_dec d;
	uint8_t buf[64];
	size_t n = build(buf), step;

	ck_assert_uint_eq(n, 9 + 5 + 9 + 5);
	ck_assert_uint_eq(buf[1], 1);	/* big-endian conn_id */
	ck_assert_uint_eq(buf[8], 5);
	for (step = 1; step <= n; step++) {
		struct got g = { 0 };
		size_t off;

		bmux_init(&d, 1);
		for (off = 0; off < n; off += step)
			ck_assert_int_eq(bmux_feed(&d, buf + off,
			    off + step > n ? n - off : step, rec, &g), 0);
		ck_assert_int_eq(g.n, 3);
		ck_assert_uint_eq(g.type[0], BMUX_DATA);
		ck_assert_uint_eq(g.id[0], 0x01020304);
		ck_assert_uint_eq(g.type[2], BMUX_CLOSE);
		ck_assert_uint_eq(g.dlen, 5);
		ck_assert_int_eq(memcmp(g.data, "hello", 5), 0);
	}
}
END_TEST

START_TEST(controller_rules)
{
	static struct bmux_dec d;
	struct got g = { 0 };
	uint8_t buf[16];
	size_t n;

	/* open comes only from the service. */
	bmux_init(&d, 1);
	n = bmux_encode(buf, BMUX_OPEN, 1, 0);
	ck_assert_int_eq(bmux_feed(&d, buf, n, rec, &g), -1);
	ck_assert_ptr_nonnull(strstr(d.err, "type 1"));
	bmux_init(&d, 0);
	ck_assert_int_eq(bmux_feed(&d, buf, n, rec, &g), 0);
	/* Unknown types, conn_id 0 and oversized data. */
	bmux_init(&d, 1);
	buf[0] = 4;
	ck_assert_int_eq(bmux_feed(&d, buf, 1, rec, &g), -1);
	bmux_init(&d, 1);
	n = bmux_encode(buf, BMUX_CLOSE, 0, 0);
	ck_assert_int_eq(bmux_feed(&d, buf, n, rec, &g), -1);
	ck_assert_ptr_nonnull(strstr(d.err, "conn_id 0"));
	bmux_init(&d, 1);
	n = bmux_encode(buf, BMUX_DATA, 1, BMUX_MAX_DATA + 1);
	ck_assert_int_eq(bmux_feed(&d, buf, n, rec, &g), -1);
	ck_assert_ptr_nonnull(strstr(d.err, "65536"));
	bmux_init(&d, 1);
	n = bmux_encode(buf, BMUX_DATA, 1, BMUX_MAX_DATA);
	ck_assert_int_eq(bmux_feed(&d, buf, n, rec, &g), 0);
}
END_TEST

START_TEST(preamble)
{
	struct broker_preamble p;
	char text[200];
	const char *sec =
	    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	size_t n, i;

	n = (size_t)snprintf(text, sizeof(text), "j42 %s\nrest", sec);
	/* Incomplete until the newline, whatever the split. */
	for (i = 0; i < n - 4; i++)
		ck_assert_int_eq(broker_preamble_parse((uint8_t *)text, i,
		    &p), 0);
	ck_assert_int_eq(broker_preamble_parse((uint8_t *)text, n, &p),
	    (int)(n - 4));
	ck_assert_str_eq(p.job_id, "j42");
	ck_assert_uint_eq(p.secret[0], 0x00);
	ck_assert_uint_eq(p.secret[15], 0xff);
	/* Bad id, uppercase hex, a short secret, no id. */
	ck_assert_int_eq(broker_preamble_parse((uint8_t *)"j/1 ab", 6, &p), -1);
	snprintf(text, sizeof(text), "j42 %.63sF\n", sec);
	ck_assert_int_eq(broker_preamble_parse((uint8_t *)text, strlen(text),
	    &p), -1);
	ck_assert_int_eq(broker_preamble_parse((uint8_t *)"j42 abc\n", 8, &p),
	    -1);
	ck_assert_int_eq(broker_preamble_parse((uint8_t *)" ab", 3, &p), -1);
	memset(text, 'a', 70);
	ck_assert_int_eq(broker_preamble_parse((uint8_t *)text, 70, &p), -1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("brokermux");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, split_and_combined);
	tcase_add_test(tc, controller_rules);
	tcase_add_test(tc, preamble);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
