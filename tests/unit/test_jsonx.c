/*
 * Unit tests for common/jsonx: what the strict parser accepts and refuses,
 * and the typed getters' refusal to coerce, with the paths they report.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "jsonx.h"
#include "../check_run.h"

static json_object *
parse(const char *s, size_t depth, struct jsonx_err *err)
{
	return jsonx_parse(s, strlen(s), depth, err);
}

static void
accept(const char *s)
{
	struct jsonx_err err;
	json_object *o;

	o = parse(s, 8, &err);
	ck_assert_msg(o != NULL, "refused %s: %s", s, err.msg);
	json_object_put(o);
}

/* Refused, and the message contains want. */
static void
refuse(const char *s, size_t len, size_t depth, const char *want)
{
	struct jsonx_err err;
	json_object *o;

	memset(&err, 0, sizeof(err));
	o = jsonx_parse(s, len, depth, &err);
	ck_assert_msg(o == NULL, "accepted %s", s);
	ck_assert_msg(strstr(err.msg, want) != NULL, "%s: got \"%s\", "
	    "wanted \"%s\"", s, err.msg, want);
}

#define REFUSE(s, want)	refuse(s, strlen(s), 8, want)

START_TEST(parses_valid_json)
{
	struct jsonx_err err;
	json_object *o, *v;

	accept("{}");
	accept(" {\"a\": [1, -2.5e3, true, false, null, \"\\u00e9\\n\"]}\r\n");
	accept("42");
	accept("-0");
	accept("\"\\ud83d\\ude00\"");		/* a surrogate pair */
	accept("\"caf\xc3\xa9 \xf0\x9f\x98\x80\"");
	accept("9223372036854775807");
	accept("-9223372036854775808");
	accept("1e308");

	o = parse("{\"n\": 12}", 8, &err);
	ck_assert_ptr_nonnull(o);
	ck_assert(json_object_object_get_ex(o, "n", &v));
	ck_assert_int_eq(json_object_get_int64(v), 12);
	json_object_put(o);
	/* A number at the very end of the text is complete. */
	o = parse("17", 8, &err);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(json_object_get_int64(o), 17);
	json_object_put(o);
}
END_TEST

START_TEST(refuses_bad_text)
{
	REFUSE("", "unexpected end of input");
	REFUSE("   ", "unexpected end of input");
	REFUSE("{} x", "unexpected data after the JSON value");
	REFUSE("{}{}", "unexpected data after the JSON value");
	REFUSE("1 2", "unexpected data after the JSON value");
	refuse("{}\0", 3, 8, "NUL byte");
	refuse("{\"a\":\"b\0c\"}", 11, 8, "at byte 7: NUL byte");
	REFUSE("\"\xc0\x80\"", "not valid UTF-8");
	REFUSE("\"\xed\xa0\x80\"", "not valid UTF-8");
	REFUSE("\"\xf4\x90\x80\x80\"", "not valid UTF-8");
	REFUSE("\"\xe2\x82\"", "not valid UTF-8");
	REFUSE("{'a': 1}", "expected a quoted member name");
	REFUSE("{a: 1}", "expected a quoted member name");
	REFUSE("[1,]", "unexpected character");
	REFUSE("{\"a\":1,}", "expected a quoted member name");
	REFUSE("[1 2]", "expected ',' or ']'");
	REFUSE("{\"a\" 1}", "expected ':'");
	REFUSE("/* c */ 1", "unexpected character");
	REFUSE("NaN", "unexpected character");
	REFUSE("Infinity", "unexpected character");
	REFUSE("-Infinity", "invalid number");
	REFUSE("01", "leading zero");
	REFUSE("1.", "invalid number");
	REFUSE(".5", "unexpected character");
	REFUSE("-", "invalid number");
	REFUSE("1e", "invalid number");
	REFUSE("+1", "unexpected character");
	REFUSE("tru", "unexpected character");
	REFUSE("null", "$: expected a value other than null");
	REFUSE("\"a\tb\"", "control character in string");
	REFUSE("\"a\nb\"", "control character in string");
	REFUSE("\"\\x41\"", "invalid escape");
	REFUSE("\"\\u12\"", "truncated \\u escape");
	REFUSE("\"\\u12zz\"", "invalid \\u escape");
	REFUSE("\"\\ud800\"", "unpaired surrogate");
	REFUSE("\"\\udc00\"", "unpaired surrogate");
	REFUSE("\"\\ud800\\u0041\"", "unpaired surrogate");
	REFUSE("\"abc", "unterminated string");
	/* json-c alone would clamp these without a word. */
	REFUSE("9223372036854775808", "integer out of range");
	REFUSE("-9223372036854775809", "integer out of range");
	REFUSE("18446744073709551616", "integer out of range");
	REFUSE("1e400", "number out of range");
}
END_TEST

