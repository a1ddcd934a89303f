/*
 * Guest byte streams for mcpd: GET /v1/vms/{vm_id}/streams/{port} upgrades
 * to a WebSocket, the backend hands over a connected stream fd, and this
 * relays bytes both ways with backpressure and half-close.  An empty binary
 * message is EOF for the guest; the guest closing ends with code 1000.
 * A job broker pipe (GET /v1/vms/{vm_id}/jobs/{job_id}/broker) is the same
 * relay with its frames checked on the way (mcpd_broker.c) and no EOF.
 */
#include <sys/socket.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "http_reply.h"
#include "mcpd_broker.h"
#include "log.h"
#include "mcpd.h"
#include "ws.h"

#define STREAM_HIGH_WATER	(1024 * 1024)	/* stop reading the other side */
#define STREAM_LOW_WATER	(256 * 1024)	/* and resume below this */
#define STREAM_CHUNK		(64 * 1024)	/* guest bytes per message */
#define STREAM_CLOSE_WAIT	5		/* s for the client's close */

/* stream_rate_bytes: per second, per direction, per stream; 0 = none. */
static size_t stream_rate;
/* stream_control_queue_bytes: pongs that may wait for the client. */
static size_t ctl_queue_max = 16384;

/*
 * Pongs queued for the client and not yet written to its socket, one by
 * one while there are few; past CTL_RING a pong is merged into the newest
 * entry, which then counts all of them until the last one has gone.
 */
#define CTL_RING	32

struct ctl_pending {
	uint64_t	 end;	/* offset just past it, in bytes ever written */
	size_t		 len;
};

#define RATE_TICKS	10	/* refills per second */

struct stream {
	TAILQ_ENTRY(stream)	 entry;
	struct mcpd		*m;
	struct hreq		*hr;		/* until the upgrade */
	struct backend_call	*bc;
	struct evhttp_connection *evcon;
	struct bufferevent	*ws;		/* the client, owned by evcon */
	struct bufferevent	*guest;
	int			 guest_fd;
	struct ws_rx		 rx;
	struct event		*close_timer;
	char			 workspace[AUTH_WORKSPACE_MAX];
	char			 vm_id[ROUTE_NAME_MAX];
	char			 credential_id[AUTH_WORKSPACE_MAX];
	char			 stream_id[96];
	time_t			 expires_at;
	unsigned int		 port;
	struct timespec		 opened;
	uint64_t		 bytes_in;	/* client to guest */
	uint64_t		 bytes_out;	/* guest to client */
	int			 eof_pending;	/* EOF to send after the data */
	int			 guest_eof;	/* the guest closed its side */
	int			 eof_sent;
	int			 close_sent;
	int			 close_received;
	uint16_t		 close_code;
	char			 reason[128];
	struct broker_mux	*bm;		/* a broker pipe, else NULL */
	char			 job_id[ROUTE_NAME_MAX];
	/* Token buckets (bytes) for stream_rate, one per direction. */
	int64_t			 tok_in;	/* client to guest */
	int64_t			 tok_out;	/* guest to client */
	int			 throttled_in;
	int			 throttled_out;
	struct event		*rate_ev;
	/* What the client's output holds of control frames. */
	struct evbuffer_cb_entry *out_cb;
	uint64_t		 out_sent;	/* bytes written to the client */
	struct ctl_pending	 ctl[CTL_RING];
	size_t			 ctl_head, ctl_n;
	size_t			 ctl_bytes;	/* queued, not yet written */
};

static TAILQ_HEAD(, stream) streams = TAILQ_HEAD_INITIALIZER(streams);

static void	ws_read_cb(struct bufferevent *, void *);

static void
stream_discard(struct stream *st)
{
	broker_mux_free(st->bm);
	free(st);
}

static void	guest_read_cb(struct bufferevent *, void *);

static void
rate_arm(struct stream *st)
{
	struct timeval tv = { 0, 1000000 / RATE_TICKS };

	if (!evtimer_pending(st->rate_ev, NULL))
		evtimer_add(st->rate_ev, &tv);
}

