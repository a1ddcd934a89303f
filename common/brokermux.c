/*
 * The job broker pipe's frame and preamble decoders (brokermux.h).  Both
 * read bytes from a peer that may be hostile (a controller, a guest), so
 * every length is checked before it is used.  Fuzzed (fuzz_broker_mux).
 */
#include <stdio.h>
#include <string.h>

#include "b64.h"
#include "brokermux.h"

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static void
put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = (v >> 16) & 0xff;
	p[2] = (v >> 8) & 0xff;
	p[3] = v & 0xff;
}

void
bmux_init(struct bmux_dec *d, int from_controller)
{
	d->from_controller = from_controller;
	d->hlen = 0;
	d->plen = 0;
	d->err[0] = '\0';
}

size_t
bmux_encode(uint8_t out[BMUX_HDR_MAX], uint8_t type, uint32_t id,
    uint32_t len)
{
	out[0] = type;
	put_be32(out + 1, id);
	if (type != BMUX_DATA)
		return 5;
	put_be32(out + 5, len);
	return 9;
}

static size_t
hdr_len(uint8_t type)
{
	return type == BMUX_DATA ? 9 : 5;
}

int
bmux_feed(struct bmux_dec *d, const void *buf, size_t n, bmux_cb cb,
    void *arg)
{
	const uint8_t *p = buf;
	struct bmux_frame f;
	size_t take, need;
	uint32_t len;

	while (n > 0) {
		if (d->hlen == 0) {
			uint8_t t = p[0];

			if (t != BMUX_DATA && t != BMUX_CLOSE &&
			    (t != BMUX_OPEN || d->from_controller)) {
				snprintf(d->err, sizeof(d->err),
				    "frame type %u is not allowed", t);
				return -1;
			}
		}
		need = hdr_len(d->hdr[0]);
		if (d->hlen == 0)
			need = hdr_len(p[0]);
		if (d->hlen < need) {
			take = need - d->hlen;
			if (take > n)
				take = n;
			memcpy(d->hdr + d->hlen, p, take);
			d->hlen += take;
			p += take;
			n -= take;
			if (d->hlen < need)
				break;
			if (be32(d->hdr + 1) == 0) {
				snprintf(d->err, sizeof(d->err),
				    "conn_id 0 is not allowed");
				return -1;
			}
			if (d->hdr[0] == BMUX_DATA &&
			    be32(d->hdr + 5) > BMUX_MAX_DATA) {
				snprintf(d->err, sizeof(d->err),
				    "data frame of %u bytes exceeds %u",
				    be32(d->hdr + 5), BMUX_MAX_DATA);
				return -1;
			}
			d->plen = 0;
		}
		len = d->hdr[0] == BMUX_DATA ? be32(d->hdr + 5) : 0;
		take = len - d->plen;
		if (take > n)
			take = n;
		if (take > 0) {
			memcpy(d->payload + d->plen, p, take);
			d->plen += (uint32_t)take;
			p += take;
			n -= take;
		}
		if (d->plen < len)
			break;
		f.type = d->hdr[0];
		f.conn_id = be32(d->hdr + 1);
		f.data = d->payload;
		f.len = len;
		d->hlen = 0;
		d->plen = 0;
		if (cb(&f, arg) == -1) {
			if (d->err[0] == '\0')
				snprintf(d->err, sizeof(d->err),
				    "stopped by the receiver");
			return -1;
		}
	}
	return 0;
}

int
broker_preamble_parse(const uint8_t *p, size_t n, struct broker_preamble *pr)
{
	size_t i, idlen;

	if (n > BROKER_PREAMBLE_MAX)
		n = BROKER_PREAMBLE_MAX;
	/* The job id: [A-Za-z0-9_-]{1,GUEST_JOB_ID_MAX}, then a space. */
	for (i = 0; i < n && p[i] != ' '; i++) {
		uint8_t c = p[i];

		if (i >= GUEST_JOB_ID_MAX || !((c >= 'a' && c <= 'z') ||
		    (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '-'))
			return -1;
	}
	if (i == n)
		return 0;
	if (i == 0)
		return -1;
	idlen = i++;
	for (; i < n && i < idlen + 1 + BROKER_SECRET_HEX; i++)
		if (hex_lower_digit(p[i]) == -1)
			return -1;
	if (i == n)
		return 0;
	if (p[i] != '\n')
		return -1;
	memcpy(pr->job_id, p, idlen);
	pr->job_id[idlen] = '\0';
	for (i = 0; i < BROKER_SECRET_HEX / 2; i++)
		pr->secret[i] = (uint8_t)(hex_lower_digit(p[idlen + 1 + 2 * i]) << 4 |
		    hex_lower_digit(p[idlen + 2 + 2 * i]));
	return (int)(idlen + 1 + BROKER_SECRET_HEX + 1);
}
