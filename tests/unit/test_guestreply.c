/*
 * Unit tests for vmproxy's translation of guest replies (guestreply.c):
 * well-formed replies of each kind become the tool results of tools.json,
 * every bound and type the guest could break is refused as a broken
 * protocol, and every guest error maps to its public code.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "glink.h"
#include "guest.h"
#include "guestreply.h"
#include "schema.h"
#include "../check_run.h"

static struct json_object *reply;	/* the guest's, parsed */
static struct guestreply gr;

/* Translates the guest's reply text (and body) to call c. */
static enum guestreply_kind
run(const struct guest_call *c, const char *text, const void *body,
    size_t body_len)
{
	struct glink_reply rep;
	char err[256];

	json_object_put(reply);
	json_object_put(gr.result);
	gr.result = NULL;
	reply = glink_json_parse(text, strlen(text), err, sizeof(err));
	ck_assert_msg(reply != NULL, "%s: %s", text, err);
	ck_assert_msg(glink_reply_decode(reply, &rep, err, sizeof(err)) == 0,
	    "%s: %s", text, err);
	return guestreply_translate(c, reply, &rep, body, body_len, &gr);
}

static enum guestreply_kind
run_op(enum guest_op op, const char *text)
{
	struct guest_call c;

	guest_call_init(&c, op);
	return run(&c, text, NULL, 0);
}

static void
teardown(void)
{
	json_object_put(reply);
	json_object_put(gr.result);
	reply = gr.result = NULL;
}

static const char *
res_str(const char *key)
{
	struct json_object *v;

	ck_assert_msg(json_object_object_get_ex(gr.result, key, &v), "%s", key);
	return json_object_get_string(v);
}

static int64_t
res_int(const char *key)
{
	struct json_object *v = gr.result;
	char buf[64], *k, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", key);
	for (k = strtok_r(buf, ".", &save); k != NULL;
	    k = strtok_r(NULL, ".", &save))
		ck_assert_msg(json_object_object_get_ex(v, k, &v), "%s", key);
	ck_assert_msg(json_object_is_type(v, json_type_int), "%s", key);
	return json_object_get_int64(v);
}

static int
res_bool(const char *key)
{
	struct json_object *v = gr.result;
	char buf[64], *k, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", key);
	for (k = strtok_r(buf, ".", &save); k != NULL;
	    k = strtok_r(NULL, ".", &save))
		ck_assert_msg(json_object_object_get_ex(v, k, &v), "%s", key);
	ck_assert_msg(json_object_is_type(v, json_type_boolean), "%s", key);
	return json_object_get_boolean(v);
}

/* The result is what tools.json says the tool returns. */
static void
valid_output(const char *tool)
{
	const struct tool *t;
	char err[256];

	ck_assert_ptr_nonnull(t = tools_find(tool));
	ck_assert_msg(tool_validate_output(t, gr.result, err,
	    sizeof(err)) == 0, "%s: %s: %s", tool, err,
	    json_object_to_json_string(gr.result));
}

static void
tools_setup(void)
{
	char err[256];

	ck_assert_msg(tools_init(err, sizeof(err)) == 0, "%s", err);
}

#define STATUS(extra) "{\"id\":1,\"ok\":true,\"job_id\":\"j1\"," \
	"\"truncated\":false,\"timed_out\":false,\"stdout_bytes\":5," \
	"\"stderr_bytes\":3" extra "}"

/* ---- job status --------------------------------------------------------- */