/* Reading the client resumes unless the guest is slow or tokens are out. */
static void
ws_resume(struct stream *st)
{
	if (st->close_sent || st->close_received || st->throttled_in)
		return;
	bufferevent_enable(st->ws, EV_READ);
	/* Frames may already be buffered; do not wait for more. */
	if (evbuffer_get_length(bufferevent_get_input(st->ws)) > 0)
		ws_read_cb(st->ws, st);
}

static void
guest_resume(struct stream *st)
{
	if (st->guest == NULL || st->close_sent || st->throttled_out)
		return;
	bufferevent_enable(st->guest, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(st->guest)) > 0)
		guest_read_cb(st->guest, st);
}

static void
rate_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct stream *st = arg;
	int64_t add = (int64_t)(stream_rate / RATE_TICKS) + 1;

	st->tok_in = st->tok_in + add > (int64_t)stream_rate ?
	    (int64_t)stream_rate : st->tok_in + add;
	st->tok_out = st->tok_out + add > (int64_t)stream_rate ?
	    (int64_t)stream_rate : st->tok_out + add;
	if (st->throttled_in && st->tok_in > 0) {
		st->throttled_in = 0;
		ws_resume(st);
	}
	if (st->throttled_out && st->tok_out > 0) {
		st->throttled_out = 0;
		guest_resume(st);
	}
	if (st->throttled_in || st->throttled_out)
		rate_arm(st);
}


static void
stream_finish(struct stream *st)
{
	struct timespec now;
	double secs;

	clock_gettime(CLOCK_MONOTONIC, &now);
	secs = (double)(now.tv_sec - st->opened.tv_sec) +
	    (double)(now.tv_nsec - st->opened.tv_nsec) / 1e9;
	/* Never the token, the route secret or the payload. */
	if (st->bm != NULL)
		log_info("broker pipe closed: workspace %s vm %s job %s: "
		    "%.1f s, %llu bytes in, %llu bytes out, %llu connections, "
		    "code %u (%s)", st->workspace, st->vm_id, st->job_id, secs,
		    (unsigned long long)st->bytes_in,
		    (unsigned long long)st->bytes_out,
		    (unsigned long long)st->bm->opened, st->close_code,
		    st->reason[0] != '\0' ? st->reason : "-");
	else
	log_info("stream closed: workspace %s vm %s port %u: %.1f s, "
	    "%llu bytes in, %llu bytes out, code %u (%s)", st->workspace,
	    st->vm_id, st->port, secs, (unsigned long long)st->bytes_in,
	    (unsigned long long)st->bytes_out, st->close_code,
	    st->reason[0] != '\0' ? st->reason : "-");
	TAILQ_REMOVE(&streams, st, entry);
	st->m->metrics.open_streams--;
	if (st->out_cb != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_output(st->ws),
		    st->out_cb);
	if (st->guest != NULL)
		bufferevent_free(st->guest);
	if (st->close_timer != NULL)
		event_free(st->close_timer);
	if (st->rate_ev != NULL)
		event_free(st->rate_ev);
	/* Frees the client's bufferevent and evhttp's request with it. */
	evhttp_connection_free(st->evcon);
	stream_discard(st);
}

static void
ws_send(struct stream *st, int opcode, const void *data, size_t len)
{
	uint8_t hdr[WS_MAX_HEADER];
	size_t hlen = ws_frame_header(hdr, 1, opcode, len);
	struct evbuffer *out = bufferevent_get_output(st->ws);

	evbuffer_add(out, hdr, hlen);
	if (len > 0)
		evbuffer_add(out, data, len);
}

/* Counts what leaves the client's output, and so which pongs have gone. */
static void
ws_out_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct stream *st = arg;
	struct ctl_pending *c;

	st->out_sent += info->n_deleted;
	while (st->ctl_n > 0 && (c = &st->ctl[st->ctl_head])->end <=
	    st->out_sent) {
		st->ctl_bytes -= c->len;
		st->ctl_head = (st->ctl_head + 1) % CTL_RING;
		st->ctl_n--;
	}
}

