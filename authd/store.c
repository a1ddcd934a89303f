/*
 * authd's SQLite credential store; see store.h.  Runs in authd only, after
 * it dropped privileges, so the file belongs to the authd user.  Opening,
 * migrations, the statement cache and transactions are common/sqldb.c's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <sqlite3.h>

#include "sqldb.h"
#include "store.h"

#define WS_COLS	"w.network, w.images, w.max_vms, w.memory_mib, " \
		"w.storage_gib, w.max_streams, w.egress, w.egress_rate, " \
		"w.approvals"
#define IMAGES_TEXT_MAX	(AUTH_MAX_IMAGES * (AUTH_IMAGE_MAX + 1) + 1)

struct store {
	struct sqldb	*db;
};

/*
 * Schema migrations: migrations[i] takes user_version i to i + 1.  Append
 * only; a shipped entry is never edited.
 */
static const char *const migrations[] = {
	/* 0 -> 1 */
	"CREATE TABLE workspaces ("
	"  id TEXT PRIMARY KEY NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  revoked_at INTEGER,"
	"  network INTEGER NOT NULL CHECK (network IN (0, 1)),"
	"  images TEXT NOT NULL,"
	"  max_vms INTEGER NOT NULL,"
	"  memory_mib INTEGER NOT NULL,"
	"  storage_gib INTEGER NOT NULL,"
	"  max_streams INTEGER NOT NULL"
	");"
	"CREATE TABLE credentials ("
	"  hash BLOB PRIMARY KEY NOT NULL CHECK (length(hash) = 32),"
	"  id TEXT NOT NULL UNIQUE,"
	"  workspace TEXT NOT NULL REFERENCES workspaces(id),"
	"  created_at INTEGER NOT NULL,"
	"  expires_at INTEGER,"
	"  revoked_at INTEGER"
	");"
	"CREATE INDEX credentials_by_workspace "
	"  ON credentials(workspace, created_at);"
	"CREATE INDEX credentials_by_expiry "
	"  ON credentials(expires_at) WHERE expires_at IS NOT NULL;",
	/* 1 -> 2: egress policies; every workspace so far is public. */
	"ALTER TABLE workspaces ADD COLUMN egress TEXT NOT NULL "
	"  DEFAULT '{\"mode\":\"public\",\"deny\":[]}';",
	/* 2 -> 3: a VM's egress bandwidth limit, bytes a second; 0 none. */
	"ALTER TABLE workspaces ADD COLUMN egress_rate INTEGER NOT NULL "
	"  DEFAULT 0;",
	/* 3 -> 4: the actions a human must approve (#28), gates_to_json;
	 * every workspace so far has none. */
	"ALTER TABLE workspaces ADD COLUMN approvals TEXT NOT NULL "
	"  DEFAULT '{}';",
};

/* authd is the database's only user, and nobody else may read it. */
static const struct sqldb_opts store_opts = SQLDB_PRIVATE("authd",
    migrations);

/* The hot path's query: one object, so that the cache finds it. */
static const char verify_sql[] = "SELECT c.hash, c.id, c.workspace, "
    "c.expires_at, " WS_COLS " FROM credentials c JOIN workspaces w "
    "ON w.id = c.workspace WHERE c.hash = ?1 "
    "AND c.revoked_at IS NULL AND w.revoked_at IS NULL";

static void __attribute__((format(printf, 3, 4)))
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Maps a failed sqlite3_step to a store code, and says why in err. */
static enum store_rc
db_fail(struct store *s, const char *what, char *err, size_t errlen)
{
	sqlite3 *db = sqldb_handle(s->db);
	int rc = sqlite3_errcode(db);

	seterr(err, errlen, "%s: %s", what, sqlite3_errmsg(db));
	if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
		return STORE_BUSY;
	return STORE_ERROR;
}

/* The same for a failed sqldb call, which kept its reason. */
static enum store_rc
sqldb_fail(struct store *s, const char *what, char *err, size_t errlen)
{
	seterr(err, errlen, "%s: %s", what, sqldb_errmsg(s->db));
	return sqldb_busy(s->db) ? STORE_BUSY : STORE_ERROR;
}