START_TEST(status_completed_and_failed)
{
	struct json_object *v;

	ck_assert_int_eq(run_op(GOP_EXEC, STATUS(",\"state\":\"completed\","
	    "\"exit_code\":0,\"run_ms\":12,\"streams_open\":true")),
	    GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("job_id"), "j1");
	ck_assert_str_eq(res_str("state"), "completed");
	ck_assert_int_eq(res_int("exit_code"), 0);
	ck_assert_int_eq(res_int("stdout_bytes"), 5);
	ck_assert_int_eq(res_int("stderr_bytes"), 3);
	ck_assert_int_eq(res_int("run_ms"), 12);
	ck_assert_int_eq(res_bool("streams_open"), 1);
	ck_assert_int_eq(res_bool("truncated"), 0);
	ck_assert(!json_object_object_get_ex(gr.result, "error", NULL));

	/* A non-zero exit is "failed" to the tools. */
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, STATUS(",\"state\":"
	    "\"completed\",\"exit_code\":3,\"error\":\"it broke\"")),
	    GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("state"), "failed");
	ck_assert_int_eq(res_int("exit_code"), 3);
	ck_assert_str_eq(res_str("error"), "it broke");
	ck_assert_int_eq(res_bool("streams_open"), 0);
	ck_assert_int_eq(res_int("run_ms"), 0);

	/* Killed by a signal: 128 + the signal, as a shell says it. */
	ck_assert_int_eq(run_op(GOP_JOB_CANCEL, STATUS(",\"state\":"
	    "\"completed\",\"signal\":9")), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("state"), "failed");
	ck_assert_int_eq(res_int("exit_code"), 137);

	/* A completed job that gives no exit code and no signal failed. */
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, STATUS(",\"state\":"
	    "\"completed\",\"exit_code\":null")), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("state"), "failed");
	ck_assert(json_object_object_get_ex(gr.result, "exit_code", &v));
	ck_assert_ptr_null(v);

	/* Only a completed job has an exit code. */
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, STATUS(",\"state\":"
	    "\"cancelled\",\"exit_code\":0")), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("state"), "cancelled");
	ck_assert(json_object_object_get_ex(gr.result, "exit_code", &v));
	ck_assert_ptr_null(v);
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, STATUS(",\"state\":"
	    "\"running\"")), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("state"), "running");
	ck_assert(json_object_object_get_ex(gr.result, "exit_code", &v));
	ck_assert_ptr_null(v);
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, STATUS(",\"state\":"
	    "\"timed_out\",\"exit_code\":137")), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("state"), "timed_out");
	ck_assert(json_object_object_get_ex(gr.result, "exit_code", &v));
	ck_assert_ptr_null(v);
}
END_TEST

START_TEST(status_bounds_and_types)
{
	static const char *const bad[] = {
		/* missing fields */
		"{\"id\":1,\"ok\":true,\"state\":\"running\",\"truncated\":"
		    "false,\"timed_out\":false,\"stdout_bytes\":0,"
		    "\"stderr_bytes\":0}",
		STATUS(""),
		"{\"id\":1,\"ok\":true,\"job_id\":\"j\",\"state\":\"running\","
		    "\"timed_out\":false,\"stdout_bytes\":0,\"stderr_bytes\":0}",
		"{\"id\":1,\"ok\":true,\"job_id\":\"j\",\"state\":\"running\","
		    "\"truncated\":false,\"timed_out\":false,"
		    "\"stderr_bytes\":0}",
		/* wrong types */
		STATUS(",\"state\":1"),
		STATUS(",\"state\":\"completed\",\"exit_code\":\"0\""),
		STATUS(",\"state\":\"completed\",\"exit_code\":0.0"),
		/* null is absent on the link: a required field must be there */
		STATUS(",\"state\":\"running\",\"truncated\":null"),
		STATUS(",\"state\":\"running\",\"streams_open\":1"),
		STATUS(",\"state\":\"running\",\"error\":{}"),
		"{\"id\":1,\"ok\":true,\"job_id\":7,\"state\":\"running\","
		    "\"truncated\":false,\"timed_out\":false,\"stdout_bytes\":0,"
		    "\"stderr_bytes\":0}",
		"{\"id\":1,\"ok\":true,\"job_id\":\"j\",\"state\":\"running\","
		    "\"truncated\":\"no\",\"timed_out\":false,"
		    "\"stdout_bytes\":0,\"stderr_bytes\":0}",
		/* bounds */
		STATUS(",\"state\":\"sleeping\""),
		STATUS(",\"state\":\"completed\",\"exit_code\":256"),
		STATUS(",\"state\":\"completed\",\"exit_code\":-1"),
		STATUS(",\"state\":\"completed\",\"signal\":0"),
		STATUS(",\"state\":\"completed\",\"signal\":65"),
		STATUS(",\"state\":\"running\",\"run_ms\":-1"),
		"{\"id\":1,\"ok\":true,\"job_id\":\"j\",\"state\":\"running\","
		    "\"truncated\":false,\"timed_out\":false,"
		    "\"stdout_bytes\":-5,\"stderr_bytes\":0}",
		"{\"id\":1,\"ok\":true,\"job_id\":\"j\",\"state\":\"running\","
		    "\"truncated\":false,\"timed_out\":false,"
		    "\"stdout_bytes\":9223372036854775807,\"stderr_bytes\":0}",
		/* together more than is retained */
		"{\"id\":1,\"ok\":true,\"job_id\":\"j\",\"state\":\"running\","
		    "\"truncated\":true,\"timed_out\":false,"
		    "\"stdout_bytes\":262144,\"stderr_bytes\":1}",
		NULL
	};
	char text[512], id[GUEST_JOB_ID_MAX + 2];

	for (size_t i = 0; bad[i] != NULL; i++) {
		ck_assert_msg(run_op(GOP_JOB_STATUS, bad[i]) ==
		    GUESTREPLY_BROKEN, "accepted %s", bad[i]);
		ck_assert_msg(gr.why[0] != '\0', "no reason for %s", bad[i]);
		ck_assert_ptr_null(gr.result);
	}
	/* A job id is of tools.json's pattern, and the one asked about. */
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, "{\"id\":1,\"ok\":true,"
	    "\"job_id\":\"j0;1\",\"state\":\"running\",\"truncated\":false,"
	    "\"timed_out\":false,\"stdout_bytes\":0,\"stderr_bytes\":0}"),
	    GUESTREPLY_BROKEN);
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, "{\"id\":1,\"ok\":true,"
	    "\"job_id\":\"-j\",\"state\":\"running\",\"truncated\":false,"
	    "\"timed_out\":false,\"stdout_bytes\":0,\"stderr_bytes\":0}"),
	    GUESTREPLY_BROKEN);
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, "{\"id\":1,\"ok\":true,"
	    "\"job_id\":\"\",\"state\":\"running\",\"truncated\":false,"
	    "\"timed_out\":false,\"stdout_bytes\":0,\"stderr_bytes\":0}"),
	    GUESTREPLY_BROKEN);
	{
		struct guest_call c;

		for (int op = 0; op < GOP_COUNT; op++) {
			if (op != GOP_EXEC && op != GOP_JOB_STATUS &&
			    op != GOP_JOB_CANCEL)
				continue;
			guest_call_init(&c, (enum guest_op)op);
			c.job_id = "j2";
			ck_assert_int_eq(run(&c, STATUS(",\"state\":"
			    "\"running\""), NULL, 0), GUESTREPLY_BROKEN);
			ck_assert_ptr_nonnull(strstr(gr.why, "asked about job "
			    "j2, answered about j1"));
			c.job_id = "j1";
			ck_assert_int_eq(run(&c, STATUS(",\"state\":"
			    "\"running\""), NULL, 0), GUESTREPLY_RESULT);
		}
	}
	/* A job id of 64 bytes is the longest there is. */
	memset(id, 'a', sizeof(id) - 2);
	id[sizeof(id) - 2] = '\0';
	snprintf(text, sizeof(text), "{\"id\":1,\"ok\":true,\"job_id\":\"%s\","
	    "\"state\":\"running\",\"truncated\":false,\"timed_out\":false,"
	    "\"stdout_bytes\":0,\"stderr_bytes\":0}", id);
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, text), GUESTREPLY_RESULT);
	strcat(id, "a");
	snprintf(text, sizeof(text), "{\"id\":1,\"ok\":true,\"job_id\":\"%s\","
	    "\"state\":\"running\",\"truncated\":false,\"timed_out\":false,"
	    "\"stdout_bytes\":0,\"stderr_bytes\":0}", id);
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, text), GUESTREPLY_BROKEN);
	/* Retention full to the byte is still within bounds. */
	ck_assert_int_eq(run_op(GOP_JOB_STATUS, "{\"id\":1,\"ok\":true,"
	    "\"job_id\":\"j\",\"state\":\"running\",\"truncated\":true,"
	    "\"timed_out\":false,\"stdout_bytes\":262143,"
	    "\"stderr_bytes\":1}"), GUESTREPLY_RESULT);
}
END_TEST

