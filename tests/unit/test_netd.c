/*
 * Unit tests for netd's pure parts (netd/request.c, netd/nft.c): request
 * shapes and refusals, prefix parsing, and the rulesets, which must also
 * be accepted by libnftables itself (a dry run in a throwaway netns when
 * the test runs as root).
 */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "nft.h"
#include "request.h"
#include "../check_run.h"

static int
decode(uint32_t type, const char *text, unsigned max, struct netd_request *r,
    char *why, size_t whylen)
{
	struct json_object *o = json_tokener_parse(text);
	int rc;

	ck_assert_msg(o != NULL, "bad test JSON %s", text);
	why[0] = '\0';
	rc = netd_request_decode(type, o, max, r, why, whylen);
	json_object_put(o);
	return rc;
}

START_TEST(request_shapes)
{
	struct netd_request r;
	char why[256];

	ck_assert_int_eq(decode(IPC_NET_SETUP, "{\"slot\":15}", 16, &r, why,
	    sizeof(why)), 0);
	ck_assert_uint_eq(r.slot, 15);
	ck_assert_int_eq(decode(IPC_NET_TEARDOWN, "{\"slot\":0}", 16, &r, why,
	    sizeof(why)), 0);
	ck_assert_int_eq(decode(IPC_NET_SYNC, "{\"slots\":[0,5,3]}", 16, &r,
	    why, sizeof(why)), 0);
	ck_assert_uint_eq(r.nslots, 3);
	ck_assert(r.slots[0] && r.slots[3] && r.slots[5] && !r.slots[1]);
	ck_assert_int_eq(decode(IPC_NET_SYNC, "{\"slots\":[]}", 16, &r, why,
	    sizeof(why)), 0);
	ck_assert_uint_eq(r.nslots, 0);
	ck_assert_ptr_null(r.policies);
	ck_assert_int_eq(decode(IPC_NET_SYNC, "{\"policies\":[{\"slot\":5,"
	    "\"egress\":{\"mode\":\"allowlist\",\"allow\":[\"pkg.example\"]},"
	    "\"rate\":65536}],\"slots\":[0,5]}", 16, &r, why, sizeof(why)), 0);
	ck_assert(r.policy[5] && !r.policy[0]);
	ck_assert_ptr_nonnull(r.policies);	/* into the body, now gone */
	ck_assert_int_eq(decode(IPC_NET_STATUS, "{}", 16, &r, why,
	    sizeof(why)), 0);
	ck_assert_int_eq(decode(IPC_NET_COUNTERS, "{}", 16, &r, why,
	    sizeof(why)), 0);
	ck_assert_int_eq(decode(IPC_NET_EGRESS, "{\"slot\":4,\"egress\":"
	    "{\"mode\":\"allowlist\",\"allow\":[]},\"rate\":65536}", 16, &r,
	    why, sizeof(why)), 0);
	ck_assert_uint_eq(r.slot, 4);
	ck_assert_int_eq(r.egress.mode, EGRESS_ALLOWLIST);
	ck_assert_uint_eq(r.egress.ncidrs, 0);
	ck_assert_uint_eq(r.rate, 65536);
	ck_assert_int_eq(decode(IPC_NET_SETUP, "{\"slot\":4,\"rate\":4096}",
	    16, &r, why, sizeof(why)), 0);
	ck_assert_uint_eq(r.rate, 4096);
	ck_assert_int_eq(decode(IPC_NET_SETUP, "{\"slot\":4}", 16, &r, why,
	    sizeof(why)), 0);
	ck_assert_uint_eq(r.rate, 0);
}
END_TEST

