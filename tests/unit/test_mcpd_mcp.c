/*
 * Unit tests for mcpd's JSON-RPC/MCP core (mcpd/mcp.c), its strict JSON
 * parse (common/jsonx, through mcp_json_parse) and sessions (mcpd/session.c).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "schema.h"
#include "../check_run.h"

static struct sessions sessions;

static void
setup(void)
{
	char err[256];

	ck_assert_int_eq(tools_init(err, sizeof(err)), 0);
	sessions_init(&sessions, 8, 4, 60);
}

static void
teardown(void)
{
	sessions_clear(&sessions);
	tools_cleanup();
}

/* Runs one message; returns the error code of the reply, or 0. */
static int
run(const char *ws, const char *sid, const char *pv, const char *body,
    struct mcp_out *out)
{
	struct mcp_env env = { &sessions, ws, sid, pv };
	struct json_object *e, *c;

	mcp_process(&env, body, strlen(body), out);
	if (out->body != NULL && json_object_object_get_ex(out->body,
	    "error", &e) && json_object_object_get_ex(e, "code", &c))
		return json_object_get_int(c);
	return 0;
}

/* Opens a session for workspace ws; returns its id (static buffer). */
static const char *
open_session(const char *ws, const char *version)
{
	static char id[SESSION_ID_LEN + 1];
	struct mcp_out out;
	char body[256];

	snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":1,"
	    "\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
	    "\"%s\",\"capabilities\":{}}}", version);
	ck_assert_int_eq(run(ws, NULL, NULL, body, &out), 0);
	ck_assert_int_eq(out.status, 200);
	ck_assert_int_eq(out.new_session, 1);
	strcpy(id, out.session->id);
	mcp_out_free(&out);
	return id;
}

START_TEST(version_negotiation)
{
	ck_assert_str_eq(mcp_negotiate_version("2025-11-25"), "2025-11-25");
	ck_assert_str_eq(mcp_negotiate_version("2025-06-18"), "2025-06-18");
	ck_assert_str_eq(mcp_negotiate_version("2025-03-26"), "2025-03-26");
	ck_assert_str_eq(mcp_negotiate_version("2030-01-01"), "2025-11-25");
	ck_assert_str_eq(mcp_negotiate_version("2024-11-05"), "2025-11-25");
	ck_assert_str_eq(mcp_negotiate_version(""), "2025-11-25");
	ck_assert_str_eq(mcp_negotiate_version(NULL), "2025-11-25");
	ck_assert_int_eq(mcp_version_supported("2025-06-18"), 1);
	ck_assert_int_eq(mcp_version_supported("2025-06-19"), 0);
	ck_assert_int_eq(mcp_version_supported(NULL), 0);
}
END_TEST

START_TEST(initialize_answers_and_binds)
{
	struct mcp_out out;
	struct json_object *r, *v;
	const char *sid;

	ck_assert_int_eq(run("ws-a", NULL, NULL, "{\"jsonrpc\":\"2.0\","
	    "\"id\":\"x\",\"method\":\"initialize\",\"params\":"
	    "{\"protocolVersion\":\"2031-02-03\"}}", &out), 0);
	ck_assert(json_object_object_get_ex(out.body, "result", &r));
	ck_assert(json_object_object_get_ex(r, "protocolVersion", &v));
	ck_assert_str_eq(json_object_get_string(v), "2025-11-25");
	ck_assert(json_object_object_get_ex(out.body, "id", &v));
	ck_assert_str_eq(json_object_get_string(v), "x");
	ck_assert_str_eq(out.session->workspace, "ws-a");
	mcp_out_free(&out);

	sid = open_session("ws-a", "2025-06-18");
	ck_assert_int_eq(run("ws-a", sid, "2025-06-18", "{\"jsonrpc\":\"2.0\","
	    "\"id\":2,\"method\":\"ping\"}", &out), 0);
	ck_assert_int_eq(out.status, 200);
	mcp_out_free(&out);
	/* Another workspace cannot use it: indistinguishable from unknown. */
	ck_assert_int_eq(run("ws-b", sid, NULL, "{\"jsonrpc\":\"2.0\","
	    "\"id\":2,\"method\":\"ping\"}", &out), MCP_ERR_SESSION);
	ck_assert_int_eq(out.status, 404);
	mcp_out_free(&out);
	ck_assert_int_eq(run("ws-a", "ffffffffffffffffffffffffffffffff",
	    NULL, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}", &out),
	    MCP_ERR_SESSION);
	ck_assert_int_eq(out.status, 404);
	mcp_out_free(&out);
	ck_assert_int_eq(run("ws-a", NULL, NULL, "{\"jsonrpc\":\"2.0\","
	    "\"id\":2,\"method\":\"ping\"}", &out), JSONRPC_INVALID_REQUEST);
	ck_assert_int_eq(out.status, 400);
	mcp_out_free(&out);
	/* A version served by neither era: the stateless revision's error. */
	ck_assert_int_eq(run("ws-a", sid, "2024-01-01", "{\"jsonrpc\":\"2.0\","
	    "\"id\":2,\"method\":\"ping\"}", &out),
	    MCP_ERR_UNSUPPORTED_VERSION);
	ck_assert_int_eq(out.status, 400);
	mcp_out_free(&out);
}
END_TEST