START_TEST(limits_depth)
{
	struct jsonx_err err;
	json_object *o;

	o = parse("[[1]]", 2, &err);
	ck_assert_ptr_nonnull(o);
	json_object_put(o);
	o = parse("{\"a\":{\"b\":{}}}", 3, &err);
	ck_assert_ptr_nonnull(o);
	json_object_put(o);
	refuse("[[[1]]]", 7, 2, "nested deeper than 2 levels");
	refuse("{\"a\":{\"b\":{}}}", 14, 2, "nested deeper than 2 levels");
	/* Scalars need no depth at all. */
	o = parse("1", 0, &err);
	ck_assert_ptr_nonnull(o);
	json_object_put(o);
	refuse("[]", 2, 0, "nested deeper than 0 levels");
	/* The cap holds whatever a caller asks for. */
	{
		char	 deep[2 * (JSONX_DEPTH_LIMIT + 1) + 1];
		size_t	 i;

		for (i = 0; i <= JSONX_DEPTH_LIMIT; i++) {
			deep[i] = '[';
			deep[2 * (JSONX_DEPTH_LIMIT + 1) - 1 - i] = ']';
		}
		deep[sizeof(deep) - 1] = '\0';
		refuse(deep, strlen(deep), SIZE_MAX, "nested deeper than 64");
	}
}
END_TEST

START_TEST(object_only)
{
	struct jsonx_err err;
	json_object *o;

	o = jsonx_parse_object("{\"a\":1}", 7, 4, &err);
	ck_assert_ptr_nonnull(o);
	json_object_put(o);
	ck_assert_ptr_null(jsonx_parse_object("[1]", 3, 4, &err));
	ck_assert_str_eq(err.msg, "$: expected object, got array");
	ck_assert_ptr_null(jsonx_parse_object("\"s\"", 3, 4, &err));
	ck_assert_str_eq(err.msg, "$: expected object, got string");
	ck_assert_ptr_null(jsonx_parse_object("{", 1, 4, &err));
}
END_TEST

static json_object *
fixture(void)
{
	static const char doc[] = "{\"name\":\"vm\",\"n\":7,\"neg\":-3,"
	    "\"f\":1.0,\"s\":\"1\",\"b\":true,\"z\":null,\"nul\":\"a\\u0000b\","
	    "\"arr\":[1],\"cursor\":{\"stdout\":\"5\",\"stderr\":4,"
	    "\"deep\":{\"x\":1}},\"mode\":\"pause\",\"list\":[]}";
	struct jsonx_err err;
	json_object *o = jsonx_parse_object(doc, sizeof(doc) - 1, 8, &err);

	ck_assert_msg(o != NULL, "%s", err.msg);
	return o;
}

START_TEST(get_string)
{
	struct jsonx_err err;
	json_object *o = fixture();
	const char *s = NULL;

	ck_assert_int_eq(jsonx_get_string(o, "name", 1, &s, &err), 1);
	ck_assert_str_eq(s, "vm");
	s = NULL;
	ck_assert_int_eq(jsonx_get_string(o, "absent", 0, &s, &err), 0);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(jsonx_get_string(o, "absent", 1, &s, &err), -1);
	ck_assert_str_eq(err.msg, "$.absent: is required");
	ck_assert_int_eq(jsonx_get_string(o, "n", 1, &s, &err), -1);
	ck_assert_str_eq(err.msg, "$.n: expected string, got integer");
	ck_assert_int_eq(jsonx_get_string(o, "z", 0, &s, &err), -1);
	ck_assert_str_eq(err.msg, "$.z: expected string, got null");
	ck_assert_int_eq(jsonx_get_string(o, "nul", 1, &s, &err), -1);
	ck_assert_str_eq(err.msg, "$.nul: must not contain NUL characters");
	json_object_put(o);
}
END_TEST

