/*
 * netd's DNS forwarder, the child process; see dnsfwd.h.  It reads the
 * guests' queries and the upstream resolvers' answers, both untrusted
 * (dnsmsg.c parses them), and holds no privilege: netd alone touches
 * nftables, on the child's FWD_OPEN, and answers FWD_OPENED before the
 * child releases the answer to the guest.
 *
 * Queries are served side by side: each allowed one is a pending entry
 * (at most FWD_PENDING_MAX, FWD_PENDING_PER_SLOT of one slot) that waits
 * at most FWD_WAIT_MS for each upstream resolver in turn and as long for
 * netd, while the others go on.  A slot whose guest asks for names that
 * never answer fills only its own share; a query over the share gets
 * SERVFAIL at once.
 *
 * Over TCP (an answer too large for DNSMSG_MAX), a guest holds at most
 * FWD_TCP_PER_SLOT connections of FWD_TCP_MAX, each asking one query at a
 * time of at most DNSMSG_MAX bytes and closed after FWD_TCP_IDLE_MS
 * without one; its queries go upstream over TCP, whose answers may have
 * DNSMSG_TCP_MAX bytes, under the same names and the same FWD_OPEN.
 */
#include <sys/random.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dnsfwd.h"
#include "fdmsg.h"
#include "log.h"
#include "nft.h"
#include "privdrop.h"

#define FWD_WAIT_MS		2000
/*
 * Every networked slot has a forwarder (netd.c), so the totals are sized
 * for NETD_MAX_SLOTS: 32 slots at their share of waiting queries, 16 at
 * their share of TCP connections, before a query past the total gets
 * SERVFAIL.  With a socket per slot's UDP and listener, an upstream one
 * per entry and the connections, the child holds at most 2 * 256 + 256 +
 * 64 + 1 descriptors, under the 1024 of a default RLIMIT_NOFILE.
 */
#define FWD_PENDING_MAX		256
#define FWD_PENDING_PER_SLOT	8
#define FWD_TCP_MAX		64
#define FWD_TCP_PER_SLOT	4
#define FWD_TCP_IDLE_MS		10000

/* An allowed query on its way: asking upstream, then waiting for netd. */
struct pending {
	int			 used;
	unsigned		 slot;
	int			 sock;		/* upstream; -1 once answered */
	size_t			 resolver;	/* the one asked, in cfg->dns */
	uint16_t		 id;		/* the id upstream saw */
	uint32_t		 seq;		/* FWD_OPEN's, while netd acts */
	struct timespec		 deadline;
	struct sockaddr_in	 peer;		/* the guest */
	socklen_t		 plen;
	struct dnsmsg_q		 q;
	uint8_t			 query[DNSMSG_MAX];	/* the guest's */
	size_t			 qlen;
	uint8_t			 ans[DNSMSG_MAX];	/* upstream's */
	size_t			 alen;
	int			 tcp;		/* its guest's tconn, or -1 */
	int			 sent;		/* TCP: the query is upstream */
	uint8_t			*tans;		/* TCP: 2 + DNSMSG_TCP_MAX */
	size_t			 tlen;		/* TCP: bytes in tans */
};

/* A guest's TCP connection to its slot's forwarder. */
struct tconn {
	int			 fd;		/* -1: free */
	unsigned		 slot;
	int			 busy;		/* a pending entry has its query */
	struct timespec		 idle;		/* closed by then, unless busy */
	uint8_t			 in[2 + DNSMSG_MAX];
	size_t			 inlen;
	uint8_t			*out;		/* an answer being written */
	size_t			 outlen, outoff;
};

static struct tconn tconns[FWD_TCP_MAX];

static struct pending pend[FWD_PENDING_MAX];

struct fwd_slot {
	int		 fd;		/* -1: no forwarder for the slot */
	int		 tfd;		/* its TCP listener, or -1 */
	int		 deny;		/* names refused, the rest answered */
	size_t		 nnames;
	char		(*names)[DNSNAME_MAX + 1];
};

