/*
 * netd's namespaces, links, addresses and routes; see link.h.  Runs in
 * netd as root with CAP_NET_ADMIN and CAP_SYS_ADMIN (unshare, setns and
 * the netns bind mount need the latter).
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

#include "link.h"
#include "log.h"

struct names {
	char	ns[32], hostif[IFNAMSIZ], nsif[IFNAMSIZ], tap[IFNAMSIZ];
	char	path[4096];
};

static int
names(const struct link_cfg *c, unsigned slot, struct names *n)
{
	if (slot >= NETD_MAX_SLOTS)
		return -1;
	snprintf(n->ns, sizeof(n->ns), NETD_NS_FMT, slot);
	snprintf(n->hostif, sizeof(n->hostif), NETD_HOSTIF_FMT, slot);
	snprintf(n->nsif, sizeof(n->nsif), NETD_NSIF_FMT, slot);
	snprintf(n->tap, sizeof(n->tap), NETD_TAP_FMT, slot);
	if ((size_t)snprintf(n->path, sizeof(n->path), "%s/%s", c->netns_dir,
	    n->ns) >= sizeof(n->path))
		return -1;
	return 0;
}

static void
fmt_ip(char *buf, size_t len, uint32_t a, int plen)
{
	if (plen >= 0)
		snprintf(buf, len, "%u.%u.%u.%u/%d", a >> 24, (a >> 16) & 0xff,
		    (a >> 8) & 0xff, a & 0xff, plen);
	else
		snprintf(buf, len, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff,
		    (a >> 8) & 0xff, a & 0xff);
}

static int
sysctl_write(const char *path, const char *val)
{
	int fd, rc = 0;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	if (write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		rc = -1;
	close(fd);
	return rc;
}

int
link_ip_forward(void)
{
	char c = 0;
	int fd;
	ssize_t n;

	if ((fd = open("/proc/sys/net/ipv4/ip_forward",
	    O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, &c, 1);
	close(fd);
	return n == 1 ? c == '1' : -1;
}

static struct nl_sock *
nl_open(char *err, size_t errlen)
{
	struct nl_sock *sk;
	int rc;

	if ((sk = nl_socket_alloc()) == NULL) {
		snprintf(err, errlen, "netlink: out of memory");
		return NULL;
	}
	if ((rc = nl_connect(sk, NETLINK_ROUTE)) < 0) {
		snprintf(err, errlen, "netlink: %s", nl_geterror(rc));
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

static int
ifindex(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *l;
	int i;

	if (rtnl_link_get_kernel(sk, 0, name, &l) < 0)
		return 0;
	i = rtnl_link_get_ifindex(l);
	rtnl_link_put(l);
	return i;
}

static int
link_set_up(struct nl_sock *sk, const char *name, char *err, size_t errlen)
{
	struct rtnl_link *l, *chg;
	int rc;

	if ((rc = rtnl_link_get_kernel(sk, 0, name, &l)) < 0) {
		snprintf(err, errlen, "%s: %s", name, nl_geterror(rc));
		return -1;
	}
	if ((chg = rtnl_link_alloc()) == NULL) {
		rtnl_link_put(l);
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	rtnl_link_set_flags(chg, IFF_UP);
	rc = rtnl_link_change(sk, l, chg, 0);
	rtnl_link_put(chg);
	rtnl_link_put(l);
	if (rc < 0) {
		snprintf(err, errlen, "%s: up: %s", name, nl_geterror(rc));
		return -1;
	}
	return 0;
}

static int
addr_add(struct nl_sock *sk, const char *ifname, uint32_t a, int plen,
    char *err, size_t errlen)
{
	struct rtnl_addr *ra;
	struct nl_addr *local = NULL;
	char txt[32];
	int idx, rc;

	fmt_ip(txt, sizeof(txt), a, plen);
	if ((idx = ifindex(sk, ifname)) == 0) {
		snprintf(err, errlen, "%s: no such link", ifname);
		return -1;
	}
	if ((ra = rtnl_addr_alloc()) == NULL ||
	    nl_addr_parse(txt, AF_INET, &local) < 0) {
		if (ra != NULL)
			rtnl_addr_put(ra);
		snprintf(err, errlen, "%s: address %s", ifname, txt);
		return -1;
	}
	rtnl_addr_set_ifindex(ra, idx);
	rtnl_addr_set_local(ra, local);
	rc = rtnl_addr_add(sk, ra, 0);
	nl_addr_put(local);
	rtnl_addr_put(ra);
	if (rc < 0) {
		snprintf(err, errlen, "%s: address %s: %s", ifname, txt,
		    nl_geterror(rc));
		return -1;
	}
	return 0;
}

/* dst "a.b.c.d/n" (or plen 0: default) via gw on ifname. */
static int
route_add(struct nl_sock *sk, uint32_t dst, int plen, uint32_t gw,
    const char *ifname, char *err, size_t errlen)
{
	struct rtnl_route *r = NULL;
	struct rtnl_nexthop *nh = NULL;
	struct nl_addr *d = NULL, *g = NULL;
	char dtxt[32], gtxt[32];
	int idx, rc = -1;

	fmt_ip(dtxt, sizeof(dtxt), dst, plen);
	fmt_ip(gtxt, sizeof(gtxt), gw, -1);
	if ((idx = ifindex(sk, ifname)) == 0) {
		snprintf(err, errlen, "%s: no such link", ifname);
		return -1;
	}
	if ((r = rtnl_route_alloc()) == NULL ||
	    (nh = rtnl_route_nh_alloc()) == NULL ||
	    nl_addr_parse(plen == 0 ? "default" : dtxt, AF_INET, &d) < 0 ||
	    nl_addr_parse(gtxt, AF_INET, &g) < 0) {
		snprintf(err, errlen, "route %s: out of memory", dtxt);
		goto out;
	}
	rtnl_route_set_family(r, AF_INET);
	rtnl_route_set_dst(r, d);
	rtnl_route_nh_set_ifindex(nh, idx);
	rtnl_route_nh_set_gateway(nh, g);
	rtnl_route_add_nexthop(r, nh);
	nh = NULL;
	if ((rc = rtnl_route_add(sk, r, NLM_F_CREATE | NLM_F_EXCL)) < 0) {
		snprintf(err, errlen, "route %s via %s: %s", dtxt, gtxt,
		    nl_geterror(rc));
		rc = -1;
	}
out:
	if (nh != NULL)
		rtnl_route_nh_free(nh);
	if (d != NULL)
		nl_addr_put(d);
	if (g != NULL)
		nl_addr_put(g);
	if (r != NULL)
		rtnl_route_put(r);
	return rc;
}

