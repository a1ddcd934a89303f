/*
 * vmproxy's decoders for what vmmd sends (vmproxy_decode.h).  A call's
 * members are listed per operation with their type and bounds; each is
 * checked once, what the host reads is stored typed, and the rest is
 * forwarded to the guest as it came.  A member not listed is a wrong
 * shape: a new one needs its line in the operation's table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "glink.h"
#include "guest.h"
#include "ipc.h"
#include "jsonx.h"
#include "vmproxy_decode.h"
#include "vmqmp.h"

enum mkind {
	MK_STR,		/* min..max bytes, no NUL */
	MK_INT,		/* min..max */
	MK_BOOL,
	MK_ENV,		/* an object of at most max string members */
	MK_CURSOR,	/* { stdout, stderr }: 0..GUEST_CURSOR_MAX each */
	MK_OBJ,		/* an object, its members read_host_members' */
};

#define MF_REQ		0x1	/* vmmd always sends it */
#define MF_HOST		0x2	/* read here, not forwarded to the guest */

struct member {
	const char	*name;
	enum mkind	 kind;
	int64_t		 min, max;
	unsigned int	 flags;
};

/* base64 text for n bytes: what a body of GLINK_MAX_BODY takes. */
#define B64_CHARS(n)	((((int64_t)(n) + 2) / 3) * 4)
#define MS_DAY		(86400LL * 1000)

#define M_JOB_ID	{ "job_id", MK_STR, 1, GUEST_JOB_ID_MAX, MF_REQ }

/* The members of each operation, indexed by enum guest_op. */
static const struct member ops_members[GOP_COUNT][8] = {
	[GOP_EXEC] = {
		M_JOB_ID,
		{ "command", MK_STR, 1, VMPROXY_STRING_MAX, MF_REQ },
		{ "cwd", MK_STR, 1, 4096, 0 },
		{ "env", MK_ENV, 0, GUEST_MAX_ENV, 0 },
		{ "stdin_base64", MK_STR, 0, B64_CHARS(GLINK_MAX_BODY),
		    MF_HOST },
		{ "timeout_ms", MK_INT, 1, MS_DAY, 0 },
		/* The job broker pipe's route secret, for the guest. */
		{ "broker_secret", MK_STR, BROKER_SECRET_HEX, BROKER_SECRET_HEX,
		    0 },
	},
	[GOP_JOB_STATUS] = { M_JOB_ID },
	[GOP_JOBS] = { { NULL } },
	[GOP_JOB_OUTPUT] = {
		M_JOB_ID,
		{ "cursor", MK_CURSOR, 0, 0, MF_HOST },
		{ "max_bytes", MK_INT, 1, GUEST_OUTPUT_READ_MAX, 0 },
		{ "encoding", MK_STR, 1, 16, MF_HOST },
	},
	[GOP_JOB_CANCEL] = { M_JOB_ID },
	[GOP_FILE_READ] = {
		{ "path", MK_STR, 1, 4096, MF_REQ },
		{ "offset", MK_INT, 0, GUEST_OFFSET_MAX, MF_HOST },
		{ "max_bytes", MK_INT, 1, GUEST_MAX_FILE, MF_HOST },
	},
	[GOP_FILE_WRITE] = {
		{ "path", MK_STR, 1, 4096, MF_REQ },
		{ "data_base64", MK_STR, 0, B64_CHARS(GUEST_MAX_FILE),
		    MF_HOST },
		{ "mode", MK_STR, 1, 8, MF_HOST },
		{ "create_parents", MK_BOOL, 0, 0, 0 },
	},
	[GOP_FREEZE] = {
		{ "filesystems", MK_BOOL, 0, 0, 0 },
		{ "thaw_after_ms", MK_INT, GUEST_THAW_AFTER_MS_MIN,
		    GUEST_THAW_AFTER_MS_MAX, 0 },
	},
	[GOP_THAW] = { { "realtime_ns", MK_INT, 0, INT64_MAX, 0 } },
	[GOP_ACTIVITY] = { { NULL } },
	[GOP_PING] = { { NULL } },
	[GOP_SHUTDOWN] = { { NULL } },
	[GOP_CLOCK_SET] = { { "realtime_ns", MK_INT, 0, INT64_MAX, 0 } },
	/* Exact lengths here; the forms in read_host_members. */
	[GOP_IDENTITY] = {
		{ "machine_id", MK_STR, GUEST_MACHINE_ID_LEN,
		    GUEST_MACHINE_ID_LEN, MF_REQ },
		{ "boot_id", MK_STR, GUEST_UUID_LEN, GUEST_UUID_LEN, MF_REQ },
		{ "hostname", MK_STR, 1, GUEST_HOSTNAME_MAX, MF_REQ },
		{ "entropy_b64", MK_STR, GUEST_ENTROPY_B64_LEN,
		    GUEST_ENTROPY_B64_LEN, MF_REQ },
		{ "net", MK_OBJ, 0, 0, 0 },
	},
};

