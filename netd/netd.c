/*
 * netd: makes and removes the VMs' networks for vmmd; see netd.h.  Starts
 * as root, keeps only CAP_NET_ADMIN and CAP_SYS_ADMIN (unshare, setns,
 * the netns bind mounts), NoNewPrivs and a seccomp allowlist, and serves
 * vmmd alone on netd.sock.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "conf.h"
#include "daemon.h"
#include "dnsfwd.h"
#include "fdmsg.h"
#include "log.h"
#include "netd.h"
#include "privdrop.h"
#include "request.h"
#include "sdnotify.h"

/*
 * The contract: whom netd serves, what it may be asked, what it keeps.
 *
 *   peer  socket     admitted (common/ipc_server.c, by the kernel's
 *                    SO_PEERCRED, before a byte is read)
 *   vmmd  netd.sock  the uid of [netd] vmmd_user alone
 *
 * vmmd's table of message types and its handler follow; a frame of
 * another type closes that connection (common/ipc.c).  The handler
 * decodes each body into a struct netd_request (request.c), slot numbers
 * only: netd derives every name and address from the slot itself, and
 * re-validates vmmd's requests as if vmmd were hostile.  netd asks
 * nothing of vmmd; it answers with the netns and TAP descriptors.
 * Beyond vmmd it speaks only to the kernel (rtnetlink through libnl,
 * nftables through libnftables), on objects named mcpvm alone.
 *
 * Privileges: starts as root and keeps netd_caps (CAP_NET_ADMIN for
 * links, addresses, routes and rulesets; CAP_SYS_ADMIN for unshare,
 * setns and the netns bind mounts; CAP_NET_BIND_SERVICE for the DNS
 * forwarder's port 53 in a slot's netns), root's uid, NoNewPrivs.
 * The DNS forwarder (dnsfwd.c) is forked first and runs as nobody with
 * no capabilities and a seccomp allowlist of its own; it asks netd, over
 * a socketpair, only to open addresses in a slot's set allow4.  Seccomp:
 * common/privdrop.c's base allowlist and netd_syscalls below.
 */
static const struct ipc_rule vmmd_rules[] = {
	{ IPC_NET_SYNC, 0 },
	{ IPC_NET_SETUP, 0 },
	{ IPC_NET_TEARDOWN, 0 },
	{ IPC_NET_STATUS, 0 },
	{ IPC_NET_EGRESS, 0 },
	{ IPC_NET_COUNTERS, 0 },
};
static const struct ipc_policy vmmd_policy = {
	"vmmd", vmmd_rules, sizeof(vmmd_rules) / sizeof(vmmd_rules[0]),
};
static void netd_dispatch_vmmd(struct ipc_conn *, struct ipc_msg *, void *);
static void netd_closed_vmmd(struct ipc_conn *, void *);
static int egress_apply(unsigned, const struct egress *, uint64_t,
    struct nft_drops *, char *, size_t);
static const struct ipc_handlers vmmd_handlers = {
	.dispatch = netd_dispatch_vmmd,
	.closed = netd_closed_vmmd,
};

static const cap_value_t netd_caps[] = { CAP_NET_ADMIN, CAP_SYS_ADMIN,
	CAP_NET_BIND_SERVICE };

/* Namespaces, TAPs, bind mounts and libnftables on top of the base. */
static const char *const netd_syscalls[] = {
	"openat", "ioctl", "unshare", "setns", "mount", "umount2",
	"unlink", "unlinkat", "getdents64", "access", "faccessat",
	"faccessat2", "readlink", "readlinkat", "getcwd", "sysinfo",
	"wait4",
};

struct netd *netd;

#define RULESET_MAX	(64 * 1024)

static const struct ipc_policy *
netd_accept(const struct ucred *cred, void *arg)
{
	return &vmmd_policy;	/* the admission list is vmmd's uid */
}

/* netd.sock, with the contract's admission list. */
static struct ipc_server *
netd_listen(const char *path)
{
	struct ipc_admit admit = { 0 };
	struct ipc_server *srv;

	(void)ipc_admit_uid(&admit, netd->vmmd_uid);
	snprintf(admit.need, sizeof(admit.need), "not vmmd's uid %u",
	    (unsigned)netd->vmmd_uid);
	if ((srv = ipc_server_new(netd->base, path, 0666, "netd",
	    netd_accept, &vmmd_handlers, NULL)) == NULL)
		fatal("listen on %s", path);
	ipc_server_set_admit(srv, &admit);
	return srv;
}

static void
on_signal(int sig, short ev, void *arg)
{
	log_info("signal %d: shutting down, leaving the VMs' networks in "
	    "place", sig);
	event_base_loopexit(netd->base, NULL);
}

static void
fmt_ip(char *buf, size_t len, uint32_t a)
{
	snprintf(buf, len, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff,
	    (a >> 8) & 0xff, a & 0xff);
}

static struct json_object *
jip(uint32_t a)
{
	char b[16];

	fmt_ip(b, sizeof(b), a);
	return json_object_new_string(b);
}

static struct json_object *
jcidr(const struct cidr *c)
{
	char b[24];

	fmt_ip(b, sizeof(b), c->addr);
	snprintf(b + strlen(b), sizeof(b) - strlen(b), "/%u", c->len);
	return json_object_new_string(b);
}

/*
 * Chains of other tables that hook forward with policy drop, which would
 * drop the guests' traffic before or after netd's rules pass it (e.g.
 * iptables-nft's FORWARD).  The first one as "family table chain".
 */
static int
forward_drop(char *where, size_t len)
{
	char *out, *line, *save, table[96] = "";
	int found = 0;

	if ((out = nft_list(netd->host_nft, "list chains")) == NULL)
		return 0;
	for (line = strtok_r(out, "\n", &save); line != NULL && !found;
	    line = strtok_r(NULL, "\n", &save)) {
		char fam[16], name[64];

		while (*line == '\t' || *line == ' ')
			line++;
		if (sscanf(line, "table %15s %63s", fam, name) == 2)
			snprintf(table, sizeof(table), "%s %s", fam, name);
		else if (strncmp(line, "chain ", 6) == 0 &&
		    sscanf(line, "chain %63s", name) == 1)
			snprintf(where, len, "%s %s", table, name);
		else if (strstr(line, "hook forward") != NULL &&
		    strstr(line, "policy drop") != NULL &&
		    strstr(table, "mcpvm") == NULL)
			found = 1;
	}
	free(out);
	if (!found)
		where[0] = '\0';
	return found;
}

