/*
 * vmmd's SQLite store: VMs, retry receipts, job ids, the audit anchor.
 * See store.h.  Opening, the user_version migrations (each in its own
 * transaction), the statement cache and transactions are common/sqldb.c's.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <sqlite3.h>

#include "jsonx.h"
#include "log.h"
#include "sqldb.h"
#include "store.h"

struct store {
	struct sqldb	*db;
	long long	 jobs_kept;	/* finished jobs per VM; 0: all */
};

static const char *const state_names[VM_NSTATES] = {
	"creating", "running", "paused", "hibernating", "hibernated",
	"resuming", "destroying", "failed", "gone",
};

const char *
vm_state_name(enum vm_state s)
{
	return (unsigned)s < VM_NSTATES ? state_names[s] : "unknown";
}

int
vm_state_parse(const char *name, enum vm_state *s)
{
	for (int i = 0; i < VM_NSTATES; i++)
		if (strcmp(state_names[i], name) == 0) {
			*s = (enum vm_state)i;
			return 0;
		}
	return -1;
}

int
vm_state_transient(enum vm_state s)
{
	return s == VM_CREATING || s == VM_HIBERNATING || s == VM_RESUMING ||
	    s == VM_DESTROYING;
}

static const char *const migrations[] = {
	/* 1: the first schema. */
	"CREATE TABLE vms ("
	"  id TEXT PRIMARY KEY,"
	"  workspace TEXT NOT NULL,"
	"  slot INTEGER NOT NULL,"
	"  state TEXT NOT NULL,"
	"  image TEXT NOT NULL,"
	"  vcpus INTEGER NOT NULL,"
	"  memory_mib INTEGER NOT NULL,"
	"  disk_bytes INTEGER NOT NULL,"
	"  network INTEGER NOT NULL,"
	"  idle_seconds INTEGER NOT NULL,"
	"  idle_mode_pause INTEGER NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL,"
	"  generation INTEGER NOT NULL DEFAULT 0,"
	"  failure TEXT NOT NULL DEFAULT '');"
	"CREATE INDEX vms_workspace ON vms(workspace);"
	"CREATE UNIQUE INDEX vms_slot ON vms(slot) WHERE state <> 'gone';"
	"CREATE TABLE receipts ("
	"  workspace TEXT NOT NULL,"
	"  request_id TEXT NOT NULL,"
	"  tool TEXT NOT NULL,"
	"  digest TEXT NOT NULL,"
	"  status TEXT NOT NULL,"	/* pending | done | uncertain */
	"  result TEXT,"
	"  seq INTEGER NOT NULL,"
	"  PRIMARY KEY (workspace, request_id));"
	"CREATE INDEX receipts_age ON receipts(workspace, seq);"
	"CREATE TABLE jobs ("
	"  vm_id TEXT NOT NULL,"
	"  job_id TEXT NOT NULL,"
	"  request_id TEXT NOT NULL,"
	"  state TEXT NOT NULL DEFAULT 'running',"
	"  exit_code INTEGER,"
	"  started_at INTEGER NOT NULL,"	/* unix ms */
	"  finished_at INTEGER,"
	"  PRIMARY KEY (vm_id, job_id));"
	"CREATE TABLE audit_anchor ("
	"  one INTEGER PRIMARY KEY CHECK (one = 1),"
	"  seq INTEGER NOT NULL,"
	"  hash TEXT NOT NULL);",
	/* 2: image digests checked, by the file's identity at the time. */
	"CREATE TABLE image_digests ("
	"  path TEXT PRIMARY KEY,"
	"  dev INTEGER NOT NULL,"
	"  ino INTEGER NOT NULL,"
	"  size INTEGER NOT NULL,"
	"  mtime_ns INTEGER NOT NULL,"
	"  ctime_ns INTEGER NOT NULL,"
	"  sha256 TEXT NOT NULL);",
	/* 3: a VM's vmgenid GUID; '' for VMs booted without the device,
	 * which must restore without it. */
	"ALTER TABLE vms ADD COLUMN vmgenid TEXT NOT NULL DEFAULT '';",
	/* 4: snapshots, and the one each VM was made from. */
	"CREATE TABLE snapshots ("
	"  id TEXT PRIMARY KEY,"
	"  workspace TEXT NOT NULL,"
	"  name TEXT NOT NULL,"
	"  state TEXT NOT NULL,"	/* making | ready */
	"  source_vm TEXT NOT NULL,"
	"  image TEXT NOT NULL,"
	"  memory INTEGER NOT NULL,"
	"  vcpus INTEGER NOT NULL,"
	"  memory_mib INTEGER NOT NULL,"
	"  disk_bytes INTEGER NOT NULL,"
	"  memory_bytes INTEGER NOT NULL,"
	"  memory_sha256 TEXT NOT NULL,"
	"  paused_ms INTEGER NOT NULL,"
	"  created_at INTEGER NOT NULL);"	/* unix ms */
	"CREATE INDEX snapshots_workspace ON snapshots(workspace);"
	"ALTER TABLE vms ADD COLUMN snapshot_id TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE vms ADD COLUMN origin TEXT NOT NULL DEFAULT 'booted';",
	/* 5: whether a memory snapshot's machine has a NIC, which its
	 * restores must have too; older rows had none. */
	"ALTER TABLE snapshots ADD COLUMN network INTEGER NOT NULL DEFAULT 0;",
	/* 6: a VM's finished jobs by when they finished, for the history
	 * cap, and its running ones, so that neither needs a scan of the
	 * VM's whole history. */
	"CREATE INDEX jobs_finished ON jobs(vm_id, finished_at) "
	"WHERE state <> 'running';"
	"CREATE INDEX jobs_running ON jobs(vm_id) WHERE state = 'running';",
	/* 7: vm_run's own VMs, which a vmmd that died mid-run leaves
	 * behind: the next one destroys them rather than take them up. */
	"ALTER TABLE vms ADD COLUMN run INTEGER NOT NULL DEFAULT 0;",
	/* 8: a VM's egress policy as JSON; '' for older VMs, which had
	 * public egress. */
	"ALTER TABLE vms ADD COLUMN egress TEXT NOT NULL DEFAULT '';",
	/* 9: what netd enforces now, after the workspace's policy changed
	 * under a VM: {"network":b,"egress":{…},"rate":n}; '' for none
	 * (egress as it was made, no rate). */
	"ALTER TABLE vms ADD COLUMN egress_now TEXT NOT NULL DEFAULT '';",
	/* 10: proposals of gated calls awaiting a human's signed decision
	 * (approve.c).  state is a hint for lists: what runs is decided by
	 * the signatures in envelopes, verified again each time. */
	"CREATE TABLE proposals ("
	"  id TEXT PRIMARY KEY,"
	"  workspace TEXT NOT NULL,"
	"  tool TEXT NOT NULL,"
	"  request_id TEXT NOT NULL,"	/* '' none */
	"  args_digest TEXT NOT NULL,"
	"  args TEXT NOT NULL,"
	"  effect TEXT NOT NULL,"
	"  classes TEXT NOT NULL,"
	"  need INTEGER NOT NULL,"
	"  requested_at INTEGER NOT NULL,"	/* unix seconds */
	"  expires_at INTEGER NOT NULL,"
	"  state TEXT NOT NULL,"	/* pending|approved|denied|expired|used */
	"  envelopes TEXT NOT NULL DEFAULT '',"
	"  decided_by TEXT NOT NULL DEFAULT '',"
	"  outcome TEXT NOT NULL DEFAULT '');"
	"CREATE INDEX proposals_key ON proposals(workspace, request_id);"
	"CREATE INDEX proposals_args ON proposals(workspace, tool, "
	"args_digest);",
};

