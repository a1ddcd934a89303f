/*
 * Unit tests for common/dnsname and the name half of common/egress: which
 * policy names are accepted and how they are written back, which queries
 * a name or wildcard matches, and narrowing by names.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "dnsname.h"
#include "egress.h"
#include "../check_run.h"

static int
check(const char *s, char *out, char *why)
{
	return dnsname_check(s, strlen(s), 1, out, why, 128);
}

START_TEST(valid_names)
{
	static const struct { const char *in, *out; } ok[] = {
		{ "pkgs.example.org", "pkgs.example.org" },
		{ "Pkgs.Example.Org", "pkgs.example.org" },
		{ "*.github.com", "*.github.com" },
		{ "xn--bcher-kva.example", "xn--bcher-kva.example" },
		{ "a-b.c0.io", "a-b.c0.io" },
		{ "1password.com", "1password.com" },
	};
	char out[DNSNAME_MAX + 1], why[128];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		ck_assert_msg(check(ok[i].in, out, why) == 0, "%s: %s",
		    ok[i].in, why);
		ck_assert_str_eq(out, ok[i].out);
	}
}
END_TEST

START_TEST(invalid_names)
{
	static const struct { const char *in, *why; } bad[] = {
		{ "", "is empty" },
		{ "org", "single label" },
		{ "-a.org", "starts or ends with '-'" },
		{ "a-.org", "starts or ends with '-'" },
		{ "a..org", "empty label" },
		{ "a.org.", "empty label" },
		{ "b\xc3\xbc" "cher.example", "punycode" },
		{ "a_b.org", "outside [a-z0-9-.]" },
		{ "a.*.org", "not a leading" },
		{ "*", "not a leading" },
		{ "*.", "empty label" },
		{ "**.org", "not a leading" },
		{ "1.2.3.4", "all-digit" },
		{ "a b.org", "outside" },
	};
	char out[DNSNAME_MAX + 1], why[128], big[400], lab[80];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(check(bad[i].in, out, why) == -1, "accepted %s",
		    bad[i].in);
		ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: %s",
		    bad[i].in, why);
	}
	/* 64-byte label; 254-byte name; 253 is fine. */
	memset(lab, 'a', 64);
	strcpy(lab + 64, ".org");
	ck_assert_int_eq(check(lab, out, why), -1);
	ck_assert_ptr_nonnull(strstr(why, "label of 64 bytes"));
	for (size_t i = 0; i < 253; i++)
		big[i] = i % 50 == 49 ? '.' : 'a';
	big[253] = '\0';
	ck_assert_msg(check(big, out, why) == 0, "%s", why);
	big[253] = 'a';
	big[254] = '\0';
	ck_assert_int_eq(check(big, out, why), -1);
	ck_assert_ptr_nonnull(strstr(why, "254 bytes long"));
	/* Not taken where wildcards are not. */
	ck_assert_int_eq(dnsname_check("*.a.org", 7, 0, out, why,
	    sizeof(why)), -1);
}
END_TEST

START_TEST(matching)
{
	ck_assert(dnsname_match("pkgs.example.org", "pkgs.example.org"));
	ck_assert(!dnsname_match("pkgs.example.org", "files.pkgs.example.org"));
	ck_assert(!dnsname_match("pkgs.example.org", "xpkgs.example.org"));
	ck_assert(dnsname_match("*.github.com", "api.github.com"));
	ck_assert(dnsname_match("*.github.com", "a.b.github.com"));
	ck_assert(!dnsname_match("*.github.com", "github.com"));
	ck_assert(!dnsname_match("*.github.com", "evilgithub.com"));
	ck_assert(!dnsname_match("*.github.com", "github.com.evil.org"));
	/* Covering: exact by exact or wildcard, wildcard only by one. */
	ck_assert(dnsname_covers("pkgs.example.org", "pkgs.example.org"));
	ck_assert(dnsname_covers("*.github.com", "api.github.com"));
	ck_assert(dnsname_covers("*.github.com", "*.api.github.com"));
	ck_assert(dnsname_covers("*.github.com", "*.github.com"));
	ck_assert(!dnsname_covers("api.github.com", "*.api.github.com"));
	ck_assert(!dnsname_covers("*.github.com", "github.com"));
	ck_assert(!dnsname_covers("*.api.github.com", "*.github.com"));
	ck_assert(dnsname_like("pkgs.example.org"));
	ck_assert(!dnsname_like("10.0.0.0/8"));
}
END_TEST

static int
decode(const char *text, size_t max_names, struct egress *e, char *why)
{
	struct json_object *o = json_tokener_parse(text);
	int r;

	ck_assert_ptr_nonnull(o);
	r = egress_from_json_lim(o, "egress", 64, max_names, e, why, 256);
	json_object_put(o);
	return r;
}

