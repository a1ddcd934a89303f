/*
 * mcpd, the network-facing front end: the state its parts share (struct
 * mcpd, made by mcpd_main.c) and the entry points between them (HTTP
 * front end, MCP, JSON HTTP, streams).
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
#include "budget.h"
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
	struct budgets		 budgets;	/* per workspace (budget.h) */
	/* 2026-07-28 requests belong to no session: what is open of them. */
	TAILQ_HEAD(, mcp_call)	 stateless_calls;
	TAILQ_HEAD(, sse_stream) listen_streams;
	TAILQ_HEAD(, task_req)	 task_reqs;	/* tasks/get ... in flight */
	struct metrics		 metrics;
	struct event		*sweep;
	const struct auth_ops	*auth;
	void			*auth_ctx;
	const struct backend_ops *backend;
	void			*backend_ctx;
};

/* http.c */
int	http_init(struct mcpd *);
void	http_free(struct mcpd *);

/* mcp_http.c */
void	mcp_http_init(struct mcpd *);
void	mcp_http_handle(struct hreq *);
void	mcp_http_session_freed(struct session *, void *);
/* Ends the stateless tool calls and subscriptions/listen streams (exit). */
void	mcp_http_free_all(struct mcpd *);

/* tasks_http.c: tasks/get, tasks/cancel, tasks/update (mcp.c checked). */
struct mcp_out;
void	tasks_http_init(struct mcpd *);
void	tasks_http_start(struct hreq *, const struct mcp_out *,
	    unsigned int accept);
void	tasks_http_free_all(struct mcpd *);
/*
 * tasks/get of t for a subscriptions/listen stream on hr (its credential):
 * cb gets the JSON-RPC answer (result: the GetTaskResult; error: not
 * found or failed) instead of hr, and owns it, never before tasks_watch
 * returned.  NULL when it cannot be asked (no memory; a vm_run task and a
 * backend without runs).  tasks_watch_stop before the stream ends, unless
 * cb ran.
 */
struct task_id;
typedef void (*task_watch_cb)(void *arg, struct json_object *answer);
struct task_req *tasks_watch(struct hreq *, const struct task_id *,
	    task_watch_cb, void *arg);
void	tasks_watch_stop(struct task_req *);

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

/* mcpd_main.c; a test daemon may allow a few more syscalls (threads). */
extern const char *const *mcpd_extra_syscalls;
extern size_t mcpd_nextra_syscalls;
int	mcpd_main(int argc, char **argv, const struct auth_ops *,
	    void *auth_ctx, const struct backend_ops *, void *backend_ctx);

#endif
