/*
 * authd's client; see authclient.h.  Runs in mcpd and vmmd, on their
 * event loops.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "authcache.h"
#include "authclient.h"
#include "ipc.h"
#include "jsonx.h"
#include "log.h"

#define AUTHD_TIMEOUT_MS	5000
#define AUTHD_RETRY_SECONDS	1

struct authclient {
	struct event_base	*base;
	char			 path[256];
	char			 role[32];
	struct ipc_conn		*conn;
	struct event		*retry;
	struct authcache	*cache;
	int			 subscribed;	/* answers may be kept */
	int			 freeing;
	int			 warned;	/* said authd is away */
	authc_event_cb		 on_event;
	void			*arg;
	authc_subscribed_cb	 on_subscribed;
	void			*subscribed_arg;
	authc_policy_cb		 on_policy;
	void			*policy_arg;
};

/* An authclient_revoked in flight: the names asked, to check the answer. */
struct authc_revoked_wait {
	authc_revoked_cb	 cb;
	void			*arg;
	size_t			 n;
	char			 names[IPC_AUTH_REVOKED_MAX][64];
};

struct authc_wait {
	struct authclient	*ac;
	authc_verified_cb	 cb;
	void			*arg;
	uint8_t			 key[AUTHCACHE_KEY_LEN];
	int			 keyed;
};

static void	authc_connect(struct authclient *);

static const struct ipc_rule authd_rules[] = {
	{ IPC_AUTH_VERIFY_RESULT, 0 },
	{ IPC_AUTH_SUBSCRIBE_RESULT, 0 },
	{ IPC_AUTH_EVENT, 0 },
	{ IPC_AUTH_REVOKED_RESULT, 0 },
	{ IPC_ERROR, 0 },
};
static const struct ipc_policy authd_policy = {
	"authd", authd_rules, sizeof(authd_rules) / sizeof(authd_rules[0])
};

static void
authc_dispatch_authd(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct authclient *ac = arg;
	struct jsonx_err jerr;
	struct json_object *pol = NULL;
	const char *ws, *cred = NULL, *reason = "revoked";

	if (m->type != IPC_AUTH_EVENT)
		return;
	if (jsonx_get_string(m->body, "workspace", 1, &ws, &jerr) != 1 ||
	    jsonx_get_string(m->body, "credential_id", 0, &cred, &jerr) < 0 ||
	    jsonx_get_string(m->body, "reason", 0, &reason, &jerr) < 0 ||
	    jsonx_get_object(m->body, "policy", 0, &pol, &jerr) < 0) {
		/* Not knowing whose: forget everyone's. */
		log_warnx("authd sent an event %s cannot read: %s", ac->role,
		    jerr.msg);
		authcache_flush(ac->cache);
		return;
	}
	if (cred != NULL && cred[0] == '\0')
		cred = NULL;
	log_debug("authd: %s, workspace %s credential %s", reason, ws,
	    cred != NULL ? cred : "*");
	authcache_drop(ac->cache, ws, cred);
	if (ac->on_event != NULL)
		ac->on_event(ws, cred, reason, ac->arg);
	if (pol != NULL && cred == NULL && strcmp(reason, "policy") == 0 &&
	    ac->on_policy != NULL)
		ac->on_policy(ws, pol, ac->policy_arg);
}

static void
authc_closed_authd(struct ipc_conn *conn, void *arg)
{
	struct authclient *ac = arg;
	struct timeval tv = { AUTHD_RETRY_SECONDS, 0 };

	ac->conn = NULL;
	ac->subscribed = 0;
	/* Events missed meanwhile are not replayed. */
	authcache_flush(ac->cache);
	if (ac->freeing)
		return;
	log_warnx("lost authd; reconnecting");
	/* That was the one warning for this absence. */
	ac->warned = 1;
	evtimer_add(ac->retry, &tv);
}

static const struct ipc_handlers authd_handlers = {
	authc_dispatch_authd, authc_closed_authd
};

static void
authc_subscribed(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct authclient *ac = arg;

	if (m == NULL || m->type != IPC_AUTH_SUBSCRIBE_RESULT) {
		log_warnx("authd refused the event subscription; every "
		    "request will be verified afresh");
		return;
	}
	ac->subscribed = 1;
	if (ac->on_subscribed != NULL)
		ac->on_subscribed(ac->subscribed_arg);
}

static void
authc_retry_cb(evutil_socket_t fd, short ev, void *arg)
{
	authc_connect(arg);
}