void
vmmd_msg_clear(struct vmmd_msg *m)
{
	json_object_put(m->request);
	free(m->body);
	memset(m, 0, sizeof(*m));
}

static const struct member *
member_find(const struct member *ms, const char *name)
{
	for (; ms->name != NULL; ms++)
		if (strcmp(ms->name, name) == 0)
			return ms;
	return NULL;
}

static enum decode_verdict
check_int(const char *op, const char *name, struct json_object *v,
    int64_t min, int64_t max, struct decode_err *e)
{
	int64_t n;

	if (!json_object_is_type(v, json_type_int))
		return verdict(e, DECODE_BAD, NULL, "%s: %s is %s, not an "
		    "integer", op, name, jsonx_type_name(v));
	/* json-c keeps numbers past INT64_MAX as unsigned. */
	errno = 0;
	n = json_object_get_int64(v);
	if (errno != 0 || json_object_get_uint64(v) > (uint64_t)INT64_MAX ||
	    n < min || n > max)
		return verdict(e, DECODE_REFUSE, "invalid_argument", "%s: %s "
		    "must be within %lld..%lld", op, name, (long long)min,
		    (long long)max);
	return DECODE_OK;
}

static enum decode_verdict
check_member(const char *op, const struct member *ms, struct json_object *v,
    struct decode_err *e)
{
	size_t len;

	switch (ms->kind) {
	case MK_STR:
		if (!json_object_is_type(v, json_type_string))
			return verdict(e, DECODE_BAD, NULL, "%s: %s is %s, not "
			    "a string", op, ms->name, jsonx_type_name(v));
		len = (size_t)json_object_get_string_len(v);
		if (memchr(json_object_get_string(v), '\0', len) != NULL)
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "%s: %s contains a NUL character", op, ms->name);
		if ((int64_t)len < ms->min || (int64_t)len > ms->max)
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "%s: %s must be %lld to %lld bytes long", op,
			    ms->name, (long long)ms->min, (long long)ms->max);
		return DECODE_OK;
	case MK_INT:
		return check_int(op, ms->name, v, ms->min, ms->max, e);
	case MK_BOOL:
		if (!json_object_is_type(v, json_type_boolean))
			return verdict(e, DECODE_BAD, NULL, "%s: %s is %s, not "
			    "a boolean", op, ms->name, jsonx_type_name(v));
		return DECODE_OK;
	case MK_ENV: {
		if (!json_object_is_type(v, json_type_object))
			return verdict(e, DECODE_BAD, NULL, "%s: %s is %s, not "
			    "an object", op, ms->name, jsonx_type_name(v));
		if (json_object_object_length(v) > ms->max)
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "%s: %s has more than %lld variables", op,
			    ms->name, (long long)ms->max);
		json_object_object_foreach(v, k, val) {
			(void)k;
			if (!json_object_is_type(val, json_type_string))
				return verdict(e, DECODE_BAD, NULL, "%s: %s: a "
				    "value is %s, not a string", op, ms->name,
				    jsonx_type_name(val));
		}
		return DECODE_OK;
	}
	case MK_OBJ:
		if (!json_object_is_type(v, json_type_object))
			return verdict(e, DECODE_BAD, NULL, "%s: %s is %s, not "
			    "an object", op, ms->name, jsonx_type_name(v));
		return DECODE_OK;
	case MK_CURSOR: {
		if (!json_object_is_type(v, json_type_object))
			return verdict(e, DECODE_BAD, NULL, "%s: %s is %s, not "
			    "an object", op, ms->name, jsonx_type_name(v));
		json_object_object_foreach(v, k, val) {
			enum decode_verdict r;

			if (strcmp(k, "stdout") != 0 && strcmp(k, "stderr") != 0)
				return verdict(e, DECODE_BAD, NULL, "%s: %s: "
				    "unknown member '%.64s'", op, ms->name, k);
			if ((r = check_int(op, k, val, 0, GUEST_CURSOR_MAX,
			    e)) != DECODE_OK)
				return r;
		}
		return DECODE_OK;
	}
	}
	return verdict(e, DECODE_BAD, NULL, "%s: %s: no such kind", op,
	    ms->name);
}

