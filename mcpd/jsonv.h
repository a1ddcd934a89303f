/*
 * Strict RFC 8259 syntax check for mcpd, run on every request body before
 * json-c builds objects from it: json-c also accepts single quotes and
 * other extensions that no client should rely on.
 */
#ifndef MCPD_JSONV_H
#define MCPD_JSONV_H

#include <stddef.h>

#define JSONV_MAX_DEPTH	64

/*
 * 0 if buf holds exactly one JSON value (surrounded by optional
 * whitespace), else -1 with *why naming the problem and *off its byte.
 * Strings must be valid UTF-8 and \u escapes paired surrogates.
 */
int	jsonv_check(const char *buf, size_t len, const char **why,
	    size_t *off);

#endif
