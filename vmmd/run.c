/*
 * vm_run for vmmd: a VM of its own for one command.  It is created as
 * vm_create creates it (tools_create: the same checks, quotas and audit,
 * from the snapshot named, the warm pool or a boot), the command runs as
 * vm_exec runs it, its end is polled from a timer as vm_exec's wait is,
 * its first page of output is read, and, when commit asks for it and the
 * command exited 0, a disk-only snapshot of the VM is made as
 * vm_snapshot makes one.  The VM is destroyed before the answer goes out,
 * whatever happened: the command ended, timed out, the guest failed, mcpd
 * cancelled the call or went away.  Nothing here blocks the loop: every
 * step is a callback.
 *
 * A retry of the same request_id joins the run or gets its stored answer
 * (tools.c's receipts): the commit's snapshot is made once, and every
 * answer names the same one.  mcpd's MCP task of a vm_run asks after it by
 * that request_id too (run_task): the run while under way, its receipt
 * once answered.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include <openssl/rand.h>

#include "audit.h"
#include "jsonx.h"
#include "log.h"
#include "snapshot.h"
#include "vmmd_shared.h"

/* The guest kills the command at timeout_seconds; if it has not said so
 * this much later, the run ends without it. */
#define RUN_GRACE_SECONDS	15

enum run_phase {
	RUN_CREATING,		/* vm_create is under way */
	RUN_STARTING,		/* the exec call is on its way */
	RUN_WAITING,		/* polling the job's status */
	RUN_READING,		/* the output call is on its way */
	RUN_COMMITTING,		/* commit's snapshot is being made */
	RUN_DESTROYING,		/* vm_destroy is under way */
};

struct run {
	struct request		*req;
	struct event		*timer;
	enum run_phase		 phase;
	int			 cancel;
	int			 inflight;	/* a guest call is out */
	int			 timeout_s;
	int			 max_bytes;
	int			 last_progress;
	struct timespec		 started;
	struct json_object	*status;	/* the job's last status */
	struct json_object	*result;	/* the answer, once known */
	char			 code[32];	/* or the error, once known */
	char			 msg[256];
	char			 job_id[32];
	char			 origin[16];	/* how its VM was made */
	/* commit: the snapshot's name ("": none asked for), then its id
	 * once made, or why none was (its error code, if it failed). */
	char			 commit_name[65];
	char			 commit_id[VM_ID_LEN + 1];
	char			 commit_code[32];
	char			 commit_why[256];
	struct request_joiners	 joiners;
};

static void run_tick(evutil_socket_t, short, void *);

static long
elapsed_ms(const struct run *run)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)(now.tv_sec - run->started.tv_sec) * 1000 +
	    (now.tv_nsec - run->started.tv_nsec) / 1000000;
}

static void
run_schedule(struct run *run, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(run->timer, &tv);
}

/* What the result says of commit: made, or why not. */
static struct json_object *
run_commit_json(struct run *run)
{
	struct json_object *o = json_object_new_object(), *v;
	const char *state = "";
	int exit_code = -1;

	json_object_object_add(o, "name",
	    json_object_new_string(run->commit_name));
	json_object_object_add(o, "committed",
	    json_object_new_boolean(run->commit_id[0] != '\0'));
	if (run->commit_id[0] != '\0') {
		json_object_object_add(o, "snapshot_id",
		    json_object_new_string(run->commit_id));
		return o;
	}
	if (run->commit_code[0] != '\0')
		json_object_object_add(o, "code",
		    json_object_new_string(run->commit_code));
	if (run->commit_why[0] == '\0') {
		if (json_object_object_get_ex(run->result, "state", &v) &&
		    json_object_is_type(v, json_type_string))
			state = json_object_get_string(v);
		if (json_object_object_get_ex(run->result, "exit_code", &v) &&
		    json_object_is_type(v, json_type_int))
			exit_code = json_object_get_int(v);
		if (strcmp(state, "timed_out") == 0)
			snprintf(run->commit_why, sizeof(run->commit_why),
			    "the command timed out");
		else if (strcmp(state, "cancelled") == 0)
			snprintf(run->commit_why, sizeof(run->commit_why),
			    "the command was cancelled");
		else if (exit_code > 0)
			snprintf(run->commit_why, sizeof(run->commit_why),
			    "the command exited with %d", exit_code);
		else
			snprintf(run->commit_why, sizeof(run->commit_why),
			    "the guest stopped answering before the commit");
	}
	json_object_object_add(o, "reason",
	    json_object_new_string(run->commit_why));
	return o;
}

