/*
 * vmctl approver-key init|enroll|revoke (vmctl_keys.c).
 */
#ifndef MCPVM_VMCTL_KEYS_H
#define MCPVM_VMCTL_KEYS_H

/*
 * argv[0] is "approver-key".  Returns vmctl's exit status, or -1 for a
 * usage error.
 */
int	vmctl_approver_key(int argc, char **argv, const char *out,
	    const char *conf_path);

#endif
