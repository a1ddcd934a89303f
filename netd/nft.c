/*
 * netd's nftables rulesets; see nft.h.  The builders only ever print
 * numbers and names netd made itself, so a ruleset cannot carry a byte a
 * peer chose.  Runs in netd (and in the fuzz target and unit tests).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nftables/libnftables.h>

#include "nft.h"

#define NFT_TAG_PREFIX	"mcpvm "

/*
 * The destinations no guest reaches, whatever the operator adds.
 *
 * The cloud providers' metadata and host-service addresses, and what
 * covers each:
 *   169.254.169.254 (AWS, Azure, GCP, Oracle, IBM, DigitalOcean, Linode,
 *   Hetzner, OpenStack), 169.254.169.253 and .123 (AWS DNS and time),
 *   169.254.170.2 and .23 (AWS ECS and EKS credentials), 169.254.0.23
 *   (Tencent), 169.254.42.42 (Scaleway): link-local, below;
 *   100.100.100.200 (Alibaba): CGNAT, below;
 *   168.63.129.16 (Azure WireServer: DNS, DHCP, VM agent): listed here;
 *   192.0.0.192 (Oracle Cloud Classic): in 192.0.0.0/24, listed here;
 *   fd00:ec2::254 (AWS), fd20:ce::254 (GCP), fd00:c1::a9fe:a9fe
 *   (Oracle): IPv6, which a guest never sends (nft_build_vm);
 *   resolvers at a VPC's base + 2 (AWS) and the like: private, below.
 * The host's own addresses are a set of their own (hostaddrs).
 */
static const struct cidr never[] = {
	{ 0x00000000u, 8 },	/* 0.0.0.0/8, "this network" */
	{ 0x0a000000u, 8 },	/* 10.0.0.0/8 */
	{ 0x64400000u, 10 },	/* 100.64.0.0/10, CGNAT */
	{ 0x7f000000u, 8 },	/* 127.0.0.0/8 */
	{ 0xa83f8110u, 32 },	/* 168.63.129.16, Azure's host services */
	{ 0xa9fe0000u, 16 },	/* 169.254.0.0/16, link-local, metadata */
	{ 0xac100000u, 12 },	/* 172.16.0.0/12 */
	{ 0xc0000000u, 24 },	/* 192.0.0.0/24, IETF protocol assignments */
	{ 0xc0a80000u, 16 },	/* 192.168.0.0/16 */
	{ 0xe0000000u, 4 },	/* 224.0.0.0/4, multicast */
	{ 0xf0000000u, 4 },	/* 240.0.0.0/4, reserved and broadcast */
};

struct out {
	char	*buf;
	size_t	 len, used;
	int	 full;
};

static void __attribute__((format(printf, 2, 3)))
put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->used, o->len - o->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->used) {
		o->full = 1;
		return;
	}
	o->used += (size_t)n;
}

static int
finish(struct out *o)
{
	if (o->full || o->used > 0x7fffffff)
		return -1;
	return (int)o->used;
}

static void
put_ip(struct out *o, uint32_t a)
{
	put(o, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff,
	    a & 0xff);
}

static void put_hostaddrs(struct out *, unsigned, const uint32_t *, size_t);

/* FNV-1a, 64 bits: names a ruleset text, no secret against anyone. */
static uint64_t
fnv1a(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * ct count leaves out TCP connections in TIME_WAIT and CLOSE, which the
 * kernel keeps for 120 and 10 seconds: a guest that opens and closes
 * connections would hold rate * 120 entries besides its bound.  Its
 * closed connections go after CLOSED_SECONDS instead, so those are at
 * most rate * CLOSED_SECONDS.
 */
#define CLOSED_SECONDS	10

static void
put_closed_timeout(struct out *o)
{
	put(o, "\tct timeout closed_tcp {\n\t\tprotocol tcp\n\t\tl3proto ip\n"
	    "\t\tpolicy = { time_wait: %u, close: %u }\n\t}\n",
	    CLOSED_SECONDS, CLOSED_SECONDS);
}

static void
put_cidr(struct out *o, const struct cidr *c)
{
	put_ip(o, c->addr);
	put(o, "/%u", c->len);
}

int
netd_ifname_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 15)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		    c == '-'))
			return 0;
	}
	return 1;
}