static void
authc_connect(struct authclient *ac)
{
	struct timeval tv = { AUTHD_RETRY_SECONDS, 0 };

	/* Nothing is kept here: the client is new, or authc_closed_authd
	 * forgot it all. */
	ac->conn = ipc_connect(ac->base, ac->path, ac->role, &authd_policy,
	    &authd_handlers, ac);
	if (ac->conn == NULL) {
		/* Once per absence: a daemon started before authd waits. */
		if (!ac->warned)
			log_warnx("authd at %s: %s; retrying every %d s",
			    ac->path, strerror(errno), AUTHD_RETRY_SECONDS);
		else
			log_debug("authd at %s: %s", ac->path,
			    strerror(errno));
		ac->warned = 1;
		evtimer_add(ac->retry, &tv);
		return;
	}
	if (ac->warned)
		log_info("authd at %s: connected", ac->path);
	ac->warned = 0;
	if (ipc_conn_set_priority(ac->conn, 0) == -1)
		log_warnx("authd: cannot read its connection first");
	/* First on the connection, so it is in force before any answer. */
	if (ipc_request(ac->conn, IPC_AUTH_SUBSCRIBE, NULL, -1,
	    AUTHD_TIMEOUT_MS, authc_subscribed, ac) == -1)
		log_warnx("authd: cannot subscribe to its events");
}

struct authclient *
authclient_new(struct event_base *base, const char *path, const char *role,
    authc_event_cb on_event, void *arg)
{
	struct authclient *ac;
	uint8_t key[AUTHCACHE_KEY_LEN];

	if ((ac = calloc(1, sizeof(*ac))) == NULL)
		return NULL;
	ac->base = base;
	snprintf(ac->path, sizeof(ac->path), "%s", path);
	snprintf(ac->role, sizeof(ac->role), "%s", role);
	ac->on_event = on_event;
	ac->arg = arg;
	/* libcrypto sets SHA-256 up on first use: before any sandbox. */
	if ((ac->retry = evtimer_new(base, authc_retry_cb, ac)) == NULL ||
	    (ac->cache = authcache_new()) == NULL ||
	    authcache_key("", key) == -1) {
		authclient_free(ac);
		return NULL;
	}
	authc_connect(ac);
	return ac;
}

void
authclient_free(struct authclient *ac)
{
	if (ac == NULL)
		return;
	ac->freeing = 1;
	if (ac->conn != NULL)
		ipc_conn_free(ac->conn);
	if (ac->retry != NULL)
		event_free(ac->retry);
	authcache_free(ac->cache);
	free(ac);
}

static void
wait_free(struct authc_wait *w)
{
	explicit_bzero(w, sizeof(*w));
	free(w);
}

static void
authc_verified(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct authc_wait *w = arg;
	struct authclient *ac = w->ac;
	struct jsonx_err jerr;
	const char *s;

	if (m == NULL) {
		w->cb(AUTHC_UNAVAILABLE, NULL, w->arg);
	} else if (m->type == IPC_AUTH_VERIFY_RESULT) {
		if (jsonx_get_string(m->body, "workspace", 1, &s, &jerr) !=
		    1 || s[0] == '\0') {
			log_warnx("authd sent a verify result without a "
			    "workspace");
			w->cb(AUTHC_UNAVAILABLE, NULL, w->arg);
		} else {
			if (w->keyed && ac->subscribed)
				authcache_put(ac->cache, w->key, m->body,
				    (int64_t)time(NULL));
			w->cb(AUTHC_OK, m->body, w->arg);
		}
	} else {
		json_object *e;

		/* authd says "unauthorized" and no more; anything else is
		 * its trouble (a busy store), not the caller's. */
		if (json_object_object_get_ex(m->body, "error", &e) &&
		    jsonx_get_string(e, "code", 1, &s, &jerr) == 1 &&
		    strcmp(s, "unauthorized") == 0)
			w->cb(AUTHC_UNAUTHORIZED, NULL, w->arg);
		else
			w->cb(AUTHC_UNAVAILABLE, NULL, w->arg);
	}
	wait_free(w);
}

