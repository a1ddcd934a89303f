/*
 * vmmd: job broker pipes.  vm_exec with broker_pipe_token makes one: vmmd
 * keeps the token's SHA-256 and a fresh route secret, in memory only, tells
 * vmproxy the route before the guest starts the job, and hands the guest the
 * secret for the job's relay.  A controller that shows the token attaches
 * (broker_open): vmproxy gives the pipe's socket, which goes to mcpd like a
 * stream's.  The pipe goes when the job is seen finished; neither secret is
 * written anywhere, so none survives a restart.
 */
#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <event2/event.h>

#include "vmmd_broker.h"
#include "guest.h"
#include "ipc.h"
#include "log.h"
#include "vmmd_shared.h"

struct broker_pipe {
	TAILQ_ENTRY(broker_pipe) entry;
	char			 job_id[GUEST_JOB_ID_MAX + 1];
	uint8_t			 hash[32];	/* SHA-256 of the token */
	char			 secret[BROKER_SECRET_HEX + 1];
	struct request		*pending;	/* its exec, until answered */
	long long		 opened;	/* mono seconds, attached */
	int			 polling;	/* a job_status is out */
};

struct broker_vm {
	TAILQ_HEAD(, broker_pipe) pipes;
	int			 attached;	/* as vmproxy counts them */
};

static struct event *sweep;

static void
token_hash(const char *token, uint8_t out[32])
{
	unsigned int n = 32;

	if (EVP_Digest(token, strlen(token), out, &n, EVP_sha256(), NULL) !=
	    1 || n != 32)
		fatalx("EVP_Digest failed");
}

static struct broker_vm *
bvm(struct vm *vm)
{
	if (vm->broker == NULL) {
		if ((vm->broker = calloc(1, sizeof(*vm->broker))) == NULL)
			fatal("calloc");
		TAILQ_INIT(&vm->broker->pipes);
	}
	return vm->broker;
}

static struct broker_pipe *
pipe_find(struct vm *vm, const char *job_id)
{
	struct broker_pipe *p;

	if (vm->broker == NULL)
		return NULL;
	TAILQ_FOREACH(p, &vm->broker->pipes, entry)
		if (p->pending == NULL && strcmp(p->job_id, job_id) == 0)
			return p;
	return NULL;
}

/*
 * json-c frees without clearing: the secret's copies in an object that was
 * sent (the member and the text the IPC layer had serialized, which json-c
 * caches, rewritten at the same length so it stays in place) go first.
 */
static void
wipe_member(struct json_object *o, const char *key)
{
	const int flags = JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE;
	struct json_object *v;
	const char *js;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return;
	if ((js = json_object_to_json_string_ext(o, flags)) != NULL)
		explicit_bzero((char *)js, strlen(js));
	explicit_bzero((char *)json_object_get_string(v),
	    (size_t)json_object_get_string_len(v));
}

static void
route_send(struct vm *vm, const struct broker_pipe *p, int remove)
{
	struct json_object *b = json_object_new_object();

	json_object_object_add(b, "job_id", json_object_new_string(p->job_id));
	if (remove)
		json_object_object_add(b, "remove",
		    json_object_new_boolean(1));
	else
		json_object_object_add(b, "secret",
		    json_object_new_string(p->secret));
	proxy_broker_route(vm, b);
	if (!remove)
		wipe_member(b, "secret");
	json_object_put(b);
}

static void
stream_id(const struct vm *vm, const char *job_id, char *out, size_t len)
{
	/* Within a vm_stream id: vmmd job ids are 25 characters. */
	snprintf(out, len, "%s/b:%s", vm->rec.id, job_id);
}

