/*
 * vmproxy: one per VM, spawned by vmmd as that VM's jail uid with no
 * capabilities and a seccomp allowlist.  It owns the guest link (the
 * virtio-serial socket QEMU serves) and is the only process that parses
 * bytes a guest sends.  To vmmd it speaks IPC on an inherited socketpair:
 * tool-shaped calls in, checked tool-shaped results out, and one end of a
 * socketpair per guest stream.
 *
 * A guest that breaks the link protocol ends this process (vmmd then
 * fails that VM); a link that merely drops (hibernation, restore) is
 * reconnected.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "b64.h"
#include "console.h"
#include "glink.h"
#include "guest.h"
#include "ipc.h"
#include "jsonx.h"
#include "log.h"
#include "privdrop.h"
#include "utf8.h"
#include "vmproxy_broker.h"

#if defined(__SANITIZE_ADDRESS__)
#define VMPROXY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VMPROXY_SANITIZED 1
#endif
#endif

/*
 * Nothing beyond the common base, except under ASan: LeakSanitizer's
 * exit-time tracer lists threads with getdents, and a tracer the filter
 * kills leaves the process waiting for it forever.
 */
static const char *const vmproxy_syscalls[] = {
	"ftruncate",		/* console.log keeps its newest bytes */
#ifdef VMPROXY_SANITIZED
	"getdents",
#endif
	NULL
};

#define LINK_RETRY_MS		200
#define HELLO_WAIT_MS		3000
#define LINK_READ_MAX		(64 * 1024)

struct pcall {
	TAILQ_ENTRY(pcall)	 entry;
	uint32_t		 gid;		/* guest request id */
	uint32_t		 ipc_id;	/* vmmd's request id */
	char			 op[16];
	struct json_object	*args;		/* what vmmd asked */
};

struct pstream {
	TAILQ_ENTRY(pstream)	 entry;
	uint32_t		 ch;
	uint32_t		 ipc_id;	/* while OPEN is pending */
	int			 fd;		/* our end; -1 when closed */
	int			 peer_fd;	/* vmmd's end until OPEN_OK */
	struct event		*rev, *wev;
	uint8_t			*wbuf;		/* guest bytes for the socket */
	size_t			 wlen, wcap;
	int			 open;		/* OPEN_OK seen */
	int			 guest_eof;	/* guest half-closed */
	int			 sock_eof;	/* socket half-closed */
	int			 stalled;	/* reading paused: no credit */
};

static struct {
	struct event_base	*base;
	struct ipc_conn		*vmmd;
	const char		*link_path;
	const char		*vm_id;
	int			 link_fd;
	struct event		*link_rev, *link_wev, *retry;
	struct event		*hello_wait;	/* no answer: reconnect */
	struct glink		*g;
	int			 hello;		/* our hello was answered */
	uint32_t		 hello_gid;	/* its request id */
	uint32_t		 next_gid;
	TAILQ_HEAD(, pcall)	 calls;
	TAILQ_HEAD(, pstream)	 streams;
} px;

static void link_connect(void);
static void link_drop(const char *why, int fatal_guest);
static void link_want_write(void);
static void stream_free(struct pstream *, int send_close);
static void streams_report(void);

/* ---- replies to vmmd ---------------------------------------------------- */

static void
reply_result(uint32_t id, struct json_object *result)
{
	struct json_object *body = json_object_new_object();

	json_object_object_add(body, "result", result);
	ipc_reply(px.vmmd, IPC_PROXY_RESULT, id, body, -1);
	json_object_put(body);
}

static void
send_event(const char *event, const char *key, struct json_object *val)
{
	struct json_object *body = json_object_new_object();

	json_object_object_add(body, "event", json_object_new_string(event));
	if (key != NULL)
		json_object_object_add(body, key, val);
	ipc_send(px.vmmd, IPC_PROXY_EVENT, 0, body, -1);
	json_object_put(body);
}

/* Maps the guest's error codes onto the public ones. */
static const char *
public_code(const char *guest_code)
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

/* ---- translating guest replies ----------------------------------------- */

/*
 * The guest's job status, checked field by field and normalised to what
 * vmmd builds tool results from.  NULL with err when the guest lied.
 */
