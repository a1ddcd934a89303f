/*
 * mcpd's backend: forwards tool calls and stream opens to vmmd over
 * common/ipc with the caller's credential (vmmd verifies it again), relays
 * vmmd's progress, and passes its stream close notices to the streams.
 */

/*
 * The contract with its one peer, vmmd, on vmmd.sock (mcpd connects, and
 * again every second while vmmd is away).  Frames from vmmd pass
 * ipc_frame_check against vmmd_rules (below) before anything here runs.
 *
 *   mcpd sends          by                vmmd answers           read by
 *   IPC_VM_TOOL         vmmd_call         IPC_VM_TOOL_RESULT     tool_reply
 *                                         or IPC_ERROR
 *   IPC_VM_CANCEL       vmmd_cancel       nothing (the tool call is
 *                                         still answered)
 *   IPC_VM_STREAM_OPEN  vmmd_stream_open  IPC_VM_STREAM_OPEN_    stream_reply
 *   IPC_VM_BROKER_OPEN  vmmd_broker_open  RESULT with the fd,
 *                                         or IPC_ERROR
 *   IPC_VM_STATS        stats_cb, every   IPC_VM_STATS_RESULT    stats_reply
 *                       15 seconds
 *
 * Unasked, vmmd sends IPC_VM_PROGRESS (vmmd_progress) and
 * IPC_VM_STREAM_CLOSE (vmmd_stream_close), both through
 * mcpd_dispatch_vmmd.  mcpd keeps no capability; its privilege drop and
 * seccomp list are mcpd_main.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc.h"
#include "jsonx.h"
#include "log.h"
#include "mcpd.h"

#define VMMD_STREAM_TIMEOUT_MS	30000
#define VMMD_STATS_SECONDS	15

/* What vmmd may send mcpd. */
static const struct ipc_rule vmmd_rules[] = {
	{ IPC_VM_TOOL_RESULT, IPC_RULE_TEXT },
	{ IPC_VM_PROGRESS, 0 },
	{ IPC_VM_STREAM_OPEN_RESULT, IPC_RULE_FD },
	{ IPC_VM_STREAM_CLOSE, 0 },
	{ IPC_VM_STATS_RESULT, 0 },
	{ IPC_ERROR, 0 },
};
static const struct ipc_policy vmmd_policy = {
	"vmmd", vmmd_rules, sizeof(vmmd_rules) / sizeof(vmmd_rules[0])
};

struct backend_call {
	TAILQ_ENTRY(backend_call) entry;
	uint32_t		 id;		/* 0 until sent */
	int			 cancelled;	/* freed when the reply comes */
	backend_result_cb	 done;
	backend_progress_cb	 progress;
	backend_stream_cb	 sdone;
	void			*arg;
	struct event		*fail_ev;	/* vmmd away: answer later */
};

static struct {
	struct event_base	*base;
	char			 path[256];
	unsigned int		 tool_timeout;
	struct ipc_conn		*conn;
	struct event		*retry;
	struct event		*stats;
	int			 warned;	/* said vmmd is away */
	TAILQ_HEAD(, backend_call) calls;
} vmmd = { .calls = TAILQ_HEAD_INITIALIZER(vmmd.calls) };

static void	vmmd_connect(void);

static const char *const public_codes[] = {
	"invalid_argument", "unauthorized", "forbidden", "not_found",
	"conflict", "busy", "quota_exceeded", "unavailable", "internal",
	"rate_limited", "timeout",
};

/* vmmd's error as a public code and message, whatever it sent. */
static void
error_of(struct ipc_msg *m, const char **code, const char **msg)
{
	struct json_object *e, *v;
	size_t i;

	*code = "internal";
	*msg = "vmmd sent an answer mcpd does not understand";
	if (m->type != IPC_ERROR ||
	    !json_object_object_get_ex(m->body, "error", &e))
		return;
	if (json_object_object_get_ex(e, "message", &v) &&
	    json_object_is_type(v, json_type_string))
		*msg = json_object_get_string(v);
	if (json_object_object_get_ex(e, "code", &v) &&
	    json_object_is_type(v, json_type_string))
		for (i = 0; i < sizeof(public_codes) /
		    sizeof(public_codes[0]); i++)
			if (strcmp(public_codes[i],
			    json_object_get_string(v)) == 0)
				*code = public_codes[i];
}

/*
 * A gated call's error (approval_required, approval_denied,
 * approval_expired) carries vmmd's proposal: decoded into *p and set in
 * br, or -1 when it is missing or malformed.  0 for any other error.
 */
