/*
 * mcpd-testd: mcpd's own code with a test verifier and a fake backend, so
 * the integration, MCP conformance and SDK suites can drive the real HTTP,
 * MCP and WebSocket layers before authd and vmmd exist.  Test-only: never
 * installed.
 *
 * Credentials come from the file named by MCPD_TEST_TOKENS ("token
 * workspace" lines); a token absent from it is refused like authd would.
 * The backend answers from the arguments: a vm_id of "err-<code>" fails
 * with that public code, vm_create reports progress, vm_suspend takes 30 s
 * (to cancel), and every result names the workspace the call arrived
 * with.  Those results are not shaped like tools.json's outputs: mcpd passes
 * them through, and the tests read them.  With MCPD_TEST_EXAMPLES=1 every
 * call answers its tool's first example result from tools.json instead,
 * which matches the outputSchema (for SDK clients that check it); then
 * MCPD_TEST_VMS=n makes vm_list list n copies of its example VM (the
 * benchmark's workspace with 10 VMs).  Streams go
 * to a socketpair served by a thread: port 5001 echoes, 5002 counts bytes
 * until EOF and answers "bytes=<n>\n", 5003 closes at once; vm "nope" is
 * not_found and port 4444 has no listener (conflict).
 *
 * Gated calls (issue #28) double vmmd, whose side of approvals is another
 * change: a vm_id of "gated-required", "gated-denied" or "gated-expired"
 * answers that approval code with a proposal, and "gated-once" answers
 * approval_required the first time a request_id comes and runs the retry
 * (as if a human had approved in between).  The proposal goes through
 * mcpd's own decoder (proposal.c), as vmmd's would.
 */
#include <sys/socket.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "mcpd.h"
#include "schema.h"

struct tok {
	char	token[AUTH_TOKEN_MAX];
	char	workspace[AUTH_WORKSPACE_MAX];
};

static struct tok	 toks[64];
static size_t		 ntoks;
static struct event_base *fake_base;

static int
test_auth_start(void *ctx, struct event_base *base,
    const struct mcpd_config *cfg)
{
	const char *path = getenv("MCPD_TEST_TOKENS");
	char line[1024];
	FILE *f;

	if (path == NULL || (f = fopen(path, "r")) == NULL) {
		log_warnx("MCPD_TEST_TOKENS must name a readable file");
		return -1;
	}
	while (ntoks < 64 && fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%511s %63s", toks[ntoks].token,
		    toks[ntoks].workspace) == 2)
			ntoks++;
	}
	fclose(f);
	return 0;
}

static void
test_auth_verify(void *ctx, const char *token, auth_cb cb, void *arg)
{
	struct auth_identity id;
	size_t i;

	if (strcmp(token, "authd-down") == 0) {
		cb(AUTH_UNAVAILABLE, NULL, arg);
		return;
	}
	for (i = 0; i < ntoks; i++) {
		if (strcmp(toks[i].token, token) != 0)
			continue;
		memset(&id, 0, sizeof(id));
		snprintf(id.workspace, sizeof(id.workspace), "%s",
		    toks[i].workspace);
		snprintf(id.credential_id, sizeof(id.credential_id), "cred-%zu",
		    i);
		cb(AUTH_OK, &id, arg);
		return;
	}
	cb(AUTH_UNAUTHORIZED, NULL, arg);
}

static const struct auth_ops test_auth = {
	"test-tokens", test_auth_start, test_auth_verify,
};

struct backend_call {
	struct event		*ev;
	backend_result_cb	 done;
	backend_progress_cb	 progress;
	backend_stream_cb	 sdone;
	void			*arg;
	char			 tool[64];
	char			 workspace[AUTH_WORKSPACE_MAX];
	struct json_object	*args;
	int			 step;
	int			 fd;
	char			 code[32];
	const char		*task;		/* run_task's op */
};

/* vm_run calls under way, which a run_task cancel ends (fake_run_task). */
static struct backend_call *fake_runs[16];

