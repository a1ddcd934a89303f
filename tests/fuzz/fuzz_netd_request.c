/*
 * libFuzzer target for netd's request decoding: a body as vmmd (or
 * whoever took vmmd's place) could send it goes through the socket's JSON
 * check (ipc_frame_check) and netd_request_decode(); a decoded policy
 * and rate then through the egress ruleset builder.  The first byte picks
 * the message type, the second the slot limit.  A decoded request must
 * hold what netd's handlers rely on; anything else aborts.  A sync's
 * policies are each decoded again as netd's sync does, and must be for
 * listed slots and build a ruleset.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ipc.h"
#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const struct ipc_rule rules[] = {
	{ IPC_NET_SYNC, 0 }, { IPC_NET_SETUP, 0 }, { IPC_NET_TEARDOWN, 0 },
	{ IPC_NET_STATUS, 0 }, { IPC_NET_SETUP_RESULT, 0 },
	{ IPC_NET_EGRESS, 0 }, { IPC_NET_COUNTERS, 0 },
};
static const struct ipc_policy policy = { "fuzz", rules,
	sizeof(rules) / sizeof(rules[0]) };

static void
check(const struct netd_request *r, uint32_t type, unsigned max)
{
	int has_slot = type == IPC_NET_SETUP || type == IPC_NET_TEARDOWN ||
	    type == IPC_NET_EGRESS;
	int has_egress = type == IPC_NET_SETUP || type == IPC_NET_EGRESS;
	size_t n = 0;

	if (r->type != type)
		abort();
	if (type == IPC_NET_SETUP_RESULT)
		abort();	/* not a request netd serves */
	if (has_slot && r->slot >= max)
		abort();
	if (!has_slot && r->slot != 0)
		abort();
	/* A rate: none, or within netd's bounds, and only where taken. */
	if (r->rate != 0 && (!has_egress || r->rate < NETD_RATE_MIN ||
	    r->rate > (uint64_t)NETD_RATE_MAX))
		abort();
	for (unsigned s = 0; s < NETD_MAX_SLOTS; s++) {
		if (r->slots[s] > 1 || (r->slots[s] && s >= max))
			abort();
		n += r->slots[s];
	}
	if (n != r->nslots || (type != IPC_NET_SYNC && n != 0))
		abort();
	/* The egress policy: bounded, each prefix without host bits, and
	 * public unless a setup or an egress change sent one. */
	if (r->egress.ncidrs > EGRESS_MAX_CIDRS ||
	    (r->egress.mode != EGRESS_PUBLIC &&
	    r->egress.mode != EGRESS_ALLOWLIST) ||
	    (!has_egress && (r->egress.mode != EGRESS_PUBLIC ||
	    r->egress.ncidrs != 0)))
		abort();
	for (size_t i = 0; i < r->egress.ncidrs; i++)
		if (r->egress.cidrs[i].len > 32 || (r->egress.cidrs[i].addr &
		    ~cidr_mask(r->egress.cidrs[i].len)) != 0)
			abort();
	/* A sync's policies: only there, only for listed slots, and each
	 * decodes again (as do_sync does) to a slot marked and a ruleset. */
	n = 0;
	for (unsigned s = 0; s < NETD_MAX_SLOTS; s++) {
		if (r->policy[s] > 1 || (r->policy[s] && !r->slots[s]))
			abort();
		n += r->policy[s];
	}
	if ((type != IPC_NET_SYNC && (n != 0 || r->policies != NULL)) ||
	    (n != 0 && r->policies == NULL) || (r->policies != NULL &&
	    json_object_array_length(r->policies) != n))
		abort();
	for (size_t i = 0; i < n; i++) {
		static struct netd_request one;
		static char buf[65536];
		char why[256];

		if (netd_request_decode(IPC_NET_EGRESS,
		    json_object_array_get_idx(r->policies, i), max, &one, why,
		    sizeof(why)) == -1 || !r->policy[one.slot] ||
		    nft_build_egress(one.slot, &one.egress, one.rate, NULL,
		    buf, sizeof(buf)) < 0)
			abort();
	}
	/* What netd builds from it is always accepted by the builder. */
	if (has_egress) {
		static char buf[65536];

		if (nft_build_egress(r->slot, &r->egress, r->rate, NULL, buf,
		    sizeof(buf)) < 0)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *body = NULL;
	struct netd_request req;
	struct ipc_frame f;
	unsigned max;
	char *payload, err[256];

	if (size < 2 || size > 65536)
		return 0;
	max = data[1] == 0 ? NETD_MAX_SLOTS : data[1];
	payload = malloc(size - 1);
	memcpy(payload, data + 2, size - 2);
	payload[size - 2] = '\0';
	memset(&f, 0, sizeof(f));
	f.type = rules[data[0] % policy.nrules].type;
	f.id = 1;
	f.payload = payload;
	f.len = size - 2;
	f.fd = -1;
	if (ipc_frame_check(&f, &policy, &body, NULL, err,
	    sizeof(err)) == 0) {
		if (netd_request_decode(f.type, body, max, &req, err,
		    sizeof(err)) == 0)
			check(&req, f.type, max);
		else if (err[0] == '\0')
			abort();	/* a refusal always says why */
		json_object_put(body);
	}
	free(payload);
	return 0;
}
