/*
 * vmmd's decoders for what mcpd, vmctl and vmproxy send (decode.h).
 * Each checks every member of its message: the type and bounds of the
 * ones it knows, and that there are no others.
 */
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "ipc.h"
#include "jsonx.h"
#include "schema.h"

/* Is every member of o one of names (NULL-terminated)?  *extra: the
 * first that is not. */
static int
only_members(struct json_object *o, const char *const *names,
    const char **extra)
{
	json_object_object_foreach(o, k, v) {
		size_t i;

		(void)v;
		for (i = 0; names[i] != NULL; i++)
			if (strcmp(k, names[i]) == 0)
				break;
		if (names[i] == NULL) {
			*extra = k;
			return 0;
		}
	}
	return 1;
}

static enum decode_verdict
decode_credential(struct json_object *body, const char **out,
    struct decode_err *e)
{
	struct jsonx_err jerr;

	if (jsonx_get_string(body, "credential", 1, out, &jerr) != 1)
		return verdict(e, DECODE_BAD, NULL, "%s", jerr.msg);
	/* Longer than any credential authd issues: refused unasked. */
	if (strlen(*out) > DECODE_CREDENTIAL_MAX)
		return verdict(e, DECODE_REFUSE, "unauthorized",
		    "the credential is not valid");
	return DECODE_OK;
}

enum decode_verdict
decode_mcpd(uint32_t type, struct json_object *body, struct mcpd_msg *m,
    struct decode_err *e)
{
	static const char *const tool_keys[] = { "credential", "tool",
	    "arguments", "progress", "task", NULL };
	static const char *const stream_keys[] = { "credential", "vm_id",
	    "port", NULL };
	static const char *const cancel_keys[] = { "id", NULL };
	static const char *const broker_keys[] = { "credential", "vm_id",
	    "job_id", "pipe_token", NULL };
	struct jsonx_err jerr;
	enum decode_verdict v;
	const char *extra = NULL;
	int64_t n;
	int rc;

	memset(m, 0, sizeof(*m));
	m->type = type;
	if (body == NULL || !json_object_is_type(body, json_type_object))
		return verdict(e, DECODE_BAD, NULL, "the body is no object");
	switch (type) {
	case IPC_VM_STATS:
		if (json_object_object_length(body) != 0)
			return verdict(e, DECODE_BAD, NULL, "stats takes no "
			    "members");
		return DECODE_OK;
	case IPC_VM_CANCEL:
		if (!only_members(body, cancel_keys, &extra))
			return verdict(e, DECODE_BAD, NULL, "cancel: unknown "
			    "member '%.64s'", extra);
		if ((rc = jsonx_get_int64(body, "id", 0, 0, UINT32_MAX, &n,
		    &jerr)) == -1)
			return verdict(e, DECODE_BAD, NULL, "%s", jerr.msg);
		if (rc == 1)
			m->cancel_id = (uint32_t)n;
		return DECODE_OK;
	case IPC_VM_TOOL:
		if (!only_members(body, tool_keys, &extra))
			return verdict(e, DECODE_BAD, NULL, "tool call: unknown "
			    "member '%.64s'", extra);
		if (jsonx_get_string(body, "tool", 1, &m->tool, &jerr) != 1 ||
		    jsonx_get_object(body, "arguments", 1, &m->args,
		    &jerr) != 1 ||
		    jsonx_get_bool(body, "progress", 0, &m->progress,
		    &jerr) == -1 ||
		    jsonx_get_string(body, "task", 0, &m->task, &jerr) == -1)
			return verdict(e, DECODE_BAD, NULL, "%s", jerr.msg);
		if (m->task != NULL && (strcmp(m->tool, "vm_run") != 0 ||
		    (strcmp(m->task, "get") != 0 &&
		    strcmp(m->task, "cancel") != 0)))
			return verdict(e, DECODE_BAD, NULL, "task: only "
			    "\"get\" or \"cancel\" of a vm_run");
		if ((v = decode_credential(body, &m->credential, e)) !=
		    DECODE_OK)
			return v;
		if (tools_find(m->tool) == NULL)
			return verdict(e, DECODE_REFUSE, "not_found", "there "
			    "is no tool '%.64s'", m->tool);
		return DECODE_OK;
	case IPC_VM_STREAM_OPEN:
		if ((v = decode_credential(body, &m->credential, e)) !=
		    DECODE_OK)
			return v;
		/* vm_id and port are the client's, from the URL: refused
		 * with a reason, not a broken mcpd. */
		if (!only_members(body, stream_keys, &extra))
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "stream_open takes vm_id and port, not "
			    "'%.64s'", extra);
		if (jsonx_get_string(body, "vm_id", 1, &m->vm_id, &jerr) != 1 ||
		    (rc = jsonx_get_int64(body, "port", 1, 1, 65535, &n,
		    &jerr)) != 1)
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "%s", jerr.msg);
		m->port = (int)n;
		return DECODE_OK;
	case IPC_VM_BROKER_OPEN:
		if ((v = decode_credential(body, &m->credential, e)) !=
		    DECODE_OK)
			return v;
		if (!only_members(body, broker_keys, &extra))
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "broker_open takes vm_id, job_id and pipe_token, "
			    "not '%.64s'", extra);
		if (jsonx_get_string(body, "vm_id", 1, &m->vm_id, &jerr) != 1 ||
		    jsonx_get_string(body, "job_id", 1, &m->job_id,
		    &jerr) != 1 ||
		    jsonx_get_string(body, "pipe_token", 1, &m->pipe_token,
		    &jerr) != 1)
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "%s", jerr.msg);
		/* A token of the wrong shape matches no pipe: not found. */
		if (strlen(m->pipe_token) < 43 || strlen(m->pipe_token) > 128 ||
		    strspn(m->pipe_token, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefgh"
		    "ijklmnopqrstuvwxyz0123456789_-") != strlen(m->pipe_token) ||
		    strlen(m->job_id) < 1 || strlen(m->job_id) > 64 ||
		    strlen(m->vm_id) < 1 || strlen(m->vm_id) > 64)
			return verdict(e, DECODE_REFUSE, "not_found",
			    "there is no such broker pipe");
		return DECODE_OK;
	}
	return verdict(e, DECODE_BAD, NULL, "message type %u is not mcpd's",
	    type);
}