START_TEST(request_refusals)
{
	static const struct {
		uint32_t	 type;
		const char	*body;
		const char	*why;
	} bad[] = {
		{ IPC_NET_SETUP, "{\"slot\":16}", "slot" },
		{ IPC_NET_SETUP, "{\"slot\":-1}", "slot" },
		{ IPC_NET_SETUP, "{\"slot\":\"1\"}", "slot" },
		{ IPC_NET_SETUP, "{\"slot\":1.0}", "slot" },
		{ IPC_NET_SETUP, "{}", "required" },
		{ IPC_NET_SETUP, "{\"slot\":1,\"name\":\"eth0\"}", "slot numbers" },
		{ IPC_NET_SETUP, "{\"slots\":[1]}", "does not take" },
		{ IPC_NET_SYNC, "{\"slots\":[1,1]}", "twice" },
		{ IPC_NET_SYNC, "{\"slots\":[16]}", "slots[0]" },
		{ IPC_NET_SYNC, "{\"slots\":[true]}", "slots[0]" },
		{ IPC_NET_SYNC, "{\"slots\":{}}", "slots" },
		{ IPC_NET_SYNC, "{\"slots\":[1],\"policies\":[{\"slot\":2,"
		    "\"egress\":{\"mode\":\"public\",\"deny\":[]}}]}",
		    "$.policies: slot 2 is not in $.slots" },
		{ IPC_NET_SYNC, "{\"slots\":[1],\"policies\":[{\"slot\":1,"
		    "\"egress\":{\"mode\":\"public\",\"deny\":[]}},{\"slot\":1,"
		    "\"egress\":{\"mode\":\"public\",\"deny\":[]}}]}",
		    "$.policies[1]: slot 1 has two policies" },
		{ IPC_NET_SYNC, "{\"slots\":[1],\"policies\":[{\"slot\":1,"
		    "\"egress\":{\"mode\":\"allowlist\",\"allow\":"
		    "[\"10.0.0.1/8\"]}}]}", "$.policies[0].egress.allow[0]" },
		{ IPC_NET_SYNC, "{\"slots\":[1],\"policies\":[{\"slot\":1}]}",
		    "$.policies[0]" },
		{ IPC_NET_SYNC, "{\"slots\":[1],\"policies\":[3]}",
		    "$.policies[0]: expected an object" },
		{ IPC_NET_STATUS, "{\"slot\":1}", "does not take" },
		{ IPC_NET_COUNTERS, "{\"slot\":1}", "does not take" },
		{ IPC_NET_EGRESS, "{\"slot\":1}", "required" },
		{ IPC_NET_EGRESS, "{\"egress\":{\"mode\":\"public\","
		    "\"deny\":[]}}", "required" },
		{ IPC_NET_EGRESS, "{\"slot\":16,\"egress\":{\"mode\":"
		    "\"public\",\"deny\":[]}}", "slot" },
		{ IPC_NET_EGRESS, "{\"slot\":1,\"egress\":{\"mode\":"
		    "\"public\",\"deny\":[]},\"rate\":4095}", "4096 to" },
		{ IPC_NET_EGRESS, "{\"slot\":1,\"egress\":{\"mode\":"
		    "\"public\",\"deny\":[]},\"rate\":1099511627777}",
		    "$.rate" },
		{ IPC_NET_EGRESS, "{\"slot\":1,\"egress\":{\"mode\":"
		    "\"public\",\"deny\":[]},\"rate\":\"1M\"}", "$.rate" },
		{ IPC_NET_SETUP, "{\"slot\":1,\"rate\":0}", "4096 to" },
		{ IPC_NET_TEARDOWN, "{\"slot\":1,\"rate\":8192}",
		    "does not take" },
		{ IPC_NET_SETUP_RESULT, "{}", "not a request" },
		{ IPC_VM_TOOL, "{}", "not a request" },
	};
	struct netd_request r;
	char why[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(decode(bad[i].type, bad[i].body, 16, &r, why,
		    sizeof(why)) == -1, "accepted %s", bad[i].body);
		ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: %s",
		    bad[i].body, why);
		ck_assert_uint_eq(r.slot, 0);
		ck_assert_uint_eq(r.nslots, 0);
	}
	/* The limit is never above what the addresses can hold. */
	ck_assert_int_eq(decode(IPC_NET_SETUP, "{\"slot\":256}", 4096, &r, why,
	    sizeof(why)), -1);
	ck_assert_int_eq(decode(IPC_NET_SETUP, "{\"slot\":255}", 4096, &r, why,
	    sizeof(why)), 0);
}
END_TEST

