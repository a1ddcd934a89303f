/*
 * admit.c: whether the host and the workspace have room for what a
 * request asks: a VM (vm_admit), n VMs at once (vm_admit_n), or a
 * snapshot of bytes more, counted against max_snapshots_per_workspace or
 * not (snap_admit).  0, or -1 with the public error code and a message.
 */
#ifndef MCPVM_VMMD_ADMIT_H
#define MCPVM_VMMD_ADMIT_H

#include <stddef.h>

struct conf_image;
struct request;

int	vm_admit(const struct request *, const struct conf_image *,
	    int vcpus, int memory_mib, char *code, size_t, char *msg, size_t);
int	vm_admit_n(const struct request *, const struct conf_image *,
	    int vcpus, int memory_mib, int n, char *code, size_t, char *msg,
	    size_t);
int	snap_admit(const struct request *, long long bytes, int counted,
	    char *code, size_t codelen, char *msg, size_t msglen);

#endif
