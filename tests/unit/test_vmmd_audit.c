/*
 * Unit tests for vmmd's hash-chained audit log: the chain verifies, and
 * an edited, removed, reordered or cut-off line is caught.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "log.h"
#include "store.h"
#include "../check_run.h"

static char dir[64], dbpath[128], logpath[128];

static void
setup(void)
{
	strcpy(dir, "/tmp/mcpvm-audit-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(dbpath, sizeof(dbpath), "%s/vmmd.db", dir);
	snprintf(logpath, sizeof(logpath), "%s/audit.log", dir);
}

static void
teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Writes five entries and returns the store holding the anchor. */
static struct store *
write_chain(void)
{
	char err[512];
	struct store *s = store_open(dbpath, err, sizeof(err));
	struct audit *a;

	ck_assert_ptr_nonnull(s);
	a = audit_open(logpath, s, err, sizeof(err));
	ck_assert_msg(a != NULL, "%s", err);
	ck_assert_int_eq(audit_append(a, "ws-a", "vm_create", "v1", "ok"), 0);
	ck_assert_int_eq(audit_append(a, "ws-a", "vm_exec", "v1", "ok"), 0);
	ck_assert_int_eq(audit_append(a, "ws-b", "vm_create", "",
	    "quota_exceeded"), 0);
	audit_close(a);
	/* Reopening continues the same chain. */
	a = audit_open(logpath, s, err, sizeof(err));
	ck_assert_msg(a != NULL, "%s", err);
	ck_assert_int_eq(audit_append(a, "ws-a", "vm_destroy", "v1", "ok"), 0);
	ck_assert_int_eq(audit_append(a, "ws-\"q\"\n", "vm_exec", "v2", "ok"),
	    0);
	audit_close(a);
	return s;
}

static int
verify(struct store *s, char *err, size_t errlen, long long *n)
{
	char hash[65];
	long long seq;

	ck_assert_int_eq(store_audit_anchor_get(s, &seq, hash, sizeof(hash),
	    err, errlen), 0);
	return audit_verify(logpath, seq, hash, n, err, errlen);
}

static char **
read_lines(size_t *n)
{
	FILE *f = fopen(logpath, "r");
	char **lines = calloc(64, sizeof(char *)), buf[4096];

	*n = 0;
	while (fgets(buf, sizeof(buf), f) != NULL)
		lines[(*n)++] = strdup(buf);
	fclose(f);
	return lines;
}

/* Writes the first n of the lines back, then frees all `total`. */
static void
write_lines(char **lines, size_t n, size_t total)
{
	FILE *f = fopen(logpath, "w");

	for (size_t i = 0; i < n; i++)
		fputs(lines[i], f);
	fclose(f);
	for (size_t i = 0; i < total; i++)
		free(lines[i]);
	free(lines);
}

START_TEST(chain_verifies)
{
	struct store *s = write_chain();
	char err[256];
	long long n;

	ck_assert_int_eq(verify(s, err, sizeof(err), &n), 0);
	ck_assert_int_eq(n, 5);
	store_close(s);
}
END_TEST

START_TEST(one_byte_edit_is_caught)
{
	struct store *s = write_chain();
	char err[256], *p;
	size_t n;
	long long nl;
	char **lines = read_lines(&n);

	p = strstr(lines[1], "vm_exec");
	p[3] = 'X';	/* vm_exec -> vm_Xxec */
	write_lines(lines, n, n);
	ck_assert_int_eq(verify(s, err, sizeof(err), &nl), -1);
	ck_assert_str_eq(err, "line 2: hash does not match the line's "
	    "content (edited)");
	/* vmmd refuses to append to a broken chain. */
	ck_assert_ptr_null(audit_open(logpath, s, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "does not verify"));
	store_close(s);
}
END_TEST

START_TEST(removed_line_is_caught)
{
	struct store *s = write_chain();
	char err[256], *t;
	size_t n;
	long long nl;
	char **lines = read_lines(&n);

	t = lines[2];
	memmove(&lines[2], &lines[3], (n - 3) * sizeof(char *));
	lines[n - 1] = t;
	write_lines(lines, n - 1, n);
	ck_assert_int_eq(verify(s, err, sizeof(err), &nl), -1);
	ck_assert_ptr_nonnull(strstr(err, "line 3: sequence number is not 3"));
	store_close(s);
}
END_TEST