enum decode_verdict
decode_vmctl(uint32_t type, struct json_object *body, struct vmctl_msg *m,
    struct decode_err *e)
{
	static const char *const none[] = { NULL };
	static const char *const list_keys[] = { "workspace", NULL };
	static const char *const vm_keys[] = { "vm_id", NULL };
	static const char *const suspend_keys[] = { "vm_id", "mode", NULL };
	static const char *const modes[] = { "hibernate", "pause", NULL };
	static const char *const snap_keys[] = { "snapshot_id", NULL };
	const char *const *keys;
	struct jsonx_err jerr;
	const char *extra = NULL;
	int mode = 0, rc = 1;

	memset(m, 0, sizeof(*m));
	m->type = type;
	if (body == NULL || !json_object_is_type(body, json_type_object))
		return verdict(e, DECODE_REFUSE, "invalid_argument",
		    "the request is no object");
	switch (type) {
	case IPC_VMCTL_LIST:
		keys = list_keys;
		rc = jsonx_get_string(body, "workspace", 0, &m->workspace,
		    &jerr);
		break;
	case IPC_VMCTL_SNAPSHOTS:
		keys = list_keys;
		rc = jsonx_get_string(body, "workspace", 0, &m->workspace,
		    &jerr);
		break;
	case IPC_VMCTL_SNAPSHOT_DELETE:
		keys = snap_keys;
		rc = jsonx_get_string(body, "snapshot_id", 1, &m->snapshot_id,
		    &jerr);
		if (rc == 1 && strlen(m->snapshot_id) > 64)
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "snapshot_id: over 64 characters");
		break;
	case IPC_VMCTL_STOP_WORKSPACE:
		keys = list_keys;
		rc = jsonx_get_string(body, "workspace", 1, &m->workspace,
		    &jerr);
		break;
	case IPC_VMCTL_STATUS:
	case IPC_VMCTL_DESTROY:
	case IPC_VMCTL_RESUME:
		keys = vm_keys;
		rc = jsonx_get_string(body, "vm_id", 1, &m->vm_id, &jerr);
		break;
	case IPC_VMCTL_SUSPEND:
		keys = suspend_keys;
		if ((rc = jsonx_get_string(body, "vm_id", 1, &m->vm_id,
		    &jerr)) == 1 &&
		    (rc = jsonx_get_enum(body, "mode", 0, modes, &mode,
		    &jerr)) >= 0) {
			m->pause = mode == 1;
			rc = 1;
		}
		break;
	case IPC_VMCTL_PREFLIGHT:
	case IPC_VMCTL_AUDIT_VERIFY:
		keys = none;
		break;
	default:
		return verdict(e, DECODE_BAD, NULL, "message type %u is not "
		    "vmctl's", type);
	}
	if (rc == -1 || (rc == 0 && (type == IPC_VMCTL_STOP_WORKSPACE ||
	    type == IPC_VMCTL_SNAPSHOT_DELETE)))
		return verdict(e, DECODE_REFUSE, "invalid_argument", "%s",
		    jerr.msg);
	if (!only_members(body, keys, &extra))
		return verdict(e, DECODE_REFUSE, "invalid_argument",
		    "unknown member '%.64s'", extra);
	return DECODE_OK;
}

