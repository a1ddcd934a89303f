/*
 * vmproxy's QEMU side (vmproxy_qmp.h): typed operations in, QMP out,
 * QEMU's answers checked and boiled down to a struct vmq_result.  Nothing
 * QEMU writes leaves this process except as one of vmqmp.h's names or a
 * short sanitized string.
 */
#include <sys/queue.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "console.h"
#include "ipc.h"
#include "jsonx.h"
#include "log.h"
#include "qmp.h"
#include "vmproxy_qmp.h"

/* QEMU throttles migration to 32 MiB/s unless told otherwise. */
#define MIGRATE_BANDWIDTH	(1LL << 40)

struct vpq_req {
	TAILQ_ENTRY(vpq_req)	 entry;
	struct vpq		*q;
	enum vmq_op		 op;
	vpq_cb			 cb;
	void			*arg;
	struct vmq_result	 res;		/* a deferred answer */
};

struct vpq {
	struct event_base	*base;
	char			*path;
	struct console		*log;
	struct vpq_cbs		 cbs;
	void			*arg;
	struct qmp		*qmp;
	struct vpq_req		*connecting;	/* the CONNECT waiting */
	TAILQ_HEAD(, vpq_req)	 reqs;		/* every one still out */
};

static void
req_finish(struct vpq_req *r, const struct vmq_result *res)
{
	TAILQ_REMOVE(&r->q->reqs, r, entry);
	if (r->q->connecting == r)
		r->q->connecting = NULL;
	r->cb(res, r->arg);
	free(r);
}

static void
req_deferred(evutil_socket_t fd, short what, void *arg)
{
	struct vpq_req *r = arg;

	r->cb(&r->res, r->arg);
	free(r);
}

/*
 * An answer known at once still comes later, from the loop: a caller
 * never sees its callback run inside vpq_call.
 */
static void
req_defer(struct vpq_req *r, const struct vmq_result *res)
{
	struct timeval now = { 0, 0 };

	TAILQ_REMOVE(&r->q->reqs, r, entry);
	if (r->q->connecting == r)
		r->q->connecting = NULL;
	r->res = *res;
	if (event_base_once(r->q->base, -1, EV_TIMEOUT, req_deferred, r,
	    &now) == -1)
		req_deferred(-1, 0, r);
}

static void
res_fail(struct vmq_result *res, enum vmq_err err, const char *msg)
{
	memset(res, 0, sizeof(*res));
	res->err = err;
	vmq_sanitize(res->msg, msg, strlen(msg));
}

static void
vpq_ready(struct qmp *qm, void *arg)
{
	struct vpq *q = arg;
	struct vmq_result res;

	memset(&res, 0, sizeof(res));
	res.ok = 1;
	if (q->connecting != NULL)
		req_finish(q->connecting, &res);
}

static void
vpq_event(struct qmp *qm, const char *name, struct json_object *data,
    void *arg)
{
	struct vpq *q = arg;
	int ev = vmq_lookup(vmq_event_names, name);

	if (ev >= 0 && q->cbs.event != NULL)
		q->cbs.event((enum vmq_event)ev, q->arg);
}

static void
vpq_closed(struct qmp *qm, const char *why, void *arg)
{
	struct vpq *q = arg;
	struct vmq_result res;

	if (q->connecting != NULL) {
		res_fail(&res, VMQE_DISCONNECTED, why);
		req_finish(q->connecting, &res);
	}
	if (q->cbs.lost != NULL)
		q->cbs.lost(why, q->arg);
}

static const struct qmp_cbs vpq_qmp_cbs = { vpq_ready, vpq_event,
	vpq_closed };

void
vmq_from_qmp(enum vmq_op op, const struct qmp_reply *r,
    struct vmq_result *res)
{
	struct json_object *v;
	int i;

	memset(res, 0, sizeof(*res));
	if (!r->ok) {
		enum vmq_err e = VMQE_QEMU;

		if (r->err_class != NULL && strcmp(r->err_class, "timeout") == 0)
			e = VMQE_TIMEOUT;
		else if (r->err_class != NULL &&
		    strcmp(r->err_class, "disconnected") == 0)
			e = VMQE_DISCONNECTED;
		res_fail(res, e, r->err_desc != NULL ? r->err_desc : "");
		return;
	}
	res->ok = 1;
	switch (op) {
	case VMQ_QUERY_STATUS:
		if (!json_object_is_type(r->ret, json_type_object) ||
		    !json_object_object_get_ex(r->ret, "status", &v) ||
		    !json_object_is_type(v, json_type_string)) {
			res_fail(res, VMQE_PROTOCOL,
			    "malformed query-status reply");
			break;
		}
		i = vmq_lookup(vmq_run_names, json_object_get_string(v));
		res->status = i > VMQR_NONE ? (enum vmq_run)i : VMQR_OTHER;
		res->running = json_object_object_get_ex(r->ret, "running",
		    &v) && json_object_is_type(v, json_type_boolean) &&
		    json_object_get_boolean(v);
		break;
	case VMQ_QUERY_MIGRATE:
		if (!json_object_is_type(r->ret, json_type_object)) {
			res_fail(res, VMQE_PROTOCOL,
			    "malformed query-migrate reply");
			break;
		}
		res->mig = VMQM_NONE;
		if (json_object_object_get_ex(r->ret, "status", &v) &&
		    json_object_is_type(v, json_type_string)) {
			i = vmq_lookup(vmq_mig_names,
			    json_object_get_string(v));
			res->mig = i > VMQM_NONE ? (enum vmq_mig)i : VMQM_OTHER;
		}
		if (json_object_object_get_ex(r->ret, "error-desc", &v) &&
		    json_object_is_type(v, json_type_string))
			vmq_sanitize(res->msg, json_object_get_string(v),
			    (size_t)json_object_get_string_len(v));
		break;
	default:
		break;
	}
}

