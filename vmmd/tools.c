/*
 * vmmd's tool table and dispatch: the one list of the tools vmmd serves,
 * each with what it implies (audit, receipts, waking the VM) and its
 * handler.  A tool call arrives here after authd has named the workspace:
 * its arguments are validated against proto/tools.json again (mcpd did
 * too), its retry receipt is looked up, and its handler runs.  The
 * handlers live by concern in tools_vm.c, tools_job.c, run.c,
 * snapshot.c and fork.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approve.h"
#include "jsonx.h"
#include "log.h"
#include "receipts.h"
#include "schema.h"
#include "tools.h"

/* How long a caller waits, and the broker token: a retry that waits
 * differently, or that vmmd must not remember, is the same job. */
static const char *const exec_undigested[] = { "wait_seconds",
    "broker_pipe_token", NULL };

/* Waking tools call vm_ready; the others answer from what vmmd knows. */
static const struct tool_def tool_table[] = {
	{ "vm_create", TOOL_MUTATES | TOOL_RECEIPT, tool_vm_create,
	    NULL, NULL, NULL },
	{ "vm_list", 0, tool_vm_list, NULL, NULL, NULL },
	{ "vm_status", 0, tool_vm_status, NULL, NULL, NULL },
	{ "vm_exec", TOOL_MUTATES | TOOL_RECEIPT | TOOL_WAKES | TOOL_OUTLIVES,
	    tool_vm_exec,
	    NULL, NULL, exec_undigested },
	{ "vm_job_status", 0, tool_job, "job_status", job_status_done, NULL },
	{ "vm_job_output", TOOL_WAKES, tool_job, "job_output",
	    job_output_done, NULL },
	{ "vm_job_cancel", TOOL_MUTATES | TOOL_WAKES, tool_job, "job_cancel",
	    job_cancel_done, NULL },
	{ "vm_read_file", TOOL_WAKES, tool_job, "file_read", job_output_done,
	    NULL },
	{ "vm_write_file", TOOL_MUTATES | TOOL_WAKES, tool_job, "file_write",
	    job_output_done, NULL },
	{ "vm_suspend", TOOL_MUTATES, tool_vm_suspend, NULL, NULL, NULL },
	{ "vm_resume", TOOL_MUTATES | TOOL_WAKES, tool_vm_resume, NULL, NULL,
	    NULL },
	{ "vm_destroy", TOOL_MUTATES, tool_vm_destroy, NULL, NULL, NULL },
	{ "vm_run", TOOL_MUTATES | TOOL_RECEIPT | TOOL_OUTLIVES, tool_vm_run,
	    NULL, NULL, NULL, run_task },
	/* snapshot.c */
	{ "vm_snapshot", TOOL_MUTATES | TOOL_RECEIPT, tool_vm_snapshot, NULL,
	    NULL, NULL },
	{ "vm_snapshot_list", 0, tool_vm_snapshot_list, NULL, NULL, NULL },
	{ "vm_snapshot_delete", TOOL_MUTATES, tool_vm_snapshot_delete, NULL,
	    NULL, NULL },
	{ "vm_fork", TOOL_MUTATES | TOOL_RECEIPT, tool_vm_fork, NULL, NULL,
	    NULL },
};
#define NTOOLS	(sizeof(tool_table) / sizeof(tool_table[0]))

const struct tool_def *
tool_def_find(const char *name)
{
	for (size_t i = 0; i < NTOOLS; i++)
		if (strcmp(tool_table[i].name, name) == 0)
			return &tool_table[i];
	return NULL;
}

/* The table and tools.json name the same tools, or vmmd does not start. */
int
tools_table_check(char *err, size_t errlen)
{
	for (size_t i = 0; i < NTOOLS; i++)
		if (tools_find(tool_table[i].name) == NULL) {
			snprintf(err, errlen, "vmmd serves %s, which "
			    "tools.json does not describe", tool_table[i].name);
			return -1;
		}
	for (size_t i = 0; i < tools_count(); i++)
		if (tool_def_find(tool_name(tools_at(i))) == NULL) {
			snprintf(err, errlen, "tools.json describes %s, which "
			    "vmmd has no handler for", tool_name(tools_at(i)));
			return -1;
		}
	return 0;
}