/* "0644" and the like; -1 for anything else. */
static int
octal_mode(const char *s)
{
	char *end;
	long mode;

	if (*s == '\0')
		return -1;
	mode = strtol(s, &end, 8);
	if (*end != '\0' || mode < 0 || mode > 0777)
		return -1;
	return (int)mode;
}

/* The identity op's values, in the forms guestd takes (glink.h). */
static enum decode_verdict
check_identity(struct json_object *body, struct guest_call *c,
    struct decode_err *e)
{
	uint8_t ent[GUEST_ENTROPY_BYTES];
	struct json_object *net;
	struct glink_net n;
	const char *s;
	struct jsonx_err jerr;
	char why[160];
	int rc;

	s = "";
	(void)jsonx_get_string(body, "machine_id", 0, &s, &jerr);
	if (!glink_valid_machine_id(s))
		return verdict(e, DECODE_REFUSE, "invalid_argument", "identity: "
		    "machine_id must be %d lowercase hex digits, not all zero",
		    GUEST_MACHINE_ID_LEN);
	c->boot_id = "";
	(void)jsonx_get_string(body, "boot_id", 0, &c->boot_id, &jerr);
	if (!glink_valid_uuid(c->boot_id))
		return verdict(e, DECODE_REFUSE, "invalid_argument", "identity: "
		    "boot_id must be a lowercase UUID (8-4-4-4-12 hex digits)");
	s = "";
	(void)jsonx_get_string(body, "hostname", 0, &s, &jerr);
	if (!glink_valid_hostname(s))
		return verdict(e, DECODE_REFUSE, "invalid_argument", "identity: "
		    "hostname must be 1-%d characters of [a-z0-9-], not "
		    "starting or ending with '-'", GUEST_HOSTNAME_MAX);
	s = "";
	(void)jsonx_get_string(body, "entropy_b64", 0, &s, &jerr);
	rc = glink_b64_exact(s, strlen(s), ent, sizeof(ent));
	explicit_bzero(ent, sizeof(ent));
	if (rc == -1)
		return verdict(e, DECODE_REFUSE, "invalid_argument", "identity: "
		    "entropy_b64 must be base64 of exactly %d bytes",
		    GUEST_ENTROPY_BYTES);
	if (json_object_object_get_ex(body, "net", &net) &&
	    glink_net_decode(net, &n, why, sizeof(why)) == -1)
		return verdict(e, DECODE_REFUSE, "invalid_argument",
		    "identity: %s", why);
	return DECODE_OK;
}

/* The host's own members of a call, read into m after the checks. */
static enum decode_verdict
read_host_members(struct json_object *body, struct vmmd_msg *m,
    struct decode_err *e)
{
	static const char *const encodings[] = { "utf-8", "base64", NULL };
	struct guest_call *c = &m->call;
	const char *op = guest_op_names[c->op], *s, *key;
	struct json_object *v;
	struct jsonx_err jerr;
	int mode, enc = 0;

	if (c->op == GOP_IDENTITY)
		return check_identity(body, c, e);
	(void)jsonx_get_string(body, "path", 0, &c->path, &jerr);
	(void)jsonx_get_string(body, "job_id", 0, &c->job_id, &jerr);
	/* The guest takes the cursor as two members of its own. */
	if (jsonx_get_int64(body, "cursor.stdout", 0, 0, GUEST_CURSOR_MAX,
	    &c->cursor_stdout, &jerr) == 1)
		json_object_object_add(m->request, "stdout_cursor",
		    json_object_new_int64(c->cursor_stdout));
	if (jsonx_get_int64(body, "cursor.stderr", 0, 0, GUEST_CURSOR_MAX,
	    &c->cursor_stderr, &jerr) == 1)
		json_object_object_add(m->request, "stderr_cursor",
		    json_object_new_int64(c->cursor_stderr));
	if (c->op == GOP_FILE_READ) {
		(void)jsonx_get_int64(body, "offset", 0, 0, GUEST_OFFSET_MAX,
		    &c->offset, &jerr);
		(void)jsonx_get_int64(body, "max_bytes", 0, 1, GUEST_MAX_FILE,
		    &c->max_bytes, &jerr);
	}
	if (c->op == GOP_JOB_OUTPUT && jsonx_get_enum(body, "encoding", 0,
	    encodings, &enc, &jerr) == -1)
		return verdict(e, DECODE_REFUSE, "invalid_argument", "%s: "
		    "encoding must be utf-8 or base64", op);
	c->base64 = enc == 1;
	if (jsonx_get_string(body, "mode", 0, &s, &jerr) == 1) {
		if ((mode = octal_mode(s)) == -1)
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "mode '%s' is not an octal permission like 0644",
			    s);
		json_object_object_add(m->request, "mode",
		    json_object_new_int(mode));
	}
	key = c->op == GOP_EXEC ? "stdin_base64" : "data_base64";
	if (json_object_object_get_ex(body, key, &v)) {
		size_t cap = c->op == GOP_EXEC ? GLINK_MAX_BODY : GUEST_MAX_FILE;

		if (b64_decode(json_object_get_string(v),
		    (size_t)json_object_get_string_len(v), &m->body,
		    &m->body_len) == -1) {
			m->body = NULL;
			m->body_len = 0;
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "%s is not valid base64", key);
		}
		if (m->body_len > cap)
			return verdict(e, DECODE_REFUSE, "invalid_argument",
			    "data is %zu bytes; at most %zu are allowed",
			    m->body_len, cap);
	}
	return DECODE_OK;
}

