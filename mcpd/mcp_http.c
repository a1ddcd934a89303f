/*
 * MCP Streamable HTTP at /mcp for mcpd: POST (JSON or SSE answers, tool
 * calls forwarded to the backend with progress and cancellation), GET (a
 * standing event stream per session) and DELETE (end the session).  A
 * stateless (2026-07-28) POST has no session: its tool call lives as long
 * as its response, and subscriptions/listen is its standing stream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>

#include "http_reply.h"
#include "log.h"
#include "mcp.h"
#include "mcpd.h"
#include "schema.h"

#define SSE_KEEPALIVE_SECONDS	15

struct mcp_call {
	TAILQ_ENTRY(mcp_call)	 entry;
	struct mcpd		*m;
	struct hreq		*hr;
	struct session		*sess;
	struct backend_call	*bc;
	struct budget		*budget;	/* its workspace's calls */
	int			 stateless;	/* no session; 2026-07-28 */
	int			 task_create;	/* answer with a task */
	/* A task-augmented vm_run: answered with its task once vmmd took
	 * it on (its first progress), then detached (hr NULL) until its
	 * run ends, still one of its workspace's calls in flight.  mcpd
	 * never cancels it then: tasks/cancel does, through vmmd. */
	int			 run_task;
	int			 detached;
	int			 url_elicit;	/* mcp_out's */
	char			 base[300];	/* scheme://host, for its URL */
	char			 request_id[TASK_REQUEST_ID_MAX + 1];
	struct json_object	*id;
	struct json_object	*progress_token;
	int			 sse;
	struct event		*timer;		/* deadline, then keep-alive */
	struct timespec		 deadline;
};

/*
 * Notifications of a listen stream's tasks go out only while the client
 * reads them: with this much still unsent to it, the stream ends instead
 * (mcpd does not buffer for a client that never reads).
 */
#define LISTEN_UNSENT_MAX	(256 * 1024)

/* A task a listen stream follows: what it last told of it. */
struct listen_task {
	struct task_id		 t;
	char			 status[16];	/* "" until first told */
	int			 over;		/* ended, or not found */
};

struct sse_stream {
	TAILQ_ENTRY(sse_stream)	 entry;		/* m->listen_streams */
	struct mcpd		*m;
	struct hreq		*hr;
	struct session		*sess;		/* NULL: subscriptions/listen */
	struct budget		*budget;	/* listen: its workspace's */
	struct event		*keepalive;
	/* subscriptions/listen's tasks (notifications.taskIds), asked
	 * after one at a time, each about every pollIntervalMs, with the
	 * listen's credential: tasks/get's answer, sent when its status
	 * changed, until it ends. */
	struct listen_task	*tasks;
	size_t			 ntasks, next;
	struct event		*poll;
	struct task_req		*asking;	/* tasks/get under way */
};

/*
 * A workspace's limit on calls or listens is hit: 429 with a JSON-RPC
 * error naming the limit, as for the sessions' (mcp.c).
 */
static void
refuse_limit(struct hreq *hr, struct json_object *id, enum budget_kind k,
    const char *what)
{
	struct mcpd *m = hr->m;
	struct json_object *r;

	log_debug("workspace %s: refused: %s (%u) reached", hr->id.workspace,
	    budget_key(k), m->budgets.limit[k]);
	r = jsonrpc_error(id, MCP_ERR_LIMIT, "%s (%u): this workspace already "
	    "has %u %s; retry once one has ended", budget_key(k),
	    m->budgets.limit[k], budget_held(&m->budgets, hr->id.workspace, k),
	    what);
	http_reply_json(hr, 429, r);
	json_object_put(r);
}

