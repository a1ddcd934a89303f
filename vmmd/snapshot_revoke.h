/*
 * snapshot_revoke.c: a workspace's snapshots go with it.  The event and
 * subscription callbacks of vmmd's authclient (vmmd.c registers them);
 * and, from snap_finished (snapshot.c), 1 when r became ready after its
 * workspace was revoked (and is now deleted, audited), else 0.
 */
#ifndef MCPVM_VMMD_SNAPSHOT_REVOKE_H
#define MCPVM_VMMD_SNAPSHOT_REVOKE_H

struct snap_record;

void	snap_revoke_event(const char *ws, const char *credential_id,
	    const char *reason, void *arg);
void	snap_revoke_subscribed(void *arg);
int	snap_revoke_made(const struct snap_record *r);

#endif
