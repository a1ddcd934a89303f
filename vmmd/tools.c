/*
 * The twelve tools as vmmd serves them, after authd has named the
 * workspace: arguments validated against proto/tools.json again (mcpd did
 * too), receipts for vm_create and vm_exec, ownership of every VM and job,
 * and results shaped by the same schema.  Also the stream opens mcpd asks
 * for, and the counters behind /metrics.
 */
#include <errno.h>
#include <inttypes.h>
#include <time.h>

#include <event2/event.h>

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest.h"
#include "ipc.h"
#include "jsonx.h"
#include "log.h"
#include "receipts.h"
#include "schema.h"
#include "netclient.h"
#include "vmmd.h"
#include "broker.h"

/* vm_exec's wait_seconds: how often the guest is asked whether the job is
 * done, starting fast for short commands and backing off to once a second. */
#define EXEC_POLL_FIRST_MS	50
#define EXEC_POLL_MS		100
/* A cancelled wait asks the guest to kill the job, then waits this long
 * at most for it to be reported ended. */
#define EXEC_CANCEL_MS		10000

/* Tools whose call changes something: these go to the audit log. */
static const char *const mutations[] = { "vm_create", "vm_exec",
    "vm_job_cancel", "vm_write_file", "vm_suspend", "vm_resume",
    "vm_destroy", "vm_run", NULL };

/* Tools with retry receipts. */
static const char *const receipted[] = { "vm_create", "vm_exec", "vm_run",
    NULL };

/* Tools that need the guest, and so wake a suspended VM. */
static const char *const waking[] = { "vm_exec", "vm_job_output",
    "vm_job_cancel", "vm_read_file", "vm_write_file", "vm_resume", NULL };

static int
in_list(const char *const *list, const char *name)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, name) == 0)
			return 1;
	return 0;
}

int
tool_wakes(const char *tool)
{
	return in_list(waking, tool);
}

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

/* The owned VM named by vm_id, or an error reply and NULL. */
static struct vm *
owned_vm(struct request *req)
{
	const char *id = req_arg_str(req, "vm_id", "");
	struct vm *vm = vm_find_owned(id, req->workspace);

	snprintf(req->vm_id, sizeof(req->vm_id), "%.*s", VM_ID_LEN, id);
	if (vm == NULL || vm->rec.state == VM_GONE) {
		request_error(req, "not_found", "there is no VM '%.64s' in "
		    "this workspace", id);
		return NULL;
	}
	return vm;
}

static void
reply_vm_error(struct request *req, const char *code, const char *msg)
{
	request_error(req, code, "%s", msg != NULL ? msg : code);
}

/* ---- retries that join a held request ---------------------------------- */

int
joiners_add(struct request_joiners *j, struct request *retry)
{
	if (j->n >= REQUEST_JOINERS ||
	    j->n >= env->conf.vmmd.max_joined_retries)
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

/* ---- vm_create --------------------------------------------------------- */

static void
create_done(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		reply_vm_error(req, code, msg);
		return;
	}
	request_progress(req, 4, 4, "ready");
	request_reply(req, vm_summary(vm));
}

/*
 * What vm_create checks before it creates anything, for vm_create and
 * vm_run: the image, the policy, networking, memory and admission.  The
 * image and memory into *imp and *memory_mib, or an error reply and -1.
 */
