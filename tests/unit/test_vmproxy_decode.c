/*
 * Unit tests for vmproxy's decoders of what vmmd sends (vmproxy_decode.c):
 * each operation's members are typed and bounded once, the guest's
 * request holds exactly what it takes, a wrong shape is DECODE_BAD (the
 * connection closes) and a value out of bounds is refused with a reason.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "guest.h"
#include "ipc.h"
#include "jsonx.h"
#include "vmproxy_decode.h"
#include "vmqmp.h"
#include "../check_run.h"

static struct json_object *body;
static struct vmmd_msg m;
static struct decode_err de;

static enum decode_verdict
call(const char *text)
{
	struct jsonx_err jerr;

	vmmd_msg_clear(&m);
	json_object_put(body);
	body = jsonx_parse_object(text, strlen(text), 16, &jerr);
	ck_assert_msg(body != NULL, "%s: %s", text, jerr.msg);
	memset(&de, 0, sizeof(de));
	return vmproxy_decode_call(body, &m, &de);
}

static void
teardown(void)
{
	vmmd_msg_clear(&m);
	json_object_put(body);
	body = NULL;
}

/* The guest request's member key, or NULL. */
static struct json_object *
req(const char *key)
{
	struct json_object *v = NULL;

	json_object_object_get_ex(m.request, key, &v);
	return v;
}

START_TEST(exec_forwards_its_members)
{
	ck_assert_int_eq(call("{\"op\":\"exec\",\"job_id\":\"j1\",\"command\":"
	    "\"echo hi\",\"cwd\":\"src\",\"env\":{\"A\":\"1\"},"
	    "\"stdin_base64\":\"aGk=\",\"timeout_ms\":600000}"), DECODE_OK);
	ck_assert_uint_eq(m.type, IPC_PROXY_CALL);
	ck_assert_int_eq(m.call.op, GOP_EXEC);
	ck_assert_str_eq(m.call.job_id, "j1");
	ck_assert_str_eq(json_object_get_string(req("op")), "exec");
	ck_assert_str_eq(json_object_get_string(req("job_id")), "j1");
	ck_assert_str_eq(json_object_get_string(req("command")), "echo hi");
	ck_assert_str_eq(json_object_get_string(req("cwd")), "src");
	ck_assert_str_eq(json_object_get_string(json_object_object_get(
	    req("env"), "A")), "1");
	ck_assert_int_eq(json_object_get_int64(req("timeout_ms")), 600000);
	/* stdin goes as the frame's body, not as a member. */
	ck_assert_ptr_null(req("stdin_base64"));
	ck_assert_uint_eq(m.body_len, 2);
	ck_assert_mem_eq(m.body, "hi", 2);
	ck_assert_int_eq(json_object_object_length(m.request), 6);
}
END_TEST