static void
sse_event(struct hreq *hr, struct json_object *msg)
{
	struct evbuffer *b = evbuffer_new();
	size_t len;
	const char *s;

	if (b == NULL)
		return;
	s = json_object_to_json_string_length(msg, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	evbuffer_add(b, "event: message\ndata: ", 21);
	evbuffer_add(b, s, len);
	evbuffer_add(b, "\n\n", 2);
	evhttp_send_reply_chunk(hr->req, b);
	evbuffer_free(b);
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
call_free(struct mcp_call *call)
{
	if (call->sess != NULL)
		TAILQ_REMOVE(&call->sess->calls, call, entry);
	else
		TAILQ_REMOVE(&call->m->stateless_calls, call, entry);
	budget_put(&call->m->budgets, call->budget, BUDGET_CALLS);
	call->m->metrics.inflight_calls--;
	if (call->timer != NULL)
		event_free(call->timer);
	json_object_put(call->id);
	json_object_put(call->progress_token);
	free(call);
}

/* Sends msg (or, for an event stream, nothing when msg is NULL). */
static void
call_send_msg(struct mcp_call *call, struct json_object *msg)
{
	struct hreq *hr = call->hr;

	hr->on_gone = NULL;
	if (call->sse) {
		if (msg != NULL)
			sse_event(hr, msg);
		http_stream_end(hr);
	} else if (msg != NULL) {
		http_reply_json(hr, 200, msg);
	} else {
		http_reply(hr, 204, NULL, NULL, 0);
	}
}

/* Sends msg as call_send_msg does and ends the call. */
static void
call_finish(struct mcp_call *call, struct json_object *msg)
{
	if (!call->detached)
		call_send_msg(call, msg);
	call_free(call);
}

/*
 * A task-augmented vm_run that vmmd took on: its task is the answer, and
 * the call goes on without a client until the run ends (status: working,
 * or how a run that ended before it was asked ended).
 */
static void
call_detach(struct mcp_call *call, const char *status)
{
	struct json_object *r, *msg;

	if ((r = task_run_created(call->request_id, now_ms(), status)) ==
	    NULL)
		msg = jsonrpc_error(call->id, JSONRPC_INTERNAL_ERROR, "the "
		    "vm_run task could not be named");
	else
		msg = jsonrpc_result(call->id, r);
	call_send_msg(call, msg);
	json_object_put(msg);
	call->hr = NULL;
	call->detached = 1;
	evtimer_del(call->timer);
	if (call->bc == NULL)
		call_free(call);
}

static struct json_object *
call_result(int stateless, const struct backend_result *br)
{
	return stateless ? mcp_tool_result_stateless(br) : mcp_tool_result(br);
}

static void
call_done(const struct backend_result *br, void *arg)
{
	struct mcp_call *call = arg;
	struct json_object *msg, *r;

	call->bc = NULL;
	if (call->detached) {
		/* A vm_run task's run ended: vmmd's receipt keeps its answer. */
		call_free(call);
		return;
	}
	/* A run that ended before its first progress (a retry of one that
	 * ended) is still a task; a refusal is the tool's answer. */
	if (call->run_task && br->ok) {
		struct json_object *res = task_result_object(br), *v;
		int cancelled = res != NULL &&
		    json_object_object_get_ex(res, "state", &v) &&
		    strcmp(json_object_get_string(v), "cancelled") == 0;

		json_object_put(res);
		call_detach(call, cancelled ? "cancelled" : "completed");
		return;
	}
	/* A started job is the task; any error is the tool's answer. */
	if (call->task_create && !call->run_task && (r = task_created(br,
	    call->request_id)) != NULL)
		msg = jsonrpc_result(call->id, r);
	else if (call->url_elicit && !br->ok && br->proposal != NULL &&
	    strcmp(br->code, "approval_required") == 0)
		msg = jsonrpc_result(call->id, mcp_input_required(br,
		    call->base));
	else
		msg = jsonrpc_result(call->id, call_result(call->stateless,
		    br));
	call_finish(call, msg);
	json_object_put(msg);
}

static void
call_progress(double progress, double total, const char *message, void *arg)
{
	struct mcp_call *call = arg;
	struct json_object *msg;

	if (call->run_task) {
		if (!call->detached)
			call_detach(call, "working");
		return;
	}
	if (!call->sse || call->progress_token == NULL)
		return;
	msg = mcp_progress(call->progress_token, progress, total, message);
	sse_event(call->hr, msg);
	json_object_put(msg);
}

/* Stops the backend call and answers with err (NULL: no answer). */
static void
call_abort(struct mcp_call *call, struct json_object *err)
{
	/* A detached run is vmmd's: mcpd stopping does not cancel it. */
	if (call->detached)
		call->bc = NULL;
	if (call->bc != NULL) {
		call->m->backend->cancel(call->m->backend_ctx, call->bc);
		call->bc = NULL;
	}
	call_finish(call, err);
	json_object_put(err);
}

static void
call_gone(struct hreq *hr)
{
	struct mcp_call *call = hr->owner;

	log_debug("%s: client left during a tool call", __func__);
	hr->status = 499;
	call_abort(call, NULL);
}

static void
call_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct mcp_call *call = arg;
	struct timespec now;
	struct timeval tv = { SSE_KEEPALIVE_SECONDS, 0 };
	struct backend_result br = { .code = "timeout",
	    .message = "the tool did not finish within tool_timeout" };

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec >= call->deadline.tv_sec) {
		struct json_object *msg;

		if (call->bc != NULL) {
			call->m->backend->cancel(call->m->backend_ctx,
			    call->bc);
			call->bc = NULL;
		}
		msg = jsonrpc_result(call->id, call_result(call->stateless,
		    &br));
		call_finish(call, msg);
		json_object_put(msg);
		return;
	}
	/* A comment line keeps proxies from timing out a slow tool. */
	if (call->sse)
		http_stream_write(call->hr, ": keepalive\n\n", 13);
	evtimer_add(call->timer, &tv);
}