enum decode_verdict
vmproxy_decode_call(struct json_object *body, struct vmmd_msg *m,
    struct decode_err *e)
{
	const struct member *ms, *mm;
	struct jsonx_err jerr;
	enum decode_verdict v;
	const char *name;
	int op;

	memset(m, 0, sizeof(*m));
	m->type = IPC_PROXY_CALL;
	if (body == NULL || !json_object_is_type(body, json_type_object))
		return verdict(e, DECODE_BAD, NULL, "the call is no object");
	if (jsonx_get_enum(body, "op", 1, guest_op_names, &op, &jerr) != 1)
		return verdict(e, DECODE_BAD, NULL, "a call of no known "
		    "operation: %s", jerr.msg);
	name = guest_op_names[op];
	ms = ops_members[op];
	guest_call_init(&m->call, (enum guest_op)op);
	json_object_object_foreach(body, k, val) {
		if (strcmp(k, "op") == 0)
			continue;
		if ((mm = member_find(ms, k)) == NULL)
			return verdict(e, DECODE_BAD, NULL, "%s: unknown member "
			    "'%.64s'", name, k);
		if ((v = check_member(name, mm, val, e)) != DECODE_OK)
			return v;
	}
	for (mm = ms; mm->name != NULL; mm++)
		if ((mm->flags & MF_REQ) &&
		    !json_object_object_get_ex(body, mm->name, NULL))
			return verdict(e, DECODE_BAD, NULL, "%s: %s is missing",
			    name, mm->name);

	/* The guest's request: its own members as they came. */
	m->request = json_object_new_object();
	json_object_object_add(m->request, "op", json_object_new_string(
	    op == GOP_JOBS ? "job_status" : name));
	for (mm = ms; mm->name != NULL; mm++) {
		struct json_object *fwd;

		if (!(mm->flags & MF_HOST) &&
		    json_object_object_get_ex(body, mm->name, &fwd))
			json_object_object_add(m->request, mm->name,
			    json_object_get(fwd));
	}
	if ((v = read_host_members(body, m, e)) != DECODE_OK)
		return v;
	return DECODE_OK;
}

enum decode_verdict
vmproxy_decode_stream_open(struct json_object *body, struct vmmd_msg *m,
    struct decode_err *e)
{
	struct json_object *v;
	enum decode_verdict r;

	memset(m, 0, sizeof(*m));
	m->type = IPC_PROXY_STREAM_OPEN;
	if (body == NULL || !json_object_is_type(body, json_type_object))
		return verdict(e, DECODE_BAD, NULL, "the stream open is no "
		    "object");
	json_object_object_foreach(body, k, val) {
		(void)val;
		if (strcmp(k, "port") != 0)
			return verdict(e, DECODE_BAD, NULL, "stream open: "
			    "unknown member '%.64s'", k);
	}
	if (!json_object_object_get_ex(body, "port", &v))
		return verdict(e, DECODE_BAD, NULL, "stream open: port is "
		    "missing");
	if ((r = check_int("stream open", "port", v, 1, 65535, e)) !=
	    DECODE_OK)
		return r;
	m->port = (int)json_object_get_int64(v);
	return DECODE_OK;
}

enum decode_verdict
vmproxy_decode_qmp(struct json_object *body, struct vmmd_msg *m,
    struct decode_err *e)
{
	struct json_object *v;
	enum decode_verdict r;
	int op;

