/*
 * vmmd's job and file tools: vm_exec (with its wait_seconds), vm_job_status,
 * vm_job_output, vm_job_cancel, vm_read_file and vm_write_file, as tools.c
 * dispatches them.  Each is a guest call through the VM's vmproxy; what
 * the guest says of a job is remembered so that status need not wake it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include <openssl/rand.h>

#include "vmmd_broker.h"
#include "guest.h"
#include "jsonx.h"
#include "log.h"
#include "tools.h"

/* vm_exec's wait_seconds: how often the guest is asked whether the job is
 * done, starting fast for short commands and backing off to once a second. */
#define EXEC_POLL_FIRST_MS	50
#define EXEC_POLL_MS		100
/* A cancelled wait asks the guest to kill the job, then waits this long
 * at most for it to be reported ended. */
#define EXEC_CANCEL_MS		10000

/* ---- jobs -------------------------------------------------------------- */

/* Remembers what the guest said of a job, for status without waking. */
static void
job_remember(struct vm *vm, struct json_object *st)
{
	struct json_object *v;
	const char *job_id, *state;
	char err[256];
	int exit_code = -1;

	if (!json_object_object_get_ex(st, "job_id", &v))
		return;
	job_id = json_object_get_string(v);
	if (!json_object_object_get_ex(st, "state", &v))
		return;
	state = json_object_get_string(v);
	if (json_object_object_get_ex(st, "exit_code", &v) &&
	    json_object_is_type(v, json_type_int))
		exit_code = json_object_get_int(v);
	if (store_job_update(vmmd_store(), vm->rec.id, job_id, state, exit_code,
	    strcmp(state, "running") == 0 ? 0 : wall_ms(), err, sizeof(err)) ==
	    -1)
		log_warnx("vm %s: job %s: state %s not recorded: %s",
		    vm->rec.id, job_id, state, err);
	broker_job_seen(vm, job_id, state);
}

/* vm_job_status's shape, from a guest status and the stored times. */
static struct json_object *
job_status_result(struct vm *vm, struct json_object *st)
{
	struct json_object *o = json_object_new_object(), *v;
	struct job_record j;
	char when[40], err[256];
	static const char *const copy[] = { "job_id", "state", "exit_code",
	    "truncated", "timed_out", "stdout_bytes", "stderr_bytes", NULL };

	json_object_object_add(o, "vm_id", json_object_new_string(vm->rec.id));
	for (int i = 0; copy[i] != NULL; i++) {
		v = NULL;
		json_object_object_get_ex(st, copy[i], &v);
		json_object_object_add(o, copy[i], json_object_get(v));
	}
	memset(&j, 0, sizeof(j));
	/* Times unknown (zero) when its row is gone. */
	(void)store_job_get(vmmd_store(), vm->rec.id, json_object_get_string(
	    json_object_object_get(st, "job_id")), &j, err, sizeof(err));
	iso8601_ms(j.started_at, when, sizeof(when));
	json_object_object_add(o, "started_at", json_object_new_string(when));
	if (j.finished_at > 0) {
		iso8601_ms(j.finished_at, when, sizeof(when));
		json_object_object_add(o, "finished_at",
		    json_object_new_string(when));
	} else
		json_object_object_add(o, "finished_at", NULL);
	return o;
}

/*
 * vm_exec with wait_seconds: the started reply is held while a timer asks
 * the guest for the job's status (never blocking the loop, each poll an
 * ordinary guest call), then, once the job has ended, for the first page
 * of its output.  The request lives until it is answered (a gone mcpd
 * only clears req->conn), and the VM is looked up again on every step, so
 * a VM destroyed meanwhile just ends the wait.
 */
struct exec_wait {
	struct request		*req;
	struct json_object	*reply;		/* vm_exec's result, as today */
	struct event		*timer;
	struct timespec		 deadline;
	int			 poll_ms;
	int			 wait_s;
	int			 last_progress;	/* seconds waited, last told */
	int			 cancel;	/* kill the job, then answer */
	int			 cancel_sent;
	struct request_joiners	 joiners;
	char			 job_id[64];
};