static int
approval_of(struct ipc_msg *m, struct backend_result *br, struct proposal *p)
{
	struct json_object *v;
	const char *code;
	char err[256];

	if (m->type != IPC_ERROR || !json_object_object_get_ex(m->body,
	    "error", &v) || !json_object_object_get_ex(v, "code", &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    (code = proposal_code(json_object_get_string(v))) == NULL)
		return 0;
	if (!json_object_object_get_ex(m->body, "proposal", &v)) {
		log_warnx("vmmd: %s without a proposal", code);
		return -1;
	}
	if (proposal_from_json(v, p, err, sizeof(err)) == -1) {
		log_warnx("vmmd: %s with a proposal mcpd refuses: %s", code,
		    err);
		return -1;
	}
	br->code = code;
	br->proposal = p;
	return 0;
}

static void
call_free(struct backend_call *c)
{
	if (c->id != 0)
		TAILQ_REMOVE(&vmmd.calls, c, entry);
	if (c->fail_ev != NULL)
		event_free(c->fail_ev);
	free(c);
}

static void
call_fail_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct backend_call *c = arg;
	struct backend_result br = { .code = "unavailable",
	    .message = "vmmd is not reachable; try again shortly" };

	if (c->done != NULL)
		c->done(&br, c->arg);
	else
		c->sdone(-1, NULL, br.code, br.message, c->arg);
	call_free(c);
}

static struct backend_call *
call_new(backend_result_cb done, backend_progress_cb progress,
    backend_stream_cb sdone, void *arg)
{
	struct backend_call *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("%s", __func__);
	c->done = done;
	c->progress = progress;
	c->sdone = sdone;
	c->arg = arg;
	return c;
}

/* Answers "unavailable" from the event loop: never inside call(). */
static struct backend_call *
call_unavailable(struct backend_call *c)
{
	if ((c->fail_ev = event_new(vmmd.base, -1, 0, call_fail_cb,
	    c)) == NULL)
		fatal("%s", __func__);
	event_active(c->fail_ev, EV_TIMEOUT, 1);
	return c;
}

static void
tool_reply(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct backend_call *c = arg;
	struct backend_result br = { 0 };
	struct proposal p;
	size_t off, len;

	if (c->cancelled) {
		call_free(c);
		return;
	}
	if (m == NULL) {
		br.code = "unavailable";
		br.message = "vmmd did not answer in time; the outcome is "
		    "unknown (retry with the same request_id)";
	} else if (m->type == IPC_VM_TOOL_RESULT &&
	    jsonx_members_find(m->members, m->text, m->textlen, "result",
	    &off, &len) &&
	    m->text[off] == '{') {
		/*
		 * The result goes to the client as vmmd wrote it (the frame
		 * was checked as strict JSON): a vm_read_file of a MiB is not
		 * parsed into objects only to be written out again.
		 */
		br.ok = 1;
		br.text = m->text + off;
		br.textlen = len;
	} else {
		error_of(m, &br.code, &br.message);
		if (approval_of(m, &br, &p) == -1) {
			br.code = "internal";
			br.message = "vmmd sent an approval answer mcpd "
			    "refuses (logged)";
		}
	}
	c->done(&br, c->arg);
	call_free(c);
}

/* Sends body (consumed) as c's request; c is pending until answered. */
static struct backend_call *
call_send(struct backend_call *c, uint32_t type, struct json_object *body,
    int timeout_ms, ipc_reply_cb reply)
{
	int rc;

	rc = ipc_request_id(vmmd.conn, type, body, -1, timeout_ms, reply, c,
	    &c->id);
	json_object_put(body);
	if (rc == -1) {
		c->id = 0;
		return call_unavailable(c);
	}
	TAILQ_INSERT_TAIL(&vmmd.calls, c, entry);
	return c;
}

static struct backend_call *
vmmd_call(void *ctx, const char *tool, struct json_object *args,
    const char *credential, const struct auth_identity *id,
    backend_result_cb done, backend_progress_cb progress, void *arg)
{
	struct backend_call *c = call_new(done, progress, NULL, arg);
	struct json_object *body;

	if (vmmd.conn == NULL)
		return call_unavailable(c);
	body = json_object_new_object();
	json_object_object_add(body, "credential",
	    json_object_new_string(credential));
	json_object_object_add(body, "tool", json_object_new_string(tool));
	json_object_object_add(body, "arguments", json_object_get(args));
	json_object_object_add(body, "progress",
	    json_object_new_boolean(progress != NULL));
	return call_send(c, IPC_VM_TOOL, body,
	    (int)(vmmd.tool_timeout + 10) * 1000, tool_reply);
}

