/*
 * libFuzzer target: one POST body through mcpd's MCP core (strict JSON
 * parse by common/jsonx, JSON-RPC validation, sessions, method dispatch)
 * with no backend, and the reply rendered as mcpd would send it.  Also
 * checks that whatever jsonx's grammar check accepts, json-c builds, and
 * that a body that parses is never answered as a parse error.  The first
 * byte also picks the 2026-07-28 (stateless) headers, and the input is fed
 * to the Mcp-Name/Mcp-Param decoder as a header value and to the task id
 * parser (tasks.c) as a tasks/get taskId.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "schema.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sessions sessions;
	static char sid[SESSION_ID_LEN + 1];
	static int init;
	struct mcp_env env;
	struct mcp_out out;
	struct json_object *o, *e, *c;
	struct jsonx_err jerr;
	int parsed;

	if (!init) {
		char err[256];

		if (tools_init(err, sizeof(err)) == -1)
			abort();
		sessions_init(&sessions, 64, 64, 3600);
		init = 1;
	}
	if (sessions.count == 0) {
		struct session *s;

		if (sessions_create(&sessions, "ws-a", "2025-11-25", &s) !=
		    SESSION_OK)
			abort();
		memcpy(sid, s->id, sizeof(sid));
	}

	/* The grammar check and json-c agree on what is JSON. */
	parsed = mcp_json_parse((const char *)data, size, &o, &jerr) == 0;
	if (parsed)
		json_object_put(o);
	else if (strstr(jerr.msg, "(json-c)") != NULL)
		abort();

	memset(&env, 0, sizeof(env));
	env.sessions = &sessions;
	env.workspace = "ws-a";
	env.session_id = size > 0 && (data[0] & 1) ? sid : NULL;
	env.protocol_version = size > 0 && (data[0] & 2) ? "2025-06-18" : NULL;
	if (size > 0 && (data[0] & 4)) {
		env.protocol_version = MCP_VERSION_STATELESS;
		env.mcp_method = (data[0] & 8) ? "tools/call" : "tools/list";
		env.mcp_name = (data[0] & 16) ? " vm_list " :
		    "=?base64?dm1fbGlzdA==?=";
	}
	mcp_process(&env, (const char *)data, size, &out);
	if (out.stateless && out.status == 200 && out.body != NULL &&
	    !out.listen && !json_object_object_get_ex(out.body, "error", NULL)) {
		struct json_object *r;

		/* Every stateless result says what type it is. */
		if (!json_object_object_get_ex(out.body, "result", &r) ||
		    !json_object_object_get_ex(r, "resultType", NULL))
			abort();
	}
	/* The session revisions never answer with a stateless body. */
	if (out.stateless && out.new_session)
		abort();
	if (out.status < 200 || out.status > 599)
		abort();
	/* Valid JSON is never a parse error (it was, for the body null). */
	if (parsed && out.body != NULL &&
	    json_object_object_get_ex(out.body, "error", &e) &&
	    json_object_object_get_ex(e, "code", &c) &&
	    json_object_get_int(c) == JSONRPC_PARSE_ERROR)
		abort();
	if (out.body != NULL)
		json_object_to_json_string_ext(out.body,
		    JSON_C_TO_STRING_PLAIN);
	else if (out.status != 202 && !out.call && out.task_op == TASK_NONE)
		abort();
	/* A task request goes to the backend only with a well-formed id. */
	if (out.task_op != TASK_NONE && (out.task.request_id[0] == '\0' ||
	    (!out.task.run && (out.task.vm_id[0] == '\0' ||
	    out.task.job_id[0] == '\0'))))
		abort();
	mcp_out_free(&out);
	{
		char *hdr, *v;

		if ((hdr = strndup((const char *)data, size)) == NULL)
			abort();
		if (mcp_header_value(hdr, &v) == 0) {
			if (v == NULL || strlen(v) > strlen(hdr))
				abort();
			free(v);
		}
		free(hdr);
	}
	/* The same body as a 2026-07-28 tasks/get of task v1.j1.r1, so that
	 * the tasks requests' checks (capability, Mcp-Name, id) are reached. */
	memset(&env, 0, sizeof(env));
	env.sessions = &sessions;
	env.workspace = "ws-a";
	env.protocol_version = MCP_VERSION_STATELESS;
	env.mcp_method = "tasks/get";
	env.mcp_name = "v1.j1.r1";
	mcp_process(&env, (const char *)data, size, &out);
	if (out.task_op != TASK_NONE && (out.body != NULL || out.call ||
	    strcmp(out.task.vm_id, "v1") != 0 ||
	    strcmp(out.task.job_id, "j1") != 0 ||
	    strcmp(out.task.request_id, "r1") != 0))
		abort();
	if (out.body == NULL && out.status != 202 && !out.call &&
	    out.task_op == TASK_NONE)
		abort();
	mcp_out_free(&out);
	/* As a subscriptions/listen: the tasks it follows are bounded, and
	 * each is a task id that parses. */
	env.mcp_method = "subscriptions/listen";
	env.mcp_name = NULL;
	mcp_process(&env, (const char *)data, size, &out);
	if (out.nlisten_tasks > TASK_LISTEN_MAX ||
	    (out.nlisten_tasks > 0 && !out.listen))
		abort();
	for (size_t i = 0; i < out.nlisten_tasks; i++) {
		char id[TASK_ID_MAX + 1];
		struct task_id t;

		task_id_string(&out.listen_tasks[i], id, sizeof(id));
		if (task_id_parse(id, strlen(id), &t) == -1)
			abort();
	}
	mcp_out_free(&out);
	{
		struct task_id t;
		char id[TASK_ID_MAX + 1];

		/* A task id that parses formats back to the same bytes. */
		if (task_id_parse((const char *)data, size, &t) == 0 &&
		    ((t.run ? task_run_id_format(t.request_id, id,
		    sizeof(id)) : task_id_format(t.vm_id, t.job_id,
		    t.request_id, id, sizeof(id))) == -1 ||
		    strlen(id) != size || memcmp(id, data, size) != 0))
			abort();
	}
	/* initialize opens sessions: keep the table from filling. */
	if (sessions.count > 32)
		sessions_clear(&sessions);
	return 0;
}
