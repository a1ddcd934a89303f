/*
 * netd: the guest network helper.  Makes, on vmmd's request, one network
 * namespace per VM with a veth pair to the host, a TAP for the VMM and an
 * nftables policy that lets the guest reach the public IPv4 Internet and
 * nothing else.  See netd.8 and DESIGN.md section 7.
 */
#ifndef MCPVM_NETD_H
#define MCPVM_NETD_H

#include <sys/types.h>
#include <stdint.h>
#include <time.h>

#include "ipc.h"
#include "link.h"
#include "nft.h"

struct event;
struct event_base;
struct nl_sock;

/* Refused names kept per slot, newest last. */
#define NETD_REFUSED_KEEP	8
#define NETD_OPENED_KEEP	32

struct netd {
	struct event_base	*base;
	struct link_cfg		 lc;
	uid_t			 vmmd_uid;
	unsigned		 max_slots;
	const char		*uplink;	/* "" = none configured */
	struct cidr		 host_range, guest_range;
	struct cidr		 blocked[NETD_MAX_CIDRS];
	size_t			 nblocked;
	uint32_t		 dns[NETD_MAX_DNS];
	size_t			 ndns;
	uint32_t		 ct_max, ct_rate;	/* per VM */
	/* The DNS forwarder (dnsfwd.c): netd's end of its socketpair, the
	 * bounds of the timeouts it asks for, and per slot whether it
	 * serves it and the names it refused. */
	int			 fwd_fd;
	struct event		*fwd_ev;
	uint32_t		 ttl_min, ttl_max;
	unsigned char		 fwd[NETD_MAX_SLOTS];
	/*
	 * What the forwarder opened lately in each slot's allow4, and until
	 * when (CLOCK_MONOTONIC seconds): an answer whose addresses are open
	 * for at least their new TTL already needs no nft transaction, which
	 * is most of an answer's cost.  Emptied with the set (a new egress
	 * table, a teardown).
	 */
	struct netd_opened {
		uint32_t	 addr;
		time_t		 until;
	}			 opened[NETD_MAX_SLOTS][NETD_OPENED_KEEP];
	struct netd_refused {
		uint64_t	 count;
		unsigned	 next;
		char		 last[NETD_REFUSED_KEEP][DNSNAME_MAX + 2];
		time_t		 logged;	/* the last log line's second */
		uint64_t	 unlogged;
	}			 refused[NETD_MAX_SLOTS];
	/* The host's addresses as the slots' hostaddrs sets last got
	 * them, and the socket that hears them change. */
	uint32_t		 hostaddrs[NETD_MAX_HOSTADDRS];
	size_t			 nhostaddrs;
	struct nl_sock		*addr_sk;
	struct event		*addr_ev;
	/* Slots whose network this netd made or kept at a sync. */
	unsigned char		 live[NETD_MAX_SLOTS];
	size_t			 nlive;
	/* The host's nftables context: its socket owns mcpvm_host. */
	struct nft_ctx		*host_nft;
	int			 host_table;
	/* Rules netd put in a host chain whose policy drops forwarding. */
	char			 fwd_chain[160];	/* "" = none */
};

extern struct netd *netd;

#endif
