/*
 * Unit tests for common/utf8: strict validity, and the output window decoder
 * vm_job_output pages text with.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "../check_run.h"

#define FFFD	"\xef\xbf\xbd"

static int
valid(const char *s)
{
	return utf8_valid((const uint8_t *)s, strlen(s));
}

START_TEST(accepts_well_formed)
{
	ck_assert(utf8_valid((const uint8_t *)"", 0));
	ck_assert(valid("plain ascii\n"));
	ck_assert(valid("\xc3\xa9"));			/* U+00E9 */
	ck_assert(valid("\xc2\x80"));			/* U+0080, smallest 2-byte */
	ck_assert(valid("\xe0\xa0\x80"));		/* U+0800, smallest 3-byte */
	ck_assert(valid("\xe2\x82\xac"));		/* U+20AC */
	ck_assert(valid("\xed\x9f\xbf"));		/* U+D7FF, below surrogates */
	ck_assert(valid("\xee\x80\x80"));		/* U+E000, above them */
	ck_assert(valid(FFFD));
	ck_assert(valid("\xf0\x90\x80\x80"));		/* U+10000 */
	ck_assert(valid("\xf0\x9f\x98\x80"));		/* U+1F600 */
	ck_assert(valid("\xf4\x8f\xbf\xbf"));		/* U+10FFFF */
	ck_assert(utf8_valid((const uint8_t *)"a\0b", 3));	/* U+0000 */
}
END_TEST

START_TEST(rejects_ill_formed)
{
	/* Overlong forms. */
	ck_assert(!valid("\xc0\x80"));
	ck_assert(!valid("\xc1\xbf"));
	ck_assert(!valid("\xe0\x80\x80"));
	ck_assert(!valid("\xe0\x9f\xbf"));
	ck_assert(!valid("\xf0\x80\x80\x80"));
	ck_assert(!valid("\xf0\x8f\xbf\xbf"));
	/* Surrogates. */
	ck_assert(!valid("\xed\xa0\x80"));
	ck_assert(!valid("\xed\xbf\xbf"));
	ck_assert(!valid("\xed\xa0\xbd\xed\xb8\x80"));	/* CESU-8 pair */
	/* Beyond U+10FFFF, and bytes that never appear. */
	ck_assert(!valid("\xf4\x90\x80\x80"));
	ck_assert(!valid("\xf5\x80\x80\x80"));
	ck_assert(!valid("\xf8\x88\x80\x80\x80"));
	ck_assert(!valid("\xfe"));
	ck_assert(!valid("\xff"));
	/* Stray continuation bytes and truncated sequences. */
	ck_assert(!valid("\x80"));
	ck_assert(!valid("a\xbf"));
	ck_assert(!valid("\xc3"));
	ck_assert(!valid("\xe2\x82"));
	ck_assert(!valid("\xf0\x9f\x98"));
	ck_assert(!valid("\xc3\x41"));
	ck_assert(!valid("\xe2\x82\x41"));
}
END_TEST

/* Fed in pieces, split anywhere: the same answer as utf8_valid. */
static int
fed(const char *s, size_t len, size_t cut, size_t step)
{
	struct utf8_stream st = { 0 };
	size_t i;

	if (utf8_feed(&st, (const uint8_t *)s, cut) == -1)
		return 0;
	for (i = cut; i < len; i += step)
		if (utf8_feed(&st, (const uint8_t *)s + i,
		    len - i < step ? len - i : step) == -1)
			return 0;
	return utf8_complete(&st);
}

START_TEST(stream_agrees_with_whole_check)
{
	static const char *const texts[] = {
		"plain", "\xc3\xa9", FFFD, "a\xf0\x9f\x98\x80z",
		"\xf4\x8f\xbf\xbf", "\xe0\xa0\x80\xed\x9f\xbf",
		"\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80",
		"\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\x80", "\xc3",
		"\xe2\x9c", "\xfe", "ok\xc3", "\xe2\x82\xac\x80",
		"\xf0\x9f\x98", "\xc3\xa9\xc3\x28",
	};
	struct utf8_stream st = { 0 };
	size_t i, cut, step;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		size_t len = strlen(texts[i]);
		int want = valid(texts[i]);

		for (cut = 0; cut <= len; cut++)
			for (step = 1; step <= 4; step++)
				ck_assert_msg(fed(texts[i], len, cut, step) ==
				    want, "text %zu cut %zu step %zu", i, cut,
				    step);
	}
	/* Refused once, refused for good. */
	ck_assert_int_eq(utf8_feed(&st, (const uint8_t *)"\xff", 1), -1);
	ck_assert_int_eq(utf8_feed(&st, (const uint8_t *)"a", 1), -1);
	ck_assert(!utf8_complete(&st));
	/* A bad byte is refused as it arrives, not at the end. */
	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(utf8_feed(&st, (const uint8_t *)"\xe0", 1), 0);
	ck_assert_int_eq(utf8_feed(&st, (const uint8_t *)"\x80", 1), -1);
}
END_TEST

