/*
 * Gated actions (common/gates.c): the class names, the default counts, and
 * the strict JSON form authd stores and vmmd decodes from authd's policy
 * (vmmd's policy_from_json hands "approvals" to gates_from_json with the
 * path "policy.approvals"): every refusal names the member and the rule.
 */
#include <stdio.h>
#include <string.h>

#include <check.h>
#include <json-c/json.h>

#include "gates.h"
#include "../check_run.h"

/* gates_from_json of text, as vmmd calls it. */
static int
decode(const char *text, struct gates *g, char *why, size_t whylen)
{
	struct json_object *o = json_tokener_parse(text);
	int rc;

	ck_assert_msg(o != NULL, "not JSON: %s", text);
	why[0] = '\0';
	rc = gates_from_json(o, "policy.approvals", g, why, whylen);
	json_object_put(o);
	return rc;
}

START_TEST(names_and_defaults)
{
	for (int c = 0; c < GATE_NCLASSES; c++) {
		ck_assert_ptr_nonnull(gate_class_name(c));
		ck_assert_int_eq(gate_class_from_name(gate_class_name(c)), c);
	}
	ck_assert_ptr_null(gate_class_name(GATE_NCLASSES));
	ck_assert_int_eq(gate_class_from_name("vm_exec"), -1);
	ck_assert_int_eq(gate_class_from_name(""), -1);
	ck_assert_int_eq(gate_default_need(GATE_DESTROY), 2);
	ck_assert_int_eq(gate_default_need(GATE_SNAPSHOT_DELETE), 2);
	ck_assert_int_eq(gate_default_need(GATE_EXEC), 1);
	ck_assert_int_eq(gate_default_need(GATE_BROKER_PIPE), 1);
}
END_TEST

START_TEST(absent_is_nothing_gated)
{
	struct gates g;
	char why[256];

	memset(&g, 0xff, sizeof(g));
	ck_assert_int_eq(decode("{}", &g, why, sizeof(why)), 0);
	ck_assert(!gates_any(&g));
	ck_assert_uint_eq(g.memory_mib_above, 0);
	ck_assert_uint_eq(g.vcpus_above, 0);
}
END_TEST

START_TEST(round_trip)
{
	struct gates g = { .need = { [GATE_EXEC] = 1, [GATE_DESTROY] = 2,
	    [GATE_RESOURCES] = 1 }, .memory_mib_above = 8192,
	    .vcpus_above = 4 }, back;
	struct json_object *o = gates_to_json(&g);
	char why[256];

	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN), "{\"exec\":1,\"network\":0,"
	    "\"resources\":1,\"destroy\":2,\"snapshot_delete\":0,"
	    "\"broker_pipe\":0,\"memory_mib_above\":8192,\"vcpus_above\":4}");
	ck_assert_int_eq(gates_from_json(o, "policy.approvals", &back, why,
	    sizeof(why)), 0);
	ck_assert_mem_eq(&back, &g, sizeof(g));
	ck_assert(gates_any(&back));
	json_object_put(o);
}
END_TEST

START_TEST(refusals_name_member_and_rule)
{
	static const struct {
		const char	*json;
		const char	*why;
	} bad[] = {
		{ "[]", "policy.approvals: must be an object" },
		{ "1", "policy.approvals: must be an object" },
		{ "{\"deploy\":1}", "policy.approvals.deploy: no such gated "
		    "action (exec, network, resources, destroy, "
		    "snapshot_delete, broker_pipe)" },
		{ "{\"exec\":3}", "policy.approvals: " },
		{ "{\"exec\":-1}", "policy.approvals: " },
		{ "{\"exec\":true}", "policy.approvals: " },
		{ "{\"exec\":\"1\"}", "policy.approvals: " },
		{ "{\"exec\":1.0}", "policy.approvals: " },
		{ "{\"destroy\":null}", "policy.approvals: " },
		{ "{\"memory_mib_above\":1048577}", "policy.approvals: " },
		{ "{\"vcpus_above\":1025}", "policy.approvals: " },
		{ "{\"vcpus_above\":-1}", "policy.approvals: " },
		{ "{\"resources\":1}", "policy.approvals.resources: a "
		    "resources gate needs memory_mib_above or vcpus_above" },
		{ "{\"resources\":2,\"memory_mib_above\":0,\"vcpus_above\":0}",
		    "a resources gate needs" },
	};
	struct gates g;
	char why[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(decode(bad[i].json, &g, why, sizeof(why)) == -1,
		    "%s accepted", bad[i].json);
		ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: '%s'",
		    bad[i].json, why);
	}
	/* The member at fault is named. */
	ck_assert_int_eq(decode("{\"exec\":3}", &g, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "exec"));
	ck_assert_int_eq(decode("{\"vcpus_above\":1025}", &g, why,
	    sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "vcpus_above"));
	/* At the bounds it is taken. */
	ck_assert_int_eq(decode("{\"resources\":2,\"memory_mib_above\":"
	    "1048576,\"vcpus_above\":1024,\"broker_pipe\":0}", &g, why,
	    sizeof(why)), 0);
	ck_assert_int_eq(g.need[GATE_RESOURCES], 2);
	ck_assert_uint_eq(g.memory_mib_above, 1048576);
	ck_assert_uint_eq(g.vcpus_above, 1024);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("gates");
	TCase *tc = tcase_create("gates");

	tcase_add_test(tc, names_and_defaults);
	tcase_add_test(tc, absent_is_nothing_gated);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, refusals_name_member_and_rule);
	suite_add_tcase(s, tc);
	return check_run(s);
}
