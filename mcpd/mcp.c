/*
 * MCP JSON-RPC message handling for mcpd; see mcp.h.  Every byte of the
 * body is client-controlled: parse strictly, answer every malformed
 * message with the JSON-RPC error that names the problem.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "b64.h"
#include "mcp.h"
#include "schema.h"
#include "jsonx.h"
#include "log.h"

/* Versions served with an initialize handshake and a session. */
static const char *const versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26",
};

#define SERVER_INFO_JSON "{\"name\":\"mcpvm\",\"version\":\"" \
	MCPVM_VERSION "\"}"
#define META_SERVER_INFO "io.modelcontextprotocol/serverInfo"

int
mcp_version_supported(const char *v)
{
	size_t i;

	if (v == NULL)
		return 0;
	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if (strcmp(v, versions[i]) == 0)
			return 1;
	return 0;
}

const char *
mcp_negotiate_version(const char *requested)
{
	size_t i;

	for (i = 0; requested != NULL &&
	    i < sizeof(versions) / sizeof(versions[0]); i++)
		if (strcmp(requested, versions[i]) == 0)
			return versions[i];
	/* Newer, older or garbage: offer ours; the client decides. */
	return MCP_VERSION_LATEST;
}

int
mcp_json_parse(const char *buf, size_t len, struct json_object **out,
    struct jsonx_err *err)
{
	return jsonx_parse_value(buf, len, MCP_JSON_DEPTH, out, err);
}

/*
 * A string member a client sent, as C reads it: absent (NULL), or a string
 * without U+0000, which C would cut there ("vm_exec\u0000junk" must not be
 * vm_exec).  -1 for anything else.
 */
static int
client_string(struct json_object *obj, const char *key, const char **out)
{
	struct jsonx_err jerr;

	*out = NULL;
	return jsonx_get_string(obj, key, 0, out, &jerr) < 0 ? -1 : 0;
}

struct json_object *
jsonrpc_result(struct json_object *id, struct json_object *result)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(o, "id", json_object_get(id));
	json_object_object_add(o, "result", result);
	return o;
}

struct json_object *
jsonrpc_error(struct json_object *id, int code, const char *fmt, ...)
{
	struct json_object *o = json_object_new_object();
	struct json_object *e = json_object_new_object();
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_object_object_add(e, "code", json_object_new_int(code));
	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(o, "id", json_object_get(id));
	json_object_object_add(o, "error", e);
	return o;
}

int
jsonrpc_id_equal(struct json_object *a, struct json_object *b)
{
	if (a == NULL || b == NULL)
		return 0;
	if (json_object_get_type(a) != json_object_get_type(b))
		return 0;
	if (json_object_is_type(a, json_type_int))
		return json_object_get_int64(a) == json_object_get_int64(b);
	if (json_object_is_type(a, json_type_string))
		return json_object_get_string_len(a) ==
		    json_object_get_string_len(b) &&
		    memcmp(json_object_get_string(a), json_object_get_string(b),
		    (size_t)json_object_get_string_len(a)) == 0;
	return 0;
}

struct json_object *
mcp_progress(struct json_object *token, double progress, double total,
    const char *message)
{
	struct json_object *o = json_object_new_object();
	struct json_object *p = json_object_new_object();

	json_object_object_add(p, "progressToken", json_object_get(token));
	json_object_object_add(p, "progress", json_object_new_double(progress));
	if (total > 0)
		json_object_object_add(p, "total",
		    json_object_new_double(total));
	if (message != NULL)
		json_object_object_add(p, "message",
		    json_object_new_string(message));
	json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(o, "method",
	    json_object_new_string("notifications/progress"));
	json_object_object_add(o, "params", p);
	return o;
}

/*
 * A successful result given as text (vmmd's), as mcp_tool_result's object
 * would serialize, written directly: the same text twice, once escaped as
 * the text content and once as structuredContent, without building and
 * printing json-c objects for every call.
 */
static struct json_object *
tool_result_text(const char *text, size_t len, int stateless)
{
	static const char pre[] = "{\"content\":[{\"type\":\"text\","
	    "\"text\":\"";
	static const char mid[] = "\"}],\"structuredContent\":";
	static const char post1[] = ",\"isError\":false}";
	static const char post2[] = ",\"isError\":false,"
	    "\"resultType\":\"complete\",\"_meta\":{\"" META_SERVER_INFO
	    "\":" SERVER_INFO_JSON "}}";
	const char *post = stateless ? post2 : post1;
	size_t postlen = stateless ? sizeof(post2) - 1 : sizeof(post1) - 1;
	struct json_object *r;
	size_t elen = jsonx_escaped_len(text, len), n;
	char *buf, *p;

	n = sizeof(pre) - 1 + elen + sizeof(mid) - 1 + len + postlen;
	if ((buf = malloc(n)) == NULL)
		fatal("%s", __func__);
	p = mempcpy(buf, pre, sizeof(pre) - 1);
	p += jsonx_escape(p, text, len);
	p = mempcpy(p, mid, sizeof(mid) - 1);
	p = mempcpy(p, text, len);
	p = mempcpy(p, post, postlen);
	if ((r = jsonx_raw_object(buf, (size_t)(p - buf))) == NULL)
		fatal("%s", __func__);
	free(buf);
	return r;
}

