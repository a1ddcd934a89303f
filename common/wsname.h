/*
 * A workspace's name, as authd issues it: [a-z0-9-]{1,63}.  One rule for
 * every process that is handed one: authd when authctl names it, vmmd
 * when it asks authd about the owners of its snapshots.
 */
#ifndef MCPVM_WSNAME_H
#define MCPVM_WSNAME_H

#include <stddef.h>

#define WSNAME_MAX	63

/* 1 if id is a workspace name; else 0 and why says what is wrong. */
int	workspace_id_valid(const char *id, char *why, size_t whylen);

#endif
