/*
 * Unit tests for authd's credential format (authd/cred.c) and workspace
 * policy helpers (authd/policy.c).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "b64.h"
#include "cred.h"
#include "policy.h"
#include "../check_run.h"

START_TEST(generated_credentials_are_wellformed_and_distinct)
{
	char a[CRED_LEN + 1], b[CRED_LEN + 1];

	ck_assert_int_eq(cred_generate(a), 0);
	ck_assert_int_eq(cred_generate(b), 0);
	ck_assert_uint_eq(strlen(a), CRED_LEN);
	ck_assert_int_eq(strncmp(a, "mcpvm_", 6), 0);
	ck_assert(cred_wellformed(a, strlen(a)));
	ck_assert(cred_wellformed(b, strlen(b)));
	ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(malformed_credentials_are_refused)
{
	char t[CRED_LEN + 2];

	ck_assert_int_eq(cred_generate(t), 0);
	ck_assert(!cred_wellformed(t, CRED_LEN - 1));
	t[CRED_LEN] = 'A';
	t[CRED_LEN + 1] = '\0';
	ck_assert(!cred_wellformed(t, CRED_LEN + 1));
	t[CRED_LEN] = '\0';
	t[0] = 'M';
	ck_assert(!cred_wellformed(t, CRED_LEN));
	t[0] = 'm';
	t[10] = '+';
	ck_assert(!cred_wellformed(t, CRED_LEN));
	t[10] = '\0';
	ck_assert(!cred_wellformed(t, CRED_LEN));
	t[10] = 'A';
	/* The last character may only carry four bits. */
	t[CRED_LEN - 1] = 'B';
	ck_assert(!cred_wellformed(t, CRED_LEN));
	t[CRED_LEN - 1] = 'E';
	ck_assert(cred_wellformed(t, CRED_LEN));
}
END_TEST

/* The format check and common/b64's strict decoder agree. */
START_TEST(wellformed_agrees_with_b64url_decode)
{
	char t[CRED_LEN + 1];
	uint8_t *raw;
	size_t n;

	for (int i = 0; i < 200; i++) {
		ck_assert_int_eq(cred_generate(t), 0);
		ck_assert_int_eq(b64url_decode(t + CRED_PREFIX_LEN, CRED_B64_LEN,
		    &raw, &n), 0);
		ck_assert_uint_eq(n, CRED_RANDOM_BYTES);
		free(raw);
	}
	t[CRED_LEN - 1] = 'B';	/* nonzero bits after the last byte */
	ck_assert(!cred_wellformed(t, CRED_LEN));
	ck_assert_int_eq(b64url_decode(t + CRED_PREFIX_LEN, CRED_B64_LEN, &raw,
	    &n), -1);
}
END_TEST

START_TEST(hash_is_sha256_and_id_is_its_prefix)
{
	uint8_t h[CRED_HASH_LEN], h2[CRED_HASH_LEN];
	char id[CRED_ID_LEN + 1];

	/* SHA-256("abc"), FIPS 180-2 appendix B.1. */
	ck_assert_int_eq(cred_hash("abc", 3, h), 0);
	cred_id(h, id);
	ck_assert_str_eq(id, "ba7816bf8f01cfea");
	ck_assert(cred_id_valid(id));
	ck_assert(!cred_id_valid("ba7816bf8f01cfe"));
	ck_assert(!cred_id_valid("BA7816BF8F01CFEA"));
	ck_assert(!cred_id_valid("ba7816bf8f01cfeaa"));
	memcpy(h2, h, sizeof(h));
	ck_assert(cred_hash_equal(h, h2));
	h2[31] ^= 1;
	ck_assert(!cred_hash_equal(h, h2));
}
END_TEST