/* "exec, network": the classes that gate p, for people. */
static const char *
gates_list(const struct proposal *p)
{
	static char buf[128];
	size_t i, off = 0;
	int n;

	buf[0] = '\0';
	for (i = 0; i < p->ngates && off < sizeof(buf); i++) {
		n = snprintf(buf + off, sizeof(buf) - off, "%s%s",
		    i > 0 ? ", " : "", gate_class_name(p->gates[i]));
		if (n < 0)
			break;
		off += (size_t)n;
	}
	return buf;
}

static struct json_object *
server_info(void)
{
	struct json_object *info = json_object_new_object();

	json_object_object_add(info, "name", json_object_new_string("mcpvm"));
	json_object_object_add(info, "version",
	    json_object_new_string(MCPVM_VERSION));
	return info;
}

/* What every 2026-07-28 result carries: its type and who answered. */
struct json_object *
mcp_stateless_meta(struct json_object *r)
{
	struct json_object *meta = json_object_new_object();

	json_object_object_add(meta, META_SERVER_INFO, server_info());
	if (!json_object_object_get_ex(r, "resultType", NULL))
		json_object_object_add(r, "resultType",
		    json_object_new_string("complete"));
	json_object_object_add(r, "_meta", meta);
	return r;
}

static struct json_object *
stateless_result(struct json_object *r)
{
	return mcp_stateless_meta(r);
}

/*
 * What the agent must do about a gated call, in words: a human decides
 * outside its reach, and the same call comes back with the outcome.
 */
void
mcp_proposal_advice(const struct backend_result *br, char *buf, size_t len)
{
	const struct proposal *p = br->proposal;
	char retry[256];

	if (p->request_id[0] != '\0')
		snprintf(retry, sizeof(retry), "the same request_id (\"%s\") "
		    "and the same arguments", p->request_id);
	else
		snprintf(retry, sizeof(retry), "the same arguments (and still "
		    "no request_id)");
	if (strcmp(br->code, "approval_denied") == 0)
		snprintf(buf, len, "%s was not run: a human approver denied "
		    "proposal %s. Do not retry it; tell the user, who can ask "
		    "an approver why.", p->tool, p->id);
	else if (strcmp(br->code, "approval_expired") == 0)
		snprintf(buf, len, "%s was not run: proposal %s expired at %s "
		    "before enough approvals. Retrying it the same way "
		    "answers approval_expired again; call it with a new "
		    "request_id to propose it anew.", p->tool, p->id,
		    p->expires_at);
	else
		snprintf(buf, len, "%s has not run yet: this workspace needs "
		    "a human's approval for it (gated: %s; approvals: %d of "
		    "%d). A human approver must approve proposal %s on the "
		    "host, outside your reach: `vmctl approval show %s`, then "
		    "`vmctl approval approve %s`. You cannot approve it "
		    "yourself; ask the user. Then retry the call with %s: it "
		    "runs once and returns its result. Until then the retry "
		    "answers approval_required again; the proposal expires "
		    "at %s.", p->tool, gates_list(p), p->approvals,
		    p->approvals_needed, p->id, p->id, p->id, retry,
		    p->expires_at);
}

/*
 * A gated call's tool error: the JSON {"error","proposal"} as text and as
 * structuredContent (tools.json's outputSchema of every gateable tool has
 * it as a shape, so SDK clients validating it accept it), then the advice.
 */
static struct json_object *
proposal_result(const struct backend_result *br, int stateless)
{
	struct json_object *r = json_object_new_object();
	struct json_object *content = json_object_new_array();
	struct json_object *text, *sc, *e;
	char advice[1536];

	sc = json_object_new_object();
	e = json_object_new_object();
	json_object_object_add(e, "code", json_object_new_string(br->code));
	json_object_object_add(e, "message",
	    json_object_new_string(br->message));
	json_object_object_add(sc, "error", e);
	json_object_object_add(sc, "proposal", proposal_to_json(br->proposal));
	text = json_object_new_object();
	json_object_object_add(text, "type", json_object_new_string("text"));
	json_object_object_add(text, "text", json_object_new_string(
	    json_object_to_json_string_ext(sc, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE)));
	json_object_array_add(content, text);
	mcp_proposal_advice(br, advice, sizeof(advice));
	text = json_object_new_object();
	json_object_object_add(text, "type", json_object_new_string("text"));
	json_object_object_add(text, "text", json_object_new_string(advice));
	json_object_array_add(content, text);
	json_object_object_add(r, "content", content);
	json_object_object_add(r, "structuredContent", sc);
	json_object_object_add(r, "isError", json_object_new_boolean(1));
	return stateless ? stateless_result(r) : r;
}

