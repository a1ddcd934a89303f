/*
 * mcpd, the network-facing front end: shared state and the entry points
 * between its parts (HTTP front end, MCP, JSON HTTP, streams).
 */
#ifndef MCPD_MCPD_H
#define MCPD_MCPD_H

#include <sys/queue.h>
#include <time.h>
#include <event2/event.h>
#include <event2/http.h>
#include <json-c/json.h>

#include "auth.h"
#include "backend.h"
#include "httputil.h"
#include "mcpd_conf.h"
#include "metrics.h"
#include "session.h"

struct hconn;
struct hreq;

struct mcpd {
	struct event_base	*base;
	struct mcpd_config	*cfg;
	struct evhttp		*http;
	struct evhttp		*mhttp;		/* metrics listener */
	TAILQ_HEAD(, hconn)	 conns;
	unsigned int		 nconns;	/* admitted connections */
	struct sessions		 sessions;
	/* 2026-07-28 requests belong to no session: what is open of them. */
	TAILQ_HEAD(, mcp_call)	 stateless_calls;
	TAILQ_HEAD(, sse_stream) listen_streams;
	struct metrics		 metrics;
	struct event		*sweep;
	const struct auth_ops	*auth;
	void			*auth_ctx;
	const struct backend_ops *backend;
	void			*backend_ctx;
};

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

/* http.c */
int	http_init(struct mcpd *);
void	http_free(struct mcpd *);
/* Answers and frees hreq. body may be NULL. */
void	http_reply(struct hreq *, int status, const char *ctype,
	    const char *body, size_t len);
void	http_reply_json(struct hreq *, int status, struct json_object *);
/* {"error":{"code","message"}} with the status for code. */
void	http_reply_error(struct hreq *, const char *code, const char *fmt,
	    ...) __attribute__((format(printf, 3, 4)));
int	http_status_for_code(const char *code);
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

/* mcp_http.c */
void	mcp_http_init(struct mcpd *);
void	mcp_http_handle(struct hreq *);
void	mcp_http_session_freed(struct session *, void *);
/* Ends the stateless tool calls and subscriptions/listen streams (exit). */
void	mcp_http_free_all(struct mcpd *);

/* rest.c */
void	rest_handle(struct hreq *);

/* stream.c */
void	stream_handle(struct hreq *);
/* GET /v1/vms/{vm_id}/jobs/{job_id}/broker: a stream of broker frames. */
void	broker_handle(struct hreq *);
/* Sets up what every stream shares (the rate limit): 0 or -1. */
int	stream_init(const struct mcpd_config *);
/* Ends every open stream at once (shutdown). */
void	stream_free_all(struct mcpd *);
void	stream_close_by_id(const char *stream_id, const char *reason);
void	stream_revoke(const char *workspace, const char *credential_id,
	    const char *reason);
void	stream_expire(time_t now);

/* auth_authd.c, backend_vmmd.c: the product's verifier and backend. */
extern const struct auth_ops authd_auth_ops;
extern const struct backend_ops vmmd_backend_ops;

/* mcpd.c; a test daemon may allow a few more syscalls (threads). */
extern const char *const *mcpd_extra_syscalls;
extern size_t mcpd_nextra_syscalls;
int	mcpd_main(int argc, char **argv, const struct auth_ops *,
	    void *auth_ctx, const struct backend_ops *, void *backend_ctx);

#endif
