/*
 * libFuzzer target: job output bytes, which a guest program controls
 * entirely, through the window decoder.  The first byte picks at_end and a
 * page size; the rest is the stream.  Invariants: the text is valid UTF-8,
 * consumed <= len, decoding is deterministic, valid input comes back
 * unchanged, paging through the stream gives the same text as decoding
 * it whole, and the incremental check (utf8_feed) agrees with utf8_valid.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
decode(const uint8_t *buf, size_t len, int at_end, struct utf8_window *w)
{
	if (utf8_window_decode(buf, len, at_end, w) == -1)
		abort();
	if (w->consumed > len || w->text[w->textlen] != '\0' ||
	    !utf8_valid((const uint8_t *)w->text, w->textlen))
		abort();
	/* Progress: only a short window that is all held-back can stall. */
	if (len > 0 && w->consumed == 0 && (at_end || len >= UTF8_SEQ_MAX))
		abort();
	if (at_end && w->consumed != len)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct utf8_window a, b, whole, page;
	const uint8_t *buf;
	char	*joined;
	size_t	 len, win, pos, jlen, n;
	int	 at_end, errors;

	if (size == 0)
		return 0;
	at_end = data[0] & 1;
	win = UTF8_SEQ_MAX + (data[0] >> 1) % 29;
	buf = data + 1;
	len = size - 1;

	decode(buf, len, at_end, &a);
	decode(buf, len, at_end, &b);
	if (a.textlen != b.textlen || a.consumed != b.consumed ||
	    a.decoding_errors != b.decoding_errors ||
	    memcmp(a.text, b.text, a.textlen) != 0)
		abort();
	if (utf8_valid(buf, len) && (a.decoding_errors ||
	    a.textlen != len || a.consumed != len ||
	    memcmp(a.text, buf, len) != 0))
		abort();
	utf8_window_free(&a);
	utf8_window_free(&b);

	/* Fed in pieces (WebSocket frames), the same verdict as whole. */
	{
		struct utf8_stream st = { 0 };
		size_t piece = 1 + (data[0] >> 1) % 7;
		int ok = 1;

		for (pos = 0; pos < len && ok; pos += piece)
			ok = utf8_feed(&st, buf + pos, len - pos < piece ?
			    len - pos : piece) == 0;
		if ((ok && utf8_complete(&st)) != utf8_valid(buf, len))
			abort();
	}

	decode(buf, len, 1, &whole);
	if ((joined = malloc(len * 3 + 1)) == NULL)
		abort();
	pos = jlen = 0;
	errors = 0;
	while (pos < len) {
		n = len - pos < win ? len - pos : win;
		decode(buf + pos, n, pos + n == len, &page);
		memcpy(joined + jlen, page.text, page.textlen);
		jlen += page.textlen;
		errors |= page.decoding_errors;
		pos += page.consumed;
		utf8_window_free(&page);
	}
	if (jlen != whole.textlen || memcmp(joined, whole.text, jlen) != 0 ||
	    errors != whole.decoding_errors)
		abort();
	free(joined);
	utf8_window_free(&whole);

	/* Scrubbing leaves the length alone and the result valid. */
	if ((joined = malloc(len + 1)) == NULL)
		abort();
	memcpy(joined, buf, len);
	joined[len] = '\0';
	n = strlen(joined);
	utf8_scrub(joined);
	if (strlen(joined) != n || !utf8_valid((uint8_t *)joined, n))
		abort();
	free(joined);
	return 0;
}
