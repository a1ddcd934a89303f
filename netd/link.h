/*
 * netd's links, addresses, routes and network namespaces, through
 * libnl-route-3 and plain syscalls (never by running ip(8)).  Runs in
 * netd, single-threaded: entering a VM's netns moves the whole process
 * there until link_leave().
 */
#ifndef MCPVM_NETD_LINK_H
#define MCPVM_NETD_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "nft.h"

struct nl_sock;

struct link_cfg {
	const char	*netns_dir;	/* where netns mcpvm-<slot> is bound */
	int		 host_ns;	/* netd's own netns, to come back to */
	uint32_t	 host_base, guest_base;
};

/*
 * Makes netns mcpvm-<slot>, the veth pair, the TAP and the addresses and
 * routes, and returns the TAP's descriptor in *tap.  On failure whatever
 * was made is removed again.  0, or -1 with err.
 */
int	link_setup(const struct link_cfg *, unsigned slot, int *tap,
	    char *err, size_t errlen);
/* Removes everything of a slot that exists; 0, or -1 with err. */
int	link_teardown(const struct link_cfg *, unsigned slot, char *err,
	    size_t errlen);
/* 1 when any object of the slot exists (netns file or host veth). */
int	link_exists(const struct link_cfg *, unsigned slot);
/*
 * The slots that have any mcpvm object, by name: netns files in netns_dir
 * and host links called mcpvm-<n>h.  Sets have[slot] = 1.
 */
int	link_list(const struct link_cfg *, unsigned char have[NETD_MAX_SLOTS]);

/* Moves netd into the slot's netns / back home.  0 or -1 (errno). */
int	link_enter(const struct link_cfg *, unsigned slot);
int	link_leave(const struct link_cfg *);

/* The host's IPv4 addresses (all interfaces, not netd's), sorted. */
int	link_host_addrs(uint32_t *out, size_t max, size_t *n);
/*
 * A socket that hears the IPv4 address changes of the current netns
 * (rtnetlink's RTNLGRP_IPV4_IFADDR), non-blocking, its descriptor in
 * *fd; or NULL with err.
 */
struct nl_sock *link_addr_watch(int *fd, char *err, size_t errlen);
/* Reads what is queued: 1 when an address came or went (or the kernel
 * dropped events for want of buffer), else 0. */
int	link_addr_events(struct nl_sock *);
void	link_addr_unwatch(struct nl_sock *);
/* A route or address on the host that overlaps r and is not netd's:
 * 1 with a description in what, 0 when none, -1 on error. */
int	link_host_overlap(const struct cidr *r, char *what, size_t whatlen);
/* 1 when the host has a link of that name. */
int	link_host_has(const char *ifname);
/* /proc/sys/net/ipv4/ip_forward of the current netns: 1, 0, or -1. */
int	link_ip_forward(void);

#endif