static struct fwd_slot slots[NETD_MAX_SLOTS];
static const struct fwd_cfg *cfg;
static int ctl = -1;
static uint32_t seq;

static const char *const fwd_syscalls[] = {
	"socket", "connect", "sendto", "recvfrom", "sendmsg", "recvmsg",
	"poll", "ppoll", "getrandom", "accept4",
};

static void	tconn_close(struct tconn *);
static void	tconn_flush(struct tconn *);
static void	tconn_take(struct tconn *);

static long
ms_left(const struct timespec *end)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (end->tv_sec - now.tv_sec) * 1000 +
	    (end->tv_nsec - now.tv_nsec) / 1000000;
}

/* netd's FWD_ADD and FWD_DEL; exits when netd has gone. */
static void
ctl_read(struct fwd_msg *m)
{
	struct msghdr msg;
	struct iovec iov = { m, sizeof(*m) };
	FDMSG_BUF(cbuf, 2);
	int fds[2] = { -1, -1 }, fd, tfd;
	ssize_t n;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = sizeof(cbuf.buf);
	if ((n = recvmsg(ctl, &msg, 0)) <= 0) {
		if (n == -1 && errno == EINTR)
			return;
		_exit(0);
	}
	if (fdmsg_take(&msg, fds, 2) == -1)
		_exit(1);
	fd = fds[0];
	tfd = fds[1];
	if ((size_t)n != sizeof(*m) || m->slot >= NETD_MAX_SLOTS ||
	    m->n > EGRESS_MAX_NAMES || (m->type != FWD_ADD && fd != -1)) {
		if (fd != -1)
			close(fd);
		if (tfd != -1)
			close(tfd);
		return;
	}
	switch (m->type) {
	case FWD_ADD: {
		struct fwd_slot *s = &slots[m->slot];

		if (fd == -1 || tfd == -1) {
			if (fd != -1)
				close(fd);
			return;
		}
		if (s->fd != -1)
			close(s->fd);
		if (s->tfd != -1)
			close(s->tfd);
		free(s->names);
		s->fd = fd;
		s->tfd = tfd;
		s->deny = m->deny != 0;
		s->nnames = m->n;
		if ((s->names = calloc(m->n + 1, sizeof(s->names[0]))) ==
		    NULL)
			_exit(1);
		for (uint32_t i = 0; i < m->n; i++)
			snprintf(s->names[i], sizeof(s->names[i]), "%s",
			    m->names[i]);
		return;
	}
	case FWD_DEL:
		if (slots[m->slot].fd != -1)
			close(slots[m->slot].fd);
		if (slots[m->slot].tfd != -1)
			close(slots[m->slot].tfd);
		slots[m->slot].fd = -1;
		slots[m->slot].tfd = -1;
		for (size_t i = 0; i < FWD_TCP_MAX; i++)
			if (tconns[i].fd != -1 && tconns[i].slot == m->slot)
				tconn_close(&tconns[i]);
		free(slots[m->slot].names);
		slots[m->slot].names = NULL;
		slots[m->slot].nnames = 0;
		return;
	default:
		return;
	}
}

static int
ctl_send(const struct fwd_msg *m)
{
	ssize_t n;

	do
		n = send(ctl, m, sizeof(*m), MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	return n == (ssize_t)sizeof(*m) ? 0 : -1;
}

static void
deadline_in(struct timespec *t, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_sec += ms / 1000;
	t->tv_nsec += (ms % 1000) * 1000000;
	if (t->tv_nsec >= 1000000000) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000;
	}
}

/* Answers the guest on its connection t: the answer framed, written as
 * far as it goes now, the rest when t takes more. */
static void
reply_tcp(struct tconn *t, const uint8_t *m, size_t len,
    const uint8_t *guest_id)
{
	t->busy = 0;
	if (t->fd == -1)
		return;
	free(t->out);
	if ((t->out = malloc(2 + len)) == NULL)
		_exit(1);
	t->out[0] = (uint8_t)(len >> 8);
	t->out[1] = (uint8_t)len;
	memcpy(t->out + 2, m, len);
	t->out[2] = guest_id[0];
	t->out[3] = guest_id[1];
	t->outlen = 2 + len;
	t->outoff = 0;
	deadline_in(&t->idle, FWD_TCP_IDLE_MS);
	tconn_flush(t);
}