static void exec_wait_tick(evutil_socket_t, short, void *);

static void
exec_wait_finish(struct exec_wait *w)
{
	struct request *req = w->req;
	struct json_object *reply = w->reply;

	req->on_cancel = NULL;
	req->on_join = NULL;
	req->hold = NULL;
	if (w->timer != NULL)
		event_free(w->timer);
	joiners_reply(&w->joiners, reply);
	free(w);
	request_reply(req, reply);
}

static void
exec_wait_cancel(struct request *req)
{
	struct exec_wait *w = req->hold;

	if (w->cancel)
		return;
	w->cancel = 1;
	clock_gettime(CLOCK_MONOTONIC, &w->deadline);
	w->deadline.tv_sec += EXEC_CANCEL_MS / 1000;
	/* From the loop, never from inside the caller; a guest call on its
	 * way (no timer pending) sees the flag when it comes back. */
	if (evtimer_pending(w->timer, NULL)) {
		evtimer_del(w->timer);
		event_active(w->timer, EV_TIMEOUT, 1);
	}
}

static int
exec_wait_join(struct request *req, struct request *retry)
{
	struct exec_wait *w = req->hold;

	return joiners_add(&w->joiners, retry);
}

static long
ms_left(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)(deadline->tv_sec - now.tv_sec) * 1000 +
	    (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

/* The VM, if it is still there and can answer a guest call now. */
static struct vm *
exec_wait_vm(struct exec_wait *w)
{
	struct vm *vm = vm_find_owned(w->req->vm_id, w->req->workspace);

	if (vm == NULL || vm->rec.state != VM_RUNNING || !vm->guest_up ||
	    vm->busy)
		return NULL;
	return vm;
}

static void
exec_wait_output(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct exec_wait *w = arg;
	struct json_object *v;

	if (code == NULL) {
		job_remember(vm, res);
		/* Keep the documented text-mode shape, and nothing else. */
		json_object_object_del(res, "vm_id");
		json_object_object_add(w->reply, "state", json_object_get(
		    json_object_object_get(res, "state")));
		v = NULL;
		json_object_object_get_ex(res, "exit_code", &v);
		json_object_object_add(w->reply, "exit_code",
		    json_object_get(v));
		json_object_object_add(w->reply, "output",
		    json_object_get(res));
	}
	/* Without its output the reply still names the job: read it with
	 * vm_job_output. */
	exec_wait_finish(w);
}

static void
exec_wait_status(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct exec_wait *w = arg;
	struct json_object *call, *v;
	const char *state = "running";
	struct timeval tv;
	long left;

	if (code != NULL) {
		exec_wait_finish(w);
		return;
	}
	if (json_object_object_get_ex(res, "state", &v) &&
	    json_object_is_type(v, json_type_string))
		state = json_object_get_string(v);
	if (strcmp(state, "running") != 0) {
		/* Only an end is news to the store: each write is a sync. */
		job_remember(vm, res);
		call = json_object_new_object();
		json_object_object_add(call, "op",
		    json_object_new_string("job_output"));
		json_object_object_add(call, "job_id",
		    json_object_new_string(w->job_id));
		json_object_object_add(call, "encoding",
		    json_object_new_string("utf-8"));
		if (proxy_call(vm, call, GUEST_TOOL_CALL_MS, exec_wait_output,
		    w) == -1) {
			json_object_object_add(w->reply, "state",
			    json_object_new_string(state));
			exec_wait_finish(w);
		}
		json_object_put(call);
		return;
	}
	if ((left = ms_left(&w->deadline)) <= 0) {
		exec_wait_finish(w);
		return;
	}
	if (!w->cancel) {
		/* Once a second at most: how long it has waited so far. */
		int waited = w->wait_s - (int)((left + 999) / 1000);

		if (waited > w->last_progress) {
			w->last_progress = waited;
			request_progress(w->req, waited, w->wait_s, "the job "
			    "is running");
		}
	} else if (!w->cancel_sent)
		left = 0;	/* the cancel goes out at once */
	if (left > job_poll_ms(w->wait_s * 1000L - left))
		left = job_poll_ms(w->wait_s * 1000L - left);
	tv.tv_sec = left / 1000;
	tv.tv_usec = (left % 1000) * 1000;
	evtimer_add(w->timer, &tv);
}

static void
exec_wait_cancelled(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct exec_wait *w = arg;
	struct timeval tv = { 0, EXEC_POLL_FIRST_MS * 1000 };

	/* Whatever it said, the job's end is read as any other's. */
	w->poll_ms = EXEC_POLL_FIRST_MS * 2;
	evtimer_add(w->timer, &tv);
}

static void
exec_wait_tick(evutil_socket_t fd, short ev, void *arg)
{
	struct exec_wait *w = arg;
	struct json_object *call;
	struct vm *vm;
	int cancel;

	if ((vm = exec_wait_vm(w)) == NULL) {
		exec_wait_finish(w);
		return;
	}
	cancel = w->cancel && !w->cancel_sent;
	if (cancel)
		w->cancel_sent = 1;
	call = json_object_new_object();
	json_object_object_add(call, "op", json_object_new_string(
	    cancel ? "job_cancel" : "job_status"));
	json_object_object_add(call, "job_id",
	    json_object_new_string(w->job_id));
	if (proxy_call(vm, call, GUEST_TOOL_CALL_MS, cancel ? exec_wait_cancelled :
	    exec_wait_status, w) == -1)
		exec_wait_finish(w);
	json_object_put(call);
}

/*
 * How long a wait (vm_exec's, vm_run's) leaves between two questions to
 * the guest, waited_ms into it: most commands an agent runs end within
 * seconds, so those are asked after every 100 ms (more often costs a TCG
 * guest enough time to slow the command itself down); a long one once a
 * second.
 */
int
job_poll_ms(long waited_ms)
{
	if (waited_ms < 5000)
		return EXEC_POLL_MS;
	return 1000;
}

/* Holds reply until the job ends or wait_seconds pass; 0 if it took it. */
static int
exec_wait_start(struct request *req, struct json_object *reply,
    const char *job_id)
{
	int64_t secs = req_arg_int(req, "wait_seconds", 0);
	struct exec_wait *w;
	struct timeval tv = { 0, EXEC_POLL_FIRST_MS * 1000 };

	if (secs <= 0 || job_id == NULL)
		return -1;
	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->timer = evtimer_new(vmmd_base(), exec_wait_tick, w)) == NULL) {
		free(w);
		log_warnx("vm %s: no memory to wait for job %s; answering "
		    "at once", req->vm_id, job_id);
		return -1;
	}
	w->req = req;
	w->reply = reply;
	w->poll_ms = EXEC_POLL_FIRST_MS * 2;
	w->wait_s = (int)secs;
	snprintf(w->job_id, sizeof(w->job_id), "%s", job_id);
	clock_gettime(CLOCK_MONOTONIC, &w->deadline);
	w->deadline.tv_sec += secs;
	req->hold = w;
	req->on_cancel = exec_wait_cancel;
	req->on_join = exec_wait_join;
	evtimer_add(w->timer, &tv);
	/* Cancelled while the job was being started. */
	if (req->cancelled)
		exec_wait_cancel(req);
	return 0;
}

