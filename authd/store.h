/*
 * authd's credential store: one SQLite database (WAL, mode 0600) holding
 * workspaces, their policies and the SHA-256 of every credential.  Only
 * authd opens it; this module never sees a credential in clear.
 */
#ifndef MCPVM_AUTHD_STORE_H
#define MCPVM_AUTHD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "cred.h"
#include "policy.h"

#define STORE_SCHEMA_VERSION	4
#define STORE_ERR_MAX		256

/*
 * What a call came to.  Every call but store_verify's STORE_UNAUTHORIZED
 * (whose reason the caller must not tell) fills its err argument with a
 * line for a person when it returns anything but STORE_OK.
 */
enum store_rc {
	STORE_OK = 0,
	STORE_NOT_FOUND,	/* no such workspace or credential */
	STORE_CONFLICT,		/* the request contradicts what is stored */
	STORE_INVALID,		/* the policy it would store does not hold */
	STORE_UNAUTHORIZED,	/* verify: unknown, expired or revoked */
	STORE_BUSY,		/* the database stayed locked */
	STORE_ERROR,		/* I/O, corruption, libsqlite3 */
};

struct store;

/* What a successful verification yields. */
struct store_verdict {
	char		workspace[AUTH_WORKSPACE_MAX + 1];
	char		cred_id[CRED_ID_LEN + 1];
	int64_t		expires_at;	/* 0 = never */
	struct auth_policy policy;
};

struct store_workspace {
	char		id[AUTH_WORKSPACE_MAX + 1];
	int64_t		created_at;
	int64_t		revoked_at;	/* 0 = not revoked */
	unsigned int	active;		/* credentials neither expired nor revoked */
	unsigned int	total;
	struct auth_policy policy;
};

struct store_cred {
	char		id[CRED_ID_LEN + 1];
	char		workspace[AUTH_WORKSPACE_MAX + 1];
	int64_t		created_at;
	int64_t		expires_at;	/* 0 = never */
	int64_t		revoked_at;	/* 0 = not revoked */
};

/* Credential ids affected by one change (revocations), for events. */
struct store_ids {
	size_t		n;
	char		(*ids)[CRED_ID_LEN + 1];
};
void	store_ids_free(struct store_ids *);

/*
 * Opens or creates the database at path.  A new file is created 0600 with
 * O_EXCL; an existing one must be a regular file owned by the caller with
 * no group or other permission bits.  Migrates the schema to
 * STORE_SCHEMA_VERSION.  Never deletes or recreates an existing file.
 * NULL with err filled on failure.
 */
struct store *store_open(const char *path, char *err, size_t errlen);
void	store_close(struct store *);

/*
 * Issues a credential (given by its hash) for workspace ws, creating the
 * workspace with defaults + patch if it does not exist.  For an existing
 * workspace the stored policy is kept: a patch that would change it is a
 * STORE_CONFLICT, as is a revoked workspace.  A new workspace whose policy
 * would not hold (policy_valid) is STORE_INVALID.  expires_at 0 = never.
 * On success *created says whether the workspace is new and *policy holds
 * the policy in force.
 */
enum store_rc store_issue(struct store *, const char *ws,
	    const struct auth_policy_patch *patch,
	    const struct auth_policy *defaults,
	    const uint8_t hash[CRED_HASH_LEN], int64_t now, int64_t expires_at,
	    int *created, struct auth_policy *policy, char *err, size_t errlen);

/*
 * Issues a new credential for an existing, unrevoked workspace and, in the
 * same transaction, revokes old_id (which must belong to ws) or, when
 * old_id is NULL, every other unrevoked credential of ws.  The revoked ids
 * go to *revoked (caller frees with store_ids_free).
 */
enum store_rc store_rotate(struct store *, const char *ws, const char *old_id,
	    const uint8_t hash[CRED_HASH_LEN], int64_t now, int64_t expires_at,
	    struct auth_policy *policy, struct store_ids *revoked, char *err,
	    size_t errlen);

/* Revokes one credential by id.  *already = 1 if it was revoked before. */
enum store_rc store_revoke_cred(struct store *, const char *id, int64_t now,
	    char ws[AUTH_WORKSPACE_MAX + 1], int *already, char *err,
	    size_t errlen);

/*
 * Revokes a workspace: no credential of it verifies any more.  *already = 1
 * if it was revoked before.  The credential ids that were still active go
 * to *revoked.
 */
enum store_rc store_revoke_workspace(struct store *, const char *ws,
	    int64_t now, int *already, struct store_ids *revoked, char *err,
	    size_t errlen);

/*
 * Calls cb for each of the n workspaces that exists and is revoked; an
 * unknown one is not revoked (a store that forgot a workspace must not
 * make vmmd delete its snapshots).
 */
enum store_rc store_revoked(struct store *, const char *const *ws, size_t n,
	    void (*cb)(const char *ws, void *), void *arg, char *err,
	    size_t errlen);

/* Changes the policy of an existing, unrevoked workspace: the patch's
 * fields over the stored ones; STORE_INVALID when the result would not hold
 * (policy_valid). */
enum store_rc store_policy_set(struct store *, const char *ws,
	    const struct auth_policy_patch *, struct auth_policy *out,
	    char *err, size_t errlen);

/*
 * The hot path: looks a credential up by its hash.  STORE_OK with *v, or
 * STORE_UNAUTHORIZED for an unknown, expired or revoked credential or a
 * revoked workspace (the caller must not tell which).
 */
enum store_rc store_verify(struct store *, const uint8_t hash[CRED_HASH_LEN],
	    int64_t now, struct store_verdict *v, char *err, size_t errlen);

/* Every workspace, by id, at most max of them (*truncated = 1 if more). */
enum store_rc store_list(struct store *, int64_t now, size_t max,
	    struct store_workspace **out, size_t *n, int *truncated, char *err,
	    size_t errlen);

/* One workspace and its most recent credentials (at most max). */
enum store_rc store_show(struct store *, const char *ws, int64_t now,
	    size_t max, struct store_workspace *w, struct store_cred **creds,
	    size_t *n, int *truncated, char *err, size_t errlen);

/*
 * Calls cb for every credential that expired in (after, upto] and is not
 * revoked (nor is its workspace).  Used by authd's expiry timer.
 */
enum store_rc store_expired(struct store *, int64_t after, int64_t upto,
	    void (*cb)(const char *ws, const char *id, void *), void *arg,
	    char *err, size_t errlen);

/*
 * durable 1 (the default): every commit is synced (PRAGMA synchronous =
 * FULL).  0 is for bulk loading in benchmarks and tests only.
 */
int	store_set_durable(struct store *, int durable);

/* The database's current schema version (PRAGMA user_version), or -1. */
int	store_schema_version(struct store *);

#endif
