/*
 * The limits of mcpd's HTTP front end on its connections (http_conn.h),
 * applied by http.c as each connection and request arrives.
 */
#ifndef MCPD_HTTP_LIMITS_H
#define MCPD_HTTP_LIMITS_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

struct hconn;
struct hreq;
struct mcpd;

/* evhttp's own limits, set on each listener. */
void	http_limits(struct mcpd *, struct evhttp *);
/*
 * Runs once c is bound to its evhttp_connection: admits and counts it,
 * or refuses it with 503 (max_connections) or 429
 * (max_connections_per_client).
 */
void	conn_limit_admit(struct hconn *);
/*
 * Once hr's credential is verified: its connection is busy with hr's
 * workspace until conn_limit_release, or hr is refused with 429
 * (max_connections_per_workspace) and -1 is returned.
 */
int	conn_limit_workspace(struct hreq *);
/* The connection is no longer busy with a workspace. */
void	conn_limit_release(struct hconn *);
/* The input callback on c's bufferevent: 413 past max_header_bytes. */
void	conn_input_cb(struct evbuffer *, const struct evbuffer_cb_info *,
	    void *c);
/* c's timer: 408 when no whole request came within request_timeout. */
void	conn_deadline_cb(evutil_socket_t, short, void *c);
void	conn_arm_deadline(struct hconn *);

#endif