START_TEST(jsonrpc_errors)
{
	static const struct {
		const char *body;
		int status, code;
	} cases[] = {
		{ "", 400, JSONRPC_PARSE_ERROR },
		{ "{", 400, JSONRPC_PARSE_ERROR },
		{ "{\"a\":'b'}", 400, JSONRPC_PARSE_ERROR },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} {}", 400,
		    JSONRPC_PARSE_ERROR },
		{ "[]", 400, JSONRPC_INVALID_REQUEST },
		{ "7", 400, JSONRPC_INVALID_REQUEST },
		{ "{\"id\":1,\"method\":\"ping\"}", 400,
		    JSONRPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":2,\"id\":1,\"method\":\"ping\"}", 400,
		    JSONRPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", 400,
		    JSONRPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", 400,
		    JSONRPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":null}", 400,
		    JSONRPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\"}", 400, JSONRPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}",
		    200, JSONRPC_INVALID_PARAMS },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
		    "\"params\":{\"protocolVersion\":5}}", 200,
		    JSONRPC_INVALID_PARAMS },
	};
	struct mcp_out out;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int code = run("ws-a", NULL, NULL, cases[i].body, &out);

		ck_assert_msg(code == cases[i].code, "case %zu: code %d", i,
		    code);
		ck_assert_msg(out.status == cases[i].status, "case %zu: %d", i,
		    out.status);
		mcp_out_free(&out);
	}
}
END_TEST

START_TEST(methods_in_a_session)
{
	struct mcp_out out;
	struct json_object *r, *tools;
	const char *sid = open_session("ws-a", "2025-11-25");

#define MSG(s) "{\"jsonrpc\":\"2.0\"," s "}"
	ck_assert_int_eq(run("ws-a", sid, NULL, MSG("\"id\":1,\"method\":"
	    "\"tools/list\""), &out), 0);
	ck_assert(json_object_object_get_ex(out.body, "result", &r));
	ck_assert(json_object_object_get_ex(r, "tools", &tools));
	ck_assert_int_eq(json_object_array_length(tools), 17);
	mcp_out_free(&out);
	ck_assert_int_eq(run("ws-a", sid, NULL, MSG("\"id\":1,\"method\":"
	    "\"resources/list\""), &out), JSONRPC_METHOD_NOT_FOUND);
	mcp_out_free(&out);
	ck_assert_int_eq(run("ws-a", sid, NULL, MSG("\"id\":1,\"method\":"
	    "\"tools/call\",\"params\":{\"name\":\"nope\"}"), &out),
	    JSONRPC_INVALID_PARAMS);
	mcp_out_free(&out);
	ck_assert_int_eq(run("ws-a", sid, NULL, MSG("\"id\":1,\"method\":"
	    "\"tools/call\",\"params\":{\"name\":7}"), &out),
	    JSONRPC_INVALID_PARAMS);
	mcp_out_free(&out);
	/* A call to forward, with its progress token. */
	ck_assert_int_eq(run("ws-a", sid, NULL, MSG("\"id\":9,\"method\":"
	    "\"tools/call\",\"params\":{\"name\":\"vm_list\",\"arguments\":"
	    "{\"a\":1},\"_meta\":{\"progressToken\":\"t\"}}"), &out), 0);
	ck_assert_int_eq(out.call, 1);
	ck_assert_str_eq(out.tool, "vm_list");
	ck_assert_str_eq(json_object_get_string(out.progress_token), "t");
	ck_assert_int_eq(json_object_get_int(out.call_id), 9);
	ck_assert(json_object_is_type(out.args, json_type_object));
	mcp_out_free(&out);
	/* Notifications and responses: 202, no body. */
	ck_assert_int_eq(run("ws-a", sid, NULL, MSG("\"method\":"
	    "\"notifications/initialized\""), &out), 0);
	ck_assert_int_eq(out.status, 202);
	ck_assert_ptr_null(out.body);
	mcp_out_free(&out);
	ck_assert_int_eq(run("ws-a", sid, NULL, MSG("\"method\":"
	    "\"notifications/cancelled\",\"params\":{\"requestId\":9}"),
	    &out), 0);
	ck_assert_int_eq(out.cancel, 1);
	ck_assert_int_eq(json_object_get_int(out.cancel_id), 9);
	mcp_out_free(&out);
	ck_assert_int_eq(run("ws-a", sid, NULL, MSG("\"id\":4,\"result\":{}"),
	    &out), 0);
	ck_assert_int_eq(out.status, 202);
	mcp_out_free(&out);
}
END_TEST