START_TEST(workspace_ids)
{
	char why[160], long_id[80];

	ck_assert(workspace_id_valid("demo-alice", why, sizeof(why)));
	ck_assert(workspace_id_valid("a", why, sizeof(why)));
	ck_assert(workspace_id_valid("0-9", why, sizeof(why)));
	memset(long_id, 'a', 63);
	long_id[63] = '\0';
	ck_assert(workspace_id_valid(long_id, why, sizeof(why)));
	long_id[63] = 'a';
	long_id[64] = '\0';
	ck_assert(!workspace_id_valid(long_id, why, sizeof(why)));
	ck_assert_ptr_nonnull(strstr(why, "63"));
	ck_assert(!workspace_id_valid("", why, sizeof(why)));
	ck_assert(!workspace_id_valid("Alice", why, sizeof(why)));
	ck_assert_ptr_nonnull(strstr(why, "character 1"));
	ck_assert(!workspace_id_valid("a_b", why, sizeof(why)));
	ck_assert(!workspace_id_valid("a/../b", why, sizeof(why)));
	ck_assert(!workspace_id_valid("a b", why, sizeof(why)));
}
END_TEST

START_TEST(image_ids)
{
	char why[160];

	ck_assert(image_id_valid("debian-13", why, sizeof(why)));
	ck_assert(image_id_valid("deb13.1_x", why, sizeof(why)));
	ck_assert(!image_id_valid("-x", why, sizeof(why)));
	ck_assert(!image_id_valid("a,b", why, sizeof(why)));
	ck_assert(!image_id_valid("", why, sizeof(why)));
}
END_TEST

START_TEST(policy_patch_parse_apply_compare)
{
	struct auth_policy_patch pt;
	struct auth_policy p = { .max_vms = 2, .memory_mib = 1024,
	    .storage_gib = 10, .max_streams = 8 }, q;
	struct json_object *o, *j;
	char why[256], joined[256];

	o = json_tokener_parse("{\"policy\":{\"network\":true,\"images\":"
	    "[\"b\",\"a\",\"b\"],\"max_vms\":3}}");
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(policy_patch_from_json(o, "policy", &pt, why,
	    sizeof(why)), 0);
	ck_assert_uint_eq(pt.fields, POLICY_F_NETWORK | POLICY_F_IMAGES |
	    POLICY_F_MAX_VMS);
	json_object_put(o);
	q = p;
	policy_apply(&q, &pt);
	ck_assert(!policy_equal(&p, &q));
	ck_assert_int_eq(q.network, 1);
	ck_assert_uint_eq(q.nimages, 2);	/* sorted, deduplicated */
	ck_assert_str_eq(q.images[0], "a");
	ck_assert_uint_eq(q.max_vms, 3);
	ck_assert_uint_eq(q.memory_mib, 1024);
	policy_images_join(&q, joined, sizeof(joined));
	ck_assert_str_eq(joined, "a,b");
	ck_assert_int_eq(policy_images_split(&p, joined), 0);
	ck_assert_uint_eq(p.nimages, 2);
	ck_assert_int_eq(policy_images_split(&p, "ok,Bad"), -1);
	j = policy_to_json(&q);
	ck_assert_str_eq(json_object_to_json_string_ext(j,
	    JSON_C_TO_STRING_PLAIN), "{\"network\":true,\"images\":"
	    "[\"a\",\"b\"],\"max_vms\":3,\"memory_mib\":1024,"
	    "\"storage_gib\":10,\"max_streams\":8,\"egress\":"
	    "{\"mode\":\"public\",\"deny\":[]},\"egress_rate\":0,"
	    "\"approvals\":{\"exec\":0,\"network\":0,\"resources\":0,"
	    "\"destroy\":0,\"snapshot_delete\":0,\"broker_pipe\":0,"
	    "\"memory_mib_above\":0,\"vcpus_above\":0}}");
	json_object_put(j);
	/* The egress rate: 0 lifts it, else within netd's bounds. */
	o = json_tokener_parse("{\"policy\":{\"egress_rate\":131072}}");
	ck_assert_int_eq(policy_patch_from_json(o, "policy", &pt, why,
	    sizeof(why)), 0);
	ck_assert_uint_eq(pt.fields, POLICY_F_RATE);
	policy_apply(&q, &pt);
	ck_assert_uint_eq(q.egress_rate, 131072);
	json_object_put(o);
	o = json_tokener_parse("{\"policy\":{\"egress_rate\":4095}}");
	ck_assert_int_eq(policy_patch_from_json(o, "policy", &pt, why,
	    sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "$.policy.egress_rate: 4095 bytes "
	    "a second is below the least limit, 4096"));
	json_object_put(o);
	o = json_tokener_parse("{\"policy\":{\"egress_rate\":-1}}");
	ck_assert_int_eq(policy_patch_from_json(o, "policy", &pt, why,
	    sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "egress_rate"));
	json_object_put(o);
}
END_TEST

