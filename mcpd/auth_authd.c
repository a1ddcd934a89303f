/*
 * mcpd's verifier: asks authd (IPC_AUTH_VERIFY over common/ipc) who a
 * bearer credential belongs to, and subscribes to authd's revocation
 * events so open streams of a revoked credential close with 1008.
 * authd's answers are kept a few seconds in common/authcache, which the
 * same events keep honest.  authd being away is "unavailable" (503),
 * never "let it through".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "authcache.h"
#include "ipc.h"
#include "log.h"
#include "mcpd.h"

#define AUTHD_TIMEOUT_MS	5000

static struct {
	struct event_base	*base;
	char			 path[256];
	struct ipc_conn		*conn;
	struct event		*retry;
	struct authcache	*cache;
	int			 subscribed;	/* answers may be kept */
} authd;

struct authwait {
	auth_cb		 cb;
	void		*arg;
	uint8_t		 key[AUTHCACHE_KEY_LEN];
	int		 keyed;
};

static void	authd_connect(void);

static void
authd_dispatch(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct json_object *v;
	const char *ws = NULL, *cred = "", *reason = "credential revoked";

	if (m->type != IPC_AUTH_EVENT)
		return;
	if (json_object_object_get_ex(m->body, "workspace", &v) &&
	    json_object_is_type(v, json_type_string))
		ws = json_object_get_string(v);
	if (json_object_object_get_ex(m->body, "credential_id", &v) &&
	    json_object_is_type(v, json_type_string))
		cred = json_object_get_string(v);
	if (json_object_object_get_ex(m->body, "reason", &v) &&
	    json_object_is_type(v, json_type_string))
		reason = json_object_get_string(v);
	if (ws == NULL)
		return;
	authcache_drop(authd.cache, ws, cred[0] != '\0' ? cred : NULL);
	/* A policy change (new quotas) leaves the streams be. */
	if (strcmp(reason, "policy") != 0)
		stream_revoke(ws, cred, reason);
}

static void
authd_closed(struct ipc_conn *conn, void *arg)
{
	struct timeval tv = { 1, 0 };

	authd.conn = NULL;
	authd.subscribed = 0;
	authcache_flush(authd.cache);
	log_warnx("lost authd; reconnecting");
	evtimer_add(authd.retry, &tv);
}

static const struct ipc_rule authd_rules[] = {
	{ IPC_AUTH_VERIFY_RESULT, 0 },
	{ IPC_AUTH_SUBSCRIBE_RESULT, 0 },
	{ IPC_AUTH_EVENT, 0 },
	{ IPC_ERROR, 0 },
};
static const struct ipc_policy authd_policy = {
	"authd", authd_rules, sizeof(authd_rules) / sizeof(authd_rules[0])
};
static const struct ipc_handlers authd_handlers = {
	authd_dispatch, authd_closed
};

static void
authd_subscribed(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	if (m == NULL || m->type != IPC_AUTH_SUBSCRIBE_RESULT) {
		log_warnx("authd refused the revocation subscription");
		return;
	}
	authd.subscribed = 1;
}

static void
authd_retry_cb(evutil_socket_t fd, short ev, void *arg)
{
	authd_connect();
}

static void
authd_connect(void)
{
	struct timeval tv = { 1, 0 };

	authd.conn = ipc_connect(authd.base, authd.path, "mcpd",
	    &authd_policy, &authd_handlers, NULL);
	if (authd.conn == NULL) {
		log_debug("authd at %s: %s", authd.path, strerror(errno));
		evtimer_add(authd.retry, &tv);
		return;
	}
	authd.subscribed = 0;
	authcache_flush(authd.cache);
	if (ipc_conn_set_priority(authd.conn, 0) == -1)
		log_warnx("authd: cannot raise the connection's priority");
	if (ipc_request(authd.conn, IPC_AUTH_SUBSCRIBE, NULL, -1,
	    AUTHD_TIMEOUT_MS, authd_subscribed, NULL) == -1)
		log_warnx("authd: cannot subscribe to revocations");
}

