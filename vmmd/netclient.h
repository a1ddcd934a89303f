/*
 * vmmd's client of netd (netd.sock): a VM's network is set up before its
 * VMM starts and released when the VM stops for good, hibernates or
 * fails.  netd is optional: without it, network "on" is unavailable.
 * Runs in vmmd, on its event loop.
 */
#ifndef VMMD_NETCLIENT_H
#define VMMD_NETCLIENT_H

#include <stddef.h>
#include <stdint.h>

struct vm;

/*
 * A VM's network as netd answered it, checked: the guest NIC's MAC, its
 * address, prefix and gateway, up to three resolvers, and the kernel
 * argument that tells a booting guestd the same ("mcpvm.net=...").  A
 * clone gets the values themselves in its identity op (vm_boot.c).
 */
#define NET_LEASE_MAX_DNS	3
struct net_lease {
	char	 mac[18];
	char	 address[16];
	int	 prefix;
	char	 gateway[16];
	char	 dns[NET_LEASE_MAX_DNS][16];
	int	 ndns;
	char	 cmdline[256];
};

/*
 * A setup's outcome: on success code is NULL, tap_fd is the VM's TAP
 * (the callback owns it) and lease what the guest is to be given.  The
 * VM is NULL when it was destroyed while netd worked.
 */
typedef void (*net_setup_cb)(struct vm *, int tap_fd,
	    const struct net_lease *lease, const char *code, const char *msg,
	    void *arg);

/*
 * Connects (and keeps reconnecting) to netd; at each connect it tells
 * netd which slots still have a network, so netd removes the rest.  find
 * is vm.c's vm_find: a setup whose VM it no longer finds when netd
 * answers gives the network straight back.
 */
void	netclient_init(struct vm *(*find)(const char *id));
/* 1 when netd is connected and says guest networking works, else 0 with
 * a sentence in why. */
int	netclient_available(char *why, size_t whylen);
/* Appends vmctl preflight's "network" check to checks, from what netd
 * last said (refreshed every 10 s). */
struct json_object;
void	netclient_preflight(struct json_object *checks);
/*
 * A running VM's new egress policy and rate (bytes a second, 0 none):
 * netd replaces its slot's egress table, and the outcome is logged.  0
 * when asked; -1 when netd is away or the slot has no network (its next
 * setup carries the policy).
 */
struct egress;
int	netclient_egress(const char *id, int slot, const struct egress *,
	    uint64_t rate);

/* A slot's drops, in packets, as netd last counted them (netd.8). */
#define NET_REFUSED_KEEP	8	/* netd's NETD_REFUSED_KEEP */
#define NET_REFUSED_NAME	256	/* a name, or netd's "(not a host name)" */
struct net_drops {
	long long	egress;		/* by its egress policy */
	long long	bandwidth;	/* over its rate */
	long long	conn_rate;	/* new connections over the rate */
	long long	conn_count;	/* beyond its conntrack share */
	/* Names its DNS forwarder refused: how many, and the last few,
	 * oldest first (printable ASCII, checked as they came). */
	long long	dns_refused;
	size_t		nrefused_last;
	char		refused_last[NET_REFUSED_KEEP][NET_REFUSED_NAME];
};
/* The slot's drops as of netd's last count (every 10 s, and after each
 * policy change): 0, or -1 when none is known. */
int	netclient_drops(int slot, struct net_drops *);
/* {"egress":…,"bandwidth":…,"conn_rate":…,"conn_count":…}, as vm_status
 * and the stats show them. */
struct json_object *net_drops_json(const struct net_drops *);

/* A VM taken up after a restart keeps the network netd still has for
 * its slot: the first sync lists it, with its egress policy and rate
 * (call before netclient_init). */
struct egress;
void	netclient_keep(int slot, const struct egress *, uint64_t rate);
/* Asks for the network of vm (its id, slot and egress policy, which
 * netd enforces from the start); cb runs exactly once, later. */
struct egress;
void	netclient_setup(struct vm *vm, const char *id, int slot,
	    const struct egress *, uint64_t rate, net_setup_cb cb, void *arg);
/* Removes the network of VM id's slot if it has one; nothing to wait
 * for. */
void	netclient_release(const char *id, int slot);

#endif
