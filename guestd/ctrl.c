/*
 * guestd: channel 0 dispatch.  Each decoded request gets exactly one reply,
 * in order; a message that cannot be decoded at all ends the link.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "guestd.h"
#include "log.h"

struct json_object *
reply_new(uint32_t id)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "id", json_object_new_int64(id));
	json_object_object_add(o, "ok", json_object_new_boolean(1));
	return o;
}

struct json_object *
reply_error(uint32_t id, const char *code, const char *fmt, ...)
{
	struct json_object *o = json_object_new_object(), *e;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e = json_object_new_object();
	json_object_object_add(e, "code", json_object_new_string(code));
	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(o, "id", json_object_new_int64(id));
	json_object_object_add(o, "ok", json_object_new_boolean(0));
	json_object_object_add(o, "error", e);
	return o;
}

static struct json_object *
set_clock(uint32_t id, int64_t ns)
{
	struct timespec ts;

	ts.tv_sec = ns / 1000000000;
	ts.tv_nsec = ns % 1000000000;
	if (clock_settime(CLOCK_REALTIME, &ts) == -1)
		return reply_error(id, "io_error", "clock_settime: %s",
		    strerror(errno));
	return NULL;
}

int
guestd_dispatch_host(const uint8_t *buf, size_t len, const uint8_t *body,
    size_t body_len, int has_body)
{
	struct json_object *r = NULL;
	uint8_t *out = NULL;
	size_t outlen = 0;
	struct req q;
	char err[256];
	int rc;

	rc = req_decode(buf, len, body, body_len, has_body, &q, err,
	    sizeof(err));
	if (rc == -1) {
		/* glink_feed reports this as a violation and drops the link. */
		log_warnx("control: %s", err);
		req_free(&q);
		return -1;
	}
	if (rc == 1) {
		link_reply(reply_error(q.id, "invalid_argument", "%s", err),
		    NULL, 0);
		req_free(&q);
		return 0;
	}
	/* A write to a frozen file system would block this loop. */
	if (fsfreeze_active() && (q.op == OP_FILE_WRITE ||
	    q.op == OP_IDENTITY || q.op == OP_EXEC)) {
		link_reply(reply_error(q.id, "frozen", "the guest's file "
		    "systems are frozen for a snapshot; thaw first"), NULL, 0);
		req_free(&q);
		return 0;
	}
	switch (q.op) {
	case OP_PING:
		r = reply_new(q.id);
		break;
	case OP_CLOCK_SET:
		if ((r = set_clock(q.id, q.realtime_ns)) == NULL)
			r = reply_new(q.id);
		break;
	case OP_EXEC:
		r = jobs_exec(&q);
		break;
	case OP_JOB_STATUS:
		r = jobs_status(&q);
		break;
	case OP_JOB_OUTPUT:
		r = jobs_output(&q, &out, &outlen);
		break;
	case OP_JOB_CANCEL:
		r = jobs_cancel(&q);
		break;
	case OP_FILE_READ:
		r = files_read(&q, &out, &outlen);
		break;
	case OP_FILE_WRITE:
		r = files_write(&q);
		break;
	case OP_FREEZE:
		r = reply_new(q.id);
		json_object_object_add(r, "frozen",
		    json_object_new_boolean(jobs_freeze() == 0));
		if (q.filesystems) {
			char why[512];
			int n;

			if ((n = fsfreeze_all(q.thaw_after_ms, why,
			    sizeof(why))) == -1) {
				json_object_put(r);
				r = reply_error(q.id, "io_error", "freezing the "
				    "file systems: %s", why);
				break;
			}
			json_object_object_add(r, "filesystems",
			    json_object_new_int(n));
		}
		break;
	case OP_THAW:
		/* The file systems first: a clock refused below answers
		 * before the jobs thaw, and must still leave them writable. */
		fsfreeze_thaw();
		/* Wall time first, so jobs never see the stale clock. */
		if (q.has_time && (r = set_clock(q.id, q.realtime_ns)) != NULL)
			break;
		jobs_thaw();
		r = reply_new(q.id);
		break;
	case OP_ACTIVITY:
		r = reply_new(q.id);
		json_object_object_add(r, "active",
		    json_object_new_boolean(jobs_active()));
		json_object_object_add(r, "jobs_running",
		    json_object_new_int(jobs_running()));
		json_object_object_add(r, "streams",
		    json_object_new_int(streams_count()));
		break;
	case OP_HELLO:
		/* A new host session: streams of the old one are gone. */
		streams_reset();
		glink_reset_channels(gl);
		r = reply_new(q.id);
		guestd_hello(r);
		break;
	case OP_IDENTITY:
		r = identity_apply(&q);
		break;
	case OP_SHUTDOWN:
		link_reply(reply_new(q.id), NULL, 0);
		req_free(&q);
		guestd_shutdown();
		return 0;
	}
	link_reply(r, out, outlen);
	free(out);
	req_free(&q);
	return 0;
}
