/*
 * Channel 0's JSON for the link (see glink.h): the strict parse of a
 * control message and bounded, type-checked getters, and the envelope of
 * a guest -> host message.  The guest is hostile to vmproxy and vmproxy's
 * requests are checked by guestd the same way.
 */
#include <arpa/inet.h>
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

/* ---- the identity op's "net" member ------------------------------------ */

/* aa:bb:cc:dd:ee:ff in lowercase hex, a unicast address, not all zero. */
static int
net_mac(const char *s, uint8_t *mac)
{
	static const char hex[] = "0123456789abcdef";
	int any = 0;

	if (strlen(s) != GUEST_MAC_LEN)
		return -1;
	for (size_t i = 0; i < 6; i++) {
		const char *hi = strchr(hex, s[i * 3]);
		const char *lo = strchr(hex, s[i * 3 + 1]);

		if (s[i * 3] == '\0' || s[i * 3 + 1] == '\0' || hi == NULL ||
		    lo == NULL || (i < 5 && s[i * 3 + 2] != ':'))
			return -1;
		mac[i] = (uint8_t)((hi - hex) << 4 | (lo - hex));
		any |= mac[i];
	}
	return any != 0 && (mac[0] & 1) == 0 ? 0 : -1;
}

/* A dotted quad (inet_pton's strict form) that a host may have: not in
 * 0/8, 127/8 or 224/3.  Host byte order into *out. */
static int
net_host_addr(const char *s, uint32_t *out)
{
	struct in_addr a;
	uint32_t h;

	if (strlen(s) > GUEST_IPV4_MAX || inet_pton(AF_INET, s, &a) != 1)
		return -1;
	h = ntohl(a.s_addr);
	if ((h >> 24) == 0 || (h >> 24) == 127 || (h >> 24) >= 224)
		return -1;
	*out = h;
	return 0;
}

static int
net_str(struct json_object *o, const char *key, size_t max, const char **v,
    char *err, size_t errlen)
{
	char sub[64];

	if (glink_json_str(o, key, 1, max, v, sub, sizeof(sub)) != 1) {
		snprintf(err, errlen, "net: %s", sub);
		return -1;
	}
	return 0;
}

int
glink_net_decode(struct json_object *o, struct glink_net *n, char *err,
    size_t errlen)
{
	static const char *const known[] = { "mac", "address", "prefix",
	    "gateway", "dns", NULL };
	struct json_object *dns;
	const char *s;
	uint32_t addr, gw, mask, h;
	int64_t prefix;
	char sub[64];
	size_t i;

	memset(n, 0, sizeof(*n));
	if (o == NULL || !json_object_is_type(o, json_type_object)) {
		snprintf(err, errlen, "net must be an object");
		return -1;
	}
	json_object_object_foreach(o, key, val) {
		(void)val;
		for (i = 0; known[i] != NULL; i++)
			if (strcmp(key, known[i]) == 0)
				break;
		if (known[i] == NULL) {
			snprintf(err, errlen, "net: unknown member \"%.32s\"",
			    key);
			return -1;
		}
	}
	if (net_str(o, "mac", GUEST_MAC_LEN, &s, err, errlen) == -1)
		return -1;
	if (net_mac(s, n->mac) == -1) {
		snprintf(err, errlen, "net: mac must be 6 lowercase hex pairs "
		    "joined by ':', unicast and not all zero");
		return -1;
	}
	if (glink_json_int(o, "prefix", 1, GUEST_NET_MIN_PREFIX,
	    GUEST_NET_MAX_PREFIX, &prefix, sub, sizeof(sub)) != 1) {
		snprintf(err, errlen, "net: prefix must be %d to %d",
		    GUEST_NET_MIN_PREFIX, GUEST_NET_MAX_PREFIX);
		return -1;
	}
	n->prefix = (int)prefix;
	mask = 0xffffffffu << (32 - prefix);
	if (net_str(o, "address", GUEST_IPV4_MAX, &s, err, errlen) == -1)
		return -1;
	if (net_host_addr(s, &addr) == -1 || (addr & ~mask) == 0 ||
	    (addr & ~mask) == ~mask) {
		snprintf(err, errlen, "net: address must be a unicast IPv4 "
		    "address, neither its subnet's first nor its last");
		return -1;
	}
	if (net_str(o, "gateway", GUEST_IPV4_MAX, &s, err, errlen) == -1)
		return -1;
	if (net_host_addr(s, &gw) == -1 || (gw & mask) != (addr & mask) ||
	    gw == addr || (gw & ~mask) == 0 || (gw & ~mask) == ~mask) {
		snprintf(err, errlen, "net: gateway must be another host of "
		    "the address's subnet");
		return -1;
	}
	if (glink_json_array(o, "dns", 1, GUEST_NET_MAX_DNS, &dns, sub,
	    sizeof(sub)) != 1) {
		snprintf(err, errlen, "net: dns must be an array of at most "
		    "%d addresses", GUEST_NET_MAX_DNS);
		return -1;
	}
	for (i = 0; i < json_object_array_length(dns); i++) {
		struct json_object *d = json_object_array_get_idx(dns, i);

		if (!json_object_is_type(d, json_type_string) ||
		    (size_t)json_object_get_string_len(d) !=
		    strlen(json_object_get_string(d)) ||
		    net_host_addr(json_object_get_string(d), &h) == -1) {
			snprintf(err, errlen, "net: dns[%zu] must be a unicast "
			    "IPv4 address", i);
			return -1;
		}
		n->dns[i] = htonl(h);
	}
	n->ndns = (int)i;
	n->address = htonl(addr);
	n->gateway = htonl(gw);
	return 0;
}
