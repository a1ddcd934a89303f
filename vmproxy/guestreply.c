/*
 * vmproxy's translation of guest replies into tool results (guestreply.h).
 * Every field the guest sends is type-checked and bounded through glink's
 * getters (jsonx-parsed objects, utf8-checked strings); every count it
 * gives must match the bytes that came.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "guest.h"
#include "guestreply.h"
#include "utf8.h"

const char *const guest_op_names[] = {
	"exec", "job_status", "jobs", "job_output", "job_cancel",
	"file_read", "file_write", "freeze", "thaw", "activity", "ping",
	"shutdown", "clock_set", "identity", NULL
};

void
guest_call_init(struct guest_call *c, enum guest_op op)
{
	memset(c, 0, sizeof(*c));
	c->op = op;
	c->path = "";
	c->max_bytes = GUEST_MAX_FILE;
}

const char *
guestreply_public_code(const char *guest_code)
{
	static const struct { const char *g, *p; } map[] = {
		{ "invalid_argument", "invalid_argument" },
		{ "not_found", "not_found" },
		{ "already_exists", "conflict" },
		{ "limit_exceeded", "quota_exceeded" },
		{ "too_large", "invalid_argument" },
		{ "forbidden_path", "invalid_argument" },
		{ "io_error", "invalid_argument" },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i].g, guest_code) == 0)
			return map[i].p;
	return "internal";
}

/* A job id as tools.json writes it: [A-Za-z0-9][A-Za-z0-9_-]{0,63}. */
static int
job_id_ok(const char *id)
{
	size_t i;

	for (i = 0; id[i] != '\0'; i++)
		if (!((id[i] >= 'A' && id[i] <= 'Z') ||
		    (id[i] >= 'a' && id[i] <= 'z') ||
		    (id[i] >= '0' && id[i] <= '9') ||
		    (i > 0 && (id[i] == '_' || id[i] == '-'))))
			return 0;
	return i > 0 && i <= GUEST_JOB_ID_MAX;
}

/*
 * The guest's job status, checked field by field and normalised to what
 * vmmd builds tool results from; it must be about the job asked for when
 * want is not NULL.  NULL with err when the guest lied.
 */