/* A recorded job that never reached the guest's job table. */
static void
exec_forget(struct vm *vm, const char *job_id)
{
	char err[256];

	if (store_job_forget(vmmd_store(), vm->rec.id, job_id, err,
	    sizeof(err)) == -1)
		log_warnx("vm %s: job %s, which never ran, not forgotten: %s",
		    vm->rec.id, job_id, err);
}

static void
exec_started(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;
	struct json_object *out, *v;
	struct job_record j;
	char when[40], err[256];

	if (code != NULL) {
		/* Lost on the way back (the guest stopped answering, the link
		 * or the VM went): the guest may have started it.  Refused
		 * for the guest's limits (its kept or running jobs), it never
		 * ran, and is not listed: refusals never add up to rows. */
		if (strcmp(code, "unavailable") == 0)
			req->uncertain = 1;
		else if (strcmp(code, "quota_exceeded") == 0)
			exec_forget(vm, req->job_id);
		broker_exec_result(vm, req, NULL, NULL);
		tools_reply_error(req, code, msg);
		return;
	}
	memset(&j, 0, sizeof(j));
	v = json_object_object_get(res, "job_id");
	(void)store_job_get(vmmd_store(), vm->rec.id, json_object_get_string(v),
	    &j, err, sizeof(err));
	iso8601_ms(j.started_at, when, sizeof(when));
	out = json_object_new_object();
	json_object_object_add(out, "vm_id", json_object_new_string(vm->rec.id));
	json_object_object_add(out, "job_id", json_object_get(v));
	json_object_object_add(out, "request_id",
	    json_object_new_string(req->request_id));
	json_object_object_add(out, "state", json_object_get(
	    json_object_object_get(res, "state")));
	json_object_object_add(out, "started_at", json_object_new_string(when));
	broker_exec_result(vm, req, res, out);
	/* Only now: a job seen finished takes its pipe with it. */
	job_remember(vm, res);
	if (exec_wait_start(req, out, json_object_get_string(v)) == 0)
		return;
	request_reply(req, out);
}

