/*
 * mcpd's HTTP front end on libevent's evhttp: listeners, the limits evhttp
 * lacks (connections in total and per client address, a deadline for each
 * whole request so slow clients cannot pin connections, requests per
 * connection), the Host/Origin/bearer checks every route goes through, and
 * dispatch to MCP, JSON HTTP and streams.  Runs in mcpd.
 *
 * evhttp 2.1 has no accept hook.  Its bevcb lets us create each
 * connection's bufferevent; right after, once evhttp has installed its
 * callbacks on it (their argument is the evhttp_connection), we find the
 * connection, count it and set a close callback that tells us when evhttp
 * lets it go, whatever the reason.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>

#include "http_conn.h"
#include "http_limits.h"
#include "http_reply.h"
#include "log.h"
#include "mcpd.h"

static void	hreq_gone_cb(evutil_socket_t, short, void *);

/* Connection accounting. */

static struct hconn *
conn_lookup(struct mcpd *m, struct evhttp_connection *evcon)
{
	struct hconn *c;

	TAILQ_FOREACH(c, &m->conns, entry)
		if (c->evcon == evcon)
			return c;
	return NULL;
}

static void	conn_closed(struct evhttp_connection *, void *);

static void
conn_free(struct hconn *c)
{
	struct mcpd *m = c->m;

	if (c->active != NULL) {
		c->active->conn = NULL;
		c->active = NULL;
	}
	if (c->admitted) {
		m->nconns--;
		m->metrics.open_connections--;
	}
	if (c->incb != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_input(c->bev),
		    c->incb);
	event_free(c->admit_ev);
	event_free(c->deadline);
	TAILQ_REMOVE(&m->conns, c, entry);
	free(c);
}

/*
 * Runs once, right after evhttp took the new connection: binds c to its
 * evhttp_connection and applies the connection limits.
 */
static void
conn_admit(struct hconn *c)
{
	struct bufferevent *bev = c->bev;
	bufferevent_data_cb readcb;
	void *cbarg = NULL;

	bufferevent_getcb(bev, &readcb, NULL, NULL, &cbarg);
	if (readcb == NULL || cbarg == NULL ||
	    evhttp_connection_get_bufferevent(cbarg) != bev) {
		/* evhttp already dropped it (its setup failed). */
		conn_free(c);
		bufferevent_decref(bev);
		return;
	}
	c->evcon = cbarg;
	evhttp_connection_set_closecb(c->evcon, conn_closed, c);
	/* From now on the close callback tells us when it goes. */
	bufferevent_decref(bev);

	conn_limit_admit(c);
}

static void
conn_admit_cb(evutil_socket_t fd, short ev, void *arg)
{
	conn_admit(arg);
}

/* evhttp's close callback: the client is gone, maybe mid-request. */
static void
conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct hconn *c = arg;
	struct hreq *hr = c->active;

	/* Its socket closes with it: nothing may watch the number after. */
	if (hr != NULL && hr->watch_ev != NULL) {
		event_free(hr->watch_ev);
		hr->watch_ev = NULL;
	}
	/* Deferred: we are inside evhttp_connection_free here. */
	if (hr != NULL && hr->on_gone != NULL && hr->gone_ev == NULL &&
	    (hr->gone_ev = event_new(c->m->base, -1, 0, hreq_gone_cb,
	    hr)) != NULL)
		event_active(hr->gone_ev, EV_TIMEOUT, 1);
	conn_free(c);
}

static void
hreq_gone_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct hreq *hr = arg;

	/* The event dies with hr, so hr is still the live request. */
	if (hr->on_gone != NULL)
		hr->on_gone(hr);
}