/* Answers the guest with m (its own id put back) when its slot still has
 * a forwarder socket; tcp is its connection, or -1 for UDP. */
static void
reply(unsigned slot, int tcp, const struct sockaddr_in *peer,
    socklen_t plen, uint8_t *m, size_t len, const uint8_t *guest_id)
{
	if (slots[slot].fd == -1)
		return;
	if (tcp != -1) {
		reply_tcp(&tconns[tcp], m, len, guest_id);
		return;
	}
	m[0] = guest_id[0];
	m[1] = guest_id[1];
	(void)sendto(slots[slot].fd, m, len, MSG_DONTWAIT,
	    (const struct sockaddr *)peer, plen);
}

static void
pending_end(struct pending *p)
{
	if (p->sock != -1)
		close(p->sock);
	p->sock = -1;
	if (p->tcp != -1)
		tconns[p->tcp].busy = 0;
	free(p->tans);
	p->tans = NULL;
	p->used = 0;
}

/* SERVFAIL to the guest, and the entry ends. */
static void
pending_fail(struct pending *p)
{
	size_t n = dnsmsg_refuse(p->query, &p->q, 2);

	reply(p->slot, p->tcp, &p->peer, p->plen, p->query, n, p->query);
	pending_end(p);
}

/* Sends the query to resolver from or the next that takes it; -1 when
 * none is left. */
static int
ask_upstream(struct pending *p, size_t from)
{
	uint8_t out[DNSMSG_MAX];

	memcpy(out, p->query, p->qlen);
	for (size_t i = from; i < cfg->ndns; i++) {
		struct sockaddr_in sin;
		int s;

		if (getrandom(&p->id, sizeof(p->id), 0) != sizeof(p->id))
			return -1;
		out[0] = (uint8_t)(p->id >> 8);
		out[1] = (uint8_t)p->id;
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons(53);
		sin.sin_addr.s_addr = htonl(cfg->dns[i]);
		if (p->tcp != -1) {
			/* Connected and sent when poll says it may write. */
			if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC |
			    SOCK_NONBLOCK, 0)) == -1)
				return -1;
			if (connect(s, (struct sockaddr *)&sin,
			    sizeof(sin)) == -1 && errno != EINPROGRESS) {
				close(s);
				continue;
			}
			p->sent = 0;
			p->tlen = 0;
		} else {
			if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC |
			    SOCK_NONBLOCK, 0)) == -1)
				return -1;
			if (connect(s, (struct sockaddr *)&sin,
			    sizeof(sin)) == -1 ||
			    send(s, out, p->qlen, 0) != (ssize_t)p->qlen) {
				close(s);
				continue;
			}
		}
		p->sock = s;
		p->resolver = i;
		deadline_in(&p->deadline, FWD_WAIT_MS);
		return 0;
	}
	return -1;
}

/* The answer p waited for, n bytes at a (p->ans, or p->tans + 2). */
static void
answered(struct pending *p, uint8_t *a, size_t n,
    const uint32_t *addrs, const uint32_t *ttls, int na)
{
	static struct fwd_msg m;

	close(p->sock);
	p->sock = -1;
	p->alen = n;
	/* A public slot reaches its answers without netd's help. */
	if (na == 0 || slots[p->slot].deny) {
		reply(p->slot, p->tcp, &p->peer, p->plen, a, n, p->query);
		pending_end(p);
		return;
	}
	/* netd opens the addresses first; the answer waits for its word. */
	memset(&m, 0, sizeof(m));
	m.type = FWD_OPEN;
	m.slot = p->slot;
	if (++seq == 0)		/* 0 is no request's */
		seq = 1;
	m.seq = p->seq = seq;
	m.n = (uint32_t)na;
	for (int i = 0; i < na; i++) {
		m.addrs[i] = addrs[i];
		m.ttls[i] = ttls[i] < cfg->ttl_min ? cfg->ttl_min :
		    ttls[i] > cfg->ttl_max ? cfg->ttl_max : ttls[i];
	}
	if (ctl_send(&m) == -1)
		_exit(0);
	deadline_in(&p->deadline, FWD_WAIT_MS);
}