	memset(m, 0, sizeof(*m));
	m->type = IPC_PROXY_QMP;
	if (body == NULL || !json_object_is_type(body, json_type_object))
		return verdict(e, DECODE_BAD, NULL, "the QEMU operation is no "
		    "object");
	json_object_object_foreach(body, k, val) {
		(void)val;
		if (strcmp(k, "op") != 0 && strcmp(k, "timeout_ms") != 0)
			return verdict(e, DECODE_BAD, NULL, "qmp: unknown "
			    "member '%.64s'", k);
	}
	if (!json_object_object_get_ex(body, "op", &v) ||
	    !json_object_is_type(v, json_type_string))
		return verdict(e, DECODE_BAD, NULL, "qmp: op is missing or "
		    "not a string");
	if ((op = vmq_lookup(vmq_op_names, json_object_get_string(v))) < 0)
		return verdict(e, DECODE_BAD, NULL, "qmp: unknown operation "
		    "'%.64s'", json_object_get_string(v));
	if (!json_object_object_get_ex(body, "timeout_ms", &v))
		return verdict(e, DECODE_BAD, NULL, "qmp: timeout_ms is "
		    "missing");
	if ((r = check_int("qmp", "timeout_ms", v, VMQ_TIMEOUT_MIN,
	    VMQ_TIMEOUT_MAX, e)) != DECODE_OK)
		return r;
	m->qmp_op = op;
	m->qmp_timeout_ms = json_object_get_int64(v);
	return DECODE_OK;
}

/*
 * The broker's three messages: an object of exactly its members, each of
 * its type.  vmproxy_broker.c then reads the values and bounds them.
 */
static enum decode_verdict
members_of(const char *what, struct json_object *body,
    const char *const *names, const enum json_type *types,
    const int *required, struct decode_err *e)
{
	struct json_object *v;
	size_t i;

	if (body == NULL || !json_object_is_type(body, json_type_object))
		return verdict(e, DECODE_BAD, NULL, "%s is no object", what);
	json_object_object_foreach(body, k, val) {
		for (i = 0; names[i] != NULL; i++)
			if (strcmp(names[i], k) == 0)
				break;
		if (names[i] == NULL)
			return verdict(e, DECODE_BAD, NULL, "%s: unknown member "
			    "'%.64s'", what, k);
		if (!json_object_is_type(val, types[i]))
			return verdict(e, DECODE_BAD, NULL, "%s: %s has the "
			    "wrong type", what, k);
	}
	for (i = 0; names[i] != NULL; i++)
		if (required[i] && !json_object_object_get_ex(body, names[i],
		    &v))
			return verdict(e, DECODE_BAD, NULL, "%s: %s is missing",
			    what, names[i]);
	return DECODE_OK;
}

enum decode_verdict
vmproxy_decode_broker_route(struct json_object *body, struct vmmd_msg *m,
    struct decode_err *e)
{
	static const char *const names[] = { "job_id", "secret", "remove",
	    NULL };
	static const enum json_type types[] = { json_type_string,
	    json_type_string, json_type_boolean };
	static const int required[] = { 1, 0, 0 };

	memset(m, 0, sizeof(*m));
	m->type = IPC_PROXY_BROKER_ROUTE;
	return members_of("broker route", body, names, types, required, e);
}

enum decode_verdict
vmproxy_decode_broker_attach(struct json_object *body, struct vmmd_msg *m,
    struct decode_err *e)
{
	static const char *const names[] = { "job_id", NULL };
	static const enum json_type types[] = { json_type_string };
	static const int required[] = { 1 };

	memset(m, 0, sizeof(*m));
	m->type = IPC_PROXY_BROKER_ATTACH;
	return members_of("broker attach", body, names, types, required, e);
}

enum decode_verdict
vmproxy_decode_broker_limits(struct json_object *body, struct vmmd_msg *m,
    struct decode_err *e)
{
	static const char *const names[] = { "max_attached",
	    "max_connections", "max_waiting", "buffer_bytes",
	    "stall_seconds", "max_pending", "preamble_seconds", NULL };
	static const enum json_type types[] = { json_type_int, json_type_int,
	    json_type_int, json_type_int, json_type_int, json_type_int,
	    json_type_int };
	static const int required[] = { 1, 1, 1, 1, 1, 1, 1 };

	memset(m, 0, sizeof(*m));
	m->type = IPC_PROXY_BROKER_LIMITS;
	return members_of("broker limits", body, names, types, required, e);
}