static void
fake_free(struct backend_call *c)
{
	for (size_t i = 0; i < sizeof(fake_runs) / sizeof(fake_runs[0]); i++)
		if (fake_runs[i] == c)
			fake_runs[i] = NULL;
	event_free(c->ev);
	json_object_put(c->args);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

/*
 * What a job tool says of its job, for the tasks tests: job "j1" (vm_exec
 * starts it) runs, a job_id starting "done" has ended with exit code 0
 * and printed "out\n", and vm_job_cancel cancels.
 */
static void
fake_job(struct backend_call *c, struct json_object *r)
{
	struct json_object *v, *cur;
	const char *job = "j1";
	int done;

	if (json_object_object_get_ex(c->args, "job_id", &v))
		job = json_object_get_string(v);
	done = strncmp(job, "done", 4) == 0;
	if (json_object_object_get_ex(c->args, "vm_id", &v))
		json_object_object_add(r, "vm_id", json_object_get(v));
	json_object_object_add(r, "job_id", json_object_new_string(job));
	json_object_object_add(r, "state", json_object_new_string(
	    strcmp(c->tool, "vm_job_cancel") == 0 ? "cancelled" :
	    done ? "completed" : "running"));
	json_object_object_add(r, "started_at",
	    json_object_new_string("2026-12-01T10:00:00Z"));
	json_object_object_add(r, "finished_at", done ?
	    json_object_new_string("2026-12-01T10:00:01Z") : NULL);
	json_object_object_add(r, "exit_code", done ? json_object_new_int(0) :
	    NULL);
	json_object_object_add(r, "stdout_bytes", json_object_new_int(4));
	json_object_object_add(r, "stderr_bytes", json_object_new_int(0));
	if (strcmp(c->tool, "vm_job_output") == 0) {
		json_object_object_add(r, "stdout",
		    json_object_new_string("out\n"));
		json_object_object_add(r, "stderr", json_object_new_string(""));
		cur = json_object_new_object();
		json_object_object_add(cur, "stdout", json_object_new_int(4));
		json_object_object_add(cur, "stderr", json_object_new_int(0));
		json_object_object_add(r, "next_cursor", cur);
	}
}

/*
 * The proposal vmmd would send for c, through mcpd's decoder; 0, or 1 when
 * the call should run (gated-once, retried).
 */
static int
fake_gated(struct backend_call *c, const char *vm_id, struct proposal *p,
    struct backend_result *br)
{
	static char seen[16][129];
	static size_t nseen;
	struct json_object *o, *g, *v;
	const char *state = "pending", *rid = "";
	char err[256];
	size_t i;

	br->code = "approval_required";
	br->message = "this call needs a human's approval";
	if (strcmp(vm_id, "gated-denied") == 0) {
		state = "denied";
		br->code = "approval_denied";
		br->message = "an approver denied this call";
	} else if (strcmp(vm_id, "gated-expired") == 0) {
		state = "expired";
		br->code = "approval_expired";
		br->message = "the proposal expired";
	}
	if (json_object_object_get_ex(c->args, "request_id", &v))
		rid = json_object_get_string(v);
	if (strcmp(vm_id, "gated-once") == 0 && rid[0] != '\0') {
		for (i = 0; i < nseen; i++)
			if (strcmp(seen[i], rid) == 0)
				return 1;
		if (nseen < 16)
			snprintf(seen[nseen++], sizeof(seen[0]), "%s", rid);
	}
	o = json_object_new_object();
	g = json_object_new_array();
	json_object_array_add(g, json_object_new_string(
	    strcmp(c->tool, "vm_destroy") == 0 ? "destroy" : "exec"));
	json_object_object_add(o, "id", json_object_new_string(
	    "p0123456789abcdef0123456789abcdef"));
	json_object_object_add(o, "tool", json_object_new_string(c->tool));
	json_object_object_add(o, "request_id", json_object_new_string(rid));
	json_object_object_add(o, "args_digest", json_object_new_string(
	    "5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592"));
	json_object_object_add(o, "effect", json_object_new_string(
	    "run a command in the VM"));
	json_object_object_add(o, "gates", g);
	json_object_object_add(o, "approvals_needed", json_object_new_int(
	    strcmp(c->tool, "vm_destroy") == 0 ? 2 : 1));
	json_object_object_add(o, "approvals", json_object_new_int(0));
	json_object_object_add(o, "state", json_object_new_string(state));
	json_object_object_add(o, "requested_at",
	    json_object_new_string("2026-12-01T10:00:00Z"));
	json_object_object_add(o, "expires_at",
	    json_object_new_string("2026-12-01T11:00:00Z"));
	if (proposal_from_json(o, p, err, sizeof(err)) == -1)
		fatalx("the fake proposal: %s", err);
	json_object_put(o);
	br->proposal = p;
	return 0;
}

static void fake_step(evutil_socket_t, short, void *);

/*
 * vmmd's answer about a vm_run task's run, for the tasks tests: request_id
 * "live..." runs in VM v1 as job j1, "done..." ended with exit code 0,
 * "bad..." ended refused, anything else is not found.  Workspace B has
 * none.
 */
static void
fake_run_task(struct backend_call *c)
{
	struct backend_result br = { 0 };
	struct json_object *r, *v, *o;
	const char *rid = "";

	if (json_object_object_get_ex(c->args, "request_id", &v))
		rid = json_object_get_string(v);
	/* A cancel ends the run's call (its answer: the fake's echo) before
	 * it is acknowledged. */
	for (size_t i = 0; strcmp(c->task, "cancel") == 0 &&
	    strcmp(c->workspace, "ws-b") != 0 &&
	    i < sizeof(fake_runs) / sizeof(fake_runs[0]); i++) {
		struct backend_call *run = fake_runs[i];

		if (run != NULL && json_object_object_get_ex(run->args,
		    "request_id", &v) && strcmp(json_object_get_string(v),
		    rid) == 0) {
			evtimer_del(run->ev);
			fake_step(-1, 0, run);
		}
	}
	if (strcmp(c->workspace, "ws-b") == 0 || (strncmp(rid, "live", 4) !=
	    0 && strncmp(rid, "done", 4) != 0 && strncmp(rid, "bad", 3) != 0)) {
		br.code = "not_found";
		br.message = "no vm_run of that request_id in this workspace";
		c->done(&br, c->arg);
		return;
	}
	r = json_object_new_object();
	json_object_object_add(r, "request_id", json_object_new_string(rid));
	json_object_object_add(r, "created_at",
	    json_object_new_string("2026-12-01T10:00:00.000Z"));
	if (strncmp(rid, "live", 4) == 0) {
		json_object_object_add(r, "state",
		    json_object_new_string("running"));
		json_object_object_add(r, "vm_id", json_object_new_string("v1"));
		json_object_object_add(r, "job_id",
		    json_object_new_string("j1"));
		o = json_object_new_object();
		json_object_object_add(o, "stdout_bytes",
		    json_object_new_int(4));
		json_object_object_add(o, "stderr_bytes",
		    json_object_new_int(0));
		json_object_object_add(r, "status", o);
	} else {
		json_object_object_add(r, "state",
		    json_object_new_string("ended"));
		json_object_object_add(r, "finished_at",
		    json_object_new_string("2026-12-01T10:00:01.000Z"));
		o = json_object_new_object();
		if (strncmp(rid, "bad", 3) == 0) {
			json_object_object_add(o, "code",
			    json_object_new_string("quota_exceeded"));
			json_object_object_add(o, "message",
			    json_object_new_string("max_vms (1) reached"));
			json_object_object_add(r, "error", o);
		} else {
			json_object_object_add(o, "vm_id",
			    json_object_new_string("v9"));
			json_object_object_add(o, "state",
			    json_object_new_string("completed"));
			json_object_object_add(o, "exit_code",
			    json_object_new_int(0));
			json_object_object_add(o, "stdout",
			    json_object_new_string("out\n"));
			json_object_object_add(o, "origin",
			    json_object_new_string("warm"));
			json_object_object_add(r, "result", o);
		}
	}
	json_object_object_add(r, "task", json_object_new_string(c->task));
	br.ok = 1;
	br.result = r;
	c->done(&br, c->arg);
	json_object_put(r);
}

static void
fake_step(evutil_socket_t fd, short ev, void *arg)
{
	struct backend_call *c = arg;
	struct backend_result br = { 0 };
	struct json_object *r, *v;
	struct timeval tv = { 0, 100000 };
	struct proposal p;

	if (c->sdone != NULL) {
		int sfd = c->fd;

		c->fd = -1;
		if (sfd < 0)
			c->sdone(-1, NULL, c->code,
			    strcmp(c->code, "not_found") == 0 ?
			    "no such VM in this workspace" :
			    "no guest program listens on that port", c->arg);
		else
			c->sdone(sfd, "test-stream", NULL, NULL, c->arg);
		fake_free(c);
		return;
	}
	/* vm_run of a request_id "live...": taken on (a progress), then it
	 * runs until cancelled. */
	if (strcmp(c->tool, "vm_run") == 0 && c->progress != NULL &&
	    c->step == 0 && json_object_object_get_ex(c->args, "request_id",
	    &v) && strncmp(json_object_get_string(v), "live", 4) == 0) {
		c->step++;
		for (size_t i = 0; i < sizeof(fake_runs) /
		    sizeof(fake_runs[0]); i++)
			if (fake_runs[i] == NULL) {
				fake_runs[i] = c;
				break;
			}
		c->progress(1, 4, "booting", c->arg);
		tv.tv_sec = 30;
		tv.tv_usec = 0;
		evtimer_add(c->ev, &tv);
		return;
	}
	if (c->task != NULL) {
		fake_run_task(c);
		fake_free(c);
		return;
	}
	if (strcmp(c->tool, "vm_create") == 0 && c->step < 3) {
		c->step++;
		if (c->progress != NULL)
			c->progress(c->step, 4, "booting", c->arg);
		evtimer_add(c->ev, &tv);
		return;
	}
	if (json_object_object_get_ex(c->args, "vm_id", &v) &&
	    strncmp(json_object_get_string(v), "err-", 4) == 0) {
		br.ok = 0;
		br.code = json_object_get_string(v) + 4;
		br.message = "the fake backend was asked to fail";
		c->done(&br, c->arg);
		fake_free(c);
		return;
	}
	if (json_object_object_get_ex(c->args, "vm_id", &v) &&
	    strncmp(json_object_get_string(v), "gated-", 6) == 0 &&
	    fake_gated(c, json_object_get_string(v), &p, &br) == 0) {
		c->done(&br, c->arg);
		fake_free(c);
		return;
	}
	if (getenv("MCPD_TEST_EXAMPLES") != NULL) {
		struct json_object *ex, *res;

		if (!json_object_object_get_ex(tool_definition(tools_find(
		    c->tool)), "examples", &ex) ||
		    !json_object_object_get_ex(json_object_array_get_idx(ex,
		    0), "result", &res))
			fatalx("%s: no example result", c->tool);
		br.ok = 1;
		br.result = res;
		if (strcmp(c->tool, "vm_list") == 0 &&
		    getenv("MCPD_TEST_VMS") != NULL) {
			struct json_object *vms = json_object_new_array();
			int i, n = atoi(getenv("MCPD_TEST_VMS"));

			for (i = 0; i < n; i++)
				json_object_array_add(vms, json_object_get(
				    json_object_array_get_idx(
				    json_object_object_get(res, "vms"), 0)));
			br.result = json_object_new_object();
			json_object_object_add(br.result, "vms", vms);
		}
		c->done(&br, c->arg);
		if (br.result != res)
			json_object_put(br.result);
		fake_free(c);
		return;
	}
	r = json_object_new_object();
	json_object_object_add(r, "tool", json_object_new_string(c->tool));
	json_object_object_add(r, "workspace",
	    json_object_new_string(c->workspace));
	json_object_object_add(r, "arguments", json_object_get(c->args));
	if (strcmp(c->tool, "vm_exec") == 0 ||
	    strncmp(c->tool, "vm_job_", 7) == 0)
		fake_job(c, r);
	br.ok = 1;
	br.result = r;
	c->done(&br, c->arg);
	json_object_put(r);
	fake_free(c);
}

static struct backend_call *
fake_new(const struct auth_identity *id)
{
	struct backend_call *c;

	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->ev = evtimer_new(fake_base, fake_step, c)) == NULL)
		fatal("%s", __func__);
	c->fd = -1;
	snprintf(c->workspace, sizeof(c->workspace), "%s", id->workspace);
	return c;
}