static struct json_object *
job_status_from_guest(struct json_object *r, char *err, size_t errlen)
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
job_output_from_guest(struct pcall *c, struct json_object *r,
    const uint8_t *body, size_t body_len, char *err, size_t errlen)
{
	struct json_object *st, *res, *v;
	int64_t out_len, err_len, out_next, err_next, out_cur = 0, err_cur = 0;
	int64_t out_total, err_total;
	const char *encoding = "utf-8", *state;
	int base64, finished, truncated;
	struct jsonx_err jerr;

	if ((st = job_status_from_guest(r, err, errlen)) == NULL)
		return NULL;
	if (glink_json_int(r, "stdout_len", 1, 0, GUEST_OUTPUT_READ_MAX,
	    &out_len, err, errlen) != 1 ||
	    glink_json_int(r, "stderr_len", 1, 0, GUEST_OUTPUT_READ_MAX,
	    &err_len, err, errlen) != 1 ||
	    glink_json_int(r, "stdout_next", 1, 0, GUEST_OUTPUT_MAX,
	    &out_next, err, errlen) != 1 ||
	    glink_json_int(r, "stderr_next", 1, 0, GUEST_OUTPUT_MAX,
	    &err_next, err, errlen) != 1)
		goto bad;
	(void)jsonx_get_int64(c->args, "cursor.stdout", 0, 0, INT64_MAX,
	    &out_cur, &jerr);
	(void)jsonx_get_int64(c->args, "cursor.stderr", 0, 0, INT64_MAX,
	    &err_cur, &jerr);
	(void)jsonx_get_string(c->args, "encoding", 0, &encoding, &jerr);
	out_total = json_object_get_int64(json_object_object_get(st,
	    "stdout_bytes"));
	err_total = json_object_get_int64(json_object_object_get(st,
	    "stderr_bytes"));
	/* The guest must give exactly what it says, from where we asked. */
	if ((size_t)(out_len + err_len) != body_len ||
	    (out_cur <= out_total && out_next != out_cur + out_len) ||
	    (err_cur <= err_total && err_next != err_cur + err_len) ||
	    out_next > out_total || err_next > err_total) {
		snprintf(err, errlen, "job_output reply does not add up");
		goto bad;
	}
	base64 = strcmp(encoding, "base64") == 0;
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
	    json_object_new_string(base64 ? "base64" : "utf-8"));
	json_object_object_add(res, "next_cursor", json_object_new_object());
	if (!base64)
		json_object_object_add(res, "decoding_errors",
		    json_object_new_object());
	if (output_stream(res, "stdout", body, (size_t)out_len, out_cur,
	    finished && out_next == out_total, base64, err, errlen) == -1 ||
	    output_stream(res, "stderr", body + out_len, (size_t)err_len,
	    err_cur, finished && err_next == err_total, base64, err,
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
file_read_from_guest(struct pcall *c, struct json_object *r,
    const uint8_t *body, size_t body_len, char *err, size_t errlen)
{
	struct json_object *res;
	int64_t size, offset = 0, max = GUEST_MAX_FILE;
	const char *path = "";
	struct jsonx_err jerr;
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
	(void)jsonx_get_string(c->args, "path", 0, &path, &jerr);
	(void)jsonx_get_int64(c->args, "offset", 0, 0, INT64_MAX, &offset,
	    &jerr);
	(void)jsonx_get_int64(c->args, "max_bytes", 0, 1, GUEST_MAX_FILE, &max,
	    &jerr);
	n = offset >= size ? 0 : (size_t)(size - offset);
	if (n > (size_t)max)
		n = (size_t)max;
	if ((enc = b64_encode(body + (offset < size ? offset : size), n,
	    &enclen)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	res = json_object_new_object();
	json_object_object_add(res, "path", json_object_new_string(path));
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

/* A guest reply to call c: checked, shaped, and sent on to vmmd. */
static int
call_complete(struct pcall *c, struct json_object *r,
    const struct glink_reply *rep, const uint8_t *body, size_t body_len)
{
	struct json_object *res = NULL;
	char err[256] = "";

	if (!rep->ok) {
		ipc_reply_error(px.vmmd, c->ipc_id, public_code(rep->code),
		    "%s", rep->message != NULL ? rep->message : rep->code);
		return 0;
	}
	if (body_len > 0 && strcmp(c->op, "job_output") != 0 &&
	    strcmp(c->op, "file_read") != 0) {
		snprintf(err, sizeof(err), "%s reply carries a body", c->op);
		goto bad;
	}
	if (strcmp(c->op, "exec") == 0 || strcmp(c->op, "job_status") == 0 ||
	    strcmp(c->op, "job_cancel") == 0)
		res = job_status_from_guest(r, err, sizeof(err));
	else if (strcmp(c->op, "jobs") == 0) {
		struct json_object *arr, *list;

		if (glink_json_array(r, "jobs", 1, GUEST_MAX_JOBS, &arr, err,
		    sizeof(err)) != 1)
			goto bad;
		list = json_object_new_array();
		for (size_t i = 0; i < json_object_array_length(arr); i++) {
			struct json_object *st = json_object_array_get_idx(arr,
			    i);

			if (!json_object_is_type(st, json_type_object) ||
			    (st = job_status_from_guest(st, err,
			    sizeof(err))) == NULL) {
				json_object_put(list);
				goto bad;
			}
			json_object_array_add(list, st);
		}
		res = json_object_new_object();
		json_object_object_add(res, "jobs", list);
	} else if (strcmp(c->op, "job_output") == 0)
		res = job_output_from_guest(c, r, body, body_len, err,
		    sizeof(err));
	else if (strcmp(c->op, "file_read") == 0)
		res = file_read_from_guest(c, r, body, body_len, err,
		    sizeof(err));
	else if (strcmp(c->op, "file_write") == 0) {
		int64_t size;
		const char *path = "";
		struct jsonx_err jerr;

		if (glink_json_int(r, "size", 1, 0, GUEST_MAX_FILE, &size, err,
		    sizeof(err)) != 1)
			goto bad;
		(void)jsonx_get_string(c->args, "path", 0, &path, &jerr);
		res = json_object_new_object();
		json_object_object_add(res, "path",
		    json_object_new_string(path));
		json_object_object_add(res, "bytes",
		    json_object_new_int64(size));
	} else if (strcmp(c->op, "activity") == 0) {
		int active;
		int64_t running, streams;

		if (glink_json_bool(r, "active", 1, &active, err,
		    sizeof(err)) != 1 ||
		    glink_json_int(r, "jobs_running", 1, 0, GUEST_MAX_JOBS,
		    &running, err, sizeof(err)) != 1 ||
		    glink_json_int(r, "streams", 1, 0, 65535, &streams, err,
		    sizeof(err)) != 1)
			goto bad;
		res = json_object_new_object();
		json_object_object_add(res, "active",
		    json_object_new_boolean(active));
		json_object_object_add(res, "jobs_running",
		    json_object_new_int64(running));
	} else
		/* ping, freeze, thaw, clock_set, shutdown: nothing to pass. */
		res = json_object_new_object();
	if (res == NULL)
		goto bad;
	reply_result(c->ipc_id, res);
	return 0;
 bad:
	log_warnx("vm %s: guest: %s", px.vm_id, err);
	ipc_reply_error(px.vmmd, c->ipc_id, "internal",
	    "the guest sent a reply that breaks the protocol");
	return -1;
}

/* ---- link -------------------------------------------------------------- */

static void
calls_fail_all(const char *why)
{
	struct pcall *c;

	while ((c = TAILQ_FIRST(&px.calls)) != NULL) {
		TAILQ_REMOVE(&px.calls, c, entry);
		ipc_reply_error(px.vmmd, c->ipc_id, "unavailable", "%s", why);
		json_object_put(c->args);
		free(c);
	}
}

/* The answer to our hello: the session is ours from here on. */
static int
on_hello_reply(struct json_object *r, const struct glink_reply *rep)
{
	const char *boot_id = "";
	int64_t version = 0, jobs = 0;
	struct json_object *info;
	char err[256];

	if (!rep->ok || glink_json_int(r, "version", 1, 1, 1000, &version, err,
	    sizeof(err)) != 1 || glink_json_str(r, "boot_id", 1, 64, &boot_id,
	    err, sizeof(err)) != 1 || glink_json_int(r, "jobs", 0, 0,
	    GUEST_MAX_JOBS, &jobs, err, sizeof(err)) < 0) {
		log_warnx("vm %s: guest hello: %s", px.vm_id, rep->ok ? err :
		    "refused");
		json_object_put(r);
		return -1;
	}
	if (version != GLINK_VERSION) {
		log_warnx("vm %s: guest speaks link version %" PRId64 ", not %d",
		    px.vm_id, version, GLINK_VERSION);
		json_object_put(r);
		return -1;
	}
	px.hello = 1;
	glink_set_lenient(px.g, 0);
	info = json_object_new_object();
	json_object_object_add(info, "boot_id", json_object_new_string(boot_id));
	json_object_object_add(info, "jobs", json_object_new_int64(jobs));
	send_event("hello", "guest", info);
	json_object_put(r);
	return 0;
}

static int
on_ctrl(const struct glink_frame *f)
{
	struct glink_reply rep;
	struct json_object *r;
	struct pcall *c;
	char err[256];
	int rc = 0;

	if ((r = glink_json_parse(f->data, f->len, err, sizeof(err))) == NULL ||
	    glink_reply_decode(r, &rep, err, sizeof(err)) == -1) {
		log_warnx("vm %s: guest control message: %s", px.vm_id, err);
		json_object_put(r);
		return -1;
	}
	if (rep.event != NULL) {
		/* The guest's own hello may predate this connection; only the
		 * answer to ours says the session is new.  Other events are for
		 * newer hosts. */
		json_object_put(r);
		return 0;
	}
	if (rep.id == px.hello_gid && !px.hello)
		return on_hello_reply(r, &rep);
	if (!px.hello) {
		/* A reply from the guest's previous session, in flight when a
		 * checkpoint was taken: it answers no one now. */
		json_object_put(r);
		return 0;
	}
	TAILQ_FOREACH(c, &px.calls, entry)
		if (c->gid == rep.id)
			break;
	if (c == NULL) {
		log_warnx("vm %s: guest answered request %u that was never "
		    "made", px.vm_id, rep.id);
		json_object_put(r);
		return -1;
	}
	TAILQ_REMOVE(&px.calls, c, entry);
	rc = call_complete(c, r, &rep, f->body, f->body_len);
	json_object_put(c->args);
	free(c);
	json_object_put(r);
	return rc;
}

static struct pstream *
stream_find(uint32_t ch)
{
	struct pstream *s;

	TAILQ_FOREACH(s, &px.streams, entry)
		if (s->ch == ch)
			return s;
	return NULL;
}

static void stream_readcb(int, short, void *);
static void stream_writecb(int, short, void *);

/* Closes the stream when both directions are done and drained. */
static void
stream_maybe_done(struct pstream *s)
{
	if (s->guest_eof && s->sock_eof && s->wlen == 0)
		stream_free(s, 1);
}

static void
stream_write(struct pstream *s)
{
	ssize_t n;

	while (s->wlen > 0) {
		n = send(s->fd, s->wbuf, s->wlen, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EAGAIN) {
				event_add(s->wev, NULL);
				return;
			}
			/* The other side is gone: abort the channel. */
			stream_free(s, 1);
			return;
		}
		memmove(s->wbuf, s->wbuf + n, s->wlen - (size_t)n);
		s->wlen -= (size_t)n;
		/* Grant the guest what the socket took. */
		if (s->ch != 0) {
			glink_consumed(px.g, s->ch, (size_t)n);
			link_want_write();
		}
	}
	if (s->guest_eof) {
		shutdown(s->fd, SHUT_WR);
		if (s->ch == 0) {
			/* The guest closed the channel; its bytes are out. */
			stream_free(s, 0);
			return;
		}
		stream_maybe_done(s);
	}
}

static int
on_stream_frame(const struct glink_frame *f)
{
	struct pstream *s = stream_find(f->channel);

	if (s == NULL)
		return 0;	/* frames crossing our CLOSE */
	switch (f->type) {
	case GLINK_OPEN_OK: {
		struct json_object *b = json_object_new_object();

		s->open = 1;
		json_object_object_add(b, "channel",
		    json_object_new_int64(s->ch));
		/* vmmd's end goes with the reply (and is closed by it). */
		ipc_reply(px.vmmd, IPC_PROXY_STREAM_OPEN_RESULT, s->ipc_id, b,
		    s->peer_fd);
		json_object_put(b);
		s->peer_fd = -1;
		event_add(s->rev, NULL);
		streams_report();
		break;
	}
	case GLINK_OPEN_FAIL: {
		char why[GLINK_OPEN_FAIL_MAX + 1];
		size_t n = f->len < GLINK_OPEN_FAIL_MAX ? f->len :
		    GLINK_OPEN_FAIL_MAX;

		memcpy(why, f->data, n);
		why[n] = '\0';
		if (memchr(why, '\0', n) != NULL ||
		    !utf8_valid((const uint8_t *)why, n))
			snprintf(why, sizeof(why), "refused");
		ipc_reply_error(px.vmmd, s->ipc_id, "conflict",
		    "nothing in the guest accepted the stream (%s)", why);
		/* The channel is already released on both sides. */
		s->ch = 0;
		stream_free(s, 0);
		break;
	}
	case GLINK_DATA:
		if (s->wlen + f->len > s->wcap) {
			size_t cap = s->wcap ? s->wcap : 64 * 1024;
			uint8_t *nb;

			while (cap < s->wlen + f->len)
				cap *= 2;
			if ((nb = realloc(s->wbuf, cap)) == NULL) {
				stream_free(s, 1);
				return 0;
			}
			s->wbuf = nb;
			s->wcap = cap;
		}
		memcpy(s->wbuf + s->wlen, f->data, f->len);
		s->wlen += f->len;
		stream_write(s);
		break;
	case GLINK_EOF:
		s->guest_eof = 1;
		if (s->wlen == 0)
			stream_write(s);
		break;
	case GLINK_CLOSE:
		/*
		 * After its EOF the guest closes the channel once both ways
		 * are done, while what it sent last may still wait for the
		 * socket: that goes out first.  A CLOSE before EOF is an
		 * abort.  The channel is released either way.
		 */
		if (s->guest_eof && s->wlen > 0) {
			s->ch = 0;
			event_del(s->rev);
			break;
		}
		stream_free(s, 0);
		break;
	}
	return 0;
}

static int
link_frame_cb(struct glink *g, const struct glink_frame *f, void *arg)
{
	if (f->type == GLINK_CTRL)
		return on_ctrl(f);
	/* Connections made in the guest: the job broker pipe. */
	if (f->channel & GLINK_GUEST_CHAN)
		return vpb_link_frame(f);
	return on_stream_frame(f);
}

/* Streams paused for want of credit start again once credit returns. */
static void
streams_resume(void)
{
	struct pstream *s;

	TAILQ_FOREACH(s, &px.streams, entry)
		if (s->stalled && glink_credit(px.g, s->ch) > 0) {
			s->stalled = 0;
			event_add(s->rev, NULL);
		}
}

static void
link_readcb(int fd, short ev, void *arg)
{
	static uint8_t buf[LINK_READ_MAX];
	ssize_t n;

	n = read(fd, buf, sizeof(buf));
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		link_drop(n == 0 ? "the guest link closed" : strerror(errno),
		    0);
		return;
	}
	if (glink_feed(px.g, buf, (size_t)n, link_frame_cb, NULL) == -1) {
		link_drop(glink_error(px.g) != NULL ? glink_error(px.g) :
		    "the guest broke the link protocol", 1);
		return;
	}
	streams_resume();
	vpb_resume();
	link_want_write();
}

static void
link_writecb(int fd, short ev, void *arg)
{
	if (glink_flush(px.g, fd) == -1) {
		link_drop(strerror(errno), 0);
		return;
	}
	link_want_write();
}

static void
link_want_write(void)
{
	if (px.link_fd != -1 && glink_out_pending(px.g) > 0)
		event_add(px.link_wev, NULL);
}

static void
retry_cb(int fd, short ev, void *arg)
{
	link_connect();
}

/*
 * Connected, but the guest has not answered our hello.  Seen after a
 * restore: the guest's idea of whether a host is on the port can lag
 * behind the new connection, and it then waits for a host that is already
 * there.  Closing and reconnecting makes QEMU tell the guest both edges,
 * and guestd opens a fresh session.  During a boot this merely repeats
 * until guestd is up.
 */
static void
hello_wait_cb(int fd, short ev, void *arg)
{
	if (px.link_fd == -1 || px.hello)
		return;
	log_debug("vm %s: no answer to hello in %d ms; reconnecting",
	    px.vm_id, HELLO_WAIT_MS);
	link_drop("no answer to hello", 0);
}

static void
link_schedule_retry(void)
{
	struct timeval tv = { 0, LINK_RETRY_MS * 1000 };

	evtimer_add(px.retry, &tv);
}

/*
 * The first thing on every connection: a hello request (guest.h).  After a
 * restore from a checkpoint the guest never saw the old host side go, so
 * only this tells it that the session is new.  Until its answer, frames
 * from the guest's old session are dropped rather than fatal.
 */
static void
link_hello(void)
{
	struct json_object *req = json_object_new_object();

	if (++px.next_gid == 0)
		px.next_gid = 1;
	px.hello_gid = px.next_gid;
	json_object_object_add(req, "id", json_object_new_int64(px.hello_gid));
	json_object_object_add(req, "op", json_object_new_string("hello"));
	glink_set_lenient(px.g, 1);
	if (glink_send_json(px.g, req, NULL, 0) == -1)
		fatalx("hello: %s", glink_error(px.g));
	json_object_put(req);
}

static void
link_connect(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", px.link_path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0)) == -1)
		fatal("socket");
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		close(fd);
		link_schedule_retry();
		return;
	}
	px.link_fd = fd;
	px.link_rev = event_new(px.base, fd, EV_READ | EV_PERSIST,
	    link_readcb, NULL);
	px.link_wev = event_new(px.base, fd, EV_WRITE, link_writecb, NULL);
	event_add(px.link_rev, NULL);
	log_debug("vm %s: guest link connected", px.vm_id);
	link_hello();
	{
		struct timeval tv = { HELLO_WAIT_MS / 1000,
		    (HELLO_WAIT_MS % 1000) * 1000 };

		evtimer_add(px.hello_wait, &tv);
	}
	link_want_write();
}

/*
 * The link is gone: every stream and pending call with it.  A guest that
 * broke the protocol ends this process; otherwise we reconnect.
 */
static void
link_drop(const char *why, int guest_fault)
{
	struct pstream *s;

	if (px.link_fd != -1) {
		event_free(px.link_rev);
		event_free(px.link_wev);
		close(px.link_fd);
		px.link_fd = -1;
	}
	glink_reset(px.g);
	vpb_link_reset();
	while ((s = TAILQ_FIRST(&px.streams)) != NULL) {
		if (!s->open)
			ipc_reply_error(px.vmmd, s->ipc_id, "unavailable",
			    "the guest link dropped");
		s->ch = 0;
		stream_free(s, 0);
	}
	calls_fail_all("the guest link dropped");
	if (guest_fault) {
		log_warnx("vm %s: guest broke the link protocol: %s; giving "
		    "up on this VM", px.vm_id, why);
		send_event("guest_error", "message",
		    json_object_new_string(why));
		/* Give the event a moment to reach vmmd, then go. */
		{
			struct timeval tv = { 0, 200000 };

			event_base_loopexit(px.base, &tv);
		}
		return;
	}
	if (px.hello)
		send_event("link_down", NULL, NULL);
	px.hello = 0;
	log_debug("vm %s: guest link dropped: %s", px.vm_id, why);
	link_schedule_retry();
}

/* ---- streams ----------------------------------------------------------- */

static void
streams_report(void)
{
	struct json_object *body;
	struct pstream *s;
	int n = 0;

	if (px.vmmd == NULL)
		return;

	TAILQ_FOREACH(s, &px.streams, entry)
		if (s->open)
			n++;
	body = json_object_new_object();
	json_object_object_add(body, "event",
	    json_object_new_string("streams"));
	json_object_object_add(body, "open", json_object_new_int(n));
	/* Attached broker pipes are activity too. */
	if ((n = vpb_attached()) > 0)
		json_object_object_add(body, "pipes", json_object_new_int(n));
	ipc_send(px.vmmd, IPC_PROXY_EVENT, 0, body, -1);
	json_object_put(body);
}

static void
stream_free(struct pstream *s, int send_close)
{
	int was_open = s->open;

	if (send_close && s->ch != 0 && glink_chan_exists(px.g, s->ch)) {
		glink_send_close(px.g, s->ch);
		link_want_write();
	}
	TAILQ_REMOVE(&px.streams, s, entry);
	if (s->rev != NULL)
		event_free(s->rev);
	if (s->wev != NULL)
		event_free(s->wev);
	if (s->fd != -1)
		close(s->fd);
	if (s->peer_fd != -1)
		close(s->peer_fd);
	free(s->wbuf);
	free(s);
	/* vmmd counts open streams as activity. */
	if (was_open && px.vmmd != NULL)
		streams_report();
}

static void
stream_readcb(int fd, short ev, void *arg)
{
	struct pstream *s = arg;
	uint8_t buf[GLINK_MAX_PAYLOAD];
	size_t credit = glink_credit(px.g, s->ch), want;
	ssize_t n;

	if (credit == 0) {
		s->stalled = 1;
		event_del(s->rev);
		return;
	}
	want = credit < sizeof(buf) ? credit : sizeof(buf);
	n = recv(fd, buf, want, 0);
	if (n == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		stream_free(s, 1);
		return;
	}
	if (n == 0) {
		s->sock_eof = 1;
		event_del(s->rev);
		glink_send_eof(px.g, s->ch);
		link_want_write();
		stream_maybe_done(s);
		return;
	}
	if (glink_send_data(px.g, s->ch, buf, (size_t)n) != n) {
		stream_free(s, 1);
		return;
	}
	link_want_write();
}

static void
stream_writecb(int fd, short ev, void *arg)
{
	stream_write(arg);
}

static void
stream_open(uint32_t ipc_id, struct json_object *args)
{
	struct pstream *s;
	struct jsonx_err jerr;
	int64_t port;
	uint32_t ch;
	int sp[2];

	if (jsonx_get_int64(args, "port", 1, 1, 65535, &port, &jerr) != 1) {
		ipc_reply_error(px.vmmd, ipc_id, "invalid_argument", "%s",
		    jerr.msg);
		return;
	}
	if (px.link_fd == -1 || !px.hello) {
		ipc_reply_error(px.vmmd, ipc_id, "unavailable",
		    "the guest link is not up");
		return;
	}
	if ((ch = glink_free_channel(px.g)) == 0) {
		ipc_reply_error(px.vmmd, ipc_id, "quota_exceeded",
		    "every link channel of this VM is in use");
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == -1) {
		ipc_reply_error(px.vmmd, ipc_id, "internal", "socketpair: %s",
		    strerror(errno));
		return;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL)
		fatal("calloc");
	s->ch = ch;
	s->ipc_id = ipc_id;
	s->fd = sp[0];
	s->peer_fd = sp[1];
	fcntl(s->fd, F_SETFL, O_NONBLOCK);
	s->rev = event_new(px.base, s->fd, EV_READ | EV_PERSIST,
	    stream_readcb, s);
	s->wev = event_new(px.base, s->fd, EV_WRITE, stream_writecb, s);
	TAILQ_INSERT_TAIL(&px.streams, s, entry);
	if (glink_send_open(px.g, ch, (uint16_t)port) == -1) {
		ipc_reply_error(px.vmmd, ipc_id, "internal", "%s",
		    glink_error(px.g));
		s->ch = 0;
		stream_free(s, 0);
		return;
	}
	link_want_write();
}

/* ---- calls from vmmd --------------------------------------------------- */

/* Builds the guest request for a call; body/body_len for stdin or data. */
static struct json_object *
guest_request(const char *op, struct json_object *args, uint8_t **body,
    size_t *body_len, char *err, size_t errlen)
{
	struct json_object *req = json_object_new_object(), *v;
	struct jsonx_err jerr;
	const char *s;
	int64_t n;

	*body = NULL;
	*body_len = 0;
	json_object_object_add(req, "op", json_object_new_string(
	    strcmp(op, "jobs") == 0 ? "job_status" : op));
	/* vmmd checked every argument against the tool schema already;
	 * these are the ones the guest takes, renamed where they differ. */
	json_object_object_foreach(args, key, val) {
		if (strcmp(key, "op") == 0 || strcmp(key, "stdin_base64") == 0 ||
		    strcmp(key, "data_base64") == 0 ||
		    strcmp(key, "cursor") == 0 || strcmp(key, "encoding") == 0 ||
		    strcmp(key, "offset") == 0 || strcmp(key, "mode") == 0)
			continue;
		if (strcmp(op, "file_read") == 0 &&
		    strcmp(key, "max_bytes") == 0)
			continue;
		json_object_object_add(req, key, json_object_get(val));
	}
	if (strcmp(op, "job_output") == 0) {
		if (jsonx_get_int64(args, "cursor.stdout", 0, 0, INT64_MAX, &n,
		    &jerr) == 1)
			json_object_object_add(req, "stdout_cursor",
			    json_object_new_int64(n));
		if (jsonx_get_int64(args, "cursor.stderr", 0, 0, INT64_MAX, &n,
		    &jerr) == 1)
			json_object_object_add(req, "stderr_cursor",
			    json_object_new_int64(n));
	}
	if (strcmp(op, "file_write") == 0 &&
	    jsonx_get_string(args, "mode", 0, &s, &jerr) == 1) {
		char *end;
		long mode = strtol(s, &end, 8);

		if (*s == '\0' || *end != '\0' || mode < 0 || mode > 0777) {
			snprintf(err, errlen, "mode '%s' is not an octal "
			    "permission like 0644", s);
			json_object_put(req);
			return NULL;
		}
		json_object_object_add(req, "mode",
		    json_object_new_int((int)mode));
	}
	if ((json_object_object_get_ex(args, "stdin_base64", &v) ||
	    json_object_object_get_ex(args, "data_base64", &v)) &&
	    json_object_is_type(v, json_type_string)) {
		if (b64_decode(json_object_get_string(v),
		    (size_t)json_object_get_string_len(v), body, body_len) ==
		    -1) {
			snprintf(err, errlen, "%s is not valid base64",
			    strcmp(op, "exec") == 0 ? "stdin_base64" :
			    "data_base64");
			json_object_put(req);
			return NULL;
		}
		if (*body_len > GLINK_MAX_BODY || (strcmp(op, "file_write") ==
		    0 && *body_len > GUEST_MAX_FILE)) {
			snprintf(err, errlen, "data is %zu bytes; at most %u "
			    "are allowed", *body_len, strcmp(op, "exec") == 0 ?
			    GLINK_MAX_BODY : GUEST_MAX_FILE);
			free(*body);
			*body = NULL;
			json_object_put(req);
			return NULL;
		}
	}
	return req;
}

static void
proxy_call(uint32_t ipc_id, struct json_object *args)
{
	static const char *const ops[] = { "exec", "job_status", "jobs",
	    "job_output", "job_cancel", "file_read", "file_write", "freeze",
	    "thaw", "activity", "ping", "shutdown", "clock_set", NULL };
	struct json_object *req;
	struct jsonx_err jerr;
	struct pcall *c;
	const char *op;
	uint8_t *body;
	size_t body_len;
	char err[256];
	int i;

	if (jsonx_get_string(args, "op", 1, &op, &jerr) != 1) {
		ipc_reply_error(px.vmmd, ipc_id, "invalid_argument", "%s",
		    jerr.msg);
		return;
	}
	for (i = 0; ops[i] != NULL; i++)
		if (strcmp(ops[i], op) == 0)
			break;
	if (ops[i] == NULL) {
		ipc_reply_error(px.vmmd, ipc_id, "invalid_argument",
		    "unknown operation %s", op);
		return;
	}
	if (px.link_fd == -1 || !px.hello) {
		ipc_reply_error(px.vmmd, ipc_id, "unavailable",
		    "the guest link is not up");
		return;
	}
	if ((req = guest_request(op, args, &body, &body_len, err,
	    sizeof(err))) == NULL) {
		ipc_reply_error(px.vmmd, ipc_id, "invalid_argument", "%s", err);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("calloc");
	if (++px.next_gid == 0)
		px.next_gid = 1;
	c->gid = px.next_gid;
	c->ipc_id = ipc_id;
	snprintf(c->op, sizeof(c->op), "%s", op);
	c->args = json_object_get(args);
	json_object_object_add(req, "id", json_object_new_int64(c->gid));
	if (glink_send_json(px.g, req, body, body_len) == -1) {
		ipc_reply_error(px.vmmd, ipc_id, "internal", "%s",
		    glink_error(px.g));
		json_object_put(c->args);
		free(c);
	} else {
		TAILQ_INSERT_TAIL(&px.calls, c, entry);
		link_want_write();
	}
	free(body);
	json_object_put(req);
}

static void
vmproxy_dispatch_vmmd(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	switch (m->type) {
	case IPC_PROXY_CALL:
		proxy_call(m->id, m->body);
		break;
	case IPC_PROXY_STREAM_OPEN:
		stream_open(m->id, m->body);
		break;
	case IPC_PROXY_BROKER_ROUTE:
		vpb_route(conn, m->id, m->body);
		break;
	case IPC_PROXY_BROKER_ATTACH:
		vpb_attach(conn, m->id, m->body);
		break;
	case IPC_PROXY_BROKER_LIMITS:
		vpb_limits(conn, m->id, m->body);
		break;
	}
}

static void
vmproxy_vmmd_closed(struct ipc_conn *conn, void *arg)
{
	/* vmmd is gone or let us go: nothing to serve any more. */
	px.vmmd = NULL;
	event_base_loopbreak(px.base);
}

static const struct ipc_rule vmmd_rules[] = {
	{ IPC_PROXY_CALL, 0 },
	{ IPC_PROXY_STREAM_OPEN, 0 },
	{ IPC_PROXY_BROKER_ROUTE, 0 },
	{ IPC_PROXY_BROKER_ATTACH, 0 },
	{ IPC_PROXY_BROKER_LIMITS, 0 },
};
static const struct ipc_policy vmmd_policy = {
	"vmmd", vmmd_rules, sizeof(vmmd_rules) / sizeof(vmmd_rules[0])
};
static const struct ipc_handlers vmmd_handlers = {
	vmproxy_dispatch_vmmd, vmproxy_vmmd_closed
};

static __attribute__((noreturn)) void
usage(void)
{
	fprintf(stderr, "usage: vmproxy [-dv] --ipc-fd N --link PATH --vm ID "
	    "[--console-fd N --console PATH --console-max BYTES]\n");
	exit(2);
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "ipc-fd", required_argument, NULL, 'f' },
		{ "link", required_argument, NULL, 'l' },
		{ "vm", required_argument, NULL, 'm' },
		{ "console-fd", required_argument, NULL, 'c' },
		{ "console", required_argument, NULL, 'C' },
		{ "console-max", required_argument, NULL, 'M' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct privdrop keep_none = { NULL, NULL, 0 };
	int ch, foreground = 0, verbose = 0, ipc_fd = -1, con_fd = -1;
	int con_file = -1;
	const char *con_path = NULL;
	long long con_max = 0;
	struct console *con = NULL;
	char *end;

	while ((ch = getopt_long(argc, argv, "dv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			foreground = 1;
			break;
		case 'v':
			verbose++;
			break;
		case 'f':
			ipc_fd = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || ipc_fd < 3)
				usage();
			break;
		case 'l':
			px.link_path = optarg;
			break;
		case 'm':
			px.vm_id = optarg;
			break;
		case 'c':
			con_fd = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || con_fd < 3)
				usage();
			break;
		case 'C':
			con_path = optarg;
			break;
		case 'M':
			con_max = strtoll(optarg, &end, 10);
			if (*end != '\0' || con_max < 2 || con_max > 1LL << 30)
				usage();
			break;
		default:
			usage();
		}
	}
	if (ipc_fd == -1 || px.link_path == NULL || px.vm_id == NULL ||
	    (con_fd != -1) != (con_path != NULL) ||
	    (con_fd != -1) != (con_max != 0))
		usage();
	log_init("vmproxy", foreground, verbose);
	signal(SIGPIPE, SIG_IGN);

	/* vmmd started us as the VM's uid: we keep nothing, and say so. */
	if (geteuid() == 0)
		fatalx("vmproxy must not run as root");
	privdrop(&keep_none);
	/* Opened before the filter, which has no open of any kind. */
	if (con_path != NULL && (con_file = open(con_path, O_RDWR | O_CREAT |
	    O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
		fatal("%s", con_path);
	sandbox_seccomp(vmproxy_syscalls, sizeof(vmproxy_syscalls) /
	    sizeof(vmproxy_syscalls[0]) - 1, 0);

	TAILQ_INIT(&px.calls);
	TAILQ_INIT(&px.streams);
	px.link_fd = -1;
	if ((px.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	if ((px.g = glink_new(GLINK_ROLE_HOST)) == NULL)
		fatalx("glink_new");
	if (con_fd != -1 && (con = console_new(px.base, con_fd, con_file,
	    (size_t)con_max)) == NULL)
		fatal("console");
	{
		struct vpb_hooks h = { px.base, px.g, px.vm_id,
		    link_want_write, streams_report };

		vpb_init(&h);
	}
	px.retry = evtimer_new(px.base, retry_cb, NULL);
	px.hello_wait = evtimer_new(px.base, hello_wait_cb, NULL);
	if ((px.vmmd = ipc_conn_new(px.base, ipc_fd, "vmproxy", &vmmd_policy,
	    &vmmd_handlers, NULL)) == NULL)
		fatal("ipc to vmmd");
	link_connect();
	event_base_dispatch(px.base);
	console_free(con);
	/* A guest that broke the protocol: exit status 3 tells vmmd so. */
	return px.vmmd != NULL ? 3 : 0;
}