START_TEST(reordered_lines_are_caught)
{
	struct store *s = write_chain();
	char err[256], *t;
	size_t n;
	long long nl;
	char **lines = read_lines(&n);

	t = lines[1];
	lines[1] = lines[2];
	lines[2] = t;
	write_lines(lines, n, n);
	ck_assert_int_eq(verify(s, err, sizeof(err), &nl), -1);
	ck_assert_ptr_nonnull(strstr(err, "line 2: "));
	store_close(s);
}
END_TEST

START_TEST(cut_tail_is_caught)
{
	struct store *s = write_chain();
	char err[256];
	size_t n;
	long long nl;
	char **lines = read_lines(&n);

	write_lines(lines, n - 2, n);
	ck_assert_int_eq(verify(s, err, sizeof(err), &nl), -1);
	ck_assert_ptr_nonnull(strstr(err, "lines cut off the end"));
	store_close(s);
}
END_TEST

START_TEST(torn_last_line_is_caught)
{
	struct store *s = write_chain();
	char err[256];
	long long nl;
	FILE *f = fopen(logpath, "a");

	fputs("{\"seq\":6,", f);
	fclose(f);
	ck_assert_int_eq(verify(s, err, sizeof(err), &nl), -1);
	ck_assert_ptr_nonnull(strstr(err, "line 6: not terminated"));
	store_close(s);
}
END_TEST

static int kicks;

static void
count_kick(void *arg)
{
	kicks++;
}

static long
file_size(const char *path)
{
	FILE *f = fopen(path, "r");
	long n;

	if (f == NULL)
		return 0;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fclose(f);
	return n;
}

/* Lines wait for audit_flush, which writes them all with one anchor; the
 * chain, file and anchor agree before and after. */
START_TEST(lines_are_committed_together)
{
	char err[512], hash[65];
	struct store *s = store_open(dbpath, err, sizeof(err));
	struct audit *a;
	long long seq, n;

	ck_assert_ptr_nonnull(s);
	a = audit_open(logpath, s, err, sizeof(err));
	ck_assert_msg(a != NULL, "%s", err);
	kicks = 0;
	audit_set_kick(a, count_kick, NULL);
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(audit_append(a, "ws-a", "vm_exec", "v1",
		    "unavailable"), 0);
	ck_assert_int_eq(kicks, 50);
	/* Nothing written or anchored yet, and what is there verifies. */
	ck_assert_int_eq(file_size(logpath), 0);
	ck_assert_int_eq(store_audit_anchor_get(s, &seq, hash, sizeof(hash),
	    err, sizeof(err)), 0);
	ck_assert_int_eq(seq, 0);
	ck_assert_int_eq(audit_verify(logpath, seq, hash, &n, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(audit_flush(a), 0);
	ck_assert_int_gt(file_size(logpath), 0);
	ck_assert_int_eq(verify(s, err, sizeof(err), &n), 0);
	ck_assert_int_eq(n, 50);
	/* A flush with nothing pending writes nothing. */
	ck_assert_int_eq(audit_flush(a), 0);
	ck_assert_int_eq(audit_append(a, "ws-a", "vm_destroy", "v1", "ok"),
	    0);
	audit_close(a);		/* flushes */
	ck_assert_int_eq(verify(s, err, sizeof(err), &n), 0);
	ck_assert_int_eq(n, 51);
	store_close(s);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("vmmd_audit");
	TCase *tc = tcase_create("core");

	log_init("test_vmmd_audit", 1, 0);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, chain_verifies);
	tcase_add_test(tc, one_byte_edit_is_caught);
	tcase_add_test(tc, removed_line_is_caught);
	tcase_add_test(tc, reordered_lines_are_caught);
	tcase_add_test(tc, cut_tail_is_caught);
	tcase_add_test(tc, torn_last_line_is_caught);
	tcase_add_test(tc, lines_are_committed_together);
	suite_add_tcase(s, tc);
	return check_run(s);
}