static struct backend_call *
fake_call(void *ctx, const char *tool, struct json_object *args,
    const char *credential, const struct auth_identity *id,
    backend_result_cb done, backend_progress_cb progress, void *arg)
{
	struct backend_call *c = fake_new(id);
	struct timeval tv = { 0, 0 };

	snprintf(c->tool, sizeof(c->tool), "%s", tool);
	c->args = json_object_get(args);
	c->done = done;
	c->progress = progress;
	c->arg = arg;
	if (strcmp(tool, "vm_suspend") == 0)
		tv.tv_sec = 30;
	evtimer_add(c->ev, &tv);
	return c;
}

static struct backend_call *
fake_run_task_call(void *ctx, const char *op, const char *request_id,
    const char *credential, const struct auth_identity *id,
    backend_result_cb done, void *arg)
{
	struct backend_call *c = fake_new(id);
	struct timeval tv = { 0, 0 };

	snprintf(c->tool, sizeof(c->tool), "vm_run");
	c->task = strcmp(op, "cancel") == 0 ? "cancel" : "get";
	c->args = json_object_new_object();
	json_object_object_add(c->args, "request_id",
	    json_object_new_string(request_id));
	c->done = done;
	c->arg = arg;
	evtimer_add(c->ev, &tv);
	return c;
}

