/*
 * MCP JSON-RPC message handling for mcpd; see mcp.h.  Every byte of the
 * body is client-controlled: parse strictly, answer every malformed
 * message with the JSON-RPC error that names the problem.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "mcp.h"
#include "schema.h"
#include "jsonx.h"
#include "log.h"

static const char *const versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26",
};

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
tool_result_text(const char *text, size_t len)
{
	static const char pre[] = "{\"content\":[{\"type\":\"text\","
	    "\"text\":\"";
	static const char mid[] = "\"}],\"structuredContent\":";
	static const char post[] = ",\"isError\":false}";
	struct json_object *r;
	size_t elen = jsonx_escaped_len(text, len), n;
	char *buf, *p;

	n = sizeof(pre) - 1 + elen + sizeof(mid) - 1 + len + sizeof(post) - 1;
	if ((buf = malloc(n)) == NULL)
		fatal("%s", __func__);
	p = mempcpy(buf, pre, sizeof(pre) - 1);
	p += jsonx_escape(p, text, len);
	p = mempcpy(p, mid, sizeof(mid) - 1);
	p = mempcpy(p, text, len);
	p = mempcpy(p, post, sizeof(post) - 1);
	if ((r = jsonx_raw_object(buf, (size_t)(p - buf))) == NULL)
		fatal("%s", __func__);
	free(buf);
	return r;
}

struct json_object *
mcp_tool_result(const struct backend_result *br)
{
	struct json_object *r, *content, *text, *sc;
	int is_object = br->ok && json_object_is_type(br->result,
	    json_type_object);

	if (br->ok && br->text != NULL)
		return tool_result_text(br->text, br->textlen);
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
	return r;
}

static void
reply(struct mcp_out *out, int status, struct json_object *body)
{
	out->status = status;
	out->body = body;
}

static struct json_object *
initialize_result(const char *version)
{
	struct json_object *r = json_object_new_object();
	struct json_object *caps = json_object_new_object();
	struct json_object *tools = json_object_new_object();
	struct json_object *info = json_object_new_object();

	json_object_object_add(tools, "listChanged",
	    json_object_new_boolean(0));
	json_object_object_add(caps, "tools", tools);
	json_object_object_add(info, "name", json_object_new_string("mcpvm"));
	json_object_object_add(info, "version",
	    json_object_new_string(MCPVM_VERSION));
	json_object_object_add(r, "protocolVersion",
	    json_object_new_string(version));
	json_object_object_add(r, "capabilities", caps);
	json_object_object_add(r, "serverInfo", info);
	json_object_object_add(r, "instructions", json_object_new_string(
	    "Private Linux workspaces in microVMs. Create a VM with vm_create, "
	    "run commands with vm_exec and read their output with "
	    "vm_job_output."));
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
		    "too many open MCP sessions for this workspace (%u); "
		    "end one with DELETE /mcp", env->sessions->max_per_workspace));
		return;
	case SESSION_TOO_MANY:
	case SESSION_NO_RANDOM:
	default:
		reply(out, 503, jsonrpc_error(id, MCP_ERR_LIMIT,
		    "the server has too many open MCP sessions; retry later"));
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
	memset(out, 0, sizeof(*out));
}