START_TEST(jobs_list)
{
	struct json_object *list;
	char *text;
	size_t n, i;

	ck_assert_int_eq(run_op(GOP_JOBS, "{\"id\":1,\"ok\":true,\"jobs\":[]}"),
	    GUESTREPLY_RESULT);
	ck_assert(json_object_object_get_ex(gr.result, "jobs", &list));
	ck_assert_uint_eq(json_object_array_length(list), 0);
	ck_assert_int_eq(run_op(GOP_JOBS, "{\"id\":1,\"ok\":true,\"jobs\":["
	    "{\"job_id\":\"a\",\"state\":\"completed\",\"exit_code\":1,"
	    "\"truncated\":false,\"timed_out\":false,\"stdout_bytes\":0,"
	    "\"stderr_bytes\":0},{\"job_id\":\"b\",\"state\":\"running\","
	    "\"truncated\":false,\"timed_out\":false,\"stdout_bytes\":0,"
	    "\"stderr_bytes\":0}]}"), GUESTREPLY_RESULT);
	ck_assert(json_object_object_get_ex(gr.result, "jobs", &list));
	ck_assert_uint_eq(json_object_array_length(list), 2);
	ck_assert_str_eq(json_object_get_string(json_object_object_get(
	    json_object_array_get_idx(list, 0), "state")), "failed");

	/* Not an array, an element that is no object, one that is bad. */
	ck_assert_int_eq(run_op(GOP_JOBS, "{\"id\":1,\"ok\":true,\"jobs\":{}}"),
	    GUESTREPLY_BROKEN);
	ck_assert_int_eq(run_op(GOP_JOBS, "{\"id\":1,\"ok\":true}"),
	    GUESTREPLY_BROKEN);
	ck_assert_int_eq(run_op(GOP_JOBS, "{\"id\":1,\"ok\":true,\"jobs\":"
	    "[\"a\"]}"), GUESTREPLY_BROKEN);
	ck_assert_int_eq(run_op(GOP_JOBS, "{\"id\":1,\"ok\":true,\"jobs\":"
	    "[{\"job_id\":\"a\"}]}"), GUESTREPLY_BROKEN);

	/* No more jobs than a guest keeps. */
	for (n = GUEST_MAX_JOBS; n <= GUEST_MAX_JOBS + 1; n++) {
		static const char one[] = "{\"job_id\":\"a\",\"state\":"
		    "\"running\",\"truncated\":false,\"timed_out\":false,"
		    "\"stdout_bytes\":0,\"stderr_bytes\":0}";
		size_t cap = 64 + n * sizeof(one), off;

		ck_assert_ptr_nonnull(text = malloc(cap));
		off = (size_t)snprintf(text, cap, "{\"id\":1,\"ok\":true,"
		    "\"jobs\":[");
		for (i = 0; i < n; i++)
			off += (size_t)snprintf(text + off, cap - off, "%s%s",
			    i ? "," : "", one);
		snprintf(text + off, cap - off, "]}");
		if (n == GUEST_MAX_JOBS)
			ck_assert_int_eq(run_op(GOP_JOBS, text),
			    GUESTREPLY_RESULT);
		else {
			ck_assert_int_eq(run_op(GOP_JOBS, text),
			    GUESTREPLY_BROKEN);
			ck_assert_ptr_nonnull(strstr(gr.why, "more than 256"));
		}
		free(text);
	}
}
END_TEST