/* Tells mcpd that an attached controller's pipe ended, with why. */
static void
pipe_close_stream(struct vm *vm, const char *job_id, const char *reason)
{
	struct vm_stream *s;
	char sid[160];

	stream_id(vm, job_id, sid, sizeof(sid));
	TAILQ_FOREACH(s, &vm->streams, entry)
		if (strcmp(s->id, sid) == 0)
			break;
	if (s == NULL)
		return;
	TAILQ_REMOVE(&vm->streams, s, entry);
	if (s->conn != NULL) {
		struct json_object *b = json_object_new_object();

		json_object_object_add(b, "stream_id",
		    json_object_new_string(sid));
		json_object_object_add(b, "reason",
		    json_object_new_string(reason));
		ipc_send(s->conn, IPC_VM_STREAM_CLOSE, 0, b, -1);
		ipc_conn_flush(s->conn);
		json_object_put(b);
	}
	free(s);
}

static void
pipe_free(struct vm *vm, struct broker_pipe *p)
{
	TAILQ_REMOVE(&vm->broker->pipes, p, entry);
	explicit_bzero(p, sizeof(*p));
	free(p);
}

static void
pipe_remove(struct vm *vm, struct broker_pipe *p, const char *why)
{
	log_info("vm %s: job %s: broker pipe removed (%s)", vm->rec.id,
	    p->job_id, why);
	pipe_close_stream(vm, p->job_id, "job finished");
	route_send(vm, p, 1);
	pipe_free(vm, p);
}

void
broker_exec_prepare(struct vm *vm, struct request *req, const char *job_id,
    struct json_object *call)
{
	struct json_object *v;
	struct broker_pipe *p;
	unsigned char rnd[BROKER_SECRET_HEX / 2];
	size_t i;

	if (!json_object_object_get_ex(req->args, "broker_pipe_token", &v) ||
	    !json_object_is_type(v, json_type_string))
		return;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		fatal("calloc");
	snprintf(p->job_id, sizeof(p->job_id), "%s", job_id);
	token_hash(json_object_get_string(v), p->hash);
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		fatalx("RAND_bytes failed");
	for (i = 0; i < sizeof(rnd); i++)
		snprintf(p->secret + 2 * i, 3, "%02x", rnd[i]);
	explicit_bzero(rnd, sizeof(rnd));
	p->pending = req;
	TAILQ_INSERT_TAIL(&bvm(vm)->pipes, p, entry);
	/* Routed first: the job may connect before its exec is answered. */
	route_send(vm, p, 0);
	json_object_object_add(call, "broker_secret",
	    json_object_new_string(p->secret));
}

void
broker_exec_wipe(struct json_object *call)
{
	wipe_member(call, "broker_secret");
}

void
broker_exec_result(struct vm *vm, struct request *req,
    struct json_object *res, struct json_object *out)
{
	struct broker_pipe *p;
	struct json_object *v;
	int up = 0;

	if (vm->broker == NULL)
		return;
	TAILQ_FOREACH(p, &vm->broker->pipes, entry)
		if (p->pending == req)
			break;
	if (p == NULL)
		return;
	/* An image without the pipe ignores broker_secret: no pipe. */
	if (res != NULL && json_object_object_get_ex(res, "broker_pipe", &v) &&
	    json_object_is_type(v, json_type_boolean))
		up = json_object_get_boolean(v);
	if (out != NULL)
		json_object_object_add(out, "broker_pipe",
		    json_object_new_boolean(up));
	if (!up) {
		route_send(vm, p, 1);
		pipe_free(vm, p);
		return;
	}
	p->pending = NULL;
	log_info("vm %s: job %s: broker pipe open", vm->rec.id, p->job_id);
}

void
broker_job_seen(struct vm *vm, const char *job_id, const char *state)
{
	struct broker_pipe *p;

	if (job_id == NULL || state == NULL || strcmp(state, "running") == 0 ||
	    (p = pipe_find(vm, job_id)) == NULL)
		return;
	pipe_remove(vm, p, state);
}