/*
 * Shared: vmmd has threads, and an operator may read the file.  An
 * existing file may not be writable by group or others; vmmd creates it
 * 0600.
 */
static const struct sqldb_opts store_opts = SQLDB_SHARED("vmmd",
    migrations);

/* A sqldb call that failed (and kept why): -1, with err saying so. */
static int
sqldb_fail(struct store *s, const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "database %s: %s: %s", sqldb_path(s->db), what,
	    sqldb_errmsg(s->db));
	return -1;
}

/* A statement whose step failed: -1, with err saying why. */
static int
step_fail(struct store *s, const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "database %s: %s: %s", sqldb_path(s->db), what,
	    sqlite3_errmsg(sqldb_handle(s->db)));
	return -1;
}

static int
store_exec(struct store *s, const char *sql, const char *what, char *err,
    size_t errlen)
{
	if (sqldb_exec(s->db, sql) == -1)
		return sqldb_fail(s, what, err, errlen);
	return 0;
}

static int
store_begin(struct store *s, char *err, size_t errlen)
{
	if (sqldb_begin(s->db) == -1)
		return sqldb_fail(s, "begin", err, errlen);
	return 0;
}

static int
store_commit(struct store *s, char *err, size_t errlen)
{
	if (sqldb_commit(s->db) == -1)
		return sqldb_fail(s, "commit", err, errlen);
	return 0;
}

struct store *
store_open(const char *path, char *err, size_t errlen)
{
	struct sqldb_opts o = store_opts;
	struct store *s;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	/* Group commit: vmmd syncs before any answer leaves (store_sync). */
	o.deferred_sync = 1;
	if ((s->db = sqldb_open(path, &o, err, errlen)) == NULL) {
		free(s);
		return NULL;
	}
	return s;
}

int
store_sync(struct store *s, char *err, size_t errlen)
{
	return s == NULL ? 0 : sqldb_sync(s->db, err, errlen);
}

void
store_close(struct store *s)
{
	if (s == NULL)
		return;
	sqldb_close(s->db);
	free(s);
}

/*
 * A cached statement for sql (a literal); back with sqldb_release.  NULL
 * with err naming what it is for.
 */
static sqlite3_stmt *
store_prepare(struct store *s, const char *sql, const char *what, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = sqldb_prepare(s->db, sql);

	if (st == NULL)
		sqldb_fail(s, what, err, errlen);
	return st;
}

/* Steps a statement that returns no rows, and releases it; -1 with err. */
static int
store_done(struct store *s, sqlite3_stmt *st, const char *what, char *err,
    size_t errlen)
{
	int rc = sqlite3_step(st);

	if (rc != SQLITE_DONE)
		step_fail(s, what, err, errlen);
	sqldb_release(s->db, st);
	return rc == SQLITE_DONE ? 0 : -1;
}

static long long
now_seconds(void)
{
	return (long long)time(NULL);
}

/* The egress_now column's text, malloc'd; NULL on failure. */
static char *
egress_now_text(const struct vm_record *v)
{
	struct json_object *o = json_object_new_object();
	char *s;

	json_object_object_add(o, "network",
	    json_object_new_boolean(!v->net_off));
	json_object_object_add(o, "egress", egress_to_json(&v->egress_now));
	json_object_object_add(o, "rate",
	    json_object_new_int64((int64_t)v->egress_rate));
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return s;
}

int
store_vm_set_egress_now(struct store *s, const struct vm_record *v,
    char *err, size_t errlen)
{
	sqlite3_stmt *st;
	char *text;
	int rc;

	if ((text = egress_now_text(v)) == NULL) {
		snprintf(err, errlen, "vms: out of memory");
		return -1;
	}
	if ((st = store_prepare(s, "UPDATE vms SET egress_now = ?2, "
	    "updated_at = ?3 WHERE id = ?1", "vms", err, errlen)) == NULL) {
		free(text);
		return -1;
	}
	sqlite3_bind_text(st, 1, v->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, text, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now_seconds());
	rc = store_done(s, st, "vms", err, errlen);
	free(text);
	return rc;
}

int
store_vm_insert(struct store *s, const struct vm_record *v, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "INSERT INTO vms (id, workspace, slot, state, image, vcpus, "
	    "memory_mib, disk_bytes, network, idle_seconds, idle_mode_pause, "
	    "created_at, updated_at, generation, failure, vmgenid, snapshot_id, "
	    "origin, run, egress, egress_now) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, "
	    "?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)", "vms", err, errlen);
	char *now;
	struct json_object *eg;
	int rc;

	if (st == NULL)
		return -1;
	if ((eg = egress_to_json(&v->egress)) == NULL) {
		sqldb_release(s->db, st);
		snprintf(err, errlen, "vms: out of memory");
		return -1;
	}
	sqlite3_bind_text(st, 1, v->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, v->workspace, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, v->slot);
	sqlite3_bind_text(st, 4, vm_state_name(v->state), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, v->image, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 6, v->vcpus);
	sqlite3_bind_int(st, 7, v->memory_mib);
	sqlite3_bind_int64(st, 8, v->disk_bytes);
	sqlite3_bind_int(st, 9, v->network);
	sqlite3_bind_int(st, 10, v->idle_seconds);
	sqlite3_bind_int(st, 11, v->idle_mode_pause);
	sqlite3_bind_int64(st, 12, v->created_at != 0 ? v->created_at :
	    now_seconds());
	sqlite3_bind_int(st, 13, v->generation);
	sqlite3_bind_text(st, 14, v->failure, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 15, v->vmgenid, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 16, v->snapshot_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 17, v->origin[0] != '\0' ? v->origin : "booted",
	    -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 18, v->run != 0);
	sqlite3_bind_text(st, 19, json_object_to_json_string_ext(eg,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE), -1,
	    SQLITE_TRANSIENT);
	json_object_put(eg);
	if ((now = egress_now_text(v)) == NULL) {
		sqldb_release(s->db, st);
		snprintf(err, errlen, "vms: out of memory");
		return -1;
	}
	sqlite3_bind_text(st, 20, now, -1, SQLITE_TRANSIENT);
	free(now);
	rc = store_done(s, st, "vms", err, errlen);
	return rc;
}