START_TEST(tool_results)
{
	struct backend_result ok = { .ok = 1 };
	struct backend_result bad = { .code = "busy", .message = "VM is busy" };
	struct backend_result text = { .ok = 1, .text = "{\"vms\":[1]} ",
	    .textlen = 11 };
	static const char *texts[] = {
		"{\"vms\":[]}",
		("{\"s\":\"quote \\\" backslash \\\\ slash / tab \\t nl \\n "
		    "ctl \\u0001 \xc3\xa9 \xe2\x82\xac\"}"),
		"{\"a\":{\"b\":[true,false,null,-1,7]},\"c\":\"\"}",
	};
	struct json_object *r, *v, *sc, *e;

	ok.result = json_tokener_parse("{\"vms\":[]}");
	r = mcp_tool_result(&ok);
	ck_assert(json_object_object_get_ex(r, "isError", &v));
	ck_assert_int_eq(json_object_get_boolean(v), 0);
	ck_assert(json_object_object_get_ex(r, "structuredContent", &sc));
	ck_assert(json_object_object_get_ex(r, "content", &v));
	ck_assert_str_eq(json_object_get_string(json_object_object_get(
	    json_object_array_get_idx(v, 0), "text")), "{\"vms\":[]}");
	json_object_put(r);
	json_object_put(ok.result);
	/*
	 * A result as text (vmmd's) is written directly: it must read exactly
	 * as the same result given as an object, escapes and all.
	 */
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct backend_result t = { .ok = 1, .text = texts[i],
		    .textlen = strlen(texts[i]) };
		struct backend_result o = { .ok = 1,
		    .result = json_tokener_parse(texts[i]) };
		struct json_object *rt, *ro;
		int fl = JSON_C_TO_STRING_PLAIN |
		    JSON_C_TO_STRING_NOSLASHESCAPE;

		ck_assert_ptr_nonnull(o.result);
		rt = mcp_tool_result(&t);
		ro = mcp_tool_result(&o);
		ck_assert_str_eq(json_object_to_json_string_ext(rt, fl),
		    json_object_to_json_string_ext(ro, fl));
		json_object_put(rt);
		json_object_put(ro);
		json_object_put(o.result);
	}
	/* And its text content is the result's text, unchanged. */
	r = mcp_tool_result(&text);
	sc = json_tokener_parse(json_object_to_json_string(r));
	ck_assert(json_object_object_get_ex(sc, "content", &v));
	ck_assert_str_eq(json_object_get_string(json_object_object_get(
	    json_object_array_get_idx(v, 0), "text")), "{\"vms\":[1]}");
	ck_assert(json_object_object_get_ex(sc, "isError", &v));
	ck_assert_int_eq(json_object_get_boolean(v), 0);
	json_object_put(sc);
	json_object_put(r);
	r = mcp_tool_result(&bad);
	ck_assert(json_object_object_get_ex(r, "isError", &v));
	ck_assert_int_eq(json_object_get_boolean(v), 1);
	/* No structuredContent: it would have to match the outputSchema. */
	ck_assert(!json_object_object_get_ex(r, "structuredContent", &sc));
	ck_assert(json_object_object_get_ex(r, "content", &v));
	sc = json_tokener_parse(json_object_get_string(json_object_object_get(
	    json_object_array_get_idx(v, 0), "text")));
	ck_assert(json_object_object_get_ex(sc, "error", &e));
	ck_assert_str_eq(json_object_get_string(json_object_object_get(e,
	    "code")), "busy");
	ck_assert_str_eq(json_object_get_string(json_object_object_get(e,
	    "message")), "VM is busy");
	json_object_put(sc);
	json_object_put(r);
}
END_TEST

START_TEST(session_limits_and_expiry)
{
	struct session *s;
	int i;

	for (i = 0; i < 4; i++)
		ck_assert_int_eq(sessions_create(&sessions, "ws-a",
		    "2025-11-25", &s), SESSION_OK);
	ck_assert_int_eq(sessions_create(&sessions, "ws-a", "2025-11-25",
	    &s), SESSION_TOO_MANY_WORKSPACE);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(sessions_create(&sessions, "ws-b",
		    "2025-11-25", &s), SESSION_OK);
	ck_assert_int_eq(sessions_create(&sessions, "ws-c", "2025-11-25",
	    &s), SESSION_TOO_MANY);
	ck_assert_uint_eq(sessions_expire(&sessions, time(NULL)), 0);
	ck_assert_uint_eq(sessions_expire(&sessions, time(NULL) + 61), 8);
	ck_assert_uint_eq(sessions.count, 0);
}
END_TEST

/*
 * Issue 14, finding 14: what one strict JSON layer (common/jsonx) refuses
 * never reaches a handler, and valid JSON that is no request is -32600,
 * never a parse error.  Each case is a body as a client sends it.
 */
START_TEST(strict_json_regressions)
{
	static const struct {
		const char *body;
		int status, code;
	} cases[] = {
		/* json-c alone reads this as 18446744073709551615. */
		{ MSG("\"id\":99999999999999999999999,\"method\":\"ping\""),
		    400, JSONRPC_PARSE_ERROR },
		{ MSG("\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"vm_list\",\"arguments\":{\"n\":99999999999999999999999}}"),
		    400, JSONRPC_PARSE_ERROR },
		{ MSG("\"id\":-99999999999999999999999,\"method\":\"ping\""),
		    400, JSONRPC_PARSE_ERROR },
		/* ... and this as infinity. */
		{ MSG("\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"vm_list\",\"arguments\":{\"n\":1e999}}"), 400,
		    JSONRPC_PARSE_ERROR },
		{ MSG("\"id\":1,\"method\":\"ping\",\"params\":{\"x\":-1e999}"),
		    400, JSONRPC_PARSE_ERROR },
		/* Valid JSON, but not a request. */
		{ "null", 400, JSONRPC_INVALID_REQUEST },
		{ " null\n", 400, JSONRPC_INVALID_REQUEST },
		{ "true", 400, JSONRPC_INVALID_REQUEST },
		{ "\"x\"", 400, JSONRPC_INVALID_REQUEST },
		/* C would read each string only up to its U+0000. */
		{ MSG("\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"vm_list\\u0000junk\",\"arguments\":{}}"), 200,
		    JSONRPC_INVALID_PARAMS },
		{ MSG("\"id\":1,\"method\":\"ping\\u0000junk\""), 400,
		    JSONRPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\\u0000junk\",\"id\":1,\"method\":"
		    "\"ping\"}", 400, JSONRPC_INVALID_REQUEST },
		{ MSG("\"id\":1,\"method\":\"initialize\",\"params\":{"
		    "\"protocolVersion\":\"2025-06-18\\u0000junk\"}"), 200,
		    JSONRPC_INVALID_PARAMS },
	};
	const char *sid = open_session("ws-a", "2025-11-25");
	struct mcp_out out;
	char bad[2048] = "";
	size_t i, used = 0;

	/* Every case is run, and every wrong answer named. */
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int code = run("ws-a", sid, NULL, cases[i].body, &out);

		if ((code != cases[i].code || out.status != cases[i].status ||
		    out.call || out.new_session) && used < sizeof(bad))
			used += (size_t)snprintf(bad + used, sizeof(bad) - used,
			    " [case %zu: code %d status %d%s]", i, code,
			    out.status, out.call ? " forwarded" : "");
		mcp_out_free(&out);
	}
	ck_assert_msg(bad[0] == '\0', "wrong answers:%s", bad);
}
END_TEST