static enum store_rc
begin(struct store *s, char *err, size_t errlen)
{
	if (sqldb_begin(s->db) == -1)
		return sqldb_fail(s, "begin transaction", err, errlen);
	return STORE_OK;
}

static enum store_rc
commit(struct store *s, char *err, size_t errlen)
{
	if (sqldb_commit(s->db) == -1)
		return sqldb_fail(s, "commit", err, errlen);
	return STORE_OK;
}

static void
rollback(struct store *s)
{
	sqldb_rollback(s->db);
}

/* A cached statement for sql (a literal); back with sqldb_release. */
static sqlite3_stmt *
prep(struct store *s, const char *sql, char *err, size_t errlen)
{
	sqlite3_stmt *st = sqldb_prepare(s->db, sql);

	if (st == NULL)
		sqldb_fail(s, "prepare", err, errlen);
	return st;
}


static int64_t
col_time(sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return 0;
	return sqlite3_column_int64(st, col);
}

/* A column's JSON text, parsed; NULL when it is NULL or does not parse. */
static struct json_object *
col_json(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	return t == NULL ? NULL : json_tokener_parse((const char *)t);
}

/* The egress policy as stored: its JSON; -1 when it does not read. */
static int
col_egress(sqlite3_stmt *st, int col, struct egress *e)
{
	struct json_object *o = col_json(st, col);
	char why[256];
	int rc;

	if (o == NULL)
		return -1;
	rc = egress_from_json(o, "egress", EGRESS_MAX_CIDRS, e, why,
	    sizeof(why));
	json_object_put(o);
	return rc;
}

/* The gates as stored: their JSON; -1 when it does not read. */
static int
col_gates(sqlite3_stmt *st, int col, struct gates *g)
{
	struct json_object *o = col_json(st, col);
	char why[256];
	int rc;

	if (o == NULL)
		return -1;
	rc = gates_from_json(o, "approvals", g, why, sizeof(why));
	json_object_put(o);
	return rc;
}