int
store_vm_set_state(struct store *s, const char *id, enum vm_state state,
    const char *failure, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "UPDATE vms SET state = ?2, failure = ?3, updated_at = ?4 "
	    "WHERE id = ?1", "vms", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, vm_state_name(state), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, state == VM_FAILED && failure != NULL ?
	    failure : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, now_seconds());
	if (store_done(s, st, "vms", err, errlen) == -1)
		return -1;
	if (sqlite3_changes(sqldb_handle(s->db)) != 1) {
		snprintf(err, errlen, "vm %s: not found", id);
		return -1;
	}
	return 0;
}

int
store_vm_set_generation(struct store *s, const char *id, int gen, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "UPDATE vms SET generation = ?2, updated_at = ?3 WHERE id = ?1",
	    "vms", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, gen);
	sqlite3_bind_int64(st, 3, now_seconds());
	return store_done(s, st, "vms", err, errlen);
}

/*
 * Steps st to its end, each row filled into a new element of size bytes
 * at the end of a growing array, and releases st.  0 with *out (the
 * caller's to free) and *n; -1 with nothing, and err.
 */
static int
store_collect(struct store *s, sqlite3_stmt *st, size_t size,
    void (*fill)(sqlite3_stmt *, void *), void **out, size_t *n,
    const char *what, char *err, size_t errlen)
{
	char *v = NULL, *nv;
	size_t cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			if ((nv = reallocarray(v, cap, size)) == NULL) {
				rc = SQLITE_NOMEM;
				break;
			}
			v = nv;
		}
		fill(st, v + (*n)++ * size);
	}
	if (rc == SQLITE_NOMEM)
		snprintf(err, errlen, "database %s: %s: out of memory",
		    sqldb_path(s->db), what);
	else if (rc != SQLITE_DONE)
		step_fail(s, what, err, errlen);
	sqldb_release(s->db, st);
	if (rc != SQLITE_DONE) {
		free(v);
		*n = 0;
		return -1;
	}
	*out = v;
	return 0;
}

/*
 * Steps st once: 0 with the row filled into out, or -1 with err (what
 * "not found" when there is no row).  Releases st.
 */
static int
store_one(struct store *s, sqlite3_stmt *st,
    void (*fill)(sqlite3_stmt *, void *), void *out, const char *what,
    char *err, size_t errlen)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		fill(st, out);
	else if (rc == SQLITE_DONE)
		snprintf(err, errlen, "%s: not found", what);
	else
		step_fail(s, what, err, errlen);
	sqldb_release(s->db, st);
	return rc == SQLITE_ROW ? 0 : -1;
}

#define VM_COLUMNS	"id, workspace, slot, state, image, vcpus, " \
	"memory_mib, disk_bytes, network, idle_seconds, idle_mode_pause, " \
	"created_at, updated_at, generation, failure, vmgenid, snapshot_id, " \
	"origin, run, egress, egress_now"

/*
 * A VM's stored egress policy; '' (older VMs) is public.  One that does
 * not read is an empty allowlist, so that a damaged row never widens a
 * VM's reach.
 */
static void
row_egress(sqlite3_stmt *st, int col, struct vm_record *v)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	struct json_object *o;
	char why[256];

	memset(&v->egress, 0, sizeof(v->egress));
	if (t == NULL || *t == '\0')
		return;
	o = json_tokener_parse((const char *)t);
	if (o == NULL || egress_from_json(o, "egress", EGRESS_MAX_CIDRS,
	    &v->egress, why, sizeof(why)) == -1) {
		log_warnx("store: vm %s has an unreadable egress policy; it "
		    "reaches nothing", v->id);
		memset(&v->egress, 0, sizeof(v->egress));
		v->egress.mode = EGRESS_ALLOWLIST;
	}
	json_object_put(o);
}

/*
 * The policy netd enforces now; '' is the VM's own.  One that does not
 * read turns the network off, so that a damaged row never widens it.
 */
static void
row_egress_now(sqlite3_stmt *st, int col, struct vm_record *v)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	struct json_object *o, *eg;
	struct jsonx_err jerr;
	char why[256];
	int64_t rate;
	int net;

	v->egress_now = v->egress;
	v->egress_rate = 0;
	v->net_off = 0;
	if (t == NULL || *t == '\0')
		return;
	o = json_tokener_parse((const char *)t);
	if (o == NULL || jsonx_get_bool(o, "network", 1, &net, &jerr) != 1 ||
	    jsonx_get_int64(o, "rate", 1, 0, INT64_MAX, &rate, &jerr) != 1 ||
	    !json_object_object_get_ex(o, "egress", &eg) ||
	    egress_from_json(eg, "egress_now", EGRESS_MAX_CIDRS,
	    &v->egress_now, why, sizeof(why)) == -1) {
		log_warnx("store: vm %s has an unreadable current egress "
		    "policy; its network is off", v->id);
		v->net_off = 1;
		memset(&v->egress_now, 0, sizeof(v->egress_now));
		v->egress_now.mode = EGRESS_ALLOWLIST;
	} else {
		v->net_off = !net;
		v->egress_rate = (uint64_t)rate;
	}
	json_object_put(o);
}