START_TEST(get_int64_does_not_coerce)
{
	struct jsonx_err err;
	json_object *o = fixture(), *big;
	int64_t	 v = 0;

	ck_assert_int_eq(jsonx_get_int64(o, "n", 1, 0, 10, &v, &err), 1);
	ck_assert_int_eq(v, 7);
	ck_assert_int_eq(jsonx_get_int64(o, "neg", 1, INT64_MIN, 0, &v,
	    &err), 1);
	ck_assert_int_eq(v, -3);
	ck_assert_int_eq(jsonx_get_int64(o, "f", 1, 0, 10, &v, &err), -1);
	ck_assert_str_eq(err.msg, "$.f: expected integer, got number");
	ck_assert_int_eq(jsonx_get_int64(o, "s", 1, 0, 10, &v, &err), -1);
	ck_assert_str_eq(err.msg, "$.s: expected integer, got string");
	ck_assert_int_eq(jsonx_get_int64(o, "b", 1, 0, 10, &v, &err), -1);
	ck_assert_str_eq(err.msg, "$.b: expected integer, got boolean");
	ck_assert_int_eq(jsonx_get_int64(o, "n", 1, 8, 10, &v, &err), -1);
	ck_assert_str_eq(err.msg, "$.n: must be at least 8");
	ck_assert_int_eq(jsonx_get_int64(o, "n", 1, 0, 6, &v, &err), -1);
	ck_assert_str_eq(err.msg, "$.n: must be at most 6");
	v = 99;
	ck_assert_int_eq(jsonx_get_int64(o, "absent", 0, 0, 6, &v, &err), 0);
	ck_assert_int_eq(v, 99);
	/* A uint64 built in C reads back clamped; it must not pass. */
	big = json_object_new_uint64(UINT64_MAX);
	json_object_object_add(o, "big", big);
	ck_assert_int_eq(jsonx_get_int64(o, "big", 1, 0, INT64_MAX, &v, &err),
	    -1);
	ck_assert_str_eq(err.msg, "$.big: must be at most 9223372036854775807");
	json_object_put(o);
}
END_TEST

START_TEST(get_bool_object_array)
{
	struct jsonx_err err;
	json_object *o = fixture(), *sub;
	int	 b = 0;

	ck_assert_int_eq(jsonx_get_bool(o, "b", 1, &b, &err), 1);
	ck_assert_int_eq(b, 1);
	ck_assert_int_eq(jsonx_get_bool(o, "n", 1, &b, &err), -1);
	ck_assert_str_eq(err.msg, "$.n: expected boolean, got integer");
	ck_assert_int_eq(jsonx_get_bool(o, "s", 1, &b, &err), -1);
	ck_assert_str_eq(err.msg, "$.s: expected boolean, got string");
	ck_assert_int_eq(jsonx_get_object(o, "cursor", 1, &sub, &err), 1);
	ck_assert(json_object_is_type(sub, json_type_object));
	ck_assert_int_eq(jsonx_get_object(o, "arr", 1, &sub, &err), -1);
	ck_assert_str_eq(err.msg, "$.arr: expected object, got array");
	ck_assert_int_eq(jsonx_get_array(o, "arr", 1, &sub, &err), 1);
	ck_assert_uint_eq(json_object_array_length(sub), 1);
	ck_assert_int_eq(jsonx_get_array(o, "cursor", 1, &sub, &err), -1);
	ck_assert_str_eq(err.msg, "$.cursor: expected array, got object");
	json_object_put(o);
}
END_TEST

