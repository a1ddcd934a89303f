/*
 * netd's nftables rulesets, built as text from typed inputs (no I/O, so the
 * fuzz target and unit tests drive it exactly as netd does), and applied
 * atomically through libnftables.  Runs in netd.
 */
#ifndef MCPVM_NETD_NFT_H
#define MCPVM_NETD_NFT_H

#include <stddef.h>
#include <stdint.h>

#include "cidr.h"
#include "egress.h"

struct nft_ctx;


/* Slots are the third octet of 10.231.<slot>.0/30 and 10.232.<slot>.0/30. */
#define NETD_MAX_SLOTS	256
#define NETD_MAX_CIDRS	256
#define NETD_MAX_DNS	3
#define NETD_MAX_HOSTADDRS	256
/* A guest's egress bandwidth limit, bytes a second: below a few KB/s a
 * TCP connection barely opens; above 1 TB/s it means nothing. */
#define NETD_RATE_MIN	4096
#define NETD_RATE_MAX	(1LL << 40)

/* Names netd builds for a slot; never taken from a request. */
#define NETD_NS_FMT	"mcpvm-%u"	/* netns, in netns_dir */
#define NETD_HOSTIF_FMT	"mcpvm-%uh"	/* veth, host end */
#define NETD_NSIF_FMT	"mcpvm-%un"	/* veth, netns end */
#define NETD_TAP_FMT	"mcpvm-%ut"	/* the VMM's TAP, in the netns */
#define NETD_TABLE_FMT	"mcpvm_%u"	/* inet and netdev, in the netns */
#define NETD_EGRESS_FMT	"mcpvm_%u_egress"	/* inet, in the netns */
#define NETD_HOST_TABLE	"mcpvm_host"	/* ip, on the host, owner flag */

struct nft_vm_spec {
	unsigned		 slot;
	uint32_t		 host_base;	/* the /16 of host<->netns */
	uint32_t		 guest_base;	/* the /16 of netns<->guest */
	uint8_t			 mac[6];	/* the guest's */
	const struct cidr	*blocked;	/* operator's blocked_cidrs */
	size_t			 nblocked;
	const uint32_t		*hostaddrs;	/* the host's own addresses */
	size_t			 nhostaddrs;
	uint32_t		 ct_max;	/* its conntrack entries, >= 1 */
	uint32_t		 ct_rate;	/* new connections a second (and
						 * at once), >= 1 */
};

struct nft_host_spec {
	const char	*uplink;	/* checked by netd_ifname_valid */
	uint32_t	 host_base, guest_base;
};

/* Interface names netd writes into rulesets: [A-Za-z0-9_.-]{1,15}. */
int	netd_ifname_valid(const char *);
/* The guest's MAC for a slot: 02:6d:76:00:<slot hi>:<slot lo>. */
void	netd_guest_mac(unsigned slot, uint8_t mac[6]);
/* The TAP's own (the guest's gateway): 02:6d:76:01:<slot hi>:<slot lo>,
 * fixed so that a guest resumed from hibernation finds its gateway at the
 * address its ARP cache remembers. */
void	netd_gateway_mac(unsigned slot, uint8_t mac[6]);

/*
 * The whole ruleset text of one VM's netns, replacing any earlier one in
 * the same transaction.  Returns its length, or -1 when the inputs are out
 * of range or buf is too small.
 */
int	nft_build_vm(const struct nft_vm_spec *, char *buf, size_t len);
/*
 * The tag a VM ruleset text gives its inet table, '"mcpvm <16 hex>"'
 * with its quotes, named after everything in the text but the host's
 * addresses: a table listed with the same tag holds the same rules.
 * 0, or -1 when text has none or len is too small.
 */
int	nft_vm_tag(const char *text, char *tag, size_t len);
/*
 * Replaces the elements of the VM's set of host addresses (the table must
 * exist), so that the rest of its ruleset and its counts stay as they are.
 */
int	nft_build_hostaddrs(unsigned slot, const uint32_t *addrs, size_t n,
	    char *buf, size_t len);
/* A named counter's figures. */
struct nft_count {
	uint64_t	packets, bytes;
};

/* The drops of one slot (netd.8, "Counters"). */
struct nft_drops {
	struct nft_count	egress;		/* its egress policy's */
	struct nft_count	bandwidth;	/* over its rate */
	struct nft_count	conn_rate;	/* new flows over ct_rate */
	struct nft_count	conn_count;	/* flows beyond ct_max */
};

/*
 * The slot's egress table, replacing any earlier one in the same
 * transaction: a forward chain of its own after the VM's (so the VM's
 * blocked ranges stay dropped whatever it lists) that drops what the
 * policy does not allow and, with a rate (bytes a second, 0 for none),
 * what the guest sends beyond it.  Its two counters start at start's
 * figures (NULL: at zero), so that a replacement keeps the counts.
 * Kept apart from the VM's table, so a netd that restarts and rebuilds
 * that one leaves it as vmmd set it.
 */
int	nft_build_egress(unsigned slot, const struct egress *, uint64_t rate,
	    const struct nft_drops *start, char *buf, size_t len);
/*
 * Reads the figures of the counters of `nft list counters` text (a
 * slot's netns's) into d; a counter the text lacks stays as it was.
 */
void	nft_drops_parse(const char *text, struct nft_drops *d);
/*
 * Adds addrs to the slot's egress set allow4 (an allowlist with names),
 * each with its timeout secs[i] (1 s to a week), replacing the timeout
 * of one already there.
 */
int	nft_build_allow4(unsigned slot, const uint32_t *addrs,
	    const uint32_t *secs, size_t n, char *buf, size_t len);
/* The host's shared table (forward limits, masquerade on the uplink). */
int	nft_build_host(const struct nft_host_spec *, char *buf, size_t len);
/* Deleting one VM's tables (its egress one too), or the host's. */
int	nft_build_vm_delete(unsigned slot, char *buf, size_t len);

/*
 * libnftables: a context for the calling thread's network namespace (its
 * netlink socket stays there), and one atomic transaction from text.
 * nft_apply returns 0, or -1 with nft's own message in err.
 */
struct nft_ctx *nft_open(void);
void	nft_close(struct nft_ctx *);
int	nft_apply(struct nft_ctx *, const char *text, char *err, size_t errlen);
/* Runs a list command; the output, malloc'd, or NULL. */
char	*nft_list(struct nft_ctx *, const char *cmd);
/* 1 when the current netns has both of the slot's tables and the inet
 * one carries tag (see nft_vm_tag), else 0. */
int	nft_vm_has(struct nft_ctx *, unsigned slot, const char *tag);
/* The same with each rule's "# handle N". */
char	*nft_list_handles(struct nft_ctx *, const char *cmd);

#endif