void
authclient_verify(struct authclient *ac, const char *credential,
    authc_verified_cb cb, void *arg)
{
	struct json_object *body, *known;
	struct authc_wait *w;

	if (ac->conn == NULL || (w = calloc(1, sizeof(*w))) == NULL) {
		cb(AUTHC_UNAVAILABLE, NULL, arg);
		return;
	}
	w->ac = ac;
	w->cb = cb;
	w->arg = arg;
	if (authcache_key(credential, w->key) == 0) {
		w->keyed = 1;
		known = authcache_get(ac->cache, w->key, (int64_t)time(NULL));
		if (known != NULL) {
			wait_free(w);
			/* Held: the callback may reach the cache again. */
			json_object_get(known);
			cb(AUTHC_OK, known, arg);
			json_object_put(known);
			return;
		}
	}
	body = json_object_new_object();
	json_object_object_add(body, "credential",
	    json_object_new_string(credential));
	if (ipc_request(ac->conn, IPC_AUTH_VERIFY, body, -1,
	    AUTHD_TIMEOUT_MS, authc_verified, w) == -1) {
		wait_free(w);
		cb(AUTHC_UNAVAILABLE, NULL, arg);
	}
	json_object_put(body);
}

void
authclient_on_subscribed(struct authclient *ac, authc_subscribed_cb cb,
    void *arg)
{
	ac->on_subscribed = cb;
	ac->subscribed_arg = arg;
}

void
authclient_on_policy(struct authclient *ac, authc_policy_cb cb, void *arg)
{
	ac->on_policy = cb;
	ac->policy_arg = arg;
}

/*
 * authd's answer, read as strictly as any peer's: an array of at most the
 * names asked, each one of them, each once.  Anything else is authd's
 * trouble, and deletes nothing.
 */
static void
authc_revoked_reply(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct authc_revoked_wait *w = arg;
	const char *out[IPC_AUTH_REVOKED_MAX];
	unsigned char seen[IPC_AUTH_REVOKED_MAX];
	struct json_object *arr, *v;
	size_t n = 0, len;
	const char *s;

	if (m == NULL || m->type != IPC_AUTH_REVOKED_RESULT) {
		struct jsonx_err jerr;
		json_object *e;

		if (m != NULL && json_object_object_get_ex(m->body, "error",
		    &e) && jsonx_get_string(e, "message", 1, &s, &jerr) == 1)
			log_warnx("authd refused the revoked query: %.200s", s);
		w->cb(AUTHC_UNAVAILABLE, NULL, 0, w->arg);
		free(w);
		return;
	}
	memset(seen, 0, sizeof(seen));
	if (!json_object_object_get_ex(m->body, "revoked", &arr) ||
	    !json_object_is_type(arr, json_type_array) ||
	    (len = json_object_array_length(arr)) > w->n)
		goto bad;
	for (size_t i = 0; i < len; i++) {
		size_t j;

		v = json_object_array_get_idx(arr, i);
		if (!json_object_is_type(v, json_type_string))
			goto bad;
		s = json_object_get_string(v);
		for (j = 0; j < w->n; j++)
			if (!seen[j] && strcmp(w->names[j], s) == 0)
				break;
		if (j == w->n)
			goto bad;
		seen[j] = 1;
		out[n++] = w->names[j];
	}
	w->cb(AUTHC_OK, out, n, w->arg);
	free(w);
	return;
bad:
	log_warnx("authd sent a revoked answer that is not a subset of the "
	    "%zu names asked; ignored", w->n);
	w->cb(AUTHC_UNAVAILABLE, NULL, 0, w->arg);
	free(w);
}

void
authclient_revoked(struct authclient *ac, const char *const *names,
    size_t n, authc_revoked_cb cb, void *arg)
{
	struct authc_revoked_wait *w;
	struct json_object *body, *arr;

	if (ac->conn == NULL || n > IPC_AUTH_REVOKED_MAX ||
	    (w = calloc(1, sizeof(*w))) == NULL) {
		cb(AUTHC_UNAVAILABLE, NULL, 0, arg);
		return;
	}
	w->cb = cb;
	w->arg = arg;
	w->n = n;
	arr = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		snprintf(w->names[i], sizeof(w->names[i]), "%s", names[i]);
		json_object_array_add(arr, json_object_new_string(names[i]));
	}
	body = json_object_new_object();
	json_object_object_add(body, "workspaces", arr);
	if (ipc_request(ac->conn, IPC_AUTH_REVOKED, body, -1,
	    AUTHD_TIMEOUT_MS, authc_revoked_reply, w) == -1) {
		free(w);
		cb(AUTHC_UNAVAILABLE, NULL, 0, arg);
	}
	json_object_put(body);
}
