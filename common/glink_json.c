/*
 * Channel 0's JSON for the link (see glink.h): the strict parse of a
 * control message and bounded, type-checked getters, and the envelope of
 * a guest -> host message.  The guest is hostile to vmproxy and vmproxy's
 * requests are checked by guestd the same way.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "glink.h"
#include "jsonx.h"
#include "utf8.h"

/* Strictly, by common/jsonx like every other peer's JSON. */
struct json_object *
glink_json_parse(const void *buf, size_t n, char *err, size_t errlen)
{
	struct jsonx_err jerr;
	struct json_object *o;

	if (n == 0 || n > GLINK_MAX_PAYLOAD) {
		snprintf(err, errlen, "control message of %zu bytes", n);
		return NULL;
	}
	if ((o = jsonx_parse(buf, n, GLINK_JSON_DEPTH, &jerr)) == NULL) {
		snprintf(err, errlen, "control message is not JSON: %s",
		    jerr.msg);
		return NULL;
	}
	if (!json_object_is_type(o, json_type_object)) {
		snprintf(err, errlen, "control message is not a JSON object");
		json_object_put(o);
		return NULL;
	}
	return o;
}

static int
field(struct json_object *o, const char *key, int required,
    enum json_type type, const char *tname, struct json_object **v, char *err,
    size_t errlen)
{
	if (!json_object_object_get_ex(o, key, v) || *v == NULL) {
		if (required) {
			snprintf(err, errlen, "missing field \"%s\"", key);
			return -1;
		}
		return 0;
	}
	if (!json_object_is_type(*v, type)) {
		snprintf(err, errlen, "field \"%s\" must be %s", key, tname);
		return -1;
	}
	return 1;
}

int
glink_json_str(struct json_object *o, const char *key, int required,
    size_t max, const char **out, char *err, size_t errlen)
{
	struct json_object *v;
	size_t n;
	int rc;

	if ((rc = field(o, key, required, json_type_string, "a string", &v,
	    err, errlen)) != 1)
		return rc;
	n = (size_t)json_object_get_string_len(v);
	if (n > max) {
		snprintf(err, errlen, "field \"%s\" exceeds %zu bytes", key,
		    max);
		return -1;
	}
	*out = json_object_get_string(v);
	if (memchr(*out, '\0', n) != NULL ||
	    !utf8_valid((const uint8_t *)*out, n)) {
		snprintf(err, errlen, "field \"%s\" is not valid UTF-8 text",
		    key);
		return -1;
	}
	return 1;
}

int
glink_json_int(struct json_object *o, const char *key, int required,
    int64_t min, int64_t max, int64_t *out, char *err, size_t errlen)
{
	struct json_object *v;
	int64_t x;
	int rc;

	if ((rc = field(o, key, required, json_type_int, "an integer", &v,
	    err, errlen)) != 1)
		return rc;
	errno = 0;
	x = json_object_get_int64(v);
	/* json-c clamps out-of-range numbers; an unsigned one is too big. */
	if (errno != 0 || x < min || x > max ||
	    (json_object_get_uint64(v) > (uint64_t)INT64_MAX)) {
		snprintf(err, errlen, "field \"%s\" out of range", key);
		return -1;
	}
	*out = x;
	return 1;
}

int
glink_json_bool(struct json_object *o, const char *key, int required,
    int *out, char *err, size_t errlen)
{
	struct json_object *v;
	int rc;

	if ((rc = field(o, key, required, json_type_boolean, "a boolean", &v,
	    err, errlen)) != 1)
		return rc;
	*out = json_object_get_boolean(v) ? 1 : 0;
	return 1;
}

int
glink_json_obj(struct json_object *o, const char *key, int required,
    struct json_object **out, char *err, size_t errlen)
{
	return field(o, key, required, json_type_object, "an object", out,
	    err, errlen);
}

int
glink_json_array(struct json_object *o, const char *key, int required,
    size_t max, struct json_object **out, char *err, size_t errlen)
{
	int rc;

	if ((rc = field(o, key, required, json_type_array, "an array", out,
	    err, errlen)) != 1)
		return rc;
	if (json_object_array_length(*out) > max) {
		snprintf(err, errlen, "field \"%s\" has more than %zu items",
		    key, max);
		return -1;
	}
	return 1;
}

int
glink_reply_decode(struct json_object *o, struct glink_reply *r, char *err,
    size_t errlen)
{
	struct json_object *e;
	int64_t id;
	int rc;

	memset(r, 0, sizeof(*r));
	if ((rc = glink_json_str(o, "event", 0, 64, &r->event, err,
	    errlen)) != 0)
		return rc == 1 ? 0 : -1;
	if (glink_json_int(o, "id", 1, 1, UINT32_MAX, &id, err, errlen) != 1)
		return -1;
	r->id = (uint32_t)id;
	if (glink_json_bool(o, "ok", 1, &r->ok, err, errlen) != 1)
		return -1;
	if (r->ok)
		return 0;
	if (glink_json_obj(o, "error", 1, &e, err, errlen) != 1 ||
	    glink_json_str(e, "code", 1, 64, &r->code, err, errlen) != 1 ||
	    glink_json_str(e, "message", 1, 4096, &r->message, err,
	    errlen) != 1)
		return -1;
	return 0;
}


/*
 * The identity op's values (proto/guest.h), checked the same way by
 * vmproxy before it forwards them and by guestd before it applies them.
 */
static int
all_of(const char *s, size_t n, const char *set)
{
	return strlen(s) == n && strspn(s, set) == n;
}

int
glink_valid_machine_id(const char *s)
{
	return all_of(s, GUEST_MACHINE_ID_LEN, "0123456789abcdef") &&
	    strspn(s, "0") != GUEST_MACHINE_ID_LEN;
}

int
glink_valid_uuid(const char *s)
{
	size_t i;

	if (strlen(s) != GUEST_UUID_LEN)
		return 0;
	for (i = 0; i < GUEST_UUID_LEN; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	}
	return 1;
}

int
glink_valid_hostname(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= GUEST_HOSTNAME_MAX &&
	    strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n &&
	    s[0] != '-' && s[n - 1] != '-';
}

/*
 * Canonical standard base64 of exactly want bytes, padded, nothing else
 * (guestd is static without OpenSSL, so not common/b64.c's decoder; the
 * alphabet is b64.h's).
 */
int
glink_b64_exact(const char *s, size_t len, uint8_t *out, size_t want)
{
	size_t i, o = 0, pad;
	uint32_t acc;
	int v;

	if (len != (want + 2) / 3 * 4)
		return -1;
	pad = (3 - want % 3) % 3;
	for (i = 0; i < len; i += 4) {
		acc = 0;
		for (size_t j = 0; j < 4; j++) {
			char c = s[i + j];

			if (i + 4 == len && j >= 4 - pad) {
				if (c != '=')
					return -1;
				v = 0;
			} else if ((v = b64_digit((unsigned char)c)) == -1)
				return -1;
			acc = acc << 6 | (uint32_t)v;
		}
		for (size_t j = 0; j < 3 && o < want; j++)
			out[o++] = (uint8_t)(acc >> (16 - 8 * j));
		/* Bits after the last byte must be zero (canonical). */
		if (i + 4 == len && pad > 0 && (acc & ((1u << (8 * pad)) - 1)))
			return -1;
	}
	return o == want ? 0 : -1;
}