void
netd_guest_mac(unsigned slot, uint8_t mac[6])
{
	/* Locally administered unicast, "mv" for mcpvm. */
	mac[0] = 0x02;
	mac[1] = 0x6d;
	mac[2] = 0x76;
	mac[3] = 0x00;
	mac[4] = (uint8_t)(slot >> 8);
	mac[5] = (uint8_t)slot;
}

void
netd_gateway_mac(unsigned slot, uint8_t mac[6])
{
	netd_guest_mac(slot, mac);
	mac[3] = 0x01;
}

static void
put_mac(struct out *o, const uint8_t mac[6])
{
	put(o, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2],
	    mac[3], mac[4], mac[5]);
}

/* The /16 bases netd accepts: a.b.0.0 with nothing in the low half. */
static int
base_ok(uint32_t base)
{
	return (base & 0xffffu) == 0;
}

int
nft_build_vm(const struct nft_vm_spec *s, char *buf, size_t len)
{
	struct out o = { buf, len, 0, 0 };
	unsigned n = s->slot;
	uint32_t guest = s->guest_base | n << 8 | 2;
	char tap[16], nsif[16];
	size_t tag;

	if (len == 0 || n >= NETD_MAX_SLOTS || !base_ok(s->host_base) ||
	    !base_ok(s->guest_base) || s->nblocked > NETD_MAX_CIDRS ||
	    s->nhostaddrs > NETD_MAX_HOSTADDRS ||
	    s->ct_max == 0 || s->ct_rate == 0)
		return -1;
	for (size_t i = 0; i < s->nblocked; i++)
		if (s->blocked[i].len > 32 ||
		    (s->blocked[i].addr & ~cidr_mask(s->blocked[i].len)) != 0)
			return -1;
	snprintf(tap, sizeof(tap), NETD_TAP_FMT, n);
	snprintf(nsif, sizeof(nsif), NETD_NSIF_FMT, n);

	/* Creating then deleting makes the replacement atomic either way. */
	put(&o, "table inet " NETD_TABLE_FMT "\n", n);
	put(&o, "delete table inet " NETD_TABLE_FMT "\n", n);
	put(&o, "table netdev " NETD_TABLE_FMT "\n", n);
	put(&o, "delete table netdev " NETD_TABLE_FMT "\n", n);

	/*
	 * What the guest may put on the wire at all: its own MAC, ARP
	 * about its own address, IPv4 from its own address.  Everything
	 * else (IPv6, other ethertypes, spoofed sources) is dropped
	 * before the netns's stack sees it.
	 */
	put(&o, "table netdev " NETD_TABLE_FMT " {\n", n);
	put(&o, "\tchain guest_in {\n");
	put(&o, "\t\ttype filter hook ingress device \"%s\" priority -500; "
	    "policy drop;\n", tap);
	put(&o, "\t\tether saddr != ");
	put_mac(&o, s->mac);
	put(&o, " drop\n");
	put(&o, "\t\tether type arp arp htype 1 arp ptype ip arp hlen 6 "
	    "arp plen 4 arp saddr ether ");
	put_mac(&o, s->mac);
	put(&o, " arp saddr ip ");
	put_ip(&o, guest);
	put(&o, " accept\n");
	put(&o, "\t\tether type ip ip saddr ");
	put_ip(&o, guest);
	put(&o, " accept\n");
	put(&o, "\t}\n}\n");

	put(&o, "table inet " NETD_TABLE_FMT " {\n", n);
	/* What this text makes, so that netd can tell it is in place. */
	put(&o, "\tcomment \"" NFT_TAG_PREFIX);
	tag = o.used;
	put(&o, "%016x\"\n", 0);
	put(&o, "\tset blocked {\n\t\ttype ipv4_addr\n\t\tflags interval\n"
	    "\t\tauto-merge\n\t\telements = { ");
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
		put(&o, i == 0 ? "" : ", ");
		put_cidr(&o, &never[i]);
	}
	for (size_t i = 0; i < s->nblocked; i++) {
		put(&o, ", ");
		put_cidr(&o, &s->blocked[i]);
	}
	put(&o, " }\n\t}\n");
	/* Its own set, kept current as the host's addresses change, and
	 * filled after the tag: they are not part of what it names. */
	put(&o, "\tset hostaddrs {\n\t\ttype ipv4_addr\n\t}\n");
	put_closed_timeout(&o);
	put(&o, "\tcounter over_rate {\n\t}\n");
	put(&o, "\tcounter over_count {\n\t}\n");

	/* Out: new connections from the guest's address to the public
	 * Internet; in: only replies.  Its resolver is the forwarder on
	 * its gateway (input below), never a forwarded address. */
	put(&o, "\tchain forward {\n");
	put(&o, "\t\ttype filter hook forward priority filter; "
	    "policy drop;\n");
	put(&o, "\t\tmeta nfproto ipv6 drop\n");
	put(&o, "\t\tct state invalid drop\n");
	put(&o, "\t\tiifname \"%s\" ip saddr != ", tap);
	put_ip(&o, guest);
	put(&o, " drop\n");
	/*
	 * The guest's share of connection tracking, before anything it
	 * may open: a new flow over the rate, or
	 * beyond the entries it may hold, is dropped unconfirmed, so it
	 * never takes an entry here or on the host.
	 */
	put(&o, "\t\tiifname \"%s\" ct state new limit rate over "
	    "%u/second burst %u packets counter name over_rate drop\n", tap,
	    s->ct_rate, s->ct_rate);
	put(&o, "\t\tiifname \"%s\" ct state new ct count over %u "
	    "counter name over_count drop\n", tap, s->ct_max);
	put(&o, "\t\tiifname \"%s\" ct state new ct timeout set "
	    "\"closed_tcp\"\n", tap);
	put(&o, "\t\tiifname \"%s\" ip daddr @blocked drop\n", tap);
	put(&o, "\t\tiifname \"%s\" ip daddr @hostaddrs drop\n", tap);
	put(&o, "\t\tiifname \"%s\" oifname \"%s\" ct state "
	    "{ new, established, related } accept\n", tap, nsif);
	put(&o, "\t\tiifname \"%s\" oifname \"%s\" ct state "
	    "{ established, related } accept\n", nsif, tap);
	put(&o, "\t}\n");
	/* The netns itself serves nothing, to the guest or the host. */
	put(&o, "\tchain input {\n");
	put(&o, "\t\ttype filter hook input priority filter; policy drop;\n");
	put(&o, "\t\tiif \"lo\" accept\n");
	/* But the slot's DNS forwarder (dnsfwd.c), the guest's one
	 * resolver whatever its egress policy. */
	put(&o, "\t\tiifname \"%s\" ip daddr ", tap);
	put_ip(&o, guest - 1);
	put(&o, " meta l4proto { tcp, udp } th dport 53 accept\n");
	put(&o, "\t}\n");
	put(&o, "\tchain output {\n");
	put(&o, "\t\ttype filter hook output priority filter; "
	    "policy accept;\n");
	put(&o, "\t\tmeta nfproto ipv6 drop\n");
	put(&o, "\t}\n}\n");
	if (!o.full) {
		char hex[17];

		snprintf(hex, sizeof(hex), "%016llx",
		    (unsigned long long)fnv1a(o.buf, o.used));
		memcpy(o.buf + tag, hex, 16);
	}
	put_hostaddrs(&o, n, s->hostaddrs, s->nhostaddrs);
	return finish(&o);
}