/* Parses parent's "policy" into pt; the refusal's reason into why. */
static int
patch_of(const char *json, struct auth_policy_patch *pt, char *why,
    size_t whylen)
{
	struct json_object *o = json_tokener_parse(json);
	int rc;

	ck_assert_ptr_nonnull(o);
	rc = policy_patch_from_json(o, "policy", pt, why, whylen);
	json_object_put(o);
	return rc;
}

START_TEST(policy_gates)
{
	static const struct {
		const char	*json;
		const char	*why;
	} bad[] = {
		{ "{\"policy\":{\"approvals\":{\"exec\":3}}}",
		    "policy.approvals.exec" },
		{ "{\"policy\":{\"approvals\":{\"exec\":-1}}}",
		    "policy.approvals.exec" },
		{ "{\"policy\":{\"approvals\":{\"exec\":true}}}",
		    "policy.approvals.exec" },
		{ "{\"policy\":{\"approvals\":{\"deploy\":1}}}",
		    "$.policy.approvals: has an unknown key (known: exec, "
		    "network, resources, destroy, snapshot_delete, "
		    "broker_pipe, memory_mib_above, vcpus_above)" },
		{ "{\"policy\":{\"approvals\":[]}}", "policy.approvals" },
		{ "{\"policy\":{\"approvals\":{\"vcpus_above\":1025}}}",
		    "policy.approvals.vcpus_above" },
		{ "{\"policy\":{\"approvals\":{\"memory_mib_above\":"
		    "1048577}}}", "policy.approvals.memory_mib_above" },
	};
	struct auth_policy_patch pt;
	struct auth_policy p, q;
	char why[256];

	memset(&p, 0, sizeof(p));
	/* A patch sets what it names and keeps the rest. */
	ck_assert_int_eq(patch_of("{\"policy\":{\"approvals\":"
	    "{\"destroy\":2}}}", &pt, why, sizeof(why)), 0);
	ck_assert_uint_eq(pt.fields, POLICY_F_GATES);
	ck_assert_uint_eq(pt.gate_fields, GATE_F_CLASS(GATE_DESTROY));
	q = p;
	policy_apply(&q, &pt);
	ck_assert(!policy_equal(&p, &q));
	ck_assert_int_eq(q.gates.need[GATE_DESTROY], 2);
	ck_assert_int_eq(patch_of("{\"policy\":{\"approvals\":"
	    "{\"exec\":1}}}", &pt, why, sizeof(why)), 0);
	policy_apply(&q, &pt);
	ck_assert_int_eq(q.gates.need[GATE_EXEC], 1);
	ck_assert_int_eq(q.gates.need[GATE_DESTROY], 2);
	ck_assert(policy_valid(&q, why, sizeof(why)));
	/* A resources gate without a threshold does not hold, with one it
	 * does, and a later patch of the gate alone keeps the threshold. */
	ck_assert_int_eq(patch_of("{\"policy\":{\"approvals\":"
	    "{\"resources\":1}}}", &pt, why, sizeof(why)), 0);
	p = q;
	policy_apply(&p, &pt);
	ck_assert(!policy_valid(&p, why, sizeof(why)));
	ck_assert_ptr_nonnull(strstr(why, "a resources gate needs a "
	    "threshold"));
	ck_assert_ptr_nonnull(strstr(why, "--gate-memory-above"));
	ck_assert_int_eq(patch_of("{\"policy\":{\"approvals\":"
	    "{\"vcpus_above\":4}}}", &pt, why, sizeof(why)), 0);
	policy_apply(&p, &pt);
	ck_assert(policy_valid(&p, why, sizeof(why)));
	ck_assert_uint_eq(p.gates.vcpus_above, 4);
	ck_assert_int_eq(patch_of("{\"policy\":{\"approvals\":"
	    "{\"resources\":2,\"exec\":0}}}", &pt, why, sizeof(why)), 0);
	policy_apply(&p, &pt);
	ck_assert_int_eq(p.gates.need[GATE_RESOURCES], 2);
	ck_assert_int_eq(p.gates.need[GATE_EXEC], 0);
	ck_assert_int_eq(p.gates.need[GATE_DESTROY], 2);
	ck_assert_uint_eq(p.gates.vcpus_above, 4);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(patch_of(bad[i].json, &pt, why, sizeof(why)) ==
		    -1, "%s accepted", bad[i].json);
		ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: %s",
		    bad[i].json, why);
	}
}
END_TEST