struct json_object *
vmq_result_json(const struct vmq_result *res)
{
	struct json_object *b = json_object_new_object();

	json_object_object_add(b, "ok", json_object_new_boolean(res->ok));
	if (!res->ok)
		json_object_object_add(b, "error",
		    json_object_new_string(vmq_err_names[res->err]));
	if (res->msg[0] != '\0')
		json_object_object_add(b, "message",
		    json_object_new_string(res->msg));
	if (res->status != VMQR_NONE) {
		json_object_object_add(b, "status",
		    json_object_new_string(vmq_run_names[res->status]));
		json_object_object_add(b, "running",
		    json_object_new_boolean(res->running));
	}
	if (res->mig != VMQM_NONE)
		json_object_object_add(b, "migration",
		    json_object_new_string(vmq_mig_names[res->mig]));
	return b;
}

/* QEMU's answer to one command, shaped by what the op wants of it. */
static void
vpq_reply(struct qmp *qm, const struct qmp_reply *r, void *arg)
{
	struct vpq_req *req = arg;
	struct vmq_result res;

	vmq_from_qmp(req->op, r, &res);
	req_finish(req, &res);
}

struct vpq *
vpq_new(struct event_base *base, const char *qmp_path, struct console *log,
    const struct vpq_cbs *cbs, void *arg)
{
	struct vpq *q;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return NULL;
	if ((q->path = strdup(qmp_path)) == NULL) {
		free(q);
		return NULL;
	}
	q->base = base;
	q->log = log;
	if (cbs != NULL)
		q->cbs = *cbs;
	q->arg = arg;
	TAILQ_INIT(&q->reqs);
	return q;
}

void
vpq_last_words(struct vpq *q, char *buf)
{
	char tail[512], *p, *e;
	size_t n;

	buf[0] = '\0';
	if (q->log == NULL)
		return;
	/* QEMU has exited by the time this is asked: all it wrote is in
	 * the pipe, so take it in before reading the end of the file. */
	console_drain(q->log);
	n = console_tail(q->log, tail, sizeof(tail) - 1);
	tail[n] = '\0';
	while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r'))
		tail[--n] = '\0';
	p = (e = memrchr(tail, '\n', n)) != NULL ? e + 1 : tail;
	vmq_sanitize(buf, p, strlen(p));
}