static int
row_to_vm(sqlite3_stmt *st, struct vm_record *v)
{
	const unsigned char *state;

	memset(v, 0, sizeof(*v));
	sqldb_column_text(st, 0, v->id, sizeof(v->id));
	sqldb_column_text(st, 1, v->workspace, sizeof(v->workspace));
	v->slot = sqlite3_column_int(st, 2);
	state = sqlite3_column_text(st, 3);
	if (state == NULL || vm_state_parse((const char *)state, &v->state)) {
		log_warnx("store: vm %s has an unknown state", v->id);
		v->state = VM_FAILED;
	}
	sqldb_column_text(st, 4, v->image, sizeof(v->image));
	v->vcpus = sqlite3_column_int(st, 5);
	v->memory_mib = sqlite3_column_int(st, 6);
	v->disk_bytes = sqlite3_column_int64(st, 7);
	v->network = sqlite3_column_int(st, 8);
	v->idle_seconds = sqlite3_column_int(st, 9);
	v->idle_mode_pause = sqlite3_column_int(st, 10);
	v->created_at = sqlite3_column_int64(st, 11);
	v->updated_at = sqlite3_column_int64(st, 12);
	v->generation = sqlite3_column_int(st, 13);
	sqldb_column_text(st, 14, v->failure, sizeof(v->failure));
	sqldb_column_text(st, 15, v->vmgenid, sizeof(v->vmgenid));
	sqldb_column_text(st, 16, v->snapshot_id, sizeof(v->snapshot_id));
	sqldb_column_text(st, 17, v->origin, sizeof(v->origin));
	v->run = sqlite3_column_int(st, 18) != 0;
	row_egress(st, 19, v);
	row_egress_now(st, 20, v);
	return 0;
}

static void
fill_vm(sqlite3_stmt *st, void *v)
{
	row_to_vm(st, v);
}

int
store_vm_get(struct store *s, const char *id, struct vm_record *v, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "SELECT " VM_COLUMNS " FROM vms WHERE id = ?1 AND state <> 'gone'",
	    "vms", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	return store_one(s, st, fill_vm, v, "vm", err, errlen);
}

int
store_vm_list(struct store *s, const char *workspace, struct vm_record **out,
    size_t *n, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	*out = NULL;
	*n = 0;
	st = store_prepare(s, workspace != NULL ?
	    "SELECT " VM_COLUMNS " FROM vms WHERE state <> 'gone' AND "
	    "workspace = ?1 ORDER BY created_at, id" :
	    "SELECT " VM_COLUMNS " FROM vms WHERE state <> 'gone' "
	    "ORDER BY created_at, id", "vms", err, errlen);
	if (st == NULL)
		return -1;
	if (workspace != NULL)
		sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	return store_collect(s, st, sizeof(**out), fill_vm, (void **)out, n,
	    "vms", err, errlen);
}

int
store_vm_delete(struct store *s, const char *id, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	if (store_begin(s, err, errlen) == -1)
		return -1;
	if ((st = store_prepare(s, "DELETE FROM jobs WHERE vm_id = ?1",
	    "jobs", err, errlen)) == NULL)
		goto fail;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	if (store_done(s, st, "jobs", err, errlen) == -1)
		goto fail;
	/* The row stays, gone, so that destroying it again is harmless. */
	if ((st = store_prepare(s, "UPDATE vms SET state = 'gone', "
	    "updated_at = ?2 WHERE id = ?1", "vms", err, errlen)) == NULL)
		goto fail;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, now_seconds());
	if (store_done(s, st, "vms", err, errlen) == -1)
		goto fail;
	return store_commit(s, err, errlen);
 fail:
	sqldb_rollback(s->db);
	return -1;
}

int
store_vm_was_destroyed(struct store *s, const char *id, const char *workspace,
    char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "SELECT 1 FROM vms WHERE id = ?1 "
	    "AND workspace = ?2 AND state = 'gone'", "vms", err, errlen);
	int rc;

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, workspace, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		step_fail(s, "vms", err, errlen);
	sqldb_release(s->db, st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return -1;
	return rc == SQLITE_ROW;
}

int
store_free_slot(struct store *s, int max, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "SELECT slot FROM vms WHERE state <> 'gone' ORDER BY slot", "vms",
	    err, errlen);
	int want = 0, rc;

	if (st == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int slot = sqlite3_column_int(st, 0);

		if (slot > want)
			break;
		if (slot == want)
			want++;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		step_fail(s, "vms", err, errlen);
	sqldb_release(s->db, st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return -1;
	if (want >= max) {
		snprintf(err, errlen, "every slot below %d is taken", max);
		return -1;
	}
	return want;
}

int
store_receipt_begin(struct store *s, const char *workspace,
    const char *request_id, const char *tool, const char *digest,
    enum receipt_status *status, char **result, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	*result = NULL;
	if (store_begin(s, err, errlen) == -1)
		return -1;
	st = store_prepare(s, "SELECT tool, digest, status, result FROM "
	    "receipts WHERE workspace = ?1 AND request_id = ?2", "receipts",
	    err, errlen);
	if (st == NULL)
		goto fail;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, request_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(st, 0);
		const char *d = (const char *)sqlite3_column_text(st, 1);
		const char *state = (const char *)sqlite3_column_text(st, 2);
		const char *r = (const char *)sqlite3_column_text(st, 3);

		if (strcmp(t, tool) != 0 || strcmp(d, digest) != 0)
			*status = RECEIPT_MISMATCH;
		else if (strcmp(state, "done") == 0) {
			*status = RECEIPT_DONE;
			if (r != NULL && (*result = strdup(r)) == NULL) {
				snprintf(err, errlen, "receipt %s: out of "
				    "memory", request_id);
				sqldb_release(s->db, st);
				goto fail;
			}
		} else if (strcmp(state, "uncertain") == 0)
			*status = RECEIPT_UNCERTAIN;
		else
			*status = RECEIPT_PENDING;
		sqldb_release(s->db, st);
		return store_commit(s, err, errlen);
	}
	if (rc != SQLITE_DONE)
		step_fail(s, "receipts", err, errlen);
	sqldb_release(s->db, st);
	if (rc != SQLITE_DONE)
		goto fail;

	st = store_prepare(s, "INSERT INTO receipts (workspace, request_id, "
	    "tool, digest, status, seq) VALUES (?1, ?2, ?3, ?4, 'pending', "
	    "(SELECT COALESCE(MAX(seq), 0) + 1 FROM receipts "
	    "WHERE workspace = ?1))", "receipts", err, errlen);
	if (st == NULL)
		goto fail;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, request_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, tool, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, digest, -1, SQLITE_STATIC);
	if (store_done(s, st, "receipts", err, errlen) == -1)
		goto fail;
	/* History is capped per workspace: the oldest go first. */
	st = store_prepare(s, "DELETE FROM receipts WHERE workspace = ?1 AND "
	    "seq <= (SELECT MAX(seq) FROM receipts WHERE workspace = ?1) - ?2",
	    "receipts", err, errlen);
	if (st == NULL)
		goto fail;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, RECEIPTS_PER_WORKSPACE);
	if (store_done(s, st, "receipts", err, errlen) == -1)
		goto fail;
	*status = RECEIPT_NEW;
	return store_commit(s, err, errlen);
 fail:
	sqldb_rollback(s->db);
	free(*result);
	*result = NULL;
	return -1;
}