START_TEST(scrubs_ill_formed_bytes)
{
	char	 buf[64];

	strcpy(buf, "ok \xc3\xa9 " FFFD);
	utf8_scrub(buf);
	ck_assert_str_eq(buf, "ok \xc3\xa9 " FFFD);
	strcpy(buf, "a\xffz\xc0\xaf\xed\xa0\x80!");
	utf8_scrub(buf);
	ck_assert_str_eq(buf, "a?z?" "?" "?" "?" "?!");
	/* A character cut by snprintf at the end of a buffer. */
	strcpy(buf, "path \xf0\x9f\x98");
	utf8_scrub(buf);
	ck_assert_str_eq(buf, "path ?" "?" "?");
}
END_TEST

START_TEST(counts_code_points)
{
	ck_assert_uint_eq(utf8_count("", 0), 0);
	ck_assert_uint_eq(utf8_count("abc", 3), 3);
	ck_assert_uint_eq(utf8_count("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9),
	    3);
}
END_TEST

/* Decode one window and compare everything the caller relies on. */
static void
expect(const char *in, size_t len, int at_end, const char *text,
    size_t textlen, size_t consumed, int errors)
{
	struct utf8_window w;

	ck_assert_int_eq(utf8_window_decode((const uint8_t *)in, len, at_end,
	    &w), 0);
	ck_assert_uint_eq(w.textlen, textlen);
	ck_assert_mem_eq(w.text, text, textlen);
	ck_assert_int_eq(w.text[w.textlen], '\0');
	ck_assert_uint_eq(w.consumed, consumed);
	ck_assert_int_eq(w.decoding_errors, errors);
	ck_assert(utf8_valid((const uint8_t *)w.text, w.textlen));
	utf8_window_free(&w);
}

#define EXPECT(in, at_end, text, consumed, errors)			\
	expect(in, sizeof(in) - 1, at_end, text, sizeof(text) - 1,	\
	    consumed, errors)

START_TEST(window_holds_back_split_characters)
{
	/* 2-byte U+00E9 split after its first byte. */
	EXPECT("ab\xc3", 0, "ab", 2, 0);
	EXPECT("\xc3\xa9z", 0, "\xc3\xa9z", 3, 0);
	/* 3-byte U+20AC split after one and after two bytes. */
	EXPECT("x\xe2", 0, "x", 1, 0);
	EXPECT("x\xe2\x82", 0, "x", 1, 0);
	EXPECT("\xe2\x82\xac", 0, "\xe2\x82\xac", 3, 0);
	/* 4-byte U+1F600 split after one, two and three bytes. */
	EXPECT("y\xf0", 0, "y", 1, 0);
	EXPECT("y\xf0\x9f", 0, "y", 1, 0);
	EXPECT("y\xf0\x9f\x98", 0, "y", 1, 0);
	/* Nothing but the start of a character: wait for the rest. */
	EXPECT("\xf0\x9f\x98", 0, "", 0, 0);
	EXPECT("", 0, "", 0, 0);
	EXPECT("", 1, "", 0, 0);
}
END_TEST

START_TEST(window_at_end_replaces_incomplete)
{
	EXPECT("ab\xc3", 1, "ab" FFFD, 3, 1);
	EXPECT("x\xe2\x82", 1, "x" FFFD, 3, 1);
	EXPECT("y\xf0\x9f\x98", 1, "y" FFFD, 4, 1);
	EXPECT("\xf0", 1, FFFD, 1, 1);
	/* Complete text at the end is untouched and not flagged. */
	EXPECT("done\n", 1, "done\n", 5, 0);
}
END_TEST

START_TEST(window_literal_replacement_is_not_an_error)
{
	EXPECT("a" FFFD "b", 0, "a" FFFD "b", 5, 0);
	EXPECT(FFFD, 1, FFFD, 3, 0);
}
END_TEST

START_TEST(window_replaces_maximal_subparts)
{
	EXPECT("a\xff" "b", 0, "a" FFFD "b", 3, 1);
	/* A truncated sequence followed by more text is invalid, not held. */
	EXPECT("\xe2\x82" "A", 0, FFFD "A", 3, 1);
	/* Unicode 15 table 3-8: one U+FFFD per maximal subpart. */
	EXPECT("\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64", 0,
	    "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d", 13, 1);
	/* Overlong, surrogate and out-of-range: every byte is its own. */
	EXPECT("\xc0\xaf", 0, FFFD FFFD, 2, 1);
	EXPECT("\xe0\x80\xaf", 0, FFFD FFFD FFFD, 3, 1);
	EXPECT("\xed\xa0\x80", 0, FFFD FFFD FFFD, 3, 1);
	EXPECT("\xf4\x90\x80\x80", 0, FFFD FFFD FFFD FFFD, 4, 1);
	/* Invalid bytes at the end are not a prefix of anything: consumed. */
	EXPECT("a\xc0", 0, "a" FFFD, 2, 1);
	EXPECT("a\xed\xa0", 0, "a" FFFD FFFD, 3, 1);
	EXPECT("a\xf4\x90", 0, "a" FFFD FFFD, 3, 1);
	/* U+0000 is a character like any other. */
	EXPECT("a\0b", 0, "a\0b", 3, 0);
}
END_TEST

/*
 * Paging invariant: reading a stream in windows of any size from
 * UTF8_SEQ_MAX up, advancing by what was consumed and passing at_end only
 * for the window that reaches the end, gives the same text and the same
 * error flag as decoding it in one piece.
 */
static void
page_through(const uint8_t *buf, size_t len)
{
	struct utf8_window whole, w;
	char	*joined;
	size_t	 win, pos, jlen;
	int	 errors;

	ck_assert_int_eq(utf8_window_decode(buf, len, 1, &whole), 0);
	ck_assert_uint_eq(whole.consumed, len);
	for (win = UTF8_SEQ_MAX; win <= 24; win++) {
		joined = malloc(len * 3 + 1);
		ck_assert_ptr_nonnull(joined);
		pos = jlen = 0;
		errors = 0;
		while (pos < len) {
			size_t n = len - pos < win ? len - pos : win;

			ck_assert_int_eq(utf8_window_decode(buf + pos, n,
			    pos + n == len, &w), 0);
			ck_assert_uint_gt(w.consumed, 0);
			ck_assert_uint_le(w.consumed, n);
			memcpy(joined + jlen, w.text, w.textlen);
			jlen += w.textlen;
			errors |= w.decoding_errors;
			pos += w.consumed;
			utf8_window_free(&w);
		}
		ck_assert_uint_eq(jlen, whole.textlen);
		ck_assert_mem_eq(joined, whole.text, jlen);
		ck_assert_int_eq(errors, whole.decoding_errors);
		free(joined);
	}
	utf8_window_free(&whole);
}

START_TEST(paging_matches_whole_decode)
{
	static const char text[] = "fib: 0, 1, 1, 2 \xe2\x82\xac \xc3\xa9t\xc3\xa9 "
	    "\xf0\x9f\x98\x80\xf0\x9f\x98\x80 " FFFD " end\n";
	uint8_t	 noise[512];
	unsigned seed = 12345;
	size_t	 i;

	page_through((const uint8_t *)text, sizeof(text) - 1);
	/* Random bytes biased towards UTF-8 lead and continuation bytes. */
	for (i = 0; i < sizeof(noise); i++) {
		seed = seed * 1103515245 + 12345;
		noise[i] = (seed >> 16) & 1 ? 0x80 | ((seed >> 8) & 0x7f) :
		    (uint8_t)(seed >> 20);
	}
	page_through(noise, sizeof(noise));
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("utf8");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, accepts_well_formed);
	tcase_add_test(tc, rejects_ill_formed);
	tcase_add_test(tc, stream_agrees_with_whole_check);
	tcase_add_test(tc, scrubs_ill_formed_bytes);
	tcase_add_test(tc, counts_code_points);
	tcase_add_test(tc, window_holds_back_split_characters);
	tcase_add_test(tc, window_at_end_replaces_incomplete);
	tcase_add_test(tc, window_literal_replacement_is_not_an_error);
	tcase_add_test(tc, window_replaces_maximal_subparts);
	tcase_add_test(tc, paging_matches_whole_decode);
	suite_add_tcase(s, tc);
	return check_run(s);
}