int
tools_create_check(struct request *req, const struct conf_image **imp,
    int *memory_mib)
{
	const struct conf_image *im;
	const char *image = req_arg_str(req, "image", NULL);
	const char *network = req_arg_str(req, "network", "off");
	char code[32], msg[256];
	int64_t memory;
	size_t i;

	im = image != NULL ? conf_find_image(&env->conf, image) :
	    conf_default_image(&env->conf);
	if (im == NULL) {
		request_error(req, image != NULL ? "invalid_argument" :
		    "unavailable", image != NULL ? "there is no image "
		    "'%.64s' on this host" : "this host has no default image",
		    image);
		return -1;
	}
	if (req->policy.nimages > 0) {
		for (i = 0; i < req->policy.nimages; i++)
			if (strcmp(req->policy.images[i], im->id) == 0)
				break;
		if (i == req->policy.nimages) {
			request_error(req, "forbidden", "this workspace may "
			    "not use image '%s'", im->id);
			return -1;
		}
	}
	if (strcmp(network, "on") == 0) {
		if (!req->policy.network) {
			request_error(req, "forbidden", "this workspace may "
			    "not turn networking on");
			return -1;
		}
		if (!netclient_available(msg, sizeof(msg))) {
			request_error(req, "unavailable", "%s", msg);
			return -1;
		}
	}
	memory = req_arg_int(req, "memory_mib", im->memory_mib);
	if (memory < im->min_memory_mib) {
		request_error(req, "invalid_argument", "image %s needs at "
		    "least %lld MiB of memory", im->id, im->min_memory_mib);
		return -1;
	}
	if (vm_admit(req, im, (int)memory, code, sizeof(code), msg,
	    sizeof(msg)) == -1) {
		request_error(req, code, "%s", msg);
		return -1;
	}
	*imp = im;
	*memory_mib = (int)memory;
	return 0;
}

static void
tool_vm_create(struct request *req)
{
	const char *network = req_arg_str(req, "network", "off");
	const struct conf_image *im;
	int memory;

	if (tools_create_check(req, &im, &memory) == -1)
		return;
	vm_create(req, im, (int)req_arg_int(req, "vcpus", 1), memory,
	    strcmp(network, "on") == 0, (int)req_arg_int(req, "idle_seconds", 300),
	    strcmp(req_arg_str(req, "idle_mode", "hibernate"), "pause") == 0,
	    create_done, req);
}

/* ---- listing and status ------------------------------------------------ */

static void
tool_vm_list(struct request *req)
{
	struct json_object *res = json_object_new_object();
	struct json_object *arr = json_object_new_array();
	struct vm *vm;
	int checked = 1;

	TAILQ_FOREACH(vm, &env->vms, entry)
		if (vm->rec.state != VM_GONE &&
		    strcmp(vm->rec.workspace, req->workspace) == 0)
			json_object_array_add(arr, vm_list_entry(vm,
			    &checked));
	json_object_object_add(res, "vms", arr);
	/*
	 * Each entry was checked as a list of one, and vm_list's schema
	 * bounds nothing about the list itself; were it to, this would have
	 * to check the whole again.
	 */
	req->checked = checked;
	request_reply(req, res);
}

static struct json_object *
job_entry(const struct job_record *j)
{
	struct json_object *o = json_object_new_object();
	char when[40];

	iso8601_ms(j->started_at, when, sizeof(when));
	json_object_object_add(o, "job_id", json_object_new_string(j->job_id));
	json_object_object_add(o, "request_id",
	    json_object_new_string(j->request_id));
	json_object_object_add(o, "state", json_object_new_string(j->state));
	json_object_object_add(o, "exit_code", j->exit_code >= 0 ?
	    json_object_new_int(j->exit_code) : NULL);
	json_object_object_add(o, "started_at", json_object_new_string(when));
	return o;
}

static void
tool_vm_status(struct request *req)
{
	struct json_object *res, *arr;
	struct job_record *jobs;
	struct vm *vm;
	size_t n;

	if ((vm = owned_vm(req)) == NULL)
		return;
	/* Status never wakes a VM: jobs are as last seen. */
	res = vm_summary(vm);
	json_object_object_add(res, "open_streams",
	    json_object_new_int(vm->open_streams));
	arr = json_object_new_array();
	if (store_job_list(env->store, vm->rec.id, &jobs, &n) == 0) {
		for (size_t i = 0; i < n && i < GUEST_MAX_JOBS; i++)
			json_object_array_add(arr, job_entry(&jobs[i]));
		free(jobs);
	}
	json_object_object_add(res, "jobs", arr);
	request_reply(req, res);
}