/*
 * mcpd as the client reached it, for the URL of an approval elicitation:
 * http on a loopback Host, else https, as mcpd takes remote clients only
 * through a TLS proxy (docs/tls-proxy.md).  Host passed allowed_hosts.
 */
static void
approval_base(struct hreq *hr, char *buf, size_t len)
{
	const char *host = http_in_header(hr, "Host");
	int local;

	if (host == NULL)
		host = "localhost";
	local = strncmp(host, "127.", 4) == 0 || strncmp(host, "[::1]",
	    5) == 0 || (strncasecmp(host, "localhost", 9) == 0 &&
	    (host[9] == '\0' || host[9] == ':'));
	snprintf(buf, len, "%s://%.256s", local ? "http" : "https", host);
}

static void
call_start(struct hreq *hr, struct mcp_out *out, unsigned int acc)
{
	struct mcpd *m = hr->m;
	struct mcp_call *call;
	struct budget *b;
	struct timeval tv = { SSE_KEEPALIVE_SECONDS, 0 };
	char msg[512];

	/* Bad arguments are a tool error the model can read and fix. */
	if (!json_object_is_type(out->args, json_type_object))
		snprintf(msg, sizeof(msg), "arguments must be a JSON object");
	if (!json_object_is_type(out->args, json_type_object) ||
	    tool_validate_input(tools_find(out->tool), out->args, msg,
	    sizeof(msg)) == -1) {
		struct backend_result br = { .code = "invalid_argument",
		    .message = msg };
		struct json_object *r;

		r = jsonrpc_result(out->call_id, call_result(out->stateless,
		    &br));
		http_reply_json(hr, 200, r);
		json_object_put(r);
		return;
	}
	if (budget_take(&m->budgets, hr->id.workspace, BUDGET_CALLS, &b) ==
	    -1) {
		refuse_limit(hr, out->call_id, BUDGET_CALLS,
		    "tool calls in flight");
		return;
	}
	if ((call = calloc(1, sizeof(*call))) == NULL ||
	    (call->timer = evtimer_new(m->base, call_timer_cb, call)) == NULL) {
		free(call);
		budget_put(&m->budgets, b, BUDGET_CALLS);
		http_reply_error(hr, "unavailable", "out of memory");
		return;
	}
	call->m = m;
	call->budget = b;
	call->hr = hr;
	call->sess = out->session;
	call->stateless = out->stateless;
	if (out->stateless && out->url_elicit) {
		call->url_elicit = 1;
		approval_base(hr, call->base, sizeof(call->base));
	}
	if (out->task_create) {
		struct json_object *v;

		/* The task is the wait: the job's id comes back at once, a
		 * run's once vmmd took it on. */
		call->task_create = 1;
		if (json_object_object_get_ex(out->args, "request_id", &v))
			snprintf(call->request_id, sizeof(call->request_id),
			    "%s", json_object_get_string(v));
		if (strcmp(out->tool, "vm_run") == 0)
			call->run_task = 1;
		else
			json_object_object_add(out->args, "wait_seconds",
			    json_object_new_int(0));
	}
	call->id = json_object_get(out->call_id);
	call->progress_token = json_object_get(out->progress_token);
	/* Progress needs a stream; otherwise prefer one JSON answer. */
	call->sse = (acc & ACCEPT_SSE) && (!(acc & ACCEPT_JSON) ||
	    call->progress_token != NULL);
	clock_gettime(CLOCK_MONOTONIC, &call->deadline);
	call->deadline.tv_sec += m->cfg->tool_timeout;
	if (call->sess != NULL)
		TAILQ_INSERT_TAIL(&call->sess->calls, call, entry);
	else
		TAILQ_INSERT_TAIL(&m->stateless_calls, call, entry);
	m->metrics.inflight_calls++;
	hr->owner = call;
	hr->on_gone = call_gone;
	http_watch_gone(hr);
	if (call->sse)
		http_stream_start(hr, 200);
	if ((unsigned int)tv.tv_sec > m->cfg->tool_timeout)
		tv.tv_sec = m->cfg->tool_timeout;
	evtimer_add(call->timer, &tv);
	call->bc = m->backend->call(m->backend_ctx, out->tool, out->args,
	    hr->token, &hr->id, call_done, call_progress, call);
}