START_TEST(request_egress)
{
	static const struct {
		const char	*body;
		const char	*why;
	} bad[] = {
		{ "{\"slot\":1,\"egress\":{\"mode\":\"allowlist\","
		    "\"allow\":[\"10.0.0.1/8\"]}}",
		    "$.egress.allow[0]: 10.0.0.1/8 has host bits set; its "
		    "network is 10.0.0.0/8" },
		{ "{\"slot\":1,\"egress\":{\"mode\":\"allowlist\","
		    "\"allow\":[\"192.0.2.0/24\",\"1.2.3.4\"]}}",
		    "$.egress.allow[1]: \"1.2.3.4\" is not an IPv4 prefix" },
		{ "{\"slot\":1,\"egress\":{\"mode\":\"allowlist\"}}",
		    "needs \"allow\"" },
		{ "{\"slot\":1,\"egress\":{\"mode\":\"public\","
		    "\"allow\":[]}}", "mode public takes \"deny\"" },
		{ "{\"slot\":1,\"egress\":{\"mode\":\"open\"}}",
		    "$.egress.mode" },
		{ "{\"slot\":1,\"egress\":{\"mode\":\"public\","
		    "\"names\":[]}}", "unknown key" },
		{ "{\"slot\":1,\"egress\":{\"mode\":\"public\","
		    "\"deny\":[7]}}", "$.egress.deny[0]: expected a string" },
		{ "{\"slot\":1,\"egress\":[]}", "expected an object" },
		{ "{\"slots\":[1],\"egress\":{\"mode\":\"public\"}}",
		    "does not take" },
	};
	struct netd_request r;
	char why[256], *big;
	size_t off;

	ck_assert_int_eq(decode(IPC_NET_SETUP, "{\"slot\":3,\"egress\":"
	    "{\"mode\":\"allowlist\",\"allow\":[\"203.0.113.7/32\","
	    "\"198.51.100.0/24\",\"203.0.113.7/32\"]}}", 16, &r, why,
	    sizeof(why)), 0);
	ck_assert_int_eq(r.egress.mode, EGRESS_ALLOWLIST);
	/* Sorted, the duplicate gone. */
	ck_assert_uint_eq(r.egress.ncidrs, 2);
	ck_assert_uint_eq(r.egress.cidrs[0].addr, 0xc6336400u);
	ck_assert_uint_eq(r.egress.cidrs[0].len, 24);
	ck_assert_uint_eq(r.egress.cidrs[1].addr, 0xcb007107u);
	/* None sent: public, as before. */
	ck_assert_int_eq(decode(IPC_NET_SETUP, "{\"slot\":3}", 16, &r, why,
	    sizeof(why)), 0);
	ck_assert_int_eq(r.egress.mode, EGRESS_PUBLIC);
	ck_assert_uint_eq(r.egress.ncidrs, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(decode(IPC_NET_SETUP, bad[i].body, 16, &r, why,
		    sizeof(why)) == -1, "accepted %s", bad[i].body);
		ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: %s",
		    bad[i].body, why);
	}
	/* One over the bound of every list. */
	ck_assert_ptr_nonnull(big = malloc(32 * (EGRESS_MAX_CIDRS + 2) + 128));
	off = (size_t)sprintf(big, "{\"slot\":1,\"egress\":{\"mode\":"
	    "\"public\",\"deny\":[");
	for (unsigned i = 0; i <= EGRESS_MAX_CIDRS; i++)
		off += (size_t)sprintf(big + off, "%s\"198.%u.%u.0/24\"",
		    i ? "," : "", 18 + i / 256, i % 256);
	sprintf(big + off, "]}}");
	ck_assert_int_eq(decode(IPC_NET_SETUP, big, 16, &r, why, sizeof(why)),
	    -1);
	ck_assert_msg(strstr(why, "has 257 entries; the limit is 256 "
	    "(egress_max_cidrs)") != NULL, "%s", why);
	free(big);
}
END_TEST

START_TEST(drops_parse)
{
	static const char text[] =
	    "table inet mcpvm_3 {\n"
	    "\tcounter over_rate {\n\t\tpackets 5 bytes 300\n\t}\n"
	    "\tcounter over_count {\n\t\tpackets 0 bytes 0\n\t}\n"
	    "}\n"
	    "table inet mcpvm_3_egress {\n"
	    "\tcounter egress_drop {\n\t\tpackets 18446744073709551615 "
	    "bytes 9\n\t}\n"
	    "\tcounter bandwidth_drop {\n\t\tpackets 2 bytes 3000\n\t}\n"
	    "}\n";
	struct nft_drops d;

	memset(&d, 0, sizeof(d));
	nft_drops_parse(text, &d);
	ck_assert_uint_eq(d.conn_rate.packets, 5);
	ck_assert_uint_eq(d.conn_rate.bytes, 300);
	ck_assert_uint_eq(d.conn_count.packets, 0);
	ck_assert_uint_eq(d.egress.packets, UINT64_MAX);
	ck_assert_uint_eq(d.egress.bytes, 9);
	ck_assert_uint_eq(d.bandwidth.packets, 2);
	ck_assert_uint_eq(d.bandwidth.bytes, 3000);
	/* What a text lacks, or garbles, stays as it was. */
	d.egress.packets = 44;
	nft_drops_parse("counter egress_drop { packets x bytes 1 }", &d);
	ck_assert_uint_eq(d.egress.packets, 44);
	nft_drops_parse("", &d);
	ck_assert_uint_eq(d.bandwidth.bytes, 3000);
}
END_TEST