/* ---- jobs -------------------------------------------------------------- */

/* Remembers what the guest said of a job, for status without waking. */
static void
job_remember(struct vm *vm, struct json_object *st);

void
tools_job_remember(struct vm *vm, struct json_object *st)
{
	job_remember(vm, st);
}

static void
job_remember(struct vm *vm, struct json_object *st)
{
	struct json_object *v;
	const char *job_id, *state;
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
	store_job_update(env->store, vm->rec.id, job_id, state, exit_code,
	    strcmp(state, "running") == 0 ? 0 : wall_ms());
	broker_job_seen(vm, job_id, state);
}

/* vm_job_status's shape, from a guest status and the stored times. */
static struct json_object *
job_status_result(struct vm *vm, struct json_object *st)
{
	struct json_object *o = json_object_new_object(), *v;
	struct job_record j;
	char when[40];
	static const char *const copy[] = { "job_id", "state", "exit_code",
	    "truncated", "timed_out", "stdout_bytes", "stderr_bytes", NULL };

	json_object_object_add(o, "vm_id", json_object_new_string(vm->rec.id));
	for (int i = 0; copy[i] != NULL; i++) {
		v = NULL;
		json_object_object_get_ex(st, copy[i], &v);
		json_object_object_add(o, copy[i], json_object_get(v));
	}
	memset(&j, 0, sizeof(j));
	store_job_get(env->store, vm->rec.id, json_object_get_string(
	    json_object_object_get(st, "job_id")), &j);
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
	    (w->timer = evtimer_new(env->base, exec_wait_tick, w)) == NULL) {
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

static void
exec_started(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;
	struct json_object *out, *v;
	struct job_record j;
	char when[40];

	if (code != NULL) {
		/* Lost on the way back (the guest stopped answering, the link
		 * or the VM went): the guest may have started it. */
		if (strcmp(code, "unavailable") == 0)
			req->uncertain = 1;
		broker_exec_result(vm, req, NULL, NULL);
		reply_vm_error(req, code, msg);
		return;
	}
	memset(&j, 0, sizeof(j));
	v = json_object_object_get(res, "job_id");
	store_job_get(env->store, vm->rec.id, json_object_get_string(v), &j);
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
	char job_id[32];

	if (code != NULL) {
		reply_vm_error(req, code, msg);
		return;
	}
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		fatalx("RAND_bytes failed");
	job_id[0] = 'j';
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(job_id + 1 + i * 2, 3, "%02x", rnd[i]);
	/* Recorded first: a crash before the reply still lists the job. */
	if (store_job_add(env->store, vm->rec.id, job_id, req->request_id,
	    wall_ms()) == -1) {
		request_error(req, "unavailable", "the job could not be "
		    "recorded");
		return;
	}
	call = tools_exec_call(req, job_id,
	    req_arg_int(req, "timeout_seconds", 600) * 1000);
	broker_exec_prepare(vm, req, job_id, call);
	if (proxy_call(vm, call, GUEST_TOOL_CALL_MS, exec_started, req) == -1) {
		broker_exec_result(vm, req, NULL, NULL);
		request_error(req, "unavailable", "the guest link is down");
	}
	broker_exec_wipe(call);
	json_object_put(call);
}

static void
tool_vm_exec(struct request *req)
{
	struct vm *vm;

	if ((vm = owned_vm(req)) == NULL)
		return;
	vm_ready(vm, exec_ready, req);
}

static void
job_status_done(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		reply_vm_error(req, code, msg);
		return;
	}
	job_remember(vm, res);
	if (strcmp(req->tool, "vm_job_cancel") == 0) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "vm_id",
		    json_object_new_string(vm->rec.id));
		json_object_object_add(o, "job_id", json_object_get(
		    json_object_object_get(res, "job_id")));
		json_object_object_add(o, "state", json_object_get(
		    json_object_object_get(res, "state")));
		request_reply(req, o);
		return;
	}
	request_reply(req, job_status_result(vm, res));
}