/* ---- job output --------------------------------------------------------- */

#define OUTPUT(state, ob, eb, ol, el, on, en) "{\"id\":1,\"ok\":true," \
	"\"job_id\":\"j1\",\"state\":\"" state "\",\"exit_code\":0," \
	"\"truncated\":false,\"timed_out\":false,\"stdout_bytes\":" #ob "," \
	"\"stderr_bytes\":" #eb ",\"stdout_len\":" #ol ",\"stderr_len\":" \
	#el ",\"stdout_next\":" #on ",\"stderr_next\":" #en "}"

static void
output_call(struct guest_call *c, int64_t out_cur, int64_t err_cur,
    int base64)
{
	guest_call_init(c, GOP_JOB_OUTPUT);
	c->job_id = "j1";
	c->cursor_stdout = out_cur;
	c->cursor_stderr = err_cur;
	c->base64 = base64;
}

START_TEST(output_text)
{
	struct guest_call c;

	output_call(&c, 0, 0, 0);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, 6, 4, 6, 4),
	    "hello\nerr\n", 10), GUESTREPLY_RESULT);
	valid_output("vm_job_output");
	ck_assert_str_eq(res_str("encoding"), "utf-8");
	ck_assert_str_eq(res_str("stdout"), "hello\n");
	ck_assert_str_eq(res_str("stderr"), "err\n");
	ck_assert_int_eq(res_int("next_cursor.stdout"), 6);
	ck_assert_int_eq(res_int("next_cursor.stderr"), 4);
	ck_assert_int_eq(res_bool("decoding_errors.stdout"), 0);
	ck_assert_str_eq(res_str("state"), "completed");
	ck_assert_int_eq(res_int("exit_code"), 0);

	/* From a cursor, as the guest was asked. */
	output_call(&c, 2, 4, 0);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, 4, 0, 6, 4),
	    "llo\n", 4), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("stdout"), "llo\n");
	ck_assert_int_eq(res_int("next_cursor.stdout"), 6);
	valid_output("vm_job_output");
}
END_TEST

START_TEST(output_utf8_windows)
{
	struct guest_call c;

	/* Bytes that are not UTF-8 become U+FFFD and say so. */
	output_call(&c, 0, 0, 0);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 3, 0, 3, 0, 3, 0),
	    "a\xff" "b", 3), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("stdout"), "a\xef\xbf\xbd" "b");
	ck_assert_int_eq(res_bool("decoding_errors.stdout"), 1);
	ck_assert_int_eq(res_bool("decoding_errors.stderr"), 0);
	ck_assert_int_eq(res_int("next_cursor.stdout"), 3);
	valid_output("vm_job_output");

	/* A character cut by the page while the job runs waits for its
	 * rest: the cursor stops before it. */
	ck_assert_int_eq(run(&c, OUTPUT("running", 3, 0, 3, 0, 3, 0),
	    "a\xc3\xa9", 3), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("stdout"), "a\xc3\xa9");
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"job_id\":\"j1\","
	    "\"state\":\"running\",\"truncated\":false,\"timed_out\":false,"
	    "\"stdout_bytes\":2,\"stderr_bytes\":0,\"stdout_len\":2,"
	    "\"stderr_len\":0,\"stdout_next\":2,\"stderr_next\":0,"
	    "\"streams_open\":true}", "a\xc3", 2), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("stdout"), "a");
	ck_assert_int_eq(res_int("next_cursor.stdout"), 1);
	ck_assert_int_eq(res_bool("decoding_errors.stdout"), 0);
	/* Once the stream can grow no more, the cut character is an error. */
	ck_assert_int_eq(run(&c, OUTPUT("completed", 2, 0, 2, 0, 2, 0),
	    "a\xc3", 2), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("stdout"), "a\xef\xbf\xbd");
	ck_assert_int_eq(res_int("next_cursor.stdout"), 2);
	ck_assert_int_eq(res_bool("decoding_errors.stdout"), 1);
}
END_TEST