static void
call_cancel(struct session *sess, struct json_object *id)
{
	struct mcp_call *call;

	TAILQ_FOREACH(call, &sess->calls, entry) {
		if (!jsonrpc_id_equal(call->id, id))
			continue;
		/* No response for a cancelled request, except that a JSON
		 * answer must still be a complete HTTP response. */
		call_abort(call, call->sse ? NULL : jsonrpc_error(call->id,
		    MCP_ERR_CANCELLED, "request cancelled by the client"));
		return;
	}
	/* Unknown or finished: ignoring it is what the spec asks. */
}

static struct sse_stream *sse_stream_open(struct hreq *, struct session *,
    struct budget *);

static void sse_stream_end(struct sse_stream *);

/* Bytes written to hr's client and not yet taken by it. */
static size_t
unsent(struct hreq *hr)
{
	struct evhttp_connection *c = evhttp_request_get_connection(hr->req);
	struct bufferevent *bev;

	if (c == NULL || (bev = evhttp_connection_get_bufferevent(c)) == NULL)
		return 0;
	return evbuffer_get_length(bufferevent_get_output(bev));
}

static void listen_poll_cb(evutil_socket_t, short, void *);

/* The next ask, about pollIntervalMs over the tasks still followed. */
static void
listen_schedule(struct sse_stream *st)
{
	size_t i, left = 0;
	long ms;
	struct timeval tv;

	for (i = 0; i < st->ntasks; i++)
		if (!st->tasks[i].over)
			left++;
	if (left == 0)
		return;		/* keep-alives only, from now on */
	ms = TASK_POLL_INTERVAL_MS / (long)left;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(st->poll, &tv);
}