static void
job_output_done(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		reply_vm_error(req, code, msg);
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
	proxy_cb cb = job_status_done;
	const char *op;

	if (code != NULL) {
		reply_vm_error(req, code, msg);
		return;
	}
	if (strcmp(req->tool, "vm_job_status") == 0)
		op = "job_status";
	else if (strcmp(req->tool, "vm_job_cancel") == 0)
		op = "job_cancel";
	else if (strcmp(req->tool, "vm_job_output") == 0) {
		op = "job_output";
		cb = job_output_done;
	} else if (strcmp(req->tool, "vm_read_file") == 0) {
		op = "file_read";
		cb = job_output_done;
	} else {
		op = "file_write";
		cb = job_output_done;
	}
	/* The call carries the tool's own arguments (already validated). */
	call = json_object_new_object();
	json_object_object_foreach(req->args, k, v)
		if (strcmp(k, "vm_id") != 0)
			json_object_object_add(call, k, json_object_get(v));
	json_object_object_add(call, "op", json_object_new_string(op));
	if (proxy_call(vm, call, GUEST_TOOL_CALL_MS, cb, req) == -1)
		request_error(req, "unavailable", "the guest link is down");
	json_object_put(call);
}

static void
tool_job(struct request *req)
{
	struct job_record j;
	struct vm *vm;
	const char *job_id = req_arg_str(req, "job_id", NULL);

	if ((vm = owned_vm(req)) == NULL)
		return;
	if (job_id != NULL && store_job_get(env->store, vm->rec.id, job_id,
	    &j) == -1) {
		request_error(req, "not_found", "VM %s has no job '%.64s'",
		    vm->rec.id, job_id);
		return;
	}
	/* Cached status never wakes a suspended VM. */
	if (strcmp(req->tool, "vm_job_status") == 0 &&
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

/* ---- suspend, resume, destroy ------------------------------------------ */

static void
suspended(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		reply_vm_error(req, code, msg);
		return;
	}
	request_reply(req, vm_summary(vm));
}

static void
suspend_checked(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;
	struct json_object *v;

	if (code == NULL && json_object_object_get_ex(res, "jobs_running", &v) &&
	    json_object_get_int(v) > 0) {
		request_error(req, "busy", "%d job(s) are running; pass "
		    "force=true to freeze them across the suspension",
		    json_object_get_int(v));
		return;
	}
	if (code == NULL && json_object_object_get_ex(res, "active", &v) &&
	    json_object_get_boolean(v)) {
		request_error(req, "busy", "processes started by jobs are "
		    "still running; pass force=true to freeze them");
		return;
	}
	vm_suspend(vm, strcmp(req_arg_str(req, "mode", "hibernate"), "pause") == 0,
	    suspended, req);
}

static void
tool_vm_suspend(struct request *req)
{
	struct json_object *call;
	struct vm *vm;

	if ((vm = owned_vm(req)) == NULL)
		return;
	if (!req_arg_bool(req, "force", 0) && vm->rec.state == VM_RUNNING) {
		if (vm->open_streams > 0) {
			request_error(req, "busy", "%d stream(s) are open; "
			    "pass force=true to close them",
			    vm->open_streams);
			return;
		}
		if (broker_has_pipes(vm)) {
			request_error(req, "busy", "a job broker pipe is "
			    "attached; pass force=true to close it");
			return;
		}
		if (vm->guest_up && !vm->busy) {
			call = json_object_new_object();
			json_object_object_add(call, "op",
			    json_object_new_string("activity"));
			if (proxy_call(vm, call, GUEST_TOOL_CALL_MS,
			    suspend_checked, req) == 0) {
				json_object_put(call);
				return;
			}
			json_object_put(call);
		}
	}
	vm_suspend(vm, strcmp(req_arg_str(req, "mode", "hibernate"), "pause") == 0,
	    suspended, req);
}

static void
resumed(struct vm *vm, const char *code, const char *msg, void *arg)
{
	suspended(vm, code, msg, arg);
}

static void
tool_vm_resume(struct request *req)
{
	struct vm *vm;

	if ((vm = owned_vm(req)) == NULL)
		return;
	request_progress(req, 1, 2, "resuming");
	vm_ready(vm, resumed, req);
}

static void
destroyed(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;
	struct json_object *o;

	if (code != NULL) {
		reply_vm_error(req, code, msg);
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, "vm_id", json_object_new_string(req->vm_id));
	json_object_object_add(o, "destroyed", json_object_new_boolean(1));
	json_object_object_add(o, "already_destroyed",
	    json_object_new_boolean(0));
	request_reply(req, o);
}

static void
tool_vm_destroy(struct request *req)
{
	const char *id = req_arg_str(req, "vm_id", "");
	struct vm *vm = vm_find_owned(id, req->workspace);

	snprintf(req->vm_id, sizeof(req->vm_id), "%.*s", VM_ID_LEN, id);
	if (vm == NULL) {
		struct json_object *o;

		/* Destroying twice is fine; destroying what was never ours
		 * is not_found, as for every other tool. */
		if (!store_vm_was_destroyed(env->store, id, req->workspace)) {
			request_error(req, "not_found", "there is no VM "
			    "'%.64s' in this workspace", id);
			return;
		}
		o = json_object_new_object();
		json_object_object_add(o, "vm_id", json_object_new_string(id));
		/* The schema's "destroyed" is always true: it is gone. */
		json_object_object_add(o, "destroyed",
		    json_object_new_boolean(1));
		json_object_object_add(o, "already_destroyed",
		    json_object_new_boolean(1));
		request_reply(req, o);
		return;
	}
	vm_destroy(vm, destroyed, req);
}

/* ---- streams ----------------------------------------------------------- */

static int
port_allowed(int port)
{
	const struct cfg_list *l = &env->conf.vmmd.stream_ports;

	/* 1023 and 1024 belong to the link itself. */
	if (port == GUEST_VSOCK_PORT || port == GUEST_VSOCK_PORT - 1)
		return 0;
	for (size_t i = 0; i < l->n; i++) {
		long lo, hi;
		char *end;

		lo = strtol(l->v[i], &end, 10);
		hi = *end == '-' ? strtol(end + 1, &end, 10) : lo;
		if (*end == '\0' && port >= lo && port <= hi)
			return 1;
	}
	return 0;
}

static void
stream_opened(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;
	struct json_object *o;
	char sid[48];

	struct jsonx_err jerr;
	int64_t channel;

	vm->opening_streams--;
	if (code != NULL) {
		reply_vm_error(req, code, msg);
		return;
	}
	/* vmproxy speaks for the guest: its channel number is checked. */
	if (fd == -1 || jsonx_get_int64(res, "channel", 1, 1, UINT32_MAX,
	    &channel, &jerr) != 1) {
		if (fd != -1)
			close(fd);
		log_warnx("vm %s: vmproxy's stream open result is malformed",
		    vm->rec.id);
		request_error(req, "internal", "vmproxy sent no valid stream");
		return;
	}
	snprintf(sid, sizeof(sid), "%s/%" PRId64, vm->rec.id, channel);
	o = json_object_new_object();
	json_object_object_add(o, "stream_id", json_object_new_string(sid));
	json_object_object_add(o, "vm_id", json_object_new_string(vm->rec.id));
	json_object_object_add(o, "port", json_object_new_int((int)req_arg_int(req,
	    "port", 0)));
	json_object_object_add(o, "workspace",
	    json_object_new_string(req->workspace));
	if (req->conn != NULL) {
		vm_stream_add(vm, sid, req->conn);
		ipc_reply(req->conn, IPC_VM_STREAM_OPEN_RESULT, req->id, o, fd);
	} else
		close(fd);
	json_object_put(o);
	request_drop(req);
}

static void
stream_ready(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		reply_vm_error(req, code, msg);
		return;
	}
	if (proxy_stream_open(vm, (int)req_arg_int(req, "port", 0), stream_opened,
	    req) == -1) {
		request_error(req, "unavailable", "the guest link is down");
		return;
	}
	vm->opening_streams++;
}

