/*
 * The SQLite scaffolding of the daemons that keep a database (authd's
 * credential store, vmmd's state store): opening with owner and mode
 * checks, WAL and a busy timeout, user_version migrations, a cache of
 * prepared statements and transaction helpers.  What the tables hold
 * stays with each store.
 */
#ifndef MCPVM_COMMON_SQLDB_H
#define MCPVM_COMMON_SQLDB_H

#include <sys/types.h>

#include <stddef.h>

#include <sqlite3.h>

struct sqldb;

#define SQLDB_MIGRATIONS(m) \
	.migrations = (m), .nmigrations = (int)(sizeof(m) / sizeof((m)[0]))

struct sqldb_opts {
	/* Who opens it, for errors: "authd", "vmmd". */
	const char		*daemon;
	/*
	 * migrations[i] takes user_version i to i + 1, each in its own
	 * transaction.  Append only; a shipped entry is never edited.  A
	 * file whose user_version is above nmigrations is refused.
	 */
	const char *const	*migrations;
	int			 nmigrations;	/* SQLDB_MIGRATIONS sets both */
	int			 busy_ms;	/* sqlite3_busy_timeout */
	/* PRAGMA locking_mode = EXCLUSIVE: the opener is its only user. */
	int			 exclusive;
	/* SQLITE_OPEN_FULLMUTEX for a handle threads share; else NOMUTEX. */
	int			 serialized;
	/*
	 * Permission bits an existing file must not have: 077 (nobody
	 * else may read or write it) or 022 (nobody else may write it).
	 */
	mode_t			 forbidden_mode;
	/*
	 * Commits do not wait for the disk (synchronous = NORMAL, still
	 * whole after a crash of the process); the opener makes them
	 * durable with sqldb_sync before anyone learns of them, so that
	 * many commits of one event-loop turn cost one fdatasync.  Only
	 * the first connection: sqldb_open_more's stay FULL.
	 */
	int			 deferred_sync;
};

/*
 * The two ways a daemon keeps its database, as initializers of its
 * sqldb_opts.  SQLDB_PRIVATE: the daemon is the file's only user, from
 * one thread, so exclusive locking and a short wait (nobody else should
 * hold a lock), and nobody else may read it (authd's credentials).
 * SQLDB_SHARED: threads share the handle, and an operator's read-only
 * sqlite3 (mode=ro) may hold a lock for a moment, hence the longer wait;
 * nobody else may write it (vmmd's state).
 */
#define SQLDB_PRIVATE(who, m) { .daemon = (who), SQLDB_MIGRATIONS(m), \
	.busy_ms = 1000, .exclusive = 1, .serialized = 0,		\
	.forbidden_mode = 077 }
#define SQLDB_SHARED(who, m) { .daemon = (who), SQLDB_MIGRATIONS(m), \
	.busy_ms = 5000, .exclusive = 0, .serialized = 1,		\
	.forbidden_mode = 022 }

/*
 * Opens or creates the database at path.  A missing file is created
 * mode 0600 with O_EXCL; an existing one must be a regular file (not a
 * symbolic link) owned by the effective uid, readable and writable by
 * it and without any of forbidden_mode's bits.  Then: WAL journal,
 * synchronous = FULL (NORMAL with deferred_sync), foreign keys on, a quick check, and the
 * migrations.  A file that fails any of it is left as it was.  NULL with
 * err naming the file and the problem on failure.
 */
struct sqldb	*sqldb_open(const char *path, const struct sqldb_opts *,
		    char *err, size_t errlen);
/*
 * Another connection to the file first has open, for another thread:
 * first's busy wait and the same pragmas, without the file checks,
 * quick check and migrations first's open did.  Refused for an
 * exclusive one.  Its statement cache and last failure are its own;
 * close it with sqldb_close.  NULL with err.
 */
struct sqldb	*sqldb_open_more(const struct sqldb *first, char *err,
		    size_t errlen);
void		 sqldb_close(struct sqldb *);
/*
 * With deferred_sync: makes every commit so far durable (an fdatasync
 * of the write-ahead log, when something was committed since the last
 * one).  0, or -1 with err.  A no-op otherwise.
 */
int		 sqldb_sync(struct sqldb *, char *err, size_t errlen);

sqlite3		*sqldb_handle(struct sqldb *);
const char	*sqldb_path(const struct sqldb *);

/*
 * Every call below that fails returns -1 (or NULL) and records why: the
 * message and whether the database was busy stay readable through
 * sqldb_errmsg and sqldb_busy until the next failure, even after the
 * rollback that sqldb_commit does.
 */
const char	*sqldb_errmsg(const struct sqldb *);
/* The last failure was SQLITE_BUSY or SQLITE_LOCKED: somebody holds it. */
int		 sqldb_busy(const struct sqldb *);

/* sqlite3_exec of statements that return no rows. */
int		 sqldb_exec(struct sqldb *, const char *sql);

/* PRAGMA user_version, or -1. */
int		 sqldb_user_version(struct sqldb *);

/*
 * A prepared statement for sql, which must be a string that lives as
 * long as the handle (a literal): its address names the statement in the
 * cache.  One already handed out and not yet released is not handed out
 * again; a nested use of the same sql gets a statement of its own.  NULL
 * when sql does not prepare.
 */
sqlite3_stmt	*sqldb_prepare(struct sqldb *, const char *sql);
/* Done with a statement of sqldb_prepare (NULL is fine): reset, kept. */
void		 sqldb_release(struct sqldb *, sqlite3_stmt *);
/* Column col as text into buf (NULL as ""), cut to len - 1 bytes. */
void		 sqldb_column_text(sqlite3_stmt *, int col, char *buf,
		    size_t len);
/* How many statements the cache holds; for tests. */
size_t		 sqldb_cached(const struct sqldb *);

/*
 * BEGIN IMMEDIATE (the write lock now, not halfway through); COMMIT,
 * rolling back when it fails; ROLLBACK when a transaction is open.
 */
int		 sqldb_begin(struct sqldb *);
int		 sqldb_commit(struct sqldb *);
void		 sqldb_rollback(struct sqldb *);

#endif