START_TEST(nested_paths)
{
	struct jsonx_err err;
	json_object *o = fixture(), *arr;
	int64_t	 v;

	ck_assert_int_eq(jsonx_get_int64(o, "cursor.stderr", 1, 0, 100, &v,
	    &err), 1);
	ck_assert_int_eq(v, 4);
	ck_assert_int_eq(jsonx_get_int64(o, "cursor.stdout", 1, 0, 100, &v,
	    &err), -1);
	ck_assert_str_eq(err.msg, "$.cursor.stdout: expected integer, got "
	    "string");
	ck_assert_int_eq(jsonx_get_int64(o, "cursor.deep.x", 1, 2, 100, &v,
	    &err), -1);
	ck_assert_str_eq(err.msg, "$.cursor.deep.x: must be at least 2");
	/* An intermediate member of the wrong type is named as such. */
	ck_assert_int_eq(jsonx_get_int64(o, "arr.x", 0, 0, 1, &v, &err), -1);
	ck_assert_str_eq(err.msg, "$.arr: expected object, got array");
	ck_assert_int_eq(jsonx_get_int64(o, "n.x", 0, 0, 1, &v, &err), -1);
	ck_assert_str_eq(err.msg, "$.n: expected object, got integer");
	/* An absent intermediate member makes the field absent. */
	ck_assert_int_eq(jsonx_get_int64(o, "nope.x", 0, 0, 1, &v, &err), 0);
	ck_assert_int_eq(jsonx_get_int64(o, "nope.x", 1, 0, 1, &v, &err), -1);
	ck_assert_str_eq(err.msg, "$.nope.x: is required");
	/* The getters want an object to look in. */
	ck_assert_int_eq(jsonx_get_array(o, "arr", 1, &arr, &err), 1);
	ck_assert_int_eq(jsonx_get_int64(arr, "x", 0, 0, 1, &v, &err), -1);
	ck_assert_str_eq(err.msg, "$: expected object, got array");
	json_object_put(o);
}
END_TEST

START_TEST(get_enum)
{
	static const char *const modes[] = { "hibernate", "pause", NULL };
	struct jsonx_err err;
	json_object *o = fixture();
	int	 m = -1;

	ck_assert_int_eq(jsonx_get_enum(o, "mode", 1, modes, &m, &err), 1);
	ck_assert_int_eq(m, 1);
	ck_assert_int_eq(jsonx_get_enum(o, "name", 1, modes, &m, &err), -1);
	ck_assert_str_eq(err.msg, "$.name: must be one of \"hibernate\", "
	    "\"pause\"");
	ck_assert_int_eq(jsonx_get_enum(o, "n", 1, modes, &m, &err), -1);
	ck_assert_str_eq(err.msg, "$.n: expected string, got integer");
	m = -1;
	ck_assert_int_eq(jsonx_get_enum(o, "absent", 0, modes, &m, &err), 0);
	ck_assert_int_eq(m, -1);
	json_object_put(o);
}
END_TEST

START_TEST(type_names)
{
	json_object *o = fixture(), *v;

	json_object_object_get_ex(o, "f", &v);
	ck_assert_str_eq(jsonx_type_name(v), "number");
	json_object_object_get_ex(o, "z", &v);
	ck_assert_str_eq(jsonx_type_name(v), "null");
	ck_assert_str_eq(jsonx_type_name(NULL), "null");
	json_object_put(o);
}
END_TEST

/* The text-only check accepts and refuses exactly what parsing does. */
START_TEST(check_object_agrees_with_parse)
{
	static const char *texts[] = {
		"{}", " {\"a\":1} ", "{\"a\":[1,2,{\"b\":null}]}", "[]", "1",
		"\"s\"", "{\"a\":1,}", "{\"a\":NaN}", "{\"a\":01}",
		"{\"a\":\"\\ud800\"}", "{\"a\":1} x", "{\"a\":\"\xff\"}",
		"{\"a\":99999999999999999999}", "{'a':1}", "",
	};
	struct jsonx_err err;
	json_object *o;

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		size_t len = strlen(texts[i]);
		int checked = jsonx_check_object(texts[i], len, 8, &err) == 0;

		o = len > 0 ? jsonx_parse_object(texts[i], len, 8, &err) :
		    NULL;
		ck_assert_msg(checked == (o != NULL), "%s: check says %d",
		    texts[i], checked);
		json_object_put(o);
	}
	ck_assert_int_eq(jsonx_check_object("{\"a\":{\"b\":{}}}", 14, 2,
	    &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "deeper"));
}
END_TEST