static struct json_object *
tool_result(const struct backend_result *br, int stateless)
{
	struct json_object *r, *content, *text, *sc;
	int is_object = br->ok && json_object_is_type(br->result,
	    json_type_object);

	if (br->ok && br->text != NULL)
		return tool_result_text(br->text, br->textlen, stateless);
	if (!br->ok && br->proposal != NULL)
		return proposal_result(br, stateless);
	r = json_object_new_object();
	content = json_object_new_array();
	text = json_object_new_object();
	if (is_object) {
		sc = json_object_get(br->result);
	} else {
		struct json_object *e = json_object_new_object();

		sc = json_object_new_object();
		json_object_object_add(e, "code", json_object_new_string(
		    br->ok ? "internal" : br->code));
		json_object_object_add(e, "message", json_object_new_string(
		    br->ok ? "backend returned a non-object result" :
		    br->message));
		json_object_object_add(sc, "error", e);
	}
	/* The same JSON as text, for clients that ignore structuredContent. */
	json_object_object_add(text, "type", json_object_new_string("text"));
	json_object_object_add(text, "text", json_object_new_string(
	    json_object_to_json_string_ext(sc, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE)));
	json_object_array_add(content, text);
	json_object_object_add(r, "content", content);
	/*
	 * structuredContent must match the outputSchema, which describes
	 * success; clients check it even on errors.  So an error travels as
	 * text only.
	 */
	if (is_object)
		json_object_object_add(r, "structuredContent", sc);
	else
		json_object_put(sc);
	json_object_object_add(r, "isError", json_object_new_boolean(
	    !is_object));
	return stateless ? stateless_result(r) : r;
}

struct json_object *
mcp_input_required(const struct backend_result *br, const char *base)
{
	const struct proposal *p = br->proposal;
	struct json_object *r = json_object_new_object();
	struct json_object *reqs = json_object_new_object();
	struct json_object *req = json_object_new_object();
	struct json_object *params = json_object_new_object();
	char url[512], msg[PROPOSAL_EFFECT_MAX + 1024];

	snprintf(url, sizeof(url), "%s/v1/approvals/%s", base, p->id);
	snprintf(msg, sizeof(msg), "The agent's %s call needs a human's "
	    "approval before it runs (this workspace gates: %s; approvals: %d "
	    "of %d). Have proposal %s approved on the mcpvm host by an "
	    "approver: `vmctl approval show %s`, then `vmctl approval approve "
	    "%s`. It would: %s. Accept once it is approved: the call is then "
	    "retried and runs once. It expires at %s.", p->tool, gates_list(p),
	    p->approvals, p->approvals_needed, p->id, p->id, p->id, p->effect,
	    p->expires_at);
	json_object_object_add(params, "mode", json_object_new_string("url"));
	json_object_object_add(params, "message", json_object_new_string(msg));
	json_object_object_add(params, "url", json_object_new_string(url));
	json_object_object_add(params, "elicitationId",
	    json_object_new_string(p->id));
	json_object_object_add(req, "method",
	    json_object_new_string("elicitation/create"));
	json_object_object_add(req, "params", params);
	json_object_object_add(reqs, MCP_APPROVAL_INPUT, req);
	json_object_object_add(r, "resultType",
	    json_object_new_string("input_required"));
	json_object_object_add(r, "inputRequests", reqs);
	return stateless_result(r);
}

struct json_object *
mcp_tool_result(const struct backend_result *br)
{
	return tool_result(br, 0);
}

struct json_object *
mcp_tool_result_stateless(const struct backend_result *br)
{
	return tool_result(br, 1);
}

int
mcp_header_value(const char *hdr, char **out)
{
	static const char pre[] = "=?base64?", suf[] = "?=";
	const char *p = hdr, *e;
	uint8_t *dec;
	size_t n, declen, i;

	*out = NULL;
	/* RFC 9110 5.5: optional whitespace is not part of the value. */
	while (*p == ' ' || *p == '\t')
		p++;
	e = p + strlen(p);
	while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	n = (size_t)(e - p);
	for (i = 0; i < n; i++)
		if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] == 0x7f)
			return -1;
	if (n >= sizeof(pre) - 1 + sizeof(suf) - 1 &&
	    memcmp(p, pre, sizeof(pre) - 1) == 0 &&
	    memcmp(e - (sizeof(suf) - 1), suf, sizeof(suf) - 1) == 0) {
		if (b64_decode(p + sizeof(pre) - 1, n - (sizeof(pre) - 1) -
		    (sizeof(suf) - 1), &dec, &declen) == -1)
			return -1;
		if (memchr(dec, '\0', declen) != NULL) {
			free(dec);
			return -1;
		}
		if ((*out = malloc(declen + 1)) == NULL)
			fatal("%s", __func__);
		memcpy(*out, dec, declen);
		(*out)[declen] = '\0';
		free(dec);
		return 0;
	}
	if ((*out = strndup(p, n)) == NULL)
		fatal("%s", __func__);
	return 0;
}

static void
reply(struct mcp_out *out, int status, struct json_object *body)
{
	out->status = status;
	out->body = body;
}

static struct json_object *
server_capabilities(int stateless)
{
	struct json_object *caps = json_object_new_object();
	struct json_object *tools = json_object_new_object();
	struct json_object *ext;

	/* The tool set is fixed for the life of the process. */
	json_object_object_add(tools, "listChanged",
	    json_object_new_boolean(0));
	json_object_object_add(caps, "tools", tools);
	/* Tasks are a 2026-07-28 extension: the session revisions have none. */
	if (stateless) {
		ext = json_object_new_object();
		json_object_object_add(ext, TASKS_EXTENSION,
		    json_object_new_object());
		json_object_object_add(caps, "extensions", ext);
	}
	return caps;
}

