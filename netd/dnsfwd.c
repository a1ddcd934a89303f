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
#define FWD_PENDING_MAX		64
#define FWD_PENDING_PER_SLOT	8

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
};

static struct pending pend[FWD_PENDING_MAX];

struct fwd_slot {
	int		 fd;		/* -1: no forwarder for the slot */
	size_t		 nnames;
	char		(*names)[DNSNAME_MAX + 1];
};

static struct fwd_slot slots[NETD_MAX_SLOTS];
static const struct fwd_cfg *cfg;
static int ctl = -1;
static uint32_t seq;

static const char *const fwd_syscalls[] = {
	"socket", "connect", "sendto", "recvfrom", "sendmsg", "recvmsg",
	"poll", "ppoll", "getrandom",
};

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
	FDMSG_BUF(cbuf, 1);
	int fd = -1;
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
	if (fdmsg_take(&msg, &fd, 1) == -1)
		_exit(1);
	if ((size_t)n != sizeof(*m) || m->slot >= NETD_MAX_SLOTS ||
	    m->n > EGRESS_MAX_NAMES) {
		if (fd != -1)
			close(fd);
		return;
	}
	switch (m->type) {
	case FWD_ADD: {
		struct fwd_slot *s = &slots[m->slot];

		if (fd == -1)
			return;
		if (s->fd != -1)
			close(s->fd);
		free(s->names);
		s->fd = fd;
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
		if (fd != -1)
			close(fd);
		if (slots[m->slot].fd != -1)
			close(slots[m->slot].fd);
		slots[m->slot].fd = -1;
		free(slots[m->slot].names);
		slots[m->slot].names = NULL;
		slots[m->slot].nnames = 0;
		return;
	default:
		if (fd != -1)
			close(fd);
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

/* Answers the guest with m (its own id put back) when its slot still has
 * a forwarder socket. */
static void
reply(unsigned slot, const struct sockaddr_in *peer, socklen_t plen,
    uint8_t *m, size_t len, const uint8_t *guest_id)
{
	if (slots[slot].fd == -1)
		return;
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
	p->used = 0;
}

/* SERVFAIL to the guest, and the entry ends. */
static void
pending_fail(struct pending *p)
{
	size_t n = dnsmsg_refuse(p->query, &p->q, 2);

	reply(p->slot, &p->peer, p->plen, p->query, n, p->query);
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
		if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, 0)) == -1)
			return -1;
		if (connect(s, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
		    send(s, out, p->qlen, 0) != (ssize_t)p->qlen) {
			close(s);
			continue;
		}
		p->sock = s;
		p->resolver = i;
		deadline_in(&p->deadline, FWD_WAIT_MS);
		return 0;
	}
	return -1;
}

