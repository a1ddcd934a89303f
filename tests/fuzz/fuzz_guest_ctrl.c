/*
 * libFuzzer target: channel 0 control message decoding - guestd's request
 * decoder (host -> guest) and the reply envelope decoder vmproxy uses on
 * what a guest sends (guest -> host).  Input: 1 byte of flags, then JSON.
 */
#include <stddef.h>
#include <stdint.h>

#include "guestd.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct glink_reply rep;
	struct json_object *o;
	struct req r;
	char err[256];
	int has_body;

	if (size < 1)
		return 0;
	has_body = data[0] & 1;
	data++;
	size--;
	req_decode(data, size, has_body ? data : NULL, has_body ? size : 0,
	    has_body, &r, err, sizeof(err));
	req_free(&r);
	if ((o = glink_json_parse(data, size, err, sizeof(err))) != NULL) {
		glink_reply_decode(o, &rep, err, sizeof(err));
		json_object_put(o);
	}
	return 0;
}