START_TEST(policy_egress)
{
	struct auth_policy_patch pt;
	struct auth_policy p, q;
	struct json_object *o, *j;
	char why[256];

	memset(&p, 0, sizeof(p));
	o = json_tokener_parse("{\"policy\":{\"egress\":{\"mode\":"
	    "\"allowlist\",\"allow\":[\"203.0.113.0/24\","
	    "\"198.51.100.7/32\"]}}}");
	ck_assert_int_eq(policy_patch_from_json(o, "policy", &pt, why,
	    sizeof(why)), 0);
	json_object_put(o);
	ck_assert_uint_eq(pt.fields, POLICY_F_EGRESS);
	q = p;
	policy_apply(&q, &pt);
	ck_assert(!policy_equal(&p, &q));
	ck_assert_int_eq(q.egress.mode, EGRESS_ALLOWLIST);
	j = policy_to_json(&q);
	ck_assert_ptr_nonnull(strstr(json_object_to_json_string_ext(j,
	    JSON_C_TO_STRING_NOSLASHESCAPE), "\"egress\":{\"mode\":\"allowlist\","
	    "\"allow\":[\"198.51.100.7/32\",\"203.0.113.0/24\"]}"));
	json_object_put(j);
	/* The list limit is authd's key, and the refusal names it. */
	policy_set_egress_max(1);
	o = json_tokener_parse("{\"policy\":{\"egress\":{\"mode\":"
	    "\"public\",\"deny\":[\"203.0.113.0/24\","
	    "\"198.51.100.7/32\"]}}}");
	ck_assert_int_eq(policy_patch_from_json(o, "policy", &pt, why,
	    sizeof(why)), -1);
	ck_assert_str_eq(why, "$.policy.egress.deny: has 2 entries; the limit "
	    "is 1 (egress_max_cidrs)");
	json_object_put(o);
	policy_set_egress_max(64);
	o = json_tokener_parse("{\"policy\":{\"network\":true,\"egress\":"
	    "{\"mode\":\"public\",\"deny\":[\"203.0.113.1/24\"]}}}");
	ck_assert_int_eq(policy_patch_from_json(o, "policy", &pt, why,
	    sizeof(why)), -1);
	ck_assert_str_eq(why, "$.policy.egress.deny[0]: 203.0.113.1/24 has "
	    "host bits set; its network is 203.0.113.0/24");
	json_object_put(o);
}
END_TEST

