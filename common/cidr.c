/*
 * IPv4 prefixes; see cidr.h.  Linked into every process that reads one.
 */
#include <stdio.h>

#include "cidr.h"

uint32_t
cidr_mask(uint8_t len)
{
	return len == 0 ? 0 : 0xffffffffu << (32 - len);
}

static int
parse_octets(const char *s, const char **end, uint32_t *out)
{
	uint32_t a = 0;

	for (int i = 0; i < 4; i++) {
		unsigned v = 0;
		int digits = 0;

		if (i > 0) {
			if (*s != '.')
				return -1;
			s++;
		}
		while (*s >= '0' && *s <= '9') {
			/* No leading zeros: "010" is octal to inet_aton. */
			if (digits == 1 && v == 0)
				return -1;
			v = v * 10 + (unsigned)(*s - '0');
			if (++digits > 3 || v > 255)
				return -1;
			s++;
		}
		if (digits == 0)
			return -1;
		a = a << 8 | v;
	}
	*end = s;
	*out = a;
	return 0;
}

int
cidr_parse(const char *s, int allow_host, struct cidr *out)
{
	const char *p;
	uint32_t a;
	unsigned len = 0;
	int digits = 0;

	if (s == NULL || parse_octets(s, &p, &a) == -1)
		return -1;
	if (*p == '\0') {
		if (!allow_host)
			return -1;
		out->addr = a;
		out->len = 32;
		return 0;
	}
	if (*p++ != '/')
		return -1;
	while (*p >= '0' && *p <= '9') {
		if (digits == 1 && len == 0)
			return -1;
		len = len * 10 + (unsigned)(*p - '0');
		if (++digits > 2 || len > 32)
			return -1;
		p++;
	}
	if (digits == 0 || *p != '\0' || (a & ~cidr_mask((uint8_t)len)) != 0)
		return -1;
	out->addr = a;
	out->len = (uint8_t)len;
	return 0;
}

int
cidr_overlap(const struct cidr *a, const struct cidr *b)
{
	uint8_t len = a->len < b->len ? a->len : b->len;

	return ((a->addr ^ b->addr) & cidr_mask(len)) == 0;
}

int
cidr_within(const struct cidr *inner, const struct cidr *outer)
{
	return inner->len >= outer->len &&
	    ((inner->addr ^ outer->addr) & cidr_mask(outer->len)) == 0;
}

void
cidr_format(const struct cidr *c, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u.%u/%u", c->addr >> 24,
	    (c->addr >> 16) & 0xff, (c->addr >> 8) & 0xff, c->addr & 0xff,
	    c->len);
}
