/*
 * libFuzzer target for vmproxy's translation of guest replies
 * (vmproxy/guestreply.c), the host's only reader of guest JSON.  An input is
 * a call and a reply as the link delivers them:
 *
 *   byte 0      the operation (enum guest_op, modulo GOP_COUNT)
 *   byte 1      bit 0: encoding base64; bit 1: offset at its bound;
 *               bit 2: the call asked about job "j1"; bit 3: identity
 *               asked for boot id FUZZ_BOOT_ID
 *   bytes 2-13  cursor.stdout, cursor.stderr, offset: 32-bit, little end
 *   bytes 14-17 max_bytes
 *   then        the control frame's JSON, up to a NUL, and the body after
 *
 * The reply goes through the link's JSON parser and envelope decoder
 * first, as in vmproxy.  Whatever the translation returns must be a
 * result tools.json accepts, a mapped error, or a reason; anything else
 * aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "glink.h"
#include "guest.h"
#include "guestreply.h"
#include "schema.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define HDR	18
#define FUZZ_BOOT_ID	"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"

static const char *const public_codes[] = { "invalid_argument",
	"not_found", "conflict", "quota_exceeded", "internal", NULL };

static uint32_t
le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

/* The tool whose result this operation's reply becomes unchanged. */
static const char *
tool_of(enum guest_op op)
{
	switch (op) {
	case GOP_JOB_OUTPUT:
		return "vm_job_output";
	case GOP_FILE_READ:
		return "vm_read_file";
	case GOP_FILE_WRITE:
		return "vm_write_file";
	default:
		return NULL;
	}
}

static void
check_status(struct json_object *st)
{
	static const char *const states[] = { "running", "completed",
	    "failed", "cancelled", "timed_out", NULL };
	struct json_object *v;
	const char *s;
	size_t i;

	if (!json_object_object_get_ex(st, "state", &v) ||
	    !json_object_is_type(v, json_type_string))
		abort();
	s = json_object_get_string(v);
	for (i = 0; states[i] != NULL; i++)
		if (strcmp(states[i], s) == 0)
			break;
	if (states[i] == NULL)
		abort();
	if (!json_object_object_get_ex(st, "exit_code", &v))
		abort();
	if (v != NULL && (json_object_get_int64(v) < 0 ||
	    json_object_get_int64(v) > 255 || strcmp(s, "running") == 0))
		abort();
	/* "completed" is exit code 0 and nothing else. */
	if (strcmp(s, "completed") == 0 && (v == NULL ||
	    json_object_get_int64(v) != 0))
		abort();
}

static void
check_result(const struct guest_call *c, struct json_object *res)
{
	const char *tool = tool_of(c->op);
	struct json_object *v, *list;
	char err[256];

	if (res == NULL || !json_object_is_type(res, json_type_object))
		abort();
	if (tool != NULL && tool_validate_output(tools_find(tool), res, err,
	    sizeof(err)) != 0)
		abort();
	switch (c->op) {
	case GOP_EXEC:
	case GOP_JOB_STATUS:
	case GOP_JOB_CANCEL:
		check_status(res);
		break;
	case GOP_JOBS:
		if (!json_object_object_get_ex(res, "jobs", &list) ||
		    json_object_array_length(list) > GUEST_MAX_JOBS)
			abort();
		for (size_t i = 0; i < json_object_array_length(list); i++)
			check_status(json_object_array_get_idx(list, i));
		break;
	case GOP_JOB_OUTPUT:
		/* A cursor only moves forward, and text is always UTF-8. */
		if (json_object_get_int64(json_object_object_get(
		    json_object_object_get(res, "next_cursor"), "stdout")) <
		    c->cursor_stdout ||
		    json_object_get_int64(json_object_object_get(
		    json_object_object_get(res, "next_cursor"), "stderr")) <
		    c->cursor_stderr)
			abort();
		if (!c->base64 && json_object_object_get_ex(res, "stdout", &v) &&
		    !utf8_valid((const uint8_t *)json_object_get_string(v),
		    (size_t)json_object_get_string_len(v)))
			abort();
		break;
	case GOP_FILE_READ:
		if (json_object_get_int64(json_object_object_get(res,
		    "bytes")) > c->max_bytes)
			abort();
		break;
	case GOP_IDENTITY:
		/* Only ever the boot id that was asked for. */
		if (c->boot_id == NULL || !json_object_object_get_ex(res,
		    "boot_id", &v) || strcmp(json_object_get_string(v),
		    c->boot_id) != 0 || json_object_object_length(res) != 1)
			abort();
		break;
	default:
		break;
	}
	(void)json_object_to_json_string(res);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct guest_call c;
	struct glink_reply rep;
	struct guestreply gr;
	struct json_object *r, *info;
	const uint8_t *text, *nul, *body;
	size_t text_len, body_len;
	char err[256];

	if (!ready) {
		if (tools_init(err, sizeof(err)) == -1)
			abort();
		ready = 1;
	}
	if (size < HDR || size > HDR + GLINK_MAX_PAYLOAD)
		return 0;
	guest_call_init(&c, (enum guest_op)(data[0] % GOP_COUNT));
	c.base64 = data[1] & 1;
	c.cursor_stdout = le32(data + 2) % (GUEST_CURSOR_MAX + 1);
	c.cursor_stderr = le32(data + 6) % (GUEST_CURSOR_MAX + 1);
	c.offset = (data[1] & 2) ? GUEST_OFFSET_MAX : le32(data + 10);
	c.max_bytes = 1 + le32(data + 14) % GUEST_MAX_FILE;
	c.path = "fuzz/path";
	if (data[1] & 4)
		c.job_id = "j1";
	if (data[1] & 8)
		c.boot_id = FUZZ_BOOT_ID;
	text = data + HDR;
	if ((nul = memchr(text, '\0', size - HDR)) != NULL) {
		text_len = (size_t)(nul - text);
		body = nul + 1;
		body_len = size - HDR - text_len - 1;
	} else {
		text_len = size - HDR;
		body = NULL;
		body_len = 0;
	}
	if ((r = glink_json_parse(text, text_len, err, sizeof(err))) == NULL)
		return 0;
	if (glink_reply_decode(r, &rep, err, sizeof(err)) == -1 ||
	    rep.event != NULL) {
		json_object_put(r);
		return 0;
	}
	switch (guestreply_translate(&c, r, &rep, body, body_len, &gr)) {
	case GUESTREPLY_RESULT:
		check_result(&c, gr.result);
		json_object_put(gr.result);
		break;
	case GUESTREPLY_ERROR:
		if (gr.result != NULL || gr.code == NULL || gr.message == NULL)
			abort();
		for (size_t i = 0; public_codes[i] != NULL; i++)
			if (strcmp(public_codes[i], gr.code) == 0)
				goto mapped;
		abort();
 mapped:
		break;
	case GUESTREPLY_BROKEN:
		if (gr.result != NULL || gr.why[0] == '\0')
			abort();
		break;
	default:
		abort();
	}
	/* The same reply, taken as the answer to our hello. */
	if (guestreply_hello(r, &rep, &info, err, sizeof(err)) == 0) {
		if (info == NULL)
			abort();
		json_object_put(info);
	} else if (info != NULL || err[0] == '\0')
		abort();
	json_object_put(r);
	return 0;
}
