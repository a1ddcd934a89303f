/*
 * authd.sock: what mcpd and vmmd may ask of authd.  Verifies credentials,
 * pushes revocation and expiry events to subscribers, and rate-limits
 * failed verifications per peer uid without delaying valid ones.
 */
#include <sys/queue.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "authd.h"
#include "cred.h"
#include "log.h"
#include "request.h"
#include "store.h"

struct limiter;

struct peer {
	struct ipc_conn		*conn;
	struct limiter		*lim;
	uid_t			 uid;
	int			 subscribed;
	TAILQ_ENTRY(peer)	 entry;
};

/* An unauthorized reply held back by the failure rate limit. */
struct deferred {
	struct peer		*peer;
	uint32_t		 id;
	TAILQ_ENTRY(deferred)	 entry;
};

/*
 * One token bucket per peer uid, spent only by failed verifications, so a
 * flood of bad credentials slows its own answers and nothing else.
 */
struct limiter {
	uid_t			 uid;
	double			 tokens;
	struct timespec		 last;
	unsigned int		 queued;
	TAILQ_HEAD(, deferred)	 queue;
	struct event		*timer;
	/* since the last summary line */
	unsigned long		 failed, delayed, refused;
};

/*
 * Verified credentials, by hash, with the reply they get.  authd is the
 * only writer of its database and flushes this on every change it makes
 * (peer_cache_flush), so a hit is as good as a lookup; expiry is checked
 * on every hit.  Only successes are kept.
 */
#define CACHE_SLOTS	65536	/* a power of two; 3 MiB */

struct cache_slot {
	uint8_t			 hash[CRED_HASH_LEN];
	int64_t			 expires_at;
	struct json_object	*reply;		/* NULL = empty */
};

static struct cache_slot cache[CACHE_SLOTS];

static TAILQ_HEAD(, peer) peers = TAILQ_HEAD_INITIALIZER(peers);
static struct limiter limiters[AUTHD_MAX_PEERS];
static struct event *expiry_ev, *summary_ev;
static int64_t expiry_last;

