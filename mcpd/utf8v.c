/*
 * Strict incremental UTF-8 validation (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF) for mcpd: request bodies and
 * WebSocket text messages, which may split a character across frames.
 */
#include "utf8v.h"

int
utf8v_feed(struct utf8v *v, const uint8_t *buf, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		uint8_t b = buf[i];

		if (v->need > 0) {
			if (b < v->lo || b > v->hi)
				return -1;
			v->need--;
			v->lo = 0x80;
			v->hi = 0xbf;
			continue;
		}
		v->lo = 0x80;
		v->hi = 0xbf;
		if (b < 0x80)
			continue;
		else if (b >= 0xc2 && b <= 0xdf)
			v->need = 1;
		else if (b == 0xe0) {
			v->need = 2;
			v->lo = 0xa0;	/* no overlong forms */
		} else if ((b >= 0xe1 && b <= 0xec) || b == 0xee || b == 0xef)
			v->need = 2;
		else if (b == 0xed) {
			v->need = 2;
			v->hi = 0x9f;	/* no surrogates */
		} else if (b == 0xf0) {
			v->need = 3;
			v->lo = 0x90;
		} else if (b >= 0xf1 && b <= 0xf3)
			v->need = 3;
		else if (b == 0xf4) {
			v->need = 3;
			v->hi = 0x8f;	/* nothing above U+10FFFF */
		} else
			return -1;
	}
	return 0;
}

int
utf8v_complete(const struct utf8v *v)
{
	return v->need == 0;
}