static uint8_t *
answer_of(struct pending *p)
{
	return p->tcp != -1 ? p->tans + 2 : p->ans;
}

/* Upstream said something: the answer, or a datagram to ignore. */
static void
upstream_read(struct pending *p)
{
	uint32_t addrs[DNSMSG_MAX_ADDRS], ttls[DNSMSG_MAX_ADDRS];
	ssize_t n;
	int na;

	if ((n = recv(p->sock, p->ans, sizeof(p->ans), MSG_DONTWAIT)) <= 0)
		return;		/* the timeout decides */
	if ((na = dnsmsg_answer(p->ans, (size_t)n, p->id, &p->q, addrs,
	    ttls)) == -1)
		return;		/* not the answer: wait on */
	answered(p, p->ans, (size_t)n, addrs, ttls, na);
}

/* The next resolver for a TCP query that failed, or SERVFAIL. */
static void
upstream_tcp_next(struct pending *p)
{
	close(p->sock);
	p->sock = -1;
	if (ask_upstream(p, p->resolver + 1) == -1)
		pending_fail(p);
}

/*
 * A TCP upstream may be written (connected: the framed query goes in one
 * send, as it fits in any socket buffer) or read (the answer, up to its
 * framed length).  A connection that fails, closes, or frames a length
 * it cannot hold moves on to the next resolver at once.
 */
static void
upstream_tcp(struct pending *p, short revents)
{
	uint32_t addrs[DNSMSG_MAX_ADDRS], ttls[DNSMSG_MAX_ADDRS];
	uint8_t out[2 + DNSMSG_MAX];
	ssize_t n;
	long len;
	int na;

	if (!p->sent) {
		if ((revents & (POLLOUT | POLLERR | POLLHUP)) == 0)
			return;
		out[0] = (uint8_t)(p->qlen >> 8);
		out[1] = (uint8_t)p->qlen;
		memcpy(out + 2, p->query, p->qlen);
		out[2] = (uint8_t)(p->id >> 8);
		out[3] = (uint8_t)p->id;
		if (send(p->sock, out, 2 + p->qlen, MSG_NOSIGNAL) !=
		    (ssize_t)(2 + p->qlen)) {
			upstream_tcp_next(p);
			return;
		}
		p->sent = 1;
		return;
	}
	if ((revents & (POLLIN | POLLERR | POLLHUP)) == 0)
		return;
	if (p->tans == NULL && (p->tans = malloc(2 + DNSMSG_TCP_MAX)) == NULL)
		_exit(1);
	n = recv(p->sock, p->tans + p->tlen, 2 + DNSMSG_TCP_MAX - p->tlen,
	    MSG_DONTWAIT);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		upstream_tcp_next(p);
		return;
	}
	p->tlen += (size_t)n;
	if ((len = dnsmsg_tcp_frame(p->tans, p->tlen, DNSMSG_TCP_MAX)) == 0)
		return;
	if (len == -1 || (na = dnsmsg_answer(p->tans + 2, (size_t)len,
	    p->id, &p->q, addrs, ttls)) == -1) {
		upstream_tcp_next(p);	/* a stream cannot skip one */
		return;
	}
	answered(p, p->tans + 2, (size_t)len, addrs, ttls, na);
}

/* netd's FWD_OPENED: the answer it waited for goes out, or SERVFAIL. */
static void
opened(const struct fwd_msg *m)
{
	for (size_t i = 0; i < FWD_PENDING_MAX; i++) {
		struct pending *p = &pend[i];

		if (!p->used || p->sock != -1 || p->seq != m->seq)
			continue;
		if (m->ok == 1 && m->slot == p->slot) {
			reply(p->slot, p->tcp, &p->peer, p->plen,
			    answer_of(p), p->alen, p->query);
			pending_end(p);
		} else
			pending_fail(p);
		return;
	}
}

