/*
 * Unit tests for authd's SQLite store (authd/store.c) on real database
 * files in a temporary directory.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"
#include "../check_run.h"

static char dir[64];
static char path[128];
static struct store *st;
/* What the last store call that failed said. */
static char serr[STORE_ERR_MAX];
static const struct auth_policy defaults = {
	.network = 0, .max_vms = 2, .memory_mib = 2048, .storage_gib = 20,
	.max_streams = 8,
};

static void
setup(void)
{
	char err[STORE_ERR_MAX];

	snprintf(dir, sizeof(dir), "/tmp/test_store.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/authd.db", dir);
	st = store_open(path, err, sizeof(err));
	ck_assert_msg(st != NULL, "store_open: %s", err);
}

static void
teardown(void)
{
	char cmd[128];

	store_close(st);
	st = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A new credential: its text, hash and id. */
struct tok {
	char	text[CRED_LEN + 1];
	uint8_t	hash[CRED_HASH_LEN];
	char	id[CRED_ID_LEN + 1];
};

static void
tok_new(struct tok *t)
{
	ck_assert_int_eq(cred_generate(t->text), 0);
	ck_assert_int_eq(cred_hash(t->text, CRED_LEN, t->hash), 0);
	cred_id(t->hash, t->id);
}

static void
issue(const char *ws, const struct auth_policy_patch *pt, struct tok *t,
    int64_t now, int64_t exp)
{
	struct auth_policy p;
	int created;

	tok_new(t);
	ck_assert_int_eq(store_issue(st, ws, pt, &defaults, t->hash, now, exp,
	    &created, &p, serr, sizeof(serr)), STORE_OK);
}

static int
verify(const struct tok *t, int64_t now, struct store_verdict *v)
{
	struct store_verdict scratch;

	return store_verify(st, t->hash, now, v != NULL ? v : &scratch, serr,
	    sizeof(serr));
}

/* 1 if needle occurs anywhere in the file at p. */
static int
file_contains(const char *p, const char *needle)
{
	FILE *f = fopen(p, "rb");
	char *buf;
	size_t n, nl = strlen(needle);
	int found = 0;

	if (f == NULL)
		return 0;
	buf = malloc(16 << 20);
	ck_assert_ptr_nonnull(buf);
	n = fread(buf, 1, 16 << 20, f);
	fclose(f);
	for (size_t i = 0; i + nl <= n && !found; i++)
		found = memcmp(buf + i, needle, nl) == 0;
	free(buf);
	return found;
}

START_TEST(new_database_is_0600_wal_and_versioned)
{
	struct stat sb;
	struct tok t;
	char wal[160];

	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0600);
	ck_assert_int_eq(store_schema_version(st), STORE_SCHEMA_VERSION);
	issue("w", NULL, &t, 100, 0);
	snprintf(wal, sizeof(wal), "%s-wal", path);
	ck_assert_int_eq(stat(wal, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0600);
}
END_TEST

START_TEST(issue_then_verify)
{
	struct store_verdict v;
	struct tok t, other;

	issue("alpha", NULL, &t, 100, 0);
	ck_assert_int_eq(verify(&t, 200, &v), STORE_OK);
	ck_assert_str_eq(v.workspace, "alpha");
	ck_assert_str_eq(v.cred_id, t.id);
	ck_assert_int_eq(v.expires_at, 0);
	ck_assert(policy_equal(&v.policy, &defaults));
	tok_new(&other);
	ck_assert_int_eq(verify(&other, 200, NULL), STORE_UNAUTHORIZED);
}
END_TEST

START_TEST(expired_credential_is_unauthorized)
{
	struct store_verdict v;
	struct tok t;

	issue("w", NULL, &t, 100, 160);
	ck_assert_int_eq(verify(&t, 159, &v), STORE_OK);
	ck_assert_int_eq(v.expires_at, 160);
	ck_assert_int_eq(verify(&t, 160, NULL), STORE_UNAUTHORIZED);
	ck_assert_int_eq(verify(&t, 10000, NULL), STORE_UNAUTHORIZED);
}
END_TEST

START_TEST(revoked_credential_and_workspace)
{
	struct store_ids ids;
	struct tok a, b, c;
	char ws[AUTH_WORKSPACE_MAX + 1];
	int already, created;
	struct auth_policy p;

	issue("w", NULL, &a, 100, 0);
	issue("w", NULL, &b, 100, 0);
	ck_assert_int_eq(store_revoke_cred(st, a.id, 150, ws, &already, serr,
	    sizeof(serr)),
	    STORE_OK);
	ck_assert_str_eq(ws, "w");
	ck_assert_int_eq(already, 0);
	ck_assert_int_eq(verify(&a, 200, NULL), STORE_UNAUTHORIZED);
	ck_assert_int_eq(verify(&b, 200, NULL), STORE_OK);
	ck_assert_int_eq(store_revoke_cred(st, a.id, 160, ws, &already, serr,
	    sizeof(serr)),
	    STORE_OK);
	ck_assert_int_eq(already, 1);
	ck_assert_int_eq(store_revoke_cred(st, "0000000000000000", 160, ws,
	    &already, serr, sizeof(serr)), STORE_NOT_FOUND);
	ck_assert_str_eq(serr, "no credential 0000000000000000");

	ck_assert_int_eq(store_revoke_workspace(st, "w", 170, &already, &ids,
	    serr, sizeof(serr)),
	    STORE_OK);
	ck_assert_int_eq(already, 0);
	ck_assert_uint_eq(ids.n, 1);	/* only b was still active */
	ck_assert_str_eq(ids.ids[0], b.id);
	store_ids_free(&ids);
	ck_assert_int_eq(verify(&b, 200, NULL), STORE_UNAUTHORIZED);
	ck_assert_int_eq(store_revoke_workspace(st, "w", 180, &already, &ids,
	    serr, sizeof(serr)),
	    STORE_OK);
	ck_assert_int_eq(already, 1);
	ck_assert_uint_eq(ids.n, 0);
	ck_assert_int_eq(store_revoke_workspace(st, "nope", 180, &already,
	    &ids, serr, sizeof(serr)), STORE_NOT_FOUND);

	/* A revoked workspace gets no new credential. */
	tok_new(&c);
	ck_assert_int_eq(store_issue(st, "w", NULL, &defaults, c.hash, 200, 0,
	    &created, &p, serr, sizeof(serr)), STORE_CONFLICT);
	ck_assert_ptr_nonnull(strstr(serr, "revoked"));
	ck_assert_int_eq(verify(&c, 200, NULL), STORE_UNAUTHORIZED);
}
END_TEST

START_TEST(reissue_keeps_policy_and_never_widens)
{
	struct auth_policy_patch net = { .fields = POLICY_F_NETWORK,
	    .p.network = 1 };
	struct auth_policy_patch narrow = { .fields = POLICY_F_MAX_VMS,
	    .p.max_vms = 1 };
	struct store_verdict v;
	struct auth_policy p;
	struct tok a, b, c;
	int created;

	issue("w", &narrow, &a, 100, 0);
	tok_new(&b);
	ck_assert_int_eq(store_issue(st, "w", &net, &defaults, b.hash, 110, 0,
	    &created, &p, serr, sizeof(serr)), STORE_CONFLICT);
	ck_assert_ptr_nonnull(strstr(serr, "policy set"));
	ck_assert_int_eq(verify(&b, 200, NULL), STORE_UNAUTHORIZED);
	/* No patch, or the same values: another credential, same policy. */
	ck_assert_int_eq(store_issue(st, "w", NULL, &defaults, b.hash, 110, 0,
	    &created, &p, serr, sizeof(serr)), STORE_OK);
	ck_assert_int_eq(created, 0);
	ck_assert_uint_eq(p.max_vms, 1);
	tok_new(&c);
	ck_assert_int_eq(store_issue(st, "w", &narrow, &defaults, c.hash, 120,
	    0, &created, &p, serr, sizeof(serr)), STORE_OK);
	ck_assert_int_eq(verify(&a, 200, &v), STORE_OK);
	ck_assert_int_eq(verify(&b, 200, &v), STORE_OK);
	ck_assert_uint_eq(v.policy.max_vms, 1);
	ck_assert_int_eq(v.policy.network, 0);
}
END_TEST

START_TEST(rotate_keeps_policy_and_revokes_old)
{
	struct auth_policy_patch pt = { .fields = POLICY_F_NETWORK |
	    POLICY_F_IMAGES, .p = { .network = 1, .nimages = 1,
	    .images = { "img" } } };
	struct store_verdict v;
	struct store_ids ids;
	struct auth_policy p;
	struct tok a, b, n1, n2;

	issue("w", &pt, &a, 100, 0);
	issue("w", NULL, &b, 100, 0);
	tok_new(&n1);
	ck_assert_int_eq(store_rotate(st, "w", a.id, n1.hash, 110, 0, &p,
	    &ids, serr, sizeof(serr)), STORE_OK);
	ck_assert_uint_eq(ids.n, 1);
	ck_assert_str_eq(ids.ids[0], a.id);
	store_ids_free(&ids);
	ck_assert_int_eq(verify(&a, 120, NULL), STORE_UNAUTHORIZED);
	ck_assert_int_eq(verify(&b, 120, NULL), STORE_OK);
	ck_assert_int_eq(verify(&n1, 120, &v), STORE_OK);
	ck_assert_int_eq(v.policy.network, 1);
	ck_assert_uint_eq(v.policy.nimages, 1);
	ck_assert_str_eq(v.policy.images[0], "img");

	/* Without an id every other credential goes. */
	tok_new(&n2);
	ck_assert_int_eq(store_rotate(st, "w", NULL, n2.hash, 130, 500, &p,
	    &ids, serr, sizeof(serr)), STORE_OK);
	ck_assert_uint_eq(ids.n, 2);
	store_ids_free(&ids);
	ck_assert_int_eq(verify(&b, 140, NULL), STORE_UNAUTHORIZED);
	ck_assert_int_eq(verify(&n1, 140, NULL), STORE_UNAUTHORIZED);
	ck_assert_int_eq(verify(&n2, 140, &v), STORE_OK);
	ck_assert_int_eq(v.expires_at, 500);
	ck_assert_int_eq(v.policy.network, 1);

	tok_new(&n1);
	ck_assert_int_eq(store_rotate(st, "none", NULL, n1.hash, 130, 0, &p,
	    &ids, serr, sizeof(serr)), STORE_NOT_FOUND);
	ck_assert_int_eq(store_rotate(st, "w", "0000000000000000", n1.hash,
	    130, 0, &p, &ids, serr, sizeof(serr)), STORE_NOT_FOUND);
	ck_assert_int_eq(verify(&n1, 140, NULL), STORE_UNAUTHORIZED);
}
END_TEST

START_TEST(policy_set_changes_policy)
{
	struct auth_policy_patch pt = { .fields = POLICY_F_NETWORK |
	    POLICY_F_STORAGE, .p = { .network = 1, .storage_gib = 99 } };
	struct store_verdict v;
	struct auth_policy p;
	struct tok a;

	issue("w", NULL, &a, 100, 0);
	ck_assert_int_eq(store_policy_set(st, "w", &pt, &p, serr, sizeof(serr)),
	    STORE_OK);
	ck_assert_int_eq(p.network, 1);
	ck_assert_int_eq(verify(&a, 120, &v), STORE_OK);
	ck_assert_int_eq(v.policy.network, 1);
	ck_assert_uint_eq(v.policy.storage_gib, 99);
	ck_assert_uint_eq(v.policy.max_vms, defaults.max_vms);
	ck_assert_int_eq(store_policy_set(st, "x", &pt, &p, serr, sizeof(serr)),
	    STORE_NOT_FOUND);
}
END_TEST

START_TEST(policy_set_gates)
{
	struct auth_policy_patch exec = { .fields = POLICY_F_GATES,
	    .gate_fields = GATE_F_CLASS(GATE_EXEC) }, res = exec, thr = exec;
	struct auth_policy_patch destroy = { .fields = POLICY_F_GATES,
	    .gate_fields = GATE_F_CLASS(GATE_DESTROY) };
	struct store_verdict v;
	struct auth_policy p;
	struct tok a, b;
	int created;

	/* A new workspace gets its gates with its first credential. */
	destroy.p.gates.need[GATE_DESTROY] = 2;
	issue("w", &destroy, &a, 100, 0);
	ck_assert_int_eq(verify(&a, 120, &v), STORE_OK);
	ck_assert_int_eq(v.policy.gates.need[GATE_DESTROY], 2);
	ck_assert_int_eq(v.policy.gates.need[GATE_EXEC], 0);
	/* Gating exec keeps the destroy gate. */
	exec.p.gates.need[GATE_EXEC] = 1;
	ck_assert_int_eq(store_policy_set(st, "w", &exec, &p, serr,
	    sizeof(serr)), STORE_OK);
	ck_assert_int_eq(verify(&a, 120, &v), STORE_OK);
	ck_assert_int_eq(v.policy.gates.need[GATE_EXEC], 1);
	ck_assert_int_eq(v.policy.gates.need[GATE_DESTROY], 2);
	/* A resources gate without a threshold is refused, nothing
	 * changed; with one stored it is taken. */
	res.gate_fields = GATE_F_CLASS(GATE_RESOURCES);
	res.p.gates.need[GATE_RESOURCES] = 1;
	ck_assert_int_eq(store_policy_set(st, "w", &res, &p, serr,
	    sizeof(serr)), STORE_INVALID);
	ck_assert_ptr_nonnull(strstr(serr, "a resources gate needs a "
	    "threshold"));
	ck_assert_int_eq(verify(&a, 120, &v), STORE_OK);
	ck_assert_int_eq(v.policy.gates.need[GATE_RESOURCES], 0);
	thr.gate_fields = GATE_F_MEMORY;
	thr.p.gates.memory_mib_above = 8192;
	ck_assert_int_eq(store_policy_set(st, "w", &thr, &p, serr,
	    sizeof(serr)), STORE_OK);
	ck_assert_int_eq(store_policy_set(st, "w", &res, &p, serr,
	    sizeof(serr)), STORE_OK);
	ck_assert_int_eq(verify(&a, 120, &v), STORE_OK);
	ck_assert_int_eq(v.policy.gates.need[GATE_RESOURCES], 1);
	ck_assert_uint_eq(v.policy.gates.memory_mib_above, 8192);
	ck_assert_int_eq(v.policy.gates.need[GATE_DESTROY], 2);
	/* Nor does a new workspace take one; no workspace is made. */
	tok_new(&b);
	ck_assert_int_eq(store_issue(st, "x", &res, &defaults, b.hash, 100, 0,
	    &created, &p, serr, sizeof(serr)), STORE_INVALID);
	ck_assert_int_eq(created, 0);
	ck_assert_int_eq(verify(&b, 120, NULL), STORE_UNAUTHORIZED);
	ck_assert_int_eq(store_policy_set(st, "x", &exec, &p, serr,
	    sizeof(serr)), STORE_NOT_FOUND);
}
END_TEST

START_TEST(list_and_show)
{
	struct store_workspace *ws, w;
	struct store_cred *cs;
	struct tok a, b, c;
	size_t n;
	int trunc;

	issue("b-ws", NULL, &a, 100, 0);
	issue("a-ws", NULL, &b, 100, 150);
	issue("a-ws", NULL, &c, 110, 0);
	ck_assert_int_eq(store_list(st, 200, 10, &ws, &n, &trunc, serr,
	    sizeof(serr)), STORE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(trunc, 0);
	ck_assert_str_eq(ws[0].id, "a-ws");
	ck_assert_uint_eq(ws[0].total, 2);
	ck_assert_uint_eq(ws[0].active, 1);	/* b expired */
	free(ws);
	ck_assert_int_eq(store_list(st, 200, 1, &ws, &n, &trunc, serr,
	    sizeof(serr)), STORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(trunc, 1);
	free(ws);
	ck_assert_int_eq(store_show(st, "a-ws", 200, 10, &w, &cs, &n, &trunc,
	    serr, sizeof(serr)),
	    STORE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(cs[0].id, c.id);	/* newest first */
	ck_assert_int_eq(cs[1].expires_at, 150);
	free(cs);
	ck_assert_int_eq(store_show(st, "zz", 200, 10, &w, &cs, &n, &trunc,
	    serr, sizeof(serr)),
	    STORE_NOT_FOUND);
}
END_TEST

static void
count_expired(const char *ws, const char *id, void *arg)
{
	(*(int *)arg)++;
	ck_assert_str_eq(ws, "w");
	ck_assert_uint_eq(strlen(id), CRED_ID_LEN);
}

START_TEST(expired_window)
{
	struct tok a, b, c;
	int n = 0;
	int already;
	char ws[AUTH_WORKSPACE_MAX + 1];

	issue("w", NULL, &a, 100, 150);
	issue("w", NULL, &b, 100, 160);
	issue("w", NULL, &c, 100, 155);
	ck_assert_int_eq(store_revoke_cred(st, c.id, 120, ws, &already, serr,
	    sizeof(serr)),
	    STORE_OK);
	ck_assert_int_eq(store_expired(st, 149, 155, count_expired, &n, serr,
	    sizeof(serr)),
	    STORE_OK);
	ck_assert_int_eq(n, 1);		/* a; c is revoked */
	n = 0;
	ck_assert_int_eq(store_expired(st, 150, 160, count_expired, &n, serr,
	    sizeof(serr)),
	    STORE_OK);
	ck_assert_int_eq(n, 1);		/* b */
}
END_TEST

START_TEST(only_hashes_are_stored)
{
	struct tok t[20];
	char ws[8];
	char wal[160];

	for (int i = 0; i < 20; i++) {
		snprintf(ws, sizeof(ws), "w%d", i % 3);
		issue(ws, NULL, &t[i], 100, 0);
	}
	store_close(st);
	st = NULL;
	snprintf(wal, sizeof(wal), "%s-wal", path);
	for (int i = 0; i < 20; i++) {
		ck_assert(!file_contains(path, t[i].text));
		ck_assert(!file_contains(wal, t[i].text));
		/* Nor the base64 body alone. */
		ck_assert(!file_contains(path, t[i].text + CRED_PREFIX_LEN));
		ck_assert(!file_contains(wal, t[i].text + CRED_PREFIX_LEN));
	}
	/* The data is there: reopening verifies every credential. */
	{
		char err[STORE_ERR_MAX];

		st = store_open(path, err, sizeof(err));
		ck_assert_msg(st != NULL, "%s", err);
		for (int i = 0; i < 20; i++)
			ck_assert_int_eq(verify(&t[i], 200, NULL), STORE_OK);
	}
}
END_TEST

START_TEST(refuses_group_readable_file)
{
	char p2[160], err[STORE_ERR_MAX];
	int fd;

	snprintf(p2, sizeof(p2), "%s/open.db", dir);
	fd = open(p2, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchmod(fd, 0640), 0);
	close(fd);
	ck_assert_ptr_null(store_open(p2, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "mode 0640"));
	ck_assert_ptr_nonnull(strstr(err, "0600"));
}
END_TEST

START_TEST(refuses_symlink)
{
	char p2[160], err[STORE_ERR_MAX];

	snprintf(p2, sizeof(p2), "%s/link.db", dir);
	ck_assert_int_eq(symlink(path, p2), 0);
	ck_assert_ptr_null(store_open(p2, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
}
END_TEST

START_TEST(corrupt_file_is_refused_and_left_alone)
{
	char p2[160], err[STORE_ERR_MAX], buf[4096], back[4096];
	FILE *f;
	int fd;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7 + 3);
	snprintf(p2, sizeof(p2), "%s/junk.db", dir);
	fd = open(p2, O_CREAT | O_WRONLY | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(fd);
	ck_assert_ptr_null(store_open(p2, err, sizeof(err)));
	ck_assert_msg(strstr(err, "not a database") != NULL, "%s", err);
	f = fopen(p2, "rb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(back, 1, sizeof(back), f), sizeof(back));
	fclose(f);
	ck_assert_int_eq(memcmp(buf, back, sizeof(buf)), 0);
}
END_TEST

START_TEST(newer_schema_is_refused)
{
	char err[STORE_ERR_MAX];
	sqlite3 *db;

	store_close(st);
	st = NULL;
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "PRAGMA user_version = 99", NULL,
	    NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_ptr_null(store_open(path, err, sizeof(err)));
	ck_assert_msg(strstr(err, "schema version 99") != NULL, "%s", err);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, new_database_is_0600_wal_and_versioned);
	tcase_add_test(tc, issue_then_verify);
	tcase_add_test(tc, expired_credential_is_unauthorized);
	tcase_add_test(tc, revoked_credential_and_workspace);
	tcase_add_test(tc, reissue_keeps_policy_and_never_widens);
	tcase_add_test(tc, rotate_keeps_policy_and_revokes_old);
	tcase_add_test(tc, policy_set_changes_policy);
	tcase_add_test(tc, policy_set_gates);
	tcase_add_test(tc, list_and_show);
	tcase_add_test(tc, expired_window);
	tcase_add_test(tc, only_hashes_are_stored);
	tcase_add_test(tc, refuses_group_readable_file);
	tcase_add_test(tc, refuses_symlink);
	tcase_add_test(tc, corrupt_file_is_refused_and_left_alone);
	tcase_add_test(tc, newer_schema_is_refused);
	suite_add_tcase(s, tc);
	return check_run(s);
}