START_TEST(strict_json)
{
	static const struct {
		const char *s;
		int ok;
	} cases[] = {
		{ "{}", 1 }, { " [ ] ", 1 }, { "0", 1 }, { "-0.5e+3", 1 },
		{ "\"\\ud83d\\ude00\"", 1 }, { "{\"a\":[1,{\"b\":null}]}", 1 },
		{ "true", 1 }, { "\"\xc3\xa9\"", 1 }, { "null", 1 },
		{ "\"a\\u0000b\"", 1 },	/* JSON; the getters refuse it */
		{ "", 0 }, { "{", 0 }, { "[1,]", 0 }, { "[,1]", 0 },
		{ "{\"a\"}", 0 }, { "{\"a\":1,}", 0 }, { "{'a':1}", 0 },
		{ "01", 0 }, { "1.", 0 }, { ".5", 0 }, { "+1", 0 },
		{ "NaN", 0 }, { "Infinity", 0 }, { "tru", 0 },
		{ "\"\\x\"", 0 }, { "\"\\ud800\"", 0 }, { "\"\\udc00\"", 0 },
		{ "\"a\nb\"", 0 }, { "\"\xc0\xaf\"", 0 }, { "\"\xff\"", 0 },
		{ "{} {}", 0 }, { "/* c */ {}", 0 }, { "[1] x", 0 },
		{ "{\"a\":1 \"b\":2}", 0 },
		{ "99999999999999999999999", 0 }, { "9223372036854775808", 0 },
		{ "1e999", 0 }, { "-1e999", 0 },
	};
	char deep[200];
	struct jsonx_err err;
	struct json_object *o;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ok = mcp_json_parse(cases[i].s, strlen(cases[i].s), &o,
		    &err) == 0;

		ck_assert_msg(ok == cases[i].ok, "case %zu (%s)", i,
		    cases[i].s);
		/* Only the text null parses to no object. */
		ck_assert(!ok || (o == NULL) == (strcmp(cases[i].s, "null") ==
		    0));
		json_object_put(o);
	}
	memset(deep, '[', 64);
	memset(deep + 64, ']', 64);
	ck_assert_int_eq(mcp_json_parse(deep, 128, &o, &err), 0);
	json_object_put(o);
	memset(deep, '[', 65);
	memset(deep + 65, ']', 65);
	ck_assert_int_eq(mcp_json_parse(deep, 130, &o, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "nested deeper"));
	/* A NUL inside a document is not JSON. */
	ck_assert_int_eq(mcp_json_parse("{}\0", 3, &o, &err), -1);
}
END_TEST

/* 2026-07-28: one stateless message with its headers. */
static int
run_sl(const char *sid, const char *pv, const char *mhdr, const char *nhdr,
    const char *body, struct mcp_out *out)
{
	struct mcp_env env = { &sessions, "ws-a", sid, pv, mhdr, nhdr };
	struct json_object *e, *c;

	mcp_process(&env, body, strlen(body), out);
	if (out->body != NULL && json_object_object_get_ex(out->body,
	    "error", &e) && json_object_object_get_ex(e, "code", &c))
		return json_object_get_int(c);
	return 0;
}

#define META "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":" \
	"\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}"
#define SL "2026-07-28"

static struct json_object *
result_of(struct mcp_out *out)
{
	struct json_object *r;

	ck_assert(json_object_object_get_ex(out->body, "result", &r));
	return r;
}

static const char *
str_at(struct json_object *o, const char *k)
{
	struct json_object *v;

	ck_assert_msg(json_object_object_get_ex(o, k, &v), "no %s", k);
	return json_object_get_string(v);
}

START_TEST(stateless_discover_and_list)
{
	struct mcp_out out;
	struct json_object *r, *v, *m;
	unsigned int before = sessions.count;
	size_t i, n;
	int has_sl = 0, has_legacy = 0;

	ck_assert_int_eq(run_sl(NULL, SL, "server/discover", NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\","
	    "\"params\":{" META "}}", &out), 0);
	ck_assert_int_eq(out.status, 200);
	ck_assert_int_eq(out.stateless, 1);
	ck_assert_int_eq(out.new_session, 0);
	ck_assert_ptr_null(out.session);
	ck_assert_uint_eq(sessions.count, before);
	r = result_of(&out);
	ck_assert_str_eq(str_at(r, "resultType"), "complete");
	ck_assert_str_eq(str_at(r, "cacheScope"), "public");
	ck_assert(json_object_object_get_ex(r, "ttlMs", &v));
	ck_assert_int_eq(json_object_get_int(v), MCP_LIST_TTL_MS);
	ck_assert(json_object_object_get_ex(r, "capabilities", &v));
	ck_assert(json_object_object_get_ex(v, "tools", NULL));
	ck_assert(json_object_object_get_ex(r, "supportedVersions", &v));
	n = json_object_array_length(v);
	for (i = 0; i < n; i++) {
		const char *s = json_object_get_string(
		    json_object_array_get_idx(v, i));

		has_sl |= strcmp(s, "2026-07-28") == 0;
		has_legacy |= strcmp(s, "2025-11-25") == 0;
	}
	ck_assert(has_sl && has_legacy);
	ck_assert(json_object_object_get_ex(r, "_meta", &m));
	ck_assert(json_object_object_get_ex(m,
	    "io.modelcontextprotocol/serverInfo", &v));
	ck_assert_str_eq(str_at(v, "name"), "mcpvm");
	mcp_out_free(&out);

	/* tools/list without a session; a stray session id is ignored. */
	ck_assert_int_eq(run_sl("ffffffffffffffffffffffffffffffff", SL,
	    "tools/list", NULL, "{\"jsonrpc\":\"2.0\",\"id\":\"x\","
	    "\"method\":\"tools/list\",\"params\":{" META "}}", &out), 0);
	ck_assert_int_eq(out.status, 200);
	r = result_of(&out);
	ck_assert(json_object_object_get_ex(r, "tools", &v));
	ck_assert_int_eq(json_object_array_length(v), 17);
	ck_assert_str_eq(str_at(r, "resultType"), "complete");
	ck_assert(json_object_object_get_ex(r, "ttlMs", NULL));
	ck_assert_str_eq(str_at(r, "cacheScope"), "public");
	mcp_out_free(&out);
}
END_TEST

