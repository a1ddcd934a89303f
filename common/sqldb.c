/*
 * The SQLite scaffolding authd and vmmd share; see sqldb.h.  Runs in the
 * daemon that owns the database, after it dropped what privileges it
 * drops, so "owned by us" means the effective uid.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sqldb.h"

/*
 * Statements are prepared once and kept: preparing a query can cost more
 * than running it.  busy marks one handed out and not yet released.
 */
#define SQLDB_STMTS	64
#define SQLDB_ERR_MAX	256

struct sqldb_stmt {
	const char	*sql;
	sqlite3_stmt	*st;
	int		 busy;
};

struct sqldb {
	sqlite3			*db;
	char			*path;
	struct sqldb_stmt	 stmts[SQLDB_STMTS];
	size_t			 nstmts;
	char			 err[SQLDB_ERR_MAX];
	int			 errcode;
	/* As opened: what sqldb_open_more sets another connection up by. */
	int			 flags;
	int			 busy_ms;
	int			 exclusive;
	/* deferred_sync: the WAL's descriptor (-1 until the first sync),
	 * and whether a commit came since the last sync. */
	int			 deferred;
	int			 walfd;
	volatile int		 unsynced;
};

static int	note_commit(void *);

static void __attribute__((format(printf, 3, 4)))
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Notes the handle's last failure as this call's. */
static void
note_fail(struct sqldb *d)
{
	d->errcode = sqlite3_errcode(d->db);
	snprintf(d->err, sizeof(d->err), "%s", sqlite3_errmsg(d->db));
}

const char *
sqldb_errmsg(const struct sqldb *d)
{
	return d->err;
}

int
sqldb_busy(const struct sqldb *d)
{
	return (d->errcode & 0xff) == SQLITE_BUSY ||
	    (d->errcode & 0xff) == SQLITE_LOCKED;
}

sqlite3 *
sqldb_handle(struct sqldb *d)
{
	return d->db;
}

const char *
sqldb_path(const struct sqldb *d)
{
	return d->path;
}

int
sqldb_exec(struct sqldb *d, const char *sql)
{
	if (sqlite3_exec(d->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		note_fail(d);
		return -1;
	}
	return 0;
}

int
sqldb_begin(struct sqldb *d)
{
	return sqldb_exec(d, "BEGIN IMMEDIATE");
}

int
sqldb_commit(struct sqldb *d)
{
	if (sqldb_exec(d, "COMMIT") == -1) {
		/* The reason stays in d->err; the rollback does not touch it. */
		if (sqlite3_get_autocommit(d->db) == 0)
			(void)sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
		return -1;
	}
	return 0;
}

void
sqldb_rollback(struct sqldb *d)
{
	if (sqlite3_get_autocommit(d->db) == 0)
		(void)sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
}

sqlite3_stmt *
sqldb_prepare(struct sqldb *d, const char *sql)
{
	struct sqldb_stmt *c;
	sqlite3_stmt *st;

	for (size_t i = 0; i < d->nstmts; i++) {
		c = &d->stmts[i];
		if (c->sql == sql && !c->busy) {
			c->busy = 1;
			return c->st;
		}
	}
	if (sqlite3_prepare_v3(d->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st,
	    NULL) != SQLITE_OK) {
		note_fail(d);
		return NULL;
	}
	/* A full cache still serves: that statement is finalized on release. */
	if (d->nstmts < SQLDB_STMTS) {
		c = &d->stmts[d->nstmts++];
		c->sql = sql;
		c->st = st;
		c->busy = 1;
	}
	return st;
}

void
sqldb_release(struct sqldb *d, sqlite3_stmt *st)
{
	if (st == NULL)
		return;
	for (size_t i = 0; i < d->nstmts; i++)
		if (d->stmts[i].st == st) {
			(void)sqlite3_reset(st);
			(void)sqlite3_clear_bindings(st);
			d->stmts[i].busy = 0;
			return;
		}
	sqlite3_finalize(st);
}

void
sqldb_column_text(sqlite3_stmt *st, int col, char *buf, size_t len)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	snprintf(buf, len, "%s", t != NULL ? (const char *)t : "");
}