static void
tool_stream_open(struct request *req)
{
	int port, host = 0, ws = 0, here;
	struct vm *vm, *v;

	/* vm_id and port, 1..65535: decode_mcpd checked them. */
	port = (int)req_arg_int(req, "port", 0);
	if ((vm = owned_vm(req)) == NULL)
		return;
	if (port < 1 || port > 65535 || !port_allowed(port)) {
		request_error(req, "forbidden", "port %d is not open to "
		    "streams on this host", port);
		return;
	}
	/* Opens still on their way count: a burst cannot slip past. */
	TAILQ_FOREACH(v, &env->vms, entry) {
		host += v->open_streams + v->opening_streams;
		if (strcmp(v->rec.workspace, req->workspace) == 0)
			ws += v->open_streams + v->opening_streams;
	}
	here = vm->open_streams + vm->opening_streams;
	if (host >= env->conf.vmmd.max_streams ||
	    here >= env->conf.vmmd.max_streams_per_vm ||
	    (req->policy.max_streams > 0 && ws >= req->policy.max_streams)) {
		request_error(req, "quota_exceeded", "%s",
		    host >= env->conf.vmmd.max_streams ? "max_streams: the "
		    "host's streams are all open" :
		    here >= env->conf.vmmd.max_streams_per_vm ?
		    "max_streams_per_vm: this VM's streams are all open" :
		    "workspace max_streams: its streams are all open");
		return;
	}
	vm_ready(vm, stream_ready, req);
}

