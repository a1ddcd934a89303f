/*
 * libFuzzer target: the job broker pipe's frame decoder (controller bytes
 * from a WebSocket, either direction's rules) and the guest's preamble.
 * Invariants: a frame handed out obeys the rules (nonzero id, data within
 * BMUX_MAX_DATA, no open from the controller), and feeding the same bytes
 * in one piece or byte by byte gives the same frames and the same verdict.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brokermux.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

struct sum {
	int		 from_controller;
	uint64_t	 n, bytes, hash;
};

static int
check(const struct bmux_frame *f, void *arg)
{
	struct sum *s = arg;
	uint32_t i;

	if (f->conn_id == 0 || f->len > BMUX_MAX_DATA ||
	    (f->type == BMUX_OPEN && s->from_controller) ||
	    (f->type != BMUX_DATA && f->len != 0))
		abort();
	s->n++;
	s->bytes += f->len;
	s->hash = s->hash * 31 + f->type + f->conn_id;
	for (i = 0; i < f->len; i++)
		s->hash = s->hash * 131 + f->data[i];
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct bmux_dec d1, d2;
	struct broker_preamble pr;
	struct sum a, b;
	int ra, rb, fc, r;
	size_t i;

	for (fc = 0; fc < 2; fc++) {
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		a.from_controller = b.from_controller = fc;
		bmux_init(&d1, fc);
		bmux_init(&d2, fc);
		ra = bmux_feed(&d1, data, size, check, &a);
		rb = 0;
		for (i = 0; i < size && rb == 0; i++)
			rb = bmux_feed(&d2, data + i, 1, check, &b);
		if (ra != rb || a.n != b.n || a.bytes != b.bytes ||
		    a.hash != b.hash)
			abort();
	}
	r = broker_preamble_parse(data, size, &pr);
	if (r > 0 && ((size_t)r > size || (size_t)r > BROKER_PREAMBLE_MAX ||
	    data[r - 1] != '\n' || strlen(pr.job_id) == 0 ||
	    memcmp(pr.job_id, data, strlen(pr.job_id)) != 0))
		abort();
	/* A complete preamble stays complete with more bytes behind it. */
	if (r == 0 && size > BROKER_PREAMBLE_MAX)
		abort();
	return 0;
}
