/*
 * netd request decoding; see request.h.  Runs in netd on every message
 * from vmmd, which netd re-validates as if it were hostile.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "jsonx.h"
#include "reqshape.h"
#include "request.h"

#define K_SLOT		0x01u
#define K_SLOTS		0x02u
#define K_EGRESS	0x04u
#define K_RATE		0x08u
#define K_POLICIES	0x10u

static const struct reqshape shapes[] = {
	{ IPC_NET_SYNC, K_SLOTS | K_POLICIES, K_SLOTS },
	{ IPC_NET_SETUP, K_SLOT | K_EGRESS | K_RATE, K_SLOT },
	{ IPC_NET_TEARDOWN, K_SLOT, K_SLOT },
	{ IPC_NET_STATUS, 0, 0 },
	{ IPC_NET_EGRESS, K_SLOT | K_EGRESS | K_RATE, K_SLOT | K_EGRESS },
	{ IPC_NET_COUNTERS, 0, 0 },
};

static const struct reqshape_key keys[] = {
	{ K_SLOT, "slot" },
	{ K_SLOTS, "slots" },
	{ K_EGRESS, "egress" },
	{ K_RATE, "rate" },
	{ K_POLICIES, "policies" },
};

/*
 * SYNC's "policies": at most max, each an IPC_NET_EGRESS body for a
 * slot of its own.  That the slot is listed in "slots" is checked once
 * both are read.
 */
static int
decode_policies(struct netd_request *req, struct json_object *body,
    unsigned max, char *why, size_t whylen)
{
	static struct netd_request one;
	struct jsonx_err jerr;
	struct json_object *arr;
	char sub[512];
	size_t n;

	if (jsonx_get_array(body, "policies", 1, &arr, &jerr) != 1) {
		snprintf(why, whylen, "%s", jerr.msg);
		return -1;
	}
	if ((n = json_object_array_length(arr)) > max) {
		snprintf(why, whylen, "$.policies: more than %u policies", max);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);

		if (e == NULL || !json_object_is_type(e, json_type_object)) {
			snprintf(why, whylen, "$.policies[%zu]: expected an "
			    "object", i);
			return -1;
		}
		if (netd_request_decode(IPC_NET_EGRESS, e, max, &one, sub,
		    sizeof(sub)) == -1) {
			/* sub starts with "$.": the entry's own path. */
			snprintf(why, whylen, "$.policies[%zu]%s", i,
			    sub[0] == '$' ? sub + 1 : sub);
			return -1;
		}
		if (req->policy[one.slot]) {
			snprintf(why, whylen, "$.policies[%zu]: slot %u has "
			    "two policies", i, one.slot);
			return -1;
		}
		req->policy[one.slot] = 1;
	}
	req->policies = arr;
	return 0;
}

/* arg: the number of slots, each slot below it. */
static int
decode_key(void *r, unsigned int bit, struct json_object *body,
    const void *arg, char *why, size_t whylen)
{
	struct netd_request *req = r;
	unsigned max = *(const unsigned *)arg;
	struct jsonx_err jerr;
	struct json_object *arr;
	int64_t v;
	size_t n;

	switch (bit) {
	case K_POLICIES:
		return decode_policies(req, body, max, why, whylen);
	case K_EGRESS:
		return egress_from_json(json_object_object_get(body, "egress"),
		    "egress", EGRESS_MAX_CIDRS, &req->egress, why, whylen);
	case K_RATE:
		if (jsonx_get_int64(body, "rate", 1, NETD_RATE_MIN,
		    NETD_RATE_MAX, &v, &jerr) != 1) {
			snprintf(why, whylen, "%s (a rate is bytes a second, "
			    "%d to %lld)", jerr.msg, NETD_RATE_MIN,
			    (long long)NETD_RATE_MAX);
			return -1;
		}
		req->rate = (uint64_t)v;
		return 0;
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
	return reqshape_bad_bit(why, whylen);
}

/* The refusal does not echo the key: it is peer data (a name, say). */
static const struct reqshape_table table = REQSHAPE_TABLE(shapes, keys,
    "$: has a key this request type does not take (netd takes slot "
    "numbers, egress policies and rates only)", decode_key);

int
netd_request_decode(uint32_t type, struct json_object *body,
    unsigned max_slots, struct netd_request *req, char *why, size_t whylen)
{
	memset(req, 0, sizeof(*req));
	req->type = type;
	if (max_slots == 0 || max_slots > NETD_MAX_SLOTS)
		max_slots = NETD_MAX_SLOTS;
	if (reqshape_decode(&table, type, body, req, &max_slots, why,
	    whylen) == -1)
		goto bad;
	for (unsigned s = 0; s < NETD_MAX_SLOTS; s++)
		if (req->policy[s] && !req->slots[s]) {
			snprintf(why, whylen, "$.policies: slot %u is not in "
			    "$.slots", s);
			goto bad;
		}
	return 0;
 bad:
	memset(req, 0, sizeof(*req));
	req->type = type;
	return -1;
}