/* tasks/get's answer for the task st->next: told when it changed. */
static void
listen_answer(void *arg, struct json_object *answer)
{
	struct sse_stream *st = arg;
	struct listen_task *lt = &st->tasks[st->next];
	struct json_object *r, *v, *n;
	const char *status;

	st->asking = NULL;
	st->next = (st->next + 1) % st->ntasks;
	if (!json_object_object_get_ex(answer, "result", &r) ||
	    !json_object_object_get_ex(r, "status", &v) ||
	    (status = json_object_get_string(v)) == NULL) {
		/* Not found (another workspace's, gone) or failing: no more
		 * is told of it. */
		lt->over = 1;
		json_object_put(answer);
		listen_schedule(st);
		return;
	}
	if (strcmp(status, "completed") == 0 || strcmp(status, "failed") ==
	    0 || strcmp(status, "cancelled") == 0)
		lt->over = 1;
	if (strcmp(status, lt->status) != 0) {
		snprintf(lt->status, sizeof(lt->status), "%s", status);
		if (unsent(st->hr) > LISTEN_UNSENT_MAX) {
			log_debug("workspace %s: a listen stream's client does "
			    "not read its notifications; ending it",
			    st->hr->id.workspace);
			json_object_put(answer);
			sse_stream_end(st);
			return;
		}
		json_object_object_del(r, "resultType");
		n = json_object_new_object();
		json_object_object_add(n, "jsonrpc",
		    json_object_new_string("2.0"));
		json_object_object_add(n, "method",
		    json_object_new_string("notifications/tasks"));
		json_object_object_add(n, "params", json_object_get(r));
		sse_event(st->hr, n);
		json_object_put(n);
	}
	json_object_put(answer);
	listen_schedule(st);
}

static void
listen_poll_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sse_stream *st = arg;
	size_t i;

	for (i = 0; i < st->ntasks && st->tasks[st->next].over; i++)
		st->next = (st->next + 1) % st->ntasks;
	if (st->tasks[st->next].over)
		return;
	if ((st->asking = tasks_watch(st->hr, &st->tasks[st->next].t,
	    listen_answer, st)) == NULL) {
		/* It cannot be asked after: no more is told of it. */
		st->tasks[st->next].over = 1;
		listen_schedule(st);
	}
}

/*
 * subscriptions/listen: the acknowledgement, then keep-alives until the
 * client closes the stream, and notifications/tasks for the tasks it
 * asked to follow (out->listen_tasks).  mcpd sends no other change
 * notifications (its tool list is fixed).
 */
static void
listen_start(struct hreq *hr, struct json_object *id, struct json_object *ack,
    struct mcp_out *out, unsigned int acc)
{
	struct mcpd *m = hr->m;
	struct sse_stream *st;
	struct budget *b;
	struct timeval tv = { SSE_KEEPALIVE_SECONDS, 0 };

	if (!(acc & ACCEPT_SSE)) {
		http_reply_error(hr, "not_acceptable", "subscriptions/listen "
		    "answers with text/event-stream; Accept must allow it");
		return;
	}
	if (budget_take(&m->budgets, hr->id.workspace, BUDGET_LISTENS, &b) ==
	    -1) {
		refuse_limit(hr, id, BUDGET_LISTENS,
		    "subscriptions/listen streams open");
		return;
	}
	if ((st = sse_stream_open(hr, NULL, b)) == NULL) {
		budget_put(&m->budgets, b, BUDGET_LISTENS);
		return;
	}
	sse_event(hr, ack);
	evtimer_add(st->keepalive, &tv);
	if (out->nlisten_tasks > 0 &&
	    (st->poll = evtimer_new(m->base, listen_poll_cb, st)) != NULL) {
		/* The stream's now: mcp_out_free leaves them. */
		st->tasks = calloc(out->nlisten_tasks, sizeof(*st->tasks));
		for (size_t i = 0; st->tasks != NULL &&
		    i < out->nlisten_tasks; i++)
			st->tasks[i].t = out->listen_tasks[i];
		if (st->tasks != NULL) {
			st->ntasks = out->nlisten_tasks;
			event_active(st->poll, EV_TIMEOUT, 1);
		}
	}
}

