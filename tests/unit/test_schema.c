/*
 * Unit tests for common/schema: the keyword subset, the messages a caller
 * acts on, and every tool's input and output schema from the embedded
 * tools.json, with valid and invalid arguments for each of the seventeen.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "schema.h"
#include "utf8.h"
#include "../check_run.h"

static json_object *
js(const char *text)
{
	struct jsonx_err err;
	json_object *o = jsonx_parse(text, strlen(text), 16, &err);

	ck_assert_msg(o != NULL, "bad test JSON %s: %s", text, err.msg);
	return o;
}

static struct schema *
compile_ok(const char *text)
{
	json_object *o = js(text);
	char	 err[256];
	struct schema *s = schema_compile(o, err, sizeof(err));

	ck_assert_msg(s != NULL, "%s: %s", text, err);
	json_object_put(o);
	return s;
}

static void
compile_bad(const char *text, const char *want)
{
	json_object *o = js(text);
	char	 err[256] = "";
	struct schema *s = schema_compile(o, err, sizeof(err));

	ck_assert_msg(s == NULL, "compiled %s", text);
	ck_assert_msg(strstr(err, want) != NULL, "%s: got \"%s\", wanted "
	    "\"%s\"", text, err, want);
	json_object_put(o);
}

/* Validate; want NULL means valid, otherwise the exact message. */
static void
check_one(const struct schema *s, const char *text, const char *want)
{
	json_object *o = js(text);
	char	 err[512] = "";
	int	 r = schema_validate(s, o, err, sizeof(err));

	if (want == NULL)
		ck_assert_msg(r == 0, "%s refused: %s", text, err);
	else {
		ck_assert_msg(r == -1, "%s accepted", text);
		ck_assert_msg(strcmp(err, want) == 0, "%s: got \"%s\", wanted "
		    "\"%s\"", text, err, want);
	}
	json_object_put(o);
}

START_TEST(compile_refuses_what_it_cannot_check)
{
	compile_bad("{\"type\":\"string\",\"format\":\"uri\"}",
	    "schema #: unsupported keyword format");
	compile_bad("{\"properties\":{\"a\":{\"$ref\":\"#/x\"}}}",
	    "schema #/properties/a: unsupported keyword $ref");
	compile_bad("{\"type\":\"str\"}", "type must be a type name");
	compile_bad("{\"type\":[]}", "type must be a type name");
	compile_bad("{\"pattern\":\"abc\"}", "anchored with ^ and $");
	compile_bad("{\"pattern\":\"^(abc$\"}", "is not a POSIX ERE");
	compile_bad("{\"minimum\":1.5}", "minimum must be an integer");
	compile_bad("{\"minLength\":-1}", "minLength must be a non-negative");
	compile_bad("{\"enum\":[]}", "enum must be a non-empty array");
	compile_bad("{\"oneOf\":[]}", "oneOf must be a non-empty array");
	compile_bad("{\"items\":true}", "schema #/items: must be an object");
	compile_bad("{\"properties\":{\"a\":{}},\"required\":[\"b\"]}",
	    "required property b is not in properties");
	compile_bad("{\"required\":[1]}", "required must be an array of names");
	compile_bad("[]", "schema #: must be an object");
}
END_TEST

START_TEST(types_and_numbers)
{
	struct schema *s;

	s = compile_ok("{\"type\":\"integer\",\"minimum\":-2,\"maximum\":5,"
	    "\"description\":\"d\",\"title\":\"t\",\"default\":1}");
	check_one(s, "5", NULL);
	check_one(s, "-2", NULL);
	check_one(s, "6", "$: must be at most 5");
	check_one(s, "-3", "$: must be at least -2");
	check_one(s, "1.0", "$: expected integer, got number");
	check_one(s, "\"1\"", "$: expected integer, got string");
	check_one(s, "[null]", "$: expected integer, got array");
	schema_free(s);

	s = compile_ok("{\"type\":\"number\",\"maximum\":2}");
	check_one(s, "1.5", NULL);
	check_one(s, "2", NULL);
	check_one(s, "2.5", "$: must be at most 2");
	schema_free(s);

	s = compile_ok("{\"type\":\"array\",\"items\":{\"type\":"
	    "[\"integer\",\"null\"]}}");
	check_one(s, "[null,3]", NULL);
	check_one(s, "[true]", "$[0]: expected integer or null, got boolean");
	schema_free(s);
	s = compile_ok("{\"type\":[\"integer\",\"null\"]}");
	check_one(s, "3", NULL);
	check_one(s, "true", "$: expected integer or null, got boolean");
	schema_free(s);

	s = compile_ok("{}");
	check_one(s, "[1,{\"a\":null}]", NULL);
	schema_free(s);
}
END_TEST