static struct backend_call *
vmmd_run_task(void *ctx, const char *op, const char *request_id,
    const char *credential, const struct auth_identity *id,
    backend_result_cb done, void *arg)
{
	struct backend_call *c = call_new(done, NULL, NULL, arg);
	struct json_object *body, *args;

	if (vmmd.conn == NULL)
		return call_unavailable(c);
	args = json_object_new_object();
	json_object_object_add(args, "request_id",
	    json_object_new_string(request_id));
	body = json_object_new_object();
	json_object_object_add(body, "credential",
	    json_object_new_string(credential));
	json_object_object_add(body, "tool", json_object_new_string("vm_run"));
	json_object_object_add(body, "arguments", args);
	json_object_object_add(body, "task", json_object_new_string(op));
	return call_send(c, IPC_VM_TOOL, body,
	    (int)(vmmd.tool_timeout + 10) * 1000, tool_reply);
}

static void
vmmd_cancel(void *ctx, struct backend_call *c)
{
	struct json_object *body;

	if (c->id == 0) {
		call_free(c);	/* only the deferred failure was pending */
		return;
	}
	/* The reply still comes (or times out); it frees c then. */
	c->cancelled = 1;
	if (vmmd.conn != NULL && c->done != NULL) {
		body = json_object_new_object();
		json_object_object_add(body, "id", json_object_new_int64(c->id));
		if (ipc_send(vmmd.conn, IPC_VM_CANCEL, 0, body, -1) == -1)
			log_debug("vmmd: cannot send a cancel");
		json_object_put(body);
	}
}

static void
stream_reply(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct backend_call *c = arg;
	struct json_object *v;
	const char *code, *msg, *sid = NULL;
	int fd;

	if (c->cancelled) {
		call_free(c);
		return;
	}
	if (m == NULL) {
		c->sdone(-1, NULL, "unavailable", "vmmd did not answer in "
		    "time", c->arg);
	} else if (m->type == IPC_VM_STREAM_OPEN_RESULT && m->fd != -1) {
		if (json_object_object_get_ex(m->body, "stream_id", &v) &&
		    json_object_is_type(v, json_type_string))
			sid = json_object_get_string(v);
		fd = m->fd;
		m->fd = -1;
		c->sdone(fd, sid, NULL, NULL, c->arg);
	} else {
		error_of(m, &code, &msg);
		c->sdone(-1, NULL, code, msg, c->arg);
	}
	call_free(c);
}

static struct backend_call *
vmmd_stream_open(void *ctx, const char *vm_id, unsigned int port,
    const char *credential, const struct auth_identity *id,
    backend_stream_cb done, void *arg)
{
	struct backend_call *c = call_new(NULL, NULL, done, arg);
	struct json_object *body;

	if (vmmd.conn == NULL)
		return call_unavailable(c);
	body = json_object_new_object();
	json_object_object_add(body, "credential",
	    json_object_new_string(credential));
	json_object_object_add(body, "vm_id", json_object_new_string(vm_id));
	json_object_object_add(body, "port", json_object_new_int((int)port));
	return call_send(c, IPC_VM_STREAM_OPEN, body, VMMD_STREAM_TIMEOUT_MS,
	    stream_reply);
}

static struct backend_call *
vmmd_broker_open(void *ctx, const char *vm_id, const char *job_id,
    const char *pipe_token, const char *credential,
    const struct auth_identity *id, backend_stream_cb done, void *arg)
{
	struct backend_call *c = call_new(NULL, NULL, done, arg);
	struct json_object *body;

	if (vmmd.conn == NULL)
		return call_unavailable(c);
	body = json_object_new_object();
	json_object_object_add(body, "credential",
	    json_object_new_string(credential));
	json_object_object_add(body, "vm_id", json_object_new_string(vm_id));
	json_object_object_add(body, "job_id", json_object_new_string(job_id));
	json_object_object_add(body, "pipe_token",
	    json_object_new_string(pipe_token));
	return call_send(c, IPC_VM_BROKER_OPEN, body, VMMD_STREAM_TIMEOUT_MS,
	    stream_reply);
}