/* A VM's egress may narrow its workspace's, never widen it. */
/* A running VM's policy narrowed by its workspace's new one. */
START_TEST(egress_intersection)
{
	static const struct {
		const char *a, *b, *want;
	} cases[] = {
		{ "{\"mode\":\"public\",\"deny\":[\"192.0.2.0/24\"]}",
		    "{\"mode\":\"public\",\"deny\":[\"192.0.0.0/16\","
		    "\"203.0.113.0/24\"]}",
		    "{\"mode\":\"public\",\"deny\":[\"192.0.0.0/16\","
		    "\"203.0.113.0/24\"]}" },
		{ "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.0/24\","
		    "\"203.0.113.7/32\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.128/25\","
		    "\"203.0.113.0/24\",\"192.0.2.0/24\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.128/25\","
		    "\"203.0.113.7/32\"]}" },
		/* An allowlist less a deny list splits what it must. */
		{ "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.0/24\"]}",
		    "{\"mode\":\"public\",\"deny\":[\"198.51.100.0/26\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.64/26\","
		    "\"198.51.100.128/25\"]}" },
		{ "{\"mode\":\"public\",\"deny\":[\"198.51.100.0/24\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.7/32\","
		    "\"203.0.113.0/24\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"203.0.113.0/24\"]}" },
		{ "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.0/24\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[]}",
		    "{\"mode\":\"allowlist\",\"allow\":[]}" },
		/* Under public denying nothing, an allowlist keeps its names;
		 * under one denying anything, its names go. */
		{ "{\"mode\":\"public\",\"deny\":[]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"pkgs.example.org\","
		    "\"203.0.113.0/24\",\"*.github.com\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"203.0.113.0/24\","
		    "\"*.github.com\",\"pkgs.example.org\"]}" },
		{ "{\"mode\":\"public\",\"deny\":[\"192.0.2.0/24\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"pkgs.example.org\","
		    "\"203.0.113.0/24\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"203.0.113.0/24\"]}" },
		{ "{\"mode\":\"public\",\"deny\":[\"ads.example\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"pkgs.example.org\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[]}" },
	};
	struct egress *a, *b, *out;
	struct json_object *o;
	char why[256];

	a = calloc(3, sizeof(*a));
	ck_assert_ptr_nonnull(a);
	b = a + 1;
	out = a + 2;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		o = json_tokener_parse(cases[i].a);
		ck_assert_int_eq(egress_from_json(o, "a", 256, a, why,
		    sizeof(why)), 0);
		json_object_put(o);
		o = json_tokener_parse(cases[i].b);
		ck_assert_int_eq(egress_from_json(o, "b", 256, b, why,
		    sizeof(why)), 0);
		json_object_put(o);
		ck_assert_int_eq(egress_intersect(a, b, out), 0);
		o = egress_to_json(out);
		ck_assert_str_eq(json_object_to_json_string_ext(o,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
		    cases[i].want);
		json_object_put(o);
		/* Never wider than either. */
		ck_assert(egress_narrows(a, out, why, sizeof(why)));
		ck_assert(egress_narrows(b, out, why, sizeof(why)));
		ck_assert_int_eq(egress_intersect(b, a, out), 0);
		ck_assert(egress_narrows(a, out, why, sizeof(why)));
	}
	/* Too many pieces: nothing at all, never more. */
	memset(a, 0, sizeof(*a));
	a->mode = EGRESS_ALLOWLIST;
	a->ncidrs = 1;
	a->cidrs[0].addr = 0;
	a->cidrs[0].len = 0;
	memset(b, 0, sizeof(*b));
	b->mode = EGRESS_PUBLIC;
	for (size_t i = 0; i < 200; i++) {
		b->cidrs[i].addr = 0x0b000000u + (uint32_t)i * 0x200u;
		b->cidrs[i].len = 32;
	}
	b->ncidrs = 200;
	ck_assert_int_eq(egress_intersect(a, b, out), -1);
	ck_assert_int_eq(out->mode, EGRESS_ALLOWLIST);
	ck_assert_uint_eq(out->ncidrs, 0);
	free(a);
}
END_TEST