enum decode_verdict
decode_approval(uint32_t type, struct json_object *body,
    struct approval_msg *m, struct decode_err *e)
{
	static const char *const none[] = { NULL };
	static const char *const show_keys[] = { "id", NULL };
	static const char *const decide_keys[] = { "id", "envelope", NULL };
	const char *const *keys;
	struct jsonx_err jerr;
	const char *extra = NULL;

	memset(m, 0, sizeof(*m));
	m->type = type;
	if (body == NULL || !json_object_is_type(body, json_type_object))
		return verdict(e, DECODE_REFUSE, "invalid_argument",
		    "the request is no object");
	switch (type) {
	case IPC_APPROVAL_LIST:
		keys = none;
		break;
	case IPC_APPROVAL_SHOW:
		keys = show_keys;
		break;
	case IPC_APPROVAL_DECIDE:
		keys = decide_keys;
		break;
	default:
		return verdict(e, DECODE_BAD, NULL, "message type %u is not "
		    "an approval request", type);
	}
	if (!only_members(body, keys, &extra))
		return verdict(e, DECODE_REFUSE, "invalid_argument",
		    "unknown member '%.64s'", extra);
	if (type == IPC_APPROVAL_LIST)
		return DECODE_OK;
	if (jsonx_get_string(body, "id", 1, &m->id, &jerr) != 1)
		return verdict(e, DECODE_REFUSE, "invalid_argument", "%s",
		    jerr.msg);
	if (strlen(m->id) != DECODE_PROPOSAL_ID_LEN || m->id[0] != 'p' ||
	    strspn(m->id + 1, "0123456789abcdef") !=
	    DECODE_PROPOSAL_ID_LEN - 1)
		return verdict(e, DECODE_REFUSE, "not_found", "there is no "
		    "proposal '%.64s' (ids are p and 32 hex digits)", m->id);
	if (type == IPC_APPROVAL_SHOW)
		return DECODE_OK;
	if (jsonx_get_string(body, "envelope", 1, &m->envelope, &jerr) != 1)
		return verdict(e, DECODE_REFUSE, "invalid_argument", "%s",
		    jerr.msg);
	m->envelope_len = strlen(m->envelope);
	if (m->envelope_len == 0 ||
	    m->envelope_len > DECODE_ENVELOPE_B64_MAX)
		return verdict(e, DECODE_REFUSE, "invalid_argument",
		    "envelope: 1 to %d characters of base64, not %zu",
		    DECODE_ENVELOPE_B64_MAX, m->envelope_len);
	return DECODE_OK;
}

/*
 * vmproxy's unasked messages.  decode_vmproxy checks that the body is an
 * object of no members but the type's keys; each type's decoder then
 * reads and bounds the values (link_down has none).
 */
static enum decode_verdict
decode_guest_hello(struct json_object *body, int max_streams,
    struct vmproxy_msg *m, struct decode_err *e)
{
	struct jsonx_err jerr;