/* Entries past their deadline: the next resolver, or SERVFAIL; and those
 * of slots that no longer have a forwarder end. */
static void
pending_tick(void)
{
	for (size_t i = 0; i < FWD_PENDING_MAX; i++) {
		struct pending *p = &pend[i];

		if (!p->used)
			continue;
		if (slots[p->slot].fd == -1) {
			pending_end(p);
			continue;
		}
		if (ms_left(&p->deadline) > 0)
			continue;
		if (p->sock != -1) {
			close(p->sock);
			p->sock = -1;
			if (ask_upstream(p, p->resolver + 1) == 0)
				continue;
		}
		pending_fail(p);
	}
	for (size_t i = 0; i < FWD_TCP_MAX; i++)
		if (tconns[i].fd != -1 && !tconns[i].busy &&
		    ms_left(&tconns[i].idle) <= 0)
			tconn_close(&tconns[i]);
		else
			tconn_take(&tconns[i]);	/* one sent behind another */
}

static void
refused(unsigned slot, const struct dnsmsg_q *q)
{
	static struct fwd_msg m;

	memset(&m, 0, sizeof(m));
	m.type = FWD_REFUSED;
	m.slot = slot;
	if (q->name_ok)
		snprintf(m.name, sizeof(m.name), "%s", q->name);
	else
		snprintf(m.name, sizeof(m.name), "(not a host name)");
	(void)ctl_send(&m);
}

/*
 * The guest's query m, n bytes: from peer over UDP (tcp -1), or on its
 * connection tcp.  0, or -1 when it is not a query (no answer).
 */
static int
query(unsigned slot, int tcp, uint8_t *m, ssize_t n,
    const struct sockaddr_in *peer, socklen_t plen)
{
	struct fwd_slot *s = &slots[slot];
	struct dnsmsg_q q;
	struct pending *p = NULL;
	size_t mine = 0;
	int ok = 0;

	if (dnsmsg_query(m, (size_t)n, &q) == -1)
		return -1;
	/* A public slot that denies no name: every query goes on as the
	 * guest asked it, host name or not, as a resolver of its own would
	 * take it. */
	if (s->deny && s->nnames == 0)
		ok = 1;
	else if (q.name_ok) {
		for (size_t i = 0; i < s->nnames && !ok; i++)
			ok = dnsname_match(s->names[i], q.name);
		if (s->deny)
			ok = !ok;
	}
	if (!ok) {
		n = (ssize_t)dnsmsg_refuse(m, &q, 5);	/* REFUSED */
		refused(slot, &q);
		reply(slot, tcp, peer, plen, m, (size_t)n, m);
		return 0;
	}
	for (size_t i = 0; i < FWD_PENDING_MAX; i++) {
		if (pend[i].used && pend[i].slot == slot)
			mine++;
		else if (!pend[i].used && p == NULL)
			p = &pend[i];
	}
	if (p == NULL || mine >= FWD_PENDING_PER_SLOT) {
		/* Its share (or everyone's) is out: no waiting in line. */
		n = (ssize_t)dnsmsg_refuse(m, &q, 2);	/* SERVFAIL */
		reply(slot, tcp, peer, plen, m, (size_t)n, m);
		return 0;
	}
	memset(p, 0, sizeof(*p));
	p->used = 1;
	p->slot = slot;
	p->sock = -1;
	p->tcp = tcp;
	if (tcp != -1)
		tconns[tcp].busy = 1;
	else {
		p->peer = *peer;
		p->plen = plen;
	}
	p->q = q;
	memcpy(p->query, m, (size_t)n);
	p->qlen = (size_t)n;
	if (ask_upstream(p, 0) == -1)
		pending_fail(p);
	return 0;
}

static void
serve_query(unsigned slot)
{
	uint8_t m[DNSMSG_MAX];
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	ssize_t n;

	if ((n = recvfrom(slots[slot].fd, m, sizeof(m), MSG_DONTWAIT,
	    (struct sockaddr *)&peer, &plen)) <= 0)
		return;
	(void)query(slot, -1, m, n, &peer, plen);
}