START_TEST(stateless_meta_and_versions)
{
	struct mcp_out out;
	struct json_object *e, *d;

	/* No _meta, or a part of it missing: -32602 with 400. */
	ck_assert_int_eq(run_sl(NULL, SL, "tools/list", NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &out),
	    JSONRPC_INVALID_PARAMS);
	ck_assert_int_eq(out.status, 400);
	mcp_out_free(&out);
	ck_assert_int_eq(run_sl(NULL, SL, "tools/list", NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":"
	    "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":"
	    "\"2026-07-28\"}}}", &out), JSONRPC_INVALID_PARAMS);
	ck_assert_int_eq(out.status, 400);
	mcp_out_free(&out);
	ck_assert_int_eq(run_sl(NULL, SL, "tools/list", NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":"
	    "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":7,"
	    "\"io.modelcontextprotocol/clientCapabilities\":{}}}}", &out),
	    JSONRPC_INVALID_PARAMS);
	mcp_out_free(&out);
	/* The header must be there and say what _meta says. */
	ck_assert_int_eq(run_sl(NULL, NULL, "tools/list", NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
	    "\"params\":{" META "}}", &out), MCP_ERR_HEADER_MISMATCH);
	ck_assert_int_eq(out.status, 400);
	mcp_out_free(&out);
	ck_assert_int_eq(run_sl(NULL, "2025-11-25", "tools/list", NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
	    "\"params\":{" META "}}", &out), MCP_ERR_HEADER_MISMATCH);
	mcp_out_free(&out);
	/* An unknown version: -32022 naming ours and echoing theirs. */
	ck_assert_int_eq(run_sl(NULL, "v9", "tools/list", NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":301,\"method\":\"tools/list\",\"params\":"
	    "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"v9\","
	    "\"io.modelcontextprotocol/clientCapabilities\":{}}}}", &out),
	    MCP_ERR_UNSUPPORTED_VERSION);
	ck_assert_int_eq(out.status, 400);
	ck_assert_int_eq(json_object_get_int(json_object_object_get(out.body,
	    "id")), 301);
	ck_assert(json_object_object_get_ex(out.body, "error", &e));
	ck_assert(json_object_object_get_ex(e, "data", &d));
	ck_assert_str_eq(str_at(d, "requested"), "v9");
	ck_assert_int_eq(json_object_array_length(json_object_object_get(d,
	    "supported")), 4);
	mcp_out_free(&out);
	/* A legacy version in _meta is not served statelessly. */
	ck_assert_int_eq(run_sl(NULL, "2025-11-25", "tools/list", NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":"
	    "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":"
	    "\"2025-11-25\",\"io.modelcontextprotocol/clientCapabilities\":"
	    "{}}}}", &out), MCP_ERR_UNSUPPORTED_VERSION);
	mcp_out_free(&out);
	/* Without the header or _meta, it is the legacy path as before. */
	ck_assert_int_eq(run_sl(NULL, NULL, NULL, NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &out),
	    JSONRPC_INVALID_REQUEST);
	ck_assert_int_eq(out.stateless, 0);
	mcp_out_free(&out);
}
END_TEST

START_TEST(stateless_headers)
{
	static const struct {
		const char	*method, *name;
		int		 code;
	} cases[] = {
		{ NULL, "vm_list", MCP_ERR_HEADER_MISMATCH },
		{ "tools/list", "vm_list", MCP_ERR_HEADER_MISMATCH },
		{ "TOOLS/CALL", "vm_list", MCP_ERR_HEADER_MISMATCH },
		{ "tools/call", NULL, MCP_ERR_HEADER_MISMATCH },
		{ "tools/call", "vm_status", MCP_ERR_HEADER_MISMATCH },
		{ "tools/call", "VM_LIST", MCP_ERR_HEADER_MISMATCH },
		{ "tools/call", "=?base64?dm1fbGlzdA=?=", MCP_ERR_HEADER_MISMATCH },
		{ "tools/call", "=?base64?dm1fc3RhdHVz?=", MCP_ERR_HEADER_MISMATCH },
		{ "tools/call", "vm_list", 0 },
		{ "  tools/call\t", " vm_list  ", 0 },
		{ "tools/call", "=?base64?dm1fbGlzdA==?=", 0 },
	};
	struct mcp_out out;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(run_sl(NULL, SL, cases[i].method,
		    cases[i].name, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":"
		    "\"tools/call\",\"params\":{\"name\":\"vm_list\","
		    "\"arguments\":{}," META "}}", &out), cases[i].code);
		if (cases[i].code != 0) {
			ck_assert_int_eq(out.status, 400);
			ck_assert_int_eq(out.call, 0);
		} else {
			ck_assert_int_eq(out.call, 1);
			ck_assert_int_eq(out.stateless, 1);
			ck_assert_ptr_null(out.session);
			ck_assert_str_eq(out.tool, "vm_list");
		}
		mcp_out_free(&out);
	}
}
END_TEST

