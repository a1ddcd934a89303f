/*
 * Decoding of what vmmd sends netd into typed requests.  Strict: unknown
 * keys, wrong types, slots out of range and duplicates are refused with a
 * message naming the field.  netd never takes a name from a request, only
 * slot numbers, egress policies (whose prefixes it parses into numbers,
 * common/egress.c) and rates.  This is the fuzz target's entry point.
 */
#ifndef MCPVM_NETD_REQUEST_H
#define MCPVM_NETD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "../proto/ipcmsg.h"
#include "nft.h"

struct json_object;

struct netd_request {
	uint32_t	type;
	unsigned	slot;			/* SETUP, TEARDOWN, EGRESS */
	size_t		nslots;				/* SYNC */
	unsigned char	slots[NETD_MAX_SLOTS];		/* SYNC: 1 = live */
	struct egress	egress;		/* SETUP: public when none is sent;
					 * EGRESS */
	uint64_t	rate;		/* SETUP, EGRESS: the guest's egress
					 * bytes a second, 0 for no limit */
	/* SYNC: the listed slots whose policy came too (1), and the
	 * array of them, each checked as an IPC_NET_EGRESS body; a
	 * pointer into the message's body, which outlives the request. */
	unsigned char	policy[NETD_MAX_SLOTS];
	struct json_object *policies;
};

/*
 * Fills req from body for message type; max_slots bounds every slot
 * (at most NETD_MAX_SLOTS).  0, or -1 with why (a sentence for an
 * invalid_argument reply).
 */
int	netd_request_decode(uint32_t type, struct json_object *body,
	    unsigned max_slots, struct netd_request *req, char *why,
	    size_t whylen);

#endif