/* o's JSON text to store, malloc'd, o released; NULL on failure. */
static char *
json_text(struct json_object *o)
{
	char *s;

	if (o == NULL)
		return NULL;
	s = strdup(json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return s;
}

/* Reads the nine WS_COLS columns starting at col. */
static int
col_policy(sqlite3_stmt *st, int col, struct auth_policy *p)
{
	const unsigned char *imgs;

	memset(p, 0, sizeof(*p));
	p->network = sqlite3_column_int(st, col) != 0;
	imgs = sqlite3_column_text(st, col + 1);
	if (policy_images_split(p, imgs != NULL ? (const char *)imgs : "")
	    == -1)
		return -1;
	p->max_vms = (uint32_t)sqlite3_column_int64(st, col + 2);
	p->memory_mib = (uint32_t)sqlite3_column_int64(st, col + 3);
	p->storage_gib = (uint32_t)sqlite3_column_int64(st, col + 4);
	p->max_streams = (uint32_t)sqlite3_column_int64(st, col + 5);
	p->egress_rate = (uint64_t)sqlite3_column_int64(st, col + 7);
	if (col_gates(st, col + 8, &p->gates) == -1)
		return -1;
	return col_egress(st, col + 6, &p->egress);
}

static void
bind_time(sqlite3_stmt *st, int idx, int64_t t)
{
	if (t == 0)
		sqlite3_bind_null(st, idx);
	else
		sqlite3_bind_int64(st, idx, t);
}

struct store *
store_open(const char *path, char *err, size_t errlen)
{
	struct store *s;
	sqlite3_stmt *st;
	char why[STORE_ERR_MAX];

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if ((s->db = sqldb_open(path, &store_opts, err, errlen)) == NULL)
		goto fail;
	/* Prepared now, so that a schema it does not fit fails here. */
	if ((st = prep(s, verify_sql, why, sizeof(why))) == NULL) {
		snprintf(err, errlen, "database %s: %.160s", path, why);
		goto fail;
	}
	sqldb_release(s->db, st);
	return s;
fail:
	store_close(s);
	return NULL;
}

void
store_close(struct store *s)
{
	if (s == NULL)
		return;
	sqldb_close(s->db);
	free(s);
}

int
store_set_durable(struct store *s, int durable)
{
	return sqldb_exec(s->db, durable ? "PRAGMA synchronous = FULL" :
	    "PRAGMA synchronous = OFF");
}

int
store_schema_version(struct store *s)
{
	return sqldb_user_version(s->db);
}

void
store_ids_free(struct store_ids *ids)
{
	free(ids->ids);
	ids->ids = NULL;
	ids->n = 0;
}

static int
ids_add(struct store_ids *ids, const char *id)
{
	void *p = reallocarray(ids->ids, ids->n + 1, sizeof(ids->ids[0]));

	if (p == NULL)
		return -1;
	ids->ids = p;
	snprintf(ids->ids[ids->n], sizeof(ids->ids[0]), "%s", id);
	ids->n++;
	return 0;
}

/*
 * Reads a workspace's policy and revoked time inside a transaction.
 * STORE_OK, STORE_NOT_FOUND or an error.
 */
static enum store_rc
ws_get(struct store *s, const char *ws, struct auth_policy *p,
    int64_t *revoked_at, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	enum store_rc rc;

	st = prep(s, "SELECT w.revoked_at, " WS_COLS
	    " FROM workspaces w WHERE w.id = ?1", err, errlen);
	if (st == NULL)
		return STORE_ERROR;
	sqlite3_bind_text(st, 1, ws, -1, SQLITE_STATIC);
	switch (sqlite3_step(st)) {
	case SQLITE_ROW:
		*revoked_at = col_time(st, 0);
		if (col_policy(st, 1, p) == -1) {
			seterr(err, errlen, "workspace %s: stored policy is "
			    "malformed", ws);
			rc = STORE_ERROR;
		} else
			rc = STORE_OK;
		break;
	case SQLITE_DONE:
		seterr(err, errlen, "no workspace %s", ws);
		rc = STORE_NOT_FOUND;
		break;
	default:
		rc = db_fail(s, "read workspace", err, errlen);
		break;
	}
	sqldb_release(s->db, st);
	return rc;
}

static enum store_rc
cred_insert(struct store *s, const char *ws, const uint8_t hash[CRED_HASH_LEN],
    int64_t now, int64_t expires_at, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	char id[CRED_ID_LEN + 1];
	enum store_rc rc = STORE_OK;

	cred_id(hash, id);
	st = prep(s, "INSERT INTO credentials (hash, id, workspace, "
	    "created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)", err, errlen);
	if (st == NULL)
		return STORE_ERROR;
	sqlite3_bind_blob(st, 1, hash, CRED_HASH_LEN, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, ws, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, now);
	bind_time(st, 5, expires_at);
	if (sqlite3_step(st) != SQLITE_DONE)
		rc = db_fail(s, "insert credential", err, errlen);
	sqldb_release(s->db, st);
	return rc;
}

enum store_rc
store_issue(struct store *s, const char *ws,
    const struct auth_policy_patch *patch, const struct auth_policy *defaults,
    const uint8_t hash[CRED_HASH_LEN], int64_t now, int64_t expires_at,
    int *created, struct auth_policy *policy, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int64_t revoked_at = 0;
	char imgs[IMAGES_TEXT_MAX], *eg = NULL, *ga = NULL;
	enum store_rc rc;

	*created = 0;
	if ((rc = begin(s, err, errlen)) != STORE_OK)
		return rc;
	rc = ws_get(s, ws, policy, &revoked_at, err, errlen);
	if (rc == STORE_OK) {
		struct auth_policy want = *policy;

		if (revoked_at != 0) {
			seterr(err, errlen, "workspace %s is revoked; it "
			    "cannot get new credentials", ws);
			rc = STORE_CONFLICT;
			goto out;
		}
		/* Reissuing keeps the policy; changing it is policy set. */
		if (patch != NULL)
			policy_apply(&want, patch);
		if (!policy_equal(&want, policy)) {
			seterr(err, errlen, "workspace %s exists with another "
			    "policy; reissuing keeps it (change it with "
			    "'authctl policy set')", ws);
			rc = STORE_CONFLICT;
			goto out;
		}
	} else if (rc == STORE_NOT_FOUND) {
		*policy = *defaults;
		if (patch != NULL)
			policy_apply(policy, patch);
		if (!policy_valid(policy, err, errlen)) {
			rc = STORE_INVALID;
			goto out;
		}
		policy_images_join(policy, imgs, sizeof(imgs));
		if ((eg = json_text(egress_to_json(&policy->egress))) == NULL ||
		    (ga = json_text(gates_to_json(&policy->gates))) == NULL) {
			seterr(err, errlen, "insert workspace: out of memory");
			rc = STORE_ERROR;
			goto out;
		}
		st = prep(s, "INSERT INTO workspaces (id, created_at, "
		    "network, images, max_vms, memory_mib, storage_gib, "
		    "max_streams, egress, egress_rate, approvals) VALUES (?1, "
		    "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)", err, errlen);
		if (st == NULL) {
			rc = STORE_ERROR;
			goto out;
		}
		sqlite3_bind_text(st, 1, ws, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, now);
		sqlite3_bind_int(st, 3, policy->network);
		sqlite3_bind_text(st, 4, imgs, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 5, policy->max_vms);
		sqlite3_bind_int64(st, 6, policy->memory_mib);
		sqlite3_bind_int64(st, 7, policy->storage_gib);
		sqlite3_bind_int64(st, 8, policy->max_streams);
		sqlite3_bind_text(st, 9, eg, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 10, (sqlite3_int64)policy->egress_rate);
		sqlite3_bind_text(st, 11, ga, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE) {
			rc = db_fail(s, "insert workspace", err, errlen);
			goto out;
		}
		*created = 1;
	} else
		goto out;
	if ((rc = cred_insert(s, ws, hash, now, expires_at, err,
	    errlen)) != STORE_OK)
		goto out;
	rc = commit(s, err, errlen);
out:
	free(eg);
	free(ga);
	sqldb_release(s->db, st);
	if (rc != STORE_OK) {
		rollback(s);
		*created = 0;
	}
	return rc;
}

/* Revokes the matching unrevoked credentials, noting the active ones. */
static enum store_rc
revoke_creds(struct store *s, const char *ws, const char *only_id,
    int64_t now, struct store_ids *revoked, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	enum store_rc rc = STORE_OK;
	int r;

	st = prep(s, "UPDATE credentials SET revoked_at = ?1 "
	    "WHERE workspace = ?2 AND revoked_at IS NULL "
	    "AND (?3 IS NULL OR id = ?3) "
	    "RETURNING id, expires_at", err, errlen);
	if (st == NULL)
		return STORE_ERROR;
	sqlite3_bind_int64(st, 1, now);
	sqlite3_bind_text(st, 2, ws, -1, SQLITE_STATIC);
	if (only_id != NULL)
		sqlite3_bind_text(st, 3, only_id, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 3);
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t exp = col_time(st, 1);

		/* An expired credential was already announced as such. */
		if (exp != 0 && exp <= now)
			continue;
		if (ids_add(revoked,
		    (const char *)sqlite3_column_text(st, 0)) == -1) {
			seterr(err, errlen, "out of memory");
			rc = STORE_ERROR;
			break;
		}
	}
	if (rc == STORE_OK && r != SQLITE_DONE)
		rc = db_fail(s, "revoke credentials", err, errlen);
	sqldb_release(s->db, st);
	return rc;
}