int
vpq_call(struct vpq *q, enum vmq_op op, int fd, int timeout_ms, vpq_cb cb,
    void *arg)
{
	static const char *const cmds[VMQ_OP_COUNT] = {
		[VMQ_STOP] = "stop",
		[VMQ_CONT] = "cont",
		[VMQ_QUERY_STATUS] = "query-status",
		[VMQ_QUERY_MIGRATE] = "query-migrate",
		[VMQ_MIGRATE_PARAMS] = "migrate-set-parameters",
		[VMQ_GETFD] = "getfd",
		[VMQ_MIGRATE] = "migrate",
		[VMQ_MIGRATE_INCOMING] = "migrate-incoming",
		[VMQ_MIGRATE_CANCEL] = "migrate_cancel",
		[VMQ_QUIT] = "quit",
	};
	struct vpq_req *r;
	struct vmq_result res;
	struct json_object *a = NULL;

	if ((int)op < 0 || op >= VMQ_OP_COUNT || (fd != -1) !=
	    (op == VMQ_GETFD) || timeout_ms < VMQ_TIMEOUT_MIN ||
	    timeout_ms > VMQ_TIMEOUT_MAX) {
		errno = EINVAL;
		return -1;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return -1;
	r->q = q;
	r->op = op;
	r->cb = cb;
	r->arg = arg;
	TAILQ_INSERT_TAIL(&q->reqs, r, entry);
	memset(&res, 0, sizeof(res));
	switch (op) {
	case VMQ_CONNECT:
		if (q->qmp != NULL && qmp_is_ready(q->qmp)) {
			res.ok = 1;
			req_defer(r, &res);
			return 0;
		}
		if (q->connecting != NULL) {
			res_fail(&res, VMQE_UNAVAILABLE, "already connecting");
			req_defer(r, &res);
			return 0;
		}
		qmp_free(q->qmp);
		q->connecting = r;
		if ((q->qmp = qmp_open(q->base, q->path, timeout_ms,
		    &vpq_qmp_cbs, q)) == NULL) {
			res_fail(&res, VMQE_UNAVAILABLE, strerror(errno));
			req_defer(r, &res);
		}
		return 0;
	case VMQ_LAST_WORDS:
		res.ok = 1;
		vpq_last_words(q, res.msg);
		req_defer(r, &res);
		return 0;
	case VMQ_MIGRATE_PARAMS:
		a = json_object_new_object();
		json_object_object_add(a, "max-bandwidth",
		    json_object_new_int64(MIGRATE_BANDWIDTH));
		break;
	case VMQ_GETFD:
		a = json_object_new_object();
		json_object_object_add(a, "fdname",
		    json_object_new_string(VMQ_CKPT_FDNAME));
		break;
	case VMQ_MIGRATE:
	case VMQ_MIGRATE_INCOMING:
		a = json_object_new_object();
		json_object_object_add(a, "uri",
		    json_object_new_string("fd:" VMQ_CKPT_FDNAME));
		break;
	default:
		break;
	}
	if (q->qmp == NULL || !qmp_is_ready(q->qmp) ||
	    qmp_command(q->qmp, cmds[op], a, fd, timeout_ms, vpq_reply,
	    r) == -1) {
		if (q->qmp == NULL || !qmp_is_ready(q->qmp))
			json_object_put(a);
		res_fail(&res, VMQE_DISCONNECTED, "QMP connection is closed");
		req_defer(r, &res);
	}
	return 0;
}

void
vpq_free(struct vpq *q)
{
	struct vmq_result res;
	struct qmp *qm;

	if (q == NULL)
		return;
	/* Without its callbacks, which would find q half gone. */
	qm = q->qmp;
	q->qmp = NULL;
	qmp_free(qm);
	res_fail(&res, VMQE_DISCONNECTED, "vmproxy is stopping");
	while (!TAILQ_EMPTY(&q->reqs))
		req_finish(TAILQ_FIRST(&q->reqs), &res);
	free(q->path);
	free(q);
}

/* ---- IPC ---------------------------------------------------------------- */

static struct {
	struct ipc_conn	*conn;
	struct vpq	*q;
} vq;

struct ipc_req {
	uint32_t	 id;
	int		 fd;
};

static void
ipc_event(enum vmq_event ev, void *arg)
{
	struct json_object *b;

	if (vq.conn == NULL)
		return;
	b = json_object_new_object();
	json_object_object_add(b, "name",
	    json_object_new_string(vmq_event_names[ev]));
	ipc_send(vq.conn, IPC_PROXY_QMP_EVENT, 0, b, -1);
	json_object_put(b);
}

static void
ipc_lost(const char *why, void *arg)
{
	struct json_object *b;
	char msg[VMQ_MSG_MAX + 1];

	if (vq.conn == NULL)
		return;
	b = json_object_new_object();
	json_object_object_add(b, "message",
	    json_object_new_string(vmq_sanitize(msg, why, strlen(why))));
	ipc_send(vq.conn, IPC_PROXY_QMP_LOST, 0, b, -1);
	json_object_put(b);
}

static const struct vpq_cbs ipc_cbs = { ipc_event, ipc_lost };

int
vmproxy_qmp_init(struct event_base *base, struct ipc_conn *conn,
    const char *qmp_path, struct console *log)
{
	vq.conn = conn;
	if (qmp_path == NULL)
		return 0;
	if ((vq.q = vpq_new(base, qmp_path, log, &ipc_cbs, NULL)) == NULL)
		return -1;
	return 0;
}

static void
ipc_result(const struct vmq_result *res, void *arg)
{
	struct ipc_req *r = arg;
	struct json_object *b;

	if (r->fd != -1)
		close(r->fd);
	if (vq.conn == NULL) {
		free(r);
		return;
	}
	b = vmq_result_json(res);
	ipc_reply(vq.conn, IPC_PROXY_QMP_RESULT, r->id, b, -1);
	json_object_put(b);
	free(r);
}

void
vmproxy_qmp_request(struct ipc_conn *conn, struct ipc_msg *m, int op,
    int64_t ms)
{
	struct ipc_req *r;

	/* op and ms were decoded and bounded (vmproxy_decode_qmp). */
	if ((m->fd != -1) != (op == VMQ_GETFD)) {
		ipc_reply_error(conn, m->id, "invalid_argument", "qmp: %s "
		    "%s a descriptor", vmq_op_names[op], m->fd != -1 ?
		    "takes no" : "needs");
		return;
	}
	if (vq.q == NULL) {
		ipc_reply_error(conn, m->id, "unavailable", "this vmproxy "
		    "has no QEMU monitor");
		return;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		ipc_reply_error(conn, m->id, "internal", "out of memory");
		return;
	}
	r->id = m->id;
	r->fd = m->fd;
	m->fd = -1;
	if (vpq_call(vq.q, (enum vmq_op)op, r->fd, (int)ms, ipc_result,
	    r) == -1) {
		ipc_reply_error(conn, m->id, "internal", "qmp: %s",
		    strerror(errno));
		if (r->fd != -1)
			close(r->fd);
		free(r);
	}
}

void
vmproxy_qmp_free(void)
{
	vq.conn = NULL;
	vpq_free(vq.q);
	vq.q = NULL;
}
