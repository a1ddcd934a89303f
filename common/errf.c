/*
 * errf (errf.h): run in vmmd, its worker threads and vmproxy, so it keeps
 * no state.
 */
#include <stdarg.h>
#include <stdio.h>

#include "errf.h"

int
errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}