enum store_rc
store_rotate(struct store *s, const char *ws, const char *old_id,
    const uint8_t hash[CRED_HASH_LEN], int64_t now, int64_t expires_at,
    struct auth_policy *policy, struct store_ids *revoked, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int64_t revoked_at = 0;
	enum store_rc rc;

	revoked->n = 0;
	revoked->ids = NULL;
	if ((rc = begin(s, err, errlen)) != STORE_OK)
		return rc;
	if ((rc = ws_get(s, ws, policy, &revoked_at, err, errlen)) != STORE_OK)
		goto out;
	if (revoked_at != 0) {
		seterr(err, errlen, "workspace %s is revoked; it cannot get "
		    "new credentials", ws);
		rc = STORE_CONFLICT;
		goto out;
	}
	if (old_id != NULL) {
		st = prep(s, "SELECT 1 FROM credentials "
		    "WHERE id = ?1 AND workspace = ?2", err, errlen);
		if (st == NULL) {
			rc = STORE_ERROR;
			goto out;
		}
		sqlite3_bind_text(st, 1, old_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, ws, -1, SQLITE_STATIC);
		switch (sqlite3_step(st)) {
		case SQLITE_ROW:
			break;
		case SQLITE_DONE:
			seterr(err, errlen, "workspace %s has no credential %s",
			    ws, old_id);
			rc = STORE_NOT_FOUND;
			goto out;
		default:
			rc = db_fail(s, "read credential", err, errlen);
			goto out;
		}
	}
	if ((rc = revoke_creds(s, ws, old_id, now, revoked, err,
	    errlen)) != STORE_OK)
		goto out;
	if ((rc = cred_insert(s, ws, hash, now, expires_at, err,
	    errlen)) != STORE_OK)
		goto out;
	rc = commit(s, err, errlen);
out:
	sqldb_release(s->db, st);
	if (rc != STORE_OK) {
		rollback(s);
		store_ids_free(revoked);
	}
	return rc;
}