/*
 * The host's side: netd's own table, plus, when another table's forward
 * chain drops by policy, two accept rules there for netd's interfaces
 * alone, marked so that netd removes exactly them.
 */
static int
host_table_ensure(char *err, size_t errlen)
{
	struct nft_host_spec hs = { netd->uplink, netd->host_range.addr,
	    netd->guest_range.addr };
	char *text, where[160];
	int n;

	if (netd->host_table)
		return 0;
	if ((text = malloc(RULESET_MAX)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if ((n = nft_build_host(&hs, text, RULESET_MAX)) < 0) {
		snprintf(err, errlen, "host ruleset: bad inputs");
		free(text);
		return -1;
	}
	if (forward_drop(where, sizeof(where))) {
		snprintf(text + n, RULESET_MAX - (size_t)n,
		    "insert rule %s iifname \"mcpvm-*\" oifname \"%s\" accept "
		    "comment \"mcpvm-netd\"\n"
		    "insert rule %s iifname \"%s\" oifname \"mcpvm-*\" ct state "
		    "{ established, related } accept comment \"mcpvm-netd\"\n",
		    where, netd->uplink, where, netd->uplink);
		snprintf(netd->fwd_chain, sizeof(netd->fwd_chain), "%s",
		    where);
		log_info("host chain %s drops forwarded traffic: adding two "
		    "accept rules for mcpvm-* <-> %s", where, netd->uplink);
	}
	if (nft_apply(netd->host_nft, text, err, errlen) == -1) {
		netd->fwd_chain[0] = '\0';
		free(text);
		return -1;
	}
	free(text);
	netd->host_table = 1;
	return 0;
}

/*
 * Removes every rule netd put in another table's chain, wherever it is
 * (a netd killed with -9 leaves them; its owned table goes by itself).
 */
static void
fwd_rules_purge(void)
{
	char err[512], cmd[512], chain[240] = "", table[160] = "";
	char *out, *line, *save, *h;

	if ((out = nft_list_handles(netd->host_nft, "list ruleset")) == NULL)
		return;
	for (line = strtok_r(out, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char fam[16], name[64];
		unsigned long handle;

		while (*line == '\t' || *line == ' ')
			line++;
		if (sscanf(line, "table %15s %63s", fam, name) == 2)
			snprintf(table, sizeof(table), "%s %s", fam, name);
		else if (sscanf(line, "chain %63s", name) == 1)
			snprintf(chain, sizeof(chain), "%s %s", table, name);
		else if (strstr(line, "comment \"mcpvm-netd\"") != NULL &&
		    (h = strstr(line, "# handle ")) != NULL &&
		    sscanf(h, "# handle %lu", &handle) == 1) {
			snprintf(cmd, sizeof(cmd), "delete rule %s handle %lu",
			    chain, handle);
			if (nft_apply(netd->host_nft, cmd, err,
			    sizeof(err)) == -1)
				log_warnx("%s: %s", cmd, err);
			else
				log_debug("%s", cmd);
		}
	}
	free(out);
}

static void
host_table_remove(void)
{
	char err[512];

	if (!netd->host_table)
		return;
	if (netd->fwd_chain[0] != '\0') {
		fwd_rules_purge();
		netd->fwd_chain[0] = '\0';
	}
	if (nft_apply(netd->host_nft, "delete table ip " NETD_HOST_TABLE,
	    err, sizeof(err)) == -1)
		log_warnx("host table " NETD_HOST_TABLE ": %s", err);
	netd->host_table = 0;
}

/* Room for the "add element" of every host address netd lists. */
#define HOSTADDRS_TEXT_MAX	(128 + NETD_MAX_HOSTADDRS * 17)

/*
 * One transaction in the slot's netns.  With tag, when the netns already
 * has the slot's ruleset of that tag, alt goes in instead of text and
 * *same is 1.
 */
static int
ns_apply(unsigned slot, const char *text, const char *tag, const char *alt,
    int *same, char *err, size_t errlen)
{
	struct nft_ctx *ctx;
	int rc = -1;

	if (same != NULL)
		*same = 0;
	if (link_enter(&netd->lc, slot) == -1) {
		snprintf(err, errlen, "netns: %s", strerror(errno));
		return -1;
	}
	/* Created in the netns, so its socket talks to the netns. */
	if ((ctx = nft_open()) == NULL)
		snprintf(err, errlen, "libnftables: cannot make a context");
	else {
		if (tag != NULL && nft_vm_has(ctx, slot, tag)) {
			text = alt;
			*same = 1;
		}
		rc = nft_apply(ctx, text, err, errlen);
		nft_close(ctx);
	}
	link_leave(&netd->lc);
	return rc;
}

/*
 * The VM's ruleset, applied inside its netns.  With keep, a ruleset
 * already there with the same tag stays, and with it the counts of its
 * connection limits (only its host addresses are brought up to date);
 * *replaced says which happened.
 */
static int
vm_rules_apply(unsigned slot, int keep, const struct egress *eg,
    uint64_t rate, int *replaced, char *err, size_t errlen)
{
	struct nft_vm_spec vs;
	uint32_t hostaddrs[NETD_MAX_HOSTADDRS];
	size_t nh;
	char *text, tag[64], alt[HOSTADDRS_TEXT_MAX];
	int n, rc, same;

	if (link_host_addrs(hostaddrs, NETD_MAX_HOSTADDRS, &nh) == -1) {
		snprintf(err, errlen, "listing the host's addresses failed");
		return -1;
	}
	memset(&vs, 0, sizeof(vs));
	vs.slot = slot;
	vs.host_base = netd->host_range.addr;
	vs.guest_base = netd->guest_range.addr;
	netd_guest_mac(slot, vs.mac);
	vs.blocked = netd->blocked;
	vs.nblocked = netd->nblocked;
	vs.hostaddrs = hostaddrs;
	vs.nhostaddrs = nh;
	vs.ct_max = netd->ct_max;
	vs.ct_rate = netd->ct_rate;
	if ((text = malloc(RULESET_MAX)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if ((n = nft_build_vm(&vs, text, RULESET_MAX)) < 0 ||
	    nft_vm_tag(text, tag, sizeof(tag)) == -1 ||
	    (eg != NULL && nft_build_egress(slot, eg, rate, NULL, text + n,
	    RULESET_MAX - (size_t)n) < 0) ||
	    nft_build_hostaddrs(slot, hostaddrs, nh, alt, sizeof(alt)) < 0) {
		snprintf(err, errlen, "ruleset: bad inputs");
		free(text);
		return -1;
	}
	rc = ns_apply(slot, text, keep ? tag : NULL, alt, &same, err, errlen);
	*replaced = !same;
	free(text);
	/* A new egress table has an empty allow4. */
	if (eg != NULL)
		memset(netd->opened[slot], 0, sizeof(netd->opened[slot]));
	return rc;
}

/* The slot's set of host addresses, replaced in its netns. */
static int
hostaddrs_apply(unsigned slot, const uint32_t *a, size_t n, char *err,
    size_t errlen)
{
	char text[HOSTADDRS_TEXT_MAX];

	if (nft_build_hostaddrs(slot, a, n, text, sizeof(text)) < 0) {
		snprintf(err, errlen, "host addresses: bad inputs");
		return -1;
	}
	return ns_apply(slot, text, NULL, NULL, NULL, err, errlen);
}

/*
 * When the host's addresses differ from what the slots' sets hold, every
 * slot in slots gets them: an address the host gains is out of the
 * guests' reach as soon as netd hears of it.
 */
static void
hostaddrs_refresh(const unsigned char slots[NETD_MAX_SLOTS])
{
	uint32_t a[NETD_MAX_HOSTADDRS];
	size_t n, nslots = 0;
	char err[512];

	if (link_host_addrs(a, NETD_MAX_HOSTADDRS, &n) == -1) {
		log_warnx("listing the host's addresses failed; the VMs keep "
		    "the ones they have");
		return;
	}
	if (n == netd->nhostaddrs && memcmp(a, netd->hostaddrs,
	    n * sizeof(a[0])) == 0)
		return;
	memcpy(netd->hostaddrs, a, n * sizeof(a[0]));
	netd->nhostaddrs = n;
	for (unsigned s = 0; s < NETD_MAX_SLOTS; s++) {
		if (!slots[s])
			continue;
		if (hostaddrs_apply(s, a, n, err, sizeof(err)) == -1)
			log_warnx("slot %u: host addresses: %s", s, err);
		else
			nslots++;
	}
	log_info("the host has %zu address%s: %zu network%s updated", n,
	    n == 1 ? "" : "es", nslots, nslots == 1 ? "" : "s");
}

static void
on_addr_event(int fd, short ev, void *arg)
{
	if (link_addr_events(netd->addr_sk))
		hostaddrs_refresh(netd->live);
}

static void
vm_rules_delete(unsigned slot)
{
	struct nft_ctx *ctx;
	char text[512], err[512];

	if (nft_build_vm_delete(slot, text, sizeof(text)) < 0 ||
	    link_enter(&netd->lc, slot) == -1)
		return;
	if ((ctx = nft_open()) != NULL) {
		if (nft_apply(ctx, text, err, sizeof(err)) == -1)
			log_warnx("slot %u: deleting its tables: %s", slot,
			    err);
		nft_close(ctx);
	}
	link_leave(&netd->lc);
}

/* ---- the DNS forwarder's side in netd -------------------------------- */

/* m to the forwarder with nfds descriptors (0 to 2). */
static int
fwd_send(const struct fwd_msg *m, const int *fds, size_t nfds)
{
	struct msghdr msg;
	struct iovec iov = { (void *)m, sizeof(*m) };
	FDMSG_BUF(cbuf, 2);

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (nfds > 0)
		fdmsg_attach(&msg, cbuf.buf, sizeof(cbuf.buf), fds, nfds);
	return sendmsg(netd->fwd_fd, &msg, MSG_NOSIGNAL) ==
	    (ssize_t)sizeof(*m) ? 0 : -1;
}

static void
fwd_forget(unsigned slot)
{
	static struct fwd_msg m;

	if (!netd->fwd[slot])
		return;
	memset(&m, 0, sizeof(m));
	m.type = FWD_DEL;
	m.slot = slot;
	if (fwd_send(&m, NULL, 0) == -1)
		log_warn("slot %u: telling the dns forwarder", slot);
	netd->fwd[slot] = 0;
}

/* A socket of type on sin, reusable by the next (SO_REUSEPORT). */
static int
fwd_socket(int type, const struct sockaddr_in *sin)
{
	int s, one = 1;

	if ((s = socket(AF_INET, type | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one,
	    sizeof(one)) == -1 ||
	    bind(s, (const struct sockaddr *)sin, sizeof(*sin)) == -1 ||
	    ((type & SOCK_STREAM) && listen(s, FWD_TCP_BACKLOG) == -1)) {
		close(s);
		return -1;
	}
	return s;
}

/*
 * The slot's forwarder: a UDP socket and a TCP listener on its gateway's
 * port 53, made in its netns and handed with the allowed names to the
 * forwarder.  Again for a slot that has one (a live policy change): the
 * forwarder takes the new sockets and names in place of the old, and
 * SO_REUSEPORT lets the new sockets bind while the old are still open.
 */
static int
fwd_add(unsigned slot, const struct egress *eg, char *err, size_t errlen)
{
	static struct fwd_msg m;
	struct sockaddr_in sin;
	int s[2];

	if (link_enter(&netd->lc, slot) == -1) {
		snprintf(err, errlen, "netns: %s", strerror(errno));
		return -1;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(53);
	sin.sin_addr.s_addr = htonl(netd->guest_range.addr | slot << 8 | 1);
	s[1] = -1;
	if ((s[0] = fwd_socket(SOCK_DGRAM, &sin)) == -1 ||
	    (s[1] = fwd_socket(SOCK_STREAM | SOCK_NONBLOCK, &sin)) == -1) {
		snprintf(err, errlen, "dns forwarder socket: %s",
		    strerror(errno));
		if (s[0] != -1)
			close(s[0]);
		link_leave(&netd->lc);
		return -1;
	}
	link_leave(&netd->lc);
	memset(&m, 0, sizeof(m));
	m.type = FWD_ADD;
	m.slot = slot;
	m.deny = eg->mode == EGRESS_PUBLIC;
	m.n = (uint32_t)eg->nnames;
	for (size_t i = 0; i < eg->nnames; i++)
		memcpy(m.names[i], eg->names[i], sizeof(m.names[i]));
	if (fwd_send(&m, s, 2) == -1) {
		snprintf(err, errlen, "dns forwarder: %s", strerror(errno));
		close(s[0]);
		close(s[1]);
		return -1;
	}
	close(s[0]);
	close(s[1]);
	netd->fwd[slot] = m.deny ? FWD_DENYING : FWD_ALLOWING;
	return 0;
}

/* The forwarder asks to open addresses; netd checks and does it. */
static void
fwd_open(const struct fwd_msg *m)
{
	static struct fwd_msg r;
	uint32_t a[DNSMSG_MAX_ADDRS], t[DNSMSG_MAX_ADDRS];
	char text[4096], err[512];
	struct netd_opened *op;
	struct timespec now;
	size_t n = 0;

	memset(&r, 0, sizeof(r));
	r.type = FWD_OPENED;
	r.slot = m->slot;
	r.seq = m->seq;
	/* A public slot's forwarder has nothing to open. */
	if (m->n == 0 || m->n > DNSMSG_MAX_ADDRS ||
	    netd->fwd[m->slot] != FWD_ALLOWING)
		goto reply;
	clock_gettime(CLOCK_MONOTONIC, &now);
	op = netd->opened[m->slot];
	for (uint32_t i = 0; i < m->n; i++) {
		size_t j;
		uint32_t ttl = m->ttls[i];

		/* Re-checked: the child is not trusted with the bounds. */
		ttl = ttl < netd->ttl_min ? netd->ttl_min :
		    ttl > netd->ttl_max ? netd->ttl_max : ttl;
		/*
		 * Open for this TTL more already: nothing to do.  (A
		 * recursive resolver's cached answers count down, so asking
		 * again for a name mostly lands here.)
		 */
		for (j = 0; j < NETD_OPENED_KEEP; j++)
			if (op[j].addr == m->addrs[i] &&
			    op[j].until - now.tv_sec >= (time_t)ttl)
				break;
		if (j < NETD_OPENED_KEEP)
			continue;
		for (j = 0; j < n; j++)
			if (a[j] == m->addrs[i])
				break;
		if (j < n) {
			if (ttl > t[j])
				t[j] = ttl;
			continue;
		}
		a[n] = m->addrs[i];
		t[n++] = ttl;
	}
	if (n == 0) {
		r.ok = 1;
		goto reply;
	}
	if (nft_build_allow4(m->slot, a, t, n, text, sizeof(text)) < 0 ||
	    ns_apply(m->slot, text, NULL, NULL, NULL, err, sizeof(err)) == -1) {
		log_warnx("slot %u: opening %zu resolved address%s: %s",
		    m->slot, n, n == 1 ? "" : "es", err);
		goto reply;
	}
	r.ok = 1;
	for (size_t i = 0; i < n; i++) {
		size_t j, oldest = 0;

		/* Its entry, or else the one that ends first. */
		for (j = 0; j < NETD_OPENED_KEEP; j++) {
			if (op[j].addr == a[i])
				break;
			if (op[j].until < op[oldest].until)
				oldest = j;
		}
		if (j == NETD_OPENED_KEEP)
			j = oldest;
		op[j].addr = a[i];
		op[j].until = now.tv_sec + (time_t)t[i];
	}
reply:
	if (fwd_send(&r, NULL, 0) == -1)
		log_warn("dns forwarder: reply");
}

/* A refused name: kept (the last few) and counted; logged at most once a
 * second per slot, with how many went unlogged. */
static void
fwd_refused(const struct fwd_msg *m)
{
	struct netd_refused *r = &netd->refused[m->slot];
	char name[DNSNAME_MAX + 2];
	time_t now = time(NULL);

	if (!netd->fwd[m->slot])
		return;
	snprintf(name, sizeof(name), "%s", m->name);
	for (char *p = name; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	r->count++;
	snprintf(r->last[r->next], sizeof(r->last[0]), "%s", name);
	r->next = (r->next + 1) % NETD_REFUSED_KEEP;
	if (r->logged == now) {
		r->unlogged++;
		return;
	}
	log_info("slot %u: dns: refused %s (%s; %llu more since the last "
	    "line)", m->slot, name, netd->fwd[m->slot] == FWD_DENYING ?
	    "its policy denies it" : "not in its allowlist",
	    (unsigned long long)r->unlogged);
	r->logged = now;
	r->unlogged = 0;
}

static void
on_fwd(int fd, short ev, void *arg)
{
	static struct fwd_msg m;
	ssize_t n;

	n = recv(fd, &m, sizeof(m), MSG_DONTWAIT);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n != (ssize_t)sizeof(m) || m.slot >= NETD_MAX_SLOTS) {
		if (n <= 0)
			fatalx("the dns forwarder has gone");
		log_warnx("dns forwarder: a malformed message");
		return;
	}
	m.name[sizeof(m.name) - 1] = '\0';
	if (m.type == FWD_OPEN)
		fwd_open(&m);
	else if (m.type == FWD_REFUSED)
		fwd_refused(&m);
	else
		log_warnx("dns forwarder: message type %u", m.type);
}

static int
slot_teardown(unsigned slot, char *err, size_t errlen)
{
	int rc;

	fwd_forget(slot);
	/* The next VM in the slot starts its refused names afresh; a
	 * policy change keeps them counting. */
	memset(&netd->refused[slot], 0, sizeof(netd->refused[slot]));
	memset(netd->opened[slot], 0, sizeof(netd->opened[slot]));
	vm_rules_delete(slot);
	rc = link_teardown(&netd->lc, slot, err, errlen);
	if (netd->live[slot]) {
		netd->live[slot] = 0;
		netd->nlive--;
	}
	if (netd->nlive == 0)
		host_table_remove();
	return rc;
}

/* Why networking cannot be set up now, or NULL. */
static const char *
unavailable(char *why, size_t len)
{
	if (netd->uplink[0] == '\0')
		return "guest networking is not configured on this host "
		    "([netd] uplink is empty)";
	if (!link_host_has(netd->uplink)) {
		snprintf(why, len, "[netd] uplink %s does not exist",
		    netd->uplink);
		return why;
	}
	if (link_ip_forward() != 1)
		return "IPv4 forwarding is off on the host (sysctl "
		    "net.ipv4.ip_forward=1 is the operator's to set)";
	return NULL;
}

static const char *
rate_text(uint64_t rate, char *buf, size_t len)
{
	if (rate == 0)
		return "unlimited";
	snprintf(buf, len, "%llu bytes/s", (unsigned long long)rate);
	return buf;
}

static void
do_setup(struct ipc_conn *c, uint32_t id, unsigned slot,
    const struct egress *eg, uint64_t rate)
{
	struct json_object *o, *dns;
	uint8_t mac[6];
	char err[1024], why[128], macs[24], egs[64], rates[32];
	const char *u;
	uint32_t gnet = netd->guest_range.addr | slot << 8;
	int tap, replaced;

	if ((u = unavailable(why, sizeof(why))) != NULL) {
		ipc_reply_error(c, id, "unavailable", "%s", u);
		return;
	}
	if (netd->live[slot] || link_exists(&netd->lc, slot)) {
		ipc_reply_error(c, id, "conflict", "slot %u already has a "
		    "network; tear it down first", slot);
		return;
	}
	if (host_table_ensure(err, sizeof(err)) == -1) {
		log_warnx("slot %u: host table: %s", slot, err);
		ipc_reply_error(c, id, "internal", "netd could not set up the "
		    "host's table (see netd's log)");
		return;
	}
	if (link_setup(&netd->lc, slot, &tap, err, sizeof(err)) == -1) {
		log_warnx("slot %u: setup: %s", slot, err);
		if (netd->nlive == 0)
			host_table_remove();
		ipc_reply_error(c, id, "internal", "slot %u: network setup "
		    "failed (see netd's log)", slot);
		return;
	}
	/* The VM's table and its egress one in one transaction: the guest
	 * never has a moment under the first alone. */
	if (vm_rules_apply(slot, 0, eg, rate, &replaced, err,
	    sizeof(err)) == -1) {
		log_warnx("slot %u: ruleset: %s", slot, err);
		close(tap);
		slot_teardown(slot, err, sizeof(err));
		ipc_reply_error(c, id, "internal", "slot %u: network policy "
		    "failed (see netd's log)", slot);
		return;
	}
	/* Every networked slot's one resolver: its forwarder. */
	if (fwd_add(slot, eg, err, sizeof(err)) == -1) {
		log_warnx("slot %u: %s", slot, err);
		close(tap);
		slot_teardown(slot, err, sizeof(err));
		ipc_reply_error(c, id, "internal", "slot %u: its dns "
		    "forwarder failed (see netd's log)", slot);
		return;
	}
	netd->live[slot] = 1;
	netd->nlive++;
	netd_guest_mac(slot, mac);
	snprintf(macs, sizeof(macs), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0],
	    mac[1], mac[2], mac[3], mac[4], mac[5]);
	o = json_object_new_object();
	json_object_object_add(o, "slot", json_object_new_int((int)slot));
	json_object_object_add(o, "mac", json_object_new_string(macs));
	json_object_object_add(o, "address", jip(gnet | 2));
	json_object_object_add(o, "prefix", json_object_new_int(30));
	json_object_object_add(o, "gateway", jip(gnet | 1));
	dns = json_object_new_array();
	json_object_array_add(dns, jip(gnet | 1));	/* its forwarder */
	json_object_object_add(o, "dns", dns);
	egress_describe(eg, egs, sizeof(egs));
	log_info("slot %u: network up, guest %u.%u.%u.2, egress %s, rate %s",
	    slot, gnet >> 24, (gnet >> 16) & 0xff, (gnet >> 8) & 0xff, egs,
	    rate_text(rate, rates, sizeof(rates)));
	if (ipc_reply(c, IPC_NET_SETUP_RESULT, id, o, tap) == -1)
		log_warnx("slot %u: reply failed; vmmd's sync will remove it",
		    slot);
	json_object_put(o);
}

static void
do_teardown(struct ipc_conn *c, uint32_t id, unsigned slot)
{
	struct json_object *o;
	char err[512];

	if (slot_teardown(slot, err, sizeof(err)) == -1) {
		log_warnx("slot %u: teardown: %s", slot, err);
		ipc_reply_error(c, id, "internal", "slot %u: teardown failed "
		    "(see netd's log)", slot);
		return;
	}
	log_info("slot %u: network removed", slot);
	o = json_object_new_object();
	json_object_object_add(o, "slot", json_object_new_int((int)slot));
	ipc_reply(c, IPC_NET_TEARDOWN_RESULT, id, o, -1);
	json_object_put(o);
}

/*
 * vmmd's list of live networks: every mcpvm object of another slot is an
 * orphan (a VM that died with netd or vmmd down) and goes; the listed
 * ones that exist are kept and get their ruleset re-applied, and those
 * whose policy came too get it (egress_apply): their egress table anew
 * and their forwarder, which a restarted netd has not.  A kept slot
 * without a policy keeps its egress table and has no forwarder: its
 * guest resolves nothing, rather than more than its policy allows.
 */
static void
do_sync(struct ipc_conn *c, uint32_t id, const struct netd_request *req)
{
	static struct netd_request one;
	unsigned char have[NETD_MAX_SLOTS], keep[NETD_MAX_SLOTS];
	struct json_object *o, *kept, *removed, *missing;
	struct nft_drops d;
	char err[1024];
	int replaced;

	if (link_list(&netd->lc, have) == -1) {
		ipc_reply_error(c, id, "internal", "listing netd's objects "
		    "failed");
		return;
	}
	kept = json_object_new_array();
	removed = json_object_new_array();
	missing = json_object_new_array();
	memset(keep, 0, sizeof(keep));
	for (unsigned s = 0; s < NETD_MAX_SLOTS; s++) {
		if ((have[s] || netd->live[s]) && !req->slots[s]) {
			if (slot_teardown(s, err, sizeof(err)) == -1)
				log_warnx("slot %u: orphan: %s", s, err);
			else
				log_info("slot %u: removed an orphan network",
				    s);
			json_object_array_add(removed,
			    json_object_new_int((int)s));
		} else if (req->slots[s] && !have[s])
			json_object_array_add(missing,
			    json_object_new_int((int)s));
		else if (req->slots[s]) {
			if (host_table_ensure(err, sizeof(err)) == -1 ||
			    vm_rules_apply(s, 1, NULL, 0, &replaced, err,
			    sizeof(err)) == -1) {
				log_warnx("slot %u: keeping: %s", s, err);
				json_object_array_add(missing,
				    json_object_new_int((int)s));
				continue;
			}
			if (replaced)
				log_info("slot %u: ruleset replaced; its "
				    "connection counts start again", s);
			if (!netd->live[s]) {
				netd->live[s] = 1;
				netd->nlive++;
			}
			keep[s] = 1;
			json_object_array_add(kept,
			    json_object_new_int((int)s));
		}
	}
	for (size_t i = 0; req->policies != NULL &&
	    i < json_object_array_length(req->policies); i++) {
		/* Decoded before (netd_request_decode): cannot fail. */
		if (netd_request_decode(IPC_NET_EGRESS,
		    json_object_array_get_idx(req->policies, i),
		    netd->max_slots, &one, err, sizeof(err)) == -1 ||
		    !keep[one.slot])
			continue;
		if (egress_apply(one.slot, &one.egress, one.rate, &d, err,
		    sizeof(err)) == -1)
			log_warnx("slot %u: sync: its egress policy was not "
			    "applied; its table holds: %s", one.slot, err);
	}
	if (netd->nlive == 0)
		host_table_remove();
	o = json_object_new_object();
	json_object_object_add(o, "kept", kept);
	json_object_object_add(o, "removed", removed);
	json_object_object_add(o, "missing", missing);
	ipc_reply(c, IPC_NET_SYNC_RESULT, id, o, -1);
	json_object_put(o);
}

/* The slot's drop counters, read in its netns; -1 when it has none. */
static int
slot_drops(struct nft_ctx *ctx, struct nft_drops *d)
{
	char *out;

	memset(d, 0, sizeof(*d));
	if ((out = nft_list(ctx, "list counters")) == NULL)
		return -1;
	nft_drops_parse(out, d);
	free(out);
	return 0;
}

static struct json_object *
jcount(const struct nft_count *c)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "packets",
	    json_object_new_int64((int64_t)(c->packets & INT64_MAX)));
	json_object_object_add(o, "bytes",
	    json_object_new_int64((int64_t)(c->bytes & INT64_MAX)));
	return o;
}

/* The slot's last refused names, oldest first. */
static struct json_object *
jrefused_last(unsigned s)
{
	struct netd_refused *r = &netd->refused[s];
	struct json_object *last = json_object_new_array();

	for (unsigned i = 0; i < NETD_REFUSED_KEEP; i++) {
		const char *n = r->last[(r->next + i) % NETD_REFUSED_KEEP];

		if (*n != '\0')
			json_object_array_add(last, json_object_new_string(n));
	}
	return last;
}

static struct json_object *
jdrops(unsigned slot, const struct nft_drops *d)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "slot", json_object_new_int((int)slot));
	json_object_object_add(o, "egress", jcount(&d->egress));
	json_object_object_add(o, "bandwidth", jcount(&d->bandwidth));
	json_object_object_add(o, "conn_rate", jcount(&d->conn_rate));
	json_object_object_add(o, "conn_count", jcount(&d->conn_count));
	/* Names its forwarder refused: a count and the last few. */
	json_object_object_add(o, "dns_refused", json_object_new_int64(
	    (int64_t)(netd->refused[slot].count & INT64_MAX)));
	json_object_object_add(o, "dns_refused_last", jrefused_last(slot));
	return o;
}

/*
 * A live slot's egress policy and rate: its egress table replaced in one
 * transaction, its drop counts (into d) read first and carried into the
 * new table, then its forwarder given the new view (or, for a restarted
 * netd, made again).  0, or
 * -1 with err when the old table holds.
 */
static int
egress_apply(unsigned slot, const struct egress *eg, uint64_t rate,
    struct nft_drops *d, char *err, size_t errlen)
{
	struct nft_ctx *ctx = NULL;
	char *text, fwderr[512], egs[64], rates[32];
	int rc = -1;

	if ((text = malloc(RULESET_MAX)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (link_enter(&netd->lc, slot) == -1) {
		snprintf(err, errlen, "netns: %s", strerror(errno));
		free(text);
		return -1;
	}
	if ((ctx = nft_open()) == NULL)
		snprintf(err, errlen, "libnftables: cannot make a context");
	else if (slot_drops(ctx, d) == -1)
		snprintf(err, errlen, "listing its counters failed");
	else if (nft_build_egress(slot, eg, rate, d, text, RULESET_MAX) < 0)
		snprintf(err, errlen, "ruleset: bad inputs");
	else
		rc = nft_apply(ctx, text, err, errlen);
	nft_close(ctx);
	link_leave(&netd->lc);
	free(text);
	/* The new table's allow4 is empty (and the old one's is whole only
	 * if this failed, when forgetting costs one re-add). */
	memset(netd->opened[slot], 0, sizeof(netd->opened[slot]));
	if (rc == -1)
		return -1;	/* a transaction is all or nothing */
	/*
	 * The forwarder, the guest's one resolver since its setup, takes
	 * the new view in place (fwd_add replaces it), so the guest's next
	 * query meets it.  One that cannot take it is stopped: its names
	 * are no longer answered, never answered wider.
	 */
	if (fwd_add(slot, eg, fwderr, sizeof(fwderr)) == -1) {
		log_warnx("slot %u: egress: %s; its names are no longer "
		    "answered", slot, fwderr);
		fwd_forget(slot);
	}
	egress_describe(eg, egs, sizeof(egs));
	log_info("slot %u: egress now %s, rate %s", slot, egs,
	    rate_text(rate, rates, sizeof(rates)));
	return 0;
}

/*
 * A running VM's new egress policy and rate (egress_apply), so the
 * guest's next packet meets the new rules (netd answers after the kernel
 * took them); the drops between reading the counts and the new table
 * (microseconds) are the only ones lost.
 */
static void
do_egress(struct ipc_conn *c, uint32_t id, unsigned slot,
    const struct egress *eg, uint64_t rate)
{
	struct json_object *o;
	struct nft_drops d;
	char err[1024];

	if (!netd->live[slot]) {
		ipc_reply_error(c, id, "not_found", "slot %u has no network",
		    slot);
		return;
	}
	if (egress_apply(slot, eg, rate, &d, err, sizeof(err)) == -1) {
		log_warnx("slot %u: egress: %s", slot, err);
		ipc_reply_error(c, id, "internal", "slot %u: the new egress "
		    "policy was not applied; the old one holds (see netd's "
		    "log)", slot);
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, "slot", json_object_new_int((int)slot));
	json_object_object_add(o, "counters", jdrops(slot, &d));
	ipc_reply(c, IPC_NET_EGRESS_RESULT, id, o, -1);
	json_object_put(o);
}

/* Every live slot's drop counters, for vmmd's vm_status and metrics. */
static void
do_counters(struct ipc_conn *c, uint32_t id)
{
	struct json_object *o, *slots;
	struct nft_ctx *ctx;
	struct nft_drops d;
	int ok;

	slots = json_object_new_array();
	for (unsigned s = 0; s < NETD_MAX_SLOTS; s++) {
		if (!netd->live[s])
			continue;
		if (link_enter(&netd->lc, s) == -1) {
			log_warn("slot %u: counters: netns", s);
			continue;
		}
		ok = (ctx = nft_open()) != NULL && slot_drops(ctx, &d) == 0;
		nft_close(ctx);
		link_leave(&netd->lc);
		if (ok)
			json_object_array_add(slots, jdrops(s, &d));
		else
			log_warnx("slot %u: its counters cannot be read", s);
	}
	o = json_object_new_object();
	json_object_object_add(o, "slots", slots);
	ipc_reply(c, IPC_NET_COUNTERS_RESULT, id, o, -1);
	json_object_put(o);
}

/* {"<slot>": {"count": n, "last": [oldest … newest]}} of the slots with
 * a forwarder. */
static struct json_object *
fwd_status(void)
{
	struct json_object *o = json_object_new_object();

	for (unsigned s = 0; s < NETD_MAX_SLOTS; s++) {
		struct json_object *e;
		char key[8];

		if (!netd->fwd[s])
			continue;
		e = json_object_new_object();
		json_object_object_add(e, "count",
		    json_object_new_int64((int64_t)(netd->refused[s].count &
		    INT64_MAX)));
		json_object_object_add(e, "last", jrefused_last(s));
		snprintf(key, sizeof(key), "%u", s);
		json_object_object_add(o, key, e);
	}
	return o;
}

static void
do_status(struct ipc_conn *c, uint32_t id)
{
	struct json_object *o, *slots;
	char where[160], why[128];
	const char *u = unavailable(why, sizeof(why));

	o = json_object_new_object();
	slots = json_object_new_array();
	for (unsigned s = 0; s < NETD_MAX_SLOTS; s++)
		if (netd->live[s])
			json_object_array_add(slots,
			    json_object_new_int((int)s));
	json_object_object_add(o, "slots", slots);
	json_object_object_add(o, "dns_refused", fwd_status());
	json_object_object_add(o, "uplink",
	    json_object_new_string(netd->uplink));
	json_object_object_add(o, "uplink_ok", json_object_new_boolean(
	    netd->uplink[0] != '\0' && link_host_has(netd->uplink)));
	json_object_object_add(o, "ip_forward",
	    json_object_new_boolean(link_ip_forward() == 1));
	json_object_object_add(o, "available", json_object_new_boolean(
	    u == NULL));
	if (u != NULL)
		json_object_object_add(o, "reason", json_object_new_string(u));
	json_object_object_add(o, "host_range", jcidr(&netd->host_range));
	json_object_object_add(o, "guest_range", jcidr(&netd->guest_range));
	json_object_object_add(o, "forward_drop", json_object_new_boolean(
	    forward_drop(where, sizeof(where))));
	ipc_reply(c, IPC_NET_STATUS_RESULT, id, o, -1);
	json_object_put(o);
}

/* vmmd's connections, so that an exit closes them. */
struct peer {
	struct ipc_conn		*conn;
	TAILQ_ENTRY(peer)	 entry;
};
static TAILQ_HEAD(, peer) peers = TAILQ_HEAD_INITIALIZER(peers);

static void
netd_dispatch_vmmd(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	struct netd_request req;
	struct peer *p;
	char why[256];

	if (arg == NULL) {
		if ((p = calloc(1, sizeof(*p))) == NULL)
			fatal("calloc");
		p->conn = c;
		TAILQ_INSERT_TAIL(&peers, p, entry);
		ipc_conn_set_arg(c, p);
	}

	if (netd_request_decode(m->type, m->body, netd->max_slots, &req, why,
	    sizeof(why)) == -1) {
		log_warnx("vmmd: rejected request type %u: %s", m->type, why);
		ipc_reply_error(c, m->id, "invalid_argument", "%s", why);
		return;
	}
	switch (req.type) {
	case IPC_NET_SETUP:
		do_setup(c, m->id, req.slot, &req.egress, req.rate);
		break;
	case IPC_NET_EGRESS:
		do_egress(c, m->id, req.slot, &req.egress, req.rate);
		break;
	case IPC_NET_COUNTERS:
		do_counters(c, m->id);
		break;
	case IPC_NET_TEARDOWN:
		do_teardown(c, m->id, req.slot);
		break;
	case IPC_NET_SYNC:
		do_sync(c, m->id, &req);
		break;
	case IPC_NET_STATUS:
		do_status(c, m->id);
		break;
	}
}

static void
netd_closed_vmmd(struct ipc_conn *c, void *arg)
{
	struct peer *p = arg;

	/* Networks stay: vmmd's next sync says which are still wanted. */
	log_debug("vmmd: connection closed");
	if (p != NULL) {
		TAILQ_REMOVE(&peers, p, entry);
		free(p);
	}
}


/* The configuration netd needs, checked before anything is touched. */
static void
netd_configure(struct netd *n, const struct mcpvm_conf *conf)
{
	char err[256], what[160];
	gid_t gid;
	struct cidr *r[2] = { &n->host_range, &n->guest_range };
	const char *rn[2] = { "host_range", "guest_range" };
	const char *rv[2] = { conf->netd.host_range, conf->netd.guest_range };

	if (privdrop_lookup(conf->netd.vmmd_user, &n->vmmd_uid, &gid, err,
	    sizeof(err)) == -1)
		fatalx("[netd] vmmd_user: %s", err);
	n->max_slots = conf->vmmd.max_vms < NETD_MAX_SLOTS ?
	    (unsigned)conf->vmmd.max_vms : NETD_MAX_SLOTS;
	n->uplink = conf->netd.uplink;
	if (n->uplink[0] != '\0' && (!netd_ifname_valid(n->uplink) ||
	    strncmp(n->uplink, "mcpvm", 5) == 0))
		fatalx("[netd] uplink %s: not an interface name netd may use",
		    n->uplink);
	for (int i = 0; i < 2; i++)
		if (cidr_parse(rv[i], 0, r[i]) == -1 || r[i]->len != 16)
			fatalx("[netd] %s %s: must be a /16 such as 10.231.0.0/16",
			    rn[i], rv[i]);
	if (cidr_overlap(r[0], r[1]))
		fatalx("[netd] host_range and guest_range overlap");
	for (int i = 0; i < 2; i++) {
		int rc = link_host_overlap(r[i], what, sizeof(what));

		if (rc == -1)
			fatalx("[netd] %s: cannot list the host's routes",
			    rn[i]);
		if (rc == 1)
			fatalx("[netd] %s %s overlaps the host's %s; choose "
			    "another range", rn[i], rv[i], what);
	}
	if (conf->netd.blocked_cidrs.n > NETD_MAX_CIDRS)
		fatalx("[netd] blocked_cidrs: more than %d", NETD_MAX_CIDRS);
	for (size_t i = 0; i < conf->netd.blocked_cidrs.n; i++)
		if (cidr_parse(conf->netd.blocked_cidrs.v[i], 1,
		    &n->blocked[n->nblocked++]) == -1)
			fatalx("[netd] blocked_cidrs %s: not an IPv4 prefix "
			    "a.b.c.d/n without host bits",
			    conf->netd.blocked_cidrs.v[i]);
	if (conf->netd.dns.n > NETD_MAX_DNS)
		fatalx("[netd] dns: at most %d resolvers", NETD_MAX_DNS);
	for (size_t i = 0; i < conf->netd.dns.n; i++) {
		struct cidr c;

		if (cidr_parse(conf->netd.dns.v[i], 1, &c) == -1 ||
		    c.len != 32)
			fatalx("[netd] dns %s: not an IPv4 address",
			    conf->netd.dns.v[i]);
		n->dns[n->ndns++] = c.addr;
	}
	n->ttl_min = (uint32_t)conf->netd.dns_ttl_min;
	n->ttl_max = (uint32_t)conf->netd.dns_ttl_max;
	if (n->ttl_min > n->ttl_max)
		fatalx("[netd] dns_ttl_min %u is over dns_ttl_max %u",
		    n->ttl_min, n->ttl_max);
	/* Ranges checked by conf.c: 16 to 2^20 entries, 1 to 10^5 a second. */
	n->ct_max = (uint32_t)conf->netd.max_conntrack_per_vm;
	n->ct_rate = (uint32_t)conf->netd.connection_rate_per_vm;
	n->lc.netns_dir = conf->netd.netns_dir;
	n->lc.host_base = n->host_range.addr;
	n->lc.guest_base = n->guest_range.addr;
}

int
main(int argc, char **argv)
{
	static struct netd n;
	static struct fwd_cfg fwd_cfg;
	pid_t fwd_pid;
	struct daemon_args args;
	struct mcpvm_conf conf;
	struct ipc_server *srv;
	struct event *sig[2];
	unsigned char have[NETD_MAX_SLOTS];
	size_t nhave = 0;
	char err[256];
	int fd;

	daemon_start("netd", argc, argv, &args, &conf);
	netd = &n;
	netd_configure(&n, &conf);
	if (args.check_only) {
		daemon_config_ok("netd", &args);
		conf_free(&conf);
		return 0;
	}
	if (geteuid() != 0)
		fatalx("must start as root");
	log_init("netd", args.foreground, args.verbose);
	umask(022);
	signal(SIGPIPE, SIG_IGN);
	/* Forked before netd opens anything, so it inherits nothing. */
	fwd_cfg.dns = n.dns;
	fwd_cfg.ndns = n.ndns;
	fwd_cfg.ttl_min = n.ttl_min;
	fwd_cfg.ttl_max = n.ttl_max;
	n.fwd_fd = dnsfwd_start(&fwd_cfg, &fwd_pid);

	if ((n.lc.host_ns = open("/proc/self/ns/net", O_RDONLY |
	    O_CLOEXEC)) == -1)
		fatal("/proc/self/ns/net");
	if (mkdir(n.lc.netns_dir, 0755) == -1 && errno != EEXIST)
		fatal("%s", n.lc.netns_dir);
	/* The host table is owned by this context's socket for netd's
	 * lifetime; it is made with the first network. */
	if ((n.host_nft = nft_open()) == NULL)
		fatalx("libnftables: cannot make a context");
	if ((n.base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	/* Subscribed before the first listing, so no change goes unheard. */
	if ((n.addr_sk = link_addr_watch(&fd, err, sizeof(err))) == NULL)
		fatalx("watching the host's addresses: %s", err);
	if ((n.addr_ev = event_new(n.base, fd, EV_READ | EV_PERSIST,
	    on_addr_event, NULL)) == NULL || event_add(n.addr_ev, NULL) == -1)
		fatalx("event_new failed");
	if ((n.fwd_ev = event_new(n.base, n.fwd_fd, EV_READ | EV_PERSIST,
	    on_fwd, NULL)) == NULL || event_add(n.fwd_ev, NULL) == -1)
		fatalx("event_new failed");
	srv = netd_listen(conf.netd.socket);
	sd_notify_init();

	privdrop(&(struct privdrop){ .user = "", .keep = netd_caps,
	    .nkeep = sizeof(netd_caps) / sizeof(netd_caps[0]) });

	daemon_signals(n.base, on_signal, NULL, sig);

	sandbox_seccomp(netd_syscalls, sizeof(netd_syscalls) /
	    sizeof(netd_syscalls[0]), 0);

	/* A netd killed with -9 may have left accept rules behind. */
	fwd_rules_purge();
	/* Orphans go at vmmd's first sync: only vmmd knows which VMs live.
	 * The networks a netd before this one left get the host's
	 * addresses as they are now. */
	if (link_list(&n.lc, have) == 0) {
		for (unsigned s = 0; s < NETD_MAX_SLOTS; s++)
			nhave += have[s];
		hostaddrs_refresh(have);
	}
	log_info("ready: %s (uid %u only), uplink %s, %zu existing network%s "
	    "await vmmd's sync", conf.netd.socket, (unsigned)n.vmmd_uid,
	    n.uplink[0] != '\0' ? n.uplink : "(none)", nhave,
	    nhave == 1 ? "" : "s");
	sd_notify_send("READY=1");
	event_base_dispatch(n.base);
	sd_notify_send("STOPPING=1");

	/* The host's side goes (with it the guests' egress); the VMs'
	 * netns, links and rulesets stay for the next netd. */
	host_table_remove();
	while (!TAILQ_EMPTY(&peers))
		ipc_conn_free(TAILQ_FIRST(&peers)->conn);	/* closed frees */
	ipc_server_free(srv);
	event_free(sig[0]);
	event_free(sig[1]);
	event_free(n.addr_ev);
	event_free(n.fwd_ev);
	close(n.fwd_fd);	/* the forwarder exits; netd waits for it */
	while (waitpid(fwd_pid, NULL, 0) == -1 && errno == EINTR)
		;
	link_addr_unwatch(n.addr_sk);
	/* Closing the context's socket removes mcpvm_host (owner flag). */
	nft_close(n.host_nft);
	event_base_free(n.base);
	close(n.lc.host_ns);
	conf_free(&conf);
	return 0;
}