static int
authd_start(void *ctx, struct event_base *base, const struct mcpd_config *cfg)
{
	authd.base = base;
	snprintf(authd.path, sizeof(authd.path), "%s", cfg->authd_socket);
	uint8_t key[AUTHCACHE_KEY_LEN];

	if ((authd.retry = evtimer_new(base, authd_retry_cb, NULL)) == NULL ||
	    (authd.cache = authcache_new()) == NULL)
		return -1;
	/* libcrypto sets SHA-256 up on first use: before the sandbox. */
	if (authcache_key("", key) == -1)
		return -1;
	authd_connect();
	return 0;
}

static int
name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n > 0 && n < max;
}

/* The identity in authd's verify result; -1 if it has none usable. */
static int
identity_of(struct json_object *body, struct auth_identity *id)
{
	struct json_object *v;

	memset(id, 0, sizeof(*id));
	if (!json_object_object_get_ex(body, "workspace", &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    !name_ok(json_object_get_string(v), sizeof(id->workspace)))
		return -1;
	strcpy(id->workspace, json_object_get_string(v));
	if (json_object_object_get_ex(body, "credential_id", &v) &&
	    json_object_is_type(v, json_type_string) &&
	    name_ok(json_object_get_string(v), sizeof(id->credential_id)))
		strcpy(id->credential_id, json_object_get_string(v));
	if (json_object_object_get_ex(body, "expires_at", &v) &&
	    json_object_is_type(v, json_type_int))
		id->expires_at = (time_t)json_object_get_int64(v);
	return 0;
}

static void
authd_verified(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct authwait *w = arg;
	struct auth_identity id;
	struct json_object *e, *c;

	if (m == NULL) {
		w->cb(AUTH_UNAVAILABLE, NULL, w->arg);
	} else if (m->type == IPC_AUTH_VERIFY_RESULT) {
		if (identity_of(m->body, &id) == -1) {
			log_warnx("authd sent a verify result without a "
			    "usable workspace");
			w->cb(AUTH_UNAVAILABLE, NULL, w->arg);
			goto out;
		}
		if (w->keyed && authd.subscribed)
			authcache_put(authd.cache, w->key, m->body,
			    (int64_t)time(NULL));
		w->cb(AUTH_OK, &id, w->arg);
	} else if (json_object_object_get_ex(m->body, "error", &e) &&
	    json_object_object_get_ex(e, "code", &c) &&
	    strcmp(json_object_get_string(c), "unauthorized") == 0) {
		w->cb(AUTH_UNAUTHORIZED, NULL, w->arg);
	} else {
		w->cb(AUTH_UNAVAILABLE, NULL, w->arg);
	}
out:
	explicit_bzero(w, sizeof(*w));
	free(w);
}

static void
authd_verify(void *ctx, const char *token, auth_cb cb, void *arg)
{
	struct json_object *body, *known;
	struct auth_identity id;
	struct authwait *w;

	if (authd.conn == NULL || (w = calloc(1, sizeof(*w))) == NULL) {
		cb(AUTH_UNAVAILABLE, NULL, arg);
		return;
	}
	w->cb = cb;
	w->arg = arg;
	if (authcache_key(token, w->key) == 0) {
		w->keyed = 1;
		known = authcache_get(authd.cache, w->key,
		    (int64_t)time(NULL));
		if (known != NULL && identity_of(known, &id) == 0) {
			explicit_bzero(w, sizeof(*w));
			free(w);
			cb(AUTH_OK, &id, arg);
			return;
		}
	}
	body = json_object_new_object();
	json_object_object_add(body, "credential",
	    json_object_new_string(token));
	if (ipc_request(authd.conn, IPC_AUTH_VERIFY, body, -1,
	    AUTHD_TIMEOUT_MS, authd_verified, w) == -1) {
		explicit_bzero(w, sizeof(*w));
		free(w);
		cb(AUTH_UNAVAILABLE, NULL, arg);
	}
	json_object_put(body);
}

const struct auth_ops authd_auth_ops = {
	"authd", authd_start, authd_verify,
};
