/*
 * Strict UTF-8 validation and the output window decoder; see utf8.h.
 * Linked into every process through libcommon.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

enum seq {
	SEQ_OK,		/* a whole valid sequence */
	SEQ_INVALID,	/* a maximal invalid subpart */
	SEQ_INCOMPLETE	/* a valid prefix cut off by the end of the buffer */
};

/*
 * Classify the sequence at s and store its length in *n.  The ranges are
 * Unicode's table 3-7; the second byte carries the restrictions that rule out
 * overlongs (E0, F0), surrogates (ED) and values above U+10FFFF (F4).  An
 * invalid sequence is as long as the prefix that was still well-formed, with
 * a minimum of one byte, which is exactly a maximal subpart.
 */
static enum seq
classify(const uint8_t *s, size_t len, size_t *n)
{
	uint8_t	 c = s[0], lo = 0x80, hi = 0xbf;
	size_t	 need, i;

	if (c < 0x80) {
		*n = 1;
		return SEQ_OK;
	}
	if (c >= 0xc2 && c <= 0xdf)
		need = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		need = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		*n = 1;
		return SEQ_INVALID;
	}
	for (i = 1; i < need; i++) {
		if (i >= len) {
			*n = i;
			return SEQ_INCOMPLETE;
		}
		if (s[i] < lo || s[i] > hi) {
			*n = i;
			return SEQ_INVALID;
		}
		lo = 0x80;
		hi = 0xbf;
	}
	*n = need;
	return SEQ_OK;
}

/*
 * How far buf is valid UTF-8, and what stopped the scan there (SEQ_OK when
 * it reached the end).  The one loop behind utf8_valid and utf8_feed.
 */
static size_t
valid_prefix(const uint8_t *buf, size_t len, enum seq *stop)
{
	size_t	 i = 0, n;
	enum seq r;

	while (i < len) {
		/* The ASCII fast path matters: most JSON and output is ASCII. */
		if (len - i >= 8) {
			uint64_t v;

			memcpy(&v, buf + i, sizeof(v));
			if ((v & 0x8080808080808080ULL) == 0) {
				i += 8;
				continue;
			}
		}
		if (buf[i] < 0x80) {
			i++;
			continue;
		}
		if ((r = classify(buf + i, len - i, &n)) != SEQ_OK) {
			*stop = r;
			return i;
		}
		i += n;
	}
	*stop = SEQ_OK;
	return i;
}

int
utf8_valid(const uint8_t *buf, size_t len)
{
	enum seq stop;

	return valid_prefix(buf, len, &stop) == len;
}

int
utf8_feed(struct utf8_stream *st, const uint8_t *buf, size_t len)
{
	size_t	 i = 0, n, at;
	enum seq stop;

	if (st->bad)
		return -1;
	/* First the character the last piece ended inside of. */
	while (st->npend > 0 && i < len) {
		st->pend[st->npend++] = buf[i++];
		switch (classify(st->pend, st->npend, &n)) {
		case SEQ_OK:
			st->npend = 0;
			break;
		case SEQ_INVALID:
			st->bad = 1;
			return -1;
		case SEQ_INCOMPLETE:
			break;
		}
	}
	at = i + valid_prefix(buf + i, len - i, &stop);
	if (stop == SEQ_INVALID) {
		st->bad = 1;
		return -1;
	}
	if (stop == SEQ_INCOMPLETE) {
		/* A valid start cut by the end: under UTF8_SEQ_MAX bytes. */
		st->npend = len - at;
		memcpy(st->pend, buf + at, st->npend);
	}
	return 0;
}

int
utf8_complete(const struct utf8_stream *st)
{
	return !st->bad && st->npend == 0;
}

void
utf8_scrub(char *s)
{
	utf8_scrub_len(s, strlen(s));
}

void
utf8_scrub_len(char *buf, size_t len)
{
	uint8_t	*p = (uint8_t *)buf;
	size_t	 i = 0, n;

	while (i < len) {
		if (classify(p + i, len - i, &n) != SEQ_OK)
			memset(p + i, '?', n);
		i += n;
	}
}

size_t
utf8_count(const char *buf, size_t len)
{
	size_t	 i, count = 0;

	for (i = 0; i < len; i++)
		if (((uint8_t)buf[i] & 0xc0) != 0x80)
			count++;
	return count;
}

int
utf8_window_decode(const uint8_t *buf, size_t len, int at_end,
    struct utf8_window *out)
{
	static const char repl[] = "\xef\xbf\xbd";
	char	*text;
	size_t	 i = 0, o = 0, n;
	int	 errors = 0;

	/* Every input byte yields at most one 3-byte U+FFFD. */
	if (len > (SIZE_MAX - 1) / 3) {
		errno = EOVERFLOW;
		return -1;
	}
	if ((text = malloc(len * 3 + 1)) == NULL)
		return -1;
	while (i < len) {
		switch (classify(buf + i, len - i, &n)) {
		case SEQ_OK:
			memcpy(text + o, buf + i, n);
			o += n;
			break;
		case SEQ_INCOMPLETE:
			if (!at_end)
				goto done;
			/* FALLTHROUGH */
		case SEQ_INVALID:
			memcpy(text + o, repl, 3);
			o += 3;
			errors = 1;
			break;
		}
		i += n;
	}
 done:
	text[o] = '\0';
	out->text = text;
	out->textlen = o;
	out->consumed = i;
	out->decoding_errors = errors;
	return 0;
}

void
utf8_window_free(struct utf8_window *w)
{
	free(w->text);
	w->text = NULL;
	w->textlen = 0;
}