/* ---- what the handlers share ------------------------------------------- */

const char *
req_arg_str(struct request *req, const char *key, const char *def)
{
	struct jsonx_err jerr;
	const char *v = def;

	(void)jsonx_get_string(req->args, key, 0, &v, &jerr);
	return v;
}

int64_t
req_arg_int(struct request *req, const char *key, int64_t def)
{
	struct jsonx_err jerr;
	int64_t v = def;

	(void)jsonx_get_int64(req->args, key, 0, INT64_MIN, INT64_MAX, &v,
	    &jerr);
	return v;
}

int
req_arg_bool(struct request *req, const char *key, int def)
{
	struct jsonx_err jerr;
	int v = def;

	(void)jsonx_get_bool(req->args, key, 0, &v, &jerr);
	return v;
}

/* The workspace's VM named id, or an error reply and NULL. */
struct vm *
tools_vm_named(struct request *req, const char *id)
{
	struct vm *vm = vm_find_owned(id, req->workspace);

	snprintf(req->vm_id, sizeof(req->vm_id), "%.*s", VM_ID_LEN, id);
	if (vm == NULL || vm->rec.state == VM_GONE) {
		request_error(req, "not_found", "there is no VM '%.64s' in "
		    "this workspace", id);
		return NULL;
	}
	return vm;
}

/* The owned VM named by the tool's vm_id, or an error reply and NULL. */
struct vm *
tools_owned_vm(struct request *req)
{
	return tools_vm_named(req, req_arg_str(req, "vm_id", ""));
}

void
tools_reply_error(struct request *req, const char *code, const char *msg)
{
	request_error(req, code, "%s", msg != NULL ? msg : code);
}

/* ---- retries that join a held request ---------------------------------- */

int
joiners_add(struct request_joiners *j, struct request *retry)
{
	if (j->n >= REQUEST_JOINERS ||
	    j->n >= vmmd_conf()->vmmd.max_joined_retries)
		return -1;
	j->r[j->n++] = retry;
	return 0;
}

/* Each joined retry gets result too (borrowed; each reply takes a ref). */
void
joiners_reply(struct request_joiners *j, struct json_object *result)
{
	for (int i = 0; i < j->n; i++)
		request_reply(j->r[i], json_object_get(result));
	j->n = 0;
}

void
joiners_error(struct request_joiners *j, const char *code, const char *msg)
{
	for (int i = 0; i < j->n; i++)
		request_error(j->r[i], code, "%s", msg);
	j->n = 0;
}

/* ---- receipts ---------------------------------------------------------- */

static int
undigested(const struct tool_def *d, const char *key)
{
	for (const char *const *k = d->undigested; k != NULL && *k != NULL;
	    k++)
		if (strcmp(*k, key) == 0)
			return 1;
	return 0;
}

/*
 * A retry while the first is still in vmmd gets the first's answer, when
 * it comes: starting, waiting, or anything between.  -1 either way.
 */
static int
receipt_join(struct request *req, const char *rid)
{
	struct request *first;

	TAILQ_FOREACH(first, request_all(), entry) {
		if (first == req || strcmp(first->request_id, rid) != 0 ||
		    first->def != req->def ||
		    strcmp(first->workspace, req->workspace) != 0)
			continue;
		req->mutation = 0;	/* audited once */
		if (request_join(first, req) == 0)
			return -1;
		request_error(req, "conflict", "max_joined_retries: "
		    "request '%s' already has %lld retries waiting "
		    "for its answer; ask again later", rid,
		    vmmd_conf()->vmmd.max_joined_retries);
		return -1;
	}
	request_error(req, "conflict", "request '%s' is still in "
	    "progress; ask again for its result", rid);
	return -1;
}