void
tools_job_remember(struct vm *vm, struct json_object *st)
{
	job_remember(vm, st);
}

/*
 * The guest's exec call for req's command, cwd, env and stdin, as job_id
 * with that timeout: vm_exec's and vm_run's alike.
 */
struct json_object *
tools_exec_call(struct request *req, const char *job_id, int64_t timeout_ms)
{
	struct json_object *call = json_object_new_object(), *v;

	json_object_object_add(call, "op", json_object_new_string("exec"));
	json_object_object_add(call, "job_id", json_object_new_string(job_id));
	json_object_object_add(call, "command",
	    json_object_new_string(req_arg_str(req, "command", "")));
	if (json_object_object_get_ex(req->args, "cwd", &v))
		json_object_object_add(call, "cwd", json_object_get(v));
	if (json_object_object_get_ex(req->args, "env", &v))
		json_object_object_add(call, "env", json_object_get(v));
	if (json_object_object_get_ex(req->args, "stdin_base64", &v))
		json_object_object_add(call, "stdin_base64",
		    json_object_get(v));
	json_object_object_add(call, "timeout_ms",
	    json_object_new_int64(timeout_ms));
	return call;
}

static void
exec_ready(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;
	struct json_object *call;
	unsigned char rnd[12];
	char job_id[32], err[256];

	if (code != NULL) {
		tools_reply_error(req, code, msg);
		return;
	}
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		fatalx("RAND_bytes failed");
	job_id[0] = 'j';
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(job_id + 1 + i * 2, 3, "%02x", rnd[i]);
	/* Recorded first: a crash before the reply still lists the job. */
	if (store_job_add(vmmd_store(), vm->rec.id, job_id, req->request_id,
	    wall_ms(), err, sizeof(err)) == -1) {
		log_warnx("vm %s: job %s: %s", vm->rec.id, job_id, err);
		request_error(req, "unavailable", "the job could not be "
		    "recorded");
		return;
	}
	snprintf(req->job_id, sizeof(req->job_id), "%s", job_id);
	call = tools_exec_call(req, job_id,
	    req_arg_int(req, "timeout_seconds", 600) * 1000);
	broker_exec_prepare(vm, req, job_id, call);
	if (proxy_call(vm, call, GUEST_TOOL_CALL_MS, exec_started, req) == -1) {
		/* Never sent. */
		exec_forget(vm, job_id);
		broker_exec_result(vm, req, NULL, NULL);
		request_error(req, "unavailable", "the guest link is down");
	}
	broker_exec_wipe(call);
	json_object_put(call);
}