static int
link_del(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *l;
	int rc;

	if (rtnl_link_get_kernel(sk, 0, name, &l) < 0)
		return 0;
	rc = rtnl_link_delete(sk, l);
	rtnl_link_put(l);
	return rc < 0 ? -1 : 0;
}

int
link_enter(const struct link_cfg *c, unsigned slot)
{
	struct names n;
	int fd, rc;

	if (names(c, slot, &n) == -1) {
		errno = EINVAL;
		return -1;
	}
	if ((fd = open(n.path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	rc = setns(fd, CLONE_NEWNET);
	close(fd);
	return rc;
}

int
link_leave(const struct link_cfg *c)
{
	/* Staying in a VM's netns would be worse than dying. */
	if (setns(c->host_ns, CLONE_NEWNET) == -1)
		fatal("setns back to the host's network namespace");
	return 0;
}

/* The TAP for the VMM, in the current netns, not persistent: it lives as
 * long as a descriptor (QEMU's) does, or until teardown deletes it. */
static int
tap_open(const char *name, unsigned slot, char *err, size_t errlen)
{
	struct ifreq ifr;
	int fd;

	if ((fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "/dev/net/tun: %s", strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	if (ioctl(fd, TUNSETIFF, &ifr) == -1) {
		snprintf(err, errlen, "%s: TUNSETIFF: %s", name,
		    strerror(errno));
		close(fd);
		return -1;
	}
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	netd_gateway_mac(slot, (uint8_t *)ifr.ifr_hwaddr.sa_data);
	if (ioctl(fd, SIOCSIFHWADDR, &ifr) == -1) {
		snprintf(err, errlen, "%s: SIOCSIFHWADDR: %s", name,
		    strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* In the new netns: no IPv6 anywhere, IPv4 forwarding between the TAP and
 * the veth (the ruleset says what may pass). */
static int
ns_sysctls(char *err, size_t errlen)
{
	static const char *const v[][2] = {
		{ "/proc/sys/net/ipv6/conf/all/disable_ipv6", "1" },
		{ "/proc/sys/net/ipv6/conf/default/disable_ipv6", "1" },
		{ "/proc/sys/net/ipv4/ip_forward", "1" },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (sysctl_write(v[i][0], v[i][1]) == -1 && (errno != ENOENT ||
		    strstr(v[i][0], "ipv6") == NULL)) {
			snprintf(err, errlen, "%s: %s", v[i][0],
			    strerror(errno));
			return -1;
		}
	return 0;
}

int
link_setup(const struct link_cfg *c, unsigned slot, int *tap, char *err,
    size_t errlen)
{
	struct names n;
	struct nl_sock *sk = NULL;
	struct rtnl_link *veth = NULL, *peer;
	uint32_t hnet, gnet;
	char v6[96];
	int nsfd = -1, tapfd = -1, fd, rc;

	*tap = -1;
	if (names(c, slot, &n) == -1) {
		snprintf(err, errlen, "slot %u: out of range", slot);
		return -1;
	}
	hnet = c->host_base | slot << 8;
	gnet = c->guest_base | slot << 8;
	if ((fd = open(n.path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0)) == -1) {
		snprintf(err, errlen, "%s: %s", n.path, strerror(errno));
		return -1;
	}
	close(fd);
	if (unshare(CLONE_NEWNET) == -1) {
		snprintf(err, errlen, "unshare: %s", strerror(errno));
		unlink(n.path);
		return -1;
	}
	if (mount("/proc/thread-self/ns/net", n.path, "none", MS_BIND,
	    NULL) == -1) {
		snprintf(err, errlen, "%s: bind mount: %s", n.path,
		    strerror(errno));
		link_leave(c);
		unlink(n.path);
		return -1;
	}
	/* From here on, teardown undoes whatever exists. */
	if (ns_sysctls(err, errlen) == -1 ||
	    (nsfd = open("/proc/thread-self/ns/net", O_RDONLY |
	    O_CLOEXEC)) == -1 || (sk = nl_open(err, errlen)) == NULL ||
	    link_set_up(sk, "lo", err, errlen) == -1 ||
	    (tapfd = tap_open(n.tap, slot, err, errlen)) == -1)
		goto fail;
	nl_socket_free(sk);
	sk = NULL;
	link_leave(c);

	/* The veth pair, made on the host with its peer put in the netns. */
	if ((sk = nl_open(err, errlen)) == NULL)
		goto fail;
	if ((veth = rtnl_link_veth_alloc()) == NULL) {
		snprintf(err, errlen, "veth: out of memory");
		goto fail;
	}
	rtnl_link_set_name(veth, n.hostif);
	peer = rtnl_link_veth_get_peer(veth);
	rtnl_link_set_name(peer, n.nsif);
	rtnl_link_set_ns_fd(peer, nsfd);
	rtnl_link_put(peer);
	rc = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_link_veth_release(veth);
	veth = NULL;
	if (rc < 0) {
		snprintf(err, errlen, "%s: veth: %s", n.hostif,
		    nl_geterror(rc));
		goto fail;
	}
	/* No IPv6 on the host's end either, before it is up. */
	snprintf(v6, sizeof(v6), "/proc/sys/net/ipv6/conf/%s/disable_ipv6",
	    n.hostif);
	if (sysctl_write(v6, "1") == -1 && errno != ENOENT) {
		snprintf(err, errlen, "%s: %s", v6, strerror(errno));
		goto fail;
	}
	if (addr_add(sk, n.hostif, hnet | 1, 30, err, errlen) == -1 ||
	    link_set_up(sk, n.hostif, err, errlen) == -1)
		goto fail;
	nl_socket_free(sk);
	sk = NULL;

	if (setns(nsfd, CLONE_NEWNET) == -1) {
		snprintf(err, errlen, "setns: %s", strerror(errno));
		goto fail;
	}
	if ((sk = nl_open(err, errlen)) == NULL ||
	    addr_add(sk, n.nsif, hnet | 2, 30, err, errlen) == -1 ||
	    link_set_up(sk, n.nsif, err, errlen) == -1 ||
	    addr_add(sk, n.tap, gnet | 1, 30, err, errlen) == -1 ||
	    link_set_up(sk, n.tap, err, errlen) == -1 ||
	    route_add(sk, 0, 0, hnet | 1, n.nsif, err, errlen) == -1)
		goto fail;
	nl_socket_free(sk);
	sk = NULL;
	link_leave(c);

	if ((sk = nl_open(err, errlen)) == NULL ||
	    route_add(sk, gnet, 30, hnet | 2, n.hostif, err, errlen) == -1)
		goto fail;
	nl_socket_free(sk);
	close(nsfd);
	*tap = tapfd;
	return 0;
fail:
	if (sk != NULL)
		nl_socket_free(sk);
	link_leave(c);
	if (nsfd != -1)
		close(nsfd);
	if (tapfd != -1)
		close(tapfd);
	{
		char e2[256];

		if (link_teardown(c, slot, e2, sizeof(e2)) == -1)
			log_warnx("slot %u: undoing a failed setup: %s", slot,
			    e2);
	}
	return -1;
}

int
link_teardown(const struct link_cfg *c, unsigned slot, char *err,
    size_t errlen)
{
	struct names n;
	struct nl_sock *sk;
	struct stat st;
	int rc = 0;

	if (names(c, slot, &n) == -1) {
		snprintf(err, errlen, "slot %u: out of range", slot);
		return -1;
	}
	/* Inside first: the TAP may be held open by a VMM, which would keep
	 * the netns (and the device) alive after its name is gone. */
	if (lstat(n.path, &st) == 0 && link_enter(c, slot) == 0) {
		if ((sk = nl_open(err, errlen)) != NULL) {
			if (link_del(sk, n.tap) == -1 ||
			    link_del(sk, n.nsif) == -1) {
				snprintf(err, errlen, "%s: deleting links",
				    n.ns);
				rc = -1;
			}
			nl_socket_free(sk);
		} else
			rc = -1;
		link_leave(c);
	}
	if ((sk = nl_open(err, errlen)) == NULL)
		return -1;
	if (link_del(sk, n.hostif) == -1) {
		snprintf(err, errlen, "%s: delete failed", n.hostif);
		rc = -1;
	}
	nl_socket_free(sk);
	if (lstat(n.path, &st) == 0) {
		if (umount2(n.path, MNT_DETACH) == -1 && errno != EINVAL) {
			snprintf(err, errlen, "%s: umount: %s", n.path,
			    strerror(errno));
			rc = -1;
		}
		if (unlink(n.path) == -1) {
			snprintf(err, errlen, "%s: unlink: %s", n.path,
			    strerror(errno));
			rc = -1;
		}
	}
	return rc;
}

/* "mcpvm-<n><suffix>" with n canonical decimal below NETD_MAX_SLOTS. */
static int
parse_name(const char *s, const char *suffix, unsigned *slot)
{
	unsigned v = 0;
	int digits = 0;

	if (strncmp(s, "mcpvm-", 6) != 0)
		return -1;
	s += 6;
	while (*s >= '0' && *s <= '9') {
		if (digits == 1 && v == 0)
			return -1;
		v = v * 10 + (unsigned)(*s - '0');
		if (++digits > 3)
			return -1;
		s++;
	}
	if (digits == 0 || v >= NETD_MAX_SLOTS || strcmp(s, suffix) != 0)
		return -1;
	*slot = v;
	return 0;
}

int
link_exists(const struct link_cfg *c, unsigned slot)
{
	struct names n;
	struct stat st;

	if (names(c, slot, &n) == -1)
		return 0;
	return lstat(n.path, &st) == 0 || link_host_has(n.hostif);
}

int
link_list(const struct link_cfg *c, unsigned char have[NETD_MAX_SLOTS])
{
	struct nl_sock *sk;
	struct nl_cache *cache;
	struct nl_object *o;
	struct dirent *de;
	DIR *d;
	unsigned slot;
	char err[128];

	memset(have, 0, NETD_MAX_SLOTS);
	if ((d = opendir(c->netns_dir)) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (parse_name(de->d_name, "", &slot) == 0)
				have[slot] = 1;
		closedir(d);
	} else if (errno != ENOENT)
		return -1;
	if ((sk = nl_open(err, sizeof(err))) == NULL)
		return -1;
	if (rtnl_link_alloc_cache(sk, AF_UNSPEC, &cache) < 0) {
		nl_socket_free(sk);
		return -1;
	}
	for (o = nl_cache_get_first(cache); o != NULL;
	    o = nl_cache_get_next(o)) {
		const char *name = rtnl_link_get_name((struct rtnl_link *)o);

		if (name != NULL && parse_name(name, "h", &slot) == 0)
			have[slot] = 1;
	}
	nl_cache_free(cache);
	nl_socket_free(sk);
	return 0;
}

int
link_host_has(const char *ifname)
{
	struct nl_sock *sk;
	char err[128];
	int i;

	if ((sk = nl_open(err, sizeof(err))) == NULL)
		return 0;
	i = ifindex(sk, ifname);
	nl_socket_free(sk);
	return i != 0;
}

static int
ours(struct nl_cache *links, int idx)
{
	char name[IFNAMSIZ];

	if (rtnl_link_i2name(links, idx, name, sizeof(name)) == NULL)
		return 0;
	return strncmp(name, "mcpvm-", 6) == 0;
}

static uint32_t
nl_ipv4(struct nl_addr *a)
{
	uint32_t v;

	if (a == NULL || nl_addr_get_family(a) != AF_INET ||
	    nl_addr_get_len(a) != 4)
		return 0;
	memcpy(&v, nl_addr_get_binary_addr(a), 4);
	return ntohl(v);
}

static int
addr_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int
link_host_addrs(uint32_t *out, size_t max, size_t *n)
{
	struct nl_sock *sk;
	struct nl_cache *addrs, *links;
	struct nl_object *o;
	char err[128];

	*n = 0;
	if ((sk = nl_open(err, sizeof(err))) == NULL)
		return -1;
	if (rtnl_link_alloc_cache(sk, AF_UNSPEC, &links) < 0) {
		nl_socket_free(sk);
		return -1;
	}
	if (rtnl_addr_alloc_cache(sk, &addrs) < 0) {
		nl_cache_free(links);
		nl_socket_free(sk);
		return -1;
	}
	for (o = nl_cache_get_first(addrs); o != NULL && *n < max;
	    o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		uint32_t v;

		if (rtnl_addr_get_family(a) != AF_INET ||
		    ours(links, rtnl_addr_get_ifindex(a)))
			continue;
		if ((v = nl_ipv4(rtnl_addr_get_local(a))) != 0)
			out[(*n)++] = v;
	}
	nl_cache_free(addrs);
	nl_cache_free(links);
	nl_socket_free(sk);
	qsort(out, *n, sizeof(*out), addr_cmp);
	return 0;
}

static int
addr_event(struct nl_msg *msg, void *arg)
{
	*(int *)arg = 1;
	return NL_OK;
}

struct nl_sock *
link_addr_watch(int *fd, char *err, size_t errlen)
{
	struct nl_sock *sk;
	int rc;

	if ((sk = nl_open(err, errlen)) == NULL)
		return NULL;
	/* Notifications carry no sequence number of ours. */
	nl_socket_disable_seq_check(sk);
	if ((rc = nl_socket_add_memberships(sk, RTNLGRP_IPV4_IFADDR,
	    0)) < 0 || (rc = nl_socket_set_nonblocking(sk)) < 0) {
		snprintf(err, errlen, "netlink: %s", nl_geterror(rc));
		nl_socket_free(sk);
		return NULL;
	}
	*fd = nl_socket_get_fd(sk);
	return sk;
}

int
link_addr_events(struct nl_sock *sk)
{
	int changed = 0, rc;

	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, addr_event,
	    &changed);
	for (;;) {
		if ((rc = nl_recvmsgs_default(sk)) >= 0)
			continue;
		if (rc == -NLE_AGAIN)
			break;
		/* ENOBUFS: events were lost, so assume a change. */
		changed = 1;
		if (rc != -NLE_NOMEM)
			break;
	}
	return changed;
}

void
link_addr_unwatch(struct nl_sock *sk)
{
	if (sk != NULL)
		nl_socket_free(sk);
}

int
link_host_overlap(const struct cidr *r, char *what, size_t whatlen)
{
	struct nl_sock *sk;
	struct nl_cache *routes, *links, *addrs;
	struct nl_object *o;
	char err[128], ifn[IFNAMSIZ];
	int found = 0;

	if ((sk = nl_open(err, sizeof(err))) == NULL)
		return -1;
	if (rtnl_link_alloc_cache(sk, AF_UNSPEC, &links) < 0) {
		nl_socket_free(sk);
		return -1;
	}
	if (rtnl_route_alloc_cache(sk, AF_INET, 0, &routes) < 0) {
		nl_cache_free(links);
		nl_socket_free(sk);
		return -1;
	}
	for (o = nl_cache_get_first(routes); o != NULL && !found;
	    o = nl_cache_get_next(o)) {
		struct rtnl_route *rt = (struct rtnl_route *)o;
		struct nl_addr *dst = rtnl_route_get_dst(rt);
		struct rtnl_nexthop *nh;
		struct cidr d;
		int idx = 0;

		if (dst == NULL || nl_addr_get_prefixlen(dst) == 0)
			continue;
		if ((nh = rtnl_route_nexthop_n(rt, 0)) != NULL)
			idx = rtnl_route_nh_get_ifindex(nh);
		if (idx != 0 && ours(links, idx))
			continue;
		d.len = (uint8_t)nl_addr_get_prefixlen(dst);
		d.addr = nl_ipv4(dst);
		if (d.len > 32)
			continue;
		if (cidr_overlap(&d, r)) {
			if (rtnl_link_i2name(links, idx, ifn,
			    sizeof(ifn)) == NULL)
				snprintf(ifn, sizeof(ifn), "?");
			fmt_ip(err, sizeof(err), d.addr, d.len);
			snprintf(what, whatlen, "route %s on %s", err, ifn);
			found = 1;
		}
	}
	nl_cache_free(routes);
	if (!found && rtnl_addr_alloc_cache(sk, &addrs) == 0) {
		for (o = nl_cache_get_first(addrs); o != NULL && !found;
		    o = nl_cache_get_next(o)) {
			struct rtnl_addr *a = (struct rtnl_addr *)o;
			struct cidr d;

			if (rtnl_addr_get_family(a) != AF_INET ||
			    ours(links, rtnl_addr_get_ifindex(a)))
				continue;
			d.addr = nl_ipv4(rtnl_addr_get_local(a));
			d.len = 32;
			if (cidr_overlap(&d, r)) {
				fmt_ip(err, sizeof(err), d.addr, -1);
				snprintf(what, whatlen, "address %s", err);
				found = 1;
			}
		}
		nl_cache_free(addrs);
	}
	nl_cache_free(links);
	nl_socket_free(sk);
	return found;
}
