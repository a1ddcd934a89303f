/*
 * What every request to mcpd goes through once its connection has taken
 * it (http.c): the Host and Origin checks, the route and its method, the
 * bearer credential and its verification, the workspace's connection
 * limit, then dispatch to MCP, JSON HTTP or streams.  The metrics listener's requests have checks of their own.
 * Runs in mcpd.
 */
#include <event2/buffer.h>
#include <event2/http.h>

#include "http_limits.h"
#include "http_reply.h"
#include "http_route.h"
#include "mcpd.h"

static void
auth_done(enum auth_status st, const struct auth_identity *id, void *arg)
{
	struct hreq *hr = arg;

	switch (st) {
	case AUTH_OK:
		hr->id = *id;
		break;
	case AUTH_UNAUTHORIZED:
		evhttp_add_header(http_out_headers(hr), "WWW-Authenticate",
		    "Bearer realm=\"mcpvm\", error=\"invalid_token\"");
		http_reply_error(hr, "unauthorized", "the credential is "
		    "unknown, expired or revoked");
		return;
	case AUTH_UNAVAILABLE:
	default:
		http_reply_error(hr, "unavailable", "credentials cannot be "
		    "verified right now (authd unavailable); retry later");
		return;
	}
	if (conn_limit_workspace(hr) == -1)
		return;
	switch (hr->route.kind) {
	case ROUTE_MCP:
		mcp_http_handle(hr);
		break;
	case ROUTE_TOOL:
		rest_handle(hr);
		break;
	case ROUTE_STREAM:
		stream_handle(hr);
		break;
	case ROUTE_BROKER:
		broker_handle(hr);
		break;
	default:
		http_reply_error(hr, "internal", "unroutable request");
		break;
	}
}

static int
method_allowed(struct hreq *hr, const char **allow)
{
	enum evhttp_cmd_type t = evhttp_request_get_command(hr->req);

	switch (hr->route.kind) {
	case ROUTE_MCP:
		*allow = "GET, POST, DELETE";
		return t == EVHTTP_REQ_GET || t == EVHTTP_REQ_POST ||
		    t == EVHTTP_REQ_DELETE;
	case ROUTE_TOOL:
		*allow = "POST";
		return t == EVHTTP_REQ_POST;
	case ROUTE_STREAM:
	case ROUTE_BROKER:
	case ROUTE_HEALTHZ:
	case ROUTE_METRICS:
	case ROUTE_APPROVAL:
		*allow = "GET";
		return t == EVHTTP_REQ_GET;
	case ROUTE_NONE:
		break;
	}
	*allow = "";
	return 0;
}

/*
 * GET /v1/approvals/{id}: where a 2026-07-28 URL-mode elicitation sends the
 * person at the MCP client.  Approving is not done here, nor over any other
 * route of mcpd: the page says so and how, and holds nothing but the id in
 * its URL (no credential: a browser has none), so it shows no workspace
 * anything of another's.
 */
static void
approval_page(struct hreq *hr)
{
	const char *id = hr->route.proposal;
	char page[2048];
	int n;

	n = snprintf(page, sizeof(page),
	    "mcpvm: proposal %s\n\n"
	    "An agent's tool call is waiting for a human's approval.  It is\n"
	    "approved or denied on the mcpvm host, by a member of the\n"
	    "mcpvm-approvers group with an enrolled approver key, never from\n"
	    "here nor by the agent:\n\n"
	    "    vmctl approval show %s\n"
	    "    vmctl approval approve %s\n"
	    "    vmctl approval deny %s\n\n"
	    "`show` prints what the call would do and its arguments in full.\n"
	    "Once enough approvers have approved, the agent's retry of the\n"
	    "same call runs it, once.  This page shows nothing of the\n"
	    "proposal itself.\n", id, id, id, id);
	http_reply(hr, 200, "text/plain; charset=utf-8", page, (size_t)n);
}

void
http_route(struct hreq *hr)
{
	struct mcpd *m = hr->m;
	const char *host, *origin, *allow, *authz;

	if ((host = http_in_header(hr, "Host")) == NULL) {
		http_reply_error(hr, "invalid_argument", "the Host header is "
		    "required");
		return;
	}
	if (!host_allowed(m->cfg, host)) {
		http_reply_error(hr, "forbidden", "Host \"%.100s\" is not in "
		    "allowed_hosts", host);
		return;
	}
	origin = http_in_header(hr, "Origin");
	if (!origin_allowed(m->cfg, origin)) {
		http_reply_error(hr, "forbidden", "Origin \"%.100s\" is not in "
		    "allowed_origins", origin);
		return;
	}
	if (hr->route.kind == ROUTE_NONE || hr->route.kind == ROUTE_METRICS) {
		http_reply_error(hr, "not_found", "no such resource");
		return;
	}
	if (!method_allowed(hr, &allow)) {
		evhttp_add_header(http_out_headers(hr), "Allow", allow);
		http_reply_error(hr, "method_not_allowed", "use %s", allow);
		return;
	}
	if (hr->route.kind == ROUTE_HEALTHZ) {
		static const char ok[] = "{\"status\":\"ok\"}";

		http_reply(hr, 200, "application/json", ok, sizeof(ok) - 1);
		return;
	}
	if (hr->route.kind == ROUTE_APPROVAL) {
		approval_page(hr);
		return;
	}
	authz = http_in_header(hr, "Authorization");
	if (bearer_parse(authz, hr->token, sizeof(hr->token)) == -1) {
		http_reply_error(hr, "unauthorized", authz == NULL ?
		    "Authorization: Bearer <credential> is required" :
		    "the Authorization header is not a bearer credential");
		return;
	}
	m->auth->verify(m->auth_ctx, hr->token, auth_done, hr);
}

void
http_route_metrics(struct evhttp_request *req, void *arg)
{
	struct mcpd *m = arg;
	struct hreq *hr;
	struct evbuffer *b;
	const char *allow;

	if ((hr = hreq_new(m, req)) == NULL) {
		evhttp_send_error(req, 503, NULL);
		return;
	}
	/* A browser must not read metrics either. */
	if (http_in_header(hr, "Origin") != NULL) {
		http_reply_error(hr, "forbidden", "requests with an Origin "
		    "are refused");
		return;
	}
	if (hr->route.kind != ROUTE_METRICS) {
		http_reply_error(hr, "not_found", "this listener serves "
		    "/metrics only");
		return;
	}
	if (!method_allowed(hr, &allow)) {
		evhttp_add_header(http_out_headers(hr), "Allow", allow);
		http_reply_error(hr, "method_not_allowed", "use %s", allow);
		return;
	}
	/* Count this scrape before rendering so it shows in itself. */
	http_record(hr, 200);
	http_common_headers(hr);
	evhttp_add_header(http_out_headers(hr), "Content-Type",
	    "text/plain; version=0.0.4; charset=utf-8");
	b = evhttp_request_get_output_buffer(req);
	m->metrics.open_sessions = m->sessions.count;
	metrics_render(&m->metrics, b);
	evhttp_send_reply(req, 200, NULL, NULL);
	hreq_free(hr);
}