static void
fake_cancel(void *ctx, struct backend_call *c)
{
	fake_free(c);
}

struct guest {
	int		fd;
	unsigned int	port;
};

static void *
guest_main(void *arg)
{
	struct guest *g = arg;
	char buf[65536];
	unsigned long long total = 0;
	ssize_t n;

	if (g->port == 5003)
		goto out;
	while ((n = read(g->fd, buf, sizeof(buf))) > 0) {
		total += (unsigned long long)n;
		if (g->port == 5001) {
			ssize_t off = 0;

			while (off < n) {
				ssize_t w = write(g->fd, buf + off, n - off);

				if (w <= 0)
					goto out;
				off += w;
			}
		}
	}
	if (g->port == 5002) {
		int len = snprintf(buf, sizeof(buf), "bytes=%llu\n", total);

		if (write(g->fd, buf, len) != len)
			goto out;
	}
out:
	close(g->fd);
	free(g);
	return NULL;
}

static struct backend_call *
fake_stream_open(void *ctx, const char *vm_id, unsigned int port,
    const char *credential, const struct auth_identity *id,
    backend_stream_cb done, void *arg)
{
	struct backend_call *c = fake_new(id);
	struct timeval tv = { 0, 0 };
	struct guest *g;
	pthread_t t;
	int sv[2];

	c->sdone = done;
	c->arg = arg;
	if (strcmp(vm_id, "nope") == 0) {
		snprintf(c->code, sizeof(c->code), "not_found");
	} else if (port != 5001 && port != 5002 && port != 5003) {
		snprintf(c->code, sizeof(c->code), "conflict");
	} else {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
		    sv) == -1 || (g = calloc(1, sizeof(*g))) == NULL)
			fatal("%s", __func__);
		g->fd = sv[1];
		g->port = port;
		if (pthread_create(&t, NULL, guest_main, g) != 0)
			fatalx("pthread_create");
		pthread_detach(t);
		c->fd = sv[0];
	}
	evtimer_add(c->ev, &tv);
	return c;
}

static int
fake_start(void *ctx, struct event_base *base, const struct mcpd_config *cfg)
{
	fake_base = base;
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct backend_ops fake_backend = {
		"fake", fake_start, fake_call, fake_cancel, fake_stream_open,
		NULL, fake_run_task_call,
	};

	/* The fake guests are threads; mcpd itself starts none. */
	static const char *const threads[] = { "clone", "clone3",
	    "set_robust_list", "rseq", "sched_getaffinity" };

	mcpd_extra_syscalls = threads;
	mcpd_nextra_syscalls = sizeof(threads) / sizeof(threads[0]);
	return mcpd_main(argc, argv, &test_auth, NULL, &fake_backend, NULL);
}
