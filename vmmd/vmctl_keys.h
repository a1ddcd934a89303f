/*
 * vmctl approver-key init|enroll|revoke (vmctl_keys.c) and vmctl
 * approval list|show|approve|deny (vmctl_approval.c).
 */
#ifndef MCPVM_VMCTL_KEYS_H
#define MCPVM_VMCTL_KEYS_H

#include <stddef.h>

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
