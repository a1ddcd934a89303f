/*
 * netd's DNS forwarder, the child process; see dnsfwd.h.  It reads the
 * guests' queries and the upstream resolvers' answers, both untrusted
 * (dnsmsg.c parses them), and holds no privilege: netd alone touches
 * nftables, on the child's FWD_OPEN, and answers FWD_OPENED before the
 * child releases the answer to the guest.
 *
 * Queries are served one at a time, each waiting at most FWD_WAIT_MS for
 * an upstream answer and as long for netd.
 */
#include <sys/random.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
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

#define FWD_WAIT_MS	2000

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

/* Asks netd to open the addresses and waits for its word (handling its
 * other messages meanwhile).  1 when netd opened them. */
static int
open_addrs(unsigned slot, const uint32_t *addrs, const uint32_t *ttls,
    int n)
{
	static struct fwd_msg m, r;
	struct timespec end;

	memset(&m, 0, sizeof(m));
	m.type = FWD_OPEN;
	m.slot = slot;
	m.seq = ++seq;
	m.n = (uint32_t)n;
	for (int i = 0; i < n; i++) {
		m.addrs[i] = addrs[i];
		m.ttls[i] = ttls[i] < cfg->ttl_min ? cfg->ttl_min :
		    ttls[i] > cfg->ttl_max ? cfg->ttl_max : ttls[i];
	}
	if (ctl_send(&m) == -1)
		_exit(0);
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += FWD_WAIT_MS / 1000;
	for (;;) {
		struct pollfd p = { ctl, POLLIN, 0 };
		long left = ms_left(&end);

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return 0;
		memset(&r, 0, sizeof(r));
		r.type = 0;
		ctl_read(&r);
		if (r.type == FWD_OPENED && r.seq == m.seq)
			return r.ok == 1;
	}
}

/* The upstream's answer to query m (id replaced), or -1. */
static ssize_t
upstream(const uint8_t *m, size_t len, const struct dnsmsg_q *q,
    uint8_t *ans, uint32_t *addrs, uint32_t *ttls, int *naddrs)
{
	uint8_t out[DNSMSG_MAX];
	uint16_t id;

	memcpy(out, m, len);
	for (size_t i = 0; i < cfg->ndns; i++) {
		struct sockaddr_in sin;
		struct timespec end;
		int s;

		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			return -1;
		out[0] = (uint8_t)(id >> 8);
		out[1] = (uint8_t)id;
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons(53);
		sin.sin_addr.s_addr = htonl(cfg->dns[i]);
		if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
			return -1;
		if (connect(s, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
		    send(s, out, len, 0) != (ssize_t)len) {
			close(s);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &end);
		end.tv_sec += FWD_WAIT_MS / 1000;
		for (;;) {
			struct pollfd p = { s, POLLIN, 0 };
			long left = ms_left(&end);
			ssize_t n;
			int na;

			if (left <= 0 || poll(&p, 1, (int)left) <= 0)
				break;
			if ((n = recv(s, ans, DNSMSG_MAX, 0)) <= 0)
				break;
			if ((na = dnsmsg_answer(ans, (size_t)n, id, q, addrs,
			    ttls)) == -1)
				continue;	/* not the answer: wait on */
			close(s);
			*naddrs = na;
			return n;
		}
		close(s);
	}
	return -1;
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
	uint8_t m[DNSMSG_MAX], ans[DNSMSG_MAX];
	uint32_t addrs[DNSMSG_MAX_ADDRS], ttls[DNSMSG_MAX_ADDRS];
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	struct dnsmsg_q q;
	ssize_t n, an;
	int na = 0, ok = 0;

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
	} else if ((an = upstream(m, (size_t)n, &q, ans, addrs, ttls,
	    &na)) == -1) {
		n = (ssize_t)dnsmsg_refuse(m, &q, 2);	/* SERVFAIL */
	} else if (na > 0 && !open_addrs(slot, addrs, ttls, na)) {
		n = (ssize_t)dnsmsg_refuse(m, &q, 2);
	} else {
		ans[0] = m[0];	/* the guest's id back */
		ans[1] = m[1];
		memcpy(m, ans, (size_t)an);
		n = an;
	}
	(void)sendto(s->fd, m, (size_t)n, MSG_DONTWAIT,
	    (struct sockaddr *)&peer, plen);
}

static void
dnsfwd_main(void)
{
	struct pollfd p[NETD_MAX_SLOTS + 1];
	unsigned idx[NETD_MAX_SLOTS + 1];
	static struct fwd_msg m;

	for (;;) {
		nfds_t np = 0;

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
		if (poll(p, np, -1) == -1) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (nfds_t i = 0; i < np; i++) {
			if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0)
				continue;
			if (idx[i] == NETD_MAX_SLOTS)
				ctl_read(&m);
			else if (slots[idx[i]].fd == p[i].fd)
				serve_query(idx[i]);
		}
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