START_TEST(stateless_methods)
{
	static const char *removed[] = {
		"initialize", "ping", "logging/setLevel", "resources/subscribe",
		"prompts/list", "no/such",
	};
	struct mcp_out out;
	struct json_object *p, *m, *v;
	char body[512];
	size_t i;

	for (i = 0; i < sizeof(removed) / sizeof(removed[0]); i++) {
		snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":5,"
		    "\"method\":\"%s\",\"params\":{" META "}}", removed[i]);
		ck_assert_int_eq(run_sl(NULL, SL, removed[i], NULL, body,
		    &out), JSONRPC_METHOD_NOT_FOUND);
		ck_assert_int_eq(out.status, 404);
		ck_assert_int_eq(json_object_get_int(json_object_object_get(
		    out.body, "id")), 5);
		mcp_out_free(&out);
	}
	/* subscriptions/listen: acknowledged first, tagged with its id. */
	ck_assert_int_eq(run_sl(NULL, SL, "subscriptions/listen", NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"subscriptions/listen\","
	    "\"params\":{\"notifications\":{\"toolsListChanged\":true},"
	    META "}}", &out), 0);
	ck_assert_int_eq(out.listen, 1);
	ck_assert_int_eq(out.status, 200);
	ck_assert_str_eq(str_at(out.body, "method"),
	    "notifications/subscriptions/acknowledged");
	ck_assert(json_object_object_get_ex(out.body, "params", &p));
	/* mcpd's tool list never changes, so nothing is promised. */
	ck_assert(json_object_object_get_ex(p, "notifications", &v));
	ck_assert_int_eq(json_object_object_length(v), 0);
	ck_assert(json_object_object_get_ex(p, "_meta", &m));
	ck_assert(json_object_object_get_ex(m,
	    "io.modelcontextprotocol/subscriptionId", &v));
	ck_assert_int_eq(json_object_get_int(v), 77);
	mcp_out_free(&out);
	ck_assert_int_eq(run_sl(NULL, SL, "subscriptions/listen", NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":78,\"method\":\"subscriptions/listen\","
	    "\"params\":{" META "}}", &out), JSONRPC_INVALID_PARAMS);
	ck_assert_int_eq(out.listen, 0);
	mcp_out_free(&out);
	/* A client sends no responses. */
	ck_assert_int_eq(run_sl(NULL, SL, NULL, NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", &out),
	    JSONRPC_INVALID_REQUEST);
	ck_assert_int_eq(out.status, 400);
	mcp_out_free(&out);
}
END_TEST

START_TEST(stateless_tool_result_and_header_values)
{
	struct backend_result text = { .ok = 1, .text = "{\"vms\":[]}",
	    .textlen = 10 };
	struct backend_result bad = { .code = "busy", .message = "VM is busy" };
	struct json_object *r, *p, *m;
	char *v;

	r = mcp_tool_result_stateless(&text);
	p = json_tokener_parse(json_object_to_json_string(r));
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(str_at(p, "resultType"), "complete");
	ck_assert(json_object_object_get_ex(p, "_meta", &m));
	ck_assert(json_object_object_get_ex(m,
	    "io.modelcontextprotocol/serverInfo", NULL));
	ck_assert(json_object_object_get_ex(p, "structuredContent", NULL));
	json_object_put(p);
	json_object_put(r);
	r = mcp_tool_result_stateless(&bad);
	ck_assert_str_eq(str_at(r, "resultType"), "complete");
	ck_assert(json_object_get_boolean(json_object_object_get(r,
	    "isError")));
	json_object_put(r);
	/* The legacy result has neither. */
	r = mcp_tool_result(&bad);
	ck_assert(!json_object_object_get_ex(r, "resultType", NULL));
	json_object_put(r);

	ck_assert_int_eq(mcp_header_value(" \tabc \t", &v), 0);
	ck_assert_str_eq(v, "abc");
	free(v);
	ck_assert_int_eq(mcp_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=",
	    &v), 0);
	ck_assert_str_eq(v, "Hello, \xe4\xb8\x96\xe7\x95\x8c");
	free(v);
	/* Not the sentinel: literal. */
	ck_assert_int_eq(mcp_header_value("=?base64?SGVsbG8=", &v), 0);
	ck_assert_str_eq(v, "=?base64?SGVsbG8=");
	free(v);
	ck_assert_int_eq(mcp_header_value("=?base64?SGVsbG8?=", &v), -1);
	ck_assert_int_eq(mcp_header_value("=?base64?SGVs!!!bG8=?=", &v), -1);
	ck_assert_int_eq(mcp_header_value("=?base64?AA==?=", &v), -1);
	ck_assert_int_eq(mcp_header_value("a\x01" "b", &v), -1);
	ck_assert_int_eq(mcp_header_value("=?base64?" "?=", &v), 0);
	ck_assert_str_eq(v, "");
	free(v);
}
END_TEST