START_TEST(output_base64)
{
	struct guest_call c;

	output_call(&c, 0, 0, 1);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 3, 1, 3, 1, 3, 1),
	    "\xff\x00\x01\x02", 4), GUESTREPLY_RESULT);
	valid_output("vm_job_output");
	ck_assert_str_eq(res_str("encoding"), "base64");
	ck_assert_str_eq(res_str("stdout_base64"), "/wAB");
	ck_assert_str_eq(res_str("stderr_base64"), "Ag==");
	ck_assert(!json_object_object_get_ex(gr.result, "decoding_errors",
	    NULL));
	ck_assert(!json_object_object_get_ex(gr.result, "stdout", NULL));
	ck_assert_int_eq(res_int("next_cursor.stdout"), 3);
	ck_assert_int_eq(res_int("next_cursor.stderr"), 1);
}
END_TEST

START_TEST(output_must_add_up)
{
	struct guest_call c;
	uint8_t *big;

	output_call(&c, 0, 0, 0);
	/* More bytes, or fewer, than the lengths say. */
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, 6, 4, 6, 4),
	    "hello\nerr", 9), GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, 6, 4, 6, 4),
	    "hello\nerr\n!", 11), GUESTREPLY_BROKEN);
	/* A next that is not cursor + length. */
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, 6, 4, 5, 4),
	    "hello\nerr\n", 10), GUESTREPLY_BROKEN);
	/* Past what the job has. */
	ck_assert_int_eq(run(&c, OUTPUT("completed", 5, 4, 6, 4, 6, 4),
	    "hello\nerr\n", 10), GUESTREPLY_BROKEN);
	/* About another job. */
	c.job_id = "j2";
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, 6, 4, 6, 4),
	    "hello\nerr\n", 10), GUESTREPLY_BROKEN);
	c.job_id = "j1";
	/* Negative, wrongly typed, missing. */
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, -1, 4, 6, 4),
	    "hello\nerr\n", 10), GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, "6", 4, 6, 4),
	    "hello\nerr\n", 10), GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, STATUS(",\"state\":\"running\"") , "", 0),
	    GUESTREPLY_BROKEN);
	/* A page is at most GUEST_OUTPUT_READ_MAX bytes per stream. */
	ck_assert_ptr_nonnull(big = calloc(1, GUEST_OUTPUT_READ_MAX + 1));
	memset(big, 'x', GUEST_OUTPUT_READ_MAX + 1);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 16384, 0, 16384, 0, 16384,
	    0), big, GUEST_OUTPUT_READ_MAX), GUESTREPLY_RESULT);
	ck_assert_uint_eq(strlen(res_str("stdout")), GUEST_OUTPUT_READ_MAX);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 16385, 0, 16385, 0, 16385,
	    0), big, GUEST_OUTPUT_READ_MAX + 1), GUESTREPLY_BROKEN);
	free(big);
}
END_TEST

/*
 * A cursor past the end of a stream is the caller's to give (tools.json
 * allows up to 1 GiB): the guest returns nothing and leaves the cursor
 * where it was.  That is an answer, not a broken guest.
 */
START_TEST(output_cursor_past_end)
{
	struct guest_call c;

	output_call(&c, 100, 4, 0);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, 0, 0, 100, 4),
	    "", 0), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("stdout"), "");
	ck_assert_int_eq(res_int("next_cursor.stdout"), 100);
	valid_output("vm_job_output");
	output_call(&c, GUEST_CURSOR_MAX, GUEST_CURSOR_MAX, 1);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, 0, 0, 1073741824,
	    1073741824), "", 0), GUESTREPLY_RESULT);
	valid_output("vm_job_output");
	/* But it cannot hand out bytes from there. */
	output_call(&c, 100, 4, 0);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, 2, 0, 102, 4),
	    "ab", 2), GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, OUTPUT("completed", 6, 4, 0, 0, 6, 4),
	    "", 0), GUESTREPLY_BROKEN);
}
END_TEST

