/*
 * authd's client, for its two enforcement points: mcpd and vmmd.  It
 * connects to authd.sock and reconnects each second while authd is away,
 * subscribes to authd's events and reads them ahead of everything else on
 * the event loop, and keeps answers for valid credentials in
 * common/authcache (see there for why that is safe).  One implementation,
 * so the two points cannot drift apart.
 */
#ifndef MCPVM_AUTHCLIENT_H
#define MCPVM_AUTHCLIENT_H

#include <stddef.h>

#include <event2/event.h>
#include <json-c/json.h>

enum authc_status {
	AUTHC_OK,		/* result: authd's verify answer */
	AUTHC_UNAUTHORIZED,	/* authd said no; it never says why */
	AUTHC_UNAVAILABLE,	/* authd away, slow, busy or incoherent */
};

/* result is borrowed for the call, and has a "workspace" string. */
typedef void	(*authc_verified_cb)(enum authc_status, json_object *result,
		    void *arg);
/* An event: credential_id NULL for the whole workspace; reason is
 * "revoked", "expired" or "policy". */
typedef void	(*authc_event_cb)(const char *workspace,
		    const char *credential_id, const char *reason, void *arg);

/* A "policy" event's new policy, as authd's verify result carries it
 * (borrowed for the call; the callee decodes it). */
typedef void	(*authc_policy_cb)(const char *workspace,
		    json_object *policy, void *arg);

/* A (re)subscription succeeded: events from now on reach authc_event_cb,
 * those sent while the client was away were lost. */
typedef void	(*authc_subscribed_cb)(void *arg);
/* authclient_revoked's answer: with AUTHC_OK, the n names of the list
 * asked that authd says are revoked (each one of the asked names). */
typedef void	(*authc_revoked_cb)(enum authc_status,
		    const char *const *revoked, size_t n, void *arg);

struct authclient;

/*
 * The event base must have been given two priorities
 * (event_base_priority_init(base, 2)): authd's connection reads at 0,
 * everything else stays at the default, 1.  NULL on failure.
 */
struct authclient *authclient_new(struct event_base *, const char *path,
		    const char *role, authc_event_cb, void *arg);
/* Requests still waiting are answered AUTHC_UNAVAILABLE.  Not from
 * within one of the client's own callbacks. */
void		 authclient_free(struct authclient *);
/*
 * Runs cb each time a subscription succeeds, the first included; set it
 * before the event loop runs (the first answer cannot arrive sooner).
 * vmmd's, to ask what it missed (authclient_revoked).
 */
void		 authclient_on_subscribed(struct authclient *,
		    authc_subscribed_cb cb, void *arg);
/*
 * Runs cb for each "policy" event that carries the workspace's new
 * policy, after the event callback.  vmmd's, to bring its running VMs'
 * egress up to date.
 */
void		 authclient_on_policy(struct authclient *,
		    authc_policy_cb cb, void *arg);
/*
 * Asks authd which of n distinct workspace names (at most
 * IPC_AUTH_REVOKED_MAX, each valid) are revoked.  cb runs exactly once,
 * possibly before this returns (authd away: AUTHC_UNAVAILABLE).
 */
void		 authclient_revoked(struct authclient *,
		    const char *const *names, size_t n, authc_revoked_cb cb,
		    void *arg);
/*
 * Asks who credential belongs to.  cb runs exactly once, possibly before
 * this returns (a kept answer, or authd away).
 */
void		 authclient_verify(struct authclient *, const char *credential,
		    authc_verified_cb cb, void *arg);

#endif
