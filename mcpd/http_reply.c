/*
 * mcpd's HTTP requests from their arrival to their answer (http_reply.h):
 * the JSON, error and SSE replies, their headers and metrics, and the
 * watch for a client that leaves while its request waits.  Runs in mcpd.
 */
#include <sys/socket.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>

#include "http_conn.h"
#include "http_reply.h"
#include "log.h"
#include "mcp.h"
#include "mcpd.h"

static double
elapsed(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	    (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

struct hreq *
hreq_new(struct mcpd *m, struct evhttp_request *req)
{
	struct hreq *hr;

	if ((hr = calloc(1, sizeof(*hr))) == NULL)
		return NULL;
	hr->m = m;
	hr->req = req;
	clock_gettime(CLOCK_MONOTONIC, &hr->start);
	route_parse(evhttp_request_get_uri(req), &hr->route);
	return hr;
}

int
http_status_for_code(const char *code)
{
	static const struct {
		const char *code;
		int status;
	} map[] = {
		{ "invalid_argument", 400 },
		{ "unauthorized", 401 },
		{ "forbidden", 403 },
		{ "not_found", 404 },
		{ "method_not_allowed", 405 },
		{ "not_acceptable", 406 },
		{ "request_timeout", 408 },
		{ "conflict", 409 },
		{ "upgrade_required", 426 },
		{ "busy", 409 },
		{ "payload_too_large", 413 },
		{ "unsupported_media_type", 415 },
		{ "quota_exceeded", 429 },
		{ "rate_limited", 429 },
		{ "internal", 500 },
		/* A gated call (issue #28): accepted, not yet run. */
		{ "approval_required", 202 },
		{ "approval_denied", 403 },
		{ "approval_expired", 410 },
		{ "unavailable", 503 },
		{ "timeout", 504 },
	};
	size_t i;

	for (i = 0; code != NULL && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i].code, code) == 0)
			return map[i].status;
	return 500;
}

struct evkeyvalq *
http_out_headers(struct hreq *hr)
{
	return evhttp_request_get_output_headers(hr->req);
}

const char *
http_in_header(struct hreq *hr, const char *name)
{
	return evhttp_find_header(evhttp_request_get_input_headers(hr->req),
	    name);
}

void
http_takeover(struct hreq *hr)
{
	if (hr->conn != NULL)
		hr->conn->hphase = HPHASE_RAW;
}

void
hreq_free(struct hreq *hr)
{
	if (hr->conn != NULL && hr->conn->active == hr)
		hr->conn->active = NULL;
	if (hr->gone_ev != NULL)
		event_free(hr->gone_ev);
	if (hr->watch_ev != NULL)
		event_free(hr->watch_ev);
	explicit_bzero(hr->token, sizeof(hr->token));
	free(hr);
}

void
http_record(struct hreq *hr, int status)
{
	hr->status = status;
	metrics_request(&hr->m->metrics, hr->route.kind, status,
	    elapsed(&hr->start));
}

void
http_common_headers(struct hreq *hr)
{
	struct evkeyvalq *h = http_out_headers(hr);

	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
}

void
http_reply(struct hreq *hr, int status, const char *ctype, const char *body,
    size_t len)
{
	struct evbuffer *b = evhttp_request_get_output_buffer(hr->req);

	http_common_headers(hr);
	if (ctype != NULL)
		evhttp_add_header(http_out_headers(hr), "Content-Type", ctype);
	if (body != NULL && len > 0)
		evbuffer_add(b, body, len);
	http_record(hr, status);
	evhttp_send_reply(hr->req, status, NULL, NULL);
	hreq_free(hr);
}

void
http_reply_json(struct hreq *hr, int status, struct json_object *o)
{
	size_t len;
	const char *s;

	s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	http_reply(hr, status, "application/json", s, len);
}

void
http_reply_error(struct hreq *hr, const char *code, const char *fmt, ...)
{
	struct json_object *o, *e;
	char msg[512];
	va_list ap;
	int status = http_status_for_code(code);

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (hr->route.kind == ROUTE_MCP) {
		/* MCP clients expect a JSON-RPC error without an id. */
		o = jsonrpc_error(NULL, -32000, "%s: %s", code, msg);
	} else {
		o = json_object_new_object();
		e = json_object_new_object();
		json_object_object_add(e, "code", json_object_new_string(code));
		json_object_object_add(e, "message",
		    json_object_new_string(msg));
		json_object_object_add(o, "error", e);
	}
	/* One challenge: auth_done may have given a more precise one. */
	if (status == 401 && evhttp_find_header(http_out_headers(hr),
	    "WWW-Authenticate") == NULL)
		evhttp_add_header(http_out_headers(hr), "WWW-Authenticate",
		    "Bearer realm=\"mcpvm\"");
	http_reply_json(hr, status, o);
	json_object_put(o);
}

void
http_stream_start(struct hreq *hr, int status)
{
	struct evkeyvalq *h = http_out_headers(hr);

	http_common_headers(hr);
	evhttp_add_header(h, "Content-Type", "text/event-stream");
	/* Proxies (nginx) must pass each event on as it is written. */
	evhttp_add_header(h, "X-Accel-Buffering", "no");
	http_record(hr, status);
	evhttp_send_reply_start(hr->req, status, NULL);
}

void
http_stream_write(struct hreq *hr, const char *data, size_t len)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL)
		return;
	evbuffer_add(b, data, len);
	evhttp_send_reply_chunk(hr->req, b);
	evbuffer_free(b);
}

void
http_stream_end(struct hreq *hr)
{
	evhttp_send_reply_end(hr->req);
	hreq_free(hr);
}

/* The client's socket became readable: EOF (or an error) means it left. */
static void
hreq_watch_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct hreq *hr = arg;
	char b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n > 0)
		return;	/* a next request: evhttp's to read; stop watching */
	if (n == -1 && (errno == EAGAIN || errno == EINTR)) {
		event_add(hr->watch_ev, NULL);
		return;
	}
	log_debug("%s: the client closed its connection", __func__);
	if (hr->on_gone != NULL)
		hr->on_gone(hr);	/* answers, and so frees, hr */
}

void
http_watch_gone(struct hreq *hr)
{
	struct bufferevent *bev;
	evutil_socket_t fd;

	if (hr->conn == NULL || hr->conn->evcon == NULL ||
	    hr->watch_ev != NULL ||
	    (bev = evhttp_connection_get_bufferevent(hr->conn->evcon)) ==
	    NULL || (fd = bufferevent_getfd(bev)) < 0)
		return;
	if ((hr->watch_ev = event_new(hr->m->base, fd, EV_READ,
	    hreq_watch_cb, hr)) != NULL)
		event_add(hr->watch_ev, NULL);
}