START_TEST(strings)
{
	struct schema *s;

	/* Lengths are in code points: three 2-byte characters fit. */
	s = compile_ok("{\"type\":\"string\",\"minLength\":2,"
	    "\"maxLength\":3}");
	check_one(s, "\"ab\"", NULL);
	check_one(s, "\"\xc3\xa9\xc3\xa9\xc3\xa9\"", NULL);
	check_one(s, "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"", NULL);
	check_one(s, "\"abcd\"", "$: must be at most 3 characters long");
	check_one(s, "\"a\"", "$: must be at least 2 characters long");
	schema_free(s);

	s = compile_ok("{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}");
	check_one(s, "\"abc\"", NULL);
	check_one(s, "\"abc1\"", "$: must match the pattern ^[a-z]+$");
	check_one(s, "\"\"", "$: must match the pattern ^[a-z]+$");
	/* regexec would stop at the NUL and see only "abc". */
	check_one(s, "\"abc\\u0000/x\"", "$: must not contain NUL characters");
	schema_free(s);

	s = compile_ok("{\"enum\":[\"off\",\"on\"]}");
	check_one(s, "\"on\"", NULL);
	check_one(s, "\"yes\"", "$: must be one of \"off\", \"on\"");
	check_one(s, "1", "$: must be one of \"off\", \"on\"");
	schema_free(s);

	s = compile_ok("{\"const\":\"utf-8\"}");
	check_one(s, "\"utf-8\"", NULL);
	check_one(s, "\"base64\"", "$: must be \"utf-8\"");
	schema_free(s);
}
END_TEST

START_TEST(objects_and_arrays)
{
	struct schema *s;

	s = compile_ok("{\"type\":\"object\",\"properties\":{"
	    "\"a\":{\"type\":\"integer\"},"
	    "\"list\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":2,"
	    "\"items\":{\"type\":\"integer\"}},"
	    "\"sub\":{\"type\":\"object\",\"properties\":{"
	    "\"b\":{\"type\":\"boolean\"}},\"additionalProperties\":false}},"
	    "\"required\":[\"a\"],\"additionalProperties\":false}");
	check_one(s, "{\"a\":1,\"list\":[1,2],\"sub\":{\"b\":true}}", NULL);
	check_one(s, "{}", "$.a: is required");
	check_one(s, "{\"a\":1,\"list\":[]}", "$.list: must have at least 1 item");
	check_one(s, "{\"a\":1,\"list\":[1,2,3]}",
	    "$.list: must have at most 2 items");
	check_one(s, "{\"a\":1,\"list\":[1,\"x\"]}",
	    "$.list[1]: expected integer, got string");
	check_one(s, "{\"a\":1,\"sub\":{\"b\":1}}",
	    "$.sub.b: expected boolean, got integer");
	check_one(s, "{\"a\":1,\"sub\":{\"c\":1}}",
	    "$.sub.c: unknown property; allowed: b");
	/* An unknown name is reported before the required one it replaced. */
	check_one(s, "{\"A\":1}", "$.A: unknown property; allowed: a, list, sub");
	check_one(s, "{\"a\":1,\"odd key\\\"\":1}",
	    "$[\"odd key\\x22\"]: unknown property; allowed: a, list, sub");
	schema_free(s);

	s = compile_ok("{\"type\":\"object\",\"maxProperties\":2,"
	    "\"propertyNames\":{\"pattern\":\"^[A-Z]+$\"},"
	    "\"additionalProperties\":{\"type\":\"string\"}}");
	check_one(s, "{\"A\":\"x\",\"B\":\"y\"}", NULL);
	check_one(s, "{\"A\":1}", "$.A: expected string, got integer");
	check_one(s, "{\"a\":\"x\"}", "$.a: must match the pattern ^[A-Z]+$");
	check_one(s, "{\"A\":\"1\",\"B\":\"2\",\"C\":\"3\"}",
	    "$: must have at most 2 members");
	schema_free(s);

	s = compile_ok("{\"type\":\"object\",\"properties\":{},"
	    "\"additionalProperties\":false}");
	check_one(s, "{}", NULL);
	check_one(s, "{\"x\":1}",
	    "$.x: unknown property; this object takes no properties");
	schema_free(s);
}
END_TEST

START_TEST(messages_stay_valid_utf8)
{
	struct schema *s;
	json_object *o;
	char	 key[400], doc[600], err[160];
	size_t	 i;

	/* A long key of 3-byte characters overflows the path and message. */
	for (i = 0; i + 3 < sizeof(key); i += 3)
		memcpy(key + i, "\xe2\x82\xac", 3);
	key[i] = '\0';
	snprintf(doc, sizeof(doc), "{\"%s\":1}", key);
	s = compile_ok("{\"type\":\"object\",\"properties\":{},"
	    "\"additionalProperties\":false}");
	o = js(doc);
	ck_assert_int_eq(schema_validate(s, o, err, sizeof(err)), -1);
	ck_assert(utf8_valid((const uint8_t *)err, strlen(err)));
	ck_assert_uint_eq(strncmp(err, "$[\"\xe2\x82\xac", 6), 0);
	json_object_put(o);

	/* Every length around the path buffer's end cuts cleanly. */
	for (i = 240; i < 270; i++) {
		memset(key, '-', i);
		key[i] = '\0';
		snprintf(doc, sizeof(doc), "{\"%s\":1}", key);
		o = js(doc);
		ck_assert_int_eq(schema_validate(s, o, err, sizeof(err)), -1);
		ck_assert_uint_lt(strlen(err), sizeof(err));
		json_object_put(o);
	}
	schema_free(s);
}
END_TEST

START_TEST(long_paths_end_in_dots)
{
	struct schema *s;
	json_object *o;
	char	 key[300], doc[400], err[1024];
	size_t	 i;

	s = compile_ok("{\"type\":\"object\",\"properties\":{},"
	    "\"additionalProperties\":false}");
	for (i = 250; i < 260; i++) {
		memset(key, '-', i);
		key[i] = '\0';
		snprintf(doc, sizeof(doc), "{\"%s\":1}", key);
		o = js(doc);
		ck_assert_int_eq(schema_validate(s, o, err, sizeof(err)), -1);
		/* "$[\"" + 250 dashes + "\"]" is the longest path that fits. */
		if (i <= 250)
			ck_assert_ptr_nonnull(strstr(err, "-\"]: unknown"));
		else
			ck_assert_ptr_nonnull(strstr(err, "-...: unknown"));
		ck_assert_uint_le(strcspn(err, ":"), 255);
		json_object_put(o);
	}
	schema_free(s);
}
END_TEST

START_TEST(combinators)
{
	struct schema *s;

	s = compile_ok("{\"oneOf\":["
	    "{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"},"
	    "\"x\":{\"type\":\"integer\"}},\"required\":[\"k\",\"x\"],"
	    "\"additionalProperties\":false},"
	    "{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"},"
	    "\"y\":{\"type\":\"string\"}},\"required\":[\"k\",\"y\"],"
	    "\"additionalProperties\":false}]}");
	check_one(s, "{\"k\":\"a\",\"x\":1}", NULL);
	check_one(s, "{\"k\":\"b\",\"y\":\"s\"}", NULL);
	/* The branch that got furthest explains the failure. */
	check_one(s, "{\"k\":\"b\",\"y\":2}", "$.y: expected string, got integer");
	schema_free(s);

	s = compile_ok("{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}");
	check_one(s, "-1", NULL);
	check_one(s, "1", "$: matches 2 of the allowed shapes, not exactly one");
	schema_free(s);

	s = compile_ok("{\"anyOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}");
	check_one(s, "1", NULL);
	/* Equally deep failures: the first branch explains. */
	check_one(s, "-1.5", "$: expected integer, got number");
	schema_free(s);
}
END_TEST

