/*
 * Unit tests for common/sqldb.c, the SQLite scaffolding of authd's and
 * vmmd's stores, on real database files in a temporary directory.
 */
#include <sys/stat.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "sqldb.h"
#include "../check_run.h"

static char dir[64];
static char path[128];
static char err[256];

static const char *const steps[] = {
	"CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL);",
	"CREATE TABLE u (k TEXT REFERENCES t(k));",
	/* Fails halfway: the table is made, then the insert breaks. */
	"CREATE TABLE w (x INTEGER NOT NULL); INSERT INTO w VALUES (NULL);",
};

static struct sqldb_opts opts;

static void
setup(void)
{
	strcpy(dir, "/dev/shm/mcpvm-sqldb-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/test.db", dir);
	memset(&opts, 0, sizeof(opts));
	opts.daemon = "testd";
	opts.migrations = steps;
	opts.nmigrations = 2;
	opts.busy_ms = 50;
	opts.forbidden_mode = 022;
	err[0] = '\0';
}

static void
teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct sqldb *
open_ok(void)
{
	struct sqldb *d = sqldb_open(path, &opts, err, sizeof(err));

	ck_assert_msg(d != NULL, "%s", err);
	return d;
}

/* Opening fails and err names the file and says want. */
static void
open_refused(const char *want)
{
	ck_assert_ptr_null(sqldb_open(path, &opts, err, sizeof(err)));
	ck_assert_msg(strstr(err, path) != NULL, "%s", err);
	ck_assert_msg(strstr(err, want) != NULL, "want '%s': %s", want, err);
}