START_TEST(each_operation)
{
	ck_assert_int_eq(call("{\"op\":\"jobs\"}"), DECODE_OK);
	ck_assert_int_eq(m.call.op, GOP_JOBS);
	ck_assert_str_eq(json_object_get_string(req("op")), "job_status");

	ck_assert_int_eq(call("{\"op\":\"job_output\",\"job_id\":\"j\","
	    "\"cursor\":{\"stdout\":5,\"stderr\":7},\"max_bytes\":100,"
	    "\"encoding\":\"base64\"}"), DECODE_OK);
	ck_assert_int_eq(m.call.cursor_stdout, 5);
	ck_assert_int_eq(m.call.cursor_stderr, 7);
	ck_assert_int_eq(m.call.base64, 1);
	ck_assert_int_eq(json_object_get_int64(req("stdout_cursor")), 5);
	ck_assert_int_eq(json_object_get_int64(req("stderr_cursor")), 7);
	ck_assert_int_eq(json_object_get_int64(req("max_bytes")), 100);
	ck_assert_ptr_null(req("cursor"));
	ck_assert_ptr_null(req("encoding"));
	ck_assert_int_eq(call("{\"op\":\"job_output\",\"job_id\":\"j\","
	    "\"cursor\":{}}"), DECODE_OK);
	ck_assert_int_eq(m.call.base64, 0);
	ck_assert_ptr_null(req("stdout_cursor"));

	ck_assert_int_eq(call("{\"op\":\"file_read\",\"path\":\"a/b\","
	    "\"offset\":9,\"max_bytes\":10}"), DECODE_OK);
	ck_assert_str_eq(m.call.path, "a/b");
	ck_assert_int_eq(m.call.offset, 9);
	ck_assert_int_eq(m.call.max_bytes, 10);
	ck_assert_str_eq(json_object_get_string(req("path")), "a/b");
	ck_assert_ptr_null(req("offset"));
	ck_assert_ptr_null(req("max_bytes"));
	ck_assert_int_eq(call("{\"op\":\"file_read\",\"path\":\"a\"}"),
	    DECODE_OK);
	ck_assert_int_eq(m.call.offset, 0);
	ck_assert_int_eq(m.call.max_bytes, GUEST_MAX_FILE);

	ck_assert_int_eq(call("{\"op\":\"file_write\",\"path\":\"f\","
	    "\"data_base64\":\"AAE=\",\"mode\":\"0755\",\"create_parents\":"
	    "true}"), DECODE_OK);
	ck_assert_int_eq(json_object_get_int(req("mode")), 0755);
	ck_assert_int_eq(json_object_get_boolean(req("create_parents")), 1);
	ck_assert_ptr_null(req("data_base64"));
	ck_assert_uint_eq(m.body_len, 2);
	ck_assert_str_eq(m.call.path, "f");

	ck_assert_int_eq(call("{\"op\":\"thaw\",\"realtime_ns\":1}"),
	    DECODE_OK);
	ck_assert_int_eq(json_object_get_int64(req("realtime_ns")), 1);
	ck_assert_int_eq(call("{\"op\":\"clock_set\",\"realtime_ns\":"
	    "9223372036854775807}"), DECODE_OK);
	ck_assert_int_eq(call("{\"op\":\"freeze\",\"filesystems\":true,"
	    "\"thaw_after_ms\":120000}"), DECODE_OK);
	ck_assert_int_eq(json_object_get_boolean(req("filesystems")), 1);
	ck_assert_int_eq(json_object_get_int64(req("thaw_after_ms")), 120000);
	/* The guest's own bound on a freeze: refused outside its range. */
	ck_assert_int_eq(call("{\"op\":\"freeze\",\"thaw_after_ms\":999}"),
	    DECODE_REFUSE);
	ck_assert_int_eq(call("{\"op\":\"freeze\",\"thaw_after_ms\":"
	    "600001}"), DECODE_REFUSE);
	ck_assert_int_eq(call("{\"op\":\"freeze\"}"), DECODE_OK);
	ck_assert_int_eq(call("{\"op\":\"activity\"}"), DECODE_OK);
	ck_assert_int_eq(call("{\"op\":\"ping\"}"), DECODE_OK);
	ck_assert_int_eq(call("{\"op\":\"shutdown\"}"), DECODE_OK);
	ck_assert_int_eq(call("{\"op\":\"job_status\",\"job_id\":\"j\"}"),
	    DECODE_OK);
	ck_assert_int_eq(call("{\"op\":\"job_cancel\",\"job_id\":\"j\"}"),
	    DECODE_OK);
	ck_assert_int_eq(json_object_object_length(m.request), 2);
}
END_TEST