/* The embedded tools.json. */

static void
setup_tools(void)
{
	char	 err[512];

	ck_assert_msg(tools_init(err, sizeof(err)) == 0, "%s", err);
}

static void
teardown_tools(void)
{
	tools_cleanup();
}

static const char *const tool_names[] = {
	"vm_create", "vm_list", "vm_status", "vm_exec", "vm_job_status",
	"vm_job_output", "vm_job_cancel", "vm_read_file", "vm_write_file",
	"vm_suspend", "vm_resume", "vm_destroy", "vm_run", "vm_snapshot",
	"vm_snapshot_list", "vm_snapshot_delete", "vm_fork",
};
#define NTOOL_NAMES	(sizeof(tool_names) / sizeof(tool_names[0]))

START_TEST(registry_has_the_sixteen_tools)
{
	json_object *list = tools_list_json(), *entry, *v;
	char	 err[64];
	size_t	 i;

	ck_assert_uint_eq(tools_count(), NTOOL_NAMES);
	ck_assert_uint_eq(json_object_array_length(list), NTOOL_NAMES);
	for (i = 0; i < NTOOL_NAMES; i++) {
		ck_assert_ptr_nonnull(tools_find(tool_names[i]));
		ck_assert_str_eq(tool_name(tools_at(i)), tool_names[i]);
		entry = json_object_array_get_idx(list, i);
		/* tools/list carries the MCP fields and nothing else. */
		ck_assert(json_object_object_get_ex(entry, "inputSchema", &v));
		ck_assert(json_object_object_get_ex(entry, "outputSchema", &v));
		ck_assert(json_object_object_get_ex(v, "type", &v));
		ck_assert_str_eq(json_object_get_string(v), "object");
		ck_assert(json_object_object_get_ex(entry, "description", &v));
		ck_assert(!json_object_object_get_ex(entry, "examples", &v));
		ck_assert(!json_object_object_get_ex(entry, "errors", &v));
	}
	ck_assert_ptr_null(tools_find("vm_reboot"));
	ck_assert_ptr_null(tools_at(NTOOL_NAMES));
	/* Idempotent. */
	ck_assert_int_eq(tools_init(err, sizeof(err)), 0);
	ck_assert_uint_eq(tools_count(), NTOOL_NAMES);
}
END_TEST

START_TEST(every_example_validates)
{
	json_object *examples, *ex, *args, *result;
	char	 err[512];
	size_t	 i, j;

	for (i = 0; i < tools_count(); i++) {
		const struct tool *t = tools_at(i);

		ck_assert(json_object_object_get_ex(tool_definition(t),
		    "examples", &examples));
		ck_assert_uint_gt(json_object_array_length(examples), 0);
		for (j = 0; j < json_object_array_length(examples); j++) {
			ex = json_object_array_get_idx(examples, j);
			ck_assert(json_object_object_get_ex(ex, "arguments",
			    &args));
			ck_assert(json_object_object_get_ex(ex, "result",
			    &result));
			ck_assert_msg(tool_validate_input(t, args, err,
			    sizeof(err)) == 0, "%s example %zu arguments: %s",
			    tool_name(t), j, err);
			ck_assert_msg(tool_validate_output(t, result, err,
			    sizeof(err)) == 0, "%s example %zu result: %s",
			    tool_name(t), j, err);
		}
	}
}
END_TEST

struct call {
	const char	*tool;
	const char	*args;
	const char	*want;	/* NULL: valid; else the start of the message */
};

