/*
 * MCP tasks for mcpd; see tasks.h.  The task id comes back from clients:
 * it is parsed as strictly as the tool arguments it stands for, and a
 * malformed one is simply a task that does not exist.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "mcp.h"
#include "tasks.h"

/* ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$ and ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$,
 * tools.json's vm_id/job_id and request_id. */
static int
id_char(unsigned char c, const char *extra)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != '\0' && strchr(extra, c) != NULL);
}

static int
id_part(const char *s, size_t len, size_t max, const char *extra, char *out)
{
	size_t i;

	if (len == 0 || len > max || !id_char((unsigned char)s[0], ""))
		return -1;
	for (i = 1; i < len; i++)
		if (!id_char((unsigned char)s[i], extra))
			return -1;
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

int
task_id_parse(const char *s, size_t len, struct task_id *t)
{
	const char *d1, *d2, *end = s + len;

	memset(t, 0, sizeof(*t));
	if (len > TASK_ID_MAX)
		return -1;
	if (len >= sizeof(TASK_RUN_PREFIX) - 1 && memcmp(s, TASK_RUN_PREFIX,
	    sizeof(TASK_RUN_PREFIX) - 1) == 0) {
		s += sizeof(TASK_RUN_PREFIX) - 1;
		len -= sizeof(TASK_RUN_PREFIX) - 1;
		if (id_part(s, len, TASK_REQUEST_ID_MAX, "._:-",
		    t->request_id) == -1) {
			memset(t, 0, sizeof(*t));
			return -1;
		}
		t->run = 1;
		return 0;
	}
	/* vm_id and job_id have no dots; request_id may. */
	if ((d1 = memchr(s, '.', len)) == NULL ||
	    (d2 = memchr(d1 + 1, '.', (size_t)(end - d1 - 1))) == NULL)
		return -1;
	if (id_part(s, (size_t)(d1 - s), TASK_VM_ID_MAX, "_-", t->vm_id) ==
	    -1 || id_part(d1 + 1, (size_t)(d2 - d1 - 1), TASK_JOB_ID_MAX, "_-",
	    t->job_id) == -1 || id_part(d2 + 1, (size_t)(end - d2 - 1),
	    TASK_REQUEST_ID_MAX, "._:-", t->request_id) == -1) {
		memset(t, 0, sizeof(*t));
		return -1;
	}
	return 0;
}

int
task_id_format(const char *vm_id, const char *job_id, const char *request_id,
    char *buf, size_t bufsz)
{
	struct task_id t;
	int n;

	n = snprintf(buf, bufsz, "%s.%s.%s", vm_id, job_id, request_id);
	if (n < 0 || (size_t)n >= bufsz ||
	    task_id_parse(buf, (size_t)n, &t) == -1)
		return -1;
	return 0;
}

int
task_run_id_format(const char *request_id, char *buf, size_t bufsz)
{
	struct task_id t;
	int n;

	n = snprintf(buf, bufsz, TASK_RUN_PREFIX "%s", request_id);
	if (n < 0 || (size_t)n >= bufsz ||
	    task_id_parse(buf, (size_t)n, &t) == -1 || !t.run)
		return -1;
	return 0;
}

void
task_id_string(const struct task_id *t, char *buf, size_t bufsz)
{
	if (t->run)
		snprintf(buf, bufsz, TASK_RUN_PREFIX "%s", t->request_id);
	else
		snprintf(buf, bufsz, "%s.%s.%s", t->vm_id, t->job_id,
		    t->request_id);
}

struct json_object *
task_result_object(const struct backend_result *br)
{
	struct json_object *o;
	struct jsonx_err jerr;

	if (!br->ok)
		return NULL;
	if (br->text != NULL) {
		if (mcp_json_parse(br->text, br->textlen, &o, &jerr) == -1)
			return NULL;
	} else
		o = json_object_get(br->result);
	if (!json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static const char *
str_member(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* Task's common members; when is the job's start (RFC 3339, UTC). */
static struct json_object *
task_base(const char *task_id, const char *status, const char *created,
    const char *updated, const char *message)
{
	struct json_object *r = json_object_new_object();

	json_object_object_add(r, "taskId", json_object_new_string(task_id));
	json_object_object_add(r, "status", json_object_new_string(status));
	if (message != NULL)
		json_object_object_add(r, "statusMessage",
		    json_object_new_string(message));
	json_object_object_add(r, "createdAt", json_object_new_string(created));
	json_object_object_add(r, "lastUpdatedAt",
	    json_object_new_string(updated));
	/* Kept as long as the job's VM: no deadline of its own. */
	json_object_object_add(r, "ttlMs", NULL);
	json_object_object_add(r, "pollIntervalMs",
	    json_object_new_int(TASK_POLL_INTERVAL_MS));
	return r;
}

struct json_object *
task_created(const struct backend_result *br, const char *request_id)
{
	struct json_object *res, *r = NULL;
	const char *vm_id, *job_id, *started;
	char id[TASK_ID_MAX + 1];

	if ((res = task_result_object(br)) == NULL)
		return NULL;
	vm_id = str_member(res, "vm_id");
	job_id = str_member(res, "job_id");
	started = str_member(res, "started_at");
	if (vm_id != NULL && job_id != NULL && started != NULL &&
	    request_id != NULL &&
	    task_id_format(vm_id, job_id, request_id, id, sizeof(id)) == 0) {
		r = task_base(id, "working", started, started, "the command "
		    "is running; its output so far: vm_job_output");
		json_object_object_add(r, "resultType",
		    json_object_new_string("task"));
		mcp_stateless_meta(r);
	}
	json_object_put(res);
	return r;
}

int
task_from_status(const struct task_id *t, struct json_object *status,
    struct json_object **out)
{
	struct json_object *r, *v;
	const char *state, *started, *finished;
	char id[TASK_ID_MAX + 1], msg[128];
	int64_t so = 0, se = 0;

	*out = NULL;
	state = str_member(status, "state");
	started = str_member(status, "started_at");
	finished = str_member(status, "finished_at");
	if (state == NULL || started == NULL)
		return -1;
	if (strcmp(state, "running") != 0 && strcmp(state, "cancelled") != 0)
		return 1;
	task_id_string(t, id, sizeof(id));
	if (strcmp(state, "running") == 0) {
		if (json_object_object_get_ex(status, "stdout_bytes", &v))
			so = json_object_get_int64(v);
		if (json_object_object_get_ex(status, "stderr_bytes", &v))
			se = json_object_get_int64(v);
		snprintf(msg, sizeof(msg), "running; %lld bytes of stdout and "
		    "%lld of stderr so far (vm_job_output reads them)",
		    (long long)so, (long long)se);
		r = task_base(id, "working", started, started, msg);
	} else
		r = task_base(id, "cancelled", started, finished != NULL ?
		    finished : started, "the job was cancelled");
	*out = mcp_stateless_meta(r);
	return 0;
}

struct json_object *
task_completed(const struct task_id *t, struct json_object *status,
    struct json_object *output)
{
	struct json_object *r, *res, *o, *v;
	struct backend_result br = { .ok = 1 };
	const char *started, *finished;
	char id[TASK_ID_MAX + 1];

	started = str_member(status, "started_at");
	finished = str_member(status, "finished_at");
	if (started == NULL)
		started = "1970-01-01T00:00:00Z";
	/* vm_exec's result as its wait_seconds gives it once the job ended. */
	o = json_object_get(output);
	json_object_object_del(o, "vm_id");
	res = json_object_new_object();
	json_object_object_add(res, "vm_id", json_object_new_string(t->vm_id));
	json_object_object_add(res, "job_id",
	    json_object_new_string(t->job_id));
	json_object_object_add(res, "request_id",
	    json_object_new_string(t->request_id));
	v = NULL;
	json_object_object_get_ex(o, "state", &v);
	json_object_object_add(res, "state", json_object_get(v));
	json_object_object_add(res, "started_at",
	    json_object_new_string(started));
	v = NULL;
	json_object_object_get_ex(o, "exit_code", &v);
	json_object_object_add(res, "exit_code", json_object_get(v));
	json_object_object_add(res, "output", o);
	br.result = res;

	task_id_string(t, id, sizeof(id));
	r = task_base(id, "completed", started, finished != NULL ? finished :
	    started, "the job ended; the rest of its output: vm_job_output "
	    "from output.next_cursor");
	json_object_object_add(r, "result", mcp_tool_result_stateless(&br));
	json_object_put(res);
	return mcp_stateless_meta(r);
}

struct json_object *
task_run_created(const char *request_id, long long created_ms,
    const char *status)
{
	struct json_object *r;
	char id[TASK_ID_MAX + 1], when[32];
	time_t sec = (time_t)(created_ms / 1000);
	struct tm tm;

	if (task_run_id_format(request_id, id, sizeof(id)) == -1 ||
	    gmtime_r(&sec, &tm) == NULL)
		return NULL;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	r = task_base(id, status, when, when, strcmp(status, "working") == 0 ?
	    "vm_run is making its VM; tasks/get tells when the command runs, "
	    "and where" : "the run had ended; tasks/get gives its result");
	json_object_object_add(r, "resultType", json_object_new_string("task"));
	return mcp_stateless_meta(r);
}

/* A running run's status line: where to page its output so far. */
static void
run_message(struct json_object *look, char *buf, size_t len)
{
	struct json_object *st, *v;
	const char *vm = str_member(look, "vm_id");
	const char *job = str_member(look, "job_id");
	int64_t so = 0, se = 0;

	if (json_object_object_get_ex(look, "status", &st)) {
		if (json_object_object_get_ex(st, "stdout_bytes", &v))
			so = json_object_get_int64(v);
		if (json_object_object_get_ex(st, "stderr_bytes", &v))
			se = json_object_get_int64(v);
	}
	if (vm == NULL || job == NULL)
		snprintf(buf, len, "the command is starting");
	else
		snprintf(buf, len, "running in VM %s as job %s; %lld bytes of "
		    "stdout and %lld of stderr so far (vm_job_output with this "
		    "vm_id and job_id reads them)", vm, job, (long long)so,
		    (long long)se);
}

struct json_object *
task_run_get(const struct task_id *t, struct json_object *look)
{
	struct json_object *r, *v, *res;
	struct backend_result br = { 0 };
	const char *state, *created, *finished, *rs;
	char id[TASK_ID_MAX + 1], msg[400];

	state = str_member(look, "state");
	if ((created = str_member(look, "created_at")) == NULL)
		created = "1970-01-01T00:00:00Z";
	if ((finished = str_member(look, "finished_at")) == NULL)
		finished = created;
	task_id_string(t, id, sizeof(id));
	if (state == NULL)
		return NULL;
	if (strcmp(state, "starting") == 0)
		r = task_base(id, "working", created, created, "vm_run is "
		    "making its VM");
	else if (strcmp(state, "running") == 0) {
		run_message(look, msg, sizeof(msg));
		r = task_base(id, "working", created, created, msg);
	} else if (strcmp(state, "ending") == 0)
		r = task_base(id, "working", created, created, "the command "
		    "ended; vm_run is committing or destroying its VM");
	else if (strcmp(state, "uncertain") == 0) {
		/* No tool result to give: the extension's failed task, with
		 * the error inlined. */
		static const char why[] = "vmmd stopped while this vm_run was "
		    "under way: its outcome is unknown, and it is not run "
		    "again";

		r = task_base(id, "failed", created, finished, why);
		v = json_object_new_object();
		json_object_object_add(v, "code",
		    json_object_new_int(JSONRPC_INTERNAL_ERROR));
		json_object_object_add(v, "message",
		    json_object_new_string(why));
		json_object_object_add(r, "error", v);
	} else if (strcmp(state, "ended") == 0 &&
	    json_object_object_get_ex(look, "result", &res) &&
	    json_object_is_type(res, json_type_object)) {
		rs = str_member(res, "state");
		if (rs != NULL && strcmp(rs, "cancelled") == 0)
			return mcp_stateless_meta(task_base(id, "cancelled",
			    created, finished, "the command was cancelled; "
			    "its VM is destroyed"));
		br.ok = 1;
		br.result = res;
		r = task_base(id, "completed", created, finished, "the "
		    "command ended; its VM is destroyed");
		json_object_object_add(r, "result",
		    mcp_tool_result_stateless(&br));
	} else if (strcmp(state, "ended") == 0 &&
	    json_object_object_get_ex(look, "error", &v) &&
	    (br.code = str_member(v, "code")) != NULL &&
	    (br.message = str_member(v, "message")) != NULL) {
		/* vm_run answered with its error: a tool error, which the
		 * extension reports as completed with isError. */
		r = task_base(id, "completed", created, finished, br.message);
		json_object_object_add(r, "result",
		    mcp_tool_result_stateless(&br));
	} else
		return NULL;
	return mcp_stateless_meta(r);
}

struct json_object *
task_ack(void)
{
	return mcp_stateless_meta(json_object_new_object());
}