START_TEST(member_span)
{
	const char *t = "{ \"x\" : [1,{\"result\":0}], \"result\" : "
	    "{\"a\":\"}\\\"\"} , \"z\":true}";
	const char *want = "{\"a\":\"}\\\"\"}";
	const char *dup = "{\"result\":1,\"result\":{\"b\":2}}";
	const char *esc = "{\"r\\u0065sult\":{}}";
	const char *nested = "{\"x\":{\"result\":{}}}";
	size_t off, len;

	ck_assert_int_eq(jsonx_member_span(t, strlen(t), "result", &off,
	    &len), 1);
	ck_assert_uint_eq(len, strlen(want));
	ck_assert_int_eq(memcmp(t + off, want, len), 0);
	/* A member of the same name further down is not the top-level one. */
	ck_assert_int_eq(jsonx_member_span(nested, strlen(nested), "result",
	    &off, &len), 0);
	/* The last of two counts, as in jsonx_parse. */
	ck_assert_int_eq(jsonx_member_span(dup, strlen(dup), "result", &off,
	    &len), 1);
	ck_assert_int_eq(memcmp(dup + off, "{\"b\":2}", len), 0);
	ck_assert_int_eq(jsonx_member_span(esc, strlen(esc), "result", &off,
	    &len), 0);
	ck_assert_int_eq(jsonx_member_span("[]", 2, "result", &off, &len), 0);
}
END_TEST

/* The spans the check records answer as a second scan would. */
START_TEST(members_recorded_by_the_check)
{
	const char *texts[] = {
		"{ \"x\" : [1,{\"result\":0}], \"result\" : "
		    "{\"a\":\"}\\\"\"} , \"z\":true}",
		"{\"result\":1,\"result\":{\"b\":2}}",
		"{\"r\\u0065sult\":{}}",
		"{\"x\":{\"result\":{}}}",
		"{}",
		/* More members than are recorded: the find scans again. */
		"{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,"
		    "\"h\":8,\"result\":\"late\"}",
	};
	struct jsonx_members mem;
	struct jsonx_err err;
	size_t off, len, moff, mlen;
	int found;

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		size_t n = strlen(texts[i]);

		ck_assert_int_eq(jsonx_check_object_members(texts[i], n, 8,
		    &mem, &err), 0);
		found = jsonx_member_span(texts[i], n, "result", &off, &len);
		ck_assert_int_eq(jsonx_members_find(&mem, texts[i], n,
		    "result", &moff, &mlen), found);
		if (found) {
			ck_assert_uint_eq(moff, off);
			ck_assert_uint_eq(mlen, len);
		}
	}
	ck_assert_int_eq(mem.overflow, 1);
	ck_assert_uint_eq(mem.n, JSONX_MEMBERS_MAX);
	ck_assert_int_eq(jsonx_members_find(&mem, texts[5], strlen(texts[5]),
	    "result", &off, &len), 1);
	ck_assert_int_eq(memcmp(texts[5] + off, "\"late\"", len), 0);
	ck_assert_int_eq(jsonx_members_find(NULL, texts[1], strlen(texts[1]),
	    "result", &off, &len), 1);
}
END_TEST

/*
 * Strings are scanned 8 bytes at a time: whatever ends or breaks a string
 * must be seen at every offset within and across those words.
 */