int
store_receipt_known(struct store *s, const char *workspace,
    const char *request_id, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "SELECT 1 FROM receipts WHERE "
	    "workspace = ?1 AND request_id = ?2", "receipts", err, errlen);
	int rc;

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, request_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		step_fail(s, "receipts", err, errlen);
	sqldb_release(s->db, st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

int
store_receipt_get(struct store *s, const char *workspace,
    const char *request_id, const char *tool, enum receipt_status *status,
    char **result, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "SELECT status, result FROM "
	    "receipts WHERE workspace = ?1 AND request_id = ?2 AND tool = ?3",
	    "receipts", err, errlen);
	const char *state, *r;
	int rc, found = 0;

	*result = NULL;
	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, request_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, tool, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		found = 1;
		state = (const char *)sqlite3_column_text(st, 0);
		r = (const char *)sqlite3_column_text(st, 1);
		if (strcmp(state, "done") == 0) {
			*status = RECEIPT_DONE;
			if (r != NULL && (*result = strdup(r)) == NULL) {
				snprintf(err, errlen, "receipt %s: out of "
				    "memory", request_id);
				found = -1;
			}
		} else if (strcmp(state, "uncertain") == 0)
			*status = RECEIPT_UNCERTAIN;
		else
			*status = RECEIPT_PENDING;
	} else if (rc != SQLITE_DONE) {
		step_fail(s, "receipts", err, errlen);
		found = -1;
	}
	sqldb_release(s->db, st);
	return found;
}

int
store_receipt_finish(struct store *s, const char *workspace,
    const char *request_id, const char *result, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "UPDATE receipts SET "
	    "status = 'done', result = ?3 WHERE workspace = ?1 AND "
	    "request_id = ?2", "receipts", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, request_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, result, -1, SQLITE_STATIC);
	return store_done(s, st, "receipts", err, errlen);
}

int
store_receipt_forget(struct store *s, const char *workspace,
    const char *request_id, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "DELETE FROM receipts WHERE "
	    "workspace = ?1 AND request_id = ?2", "receipts", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, request_id, -1, SQLITE_STATIC);
	return store_done(s, st, "receipts", err, errlen);
}

int
store_receipt_uncertain(struct store *s, const char *workspace,
    const char *request_id, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "UPDATE receipts SET "
	    "status = 'uncertain' WHERE workspace = ?1 AND request_id = ?2",
	    "receipts", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, request_id, -1, SQLITE_STATIC);
	return store_done(s, st, "receipts", err, errlen);
}

int
store_receipts_mark_uncertain(struct store *s, char *err, size_t errlen)
{
	return store_exec(s, "UPDATE receipts SET status = 'uncertain' "
	    "WHERE status = 'pending'", "receipts", err, errlen);
}

/*
 * A VM's finished jobs beyond the newest jobs_kept, oldest first (by
 * when they finished; those with no time first of all): deleted.  Running
 * jobs stay, whatever their number.
 */
static const char prune_sql[] = "DELETE FROM jobs WHERE rowid IN ("
    "SELECT rowid FROM jobs WHERE vm_id = ?1 AND state <> 'running' "
    "ORDER BY finished_at DESC, rowid DESC LIMIT -1 OFFSET ?2)";

void
store_jobs_keep(struct store *s, long long max)
{
	s->jobs_kept = max > 0 ? max : 0;
}

int
store_job_add(struct store *s, const char *vm_id, const char *job_id,
    const char *request_id, long long started_ms, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "INSERT OR REPLACE INTO jobs "
	    "(vm_id, job_id, request_id, state, started_at) "
	    "VALUES (?1, ?2, ?3, 'running', ?4)", "jobs", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, vm_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, job_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, request_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, started_ms);
	return store_done(s, st, "jobs", err, errlen);
}

/* The history cap of one VM, inside the caller's transaction. */
static int
store_job_prune(struct store *s, const char *vm_id, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	if (s->jobs_kept == 0)
		return 0;
	if ((st = store_prepare(s, prune_sql, "jobs", err, errlen)) == NULL)
		return -1;
	sqlite3_bind_text(st, 1, vm_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, s->jobs_kept);
	return store_done(s, st, "jobs", err, errlen);
}

int
store_job_update(struct store *s, const char *vm_id, const char *job_id,
    const char *state, int exit_code, long long finished_ms, char *err,
    size_t errlen)
{
	sqlite3_stmt *st;
	int finished = strcmp(state, "running") != 0;

	/* A finished job may push the oldest out: both, or neither. */
	if (finished && store_begin(s, err, errlen) == -1)
		return -1;
	/* The first time a job is seen finished is when it finished. */
	st = store_prepare(s, "UPDATE jobs SET state = ?3, "
	    "exit_code = ?4, finished_at = COALESCE(finished_at, ?5) "
	    "WHERE vm_id = ?1 AND job_id = ?2", "jobs", err, errlen);
	if (st == NULL)
		goto fail;
	sqlite3_bind_text(st, 1, vm_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, job_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, state, -1, SQLITE_STATIC);
	if (exit_code >= 0)
		sqlite3_bind_int(st, 4, exit_code);
	else
		sqlite3_bind_null(st, 4);
	if (finished_ms > 0)
		sqlite3_bind_int64(st, 5, finished_ms);
	else
		sqlite3_bind_null(st, 5);
	if (store_done(s, st, "jobs", err, errlen) == -1)
		goto fail;
	if (!finished)
		return 0;
	if (store_job_prune(s, vm_id, err, errlen) == -1)
		goto fail;
	return store_commit(s, err, errlen);
 fail:
	sqldb_rollback(s->db);
	return -1;
}

int
store_job_forget(struct store *s, const char *vm_id, const char *job_id,
    char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "DELETE FROM jobs WHERE "
	    "vm_id = ?1 AND job_id = ?2", "jobs", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, vm_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, job_id, -1, SQLITE_STATIC);
	return store_done(s, st, "jobs", err, errlen);
}

int
store_jobs_prune(struct store *s, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	if (s->jobs_kept == 0)
		return 0;
	st = store_prepare(s, "DELETE FROM jobs WHERE rowid IN ("
	    "SELECT rowid FROM (SELECT rowid, row_number() OVER ("
	    "PARTITION BY vm_id ORDER BY finished_at DESC, rowid DESC) AS n "
	    "FROM jobs WHERE state <> 'running') WHERE n > ?1)", "jobs", err,
	    errlen);
	if (st == NULL)
		return -1;
	sqlite3_bind_int64(st, 1, s->jobs_kept);
	return store_done(s, st, "jobs", err, errlen);
}

