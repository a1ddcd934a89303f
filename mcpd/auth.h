/*
 * The authentication step mcpd takes on every request but /healthz: a
 * bearer credential in, the workspace it belongs to out.  The product
 * verifies with authd over common/ipc; tests plug in their own verifier.
 * There is deliberately no "accept everything" implementation.
 */
#ifndef MCPD_AUTH_H
#define MCPD_AUTH_H

#include <time.h>

#define AUTH_WORKSPACE_MAX	64
#define AUTH_TOKEN_MAX		512

struct auth_identity {
	char		workspace[AUTH_WORKSPACE_MAX];
	char		credential_id[AUTH_WORKSPACE_MAX];	/* or "" */
	time_t		expires_at;	/* 0 = no expiry */
};

enum auth_status {
	AUTH_OK,
	AUTH_UNAUTHORIZED,	/* unknown, expired or revoked credential */
	AUTH_UNAVAILABLE,	/* the verifier cannot answer now */
};

typedef void (*auth_cb)(enum auth_status, const struct auth_identity *,
    void *arg);

struct mcpd_config;
struct event_base;

struct auth_ops {
	const char *name;
	/* Called once with mcpd's event loop, before any verify. */
	int	(*start)(void *ctx, struct event_base *,
		    const struct mcpd_config *);
	/*
	 * Verifies token and calls cb exactly once, possibly before verify
	 * returns.  The token string is only valid during the call.
	 */
	void	(*verify)(void *ctx, const char *token, auth_cb cb, void *arg);
};

#endif