static struct json_object *
job_status_from_guest(struct json_object *r, const char *want, char *err,
    size_t errlen)
{
	static const char *const states[] = { "running", "completed",
	    "failed", "cancelled", "timed_out", NULL };
	struct json_object *o;
	const char *job_id, *state, *error = NULL;
	int64_t exit_code = -1, sig = -1, out_b, err_b, run_ms = 0;
	int truncated, timed_out, streams_open = 0, broker = 0, i;

	if (glink_json_str(r, "job_id", 1, GUEST_JOB_ID_MAX, &job_id, err,
	    errlen) != 1 ||
	    glink_json_str(r, "state", 1, 16, &state, err, errlen) != 1 ||
	    glink_json_int(r, "exit_code", 0, 0, 255, &exit_code, err,
	    errlen) < 0 ||
	    glink_json_int(r, "signal", 0, 1, 64, &sig, err, errlen) < 0 ||
	    glink_json_str(r, "error", 0, 1024, &error, err, errlen) < 0 ||
	    glink_json_bool(r, "truncated", 1, &truncated, err, errlen) != 1 ||
	    glink_json_bool(r, "timed_out", 1, &timed_out, err, errlen) != 1 ||
	    glink_json_int(r, "stdout_bytes", 1, 0, GUEST_OUTPUT_MAX, &out_b,
	    err, errlen) != 1 ||
	    glink_json_int(r, "stderr_bytes", 1, 0, GUEST_OUTPUT_MAX, &err_b,
	    err, errlen) != 1 ||
	    glink_json_bool(r, "streams_open", 0, &streams_open, err,
	    errlen) < 0 ||
	    glink_json_int(r, "run_ms", 0, 0, INT64_MAX, &run_ms, err,
	    errlen) < 0 ||
	    glink_json_bool(r, "broker_pipe", 0, &broker, err, errlen) < 0)
		return NULL;
	if (!job_id_ok(job_id)) {
		snprintf(err, errlen, "a job id that is no job id");
		return NULL;
	}
	if (want != NULL && strcmp(want, job_id) != 0) {
		snprintf(err, errlen, "asked about job %s, answered about %s",
		    want, job_id);
		return NULL;
	}
	for (i = 0; states[i] != NULL; i++)
		if (strcmp(states[i], state) == 0)
			break;
	if (states[i] == NULL) {
		snprintf(err, errlen, "job %s: unknown state", job_id);
		return NULL;
	}
	if (out_b + err_b > GUEST_OUTPUT_MAX) {
		snprintf(err, errlen, "job %s: more output than is retained",
		    job_id);
		return NULL;
	}
	/* A command killed by a signal reads as the shell would say it. */
	if (strcmp(state, "completed") == 0 && exit_code < 0 && sig > 0)
		exit_code = 128 + sig;
	else if (strcmp(state, "completed") != 0)
		exit_code = -1;
	/*
	 * The guest says "completed" whenever the shell exited; the tools
	 * say "completed" only for exit code 0, and "failed" for the rest.
	 */
	if (strcmp(state, "completed") == 0 && exit_code != 0)
		state = "failed";
	o = json_object_new_object();
	json_object_object_add(o, "job_id", json_object_new_string(job_id));
	json_object_object_add(o, "state", json_object_new_string(state));
	json_object_object_add(o, "exit_code", exit_code >= 0 ?
	    json_object_new_int((int)exit_code) : NULL);
	json_object_object_add(o, "truncated",
	    json_object_new_boolean(truncated));
	json_object_object_add(o, "timed_out",
	    json_object_new_boolean(timed_out));
	json_object_object_add(o, "stdout_bytes", json_object_new_int64(out_b));
	json_object_object_add(o, "stderr_bytes", json_object_new_int64(err_b));
	json_object_object_add(o, "streams_open",
	    json_object_new_boolean(streams_open));
	json_object_object_add(o, "run_ms", json_object_new_int64(run_ms));
	/* The job's broker listener is up (exec with broker_secret). */
	if (broker)
		json_object_object_add(o, "broker_pipe",
		    json_object_new_boolean(1));
	if (error != NULL)
		json_object_object_add(o, "error",
		    json_object_new_string(error));
	return o;
}

