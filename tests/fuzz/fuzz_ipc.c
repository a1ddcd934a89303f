/*
 * libFuzzer target for the IPC frame reader and message check: the bytes
 * are a stream as a peer would send it, cut into reads of varying sizes,
 * with descriptors "arriving" where a control byte says so.  A text-only
 * type (IPC_RULE_TEXT) must accept exactly what the parsing check accepts,
 * and jsonx_member_span must stay inside the payload and find a value
 * that parses on its own; the spans the check recorded must give the same
 * answer as scanning again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc.h"
#include "jsonx.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const struct ipc_rule rules[] = {
	{ IPC_TEST_ECHO, 0 },
	{ IPC_TEST_FD, IPC_RULE_FD },
	{ IPC_TEST_ECHO_RESULT, IPC_RULE_TEXT },
};
static const struct ipc_policy policy = { "fuzz", rules, 3 };

static void
text_frame(const struct ipc_frame *f, int accepted,
    const struct jsonx_members *mem)
{
	struct json_object *o, *v;
	struct jsonx_err jerr;
	size_t off, len, moff, mlen;
	int found;

	o = f->len > 0 ? jsonx_parse_object(f->payload, f->len, 32, &jerr) :
	    NULL;
	/* The check accepts what the parse does (at IPC's depth, 32). */
	if ((o != NULL) != accepted)
		abort();
	if (o == NULL)
		return;
	found = jsonx_member_span(f->payload, f->len, "result", &off, &len);
	if (jsonx_members_find(mem, f->payload, f->len, "result", &moff,
	    &mlen) != found || (found && (moff != off || mlen != len)))
		abort();
	if (found) {
		if (off + len > f->len || len == 0)
			abort();
		v = jsonx_parse(f->payload + off, len, 32, &jerr);
		/* null is the one value jsonx_parse refuses at the top. */
		if (v == NULL && !(len == 4 && memcmp(f->payload + off,
		    "null", 4) == 0))
			abort();
		json_object_put(v);
	}
	json_object_put(o);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ipc_reader r;
	struct ipc_frame f;
	const char *err;
	size_t off = 0;
	uint8_t ctl = 0;

	if (size < 1)
		return 0;
	/* First byte: read sizes and where descriptors arrive. */
	ctl = data[0];
	off = 1;
	ipc_reader_init(&r);
	/* Half the inputs read as the daemons do, several frames at once. */
	if (ctl & 0x40)
		ipc_reader_set_bulk(&r);
	while (off < size) {
		size_t want, n;
		uint8_t *dst = ipc_reader_space(&r, &want);
		int rc;

		if (dst == NULL || want == 0)
			abort();

		n = (size_t)(ctl & 0x0f) + 1;
		if (n > want)
			n = want;
		if (n > size - off)
			n = size - off;
		if ((ctl & 0x30) == 0x30 && (off & 7) == 0) {
			/* Attach a descriptor at this point. */
			if (ipc_reader_add_fd(&r, dup(STDIN_FILENO), &err) ==
			    -1)
				break;
		}
		memcpy(dst, data + off, n);
		off += n;
		rc = ipc_reader_commit(&r, n, &f, &err);
		if (rc == -1)
			break;
		for (; rc == 1; rc = ipc_reader_next(&r, &f, &err)) {
			struct json_object *body;
			struct jsonx_members mem;
			char msg[256];

			int ok = ipc_frame_check(&f, &policy, &body, &mem,
			    msg, sizeof(msg)) == 0;

			if (ok)
				json_object_put(body);
			if (f.type == IPC_TEST_ECHO_RESULT &&
			    !(f.flags & IPC_FLAG_FD))
				text_frame(&f, ok, &mem);
			if (f.fd != -1)
				close(f.fd);
		}
		if (rc == -1)
			break;
		ctl = (uint8_t)(ctl * 33 + 7);
	}
	ipc_reader_reset(&r);
	return 0;
}
