/*
 * Strict UTF-8 checking and the window decoder behind vm_job_output's text
 * mode.  Pure functions with no process state; used by mcpd, vmmd, vmproxy and
 * glink (and by jsonx for every JSON text it accepts): the one UTF-8 layer.
 */
#ifndef MCPVM_UTF8_H
#define MCPVM_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The longest UTF-8 sequence; a window this long always makes progress. */
#define UTF8_SEQ_MAX	4

/*
 * 1 when the bytes are well-formed UTF-8 (Unicode 15 table 3-7): no
 * overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF,
 * no truncated sequence.  U+0000 is valid.
 */
int	utf8_valid(const uint8_t *buf, size_t len);

/*
 * The same check over text that arrives in pieces (WebSocket text frames):
 * a character may be split between pieces.  utf8_feed returns 0 while
 * everything fed so far can still be valid, -1 (and forever after) once it
 * cannot; utf8_complete says whether it also ends on a character boundary.
 * Zero a struct utf8_stream to start.
 */
struct utf8_stream {
	uint8_t	 pend[UTF8_SEQ_MAX];	/* a character cut by the last piece */
	uint8_t	 npend;
	uint8_t	 bad;
};
int	utf8_feed(struct utf8_stream *, const uint8_t *buf, size_t len);
int	utf8_complete(const struct utf8_stream *);

/*
 * Replace each byte of every ill-formed sequence in a NUL-terminated string
 * with '?', in place, so that a message that quotes client input, or was
 * cut short by snprintf in the middle of a character, is still valid UTF-8
 * when it goes into a JSON reply.
 */
void	utf8_scrub(char *s);
/* The same for len bytes that may hold NULs. */
void	utf8_scrub_len(char *buf, size_t len);

/* Code points in a buffer already known to be valid UTF-8. */
size_t	utf8_count(const char *buf, size_t len);

/*
 * The result of decoding one window of a job's output stream.  text is
 * malloc'd, valid UTF-8 and NUL-terminated; it may contain U+0000 (a job
 * can print NUL bytes), so use textlen rather than strlen.
 */
struct utf8_window {
	char	*text;
	size_t	 textlen;	/* bytes in text, not counting the NUL */
	size_t	 consumed;	/* input bytes the text accounts for */
	int	 decoding_errors; /* 1 when any U+FFFD was substituted */
};

/*
 * Decode buf[0..len) as a window of a byte stream.
 *
 * - Valid sequences are copied unchanged, including a literal U+FFFD, which
 *   does not set decoding_errors.
 * - Each maximal invalid subpart (Unicode 15 section 3.9, the "substitution
 *   of maximal subparts" practice WHATWG's decoder also follows) becomes one
 *   U+FFFD and sets decoding_errors.
 * - A valid but incomplete sequence at the very end of the window is held
 *   back: it is not consumed, so the caller's cursor stops before it and the
 *   next window starts with it whole.  When at_end is set (the stream can
 *   never grow past this window: the job finished and the window reaches the
 *   end of the retained bytes, or the retention limit was hit) it becomes
 *   U+FFFD instead and sets decoding_errors.
 *
 * Progress: a held-back tail is at most UTF8_SEQ_MAX - 1 bytes, so a window
 * of at least UTF8_SEQ_MAX bytes always consumes at least one byte, and the
 * window starting at a held-back character holds it whole.  Only a window
 * shorter than UTF8_SEQ_MAX that is nothing but the start of one character
 * consumes 0 bytes; that is correct at the current end of a running stream
 * (the rest is not written yet), and vm_job_output's max_bytes has a minimum
 * of UTF8_SEQ_MAX so a page boundary can never cause it.
 *
 * Returns 0, or -1 with errno ENOMEM (out untouched) or EOVERFLOW.
 */
int	utf8_window_decode(const uint8_t *buf, size_t len, int at_end,
	    struct utf8_window *out);
void	utf8_window_free(struct utf8_window *);

#endif