START_TEST(policies)
{
	static struct egress ws, vm;
	char why[256];
	struct json_object *o;

	ck_assert_msg(decode("{\"mode\":\"allowlist\",\"allow\":["
	    "\"Pkgs.Example.org\",\"*.github.com\",\"203.0.113.0/24\","
	    "\"pkgs.example.org\"]}", 8, &ws, why) == 0, "%s", why);
	ck_assert_uint_eq(ws.ncidrs, 1);
	ck_assert_uint_eq(ws.nnames, 2);
	ck_assert_str_eq(ws.names[0], "*.github.com");
	ck_assert_str_eq(ws.names[1], "pkgs.example.org");
	ck_assert(egress_name_allowed(&ws, "api.github.com"));
	ck_assert(!egress_name_allowed(&ws, "github.com"));
	ck_assert(!egress_name_allowed(&ws, "files.pkgs.example.org"));
	o = egress_to_json(&ws);
	ck_assert_str_eq(json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN), "{\"mode\":\"allowlist\",\"allow\":["
	    "\"203.0.113.0\\/24\",\"*.github.com\",\"pkgs.example.org\"]}");
	json_object_put(o);

	/* Bad entries are named; a limit names its key. */
	ck_assert_int_eq(decode("{\"mode\":\"allowlist\",\"allow\":["
	    "\"pkgs.example.org\",\"-x.org\"]}", 8, &vm, why), -1);
	ck_assert_str_eq(why, "$.egress.allow[1]: \"-x.org\" has a label that "
	    "starts or ends with '-'");
	ck_assert_int_eq(decode("{\"mode\":\"allowlist\",\"allow\":["
	    "\"a.org\",\"b.org\",\"c.org\"]}", 2, &vm, why), -1);
	ck_assert_str_eq(why, "$.egress.allow: has 3 names; the limit is 2 "
	    "(egress_max_names)");

	/* Narrowing by names. */
	ck_assert_int_eq(decode("{\"mode\":\"allowlist\",\"allow\":["
	    "\"api.github.com\",\"*.x.github.com\",\"pkgs.example.org\"]}", 8, &vm,
	    why), 0);
	ck_assert_msg(egress_narrows(&ws, &vm, why, sizeof(why)), "%s", why);
	ck_assert_int_eq(decode("{\"mode\":\"allowlist\",\"allow\":["
	    "\"github.com\"]}", 8, &vm, why), 0);
	ck_assert(!egress_narrows(&ws, &vm, why, sizeof(why)));
	ck_assert_ptr_nonnull(strstr(why, "github.com is not covered"));
	ck_assert_int_eq(decode("{\"mode\":\"allowlist\",\"allow\":["
	    "\"*.pkgs.example.org\"]}", 8, &vm, why), 0);
	ck_assert(!egress_narrows(&ws, &vm, why, sizeof(why)));
	ck_assert_ptr_nonnull(strstr(why, "*.pkgs.example.org is not covered"));
	/* A public workspace with denied prefixes takes no names below it. */
	ck_assert_int_eq(decode("{\"mode\":\"public\",\"deny\":["
	    "\"203.0.113.0/24\"]}", 8, &ws, why), 0);
	ck_assert_int_eq(decode("{\"mode\":\"allowlist\",\"allow\":["
	    "\"pkgs.example.org\"]}", 8, &vm, why), 0);
	ck_assert(!egress_narrows(&ws, &vm, why, sizeof(why)));
	ck_assert_ptr_nonnull(strstr(why, "pkgs.example.org may resolve into"));
	ck_assert_int_eq(decode("{\"mode\":\"public\"}", 8, &ws, why), 0);
	ck_assert(egress_narrows(&ws, &vm, why, sizeof(why)));

	/* Public less names: the VM denies them too, or wider ones. */
	ck_assert_int_eq(decode("{\"mode\":\"public\",\"deny\":["
	    "\"*.evil.example\",\"ads.example\"]}", 8, &ws, why), 0);
	ck_assert(!egress_name_allowed(&ws, "x.evil.example"));
	ck_assert(egress_name_allowed(&ws, "evil.example"));
	ck_assert(!egress_name_allowed(&ws, "ads.example"));
	ck_assert(egress_name_allowed(&ws, "pkgs.example.org"));
	egress_describe(&ws, why, sizeof(why));
	ck_assert_str_eq(why, "public, denying 0 prefixes and 2 names");
	ck_assert(!egress_narrows(&ws, &vm, why, sizeof(why)));
	ck_assert_ptr_nonnull(strstr(why, "may resolve into what the "
	    "workspace denies"));
	ck_assert_int_eq(decode("{\"mode\":\"public\",\"deny\":["
	    "\"ads.example\"]}", 8, &vm, why), 0);
	ck_assert(!egress_narrows(&ws, &vm, why, sizeof(why)));
	ck_assert_str_eq(why, "egress.deny: the workspace denies "
	    "*.evil.example; a VM's policy must deny it too");
	ck_assert_int_eq(decode("{\"mode\":\"public\",\"deny\":["
	    "\"*.evil.example\",\"ads.example\",\"more.example\"]}", 8, &vm,
	    why), 0);
	ck_assert_msg(egress_narrows(&ws, &vm, why, sizeof(why)), "%s", why);
	{
		struct egress both;

		ck_assert_int_eq(decode("{\"mode\":\"public\",\"deny\":["
		    "\"ads.example\",\"b.example\",\"10.0.0.0/8\"]}", 8, &vm,
		    why), 0);
		ck_assert_int_eq(egress_intersect(&ws, &vm, &both), 0);
		ck_assert_int_eq(both.mode, EGRESS_PUBLIC);
		ck_assert_uint_eq(both.ncidrs, 1);
		ck_assert_uint_eq(both.nnames, 3);
		ck_assert_str_eq(both.names[0], "*.evil.example");
		ck_assert_str_eq(both.names[1], "ads.example");
		ck_assert_str_eq(both.names[2], "b.example");
	}
}
END_TEST

static Suite *
dnsname_suite(void)
{
	Suite *s = suite_create("dnsname");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, valid_names);
	tcase_add_test(tc, invalid_names);
	tcase_add_test(tc, matching);
	tcase_add_test(tc, policies);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(dnsname_suite());
}