	if (jsonx_get_object(body, "guest", 0, &m->guest, &jerr) == -1)
		return verdict(e, DECODE_BAD, NULL, "guest_hello: %s",
		    jerr.msg);
	return DECODE_OK;
}

static enum decode_verdict
decode_streams(struct json_object *body, int max_streams,
    struct vmproxy_msg *m, struct decode_err *e)
{
	struct jsonx_err jerr;
	int64_t n;

	/* vmproxy opens no more than vmmd let it: anything else is a
	 * proxy that the guest has taken over. */
	if (jsonx_get_int64(body, "open", 1, 0, max_streams, &n, &jerr) != 1)
		return verdict(e, DECODE_BAD, NULL, "streams: %s", jerr.msg);
	m->open = (int)n;
	n = 0;
	if (jsonx_get_int64(body, "pipes", 0, 0, DECODE_MAX_PIPES, &n,
	    &jerr) == -1)
		return verdict(e, DECODE_BAD, NULL, "streams: %s", jerr.msg);
	m->pipes = (int)n;
	return DECODE_OK;
}

static enum decode_verdict
decode_guest_error(struct json_object *body, int max_streams,
    struct vmproxy_msg *m, struct decode_err *e)
{
	struct jsonx_err jerr;

	if (jsonx_get_string(body, "message", 0, &m->message, &jerr) == -1)
		return verdict(e, DECODE_BAD, NULL, "guest_error: %s",
		    jerr.msg);
	return DECODE_OK;
}

static enum decode_verdict
decode_qmp_event(struct json_object *body, int max_streams,
    struct vmproxy_msg *m, struct decode_err *e)
{
	struct jsonx_err jerr;
	int n;

	if (jsonx_get_enum(body, "name", 1, vmq_event_names, &n, &jerr) != 1)
		return verdict(e, DECODE_BAD, NULL, "qmp_event: %s",
		    jerr.msg);
	m->qmp_event = (enum vmq_event)n;
	return DECODE_OK;
}

static enum decode_verdict
decode_qmp_lost(struct json_object *body, int max_streams,
    struct vmproxy_msg *m, struct decode_err *e)
{
	struct jsonx_err jerr;

	if (jsonx_get_string(body, "message", 1, &m->message, &jerr) != 1)
		return verdict(e, DECODE_BAD, NULL, "qmp_lost: %s", jerr.msg);
	if (!vmq_clean(m->message))
		return verdict(e, DECODE_BAD, NULL, "qmp_lost: the message is "
		    "not short printable text");
	return DECODE_OK;
}

/* Each type: its name for messages, its members, its decoder. */
static const struct {
	uint32_t		 type;
	const char		*name;
	const char		*keys[3];
	enum decode_verdict	(*decode)(struct json_object *, int,
				    struct vmproxy_msg *, struct decode_err *);
} vmproxy_decoders[] = {
	{ IPC_PROXY_GUEST_HELLO, "guest_hello", { "guest" },
	    decode_guest_hello },
	{ IPC_PROXY_LINK_DOWN, "link_down", { NULL }, NULL },
	{ IPC_PROXY_STREAMS, "streams", { "open", "pipes" }, decode_streams },
	{ IPC_PROXY_GUEST_ERROR, "guest_error", { "message" },
	    decode_guest_error },
	{ IPC_PROXY_QMP_EVENT, "qmp_event", { "name" }, decode_qmp_event },
	{ IPC_PROXY_QMP_LOST, "qmp_lost", { "message" }, decode_qmp_lost },
};

enum decode_verdict
decode_vmproxy(uint32_t type, struct json_object *body, int max_streams,
    struct vmproxy_msg *m, struct decode_err *e)
{
	const char *extra = NULL;
	size_t i, n = sizeof(vmproxy_decoders) / sizeof(vmproxy_decoders[0]);

	memset(m, 0, sizeof(*m));
	m->type = type;
	for (i = 0; i < n; i++)
		if (vmproxy_decoders[i].type == type)
			break;
	if (i == n)
		return verdict(e, DECODE_BAD, NULL, "message type %u is not "
		    "one vmproxy sends unasked", type);
	if (body == NULL || !json_object_is_type(body, json_type_object))
		return verdict(e, DECODE_BAD, NULL, "%s: the body is no object",
		    vmproxy_decoders[i].name);
	if (!only_members(body, vmproxy_decoders[i].keys, &extra))
		return verdict(e, DECODE_BAD, NULL, "%s: unknown member "
		    "'%.64s'", vmproxy_decoders[i].name, extra);
	if (vmproxy_decoders[i].decode == NULL)
		return DECODE_OK;
	return vmproxy_decoders[i].decode(body, max_streams, m, e);
}

