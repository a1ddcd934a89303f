/*
 * vmctl approver-key init|enroll|revoke (vmctl_keys.c) and vmctl
 * approval list|show|approve|deny (vmctl_approval.c).
 */
#ifndef MCPVM_VMCTL_KEYS_H
#define MCPVM_VMCTL_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct json_object;

/* o[key] as text, or "-" when it is absent or null (vmctl.c). */
const char *vmctl_str(struct json_object *o, const char *key);

/*
 * One call to vmmd on sock (vmctl.c): 0 with *reply and its "result" in
 * *res; 1 when vmmd refused (its error on stderr, or as JSON on stdout
 * with as_json); 3 when it could not be reached or would not admit us
 * (admits: who it admits besides root, for that message).  The caller
 * puts *reply.
 */
int	vmctl_call(const char *sock, const char *admits, uint32_t type,
	    struct json_object *req, int as_json, int timeout_ms,
	    struct json_object **reply, struct json_object **res);

/*
 * s for a person (vmctl_approval.c): control characters and Unicode
 * direction overrides escaped as \xNN and \u{NNNN}, newline and tab kept
 * when keep_nl.
 */
void	vmctl_put_safe(FILE *f, const char *s, int keep_nl);

/*
 * argv[0] is "approver-key".  Returns vmctl's exit status, or -1 for a
 * usage error.
 */
int	vmctl_approver_key(int argc, char **argv, const char *out,
	    const char *conf_path);

/*
 * One line from the terminal tty, prompt shown and echo off: its length,
 * or -1 (unreadable, or longer than bufsz - 1).
 */
int	vmctl_ask(int tty, const char *prompt, char *buf, size_t bufsz);

/* ~/.config/mcpvm/approver.pem of the real uid (its directories made
 * when create): 0, or -1 having said why. */
int	vmctl_approver_key_path(char *path, size_t pathsz, int create);

/*
 * argv[0] is "approval"; sock NULL means the configuration's
 * approvals_socket, key NULL the default key.  Returns vmctl's exit
 * status, or -1 for a usage error.
 */
int	vmctl_approval(int argc, char **argv, const char *sock,
	    const char *conf_path, const char *key, int json_out);

#endif