/* The stored answer of a finished request, again; -1 always. */
static int
receipt_replay(struct request *req, char *stored, const char *rid)
{
	struct json_object *body = json_tokener_parse(stored), *v;

	free(stored);
	req->mutation = 0;	/* audited the first time */
	if (body != NULL && json_object_object_get_ex(body, "result", &v)) {
		request_reply(req, json_object_get(v));
	} else if (body != NULL && json_object_object_get_ex(body, "error",
	    &v)) {
		request_error(req, json_object_get_string(
		    json_object_object_get(v, "code")), "%s",
		    json_object_get_string(json_object_object_get(v,
		    "message")));
	} else
		request_error(req, "internal", "stored receipt for %s is "
		    "unreadable", rid);
	json_object_put(body);
	return -1;
}

/* Receipts: a retried request_id gets its first answer, never a rerun. */
static int
receipt_check(struct request *req)
{
	enum receipt_status st;
	char digest[RECEIPT_DIGEST_HEX + 1], err[256];
	char *stored = NULL;
	const char *rid = req_arg_str(req, "request_id", "");
	struct json_object *dargs;
	int r;

	dargs = json_object_new_object();
	json_object_object_foreach(req->args, key, val)
		/* Nor does the receipt hold anything derived from what is
		 * left out (the broker token). */
		if (!undigested(req->def, key))
			json_object_object_add(dargs, key, json_object_get(val));
	r = receipt_digest(dargs, digest);
	json_object_put(dargs);
	if (r == -1) {
		request_error(req, "internal", "cannot digest the arguments");
		return -1;
	}
	if (store_receipt_begin(vmmd_store(), req->workspace, rid, req->tool,
	    digest, &st, &stored, err, sizeof(err)) == -1) {
		log_warnx("%s: receipt %s: %s", req->tool, rid, err);
		request_error(req, "unavailable", "the receipt store failed");
		return -1;
	}
	switch (st) {
	case RECEIPT_NEW:
		snprintf(req->request_id, sizeof(req->request_id), "%s", rid);
		return 0;
	case RECEIPT_DONE:
		return receipt_replay(req, stored, rid);
	case RECEIPT_MISMATCH:
		request_error(req, "conflict", "request_id '%s' was already "
		    "used with other arguments or another tool", rid);
		return -1;
	case RECEIPT_PENDING:
		return receipt_join(req, rid);
	case RECEIPT_UNCERTAIN:
		request_error(req, "conflict", "the outcome of request '%s' "
		    "is unknown: vmmd or the guest stopped while it ran, and "
		    "it is not run again; see vm_status for the jobs that "
		    "exist", rid);
		return -1;
	}
	return -1;
}

/* ---- dispatch ---------------------------------------------------------- */

/* IPC_VM_TOOL, once authd has named the workspace. */
void
tools_dispatch(struct request *req)
{
	char err[256];

	/* decode_mcpd took only tools of tools.json, which is the table. */
	if ((req->def = tool_def_find(req->tool)) == NULL ||
	    (req->schema = tools_find(req->tool)) == NULL) {
		request_error(req, "not_found", "there is no tool '%s'",
		    req->tool);
		return;
	}
	if (req->args == NULL)
		req->args = json_object_new_object();
	/* A question about a call, not a call: nothing is gated, run or
	 * receipted. */
	if (req->msg.task != NULL) {
		if (req->def->task == NULL)
			request_error(req, "invalid_argument", "%s has no "
			    "tasks", req->tool);
		else
			req->def->task(req);
		return;
	}
	/* The same validation mcpd did, by the same code. */
	if (tool_validate_input(req->schema, req->args, err,
	    sizeof(err)) == -1) {
		request_error(req, "invalid_argument", "%s", err);
		return;
	}
	req->mutation = (req->def->flags & TOOL_MUTATES) != 0;
	/* A gated call runs only with its approvals (approve.c), once. */
	if (approve_gate(req) == -1)
		return;
	if ((req->def->flags & TOOL_RECEIPT) && receipt_check(req) == -1)
		return;
	req->def->handler(req);
}