/* Only a broken vmmd sends these: the connection closes. */
START_TEST(wrong_shapes_are_bad)
{
	static const char *const bad[] = {
		"{}",
		"{\"op\":1}",
		"{\"op\":\"format_disk\"}",
		"{\"op\":\"ping\",\"id\":3}",
		"{\"op\":\"exec\",\"job_id\":\"j\"}",		/* no command */
		"{\"op\":\"exec\",\"command\":\"x\"}",		/* no job_id */
		"{\"op\":\"exec\",\"job_id\":\"j\",\"command\":\"x\","
		    "\"extra\":1}",
		"{\"op\":\"exec\",\"job_id\":\"j\",\"command\":1}",
		"{\"op\":\"exec\",\"job_id\":\"j\",\"command\":\"x\","
		    "\"timeout_ms\":\"1\"}",
		"{\"op\":\"exec\",\"job_id\":\"j\",\"command\":\"x\","
		    "\"timeout_ms\":1.5}",
		"{\"op\":\"exec\",\"job_id\":\"j\",\"command\":\"x\","
		    "\"env\":[]}",
		"{\"op\":\"exec\",\"job_id\":\"j\",\"command\":\"x\","
		    "\"env\":{\"A\":1}}",
		"{\"op\":\"exec\",\"job_id\":\"j\",\"command\":\"x\","
		    "\"stdin_base64\":null}",
		"{\"op\":\"job_output\",\"job_id\":\"j\",\"cursor\":5}",
		"{\"op\":\"job_output\",\"job_id\":\"j\",\"cursor\":"
		    "{\"stdin\":0}}",
		"{\"op\":\"job_output\",\"job_id\":\"j\",\"cursor\":"
		    "{\"stdout\":\"0\"}}",
		"{\"op\":\"job_output\",\"job_id\":\"j\",\"encoding\":true}",
		"{\"op\":\"file_read\"}",
		"{\"op\":\"file_read\",\"path\":\"a\",\"offset\":\"1\"}",
		"{\"op\":\"file_read\",\"path\":\"a\",\"mode\":\"0644\"}",
		"{\"op\":\"file_write\",\"path\":\"a\",\"create_parents\":1}",
		"{\"op\":\"file_write\",\"path\":\"a\",\"mode\":644}",
		"{\"op\":\"thaw\",\"realtime_ns\":false}",
		"{\"op\":\"freeze\",\"realtime_ns\":1}",
		"{\"op\":\"freeze\",\"filesystems\":1}",
		"{\"op\":\"job_status\"}",
		NULL
	};

	for (size_t i = 0; bad[i] != NULL; i++) {
		ck_assert_msg(call(bad[i]) == DECODE_BAD, "not bad: %s",
		    bad[i]);
		ck_assert_msg(de.msg[0] != '\0', "no reason for %s", bad[i]);
	}
	vmmd_msg_clear(&m);
	ck_assert_int_eq(vmproxy_decode_call(NULL, &m, &de), DECODE_BAD);
	json_object_put(body);
	body = json_object_new_array();
	ck_assert_int_eq(vmproxy_decode_call(body, &m, &de), DECODE_BAD);
	ck_assert_ptr_null(m.request);
}
END_TEST

