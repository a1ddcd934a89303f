/*
 * A proposal (issue #28) as vmmd describes it in the IPC_ERROR of a gated
 * tool call: decoded from vmmd's JSON into this typed, bounded struct
 * before mcpd shapes any answer from it, and encoded back for the agent.
 * No I/O here, so the decoder is fuzzed (tests/fuzz/fuzz_mcpd_proposal.c).
 */
#ifndef MCPD_PROPOSAL_H
#define MCPD_PROPOSAL_H

#include <stddef.h>

#include "gates.h"

#define PROPOSAL_ID_LEN		33	/* "p" and 32 lowercase hex digits */
#define PROPOSAL_TOOL_MAX	32
#define PROPOSAL_REQUEST_ID_MAX	128	/* as tools.json's request_id */
#define PROPOSAL_DIGEST_LEN	64	/* lowercase hex */
#define PROPOSAL_EFFECT_MAX	4096	/* bytes of UTF-8 */
#define PROPOSAL_TIME_MAX	24	/* 2026-12-01T10:00:00.000Z */
#define PROPOSAL_APPROVALS_MAX	64	/* valid approvals counted */

enum proposal_state {
	PROPOSAL_PENDING,
	PROPOSAL_APPROVED,
	PROPOSAL_DENIED,
	PROPOSAL_EXPIRED,
	PROPOSAL_USED,
};

struct proposal {
	char			 id[PROPOSAL_ID_LEN + 1];
	char			 tool[PROPOSAL_TOOL_MAX + 1];
	char			 request_id[PROPOSAL_REQUEST_ID_MAX + 1];
	char			 args_digest[PROPOSAL_DIGEST_LEN + 1];
	char			 effect[PROPOSAL_EFFECT_MAX + 1];
	enum gate_class		 gates[GATE_NCLASSES];
	size_t			 ngates;
	int			 approvals_needed;	/* 1..GATE_NEED_MAX */
	int			 approvals;
	enum proposal_state	 state;
	char			 requested_at[PROPOSAL_TIME_MAX + 1];
	char			 expires_at[PROPOSAL_TIME_MAX + 1];
};

struct json_object;

/*
 * Strict decode of vmmd's "proposal" object: every member required, no
 * other member, each of its type and within its bound (the message names
 * the member and the bound).  0, or -1 with err.  The effect's control
 * characters but newline and tab come out as '?'.
 */
int	 proposal_from_json(struct json_object *, struct proposal *,
	    char *err, size_t errlen);
/* The same object for the agent, every member always. */
struct json_object *proposal_to_json(const struct proposal *);
const char	*proposal_state_name(enum proposal_state);
/* code as one of the three approval codes' static names, or NULL. */
const char	*proposal_code(const char *code);

#endif
