/*
 * Unit tests for common/authcache: what is kept, for how long, and what
 * each kind of authd event takes away.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "authcache.h"
#include "../check_run.h"

static json_object *
verdict(const char *ws, const char *id, int64_t expires_at)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "workspace", json_object_new_string(ws));
	if (id != NULL)
		json_object_object_add(o, "credential_id",
		    json_object_new_string(id));
	json_object_object_add(o, "expires_at",
	    json_object_new_int64(expires_at));
	return o;
}

static struct authcache *
with(const char *cred, const char *ws, const char *id, int64_t exp,
    int64_t now, uint8_t key[AUTHCACHE_KEY_LEN])
{
	static struct authcache *c;
	json_object *v = verdict(ws, id, exp);

	if (c == NULL)
		c = authcache_new();
	ck_assert_int_eq(authcache_key(cred, key), 0);
	authcache_put(c, key, v, now);
	json_object_put(v);	/* the cache holds its own reference */
	return c;
}

START_TEST(kept_for_the_ttl_only)
{
	uint8_t k[AUTHCACHE_KEY_LEN], other[AUTHCACHE_KEY_LEN];
	struct authcache *c = with("mcpvm_a", "w1", "c1", 0, 1000, k);
	json_object *v, *ws;

	v = authcache_get(c, k, 1000);
	ck_assert_ptr_nonnull(v);
	ck_assert(json_object_object_get_ex(v, "workspace", &ws));
	ck_assert_str_eq(json_object_get_string(ws), "w1");
	ck_assert_ptr_nonnull(authcache_get(c, k, 1000 + AUTHCACHE_TTL - 1));
	ck_assert_ptr_null(authcache_get(c, k, 1000 + AUTHCACHE_TTL));
	ck_assert_ptr_null(authcache_get(c, k, 1000));	/* gone for good */
	ck_assert_int_eq(authcache_key("mcpvm_b", other), 0);
	ck_assert_ptr_null(authcache_get(c, other, 1000));
	authcache_flush(c);
}
END_TEST

START_TEST(never_past_the_credential_expiry)
{
	uint8_t k[AUTHCACHE_KEY_LEN];
	struct authcache *c = with("mcpvm_e", "w1", "c1", 1002, 1000, k);

	ck_assert_ptr_nonnull(authcache_get(c, k, 1001));
	ck_assert_ptr_null(authcache_get(c, k, 1002));
	/* An answer already expired is not kept at all. */
	c = with("mcpvm_e", "w1", "c1", 999, 1000, k);
	ck_assert_ptr_null(authcache_get(c, k, 1000));
	authcache_flush(c);
}
END_TEST

START_TEST(events_take_what_they_name)
{
	uint8_t a1[AUTHCACHE_KEY_LEN], a2[AUTHCACHE_KEY_LEN];
	uint8_t b1[AUTHCACHE_KEY_LEN], n[AUTHCACHE_KEY_LEN];
	struct authcache *c;

	c = with("mcpvm_a1", "wa", "ca1", 0, 1000, a1);
	c = with("mcpvm_a2", "wa", "ca2", 0, 1000, a2);
	c = with("mcpvm_b1", "wb", "cb1", 0, 1000, b1);
	c = with("mcpvm_n", "wa", NULL, 0, 1000, n);
	/* One credential: that one, and an entry that has no id. */
	authcache_drop(c, "wa", "ca1");
	ck_assert_ptr_null(authcache_get(c, a1, 1000));
	ck_assert_ptr_null(authcache_get(c, n, 1000));
	ck_assert_ptr_nonnull(authcache_get(c, a2, 1000));
	ck_assert_ptr_nonnull(authcache_get(c, b1, 1000));
	/* A workspace: all of its credentials, nobody else's. */
	authcache_drop(c, "wa", NULL);
	ck_assert_ptr_null(authcache_get(c, a2, 1000));
	ck_assert_ptr_nonnull(authcache_get(c, b1, 1000));
	authcache_flush(c);
	ck_assert_ptr_null(authcache_get(c, b1, 1000));
}
END_TEST

START_TEST(key_is_not_the_credential)
{
	uint8_t k[AUTHCACHE_KEY_LEN], k2[AUTHCACHE_KEY_LEN];
	const char *cred = "mcpvm_secretsecretsecretsecretsecretsecret";

	ck_assert_int_eq(authcache_key(cred, k), 0);
	ck_assert_int_eq(authcache_key(cred, k2), 0);
	ck_assert_int_eq(memcmp(k, k2, sizeof(k)), 0);
	ck_assert_ptr_null(memmem(k, sizeof(k), "secret", 6));
	ck_assert_int_eq(authcache_key("mcpvm_secretsecretsecretsecretsecret"
	    "secreT", k2), 0);
	ck_assert_int_ne(memcmp(k, k2, sizeof(k)), 0);
}
END_TEST

START_TEST(a_verdict_without_workspace_is_not_kept)
{
	uint8_t k[AUTHCACHE_KEY_LEN];
	struct authcache *c = authcache_new();
	json_object *v = json_object_new_object();
	uint64_t hits, misses;

	ck_assert_int_eq(authcache_key("mcpvm_x", k), 0);
	authcache_put(c, k, v, 1000);
	ck_assert_ptr_null(authcache_get(c, k, 1000));
	authcache_stats(c, &hits, &misses);
	ck_assert_uint_eq(hits, 0);
	ck_assert_uint_eq(misses, 1);
	json_object_put(v);
	authcache_free(c);
}
END_TEST

static Suite *
authcache_suite(void)
{
	Suite *s = suite_create("authcache");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, kept_for_the_ttl_only);
	tcase_add_test(tc, never_past_the_credential_expiry);
	tcase_add_test(tc, events_take_what_they_name);
	tcase_add_test(tc, key_is_not_the_credential);
	tcase_add_test(tc, a_verdict_without_workspace_is_not_kept);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	/* One process: the tests share the cache 'with' builds. */
	return check_run_forking(authcache_suite(), CK_NOFORK);
}