/* ---- dispatch ---------------------------------------------------------- */

static void
tool_stats(struct request *req)
{
	struct json_object *res = json_object_new_object();
	struct json_object *by = json_object_new_object();
	int counts[VM_NSTATES] = { 0 }, streams = 0;
	struct vm *vm;

	TAILQ_FOREACH(vm, &env->vms, entry) {
		counts[vm->rec.state]++;
		streams += vm->open_streams;
	}
	for (int i = 0; i < VM_NSTATES; i++)
		if (i != VM_GONE)
			json_object_object_add(by,
			    vm_state_name((enum vm_state)i),
			    json_object_new_int(counts[i]));
	json_object_object_add(res, "vms", by);
	json_object_object_add(res, "open_streams",
	    json_object_new_int(streams));
	if (req->conn != NULL)
		ipc_reply(req->conn, IPC_VM_STATS_RESULT, req->id, res, -1);
	json_object_put(res);
	request_drop(req);
}

/* Receipts: a retried request_id gets its first answer, never a rerun. */
static int
receipt_check(struct request *req)
{
	enum receipt_status st;
	char digest[RECEIPT_DIGEST_HEX + 1];
	char *stored = NULL;
	const char *rid = req_arg_str(req, "request_id", "");
	struct json_object *dargs;
	int r;

	/* How long a caller waits is not part of what it asked to run: a
	 * retry that waits differently is the same job. */
	dargs = json_object_new_object();
	json_object_object_foreach(req->args, key, val)
		/* Nor is the broker token: a retry keeps the first one, and
		 * the receipt never holds anything derived from it. */
		if (strcmp(req->tool, "vm_exec") != 0 ||
		    (strcmp(key, "wait_seconds") != 0 &&
		    strcmp(key, "broker_pipe_token") != 0))
			json_object_object_add(dargs, key, json_object_get(val));
	r = receipt_digest(dargs, digest);
	json_object_put(dargs);
	if (r == -1) {
		request_error(req, "internal", "cannot digest the arguments");
		return -1;
	}
	if (store_receipt_begin(env->store, req->workspace, rid, req->tool,
	    digest, &st, &stored) == -1) {
		request_error(req, "unavailable", "the receipt store failed");
		return -1;
	}
	switch (st) {
	case RECEIPT_NEW:
		snprintf(req->request_id, sizeof(req->request_id), "%s", rid);
		return 0;
	case RECEIPT_DONE: {
		struct json_object *body = json_tokener_parse(stored), *v;

		free(stored);
		req->mutation = 0;	/* audited the first time */
		if (body != NULL && json_object_object_get_ex(body, "result",
		    &v)) {
			request_reply(req, json_object_get(v));
		} else if (body != NULL && json_object_object_get_ex(body,
		    "error", &v)) {
			request_error(req, json_object_get_string(
			    json_object_object_get(v, "code")), "%s",
			    json_object_get_string(json_object_object_get(v,
			    "message")));
		} else
			request_error(req, "internal", "stored receipt for "
			    "%s is unreadable", rid);
		json_object_put(body);
		return -1;
	}
	case RECEIPT_MISMATCH:
		request_error(req, "conflict", "request_id '%s' was already "
		    "used with other arguments or another tool", rid);
		return -1;
	case RECEIPT_PENDING: {
		struct request *first;

		/* A retry while the first still waits gets its answer. */
		TAILQ_FOREACH(first, &env->requests, entry) {
			if (first == req || first->on_join == NULL ||
			    strcmp(first->request_id, rid) != 0 ||
			    strcmp(first->tool, req->tool) != 0 ||
			    strcmp(first->workspace, req->workspace) != 0)
				continue;
			req->mutation = 0;	/* audited once */
			if (first->on_join(first, req) == 0)
				return -1;
			request_error(req, "conflict", "max_joined_retries: "
			    "request '%s' already has %lld retries waiting "
			    "for its answer; ask again later", rid,
			    env->conf.vmmd.max_joined_retries);
			return -1;
		}
		request_error(req, "conflict", "request '%s' is still in "
		    "progress; ask again for its result", rid);
		return -1;
	}
	case RECEIPT_UNCERTAIN:
		request_error(req, "conflict", "the outcome of request '%s' "
		    "is unknown: vmmd or the guest stopped while it ran, and "
		    "it is not run again; see vm_status for the jobs that "
		    "exist", rid);
		return -1;
	}
	return -1;
}