/*
 * A control frame for the client (a pong), counted until it is written:
 * -1, and nothing queued, when that would pass stream_control_queue_bytes.
 */
static int
ws_send_control(struct stream *st, int opcode, const void *data, size_t len)
{
	struct evbuffer *out = bufferevent_get_output(st->ws);
	uint8_t hdr[WS_MAX_HEADER];
	size_t n = ws_frame_header(hdr, 1, opcode, len) + len;
	struct ctl_pending *c;

	if (st->ctl_bytes + n > ctl_queue_max)
		return -1;
	ws_send(st, opcode, data, len);
	st->ctl_bytes += n;
	if (st->ctl_n < CTL_RING) {
		c = &st->ctl[(st->ctl_head + st->ctl_n++) % CTL_RING];
		c->len = n;
	} else {
		c = &st->ctl[(st->ctl_head + st->ctl_n - 1) % CTL_RING];
		c->len += n;
	}
	c->end = st->out_sent + evbuffer_get_length(out);
	/* Sent with the rate's tokens, as data to the client is. */
	st->tok_out -= (int64_t)n;
	return 0;
}

static void
close_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	stream_finish(arg);
}

/* Starts the closing handshake; the stream ends when the client answers. */
static void
stream_close(struct stream *st, uint16_t code, const char *reason)
{
	uint8_t payload[125];
	struct timeval tv = { STREAM_CLOSE_WAIT, 0 };

	if (st->close_sent)
		return;
	st->close_sent = 1;
	st->close_code = code;
	snprintf(st->reason, sizeof(st->reason), "%s", reason);
	ws_send(st, WS_OP_CLOSE, payload, ws_close_payload(payload, code,
	    reason));
	/* Nothing more goes to the guest or comes from it. */
	if (st->guest != NULL) {
		bufferevent_free(st->guest);
		st->guest = NULL;
	}
	evtimer_add(st->close_timer, &tv);
}

static void
guest_send_eof(struct stream *st)
{
	st->eof_pending = 0;
	st->eof_sent = 1;
	if (shutdown(st->guest_fd, SHUT_WR) == -1)
		log_debug("stream %s:%u: shutdown: %s", st->vm_id, st->port,
		    strerror(errno));
}