enum store_rc
store_revoke_cred(struct store *s, const char *id, int64_t now,
    char ws[AUTH_WORKSPACE_MAX + 1], int *already, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	enum store_rc rc;

	*already = 0;
	if ((rc = begin(s, err, errlen)) != STORE_OK)
		return rc;
	st = prep(s, "SELECT workspace, revoked_at FROM credentials "
	    "WHERE id = ?1", err, errlen);
	if (st == NULL) {
		rc = STORE_ERROR;
		goto out;
	}
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	switch (sqlite3_step(st)) {
	case SQLITE_ROW:
		sqldb_column_text(st, 0, ws, AUTH_WORKSPACE_MAX + 1);
		*already = col_time(st, 1) != 0;
		break;
	case SQLITE_DONE:
		seterr(err, errlen, "no credential %s", id);
		rc = STORE_NOT_FOUND;
		goto out;
	default:
		rc = db_fail(s, "read credential", err, errlen);
		goto out;
	}
	sqldb_release(s->db, st);
	st = NULL;
	if (!*already) {
		st = prep(s, "UPDATE credentials SET revoked_at = ?1 "
		    "WHERE id = ?2", err, errlen);
		if (st == NULL) {
			rc = STORE_ERROR;
			goto out;
		}
		sqlite3_bind_int64(st, 1, now);
		sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE) {
			rc = db_fail(s, "revoke credential", err, errlen);
			goto out;
		}
	}
	rc = commit(s, err, errlen);
out:
	sqldb_release(s->db, st);
	if (rc != STORE_OK)
		rollback(s);
	return rc;
}

