/*
 * Unit tests for vmmd's SQLite store and receipt digests, on real
 * database files in a temporary directory.
 */
#include <sys/stat.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <sqlite3.h>

#include "log.h"
#include "receipts.h"
#include "store.h"
#include "../check_run.h"

static char dir[64];
static char dbpath[128];
static char err[256];

static void
setup(void)
{
	/* tmpfs: thousands of fsyncs cost nothing there. */
	strcpy(dir, "/dev/shm/mcpvm-store-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(dbpath, sizeof(dbpath), "%s/vmmd.db", dir);
}

static void
teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct store *
open_store(void)
{
	struct store *s = store_open(dbpath, err, sizeof(err));

	ck_assert_msg(s != NULL, "%s", err);
	return s;
}

static void
make_vm(struct vm_record *v, const char *id, const char *ws, int slot)
{
	memset(v, 0, sizeof(*v));
	snprintf(v->id, sizeof(v->id), "%s", id);
	snprintf(v->workspace, sizeof(v->workspace), "%s", ws);
	snprintf(v->image, sizeof(v->image), "test");
	v->slot = slot;
	v->state = VM_CREATING;
	v->vcpus = 1;
	v->memory_mib = 256;
	v->idle_seconds = 300;
}

START_TEST(file_mode_and_reopen)
{
	struct store *s = open_store();
	struct vm_record v, got;
	struct stat st;

	ck_assert_int_eq(stat(dbpath, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	make_vm(&v, "aaaa", "ws-a", 0);
	ck_assert_int_eq(store_vm_insert(s, &v, err, sizeof(err)), 0);
	ck_assert_int_eq(store_vm_set_state(s, "aaaa", VM_RUNNING, NULL, err,
	    sizeof(err)), 0);
	store_close(s);

	s = open_store();
	ck_assert_int_eq(store_vm_get(s, "aaaa", &got, err, sizeof(err)), 0);
	ck_assert_int_eq(got.state, VM_RUNNING);
	ck_assert_str_eq(got.workspace, "ws-a");
	ck_assert_int_eq(store_vm_set_state(s, "aaaa", VM_FAILED,
	    "clock sync failed", err, sizeof(err)), 0);
	ck_assert_int_eq(store_vm_get(s, "aaaa", &got, err, sizeof(err)), 0);
	ck_assert_str_eq(got.failure, "clock sync failed");
	ck_assert_int_eq(store_vm_get(s, "nope", &got, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "vm: not found");
	ck_assert_int_eq(store_vm_set_state(s, "nope", VM_RUNNING, NULL, err,
	    sizeof(err)), -1);
	ck_assert_str_eq(err, "vm nope: not found");
	store_close(s);
}
END_TEST

START_TEST(list_by_workspace_and_slots)
{
	struct store *s = open_store();
	struct vm_record v, *list;
	size_t n;

	make_vm(&v, "a1", "ws-a", 0);
	ck_assert_int_eq(store_vm_insert(s, &v, err, sizeof(err)), 0);
	make_vm(&v, "b1", "ws-b", 1);
	ck_assert_int_eq(store_vm_insert(s, &v, err, sizeof(err)), 0);
	make_vm(&v, "a2", "ws-a", 3);
	ck_assert_int_eq(store_vm_insert(s, &v, err, sizeof(err)), 0);
	/* A slot in use cannot be taken twice. */
	make_vm(&v, "dup", "ws-c", 3);
	ck_assert_int_eq(store_vm_insert(s, &v, err, sizeof(err)), -1);

	ck_assert_int_eq(store_vm_list(s, "ws-a", &list, &n, err, sizeof(err)),
	    0);
	ck_assert_uint_eq(n, 2);
	ck_assert(strcmp(list[0].id, "a1") == 0 || strcmp(list[1].id, "a1") ==
	    0);
	free(list);
	ck_assert_int_eq(store_vm_list(s, NULL, &list, &n, err, sizeof(err)),
	    0);
	ck_assert_uint_eq(n, 3);
	free(list);

	ck_assert_int_eq(store_free_slot(s, 10, err, sizeof(err)), 2);
	ck_assert_int_eq(store_vm_delete(s, "b1", err, sizeof(err)), 0);
	ck_assert_int_eq(store_free_slot(s, 10, err, sizeof(err)), 1);
	/* A destroyed VM is known as such to its own workspace only. */
	ck_assert_int_eq(store_vm_was_destroyed(s, "b1", "ws-b", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(store_vm_was_destroyed(s, "b1", "ws-a", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(store_vm_was_destroyed(s, "a1", "ws-a", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(store_vm_get(s, "b1", &v, err, sizeof(err)), -1);
	/* Its slot can be taken again. */
	make_vm(&v, "c1", "ws-c", 1);
	ck_assert_int_eq(store_vm_insert(s, &v, err, sizeof(err)), 0);
	ck_assert_int_eq(store_free_slot(s, 1, err, sizeof(err)), -1);
	store_close(s);
}
END_TEST

START_TEST(receipts_lifecycle)
{
	struct store *s = open_store();
	enum receipt_status st;
	char *res;

	ck_assert_int_eq(store_receipt_begin(s, "ws", "r1", "vm_exec", "d1",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_NEW);
	/* Still running: a retry must not run it again. */
	ck_assert_int_eq(store_receipt_begin(s, "ws", "r1", "vm_exec", "d1",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_PENDING);
	ck_assert_int_eq(store_receipt_finish(s, "ws", "r1",
	    "{\"job_id\":\"j\"}", err, sizeof(err)), 0);
	ck_assert_int_eq(store_receipt_begin(s, "ws", "r1", "vm_exec", "d1",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_DONE);
	ck_assert_str_eq(res, "{\"job_id\":\"j\"}");
	free(res);
	/* Looked at (a vm_run task's tasks/get): of its tool and workspace
	 * only. */
	ck_assert_int_eq(store_receipt_get(s, "ws", "r1", "vm_exec", &st, &res,
	    err, sizeof(err)), 1);
	ck_assert_int_eq(st, RECEIPT_DONE);
	ck_assert_str_eq(res, "{\"job_id\":\"j\"}");
	free(res);
	ck_assert_int_eq(store_receipt_get(s, "ws", "r1", "vm_run", &st, &res,
	    err, sizeof(err)), 0);
	ck_assert_int_eq(store_receipt_get(s, "ws2", "r1", "vm_exec", &st,
	    &res, err, sizeof(err)), 0);
	ck_assert_ptr_null(res);
	ck_assert_int_eq(store_receipt_begin(s, "ws", "r1", "vm_exec", "d2",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_MISMATCH);
	ck_assert_int_eq(store_receipt_begin(s, "ws", "r1", "vm_create", "d1",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_MISMATCH);
	/* Another workspace's id space is its own. */
	ck_assert_int_eq(store_receipt_begin(s, "other", "r1", "vm_exec", "d9",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_NEW);

	/* A crash while r2 runs leaves its outcome unknown. */
	ck_assert_int_eq(store_receipt_begin(s, "ws", "r2", "vm_exec", "d1",
	    &st, &res, err, sizeof(err)), 0);
	store_close(s);
	s = open_store();
	ck_assert_int_eq(store_receipts_mark_uncertain(s, err, sizeof(err)), 0);
	ck_assert_int_eq(store_receipt_begin(s, "ws", "r2", "vm_exec", "d1",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_UNCERTAIN);
	ck_assert_int_eq(store_receipt_get(s, "ws", "r2", "vm_exec", &st, &res,
	    err, sizeof(err)), 1);
	ck_assert_int_eq(st, RECEIPT_UNCERTAIN);
	ck_assert_ptr_null(res);
	/* A finished one stays finished. */
	ck_assert_int_eq(store_receipt_begin(s, "ws", "r1", "vm_exec", "d1",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_DONE);
	free(res);
	ck_assert_int_eq(store_receipt_forget(s, "ws", "r2", err, sizeof(err)),
	    0);
	ck_assert_int_eq(store_receipt_begin(s, "ws", "r2", "vm_exec", "d1",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_NEW);
	store_close(s);
}
END_TEST

START_TEST(receipts_capped_per_workspace)
{
	struct store *s = open_store();
	enum receipt_status st;
	char id[32], *res;

	for (int i = 0; i < RECEIPTS_PER_WORKSPACE + 5; i++) {
		snprintf(id, sizeof(id), "r%d", i);
		ck_assert_int_eq(store_receipt_begin(s, "ws", id, "vm_exec",
		    "d", &st, &res, err, sizeof(err)), 0);
		ck_assert_int_eq(st, RECEIPT_NEW);
		store_receipt_finish(s, "ws", id, "{}", err, sizeof(err));
	}
	/* The five oldest are gone; the newest 4096 remain. */
	ck_assert_int_eq(store_receipt_begin(s, "ws", "r4", "vm_exec", "x",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_NEW);
	ck_assert_int_eq(store_receipt_begin(s, "ws", "r6", "vm_exec", "d",
	    &st, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(st, RECEIPT_DONE);
	free(res);
	store_close(s);
}
END_TEST

START_TEST(jobs_remember_their_last_state)
{
	struct store *s = open_store();
	struct job_record j, *list;
	size_t n;

	ck_assert_int_eq(store_job_add(s, "vm1", "j1", "req-1", 1000, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(store_job_add(s, "vm1", "j2", "req-2", 2000, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(store_job_add(s, "vm2", "j3", "req-3", 3000, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(store_job_get(s, "vm1", "j1", &j, err, sizeof(err)),
	    0);
	ck_assert_str_eq(j.state, "running");
	ck_assert_int_eq(j.exit_code, -1);
	ck_assert_int_eq(j.finished_at, 0);
	ck_assert_int_eq(store_job_update(s, "vm1", "j1", "completed", 3,
	    5000, err, sizeof(err)), 0);
	/* Seen finished again later: the first time stands. */
	ck_assert_int_eq(store_job_update(s, "vm1", "j1", "completed", 3,
	    9000, err, sizeof(err)), 0);
	ck_assert_int_eq(store_job_get(s, "vm1", "j1", &j, err, sizeof(err)),
	    0);
	ck_assert_str_eq(j.state, "completed");
	ck_assert_int_eq(j.exit_code, 3);
	ck_assert_int_eq(j.finished_at, 5000);
	ck_assert_int_eq(store_job_list(s, "vm1", &list, &n, err, sizeof(err)),
	    0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(list[0].job_id, "j1");
	ck_assert_str_eq(list[1].request_id, "req-2");
	free(list);
	ck_assert_int_eq(store_job_get(s, "vm2", "j1", &j, err, sizeof(err)),
	    -1);
	store_close(s);
}
END_TEST

/* How many finished and running jobs vm has. */
static void
count_jobs(struct store *s, const char *vm, size_t *finished,
    size_t *running)
{
	struct job_record *list;
	size_t n;

	ck_assert_int_eq(store_job_list(s, vm, &list, &n, err, sizeof(err)),
	    0);
	*finished = *running = 0;
	for (size_t i = 0; i < n; i++)
		(*(strcmp(list[i].state, "running") == 0 ? running :
		    finished))++;
	free(list);
}

START_TEST(jobs_history_is_capped)
{
	struct store *s = open_store();
	struct job_record j;
	char id[16];
	size_t fin, run;

	store_jobs_keep(s, 3);
	for (int i = 1; i <= 6; i++) {
		snprintf(id, sizeof(id), "j%d", i);
		ck_assert_int_eq(store_job_add(s, "vm1", id, "r", i * 1000,
		    err, sizeof(err)), 0);
	}
	ck_assert_int_eq(store_job_add(s, "vm2", "k1", "r", 1000, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(store_job_update(s, "vm2", "k1", "completed", 0,
	    1500, err, sizeof(err)), 0);
	/* Finished in the order j2, j1, j3, j5, j4; j6 runs on. */
	ck_assert_int_eq(store_job_update(s, "vm1", "j2", "completed", 0,
	    10000, err, sizeof(err)), 0);
	ck_assert_int_eq(store_job_update(s, "vm1", "j1", "failed", 1,
	    11000, err, sizeof(err)), 0);
	ck_assert_int_eq(store_job_update(s, "vm1", "j3", "completed", 0,
	    12000, err, sizeof(err)), 0);
	count_jobs(s, "vm1", &fin, &run);
	ck_assert_uint_eq(fin, 3);
	ck_assert_uint_eq(run, 3);
	ck_assert_int_eq(store_job_update(s, "vm1", "j5", "completed", 0,
	    13000, err, sizeof(err)), 0);
	/* The first to finish went, though it did not start first. */
	ck_assert_int_eq(store_job_get(s, "vm1", "j2", &j, err, sizeof(err)),
	    -1);
	ck_assert_str_eq(err, "job: not found");
	ck_assert_int_eq(store_job_get(s, "vm1", "j1", &j, err, sizeof(err)),
	    0);
	/* A running status is no finish: nothing goes. */
	ck_assert_int_eq(store_job_update(s, "vm1", "j6", "running", -1, 0,
	    err, sizeof(err)), 0);
	ck_assert_int_eq(store_job_update(s, "vm1", "j4", "timed_out", -1,
	    14000, err, sizeof(err)), 0);
	count_jobs(s, "vm1", &fin, &run);
	ck_assert_uint_eq(fin, 3);
	ck_assert_uint_eq(run, 1);
	ck_assert_int_eq(store_job_get(s, "vm1", "j1", &j, err, sizeof(err)),
	    -1);
	ck_assert_int_eq(store_job_get(s, "vm1", "j6", &j, err, sizeof(err)),
	    0);
	/* Another VM's history is its own. */
	count_jobs(s, "vm2", &fin, &run);
	ck_assert_uint_eq(fin, 1);
	/* A lower cap at the next start: every VM is cut at once. */
	store_close(s);
	s = open_store();
	store_jobs_keep(s, 1);
	ck_assert_int_eq(store_jobs_prune(s, err, sizeof(err)), 0);
	count_jobs(s, "vm1", &fin, &run);
	ck_assert_uint_eq(fin, 1);
	ck_assert_uint_eq(run, 1);
	ck_assert_int_eq(store_job_get(s, "vm1", "j4", &j, err, sizeof(err)),
	    0);
	count_jobs(s, "vm2", &fin, &run);
	ck_assert_uint_eq(fin, 1);
	/* A job its guest refused is forgotten. */
	ck_assert_int_eq(store_job_forget(s, "vm1", "j6", err, sizeof(err)),
	    0);
	count_jobs(s, "vm1", &fin, &run);
	ck_assert_uint_eq(run, 0);
	store_close(s);
}
END_TEST

struct copy_arg {
	struct store	*s;
	const char	*to;
	int		 rc;
	char		 err[256];
};

static void *
copy_thread(void *arg)
{
	struct copy_arg *c = arg;

	c->rc = store_job_copy(c->s, "src", c->to, 50000, c->err,
	    sizeof(c->err));
	return NULL;
}

/* vm_fork's copy, from another thread as vmmd's worker pool runs it. */
START_TEST(jobs_copy_in_one_transaction)
{
	struct store *s = open_store();
	struct copy_arg c = { .s = s, .to = "kid" };
	struct vm_record v;
	struct job_record j;
	pthread_t t;
	sqlite3 *db;
	size_t fin, run;

	store_jobs_keep(s, 100);
	make_vm(&v, "kid", "ws", 1);
	ck_assert_int_eq(store_vm_insert(s, &v, err, sizeof(err)), 0);
	/* 5000 finished jobs and 2 running, written as one would by hand. */
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "BEGIN;"
	    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
	    "WHERE i < 5000) INSERT INTO jobs (vm_id, job_id, request_id, "
	    "state, exit_code, started_at, finished_at) SELECT 'src', "
	    "'j' || i, 'r', 'completed', 0, i, 100000 + i FROM n;"
	    "INSERT INTO jobs (vm_id, job_id, request_id, state, started_at) "
	    "VALUES ('src', 'run1', 'r', 'running', 10), "
	    "('src', 'late', 'r', 'running', 60000);"
	    "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(pthread_create(&t, NULL, copy_thread, &c), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(c.rc == 0, "%s", c.err);
	/* The newest 100 finished ones and the running one that started by
	 * then; the source keeps its own. */
	count_jobs(s, "kid", &fin, &run);
	ck_assert_uint_eq(fin, 100);
	ck_assert_uint_eq(run, 1);
	ck_assert_int_eq(store_job_get(s, "kid", "j5000", &j, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(j.finished_at, 105000);
	ck_assert_int_eq(store_job_get(s, "kid", "j4900", &j, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(store_job_get(s, "kid", "late", &j, err,
	    sizeof(err)), -1);
	count_jobs(s, "src", &fin, &run);
	ck_assert_uint_eq(fin, 5000);
	/* A child destroyed meanwhile gets nothing. */
	ck_assert_int_eq(store_vm_delete(s, "kid", err, sizeof(err)), 0);
	c.rc = -1;
	ck_assert_int_eq(pthread_create(&t, NULL, copy_thread, &c), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(c.rc == 0, "%s", c.err);
	count_jobs(s, "kid", &fin, &run);
	ck_assert_uint_eq(fin + run, 0);
	store_close(s);
}
END_TEST

static void
make_snap(struct snap_record *r, const char *id, const char *ws,
    long long at)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	snprintf(r->workspace, sizeof(r->workspace), "%s", ws);
	snprintf(r->name, sizeof(r->name), "stage-%s", id);
	snprintf(r->source_vm, sizeof(r->source_vm), "vm-%s", id);
	snprintf(r->image, sizeof(r->image), "test");
	r->vcpus = 2;
	r->memory_mib = 512;
	r->disk_bytes = 1LL << 30;
	r->created_at = at;
}

/* A snapshot's row: 'making' first, 'ready' once, its sizes and digest
 * as last set, listed by workspace, gone when deleted; and a VM made
 * from one names it across a reopen. */
START_TEST(snapshots_lifecycle)
{
	struct store *s = open_store();
	struct snap_record r, got, *list;
	struct vm_record v;
	size_t n;

	make_snap(&r, "s1", "ws-a", 1000);
	ck_assert_int_eq(store_snap_insert(s, &r, err, sizeof(err)), 0);
	/* The same id twice is refused. */
	ck_assert_int_eq(store_snap_insert(s, &r, err, sizeof(err)), -1);
	ck_assert_int_eq(store_snap_get(s, "s1", &got, err, sizeof(err)), 0);
	ck_assert_str_eq(got.state, "making");
	ck_assert_str_eq(got.name, "stage-s1");
	ck_assert_int_eq(got.memory_bytes, 0);

	r.memory = 1;	/* not a column ready() sets: stays as inserted */
	r.disk_bytes = 12345;
	r.memory_bytes = 268435456;
	r.paused_ms = 77;
	snprintf(r.memory_sha256, sizeof(r.memory_sha256), "%064d", 7);
	ck_assert_int_eq(store_snap_ready(s, &r, err, sizeof(err)), 0);
	/* Only a 'making' row becomes ready. */
	ck_assert_int_eq(store_snap_ready(s, &r, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "snapshot s1: not being made");
	make_snap(&r, "s2", "ws-b", 2000);
	ck_assert_int_eq(store_snap_insert(s, &r, err, sizeof(err)), 0);
	make_snap(&r, "s3", "ws-a", 3000);
	ck_assert_int_eq(store_snap_insert(s, &r, err, sizeof(err)), 0);
	make_vm(&v, "v1", "ws-a", 0);
	snprintf(v.snapshot_id, sizeof(v.snapshot_id), "s1");
	snprintf(v.origin, sizeof(v.origin), "snapshot");
	ck_assert_int_eq(store_vm_insert(s, &v, err, sizeof(err)), 0);
	/* vm_fork's own is 'fork' once complete, not 'ready'. */
	make_snap(&r, "f1", "ws-a", 4000);
	ck_assert_int_eq(store_snap_insert(s, &r, err, sizeof(err)), 0);
	snprintf(r.state, sizeof(r.state), "fork");
	ck_assert_int_eq(store_snap_ready(s, &r, err, sizeof(err)), 0);
	ck_assert_int_eq(store_snap_get(s, "f1", &got, err, sizeof(err)), 0);
	ck_assert_str_eq(got.state, "fork");
	ck_assert_int_eq(store_snap_delete(s, "f1", err, sizeof(err)), 0);
	store_close(s);

	s = open_store();
	ck_assert_int_eq(store_snap_get(s, "s1", &got, err, sizeof(err)), 0);
	ck_assert_str_eq(got.state, "ready");
	ck_assert_int_eq(got.memory, 0);
	ck_assert_int_eq(got.disk_bytes, 12345);
	ck_assert_int_eq(got.memory_bytes, 268435456);
	ck_assert_int_eq(got.paused_ms, 77);
	ck_assert_int_eq(got.vcpus, 2);
	ck_assert_int_eq(got.memory_mib, 512);
	ck_assert_int_eq(got.created_at, 1000);
	ck_assert_int_eq(strlen(got.memory_sha256), 64);
	ck_assert_int_eq(store_vm_get(s, "v1", &v, err, sizeof(err)), 0);
	ck_assert_str_eq(v.snapshot_id, "s1");
	ck_assert_str_eq(v.origin, "snapshot");
	/* One inserted without an origin was booted. */
	make_vm(&v, "v2", "ws-a", 1);
	ck_assert_int_eq(store_vm_insert(s, &v, err, sizeof(err)), 0);
	ck_assert_int_eq(store_vm_get(s, "v2", &v, err, sizeof(err)), 0);
	ck_assert_str_eq(v.origin, "booted");

	ck_assert_int_eq(store_snap_list(s, "ws-a", &list, &n, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(list[0].id, "s1");	/* oldest first */
	ck_assert_str_eq(list[1].id, "s3");
	ck_assert_str_eq(list[1].state, "making");
	free(list);
	ck_assert_int_eq(store_snap_list(s, NULL, &list, &n, err, sizeof(err)),
	    0);
	ck_assert_uint_eq(n, 3);
	free(list);
	ck_assert_int_eq(store_snap_list(s, "ws-none", &list, &n, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(n, 0);
	free(list);

	ck_assert_int_eq(store_snap_delete(s, "s1", err, sizeof(err)), 0);
	ck_assert_int_eq(store_snap_get(s, "s1", &got, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "snapshot: not found");
	/* Deleting what is not there changes nothing, and is no error. */
	ck_assert_int_eq(store_snap_delete(s, "s1", err, sizeof(err)), 0);
	ck_assert_int_eq(store_snap_list(s, NULL, &list, &n, err, sizeof(err)),
	    0);
	ck_assert_uint_eq(n, 2);
	free(list);
	/* The VM still names the snapshot it came from. */
	ck_assert_int_eq(store_vm_get(s, "v1", &v, err, sizeof(err)), 0);
	ck_assert_str_eq(v.snapshot_id, "s1");
	store_close(s);
}
END_TEST

START_TEST(refuses_garbage_file)
{
	int fd = open(dbpath, O_WRONLY | O_CREAT, 0600);
	struct stat before, after;

	ck_assert_int_eq(write(fd, "this is not a database, just text "
	    "long enough to look like a header ......................"
	    "............................................\n", 134), 134);
	close(fd);
	stat(dbpath, &before);
	ck_assert_ptr_null(store_open(dbpath, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "not a usable database"));
	stat(dbpath, &after);
	ck_assert_int_eq(before.st_size, after.st_size);
}
END_TEST

/* store_open fails and err names the file and says want. */
static void
open_refused(const char *want)
{
	ck_assert_ptr_null(store_open(dbpath, err, sizeof(err)));
	ck_assert_msg(strstr(err, dbpath) != NULL, "%s", err);
	ck_assert_msg(strstr(err, want) != NULL, "want '%s': %s", want, err);
}

START_TEST(refuses_file_others_may_write)
{
	struct stat sb;

	store_close(open_store());
	ck_assert_int_eq(chmod(dbpath, 0666), 0);
	open_refused("mode 0666");
	ck_assert_int_eq(stat(dbpath, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0666);
	/* Readable by others is allowed; vmmd never makes it so itself. */
	ck_assert_int_eq(chmod(dbpath, 0644), 0);
	store_close(open_store());
}
END_TEST

START_TEST(refuses_file_of_another_uid)
{
	char want[64];

	store_close(open_store());
	if (geteuid() != 0)
		return;		/* only root can give a file away */
	ck_assert_int_eq(chown(dbpath, 4343, 4343), 0);
	snprintf(want, sizeof(want), "owned by uid 4343, not by vmmd's "
	    "uid %u", (unsigned int)geteuid());
	open_refused(want);
}
END_TEST

START_TEST(refuses_symlink)
{
	char target[160];
	struct stat sb;

	snprintf(target, sizeof(target), "%s/elsewhere.db", dir);
	ck_assert_int_eq(symlink(target, dbpath), 0);
	open_refused("symbolic link");
	ck_assert_int_eq(lstat(target, &sb), -1);
}
END_TEST

START_TEST(refuses_newer_schema)
{
	struct store *s = open_store();

	store_close(s);
	{
		sqlite3 *db;

		ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
		ck_assert_int_eq(sqlite3_exec(db, "PRAGMA user_version = 42",
		    NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
	}
	open_refused("schema version 42 is newer than this vmmd knows");
}
END_TEST

/*
 * A VM keeps its vmgenid GUID across reopening; a row an older vmmd wrote
 * (no such column then) reads as "", no device, so it restores as it
 * was booted.
 */
/*
 * What netd enforces now survives reopening (a restarted vmmd keeps a
 * pushed policy); a row without it is the VM's own policy, a damaged
 * one turns the network off.
 */
START_TEST(egress_now_kept_old_rows_own_damaged_off)
{
	struct store *s = open_store();
	struct vm_record *v, *got;
	sqlite3 *db;

	v = calloc(2, sizeof(*v));
	ck_assert_ptr_nonnull(v);
	got = v + 1;
	make_vm(v, "eeee", "ws-a", 4);
	v->network = 1;
	v->egress.mode = EGRESS_PUBLIC;
	v->egress_now = v->egress;
	ck_assert_int_eq(store_vm_insert(s, v, err, sizeof(err)), 0);
	ck_assert_int_eq(store_vm_get(s, "eeee", got, err, sizeof(err)), 0);
	ck_assert(egress_equal(&got->egress_now, &v->egress));
	ck_assert_int_eq(got->net_off, 0);
	ck_assert_uint_eq(got->egress_rate, 0);
	v->egress_now.mode = EGRESS_ALLOWLIST;
	v->egress_now.ncidrs = 1;
	v->egress_now.cidrs[0].addr = 0xcb007135u;
	v->egress_now.cidrs[0].len = 32;
	v->egress_rate = 65536;
	v->net_off = 1;
	ck_assert_int_eq(store_vm_set_egress_now(s, v, err, sizeof(err)), 0);
	store_close(s);
	s = open_store();
	ck_assert_int_eq(store_vm_get(s, "eeee", got, err, sizeof(err)), 0);
	ck_assert(egress_equal(&got->egress_now, &v->egress_now));
	ck_assert(egress_equal(&got->egress, &v->egress));
	ck_assert_uint_eq(got->egress_rate, 65536);
	ck_assert_int_eq(got->net_off, 1);
	store_close(s);
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "UPDATE vms SET egress_now = "
	    "'{\"network\":true,\"rate\":0}'", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	s = open_store();
	ck_assert_int_eq(store_vm_get(s, "eeee", got, err, sizeof(err)), 0);
	ck_assert_int_eq(got->net_off, 1);
	ck_assert_int_eq(got->egress_now.mode, EGRESS_ALLOWLIST);
	ck_assert_uint_eq(got->egress_now.ncidrs, 0);
	store_close(s);
	free(v);
}
END_TEST

START_TEST(vmgenid_kept_and_empty_for_old_rows)
{
	struct store *s = open_store();
	struct vm_record v, got;
	sqlite3 *db;

	make_vm(&v, "bbbb", "ws-a", 1);
	snprintf(v.vmgenid, sizeof(v.vmgenid),
	    "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9");
	ck_assert_int_eq(store_vm_insert(s, &v, err, sizeof(err)), 0);
	store_close(s);
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "INSERT INTO vms (id, workspace, "
	    "slot, state, image, vcpus, memory_mib, disk_bytes, network, "
	    "idle_seconds, idle_mode_pause, created_at, updated_at) VALUES "
	    "('cccc', 'ws-a', 2, 'hibernated', 'test', 1, 256, 0, 0, 300, 0, "
	    "1, 1)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	s = open_store();
	ck_assert_int_eq(store_vm_get(s, "bbbb", &got, err, sizeof(err)), 0);
	ck_assert_str_eq(got.vmgenid, "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9");
	ck_assert_int_eq(store_vm_get(s, "cccc", &got, err, sizeof(err)), 0);
	ck_assert_str_eq(got.vmgenid, "");
	store_close(s);
}
END_TEST

/*
 * A memory snapshot of a networked VM says so across reopening; a row
 * written without the column (an older vmmd's) reads as no NIC.
 */
START_TEST(snapshot_network_kept_and_off_for_old_rows)
{
	struct store *s = open_store();
	struct snap_record r, got;
	sqlite3 *db;

	make_snap(&r, "n1", "ws-a", 1000);
	r.memory = 1;
	r.network = 1;
	ck_assert_int_eq(store_snap_insert(s, &r, err, sizeof(err)), 0);
	store_close(s);
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "INSERT INTO snapshots (id, "
	    "workspace, name, state, source_vm, image, memory, vcpus, "
	    "memory_mib, disk_bytes, memory_bytes, memory_sha256, paused_ms, "
	    "created_at) VALUES ('o1', 'ws-a', '', 'ready', 'vm-o', 'test', 1, "
	    "1, 256, 0, 0, '', 0, 1)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	s = open_store();
	ck_assert_int_eq(store_snap_get(s, "n1", &got, err, sizeof(err)), 0);
	ck_assert_int_eq(got.network, 1);
	ck_assert_int_eq(store_snap_get(s, "o1", &got, err, sizeof(err)), 0);
	ck_assert_int_eq(got.network, 0);
	store_close(s);
}
END_TEST

START_TEST(digest_is_canonical)
{
	struct json_object *a = json_tokener_parse(
	    "{\"request_id\":\"x\",\"vm_id\":\"v\",\"env\":{\"B\":\"2\","
	    "\"A\":\"1\"},\"command\":\"ls\"}");
	struct json_object *b = json_tokener_parse(
	    "{\"command\":\"ls\",\"env\":{\"A\":\"1\",\"B\":\"2\"},"
	    "\"vm_id\":\"v\",\"request_id\":\"y\"}");
	struct json_object *c = json_tokener_parse(
	    "{\"command\":\"ls -l\",\"env\":{\"A\":\"1\",\"B\":\"2\"},"
	    "\"vm_id\":\"v\",\"request_id\":\"x\"}");
	struct json_object *d = json_tokener_parse(
	    "{\"command\":\"ls\",\"env\":{\"A\":\"1\",\"B\":\"2\",\"request_id\""
	    ":\"z\"},\"vm_id\":\"v\"}");
	char da[65], db[65], dc[65], dd[65];

	ck_assert_int_eq(receipt_digest(a, da), 0);
	ck_assert_int_eq(receipt_digest(b, db), 0);
	ck_assert_int_eq(receipt_digest(c, dc), 0);
	ck_assert_int_eq(receipt_digest(d, dd), 0);
	ck_assert_str_eq(da, db);	/* order and request_id do not count */
	ck_assert_str_ne(da, dc);	/* a changed value does */
	ck_assert_str_ne(da, dd);	/* request_id only counts at the top */
	ck_assert_uint_eq(strlen(da), 64);
	json_object_put(a);
	json_object_put(b);
	json_object_put(c);
	json_object_put(d);
}
END_TEST

START_TEST(image_digests_by_identity)
{
	struct store *s = open_store();
	struct file_identity id = { 2049, 131, 3 << 30, 1700000000123456789LL,
	    1700000000223456789LL }, other;
	const char *hex = "0123456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef";
	char got[65];

	ck_assert_int_eq(store_digest_get(s, "/img/rootfs", &id, got, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(store_digest_put(s, "/img/rootfs", &id, hex, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(store_digest_get(s, "/img/rootfs", &id, got, err,
	    sizeof(err)), 1);
	ck_assert_str_eq(got, hex);
	/* Any part of the identity changed: not remembered. */
	other = id;
	other.ctime_ns++;
	ck_assert_int_eq(store_digest_get(s, "/img/rootfs", &other, got, err,
	    sizeof(err)), 0);
	other = id;
	other.ino++;
	ck_assert_int_eq(store_digest_get(s, "/img/rootfs", &other, got, err,
	    sizeof(err)), 0);
	other = id;
	other.size--;
	ck_assert_int_eq(store_digest_get(s, "/img/rootfs", &other, got, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(store_digest_get(s, "/img/kernel", &id, got, err,
	    sizeof(err)), 0);
	/* A new identity replaces the old one; it survives a reopen. */
	other = id;
	other.mtime_ns += 1000;
	ck_assert_int_eq(store_digest_put(s, "/img/rootfs", &other, hex, err,
	    sizeof(err)), 0);
	store_close(s);
	s = open_store();
	ck_assert_int_eq(store_digest_get(s, "/img/rootfs", &id, got, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(store_digest_get(s, "/img/rootfs", &other, got, err,
	    sizeof(err)), 1);
	store_close(s);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("vmmd_store");
	TCase *tc = tcase_create("core");

	log_init("test_vmmd_store", 1, 0);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, file_mode_and_reopen);
	tcase_add_test(tc, list_by_workspace_and_slots);
	tcase_add_test(tc, receipts_lifecycle);
	tcase_add_test(tc, receipts_capped_per_workspace);
	tcase_add_test(tc, jobs_remember_their_last_state);
	tcase_add_test(tc, snapshots_lifecycle);
	tcase_add_test(tc, refuses_garbage_file);
	tcase_add_test(tc, refuses_file_others_may_write);
	tcase_add_test(tc, refuses_file_of_another_uid);
	tcase_add_test(tc, refuses_symlink);
	tcase_add_test(tc, refuses_newer_schema);
	tcase_add_test(tc, digest_is_canonical);
	tcase_add_test(tc, egress_now_kept_old_rows_own_damaged_off);
	tcase_add_test(tc, image_digests_by_identity);
	tcase_add_test(tc, vmgenid_kept_and_empty_for_old_rows);
	tcase_add_test(tc, snapshot_network_kept_and_off_for_old_rows);
	tcase_add_test(tc, jobs_history_is_capped);
	tcase_add_test(tc, jobs_copy_in_one_transaction);
	suite_add_tcase(s, tc);
	return check_run(s);
}