static void
run_calls(const struct call *calls, size_t n, int output)
{
	const struct tool *t;
	json_object *o;
	char	 err[512];
	size_t	 i;
	int	 r;

	for (i = 0; i < n; i++) {
		t = tools_find(calls[i].tool);
		ck_assert_ptr_nonnull(t);
		o = js(calls[i].args);
		err[0] = '\0';
		r = output ? tool_validate_output(t, o, err, sizeof(err)) :
		    tool_validate_input(t, o, err, sizeof(err));
		if (calls[i].want == NULL)
			ck_assert_msg(r == 0, "%s %s refused: %s",
			    calls[i].tool, calls[i].args, err);
		else {
			ck_assert_msg(r == -1, "%s %s accepted", calls[i].tool,
			    calls[i].args);
			ck_assert_msg(strncmp(err, calls[i].want,
			    strlen(calls[i].want)) == 0, "%s %s: got \"%s\", "
			    "wanted \"%s\"", calls[i].tool, calls[i].args, err,
			    calls[i].want);
		}
		json_object_put(o);
	}
}

#define VM	"\"vm_id\":\"vm-3f2a9c1e\""
#define JOB	"\"job_id\":\"job-7b1d04aa\""
#define SNAP	"0123456789abcdef0123456789abcdef"

static const struct call inputs[] = {
	{ "vm_create", "{\"request_id\":\"c1\"}", NULL },
	{ "vm_create", "{\"request_id\":\"c1\",\"image\":\"debian-13-dev-v1\","
	    "\"vcpus\":8,\"memory_mib\":16384,\"network\":\"on\","
	    "\"idle_seconds\":0,\"idle_mode\":\"pause\"}", NULL },
	{ "vm_create", "{}", "$.request_id: is required" },
	{ "vm_create", "[]", "$: expected object, got array" },
	{ "vm_create", "{\"request_id\":\"c1\",\"vcpus\":\"2\"}",
	    "$.vcpus: expected integer, got string" },
	{ "vm_create", "{\"request_id\":\"c1\",\"vcpus\":2.0}",
	    "$.vcpus: expected integer, got number" },
	{ "vm_create", "{\"request_id\":\"c1\",\"vcpus\":0}",
	    "$.vcpus: must be at least 1" },
	{ "vm_create", "{\"request_id\":\"c1\",\"vcpus\":9}",
	    "$.vcpus: must be at most 8" },
	{ "vm_create", "{\"request_id\":\"c1\",\"memory_mib\":16385}",
	    "$.memory_mib: must be at most 16384" },
	{ "vm_create", "{\"request_id\":\"c1\",\"memory_mib\":255}",
	    "$.memory_mib: must be at least 256" },
	{ "vm_create", "{\"request_id\":\"c1\",\"idle_seconds\":86401}",
	    "$.idle_seconds: must be at most 86400" },
	{ "vm_create", "{\"request_id\":\"c1\",\"netwrok\":\"on\"}",
	    "$.netwrok: unknown property; allowed: request_id, image, vcpus, "
	    "memory_mib, network, egress, idle_seconds, idle_mode" },
	{ "vm_create", "{\"request_id\":\"c1\",\"egress\":"
	    "{\"mode\":\"open\"}}",
	    "$.egress.mode: must be one of \"public\", \"allowlist\"" },
	{ "vm_create", "{\"request_id\":\"c1\",\"egress\":"
	    "{\"mode\":\"allowlist\",\"allow\":[\"\"]}}",
	    "$.egress.allow[0]: " },
	{ "vm_fork", "{\"vm_id\":\"0123456789abcdef0123456789abcdef\","
	    "\"request_id\":\"f1\",\"egress\":{\"allow\":[]}}",
	    "$.egress.mode: " },
	{ "vm_create", "{\"request_id\":\"c1\",\"network\":\"yes\"}",
	    "$.network: must be one of \"off\", \"on\"" },
	{ "vm_create", "{\"request_id\":\"c1\",\"idle_mode\":\"sleep\"}",
	    "$.idle_mode: must be one of \"hibernate\", \"pause\"" },
	{ "vm_create", "{\"request_id\":\"-c1\"}",
	    "$.request_id: must match the pattern" },
	{ "vm_create", "{\"request_id\":\"c/1\"}",
	    "$.request_id: must match the pattern" },
	{ "vm_create", "{\"request_id\":\"c1\",\"image\":\"../etc\"}",
	    "$.image: must match the pattern" },

	{ "vm_list", "{}", NULL },
	{ "vm_list", "{\"all\":true}",
	    "$.all: unknown property; this object takes no properties" },
	{ "vm_list", "\"{}\"", "$: expected object, got string" },

	{ "vm_status", "{" VM "}", NULL },
	{ "vm_status", "{}", "$.vm_id: is required" },
	{ "vm_status", "{\"vm_id\":5}", "$.vm_id: expected string, got integer" },
	{ "vm_status", "{\"vm_id\":\"vm 1\"}", "$.vm_id: must match the pattern" },
	{ "vm_status", "{" VM ",\"verbose\":true}",
	    "$.verbose: unknown property; allowed: vm_id" },

	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"make\"}",
	    NULL },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"make\","
	    "\"cwd\":\"src/app\",\"env\":{\"CC\":\"gcc\",\"_X1\":\"\"},"
	    "\"stdin_base64\":\"aGVsbG8K\",\"timeout_seconds\":86400}", NULL },
	{ "vm_exec", "{" VM ",\"command\":\"make\"}",
	    "$.request_id: is required" },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\"}", "$.command: is required" },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"\"}",
	    "$.command: must be at least 1 character long" },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":[\"ls\"]}",
	    "$.command: expected string, got array" },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"ls\","
	    "\"cwd\":\"/etc\"}", "$.cwd: must match the pattern" },
	/* Line breaks are refused, and the pattern is shown escaped. */
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"ls\","
	    "\"cwd\":\"a\\nb\"}",
	    "$.cwd: must match the pattern ^[^/\\r\\n][^\\r\\n]*$" },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"ls\","
	    "\"env\":{\"A\":1}}", "$.env.A: expected string, got integer" },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"ls\","
	    "\"env\":{\"A-B\":\"x\"}}",
	    "$.env[\"A-B\"]: must match the pattern" },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"ls\","
	    "\"env\":[]}", "$.env: expected object, got array" },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"ls\","
	    "\"stdin_base64\":\"not base64!\"}",
	    "$.stdin_base64: must match the pattern" },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"ls\","
	    "\"timeout_seconds\":0}", "$.timeout_seconds: must be at least 1" },
	{ "vm_exec", "{" VM ",\"request_id\":\"b1\",\"command\":\"ls\","
	    "\"shell\":\"zsh\"}", "$.shell: unknown property" },

	{ "vm_job_status", "{" VM "," JOB "}", NULL },
	{ "vm_job_status", "{" VM "}", "$.job_id: is required" },
	{ "vm_job_status", "{" VM ",\"job_id\":7}",
	    "$.job_id: expected string, got integer" },
	{ "vm_job_status", "{" VM ",\"job_id\":\"\"}",
	    "$.job_id: must match the pattern" },
	{ "vm_job_status", "{" VM "," JOB ",\"wait\":true}",
	    "$.wait: unknown property" },

	{ "vm_job_output", "{" VM "," JOB "}", NULL },
	{ "vm_job_output", "{" VM "," JOB ",\"cursor\":{\"stdout\":17},"
	    "\"max_bytes\":4,\"encoding\":\"base64\"}", NULL },
	{ "vm_job_output", "{" VM "," JOB ",\"cursor\":{\"stdout\":-1}}",
	    "$.cursor.stdout: must be at least 0" },
	{ "vm_job_output", "{" VM "," JOB ",\"cursor\":{\"stdout\":\"5\"}}",
	    "$.cursor.stdout: expected integer, got string" },
	{ "vm_job_output", "{" VM "," JOB ",\"cursor\":{\"out\":5}}",
	    "$.cursor.out: unknown property; allowed: stdout, stderr" },
	{ "vm_job_output", "{" VM "," JOB ",\"cursor\":17}",
	    "$.cursor: expected object, got integer" },
	{ "vm_job_output", "{" VM "," JOB ",\"max_bytes\":16385}",
	    "$.max_bytes: must be at most 16384" },
	{ "vm_job_output", "{" VM "," JOB ",\"max_bytes\":3}",
	    "$.max_bytes: must be at least 4" },
	{ "vm_job_output", "{" VM "," JOB ",\"encoding\":\"hex\"}",
	    "$.encoding: must be one of \"utf-8\", \"base64\"" },
	{ "vm_job_output", "{" JOB "}", "$.vm_id: is required" },

	{ "vm_job_cancel", "{" VM "," JOB "}", NULL },
	{ "vm_job_cancel", "{" JOB "}", "$.vm_id: is required" },
	{ "vm_job_cancel", "{" VM ",\"job_id\":\"job/1\"}",
	    "$.job_id: must match the pattern" },
	{ "vm_job_cancel", "{" VM "," JOB ",\"signal\":9}",
	    "$.signal: unknown property" },
	{ "vm_job_cancel", "{" VM ",\"job_id\":null}",
	    "$.job_id: expected string, got null" },

	{ "vm_read_file", "{" VM ",\"path\":\"src/main.c\"}", NULL },
	{ "vm_read_file", "{" VM ",\"path\":\"a\",\"offset\":131072,"
	    "\"max_bytes\":1}", NULL },
	{ "vm_read_file", "{" VM "}", "$.path: is required" },
	{ "vm_read_file", "{" VM ",\"path\":\"/etc/passwd\"}",
	    "$.path: must match the pattern" },
	{ "vm_read_file", "{" VM ",\"path\":\"a\\rb\"}",
	    "$.path: must match the pattern" },
	{ "vm_read_file", "{" VM ",\"path\":\"\"}",
	    "$.path: must be at least 1 character long" },
	{ "vm_read_file", "{" VM ",\"path\":\"a\\u0000/../x\"}",
	    "$.path: must not contain NUL characters" },
	{ "vm_read_file", "{" VM ",\"path\":\"a\",\"offset\":-1}",
	    "$.offset: must be at least 0" },
	{ "vm_read_file", "{" VM ",\"path\":\"a\",\"max_bytes\":131073}",
	    "$.max_bytes: must be at most 131072" },
	{ "vm_read_file", "{" VM ",\"path\":\"a\",\"encoding\":\"utf-8\"}",
	    "$.encoding: unknown property" },

	{ "vm_write_file", "{" VM ",\"path\":\"a\",\"data_base64\":\"\"}", NULL },
	{ "vm_write_file", "{" VM ",\"path\":\"bin/run\",\"data_base64\":"
	    "\"aGVsbG8K\",\"mode\":\"0755\",\"create_parents\":true}", NULL },
	{ "vm_write_file", "{" VM ",\"path\":\"a\"}",
	    "$.data_base64: is required" },
	{ "vm_write_file", "{" VM ",\"path\":\"a\",\"data_base64\":\"a$b=\"}",
	    "$.data_base64: must match the pattern" },
	{ "vm_write_file", "{" VM ",\"path\":\"a\",\"data_base64\":\"\","
	    "\"mode\":\"999\"}", "$.mode: must match the pattern" },
	{ "vm_write_file", "{" VM ",\"path\":\"a\",\"data_base64\":\"\","
	    "\"mode\":420}", "$.mode: expected string, got integer" },
	{ "vm_write_file", "{" VM ",\"path\":\"a\",\"data_base64\":\"\","
	    "\"create_parents\":\"yes\"}",
	    "$.create_parents: expected boolean, got string" },
	{ "vm_write_file", "{" VM ",\"path\":\"a\",\"data\":\"x\","
	    "\"data_base64\":\"\"}", "$.data: unknown property" },

	{ "vm_suspend", "{" VM "}", NULL },
	{ "vm_suspend", "{" VM ",\"mode\":\"pause\",\"force\":true}", NULL },
	{ "vm_suspend", "{" VM ",\"mode\":\"stop\"}",
	    "$.mode: must be one of \"hibernate\", \"pause\"" },
	{ "vm_suspend", "{" VM ",\"force\":1}",
	    "$.force: expected boolean, got integer" },
	{ "vm_suspend", "{\"mode\":\"pause\"}", "$.vm_id: is required" },
	{ "vm_suspend", "{" VM ",\"now\":true}", "$.now: unknown property" },

	{ "vm_resume", "{" VM "}", NULL },
	{ "vm_resume", "{}", "$.vm_id: is required" },
	{ "vm_resume", "{" VM ",\"mode\":\"pause\"}",
	    "$.mode: unknown property; allowed: vm_id" },
	{ "vm_resume", "{\"vm_id\":[\"vm-1\"]}",
	    "$.vm_id: expected string, got array" },

	{ "vm_destroy", "{" VM "}", NULL },
	{ "vm_destroy", "{\"vm_id\":null}", "$.vm_id: expected string, got null" },
	{ "vm_destroy", "{" VM ",\"force\":true}",
	    "$.force: unknown property; allowed: vm_id" },
	{ "vm_destroy", "{\"vm_id\":\"vm-1;rm -rf\"}",
	    "$.vm_id: must match the pattern" },

	{ "vm_run", "{\"request_id\":\"r1\",\"command\":\"true\","
	    "\"network\":\"off\",\"memory_mib\":512,\"timeout_seconds\":600,"
	    "\"stdin_base64\":\"YQ==\",\"max_bytes\":4}", NULL },
	{ "vm_run", "{\"command\":\"true\"}", "$.request_id: is required" },
	{ "vm_run", "{\"request_id\":\"r1\",\"command\":\"true\","
	    "\"timeout_seconds\":601}", "$.timeout_seconds: must be at most 600" },
	{ "vm_run", "{\"request_id\":\"r1\",\"command\":\"true\","
	    "\"vm_id\":\"vm-1\"}", "$.vm_id: unknown property" },
	{ "vm_run", "{\"request_id\":\"r1\",\"command\":\"true\","
	    "\"snapshot\":\"" SNAP "\",\"commit\":{\"name\":\"stage-2\"}}",
	    NULL },
	{ "vm_run", "{\"request_id\":\"r1\",\"command\":\"true\","
	    "\"commit\":{}}", "$.commit.name: is required" },
	{ "vm_run", "{\"request_id\":\"r1\",\"command\":\"true\","
	    "\"commit\":{\"name\":\"a b\"}}",
	    "$.commit.name: must match the pattern" },
	{ "vm_run", "{\"request_id\":\"r1\",\"command\":\"true\","
	    "\"commit\":{\"name\":\"a\",\"memory\":true}}",
	    "$.commit.memory: unknown property" },
	{ "vm_run", "{\"request_id\":\"r1\",\"command\":\"true\","
	    "\"snapshot\":\"stage-1\"}", "$.snapshot: must match the pattern" },

	{ "vm_snapshot", "{" VM ",\"request_id\":\"s1\",\"name\":\"a.b-c_1\","
	    "\"memory\":true}", NULL },
	{ "vm_snapshot", "{" VM "}", "$.request_id: is required" },
	{ "vm_snapshot", "{" VM ",\"request_id\":\"s1\",\"name\":\"a b\"}",
	    "$.name: must match the pattern" },
	{ "vm_snapshot", "{" VM ",\"request_id\":\"s1\",\"memory\":1}",
	    "$.memory: expected boolean, got integer" },

	{ "vm_snapshot_list", "{}", NULL },
	{ "vm_snapshot_list", "{\"workspace\":\"w\"}",
	    "$.workspace: unknown property" },

	{ "vm_snapshot_delete", "{\"snapshot_id\":"
	    "\"5c0e9d2a4b7f41c3a8e6d1f09b2c7a44\"}", NULL },
	{ "vm_snapshot_delete", "{\"snapshot_id\":\"../x\"}",
	    "$.snapshot_id: must match the pattern" },

	{ "vm_create", "{\"request_id\":\"c1\",\"snapshot\":"
	    "\"5c0e9d2a4b7f41c3a8e6d1f09b2c7a44\"}", NULL },
	{ "vm_create", "{\"request_id\":\"c1\",\"snapshot\":\"ABC\"}",
	    "$.snapshot: must match the pattern" },

	{ "vm_fork", "{" VM ",\"request_id\":\"f1\",\"count\":4}", NULL },
	{ "vm_fork", "{" VM ",\"request_id\":\"f1\",\"count\":0}",
	    "$.count: must be at least 1" },
	{ "vm_fork", "{" VM ",\"count\":2}", "$.request_id: is required" },
};

