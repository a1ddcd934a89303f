/*
 * JSON HTTP for mcpd: POST /v1/tools/{name} takes the tool's arguments as
 * the body and answers with the tool's result, or a non-2xx status with
 * {"error":{"code","message"}}.  Same validation and authorization as MCP.
 * A call waiting for a human's approval (issue #28) answers 202, 403 or 410
 * with {"error":{...},"proposal":{...}}.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "http_reply.h"
#include "log.h"
#include "mcp.h"
#include "mcpd.h"
#include "schema.h"

struct rest_call {
	struct mcpd		*m;
	struct hreq		*hr;
	struct backend_call	*bc;
	struct budget		*budget;	/* its workspace's calls */
	struct event		*timer;
};

static void
rest_free(struct rest_call *rc)
{
	budget_put(&rc->m->budgets, rc->budget, BUDGET_CALLS);
	rc->m->metrics.inflight_calls--;
	event_free(rc->timer);
	free(rc);
}

/*
 * A gated call: 202 approval_required, 403 approval_denied or 410
 * approval_expired, with the proposal beside the error.
 */
static void
rest_proposal(struct hreq *hr, const struct backend_result *br)
{
	struct json_object *o = json_object_new_object();
	struct json_object *e = json_object_new_object();

	json_object_object_add(e, "code", json_object_new_string(br->code));
	json_object_object_add(e, "message",
	    json_object_new_string(br->message));
	json_object_object_add(o, "error", e);
	json_object_object_add(o, "proposal", proposal_to_json(br->proposal));
	http_reply_json(hr, http_status_for_code(br->code), o);
	json_object_put(o);
}

static void
rest_done(const struct backend_result *br, void *arg)
{
	struct rest_call *rc = arg;
	struct hreq *hr = rc->hr;

	rc->bc = NULL;
	hr->on_gone = NULL;
	if (br->ok && br->text != NULL)
		http_reply(hr, 200, "application/json", br->text,
		    br->textlen);
	else if (br->ok)
		http_reply_json(hr, 200, br->result);
	else if (br->proposal != NULL)
		rest_proposal(hr, br);
	else
		http_reply_error(hr, br->code, "%s", br->message);
	rest_free(rc);
}

static void
rest_cancel(struct rest_call *rc)
{
	if (rc->bc != NULL)
		rc->m->backend->cancel(rc->m->backend_ctx, rc->bc);
	rc->bc = NULL;
	rc->hr->on_gone = NULL;
}

static void
rest_gone(struct hreq *hr)
{
	struct rest_call *rc = hr->owner;

	rest_cancel(rc);
	/* Nobody reads this; it releases evhttp's request. */
	http_reply(hr, 499, NULL, NULL, 0);
	rest_free(rc);
}

static void
rest_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct rest_call *rc = arg;

	rest_cancel(rc);
	http_reply_error(rc->hr, "timeout", "the tool did not finish within "
	    "tool_timeout");
	rest_free(rc);
}

void
rest_handle(struct hreq *hr)
{
	struct mcpd *m = hr->m;
	struct evbuffer *in = evhttp_request_get_input_buffer(hr->req);
	struct json_object *args;
	struct rest_call *rc;
	struct budget *b;
	struct timeval tv = { m->cfg->tool_timeout, 0 };
	const char *body;
	struct jsonx_err jerr;
	char msg[512];
	const struct tool *tool;
	size_t len;

	if ((tool = tools_find(hr->route.tool)) == NULL) {
		http_reply_error(hr, "not_found", "no tool named \"%s\"",
		    hr->route.tool);
		return;
	}
	if (!content_type_is_json(http_in_header(hr, "Content-Type"))) {
		http_reply_error(hr, "unsupported_media_type", "Content-Type "
		    "must be application/json");
		return;
	}
	len = evbuffer_get_length(in);
	if ((body = (const char *)evbuffer_pullup(in, -1)) == NULL)
		body = "";
	if (mcp_json_parse(body, len, &args, &jerr) == -1) {
		http_reply_error(hr, "invalid_argument", "request body is not "
		    "valid JSON: %s", jerr.msg);
		return;
	}
	if (!json_object_is_type(args, json_type_object)) {
		http_reply_error(hr, "invalid_argument", "the body must be a "
		    "JSON object of the tool's arguments");
		json_object_put(args);
		return;
	}
	if (tool_validate_input(tool, args, msg, sizeof(msg)) == -1) {
		http_reply_error(hr, "invalid_argument", "%s", msg);
		json_object_put(args);
		return;
	}
	if (budget_take(&m->budgets, hr->id.workspace, BUDGET_CALLS, &b) ==
	    -1) {
		json_object_put(args);
		http_reply_error(hr, "rate_limited", "%s (%u): this workspace "
		    "already has %u tool calls in flight; retry once one has "
		    "finished", budget_key(BUDGET_CALLS),
		    m->cfg->max_calls_per_workspace, budget_held(&m->budgets,
		    hr->id.workspace, BUDGET_CALLS));
		return;
	}
	if ((rc = calloc(1, sizeof(*rc))) == NULL ||
	    (rc->timer = evtimer_new(m->base, rest_timeout, rc)) == NULL) {
		free(rc);
		budget_put(&m->budgets, b, BUDGET_CALLS);
		json_object_put(args);
		http_reply_error(hr, "unavailable", "out of memory");
		return;
	}
	rc->m = m;
	rc->budget = b;
	rc->hr = hr;
	m->metrics.inflight_calls++;
	hr->owner = rc;
	hr->on_gone = rest_gone;
	http_watch_gone(hr);
	evtimer_add(rc->timer, &tv);
	rc->bc = m->backend->call(m->backend_ctx, hr->route.tool, args,
	    hr->token, &hr->id, rest_done, NULL, rc);
	json_object_put(args);
}