/* Values out of bounds are answered, with the bound that was hit. */
START_TEST(values_out_of_bounds_are_refused)
{
	static const char *const refused[][2] = {
		{ "{\"op\":\"file_write\",\"path\":\"a\",\"mode\":\"abc\"}",
		    "not an octal permission" },
		{ "{\"op\":\"file_write\",\"path\":\"a\",\"mode\":\"0800\"}",
		    "not an octal permission" },
		{ "{\"op\":\"file_write\",\"path\":\"a\",\"mode\":\"01000\"}",
		    "not an octal permission" },
		{ "{\"op\":\"file_write\",\"path\":\"a\",\"mode\":\"\"}",
		    "1 to 8 bytes" },
		{ "{\"op\":\"file_write\",\"path\":\"a\",\"data_base64\":\"A\"}",
		    "data_base64 is not valid base64" },
		{ "{\"op\":\"exec\",\"job_id\":\"j\",\"command\":\"x\","
		    "\"stdin_base64\":\"!!!!\"}",
		    "stdin_base64 is not valid base64" },
		{ "{\"op\":\"exec\",\"job_id\":\"j\",\"command\":\"\"}",
		    "command must be 1 to 65536 bytes" },
		{ "{\"op\":\"exec\",\"job_id\":\"j\",\"command\":\"x\","
		    "\"timeout_ms\":0}", "timeout_ms must be within" },
		{ "{\"op\":\"exec\",\"job_id\":\"j\",\"command\":\"x\","
		    "\"timeout_ms\":86400001}", "timeout_ms must be within" },
		{ "{\"op\":\"job_output\",\"job_id\":\"j\",\"cursor\":"
		    "{\"stdout\":-1}}", "stdout must be within 0..1073741824" },
		{ "{\"op\":\"job_output\",\"job_id\":\"j\",\"cursor\":"
		    "{\"stderr\":1073741825}}", "stderr must be within" },
		{ "{\"op\":\"job_output\",\"job_id\":\"j\",\"max_bytes\":0}",
		    "max_bytes must be within 1..16384" },
		{ "{\"op\":\"job_output\",\"job_id\":\"j\",\"encoding\":"
		    "\"latin1\"}", "encoding must be utf-8 or base64" },
		{ "{\"op\":\"file_read\",\"path\":\"a\",\"offset\":-1}",
		    "offset must be within" },
		{ "{\"op\":\"file_read\",\"path\":\"a\",\"offset\":"
		    "1099511627777}", "offset must be within" },
		{ "{\"op\":\"file_read\",\"path\":\"a\",\"max_bytes\":131073}",
		    "max_bytes must be within 1..131072" },
		{ "{\"op\":\"thaw\",\"realtime_ns\":-1}",
		    "realtime_ns must be within" },
		{ "{\"op\":\"job_status\",\"job_id\":\"0123456789012345678901"
		    "23456789012345678901234567890123456789abcde\"}",
		    "job_id must be 1 to 64 bytes" },
	};

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		ck_assert_msg(call(refused[i][0]) == DECODE_REFUSE,
		    "not refused: %s", refused[i][0]);
		ck_assert_str_eq(de.code, "invalid_argument");
		ck_assert_msg(strstr(de.msg, refused[i][1]) != NULL,
		    "%s: %s", refused[i][0], de.msg);
	}
}
END_TEST

START_TEST(sizes_nul_and_unsigned)
{
	/* base64 text for GUEST_MAX_FILE bytes is at most 174764 chars. */
	static const struct { size_t chars; const char *tail; int ok;
	    const char *why; } sizes[] = {
		{ 174768, "", 0, "data_base64 must be 0 to 174764 bytes" },
		{ 174764, "", 0, "data is 131073 bytes; at most 131072" },
		{ 174760, "AA==", 1, NULL },
	};
	char *text;
	size_t i, off;

	ck_assert_ptr_nonnull(text = malloc(174768 + 128));
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		off = (size_t)sprintf(text, "{\"op\":\"file_write\",\"path\":"
		    "\"a\",\"data_base64\":\"");
		memset(text + off, 'A', sizes[i].chars);
		sprintf(text + off + sizes[i].chars, "%s\"}", sizes[i].tail);
		if (sizes[i].ok) {
			ck_assert_int_eq(call(text), DECODE_OK);
			ck_assert_uint_eq(m.body_len, 131071);
		} else {
			ck_assert_int_eq(call(text), DECODE_REFUSE);
			ck_assert_msg(strstr(de.msg, sizes[i].why) != NULL,
			    "%s", de.msg);
		}
	}
	free(text);

	/* A NUL in a string C would stop at. */
	vmmd_msg_clear(&m);
	json_object_put(body);
	body = json_object_new_object();
	json_object_object_add(body, "op", json_object_new_string("exec"));
	json_object_object_add(body, "job_id", json_object_new_string("j"));
	json_object_object_add(body, "command",
	    json_object_new_string_len("ls\0rm", 5));
	ck_assert_int_eq(vmproxy_decode_call(body, &m, &de), DECODE_REFUSE);
	ck_assert_ptr_nonnull(strstr(de.msg, "NUL"));
	vmmd_msg_clear(&m);

	/* json-c's unsigned numbers past INT64_MAX. */
	json_object_object_add(body, "command", json_object_new_string("ls"));
	json_object_object_add(body, "timeout_ms",
	    json_object_new_uint64(UINT64_MAX));
	ck_assert_int_eq(vmproxy_decode_call(body, &m, &de), DECODE_REFUSE);
	ck_assert_ptr_nonnull(strstr(de.msg, "timeout_ms"));
}
END_TEST

