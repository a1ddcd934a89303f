/*
 * vmmd's warm pool (warmpool.c): ready memory snapshots of idle VMs of
 * each image at the default size, network off and (while netd works)
 * network on, which a plain vm_create restores instead of booting.
 * Private to vmmd's daemon.
 */
#ifndef VMMD_WARMPOOL_H
#define VMMD_WARMPOOL_H

#include "vmmd_shared.h"

/* POOL_WORKSPACE and warmpool_is_pool are in vmmd_shared.h. */

/* At startup, after snap_init and vm_init_all: see warmpool.c. */
void	warmpool_init(void);
/*
 * A ready pool snapshot for a vm_create of im at this size and network
 * (a network-on one has a NIC; the VM gets its own slot) into *r, taken
 * for one use (the caller deletes it once the VM is up, either
 * way); -1 when there is none and the VM cold-boots.  The pool refills
 * after warmpool_used.
 */
int	warmpool_take(const struct conf_image *im, int vcpus, int memory_mib,
	    int network, struct snap_record *r);
/* A VM taken from im's pool (of that network) is up or has failed: the
 * pool refills once no other restore from it is under way. */
void	warmpool_used(const struct conf_image *im, int network);
/* vmmd stops (after the tenants' VMs are being hibernated): the pool
 * builds no more, and its VMs, booting or being snapshotted, are
 * destroyed rather than waited for. */
void	warmpool_shutdown(void);
#endif