size_t
sqldb_cached(const struct sqldb *d)
{
	return d->nstmts;
}

/* One-row PRAGMA: its first column as text into buf; 0 or -1. */
static int
pragma_text(struct sqldb *d, const char *sql, char *buf, size_t len)
{
	sqlite3_stmt *st;
	const unsigned char *t;
	int rc = -1;

	if (sqlite3_prepare_v2(d->db, sql, -1, &st, NULL) != SQLITE_OK) {
		note_fail(d);
		return -1;
	}
	if (sqlite3_step(st) == SQLITE_ROW) {
		t = sqlite3_column_text(st, 0);
		snprintf(buf, len, "%s", t != NULL ? (const char *)t : "");
		rc = 0;
	} else
		note_fail(d);
	sqlite3_finalize(st);
	return rc;
}

int
sqldb_user_version(struct sqldb *d)
{
	char buf[32];
	char *end;
	long v;

	if (pragma_text(d, "PRAGMA user_version", buf, sizeof(buf)) == -1)
		return -1;
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0 || v > 0x7fffffff)
		return -1;
	return (int)v;
}

/*
 * Makes sure path is a file the caller may trust before SQLite opens it:
 * a new one is created 0600 with O_EXCL (SQLite would follow the umask),
 * an existing one must be ours and closed to others.
 */
static int
check_file(const char *path, const struct sqldb_opts *o, char *err,
    size_t errlen)
{
	struct stat sb;
	mode_t mode;
	int fd;

	if (lstat(path, &sb) == -1) {
		if (errno != ENOENT) {
			seterr(err, errlen, "database %s: %s", path,
			    strerror(errno));
			return -1;
		}
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
		if (fd == -1) {
			seterr(err, errlen, "database %s: cannot create: %s",
			    path, strerror(errno));
			return -1;
		}
		/* The umask cannot widen 0600, but make it explicit. */
		if (fchmod(fd, 0600) == -1) {
			seterr(err, errlen, "database %s: chmod: %s", path,
			    strerror(errno));
			close(fd);
			return -1;
		}
		close(fd);
		return 0;
	}
	mode = sb.st_mode & 07777;
	if (S_ISLNK(sb.st_mode)) {
		seterr(err, errlen, "database %s: is a symbolic link, not a "
		    "regular file; name the file itself", path);
		return -1;
	}
	if (!S_ISREG(sb.st_mode)) {
		seterr(err, errlen, "database %s: not a regular file", path);
		return -1;
	}
	if (sb.st_uid != geteuid()) {
		seterr(err, errlen, "database %s: owned by uid %u, not by "
		    "%s's uid %u", path, (unsigned int)sb.st_uid, o->daemon,
		    (unsigned int)geteuid());
		return -1;
	}
	if ((mode & o->forbidden_mode) != 0) {
		if ((o->forbidden_mode & 044) != 0)
			seterr(err, errlen, "database %s: mode %04o gives "
			    "access to others; it must be 0600", path,
			    (unsigned int)mode);
		else
			seterr(err, errlen, "database %s: mode %04o lets "
			    "others write it; it must not be group or other "
			    "writable (0600)", path, (unsigned int)mode);
		return -1;
	}
	if ((mode & 0600) != 0600) {
		seterr(err, errlen, "database %s: mode %04o is not readable "
		    "and writable by its owner; it must be 0600", path,
		    (unsigned int)mode);
		return -1;
	}
	return 0;
}

