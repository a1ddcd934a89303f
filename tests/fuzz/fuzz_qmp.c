/*
 * libFuzzer target for vmmd's QMP parser: whatever a broken or hostile
 * QEMU writes on its monitor socket, one line at a time.
 */
#include <stddef.h>
#include <stdint.h>

#include "qmp.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct qmp_msg m;
	char err[256];

	if (qmp_parse((const char *)data, len, &m, err, sizeof(err)) == 0) {
		/* Touch what a caller would read. */
		if (m.kind == QMP_ERROR && (m.err_class == NULL ||
		    m.err_desc == NULL))
			__builtin_trap();
		if (m.kind == QMP_EVENT && m.event == NULL)
			__builtin_trap();
		qmp_msg_free(&m);
	}
	return 0;
}