/* One stream's page of output, decoded as vmmd's caller asked. */
static int
output_stream(struct json_object *res, const char *name, const uint8_t *buf,
    size_t len, int64_t cursor, int at_end, int base64, char *err,
    size_t errlen)
{
	struct json_object *next;
	char key[32];

	json_object_object_get_ex(res, "next_cursor", &next);
	if (base64) {
		size_t outlen;
		char *enc = b64_encode(buf, len, &outlen);

		if (enc == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		snprintf(key, sizeof(key), "%s_base64", name);
		json_object_object_add(res, key,
		    json_object_new_string_len(enc, (int)outlen));
		free(enc);
		json_object_object_add(next, name,
		    json_object_new_int64(cursor + (int64_t)len));
	} else {
		struct utf8_window w;
		struct json_object *errs;

		if (utf8_window_decode(buf, len, at_end, &w) == -1) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		json_object_object_add(res, name,
		    json_object_new_string_len(w.text, (int)w.textlen));
		json_object_object_add(next, name,
		    json_object_new_int64(cursor + (int64_t)w.consumed));
		json_object_object_get_ex(res, "decoding_errors", &errs);
		json_object_object_add(errs, name,
		    json_object_new_boolean(w.decoding_errors));
		utf8_window_free(&w);
	}
	return 0;
}

static struct json_object *
job_output_from_guest(const struct guest_call *c, struct json_object *r,
    const uint8_t *body, size_t body_len, char *err, size_t errlen)
{
	struct json_object *st, *res, *v;
	int64_t out_len, err_len, out_next, err_next;
	int64_t out_cur = c->cursor_stdout, err_cur = c->cursor_stderr;
	int64_t out_total, err_total;
	const char *state;
	int finished, truncated;

	if ((st = job_status_from_guest(r, c->job_id, err, errlen)) == NULL)
		return NULL;
	if (glink_json_int(r, "stdout_len", 1, 0, GUEST_OUTPUT_READ_MAX,
	    &out_len, err, errlen) != 1 ||
	    glink_json_int(r, "stderr_len", 1, 0, GUEST_OUTPUT_READ_MAX,
	    &err_len, err, errlen) != 1 ||
	    glink_json_int(r, "stdout_next", 1, 0, GUEST_CURSOR_MAX,
	    &out_next, err, errlen) != 1 ||
	    glink_json_int(r, "stderr_next", 1, 0, GUEST_CURSOR_MAX,
	    &err_next, err, errlen) != 1)
		goto bad;
	out_total = json_object_get_int64(json_object_object_get(st,
	    "stdout_bytes"));
	err_total = json_object_get_int64(json_object_object_get(st,
	    "stderr_bytes"));
	/*
	 * The guest must give exactly what it says, from where we asked.  A
	 * cursor past the end of a stream (the caller may give one) gets no
	 * bytes and stays where it was.
	 */
	if ((size_t)(out_len + err_len) != body_len ||
	    out_next != out_cur + out_len || err_next != err_cur + err_len ||
	    (out_len > 0 && out_next > out_total) ||
	    (err_len > 0 && err_next > err_total)) {
		snprintf(err, errlen, "job_output reply does not add up");
		goto bad;
	}
	state = json_object_get_string(json_object_object_get(st, "state"));
	truncated = json_object_get_boolean(json_object_object_get(st,
	    "truncated"));
	/* A stream can grow no more once the job ended and its pipes closed,
	 * or once retention is full. */
	finished = (strcmp(state, "running") != 0 &&
	    !json_object_get_boolean(json_object_object_get(st,
	    "streams_open"))) || truncated;

	res = json_object_new_object();
	json_object_object_add(res, "job_id",
	    json_object_get(json_object_object_get(st, "job_id")));
	json_object_object_add(res, "encoding",
	    json_object_new_string(c->base64 ? "base64" : "utf-8"));
	json_object_object_add(res, "next_cursor", json_object_new_object());
	if (!c->base64)
		json_object_object_add(res, "decoding_errors",
		    json_object_new_object());
	if (output_stream(res, "stdout", body, (size_t)out_len, out_cur,
	    finished && out_next == out_total, c->base64, err, errlen) == -1 ||
	    output_stream(res, "stderr", body + out_len, (size_t)err_len,
	    err_cur, finished && err_next == err_total, c->base64, err,
	    errlen) == -1) {
		json_object_put(res);
		goto bad;
	}
	json_object_object_add(res, "state", json_object_new_string(state));
	v = json_object_object_get(st, "exit_code");
	json_object_object_add(res, "exit_code", json_object_get(v));
	json_object_object_add(res, "truncated",
	    json_object_new_boolean(truncated));
	json_object_object_add(res, "timed_out", json_object_get(
	    json_object_object_get(st, "timed_out")));
	json_object_put(st);
	return res;
 bad:
	json_object_put(st);
	return NULL;
}

static struct json_object *
file_read_from_guest(const struct guest_call *c, struct json_object *r,
    const uint8_t *body, size_t body_len, char *err, size_t errlen)
{
	struct json_object *res;
	int64_t size, offset = c->offset;
	size_t n, enclen;
	char *enc;

	if (glink_json_int(r, "size", 1, 0, GUEST_MAX_FILE, &size, err,
	    errlen) != 1)
		return NULL;
	if ((size_t)size != body_len) {
		snprintf(err, errlen, "file_read: size %" PRId64 " but %zu "
		    "bytes came", size, body_len);
		return NULL;
	}
	n = offset >= size ? 0 : (size_t)(size - offset);
	if (n > (size_t)c->max_bytes)
		n = (size_t)c->max_bytes;
	if ((enc = b64_encode(body + (offset < size ? offset : size), n,
	    &enclen)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	res = json_object_new_object();
	json_object_object_add(res, "path", json_object_new_string(c->path));
	json_object_object_add(res, "offset", json_object_new_int64(offset));
	json_object_object_add(res, "bytes", json_object_new_int64((int64_t)n));
	json_object_object_add(res, "size", json_object_new_int64(size));
	json_object_object_add(res, "eof", json_object_new_boolean(
	    offset + (int64_t)n >= size));
	json_object_object_add(res, "data_base64",
	    json_object_new_string_len(enc, (int)enclen));
	free(enc);
	return res;
}

static struct json_object *
jobs_from_guest(struct json_object *r, char *err, size_t errlen)
{
	struct json_object *arr, *list, *res;

	if (glink_json_array(r, "jobs", 1, GUEST_MAX_JOBS, &arr, err,
	    errlen) != 1)
		return NULL;
	list = json_object_new_array();
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *st = json_object_array_get_idx(arr, i);

		if (!json_object_is_type(st, json_type_object)) {
			snprintf(err, errlen, "jobs[%zu] is not an object", i);
			json_object_put(list);
			return NULL;
		}
		if ((st = job_status_from_guest(st, NULL, err, errlen)) == NULL) {
			json_object_put(list);
			return NULL;
		}
		json_object_array_add(list, st);
	}
	res = json_object_new_object();
	json_object_object_add(res, "jobs", list);
	return res;
}

static struct json_object *
file_write_from_guest(const struct guest_call *c, struct json_object *r,
    char *err, size_t errlen)
{
	struct json_object *res;
	int64_t size;

	if (glink_json_int(r, "size", 1, 0, GUEST_MAX_FILE, &size, err,
	    errlen) != 1)
		return NULL;
	res = json_object_new_object();
	json_object_object_add(res, "path", json_object_new_string(c->path));
	json_object_object_add(res, "bytes", json_object_new_int64(size));
	return res;
}

static struct json_object *
activity_from_guest(struct json_object *r, char *err, size_t errlen)
{
	struct json_object *res;
	int active;
	int64_t running, streams;

	if (glink_json_bool(r, "active", 1, &active, err, errlen) != 1 ||
	    glink_json_int(r, "jobs_running", 1, 0, GUEST_MAX_JOBS, &running,
	    err, errlen) != 1 ||
	    glink_json_int(r, "streams", 1, 0, 65535, &streams, err,
	    errlen) != 1)
		return NULL;
	res = json_object_new_object();
	json_object_object_add(res, "active", json_object_new_boolean(active));
	json_object_object_add(res, "jobs_running",
	    json_object_new_int64(running));
	return res;
}

/* freeze: how many file systems the guest froze, when it was asked to. */
static struct json_object *
freeze_from_guest(struct json_object *r, char *err, size_t errlen)
{
	struct json_object *res;
	int64_t n;
	int rc;

	if ((rc = glink_json_int(r, "filesystems", 0, 0, 64, &n, err,
	    errlen)) == -1)
		return NULL;
	res = json_object_new_object();
	if (rc == 1)
		json_object_object_add(res, "filesystems",
		    json_object_new_int64(n));
	return res;
}

/* The guest took the identity it was given: its boot id, and only it. */
static struct json_object *
identity_from_guest(const struct guest_call *c, struct json_object *r,
    char *err, size_t errlen)
{
	struct json_object *res;
	const char *boot_id;

	if (glink_json_str(r, "boot_id", 1, GUEST_UUID_LEN, &boot_id, err,
	    errlen) != 1)
		return NULL;
	if (!glink_valid_uuid(boot_id) || c->boot_id == NULL ||
	    strcmp(boot_id, c->boot_id) != 0) {
		snprintf(err, errlen, "identity: the guest answered with "
		    "another boot id than it was given");
		return NULL;
	}
	res = json_object_new_object();
	json_object_object_add(res, "boot_id", json_object_new_string(boot_id));
	return res;
}

enum guestreply_kind
guestreply_translate(const struct guest_call *c, struct json_object *r,
    const struct glink_reply *rep, const uint8_t *body, size_t body_len,
    struct guestreply *out)
{
	static const uint8_t none[1];
	struct json_object *res = NULL;
	char *why = out->why;
	size_t whylen = sizeof(out->why);

	memset(out, 0, sizeof(*out));
	/* A frame without a body may come as NULL: no arithmetic on that. */
	if (body == NULL)
		body = none;
	if (!rep->ok) {
		out->code = guestreply_public_code(rep->code);
		out->message = rep->message != NULL ? rep->message : rep->code;
		return out->kind = GUESTREPLY_ERROR;
	}
	if (body_len > 0 && c->op != GOP_JOB_OUTPUT &&
	    c->op != GOP_FILE_READ) {
		snprintf(why, whylen, "%s reply carries a body",
		    guest_op_names[c->op]);
		return out->kind = GUESTREPLY_BROKEN;
	}
	switch (c->op) {
	case GOP_EXEC:
	case GOP_JOB_STATUS:
	case GOP_JOB_CANCEL:
		res = job_status_from_guest(r, c->job_id, why, whylen);
		break;
	case GOP_JOBS:
		res = jobs_from_guest(r, why, whylen);
		break;
	case GOP_JOB_OUTPUT:
		res = job_output_from_guest(c, r, body, body_len, why, whylen);
		break;
	case GOP_FILE_READ:
		res = file_read_from_guest(c, r, body, body_len, why, whylen);
		break;
	case GOP_FILE_WRITE:
		res = file_write_from_guest(c, r, why, whylen);
		break;
	case GOP_ACTIVITY:
		res = activity_from_guest(r, why, whylen);
		break;
	case GOP_IDENTITY:
		res = identity_from_guest(c, r, why, whylen);
		break;
	case GOP_FREEZE:
		res = freeze_from_guest(r, why, whylen);
		break;
	default:
		/* ping, thaw, clock_set, shutdown: nothing to pass. */
		res = json_object_new_object();
		break;
	}
	if (res == NULL) {
		if (why[0] == '\0')
			snprintf(why, whylen, "%s reply is malformed",
			    guest_op_names[c->op]);
		return out->kind = GUESTREPLY_BROKEN;
	}
	out->result = res;
	return out->kind = GUESTREPLY_RESULT;
}

int
guestreply_hello(struct json_object *r, const struct glink_reply *rep,
    struct json_object **info, char *why, size_t whylen)
{
	const char *boot_id = "";
	int64_t version = 0, jobs = 0;

	*info = NULL;
	if (!rep->ok) {
		snprintf(why, whylen, "refused");
		return -1;
	}
	if (glink_json_int(r, "version", 1, 1, 1000, &version, why,
	    whylen) != 1 || glink_json_str(r, "boot_id", 1, 64, &boot_id,
	    why, whylen) != 1 || glink_json_int(r, "jobs", 0, 0,
	    GUEST_MAX_JOBS, &jobs, why, whylen) < 0)
		return -1;
	if (version != GLINK_VERSION) {
		snprintf(why, whylen, "the guest speaks link version %" PRId64
		    ", not %d", version, GLINK_VERSION);
		return -1;
	}
	*info = json_object_new_object();
	json_object_object_add(*info, "boot_id",
	    json_object_new_string(boot_id));
	json_object_object_add(*info, "jobs", json_object_new_int64(jobs));
	return 0;
}
