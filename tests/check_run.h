/*
 * The runner every Check suite of tests/unit and tests/integration ends
 * with: one place for what each main() used to repeat.
 */
#ifndef MCPVM_TESTS_CHECK_RUN_H
#define MCPVM_TESTS_CHECK_RUN_H

#include <check.h>

/*
 * Runs every test of s and returns main's exit status: 0 when all
 * passed, 1 otherwise.  Each test runs in its own child unless fork is
 * CK_NOFORK (or CK_FORK=no in the environment, with CK_FORK_GETENV);
 * check_run is that default.
 */
static inline int
check_run_forking(Suite *s, enum fork_status fork)
{
	SRunner *sr = srunner_create(s);
	int failed;

	if (fork != CK_FORK_GETENV)
		srunner_set_fork_status(sr, fork);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

static inline int
check_run(Suite *s)
{
	return check_run_forking(s, CK_FORK_GETENV);
}

#endif
