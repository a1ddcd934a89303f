/*
 * The tool catalogue mcpd serves in tools/list and checks tool calls
 * against, before forwarding them to the backend.
 */
#ifndef MCPD_TOOLS_H
#define MCPD_TOOLS_H

#include <stddef.h>
#include <json-c/json.h>

/* Loads the catalogue; 0, or -1 if it is malformed (a build error). */
int	tools_init(void);
void	tools_free(void);
/* The "tools" array of a tools/list result (borrowed). */
struct json_object *tools_list(void);
/* 1 if name is a tool, else 0. */
int	tools_exists(const char *name);
/*
 * Checks args against the tool's inputSchema: 0, or -1 with a message
 * naming the offending argument in msg.
 */
int	tools_validate_args(const char *name, struct json_object *args,
	    char *msg, size_t msglen);

#endif