#define INSTRUCTIONS "Private Linux workspaces in microVMs. Create a VM " \
	"with vm_create, run commands with vm_exec and read their output " \
	"with vm_job_output."

static struct json_object *
initialize_result(const char *version)
{
	struct json_object *r = json_object_new_object();

	json_object_object_add(r, "protocolVersion",
	    json_object_new_string(version));
	json_object_object_add(r, "capabilities", server_capabilities(0));
	json_object_object_add(r, "serverInfo", server_info());
	json_object_object_add(r, "instructions",
	    json_object_new_string(INSTRUCTIONS));
	return r;
}

static void
do_initialize(const struct mcp_env *env, struct json_object *id,
    struct json_object *params, struct mcp_out *out)
{
	const char *version, *asked;
	struct session *sess;

	if (params == NULL || client_string(params, "protocolVersion",
	    &asked) == -1 || asked == NULL) {
		reply(out, 200, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
		    "initialize: params.protocolVersion must be a string "
		    "without NUL characters"));
		return;
	}
	version = mcp_negotiate_version(asked);
	switch (sessions_create(env->sessions, env->workspace, version,
	    &sess)) {
	case SESSION_OK:
		break;
	case SESSION_TOO_MANY_WORKSPACE:
		reply(out, 429, jsonrpc_error(id, MCP_ERR_LIMIT,
		    "max_sessions_per_workspace (%u): too many open MCP "
		    "sessions for this workspace; end one with DELETE /mcp",
		    env->sessions->max_per_workspace));
		return;
	case SESSION_TOO_MANY:
		reply(out, 503, jsonrpc_error(id, MCP_ERR_LIMIT,
		    "max_sessions (%u): the server has too many open MCP "
		    "sessions; retry later", env->sessions->max));
		return;
	case SESSION_NO_RANDOM:
	default:
		reply(out, 503, jsonrpc_error(id, MCP_ERR_LIMIT,
		    "the server cannot open an MCP session now; retry later"));
		return;
	}
	out->session = sess;
	out->new_session = 1;
	reply(out, 200, jsonrpc_result(id, initialize_result(version)));
}

static void
do_tools_call(struct json_object *id, struct json_object *params,
    struct mcp_out *out)
{
	struct json_object *args = NULL, *meta, *tok;
	const char *n;

	if (params == NULL || client_string(params, "name", &n) == -1 ||
	    n == NULL) {
		reply(out, 200, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
		    "tools/call: params.name must be a string without NUL "
		    "characters"));
		return;
	}
	if (strlen(n) >= sizeof(out->tool) || tools_find(n) == NULL) {
		reply(out, 200, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
		    "tools/call: unknown tool \"%.64s\"", n));
		return;
	}
	if (json_object_object_get_ex(params, "_meta", &meta) &&
	    json_object_is_type(meta, json_type_object) &&
	    json_object_object_get_ex(meta, "progressToken", &tok) &&
	    (json_object_is_type(tok, json_type_string) ||
	    json_object_is_type(tok, json_type_int)))
		out->progress_token = json_object_get(tok);
	if (!json_object_object_get_ex(params, "arguments", &args) ||
	    json_object_is_type(args, json_type_null))
		args = NULL;
	out->args = args != NULL ? json_object_get(args) :
	    json_object_new_object();
	strcpy(out->tool, n);
	out->call_id = json_object_get(id);
	out->call = 1;
	out->status = 200;
}

static void
do_request(const struct mcp_env *env, const char *method,
    struct json_object *id, struct json_object *params, struct mcp_out *out)
{
	struct json_object *cursor;

	if (strcmp(method, "ping") == 0) {
		reply(out, 200, jsonrpc_result(id, json_object_new_object()));
	} else if (strcmp(method, "tools/list") == 0) {
		struct json_object *r;

		if (json_object_object_get_ex(params, "cursor", &cursor)) {
			/* Everything fits one page, so no cursor is valid. */
			reply(out, 200, jsonrpc_error(id,
			    JSONRPC_INVALID_PARAMS, "tools/list: invalid "
			    "cursor"));
			return;
		}
		r = json_object_new_object();
		json_object_object_add(r, "tools",
		    json_object_get(tools_list_json()));
		reply(out, 200, jsonrpc_result(id, r));
	} else if (strcmp(method, "tools/call") == 0) {
		do_tools_call(id, params, out);
	} else if (strcmp(method, "initialize") == 0) {
		do_initialize(env, id, params, out);
	} else {
		reply(out, 200, jsonrpc_error(id, JSONRPC_METHOD_NOT_FOUND,
		    "method \"%.64s\" not found", method));
	}
}

static void
do_notification(const char *method, struct json_object *params,
    struct mcp_out *out)
{
	struct json_object *rid;

	out->status = 202;
	if (strcmp(method, "notifications/initialized") == 0) {
		out->session->initialized = 1;
	} else if (strcmp(method, "notifications/cancelled") == 0 &&
	    json_object_object_get_ex(params, "requestId", &rid) &&
	    (json_object_is_type(rid, json_type_string) ||
	    json_object_is_type(rid, json_type_int))) {
		out->cancel = 1;
		out->cancel_id = json_object_get(rid);
	}
	/* Any other notification is accepted and ignored, as JSON-RPC says. */
}

