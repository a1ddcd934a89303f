/*
 * libFuzzer target for vmproxy's decoders of what vmmd sends
 * (vmproxy/vmproxy_decode.c): a frame body goes through the socket's JSON
 * check (ipc_frame_check) and then the decoder of its type, which the
 * first byte picks.  What a decoder accepts must satisfy what vmproxy's
 * handlers rely on, and every refusal must say why; anything else aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "glink.h"
#include "guest.h"
#include "ipc.h"
#include "vmproxy_decode.h"
#include "vmqmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const struct ipc_rule rules[] = {
	{ IPC_PROXY_CALL, 0 }, { IPC_PROXY_STREAM_OPEN, 0 },
	{ IPC_PROXY_QMP, IPC_RULE_FD },
};
static const struct ipc_policy policy = { "fuzz", rules,
	sizeof(rules) / sizeof(rules[0]) };

/* Members the host keeps: never in the guest's request. */
static const char *const host_only[] = { "stdin_base64", "data_base64",
	"cursor", "encoding", "offset", "id", NULL };

static void
check_call(const struct vmmd_msg *m)
{
	const struct guest_call *c = &m->call;
	struct json_object *op;

	if (m->type != IPC_PROXY_CALL || (unsigned)c->op >= GOP_COUNT ||
	    m->request == NULL || c->path == NULL)
		abort();
	if (!json_object_object_get_ex(m->request, "op", &op) ||
	    !json_object_is_type(op, json_type_string))
		abort();
	for (size_t i = 0; host_only[i] != NULL; i++)
		if (json_object_object_get_ex(m->request, host_only[i], NULL))
			abort();
	if (c->op == GOP_FILE_READ && json_object_object_get_ex(m->request,
	    "max_bytes", NULL))
		abort();
	if (c->cursor_stdout < 0 || c->cursor_stdout > GUEST_CURSOR_MAX ||
	    c->cursor_stderr < 0 || c->cursor_stderr > GUEST_CURSOR_MAX ||
	    c->offset < 0 || c->offset > GUEST_OFFSET_MAX ||
	    c->max_bytes < 1 || c->max_bytes > GUEST_MAX_FILE ||
	    (c->base64 != 0 && c->base64 != 1))
		abort();
	if (m->body_len > 0 && m->body == NULL)
		abort();
	if (m->body_len > (c->op == GOP_EXEC ? GLINK_MAX_BODY : GUEST_MAX_FILE))
		abort();
	if (m->body_len > 0 && c->op != GOP_EXEC && c->op != GOP_FILE_WRITE)
		abort();
	/* identity goes to the guest only in the forms guestd takes. */
	if (c->op == GOP_IDENTITY) {
		uint8_t ent[GUEST_ENTROPY_BYTES];
		struct json_object *net;
		struct glink_net gn;
		char gerr[160];
		const char *b64 = json_object_get_string(json_object_object_get(
		    m->request, "entropy_b64"));

		if (c->boot_id == NULL || !glink_valid_uuid(c->boot_id) ||
		    !glink_valid_machine_id(json_object_get_string(
		    json_object_object_get(m->request, "machine_id"))) ||
		    !glink_valid_hostname(json_object_get_string(
		    json_object_object_get(m->request, "hostname"))) ||
		    b64 == NULL || glink_b64_exact(b64, strlen(b64), ent,
		    sizeof(ent)) != 0)
			abort();
		/* A net member goes only as guestd decodes it. */
		if (json_object_object_get_ex(m->request, "net", &net) &&
		    glink_net_decode(net, &gn, gerr, sizeof(gerr)) != 0)
			abort();
	}
	(void)json_object_to_json_string(m->request);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *body = NULL;
	struct vmmd_msg m;
	struct decode_err e;
	struct ipc_frame f;
	enum decode_verdict v;
	char *payload, err[256];

	if (size < 1 || size > 262144)
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
	if (ipc_frame_check(&f, &policy, &body, NULL, err, sizeof(err)) == 0) {
		memset(&e, 0, sizeof(e));
		if (f.type == IPC_PROXY_CALL)
			v = vmproxy_decode_call(body, &m, &e);
		else if (f.type == IPC_PROXY_QMP)
			v = vmproxy_decode_qmp(body, &m, &e);
		else
			v = vmproxy_decode_stream_open(body, &m, &e);
		switch (v) {
		case DECODE_OK:
			if (f.type == IPC_PROXY_CALL)
				check_call(&m);
			else if (f.type == IPC_PROXY_QMP) {
				if (m.type != IPC_PROXY_QMP || m.qmp_op < 0 ||
				    m.qmp_op >= VMQ_OP_COUNT ||
				    m.qmp_timeout_ms < VMQ_TIMEOUT_MIN ||
				    m.qmp_timeout_ms > VMQ_TIMEOUT_MAX)
					abort();
			} else if (m.port < 1 || m.port > 65535 ||
			    m.type != IPC_PROXY_STREAM_OPEN)
				abort();
			break;
		case DECODE_REFUSE:
			if (e.code == NULL || e.msg[0] == '\0')
				abort();
			break;
		case DECODE_BAD:
			if (e.msg[0] == '\0')
				abort();
			break;
		}
		vmmd_msg_clear(&m);
		json_object_put(body);
	}
	free(payload);
	return 0;
}
