/*
 * libFuzzer target for vmmd's decoders (vmmd/decode.c): a frame body as
 * mcpd, vmctl (on vmctl.sock or approvals.sock) or vmproxy could send it goes through the socket's JSON
 * check (ipc_frame_check) and then every decoder of vmmd's, each of which
 * must turn away another peer's types.  The first byte picks the message
 * type, its index in rules[] modulo their number (and, for vmproxy's QEMU
 * results, which operation the result answers: the quotient).  Whatever a decoder accepts must satisfy
 * what the handlers rely on, and every refusal must say why; anything
 * else aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "decode.h"
#include "ipc.h"
#include "schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define MAX_STREAMS	4

static const struct ipc_rule rules[] = {
	{ IPC_VM_TOOL, 0 }, { IPC_VM_CANCEL, 0 }, { IPC_VM_STREAM_OPEN, 0 },
	{ IPC_VM_STATS, 0 },
	{ IPC_VMCTL_LIST, 0 }, { IPC_VMCTL_STATUS, 0 },
	{ IPC_VMCTL_DESTROY, 0 }, { IPC_VMCTL_SUSPEND, 0 },
	{ IPC_VMCTL_RESUME, 0 }, { IPC_VMCTL_STOP_WORKSPACE, 0 },
	{ IPC_VMCTL_PREFLIGHT, 0 }, { IPC_VMCTL_AUDIT_VERIFY, 0 },
	/* vmproxy's unasked messages, one type each. */
	{ IPC_PROXY_GUEST_HELLO, 0 }, { IPC_PROXY_LINK_DOWN, 0 },
	{ IPC_PROXY_STREAMS, 0 }, { IPC_PROXY_GUEST_ERROR, 0 },
	{ IPC_PROXY_QMP_EVENT, 0 }, { IPC_PROXY_QMP_LOST, 0 },
	/* Types of the other peers, which every decoder must turn away. */
	{ IPC_HELLO, 0 }, { IPC_PROXY_RESULT, 0 }, { IPC_VMCTL_RESULT, 0 },
	/* vmproxy's answer to a QEMU operation. */
	{ IPC_PROXY_QMP_RESULT, 0 },
	{ IPC_VM_BROKER_OPEN, 0 },
	/* Last, so that the corpus's first bytes keep their types. */
	{ IPC_VMCTL_SNAPSHOTS, 0 }, { IPC_VMCTL_SNAPSHOT_DELETE, 0 },
	/* approvals.sock's (issue #28). */
	{ IPC_APPROVAL_LIST, 0 }, { IPC_APPROVAL_SHOW, 0 },
	{ IPC_APPROVAL_DECIDE, 0 },
};
static const struct ipc_policy policy = { "fuzz", rules,
	sizeof(rules) / sizeof(rules[0]) };

static void
verdict_ok(enum decode_verdict v, const struct decode_err *e)
{
	if (v == DECODE_REFUSE && (e->code == NULL || e->msg[0] == '\0'))
		abort();
	if (v == DECODE_BAD && e->msg[0] == '\0')
		abort();
}

static void
check_mcpd(uint32_t type, struct json_object *body)
{
	struct mcpd_msg m;
	struct decode_err e;
	enum decode_verdict v = decode_mcpd(type, body, &m, &e);

	verdict_ok(v, &e);
	if (v != DECODE_OK)
		return;
	if (m.type != type)
		abort();
	switch (type) {
	case IPC_VM_TOOL:
		if (m.credential == NULL || strlen(m.credential) >
		    DECODE_CREDENTIAL_MAX || m.tool == NULL ||
		    tools_find(m.tool) == NULL || m.args == NULL ||
		    !json_object_is_type(m.args, json_type_object) ||
		    (m.progress != 0 && m.progress != 1))
			abort();
		/* A task question is only of a vm_run, get or cancel. */
		if (m.task != NULL && (strcmp(m.tool, "vm_run") != 0 ||
		    (strcmp(m.task, "get") != 0 &&
		    strcmp(m.task, "cancel") != 0)))
			abort();
		break;
	case IPC_VM_STREAM_OPEN:
		if (m.credential == NULL || strlen(m.credential) >
		    DECODE_CREDENTIAL_MAX || m.vm_id == NULL ||
		    m.port < 1 || m.port > 65535)
			abort();
		break;
	case IPC_VM_BROKER_OPEN:
		/* Only a token of vm_exec's shape goes on to the handler. */
		if (m.credential == NULL || strlen(m.credential) >
		    DECODE_CREDENTIAL_MAX || m.vm_id == NULL ||
		    m.job_id == NULL || m.pipe_token == NULL ||
		    strlen(m.pipe_token) < 43 || strlen(m.pipe_token) > 128 ||
		    strlen(m.job_id) > 64 || strlen(m.vm_id) > 64)
			abort();
		break;
	case IPC_VM_CANCEL:
	case IPC_VM_STATS:
		break;
	default:
		abort();	/* another peer's type was accepted */
	}
}

