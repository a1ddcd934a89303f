/*
 * MCP tasks (the io.modelcontextprotocol/tasks extension of 2026-07-28) for
 * mcpd: a task-augmented vm_exec is its job, a task-augmented vm_run its
 * run.  The task id names them, so mcpd keeps nothing: every tasks/get
 * asks vmmd with the caller's credential.
 *
 *   vm_id "." job_id "." request_id	a vm_exec's job
 *   "run:" request_id			a vm_run's run, under way or ended
 *					(vmmd finds it by its request_id
 *					among the caller's workspace's runs
 *					and receipts; ':' is in no vm_id)
 *
 * No I/O here (tasks_http.c does it), so the id parser and the shapes are
 * unit tested and fuzzed with mcp.c.
 */
#ifndef MCPD_TASKS_H
#define MCPD_TASKS_H

#include <stddef.h>
#include <json-c/json.h>

#include "backend.h"

#define TASKS_EXTENSION		"io.modelcontextprotocol/tasks"
/* How often a client should ask, and how long a task lives (the job's VM). */
#define TASK_POLL_INTERVAL_MS	1000

/* The parts, as tools.json's patterns allow them. */
#define TASK_VM_ID_MAX		64
#define TASK_JOB_ID_MAX		64
#define TASK_REQUEST_ID_MAX	128
#define TASK_ID_MAX		(TASK_VM_ID_MAX + 1 + TASK_JOB_ID_MAX + 1 + \
				    TASK_REQUEST_ID_MAX)
#define TASK_RUN_PREFIX		"run:"
/* Tasks one subscriptions/listen stream follows for notifications/tasks. */
#define TASK_LISTEN_MAX		16

enum task_op {
	TASK_NONE = 0,
	TASK_GET,
	TASK_CANCEL,
	TASK_UPDATE,
};

struct task_id {
	char	vm_id[TASK_VM_ID_MAX + 1];	/* "" for a run */
	char	job_id[TASK_JOB_ID_MAX + 1];	/* "" for a run */
	char	request_id[TASK_REQUEST_ID_MAX + 1];
	int	run;				/* a vm_run's */
};

/*
 * A client's taskId, len bytes (not NUL-terminated, may hold NUL): 0 with
 * *t filled when it is vm_id "." job_id "." request_id or "run:"
 * request_id, each part within its length and alphabet; -1 otherwise (an
 * unknown task, to the client).
 */
int	task_id_parse(const char *s, size_t len, struct task_id *t);
/* The id of the job job_id that request_id started in vm_id; -1 if any
 * part could not be parsed back. */
int	task_id_format(const char *vm_id, const char *job_id,
	    const char *request_id, char *buf, size_t bufsz);
/* The id of the vm_run of request_id; -1 if it could not be parsed back. */
int	task_run_id_format(const char *request_id, char *buf, size_t bufsz);
/* t's id, as task_id_format or task_run_id_format wrote it. */
void	task_id_string(const struct task_id *t, char *buf, size_t bufsz);

/*
 * The CreateTaskResult for a vm_exec that started its job (br ok, its
 * result as vmmd gave it), with request_id from its arguments: a new
 * reference, or NULL when br is no started job (then the tool result is
 * the answer).
 */
struct json_object *task_created(const struct backend_result *br,
	    const char *request_id);

/*
 * tasks/get from vm_job_status's result: 1 when the job ended and its
 * output is needed for the answer (then *out is NULL), else 0 with *out
 * the whole GetTaskResult (working or cancelled).  -1 if status is not a
 * job status.
 */
int	task_from_status(const struct task_id *, struct json_object *status,
	    struct json_object **out);
/*
 * tasks/get of an ended job: the completed task inlining vm_exec's result
 * (what vm_exec with wait_seconds answers once the job ended), from
 * vm_job_status's and vm_job_output's results.
 */
struct json_object *task_completed(const struct task_id *,
	    struct json_object *status, struct json_object *output);
/*
 * The CreateTaskResult for a task-augmented vm_run that vmmd took on (its
 * first progress) at created_ms (wall clock): status working, or, for a
 * retry of a run that had ended, completed or cancelled (tasks/get gives
 * the result).  NULL if request_id makes no task id.
 */
struct json_object *task_run_created(const char *request_id,
	    long long created_ms, const char *status);
/*
 * tasks/get of a vm_run task from vmmd's answer about the run (run.c's
 * run_task): working while it starts, runs or ends; once ended, completed
 * with vm_run's result as a plain vm_run answers it (its error result,
 * isError, when vm_run failed), cancelled when the command was cancelled,
 * failed with an inlined error when its outcome is unknown (vmmd stopped
 * during it).  NULL if look is no such answer.
 */
struct json_object *task_run_get(const struct task_id *,
	    struct json_object *look);
/* The empty acknowledgement of tasks/cancel and tasks/update. */
struct json_object *task_ack(void);
/*
 * A backend's answer as an object, whichever form it came in: a new
 * reference, or NULL if it is not a JSON object.
 */
struct json_object *task_result_object(const struct backend_result *);

#endif
