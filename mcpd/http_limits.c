/*
 * The limits mcpd's HTTP front end puts on its clients (http_limits.h):
 * connections in total, per client address and, once a credential is
 * verified, per workspace; the bytes of a request head, a deadline for
 * each whole request so that slow clients cannot pin connections, and
 * evhttp's own limits on each listener.  A connection over a limit of
 * its address or the host's is answered on its raw socket and shut down.
 * Runs in mcpd.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>

#include "http_conn.h"
#include "http_limits.h"
#include "http_reply.h"
#include "log.h"
#include "mcpd.h"

static int
same_address(const struct sockaddr_storage *a,
    const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		    ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		    &((const struct sockaddr_in6 *)b)->sin6_addr,
		    sizeof(struct in6_addr)) == 0;
	return 0;
}

/*
 * Answers on the raw socket and shuts it down; evhttp then reads EOF and
 * frees the connection itself.  Only used while evhttp is still reading a
 * request, so nothing of evhttp's own is interleaved.
 */
static void
conn_abort(struct hconn *c, int status, const char *reason, const char *code,
    const char *msg)
{
	char buf[768];
	char body[512];
	int blen, n;
	evutil_socket_t fd = bufferevent_getfd(c->bev);

	blen = snprintf(body, sizeof(body),
	    "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, msg);
	n = snprintf(buf, sizeof(buf), "HTTP/1.1 %d %s\r\n"
	    "Content-Type: application/json\r\nContent-Length: %d\r\n"
	    "Connection: close\r\n\r\n%s", status, reason, blen, body);
	if (fd >= 0) {
		if (send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			log_debug("%s: %s: send: %s", __func__, c->peerstr,
			    strerror(errno));
		shutdown(fd, SHUT_RDWR);
	}
}

void
conn_limit_admit(struct hconn *c)
{
	struct mcpd *m = c->m;
	struct bufferevent *bev = c->bev;
	struct hconn *o;
	socklen_t len = sizeof(c->peer);
	unsigned int same = 0;
	evutil_socket_t fd;

	fd = bufferevent_getfd(bev);
	if (fd < 0 || getpeername(fd, (struct sockaddr *)&c->peer, &len) == -1) {
		c->rejected = 1;
		if (fd >= 0)
			shutdown(fd, SHUT_RDWR);
		return;
	}
	if (c->peer.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&c->peer)->sin_addr,
		    c->peerstr, sizeof(c->peerstr));
	else if (c->peer.ss_family == AF_INET6)
		inet_ntop(AF_INET6,
		    &((struct sockaddr_in6 *)&c->peer)->sin6_addr,
		    c->peerstr, sizeof(c->peerstr));

	TAILQ_FOREACH(o, &m->conns, entry)
		if (o != c && o->admitted && same_address(&o->peer, &c->peer))
			same++;
	if (m->nconns >= m->cfg->max_connections) {
		c->rejected = 1;
		m->metrics.rejected_connections++;
		log_info("%s: refused: max_connections (%u) reached",
		    c->peerstr, m->cfg->max_connections);
		conn_abort(c, 503, "Service Unavailable", "unavailable",
		    "too many connections to this server (max_connections)");
		return;
	}
	if (same >= m->cfg->max_connections_per_client) {
		c->rejected = 1;
		m->metrics.rejected_connections++;
		log_info("%s: refused: max_connections_per_client (%u) reached",
		    c->peerstr, m->cfg->max_connections_per_client);
		conn_abort(c, 429, "Too Many Requests", "rate_limited",
		    "too many connections from your address "
		    "(max_connections_per_client)");
		return;
	}
	c->admitted = 1;
	m->nconns++;
	m->metrics.open_connections++;
}

/*
 * Behind a TLS proxy every client has the proxy's address, so a
 * connection also counts against the workspace whose request it carries,
 * from the verified credential until the answer (conn_limit_release from
 * http.c), or for as long as the connection lives once a WebSocket stream
 * has taken it over.  An idle keep-alive connection counts only against
 * its address: behind a proxy it may carry any workspace's next request.
 */
int
conn_limit_workspace(struct hreq *hr)
{
	struct hconn *c = hr->conn;
	struct mcpd *m = hr->m;
	const char *key = budget_key(BUDGET_CONNECTIONS);

	if (c == NULL)		/* the client left; nothing more is sent */
		return 0;
	conn_limit_release(c);
	if (budget_take(&m->budgets, hr->id.workspace, BUDGET_CONNECTIONS,
	    &c->budget) == 0)
		return 0;
	log_debug("%s: workspace %s: refused: %s (%u) reached", c->peerstr,
	    hr->id.workspace, key, m->cfg->max_connections_per_workspace);
	http_reply_error(hr, "rate_limited", "%s (%u): this workspace already "
	    "has %u connections busy with its requests and streams; retry "
	    "once one has ended", key, m->cfg->max_connections_per_workspace,
	    budget_held(&m->budgets, hr->id.workspace, BUDGET_CONNECTIONS));
	return -1;
}

void
conn_limit_release(struct hconn *c)
{
	if (c->budget == NULL)
		return;
	budget_put(&c->m->budgets, c->budget, BUDGET_CONNECTIONS);
	c->budget = NULL;
}

/*
 * Counts the bytes of each request head as they arrive and refuses one
 * longer than max_header_bytes with 413, naming the limit.  The head ends
 * at an empty line (CRLF or bare LF, as evhttp accepts).
 */
void
conn_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct hconn *c = arg;
	struct evbuffer_iovec v[8];
	struct evbuffer_ptr p;
	size_t len, start;
	int n, i;

	if (info->n_added == 0 || c->hphase != HPHASE_HEAD || c->rejected)
		return;
	len = evbuffer_get_length(buf);
	start = len >= info->n_added ? len - info->n_added : 0;
	if (evbuffer_ptr_set(buf, &p, start, EVBUFFER_PTR_SET) == -1)
		return;
	n = evbuffer_peek(buf, (ev_ssize_t)(len - start), &p, v, 8);
	for (i = 0; i < n && i < 8; i++) {
		const unsigned char *b = v[i].iov_base;
		size_t j;

		for (j = 0; j < v[i].iov_len; j++) {
			if (++c->hbytes > c->m->cfg->max_header_bytes)
				goto toolong;
			if (b[j] == '\n') {
				if (c->heol == 1 || c->heol == 2) {
					c->hphase = HPHASE_BODY;
					return;
				}
				c->heol = 1;
			} else if (b[j] == '\r' && c->heol == 1)
				c->heol = 2;
			else
				c->heol = 0;
		}
	}
	return;
toolong:
	c->rejected = 1;
	log_debug("%s: request head longer than max_header_bytes (%zu)",
	    c->peerstr, c->m->cfg->max_header_bytes);
	conn_abort(c, 413, "Payload Too Large", "payload_too_large",
	    "request line and headers exceed max_header_bytes");
}