static struct bufferevent *
conn_new(struct event_base *base, void *arg)
{
	struct mcpd *m = arg;
	struct bufferevent *bev = NULL;
	struct hconn *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		goto fail;
	c->m = m;
	strcpy(c->peerstr, "unknown");
	if ((c->admit_ev = event_new(base, -1, 0, conn_admit_cb, c)) == NULL ||
	    (c->deadline = evtimer_new(base, conn_deadline_cb, c)) == NULL)
		goto fail;
	if ((bev = bufferevent_socket_new(base, -1,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL)
		goto fail;
	/* Held until conn_admit, in case evhttp drops it before. */
	bufferevent_incref(bev);
	c->bev = bev;
	c->incb = evbuffer_add_cb(bufferevent_get_input(bev), conn_input_cb,
	    c);
	TAILQ_INSERT_HEAD(&m->conns, c, entry);
	/* evhttp sets up the connection right after we return. */
	event_active(c->admit_ev, EV_TIMEOUT, 1);
	conn_arm_deadline(c);
	return bev;
fail:
	/* evhttp falls back to a bufferevent of its own; it is refused. */
	log_warnx("%s: out of memory", __func__);
	if (c != NULL) {
		if (c->admit_ev != NULL)
			event_free(c->admit_ev);
		if (c->deadline != NULL)
			event_free(c->deadline);
		free(c);
	}
	return NULL;
}

static void
req_complete(struct evhttp_request *req, void *arg)
{
	struct hconn *c = arg;

	/* The connection may go right after this; hr must not point at it. */
	if (c->active != NULL)
		c->active->conn = NULL;
	c->active = NULL;
	c->hphase = HPHASE_HEAD;
	c->hbytes = 0;
	c->heol = 0;
	conn_arm_deadline(c);
}

/* The request path. */

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
		*allow = "GET";
		return t == EVHTTP_REQ_GET;
	case ROUTE_NONE:
		break;
	}
	*allow = "";
	return 0;
}

static void
http_request_cb(struct evhttp_request *req, void *arg)
{
	struct mcpd *m = arg;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct hconn *c;
	struct hreq *hr;
	const char *host, *origin, *allow, *authz;

	if ((hr = hreq_new(m, req)) == NULL) {
		evhttp_send_error(req, 503, NULL);
		return;
	}

	c = conn_lookup(m, evcon);
	if (c == NULL || c->rejected) {
		evhttp_add_header(http_out_headers(hr), "Connection", "close");
		http_reply_error(hr, "unavailable", "connection refused by "
		    "the server's connection limits");
		return;
	}
	evtimer_del(c->deadline);
	c->active = hr;
	hr->conn = c;
	c->nrequests++;
	evhttp_request_set_on_complete_cb(req, req_complete, c);
	if (c->nrequests >= m->cfg->max_requests_per_connection)
		evhttp_add_header(http_out_headers(hr), "Connection", "close");

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
	authz = http_in_header(hr, "Authorization");
	if (bearer_parse(authz, hr->token, sizeof(hr->token)) == -1) {
		http_reply_error(hr, "unauthorized", authz == NULL ?
		    "Authorization: Bearer <credential> is required" :
		    "the Authorization header is not a bearer credential");
		return;
	}
	m->auth->verify(m->auth_ctx, hr->token, auth_done, hr);
}

static void
metrics_request_cb(struct evhttp_request *req, void *arg)
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

int
http_init(struct mcpd *m)
{
	size_t i;

	TAILQ_INIT(&m->conns);
	if ((m->http = evhttp_new(m->base)) == NULL)
		return -1;
	http_limits(m, m->http);
	evhttp_set_bevcb(m->http, conn_new, m);
	evhttp_set_gencb(m->http, http_request_cb, m);
	for (i = 0; i < m->cfg->nlisten; i++) {
		const struct mcpd_listen *l = &m->cfg->listen[i];

		if (evhttp_bind_socket_with_handle(m->http, l->host,
		    l->port) == NULL) {
			log_warn("listen %s port %u", l->host, l->port);
			return -1;
		}
		log_info("listening on %s port %u", l->host, l->port);
	}
	if (m->cfg->metrics_enabled) {
		const struct mcpd_listen *l = &m->cfg->metrics_listen;

		if ((m->mhttp = evhttp_new(m->base)) == NULL)
			return -1;
		http_limits(m, m->mhttp);
		evhttp_set_gencb(m->mhttp, metrics_request_cb, m);
		if (evhttp_bind_socket_with_handle(m->mhttp, l->host,
		    l->port) == NULL) {
			log_warn("metrics_listen %s port %u", l->host, l->port);
			return -1;
		}
		log_info("metrics on %s port %u", l->host, l->port);
	}
	return 0;
}

void
http_free(struct mcpd *m)
{
	if (m->http != NULL)
		evhttp_free(m->http);
	if (m->mhttp != NULL)
		evhttp_free(m->mhttp);
	m->http = m->mhttp = NULL;
}
