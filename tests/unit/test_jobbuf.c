/*
 * Unit tests for guestd/jobbuf: retained output across two streams, cursor
 * reads, truncation, and timeout budgets that skip frozen time.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "guest.h"
#include "jobbuf.h"
#include "../check_run.h"

#define SEC	1000000000LL

START_TEST(separate_streams_and_cursors)
{
	struct jobout o;
	const uint8_t *p;
	size_t n;

	jobout_init(&o, GUEST_OUTPUT_MAX);
	ck_assert_int_eq(jobout_append(&o, JOB_STDOUT, "hello ", 6), 0);
	ck_assert_int_eq(jobout_append(&o, JOB_STDERR, "oops", 4), 0);
	ck_assert_int_eq(jobout_append(&o, JOB_STDOUT, "world", 5), 0);
	n = jobout_read(&o, JOB_STDOUT, 0, 16384, &p);
	ck_assert_uint_eq(n, 11);
	ck_assert_mem_eq(p, "hello world", 11);
	/* Reading is non-destructive: the same cursor gives the same bytes. */
	n = jobout_read(&o, JOB_STDOUT, 6, 3, &p);
	ck_assert_uint_eq(n, 3);
	ck_assert_mem_eq(p, "wor", 3);
	n = jobout_read(&o, JOB_STDOUT, 6, 3, &p);
	ck_assert_mem_eq(p, "wor", 3);
	n = jobout_read(&o, JOB_STDERR, 0, 16384, &p);
	ck_assert_uint_eq(n, 4);
	ck_assert_mem_eq(p, "oops", 4);
	ck_assert_uint_eq(jobout_read(&o, JOB_STDERR, 4, 16384, &p), 0);
	ck_assert_uint_eq(jobout_read(&o, JOB_STDERR, 1000, 16384, &p), 0);
	ck_assert_int_eq(o.truncated, 0);
	jobout_free(&o);
}
END_TEST

START_TEST(truncation_shared_across_streams)
{
	static uint8_t chunk[65536];
	struct jobout o;
	const uint8_t *p;
	uint64_t cur = 0;
	size_t n, total = 0;
	int i;

	jobout_init(&o, GUEST_OUTPUT_MAX);
	memset(chunk, 'e', sizeof(chunk));
	ck_assert_int_eq(jobout_append(&o, JOB_STDERR, chunk, 1000), 0);
	memset(chunk, 'o', sizeof(chunk));
	for (i = 0; i < 16; i++)	/* 1 MiB on stdout */
		ck_assert_int_eq(jobout_append(&o, JOB_STDOUT, chunk,
		    sizeof(chunk)), 0);
	ck_assert_int_eq(o.truncated, 1);
	ck_assert_uint_eq(o.len[JOB_STDOUT] + o.len[JOB_STDERR],
	    GUEST_OUTPUT_MAX);
	ck_assert_uint_eq(o.len[JOB_STDERR], 1000);
	ck_assert_uint_eq(o.seen[JOB_STDOUT], 1 << 20);
	/* Later stderr is dropped too: the budget is shared. */
	ck_assert_int_eq(jobout_append(&o, JOB_STDERR, "x", 1), 0);
	ck_assert_uint_eq(o.len[JOB_STDERR], 1000);
	/* Paging at 16 KiB reaches exactly the retained prefix. */
	while ((n = jobout_read(&o, JOB_STDOUT, cur, GUEST_OUTPUT_READ_MAX,
	    &p)) > 0) {
		ck_assert_uint_le(n, GUEST_OUTPUT_READ_MAX);
		ck_assert_int_eq(p[0], 'o');
		cur += n;
		total += n;
	}
	ck_assert_uint_eq(total, GUEST_OUTPUT_MAX - 1000);
	jobout_free(&o);
}
END_TEST

START_TEST(budget_skips_frozen_time)
{
	struct budget b;

	/* 3 s timeout; frozen from t=1 to t=11. */
	budget_start(&b, 3 * SEC, 100 * SEC, 0);
	ck_assert_int_eq(budget_left(&b, 101 * SEC), 2 * SEC);
	budget_freeze(&b, 101 * SEC);
	ck_assert_int_eq(budget_left(&b, 105 * SEC), INT64_MAX);
	ck_assert_int_eq(budget_used(&b, 110 * SEC), 1 * SEC);
	budget_thaw(&b, 111 * SEC);
	ck_assert_int_eq(budget_left(&b, 111 * SEC), 2 * SEC);
	ck_assert_int_eq(budget_left(&b, 112 * SEC), 1 * SEC);
	ck_assert_int_eq(budget_left(&b, 113 * SEC), 0);
	ck_assert_int_eq(budget_left(&b, 120 * SEC), 0);
	budget_stop(&b, 113 * SEC);
	ck_assert_int_eq(budget_used(&b, 200 * SEC), 3 * SEC);
}
END_TEST

START_TEST(budget_repeated_freeze_and_start_frozen)
{
	struct budget b;

	budget_start(&b, 2 * SEC, 0, 1);	/* started while frozen */
	ck_assert_int_eq(budget_used(&b, 5 * SEC), 0);
	budget_thaw(&b, 5 * SEC);
	budget_freeze(&b, 6 * SEC);
	budget_freeze(&b, 7 * SEC);		/* twice: no effect */
	budget_thaw(&b, 9 * SEC);
	budget_thaw(&b, 10 * SEC);		/* twice: no restart */
	ck_assert_int_eq(budget_used(&b, 10 * SEC), 2 * SEC);
	ck_assert_int_eq(budget_left(&b, 10 * SEC), 0);
	/* No limit: never times out. */
	budget_start(&b, 0, 0, 0);
	ck_assert_int_eq(budget_left(&b, 1000 * SEC), INT64_MAX);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("jobbuf");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, separate_streams_and_cursors);
	tcase_add_test(tc, truncation_shared_across_streams);
	tcase_add_test(tc, budget_skips_frozen_time);
	tcase_add_test(tc, budget_repeated_freeze_and_start_frozen);
	suite_add_tcase(s, tc);
	return check_run(s);
}