START_TEST(stream_open)
{
	static const char *const bad[] = { "{}", "{\"port\":\"22\"}",
	    "{\"port\":22,\"vm_id\":\"v\"}", "{\"port\":22.0}", NULL };
	struct jsonx_err jerr;
	const char *t;

	json_object_put(body);
	body = jsonx_parse_object("{\"port\":22}", 11, 4, &jerr);
	ck_assert_int_eq(vmproxy_decode_stream_open(body, &m, &de), DECODE_OK);
	ck_assert_uint_eq(m.type, IPC_PROXY_STREAM_OPEN);
	ck_assert_int_eq(m.port, 22);
	for (size_t i = 0; bad[i] != NULL; i++) {
		json_object_put(body);
		body = jsonx_parse_object(bad[i], strlen(bad[i]), 4, &jerr);
		ck_assert_ptr_nonnull(body);
		ck_assert_msg(vmproxy_decode_stream_open(body, &m, &de) ==
		    DECODE_BAD, "%s", bad[i]);
	}
	t = "{\"port\":65536}";
	json_object_put(body);
	body = jsonx_parse_object(t, strlen(t), 4, &jerr);
	ck_assert_int_eq(vmproxy_decode_stream_open(body, &m, &de),
	    DECODE_REFUSE);
	ck_assert_ptr_nonnull(strstr(de.msg, "port must be within 1..65535"));
	t = "{\"port\":0}";
	json_object_put(body);
	body = jsonx_parse_object(t, strlen(t), 4, &jerr);
	ck_assert_int_eq(vmproxy_decode_stream_open(body, &m, &de),
	    DECODE_REFUSE);
	ck_assert_int_eq(vmproxy_decode_stream_open(NULL, &m, &de),
	    DECODE_BAD);
}
END_TEST

START_TEST(qmp_operation)
{
	static const char *const bad[] = { "{}", "{\"op\":\"stop\"}",
	    "{\"op\":\"human-monitor-command\",\"timeout_ms\":10}",
	    "{\"op\":1,\"timeout_ms\":10}",
	    "{\"op\":\"stop\",\"timeout_ms\":10,\"args\":{}}",
	    "{\"op\":\"stop\",\"timeout_ms\":\"10\"}", NULL };
	struct jsonx_err jerr;
	const char *t = "{\"op\":\"migrate\",\"timeout_ms\":60000}";

	json_object_put(body);
	body = jsonx_parse_object(t, strlen(t), 4, &jerr);
	ck_assert_int_eq(vmproxy_decode_qmp(body, &m, &de), DECODE_OK);
	ck_assert_uint_eq(m.type, IPC_PROXY_QMP);
	ck_assert_int_eq(m.qmp_op, VMQ_MIGRATE);
	ck_assert_int_eq(m.qmp_timeout_ms, 60000);
	for (size_t i = 0; bad[i] != NULL; i++) {
		json_object_put(body);
		body = jsonx_parse_object(bad[i], strlen(bad[i]), 4, &jerr);
		ck_assert_ptr_nonnull(body);
		ck_assert_msg(vmproxy_decode_qmp(body, &m, &de) == DECODE_BAD,
		    "%s", bad[i]);
	}
	t = "{\"op\":\"stop\",\"timeout_ms\":3600001}";
	json_object_put(body);
	body = jsonx_parse_object(t, strlen(t), 4, &jerr);
	ck_assert_int_eq(vmproxy_decode_qmp(body, &m, &de), DECODE_REFUSE);
	ck_assert_ptr_nonnull(strstr(de.msg, "timeout_ms"));
}
END_TEST

