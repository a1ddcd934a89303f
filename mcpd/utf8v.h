/*
 * Strict incremental UTF-8 validation for mcpd; see utf8v.c.
 */
#ifndef MCPD_UTF8V_H
#define MCPD_UTF8V_H

#include <stddef.h>
#include <stdint.h>

struct utf8v {
	uint8_t		need;	/* continuation bytes still expected */
	uint8_t		lo, hi;	/* allowed range of the next one */
};

#define UTF8V_INIT	{ 0, 0x80, 0xbf }

/* 0 if buf continues valid UTF-8, -1 at the first invalid byte. */
int	utf8v_feed(struct utf8v *, const uint8_t *buf, size_t len);
/* 1 if the input so far ends on a character boundary. */
int	utf8v_complete(const struct utf8v *);

#endif
