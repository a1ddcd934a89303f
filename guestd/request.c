/*
 * guestd: decoding of the host's channel 0 requests into struct req.  Every
 * field is type- and range-checked here, before any handler sees it.  Runs
 * in guestd; tests/fuzz/fuzz_guest_ctrl.c drives it with hostile bytes.
 */
#include <stdio.h>
#include <string.h>

#include "guestd.h"

static const struct {
	const char	*name;
	enum req_op	 op;
} ops[] = {
	{ "ping", OP_PING },
	{ "clock_set", OP_CLOCK_SET },
	{ "exec", OP_EXEC },
	{ "job_status", OP_JOB_STATUS },
	{ "job_output", OP_JOB_OUTPUT },
	{ "job_cancel", OP_JOB_CANCEL },
	{ "file_read", OP_FILE_READ },
	{ "file_write", OP_FILE_WRITE },
	{ "freeze", OP_FREEZE },
	{ "thaw", OP_THAW },
	{ "activity", OP_ACTIVITY },
	{ "shutdown", OP_SHUTDOWN },
	{ "hello", OP_HELLO },
	{ "identity", OP_IDENTITY },
};

int
valid_job_id(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > GUEST_JOB_ID_MAX)
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_-") == n;
}

static int
valid_env_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 128 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_") == n;
}

static int
decode_env(struct req *r, char *err, size_t errlen)
{
	int n = 0, rc;

	if ((rc = glink_json_obj(r->root, "env", 0, &r->env, err,
	    errlen)) != 1) {
		r->env = NULL;
		return rc;
	}
	json_object_object_foreach(r->env, key, val) {
		size_t vlen;

		if (++n > GUEST_MAX_ENV) {
			snprintf(err, errlen, "env has more than %d variables",
			    GUEST_MAX_ENV);
			return -1;
		}
		if (!valid_env_name(key)) {
			snprintf(err, errlen, "env: bad variable name");
			return -1;
		}
		if (!json_object_is_type(val, json_type_string)) {
			snprintf(err, errlen, "env: value of %s must be a "
			    "string", key);
			return -1;
		}
		vlen = (size_t)json_object_get_string_len(val);
		if (vlen > 32768 || memchr(json_object_get_string(val), '\0',
		    vlen) != NULL) {
			snprintf(err, errlen, "env: value of %s is too long "
			    "or holds NUL", key);
			return -1;
		}
	}
	return 0;
}

/* Every field required, each in its one exact form (proto/guest.h). */
static int
decode_identity(struct req *r, char *err, size_t errlen)
{
	struct json_object *net;
	const char *b64;
	int rc;

	if (glink_json_str(r->root, "machine_id", 1, GUEST_MACHINE_ID_LEN,
	    &r->machine_id, err, errlen) != 1 ||
	    glink_json_str(r->root, "boot_id", 1, GUEST_UUID_LEN,
	    &r->boot_id, err, errlen) != 1 ||
	    glink_json_str(r->root, "hostname", 1, GUEST_HOSTNAME_MAX,
	    &r->hostname, err, errlen) != 1 ||
	    glink_json_str(r->root, "entropy_b64", 1, GUEST_ENTROPY_B64_LEN,
	    &b64, err, errlen) != 1)
		return -1;
	if (!glink_valid_machine_id(r->machine_id)) {
		snprintf(err, errlen, "machine_id must be %d lowercase hex "
		    "digits, not all zero", GUEST_MACHINE_ID_LEN);
		return -1;
	}
	if (!glink_valid_uuid(r->boot_id)) {
		snprintf(err, errlen, "boot_id must be a lowercase UUID "
		    "(8-4-4-4-12 hex digits)");
		return -1;
	}
	if (!glink_valid_hostname(r->hostname)) {
		snprintf(err, errlen, "hostname must be 1-%d characters of "
		    "[a-z0-9-], not starting or ending with '-'",
		    GUEST_HOSTNAME_MAX);
		return -1;
	}
	if (glink_b64_exact(b64, strlen(b64), r->entropy,
	    sizeof(r->entropy)) == -1) {
		snprintf(err, errlen, "entropy_b64 must be base64 of exactly "
		    "%d bytes", GUEST_ENTROPY_BYTES);
		return -1;
	}
	if ((rc = glink_json_obj(r->root, "net", 0, &net, err, errlen)) == -1)
		return -1;
	if (rc == 1 && glink_net_decode(net, &r->net, err, errlen) == -1)
		return -1;
	r->has_net = rc == 1;
	return 0;
}