/* "add element" lines for the slot's set of host addresses. */
static void
put_hostaddrs(struct out *o, unsigned slot, const uint32_t *a, size_t n)
{
	if (n == 0)
		return;
	put(o, "add element inet " NETD_TABLE_FMT " hostaddrs { ", slot);
	for (size_t i = 0; i < n; i++) {
		put(o, i == 0 ? "" : ", ");
		put_ip(o, a[i]);
	}
	put(o, " }\n");
}

int
nft_build_hostaddrs(unsigned slot, const uint32_t *addrs, size_t n,
    char *buf, size_t len)
{
	struct out o = { buf, len, 0, 0 };

	if (len == 0 || slot >= NETD_MAX_SLOTS || n > NETD_MAX_HOSTADDRS)
		return -1;
	/* One transaction: the set is never seen empty. */
	put(&o, "flush set inet " NETD_TABLE_FMT " hostaddrs\n", slot);
	put_hostaddrs(&o, slot, addrs, n);
	return finish(&o);
}

int
nft_vm_tag(const char *text, char *tag, size_t len)
{
	const char *p = strstr(text, "\tcomment \"" NFT_TAG_PREFIX);
	size_t n;

	if (p == NULL)
		return -1;
	p += strlen("\tcomment ");
	n = strlen(NFT_TAG_PREFIX) + 18;	/* both quotes, 16 digits */
	if (strlen(p) < n || p[n - 1] != '"' || n >= len)
		return -1;
	memcpy(tag, p, n);
	tag[n] = '\0';
	return 0;
}