static void
ws_read_cb(struct bufferevent *bev, void *arg)
{
	struct stream *st = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct ws_event ev;
	uint16_t code;
	uint8_t *buf;
	size_t n, need;
	long r;

	while (!st->close_received && (n = evbuffer_get_length(in)) > 0) {
		if (stream_rate > 0 && st->tok_in <= 0) {
			/* Out of tokens: wait for the refill. */
			st->throttled_in = 1;
			bufferevent_disable(bev, EV_READ);
			rate_arm(st);
			return;
		}
		if (st->guest != NULL && evbuffer_get_length(
		    bufferevent_get_output(st->guest)) >= STREAM_HIGH_WATER) {
			/* The guest is slow: stop reading the client. */
			bufferevent_disable(bev, EV_READ);
			return;
		}
		/* Look at the header first so a huge frame is refused early. */
		buf = evbuffer_pullup(in, n < WS_MAX_HEADER ? n : WS_MAX_HEADER);
		r = ws_rx_parse(&st->rx, buf, n < WS_MAX_HEADER ? n :
		    WS_MAX_HEADER, &ev, &code);
		if (r == 0) {
			need = ws_frame_size(buf, n < WS_MAX_HEADER ? n :
			    WS_MAX_HEADER);
			if (need == 0 || n < need)
				return;
			buf = evbuffer_pullup(in, need);
			r = ws_rx_parse(&st->rx, buf, need, &ev, &code);
		}
		if (r < 0) {
			evbuffer_drain(in, n);
			stream_close(st, code, code == WS_CLOSE_TOO_BIG ?
			    "message too big" : code == WS_CLOSE_BAD_DATA ?
			    "invalid UTF-8" : "protocol error");
			return;
		}
		if (r == 0)
			return;
		/* Control frames cost the client's tokens as data does. */
		if (ev.kind != WS_EV_DATA)
			st->tok_in -= (int64_t)r;
		switch (ev.kind) {
		case WS_EV_DATA:
			if (st->close_sent || st->eof_sent || st->eof_pending)
				break;	/* after EOF the guest reads nothing */
			if (st->bm != NULL && ev.len > 0 &&
			    broker_mux_from_controller(st->bm, ev.payload,
			    ev.len) == -1) {
				log_warnx("broker pipe: workspace %s vm %s job "
				    "%s: %s", st->workspace, st->vm_id,
				    st->job_id, st->bm->ctl.err);
				evbuffer_drain(in, (size_t)r);
				stream_close(st, WS_CLOSE_PROTOCOL,
				    st->bm->ctl.err);
				return;
			}
			if (ev.len > 0) {
				bufferevent_write(st->guest, ev.payload,
				    ev.len);
				st->bytes_in += ev.len;
				st->tok_in -= (int64_t)ev.len;
			} else if (ev.fin && ev.msg_len == 0 &&
			    ev.opcode == WS_OP_BINARY && st->bm == NULL) {
				if (evbuffer_get_length(bufferevent_get_output(
				    st->guest)) == 0)
					guest_send_eof(st);
				else
					st->eof_pending = 1;
			}
			break;
		case WS_EV_PING:
			if (st->close_sent)
				break;
			if (ws_send_control(st, WS_OP_PONG, ev.payload,
			    ev.len) == -1) {
				log_warnx("stream %s:%u: workspace %s: %zu "
				    "bytes of pongs queued: control frames "
				    "not read; closing", st->vm_id, st->port,
				    st->workspace, st->ctl_bytes);
				stream_close(st, WS_CLOSE_POLICY,
				    "control frames not read");
			}
			break;
		case WS_EV_PONG:
			break;
		case WS_EV_CLOSE:
			st->close_received = 1;
			if (st->close_sent) {
				evbuffer_drain(in, (size_t)r);
				stream_finish(st);
				return;
			}
			/* Echo the code, then end once it is written. */
			if (ev.close_code == WS_CLOSE_NO_STATUS) {
				st->close_sent = 1;
				st->close_code = WS_CLOSE_NO_STATUS;
				snprintf(st->reason, sizeof(st->reason),
				    "client closed");
				ws_send(st, WS_OP_CLOSE, NULL, 0);
				if (st->guest != NULL) {
					bufferevent_free(st->guest);
					st->guest = NULL;
				}
			} else {
				stream_close(st, ev.close_code,
				    "client closed");
			}
			break;
		}
		evbuffer_drain(in, (size_t)r);
	}
}

static void
ws_write_cb(struct bufferevent *bev, void *arg)
{
	struct stream *st = arg;

	if (st->close_received && st->close_sent) {
		stream_finish(st);
		return;
	}
	guest_resume(st);
}

static void
ws_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct stream *st = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
		if (!st->close_sent) {
			st->close_code = 1006;
			snprintf(st->reason, sizeof(st->reason),
			    "client disconnected");
		}
		stream_finish(st);
	}
}

static void
guest_read_cb(struct bufferevent *bev, void *arg)
{
	struct stream *st = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer *out = bufferevent_get_output(st->ws);
	uint8_t hdr[WS_MAX_HEADER];
	size_t n, hlen;

	while ((n = evbuffer_get_length(in)) > 0) {
		/* At the guest's EOF, what it sent last must all go out: the
		 * guest side is freed next, and its input with it. */
		if (!st->guest_eof &&
		    evbuffer_get_length(out) >= STREAM_HIGH_WATER) {
			/* The client is slow: stop reading the guest. */
			bufferevent_disable(bev, EV_READ);
			return;
		}
		if (stream_rate > 0) {
			if (st->tok_out <= 0) {
				st->throttled_out = 1;
				bufferevent_disable(bev, EV_READ);
				rate_arm(st);
				return;
			}
			if ((int64_t)n > st->tok_out)
				n = (size_t)st->tok_out;
			st->tok_out -= (int64_t)n;
		}
		if (n > STREAM_CHUNK)
			n = STREAM_CHUNK;
		/* A broker pipe's conn_ids are learnt from what passes. */
		if (st->bm != NULL && broker_mux_from_service(st->bm,
		    evbuffer_pullup(in, (ssize_t)n), n) == -1) {
			log_warnx("broker pipe: vm %s job %s: vmproxy sent "
			    "bad frames: %s", st->vm_id, st->job_id,
			    st->bm->svc.err);
			stream_close(st, WS_CLOSE_INTERNAL, "broker pipe error");
			return;
		}
		hlen = ws_frame_header(hdr, 1, WS_OP_BINARY, n);
		evbuffer_add(out, hdr, hlen);
		evbuffer_remove_buffer(in, out, n);
		st->bytes_out += n;
	}
}