int
store_job_copy(struct store *s, const char *from, const char *to,
    long long upto_ms, char *err, size_t errlen)
{
	struct store c;
	sqlite3_stmt *st;
	int rc = -1;

	memset(&c, 0, sizeof(c));
	c.jobs_kept = s->jobs_kept;
	if ((c.db = sqldb_open_more(s->db, err, errlen)) == NULL)
		return -1;
	/*
	 * One statement, so one transaction: the running jobs and the newest
	 * finished ones the cap keeps, each found by its index, and nothing
	 * when the VM went meanwhile (its destruction forgot its jobs).
	 */
	st = store_prepare(&c, "INSERT OR REPLACE INTO jobs (vm_id, job_id, "
	    "request_id, state, exit_code, started_at, finished_at) "
	    "SELECT ?2, job_id, request_id, state, exit_code, started_at, "
	    "finished_at FROM jobs WHERE rowid IN ("
	    "SELECT rowid FROM jobs WHERE vm_id = ?1 AND state = 'running' AND "
	    "started_at <= ?3 UNION ALL SELECT * FROM (SELECT rowid FROM jobs "
	    "WHERE vm_id = ?1 AND state <> 'running' AND started_at <= ?3 "
	    "ORDER BY finished_at DESC, rowid DESC LIMIT ?4)) AND "
	    "EXISTS (SELECT 1 FROM vms WHERE id = ?2 AND state <> 'gone')",
	    "jobs", err, errlen);
	if (st != NULL) {
		sqlite3_bind_text(st, 1, from, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, to, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, upto_ms);
		sqlite3_bind_int64(st, 4, c.jobs_kept > 0 ? c.jobs_kept : -1);
		rc = store_done(&c, st, "jobs", err, errlen);
	}
	sqldb_close(c.db);
	return rc;
}

static void
row_to_job(sqlite3_stmt *st, struct job_record *j)
{
	memset(j, 0, sizeof(*j));
	sqldb_column_text(st, 0, j->job_id, sizeof(j->job_id));
	sqldb_column_text(st, 1, j->request_id, sizeof(j->request_id));
	sqldb_column_text(st, 2, j->state, sizeof(j->state));
	j->exit_code = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 :
	    sqlite3_column_int(st, 3);
	j->started_at = sqlite3_column_int64(st, 4);
	j->finished_at = sqlite3_column_type(st, 5) == SQLITE_NULL ? 0 :
	    sqlite3_column_int64(st, 5);
}

static void
fill_job(sqlite3_stmt *st, void *j)
{
	row_to_job(st, j);
}

#define JOB_COLUMNS	"job_id, request_id, state, exit_code, started_at, " \
	"finished_at"

int
store_job_get(struct store *s, const char *vm_id, const char *job_id,
    struct job_record *j, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "SELECT " JOB_COLUMNS " FROM jobs "
	    "WHERE vm_id = ?1 AND job_id = ?2", "jobs", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, vm_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, job_id, -1, SQLITE_STATIC);
	return store_one(s, st, fill_job, j, "job", err, errlen);
}

int
store_job_list(struct store *s, const char *vm_id, struct job_record **out,
    size_t *n, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "SELECT " JOB_COLUMNS " FROM jobs "
	    "WHERE vm_id = ?1 ORDER BY started_at, rowid", "jobs", err,
	    errlen);

	*out = NULL;
	*n = 0;
	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, vm_id, -1, SQLITE_STATIC);
	return store_collect(s, st, sizeof(**out), fill_job, (void **)out, n,
	    "jobs", err, errlen);
}

int
store_audit_anchor_get(struct store *s, long long *seq, char *hash,
    size_t hashlen, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "SELECT seq, hash FROM audit_anchor WHERE one = 1", "audit_anchor",
	    err, errlen);
	int rc;

	if (st == NULL)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*seq = sqlite3_column_int64(st, 0);
		sqldb_column_text(st, 1, hash, hashlen);
	} else {
		*seq = 0;
		hash[0] = '\0';
		if (rc != SQLITE_DONE)
			step_fail(s, "audit_anchor", err, errlen);
	}
	sqldb_release(s->db, st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

int
store_audit_anchor_set(struct store *s, long long seq, const char *hash,
    char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "INSERT OR REPLACE INTO "
	    "audit_anchor (one, seq, hash) VALUES (1, ?1, ?2)", "audit_anchor",
	    err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_int64(st, 1, seq);
	sqlite3_bind_text(st, 2, hash, -1, SQLITE_STATIC);
	return store_done(s, st, "audit_anchor", err, errlen);
}

/* ?1 to ?6: the path and its identity, as both statements name them. */
static void
bind_identity(sqlite3_stmt *st, const char *path,
    const struct file_identity *id)
{
	sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, id->dev);
	sqlite3_bind_int64(st, 3, id->ino);
	sqlite3_bind_int64(st, 4, id->size);
	sqlite3_bind_int64(st, 5, id->mtime_ns);
	sqlite3_bind_int64(st, 6, id->ctime_ns);
}

int
store_digest_get(struct store *s, const char *path,
    const struct file_identity *id, char hex[65], char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "SELECT sha256 FROM "
	    "image_digests WHERE path = ?1 AND dev = ?2 AND ino = ?3 AND "
	    "size = ?4 AND mtime_ns = ?5 AND ctime_ns = ?6", "image_digests",
	    err, errlen);
	int rc;

	if (st == NULL)
		return -1;
	bind_identity(st, path, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		sqldb_column_text(st, 0, hex, 65);
	else if (rc != SQLITE_DONE)
		step_fail(s, "image_digests", err, errlen);
	sqldb_release(s->db, st);
	if (rc == SQLITE_ROW)
		return strlen(hex) == 64 ? 1 : 0;
	return rc == SQLITE_DONE ? 0 : -1;
}

int
store_digest_put(struct store *s, const char *path,
    const struct file_identity *id, const char *hex, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "INSERT OR REPLACE INTO "
	    "image_digests (path, dev, ino, size, mtime_ns, ctime_ns, sha256) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", "image_digests", err,
	    errlen);

	if (st == NULL)
		return -1;
	bind_identity(st, path, id);
	sqlite3_bind_text(st, 7, hex, -1, SQLITE_STATIC);
	return store_done(s, st, "image_digests", err, errlen);
}

/* ---- snapshots --------------------------------------------------------- */