START_TEST(string_scan_sees_every_offset)
{
	static const struct {
		const char	*ins;
		int		 ok;
	} cases[] = {
		{ "\x01", 0 }, { "\x1f", 0 }, { "\n", 0 }, { "\"", 0 },
		{ "\\q", 0 }, { "\x7f", 1 }, { " ", 1 }, { "\xc3\xa9", 1 },
		{ "\\\"", 1 }, { "\\u00e9", 1 }, { "\xe2\x82\xac", 1 },
	};
	struct jsonx_err err;
	char text[64];

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (int at = 0; at <= 24; at++) {
			int n = snprintf(text, sizeof(text), "{\"k\":\"%.*s%s"
			    "%.*s\"}", at, "abcdefghijklmnopqrstuvwxyz",
			    cases[c].ins, 24 - at,
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
			int rc = jsonx_check_object(text, (size_t)n, 8, &err);

			ck_assert_msg((rc == 0) == cases[c].ok,
			    "case %zu at %d: %s", c, at, rc == 0 ? "accepted" :
			    err.msg);
		}
	/* A string that runs off the end, at every length. */
	for (int at = 0; at <= 24; at++) {
		int n = snprintf(text, sizeof(text), "{\"k\":\"%.*s", at,
		    "abcdefghijklmnopqrstuvwxyz");

		ck_assert_int_eq(jsonx_check_object(text, (size_t)n, 8, &err),
		    -1);
		ck_assert_ptr_nonnull(strstr(err.msg, "unterminated"));
	}
}
END_TEST

/* Integers long enough to need the range check still get it. */
START_TEST(integer_range_at_the_edges)
{
	static const struct {
		const char	*num;
		int		 ok;
	} cases[] = {
		{ "999999999999999999", 1 }, { "-999999999999999999", 1 },
		{ "9223372036854775807", 1 }, { "-9223372036854775808", 1 },
		{ "9223372036854775808", 0 }, { "-9223372036854775809", 0 },
		{ "10000000000000000000", 0 },
	};
	struct jsonx_err err;
	char text[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = snprintf(text, sizeof(text), "{\"n\":%s}",
		    cases[i].num);

		ck_assert_msg((jsonx_check_object(text, (size_t)n, 8,
		    &err) == 0) == cases[i].ok, "%s", cases[i].num);
	}
}
END_TEST

/* jsonx_escape writes a string's contents as json-c does, every byte. */
START_TEST(escape_as_json_c_does)
{
	char in[256], out[256 * 6], *want;
	json_object *o;
	size_t n = 0, got;

	for (int c = 1; c < 256; c++)
		in[n++] = (char)c;
	o = json_object_new_string_len(in, (int)n);
	want = strdup(json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	got = jsonx_escape(out, in, n);
	ck_assert_uint_eq(got, jsonx_escaped_len(in, n));
	/* json-c adds the quotes around it. */
	ck_assert_uint_eq(got, strlen(want) - 2);
	ck_assert_int_eq(memcmp(out, want + 1, got), 0);
	free(want);
}
END_TEST

START_TEST(raw_object_serializes_as_its_text)
{
	const char *text = "{\"path\":\"/a/b\",\"n\":[1,2]}";
	json_object *raw = jsonx_raw_object(text, strlen(text));
	json_object *outer = json_object_new_object();

	ck_assert_ptr_nonnull(raw);
	ck_assert(json_object_is_type(raw, json_type_object));
	json_object_object_add(outer, "result", raw);
	ck_assert_str_eq(json_object_to_json_string_ext(outer,
	    JSON_C_TO_STRING_PLAIN),
	    "{\"result\":{\"path\":\"/a/b\",\"n\":[1,2]}}");
	json_object_put(outer);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("jsonx");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, parses_valid_json);
	tcase_add_test(tc, refuses_bad_text);
	tcase_add_test(tc, limits_depth);
	tcase_add_test(tc, object_only);
	tcase_add_test(tc, get_string);
	tcase_add_test(tc, get_int64_does_not_coerce);
	tcase_add_test(tc, get_bool_object_array);
	tcase_add_test(tc, nested_paths);
	tcase_add_test(tc, get_enum);
	tcase_add_test(tc, type_names);
	tcase_add_test(tc, check_object_agrees_with_parse);
	tcase_add_test(tc, member_span);
	tcase_add_test(tc, members_recorded_by_the_check);
	tcase_add_test(tc, string_scan_sees_every_offset);
	tcase_add_test(tc, integer_range_at_the_edges);
	tcase_add_test(tc, escape_as_json_c_does);
	tcase_add_test(tc, raw_object_serializes_as_its_text);
	suite_add_tcase(s, tc);
	return check_run(s);
}