/* IPC_VM_PROGRESS: a slow tool's progress, for the call of that id. */
static void
vmmd_progress(struct ipc_msg *m)
{
	struct backend_call *c;

	TAILQ_FOREACH(c, &vmmd.calls, entry)
		if (c->id == m->id)
			break;
	if (c == NULL || c->cancelled || c->progress == NULL)
		return;
	c->progress(json_object_get_double(json_object_object_get(m->body,
	    "progress")), json_object_get_double(json_object_object_get(
	    m->body, "total")), json_object_get_string(json_object_object_get(
	    m->body, "message")), c->arg);
}

/* IPC_VM_STREAM_CLOSE: a stream's VM was suspended or destroyed. */
static void
vmmd_stream_close(struct ipc_msg *m)
{
	struct json_object *v;
	const char *sid, *reason = "closed";

	if (!json_object_object_get_ex(m->body, "stream_id", &v) ||
	    !json_object_is_type(v, json_type_string))
		return;
	sid = json_object_get_string(v);
	if (json_object_object_get_ex(m->body, "reason", &v) &&
	    json_object_is_type(v, json_type_string))
		reason = json_object_get_string(v);
	stream_close_by_id(sid, reason);
}

static void
mcpd_dispatch_vmmd(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	switch (m->type) {
	case IPC_VM_PROGRESS:
		vmmd_progress(m);
		break;
	case IPC_VM_STREAM_CLOSE:
		vmmd_stream_close(m);
		break;
	}
}

static void
mcpd_closed_vmmd(struct ipc_conn *conn, void *arg)
{
	struct timeval tv = { 1, 0 };

	vmmd.conn = NULL;
	metrics_set_vms(NULL);
	metrics_set_drops(NULL);
	log_warnx("lost vmmd; reconnecting");
	vmmd.warned = 1;
	evtimer_add(vmmd.retry, &tv);
}

static const struct ipc_handlers vmmd_handlers = {
	mcpd_dispatch_vmmd, mcpd_closed_vmmd
};

static void
stats_reply(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct json_object *v;

	if (m != NULL && m->type == IPC_VM_STATS_RESULT &&
	    json_object_object_get_ex(m->body, "vms", &v) &&
	    json_object_is_type(v, json_type_object))
		metrics_set_vms(v);
	if (m != NULL && m->type == IPC_VM_STATS_RESULT &&
	    json_object_object_get_ex(m->body, "drops", &v) &&
	    json_object_is_type(v, json_type_array))
		metrics_set_drops(v);
}

static void
stats_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct timeval tv = { VMMD_STATS_SECONDS, 0 };

	if (vmmd.conn != NULL && ipc_request(vmmd.conn, IPC_VM_STATS, NULL,
	    -1, 5000, stats_reply, NULL) == -1)
		log_debug("vmmd: cannot ask for stats");
	evtimer_add(vmmd.stats, &tv);
}

static void
retry_cb(evutil_socket_t fd, short ev, void *arg)
{
	vmmd_connect();
}

static void
vmmd_connect(void)
{
	struct timeval tv = { 1, 0 };

	vmmd.conn = ipc_connect(vmmd.base, vmmd.path, "mcpd", &vmmd_policy,
	    &vmmd_handlers, NULL);
	if (vmmd.conn == NULL) {
		/* Once per absence: vmmd may take minutes to check images. */
		if (!vmmd.warned)
			log_warnx("vmmd at %s: %s; retrying every second",
			    vmmd.path, strerror(errno));
		else
			log_debug("vmmd at %s: %s", vmmd.path,
			    strerror(errno));
		vmmd.warned = 1;
		evtimer_add(vmmd.retry, &tv);
		return;
	}
	if (vmmd.warned)
		log_info("vmmd at %s: connected", vmmd.path);
	vmmd.warned = 0;
	stats_cb(-1, 0, NULL);
}

static int
vmmd_start(void *ctx, struct event_base *base, const struct mcpd_config *cfg)
{
	vmmd.base = base;
	vmmd.tool_timeout = cfg->tool_timeout;
	snprintf(vmmd.path, sizeof(vmmd.path), "%s", cfg->vmmd_socket);
	if ((vmmd.retry = evtimer_new(base, retry_cb, NULL)) == NULL ||
	    (vmmd.stats = evtimer_new(base, stats_cb, NULL)) == NULL)
		return -1;
	vmmd_connect();
	return 0;
}

const struct backend_ops vmmd_backend_ops = {
	"vmmd", vmmd_start, vmmd_call, vmmd_cancel, vmmd_stream_open,
	vmmd_broker_open, vmmd_run_task,
};
