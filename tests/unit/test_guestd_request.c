/*
 * Unit tests for guestd/request: what a host request must look like before
 * any handler runs, and which mistakes end the link versus get a reply.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "guestd.h"
#include "../check_run.h"

#define P(s)	(s), strlen(s)

static int
decode(const char *json, const char *body, struct req *r, char *err)
{
	return req_decode(P(json), body, body ? strlen(body) : 0,
	    body != NULL, r, err, 256);
}

START_TEST(exec_decoded)
{
	struct req r;
	char err[256];

	ck_assert_int_eq(decode("{\"id\":4,\"op\":\"exec\",\"job_id\":\"j-1\","
	    "\"command\":\"ls\",\"cwd\":\"src\",\"timeout_ms\":3000,"
	    "\"env\":{\"A\":\"1\"}}", "in", &r, err), 0);
	ck_assert_uint_eq(r.id, 4);
	ck_assert_int_eq(r.op, OP_EXEC);
	ck_assert_str_eq(r.job_id, "j-1");
	ck_assert_str_eq(r.cwd, "src");
	ck_assert_int_eq(r.timeout_ms, 3000);
	ck_assert_int_eq(r.has_body, 1);
	ck_assert_uint_eq(r.body_len, 2);
	req_free(&r);
}
END_TEST

START_TEST(envelope_errors_end_the_link)
{
	struct req r;
	char err[256];

	ck_assert_int_eq(decode("{\"op\":\"ping\"}", NULL, &r, err), -1);
	req_free(&r);
	ck_assert_int_eq(decode("{\"id\":\"1\",\"op\":\"ping\"}", NULL, &r,
	    err), -1);
	req_free(&r);
	ck_assert_int_eq(decode("{\"id\":1,\"op\":7}", NULL, &r, err), -1);
	req_free(&r);
	ck_assert_int_eq(decode("not json", NULL, &r, err), -1);
	req_free(&r);
}
END_TEST

START_TEST(argument_errors_get_replies)
{
	static const char *bad[] = {
		"{\"id\":1,\"op\":\"nope\"}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a b\","
		    "\"command\":\"x\"}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a\",\"command\":\"\"}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a\",\"command\":1}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a\",\"command\":\"x\","
		    "\"env\":{\"1A\":\"x\"}}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a\",\"command\":\"x\","
		    "\"env\":{\"A\":2}}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a\",\"command\":\"x\","
		    "\"timeout_ms\":-1}",
		"{\"id\":1,\"op\":\"job_output\",\"job_id\":\"a\","
		    "\"max_bytes\":16385}",
		"{\"id\":1,\"op\":\"job_output\",\"job_id\":\"a\","
		    "\"stdout_cursor\":-5}",
		"{\"id\":1,\"op\":\"job_cancel\"}",
		"{\"id\":1,\"op\":\"file_read\",\"path\":true}",
		"{\"id\":1,\"op\":\"file_write\",\"path\":\"a\",\"mode\":4095}",
		"{\"id\":1,\"op\":\"file_write\",\"path\":\"a\"}",
		"{\"id\":1,\"op\":\"clock_set\"}",
	};
	struct req r;
	char err[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(decode(bad[i], NULL, &r, err) == 1,
		    "accepted: %s", bad[i]);
		ck_assert_uint_eq(r.id, 1);
		ck_assert_str_ne(err, "");
		req_free(&r);
	}
	/* A body where none belongs. */
	ck_assert_int_eq(decode("{\"id\":1,\"op\":\"ping\"}", "x", &r, err),
	    1);
	req_free(&r);
}
END_TEST

START_TEST(file_write_body_limit)
{
	struct req r;
	char err[256];
	char *big = malloc(GUEST_MAX_FILE + 2);

	memset(big, 'a', GUEST_MAX_FILE + 1);
	big[GUEST_MAX_FILE + 1] = '\0';
	ck_assert_int_eq(decode("{\"id\":2,\"op\":\"file_write\",\"path\":"
	    "\"f\"}", big, &r, err), 1);
	ck_assert_ptr_nonnull(strstr(err, "limit"));
	req_free(&r);
	big[GUEST_MAX_FILE] = '\0';
	ck_assert_int_eq(decode("{\"id\":2,\"op\":\"file_write\",\"path\":"
	    "\"f\",\"mode\":493,\"create_parents\":true}", big, &r, err), 0);
	ck_assert_int_eq(r.mode, 0755);
	ck_assert_int_eq(r.create_parents, 1);
	req_free(&r);
	free(big);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("guestd_request");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, exec_decoded);
	tcase_add_test(tc, envelope_errors_end_the_link);
	tcase_add_test(tc, argument_errors_get_replies);
	tcase_add_test(tc, file_write_body_limit);
	suite_add_tcase(s, tc);
	return check_run(s);
}