/* Brings user_version up to o->nmigrations, one transaction a step. */
static int
migrate(struct sqldb *d, const struct sqldb_opts *o, char *err,
    size_t errlen)
{
	int have = sqldb_user_version(d);
	char sql[64];

	if (have < 0) {
		seterr(err, errlen, "database %s: cannot read schema version: "
		    "%s", d->path, d->err);
		return -1;
	}
	if (have > o->nmigrations) {
		seterr(err, errlen, "database %s: schema version %d is newer "
		    "than this %s knows (%d); refusing to touch it", d->path,
		    have, o->daemon, o->nmigrations);
		return -1;
	}
	for (int v = have; v < o->nmigrations; v++) {
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		if (sqldb_begin(d) == -1 || sqldb_exec(d, o->migrations[v]) ==
		    -1 || sqldb_exec(d, sql) == -1 || sqldb_commit(d) == -1) {
			seterr(err, errlen, "database %s: migration to schema "
			    "%d failed: %s", d->path, v + 1, d->err);
			sqldb_rollback(d);
			return -1;
		}
	}
	return 0;
}

/* The pragmas every store runs with, and the checks before its data. */
static int
configure(struct sqldb *d, const struct sqldb_opts *o, char *err,
    size_t errlen)
{
	char buf[128];

	if (sqlite3_db_readonly(d->db, "main") == 1) {
		seterr(err, errlen, "database %s: opened read-only; %s needs "
		    "to write it", d->path, o->daemon);
		return -1;
	}
	/*
	 * Exclusive locking takes the file locks once instead of around
	 * every statement, keeps the WAL index in memory, and makes a
	 * second opener fail instead of sharing the file.
	 */
	if (o->exclusive && sqldb_exec(d, "PRAGMA locking_mode = EXCLUSIVE")
	    == -1) {
		seterr(err, errlen, "database %s: %s", d->path, d->err);
		return -1;
	}
	/* The first read of the header: a non-database fails here. */
	if (pragma_text(d, "PRAGMA journal_mode = WAL", buf, sizeof(buf)) ==
	    -1) {
		if (sqldb_busy(d))
			seterr(err, errlen, "database %s: %s (is another %s "
			    "using it?)", d->path, d->err, o->daemon);
		else
			seterr(err, errlen, "database %s: not a usable "
			    "database (%s); it was left untouched", d->path,
			    d->err);
		return -1;
	}
	if (strcmp(buf, "wal") != 0) {
		seterr(err, errlen, "database %s: cannot switch to WAL journal "
		    "mode (got %s); is its directory writable?", d->path,
		    buf[0] != '\0' ? buf : "nothing");
		return -1;
	}
	/*
	 * FULL: what was committed survives power loss, not only a kill.
	 * deferred_sync: what was committed and then synced (sqldb_sync).
	 */
	if (sqldb_exec(d, o->deferred_sync ? "PRAGMA synchronous = NORMAL" :
	    "PRAGMA synchronous = FULL") == -1 ||
	    sqldb_exec(d, "PRAGMA foreign_keys = ON") == -1) {
		seterr(err, errlen, "database %s: %s", d->path, d->err);
		return -1;
	}
	if (pragma_text(d, "PRAGMA quick_check", buf, sizeof(buf)) == -1) {
		seterr(err, errlen, "database %s: integrity check failed: %s",
		    d->path, d->err);
		return -1;
	}
	if (strcmp(buf, "ok") != 0) {
		seterr(err, errlen, "database %s: integrity check failed: "
		    "%.120s", d->path, buf);
		return -1;
	}
	return 0;
}

/* Opens d->path with d's flags and busy wait. */
static int
db_connect(struct sqldb *d, char *err, size_t errlen)
{
	int rc;

	rc = sqlite3_open_v2(d->path, &d->db, d->flags, NULL);
	if (rc != SQLITE_OK) {
		seterr(err, errlen, "database %s: %s", d->path, d->db != NULL ?
		    sqlite3_errmsg(d->db) : sqlite3_errstr(rc));
		return -1;
	}
	sqlite3_extended_result_codes(d->db, 1);
	sqlite3_busy_timeout(d->db, d->busy_ms);
	return 0;
}