/* Base64 of the bytes 0..63; an identity call around its fields. */
#define ENT64	"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKiss" \
		"LS4vMDEyMzQ1Njc4OTo7PD0+Pw=="
#define MID	"0123456789abcdef0123456789abcdef"
#define BID	"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"

static enum decode_verdict
identity(const char *mid, const char *bid, const char *host,
    const char *ent)
{
	char text[512];

	snprintf(text, sizeof(text), "{\"op\":\"identity\",\"machine_id\":"
	    "\"%s\",\"boot_id\":\"%s\",\"hostname\":\"%s\",\"entropy_b64\":"
	    "\"%s\"}", mid, bid, host, ent);
	return call(text);
}

START_TEST(identity_forwarded)
{
	ck_assert_int_eq(identity(MID, BID, "clone-1", ENT64), DECODE_OK);
	ck_assert_int_eq(m.call.op, GOP_IDENTITY);
	ck_assert_str_eq(m.call.boot_id, BID);
	ck_assert_str_eq(json_object_get_string(req("op")), "identity");
	ck_assert_str_eq(json_object_get_string(req("machine_id")), MID);
	ck_assert_str_eq(json_object_get_string(req("boot_id")), BID);
	ck_assert_str_eq(json_object_get_string(req("hostname")), "clone-1");
	ck_assert_str_eq(json_object_get_string(req("entropy_b64")), ENT64);
	ck_assert_int_eq(json_object_object_length(m.request), 5);
	ck_assert_ptr_null(m.body);
}
END_TEST

START_TEST(identity_checked)
{
	static const struct {
		const char *mid, *bid, *host, *ent, *says;
	} refused[] = {
		{ "0123456789ABCDEF0123456789abcdef", BID, "h", ENT64,
		    "machine_id must be 32 lowercase hex" },
		{ "00000000000000000000000000000000", BID, "h", ENT64,
		    "not all zero" },
		{ "0123456789abcdef0123456789abcde", BID, "h", ENT64,
		    "machine_id must be 32 to 32 bytes" },
		{ MID, "0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F9", "h", ENT64,
		    "boot_id must be a lowercase UUID" },
		{ MID, "0f1e2d3c-4b5a-4978-8695a-4b3c2d1e0f9", "h", ENT64,
		    "boot_id must be a lowercase UUID" },
		{ MID, "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f", "h", ENT64,
		    "boot_id must be 36 to 36 bytes" },
		{ MID, BID, "-h", ENT64, "hostname must be 1-63" },
		{ MID, BID, "h-", ENT64, "hostname must be 1-63" },
		{ MID, BID, "H", ENT64, "hostname must be 1-63" },
		{ MID, BID, "", ENT64, "hostname must be 1 to 63 bytes" },
		{ MID, BID, "h", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIj"
		    "JCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Px==",
		    "entropy_b64 must be base64 of exactly 64 bytes" },
		{ MID, BID, "h", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIj"
		    "JCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+PwAA",
		    "entropy_b64 must be base64 of exactly 64 bytes" },
		{ MID, BID, "h", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIj"
		    "JCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+",
		    "entropy_b64 must be 88 to 88 bytes" },
	};

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		ck_assert_msg(identity(refused[i].mid, refused[i].bid,
		    refused[i].host, refused[i].ent) == DECODE_REFUSE,
		    "not refused: #%zu", i);
		ck_assert_str_eq(de.code, "invalid_argument");
		ck_assert_msg(strstr(de.msg, refused[i].says) != NULL,
		    "#%zu: %s", i, de.msg);
	}
	/* A member missing, of the wrong type, or unknown: a wrong shape. */
	ck_assert_int_eq(call("{\"op\":\"identity\",\"machine_id\":\"" MID
	    "\",\"boot_id\":\"" BID "\",\"hostname\":\"h\"}"), DECODE_BAD);
	ck_assert_int_eq(call("{\"op\":\"identity\",\"machine_id\":\"" MID
	    "\",\"boot_id\":\"" BID "\",\"hostname\":7,\"entropy_b64\":\""
	    ENT64 "\"}"), DECODE_BAD);
	ck_assert_int_eq(call("{\"op\":\"identity\",\"machine_id\":\"" MID
	    "\",\"boot_id\":\"" BID "\",\"hostname\":\"h\",\"entropy_b64\":\""
	    ENT64 "\",\"path\":\"x\"}"), DECODE_BAD);
}
END_TEST

