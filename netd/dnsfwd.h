/*
 * netd's DNS forwarder: one unprivileged child of netd that is the one
 * resolver of every networked slot's guest, each slot on sockets netd
 * made in that slot's netns.  It forwards the names the slot's policy
 * lets through to [netd] dns (every name, for public denying none); for
 * an allowlist it hands each A record to netd, which opens it in the
 * slot's set allow4 before the answer is sent.  Every other name gets
 * REFUSED.
 */
#ifndef MCPVM_NETD_DNSFWD_H
#define MCPVM_NETD_DNSFWD_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "dnsmsg.h"
#include "egress.h"

#define FWD_TCP_BACKLOG	4	/* a slot's TCP listener's queue */

enum fwd_type {
	FWD_ADD = 1,	/* netd -> child: a slot, its names, its UDP socket
			 * and TCP listener */
	FWD_DEL,	/* netd -> child: forget a slot, close its socket */
	FWD_OPEN,	/* child -> netd: open these addresses, then say so */
	FWD_OPENED,	/* netd -> child: done (ok 1) or not (ok 0) */
	FWD_REFUSED,	/* child -> netd: a name it refused */
};

/* netd's record of a slot's forwarder (0: none). */
#define FWD_ALLOWING	1	/* answers the names listed, opens answers */
#define FWD_DENYING	2	/* refuses the names listed (public, maybe
				 * none), opens nothing */

struct fwd_msg {
	uint32_t	 type, slot, seq, ok;
	uint32_t	 deny;		/* FWD_ADD: names are denied, not
					 * allowed (a public policy's) */
	uint32_t	 n;			/* addrs, or names */
	uint32_t	 addrs[DNSMSG_MAX_ADDRS];
	uint32_t	 ttls[DNSMSG_MAX_ADDRS];	/* clamped, seconds */
	char		 name[DNSNAME_MAX + 2];	/* FWD_REFUSED */
	char		 names[EGRESS_MAX_NAMES][DNSNAME_MAX + 1];
};

struct fwd_cfg {
	const uint32_t	*dns;		/* upstream resolvers */
	size_t		 ndns;
	uint32_t	 ttl_min, ttl_max;
};

/*
 * Forks the forwarder (before netd drops privileges): the child drops to
 * user nobody with no capabilities, NoNewPrivs and a seccomp allowlist,
 * and serves until its end of the socketpair closes.  Returns netd's end.
 */
int	dnsfwd_start(const struct fwd_cfg *, pid_t *pid);

#endif