void
broker_proxy_up(struct vm *vm)
{
	struct broker_pipe *p;

	const struct conf_vmmd *c = &vmmd_conf()->vmmd;
	struct json_object *b = json_object_new_object();

	/* First, before any route: vmproxy takes them once. */
	json_object_object_add(b, "max_attached",
	    json_object_new_int64(c->max_broker_pipes_per_vm));
	json_object_object_add(b, "max_connections",
	    json_object_new_int64(c->broker_max_connections));
	json_object_object_add(b, "max_waiting",
	    json_object_new_int64(c->broker_max_waiting));
	json_object_object_add(b, "buffer_bytes",
	    json_object_new_int64(c->broker_buffer_kib * 1024));
	json_object_object_add(b, "stall_seconds",
	    json_object_new_int64(c->broker_stall_seconds));
	json_object_object_add(b, "max_pending",
	    json_object_new_int64(c->broker_max_pending));
	json_object_object_add(b, "preamble_seconds",
	    json_object_new_int64(c->broker_preamble_seconds));
	proxy_broker_limits(vm, b);
	json_object_put(b);
	if (vm->broker == NULL)
		return;
	vm->broker->attached = 0;
	TAILQ_FOREACH(p, &vm->broker->pipes, entry)
		route_send(vm, p, 0);
}

void
broker_pipes_count(struct vm *vm, int n)
{
	if (vm->broker != NULL)
		vm->broker->attached = n;
}

int
broker_has_pipes(const struct vm *vm)
{
	return vm->broker != NULL && vm->broker->attached > 0;
}

void
broker_vm_free(struct vm *vm)
{
	struct broker_pipe *p;

	if (vm->broker == NULL)
		return;
	while ((p = TAILQ_FIRST(&vm->broker->pipes)) != NULL)
		pipe_free(vm, p);
	free(vm->broker);
	vm->broker = NULL;
}

/* ---- attaching --------------------------------------------------------- */

static void
attached(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *a)
{
	struct request *req = a;
	struct json_object *o;
	char sid[160];
	const char *job = req->msg.job_id;

	if (code != NULL) {
		request_error(req, code, "%s", msg != NULL ? msg : code);
		return;
	}
	if (fd == -1) {
		request_error(req, "internal", "vmproxy sent no broker pipe");
		return;
	}
	stream_id(vm, job, sid, sizeof(sid));
	o = json_object_new_object();
	json_object_object_add(o, "stream_id", json_object_new_string(sid));
	json_object_object_add(o, "vm_id", json_object_new_string(vm->rec.id));
	json_object_object_add(o, "port", json_object_new_int(0));
	json_object_object_add(o, "workspace",
	    json_object_new_string(req->workspace));
	if (req->conn != NULL) {
		vm_stream_add(vm, sid, req->conn);
		ipc_reply(req->conn, IPC_VM_STREAM_OPEN_RESULT, req->id, o, fd);
		log_info("vm %s: job %s: broker pipe attached for workspace %s",
		    vm->rec.id, job, req->workspace);
	} else
		close(fd);
	json_object_put(o);
	request_drop(req);
}

static void
attach_ready(struct vm *vm, const char *code, const char *msg, void *a)
{
	struct request *req = a;

	if (code != NULL) {
		request_error(req, code, "%s", msg != NULL ? msg : code);
		return;
	}
	/* The job may have been seen finished while the VM woke. */
	if (pipe_find(vm, req->msg.job_id) == NULL) {
		request_error(req, "not_found", "there is no such broker pipe");
		return;
	}
	if (proxy_broker_attach(vm, req->msg.job_id, attached, req) == -1)
		request_error(req, "unavailable", "the guest link is down");
}

/* IPC_VM_BROKER_OPEN, once authd has named the workspace: decode_mcpd
 * bounded the VM's and the job's names and the token's shape. */
