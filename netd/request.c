/*
 * netd request decoding; see request.h.  Runs in netd on every message
 * from vmmd, which netd re-validates as if it were hostile.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "jsonx.h"
#include "request.h"

#define K_SLOT		0x01u
#define K_SLOTS		0x02u

struct req_shape {
	uint32_t	type;
	unsigned int	allowed;
	unsigned int	required;
};

static const struct req_shape shapes[] = {
	{ IPC_NET_SYNC, K_SLOTS, K_SLOTS },
	{ IPC_NET_SETUP, K_SLOT, K_SLOT },
	{ IPC_NET_TEARDOWN, K_SLOT, K_SLOT },
	{ IPC_NET_STATUS, 0, 0 },
};

static const struct {
	unsigned int	 bit;
	const char	*name;
} keys[] = {
	{ K_SLOT, "slot" },
	{ K_SLOTS, "slots" },
};

static int
decode_key(struct netd_request *req, unsigned int bit,
    struct json_object *body, unsigned max, char *why, size_t whylen)
{
	struct jsonx_err jerr;
	struct json_object *arr;
	int64_t v;
	size_t n;

	switch (bit) {
	case K_SLOT:
		if (jsonx_get_int64(body, "slot", 1, 0, (int64_t)max - 1, &v,
		    &jerr) != 1) {
			snprintf(why, whylen, "%s (slots are 0 to %u)",
			    jerr.msg, max - 1);
			return -1;
		}
		req->slot = (unsigned)v;
		return 0;
	case K_SLOTS:
		if (jsonx_get_array(body, "slots", 1, &arr, &jerr) != 1) {
			snprintf(why, whylen, "%s", jerr.msg);
			return -1;
		}
		n = json_object_array_length(arr);
		if (n > max) {
			snprintf(why, whylen, "$.slots: more than %u slots",
			    max);
			return -1;
		}
		for (size_t i = 0; i < n; i++) {
			struct json_object *e = json_object_array_get_idx(arr,
			    i);

			if (e == NULL || !json_object_is_type(e,
			    json_type_int) || (v = json_object_get_int64(e)) <
			    0 || v >= (int64_t)max) {
				snprintf(why, whylen, "$.slots[%zu]: expected "
				    "an integer from 0 to %u", i, max - 1);
				return -1;
			}
			if (req->slots[v]) {
				snprintf(why, whylen, "$.slots[%zu]: slot %d "
				    "is listed twice", i, (int)v);
				return -1;
			}
			req->slots[v] = 1;
			req->nslots++;
		}
		return 0;
	}
	snprintf(why, whylen, "internal: unknown key bit");
	return -1;
}

int
netd_request_decode(uint32_t type, struct json_object *body,
    unsigned max_slots, struct netd_request *req, char *why, size_t whylen)
{
	const struct req_shape *shape = NULL;
	unsigned int seen = 0;

	memset(req, 0, sizeof(*req));
	req->type = type;
	if (max_slots == 0 || max_slots > NETD_MAX_SLOTS)
		max_slots = NETD_MAX_SLOTS;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (shapes[i].type == type)
			shape = &shapes[i];
	if (shape == NULL) {
		snprintf(why, whylen, "message type %u is not a request",
		    type);
		return -1;
	}
	if (body == NULL || !json_object_is_type(body, json_type_object)) {
		snprintf(why, whylen, "$: expected object, got %s",
		    body == NULL ? "null" : jsonx_type_name(body));
		return -1;
	}
	json_object_object_foreach(body, key, v) {
		unsigned int bit = 0;

		(void)v;
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (strcmp(key, keys[i].name) == 0)
				bit = keys[i].bit;
		if (bit == 0 || (shape->allowed & bit) == 0) {
			/* Not echoed: it is peer data (a name, say). */
			snprintf(why, whylen, "$: has a key this request type "
			    "does not take (netd takes slot numbers only)");
			goto fail;
		}
		if (decode_key(req, bit, body, max_slots, why, whylen) == -1)
			goto fail;
		seen |= bit;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if ((shape->required & keys[i].bit) && !(seen & keys[i].bit)) {
			snprintf(why, whylen, "$.%s: is required",
			    keys[i].name);
			goto fail;
		}
	return 0;
fail:
	memset(req, 0, sizeof(*req));
	req->type = type;
	return -1;
}