struct sqldb *
sqldb_open(const char *path, const struct sqldb_opts *o, char *err,
    size_t errlen)
{
	struct sqldb *d;

	if ((d = calloc(1, sizeof(*d))) == NULL ||
	    (d->path = strdup(path)) == NULL) {
		free(d);
		seterr(err, errlen, "database %s: out of memory", path);
		return NULL;
	}
	d->flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW |
	    (o->serialized ? SQLITE_OPEN_FULLMUTEX : SQLITE_OPEN_NOMUTEX);
	d->busy_ms = o->busy_ms;
	d->exclusive = o->exclusive;
	d->walfd = -1;
	if (check_file(path, o, err, errlen) == -1 ||
	    db_connect(d, err, errlen) == -1 ||
	    configure(d, o, err, errlen) == -1 ||
	    migrate(d, o, err, errlen) == -1)
		goto fail;
	if (o->deferred_sync) {
		d->deferred = 1;
		d->unsynced = 1;	/* the migrations, if any */
		sqlite3_commit_hook(d->db, note_commit, d);
	}
	return d;
fail:
	sqldb_close(d);
	return NULL;
}

struct sqldb *
sqldb_open_more(const struct sqldb *first, char *err, size_t errlen)
{
	struct sqldb *d;

	if (first->exclusive) {
		seterr(err, errlen, "database %s: locked for its one "
		    "connection", first->path);
		return NULL;
	}
	if ((d = calloc(1, sizeof(*d))) == NULL ||
	    (d->path = strdup(first->path)) == NULL) {
		free(d);
		seterr(err, errlen, "database %s: out of memory", first->path);
		return NULL;
	}
	d->walfd = -1;
	d->flags = first->flags;
	d->busy_ms = first->busy_ms;
	/* The journal mode is the file's; these two are each connection's. */
	if (db_connect(d, err, errlen) == -1 ||
	    sqldb_exec(d, "PRAGMA synchronous = FULL") == -1 ||
	    sqldb_exec(d, "PRAGMA foreign_keys = ON") == -1) {
		if (d->db != NULL && d->err[0] != '\0')
			seterr(err, errlen, "database %s: %s", d->path, d->err);
		sqldb_close(d);
		return NULL;
	}
	return d;
}

/* sqlite3_commit_hook: 0 lets the commit go on. */
static int
note_commit(void *arg)
{
	struct sqldb *d = arg;

	d->unsynced = 1;
	return 0;
}

int
sqldb_sync(struct sqldb *d, char *err, size_t errlen)
{
	char wal[PATH_MAX];
	struct stat st;

	if (!d->deferred || !d->unsynced)
		return 0;
	d->unsynced = 0;
	/* The log keeps its inode while the database is open; it is made at
	 * the first write and goes when the last connection closes. */
	if (d->walfd != -1 && (fstat(d->walfd, &st) == -1 ||
	    st.st_nlink == 0)) {
		close(d->walfd);
		d->walfd = -1;
	}
	if (d->walfd == -1) {
		snprintf(wal, sizeof(wal), "%s-wal", d->path);
		if ((d->walfd = open(wal, O_RDONLY | O_CLOEXEC |
		    O_NOFOLLOW)) == -1) {
			if (errno == ENOENT)
				return 0;	/* all of it is in the file */
			d->unsynced = 1;
			seterr(err, errlen, "database %s: %s: %s", d->path, wal,
			    strerror(errno));
			return -1;
		}
	}
	if (fdatasync(d->walfd) == -1) {
		d->unsynced = 1;
		seterr(err, errlen, "database %s: fdatasync of its log: %s",
		    d->path, strerror(errno));
		return -1;
	}
	return 0;
}

void
sqldb_close(struct sqldb *d)
{
	if (d == NULL)
		return;
	if (d->walfd != -1)
		close(d->walfd);
	for (size_t i = 0; i < d->nstmts; i++)
		sqlite3_finalize(d->stmts[i].st);
	sqlite3_close(d->db);
	free(d->path);
	free(d);
}