void
conn_deadline_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct hconn *c = arg;

	if (c->active != NULL || c->rejected)
		return;
	c->m->metrics.timed_out_requests++;
	log_debug("%s: no complete request within request_timeout (%us)",
	    c->peerstr, c->m->cfg->request_timeout);
	conn_abort(c, 408, "Request Timeout", "request_timeout",
	    "the request did not arrive completely within request_timeout");
	c->rejected = 1;
}

void
conn_arm_deadline(struct hconn *c)
{
	struct timeval tv = { c->m->cfg->request_timeout, 0 };

	evtimer_add(c->deadline, &tv);
}

void
http_limits(struct mcpd *m, struct evhttp *h)
{
	struct timeval tv = { m->cfg->idle_timeout, 0 };

	/* A backstop: our own count answers 413 first (conn_input_cb). */
	evhttp_set_max_headers_size(h, (ev_ssize_t)m->cfg->max_header_bytes +
	    4096);
	evhttp_set_max_body_size(h, (ev_ssize_t)m->cfg->max_body_bytes);
	evhttp_set_timeout_tv(h, &tv);
	evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	/* Read an oversized body out before answering 413, so the client
	 * sees the status instead of a reset. */
	evhttp_set_flags(h, EVHTTP_SERVER_LINGERING_CLOSE);
}
