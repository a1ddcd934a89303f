/*
 * authd: the workspace credential daemon.  State shared by its parts:
 * authd.c (its contract, start-up, privilege drop, sockets), peer.c (authd.sock: verify,
 * subscriptions, failure rate limiting, expiry events) and control.c
 * (authctl.sock: issue, rotate, revoke, policy, list, show).
 */
#ifndef MCPVM_AUTHD_AUTHD_H
#define MCPVM_AUTHD_AUTHD_H

#include <sys/types.h>
#include <stdint.h>

#include "ipc.h"
#include "policy.h"

struct event_base;
struct store;

#define AUTHD_MAX_PEERS		16	/* uids allowed on authd.sock */
#define AUTHD_LIST_MAX		2000	/* workspaces in one list reply */
#define AUTHD_SHOW_MAX		1000	/* credentials in one show reply */

struct authd_settings {
	const char	*socket;	/* authd.sock */
	const char	*ctl_socket;	/* authctl.sock */
	const char	*database;
	const char	*user;		/* drop to this user when root */
	const char	*admin_group;
	int64_t		 default_ttl;	/* seconds, 0 = never */
	struct auth_policy defaults;	/* a new workspace's policy */
	unsigned int	 fail_rate;	/* failed verifications per second */
	unsigned int	 fail_burst;
	unsigned int	 fail_queue;	/* delayed replies before "busy" */
	unsigned int	 expiry_ms;	/* expiry scan period */
};

struct authd {
	struct event_base	*base;
	struct store		*store;
	struct authd_settings	 set;
	/* authd.sock peers, resolved from user names at start */
	size_t			 npeers;
	uid_t			 peer_uid[AUTHD_MAX_PEERS];
	struct ipc_policy	 peer_policy[AUTHD_MAX_PEERS];
	char			 peer_name[AUTHD_MAX_PEERS][33];
	gid_t			 admin_gid;
};

extern struct authd *authd;

/* peer.c: authd.sock (the contract is at the top of authd.c) */
int	peer_init(struct authd *);
void	peer_shutdown(void);
void	authd_dispatch_peer(struct ipc_conn *, struct ipc_msg *, void *);
void	authd_closed_peer(struct ipc_conn *, void *);
/* Forgets cached verifications; called on every change to the store. */
void	peer_cache_flush(void);
/* Tells every subscriber; cred_id NULL = the whole workspace. */
void	peer_event(const char *ws, const char *cred_id, const char *reason);
/* A "policy" event that carries the workspace's new policy, so that
 * vmmd can bring its running VMs up to date without asking. */
struct auth_policy;
void	peer_event_policy(const char *ws, const struct auth_policy *);

/* control.c: authctl.sock */
void	authd_dispatch_authctl(struct ipc_conn *, struct ipc_msg *, void *);

#endif
