/*
 * vmmd: a snapshot goes with its workspace.  When authd revokes a whole
 * workspace, vmmd deletes its snapshots as vmctl snapshot-delete would
 * (snap_delete: renamed to <id>.del, row dropped, files removed on the
 * worker pool), each audited as "authd:revoke-workspace".  Events sent
 * while vmmd was down or away from authd are not replayed, so after
 * every subscription vmmd asks authd which owners of its snapshots were
 * revoked (IPC_AUTH_REVOKED) and deletes theirs the same way.
 *
 * A snapshot of such a workspace still being made is let finish and
 * deleted as it becomes ready; its caller hears 'unauthorized'.  A VM
 * being created from one that goes keeps what it has already opened or
 * cloned, or fails as after any delete.  VMs are left alone (vmctl
 * stop-workspace is for them), as is the warm pool's POOL_WORKSPACE and
 * vm_fork's own snapshot, which the fork removes itself.  Runs on vmmd's
 * loop.
 */
#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "authclient.h"
#include "log.h"
#include "snapshot_files.h"
#include "snapshot_revoke.h"
#include "store.h"
#include "vmmd_shared.h"
#include "wsname.h"

#define REVOKE_ACTOR	"authd:revoke-workspace"

/*
 * Revoked workspaces with a snapshot still 'making': what becomes ready
 * of theirs is deleted at once.  A workspace stays revoked for good, so
 * an entry is only a matter of memory; it goes once none is making.
 */
struct revoked_ws {
	TAILQ_ENTRY(revoked_ws)	 entry;
	char			 ws[WORKSPACE_MAX + 1];
};
static TAILQ_HEAD(, revoked_ws) making_revoked =
    TAILQ_HEAD_INITIALIZER(making_revoked);

/* Its snapshots still being made; -1 when the store fails. */
static int
making_count(const char *ws)
{
	struct snap_record *recs;
	char dberr[256];
	size_t n;
	int c = 0;

	if (store_snap_list(vmmd_store(), ws, &recs, &n, dberr,
	    sizeof(dberr)) == -1) {
		log_warnx("workspace %s: %s", ws, dberr);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (strcmp(recs[i].state, "making") == 0)
			c++;
	free(recs);
	return c;
}

static struct revoked_ws *
making_find(const char *ws)
{
	struct revoked_ws *r;

	TAILQ_FOREACH(r, &making_revoked, entry)
		if (strcmp(r->ws, ws) == 0)
			return r;
	return NULL;
}

/* Deletes one ready snapshot for the revoke, audited; 0 or -1. */
static int
revoke_one(const struct snap_record *r)
{
	char err[512];

	if (snap_delete(r, err, sizeof(err)) == -1) {
		log_warnx("snapshot %s (workspace %s, revoked): not deleted: "
		    "%s", r->id, r->workspace, err);
		audit_append(vmmd_audit(), r->workspace, REVOKE_ACTOR, r->id,
		    "unavailable");
		return -1;
	}
	audit_append(vmmd_audit(), r->workspace, REVOKE_ACTOR, r->id, "ok");
	return 0;
}

/*
 * Deletes every ready snapshot of ws, revoked by authd (how says how
 * vmmd heard), and marks its makings to be deleted when they are ready.
 */
static void
snap_revoke_workspace(const char *ws, const char *how)
{
	struct snap_record *recs;
	struct revoked_ws *rw;
	size_t n;
	int deleted = 0, failed = 0, making = 0;
	char more[128] = "", dberr[256];

	if (warmpool_is_pool(ws))
		return;
	/* Its proposals go too: none of them may run now (issue #28). */
	if (store_proposals_delete_workspace(vmmd_store(), ws, dberr,
	    sizeof(dberr)) == -1)
		log_warnx("workspace %s revoked (%s): its proposals cannot be "
		    "deleted (%s)", ws, how, dberr);
	if (store_snap_list(vmmd_store(), ws, &recs, &n, dberr,
	    sizeof(dberr)) == -1) {
		log_warnx("workspace %s revoked (%s): its snapshots cannot be "
		    "listed (%s); the next subscription to authd tries again",
		    ws, how, dberr);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(recs[i].state, "making") == 0)
			making++;
		else if (strcmp(recs[i].state, "ready") != 0)
			continue;	/* vm_fork's own: the fork removes it */
		else if (revoke_one(&recs[i]) == 0)
			deleted++;
		else
			failed++;
	}
	free(recs);
	if (making > 0 && making_find(ws) == NULL) {
		if ((rw = calloc(1, sizeof(*rw))) == NULL)
			fatal("calloc");
		snprintf(rw->ws, sizeof(rw->ws), "%s", ws);
		TAILQ_INSERT_TAIL(&making_revoked, rw, entry);
	}
	if (failed > 0)
		snprintf(more, sizeof(more), ", %d not (see above)", failed);
	if (making > 0)
		snprintf(more + strlen(more), sizeof(more) - strlen(more),
		    ", %d still being made", making);
	log_info("workspace %s revoked (%s): %d snapshot%s deleted%s", ws, how,
	    deleted, deleted == 1 ? "" : "s", more);
}