/*
 * 2026-07-28, the stateless revision: every request carries its version and
 * the client's capabilities in _meta, mirrors its method (and tool name) in
 * headers, and stands alone: no session, no initialize.  The bearer
 * credential alone authorizes it, as on /v1/tools.
 */
#define META_VERSION	"io.modelcontextprotocol/protocolVersion"
#define META_CAPS	"io.modelcontextprotocol/clientCapabilities"
#define META_CLIENT	"io.modelcontextprotocol/clientInfo"

/*
 * A string member whose name has dots in it (the _meta keys), which
 * client_string would read as a path: 0 with *out (NULL when absent), -1
 * for a non-string or a string with NUL.
 */
static int
member_string(struct json_object *obj, const char *key, const char **out)
{
	struct json_object *v;

	*out = NULL;
	if (!json_object_object_get_ex(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string) ||
	    strlen(json_object_get_string(v)) !=
	    (size_t)json_object_get_string_len(v))
		return -1;
	*out = json_object_get_string(v);
	return 0;
}

/* Does this message ask for the stateless revision? */
static int
wants_stateless(const struct mcp_env *env, const char *method,
    struct json_object *params)
{
	struct json_object *meta;

	if (params != NULL && json_object_object_get_ex(params, "_meta",
	    &meta) && json_object_is_type(meta, json_type_object) &&
	    json_object_object_get_ex(meta, META_VERSION, NULL))
		return 1;
	/* A version we do not serve with sessions, and no initialize. */
	return env->protocol_version != NULL &&
	    !mcp_version_supported(env->protocol_version) &&
	    (method == NULL || strcmp(method, "initialize") != 0);
}

static struct json_object *
supported_versions(void)
{
	struct json_object *a = json_object_new_array();
	size_t i;

	json_object_array_add(a, json_object_new_string(
	    MCP_VERSION_STATELESS));
	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		json_object_array_add(a, json_object_new_string(versions[i]));
	return a;
}

static struct json_object *
unsupported_version(struct json_object *id, const char *requested)
{
	struct json_object *o, *e, *data;

	o = jsonrpc_error(id, MCP_ERR_UNSUPPORTED_VERSION, mcp_version_supported(
	    requested) ? "protocol version \"%.32s\" is served with an "
	    "initialize handshake and Mcp-Session-Id; per-request _meta needs "
	    "\"" MCP_VERSION_STATELESS "\"" : "unsupported protocol version "
	    "\"%.32s\"; supported: " MCP_VERSION_STATELESS ", 2025-11-25, "
	    "2025-06-18, 2025-03-26", requested);
	json_object_object_get_ex(o, "error", &e);
	data = json_object_new_object();
	json_object_object_add(data, "supported", supported_versions());
	json_object_object_add(data, "requested",
	    json_object_new_string(requested));
	json_object_object_add(e, "data", data);
	return o;
}

/* Adds what every cacheable 2026-07-28 result carries. */
static struct json_object *
cacheable_result(struct json_object *r)
{
	/* The same for every caller: nothing in it depends on the credential. */
	json_object_object_add(r, "ttlMs", json_object_new_int(
	    MCP_LIST_TTL_MS));
	json_object_object_add(r, "cacheScope",
	    json_object_new_string("public"));
	return stateless_result(r);
}

/* 0 if the header, decoded, is the body's value; else a -32020 reply. */
static int
header_matches(struct mcp_out *out, struct json_object *id, const char *name,
    const char *hdr, const char *body)
{
	char *v;
	int ok;

	if (hdr == NULL) {
		reply(out, 400, jsonrpc_error(id, MCP_ERR_HEADER_MISMATCH,
		    "header mismatch: the %s header is required", name));
		return -1;
	}
	if (mcp_header_value(hdr, &v) == -1) {
		reply(out, 400, jsonrpc_error(id, MCP_ERR_HEADER_MISMATCH,
		    "header mismatch: the %s header is not a valid value "
		    "(control characters or bad =?base64?...?= encoding)", name));
		return -1;
	}
	ok = strcmp(v, body) == 0;
	free(v);
	if (!ok) {
		reply(out, 400, jsonrpc_error(id, MCP_ERR_HEADER_MISMATCH,
		    "header mismatch: the %s header does not match the body's "
		    "\"%.64s\"", name, body));
		return -1;
	}
	return 0;
}

static void
do_discover(struct json_object *id, struct mcp_out *out)
{
	struct json_object *r = json_object_new_object();

	json_object_object_add(r, "supportedVersions", supported_versions());
	json_object_object_add(r, "capabilities", server_capabilities(1));
	json_object_object_add(r, "instructions",
	    json_object_new_string(INSTRUCTIONS));
	reply(out, 200, jsonrpc_result(id, cacheable_result(r)));
}

static int	declares_tasks(struct json_object *);

/*
 * notifications.taskIds of subscriptions/listen from a client that
 * declared the tasks extension: the ids that parse (as tasks/get parses
 * them), at most TASK_LISTEN_MAX, into out; the accepted ones, for the
 * acknowledgement.  Whose they are is vmmd's to say, on every poll.
 */