static void
guest_write_cb(struct bufferevent *bev, void *arg)
{
	struct stream *st = arg;

	if (st->eof_pending && evbuffer_get_length(
	    bufferevent_get_output(bev)) == 0)
		guest_send_eof(st);
	ws_resume(st);
}

static void
guest_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct stream *st = arg;

	if (what & BEV_EVENT_EOF) {
		/* What the guest sent last goes out whatever the rate. */
		st->guest_eof = 1;
		st->tok_out = INT64_MAX / 2;
		st->throttled_out = 0;
		guest_read_cb(bev, st);
		/* vmproxy ends a pipe when its job is seen finished. */
		if (st->bm != NULL) {
			stream_close(st, WS_CLOSE_GOING_AWAY, "job finished");
			return;
		}
		stream_close(st, WS_CLOSE_NORMAL, "");
		snprintf(st->reason, sizeof(st->reason), "guest closed");
	} else if (what & BEV_EVENT_ERROR) {
		stream_close(st, WS_CLOSE_INTERNAL, "stream error");
	}
}

static void
stream_upgrade(struct stream *st, int fd)
{
	struct hreq *hr = st->hr;
	char accept[WS_ACCEPT_LEN + 1];
	struct evbuffer *out;

	st->evcon = evhttp_request_get_connection(hr->req);
	if (st->evcon == NULL ||
	    ws_accept_key(http_in_header(hr, "Sec-WebSocket-Key"),
	    accept) == -1) {
		close(fd);
		http_reply(hr, 499, NULL, NULL, 0);
		stream_discard(st);
		return;
	}
	st->guest_fd = fd;
	if ((st->guest = bufferevent_socket_new(st->m->base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL ||
	    (st->close_timer = evtimer_new(st->m->base, close_timer_cb,
	    st)) == NULL ||
	    (st->rate_ev = evtimer_new(st->m->base, rate_cb, st)) == NULL) {
		if (st->close_timer != NULL)
			event_free(st->close_timer);
		if (st->guest != NULL)
			bufferevent_free(st->guest);
		else
			close(fd);
		http_reply_error(hr, "unavailable", "out of memory");
		stream_discard(st);
		return;
	}
	/* Take the connection over from evhttp; it never answers now. */
	st->ws = evhttp_connection_get_bufferevent(st->evcon);
	if ((st->out_cb = evbuffer_add_cb(bufferevent_get_output(st->ws),
	    ws_out_cb, st)) == NULL)
		fatal("%s: evbuffer_add_cb", __func__);
	http_takeover(hr);
	http_record(hr, 101);
	hreq_free(hr);
	st->hr = NULL;
	clock_gettime(CLOCK_MONOTONIC, &st->opened);
	TAILQ_INSERT_TAIL(&streams, st, entry);
	st->m->metrics.open_streams++;
	if (st->bm != NULL)
		log_info("broker pipe opened: workspace %s vm %s job %s",
		    st->workspace, st->vm_id, st->job_id);
	else
		log_info("stream opened: workspace %s vm %s port %u",
		    st->workspace, st->vm_id, st->port);

	bufferevent_setcb(st->ws, ws_read_cb, ws_write_cb, ws_event_cb, st);
	bufferevent_set_timeouts(st->ws, NULL, NULL);
	bufferevent_setwatermark(st->ws, EV_WRITE, STREAM_LOW_WATER, 0);
	out = bufferevent_get_output(st->ws);
	evbuffer_add_printf(out, "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	    "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
	bufferevent_setcb(st->guest, guest_read_cb, guest_write_cb,
	    guest_event_cb, st);
	/* A second's worth may go at once; then the rate holds. */
	st->tok_in = st->tok_out = (int64_t)stream_rate;
	bufferevent_setwatermark(st->guest, EV_WRITE, STREAM_LOW_WATER, 0);
	bufferevent_enable(st->guest, EV_READ | EV_WRITE);
	bufferevent_enable(st->ws, EV_READ | EV_WRITE);
	/* Frames the client sent right behind its request. */
	if (evbuffer_get_length(bufferevent_get_input(st->ws)) > 0)
		ws_read_cb(st->ws, st);
}

/*
 * A full stream quota is 409 for a stream, as mcpd(8) and the reference
 * say, where a tool's quota_exceeded is 429: the client may retry once one
 * of its streams has ended.  The code stays quota_exceeded.
 */
static void
stream_refuse_full(struct hreq *hr, const char *message)
{
	struct json_object *o, *e;

	o = json_object_new_object();
	e = json_object_new_object();
	json_object_object_add(e, "code",
	    json_object_new_string("quota_exceeded"));
	json_object_object_add(e, "message", json_object_new_string(
	    message != NULL ? message : "stream quota exceeded"));
	json_object_object_add(o, "error", e);
	http_reply_json(hr, 409, o);
	json_object_put(o);
}

static void
stream_opened(int fd, const char *stream_id, const char *code,
    const char *message, void *arg)
{
	struct stream *st = arg;
	struct hreq *hr = st->hr;

	st->bc = NULL;
	if (stream_id != NULL)
		snprintf(st->stream_id, sizeof(st->stream_id), "%s",
		    stream_id);
	hr->on_gone = NULL;
	if (fd < 0) {
		if (code != NULL && strcmp(code, "quota_exceeded") == 0)
			stream_refuse_full(hr, message);
		else
			http_reply_error(hr, code, "%s", message);
		stream_discard(st);
		return;
	}
	stream_upgrade(st, fd);
}

static void
stream_gone(struct hreq *hr)
{
	struct stream *st = hr->owner;

	if (st->bc != NULL)
		st->m->backend->cancel(st->m->backend_ctx, st->bc);
	hr->on_gone = NULL;
	http_reply(hr, 499, NULL, NULL, 0);
	stream_discard(st);
}

/* The upgrade request itself; 0, or -1 once answered. */
static int
upgrade_check(struct hreq *hr)
{
	const char *why;
	int status;

	status = ws_handshake_check(http_in_header(hr, "Upgrade"),
	    http_in_header(hr, "Connection"),
	    http_in_header(hr, "Sec-WebSocket-Key"),
	    http_in_header(hr, "Sec-WebSocket-Version"), &why);
	if (status == 426) {
		evhttp_add_header(http_out_headers(hr),
		    "Sec-WebSocket-Version", "13");
		http_reply_error(hr, "upgrade_required", "%s", why);
		return -1;
	}
	if (status != 0) {
		http_reply_error(hr, "invalid_argument", "%s", why);
		return -1;
	}
	return 0;
}

static struct stream *
stream_new(struct hreq *hr)
{
	struct stream *st;

	if ((st = calloc(1, sizeof(*st))) == NULL) {
		http_reply_error(hr, "unavailable", "out of memory");
		return NULL;
	}
	st->m = hr->m;
	st->hr = hr;
	st->guest_fd = -1;
	st->port = hr->route.port;
	ws_rx_init(&st->rx, WS_MAX_MESSAGE);
	snprintf(st->workspace, sizeof(st->workspace), "%s", hr->id.workspace);
	snprintf(st->vm_id, sizeof(st->vm_id), "%s", hr->route.vm_id);
	snprintf(st->credential_id, sizeof(st->credential_id), "%s",
	    hr->id.credential_id);
	st->expires_at = hr->id.expires_at;
	hr->owner = st;
	hr->on_gone = stream_gone;
	return st;
}

void
broker_handle(struct hreq *hr)
{
	struct mcpd *m = hr->m;
	const char *token = http_in_header(hr, "X-Broker-Pipe");
	struct stream *st;

	if (upgrade_check(hr) == -1)
		return;
	/* Stricter than a stream: no browser page may hold a pipe. */
	if (http_in_header(hr, "Origin") != NULL) {
		http_reply_error(hr, "forbidden", "a broker pipe refuses "
		    "requests with an Origin");
		return;
	}
	/* One answer for every miss, as vmmd gives. */
	if (!broker_token_valid(token) || m->backend->broker_open == NULL) {
		http_reply_error(hr, "not_found", "there is no such broker "
		    "pipe");
		return;
	}
	if ((st = stream_new(hr)) == NULL)
		return;
	if ((st->bm = broker_mux_new()) == NULL) {
		hr->on_gone = NULL;
		stream_discard(st);
		http_reply_error(hr, "unavailable", "out of memory");
		return;
	}
	snprintf(st->job_id, sizeof(st->job_id), "%s", hr->route.job_id);
	st->bc = m->backend->broker_open(m->backend_ctx, st->vm_id,
	    st->job_id, token, hr->token, &hr->id, stream_opened, st);
}

void
stream_handle(struct hreq *hr)
{
	struct mcpd *m = hr->m;
	struct stream *st;

	if (upgrade_check(hr) == -1)
		return;
	if (hr->route.port == 1023 || hr->route.port == 1024 ||
	    hr->route.port == 0) {
		http_reply_error(hr, "forbidden", "port %u is reserved",
		    hr->route.port);
		return;
	}
	if ((st = stream_new(hr)) == NULL)
		return;
	st->bc = m->backend->stream_open(m->backend_ctx, st->vm_id, st->port,
	    hr->token, &hr->id, stream_opened, st);
}

int
stream_init(const struct mcpd_config *cfg)
{
	stream_rate = cfg->stream_rate_bytes;
	ctl_queue_max = cfg->stream_control_queue_bytes;
	return 0;
}

void
stream_free_all(struct mcpd *m)
{
	struct stream *st, *next;

	for (st = TAILQ_FIRST(&streams); st != NULL; st = next) {
		next = TAILQ_NEXT(st, entry);
		if (st->m == m)
			stream_finish(st);
	}
}

/* vmmd ends a stream (suspend, destroy): 1001 with its reason. */
void
stream_close_by_id(const char *stream_id, const char *reason)
{
	struct stream *st;

	TAILQ_FOREACH(st, &streams, entry) {
		if (st->stream_id[0] != '\0' &&
		    strcmp(st->stream_id, stream_id) == 0) {
			stream_close(st, WS_CLOSE_GOING_AWAY, reason);
			return;
		}
	}
}

/*
 * The credential a stream was opened with is no longer good: revoked
 * (credential_id "" means every credential of the workspace) or expired.
 * Closes with 1008, as the reference says.
 */
void
stream_revoke(const char *workspace, const char *credential_id,
    const char *reason)
{
	struct stream *st;

	TAILQ_FOREACH(st, &streams, entry) {
		if (st->close_sent || strcmp(st->workspace, workspace) != 0)
			continue;
		if (credential_id != NULL && credential_id[0] != '\0' &&
		    strcmp(credential_id, st->credential_id) != 0)
			continue;
		stream_close(st, WS_CLOSE_POLICY, reason);
	}
}

/* Every few seconds: streams whose credential expired meanwhile. */
void
stream_expire(time_t now)
{
	struct stream *st;

	TAILQ_FOREACH(st, &streams, entry)
		if (!st->close_sent && st->expires_at != 0 &&
		    now >= st->expires_at)
			stream_close(st, WS_CLOSE_POLICY, "credential expired");
}