int
snap_revoke_made(const struct snap_record *r)
{
	struct revoked_ws *rw;

	if (strcmp(r->state, "ready") != 0 || warmpool_is_pool(r->workspace) ||
	    (rw = making_find(r->workspace)) == NULL)
		return 0;
	log_info("snapshot %s (workspace %s): made after its workspace was "
	    "revoked; deleting it", r->id, r->workspace);
	(void)revoke_one(r);
	if (making_count(r->workspace) == 0) {
		TAILQ_REMOVE(&making_revoked, rw, entry);
		free(rw);
	}
	return 1;
}

void
snap_revoke_event(const char *ws, const char *credential_id,
    const char *reason, void *arg)
{
	/* One credential revoked or expired, or a policy change: the
	 * workspace and its snapshots go on. */
	if (credential_id != NULL || strcmp(reason, "revoked") != 0)
		return;
	snap_revoke_workspace(ws, "event");
}

static void
revoked_answer(enum authc_status st, const char *const *revoked, size_t n,
    void *arg)
{
	if (st != AUTHC_OK) {
		log_warnx("authd did not say which owners of snapshots were "
		    "revoked; asked again at the next subscription");
		return;
	}
	for (size_t i = 0; i < n; i++)
		snap_revoke_workspace(revoked[i], "while vmmd was away from "
		    "authd, as authd says now");
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void
snap_revoke_subscribed(void *arg)
{
	struct snap_record *recs;
	const char **names;
	char why[128], dberr[256];
	size_t n, k = 0;

	if (store_snap_list(vmmd_store(), NULL, &recs, &n, dberr,
	    sizeof(dberr)) == -1) {
		log_warnx("snapshots cannot be listed (%s): revocations "
		    "missed are looked for at the next subscription", dberr);
		return;
	}
	if (n == 0) {
		free(recs);
		return;
	}
	if ((names = calloc(n, sizeof(*names))) == NULL)
		fatal("calloc");
	for (size_t i = 0; i < n; i++)
		if (!warmpool_is_pool(recs[i].workspace) &&
		    workspace_id_valid(recs[i].workspace, why, sizeof(why)))
			names[k++] = recs[i].workspace;
	qsort(names, k, sizeof(*names), name_cmp);
	n = 0;
	for (size_t i = 0; i < k; i++)
		if (n == 0 || strcmp(names[n - 1], names[i]) != 0)
			names[n++] = names[i];
	log_debug("asking authd which of %zu owners of snapshots were "
	    "revoked", n);
	/* authclient_revoked copies the names it asks for. */
	for (size_t i = 0; i < n; i += IPC_AUTH_REVOKED_MAX)
		authclient_revoked(vmmd_authd(), names + i,
		    n - i < IPC_AUTH_REVOKED_MAX ? n - i : IPC_AUTH_REVOKED_MAX,
		    revoked_answer, NULL);
	free(names);
	free(recs);
}
