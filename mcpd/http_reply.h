/*
 * One HTTP request of mcpd's from its arrival to its answer, and the calls
 * that answer it: used by MCP (mcp_http.c), JSON HTTP (rest.c) and streams
 * (stream.c), and by the front end's own refusals (http.c,
 * http_route.c).  It calls none of them; it calls back only the on_gone
 * that a handler sets.
 */
#ifndef MCPD_HTTP_REPLY_H
#define MCPD_HTTP_REPLY_H

#include <stddef.h>
#include <time.h>
#include <event2/event.h>
#include <event2/http.h>
#include <json-c/json.h>

#include "auth.h"
#include "httputil.h"

struct hconn;
struct mcpd;

/* One HTTP request from its arrival to its answer. */
struct hreq {
	struct mcpd		*m;
	struct evhttp_request	*req;
	struct hconn		*conn;		/* NULL once the client is gone */
	struct route		 route;
	struct timespec		 start;
	char			 token[AUTH_TOKEN_MAX];
	struct auth_identity	 id;
	int			 status;	/* answer sent, for metrics */
	/* Called (deferred) when the client disconnects mid-request. */
	void			(*on_gone)(struct hreq *);
	void			*owner;
	struct event		*gone_ev;
	struct event		*watch_ev;	/* http_watch_gone */
};

/* A request just arrived, its route parsed; NULL if out of memory. */
struct hreq *hreq_new(struct mcpd *, struct evhttp_request *);
/* Answers and frees hreq. body may be NULL. */
void	http_reply(struct hreq *, int status, const char *ctype,
	    const char *body, size_t len);
void	http_reply_json(struct hreq *, int status, struct json_object *);
/* {"error":{"code","message"}} with the status for code. */
void	http_reply_error(struct hreq *, const char *code, const char *fmt,
	    ...) __attribute__((format(printf, 3, 4)));
int	http_status_for_code(const char *code);
/* The headers every answer carries (the replies above add them). */
void	http_common_headers(struct hreq *);
struct evkeyvalq *http_out_headers(struct hreq *);
const char *http_in_header(struct hreq *, const char *);
/* Streaming answers (SSE). */
void	http_stream_start(struct hreq *, int status);
void	http_stream_write(struct hreq *, const char *, size_t);
void	http_stream_end(struct hreq *);
/*
 * Calls on_gone as soon as the client closes its connection while hreq
 * waits for its answer (evhttp itself reads nothing then, so it would
 * notice only when the answer is written).
 */
void	http_watch_gone(struct hreq *);
/* Counts hreq's answer in the metrics (done by the replies above). */
void	http_record(struct hreq *, int status);
/* The connection stops being HTTP (WebSocket upgrade). */
void	http_takeover(struct hreq *);
/* Forgets hreq without answering (after a WebSocket takeover). */
void	hreq_free(struct hreq *);

#endif
