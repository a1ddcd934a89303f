/*
 * An error message a person can act on, formatted into the caller's
 * buffer: the one helper vmmd's building blocks and vmproxy's QMP client
 * use for `return errf(err, errlen, "…")`.
 */
#ifndef MCPVM_ERRF_H
#define MCPVM_ERRF_H

#include <stddef.h>

/* Formats into err (may be NULL); always returns -1. */
int	errf(char *err, size_t errlen, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

#endif