void
broker_open(struct request *req)
{
	const char *job = req->msg.job_id, *token = req->msg.pipe_token;
	struct broker_pipe *p;
	uint8_t h[32];
	struct vm *vm;

	vm = vm_find_owned(req->msg.vm_id, req->workspace);
	snprintf(req->vm_id, sizeof(req->vm_id), "%.*s", VM_ID_LEN,
	    req->msg.vm_id);
	token_hash(token, h);
	/* One answer for every miss: nothing tells which part was wrong. */
	if (vm == NULL || vm->rec.state == VM_GONE ||
	    (p = pipe_find(vm, job)) == NULL ||
	    CRYPTO_memcmp(h, p->hash, sizeof(h)) != 0) {
		explicit_bzero(h, sizeof(h));
		request_error(req, "not_found", "there is no such broker pipe");
		return;
	}
	explicit_bzero(h, sizeof(h));
	vm_ready(vm, attach_ready, req);
}

/* ---- seeing jobs finish ------------------------------------------------ */

struct poll_arg {
	TAILQ_ENTRY(poll_arg) entry;
	char	vm_id[VM_ID_LEN + 1];
	char	job_id[GUEST_JOB_ID_MAX + 1];
};

/* Polls out; one whose VM went is never answered, and is freed here. */
static TAILQ_HEAD(, poll_arg) polls = TAILQ_HEAD_INITIALIZER(polls);

static void
polled(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *a)
{
	struct poll_arg *pa = a;
	struct broker_pipe *p;
	struct json_object *v;

	if (fd != -1)
		close(fd);
	TAILQ_REMOVE(&polls, pa, entry);
	if ((p = pipe_find(vm, pa->job_id)) != NULL) {
		p->polling = 0;
		if (code != NULL && strcmp(code, "not_found") == 0)
			pipe_remove(vm, p, "job unknown to the guest");
		else if (code == NULL && json_object_object_get_ex(res,
		    "state", &v) && json_object_is_type(v, json_type_string))
			broker_job_seen(vm, pa->job_id,
			    json_object_get_string(v));
	}
	free(pa);
}

/* Every few seconds: the jobs of running VMs with pipes. */
static void
sweep_cb(int fd, short ev, void *a)
{
	struct timeval tv = { BROKER_SWEEP_SECONDS, 0 };
	struct broker_pipe *p;
	struct poll_arg *pa, *next;
	struct json_object *call;
	struct vm *vm;

	for (pa = TAILQ_FIRST(&polls); pa != NULL; pa = next) {
		next = TAILQ_NEXT(pa, entry);
		if (vm_find(pa->vm_id) == NULL) {
			TAILQ_REMOVE(&polls, pa, entry);
			free(pa);
		}
	}
	TAILQ_FOREACH(vm, vm_all(), entry) {
		if (vm->broker == NULL || vm->rec.state != VM_RUNNING ||
		    !vm->guest_up || vm->busy)
			continue;
		TAILQ_FOREACH(p, &vm->broker->pipes, entry) {
			if (p->pending != NULL || p->polling)
				continue;
			if ((pa = calloc(1, sizeof(*pa))) == NULL)
				fatal("calloc");
			snprintf(pa->vm_id, sizeof(pa->vm_id), "%s",
			    vm->rec.id);
			snprintf(pa->job_id, sizeof(pa->job_id), "%s",
			    p->job_id);
			call = json_object_new_object();
			json_object_object_add(call, "op",
			    json_object_new_string("job_status"));
			json_object_object_add(call, "job_id",
			    json_object_new_string(p->job_id));
			if (proxy_call(vm, call, 30000, polled, pa) == -1)
				free(pa);
			else {
				TAILQ_INSERT_TAIL(&polls, pa, entry);
				p->polling = 1;
			}
			json_object_put(call);
		}
	}
	if (!vmmd_shutting_down())
		evtimer_add(sweep, &tv);
}

void
broker_init(void)
{
	struct timeval tv = { BROKER_SWEEP_SECONDS, 0 };

	if ((sweep = evtimer_new(vmmd_base(), sweep_cb, NULL)) == NULL)
		fatalx("evtimer_new");
	evtimer_add(sweep, &tv);
}