#define NET_OK	"{\"mac\":\"02:6d:76:00:00:07\",\"address\":\"10.232.7.2\"," \
	"\"prefix\":30,\"gateway\":\"10.232.7.1\",\"dns\":[\"203.0.113.53\"]}"

static enum decode_verdict
identity_net(const char *net)
{
	char text[1024];

	snprintf(text, sizeof(text), "{\"op\":\"identity\",\"machine_id\":"
	    "\"" MID "\",\"boot_id\":\"" BID "\",\"hostname\":\"h\","
	    "\"entropy_b64\":\"" ENT64 "\",\"net\":%s}", net);
	return call(text);
}

START_TEST(identity_net_forwarded)
{
	struct json_object *net;

	ck_assert_int_eq(identity_net(NET_OK), DECODE_OK);
	net = req("net");
	ck_assert_ptr_nonnull(net);
	ck_assert_str_eq(json_object_get_string(json_object_object_get(net,
	    "address")), "10.232.7.2");
	ck_assert_int_eq(json_object_object_length(m.request), 6);
}
END_TEST

START_TEST(identity_net_checked)
{
	/* glink_net_decode's checks, refused before the guest sees them. */
	ck_assert_int_eq(identity_net("{\"mac\":\"02:6d:76:00:00:07\","
	    "\"address\":\"10.232.7.2\",\"prefix\":30,\"gateway\":"
	    "\"10.232.8.1\",\"dns\":[]}"), DECODE_REFUSE);
	ck_assert_str_eq(de.code, "invalid_argument");
	ck_assert_ptr_nonnull(strstr(de.msg, "identity: net: gateway"));
	ck_assert_int_eq(identity_net("{\"mac\":\"01:6d:76:00:00:07\","
	    "\"address\":\"10.232.7.2\",\"prefix\":30,\"gateway\":"
	    "\"10.232.7.1\",\"dns\":[]}"), DECODE_REFUSE);
	ck_assert_ptr_nonnull(strstr(de.msg, "net: mac"));
	ck_assert_int_eq(identity_net("{\"mac\":\"02:6d:76:00:00:07\","
	    "\"address\":\"10.232.7.2\",\"prefix\":30,\"gateway\":"
	    "\"10.232.7.1\",\"dns\":[],\"x\":1}"), DECODE_REFUSE);
	ck_assert_ptr_nonnull(strstr(de.msg, "unknown member"));
	/* Not an object at all: a wrong shape. */
	ck_assert_int_eq(identity_net("[1]"), DECODE_BAD);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("vmproxy_decode");
	TCase *tc = tcase_create("decode");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, exec_forwards_its_members);
	tcase_add_test(tc, each_operation);
	tcase_add_test(tc, wrong_shapes_are_bad);
	tcase_add_test(tc, values_out_of_bounds_are_refused);
	tcase_add_test(tc, sizes_nul_and_unsigned);
	tcase_add_test(tc, stream_open);
	tcase_add_test(tc, qmp_operation);
	tcase_add_test(tc, identity_forwarded);
	tcase_add_test(tc, identity_checked);
	tcase_add_test(tc, identity_net_forwarded);
	tcase_add_test(tc, identity_net_checked);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