START_TEST(egress_narrowing)
{
	static const struct {
		const char *ws, *vm, *why;	/* why NULL: narrows */
	} cases[] = {
		{ "{\"mode\":\"public\"}", "{\"mode\":\"public\","
		    "\"deny\":[\"192.0.2.0/24\"]}", NULL },
		{ "{\"mode\":\"public\"}", "{\"mode\":\"allowlist\","
		    "\"allow\":[\"192.0.2.0/24\"]}", NULL },
		{ "{\"mode\":\"public\",\"deny\":[\"192.0.2.0/24\"]}",
		    "{\"mode\":\"public\",\"deny\":[\"192.0.0.0/16\"]}",
		    NULL },
		{ "{\"mode\":\"public\",\"deny\":[\"192.0.2.0/24\"]}",
		    "{\"mode\":\"public\"}", "egress.deny: the workspace "
		    "denies 192.0.2.0/24; a VM's policy must deny it too" },
		{ "{\"mode\":\"public\",\"deny\":[\"192.0.2.0/24\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[\"192.0.0.0/16\"]}",
		    "egress.allow: 192.0.0.0/16 reaches into 192.0.2.0/24, "
		    "which the workspace denies" },
		{ "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.0/24\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":"
		    "[\"198.51.100.128/25\"]}", NULL },
		{ "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.0/24\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":[]}", NULL },
		{ "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.0/24\"]}",
		    "{\"mode\":\"allowlist\",\"allow\":"
		    "[\"198.51.100.0/23\"]}", "egress.allow: 198.51.100.0/23 "
		    "is not inside the workspace's allowlist" },
		{ "{\"mode\":\"allowlist\",\"allow\":[\"198.51.100.0/24\"]}",
		    "{\"mode\":\"public\",\"deny\":[\"10.0.0.0/8\"]}",
		    "egress.mode: public would widen the workspace's "
		    "allowlist" },
	};
	struct egress ws, vm;
	char why[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct json_object *a = json_tokener_parse(cases[i].ws);
		struct json_object *b = json_tokener_parse(cases[i].vm);

		ck_assert_int_eq(egress_from_json(a, "egress", 64, &ws, why,
		    sizeof(why)), 0);
		ck_assert_int_eq(egress_from_json(b, "egress", 64, &vm, why,
		    sizeof(why)), 0);
		why[0] = '\0';
		ck_assert_int_eq(egress_narrows(&ws, &vm, why, sizeof(why)),
		    cases[i].why == NULL);
		if (cases[i].why != NULL)
			ck_assert_str_eq(why, cases[i].why);
		json_object_put(a);
		json_object_put(b);
	}
}
END_TEST

START_TEST(policy_patch_refusals)
{
	static const struct {
		const char *json, *why;
	} bad[] = {
		{ "{\"policy\":[]}", "$.policy: expected object, got array" },
		{ "{\"policy\":{\"network\":1}}",
		    "$.policy.network: expected boolean, got integer" },
		{ "{\"policy\":{\"images\":\"a\"}}",
		    "$.policy.images: expected array, got string" },
		{ "{\"policy\":{\"images\":[1]}}",
		    "$.policy.images[0]: expected string, got integer" },
		{ "{\"policy\":{\"images\":[\"ok\",\"Bad\"]}}",
		    "$.policy.images[1]: image id must start" },
		{ "{\"policy\":{\"max_vms\":0}}",
		    "$.policy.max_vms: must be at least 1" },
		{ "{\"policy\":{\"max_vms\":1025}}",
		    "$.policy.max_vms: must be at most 1024" },
		{ "{\"policy\":{\"memory_mib\":\"1\"}}",
		    "$.policy.memory_mib: expected integer, got string" },
		{ "{\"policy\":{\"storage_gib\":1.5}}",
		    "$.policy.storage_gib: expected integer, got number" },
		{ "{\"policy\":{\"max_streams\":-1}}",
		    "$.policy.max_streams: must be at least 1" },
		{ "{\"policy\":{\"colour\":\"blue\"}}",
		    "$.policy: has an unknown key" },
	};
	struct auth_policy_patch pt;
	char why[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json_object *o = json_tokener_parse(bad[i].json);

		ck_assert_ptr_nonnull(o);
		why[0] = '\0';
		ck_assert_msg(policy_patch_from_json(o, "policy", &pt, why,
		    sizeof(why)) == -1, "accepted %s", bad[i].json);
		ck_assert_msg(strncmp(why, bad[i].why, strlen(bad[i].why)) ==
		    0, "%s: got \"%s\"", bad[i].json, why);
		json_object_put(o);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("cred");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, generated_credentials_are_wellformed_and_distinct);
	tcase_add_test(tc, malformed_credentials_are_refused);
	tcase_add_test(tc, wellformed_agrees_with_b64url_decode);
	tcase_add_test(tc, hash_is_sha256_and_id_is_its_prefix);
	tcase_add_test(tc, workspace_ids);
	tcase_add_test(tc, image_ids);
	tcase_add_test(tc, policy_gates);
	tcase_add_test(tc, policy_egress);
	tcase_add_test(tc, egress_narrowing);
	tcase_add_test(tc, egress_intersection);
	tcase_add_test(tc, policy_patch_parse_apply_compare);
	tcase_add_test(tc, policy_patch_refusals);
	suite_add_tcase(s, tc);
	return check_run(s);
}
