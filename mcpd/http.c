/*
 * mcpd's HTTP front end on libevent's evhttp: the listeners, and each
 * client connection (http_conn.h) from its accept to its close, with the
 * request it is reading or answering and its count of requests
 * (max_requests_per_connection).  The limits on a connection are
 * http_limits.c's, the checks and dispatch of a request http_route.c's,
 * its answer http_reply.c's.  Runs in mcpd.
 *
 * evhttp 2.1 has no accept hook.  Its bevcb lets us create each
 * connection's bufferevent; right after, once evhttp has installed its
 * callbacks on it (their argument is the evhttp_connection), we find the
 * connection, count it and set a close callback that tells us when evhttp
 * lets it go, whatever the reason.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "http_conn.h"
#include "http_limits.h"
#include "http_reply.h"
#include "http_route.h"
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
	conn_limit_release(c);
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
	/* Answered: idle now, unless a WebSocket stream holds it. */
	if (c->hphase != HPHASE_RAW)
		conn_limit_release(c);
	c->hphase = HPHASE_HEAD;
	c->hbytes = 0;
	c->heol = 0;
	conn_arm_deadline(c);
}

static void
http_request_cb(struct evhttp_request *req, void *arg)
{
	struct mcpd *m = arg;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct hconn *c;
	struct hreq *hr;

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
	http_route(hr);
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
		evhttp_set_gencb(m->mhttp, http_route_metrics, m);
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