static struct json_object *
listen_tasks(struct json_object *filter, struct mcp_out *out)
{
	struct json_object *ids, *v, *accepted = json_object_new_array();
	size_t i, n;

	if (!json_object_object_get_ex(filter, "taskIds", &ids) ||
	    !json_object_is_type(ids, json_type_array))
		return accepted;
	n = json_object_array_length(ids);
	if ((out->listen_tasks = calloc(TASK_LISTEN_MAX,
	    sizeof(*out->listen_tasks))) == NULL)
		return accepted;
	for (i = 0; i < n && out->nlisten_tasks < TASK_LISTEN_MAX; i++) {
		v = json_object_array_get_idx(ids, i);
		if (!json_object_is_type(v, json_type_string) ||
		    task_id_parse(json_object_get_string(v),
		    (size_t)json_object_get_string_len(v),
		    &out->listen_tasks[out->nlisten_tasks]) == -1)
			continue;
		out->nlisten_tasks++;
		json_object_array_add(accepted, json_object_get(v));
	}
	return accepted;
}

static void
do_listen(struct json_object *id, struct json_object *params,
    struct json_object *caps, struct mcp_out *out)
{
	struct json_object *filter, *n, *p, *meta, *ack;

	if (!json_object_object_get_ex(params, "notifications", &filter) ||
	    !json_object_is_type(filter, json_type_object)) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
		    "subscriptions/listen: params.notifications must be an "
		    "object naming the notifications wanted"));
		return;
	}
	/*
	 * The acknowledgement names what will be delivered: the tasks asked
	 * for, from a client with the tasks extension; nothing else, as the
	 * tool list never changes and mcpd has no prompts or resources.  The
	 * stream stays open (keep-alives, task notifications) until the
	 * client closes it.
	 */
	n = json_object_new_object();
	p = json_object_new_object();
	meta = json_object_new_object();
	json_object_object_add(meta, "io.modelcontextprotocol/subscriptionId",
	    json_object_get(id));
	ack = json_object_new_object();
	if (declares_tasks(caps) && json_object_object_get_ex(filter,
	    "taskIds", NULL))
		json_object_object_add(ack, "taskIds",
		    listen_tasks(filter, out));
	json_object_object_add(p, "notifications", ack);
	json_object_object_add(p, "_meta", meta);
	json_object_object_add(n, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(n, "method", json_object_new_string(
	    "notifications/subscriptions/acknowledged"));
	json_object_object_add(n, "params", p);
	out->listen = 1;
	out->call_id = json_object_get(id);
	reply(out, 200, n);
}

/* Did the client declare the tasks extension on this request? */
static int
declares_tasks(struct json_object *caps)
{
	struct json_object *ext, *t;

	return json_object_object_get_ex(caps, "extensions", &ext) &&
	    json_object_is_type(ext, json_type_object) &&
	    json_object_object_get_ex(ext, TASKS_EXTENSION, &t) &&
	    json_object_is_type(t, json_type_object);
}

static enum task_op
task_method(const char *method)
{
	if (strcmp(method, "tasks/get") == 0)
		return TASK_GET;
	if (strcmp(method, "tasks/cancel") == 0)
		return TASK_CANCEL;
	if (strcmp(method, "tasks/update") == 0)
		return TASK_UPDATE;
	return TASK_NONE;
}

/*
 * tasks/get, tasks/cancel, tasks/update: checked here, answered by
 * tasks_http.c from the backend.  A task id that does not parse is a task
 * that does not exist, as the extension says (-32602).
 */
static void
do_task(enum task_op op, int declared, struct json_object *id,
    struct json_object *params, struct mcp_out *out)
{
	struct json_object *o, *e, *data, *req, *ext, *v;

	if (!declared) {
		o = jsonrpc_error(id, MCP_ERR_MISSING_CAPABILITY, "missing "
		    "required client capability: tasks need the "
		    TASKS_EXTENSION " extension in params._meta." META_CAPS
		    ".extensions");
		json_object_object_get_ex(o, "error", &e);
		data = json_object_new_object();
		req = json_object_new_object();
		ext = json_object_new_object();
		json_object_object_add(ext, TASKS_EXTENSION,
		    json_object_new_object());
		json_object_object_add(req, "extensions", ext);
		json_object_object_add(data, "requiredCapabilities", req);
		json_object_object_add(e, "data", data);
		reply(out, 400, o);
		return;
	}
	if (!json_object_object_get_ex(params, "taskId", &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    task_id_parse(json_object_get_string(v),
	    (size_t)json_object_get_string_len(v), &out->task) == -1) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
		    "Failed to retrieve task: task not found (a task id is "
		    "vm_id.job_id.request_id or run:request_id, as the "
		    "task-augmented vm_exec or vm_run returned it)"));
		return;
	}
	if (op == TASK_UPDATE && (!json_object_object_get_ex(params,
	    "inputResponses", &v) || !json_object_is_type(v,
	    json_type_object))) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
		    "tasks/update: params.inputResponses must be an object"));
		return;
	}
	out->task_op = op;
	out->task_rpc_id = json_object_get(id);
	out->status = 200;
}

