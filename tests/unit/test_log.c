/*
 * Unit tests for common/log: credential redaction and line sanitising.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "../check_run.h"

START_TEST(redacts_credentials)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "token mcpvm_%s seen",
	    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
	log_redact(buf);
	ck_assert_str_eq(buf, "token mcpvm_<redacted> seen");
}
END_TEST

START_TEST(redacts_every_occurrence)
{
	char buf[256] = "a mcpvm_abcdefghijklmnopqrstuvwxyz0123 b "
	    "mcpvm_ZZZZZZZZZZZZZZZZZZZZZZZZ-_ c";

	log_redact(buf);
	ck_assert_str_eq(buf, "a mcpvm_<redacted> b mcpvm_<redacted> c");
}
END_TEST

START_TEST(keeps_short_names)
{
	char buf[64] = "mcpvm_auth and mcpvm_3 stay";

	log_redact(buf);
	ck_assert_str_eq(buf, "mcpvm_auth and mcpvm_3 stay");
}
END_TEST

START_TEST(stderr_line_is_redacted_and_sanitised)
{
	int fds[2];
	char out[512];
	ssize_t n;
	int saved;

	ck_assert_int_eq(pipe(fds), 0);
	saved = dup(STDERR_FILENO);
	dup2(fds[1], STDERR_FILENO);
	log_init("unit", 1, 0);
	log_warnx("peer sent mcpvm_QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo\nforged");
	log_debug("not shown at verbosity 0");
	dup2(saved, STDERR_FILENO);
	close(fds[1]);
	n = read(fds[0], out, sizeof(out) - 1);
	ck_assert_int_gt(n, 0);
	out[n] = '\0';
	ck_assert_ptr_nonnull(strstr(out, "unit["));
	ck_assert_ptr_nonnull(strstr(out,
	    "peer sent mcpvm_<redacted>?forged\n"));
	ck_assert_ptr_null(strstr(out, "QUJD"));
	ck_assert_ptr_null(strstr(out, "not shown"));
	close(fds[0]);
	close(saved);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, redacts_credentials);
	tcase_add_test(tc, redacts_every_occurrence);
	tcase_add_test(tc, keeps_short_names);
	tcase_add_test(tc, stderr_line_is_redacted_and_sanitised);
	suite_add_tcase(s, tc);
	return check_run(s);
}
