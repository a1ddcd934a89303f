/*
 * Unit tests for common/pattern: every pattern in proto/tools.json is
 * within its subset, and it agrees with glibc's regexec -- the reading the
 * schema validator had before -- on generated strings, mutated valid
 * ones, and hand-picked edges; what it leaves to regexec, it refuses.
 */
#include <check.h>
#include <regex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "pattern.h"
#include "tools_json.h"
#include "../check_run.h"

/* A small deterministic generator, so a failure can be replayed. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t
rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static void
agree(const char *re, const struct pattern *p, const regex_t *rx,
    const char *s)
{
	int fast = pattern_match(p, s, strlen(s));
	int slow = regexec(rx, s, 0, NULL, 0) == 0;

	ck_assert_msg(fast == slow, "pattern %s on \"%s\": pattern.c says "
	    "%d, regexec says %d", re, s, fast, slow);
}

/*
 * Strings from the pattern's own bytes and a few others, then valid-ish
 * ones mutated by one byte: the edges where a matcher goes wrong.
 */
static void
differential(const char *re, const char **seeds, size_t nseeds, int rounds)
{
	static const char extra[] = "aZ09-_.:/+=T Z\r\n\\\xc3\xa9~";
	struct pattern *p;
	regex_t rx;
	char s[300], alpha[256];
	size_t na = 0, len, i;

	p = pattern_compile(re);
	ck_assert_msg(p != NULL, "pattern.c refuses %s", re);
	ck_assert_int_eq(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
	for (const char *c = re; *c != '\0' && na < sizeof(alpha); c++)
		alpha[na++] = *c;
	for (const char *c = extra; *c != '\0' && na < sizeof(alpha); c++)
		alpha[na++] = *c;
	for (int r = 0; r < rounds; r++) {
		len = rnd(r % 8 == 0 ? 140 : 24);
		for (i = 0; i < len; i++)
			s[i] = alpha[rnd((uint32_t)na)];
		s[len] = '\0';
		agree(re, p, &rx, s);
	}
	for (size_t k = 0; k < nseeds; k++) {
		agree(re, p, &rx, seeds[k]);
		for (int r = 0; r < rounds / 10; r++) {
			len = strlen(seeds[k]);
			memcpy(s, seeds[k], len + 1);
			switch (rnd(3)) {
			case 0:		/* replace a byte */
				if (len > 0)
					s[rnd((uint32_t)len)] =
					    alpha[rnd((uint32_t)na)];
				break;
			case 1:		/* drop one */
				if (len > 0) {
					i = rnd((uint32_t)len);
					memmove(s + i, s + i + 1, len - i);
				}
				break;
			default:	/* insert one */
				i = rnd((uint32_t)len + 1);
				memmove(s + i + 1, s + i, len - i + 1);
				s[i] = alpha[rnd((uint32_t)na)];
				break;
			}
			agree(re, p, &rx, s);
		}
	}
	regfree(&rx);
	pattern_free(p);
}

static void
collect(json_object *v, json_object *out)
{
	if (json_object_is_type(v, json_type_object)) {
		json_object_object_foreach(v, key, val) {
			if (strcmp(key, "pattern") == 0 &&
			    json_object_is_type(val, json_type_string))
				json_object_array_add(out, json_object_get(val));
			else
				collect(val, out);
		}
	} else if (json_object_is_type(v, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(v); i++)
			collect(json_object_array_get_idx(v, i), out);
	}
}

START_TEST(tools_json_patterns)
{
	static const char *seeds[] = {
		"vm-0123abcd", "a", "A-_9", "2026-11-30T10:00:00Z",
		"2026-11-30T10:00:00.123456789Z", "2026-11-30T10:00:00.Z",
		"aGVsbG8=", "aGVsbG8h", "aGk==", "0644", "644", "0o644",
		"src/main.c", "/etc/passwd", "x\ry", "PATH", "_x1",
		"debian-13.1:test", "abc.def-1",
	};
	json_object *doc, *pats;
	json_tokener *tok = json_tokener_new();
	size_t n;

	/* The embedded copy is not NUL-terminated. */
	doc = json_tokener_parse_ex(tok, (const char *)mcpvm_tools_json,
	    (int)mcpvm_tools_json_len);
	json_tokener_free(tok);
	ck_assert_ptr_nonnull(doc);
	pats = json_object_new_array();
	collect(doc, pats);
	n = json_object_array_length(pats);
	ck_assert_uint_ge(n, 5);
	for (size_t i = 0; i < n; i++)
		differential(json_object_get_string(
		    json_object_array_get_idx(pats, i)), seeds,
		    sizeof(seeds) / sizeof(seeds[0]), 4000);
	json_object_put(pats);
	json_object_put(doc);
}
END_TEST

START_TEST(constructs)
{
	static const char *res[] = {
		"^$", "^a$", "^a?b*c+$", "^(ab)?c$", "^(a?)*b$", "^(ab|)?$",
		"^a{3}$", "^a{2,}$", "^a{0,4}b{1,2}$", "^(a{1,2}b){2}$",
		"^[^a-c]x$", "^[]a]$", "^[^]a]$", "^[a-]$", "^[-a]$",
		"^\\.\\*\\\\$", "^.{2,3}$", "^[a\\]*$", "^((a)(b))+$",
		"^[0-9]{4}-[0-9]{2}$", "^x(y(z)?)?$",
	};
	static const char *seeds[] = { "", "a", "ab", "abc", "aaab", "x-y",
	    "\\.*\\", "abab", "1234-56" };

	for (size_t i = 0; i < sizeof(res) / sizeof(res[0]); i++) {
		struct pattern *p = pattern_compile(res[i]);

		/* "^(ab|)?$" has alternation: regexec keeps it. */
		if (strchr(res[i], '|') != NULL) {
			ck_assert_ptr_null(p);
			continue;
		}
		pattern_free(p);
		differential(res[i], seeds, sizeof(seeds) / sizeof(seeds[0]),
		    2000);
	}
}
END_TEST

START_TEST(left_to_regexec)
{
	static const char *res[] = {
		"", "a", "^a", "a$", "^a|b$", "^[[:alpha:]]$", "^[[.a.]]$",
		"^a**$", "^a*?$", "^a{2}{3}$", "^(a$", "^a)$", "^()$",
		"^\\d$", "^\\w+$", "^a{,3}$", "^a{256}$", "^a{3,2}$",
		"^a\\$", "^a$b$", "^a^b$", "^*a$", "^{1}$", "^[z-a]$",
		"^(((((((((((((((((a)))))))))))))))))$", "^(a{200}){10}$",
		"^[abc$",
	};

	for (size_t i = 0; i < sizeof(res) / sizeof(res[0]); i++)
		ck_assert_msg(pattern_compile(res[i]) == NULL,
		    "%s should be left to regexec", res[i]);
}
END_TEST

START_TEST(linear_time)
{
	/* A pattern that makes a backtracking matcher take forever. */
	struct pattern *p = pattern_compile("^(a*)*b$");
	static char s[100001];

	ck_assert_ptr_nonnull(p);
	memset(s, 'a', sizeof(s) - 1);
	ck_assert_int_eq(pattern_match(p, s, sizeof(s) - 1), 0);
	s[sizeof(s) - 2] = 'b';
	ck_assert_int_eq(pattern_match(p, s, sizeof(s) - 1), 1);
	pattern_free(p);
}
END_TEST

static Suite *
pattern_suite(void)
{
	Suite *s = suite_create("pattern");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, tools_json_patterns);
	tcase_add_test(tc, constructs);
	tcase_add_test(tc, left_to_regexec);
	tcase_add_test(tc, linear_time);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(pattern_suite());
}