START_TEST(ruleset_egress)
{
	struct egress e;
	char buf[8192];

	memset(&e, 0, sizeof(e));
	e.mode = EGRESS_ALLOWLIST;
	e.ncidrs = 2;
	e.cidrs[0].addr = 0xc6336400u;
	e.cidrs[0].len = 24;
	e.cidrs[1].addr = 0xcb007107u;
	e.cidrs[1].len = 32;
	ck_assert_int_gt(nft_build_egress(7, &e, 0, NULL, buf,
	    sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, "delete table inet "
	    "mcpvm_7_egress\n"));
	ck_assert_ptr_nonnull(strstr(buf, "elements = { 198.51.100.0/24, "
	    "203.0.113.7/32 }"));
	/* Its resolver is the forwarder, names or not: DNS and DNS over
	 * TLS are dropped first, to a listed prefix too. */
	ck_assert_ptr_nonnull(strstr(buf, "policy accept;\n"
	    "\t\tiifname \"mcpvm-7t\" meta l4proto { tcp, udp } th dport "
	    "{ 53, 853 } counter name egress_drop drop\n"
	    "\t\tiifname \"mcpvm-7t\" ip daddr != @allow counter name "
	    "egress_drop drop"));
	ck_assert_ptr_null(strstr(buf, "limit rate"));
	ck_assert_ptr_nonnull(strstr(buf, "priority 1;"));
	e.mode = EGRESS_PUBLIC;
	ck_assert_int_gt(nft_build_egress(7, &e, 0, NULL, buf,
	    sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, "policy accept;\n"
	    "\t\tiifname \"mcpvm-7t\" meta l4proto { tcp, udp } th dport "
	    "{ 53, 853 } counter name egress_drop drop\n"
	    "\t\tiifname \"mcpvm-7t\" ip daddr @deny counter name "
	    "egress_drop drop"));
	ck_assert_ptr_null(strstr(buf, "@allow"));
	/* Host bits, an unknown mode, a slot out of range: refused. */
	e.cidrs[1].len = 24;
	ck_assert_int_eq(nft_build_egress(7, &e, 0, NULL, buf,
	    sizeof(buf)), -1);
	e.cidrs[1].len = 32;
	e.mode = (enum egress_mode)7;
	ck_assert_int_eq(nft_build_egress(7, &e, 0, NULL, buf,
	    sizeof(buf)), -1);
	e.mode = EGRESS_PUBLIC;
	ck_assert_int_eq(nft_build_egress(NETD_MAX_SLOTS, &e, 0, NULL, buf,
	    sizeof(buf)), -1);
	ck_assert_int_eq(nft_build_egress(7, &e, 0, NULL, buf, 16), -1);
	/* A rate, and counts carried from an earlier table. */
	{
		struct nft_drops d;

		memset(&d, 0, sizeof(d));
		d.egress.packets = 12;
		d.egress.bytes = 3456;
		d.bandwidth.packets = 7;
		d.bandwidth.bytes = 70000;
		ck_assert_int_gt(nft_build_egress(7, &e, 131072, &d, buf,
		    sizeof(buf)), 0);
		ck_assert_ptr_nonnull(strstr(buf, "iifname \"mcpvm-7t\" limit "
		    "rate over 131072 bytes/second counter name "
		    "bandwidth_drop drop"));
		ck_assert_ptr_nonnull(strstr(buf, "counter egress_drop {\n"
		    "\t\tpackets 12 bytes 3456\n"));
		ck_assert_ptr_nonnull(strstr(buf, "counter bandwidth_drop {\n"
		    "\t\tpackets 7 bytes 70000\n"));
		/* Out of bounds either way. */
		ck_assert_int_eq(nft_build_egress(7, &e, NETD_RATE_MIN - 1,
		    NULL, buf, sizeof(buf)), -1);
		ck_assert_int_eq(nft_build_egress(7, &e,
		    (uint64_t)NETD_RATE_MAX + 1, NULL, buf, sizeof(buf)), -1);
	}
	/* Names: a timeout set for the forwarder's answers, DNS and DNS
	 * over TLS dropped to any address, everything else unlisted. */
	e.mode = EGRESS_ALLOWLIST;
	e.nnames = 1;
	snprintf(e.names[0], sizeof(e.names[0]), "pkgs.example.org");
	ck_assert_int_gt(nft_build_egress(7, &e, 0, NULL, buf,
	    sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, "set allow4 {\n\t\ttype ipv4_addr\n"
	    "\t\tflags timeout\n"));
	ck_assert_ptr_nonnull(strstr(buf, "iifname \"mcpvm-7t\" meta l4proto "
	    "{ tcp, udp } th dport { 53, 853 } counter name egress_drop drop\n"
	    "\t\tiifname \"mcpvm-7t\" ip daddr != @allow ip daddr != @allow4 "
	    "counter name egress_drop drop\n"));
	e.nnames = 0;
	{
		uint32_t a[2] = { 0xcb007114u, 0xcb007115u }, t[2] = { 1, 30 };

		ck_assert_int_gt(nft_build_allow4(7, a, t, 2, buf,
		    sizeof(buf)), 0);
		ck_assert_ptr_nonnull(strstr(buf, "add element inet "
		    "mcpvm_7_egress allow4 { 203.0.113.20 timeout 1s, "
		    "203.0.113.21 timeout 30s }\n"));
		t[0] = 0;	/* no timeout: never forever */
		ck_assert_int_eq(nft_build_allow4(7, a, t, 2, buf,
		    sizeof(buf)), -1);
		ck_assert_int_eq(nft_build_allow4(7, a, t, 0, buf,
		    sizeof(buf)), -1);
	}
	/* Deleting the VM's tables takes its egress table too. */
	ck_assert_int_gt(nft_build_vm_delete(7, buf, sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, "delete table inet "
	    "mcpvm_7_egress\n"));
}
END_TEST