/* Upstream said something: the answer, or a datagram to ignore. */
static void
upstream_read(struct pending *p)
{
	static struct fwd_msg m;
	uint32_t addrs[DNSMSG_MAX_ADDRS], ttls[DNSMSG_MAX_ADDRS];
	ssize_t n;
	int na;

	if ((n = recv(p->sock, p->ans, sizeof(p->ans), MSG_DONTWAIT)) <= 0)
		return;		/* the timeout decides */
	if ((na = dnsmsg_answer(p->ans, (size_t)n, p->id, &p->q, addrs,
	    ttls)) == -1)
		return;		/* not the answer: wait on */
	close(p->sock);
	p->sock = -1;
	p->alen = (size_t)n;
	if (na == 0) {
		reply(p->slot, &p->peer, p->plen, p->ans, p->alen, p->query);
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

/* netd's FWD_OPENED: the answer it waited for goes out, or SERVFAIL. */
static void
opened(const struct fwd_msg *m)
{
	for (size_t i = 0; i < FWD_PENDING_MAX; i++) {
		struct pending *p = &pend[i];

		if (!p->used || p->sock != -1 || p->seq != m->seq)
			continue;
		if (m->ok == 1 && m->slot == p->slot) {
			reply(p->slot, &p->peer, p->plen, p->ans, p->alen,
			    p->query);
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

static void
serve_query(unsigned slot)
{
	struct fwd_slot *s = &slots[slot];
	uint8_t m[DNSMSG_MAX];
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	struct dnsmsg_q q;
	struct pending *p = NULL;
	size_t mine = 0;
	ssize_t n;
	int ok = 0;

	if ((n = recvfrom(s->fd, m, sizeof(m), MSG_DONTWAIT,
	    (struct sockaddr *)&peer, &plen)) <= 0)
		return;
	if (dnsmsg_query(m, (size_t)n, &q) == -1)
		return;		/* not a query: no answer */
	if (q.name_ok)
		for (size_t i = 0; i < s->nnames && !ok; i++)
			ok = dnsname_match(s->names[i], q.name);
	if (!ok) {
		n = (ssize_t)dnsmsg_refuse(m, &q, 5);	/* REFUSED */
		refused(slot, &q);
		reply(slot, &peer, plen, m, (size_t)n, m);
		return;
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
		reply(slot, &peer, plen, m, (size_t)n, m);
		return;
	}
	memset(p, 0, sizeof(*p));
	p->used = 1;
	p->slot = slot;
	p->sock = -1;
	p->peer = peer;
	p->plen = plen;
	p->q = q;
	memcpy(p->query, m, (size_t)n);
	p->qlen = (size_t)n;
	if (ask_upstream(p, 0) == -1)
		pending_fail(p);
}

static void
dnsfwd_main(void)
{
	struct pollfd p[NETD_MAX_SLOTS + 1 + FWD_PENDING_MAX];
	unsigned idx[NETD_MAX_SLOTS + 1 + FWD_PENDING_MAX];
	static struct fwd_msg m;

	for (;;) {
		nfds_t np = 0;
		long wait = -1;

		p[np].fd = ctl;
		p[np].events = POLLIN;
		idx[np++] = NETD_MAX_SLOTS;
		for (unsigned i = 0; i < NETD_MAX_SLOTS; i++) {
			if (slots[i].fd == -1)
				continue;
			p[np].fd = slots[i].fd;
			p[np].events = POLLIN;
			idx[np++] = i;
		}
		/* idx past NETD_MAX_SLOTS: a pending entry's upstream. */
		for (unsigned i = 0; i < FWD_PENDING_MAX; i++) {
			long left;

			if (!pend[i].used)
				continue;
			left = ms_left(&pend[i].deadline);
			if (left < 0)
				left = 0;
			if (wait == -1 || left < wait)
				wait = left;
			if (pend[i].sock == -1)
				continue;
			p[np].fd = pend[i].sock;
			p[np].events = POLLIN;
			idx[np++] = NETD_MAX_SLOTS + 1 + i;
		}
		if (poll(p, np, wait > INT_MAX ? INT_MAX : (int)wait) == -1) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (nfds_t i = 0; i < np; i++) {
			if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0)
				continue;
			if (idx[i] == NETD_MAX_SLOTS) {
				memset(&m, 0, sizeof(m));
				ctl_read(&m);
				if (m.type == FWD_OPENED)
					opened(&m);
			} else if (idx[i] > NETD_MAX_SLOTS) {
				struct pending *e =
				    &pend[idx[i] - NETD_MAX_SLOTS - 1];

				if (e->used && e->sock == p[i].fd)
					upstream_read(e);
			} else if (slots[idx[i]].fd == p[i].fd)
				serve_query(idx[i]);
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
		slots[i].fd = -1;
	signal(SIGTERM, SIG_IGN);	/* it ends when netd's end closes */
	signal(SIGINT, SIG_IGN);
	privdrop(&(struct privdrop){ .user = "nobody" });
	sandbox_seccomp(fwd_syscalls, sizeof(fwd_syscalls) /
	    sizeof(fwd_syscalls[0]), 0);
	log_debug("dns forwarder: ready");
	dnsfwd_main();
	_exit(0);
}
