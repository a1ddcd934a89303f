/*
 * vmmd's requests (request.h): how each is answered, once.  A reply is
 * checked against its tool's output schema, as mcpd checks what it asked;
 * every answer finishes the retry receipt and, for a mutation, the audit
 * line, before it goes to mcpd or vmctl on the connection the request
 * came on, if that is still there.
 */
#include <sys/queue.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "approve.h"
#include "audit.h"
#include "env.h"
#include "ipc.h"
#include "log.h"
#include "request.h"
#include "schema.h"
#include "store.h"
#include "util.h"
#include "vmmd_shared.h"

static struct request_head requests = TAILQ_HEAD_INITIALIZER(requests);

struct request_head *
request_all(void)
{
	return &requests;
}

struct request *
request_new(struct ipc_conn *conn, uint32_t id)
{
	struct request *req;

	if ((req = calloc(1, sizeof(*req))) == NULL)
		fatal("calloc");
	req->conn = conn;
	req->id = id;
	req->arrived_ms = wall_ms();
	TAILQ_INSERT_TAIL(&requests, req, entry);
	return req;
}

static void
request_free(struct request *req)
{
	/* Answered some other way (request_drop): its retries ask again. */
	if (req->joined != NULL)
		joiners_error(req->joined, "unavailable", "the request it "
		    "retried ended without an answer; ask again");
	free(req->joined);
	TAILQ_REMOVE(&requests, req, entry);
	json_object_put(req->args);
	json_object_put(req->body);
	json_object_put(req->proposal);
	free(req);
}

/* Records the outcome in the receipt and the audit log. */
static void
request_finish(struct request *req, struct json_object *stored,
    const char *outcome)
{
	char err[256];

	if (req->request_id[0] != '\0') {
		struct json_object *o = json_object_new_object();
		const char *js;

		/* The answer, and when it was asked and given (a vm_run
		 * task's times, run.c). */
		json_object_object_foreach(stored, k, v)
			json_object_object_add(o, k, json_object_get(v));
		json_object_object_add(o, "created_ms",
		    json_object_new_int64(req->arrived_ms));
		json_object_object_add(o, "finished_ms",
		    json_object_new_int64(wall_ms()));
		js = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
		if (store_receipt_finish(vmmd_store(), req->workspace,
		    req->request_id, js, err, sizeof(err)) == -1)
			log_warnx("%s: receipt %s not stored: %s", req->tool,
			    req->request_id, err);
		json_object_put(o);
	}
	if (req->mutation && vmmd_audit() != NULL)
		audit_append(vmmd_audit(), req->workspace, req->tool,
		    req->vm_id, outcome);
	if (req->proposal_id[0] != '\0') {
		approve_outcome(req->proposal_id, outcome);
		req->proposal_id[0] = '\0';
	}
}

void
request_reply(struct request *req, struct json_object *result)
{
	struct json_object *body;
	char err[256];

	/* vmmd checks what it answers, as mcpd checks what it asked. */
	if (req->schema != NULL && !req->admin && !req->checked &&
	    tool_validate_output(req->schema, result, err,
	    sizeof(err)) == -1) {
		log_warnx("%s: result does not match its schema: %s",
		    req->tool, err);
		json_object_put(result);
		request_error(req, "internal", "the result failed its own "
		    "schema check; this is a bug in mcpvm");
		return;
	}
	body = json_object_new_object();
	json_object_object_add(body, "result", result);
	request_finish(req, body, "ok");
	if (req->conn != NULL)
		ipc_reply(req->conn, req->admin ? IPC_VMCTL_RESULT :
		    IPC_VM_TOOL_RESULT, req->id, body, -1);
	if (req->joined != NULL)
		joiners_reply(req->joined, result);
	json_object_put(body);
	request_free(req);
}

int
request_join(struct request *first, struct request *retry)
{
	if (first->on_join != NULL)
		return first->on_join(first, retry);
	if (first->joined == NULL &&
	    (first->joined = calloc(1, sizeof(*first->joined))) == NULL)
		return -1;
	return joiners_add(first->joined, retry);
}

void
request_drop(struct request *req)
{
	request_free(req);
}

void
request_error(struct request *req, const char *code, const char *fmt, ...)
{
	struct json_object *body;
	char msg[512], err[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	body = ipc_error_body(code, msg);
	/* A gated call's answer names its proposal (approve.c). */
	if (req->proposal != NULL) {
		json_object_object_add(body, "proposal", req->proposal);
		req->proposal = NULL;
	}
	if (req->request_id[0] != '\0' && req->uncertain) {
		/* It may have run: a retry is refused, never run again. */
		if (store_receipt_uncertain(vmmd_store(), req->workspace,
		    req->request_id, err, sizeof(err)) == -1)
			log_warnx("%s: receipt %s not marked uncertain: %s",
			    req->tool, req->request_id, err);
		req->request_id[0] = '\0';
	} else if (req->request_id[0] != '\0' &&
	    (strcmp(code, "unavailable") == 0 ||
	    strcmp(code, "unauthorized") == 0)) {
		/* A refusal that changed nothing leaves no receipt: a retry
		 * may go. */
		if (store_receipt_forget(vmmd_store(), req->workspace,
		    req->request_id, err, sizeof(err)) == -1)
			log_warnx("%s: receipt %s not forgotten: %s",
			    req->tool, req->request_id, err);
		req->request_id[0] = '\0';
	}
	request_finish(req, body, code);
	if (req->conn != NULL)
		ipc_reply(req->conn, IPC_ERROR, req->id, body, -1);
	if (req->joined != NULL)
		joiners_error(req->joined, code, msg);
	json_object_put(body);
	request_free(req);
}

void
request_progress(struct request *req, int progress, int total,
    const char *message)
{
	struct json_object *body;

	if (req->conn == NULL || !req->progress || req->admin)
		return;
	body = json_object_new_object();
	json_object_object_add(body, "progress", json_object_new_int(progress));
	json_object_object_add(body, "total", json_object_new_int(total));
	json_object_object_add(body, "message", json_object_new_string(message));
	ipc_send(req->conn, IPC_VM_PROGRESS, req->id, body, -1);
	json_object_put(body);
}