/* Did the client declare URL-mode elicitation on this request? */
static int
declares_url_elicitation(struct json_object *caps)
{
	struct json_object *e, *u;

	return json_object_object_get_ex(caps, "elicitation", &e) &&
	    json_object_is_type(e, json_type_object) &&
	    json_object_object_get_ex(e, "url", &u) &&
	    json_object_is_type(u, json_type_object);
}

/* A malformed inputResponses: -32602 with why, stateless. */
static int
bad_input(struct json_object *id, const char *why, struct mcp_out *out)
{
	mcp_out_free(out);
	reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_PARAMS, "%s", why));
	out->stateless = 1;
	return -1;
}

/*
 * A tools/call's inputResponses: ours (MCP_APPROVAL_INPUT) is the person's
 * answer to a URL-mode elicitation of an earlier try.  The call goes to
 * vmmd again either way, which alone knows whether a human approved; after
 * a decline or cancel, a call still waiting is the 2025 tool error, not the
 * same question again.  -1 when inputResponses is malformed (answered).
 */
static int
approval_input(struct json_object *id, struct json_object *caps,
    struct json_object *params, struct mcp_out *out)
{
	struct json_object *resp, *mine, *action;
	const char *a;

	out->url_elicit = declares_url_elicitation(caps);
	if (!json_object_object_get_ex(params, "inputResponses", &resp))
		return 0;
	if (!json_object_is_type(resp, json_type_object))
		return bad_input(id, "tools/call: params.inputResponses must "
		    "be an object", out);
	if (!json_object_object_get_ex(resp, MCP_APPROVAL_INPUT, &mine))
		return 0;
	if (!json_object_is_type(mine, json_type_object) ||
	    !json_object_object_get_ex(mine, "action", &action) ||
	    !json_object_is_type(action, json_type_string))
		return bad_input(id, "tools/call: params.inputResponses."
		    MCP_APPROVAL_INPUT " must be an elicitation result with an "
		    "action", out);
	a = json_object_get_string(action);
	if (strcmp(a, "decline") == 0 || strcmp(a, "cancel") == 0)
		out->url_elicit = 0;
	else if (strcmp(a, "accept") != 0)
		return bad_input(id, "tools/call: params.inputResponses."
		    MCP_APPROVAL_INPUT ".action must be accept, decline or "
		    "cancel", out);
	return 0;
}

static void
do_stateless(const struct mcp_env *env, const char *method, int has_id,
    struct json_object *id, struct json_object *params, struct mcp_out *out)
{
	struct json_object *meta = NULL, *caps, *info, *cursor, *r;
	const char *pv, *name;

	out->stateless = 1;
	if (method == NULL) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_REQUEST,
		    "a client sends no JSON-RPC responses in "
		    MCP_VERSION_STATELESS));
		return;
	}
	if (params == NULL || !json_object_object_get_ex(params, "_meta",
	    &meta) || !json_object_is_type(meta, json_type_object)) {
		/* A version we know nothing of: say which ones we serve. */
		if (env->protocol_version != NULL && strcmp(
		    env->protocol_version, MCP_VERSION_STATELESS) != 0) {
			reply(out, 400, unsupported_version(id,
			    env->protocol_version));
			return;
		}
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
		    "params._meta is required: it carries " META_VERSION
		    " and " META_CAPS " on every request"));
		return;
	}
	if (member_string(meta, META_VERSION, &pv) == -1 || pv == NULL) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
		    "params._meta." META_VERSION " must be a string"));
		return;
	}
	if (!json_object_object_get_ex(meta, META_CAPS, &caps) ||
	    !json_object_is_type(caps, json_type_object)) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
		    "params._meta." META_CAPS " must be an object"));
		return;
	}
	if (json_object_object_get_ex(meta, META_CLIENT, &info) &&
	    !json_object_is_type(info, json_type_object)) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
		    "params._meta." META_CLIENT " must be an object"));
		return;
	}
	/* Notifications: nothing in this revision needs one over HTTP. */
	if (!has_id) {
		out->status = 202;
		return;
	}
	if (header_matches(out, id, "MCP-Protocol-Version",
	    env->protocol_version, pv) == -1)
		return;
	if (strcmp(pv, MCP_VERSION_STATELESS) != 0) {
		reply(out, 400, unsupported_version(id, pv));
		return;
	}
	if (header_matches(out, id, "Mcp-Method", env->mcp_method,
	    method) == -1)
		return;
	if (strcmp(method, "tools/call") == 0 ||
	    strcmp(method, "prompts/get") == 0 ||
	    strcmp(method, "resources/read") == 0 ||
	    task_method(method) != TASK_NONE) {
		/* Tasks route by their id (the extension's routing header). */
		if (client_string(params, strcmp(method, "resources/read") == 0 ?
		    "uri" : task_method(method) != TASK_NONE ? "taskId" :
		    "name", &name) == 0 && name != NULL &&
		    header_matches(out, id, "Mcp-Name", env->mcp_name,
		    name) == -1)
			return;
	}

	if (strcmp(method, "server/discover") == 0) {
		do_discover(id, out);
	} else if (strcmp(method, "tools/list") == 0) {
		if (json_object_object_get_ex(params, "cursor", &cursor)) {
			reply(out, 400, jsonrpc_error(id,
			    JSONRPC_INVALID_PARAMS, "tools/list: invalid "
			    "cursor"));
			return;
		}
		r = json_object_new_object();
		json_object_object_add(r, "tools",
		    json_object_get(tools_list_json()));
		reply(out, 200, jsonrpc_result(id, cacheable_result(r)));
	} else if (strcmp(method, "tools/call") == 0) {
		do_tools_call(id, params, out);
		if (out->call && approval_input(id, caps, params, out) == -1)
			return;
		/* A job or a run is a task: the client polls instead of
		 * waiting. */
		if (out->call && (strcmp(out->tool, "vm_exec") == 0 ||
		    strcmp(out->tool, "vm_run") == 0) && declares_tasks(caps))
			out->task_create = 1;
	} else if (task_method(method) != TASK_NONE) {
		do_task(task_method(method), declares_tasks(caps), id, params,
		    out);
	} else if (strcmp(method, "subscriptions/listen") == 0) {
		do_listen(id, params, caps, out);
	} else {
		/* initialize, ping, logging/setLevel ... are not in it. */
		reply(out, 404, jsonrpc_error(id, JSONRPC_METHOD_NOT_FOUND,
		    "method \"%.64s\" not found in MCP " MCP_VERSION_STATELESS,
		    method));
	}
}