int
nft_build_vm_delete(unsigned slot, char *buf, size_t len)
{
	struct out o = { buf, len, 0, 0 };

	if (len == 0 || slot >= NETD_MAX_SLOTS)
		return -1;
	put(&o, "table inet " NETD_TABLE_FMT "\n", slot);
	put(&o, "delete table inet " NETD_TABLE_FMT "\n", slot);
	put(&o, "table netdev " NETD_TABLE_FMT "\n", slot);
	put(&o, "delete table netdev " NETD_TABLE_FMT "\n", slot);
	put(&o, "table inet " NETD_EGRESS_FMT "\n", slot);
	put(&o, "delete table inet " NETD_EGRESS_FMT "\n", slot);
	return finish(&o);
}

static void
put_counter(struct out *o, const char *name, const struct nft_count *c)
{
	put(o, "\tcounter %s {\n", name);
	if (c != NULL)
		put(o, "\t\tpackets %llu bytes %llu\n",
		    (unsigned long long)c->packets,
		    (unsigned long long)c->bytes);
	put(o, "\t}\n");
}

int
nft_build_egress(unsigned slot, const struct egress *e, uint64_t rate,
    const struct nft_drops *start, char *buf, size_t len)
{
	struct out o = { buf, len, 0, 0 };
	const char *set = e->mode == EGRESS_ALLOWLIST ? "allow" : "deny";
	int names = e->mode == EGRESS_ALLOWLIST && e->nnames > 0;
	char tap[16];

	if (len == 0 || slot >= NETD_MAX_SLOTS ||
	    (e->mode != EGRESS_PUBLIC && e->mode != EGRESS_ALLOWLIST) ||
	    e->ncidrs > EGRESS_MAX_CIDRS || e->nnames > EGRESS_MAX_NAMES ||
	    (rate != 0 &&
	    (rate < NETD_RATE_MIN || rate > (uint64_t)NETD_RATE_MAX)))
		return -1;
	for (size_t i = 0; i < e->ncidrs; i++)
		if (e->cidrs[i].len > 32 ||
		    (e->cidrs[i].addr & ~cidr_mask(e->cidrs[i].len)) != 0)
			return -1;
	snprintf(tap, sizeof(tap), NETD_TAP_FMT, slot);
	/* Creating then deleting makes the replacement one transaction
	 * whether or not the slot had a table: the guest's packets meet
	 * the old rules or the new, never none. */
	put(&o, "table inet " NETD_EGRESS_FMT "\n", slot);
	put(&o, "delete table inet " NETD_EGRESS_FMT "\n", slot);
	put(&o, "table inet " NETD_EGRESS_FMT " {\n", slot);
	put(&o, "\tset %s {\n\t\ttype ipv4_addr\n\t\tflags interval\n"
	    "\t\tauto-merge\n", set);
	if (e->ncidrs > 0) {
		put(&o, "\t\telements = { ");
		for (size_t i = 0; i < e->ncidrs; i++) {
			put(&o, i == 0 ? "" : ", ");
			put_cidr(&o, &e->cidrs[i]);
		}
		put(&o, " }\n");
	}
	put(&o, "\t}\n");
	put_counter(&o, "egress_drop", start != NULL ? &start->egress : NULL);
	put_counter(&o, "bandwidth_drop", start != NULL ? &start->bandwidth :
	    NULL);
	/* The addresses netd's forwarder answered for allowed names, each
	 * for its record's (bounded) TTL. */
	if (names)
		put(&o, "\tset allow4 {\n\t\ttype ipv4_addr\n"
		    "\t\tflags timeout\n\t}\n");
	/*
	 * After the VM's own forward chain (priority 0): a packet that one
	 * dropped never gets here, and one it accepted still has to pass
	 * this one.  Only what the guest sends is checked; replies follow
	 * their connection.  The rate polices what the policy let through:
	 * a token bucket of one second's worth, the excess dropped (TCP
	 * backs off to the rate), see netd.8.
	 */
	put(&o, "\tchain forward {\n");
	put(&o, "\t\ttype filter hook forward priority 1; policy accept;\n");
	/*
	 * Whatever the policy, the guest's one resolver is the forwarder
	 * on its gateway (the netns's input, not forwarded): DNS and DNS
	 * over TLS to anywhere else are dropped, listed or public.
	 */
	put(&o, "\t\tiifname \"%s\" meta l4proto { tcp, udp } "
	    "th dport { 53, 853 } counter name egress_drop drop\n", tap);
	if (names)
		/* Neither listed nor answered by the forwarder.  No accept
		 * here: what passes still meets the rate limit below. */
		put(&o, "\t\tiifname \"%s\" ip daddr != @allow "
		    "ip daddr != @allow4 counter name egress_drop drop\n", tap);
	else if (e->mode == EGRESS_ALLOWLIST)
		put(&o, "\t\tiifname \"%s\" ip daddr != @allow counter name "
		    "egress_drop drop\n", tap);
	else
		put(&o, "\t\tiifname \"%s\" ip daddr @deny counter name "
		    "egress_drop drop\n", tap);
	if (rate != 0)
		put(&o, "\t\tiifname \"%s\" limit rate over %llu "
		    "bytes/second counter name bandwidth_drop drop\n", tap,
		    (unsigned long long)rate);
	put(&o, "\t}\n}\n");
	return finish(&o);
}

