/*
 * vmproxy's guest streams (vmproxy.h): byte streams vmmd opens to a port
 * in the guest, each a link channel on one side and one end of a
 * socketpair on the other, whose far end goes to vmmd (and on to mcpd).
 * Credit flow control per channel (glink.c) paces each one; a stream
 * stalls reading its socket while the guest has granted no credit.
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "glink.h"
#include "ipc.h"
#include "log.h"
#include "utf8.h"
#include "vmproxy.h"
#include "vmproxy_broker.h"
#include "vmproxy_decode.h"

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

static TAILQ_HEAD(, pstream) streams = TAILQ_HEAD_INITIALIZER(streams);

static void stream_free(struct pstream *, int send_close);
static void stream_readcb(int, short, void *);
static void stream_writecb(int, short, void *);

static struct pstream *
stream_find(uint32_t ch)
{
	struct pstream *s;

	TAILQ_FOREACH(s, &streams, entry)
		if (s->ch == ch)
			return s;
	return NULL;
}

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

int
streams_frame(const struct glink_frame *f)
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

/* Streams paused for want of credit start again once credit returns. */
void
streams_resume(void)
{
	struct pstream *s;

	TAILQ_FOREACH(s, &streams, entry)
		if (s->stalled && glink_credit(px.g, s->ch) > 0) {
			s->stalled = 0;
			event_add(s->rev, NULL);
		}
}

void
streams_report(void)
{
	struct json_object *body;
	struct pstream *s;
	int n = 0;

	if (px.vmmd == NULL)
		return;

	TAILQ_FOREACH(s, &streams, entry)
		if (s->open)
			n++;
	body = json_object_new_object();
	json_object_object_add(body, "open", json_object_new_int(n));
	/* Attached broker pipes are activity too. */
	if ((n = vpb_attached()) > 0)
		json_object_object_add(body, "pipes", json_object_new_int(n));
	ipc_send(px.vmmd, IPC_PROXY_STREAMS, 0, body, -1);
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
	TAILQ_REMOVE(&streams, s, entry);
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

void
stream_open(struct ipc_msg *msg, struct vmmd_msg *m)
{
	struct pstream *s;
	uint32_t ipc_id = msg->id, ch;
	int sp[2];

	if (!link_up()) {
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
	TAILQ_INSERT_TAIL(&streams, s, entry);
	if (glink_send_open(px.g, ch, (uint16_t)m->port) == -1) {
		ipc_reply_error(px.vmmd, ipc_id, "internal", "%s",
		    glink_error(px.g));
		s->ch = 0;
		stream_free(s, 0);
		return;
	}
	link_want_write();
}

/* The link dropped: every stream goes, one still opening is answered. */
void
streams_drop(void)
{
	struct pstream *s;

	while ((s = TAILQ_FIRST(&streams)) != NULL) {
		if (!s->open)
			ipc_reply_error(px.vmmd, s->ipc_id, "unavailable",
			    "the guest link dropped");
		s->ch = 0;
		stream_free(s, 0);
	}
}