/* The answer, to the request and every retry that joined it. */
static void
run_answer(struct run *run)
{
	struct request *req = run->req;

	req->on_cancel = NULL;
	req->on_join = NULL;
	req->hold = NULL;
	event_free(run->timer);
	json_object_put(run->status);
	if (run->result != NULL) {
		json_object_object_add(run->result, "origin",
		    json_object_new_string(run->origin[0] != '\0' ?
		    run->origin : "booted"));
		if (run->commit_name[0] != '\0')
			json_object_object_add(run->result, "commit",
			    run_commit_json(run));
		joiners_reply(&run->joiners, run->result);
		request_reply(req, run->result);
	} else {
		joiners_error(&run->joiners, run->code, run->msg);
		request_error(req, run->code, "%s", run->msg);
	}
	free(run);
}

static void
run_error(struct run *run, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Remembers the error the answer will be, unless one is known already. */
static void
run_error(struct run *run, const char *code, const char *fmt, ...)
{
	va_list ap;

	if (run->result != NULL || run->code[0] != '\0')
		return;
	snprintf(run->code, sizeof(run->code), "%s", code);
	va_start(ap, fmt);
	vsnprintf(run->msg, sizeof(run->msg), fmt, ap);
	va_end(ap);
}

static void
run_destroyed(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct run *run = arg;

	if (code != NULL)
		log_warnx("vm %s: vm_run's destroy: %s", run->req->vm_id,
		    msg != NULL ? msg : code);
	run_answer(run);
}

/* Destroys the run's VM, then answers. */
static void
run_destroy(struct run *run)
{
	struct vm *vm = vm_find(run->req->vm_id);

	if (run->phase == RUN_DESTROYING)
		return;
	run->phase = RUN_DESTROYING;
	evtimer_del(run->timer);
	if (vm == NULL || vm->rec.state == VM_GONE) {
		run_answer(run);
		return;
	}
	vm_destroy(vm, run_destroyed, run);
}

/*
 * The result without the output (the run was cancelled or the guest
 * stopped answering): what the last status said, and empty streams.
 */
static void
run_result_bare(struct run *run, const char *state)
{
	struct json_object *o = json_object_new_object(), *d, *v;
	int64_t out = 0, err = 0;
	struct jsonx_err jerr;

	if (run->result != NULL || run->code[0] != '\0')
		return;
	if (run->status != NULL) {
		(void)jsonx_get_int64(run->status, "stdout_bytes", 0, 0,
		    INT64_MAX, &out, &jerr);
		(void)jsonx_get_int64(run->status, "stderr_bytes", 0, 0,
		    INT64_MAX, &err, &jerr);
	}
	json_object_object_add(o, "vm_id",
	    json_object_new_string(run->req->vm_id));
	json_object_object_add(o, "job_id", json_object_new_string(run->job_id));
	json_object_object_add(o, "request_id",
	    json_object_new_string(run->req->request_id));
	json_object_object_add(o, "state", json_object_new_string(state));
	v = NULL;
	if (run->status != NULL && strcmp(state, "cancelled") != 0)
		json_object_object_get_ex(run->status, "exit_code", &v);
	json_object_object_add(o, "exit_code", json_object_get(v));
	json_object_object_add(o, "stdout", json_object_new_string(""));
	json_object_object_add(o, "stderr", json_object_new_string(""));
	json_object_object_add(o, "stdout_bytes", json_object_new_int64(out));
	json_object_object_add(o, "stderr_bytes", json_object_new_int64(err));
	d = json_object_new_object();
	json_object_object_add(d, "stdout", json_object_new_boolean(0));
	json_object_object_add(d, "stderr", json_object_new_boolean(0));
	json_object_object_add(o, "decoding_errors", d);
	json_object_object_add(o, "truncated",
	    json_object_new_boolean(out > 0 || err > 0));
	json_object_object_add(o, "timed_out", json_object_new_boolean(
	    strcmp(state, "timed_out") == 0));
	run->result = o;
}

/* Why commit made no snapshot, unless that is known already. */
static void
run_commit_not(struct run *run, const char *code, const char *why)
{
	if (run->commit_id[0] != '\0' || run->commit_why[0] != '\0')
		return;
	if (code != NULL)
		snprintf(run->commit_code, sizeof(run->commit_code), "%s",
		    code);
	snprintf(run->commit_why, sizeof(run->commit_why), "%s", why);
}

static void
run_committed(const struct snap_record *r, const char *code, const char *msg,
    void *arg)
{
	struct run *run = arg;
	struct request *req = run->req;

	if (r != NULL) {
		snprintf(run->commit_id, sizeof(run->commit_id), "%s", r->id);
		log_info("vm %s: vm_run committed snapshot %s (%s)",
		    req->vm_id, r->id, r->name);
	} else {
		log_warnx("vm %s: vm_run's commit: %s", req->vm_id,
		    msg != NULL ? msg : code);
		run_commit_not(run, code, msg != NULL && msg[0] != '\0' ?
		    msg : "the snapshot failed");
	}
	if (vmmd_audit() != NULL)
		audit_append(vmmd_audit(), req->workspace, "vm_run:commit",
		    r != NULL ? r->id : req->vm_id, r != NULL ? "ok" : code);
	if (run->phase == RUN_DESTROYING)
		return;		/* the destroy's callback answers */
	run_destroy(run);
}

/*
 * The command's end is known: on exit 0 with commit asked for, the
 * snapshot first (a disk-only one, as vm_snapshot's, the guest's file
 * systems synced and frozen for it), then the VM goes.
 */
static void
run_finish(struct run *run, struct vm *vm)
{
	struct json_object *v;
	int clean;

	clean = run->result != NULL && !run->cancel &&
	    json_object_object_get_ex(run->result, "state", &v) &&
	    json_object_is_type(v, json_type_string) &&
	    strcmp(json_object_get_string(v), "completed") == 0 &&
	    json_object_object_get_ex(run->result, "exit_code", &v) &&
	    json_object_is_type(v, json_type_int) &&
	    json_object_get_int(v) == 0;
	if (run->commit_name[0] == '\0' || !clean || vm == NULL) {
		if (run->cancel)
			run_commit_not(run, NULL, "vm_run was cancelled");
		run_destroy(run);
		return;
	}
	run->phase = RUN_COMMITTING;
	/* On from the command's count, of the same total while it lasts. */
	run->last_progress++;
	request_progress(run->req, run->last_progress, run->last_progress + 1 >
	    run->timeout_s + 4 ? run->last_progress + 1 : run->timeout_s + 4,
	    "committing");
	snap_commit(run->req, vm, run->commit_name, run_committed, run);
	/* run may be answered and gone by now (a refused commit). */
}

/* The job's first page of output, and its last status: the answer. */
static void
run_output(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct run *run = arg;
	struct json_object *o, *v, *cur;
	int64_t out = 0, err = 0, at_out = 0, at_err = 0;
	struct jsonx_err jerr;
	int trunc = 0;
	static const char *const copy[] = { "state", "exit_code", "stdout",
	    "stderr", NULL };

	if (run->phase == RUN_DESTROYING) {
		run->inflight = 0;	/* the VM went while it was out */
		return;
	}
	run->inflight = 0;
	if (code != NULL) {
		run_error(run, code, "the command ran but its output could "
		    "not be read: %s", msg != NULL ? msg : code);
		run_destroy(run);
		return;
	}
	tools_job_remember(vm, res);
	(void)jsonx_get_int64(run->status, "stdout_bytes", 0, 0, INT64_MAX,
	    &out, &jerr);
	(void)jsonx_get_int64(run->status, "stderr_bytes", 0, 0, INT64_MAX,
	    &err, &jerr);
	if (json_object_object_get_ex(run->status, "truncated", &v))
		trunc = json_object_get_boolean(v);
	if (json_object_object_get_ex(res, "next_cursor", &cur)) {
		(void)jsonx_get_int64(cur, "stdout", 0, 0, INT64_MAX, &at_out,
		    &jerr);
		(void)jsonx_get_int64(cur, "stderr", 0, 0, INT64_MAX, &at_err,
		    &jerr);
	}
	o = json_object_new_object();
	json_object_object_add(o, "vm_id", json_object_new_string(vm->rec.id));
	json_object_object_add(o, "job_id", json_object_new_string(run->job_id));
	json_object_object_add(o, "request_id",
	    json_object_new_string(run->req->request_id));
	for (int i = 0; copy[i] != NULL; i++) {
		v = NULL;
		json_object_object_get_ex(res, copy[i], &v);
		json_object_object_add(o, copy[i], json_object_get(v));
	}
	json_object_object_add(o, "stdout_bytes", json_object_new_int64(out));
	json_object_object_add(o, "stderr_bytes", json_object_new_int64(err));
	v = NULL;
	json_object_object_get_ex(res, "decoding_errors", &v);
	json_object_object_add(o, "decoding_errors", json_object_get(v));
	json_object_object_add(o, "truncated", json_object_new_boolean(trunc ||
	    at_out < out || at_err < err));
	v = NULL;
	json_object_object_get_ex(res, "timed_out", &v);
	json_object_object_add(o, "timed_out", json_object_get(v));
	run->result = o;
	run_finish(run, vm);
}

static void
run_status(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct run *run = arg;
	struct json_object *call, *v;
	const char *state = "running";
	long waited;

	if (run->phase == RUN_DESTROYING) {
		run->inflight = 0;	/* the VM went while it was out */
		return;
	}
	run->inflight = 0;
	if (run->cancel) {
		run_result_bare(run, "cancelled");
		run_destroy(run);
		return;
	}
	if (code != NULL) {
		run_error(run, code, "the guest stopped answering while the "
		    "command ran: %s", msg != NULL ? msg : code);
		run_destroy(run);
		return;
	}
	json_object_put(run->status);
	run->status = json_object_get(res);
	if (json_object_object_get_ex(res, "state", &v) &&
	    json_object_is_type(v, json_type_string))
		state = json_object_get_string(v);
	if (strcmp(state, "running") != 0) {
		/* Only an end is news to the store: each write is a sync. */
		tools_job_remember(vm, res);
		call = json_object_new_object();
		json_object_object_add(call, "op",
		    json_object_new_string("job_output"));
		json_object_object_add(call, "job_id",
		    json_object_new_string(run->job_id));
		json_object_object_add(call, "encoding",
		    json_object_new_string("utf-8"));
		json_object_object_add(call, "max_bytes",
		    json_object_new_int(run->max_bytes));
		run->phase = RUN_READING;
		if (proxy_call(vm, call, GUEST_TOOL_CALL_MS, run_output, run) == -1) {
			run_result_bare(run, state);
			run_destroy(run);
		} else
			run->inflight = 1;
		json_object_put(call);
		return;
	}
	waited = elapsed_ms(run) / 1000;
	if (waited > run->timeout_s + RUN_GRACE_SECONDS) {
		log_warnx("vm %s: vm_run: the guest did not end job %s at its "
		    "timeout", vm->rec.id, run->job_id);
		run_result_bare(run, "timed_out");
		run_destroy(run);
		return;
	}
	/* Progress goes on from vm_create's (cloning 1, booting 2): 3 when
	 * the command started, one more for each second it runs. */
	if (waited + 3 > run->last_progress) {
		run->last_progress = (int)waited + 3;
		request_progress(run->req, run->last_progress,
		    run->timeout_s + 4, "the command is running");
	}
	run_schedule(run, job_poll_ms(elapsed_ms(run)));
}

static void
run_tick(evutil_socket_t fd, short ev, void *arg)
{
	struct run *run = arg;
	struct json_object *call;
	struct vm *vm = vm_find(run->req->vm_id);

	switch (run->phase) {
	case RUN_CREATING:
		/* Only a cancel wakes it now: destroying the VM ends the
		 * create, whose callback then finds the run destroying. */
		if (run->cancel) {
			run_error(run, "unavailable", "vm_run was cancelled "
			    "before its command started; its VM is destroyed");
			run_destroy(run);
		}
		return;
	case RUN_STARTING:
	case RUN_READING:
	case RUN_COMMITTING:
	case RUN_DESTROYING:
		return;	/* the call's callback takes it on */
	case RUN_WAITING:
		break;
	}
	if (run->inflight)
		return;
	if (run->cancel) {
		run_result_bare(run, "cancelled");
		run_destroy(run);
		return;
	}
	if (vm == NULL || vm->rec.state != VM_RUNNING || !vm->guest_up ||
	    vm->busy) {
		run_error(run, "unavailable", "the VM stopped while the "
		    "command ran");
		run->req->uncertain = 1;
		run_destroy(run);
		return;
	}
	call = json_object_new_object();
	json_object_object_add(call, "op", json_object_new_string(
	    "job_status"));
	json_object_object_add(call, "job_id",
	    json_object_new_string(run->job_id));
	if (proxy_call(vm, call, GUEST_TOOL_CALL_MS, run_status, run) == -1) {
		run_error(run, "unavailable", "the guest link is down");
		run->req->uncertain = 1;
		run_destroy(run);
	} else
		run->inflight = 1;
	json_object_put(call);
}

static void
run_started(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct run *run = arg;

	if (run->phase == RUN_DESTROYING)
		return;		/* the VM went while the call was out */
	if (code != NULL) {
		/* Lost on the way back: the guest may have run it. */
		if (strcmp(code, "unavailable") == 0)
			run->req->uncertain = 1;
		run_error(run, code, "%s", msg != NULL ? msg : code);
		run_destroy(run);
		return;
	}
	tools_job_remember(vm, res);
	if (run->cancel) {
		run_result_bare(run, "cancelled");
		run_destroy(run);
		return;
	}
	run->phase = RUN_WAITING;
	clock_gettime(CLOCK_MONOTONIC, &run->started);
	request_progress(run->req, 3, run->timeout_s + 4, "the command is "
	    "running");
	run->last_progress = 3;
	run_schedule(run, job_poll_ms(0));
}

static void
run_created(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct run *run = arg;
	struct request *req = run->req;
	struct json_object *call;
	unsigned char rnd[12];
	char err[256];

	if (vm != NULL)
		snprintf(run->origin, sizeof(run->origin), "%s",
		    vm->rec.origin);
	if (code != NULL) {
		if (run->phase == RUN_DESTROYING)
			return;	/* the destroy's callback answers */
		/* vm_create tears a failed VM down itself. */
		run_error(run, code, "%s", msg != NULL ? msg : code);
		run_answer(run);
		return;
	}
	if (run->cancel) {
		run_error(run, "unavailable", "vm_run was cancelled before its "
		    "command started; its VM is destroyed");
		run_destroy(run);
		return;
	}
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		fatalx("RAND_bytes failed");
	run->job_id[0] = 'j';
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(run->job_id + 1 + i * 2, 3, "%02x", rnd[i]);
	if (store_job_add(vmmd_store(), vm->rec.id, run->job_id,
	    req->request_id, wall_ms(), err, sizeof(err)) == -1) {
		log_warnx("vm %s: job %s: %s", vm->rec.id, run->job_id, err);
		run_error(run, "unavailable", "the job could not be recorded");
		run_destroy(run);
		return;
	}
	call = tools_exec_call(req, run->job_id,
	    (int64_t)run->timeout_s * 1000);
	run->phase = RUN_STARTING;
	if (proxy_call(vm, call, GUEST_TOOL_CALL_MS, run_started, run) == -1) {
		run_error(run, "unavailable", "the guest link is down");
		run_destroy(run);
	}
	json_object_put(call);
}

/* mcpd cancelled the call or went away: the loop takes it on. */
static void
run_cancel(struct request *req)
{
	struct run *run = req->hold;

	if (run->cancel)
		return;
	run->cancel = 1;
	if (!run->inflight && (run->phase == RUN_CREATING ||
	    run->phase == RUN_WAITING)) {
		evtimer_del(run->timer);
		event_active(run->timer, EV_TIMEOUT, 1);
	}
}

static int
run_join(struct request *req, struct request *retry)
{
	struct run *run = req->hold;

	return joiners_add(&run->joiners, retry);
}

void
tool_vm_run(struct request *req)
{
	struct json_object *commit, *name;
	struct create_args c;
	struct run *run;

	if (tools_create_check(req, &c) == -1)
		return;
	if ((run = calloc(1, sizeof(*run))) == NULL ||
	    (run->timer = evtimer_new(vmmd_base(), run_tick, run)) == NULL) {
		free(run);
		request_error(req, "unavailable", "no memory for vm_run");
		return;
	}
	run->req = req;
	run->phase = RUN_CREATING;
	run->timeout_s = (int)req_arg_int(req, "timeout_seconds", 60);
	run->max_bytes = (int)req_arg_int(req, "max_bytes", 16384);
	/* Its schema requires the name. */
	if (json_object_object_get_ex(req->args, "commit", &commit) &&
	    json_object_object_get_ex(commit, "name", &name))
		snprintf(run->commit_name, sizeof(run->commit_name), "%s",
		    json_object_get_string(name));
	req->hold = run;
	req->on_cancel = run_cancel;
	req->on_join = run_join;
	/* Never suspended for idleness: it lives as long as its command. */
	tools_create(req, &c, 0, 0, run_created, run);
	/* run may be answered and gone by now (a refused create). */
}

/* ---- vm_run as an MCP task (mcpd/tasks.h) ------------------------------ */

/* tools.json's request_id: ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$ */
static int
request_id_ok(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++) {
		unsigned char c = (unsigned char)s[i];

		if (i >= 128 || !((c >= 'a' && c <= 'z') ||
		    (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    (i > 0 && strchr("._:-", c) != NULL)))
			return 0;
	}
	return i > 0;
}

/* The run of request_id in workspace while it is under way, or NULL. */
static struct run *
run_find(const char *workspace, const char *request_id)
{
	struct request *r;

	TAILQ_FOREACH(r, request_all(), entry)
		if (r->on_cancel == run_cancel && r->hold != NULL &&
		    strcmp(r->workspace, workspace) == 0 &&
		    strcmp(r->request_id, request_id) == 0)
			return r->hold;
	return NULL;
}

static void
add_time(struct json_object *o, const char *key, long long ms)
{
	char buf[40];

	iso8601_ms(ms, buf, sizeof(buf));
	json_object_object_add(o, key, json_object_new_string(buf));
}

/* What a run under way is doing, for tasks/get. */
static struct json_object *
run_task_live(struct run *run)
{
	struct json_object *o = json_object_new_object();
	const char *state;

	switch (run->phase) {
	case RUN_CREATING:
	case RUN_STARTING:
		state = "starting";
		break;
	case RUN_WAITING:
		state = run->cancel ? "ending" : "running";
		break;
	default:
		state = "ending";
		break;
	}
	json_object_object_add(o, "state", json_object_new_string(state));
	add_time(o, "created_at", run->req->arrived_ms);
	if (run->req->vm_id[0] != '\0')
		json_object_object_add(o, "vm_id",
		    json_object_new_string(run->req->vm_id));
	if (run->job_id[0] != '\0')
		json_object_object_add(o, "job_id",
		    json_object_new_string(run->job_id));
	if (run->status != NULL)
		json_object_object_add(o, "status",
		    json_object_get(run->status));
	return o;
}

/* A run that ended: its receipt's answer and times; NULL if unreadable. */
static struct json_object *
run_task_ended(char *stored)
{
	struct json_object *body = json_tokener_parse(stored), *o, *v;
	long long ms;

	free(stored);
	if (body == NULL || !json_object_is_type(body, json_type_object)) {
		json_object_put(body);
		return NULL;
	}
	o = json_object_new_object();
	json_object_object_add(o, "state", json_object_new_string("ended"));
	ms = json_object_object_get_ex(body, "created_ms", &v) ?
	    json_object_get_int64(v) : 0;
	add_time(o, "created_at", ms);
	if (json_object_object_get_ex(body, "finished_ms", &v))
		ms = json_object_get_int64(v);
	add_time(o, "finished_at", ms);
	if (json_object_object_get_ex(body, "result", &v))
		json_object_object_add(o, "result", json_object_get(v));
	else if (json_object_object_get_ex(body, "error", &v))
		json_object_object_add(o, "error", json_object_get(v));
	json_object_put(body);
	return o;
}

/*
 * IPC_VM_TOOL of vm_run with task "get" or "cancel" (decode.c let only
 * those through): the run of arguments.request_id in the caller's
 * workspace, under way or ended, as mcpd's tasks/get and tasks/cancel
 * need it.  Nothing runs and no receipt is made: the workspace's
 * receipts and runs are only looked at, so another workspace's run is
 * not found.
 */
void
run_task(struct request *req)
{
	struct json_object *o, *v;
	const char *rid = NULL;
	enum receipt_status st;
	struct run *run;
	char *stored = NULL, err[256];
	int r;

	req->checked = 1;	/* no vm_run result: its own shape */
	if (json_object_object_length(req->args) != 1 ||
	    !json_object_object_get_ex(req->args, "request_id", &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    !request_id_ok(rid = json_object_get_string(v))) {
		request_error(req, "invalid_argument", "a vm_run task is "
		    "named by its request_id alone");
		return;
	}
	if ((run = run_find(req->workspace, rid)) != NULL) {
		if (strcmp(req->msg.task, "cancel") == 0) {
			if (vmmd_audit() != NULL)
				audit_append(vmmd_audit(), req->workspace,
				    "vm_run:cancel", run->req->vm_id, "ok");
			o = run_task_live(run);
			run_cancel(run->req);
		} else
			o = run_task_live(run);
		json_object_object_add(o, "request_id",
		    json_object_new_string(rid));
		request_reply(req, o);
		return;
	}
	r = store_receipt_get(vmmd_store(), req->workspace, rid, "vm_run", &st,
	    &stored, err, sizeof(err));
	if (r == -1) {
		log_warnx("vm_run task %s: %s", rid, err);
		request_error(req, "unavailable", "the receipt store failed");
		return;
	}
	if (r == 0 || st == RECEIPT_PENDING) {
		/* Pending without a run: its approval is still awaited. */
		request_error(req, "not_found", "no vm_run of request_id '%s' "
		    "in this workspace%s", rid, r == 0 ? "" : " has started");
		return;
	}
	if (st == RECEIPT_UNCERTAIN) {
		o = json_object_new_object();
		json_object_object_add(o, "state",
		    json_object_new_string("uncertain"));
	} else if ((o = run_task_ended(stored)) == NULL) {
		request_error(req, "internal", "the stored answer of vm_run "
		    "'%s' is unreadable", rid);
		return;
	}
	json_object_object_add(o, "request_id", json_object_new_string(rid));
	request_reply(req, o);
}

/* vmmd stops: every run's VM is destroyed now, before the others are
 * hibernated, and each run answers that it was cut short. */
void
run_shutdown(void)
{
	struct run *runs[256];
	struct request *req;
	size_t n = 0;

	/* Collected first: an answer frees requests (joined retries too). */
	TAILQ_FOREACH(req, request_all(), entry)
		if (req->on_cancel == run_cancel &&
		    n < sizeof(runs) / sizeof(runs[0]))
			runs[n++] = req->hold;
	for (size_t i = 0; i < n; i++) {
		struct run *run = runs[i];

		run->cancel = 1;
		if (run->phase == RUN_DESTROYING)
			continue;
		run_commit_not(run, "unavailable", "vmmd is shutting down");
		if (run->result == NULL) {
			run_error(run, "unavailable", "vmmd is shutting "
			    "down; vm_run's VM is destroyed");
			run->req->uncertain = run->phase != RUN_CREATING;
		}
		run_destroy(run);
	}
}
