/*
 * libFuzzer target: mcpd's decoder of the proposal vmmd sends with a gated
 * call's error (mcpd/proposal.c), from bytes parsed as the IPC frame check
 * parses them.  Invariants: whatever decodes is within every bound, its
 * strings are terminated, and encoding it and decoding that again gives the
 * same struct (one meaning per proposal); the agent's advice is built from
 * it without overrunning its buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "jsonx.h"
#include "mcp.h"
#include "proposal.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const codes[] = { "approval_required",
	    "approval_denied", "approval_expired" };
	struct proposal p, p2;
	struct backend_result br = { 0 };
	struct json_object *o, *again;
	struct jsonx_err jerr;
	char err[256], advice[1536];
	size_t i;

	if ((o = jsonx_parse_object((const char *)data, size, 16,
	    &jerr)) == NULL)
		return 0;
	if (proposal_from_json(o, &p, err, sizeof(err)) == -1) {
		if (memchr(err, '\0', sizeof(err)) == NULL)
			abort();
		json_object_put(o);
		return 0;
	}
	if (strlen(p.id) != PROPOSAL_ID_LEN ||
	    strlen(p.effect) > PROPOSAL_EFFECT_MAX ||
	    strlen(p.request_id) > PROPOSAL_REQUEST_ID_MAX ||
	    p.ngates == 0 || p.ngates > GATE_NCLASSES ||
	    p.approvals_needed < 1 || p.approvals_needed > GATE_NEED_MAX)
		abort();
	again = proposal_to_json(&p);
	if (proposal_from_json(again, &p2, err, sizeof(err)) == -1 ||
	    memcmp(&p, &p2, sizeof(p)) != 0)
		abort();
	br.message = "from vmmd";
	br.proposal = &p;
	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		br.code = codes[i];
		mcp_proposal_advice(&br, advice, sizeof(advice));
		if (memchr(advice, '\0', sizeof(advice)) == NULL)
			abort();
	}
	json_object_put(again);
	json_object_put(o);
	return 0;
}