static void
tconn_close(struct tconn *t)
{
	for (size_t i = 0; i < FWD_PENDING_MAX; i++)
		if (pend[i].used && pend[i].tcp == t - tconns) {
			pend[i].tcp = -1;	/* nobody to answer */
			pending_end(&pend[i]);
		}
	close(t->fd);
	free(t->out);
	memset(t, 0, sizeof(*t));
	t->fd = -1;
}

/* Writes what is left of t's answer; closes t when it cannot. */
static void
tconn_flush(struct tconn *t)
{
	ssize_t n;

	while (t->out != NULL && t->outoff < t->outlen) {
		n = send(t->fd, t->out + t->outoff, t->outlen - t->outoff,
		    MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return;
		if (n <= 0) {
			tconn_close(t);
			return;
		}
		t->outoff += (size_t)n;
	}
	free(t->out);
	t->out = NULL;
	t->outlen = t->outoff = 0;
}

/* t's answer is out: its next query, when one is whole. */
static void
tconn_written(struct tconn *t)
{
	tconn_flush(t);
	if (t->fd != -1 && t->out == NULL)
		tconn_take(t);
}

/* A new connection on slot's listener, when the bounds have room. */
static void
tconn_accept(unsigned slot)
{
	struct tconn *t = NULL;
	size_t mine = 0;
	int fd;

	if ((fd = accept4(slots[slot].tfd, NULL, NULL, SOCK_NONBLOCK |
	    SOCK_CLOEXEC)) == -1)
		return;
	for (size_t i = 0; i < FWD_TCP_MAX; i++) {
		if (tconns[i].fd != -1 && tconns[i].slot == slot)
			mine++;
		else if (tconns[i].fd == -1 && t == NULL)
			t = &tconns[i];
	}
	if (t == NULL || mine >= FWD_TCP_PER_SLOT) {
		close(fd);	/* its share is taken: no queue */
		return;
	}
	memset(t, 0, sizeof(*t));
	t->fd = fd;
	t->slot = slot;
	deadline_in(&t->idle, FWD_TCP_IDLE_MS);
}

/*
 * Serves the query whole at the start of t's input, when t is free for
 * one (queries sent back to back wait their turn there).  A length over
 * DNSMSG_MAX, or what is not a query, closes t.
 */
static void
tconn_take(struct tconn *t)
{
	uint8_t m[DNSMSG_MAX];
	long len;

	if (t->fd == -1 || t->busy || t->out != NULL ||
	    (len = dnsmsg_tcp_frame(t->in, t->inlen, DNSMSG_MAX)) == 0)
		return;
	if (len == -1) {
		tconn_close(t);
		return;
	}
	memcpy(m, t->in + 2, (size_t)len);
	t->inlen -= 2 + (size_t)len;
	memmove(t->in, t->in + 2 + len, t->inlen);
	if (query(t->slot, (int)(t - tconns), m, len, NULL, 0) == -1)
		tconn_close(t);
}

/* The guest sent on t: more of its queries. */
static void
tconn_read(struct tconn *t)
{
	ssize_t n;

	if (t->inlen == sizeof(t->in))
		return;		/* a whole query waits its turn */
	n = recv(t->fd, t->in + t->inlen, sizeof(t->in) - t->inlen,
	    MSG_DONTWAIT);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		tconn_close(t);
		return;
	}
	t->inlen += (size_t)n;
	deadline_in(&t->idle, FWD_TCP_IDLE_MS);
	tconn_take(t);
}

enum poll_kind { P_CTL, P_UDP, P_LISTEN, P_UPSTREAM, P_TCONN };

#define FWD_POLL_MAX	(1 + 2 * NETD_MAX_SLOTS + FWD_PENDING_MAX + \
			    FWD_TCP_MAX)