enum store_rc
store_revoke_workspace(struct store *s, const char *ws, int64_t now,
    int *already, struct store_ids *revoked, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	struct auth_policy p;
	int64_t revoked_at = 0;
	enum store_rc rc;

	*already = 0;
	revoked->n = 0;
	revoked->ids = NULL;
	if ((rc = begin(s, err, errlen)) != STORE_OK)
		return rc;
	if ((rc = ws_get(s, ws, &p, &revoked_at, err, errlen)) != STORE_OK)
		goto out;
	if (revoked_at != 0) {
		*already = 1;
		rc = commit(s, err, errlen);
		goto out;
	}
	st = prep(s, "UPDATE workspaces SET revoked_at = ?1 WHERE id = ?2", err,
	    errlen);
	if (st == NULL) {
		rc = STORE_ERROR;
		goto out;
	}
	sqlite3_bind_int64(st, 1, now);
	sqlite3_bind_text(st, 2, ws, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = db_fail(s, "revoke workspace", err, errlen);
		goto out;
	}
	/* Marked one by one too, so show tells the same story. */
	if ((rc = revoke_creds(s, ws, NULL, now, revoked, err,
	    errlen)) != STORE_OK)
		goto out;
	rc = commit(s, err, errlen);
out:
	sqldb_release(s->db, st);
	if (rc != STORE_OK) {
		rollback(s);
		store_ids_free(revoked);
	}
	return rc;
}

enum store_rc
store_policy_set(struct store *s, const char *ws,
    const struct auth_policy_patch *patch, struct auth_policy *out, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int64_t revoked_at = 0;
	char imgs[IMAGES_TEXT_MAX], *eg = NULL, *ga = NULL;
	enum store_rc rc;

	if ((rc = begin(s, err, errlen)) != STORE_OK)
		return rc;
	if ((rc = ws_get(s, ws, out, &revoked_at, err, errlen)) != STORE_OK)
		goto out;
	if (revoked_at != 0) {
		seterr(err, errlen, "workspace %s is revoked", ws);
		rc = STORE_CONFLICT;
		goto out;
	}
	policy_apply(out, patch);
	if (!policy_valid(out, err, errlen)) {
		rc = STORE_INVALID;
		goto out;
	}
	policy_images_join(out, imgs, sizeof(imgs));
	if ((eg = json_text(egress_to_json(&out->egress))) == NULL ||
	    (ga = json_text(gates_to_json(&out->gates))) == NULL) {
		seterr(err, errlen, "update policy: out of memory");
		rc = STORE_ERROR;
		goto out;
	}
	st = prep(s, "UPDATE workspaces SET network = ?2, images = ?3, "
	    "max_vms = ?4, memory_mib = ?5, storage_gib = ?6, "
	    "max_streams = ?7, egress = ?8, egress_rate = ?9, approvals = ?10 "
	    "WHERE id = ?1", err, errlen);
	if (st == NULL) {
		rc = STORE_ERROR;
		goto out;
	}
	sqlite3_bind_text(st, 1, ws, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, out->network);
	sqlite3_bind_text(st, 3, imgs, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, out->max_vms);
	sqlite3_bind_int64(st, 5, out->memory_mib);
	sqlite3_bind_int64(st, 6, out->storage_gib);
	sqlite3_bind_int64(st, 7, out->max_streams);
	sqlite3_bind_text(st, 8, eg, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 9, (sqlite3_int64)out->egress_rate);
	sqlite3_bind_text(st, 10, ga, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = db_fail(s, "update policy", err, errlen);
		goto out;
	}
	rc = commit(s, err, errlen);
out:
	free(eg);
	free(ga);
	sqldb_release(s->db, st);
	if (rc != STORE_OK)
		rollback(s);
	return rc;
}

enum store_rc
store_verify(struct store *s, const uint8_t hash[CRED_HASH_LEN], int64_t now,
    struct store_verdict *v, char *err, size_t errlen)
{
	sqlite3_stmt *st = prep(s, verify_sql, err, errlen);
	enum store_rc rc = STORE_UNAUTHORIZED;
	int64_t exp;

