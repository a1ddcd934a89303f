/*
 * proto/tools.json as it was when this binary was built, so mcpd and vmmd
 * always validate against the schemas they were built with.  The bytes are
 * generated into tools_json.c by proto/toolsgen.py; they are not
 * NUL-terminated.
 */
#ifndef MCPVM_TOOLS_JSON_H
#define MCPVM_TOOLS_JSON_H

#include <stddef.h>

extern const unsigned char	mcpvm_tools_json[];
extern const size_t		mcpvm_tools_json_len;

#endif