/* The task id: strict parts, bounded, and round trips (tasks.c). */
START_TEST(task_ids)
{
	static const char *const bad[] = { "", ".", "..", "v1.j1", "v1..r1",
	    ".j1.r1", "v1.j1.", "v1.j:1.r", "-v.j1.r1", "v1._j.r1", "v1.j1.:r",
	    "v1.j/1.r1", "v1.j1.r 1", "v1.j1.r\xc3\xa9", "run:", "run:.r",
	    "run:r/1", "run:r 1", "Run:r1", "run;r1", "run.r1", NULL };
	struct task_id t;
	char buf[TASK_ID_MAX + 2], v[66], j[66], r[130];
	size_t i;

	ck_assert_int_eq(task_id_parse("vm-3f.j01_x.req.1:a-b", 21, &t), 0);
	ck_assert_str_eq(t.vm_id, "vm-3f");
	ck_assert_str_eq(t.job_id, "j01_x");
	ck_assert_str_eq(t.request_id, "req.1:a-b");
	for (i = 0; bad[i] != NULL; i++)
		ck_assert_msg(task_id_parse(bad[i], strlen(bad[i]), &t) == -1 &&
		    t.vm_id[0] == '\0', "%s parsed", bad[i]);
	/* A NUL inside is not the end of the id. */
	ck_assert_int_eq(task_id_parse("v1.j1.r1\0x", 10, &t), -1);
	/* Each part at its limit, then one over. */
	memset(v, 'v', 64); v[64] = '\0';
	memset(j, 'j', 64); j[64] = '\0';
	memset(r, 'r', 128); r[128] = '\0';
	ck_assert_int_eq(task_id_format(v, j, r, buf, sizeof(buf)), 0);
	ck_assert_uint_eq(strlen(buf), TASK_ID_MAX);
	ck_assert_int_eq(task_id_parse(buf, strlen(buf), &t), 0);
	ck_assert_str_eq(t.request_id, r);
	v[64] = 'v'; v[65] = '\0';
	ck_assert_int_eq(task_id_format(v, "j", "r", buf, sizeof(buf)), -1);
	r[128] = 'r'; r[129] = '\0';
	ck_assert_int_eq(task_id_format("v", "j", r, buf, sizeof(buf)), -1);
	ck_assert_int_eq(task_id_format("v", "j", "r", buf, 5), -1);
	/* A vm_run's: "run:" and its request_id, which may hold dots. */
	ck_assert_int_eq(task_id_parse("run:r.1:x", 9, &t), 0);
	ck_assert(t.run);
	ck_assert_str_eq(t.request_id, "r.1:x");
	ck_assert_str_eq(t.vm_id, "");
	task_id_string(&t, buf, sizeof(buf));
	ck_assert_str_eq(buf, "run:r.1:x");
	ck_assert_int_eq(task_id_parse("run:r1\0", 7, &t), -1);
	ck_assert(!t.run);
	r[128] = '\0';
	ck_assert_int_eq(task_run_id_format(r, buf, sizeof(buf)), 0);
	ck_assert_int_eq(task_id_parse(buf, strlen(buf), &t), 0);
	ck_assert_str_eq(t.request_id, r);
	r[128] = 'r';
	ck_assert_int_eq(task_run_id_format(r, buf, sizeof(buf)), -1);
	ck_assert_int_eq(task_run_id_format("a b", buf, sizeof(buf)), -1);
	/* An exec id is never a run's, nor the other way round. */
	ck_assert_int_eq(task_id_parse("run.j1.r1", 9, &t), 0);
	ck_assert(!t.run);
	ck_assert_str_eq(t.vm_id, "run");
}
END_TEST

static const char *
member_str(struct json_object *o, const char *k)
{
	return json_object_get_string(json_object_object_get(o, k));
}

/* tasks/get of a vm_run from vmmd's answers about its run (tasks.c). */
START_TEST(task_run_shapes)
{
	struct task_id t = { "", "", "rr.1", 1 };
	struct json_object *look, *r, *res;

	r = task_run_created("rr.1", 1764583200000LL, "working");
	ck_assert_str_eq(member_str(r, "taskId"), "run:rr.1");
	ck_assert_str_eq(member_str(r, "status"), "working");
	ck_assert_str_eq(member_str(r, "resultType"), "task");
	ck_assert_str_eq(member_str(r, "createdAt"), "2025-12-01T10:00:00Z");
	json_object_put(r);
	ck_assert_ptr_null(task_run_created("bad id", 0, "working"));

	look = json_tokener_parse("{\"state\":\"starting\",\"created_at\":"
	    "\"2026-12-01T10:00:00.000Z\",\"request_id\":\"rr.1\"}");
	r = task_run_get(&t, look);
	ck_assert_str_eq(member_str(r, "status"), "working");
	ck_assert_str_eq(member_str(r, "resultType"), "complete");
	json_object_put(r);
	json_object_put(look);

	/* Running: where its output so far is paged. */
	look = json_tokener_parse("{\"state\":\"running\",\"created_at\":"
	    "\"2026-12-01T10:00:00.000Z\",\"vm_id\":\"vm9\",\"job_id\":"
	    "\"j9\",\"status\":{\"stdout_bytes\":7,\"stderr_bytes\":2}}");
	r = task_run_get(&t, look);
	ck_assert_str_eq(member_str(r, "status"), "working");
	ck_assert_ptr_nonnull(strstr(member_str(r, "statusMessage"),
	    "VM vm9 as job j9; 7 bytes of stdout and 2 of stderr"));
	json_object_put(r);
	json_object_put(look);

	/* Ended: vm_run's result as a plain vm_run answers it. */
	look = json_tokener_parse("{\"state\":\"ended\",\"created_at\":"
	    "\"2026-12-01T10:00:00.000Z\",\"finished_at\":"
	    "\"2026-12-01T10:00:09.000Z\",\"result\":{\"vm_id\":\"vm9\","
	    "\"state\":\"completed\",\"exit_code\":0,\"origin\":\"warm\"}}");
	r = task_run_get(&t, look);
	ck_assert_str_eq(member_str(r, "status"), "completed");
	ck_assert_str_eq(member_str(r, "lastUpdatedAt"),
	    "2026-12-01T10:00:09.000Z");
	res = json_object_object_get(r, "result");
	ck_assert(!json_object_get_boolean(json_object_object_get(res,
	    "isError")));
	ck_assert_str_eq(member_str(json_object_object_get(res,
	    "structuredContent"), "origin"), "warm");
	json_object_put(r);
	/* Cancelled: no result. */
	json_object_object_add(json_object_object_get(look, "result"),
	    "state", json_object_new_string("cancelled"));
	r = task_run_get(&t, look);
	ck_assert_str_eq(member_str(r, "status"), "cancelled");
	ck_assert(!json_object_object_get_ex(r, "result", NULL));
	json_object_put(r);
	json_object_put(look);

	/* The tool's error is a completed task (isError); an unknown
	 * outcome a failed one, its error inlined and no result. */
	look = json_tokener_parse("{\"state\":\"ended\",\"error\":{"
	    "\"code\":\"quota_exceeded\",\"message\":\"max_vms\"}}");
	r = task_run_get(&t, look);
	ck_assert_str_eq(member_str(r, "status"), "completed");
	ck_assert(json_object_get_boolean(json_object_object_get(
	    json_object_object_get(r, "result"), "isError")));
	json_object_put(r);
	json_object_put(look);
	look = json_tokener_parse("{\"state\":\"uncertain\"}");
	r = task_run_get(&t, look);
	ck_assert_str_eq(member_str(r, "status"), "failed");
	ck_assert(!json_object_object_get_ex(r, "result", NULL));
	ck_assert_int_eq(json_object_get_int(json_object_object_get(
	    json_object_object_get(r, "error"), "code")), -32603);
	json_object_put(r);
	json_object_put(look);
	look = json_tokener_parse("{\"state\":\"elsewhere\"}");
	ck_assert_ptr_null(task_run_get(&t, look));
	json_object_put(look);
}
END_TEST

