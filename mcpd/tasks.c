/*
 * MCP tasks for mcpd; see tasks.h.  The task id comes back from clients:
 * it is parsed as strictly as the tool arguments it stands for, and a
 * malformed one is simply a task that does not exist.
 */
#include <stdio.h>
#include <string.h>

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
	snprintf(id, sizeof(id), "%s.%s.%s", t->vm_id, t->job_id,
	    t->request_id);
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

	snprintf(id, sizeof(id), "%s.%s.%s", t->vm_id, t->job_id,
	    t->request_id);
	r = task_base(id, "completed", started, finished != NULL ? finished :
	    started, "the job ended; the rest of its output: vm_job_output "
	    "from output.next_cursor");
	json_object_object_add(r, "result", mcp_tool_result_stateless(&br));
	json_object_put(res);
	return mcp_stateless_meta(r);
}

struct json_object *
task_ack(void)
{
	return mcp_stateless_meta(json_object_new_object());
}