int
store_snap_insert(struct store *s, const struct snap_record *r, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "INSERT INTO snapshots (id, workspace, name, state, source_vm, "
	    "image, memory, vcpus, memory_mib, disk_bytes, memory_bytes, "
	    "memory_sha256, paused_ms, created_at, network) VALUES (?1, ?2, "
	    "?3, 'making', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
	    "snapshots", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->workspace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, r->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, r->source_vm, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, r->image, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 6, r->memory);
	sqlite3_bind_int(st, 7, r->vcpus);
	sqlite3_bind_int(st, 8, r->memory_mib);
	sqlite3_bind_int64(st, 9, r->disk_bytes);
	sqlite3_bind_int64(st, 10, r->memory_bytes);
	sqlite3_bind_text(st, 11, r->memory_sha256, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 12, r->paused_ms);
	sqlite3_bind_int64(st, 13, r->created_at);
	sqlite3_bind_int(st, 14, r->network);
	return store_done(s, st, "snapshots", err, errlen);
}

int
store_snap_ready(struct store *s, const struct snap_record *r, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "UPDATE snapshots SET state = ?6, disk_bytes = ?2, "
	    "memory_bytes = ?3, memory_sha256 = ?4, paused_ms = ?5 "
	    "WHERE id = ?1 AND state = 'making'", "snapshots", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, r->disk_bytes);
	sqlite3_bind_int64(st, 3, r->memory_bytes);
	sqlite3_bind_text(st, 4, r->memory_sha256, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, r->paused_ms);
	sqlite3_bind_text(st, 6, strcmp(r->state, "fork") == 0 ? "fork" :
	    "ready", -1, SQLITE_STATIC);
	if (store_done(s, st, "snapshots", err, errlen) == -1)
		return -1;
	if (sqlite3_changes(sqldb_handle(s->db)) != 1) {
		snprintf(err, errlen, "snapshot %s: not being made", r->id);
		return -1;
	}
	return 0;
}

#define SNAP_COLUMNS	"id, workspace, name, state, source_vm, image, " \
	"memory, vcpus, memory_mib, disk_bytes, memory_bytes, memory_sha256, " \
	"paused_ms, created_at, network"

static void
row_to_snap(sqlite3_stmt *st, struct snap_record *r)
{
	memset(r, 0, sizeof(*r));
	sqldb_column_text(st, 0, r->id, sizeof(r->id));
	sqldb_column_text(st, 1, r->workspace, sizeof(r->workspace));
	sqldb_column_text(st, 2, r->name, sizeof(r->name));
	sqldb_column_text(st, 3, r->state, sizeof(r->state));
	sqldb_column_text(st, 4, r->source_vm, sizeof(r->source_vm));
	sqldb_column_text(st, 5, r->image, sizeof(r->image));
	r->memory = sqlite3_column_int(st, 6);
	r->vcpus = sqlite3_column_int(st, 7);
	r->memory_mib = sqlite3_column_int(st, 8);
	r->disk_bytes = sqlite3_column_int64(st, 9);
	r->memory_bytes = sqlite3_column_int64(st, 10);
	sqldb_column_text(st, 11, r->memory_sha256, sizeof(r->memory_sha256));
	r->paused_ms = sqlite3_column_int64(st, 12);
	r->created_at = sqlite3_column_int64(st, 13);
	r->network = sqlite3_column_int(st, 14) != 0;
}

static void
fill_snap(sqlite3_stmt *st, void *r)
{
	row_to_snap(st, r);
}

int
store_snap_get(struct store *s, const char *id, struct snap_record *r,
    char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "SELECT " SNAP_COLUMNS " FROM snapshots WHERE id = ?1",
	    "snapshots", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	return store_one(s, st, fill_snap, r, "snapshot", err, errlen);
}

int
store_snap_list(struct store *s, const char *workspace,
    struct snap_record **out, size_t *n, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	*out = NULL;
	*n = 0;
	st = store_prepare(s, workspace != NULL ?
	    "SELECT " SNAP_COLUMNS " FROM snapshots WHERE workspace = ?1 "
	    "ORDER BY created_at, id" :
	    "SELECT " SNAP_COLUMNS " FROM snapshots ORDER BY created_at, id",
	    "snapshots", err, errlen);
	if (st == NULL)
		return -1;
	if (workspace != NULL)
		sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	return store_collect(s, st, sizeof(**out), fill_snap, (void **)out,
	    n, "snapshots", err, errlen);
}

int
store_snap_delete(struct store *s, const char *id, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "DELETE FROM snapshots WHERE id = ?1", "snapshots", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	return store_done(s, st, "snapshots", err, errlen);
}

/* The warm pool's: a ready snapshot taken for one use (never listed). */
int
store_snap_take(struct store *s, const char *id, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s,
	    "UPDATE snapshots SET state = 'fork' WHERE id = ?1 AND "
	    "state = 'ready'", "snapshots", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	if (store_done(s, st, "snapshots", err, errlen) == -1)
		return -1;
	if (sqlite3_changes(sqldb_handle(s->db)) != 1) {
		snprintf(err, errlen, "snapshot %s: not ready", id);
		return -1;
	}
	return 0;
}

/* ---- proposals --------------------------------------------------------- */

#define PROPOSAL_COLUMNS	"id, workspace, tool, request_id, " \
	"args_digest, args, effect, classes, need, requested_at, " \
	"expires_at, state, envelopes, decided_by, outcome"

static char *
col_dup(sqlite3_stmt *st, int col)
{
	const char *t = (const char *)sqlite3_column_text(st, col);
	char *d = strdup(t != NULL ? t : "");

	if (d == NULL)
		fatal("strdup");
	return d;
}

static void
col_copy(sqlite3_stmt *st, int col, char *dst, size_t dstsz)
{
	const char *t = (const char *)sqlite3_column_text(st, col);

	snprintf(dst, dstsz, "%s", t != NULL ? t : "");
}

static void
fill_proposal(sqlite3_stmt *st, void *out)
{
	struct proposal_record *r = out;

	memset(r, 0, sizeof(*r));
	col_copy(st, 0, r->id, sizeof(r->id));
	col_copy(st, 1, r->workspace, sizeof(r->workspace));
	col_copy(st, 2, r->tool, sizeof(r->tool));
	col_copy(st, 3, r->request_id, sizeof(r->request_id));
	col_copy(st, 4, r->args_digest, sizeof(r->args_digest));
	r->args = col_dup(st, 5);
	r->effect = col_dup(st, 6);
	col_copy(st, 7, r->classes, sizeof(r->classes));
	r->need = sqlite3_column_int(st, 8);
	r->requested_at = sqlite3_column_int64(st, 9);
	r->expires_at = sqlite3_column_int64(st, 10);
	col_copy(st, 11, r->state, sizeof(r->state));
	r->envelopes = col_dup(st, 12);
	col_copy(st, 13, r->decided_by, sizeof(r->decided_by));
	col_copy(st, 14, r->outcome, sizeof(r->outcome));
}