	if (st == NULL)
		return STORE_ERROR;
	sqlite3_bind_blob(st, 1, hash, CRED_HASH_LEN, SQLITE_STATIC);
	switch (sqlite3_step(st)) {
	case SQLITE_ROW:
		/* The index found it; still compare the whole hash in
		 * constant time rather than trust how it matched. */
		if (sqlite3_column_bytes(st, 0) != CRED_HASH_LEN ||
		    !cred_hash_equal(sqlite3_column_blob(st, 0), hash))
			break;
		exp = col_time(st, 3);
		if (exp != 0 && exp <= now)
			break;
		sqldb_column_text(st, 1, v->cred_id, sizeof(v->cred_id));
		sqldb_column_text(st, 2, v->workspace, sizeof(v->workspace));
		v->expires_at = exp;
		if (col_policy(st, 4, &v->policy) == -1) {
			seterr(err, errlen, "workspace %s: stored policy is "
			    "malformed", v->workspace);
			rc = STORE_ERROR;
			break;
		}
		rc = STORE_OK;
		break;
	case SQLITE_DONE:
		break;
	default:
		rc = db_fail(s, "verify", err, errlen);
		break;
	}
	sqldb_release(s->db, st);
	return rc;
}

static void
row_workspace(sqlite3_stmt *st, struct store_workspace *w)
{
	memset(w, 0, sizeof(*w));
	sqldb_column_text(st, 0, w->id, sizeof(w->id));
	w->created_at = col_time(st, 1);
	w->revoked_at = col_time(st, 2);
	w->active = (unsigned int)sqlite3_column_int(st, 3);
	w->total = (unsigned int)sqlite3_column_int(st, 4);
}

#define WS_SELECT "SELECT w.id, w.created_at, w.revoked_at, " \
	"(SELECT count(*) FROM credentials c WHERE c.workspace = w.id " \
	"  AND c.revoked_at IS NULL AND w.revoked_at IS NULL " \
	"  AND (c.expires_at IS NULL OR c.expires_at > ?1)), " \
	"(SELECT count(*) FROM credentials c WHERE c.workspace = w.id), " \
	WS_COLS " FROM workspaces w "

enum store_rc
store_list(struct store *s, int64_t now, size_t max,
    struct store_workspace **out, size_t *n, int *truncated, char *err,
    size_t errlen)
{
	sqlite3_stmt *st;
	struct store_workspace *ws = NULL;
	enum store_rc rc = STORE_OK;
	size_t cnt = 0;
	int r;

	*out = NULL;
	*n = 0;
	*truncated = 0;
	if ((st = prep(s, WS_SELECT "ORDER BY w.id LIMIT ?2", err,
	    errlen)) == NULL)
		return STORE_ERROR;
	sqlite3_bind_int64(st, 1, now);
	sqlite3_bind_int64(st, 2, (int64_t)max + 1);
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		void *p;

		if (cnt == max) {
			*truncated = 1;
			break;
		}
		if ((p = reallocarray(ws, cnt + 1, sizeof(*ws))) == NULL) {
			seterr(err, errlen, "out of memory");
			rc = STORE_ERROR;
			goto out;
		}
		ws = p;
		row_workspace(st, &ws[cnt]);
		if (col_policy(st, 5, &ws[cnt].policy) == -1) {
			seterr(err, errlen, "workspace %s: stored policy is "
			    "malformed", ws[cnt].id);
			rc = STORE_ERROR;
			goto out;
		}
		cnt++;
	}
	if (r != SQLITE_ROW && r != SQLITE_DONE) {
		rc = db_fail(s, "list workspaces", err, errlen);
		goto out;
	}
	*out = ws;
	*n = cnt;
	ws = NULL;
out:
	free(ws);
	sqldb_release(s->db, st);
	return rc;
}

