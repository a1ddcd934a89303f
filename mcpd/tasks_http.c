/*
 * tasks/get, tasks/cancel and tasks/update over MCP Streamable HTTP for
 * mcpd: each is answered from the backend with the caller's credential
 * (a vm_exec's: vm_job_status, then vm_job_output once the job ended;
 * vm_job_cancel; a vm_run's: the backend's run_task), so a task is found
 * only in the workspace that made it and outlives an mcpd restart as its
 * job or run does.  mcp.c has checked the request and parsed
 * the task id; tasks.c shapes the answers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "http_reply.h"
#include "log.h"
#include "mcp.h"
#include "mcpd.h"
#include "tasks.h"

struct task_req {
	TAILQ_ENTRY(task_req)	 entry;		/* m->task_reqs */
	struct mcpd		*m;
	struct hreq		*hr;
	struct backend_call	*bc;
	struct budget		*budget;	/* its workspace's calls */
	struct event		*timer;		/* tool_timeout */
	struct json_object	*id;
	struct json_object	*status;	/* vm_job_status's, for get */
	enum task_op		 op;
	struct task_id		 t;
	unsigned int		 acc;
	task_watch_cb		 watch;		/* a listen's, not hr's */
	void			*watch_arg;
};

static void
task_req_free(struct task_req *tr)
{
	TAILQ_REMOVE(&tr->m->task_reqs, tr, entry);
	budget_put(&tr->m->budgets, tr->budget, BUDGET_CALLS);
	if (tr->bc != NULL)
		tr->m->backend->cancel(tr->m->backend_ctx, tr->bc);
	event_free(tr->timer);
	json_object_put(tr->id);
	json_object_put(tr->status);
	free(tr);
}

/* Answers as mcp_post answers the requests it answers itself. */
static void
send_msg(struct hreq *hr, unsigned int acc, int status,
    struct json_object *msg)
{
	struct evbuffer *b;
	const char *s;
	size_t len;

	if (status != 200 || (acc & ACCEPT_JSON)) {
		http_reply_json(hr, status, msg);
		return;
	}
	http_stream_start(hr, 200);
	if ((b = evbuffer_new()) != NULL) {
		s = json_object_to_json_string_length(msg,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
		    &len);
		evbuffer_add(b, "event: message\ndata: ", 21);
		evbuffer_add(b, s, len);
		evbuffer_add(b, "\n\n", 2);
		http_stream_write(hr, (const char *)evbuffer_pullup(b, -1),
		    evbuffer_get_length(b));
		evbuffer_free(b);
	}
	http_stream_end(hr);
}

/* Sends msg (consumed) and ends tr. */
static void
task_finish(struct task_req *tr, int status, struct json_object *msg)
{
	task_watch_cb cb = tr->watch;
	void *arg = tr->watch_arg;

	if (cb != NULL) {
		task_req_free(tr);
		cb(arg, msg);
		return;
	}
	tr->hr->on_gone = NULL;
	send_msg(tr->hr, tr->acc, status, msg);
	json_object_put(msg);
	task_req_free(tr);
}

static void
task_result(struct task_req *tr, struct json_object *result)
{
	task_finish(tr, 200, jsonrpc_result(tr->id, result));
}

/* A backend error: the task is unknown to this caller, or mcpd failed. */
static void
task_error(struct task_req *tr, const char *code, const char *message)
{
	if (strcmp(code, "not_found") == 0 ||
	    strcmp(code, "invalid_argument") == 0)
		task_finish(tr, 400, jsonrpc_error(tr->id,
		    JSONRPC_INVALID_PARAMS, "Failed to retrieve task: task not "
		    "found (%.200s)", message));
	else
		task_finish(tr, 500, jsonrpc_error(tr->id,
		    JSONRPC_INTERNAL_ERROR, "task %s%s%s: %s: %.200s",
		    tr->t.run ? TASK_RUN_PREFIX : tr->t.vm_id,
		    tr->t.run ? "" : ".", tr->t.run ? tr->t.request_id :
		    tr->t.job_id, code, message));
}

static struct json_object *
job_args(const struct task_id *t)
{
	struct json_object *a = json_object_new_object();

	json_object_object_add(a, "vm_id", json_object_new_string(t->vm_id));
	json_object_object_add(a, "job_id", json_object_new_string(t->job_id));
	return a;
}

static void task_status_done(const struct backend_result *, void *);

static void
task_call(struct task_req *tr, const char *tool, backend_result_cb done)
{
	struct json_object *args = job_args(&tr->t);

	tr->bc = tr->m->backend->call(tr->m->backend_ctx, tool, args,
	    tr->hr->token, &tr->hr->id, done, NULL, tr);
	json_object_put(args);
}

static void
task_output_done(const struct backend_result *br, void *arg)
{
	struct task_req *tr = arg;
	struct json_object *o;

	tr->bc = NULL;
	if (!br->ok) {
		task_error(tr, br->code, br->message);
		return;
	}
	if ((o = task_result_object(br)) == NULL) {
		task_error(tr, "internal", "the job's output could not be read");
		return;
	}
	task_result(tr, task_completed(&tr->t, tr->status, o));
	json_object_put(o);
}

static void
task_status_done(const struct backend_result *br, void *arg)
{
	struct task_req *tr = arg;
	struct json_object *r;

	tr->bc = NULL;
	if (!br->ok) {
		task_error(tr, br->code, br->message);
		return;
	}
	if (tr->op != TASK_GET) {
		/* No task of mcpd's ever asks for input: nothing to update. */
		task_result(tr, task_ack());
		return;
	}
	if ((tr->status = task_result_object(br)) == NULL) {
		task_error(tr, "internal", "the job's status could not be read");
		return;
	}
	switch (task_from_status(&tr->t, tr->status, &r)) {
	case 0:
		task_result(tr, r);
		break;
	case 1:
		task_call(tr, "vm_job_output", task_output_done);
		break;
	default:
		task_error(tr, "internal", "the job's status could not be read");
		break;
	}
}