static void
mcp_post(struct hreq *hr)
{
	struct mcpd *m = hr->m;
	struct evbuffer *in = evhttp_request_get_input_buffer(hr->req);
	struct mcp_env env;
	struct mcp_out out;
	unsigned int acc;
	size_t len;
	const char *body;

	if (!content_type_is_json(http_in_header(hr, "Content-Type"))) {
		http_reply_error(hr, "unsupported_media_type", "Content-Type "
		    "must be application/json");
		return;
	}
	acc = accept_parse(http_in_header(hr, "Accept"));
	if ((acc & (ACCEPT_JSON | ACCEPT_SSE)) == 0) {
		http_reply_error(hr, "not_acceptable", "Accept must allow "
		    "application/json or text/event-stream");
		return;
	}
	len = evbuffer_get_length(in);
	body = (const char *)evbuffer_pullup(in, -1);
	if (body == NULL)
		body = "";

	memset(&env, 0, sizeof(env));
	env.sessions = &m->sessions;
	env.workspace = hr->id.workspace;
	env.session_id = http_in_header(hr, "Mcp-Session-Id");
	env.protocol_version = http_in_header(hr, "MCP-Protocol-Version");
	env.mcp_method = http_in_header(hr, "Mcp-Method");
	env.mcp_name = http_in_header(hr, "Mcp-Name");
	mcp_process(&env, body, len, &out);

	if (out.new_session)
		evhttp_add_header(http_out_headers(hr), "Mcp-Session-Id",
		    out.session->id);
	if (out.cancel)
		call_cancel(out.session, out.cancel_id);
	if (out.call) {
		call_start(hr, &out, acc);
	} else if (out.task_op != TASK_NONE) {
		tasks_http_start(hr, &out, acc);
	} else if (out.listen) {
		listen_start(hr, out.call_id, out.body, &out, acc);
	} else if (out.body == NULL) {
		http_reply(hr, out.status, NULL, NULL, 0);
	} else if (out.status != 200 || (acc & ACCEPT_JSON)) {
		http_reply_json(hr, out.status, out.body);
	} else {
		http_stream_start(hr, 200);
		sse_event(hr, out.body);
		http_stream_end(hr);
	}
	mcp_out_free(&out);
}

/* Common checks of GET and DELETE: the session they name. */
static struct session *
mcp_session(struct hreq *hr)
{
	const char *sid = http_in_header(hr, "Mcp-Session-Id");
	const char *pv = http_in_header(hr, "MCP-Protocol-Version");
	struct session *sess;

	if (pv != NULL && strcmp(pv, MCP_VERSION_STATELESS) == 0) {
		evhttp_add_header(http_out_headers(hr), "Allow", "POST");
		http_reply_error(hr, "method_not_allowed", "MCP "
		    MCP_VERSION_STATELESS " has no sessions and no GET stream: "
		    "POST subscriptions/listen for change notifications");
		return NULL;
	}
	if (sid == NULL) {
		http_reply_error(hr, "invalid_argument", "Mcp-Session-Id "
		    "header required");
		return NULL;
	}
	if ((sess = sessions_find(&hr->m->sessions, sid,
	    hr->id.workspace)) == NULL) {
		http_reply_error(hr, "not_found", "session not found: it "
		    "ended or expired");
		return NULL;
	}
	if (pv != NULL && !mcp_version_supported(pv)) {
		http_reply_error(hr, "invalid_argument", "unsupported "
		    "MCP-Protocol-Version \"%.32s\"", pv);
		return NULL;
	}
	return sess;
}

static void
sse_stream_end(struct sse_stream *st)
{
	st->hr->on_gone = NULL;
	if (st->sess != NULL)
		st->sess->get_stream = NULL;
	else
		TAILQ_REMOVE(&st->m->listen_streams, st, entry);
	budget_put(&st->m->budgets, st->budget, BUDGET_LISTENS);
	st->m->metrics.open_streams--;
	event_free(st->keepalive);
	if (st->asking != NULL)
		tasks_watch_stop(st->asking);
	if (st->poll != NULL)
		event_free(st->poll);
	free(st->tasks);
	http_stream_end(st->hr);
	free(st);
}

static void
sse_gone(struct hreq *hr)
{
	sse_stream_end(hr->owner);
}

static void
sse_keepalive_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sse_stream *st = arg;
	struct timeval tv = { SSE_KEEPALIVE_SECONDS, 0 };

	http_stream_write(st->hr, ": keepalive\n\n", 13);
	evtimer_add(st->keepalive, &tv);
}