void
proposal_record_free(struct proposal_record *r)
{
	if (r == NULL)
		return;
	free(r->args);
	free(r->effect);
	free(r->envelopes);
	r->args = r->effect = r->envelopes = NULL;
}

void
proposal_records_free(struct proposal_record *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		proposal_record_free(&v[i]);
	free(v);
}

int
store_proposal_insert(struct store *s, const struct proposal_record *r,
    char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "INSERT INTO proposals ("
	    PROPOSAL_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
	    "?10, ?11, ?12, ?13, ?14, ?15)", "proposals", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->workspace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, r->tool, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, r->request_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, r->args_digest, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, r->args, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, r->effect, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, r->classes, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 9, r->need);
	sqlite3_bind_int64(st, 10, r->requested_at);
	sqlite3_bind_int64(st, 11, r->expires_at);
	sqlite3_bind_text(st, 12, r->state, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 13, r->envelopes != NULL ? r->envelopes : "",
	    -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 14, r->decided_by, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 15, r->outcome, -1, SQLITE_STATIC);
	return store_done(s, st, "proposals", err, errlen);
}

/* One row of st into r: 0, 1 when there is none, -1 with err. */
static int
proposal_one(struct store *s, sqlite3_stmt *st, struct proposal_record *r,
    char *err, size_t errlen)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		fill_proposal(st, r);
	else if (rc != SQLITE_DONE)
		step_fail(s, "proposals", err, errlen);
	sqldb_release(s->db, st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? 1 : -1;
}

int
store_proposal_get(struct store *s, const char *id,
    struct proposal_record *r, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "SELECT " PROPOSAL_COLUMNS
	    " FROM proposals WHERE id = ?1", "proposals", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	return proposal_one(s, st, r, err, errlen);
}

int
store_proposal_find(struct store *s, const char *workspace,
    const char *tool, const char *request_id, const char *digest,
    struct proposal_record *r, char *err, size_t errlen)
{
	sqlite3_stmt *st;

	if (request_id[0] != '\0') {
		st = store_prepare(s, "SELECT " PROPOSAL_COLUMNS " FROM "
		    "proposals WHERE workspace = ?1 AND request_id = ?2 "
		    "ORDER BY requested_at DESC, rowid DESC LIMIT 1",
		    "proposals", err, errlen);
		if (st == NULL)
			return -1;
		sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, request_id, -1, SQLITE_STATIC);
		return proposal_one(s, st, r, err, errlen);
	}
	st = store_prepare(s, "SELECT " PROPOSAL_COLUMNS " FROM proposals "
	    "WHERE workspace = ?1 AND tool = ?2 AND args_digest = ?3 AND "
	    "request_id = '' AND state <> 'used' AND NOT (state IN "
	    "('denied', 'expired') AND outcome = 'told') "
	    "ORDER BY requested_at DESC, rowid DESC LIMIT 1", "proposals",
	    err, errlen);
	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, tool, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, digest, -1, SQLITE_STATIC);
	return proposal_one(s, st, r, err, errlen);
}

int
store_proposal_update(struct store *s, const struct proposal_record *r,
    char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "UPDATE proposals SET "
	    "state = ?2, envelopes = ?3, decided_by = ?4, outcome = ?5 "
	    "WHERE id = ?1", "proposals", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->state, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, r->envelopes != NULL ? r->envelopes : "",
	    -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, r->decided_by, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, r->outcome, -1, SQLITE_STATIC);
	return store_done(s, st, "proposals", err, errlen);
}

int
store_proposal_take(struct store *s, const char *id, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "UPDATE proposals SET "
	    "state = 'used' WHERE id = ?1 AND state <> 'used'", "proposals",
	    err, errlen);
	int rc;

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		step_fail(s, "proposals", err, errlen);
		sqldb_release(s->db, st);
		return -1;
	}
	sqldb_release(s->db, st);
	return sqlite3_changes(sqldb_handle(s->db)) == 1 ? 0 : 1;
}

int
store_proposal_pending(struct store *s, const char *workspace,
    long long now, long long *n, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "SELECT COUNT(*) FROM proposals "
	    "WHERE workspace = ?1 AND state IN ('pending', 'approved') AND "
	    "expires_at > ?2", "proposals", err, errlen);
	int rc;

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, now);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		*n = sqlite3_column_int64(st, 0);
	else
		step_fail(s, "proposals", err, errlen);
	sqldb_release(s->db, st);
	return rc == SQLITE_ROW ? 0 : -1;
}

int
store_proposal_list(struct store *s, long long since,
    struct proposal_record **out, size_t *n, char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "SELECT " PROPOSAL_COLUMNS
	    " FROM proposals WHERE state IN ('pending', 'approved', "
	    "'denied') OR (state = 'used' AND requested_at >= ?1) OR "
	    "(state = 'expired' AND expires_at >= ?1) "
	    "ORDER BY requested_at DESC, rowid DESC LIMIT 1000", "proposals",
	    err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_int64(st, 1, since);
	return store_collect(s, st, sizeof(**out), fill_proposal,
	    (void **)out, n, "proposals", err, errlen);
}

int
store_proposals_delete_workspace(struct store *s, const char *workspace,
    char *err, size_t errlen)
{
	sqlite3_stmt *st = store_prepare(s, "DELETE FROM proposals WHERE "
	    "workspace = ?1", "proposals", err, errlen);

	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, workspace, -1, SQLITE_STATIC);
	return store_done(s, st, "proposals", err, errlen);
}

/* ---- file identities (store_digest_get, and snapshot_files.c) ------- */

int
file_identity_of(const char *path, struct file_identity *id)
{
	struct stat sb;

	if (stat(path, &sb) == -1)
		return -1;
	id->dev = (long long)sb.st_dev;
	id->ino = (long long)sb.st_ino;
	id->size = (long long)sb.st_size;
	id->mtime_ns = (long long)sb.st_mtim.tv_sec * 1000000000LL +
	    sb.st_mtim.tv_nsec;
	id->ctime_ns = (long long)sb.st_ctim.tv_sec * 1000000000LL +
	    sb.st_ctim.tv_nsec;
	return 0;
}

int
file_identity_same(const struct file_identity *a,
    const struct file_identity *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	    a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}