/* The figures after "counter <name> {" in text, if it has them. */
static void
parse_one(const char *text, const char *name, struct nft_count *c)
{
	char want[64];
	const char *p;
	unsigned long long pk, by;

	snprintf(want, sizeof(want), "counter %s {", name);
	if ((p = strstr(text, want)) == NULL)
		return;
	p += strlen(want);
	while (*p == ' ' || *p == '\t' || *p == '\n')
		p++;
	if (sscanf(p, "packets %llu bytes %llu", &pk, &by) != 2)
		return;
	c->packets = pk;
	c->bytes = by;
}

void
nft_drops_parse(const char *text, struct nft_drops *d)
{
	parse_one(text, "egress_drop", &d->egress);
	parse_one(text, "bandwidth_drop", &d->bandwidth);
	parse_one(text, "over_rate", &d->conn_rate);
	parse_one(text, "over_count", &d->conn_count);
}

int
nft_build_allow4(unsigned slot, const uint32_t *addrs, const uint32_t *secs,
    size_t n, char *buf, size_t len)
{
	struct out o = { buf, len, 0, 0 };

	if (len == 0 || slot >= NETD_MAX_SLOTS || n == 0 || n > 64)
		return -1;
	/* An element already there gets the new timeout (delete, add). */
	put(&o, "add element inet " NETD_EGRESS_FMT " allow4 { ", slot);
	for (size_t i = 0; i < n; i++) {
		put(&o, i == 0 ? "" : ", ");
		put_ip(&o, addrs[i]);
	}
	put(&o, " }\n");
	put(&o, "delete element inet " NETD_EGRESS_FMT " allow4 { ", slot);
	for (size_t i = 0; i < n; i++) {
		put(&o, i == 0 ? "" : ", ");
		put_ip(&o, addrs[i]);
	}
	put(&o, " }\n");
	put(&o, "add element inet " NETD_EGRESS_FMT " allow4 { ", slot);
	for (size_t i = 0; i < n; i++) {
		if (secs[i] == 0 || secs[i] > 604800)
			return -1;
		put(&o, i == 0 ? "" : ", ");
		put_ip(&o, addrs[i]);
		put(&o, " timeout %us", secs[i]);
	}
	put(&o, " }\n");
	return finish(&o);
}