enum decode_verdict
decode_proxy_qmp_result(enum vmq_op op, struct json_object *body,
    struct vmq_result *r, struct decode_err *e)
{
	static const char *const keys[] = { "ok", "error", "message",
	    "status", "running", "migration", NULL };
	struct jsonx_err jerr;
	const char *extra = NULL, *msg = NULL;
	int ok, n, has;

	memset(r, 0, sizeof(*r));
	if (body == NULL || !json_object_is_type(body, json_type_object))
		return verdict(e, DECODE_BAD, NULL, "qmp result: not an "
		    "object");
	if (!only_members(body, keys, &extra))
		return verdict(e, DECODE_BAD, NULL, "qmp result: unknown "
		    "member '%.64s'", extra);
	if (jsonx_get_bool(body, "ok", 1, &ok, &jerr) != 1)
		return verdict(e, DECODE_BAD, NULL, "qmp result: %s",
		    jerr.msg);
	r->ok = ok != 0;
	/* An error class exactly when it failed, and never "none". */
	if ((has = jsonx_get_enum(body, "error", 0, vmq_err_names, &n,
	    &jerr)) == -1)
		return verdict(e, DECODE_BAD, NULL, "qmp result: %s",
		    jerr.msg);
	if (r->ok ? has == 1 : has != 1 || n == VMQE_NONE)
		return verdict(e, DECODE_BAD, NULL, "qmp result: an error "
		    "class %s", r->ok ? "on success" : "missing");
	r->err = r->ok ? VMQE_NONE : (enum vmq_err)n;
	if (jsonx_get_string(body, "message", 0, &msg, &jerr) == -1)
		return verdict(e, DECODE_BAD, NULL, "qmp result: %s",
		    jerr.msg);
	if (msg != NULL) {
		if (!vmq_clean(msg))
			return verdict(e, DECODE_BAD, NULL, "qmp result: the "
			    "message is not short printable text");
		snprintf(r->msg, sizeof(r->msg), "%s", msg);
	}
	/* A run state only from query_status, a migration status only from
	 * query_migrate, and only on success. */
	if ((has = jsonx_get_enum(body, "status", 0, vmq_run_names, &n,
	    &jerr)) == -1)
		return verdict(e, DECODE_BAD, NULL, "qmp result: %s",
		    jerr.msg);
	if (has == 1 && (n == VMQR_NONE || op != VMQ_QUERY_STATUS || !r->ok))
		return verdict(e, DECODE_BAD, NULL, "qmp result: a run state "
		    "where none belongs");
	if (op == VMQ_QUERY_STATUS && r->ok && has != 1)
		return verdict(e, DECODE_BAD, NULL, "qmp result: "
		    "query_status without a run state");
	r->status = has == 1 ? (enum vmq_run)n : VMQR_NONE;
	if ((has = jsonx_get_bool(body, "running", 0, &ok, &jerr)) == -1)
		return verdict(e, DECODE_BAD, NULL, "qmp result: %s",
		    jerr.msg);
	if ((has == 1) != (r->status != VMQR_NONE))
		return verdict(e, DECODE_BAD, NULL, "qmp result: \"running\" "
		    "goes with a run state");
	r->running = has == 1 && ok;
	if ((has = jsonx_get_enum(body, "migration", 0, vmq_mig_names, &n,
	    &jerr)) == -1)
		return verdict(e, DECODE_BAD, NULL, "qmp result: %s",
		    jerr.msg);
	if (has == 1 && (n == VMQM_NONE || op != VMQ_QUERY_MIGRATE ||
	    !r->ok))
		return verdict(e, DECODE_BAD, NULL, "qmp result: a migration "
		    "status where none belongs");
	r->mig = has == 1 ? (enum vmq_mig)n : VMQM_NONE;
	return DECODE_OK;
}
