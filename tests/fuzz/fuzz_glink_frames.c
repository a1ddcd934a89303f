/*
 * libFuzzer target: the link frame decoder (common/glink) as either end,
 * fed hostile bytes in arbitrary pieces, with a receiver that answers
 * OPENs, consumes data and sends on channels the way guestd does.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "glink.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int
on_frame(struct glink *l, const struct glink_frame *f, void *arg)
{
	switch (f->type) {
	case GLINK_OPEN:
		if (f->channel & 1)
			glink_send_open_ok(l, f->channel);
		else
			glink_send_open_fail(l, f->channel, "refused");
		break;
	case GLINK_DATA:
		glink_consumed(l, f->channel, f->len);
		glink_send_data(l, f->channel, f->data, f->len);
		break;
	case GLINK_EOF:
		glink_send_eof(l, f->channel);
		break;
	case GLINK_CTRL:
		glink_send_ctrl(l, "{}", 2, f->body, f->body_len);
		break;
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct glink *l;
	const uint8_t *p;
	size_t step, n;

	if (size < 2)
		return 0;
	l = glink_new(data[0] & 1 ? GLINK_ROLE_HOST : GLINK_ROLE_GUEST);
	if (data[0] & 2)
		glink_send_open(l, 1, 80);	/* a channel to answer */
	step = (size_t)data[1] + 1;
	data += 2;
	size -= 2;
	while (size > 0) {
		n = size < step ? size : step;
		if (glink_feed(l, data, n, on_frame, NULL) == -1)
			break;
		data += n;
		size -= n;
		/* Drain output now and then, as a writer would. */
		glink_out_peek(l, &p, &n);
		glink_out_consume(l, n / 2 + 1);
	}
	glink_free(l);
	return 0;
}