static void
check_vmctl(uint32_t type, struct json_object *body)
{
	struct vmctl_msg m;
	struct decode_err e;
	enum decode_verdict v = decode_vmctl(type, body, &m, &e);

	verdict_ok(v, &e);
	if (v != DECODE_OK)
		return;
	switch (type) {
	case IPC_VMCTL_STATUS:
	case IPC_VMCTL_DESTROY:
	case IPC_VMCTL_RESUME:
	case IPC_VMCTL_SUSPEND:
		if (m.vm_id == NULL || (m.pause != 0 && m.pause != 1))
			abort();
		break;
	case IPC_VMCTL_STOP_WORKSPACE:
		if (m.workspace == NULL)
			abort();
		break;
	case IPC_VMCTL_SNAPSHOT_DELETE:
		/* Named, and bounded as the handler's messages assume. */
		if (m.snapshot_id == NULL || strlen(m.snapshot_id) > 64)
			abort();
		break;
	case IPC_VMCTL_LIST:
	case IPC_VMCTL_SNAPSHOTS:
	case IPC_VMCTL_PREFLIGHT:
	case IPC_VMCTL_AUDIT_VERIFY:
		break;
	default:
		abort();
	}
}

static void
check_proxy(uint32_t type, struct json_object *body)
{
	struct vmproxy_msg m;
	struct decode_err e;
	enum decode_verdict v = decode_vmproxy(type, body, MAX_STREAMS, &m,
	    &e);

	verdict_ok(v, &e);
	if (v == DECODE_REFUSE)
		abort();	/* vmproxy is never argued with */
	if (v != DECODE_OK)
		return;
	if (m.type != type)
		abort();
	if (m.guest != NULL && (type != IPC_PROXY_GUEST_HELLO ||
	    !json_object_is_type(m.guest, json_type_object)))
		abort();
	switch (type) {
	case IPC_PROXY_STREAMS:
		if (m.open < 0 || m.open > MAX_STREAMS || m.pipes < 0 ||
		    m.pipes > DECODE_MAX_PIPES)
			abort();
		break;
	case IPC_PROXY_QMP_EVENT:
		if ((int)m.qmp_event < 0 || m.qmp_event >= VMQV_COUNT)
			abort();
		break;
	case IPC_PROXY_QMP_LOST:
		if (m.message == NULL || !vmq_clean(m.message))
			abort();
		break;
	case IPC_PROXY_GUEST_HELLO:
	case IPC_PROXY_LINK_DOWN:
	case IPC_PROXY_GUEST_ERROR:
		break;
	default:
		abort();	/* another peer's type was accepted */
	}
}

/* approvals.sock: an id of exactly a proposal's shape, a bounded
 * envelope; nothing of another socket's. */
static void
check_approval(uint32_t type, struct json_object *body)
{
	struct approval_msg m;
	struct decode_err e;
	enum decode_verdict v = decode_approval(type, body, &m, &e);

	verdict_ok(v, &e);
	if (v != DECODE_OK)
		return;
	if (m.type != type)
		abort();
	switch (type) {
	case IPC_APPROVAL_DECIDE:
		if (m.envelope == NULL || m.envelope_len == 0 ||
		    m.envelope_len > DECODE_ENVELOPE_B64_MAX ||
		    strlen(m.envelope) != m.envelope_len)
			abort();
		/* FALLTHROUGH */
	case IPC_APPROVAL_SHOW:
		if (m.id == NULL || strlen(m.id) != DECODE_PROPOSAL_ID_LEN ||
		    m.id[0] != 'p' || strspn(m.id + 1, "0123456789abcdef") !=
		    DECODE_PROPOSAL_ID_LEN - 1)
			abort();
		break;
	case IPC_APPROVAL_LIST:
		if (m.id != NULL || m.envelope != NULL)
			abort();
		break;
	default:
		abort();	/* another socket's type was accepted */
	}
}

/* What the QEMU backend relies on in a result it is handed. */
static void
check_qmp_result(enum vmq_op op, struct json_object *body)
{
	struct vmq_result r;
	struct decode_err e;
	enum decode_verdict v = decode_proxy_qmp_result(op, body, &r, &e);

	verdict_ok(v, &e);
	if (v == DECODE_REFUSE)
		abort();
	if (v != DECODE_OK)
		return;
	if ((r.ok != 0 && r.ok != 1) || (int)r.err < 0 ||
	    r.err >= VMQE_COUNT || (r.ok == (r.err != VMQE_NONE)) ||
	    (int)r.status < 0 || r.status >= VMQR_COUNT ||
	    (int)r.mig < 0 || r.mig >= VMQM_COUNT ||
	    (r.running != 0 && r.running != 1) ||
	    memchr(r.msg, '\0', sizeof(r.msg)) == NULL || !vmq_clean(r.msg))
		abort();
	/* A run state exactly from a query_status that worked. */
	if ((r.status != VMQR_NONE) != (op == VMQ_QUERY_STATUS && r.ok))
		abort();
	if (r.mig != VMQM_NONE && (op != VMQ_QUERY_MIGRATE || !r.ok))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *body = NULL;
	struct ipc_frame f;
	char *payload, err[256];

	if (size < 1 || size > 65536)
		return 0;
	payload = malloc(size);
	memcpy(payload, data + 1, size - 1);
	payload[size - 1] = '\0';
	memset(&f, 0, sizeof(f));
	f.type = rules[data[0] % policy.nrules].type;
	f.id = 1;
	f.payload = payload;
	f.len = size - 1;
	f.fd = -1;
	if (ipc_frame_check(&f, &policy, &body, NULL, err,
	    sizeof(err)) == 0) {
		check_mcpd(f.type, body);
		check_vmctl(f.type, body);
		check_proxy(f.type, body);
		check_approval(f.type, body);
		if (f.type == IPC_PROXY_QMP_RESULT)
			check_qmp_result((enum vmq_op)(data[0] / policy.nrules %
			    VMQ_OP_COUNT), body);
		json_object_put(body);
	}
	free(payload);
	return 0;
}
