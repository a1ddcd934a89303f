/*
 * DNS message parsing for netd's forwarder; see dnsmsg.h.  Reads bytes a
 * guest and an upstream resolver chose.
 */
#include <string.h>

#include "dnsmsg.h"

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/*
 * The name at *off into out (text, lowercase, up to DNSNAME_MAX + 1
 * bytes) following at most DNSMSG_MAX_PTRS compression pointers, each
 * strictly backwards; *off moves past the name as it sits at *off.
 * 0, or -1.
 */
static int
get_name(const uint8_t *m, size_t len, size_t *off, int ptrs_ok, char *out)
{
	size_t p = *off, o = 0, after = 0;
	unsigned nptrs = 0;
	int jumped = 0;

	for (;;) {
		uint8_t l;

		if (p >= len)
			return -1;
		l = m[p];
		if ((l & 0xc0) == 0xc0) {
			size_t to;

			if (!ptrs_ok || p + 1 >= len ||
			    ++nptrs > DNSMSG_MAX_PTRS)
				return -1;
			to = (size_t)(l & 0x3f) << 8 | m[p + 1];
			if (to >= p)	/* only backwards: no loops */
				return -1;
			if (!jumped)
				after = p + 2;
			jumped = 1;
			p = to;
			continue;
		}
		if ((l & 0xc0) != 0)
			return -1;
		if (l == 0) {
			p++;
			break;
		}
		if (p + 1 + l > len || o + l + 1 > DNSNAME_MAX + 1)
			return -1;
		if (o > 0)
			out[o++] = '.';
		for (size_t i = 0; i < l; i++) {
			uint8_t c = m[p + 1 + i];

			if (c >= 'A' && c <= 'Z')
				c = (uint8_t)(c - 'A' + 'a');
			/* Kept as is; dnsname_check refuses what is odd. */
			out[o++] = c == '\0' || c == '.' ? '?' : (char)c;
		}
		p += 1 + (size_t)l;
	}
	out[o] = '\0';
	*off = jumped ? after : p;
	return 0;
}

int
dnsmsg_query(const uint8_t *m, size_t len, struct dnsmsg_q *q)
{
	char why[128], tmp[DNSNAME_MAX + 1];
	size_t off = 12;

	memset(q, 0, sizeof(*q));
	if (len < 12 || len > DNSMSG_MAX)
		return -1;
	if ((m[2] & 0x80) != 0 || (m[2] & 0x78) != 0 ||
	    get16(m + 4) != 1 || get16(m + 6) != 0 || get16(m + 8) != 0)
		return -1;
	if (get_name(m, len, &off, 0, q->name) == -1 || off + 4 > len)
		return -1;
	q->qtype = get16(m + off);
	q->qclass = get16(m + off + 2);
	q->end = off + 4;
	q->name_ok = dnsname_check(q->name, strlen(q->name), 0, tmp, why,
	    sizeof(why)) == 0;
	return 0;
}

int
dnsmsg_answer(const uint8_t *m, size_t len, uint16_t id,
    const struct dnsmsg_q *q, uint32_t *addrs, uint32_t *ttls)
{
	char name[DNSNAME_MAX + 2];
	size_t off = 12;
	unsigned an;
	int n = 0;

	if (len < 12 || len > DNSMSG_TCP_MAX || get16(m) != id ||
	    (m[2] & 0x80) == 0 || (m[2] & 0x78) != 0 || get16(m + 4) != 1)
		return -1;
	an = get16(m + 6);
	if (an > DNSMSG_MAX_RRS)
		return -1;
	if (get_name(m, len, &off, 1, name) == -1 || off + 4 > len ||
	    strcmp(name, q->name) != 0 || get16(m + off) != q->qtype ||
	    get16(m + off + 2) != q->qclass)
		return -1;
	off += 4;
	for (unsigned i = 0; i < an; i++) {
		uint16_t type, class, rdlen;
		uint32_t ttl;

		if (get_name(m, len, &off, 1, name) == -1 || off + 10 > len)
			return -1;
		type = get16(m + off);
		class = get16(m + off + 2);
		ttl = get32(m + off + 4);
		rdlen = get16(m + off + 8);
		off += 10;
		if (off + rdlen > len)
			return -1;
		if (type == 1 && class == 1) {
			if (rdlen != 4)
				return -1;
			if (n < DNSMSG_MAX_ADDRS) {
				addrs[n] = get32(m + off);
				/* RFC 2181: a TTL over 2^31-1 reads as 0. */
				ttls[n] = ttl > 0x7fffffffu ? 0 : ttl;
				n++;
			}
		}
		off += rdlen;
	}
	return n;
}

long
dnsmsg_tcp_frame(const uint8_t *m, size_t have, size_t max)
{
	size_t len;

	if (have < 2)
		return 0;
	len = get16(m);
	if (len < 12 || len > max)
		return -1;
	return have >= 2 + len ? (long)len : 0;
}

size_t
dnsmsg_refuse(uint8_t *m, const struct dnsmsg_q *q, int rcode)
{
	m[2] = (uint8_t)(0x80 | (m[2] & 0x01));	/* QR, keep RD */
	m[3] = (uint8_t)(0x80 | (rcode & 0x0f));	/* RA */
	m[6] = m[7] = m[8] = m[9] = m[10] = m[11] = 0;
	return q->end;
}
