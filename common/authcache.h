/*
 * What authd last said about a credential, kept by each of its two
 * enforcement points (mcpd and vmmd) so that a busy client does not cost a
 * round trip to authd per request at both of them.
 *
 * An answer is kept only while the holder is subscribed to authd's events
 * and for at most AUTHCACHE_TTL seconds, and never past the credential's
 * own expiry.  authd sends its revocation, expiry and policy events on
 * the same connection as its verify answers, and before it acknowledges
 * the change to authctl; so an answer given before a revocation is read,
 * and dropped, before the revocation's event, and the daemons read authd's
 * connection ahead of their clients' (a higher libevent priority).  A
 * request that arrives after authctl returned is therefore judged on the
 * new state -- unless the daemon is so far behind on authd's connection
 * that the event is still queued in authd; AUTHCACHE_TTL bounds that.
 * Losing authd drops everything.  Only valid credentials are kept: a bad
 * one always goes to authd, whose failure rate limit stays in force.
 *
 * Entries are keyed by a SHA-256 of the credential; the credential itself
 * is not stored.
 */
#ifndef MCPVM_AUTHCACHE_H
#define MCPVM_AUTHCACHE_H

#include <stdint.h>

#include <json-c/json.h>

#define AUTHCACHE_TTL		5	/* seconds */
#define AUTHCACHE_KEY_LEN	32

struct authcache;

struct authcache *authcache_new(void);
void		 authcache_free(struct authcache *);
/* The key of a credential; -1 if libcrypto fails. */
int		 authcache_key(const char *credential,
		    uint8_t key[AUTHCACHE_KEY_LEN]);
/*
 * authd's verify result for the key (borrowed, valid until the next call
 * that changes the cache), or NULL.  now is wall-clock seconds.
 */
json_object	*authcache_get(struct authcache *,
		    const uint8_t key[AUTHCACHE_KEY_LEN], int64_t now);
/* Keeps a verify result (takes a reference) with "workspace",
 * "credential_id" and "expires_at" as authd sends them. */
void		 authcache_put(struct authcache *,
		    const uint8_t key[AUTHCACHE_KEY_LEN], json_object *result,
		    int64_t now);
/* An authd event: one credential, or the whole workspace (cred NULL). */
void		 authcache_drop(struct authcache *, const char *workspace,
		    const char *credential_id);
void		 authcache_flush(struct authcache *);
/* Answers served from the cache, and asked of authd, since the start. */
void		 authcache_stats(const struct authcache *, uint64_t *hits,
		    uint64_t *misses);

#endif