int
nft_build_host(const struct nft_host_spec *s, char *buf, size_t len)
{
	struct out o = { buf, len, 0, 0 };
	struct cidr g = { s->guest_base, 16 };

	if (len == 0 || s->uplink == NULL || !netd_ifname_valid(s->uplink) ||
	    !base_ok(s->host_base) || !base_ok(s->guest_base))
		return -1;
	/*
	 * Owned by netd's netlink socket: if netd dies the kernel removes
	 * it, and with it the masquerade, so the guests' egress stops
	 * rather than running unmanaged.
	 */
	put(&o, "table ip " NETD_HOST_TABLE " {\n\tflags owner\n");
	put_closed_timeout(&o);
	put(&o, "\tchain forward {\n");
	put(&o, "\t\ttype filter hook forward priority filter; "
	    "policy accept;\n");
	/* The host's entries of a guest's flows age as its netns's do. */
	put(&o, "\t\tiifname \"mcpvm-*\" ct state new ct timeout set "
	    "\"closed_tcp\"\n");
	put(&o, "\t\tiifname \"mcpvm-*\" oifname != \"%s\" drop\n",
	    s->uplink);
	put(&o, "\t\toifname \"mcpvm-*\" iifname != \"%s\" drop\n",
	    s->uplink);
	put(&o, "\t\toifname \"mcpvm-*\" ct state != { established, related } "
	    "drop\n");
	put(&o, "\t}\n");
	/* The host's own services are not the guests' business. */
	put(&o, "\tchain input {\n");
	put(&o, "\t\ttype filter hook input priority filter; "
	    "policy accept;\n");
	put(&o, "\t\tiifname \"mcpvm-*\" drop\n");
	put(&o, "\t}\n");
	put(&o, "\tchain postrouting {\n");
	put(&o, "\t\ttype nat hook postrouting priority srcnat; "
	    "policy accept;\n");
	put(&o, "\t\toifname \"%s\" ip saddr ", s->uplink);
	put_cidr(&o, &g);
	put(&o, " masquerade\n");
	put(&o, "\t}\n}\n");
	return finish(&o);
}

struct nft_ctx *
nft_open(void)
{
	struct nft_ctx *ctx;

	if ((ctx = nft_ctx_new(NFT_CTX_DEFAULT)) == NULL)
		return NULL;
	if (nft_ctx_buffer_output(ctx) != 0 ||
	    nft_ctx_buffer_error(ctx) != 0) {
		nft_ctx_free(ctx);
		return NULL;
	}
	return ctx;
}

void
nft_close(struct nft_ctx *ctx)
{
	if (ctx != NULL)
		nft_ctx_free(ctx);
}

int
nft_apply(struct nft_ctx *ctx, const char *text, char *err, size_t errlen)
{
	const char *e;
	size_t n;

	if (nft_run_cmd_from_buffer(ctx, text) == 0) {
		(void)nft_ctx_get_error_buffer(ctx);
		return 0;
	}
	e = nft_ctx_get_error_buffer(ctx);
	if (e == NULL || *e == '\0')
		e = "nft: transaction refused";
	snprintf(err, errlen, "%s", e);
	/* nft's message spans lines; one log line is enough. */
	for (n = 0; err[n] != '\0'; n++)
		if (err[n] == '\n')
			err[n] = ' ';
	return -1;
}

char *
nft_list(struct nft_ctx *ctx, const char *cmd)
{
	const char *out;

	if (nft_run_cmd_from_buffer(ctx, cmd) != 0) {
		(void)nft_ctx_get_error_buffer(ctx);
		return NULL;
	}
	out = nft_ctx_get_output_buffer(ctx);
	return strdup(out != NULL ? out : "");
}

int
nft_vm_has(struct nft_ctx *ctx, unsigned slot, const char *tag)
{
	char cmd[64], want[64], *out;
	int found;

	if (slot >= NETD_MAX_SLOTS)
		return 0;
	snprintf(cmd, sizeof(cmd), "list table netdev " NETD_TABLE_FMT, slot);
	if ((out = nft_list(ctx, cmd)) == NULL)
		return 0;
	free(out);
	snprintf(cmd, sizeof(cmd), "list table inet " NETD_TABLE_FMT, slot);
	snprintf(want, sizeof(want), "\tcomment %s\n", tag);
	if ((out = nft_list(ctx, cmd)) == NULL)
		return 0;
	found = strstr(out, want) != NULL;
	free(out);
	return found;
}

char *
nft_list_handles(struct nft_ctx *ctx, const char *cmd)
{
	unsigned int flags = nft_ctx_output_get_flags(ctx);
	char *out;

	nft_ctx_output_set_flags(ctx, flags | NFT_CTX_OUTPUT_HANDLE);
	out = nft_list(ctx, cmd);
	nft_ctx_output_set_flags(ctx, flags);
	return out;
}
