/*
 * The one way a decoder states its verdict (verdict.h); used by vmmd's
 * and vmproxy's decoders alike.  Pure: no state.
 */
#include <stdarg.h>
#include <stdio.h>

#include "verdict.h"

enum decode_verdict
verdict(struct decode_err *e, enum decode_verdict v, const char *code,
    const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return v;
}