void
tools_dispatch(struct request *req)
{
	static const struct {
		const char	*name;
		void		(*fn)(struct request *);
	} table[] = {
		{ "vm_create", tool_vm_create },
		{ "vm_list", tool_vm_list },
		{ "vm_status", tool_vm_status },
		{ "vm_exec", tool_vm_exec },
		{ "vm_job_status", tool_job },
		{ "vm_job_output", tool_job },
		{ "vm_job_cancel", tool_job },
		{ "vm_read_file", tool_job },
		{ "vm_write_file", tool_job },
		{ "vm_suspend", tool_vm_suspend },
		{ "vm_resume", tool_vm_resume },
		{ "vm_destroy", tool_vm_destroy },
		{ "vm_run", tool_vm_run },
		{ "stream_open", tool_stream_open },
		{ "broker_open", broker_open },
		{ "stats", tool_stats },
	};
	const struct tool *t = tools_find(req->tool);
	char err[256];
	size_t i;

	if (env->shutting_down) {
		request_error(req, "unavailable", "vmmd is shutting down");
		return;
	}
	/* The same validation mcpd did, by the same code. */
	if (t != NULL) {
		if (req->args == NULL)
			req->args = json_object_new_object();
		if (tool_validate_input(t, req->args, err, sizeof(err)) == -1) {
			request_error(req, "invalid_argument", "%s", err);
			return;
		}
		req->mutation = in_list(mutations, req->tool);
		if (in_list(receipted, req->tool) && receipt_check(req) == -1)
			return;
	}
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(table[i].name, req->tool) == 0) {
			table[i].fn(req);
			return;
		}
	request_error(req, "not_found", "there is no tool '%s'", req->tool);
}