static void
dnsfwd_main(void)
{
	struct pollfd p[FWD_POLL_MAX];
	enum poll_kind kind[FWD_POLL_MAX];
	unsigned idx[FWD_POLL_MAX];
	static struct fwd_msg m;

	for (;;) {
		nfds_t np = 0;
		long wait = -1, left;

#define WATCH(f, ev, k, n) do {						\
	p[np].fd = (f);							\
	p[np].events = (ev);						\
	kind[np] = (k);							\
	idx[np++] = (n);						\
} while (0)
		WATCH(ctl, POLLIN, P_CTL, 0);
		for (unsigned i = 0; i < NETD_MAX_SLOTS; i++) {
			if (slots[i].fd == -1)
				continue;
			WATCH(slots[i].fd, POLLIN, P_UDP, i);
			if (slots[i].tfd != -1)
				WATCH(slots[i].tfd, POLLIN, P_LISTEN, i);
		}
		for (unsigned i = 0; i < FWD_PENDING_MAX; i++) {
			if (!pend[i].used)
				continue;
			left = ms_left(&pend[i].deadline);
			if (left < 0)
				left = 0;
			if (wait == -1 || left < wait)
				wait = left;
			if (pend[i].sock == -1)
				continue;
			WATCH(pend[i].sock, pend[i].tcp != -1 &&
			    !pend[i].sent ? POLLOUT : POLLIN, P_UPSTREAM, i);
		}
		/* A connection waiting on upstream is not polled: its
		 * entry's deadline bounds the wait. */
		for (unsigned i = 0; i < FWD_TCP_MAX; i++) {
			if (tconns[i].fd == -1 || tconns[i].busy)
				continue;
			left = ms_left(&tconns[i].idle);
			if (left < 0)
				left = 0;
			if (wait == -1 || left < wait)
				wait = left;
			WATCH(tconns[i].fd, tconns[i].out != NULL ? POLLOUT :
			    POLLIN, P_TCONN, i);
		}
#undef WATCH
		if (poll(p, np, wait > INT_MAX ? INT_MAX : (int)wait) == -1) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (nfds_t i = 0; i < np; i++) {
			struct pending *e;
			struct tconn *t;

			if (p[i].revents == 0)
				continue;
			switch (kind[i]) {
			case P_CTL:
				memset(&m, 0, sizeof(m));
				ctl_read(&m);
				if (m.type == FWD_OPENED)
					opened(&m);
				break;
			case P_UDP:
				if (slots[idx[i]].fd == p[i].fd)
					serve_query(idx[i]);
				break;
			case P_LISTEN:
				if (slots[idx[i]].tfd == p[i].fd)
					tconn_accept(idx[i]);
				break;
			case P_UPSTREAM:
				e = &pend[idx[i]];
				if (!e->used || e->sock != p[i].fd)
					break;
				if (e->tcp != -1)
					upstream_tcp(e, p[i].revents);
				else
					upstream_read(e);
				break;
			case P_TCONN:
				t = &tconns[idx[i]];
				if (t->fd != p[i].fd || t->busy)
					break;
				if (t->out != NULL)
					tconn_written(t);
				else
					tconn_read(t);
				break;
			}
		}
		pending_tick();
	}
}

int
dnsfwd_start(const struct fwd_cfg *c, pid_t *pidp)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		fatal("socketpair");
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid > 0) {
		close(sv[1]);
		*pidp = pid;
		return sv[0];
	}
	close(sv[0]);
	ctl = sv[1];
	cfg = c;
	for (unsigned i = 0; i < NETD_MAX_SLOTS; i++)
		slots[i].fd = slots[i].tfd = -1;
	for (unsigned i = 0; i < FWD_TCP_MAX; i++)
		tconns[i].fd = -1;
	signal(SIGTERM, SIG_IGN);	/* it ends when netd's end closes */
	signal(SIGINT, SIG_IGN);
	privdrop(&(struct privdrop){ .user = "nobody" });
	sandbox_seccomp(fwd_syscalls, sizeof(fwd_syscalls) /
	    sizeof(fwd_syscalls[0]), 0);
	log_debug("dns forwarder: ready");
	dnsfwd_main();
	_exit(0);
}
