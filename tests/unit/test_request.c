/*
 * Unit tests for authd's request decoding (authd/request.c): every request
 * type's accepted shape and the refusals, each with a reason.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "request.h"
#include "../check_run.h"

static int
decode(uint32_t type, const char *text, struct authd_request *req,
    char *why, size_t whylen)
{
	struct json_object *o = json_tokener_parse(text);
	int rc;

	ck_assert_msg(o != NULL, "bad test JSON %s", text);
	why[0] = '\0';
	rc = authd_request_decode(type, o, req, why, whylen);
	json_object_put(o);
	return rc;
}

START_TEST(verify_wellformed_and_not)
{
	struct authd_request r;
	char why[256], tok[CRED_LEN + 1], body[128];

	ck_assert_int_eq(cred_generate(tok), 0);
	snprintf(body, sizeof(body), "{\"credential\":\"%s\"}", tok);
	ck_assert_int_eq(decode(IPC_AUTH_VERIFY, body, &r, why, sizeof(why)),
	    0);
	ck_assert_int_eq(r.cred_ok, 1);
	ck_assert_str_eq(r.credential, tok);
	/* Malformed is not a protocol error, merely never authorized. */
	ck_assert_int_eq(decode(IPC_AUTH_VERIFY, "{\"credential\":\"nope\"}",
	    &r, why, sizeof(why)), 0);
	ck_assert_int_eq(r.cred_ok, 0);
	ck_assert_int_eq(decode(IPC_AUTH_VERIFY, "{}", &r, why, sizeof(why)),
	    -1);
	ck_assert_str_eq(why, "$.credential: is required");
	ck_assert_int_eq(decode(IPC_AUTH_VERIFY, "{\"credential\":5}", &r, why,
	    sizeof(why)), -1);
	ck_assert_str_eq(why, "$.credential: expected string, got integer");
	ck_assert_int_eq(decode(IPC_AUTH_VERIFY,
	    "{\"credential\":\"a\\u0000b\"}", &r, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "$.credential: must not contain NUL characters");
}
END_TEST

START_TEST(issue_shapes)
{
	struct authd_request r;
	char why[256];

	ck_assert_int_eq(decode(IPC_AUTHCTL_ISSUE, "{\"workspace\":\"w-1\","
	    "\"ttl\":60,\"policy\":{\"network\":true}}", &r, why, sizeof(why)),
	    0);
	ck_assert_str_eq(r.workspace, "w-1");
	ck_assert_int_eq(r.has_ttl, 1);
	ck_assert_int_eq(r.ttl, 60);
	ck_assert_uint_eq(r.patch.fields, POLICY_F_NETWORK);
	ck_assert_int_eq(decode(IPC_AUTHCTL_ISSUE, "{\"workspace\":\"w\"}",
	    &r, why, sizeof(why)), 0);
	ck_assert_int_eq(r.has_ttl, 0);
	ck_assert_uint_eq(r.patch.fields, 0);
	ck_assert_int_eq(decode(IPC_AUTHCTL_ISSUE, "{\"workspace\":\"W\"}",
	    &r, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "lowercase"));
	ck_assert_int_eq(decode(IPC_AUTHCTL_ISSUE, "{\"workspace\":\"w\","
	    "\"ttl\":-1}", &r, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "$.ttl: must be at least 0 (seconds; 0 never expires)");
	ck_assert_int_eq(decode(IPC_AUTHCTL_ISSUE, "{\"workspace\":\"w\","
	    "\"ttl\":\"1\"}", &r, why, sizeof(why)), -1);
	ck_assert_int_eq(decode(IPC_AUTHCTL_ISSUE, "{\"workspace\":\"w\","
	    "\"credential_id\":\"0123456789abcdef\"}", &r, why, sizeof(why)),
	    -1);
	ck_assert_ptr_nonnull(strstr(why, "does not take"));
	ck_assert_int_eq(decode(IPC_AUTHCTL_ISSUE, "{\"ttl\":5}", &r, why,
	    sizeof(why)), -1);
	ck_assert_str_eq(why, "$.workspace: is required");
}
END_TEST

START_TEST(other_shapes)
{
	struct authd_request r;
	char why[256];

	ck_assert_int_eq(decode(IPC_AUTHCTL_ROTATE, "{\"workspace\":\"w\","
	    "\"credential_id\":\"0123456789abcdef\"}", &r, why, sizeof(why)),
	    0);
	ck_assert_str_eq(r.cred_id, "0123456789abcdef");
	ck_assert_int_eq(decode(IPC_AUTHCTL_REVOKE_TOKEN,
	    "{\"credential_id\":\"0123\"}", &r, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "hex"));
	ck_assert_int_eq(decode(IPC_AUTHCTL_REVOKE_WORKSPACE,
	    "{\"workspace\":\"w\"}", &r, why, sizeof(why)), 0);
	ck_assert_int_eq(decode(IPC_AUTHCTL_POLICY_SET,
	    "{\"workspace\":\"w\",\"policy\":{}}", &r, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "$.policy: sets nothing");
	ck_assert_int_eq(decode(IPC_AUTHCTL_POLICY_SET, "{\"workspace\":"
	    "\"w\",\"policy\":{\"approvals\":{}}}", &r, why, sizeof(why)),
	    -1);
	ck_assert_str_eq(why, "$.policy: sets nothing");
	ck_assert_int_eq(decode(IPC_AUTHCTL_POLICY_SET, "{\"workspace\":"
	    "\"w\",\"policy\":{\"approvals\":{\"exec\":1}}}", &r, why,
	    sizeof(why)), 0);
	ck_assert_uint_eq(r.patch.fields, POLICY_F_GATES);
	ck_assert_uint_eq(r.patch.gate_fields, GATE_F_CLASS(GATE_EXEC));
	ck_assert_int_eq(r.patch.p.gates.need[GATE_EXEC], 1);
	ck_assert_int_eq(decode(IPC_AUTHCTL_POLICY_SET,
	    "{\"workspace\":\"w\"}", &r, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "$.policy: is required");
	ck_assert_int_eq(decode(IPC_AUTHCTL_LIST, "{}", &r, why, sizeof(why)),
	    0);
	ck_assert_int_eq(decode(IPC_AUTHCTL_LIST, "{\"workspace\":\"w\"}", &r,
	    why, sizeof(why)), -1);
	ck_assert_int_eq(decode(IPC_AUTHCTL_SHOW, "{\"workspace\":\"w\"}", &r,
	    why, sizeof(why)), 0);
	ck_assert_int_eq(decode(IPC_AUTH_SUBSCRIBE, "{}", &r, why,
	    sizeof(why)), 0);
	ck_assert_int_eq(decode(IPC_AUTH_SUBSCRIBE, "[]", &r, why,
	    sizeof(why)), -1);
	ck_assert_str_eq(why, "$: expected object, got array");
	ck_assert_int_eq(decode(IPC_AUTH_VERIFY_RESULT, "{}", &r, why,
	    sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "not a request"));
}
END_TEST

START_TEST(long_strings_are_refused)
{
	struct authd_request r;
	char why[256], body[1024];
	char big[400];

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(body, sizeof(body), "{\"credential\":\"%s\"}", big);
	ck_assert_int_eq(decode(IPC_AUTH_VERIFY, body, &r, why, sizeof(why)),
	    -1);
	ck_assert_ptr_nonnull(strstr(why, "longer than"));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("request");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, verify_wellformed_and_not);
	tcase_add_test(tc, issue_shapes);
	tcase_add_test(tc, other_shapes);
	tcase_add_test(tc, long_strings_are_refused);
	suite_add_tcase(s, tc);
	return check_run(s);
}