START_TEST(cidrs)
{
	static const char *const good[] = { "10.0.0.0/8", "0.0.0.0/0",
	    "203.0.113.7/32", "198.18.0.0/15", "255.255.255.255" };
	static const char *const bad[] = { "10.0.0.1/8", "10.0.0.0/33",
	    "010.0.0.0/8", "10.0.0/8", "10.0.0.0/", "10.0.0.0/08",
	    "256.0.0.0/8", "1.2.3.4.5", " 1.2.3.4", "1.2.3.4/8x", "",
	    "1.2.3.4/-1", "::1" };
	struct cidr c, d;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(cidr_parse(good[i], 1, &c) == 0, "%s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cidr_parse(bad[i], 1, &c) == -1, "%s", bad[i]);
	ck_assert_int_eq(cidr_parse("1.2.3.4", 0, &c), -1);
	ck_assert_int_eq(cidr_parse("10.231.0.0/16", 0, &c), 0);
	ck_assert_int_eq(cidr_parse("10.0.0.0/8", 0, &d), 0);
	ck_assert(cidr_overlap(&c, &d));
	ck_assert_int_eq(cidr_parse("10.232.0.0/16", 0, &d), 0);
	ck_assert(!cidr_overlap(&c, &d));
	ck_assert(netd_ifname_valid("eth0") && netd_ifname_valid("br-lan.5"));
	ck_assert(!netd_ifname_valid("") && !netd_ifname_valid("a\"b") &&
	    !netd_ifname_valid("sixteen-chars-xx") &&
	    !netd_ifname_valid("a b"));
}
END_TEST

static int
build_with(unsigned slot, size_t nhosts, uint32_t ct_max, char *buf,
    size_t len)
{
	static const struct cidr blocked[] = { { 0xc6120000u, 15 },
	    { 0x0a000000u, 8 } };
	static const uint32_t hosts[] = { 0xc6336401u, 0xc0a84d01u };
	struct nft_vm_spec vs = { slot, 0x0ae70000u, 0x0ae80000u, { 0 },
	    blocked, 2, hosts, nhosts, ct_max, 25 };

	netd_guest_mac(slot, vs.mac);
	return nft_build_vm(&vs, buf, len);
}

static int
build(unsigned slot, char *buf, size_t len)
{
	return build_with(slot, 2, 64, buf, len);
}

START_TEST(ruleset_vm)
{
	char buf[16384], small[64];

	ck_assert_int_gt(build(7, buf, sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, "table inet mcpvm_7 {"));
	ck_assert_ptr_nonnull(strstr(buf, "device \"mcpvm-7t\""));
	ck_assert_ptr_nonnull(strstr(buf, "ether saddr != 02:6d:76:00:00:07 "
	    "drop"));
	ck_assert_ptr_nonnull(strstr(buf, "arp saddr ip 10.232.7.2 accept"));
	ck_assert_ptr_nonnull(strstr(buf, "ip saddr 10.232.7.2 accept"));
	ck_assert_ptr_nonnull(strstr(buf, "100.64.0.0/10"));
	ck_assert_ptr_nonnull(strstr(buf, "169.254.0.0/16"));
	ck_assert_ptr_nonnull(strstr(buf, "198.18.0.0/15"));
	/* Cloud host services outside the private ranges. */
	ck_assert_ptr_nonnull(strstr(buf, "168.63.129.16/32"));
	ck_assert_ptr_nonnull(strstr(buf, "192.0.0.0/24"));
	/* The host's addresses: their own set, filled after the table. */
	ck_assert_ptr_nonnull(strstr(buf, "\tset hostaddrs {\n\t\ttype "
	    "ipv4_addr\n\t}\n"));
	ck_assert_ptr_nonnull(strstr(buf, "add element inet mcpvm_7 hostaddrs "
	    "{ 198.51.100.1, 192.168.77.1 }\n"));
	ck_assert_ptr_nonnull(strstr(buf, "ip daddr @hostaddrs drop"));
	/* No resolver is forwarded to: the guest's is its gateway. */
	ck_assert_ptr_null(strstr(buf, "@dns"));
	ck_assert_ptr_null(strstr(buf, "oifname \"mcpvm-7n\" meta l4proto"));
	/* The guest's connection limits, before anything it may open. */
	ck_assert_ptr_nonnull(strstr(buf, "iifname \"mcpvm-7t\" ct state new "
	    "limit rate over 25/second burst 25 packets counter name over_rate "
	    "drop\n"));
	ck_assert_ptr_nonnull(strstr(buf, "iifname \"mcpvm-7t\" ct state new "
	    "ct count over 64 counter name over_count drop\n"));
	ck_assert(strstr(buf, "ct count over") < strstr(buf, "@blocked"));
	/* Closed connections, which ct count leaves out, go soon. */
	ck_assert_ptr_nonnull(strstr(buf, "policy = { time_wait: 10, "
	    "close: 10 }"));
	ck_assert_ptr_nonnull(strstr(buf, "iifname \"mcpvm-7t\" ct state new "
	    "ct timeout set \"closed_tcp\"\n"));
	ck_assert_ptr_nonnull(strstr(buf, "meta nfproto ipv6 drop"));
	/* Replaced, never flushed: the text deletes only its own tables. */
	ck_assert_ptr_null(strstr(buf, "flush"));
	ck_assert_ptr_nonnull(strstr(buf, "delete table inet mcpvm_7\n"));
	ck_assert_int_eq(build(7, small, sizeof(small)), -1);
	ck_assert_int_eq(build(NETD_MAX_SLOTS, buf, sizeof(buf)), -1);
	ck_assert_int_gt(build(255, buf, sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, "02:6d:76:00:00:ff"));
	/* Without a bound there is no ruleset. */
	ck_assert_int_eq(build_with(7, 2, 0, buf, sizeof(buf)), -1);
}
END_TEST

/* The tag names the rules, not the host's addresses. */
START_TEST(ruleset_tag)
{
	char buf[16384], a[64], b[64], c[64];

	ck_assert_int_gt(build_with(7, 2, 64, buf, sizeof(buf)), 0);
	ck_assert_int_eq(nft_vm_tag(buf, a, sizeof(a)), 0);
	ck_assert_int_eq(strlen(a), 24);
	ck_assert_int_eq(strncmp(a, "\"mcpvm ", 7), 0);
	ck_assert_str_ne(a, "\"mcpvm 0000000000000000\"");
	ck_assert_int_gt(build_with(7, 0, 64, buf, sizeof(buf)), 0);
	ck_assert_ptr_null(strstr(buf, "add element"));
	ck_assert_int_eq(nft_vm_tag(buf, b, sizeof(b)), 0);
	ck_assert_str_eq(a, b);
	ck_assert_int_gt(build_with(7, 2, 65, buf, sizeof(buf)), 0);
	ck_assert_int_eq(nft_vm_tag(buf, c, sizeof(c)), 0);
	ck_assert_str_ne(a, c);
	ck_assert_int_gt(build_with(8, 2, 64, buf, sizeof(buf)), 0);
	ck_assert_int_eq(nft_vm_tag(buf, c, sizeof(c)), 0);
	ck_assert_str_ne(a, c);
	ck_assert_int_eq(nft_vm_tag(buf, c, 24), -1);
	ck_assert_int_eq(nft_vm_tag("table inet mcpvm_7 {\n", c, sizeof(c)),
	    -1);
	ck_assert_int_eq(nft_vm_tag("\tcomment \"mcpvm 0123\"\n", c,
	    sizeof(c)), -1);
}
END_TEST

START_TEST(ruleset_hostaddrs)
{
	static const uint32_t hosts[] = { 0xc6336401u, 0x0a000001u };
	char buf[4096];

	ck_assert_int_gt(nft_build_hostaddrs(3, hosts, 2, buf, sizeof(buf)),
	    0);
	ck_assert_str_eq(buf, "flush set inet mcpvm_3 hostaddrs\n"
	    "add element inet mcpvm_3 hostaddrs { 198.51.100.1, 10.0.0.1 }\n");
	/* No address left: the set is emptied. */
	ck_assert_int_gt(nft_build_hostaddrs(3, hosts, 0, buf, sizeof(buf)),
	    0);
	ck_assert_str_eq(buf, "flush set inet mcpvm_3 hostaddrs\n");
	ck_assert_int_eq(nft_build_hostaddrs(NETD_MAX_SLOTS, hosts, 2, buf,
	    sizeof(buf)), -1);
	ck_assert_int_eq(nft_build_hostaddrs(3, hosts, NETD_MAX_HOSTADDRS + 1,
	    buf, sizeof(buf)), -1);
	ck_assert_int_eq(nft_build_hostaddrs(3, hosts, 2, buf, 40), -1);
}
END_TEST

START_TEST(ruleset_host)
{
	struct nft_host_spec hs = { "up0", 0x0ae70000u, 0x0ae80000u };
	char buf[4096];

	ck_assert_int_gt(nft_build_host(&hs, buf, sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, "flags owner"));
	ck_assert_ptr_nonnull(strstr(buf, "oifname \"up0\" ip saddr "
	    "10.232.0.0/16 masquerade"));
	ck_assert_ptr_nonnull(strstr(buf, "iifname \"mcpvm-*\" ct state new "
	    "ct timeout set \"closed_tcp\"\n"));
	hs.uplink = "up0\" accept";
	ck_assert_int_eq(nft_build_host(&hs, buf, sizeof(buf)), -1);
	hs.uplink = "up0";
	hs.guest_base = 0x0ae80100u;
	ck_assert_int_eq(nft_build_host(&hs, buf, sizeof(buf)), -1);
}
END_TEST

/* libnftables itself must take the text: checked, not applied, in a
 * network namespace of the test's own. */
START_TEST(ruleset_nft_accepts)
{
	static const uint32_t hosts[] = { 0xcb007107u };
	struct nft_host_spec hs = { "up0", 0x0ae70000u, 0x0ae80000u };
	struct nft_ctx *ctx;
	char buf[16384], err[2048], tag[64], other[64], *out;

	if (geteuid() != 0 || unshare(CLONE_NEWNET) == -1)
		return;		/* needs root; the rest ran */
	ck_assert_int_eq(system("ip tuntap add mcpvm-7t mode tap"), 0);
	ck_assert_ptr_nonnull(ctx = nft_open());
	ck_assert_int_gt(build(7, buf, sizeof(buf)), 0);
	ck_assert_msg(nft_apply(ctx, buf, err, sizeof(err)) == 0, "%s", err);
	/* Applying again replaces it atomically. */
	ck_assert_msg(nft_apply(ctx, buf, err, sizeof(err)) == 0, "%s", err);
	/* The kernel keeps the tag: netd can tell the rules are in place. */
	ck_assert_int_eq(nft_vm_tag(buf, tag, sizeof(tag)), 0);
	ck_assert_int_eq(nft_vm_has(ctx, 7, tag), 1);
	ck_assert_int_eq(nft_vm_has(ctx, 8, tag), 0);
	ck_assert_int_gt(build_with(7, 2, 65, buf, sizeof(buf)), 0);
	ck_assert_int_eq(nft_vm_tag(buf, other, sizeof(other)), 0);
	ck_assert_int_eq(nft_vm_has(ctx, 7, other), 0);
	ck_assert_int_gt(nft_build_hostaddrs(7, hosts, 1, buf, sizeof(buf)),
	    0);
	ck_assert_msg(nft_apply(ctx, buf, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(nft_vm_has(ctx, 7, tag), 1);
	out = nft_list(ctx, "list set inet mcpvm_7 hostaddrs");
	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(strstr(out, "elements = { 203.0.113.7 }"));
	free(out);
	ck_assert_int_gt(nft_build_host(&hs, buf, sizeof(buf)), 0);
	ck_assert_msg(nft_apply(ctx, buf, err, sizeof(err)) == 0, "%s", err);
	/* Each egress shape, an empty allowlist too, replaces the last. */
	{
		struct egress e;

		memset(&e, 0, sizeof(e));
		e.mode = EGRESS_ALLOWLIST;
		ck_assert_int_gt(nft_build_egress(7, &e, 0, NULL, buf,
		    sizeof(buf)), 0);
		ck_assert_msg(nft_apply(ctx, buf, err, sizeof(err)) == 0,
		    "%s", err);
		e.ncidrs = 1;
		e.cidrs[0].addr = 0xc6336400u;
		e.cidrs[0].len = 24;
		ck_assert_int_gt(nft_build_egress(7, &e, 0, NULL, buf,
		    sizeof(buf)), 0);
		ck_assert_msg(nft_apply(ctx, buf, err, sizeof(err)) == 0,
		    "%s", err);
		e.mode = EGRESS_PUBLIC;
		ck_assert_int_gt(nft_build_egress(7, &e, 0, NULL, buf,
		    sizeof(buf)), 0);
		ck_assert_msg(nft_apply(ctx, buf, err, sizeof(err)) == 0,
		    "%s", err);
		out = nft_list(ctx, "list set inet mcpvm_7_egress deny");
		ck_assert_ptr_nonnull(out);
		ck_assert_ptr_nonnull(strstr(out, "198.51.100.0/24"));
		free(out);
		/* With a rate and carried counts: the kernel keeps both, and
		 * its listing reads back as they were given. */
		{
			struct nft_drops d, got;

			memset(&d, 0, sizeof(d));
			d.egress.packets = 9;
			d.egress.bytes = 900;
			d.bandwidth.packets = 4;
			d.bandwidth.bytes = 6000;
			ck_assert_int_gt(nft_build_egress(7, &e, 65536, &d, buf,
			    sizeof(buf)), 0);
			ck_assert_msg(nft_apply(ctx, buf, err, sizeof(err)) ==
			    0, "%s", err);
			out = nft_list(ctx, "list counters");
			ck_assert_ptr_nonnull(out);
			memset(&got, 0, sizeof(got));
			nft_drops_parse(out, &got);
			free(out);
			ck_assert_mem_eq(&got.egress, &d.egress,
			    sizeof(d.egress));
			ck_assert_mem_eq(&got.bandwidth, &d.bandwidth,
			    sizeof(d.bandwidth));
		}
	}
	ck_assert_int_gt(nft_build_vm_delete(7, buf, sizeof(buf)), 0);
	ck_assert_msg(nft_apply(ctx, buf, err, sizeof(err)) == 0, "%s", err);
	out = nft_list(ctx, "list tables");
	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_null(strstr(out, "mcpvm_7"));
	free(out);
	/* A bad transaction says why. */
	ck_assert_int_eq(nft_apply(ctx, "delete table inet nosuch", err,
	    sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "nosuch"));
	nft_close(ctx);
}
END_TEST

static Suite *
netd_suite(void)
{
	Suite *s = suite_create("netd");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, request_shapes);
	tcase_add_test(tc, request_refusals);
	tcase_add_test(tc, request_egress);
	tcase_add_test(tc, ruleset_egress);
	tcase_add_test(tc, drops_parse);
	tcase_add_test(tc, cidrs);
	tcase_add_test(tc, ruleset_vm);
	tcase_add_test(tc, ruleset_tag);
	tcase_add_test(tc, ruleset_hostaddrs);
	tcase_add_test(tc, ruleset_host);
	tcase_add_test(tc, ruleset_nft_accepts);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(netd_suite());
}