/* tasks/get's answers from vm_job_status and vm_job_output (tasks.c). */
START_TEST(task_shapes)
{
	struct task_id t = { "vm1", "j1", "r.1" };
	struct json_object *st, *out, *r, *res, *v;
	struct backend_result br = { .ok = 1 };

	st = json_tokener_parse("{\"state\":\"running\",\"started_at\":"
	    "\"2026-12-01T10:00:00Z\",\"finished_at\":null,"
	    "\"stdout_bytes\":5,\"stderr_bytes\":0}");
	ck_assert_int_eq(task_from_status(&t, st, &r), 0);
	ck_assert_str_eq(json_object_get_string(json_object_object_get(r,
	    "status")), "working");
	ck_assert_str_eq(json_object_get_string(json_object_object_get(r,
	    "taskId")), "vm1.j1.r.1");
	ck_assert_str_eq(json_object_get_string(json_object_object_get(r,
	    "resultType")), "complete");
	ck_assert(json_object_object_get_ex(r, "ttlMs", &v) && v == NULL);
	ck_assert_int_eq(json_object_get_int(json_object_object_get(r,
	    "pollIntervalMs")), 1000);
	ck_assert(!json_object_object_get_ex(r, "result", NULL));
	json_object_put(r);
	json_object_object_add(st, "state", json_object_new_string("failed"));
	json_object_object_add(st, "finished_at",
	    json_object_new_string("2026-12-01T10:00:09Z"));
	ck_assert_int_eq(task_from_status(&t, st, &r), 1);
	ck_assert_ptr_null(r);
	out = json_tokener_parse("{\"vm_id\":\"vm1\",\"job_id\":\"j1\","
	    "\"state\":\"failed\",\"exit_code\":3,\"stdout\":\"x\"}");
	r = task_completed(&t, st, out);
	ck_assert_str_eq(json_object_get_string(json_object_object_get(r,
	    "status")), "completed");
	ck_assert_str_eq(json_object_get_string(json_object_object_get(r,
	    "lastUpdatedAt")), "2026-12-01T10:00:09Z");
	res = json_object_object_get(json_object_object_get(r, "result"),
	    "structuredContent");
	ck_assert_str_eq(json_object_get_string(json_object_object_get(res,
	    "request_id")), "r.1");
	ck_assert_int_eq(json_object_get_int(json_object_object_get(res,
	    "exit_code")), 3);
	ck_assert(!json_object_object_get_ex(json_object_object_get(res,
	    "output"), "vm_id", NULL));
	json_object_put(r);
	json_object_put(out);
	json_object_object_add(st, "state",
	    json_object_new_string("cancelled"));
	ck_assert_int_eq(task_from_status(&t, st, &r), 0);
	ck_assert_str_eq(json_object_get_string(json_object_object_get(r,
	    "status")), "cancelled");
	json_object_put(r);
	json_object_object_del(st, "started_at");
	ck_assert_int_eq(task_from_status(&t, st, &r), -1);
	json_object_put(st);
	/* A started job becomes a task; anything else is no task. */
	br.text = "{\"vm_id\":\"vm1\",\"job_id\":\"j1\",\"state\":"
	    "\"running\",\"started_at\":\"2026-12-01T10:00:00Z\"}";
	br.textlen = strlen(br.text);
	r = task_created(&br, "r.1");
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(json_object_get_string(json_object_object_get(r,
	    "resultType")), "task");
	ck_assert_str_eq(json_object_get_string(json_object_object_get(r,
	    "taskId")), "vm1.j1.r.1");
	json_object_put(r);
	ck_assert_ptr_null(task_created(&br, "bad id"));
	br.text = "[1]";
	br.textlen = 3;
	ck_assert_ptr_null(task_created(&br, "r.1"));
	br.ok = 0;
	ck_assert_ptr_null(task_created(&br, "r.1"));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("mcpd_mcp");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, version_negotiation);
	tcase_add_test(tc, initialize_answers_and_binds);
	tcase_add_test(tc, jsonrpc_errors);
	tcase_add_test(tc, methods_in_a_session);
	tcase_add_test(tc, tool_results);
	tcase_add_test(tc, session_limits_and_expiry);
	tcase_add_test(tc, strict_json);
	tcase_add_test(tc, strict_json_regressions);
	tcase_add_test(tc, stateless_discover_and_list);
	tcase_add_test(tc, stateless_meta_and_versions);
	tcase_add_test(tc, stateless_headers);
	tcase_add_test(tc, stateless_methods);
	tcase_add_test(tc, stateless_tool_result_and_header_values);
	tcase_add_test(tc, task_ids);
	tcase_add_test(tc, task_shapes);
	tcase_add_test(tc, task_run_shapes);
	suite_add_tcase(s, tc);
	return check_run(s);
}
