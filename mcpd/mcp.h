/*
 * MCP over JSON-RPC 2.0 for mcpd: one POST body in, what to answer out.
 * No I/O and no backend here, so the whole message path is unit tested and
 * fuzzed; mcpd's HTTP glue (mcp_http.c) does the sending and forwarding.
 */
#ifndef MCPD_MCP_H
#define MCPD_MCP_H

#include <stddef.h>
#include <json-c/json.h>

#include "jsonx.h"

#include "backend.h"
#include "session.h"
#include "tasks.h"

#define MCP_VERSION_LATEST	"2025-11-25"
#define MCP_VERSION_DEFAULT	"2025-03-26"	/* no header: spec default */
/* The stateless revision: no initialize, no session, _meta on every request. */
#define MCP_VERSION_STATELESS	"2026-07-28"
/* How long a client may reuse a tools/list or server/discover answer. */
#define MCP_LIST_TTL_MS		300000
#define MCP_JSON_DEPTH		64

/* JSON-RPC error codes. */
#define JSONRPC_PARSE_ERROR	-32700
#define JSONRPC_INVALID_REQUEST	-32600
#define JSONRPC_METHOD_NOT_FOUND -32601
#define JSONRPC_INVALID_PARAMS	-32602
#define JSONRPC_INTERNAL_ERROR	-32603
#define MCP_ERR_SESSION		-32001	/* unknown session */
#define MCP_ERR_LIMIT		-32002	/* a limit was hit */
#define MCP_ERR_CANCELLED	-32800	/* request cancelled by client */
/* 2026-07-28 (stateless) errors, all with HTTP 400. */
#define MCP_ERR_HEADER_MISMATCH	-32020	/* headers missing or not the body */
#define MCP_ERR_MISSING_CAPABILITY -32021
#define MCP_ERR_UNSUPPORTED_VERSION -32022

int	mcp_version_supported(const char *);
/* The version to answer an initialize that asked for requested with. */
const char *mcp_negotiate_version(const char *requested);

struct mcp_env {
	struct sessions	*sessions;
	const char	*workspace;	/* from the verified credential */
	const char	*session_id;	/* Mcp-Session-Id header, or NULL */
	const char	*protocol_version; /* MCP-Protocol-Version, or NULL */
	const char	*mcp_method;	/* Mcp-Method header, or NULL */
	const char	*mcp_name;	/* Mcp-Name header, or NULL */
};

struct mcp_out {
	int			 status;	/* HTTP status */
	struct json_object	*body;		/* reply, NULL for 202 */
	struct session		*session;	/* session used or created */
	int			 new_session;	/* send Mcp-Session-Id */
	int			 stateless;	/* served as 2026-07-28 */
	int			 listen;	/* subscriptions/listen: keep
						   an event stream open, body
						   is its acknowledgement */

	int			 call;		/* forward a tools/call */
	struct json_object	*call_id;	/* its id, or listen's */
	char			 tool[64];
	struct json_object	*args;
	struct json_object	*progress_token;	/* or NULL */
	/*
	 * 2026-07-28: the client declared URL-mode elicitation, so a call
	 * waiting for approval is answered input_required; not when it
	 * already declined or cancelled ours (inputResponses).
	 */
	int			 url_elicit;

	int			 cancel;	/* notifications/cancelled */
	struct json_object	*cancel_id;

	/* 2026-07-28 with the tasks extension declared (tasks.h). */
	int			 task_create;	/* answer the call with a task */
	enum task_op		 task_op;	/* tasks/get, cancel, update */
	struct json_object	*task_rpc_id;	/* its id */
	struct task_id		 task;
	/* subscriptions/listen's notifications.taskIds that were accepted:
	 * their status changes go out on the stream (notifications/tasks). */
	struct task_id		*listen_tasks;
	size_t			 nlisten_tasks;
};

/*
 * A request body, parsed strictly by common/jsonx (the one JSON layer: UTF-8,
 * grammar, int64 and finite numbers, depth, nothing trailing): 0 with *out a
 * new reference, NULL when the body is the JSON text null; -1 with err->msg
 * naming the problem.
 */
int	mcp_json_parse(const char *buf, size_t len, struct json_object **out,
	    struct jsonx_err *err);

void	mcp_process(const struct mcp_env *, const char *body, size_t len,
	    struct mcp_out *);
void	mcp_out_free(struct mcp_out *);

struct json_object *jsonrpc_result(struct json_object *id,
	    struct json_object *result);
struct json_object *jsonrpc_error(struct json_object *id, int code,
	    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A progress notification for token. */
struct json_object *mcp_progress(struct json_object *token, double progress,
	    double total, const char *message);
/* A tools/call result from a backend answer (success or tool error). */
struct json_object *mcp_tool_result(const struct backend_result *);
/* What the agent must do about a gated call (br->proposal set), in words. */
void	mcp_proposal_advice(const struct backend_result *br, char *buf,
	    size_t len);
/* The same for a stateless (2026-07-28) request: with resultType and the
 * server's identity in _meta. */
struct json_object *mcp_tool_result_stateless(const struct backend_result *);
/*
 * 2026-07-28, a call waiting for approval (br->proposal) from a client that
 * declared URL-mode elicitation: an InputRequiredResult asking the person
 * to have the proposal approved, with base (scheme://host of mcpd as the
 * client reached it) + "/v1/approvals/" + id as the URL.
 */
struct json_object *mcp_input_required(const struct backend_result *br,
	    const char *base);
/* The key of that elicitation in inputRequests and inputResponses. */
#define MCP_APPROVAL_INPUT	"approval"
/* Adds resultType "complete" (unless r has a type) and the server's
 * identity in _meta to a 2026-07-28 result; returns r. */
struct json_object *mcp_stateless_meta(struct json_object *r);
/*
 * An Mcp-Name or Mcp-Param-* header value as the client meant it: optional
 * whitespace around it dropped, "=?base64?...?=" decoded (strictly).  0 with
 * a malloc'd NUL-terminated *out, -1 when the value is not valid (bad
 * base64, a control character, NUL in the decoded value).
 */
int	mcp_header_value(const char *hdr, char **out);
/* 1 if two JSON-RPC ids are the same. */
int	jsonrpc_id_equal(struct json_object *, struct json_object *);

#endif
