/*
 * libFuzzer target for vmproxy's QMP side: whatever a broken or hostile
 * QEMU writes on its monitor socket, one line at a time, through the
 * parser (qmp.c) and, for an answer, through the shaping into the typed
 * result vmproxy hands vmmd (vmproxy_qmp.c) for every operation.  That
 * result, as vmproxy encodes it, must be one that vmmd's decoder
 * (decode.c) accepts as it stands: vmproxy never says anything vmmd
 * would take for a compromised proxy, and only vmqmp.h's names and short
 * printable text cross.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include "decode.h"
#include "qmp.h"
#include "vmproxy_qmp.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check_result(enum vmq_op op, const struct qmp_reply *r)
{
	struct vmq_result res, back;
	struct decode_err de;
	struct json_object *b;

	vmq_from_qmp(op, r, &res);
	if ((res.ok != 0 && res.ok != 1) || res.ok == (res.err != VMQE_NONE) ||
	    (int)res.err < 0 || res.err >= VMQE_COUNT ||
	    (int)res.status < 0 || res.status >= VMQR_COUNT ||
	    (int)res.mig < 0 || res.mig >= VMQM_COUNT ||
	    memchr(res.msg, '\0', sizeof(res.msg)) == NULL ||
	    !vmq_clean(res.msg))
		__builtin_trap();
	b = vmq_result_json(&res);
	if (decode_proxy_qmp_result(op, b, &back, &de) != DECODE_OK ||
	    back.ok != res.ok || back.err != res.err ||
	    back.status != res.status || back.running != res.running ||
	    back.mig != res.mig || strcmp(back.msg, res.msg) != 0)
		__builtin_trap();
	json_object_put(b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct qmp_msg m;
	struct qmp_reply r;
	char err[256];
	int op;

	if (qmp_parse((const char *)data, len, &m, err, sizeof(err)) == 0) {
		/* Touch what a caller would read. */
		if (m.kind == QMP_ERROR && (m.err_class == NULL ||
		    m.err_desc == NULL))
			__builtin_trap();
		if (m.kind == QMP_EVENT && m.event == NULL)
			__builtin_trap();
		if (m.kind == QMP_RETURN || m.kind == QMP_ERROR) {
			memset(&r, 0, sizeof(r));
			r.ok = m.kind == QMP_RETURN;
			r.ret = m.ret;
			r.err_class = m.err_class;
			r.err_desc = m.err_desc;
			for (op = 0; op < VMQ_OP_COUNT; op++)
				check_result((enum vmq_op)op, &r);
		}
		qmp_msg_free(&m);
	}
	return 0;
}