/* ---- files -------------------------------------------------------------- */

START_TEST(file_read_slices)
{
	struct guest_call c;

	guest_call_init(&c, GOP_FILE_READ);
	c.path = "src/a.c";
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":5}", "hello",
	    5), GUESTREPLY_RESULT);
	valid_output("vm_read_file");
	ck_assert_str_eq(res_str("path"), "src/a.c");
	ck_assert_str_eq(res_str("data_base64"), "aGVsbG8=");
	ck_assert_int_eq(res_int("bytes"), 5);
	ck_assert_int_eq(res_int("size"), 5);
	ck_assert_int_eq(res_int("offset"), 0);
	ck_assert_int_eq(res_bool("eof"), 1);

	c.offset = 1;
	c.max_bytes = 3;
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":5}", "hello",
	    5), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("data_base64"), "ZWxs");
	ck_assert_int_eq(res_int("bytes"), 3);
	ck_assert_int_eq(res_bool("eof"), 0);
	valid_output("vm_read_file");

	/* An offset past the end reads nothing and is at the end. */
	c.offset = GUEST_OFFSET_MAX;
	c.max_bytes = GUEST_MAX_FILE;
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":5}", "hello",
	    5), GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("data_base64"), "");
	ck_assert_int_eq(res_int("bytes"), 0);
	ck_assert_int_eq(res_bool("eof"), 1);
	valid_output("vm_read_file");

	/* An empty file. */
	c.offset = 0;
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":0}", "", 0),
	    GUESTREPLY_RESULT);
	ck_assert_int_eq(res_bool("eof"), 1);
}
END_TEST

START_TEST(file_read_bounds)
{
	struct guest_call c;
	uint8_t *big;

	guest_call_init(&c, GOP_FILE_READ);
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":6}", "hello",
	    5), GUESTREPLY_BROKEN);
	ck_assert_ptr_nonnull(strstr(gr.why, "size 6 but 5 bytes came"));
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":4}", "hello",
	    5), GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":-1}", "", 0),
	    GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":\"5\"}",
	    "hello", 5), GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true}", "", 0),
	    GUESTREPLY_BROKEN);
	/* No file is larger than GUEST_MAX_FILE. */
	ck_assert_ptr_nonnull(big = calloc(1, GUEST_MAX_FILE + 1));
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":131072}", big,
	    GUEST_MAX_FILE), GUESTREPLY_RESULT);
	ck_assert_int_eq(res_int("bytes"), GUEST_MAX_FILE);
	valid_output("vm_read_file");
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":131073}", big,
	    GUEST_MAX_FILE + 1), GUESTREPLY_BROKEN);
	free(big);
}
END_TEST

START_TEST(file_write_and_activity)
{
	struct guest_call c;

	guest_call_init(&c, GOP_FILE_WRITE);
	c.path = "x";
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":3}", NULL, 0),
	    GUESTREPLY_RESULT);
	valid_output("vm_write_file");
	ck_assert_str_eq(res_str("path"), "x");
	ck_assert_int_eq(res_int("bytes"), 3);
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":131073}",
	    NULL, 0), GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"size\":true}", NULL,
	    0), GUESTREPLY_BROKEN);

	ck_assert_int_eq(run_op(GOP_ACTIVITY, "{\"id\":1,\"ok\":true,"
	    "\"active\":true,\"jobs_running\":2,\"streams\":1}"),
	    GUESTREPLY_RESULT);
	ck_assert_int_eq(res_bool("active"), 1);
	ck_assert_int_eq(res_int("jobs_running"), 2);
	ck_assert(!json_object_object_get_ex(gr.result, "streams", NULL));
	ck_assert_int_eq(run_op(GOP_ACTIVITY, "{\"id\":1,\"ok\":true,"
	    "\"active\":true,\"jobs_running\":257,\"streams\":1}"),
	    GUESTREPLY_BROKEN);
	ck_assert_int_eq(run_op(GOP_ACTIVITY, "{\"id\":1,\"ok\":true,"
	    "\"active\":true,\"jobs_running\":0,\"streams\":65536}"),
	    GUESTREPLY_BROKEN);
	ck_assert_int_eq(run_op(GOP_ACTIVITY, "{\"id\":1,\"ok\":true,"
	    "\"active\":1,\"jobs_running\":0,\"streams\":0}"),
	    GUESTREPLY_BROKEN);
	ck_assert_int_eq(run_op(GOP_ACTIVITY, "{\"id\":1,\"ok\":true,"
	    "\"active\":false,\"jobs_running\":0}"), GUESTREPLY_BROKEN);
}
END_TEST

