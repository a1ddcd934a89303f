/*
 * guestd: byte-stream channels.  A host OPEN becomes a TCP connection to
 * 127.0.0.1:<port> inside the guest; bytes are relayed both ways within the
 * channel's credit, and EOF travels as a half-close (shutdown SHUT_WR).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "guestd.h"
#include "log.h"

#define TXBUF	GLINK_INITIAL_WINDOW

struct stream {
	struct stream	*next;
	const void	*owner;		/* adopted: its broker, else NULL */
	uint32_t	 ch;
	uint32_t	 port;
	int		 fd;
	int		 connecting;
	int		 got_eof;	/* host EOF: shut down after tx */
	int		 shut_wr;
	int		 sent_eof;	/* socket EOF sent to the host */
	uint8_t		*tx;		/* host -> socket, TXBUF */
	size_t		 txoff, txlen;
};

static struct stream *streams;
static int nstreams;

int
streams_count(void)
{
	return nstreams;
}

static void
stream_free(struct stream *s)
{
	struct stream **pp;

	for (pp = &streams; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	if (s->fd != -1)
		close(s->fd);
	free(s->tx);
	free(s);
	nstreams--;
	/* Its poll entry may still be pending in this loop turn. */
	loop_gen++;
}

/* Ends the channel from our side (error or both directions done). */
static void
stream_close(struct stream *s)
{
	if (glink_chan_exists(gl, s->ch))
		glink_send_close(gl, s->ch);
	stream_free(s);
}

void
streams_open(uint32_t ch, uint32_t port)
{
	struct sockaddr_in sin;
	struct stream *s;
	char why[128];

	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->tx = malloc(TXBUF)) == NULL) {
		free(s);
		glink_send_open_fail(gl, ch, "out of memory");
		return;
	}
	s->ch = ch;
	s->port = port;
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s->fd == -1 || (connect(s->fd, (struct sockaddr *)&sin,
	    sizeof(sin)) == -1 && errno != EINPROGRESS)) {
		snprintf(why, sizeof(why), "connect 127.0.0.1:%u: %s", port,
		    strerror(errno));
		glink_send_open_fail(gl, ch, why);
		if (s->fd != -1)
			close(s->fd);
		free(s->tx);
		free(s);
		return;
	}
	s->connecting = 1;
	s->next = streams;
	streams = s;
	nstreams++;
	glink_chan_set_udata(gl, ch, s);
}

/*
 * A connection made in the guest (the job broker pipe): the channel was
 * already sent as ACCEPT, so the stream is open and fd is connected.
 */
int
streams_adopt(uint32_t ch, int fd, const void *owner)
{
	struct stream *s;

	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->tx = malloc(TXBUF)) == NULL) {
		free(s);
		return -1;
	}
	s->ch = ch;
	s->fd = fd;
	s->owner = owner;
	s->next = streams;
	streams = s;
	nstreams++;
	glink_chan_set_udata(gl, ch, s);
	return 0;
}

int
streams_count_owner(const void *owner)
{
	struct stream *s;
	int n = 0;

	for (s = streams; s != NULL; s = s->next)
		n += s->owner == owner;
	return n;
}

/* The owner is going: its streams close towards the host too. */
void
streams_close_owner(const void *owner)
{
	struct stream *s, *next;

	for (s = streams; s != NULL; s = next) {
		next = s->next;
		if (s->owner == owner)
			stream_close(s);
	}
}

static void
stream_connected(struct stream *s)
{
	char why[128];
	socklen_t len = sizeof(int);
	int e = 0;

	if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &e, &len) == -1)
		e = errno;
	if (e != 0) {
		snprintf(why, sizeof(why), "connect 127.0.0.1:%u: %s",
		    s->port, strerror(e));
		glink_send_open_fail(gl, s->ch, why);
		stream_free(s);
		return;
	}
	s->connecting = 0;
	glink_send_open_ok(gl, s->ch);
}

static void
stream_maybe_done(struct stream *s)
{
	if (s->got_eof && s->txlen == 0 && !s->shut_wr) {
		shutdown(s->fd, SHUT_WR);
		s->shut_wr = 1;
	}
	if (s->shut_wr && s->sent_eof)
		stream_close(s);
}

static void
stream_io(int fd, short revents, void *arg)
{
	static uint8_t buf[GLINK_MAX_PAYLOAD];
	struct stream *s = arg;
	size_t credit;
	ssize_t n;

	if (s->connecting) {
		stream_connected(s);
		return;
	}
	if ((revents & POLLOUT) && s->txlen > 0) {
		n = write(fd, s->tx + s->txoff, s->txlen);
		if (n == -1 && errno != EAGAIN && errno != EINTR) {
			stream_close(s);
			return;
		}
		if (n > 0) {
			s->txoff += (size_t)n;
			s->txlen -= (size_t)n;
			if (s->txlen == 0)
				s->txoff = 0;
			glink_consumed(gl, s->ch, (size_t)n);
		}
	}
	credit = glink_credit(gl, s->ch);
	if ((revents & (POLLIN | POLLHUP | POLLERR)) && !s->sent_eof &&
	    credit > 0) {
		n = read(fd, buf, credit < sizeof(buf) ? credit : sizeof(buf));
		if (n > 0)
			glink_send_data(gl, s->ch, buf, (size_t)n);
		else if (n == 0) {
			glink_send_eof(gl, s->ch);
			s->sent_eof = 1;
		} else if (errno != EAGAIN && errno != EINTR) {
			stream_close(s);
			return;
		}
	} else if ((revents & POLLERR) && !(revents & POLLIN)) {
		stream_close(s);
		return;
	} else if ((revents & POLLHUP) && s->sent_eof) {
		/*
		 * Both directions are gone.  A Unix socket says so apart from
		 * a half-close, which is how a guest client that shut down
		 * its write side can still read the broker's reply.
		 */
		stream_close(s);
		return;
	}
	stream_maybe_done(s);
}

void
streams_frame(const struct glink_frame *f)
{
	struct stream *s = f->udata;
	size_t room;

	if (s == NULL)
		return;
	switch (f->type) {
	case GLINK_DATA:
		/* glink checked the credit, so it always fits. */
		if (s->txoff + s->txlen + f->len > TXBUF) {
			memmove(s->tx, s->tx + s->txoff, s->txlen);
			s->txoff = 0;
		}
		room = TXBUF - s->txoff - s->txlen;
		if (f->len > room) {
			log_warnx("stream %u: data beyond its buffer", s->ch);
			stream_close(s);
			return;
		}
		memcpy(s->tx + s->txoff + s->txlen, f->data, f->len);
		s->txlen += f->len;
		break;
	case GLINK_EOF:
		s->got_eof = 1;
		stream_maybe_done(s);
		break;
	case GLINK_CLOSE:
		/* glink already answered and released the channel. */
		stream_free(s);
		break;
	default:
		break;
	}
}

void
streams_poll(void)
{
	struct stream *s;

	for (s = streams; s != NULL; s = s->next) {
		short ev = 0;

		if (s->connecting)
			ev = POLLOUT;
		else {
			if (s->txlen > 0)
				ev |= POLLOUT;
			/* Read only what the host has room for. */
			if (!s->sent_eof && glink_credit(gl, s->ch) > 0)
				ev |= POLLIN;
		}
		/* No interest still reports a hangup (POLLHUP). */
		if (ev != 0 || s->owner != NULL)
			loop_add(s->fd, ev, stream_io, s);
	}
}

/* The link dropped: every stream goes with it. */
void
streams_reset(void)
{
	while (streams != NULL)
		stream_free(streams);
}