START_TEST(tool_inputs)
{
	size_t	 i;
	int	 seen[NTOOL_NAMES] = { 0 };

	run_calls(inputs, sizeof(inputs) / sizeof(inputs[0]), 0);
	/* Every tool has valid and invalid cases above. */
	for (i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++)
		for (size_t j = 0; j < NTOOL_NAMES; j++)
			if (strcmp(inputs[i].tool, tool_names[j]) == 0)
				seen[j] |= inputs[i].want ? 2 : 1;
	for (i = 0; i < NTOOL_NAMES; i++)
		ck_assert_msg(seen[i] == 3, "%s lacks cases", tool_names[i]);
}
END_TEST

START_TEST(tool_input_size_bounds)
{
	const struct tool *t = tools_find("vm_write_file");
	json_object *args;
	char	*data, err[256];
	size_t	 n = 174764;

	/* 128 KiB decoded is 174764 base64 characters: the limit. */
	data = malloc(n + 5);
	ck_assert_ptr_nonnull(data);
	memset(data, 'A', n + 4);
	data[n] = '\0';
	args = json_object_new_object();
	json_object_object_add(args, "vm_id", json_object_new_string("vm-1"));
	json_object_object_add(args, "path", json_object_new_string("f"));
	json_object_object_add(args, "data_base64",
	    json_object_new_string(data));
	ck_assert_int_eq(tool_validate_input(t, args, err, sizeof(err)), 0);
	data[n] = 'A';
	data[n + 4] = '\0';
	json_object_object_add(args, "data_base64",
	    json_object_new_string(data));
	ck_assert_int_eq(tool_validate_input(t, args, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "$.data_base64: must be at most 174764 "
	    "characters long");
	json_object_put(args);
	free(data);
}
END_TEST

#define VMOUT	"\"vm_id\":\"vm-1\",\"state\":\"running\",\"image\":\"img\"," \
	"\"vcpus\":1,\"memory_mib\":1024,\"network\":\"off\"," \
	"\"idle_seconds\":300,\"idle_mode\":\"hibernate\"," \
	"\"created_at\":\"2026-11-30T08:00:00.123Z\""
#define JOBOUT	"\"state\":\"running\",\"exit_code\":null," \
	"\"truncated\":false,\"timed_out\":false"
#define CUR	"\"next_cursor\":{\"stdout\":0,\"stderr\":0}"

static const struct call outputs[] = {
	{ "vm_create", "{" VMOUT "}", NULL },
	{ "vm_create", "{" VMOUT ",\"extra\":1}", "$.extra: unknown property" },
	{ "vm_create", "{\"vm_id\":\"vm-1\"}", "$.state: is required" },
	{ "vm_list", "{\"vms\":[]}", NULL },
	{ "vm_list", "{\"vms\":[{" VMOUT "},{\"vm_id\":\"vm-2\"}]}",
	    "$.vms[1].state: is required" },
	{ "vm_status", "{" VMOUT ",\"open_streams\":0,\"jobs\":[]}", NULL },
	{ "vm_status", "{" VMOUT ",\"open_streams\":0,\"jobs\":[{\"job_id\":"
	    "\"j1\",\"request_id\":\"r1\",\"state\":\"done\",\"exit_code\":0,"
	    "\"started_at\":\"2026-11-30T08:00:00Z\"}]}",
	    "$.jobs[0].state: must be one of" },
	{ "vm_suspend", "{" VMOUT "}", NULL },
	{ "vm_resume", "{" VMOUT "}", NULL },
	{ "vm_resume", "{" VMOUT ",\"state\":\"sleeping\"}",
	    "$.state: must be one of \"creating\", \"running\"" },
	{ "vm_job_status", "{" VM "," JOB "," JOBOUT ",\"stdout_bytes\":0,"
	    "\"stderr_bytes\":0,\"started_at\":\"2026-11-30T08:00:00Z\","
	    "\"finished_at\":null}", NULL },
	{ "vm_job_status", "{" VM "," JOB ",\"state\":\"completed\","
	    "\"exit_code\":\"0\",\"truncated\":false,\"timed_out\":false,"
	    "\"stdout_bytes\":0,\"stderr_bytes\":0,\"started_at\":"
	    "\"2026-11-30T08:00:00Z\",\"finished_at\":\"yesterday\"}",
	    "$.exit_code: expected integer or null, got string" },
	{ "vm_job_output", "{" JOB ",\"encoding\":\"utf-8\",\"stdout\":\"\","
	    "\"stderr\":\"\"," CUR ",\"decoding_errors\":{\"stdout\":false,"
	    "\"stderr\":false}," JOBOUT "}", NULL },
	{ "vm_job_output", "{" JOB ",\"encoding\":\"base64\","
	    "\"stdout_base64\":\"\",\"stderr_base64\":\"AA==\"," CUR ","
	    JOBOUT "}", NULL },
	/* base64 mode has no decoding_errors; text mode must have it. */
	{ "vm_job_output", "{" JOB ",\"encoding\":\"base64\","
	    "\"stdout_base64\":\"\",\"stderr_base64\":\"\"," CUR ","
	    "\"decoding_errors\":{\"stdout\":false,\"stderr\":false},"
	    JOBOUT "}", "$.decoding_errors: unknown property" },
	{ "vm_job_output", "{" JOB ",\"encoding\":\"utf-8\",\"stdout\":\"\","
	    "\"stderr\":\"\"," CUR "," JOBOUT "}",
	    "$.decoding_errors: is required" },
	{ "vm_job_output", "{" JOB ",\"encoding\":\"utf-8\","
	    "\"stdout_base64\":\"\",\"stderr\":\"\"," CUR ","
	    "\"decoding_errors\":{\"stdout\":false,\"stderr\":false},"
	    JOBOUT "}", "$.stdout_base64: unknown property" },
	{ "vm_job_cancel", "{" VM "," JOB ",\"state\":\"cancelled\"}", NULL },
	{ "vm_job_cancel", "{" VM "," JOB "}", "$.state: is required" },
	{ "vm_exec", "{" VM "," JOB ",\"request_id\":\"b1\",\"state\":"
	    "\"running\",\"started_at\":\"2026-11-30T08:00:00Z\"}", NULL },
	{ "vm_exec", "{" VM "," JOB ",\"request_id\":\"b1\",\"state\":"
	    "\"running\",\"started_at\":\"30/11/2026\"}",
	    "$.started_at: must match the pattern" },
	{ "vm_read_file", "{\"path\":\"a\",\"offset\":0,\"bytes\":0,\"size\":0,"
	    "\"eof\":true,\"data_base64\":\"\"}", NULL },
	{ "vm_read_file", "{\"path\":\"a\",\"offset\":0,\"bytes\":0,\"size\":0,"
	    "\"eof\":\"yes\",\"data_base64\":\"\"}",
	    "$.eof: expected boolean, got string" },
	{ "vm_write_file", "{\"path\":\"a\",\"bytes\":6}", NULL },
	{ "vm_write_file", "{\"path\":\"a\",\"bytes\":131073}",
	    "$.bytes: must be at most 131072" },
	{ "vm_destroy", "{" VM ",\"destroyed\":true,\"already_destroyed\":true}",
	    NULL },
	{ "vm_destroy", "{" VM ",\"destroyed\":false,"
	    "\"already_destroyed\":false}", "$.destroyed: must be true" },
	{ "vm_run", "{" VM ",\"job_id\":\"j1\",\"request_id\":\"r1\","
	    "\"state\":\"completed\",\"exit_code\":0,\"stdout\":\"4\\n\","
	    "\"stderr\":\"\",\"stdout_bytes\":2,\"stderr_bytes\":0,"
	    "\"decoding_errors\":{\"stdout\":false,\"stderr\":false},"
	    "\"truncated\":false,\"timed_out\":false}", NULL },
	{ "vm_run", "{" VM ",\"job_id\":\"j1\",\"request_id\":\"r1\","
	    "\"state\":\"running\",\"exit_code\":null,\"stdout\":\"\","
	    "\"stderr\":\"\",\"stdout_bytes\":0,\"stderr_bytes\":0,"
	    "\"decoding_errors\":{\"stdout\":false,\"stderr\":false},"
	    "\"truncated\":false,\"timed_out\":false}", NULL },
	{ "vm_run", "{" VM ",\"job_id\":\"j1\",\"request_id\":\"r1\","
	    "\"state\":\"completed\",\"exit_code\":0,\"stdout\":\"\","
	    "\"stderr\":\"\",\"stdout_bytes\":0,\"stderr_bytes\":0,"
	    "\"decoding_errors\":{\"stdout\":false,\"stderr\":false},"
	    "\"truncated\":false,\"timed_out\":false,\"origin\":\"warm\","
	    "\"commit\":{\"name\":\"s\",\"committed\":true,"
	    "\"snapshot_id\":\"" SNAP "\"}}", NULL },
	{ "vm_run", "{" VM ",\"job_id\":\"j1\",\"request_id\":\"r1\","
	    "\"state\":\"failed\",\"exit_code\":3,\"stdout\":\"\","
	    "\"stderr\":\"\",\"stdout_bytes\":0,\"stderr_bytes\":0,"
	    "\"decoding_errors\":{\"stdout\":false,\"stderr\":false},"
	    "\"truncated\":false,\"timed_out\":false,\"origin\":\"fork\"}",
	    "$.origin: must be one of" },
	{ "vm_run", "{" VM ",\"job_id\":\"j1\",\"request_id\":\"r1\","
	    "\"state\":\"failed\",\"exit_code\":3,\"stdout\":\"\","
	    "\"stderr\":\"\",\"stdout_bytes\":0,\"stderr_bytes\":0,"
	    "\"decoding_errors\":{\"stdout\":false,\"stderr\":false},"
	    "\"truncated\":false,\"timed_out\":false,\"origin\":\"booted\","
	    "\"commit\":{\"name\":\"s\"}}", "$.commit.committed: is required" },
};

START_TEST(tool_outputs)
{
	run_calls(outputs, sizeof(outputs) / sizeof(outputs[0]), 1);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("schema");
	TCase	*tc = tcase_create("validator"), *tt = tcase_create("tools");

	tcase_add_test(tc, compile_refuses_what_it_cannot_check);
	tcase_add_test(tc, types_and_numbers);
	tcase_add_test(tc, strings);
	tcase_add_test(tc, objects_and_arrays);
	tcase_add_test(tc, messages_stay_valid_utf8);
	tcase_add_test(tc, long_paths_end_in_dots);
	tcase_add_test(tc, combinators);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(tt, setup_tools, teardown_tools);
	tcase_add_test(tt, registry_has_the_sixteen_tools);
	tcase_add_test(tt, every_example_validates);
	tcase_add_test(tt, tool_inputs);
	tcase_add_test(tt, tool_input_size_bounds);
	tcase_add_test(tt, tool_outputs);
	suite_add_tcase(s, tt);
	return check_run(s);
}