/*
 * Opens an SSE stream on hr, with its keep-alive timer made but not yet
 * armed: a session's GET stream (sess), or a stateless listen stream
 * (NULL) holding b of its workspace's listens.  sse_stream_end undoes it,
 * b included.  NULL, answered, when memory runs out; b is then still the
 * caller's.
 */
static struct sse_stream *
sse_stream_open(struct hreq *hr, struct session *sess, struct budget *b)
{
	struct sse_stream *st;

	if ((st = calloc(1, sizeof(*st))) == NULL ||
	    (st->keepalive = evtimer_new(hr->m->base, sse_keepalive_cb,
	    st)) == NULL) {
		free(st);
		http_reply_error(hr, "unavailable", "out of memory");
		return NULL;
	}
	st->m = hr->m;
	st->hr = hr;
	st->sess = sess;
	st->budget = b;
	if (sess != NULL)
		sess->get_stream = st;
	else
		TAILQ_INSERT_TAIL(&hr->m->listen_streams, st, entry);
	hr->owner = st;
	hr->on_gone = sse_gone;
	hr->m->metrics.open_streams++;
	http_stream_start(hr, 200);
	return st;
}

static void
mcp_get(struct hreq *hr)
{
	struct sse_stream *st;
	struct session *sess;
	struct timeval tv = { SSE_KEEPALIVE_SECONDS, 0 };

	if (!(accept_parse(http_in_header(hr, "Accept")) & ACCEPT_SSE)) {
		http_reply_error(hr, "not_acceptable", "GET /mcp answers "
		    "with text/event-stream; Accept must allow it");
		return;
	}
	if ((sess = mcp_session(hr)) == NULL)
		return;
	if (sess->get_stream != NULL) {
		http_reply_error(hr, "conflict", "this session already has an "
		    "open GET stream");
		return;
	}
	if ((st = sse_stream_open(hr, sess, NULL)) == NULL)
		return;
	/* Headers go out now, so the client knows the stream is open. */
	http_stream_write(hr, ": stream open\n\n", 15);
	evtimer_add(st->keepalive, &tv);
}

static void
mcp_delete(struct hreq *hr)
{
	struct session *sess;

	if ((sess = mcp_session(hr)) == NULL)
		return;
	sessions_remove(&hr->m->sessions, sess);
	http_reply(hr, 204, NULL, NULL, 0);
}

void
mcp_http_session_freed(struct session *sess, void *arg)
{
	struct mcp_call *call;

	while ((call = TAILQ_FIRST(&sess->calls)) != NULL)
		call_abort(call, jsonrpc_error(call->id, MCP_ERR_SESSION,
		    "the session ended"));
	if (sess->get_stream != NULL)
		sse_stream_end(sess->get_stream);
}

void
mcp_http_free_all(struct mcpd *m)
{
	struct mcp_call *call;
	struct sse_stream *st;

	while ((call = TAILQ_FIRST(&m->stateless_calls)) != NULL)
		call_abort(call, NULL);
	while ((st = TAILQ_FIRST(&m->listen_streams)) != NULL)
		sse_stream_end(st);
	tasks_http_free_all(m);
}

void
mcp_http_init(struct mcpd *m)
{
	TAILQ_INIT(&m->stateless_calls);
	TAILQ_INIT(&m->listen_streams);
	tasks_http_init(m);
	m->sessions.on_free = mcp_http_session_freed;
	m->sessions.on_free_arg = m;
}

void
mcp_http_handle(struct hreq *hr)
{
	switch (evhttp_request_get_command(hr->req)) {
	case EVHTTP_REQ_POST:
		mcp_post(hr);
		break;
	case EVHTTP_REQ_GET:
		mcp_get(hr);
		break;
	case EVHTTP_REQ_DELETE:
		mcp_delete(hr);
		break;
	default:
		http_reply_error(hr, "method_not_allowed", "use GET, POST "
		    "or DELETE");
		break;
	}
}