/* freeze: the count of frozen file systems reaches vmmd, bounded. */
START_TEST(freeze_counts_filesystems)
{
	ck_assert_int_eq(run_op(GOP_FREEZE, "{\"id\":1,\"ok\":true,"
	    "\"frozen\":true,\"filesystems\":2}"), GUESTREPLY_RESULT);
	ck_assert_int_eq(res_int("filesystems"), 2);
	ck_assert_int_eq(run_op(GOP_FREEZE, "{\"id\":1,\"ok\":true,"
	    "\"frozen\":true}"), GUESTREPLY_RESULT);
	ck_assert(!json_object_object_get_ex(gr.result, "filesystems", NULL));
	ck_assert_int_eq(run_op(GOP_FREEZE, "{\"id\":1,\"ok\":true,"
	    "\"filesystems\":65}"), GUESTREPLY_BROKEN);
	ck_assert_int_eq(run_op(GOP_FREEZE, "{\"id\":1,\"ok\":true,"
	    "\"filesystems\":\"2\"}"), GUESTREPLY_BROKEN);
}
END_TEST

START_TEST(plain_ops_and_bodies)
{
	static const enum guest_op plain[] = { GOP_PING, GOP_FREEZE, GOP_THAW,
	    GOP_CLOCK_SET, GOP_SHUTDOWN };
	struct guest_call c;

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		ck_assert_int_eq(run_op(plain[i], "{\"id\":1,\"ok\":true,"
		    "\"extra\":[1,2]}"), GUESTREPLY_RESULT);
		ck_assert_int_eq(json_object_object_length(gr.result), 0);
	}
	/* Only job_output and file_read replies carry bytes. */
	for (int op = 0; op < GOP_COUNT; op++) {
		if (op == GOP_JOB_OUTPUT || op == GOP_FILE_READ)
			continue;
		guest_call_init(&c, (enum guest_op)op);
		ck_assert_int_eq(run(&c, STATUS(",\"state\":\"running\""), "x",
		    1), GUESTREPLY_BROKEN);
		ck_assert_ptr_nonnull(strstr(gr.why, "carries a body"));
	}
}
END_TEST

/* ---- errors ------------------------------------------------------------- */

START_TEST(error_codes_map)
{
	static const char *const map[][2] = {
		{ "invalid_argument", "invalid_argument" },
		{ "not_found", "not_found" },
		{ "already_exists", "conflict" },
		{ "limit_exceeded", "quota_exceeded" },
		{ "too_large", "invalid_argument" },
		{ "forbidden_path", "invalid_argument" },
		{ "io_error", "invalid_argument" },
		{ "internal", "internal" },
		{ "made_up", "internal" },
		{ "", "internal" },
	};
	char text[256];

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		snprintf(text, sizeof(text), "{\"id\":1,\"ok\":false,\"error\":"
		    "{\"code\":\"%s\",\"message\":\"no: %zu\"}}", map[i][0], i);
		/* An error is an answer to any operation, body or not. */
		for (int op = 0; op < GOP_COUNT; op++) {
			struct guest_call c;
			char want[32];

			guest_call_init(&c, (enum guest_op)op);
			ck_assert_int_eq(run(&c, text, "x", 1),
			    GUESTREPLY_ERROR);
			ck_assert_str_eq(gr.code, map[i][1]);
			snprintf(want, sizeof(want), "no: %zu", i);
			ck_assert_str_eq(gr.message, want);
			ck_assert_ptr_null(gr.result);
		}
		ck_assert_str_eq(guestreply_public_code(map[i][0]), map[i][1]);
	}
}
END_TEST

/* ---- hello -------------------------------------------------------------- */

static int
hello(const char *text, struct json_object **info, char *why, size_t len)
{
	struct glink_reply rep;
	char err[256];

	json_object_put(reply);
	reply = glink_json_parse(text, strlen(text), err, sizeof(err));
	ck_assert_msg(reply != NULL, "%s", err);
	ck_assert_int_eq(glink_reply_decode(reply, &rep, err, sizeof(err)), 0);
	return guestreply_hello(reply, &rep, info, why, len);
}