static int
decode_args(struct req *r, char *err, size_t errlen)
{
	int rc = 0;

	switch (r->op) {
	case OP_FREEZE:
		if ((rc = glink_json_bool(r->root, "filesystems", 0,
		    &r->filesystems, err, errlen)) == -1)
			return -1;
		r->thaw_after_ms = GUEST_THAW_AFTER_MS_DEFAULT;
		if (glink_json_int(r->root, "thaw_after_ms", 0,
		    GUEST_THAW_AFTER_MS_MIN, GUEST_THAW_AFTER_MS_MAX,
		    &r->thaw_after_ms, err, errlen) == -1)
			return -1;
		return 0;
	case OP_PING:
	case OP_ACTIVITY:
	case OP_SHUTDOWN:
	case OP_HELLO:
		return 0;
	case OP_CLOCK_SET:
	case OP_THAW:
		rc = glink_json_int(r->root, "realtime_ns", r->op ==
		    OP_CLOCK_SET, 0, INT64_MAX, &r->realtime_ns, err, errlen);
		if (rc == -1 || (rc == 0 && r->op == OP_CLOCK_SET))
			return -1;
		r->has_time = rc == 1;
		return 0;
	case OP_EXEC:
		if (glink_json_str(r->root, "job_id", 1, GUEST_JOB_ID_MAX,
		    &r->job_id, err, errlen) != 1 ||
		    glink_json_str(r->root, "command", 1, GLINK_MAX_PAYLOAD,
		    &r->command, err, errlen) != 1 ||
		    glink_json_str(r->root, "cwd", 0, 4096, &r->cwd, err,
		    errlen) == -1 ||
		    glink_json_int(r->root, "timeout_ms", 0, 0,
		    INT64_MAX / 1000000, &r->timeout_ms, err, errlen) == -1 ||
		    glink_json_str(r->root, "broker_secret", 0,
		    BROKER_SECRET_HEX, &r->broker_secret, err, errlen) == -1 ||
		    decode_env(r, err, errlen) == -1)
			return -1;
		if (r->command[0] == '\0') {
			snprintf(err, errlen, "command is empty");
			return -1;
		}
		if (r->broker_secret != NULL &&
		    (strlen(r->broker_secret) != BROKER_SECRET_HEX ||
		    strspn(r->broker_secret, "0123456789abcdef") !=
		    BROKER_SECRET_HEX)) {
			snprintf(err, errlen, "broker_secret must be %d "
			    "lowercase hex digits", BROKER_SECRET_HEX);
			return -1;
		}
		break;
	case OP_JOB_STATUS:
		if (glink_json_str(r->root, "job_id", 0, GUEST_JOB_ID_MAX,
		    &r->job_id, err, errlen) == -1)
			return -1;
		break;
	case OP_JOB_OUTPUT:
		r->max_bytes = GUEST_OUTPUT_READ_MAX;
		if (glink_json_int(r->root, "stdout_cursor", 0, 0, INT64_MAX,
		    &r->cursor[0], err, errlen) == -1 ||
		    glink_json_int(r->root, "stderr_cursor", 0, 0, INT64_MAX,
		    &r->cursor[1], err, errlen) == -1 ||
		    glink_json_int(r->root, "max_bytes", 0, 1,
		    GUEST_OUTPUT_READ_MAX, &r->max_bytes, err, errlen) == -1)
			return -1;
		/* FALLTHROUGH */
	case OP_JOB_CANCEL:
		if (glink_json_str(r->root, "job_id", 1, GUEST_JOB_ID_MAX,
		    &r->job_id, err, errlen) != 1)
			return -1;
		break;
	case OP_IDENTITY:
		return decode_identity(r, err, errlen);
	case OP_FILE_READ:
	case OP_FILE_WRITE:
		if (glink_json_str(r->root, "path", 1, 4096, &r->path, err,
		    errlen) != 1)
			return -1;
		if (r->op == OP_FILE_READ)
			break;
		if (glink_json_int(r->root, "mode", 0, 0, 0777, &r->mode,
		    err, errlen) == -1 ||
		    glink_json_bool(r->root, "create_parents", 0,
		    &r->create_parents, err, errlen) == -1)
			return -1;
		if (!r->has_body) {
			snprintf(err, errlen, "file_write needs a body");
			return -1;
		}
		if (r->body_len > GUEST_MAX_FILE) {
			snprintf(err, errlen, "file of %zu bytes exceeds the "
			    "%u byte limit", r->body_len, GUEST_MAX_FILE);
			return -1;
		}
		break;
	}
	if (r->job_id != NULL && !valid_job_id(r->job_id)) {
		snprintf(err, errlen, "job_id must be 1-%d characters of "
		    "[A-Za-z0-9_-]", GUEST_JOB_ID_MAX);
		return -1;
	}
	return 0;
}

int
req_decode(const void *buf, size_t len, const void *body, size_t body_len,
    int has_body, struct req *r, char *err, size_t errlen)
{
	const char *op;
	int64_t id;
	size_t i;

	memset(r, 0, sizeof(*r));
	r->mode = -1;
	err[0] = '\0';
	r->body = body;
	r->body_len = body_len;
	r->has_body = has_body;
	if ((r->root = glink_json_parse(buf, len, err, errlen)) == NULL)
		return -1;
	/* Without a usable id or op there is nobody to answer. */
	if (glink_json_int(r->root, "id", 1, 1, UINT32_MAX, &id, err,
	    errlen) != 1 ||
	    glink_json_str(r->root, "op", 1, 32, &op, err, errlen) != 1)
		return -1;
	r->id = (uint32_t)id;
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(op, ops[i].name) == 0)
			r->op = ops[i].op;
	if (r->op == 0) {
		snprintf(err, errlen, "unknown op \"%s\"", op);
		return 1;
	}
	if (has_body && r->op != OP_EXEC && r->op != OP_FILE_WRITE) {
		snprintf(err, errlen, "%s takes no body", op);
		return 1;
	}
	if (decode_args(r, err, errlen) == -1)
		return 1;
	return 0;
}

void
req_free(struct req *r)
{
	explicit_bzero(r->entropy, sizeof(r->entropy));
	json_object_put(r->root);
	r->root = NULL;
}