static void
make_file(mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

static char *
pragma(struct sqldb *d, const char *sql)
{
	static char buf[64];
	sqlite3_stmt *st;

	ck_assert_int_eq(sqlite3_prepare_v2(sqldb_handle(d), sql, -1, &st,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	snprintf(buf, sizeof(buf), "%s", sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return buf;
}

static int
rows(struct sqldb *d, const char *table)
{
	char sql[64];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
	return atoi(pragma(d, sql));
}

START_TEST(new_file_is_0600_wal_and_migrated)
{
	struct sqldb *d = open_ok();
	struct stat sb;

	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0600);
	ck_assert_int_eq(sb.st_uid, geteuid());
	ck_assert_str_eq(pragma(d, "PRAGMA journal_mode"), "wal");
	ck_assert_str_eq(pragma(d, "PRAGMA synchronous"), "2");
	ck_assert_str_eq(pragma(d, "PRAGMA foreign_keys"), "1");
	ck_assert_int_eq(sqldb_user_version(d), 2);
	ck_assert_str_eq(sqldb_path(d), path);
	/* The foreign key holds: the pragma is not just set but in force. */
	ck_assert_int_eq(sqldb_exec(d, "INSERT INTO u (k) VALUES ('x')"), -1);
	ck_assert_ptr_nonnull(strstr(sqldb_errmsg(d), "FOREIGN KEY"));
	sqldb_close(d);
}
END_TEST

/*
 * deferred_sync: the first connection commits without waiting for the
 * disk and sqldb_sync makes it durable; another connection stays FULL.
 * (That the sync reaches the disk is the kernel's; what is checked here
 * is that it is asked for and succeeds, and that commits go on without.)
 */
START_TEST(deferred_sync_commits_then_syncs_once)
{
	struct sqldb *d, *more;
	char wal[160];
	struct stat sb;

	opts.deferred_sync = 1;
	d = open_ok();
	ck_assert_str_eq(pragma(d, "PRAGMA synchronous"), "1");
	more = sqldb_open_more(d, err, sizeof(err));
	ck_assert_msg(more != NULL, "%s", err);
	ck_assert_str_eq(pragma(more, "PRAGMA synchronous"), "2");
	ck_assert_int_eq(sqldb_sync(d, err, sizeof(err)), 0);
	ck_assert_int_eq(sqldb_exec(d, "INSERT INTO t (k, v) VALUES ('a', 1)"), 0);
	ck_assert_int_eq(sqldb_exec(d, "INSERT INTO t (k, v) VALUES ('b', 2)"), 0);
	snprintf(wal, sizeof(wal), "%s-wal", path);
	ck_assert_int_eq(stat(wal, &sb), 0);
	ck_assert_msg(sqldb_sync(d, err, sizeof(err)) == 0, "%s", err);
	/* Nothing new: no second sync is needed, and none fails. */
	ck_assert_int_eq(sqldb_sync(d, err, sizeof(err)), 0);
	ck_assert_int_eq(rows(more, "t"), 2);
	sqldb_close(more);
	sqldb_close(d);
	/* A connection without it has nothing to sync. */
	opts.deferred_sync = 0;
	d = open_ok();
	ck_assert_str_eq(pragma(d, "PRAGMA synchronous"), "2");
	ck_assert_int_eq(sqldb_sync(d, err, sizeof(err)), 0);
	sqldb_close(d);
}
END_TEST

START_TEST(migrations_run_once_and_in_order)
{
	struct sqldb *d;

	opts.nmigrations = 1;
	d = open_ok();
	ck_assert_int_eq(sqldb_user_version(d), 1);
	ck_assert_int_eq(sqldb_exec(d, "INSERT INTO t VALUES ('a', 1)"), 0);
	sqldb_close(d);
	/* A newer binary adds step 2 and keeps step 1's table and rows. */
	opts.nmigrations = 2;
	d = open_ok();
	ck_assert_int_eq(sqldb_user_version(d), 2);
	ck_assert_int_eq(rows(d, "t"), 1);
	ck_assert_int_eq(rows(d, "u"), 0);
	sqldb_close(d);
	d = open_ok();
	ck_assert_int_eq(rows(d, "t"), 1);
	sqldb_close(d);
}
END_TEST

START_TEST(newer_schema_is_refused)
{
	struct sqldb *d = open_ok();
	struct stat before, after;

	ck_assert_int_eq(sqldb_exec(d, "PRAGMA user_version = 7"), 0);
	sqldb_close(d);
	ck_assert_int_eq(stat(path, &before), 0);
	open_refused("schema version 7 is newer than this testd knows (2)");
	ck_assert_int_eq(stat(path, &after), 0);
	ck_assert_int_eq(before.st_size, after.st_size);
	ck_assert_int_eq(before.st_mtime, after.st_mtime);
}
END_TEST

START_TEST(failed_migration_rolls_back)
{
	struct sqldb *d;

	opts.nmigrations = 3;
	open_refused("migration to schema 3 failed");
	ck_assert_ptr_nonnull(strstr(err, "NOT NULL"));
	/* Steps 1 and 2 committed; step 3 left nothing behind. */
	opts.nmigrations = 2;
	d = open_ok();
	ck_assert_int_eq(sqldb_user_version(d), 2);
	ck_assert_int_eq(sqldb_exec(d, "SELECT * FROM w"), -1);
	ck_assert_ptr_nonnull(strstr(sqldb_errmsg(d), "no such table"));
	sqldb_close(d);
}
END_TEST

START_TEST(mode_others_may_write_is_refused)
{
	make_file(0666);
	open_refused("mode 0666");
	ck_assert_ptr_nonnull(strstr(err, "group or other writable"));
	ck_assert_int_eq(chmod(path, 0620), 0);
	open_refused("mode 0620");
}
END_TEST

START_TEST(mode_others_may_read_per_policy)
{
	struct sqldb *d;

	make_file(0640);
	/* 022 allows readers; 077 (authd's) allows nobody else. */
	d = open_ok();
	sqldb_close(d);
	opts.forbidden_mode = 077;
	open_refused("mode 0640 gives access to others; it must be 0600");
}
END_TEST

START_TEST(owner_must_read_and_write)
{
	make_file(0400);
	open_refused("not readable and writable by its owner");
}
END_TEST

START_TEST(other_owner_is_refused)
{
	struct stat sb;

	make_file(0600);
	if (geteuid() != 0) {
		/* Only root can give a file away: nothing to test. */
		return;
	}
	ck_assert_int_eq(chown(path, 4242, 4242), 0);
	open_refused("owned by uid 4242, not by testd's uid 0");
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_size, 0);
}
END_TEST

START_TEST(symlink_is_refused_and_not_followed)
{
	char target[160];
	struct stat sb;

	snprintf(target, sizeof(target), "%s/target.db", dir);
	ck_assert_int_eq(symlink(target, path), 0);
	open_refused("symbolic link");
	ck_assert_int_eq(stat(target, &sb), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(directory_is_refused)
{
	ck_assert_int_eq(mkdir(path, 0700), 0);
	open_refused("not a regular file");
}
END_TEST

START_TEST(garbage_is_refused_and_left_alone)
{
	char buf[4096], back[4096];
	FILE *f;
	int fd;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 13 + 5);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(fd);
	open_refused("not a usable database");
	ck_assert_ptr_nonnull(strstr(err, "left untouched"));
	ck_assert_ptr_nonnull((f = fopen(path, "rb")));
	ck_assert_uint_eq(fread(back, 1, sizeof(back), f), sizeof(back));
	fclose(f);
	ck_assert_int_eq(memcmp(buf, back, sizeof(buf)), 0);
}
END_TEST

START_TEST(exclusive_refuses_a_second_opener)
{
	struct sqldb *d;

	opts.exclusive = 1;
	d = open_ok();
	open_refused("(is another testd using it?)");
	ck_assert_ptr_nonnull(strstr(err, "locked"));
	sqldb_close(d);
	sqldb_close(open_ok());
}
END_TEST

static const char sel_sql[] = "SELECT v FROM t WHERE k = ?1";

START_TEST(statement_cache)
{
	struct sqldb *d = open_ok();
	sqlite3_stmt *a, *b, *c;
	char *x;
	static char many[80][48];

	a = sqldb_prepare(d, sel_sql);
	ck_assert_ptr_nonnull(a);
	/* Handed out and not released: a nested use gets its own. */
	b = sqldb_prepare(d, sel_sql);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_ne(a, b);
	ck_assert_uint_eq(sqldb_cached(d), 2);
	sqlite3_bind_text(a, 1, "k", -1, SQLITE_STATIC);
	sqldb_release(d, a);
	sqldb_release(d, b);
	/* Released: the same one again, reset and without its bindings. */
	c = sqldb_prepare(d, sel_sql);
	ck_assert(c == a || c == b);
	ck_assert_ptr_nonnull((x = sqlite3_expanded_sql(c)));
	ck_assert_msg(strstr(x, "k = NULL") != NULL, "%s", x);
	sqlite3_free(x);
	ck_assert_int_eq(sqlite3_step(c), SQLITE_DONE);
	sqldb_release(d, c);
	ck_assert_uint_eq(sqldb_cached(d), 2);
	sqldb_release(d, NULL);
	/* Bad SQL: NULL and the reason. */
	ck_assert_ptr_null(sqldb_prepare(d, "SELECT nope FROM nowhere"));
	ck_assert_ptr_nonnull(strstr(sqldb_errmsg(d), "no such table"));
	/* Past the cache's size statements still work, uncached. */
	for (int i = 0; i < 80; i++) {
		sqlite3_stmt *st;

		snprintf(many[i], sizeof(many[i]), "SELECT %d", i);
		ck_assert_ptr_nonnull((st = sqldb_prepare(d, many[i])));
		ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
		ck_assert_int_eq(sqlite3_column_int(st, 0), i);
		sqldb_release(d, st);
	}
	ck_assert_uint_eq(sqldb_cached(d), 64);
	sqldb_close(d);
}
END_TEST

START_TEST(transactions)
{
	struct sqldb *d = open_ok();

	ck_assert_int_eq(sqldb_begin(d), 0);
	ck_assert_int_eq(sqldb_exec(d, "INSERT INTO t VALUES ('a', 1)"), 0);
	sqldb_rollback(d);
	ck_assert_int_eq(rows(d, "t"), 0);
	/* Without a transaction open, rollback is harmless. */
	sqldb_rollback(d);
	ck_assert_int_eq(sqldb_begin(d), 0);
	ck_assert_int_eq(sqldb_exec(d, "INSERT INTO t VALUES ('b', 2)"), 0);
	ck_assert_int_eq(sqldb_commit(d), 0);
	sqldb_close(d);
	d = open_ok();
	ck_assert_int_eq(rows(d, "t"), 1);
	/* A failed commit says why and leaves no transaction open. */
	ck_assert_int_eq(sqldb_commit(d), -1);
	ck_assert_ptr_nonnull(strstr(sqldb_errmsg(d), "no transaction"));
	ck_assert_int_ne(sqlite3_get_autocommit(sqldb_handle(d)), 0);
	sqldb_close(d);
}
END_TEST

START_TEST(begin_while_another_writes_is_busy)
{
	struct sqldb *d = open_ok();
	sqlite3 *other;

	ck_assert_int_eq(sqlite3_open(path, &other), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqldb_begin(d), -1);
	ck_assert(sqldb_busy(d));
	ck_assert_ptr_nonnull(strstr(sqldb_errmsg(d), "locked"));
	sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(other);
	ck_assert_int_eq(sqldb_begin(d), 0);
	ck_assert_int_eq(sqldb_commit(d), 0);
	sqldb_close(d);
}
END_TEST

/* A second connection, as a worker thread takes: it sees what the first
 * committed, its transaction holds the first's writes off, and it keeps
 * its own failures. */
START_TEST(open_more_is_a_connection_of_its_own)
{
	struct sqldb *d = open_ok(), *more;
	sqlite3_stmt *st;

	ck_assert_int_eq(sqldb_exec(d, "INSERT INTO t VALUES ('a', 1)"), 0);
	more = sqldb_open_more(d, err, sizeof(err));
	ck_assert_msg(more != NULL, "%s", err);
	ck_assert_str_eq(sqldb_path(more), path);
	ck_assert_ptr_nonnull((st = sqldb_prepare(more, sel_sql)));
	sqlite3_bind_text(st, 1, "a", -1, SQLITE_STATIC);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ck_assert_int_eq(sqlite3_column_int(st, 0), 1);
	sqldb_release(more, st);
	ck_assert_int_eq(sqldb_begin(more), 0);
	ck_assert_int_eq(sqldb_exec(more, "INSERT INTO t VALUES ('b', 2)"), 0);
	ck_assert_int_eq(sqldb_begin(d), -1);
	ck_assert(sqldb_busy(d));
	ck_assert(!sqldb_busy(more));
	ck_assert_int_eq(sqldb_commit(more), 0);
	ck_assert_int_eq(sqldb_exec(d, "UPDATE t SET v = 3 WHERE k = 'b'"), 0);
	/* Foreign keys are each connection's pragma: on in this one too. */
	ck_assert_int_eq(sqldb_exec(more, "INSERT INTO u VALUES ('none')"),
	    -1);
	ck_assert_ptr_nonnull(strstr(sqldb_errmsg(more), "FOREIGN KEY"));
	ck_assert_str_eq(sqldb_errmsg(d), "database is locked");
	sqldb_close(more);
	sqldb_close(d);
	/* An exclusive file has one connection. */
	opts.exclusive = 1;
	d = open_ok();
	ck_assert_ptr_null(sqldb_open_more(d, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "one connection"));
	sqldb_close(d);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("sqldb");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, new_file_is_0600_wal_and_migrated);
	tcase_add_test(tc, migrations_run_once_and_in_order);
	tcase_add_test(tc, deferred_sync_commits_then_syncs_once);
	tcase_add_test(tc, newer_schema_is_refused);
	tcase_add_test(tc, failed_migration_rolls_back);
	tcase_add_test(tc, mode_others_may_write_is_refused);
	tcase_add_test(tc, mode_others_may_read_per_policy);
	tcase_add_test(tc, owner_must_read_and_write);
	tcase_add_test(tc, other_owner_is_refused);
	tcase_add_test(tc, symlink_is_refused_and_not_followed);
	tcase_add_test(tc, directory_is_refused);
	tcase_add_test(tc, garbage_is_refused_and_left_alone);
	tcase_add_test(tc, exclusive_refuses_a_second_opener);
	tcase_add_test(tc, statement_cache);
	tcase_add_test(tc, transactions);
	tcase_add_test(tc, begin_while_another_writes_is_busy);
	tcase_add_test(tc, open_more_is_a_connection_of_its_own);
	suite_add_tcase(s, tc);
	return check_run(s);
}