void
tool_vm_exec(struct request *req)
{
	struct vm *vm;

	if ((vm = tools_owned_vm(req)) == NULL)
		return;
	vm_ready(vm, exec_ready, req);
}

void
job_status_done(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		tools_reply_error(req, code, msg);
		return;
	}
	job_remember(vm, res);
	request_reply(req, job_status_result(vm, res));
}

void
job_cancel_done(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;
	struct json_object *o;

	if (code != NULL) {
		tools_reply_error(req, code, msg);
		return;
	}
	job_remember(vm, res);
	o = json_object_new_object();
	json_object_object_add(o, "vm_id", json_object_new_string(vm->rec.id));
	json_object_object_add(o, "job_id", json_object_get(
	    json_object_object_get(res, "job_id")));
	json_object_object_add(o, "state", json_object_get(
	    json_object_object_get(res, "state")));
	request_reply(req, o);
}

void
job_output_done(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		tools_reply_error(req, code, msg);
		return;
	}
	job_remember(vm, res);
	request_reply(req, json_object_get(res));
}

/* Runs a guest call for req once its VM is ready. */
static void
guest_call_ready(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;
	struct json_object *call;

	if (code != NULL) {
		tools_reply_error(req, code, msg);
		return;
	}
	/* The call carries the tool's own arguments (already validated). */
	call = json_object_new_object();
	json_object_object_foreach(req->args, k, v)
		if (strcmp(k, "vm_id") != 0)
			json_object_object_add(call, k, json_object_get(v));
	/* The table names the guest's operation and who reads its answer. */
	json_object_object_add(call, "op",
	    json_object_new_string(req->def->guest_op));
	if (proxy_call(vm, call, GUEST_TOOL_CALL_MS, req->def->guest_done,
	    req) == -1)
		request_error(req, "unavailable", "the guest link is down");
	json_object_put(call);
}

void
tool_job(struct request *req)
{
	struct job_record j;
	struct vm *vm;
	const char *job_id = req_arg_str(req, "job_id", NULL);
	char err[256];

	if ((vm = tools_owned_vm(req)) == NULL)
		return;
	if (job_id != NULL && store_job_get(vmmd_store(), vm->rec.id, job_id,
	    &j, err, sizeof(err)) == -1) {
		request_error(req, "not_found", "VM %s has no job '%.64s'",
		    vm->rec.id, job_id);
		return;
	}
	/* Cached status never wakes a suspended VM. */
	if (!(req->def->flags & TOOL_WAKES) &&
	    !(vm->rec.state == VM_RUNNING && vm->guest_up && !vm->busy)) {
		struct json_object *st = json_object_new_object();

		json_object_object_add(st, "job_id",
		    json_object_new_string(j.job_id));
		json_object_object_add(st, "state",
		    json_object_new_string(j.state));
		json_object_object_add(st, "exit_code", j.exit_code >= 0 ?
		    json_object_new_int(j.exit_code) : NULL);
		json_object_object_add(st, "truncated",
		    json_object_new_boolean(0));
		json_object_object_add(st, "timed_out", json_object_new_boolean(
		    strcmp(j.state, "timed_out") == 0));
		json_object_object_add(st, "stdout_bytes",
		    json_object_new_int(0));
		json_object_object_add(st, "stderr_bytes",
		    json_object_new_int(0));
		request_reply(req, job_status_result(vm, st));
		json_object_put(st);
		return;
	}
	vm_ready(vm, guest_call_ready, req);
}