enum store_rc
store_show(struct store *s, const char *ws, int64_t now, size_t max,
    struct store_workspace *w, struct store_cred **creds, size_t *n,
    int *truncated, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	struct store_cred *cs = NULL;
	enum store_rc rc = STORE_OK;
	size_t cnt = 0;
	int r;

	*creds = NULL;
	*n = 0;
	*truncated = 0;
	if ((st = prep(s, WS_SELECT "WHERE w.id = ?2", err, errlen)) == NULL)
		return STORE_ERROR;
	sqlite3_bind_int64(st, 1, now);
	sqlite3_bind_text(st, 2, ws, -1, SQLITE_STATIC);
	r = sqlite3_step(st);
	if (r == SQLITE_DONE) {
		seterr(err, errlen, "no workspace %s", ws);
		rc = STORE_NOT_FOUND;
		goto out;
	}
	if (r != SQLITE_ROW) {
		rc = db_fail(s, "show workspace", err, errlen);
		goto out;
	}
	row_workspace(st, w);
	if (col_policy(st, 5, &w->policy) == -1) {
		seterr(err, errlen, "workspace %s: stored policy is malformed",
		    ws);
		rc = STORE_ERROR;
		goto out;
	}
	sqldb_release(s->db, st);
	st = prep(s, "SELECT id, created_at, expires_at, revoked_at "
	    "FROM credentials WHERE workspace = ?1 "
	    "ORDER BY created_at DESC, id LIMIT ?2", err, errlen);
	if (st == NULL) {
		rc = STORE_ERROR;
		goto out;
	}
	sqlite3_bind_text(st, 1, ws, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (int64_t)max + 1);
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		void *p;

		if (cnt == max) {
			*truncated = 1;
			break;
		}
		if ((p = reallocarray(cs, cnt + 1, sizeof(*cs))) == NULL) {
			seterr(err, errlen, "out of memory");
			rc = STORE_ERROR;
			goto out;
		}
		cs = p;
		memset(&cs[cnt], 0, sizeof(cs[cnt]));
		sqldb_column_text(st, 0, cs[cnt].id, sizeof(cs[cnt].id));
		snprintf(cs[cnt].workspace, sizeof(cs[cnt].workspace), "%s",
		    ws);
		cs[cnt].created_at = col_time(st, 1);
		cs[cnt].expires_at = col_time(st, 2);
		cs[cnt].revoked_at = col_time(st, 3);
		cnt++;
	}
	if (r != SQLITE_ROW && r != SQLITE_DONE) {
		rc = db_fail(s, "list credentials", err, errlen);
		goto out;
	}
	*creds = cs;
	*n = cnt;
	cs = NULL;
out:
	free(cs);
	sqldb_release(s->db, st);
	return rc;
}

enum store_rc
store_expired(struct store *s, int64_t after, int64_t upto,
    void (*cb)(const char *, const char *, void *), void *arg, char *err,
    size_t errlen)
{
	sqlite3_stmt *st;
	enum store_rc rc = STORE_OK;
	int r;

	st = prep(s, "SELECT c.workspace, c.id FROM credentials c "
	    "JOIN workspaces w ON w.id = c.workspace "
	    "WHERE c.expires_at > ?1 AND c.expires_at <= ?2 "
	    "AND c.revoked_at IS NULL AND w.revoked_at IS NULL", err, errlen);
	if (st == NULL)
		return STORE_ERROR;
	sqlite3_bind_int64(st, 1, after);
	sqlite3_bind_int64(st, 2, upto);
	while ((r = sqlite3_step(st)) == SQLITE_ROW)
		cb((const char *)sqlite3_column_text(st, 0),
		    (const char *)sqlite3_column_text(st, 1), arg);
	if (r != SQLITE_DONE)
		rc = db_fail(s, "find expired credentials", err, errlen);
	sqldb_release(s->db, st);
	return rc;
}

enum store_rc
store_revoked(struct store *s, const char *const *ws, size_t n,
    void (*cb)(const char *ws, void *), void *arg, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	enum store_rc rc = STORE_OK;
	int r;

	for (size_t i = 0; i < n && rc == STORE_OK; i++) {
		st = prep(s, "SELECT revoked_at FROM workspaces WHERE id = ?1",
		    err, errlen);
		if (st == NULL)
			return STORE_ERROR;
		sqlite3_bind_text(st, 1, ws[i], -1, SQLITE_STATIC);
		r = sqlite3_step(st);
		if (r == SQLITE_ROW && col_time(st, 0) != 0)
			cb(ws[i], arg);
		else if (r != SQLITE_ROW && r != SQLITE_DONE)
			rc = db_fail(s, "read workspace", err, errlen);
		sqldb_release(s->db, st);
	}
	return rc;
}