void
mcp_process(const struct mcp_env *env, const char *body, size_t len,
    struct mcp_out *out)
{
	struct json_object *msg, *id = NULL, *params = NULL;
	struct jsonx_err jerr;
	const char *method = NULL, *version;
	int has_id, is_response;

	memset(out, 0, sizeof(*out));
	if (mcp_json_parse(body, len, &msg, &jerr) == -1) {
		reply(out, 400, jsonrpc_error(NULL, JSONRPC_PARSE_ERROR,
		    "parse error: %s", jerr.msg));
		return;
	}
	/* Valid JSON that is no request (null included) is -32600. */
	if (json_object_is_type(msg, json_type_array)) {
		reply(out, 400, jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
		    "JSON-RPC batches are not supported; send one message "
		    "per request"));
		goto out;
	}
	if (!json_object_is_type(msg, json_type_object)) {
		reply(out, 400, jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
		    "a JSON-RPC message must be an object"));
		goto out;
	}
	has_id = json_object_object_get_ex(msg, "id", &id);
	if (has_id && !json_object_is_type(id, json_type_string) &&
	    !json_object_is_type(id, json_type_int)) {
		reply(out, 400, jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
		    "id must be a string or an integer"));
		goto out;
	}
	if (client_string(msg, "jsonrpc", &version) == -1 ||
	    version == NULL || strcmp(version, "2.0") != 0) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_REQUEST,
		    "jsonrpc must be \"2.0\""));
		goto out;
	}
	if (client_string(msg, "method", &method) == -1) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_REQUEST,
		    "method must be a string without NUL characters"));
		goto out;
	}
	is_response = method == NULL && has_id &&
	    (json_object_object_get_ex(msg, "result", NULL) ||
	    json_object_object_get_ex(msg, "error", NULL));
	if (method == NULL && !is_response) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_REQUEST,
		    "a message needs a method, or an id with a result or "
		    "error"));
		goto out;
	}
	if (json_object_object_get_ex(msg, "params", &params) &&
	    !json_object_is_type(params, json_type_object)) {
		reply(out, has_id ? 200 : 400, jsonrpc_error(id,
		    JSONRPC_INVALID_PARAMS, "params must be an object"));
		goto out;
	}

	if (wants_stateless(env, method, params)) {
		do_stateless(env, method, has_id, id, params, out);
		goto out;
	}
	/* initialize opens a session; everything else needs one. */
	if (method != NULL && has_id && strcmp(method, "initialize") == 0) {
		do_initialize(env, id, params, out);
		goto out;
	}
	if (env->session_id == NULL) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_REQUEST,
		    "Mcp-Session-Id header required: send initialize first"));
		goto out;
	}
	if ((out->session = sessions_find(env->sessions, env->session_id,
	    env->workspace)) == NULL) {
		reply(out, 404, jsonrpc_error(id, MCP_ERR_SESSION,
		    "session not found: it ended or expired; initialize a new "
		    "one"));
		goto out;
	}
	if (env->protocol_version != NULL &&
	    !mcp_version_supported(env->protocol_version)) {
		reply(out, 400, jsonrpc_error(id, JSONRPC_INVALID_REQUEST,
		    "unsupported MCP-Protocol-Version \"%.32s\"; supported: "
		    "2025-11-25, 2025-06-18, 2025-03-26",
		    env->protocol_version));
		goto out;
	}
	if (is_response) {
		out->status = 202;	/* we send no requests; ignore */
	} else if (!has_id) {
		do_notification(method, params, out);
	} else {
		do_request(env, method, id, params, out);
	}
out:
	json_object_put(msg);
}

void
mcp_out_free(struct mcp_out *out)
{
	json_object_put(out->body);
	json_object_put(out->call_id);
	json_object_put(out->args);
	json_object_put(out->progress_token);
	json_object_put(out->cancel_id);
	json_object_put(out->task_rpc_id);
	free(out->listen_tasks);
	memset(out, 0, sizeof(*out));
}