static double
elapsed(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	    (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static void
limiter_refill(struct limiter *l)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	l->tokens += elapsed(&l->last, &now) * authd->set.fail_rate;
	if (l->tokens > authd->set.fail_burst)
		l->tokens = authd->set.fail_burst;
	l->last = now;
}

static void
reply_unauthorized(struct peer *p, uint32_t id)
{
	/* Deliberately the same words for every reason. */
	ipc_reply_error(p->conn, id, "unauthorized", "unauthorized");
}

static void
limiter_schedule(struct limiter *l)
{
	struct timeval tv;
	double wait;

	if (TAILQ_EMPTY(&l->queue))
		return;
	wait = (1.0 - l->tokens) / authd->set.fail_rate;
	if (wait < 0.001)
		wait = 0.001;
	tv.tv_sec = (time_t)wait;
	tv.tv_usec = (suseconds_t)((wait - (double)tv.tv_sec) * 1e6);
	evtimer_add(l->timer, &tv);
}

static void
limiter_release(int fd, short ev, void *arg)
{
	struct limiter *l = arg;
	struct deferred *d;

	limiter_refill(l);
	while ((d = TAILQ_FIRST(&l->queue)) != NULL && l->tokens >= 1.0) {
		TAILQ_REMOVE(&l->queue, d, entry);
		l->queued--;
		l->tokens -= 1.0;
		reply_unauthorized(d->peer, d->id);
		free(d);
	}
	limiter_schedule(l);
}

static void
verify_failed(struct peer *p, uint32_t id)
{
	struct limiter *l = p->lim;
	struct deferred *d;

	l->failed++;
	limiter_refill(l);
	if (TAILQ_EMPTY(&l->queue) && l->tokens >= 1.0) {
		l->tokens -= 1.0;
		reply_unauthorized(p, id);
		return;
	}
	if (l->queued >= authd->set.fail_queue ||
	    (d = calloc(1, sizeof(*d))) == NULL) {
		l->refused++;
		ipc_reply_error(p->conn, id, "busy", "too many failed "
		    "verifications from this peer; retry later");
		return;
	}
	d->peer = p;
	d->id = id;
	TAILQ_INSERT_TAIL(&l->queue, d, entry);
	l->queued++;
	l->delayed++;
	if (!evtimer_pending(l->timer, NULL))
		limiter_schedule(l);
}

/* One line per window, never one per failure: a flood must not flood. */
static void
summary_cb(int fd, short ev, void *arg)
{
	for (size_t i = 0; i < authd->npeers; i++) {
		struct limiter *l = &limiters[i];

		if (l->failed == 0)
			continue;
		log_warnx("%lu failed verifications from uid %u in the last "
		    "10 s (%lu delayed, %lu refused as busy)", l->failed,
		    (unsigned int)l->uid, l->delayed, l->refused);
		l->failed = l->delayed = l->refused = 0;
	}
}

static struct cache_slot *
cache_slot(const uint8_t hash[CRED_HASH_LEN])
{
	uint32_t h;

	/* The hash is uniformly random: its first bytes make the index. */
	memcpy(&h, hash, sizeof(h));
	return &cache[h & (CACHE_SLOTS - 1)];
}

void
peer_cache_flush(void)
{
	for (size_t i = 0; i < CACHE_SLOTS; i++) {
		if (cache[i].reply == NULL)
			continue;
		json_object_put(cache[i].reply);
		explicit_bzero(&cache[i], sizeof(cache[i]));
	}
}

static void
peer_verify(struct peer *p, struct ipc_msg *msg)
{
	struct authd_request req;
	struct store_verdict v;
	struct json_object *body;
	struct cache_slot *slot = NULL;
	uint8_t hash[CRED_HASH_LEN];
	char why[256], err[STORE_ERR_MAX] = "cannot hash the credential";
	enum store_rc rc;
	int64_t now;

	if (authd_request_decode(msg->type, msg->body, &req, why,
	    sizeof(why)) == -1) {
		ipc_reply_error(p->conn, msg->id, "invalid_argument", "%s",
		    why);
		return;
	}
	if (!req.cred_ok) {
		explicit_bzero(&req, sizeof(req));
		verify_failed(p, msg->id);
		return;
	}
	rc = cred_hash(req.credential, CRED_LEN, hash) == -1 ? STORE_ERROR :
	    STORE_OK;
	explicit_bzero(&req, sizeof(req));
	now = time(NULL);
	if (rc == STORE_OK) {
		slot = cache_slot(hash);
		if (slot->reply != NULL && cred_hash_equal(slot->hash, hash) &&
		    (slot->expires_at == 0 || slot->expires_at > now)) {
			explicit_bzero(hash, sizeof(hash));
			ipc_reply(p->conn, IPC_AUTH_VERIFY_RESULT, msg->id,
			    slot->reply, -1);
			return;
		}
		rc = store_verify(authd->store, hash, now, &v, err,
		    sizeof(err));
	}
	switch (rc) {
	case STORE_OK:
		break;
	case STORE_UNAUTHORIZED:
		explicit_bzero(hash, sizeof(hash));
		verify_failed(p, msg->id);
		return;
	case STORE_BUSY:
		explicit_bzero(hash, sizeof(hash));
		ipc_reply_error(p->conn, msg->id, "busy", "credential store "
		    "is busy; retry");
		return;
	default:
		explicit_bzero(hash, sizeof(hash));
		log_warnx("verify: %s", err);
		ipc_reply_error(p->conn, msg->id, "internal", "credential "
		    "store error");
		return;
	}
	body = json_object_new_object();
	json_object_object_add(body, "workspace",
	    json_object_new_string(v.workspace));
	json_object_object_add(body, "credential_id",
	    json_object_new_string(v.cred_id));
	json_object_object_add(body, "expires_at",
	    json_object_new_int64(v.expires_at));
	json_object_object_add(body, "policy", policy_to_json(&v.policy));
	ipc_reply(p->conn, IPC_AUTH_VERIFY_RESULT, msg->id, body, -1);
	if (slot->reply != NULL)
		json_object_put(slot->reply);
	memcpy(slot->hash, hash, sizeof(hash));
	slot->expires_at = v.expires_at;
	slot->reply = body;
	explicit_bzero(hash, sizeof(hash));
}

static void
revoked_one(const char *ws, void *arg)
{
	json_object_array_add(arg, json_object_new_string(ws));
}

/*
 * Which of a list of workspaces are revoked: vmmd asks after each
 * subscription for the owners of its snapshots, for the events it may
 * have missed.  Every peer may ask: authd.c says why.
 */
static void
peer_revoked(struct peer *p, struct ipc_msg *msg)
{
	struct authd_request req;
	struct json_object *body, *arr;
	char why[256], err[STORE_ERR_MAX];
	enum store_rc rc;

	if (authd_request_decode(msg->type, msg->body, &req, why,
	    sizeof(why)) == -1) {
		ipc_reply_error(p->conn, msg->id, "invalid_argument", "%s",
		    why);
		return;
	}
	arr = json_object_new_array();
	rc = store_revoked(authd->store, req.workspaces, req.nworkspaces,
	    revoked_one, arr, err, sizeof(err));
	if (rc != STORE_OK) {
		json_object_put(arr);
		if (rc == STORE_BUSY)
			ipc_reply_error(p->conn, msg->id, "busy", "credential "
			    "store is busy; retry");
		else {
			log_warnx("revoked: %s", err);
			ipc_reply_error(p->conn, msg->id, "internal",
			    "credential store error");
		}
		return;
	}
	log_debug("uid %u asked about %zu workspaces: %zu revoked",
	    (unsigned int)p->uid, req.nworkspaces,
	    json_object_array_length(arr));
	body = json_object_new_object();
	json_object_object_add(body, "revoked", arr);
	ipc_reply(p->conn, IPC_AUTH_REVOKED_RESULT, msg->id, body, -1);
	json_object_put(body);
}

void
authd_dispatch_peer(struct ipc_conn *conn, struct ipc_msg *msg, void *arg)
{
	struct peer *p = arg;
	struct authd_request req;
	char why[256];

	if (p == NULL) {
		const struct ucred *cred = ipc_conn_peercred(conn);

		if ((p = calloc(1, sizeof(*p))) == NULL) {
			ipc_reply_error(conn, msg->id, "internal",
			    "out of memory");
			return;
		}
		p->conn = conn;
		p->uid = cred->uid;
		for (size_t i = 0; i < authd->npeers; i++)
			if (limiters[i].uid == p->uid)
				p->lim = &limiters[i];
		if (p->lim == NULL) {
			/* peer_accept let in only configured uids. */
			free(p);
			ipc_conn_free(conn);
			return;
		}
		TAILQ_INSERT_TAIL(&peers, p, entry);
		ipc_conn_set_arg(conn, p);
	}
	switch (msg->type) {
	case IPC_AUTH_VERIFY:
		peer_verify(p, msg);
		break;
	case IPC_AUTH_REVOKED:
		peer_revoked(p, msg);
		break;
	case IPC_AUTH_SUBSCRIBE:
		if (authd_request_decode(msg->type, msg->body, &req, why,
		    sizeof(why)) == -1) {
			ipc_reply_error(conn, msg->id, "invalid_argument",
			    "%s", why);
			break;
		}
		p->subscribed = 1;
		ipc_reply(conn, IPC_AUTH_SUBSCRIBE_RESULT, msg->id, NULL, -1);
		log_debug("uid %u pid %d subscribed to revocations",
		    (unsigned int)p->uid,
		    (int)ipc_conn_peercred(conn)->pid);
		break;
	default:
		/* The policy table admits nothing else. */
		ipc_reply_error(conn, msg->id, "invalid_argument",
		    "unexpected message type %u", msg->type);
		break;
	}
}

void
authd_closed_peer(struct ipc_conn *conn, void *arg)
{
	struct peer *p = arg;
	struct deferred *d, *next;

	if (p == NULL)
		return;
	for (d = TAILQ_FIRST(&p->lim->queue); d != NULL; d = next) {
		next = TAILQ_NEXT(d, entry);
		if (d->peer != p)
			continue;
		TAILQ_REMOVE(&p->lim->queue, d, entry);
		p->lim->queued--;
		free(d);
	}
	TAILQ_REMOVE(&peers, p, entry);
	free(p);
}

static void	peer_send_event(struct json_object *, const char *,
		    const char *, const char *);

void
peer_event(const char *ws, const char *cred_id, const char *reason)
{
	peer_send_event(json_object_new_object(), ws, cred_id, reason);
}

void
peer_event_policy(const char *ws, const struct auth_policy *pol)
{
	struct json_object *body = json_object_new_object();

	json_object_object_add(body, "policy", policy_to_json(pol));
	peer_send_event(body, ws, NULL, "policy");
}

static void
peer_send_event(struct json_object *body, const char *ws,
    const char *cred_id, const char *reason)
{
	struct peer *p;
	int n = 0;

	json_object_object_add(body, "workspace", json_object_new_string(ws));
	if (cred_id != NULL)
		json_object_object_add(body, "credential_id",
		    json_object_new_string(cred_id));
	json_object_object_add(body, "reason",
	    json_object_new_string(reason));
	TAILQ_FOREACH(p, &peers, entry) {
		if (!p->subscribed)
			continue;
		ipc_send(p->conn, IPC_AUTH_EVENT, 0, body, -1);
		n++;
	}
	json_object_put(body);
	log_debug("event: workspace %s credential %s %s, %d subscribers", ws,
	    cred_id != NULL ? cred_id : "*", reason, n);
}

static void
expired_one(const char *ws, const char *id, void *arg)
{
	log_info("credential %s of workspace %s expired", id, ws);
	peer_event(ws, id, "expired");
}

static void
expiry_cb(int fd, short ev, void *arg)
{
	int64_t now = time(NULL);
	char err[STORE_ERR_MAX];

	if (now <= expiry_last)
		return;
	if (store_expired(authd->store, expiry_last, now, expired_one, NULL,
	    err, sizeof(err)) != STORE_OK) {
		/* Try the same window again next time. */
		log_warnx("expiry scan: %s", err);
		return;
	}
	expiry_last = now;
}

int
peer_init(struct authd *a)
{
	struct timeval tv;

	for (size_t i = 0; i < a->npeers; i++) {
		struct limiter *l = &limiters[i];

		l->uid = a->peer_uid[i];
		l->tokens = a->set.fail_burst;
		clock_gettime(CLOCK_MONOTONIC, &l->last);
		TAILQ_INIT(&l->queue);
		if ((l->timer = evtimer_new(a->base, limiter_release, l)) ==
		    NULL)
			return -1;
	}
	expiry_last = time(NULL);
	expiry_ev = event_new(a->base, -1, EV_PERSIST, expiry_cb, NULL);
	summary_ev = event_new(a->base, -1, EV_PERSIST, summary_cb, NULL);
	if (expiry_ev == NULL || summary_ev == NULL)
		return -1;
	tv.tv_sec = a->set.expiry_ms / 1000;
	tv.tv_usec = (a->set.expiry_ms % 1000) * 1000;
	evtimer_add(expiry_ev, &tv);
	tv.tv_sec = 10;
	tv.tv_usec = 0;
	evtimer_add(summary_ev, &tv);
	return 0;
}

void
peer_shutdown(void)
{
	struct peer *p;

	while ((p = TAILQ_FIRST(&peers)) != NULL)
		ipc_conn_free(p->conn);	/* authd_closed_peer frees p */
	for (size_t i = 0; i < AUTHD_MAX_PEERS; i++)
		if (limiters[i].timer != NULL)
			event_free(limiters[i].timer);
	peer_cache_flush();
	if (expiry_ev != NULL)
		event_free(expiry_ev);
	if (summary_ev != NULL)
		event_free(summary_ev);
}