START_TEST(hello_reply)
{
	struct json_object *info;
	char why[256];

	ck_assert_int_eq(hello("{\"id\":1,\"ok\":true,\"version\":1,"
	    "\"boot_id\":\"b-1\",\"jobs\":3}", &info, why, sizeof(why)), 0);
	ck_assert_str_eq(json_object_get_string(json_object_object_get(info,
	    "boot_id")), "b-1");
	ck_assert_int_eq(json_object_get_int64(json_object_object_get(info,
	    "jobs")), 3);
	json_object_put(info);
	ck_assert_int_eq(hello("{\"id\":1,\"ok\":true,\"version\":1,"
	    "\"boot_id\":\"b\"}", &info, why, sizeof(why)), 0);
	ck_assert_int_eq(json_object_get_int64(json_object_object_get(info,
	    "jobs")), 0);
	json_object_put(info);

	ck_assert_int_eq(hello("{\"id\":1,\"ok\":true,\"version\":2,"
	    "\"boot_id\":\"b\"}", &info, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "version 2, not 1"));
	ck_assert_ptr_null(info);
	ck_assert_int_eq(hello("{\"id\":1,\"ok\":false,\"error\":{\"code\":"
	    "\"x\",\"message\":\"y\"}}", &info, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "refused");
	ck_assert_int_eq(hello("{\"id\":1,\"ok\":true,\"version\":1}", &info,
	    why, sizeof(why)), -1);
	ck_assert_int_eq(hello("{\"id\":1,\"ok\":true,\"version\":1,"
	    "\"boot_id\":\"b\",\"jobs\":257}", &info, why, sizeof(why)), -1);
	ck_assert_int_eq(hello("{\"id\":1,\"ok\":true,\"version\":1,"
	    "\"boot_id\":\"01234567890123456789012345678901234567890123456789"
	    "0123456789abcde\"}", &info, why, sizeof(why)), -1);
	ck_assert_int_eq(hello("{\"id\":1,\"ok\":true,\"version\":1001,"
	    "\"boot_id\":\"b\"}", &info, why, sizeof(why)), -1);
}
END_TEST

/* Numbers past int64 never reach the translation: the link refuses them. */
START_TEST(huge_numbers_refused_by_the_link)
{
	char err[256];
	const char *t = "{\"id\":1,\"ok\":true,\"size\":99999999999999999999}";

	ck_assert_ptr_null(glink_json_parse(t, strlen(t), err, sizeof(err)));
	t = "{\"id\":1,\"ok\":true,\"run_ms\":18446744073709551615}";
	ck_assert_ptr_null(glink_json_parse(t, strlen(t), err, sizeof(err)));
	t = "{\"id\":1,\"ok\":true,\"size\":1e999}";
	ck_assert_ptr_null(glink_json_parse(t, strlen(t), err, sizeof(err)));
}
END_TEST

START_TEST(identity_reply)
{
	static const char *bid = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
	struct guest_call c;

	guest_call_init(&c, GOP_IDENTITY);
	c.boot_id = bid;
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"boot_id\":"
	    "\"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9\"}", NULL, 0),
	    GUESTREPLY_RESULT);
	ck_assert_str_eq(res_str("boot_id"), bid);
	ck_assert_int_eq(json_object_object_length(gr.result), 1);
	/* Another boot id, none, a wrong type or form, a body: broken. */
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"boot_id\":"
	    "\"1f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9\"}", NULL, 0),
	    GUESTREPLY_BROKEN);
	ck_assert_ptr_nonnull(strstr(gr.why, "another boot id"));
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true}", NULL, 0),
	    GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"boot_id\":5}", NULL,
	    0), GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"boot_id\":"
	    "\"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9x\"}", NULL, 0),
	    GUESTREPLY_BROKEN);
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"boot_id\":"
	    "\"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9\"}", "x", 1),
	    GUESTREPLY_BROKEN);
	/* Without the boot id asked for, nothing can match. */
	c.boot_id = NULL;
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":true,\"boot_id\":"
	    "\"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9\"}", NULL, 0),
	    GUESTREPLY_BROKEN);
	/* A step that failed is the guest's error, with its message. */
	c.boot_id = bid;
	ck_assert_int_eq(run(&c, "{\"id\":1,\"ok\":false,\"error\":{\"code\":"
	    "\"io_error\",\"message\":\"hostname: sethostname: EPERM\"}}",
	    NULL, 0), GUESTREPLY_ERROR);
	ck_assert_str_eq(gr.message, "hostname: sethostname: EPERM");
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("guestreply");
	TCase *tc = tcase_create("translate");

	tcase_add_unchecked_fixture(tc, tools_setup, NULL);
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, status_completed_and_failed);
	tcase_add_test(tc, status_bounds_and_types);
	tcase_add_test(tc, jobs_list);
	tcase_add_test(tc, output_text);
	tcase_add_test(tc, output_utf8_windows);
	tcase_add_test(tc, output_base64);
	tcase_add_test(tc, output_must_add_up);
	tcase_add_test(tc, output_cursor_past_end);
	tcase_add_test(tc, file_read_slices);
	tcase_add_test(tc, file_read_bounds);
	tcase_add_test(tc, file_write_and_activity);
	tcase_add_test(tc, freeze_counts_filesystems);
	tcase_add_test(tc, plain_ops_and_bodies);
	tcase_add_test(tc, error_codes_map);
	tcase_add_test(tc, hello_reply);
	tcase_add_test(tc, identity_reply);
	tcase_add_test(tc, huge_numbers_refused_by_the_link);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