static void
task_cancel_done(const struct backend_result *br, void *arg)
{
	struct task_req *tr = arg;

	tr->bc = NULL;
	if (!br->ok)
		task_error(tr, br->code, br->message);
	else
		task_result(tr, task_ack());
}

/* vmmd's answer about a vm_run task's run. */
static void
task_run_done(const struct backend_result *br, void *arg)
{
	struct task_req *tr = arg;
	struct json_object *look, *r;

	tr->bc = NULL;
	if (!br->ok) {
		task_error(tr, br->code, br->message);
		return;
	}
	if ((look = task_result_object(br)) == NULL) {
		task_error(tr, "internal", "the run's state could not be read");
		return;
	}
	if (tr->op == TASK_GET) {
		if ((r = task_run_get(&tr->t, look)) == NULL)
			task_error(tr, "internal", "the run's state could not "
			    "be read");
		else
			task_result(tr, r);
	} else
		/* Cancelling a run that ended changes nothing, as a job's. */
		task_result(tr, task_ack());
	json_object_put(look);
}

static void
task_gone(struct hreq *hr)
{
	struct task_req *tr = hr->owner;

	log_debug("%s: client left during a tasks request", __func__);
	hr->status = 499;
	hr->on_gone = NULL;
	http_reply(hr, 204, NULL, NULL, 0);
	task_req_free(tr);
}

static void
task_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct task_req *tr = arg;

	task_error(tr, "timeout", "vmmd did not answer within tool_timeout");
}

/* Asks the backend for tr's task, as its op wants. */
static void
task_begin(struct task_req *tr)
{
	struct mcpd *m = tr->m;

	if (tr->t.run && m->backend->run_task == NULL)
		task_error(tr, "not_found", "this mcpd runs no vm_run tasks");
	else if (tr->t.run)
		tr->bc = m->backend->run_task(m->backend_ctx, tr->op ==
		    TASK_CANCEL ? "cancel" : "get", tr->t.request_id,
		    tr->hr->token, &tr->hr->id, task_run_done, tr);
	else if (tr->op == TASK_CANCEL)
		task_call(tr, "vm_job_cancel", task_cancel_done);
	else
		task_call(tr, "vm_job_status", task_status_done);
}

struct task_req *
tasks_watch(struct hreq *hr, const struct task_id *t, task_watch_cb cb,
    void *arg)
{
	struct mcpd *m = hr->m;
	struct task_req *tr;
	struct timeval tv = { m->cfg->tool_timeout, 0 };

	/* cb never runs before this returns: the backend answers later. */
	if ((t->run && m->backend->run_task == NULL) ||
	    (tr = calloc(1, sizeof(*tr))) == NULL)
		return NULL;
	if ((tr->timer = evtimer_new(m->base, task_timer_cb, tr)) == NULL) {
		free(tr);
		return NULL;
	}
	tr->m = m;
	tr->hr = hr;
	tr->op = TASK_GET;
	tr->t = *t;
	tr->watch = cb;
	tr->watch_arg = arg;
	TAILQ_INSERT_TAIL(&m->task_reqs, tr, entry);
	evtimer_add(tr->timer, &tv);
	task_begin(tr);
	return tr;
}

void
tasks_watch_stop(struct task_req *tr)
{
	task_req_free(tr);
}

void
tasks_http_start(struct hreq *hr, const struct mcp_out *out, unsigned int acc)
{
	struct mcpd *m = hr->m;
	struct task_req *tr;
	struct budget *b;
	struct json_object *r;
	struct timeval tv = { m->cfg->tool_timeout, 0 };

	if (budget_take(&m->budgets, hr->id.workspace, BUDGET_CALLS, &b) ==
	    -1) {
		r = jsonrpc_error(out->task_rpc_id, MCP_ERR_LIMIT, "%s (%u): "
		    "this workspace already has %u tool calls in flight; retry "
		    "once one has ended", budget_key(BUDGET_CALLS),
		    m->budgets.limit[BUDGET_CALLS], budget_held(&m->budgets,
		    hr->id.workspace, BUDGET_CALLS));
		http_reply_json(hr, 429, r);
		json_object_put(r);
		return;
	}
	if ((tr = calloc(1, sizeof(*tr))) == NULL ||
	    (tr->timer = evtimer_new(m->base, task_timer_cb, tr)) == NULL) {
		free(tr);
		budget_put(&m->budgets, b, BUDGET_CALLS);
		http_reply_error(hr, "unavailable", "out of memory");
		return;
	}
	tr->m = m;
	tr->hr = hr;
	tr->budget = b;
	tr->id = json_object_get(out->task_rpc_id);
	tr->op = out->task_op;
	tr->t = out->task;
	tr->acc = acc;
	TAILQ_INSERT_TAIL(&m->task_reqs, tr, entry);
	hr->owner = tr;
	hr->on_gone = task_gone;
	http_watch_gone(hr);
	evtimer_add(tr->timer, &tv);
	task_begin(tr);
}

void
tasks_http_init(struct mcpd *m)
{
	TAILQ_INIT(&m->task_reqs);
}

void
tasks_http_free_all(struct mcpd *m)
{
	struct task_req *tr;

	while ((tr = TAILQ_FIRST(&m->task_reqs)) != NULL) {
		/* A listen's ends with its stream, which is not tr's. */
		if (tr->watch == NULL) {
			tr->hr->on_gone = NULL;
			http_reply(tr->hr, 204, NULL, NULL, 0);
		}
		task_req_free(tr);
	}
}
