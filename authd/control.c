/*
 * authctl.sock: the operator's side of authd, for root and members of the
 * admin group (the contract at the top of authd.c): issue, rotate,
 * revoke-token, revoke-workspace, policy set, list and show.  Runs in
 * authd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "authd.h"
#include "cred.h"
#include "log.h"
#include "request.h"
#include "store.h"

/* Replies with the public code for a store failure. */
static void
ctl_store_error(struct ipc_conn *c, uint32_t id, enum store_rc rc,
    const char *msg)
{
	switch (rc) {
	case STORE_NOT_FOUND:
		ipc_reply_error(c, id, "not_found", "%s", msg);
		break;
	case STORE_CONFLICT:
		ipc_reply_error(c, id, "conflict", "%s", msg);
		break;
	case STORE_INVALID:
		ipc_reply_error(c, id, "invalid_argument", "%s", msg);
		break;
	case STORE_BUSY:
		ipc_reply_error(c, id, "busy", "credential store is busy: %s",
		    msg);
		break;
	default:
		log_warnx("store: %s", msg);
		ipc_reply_error(c, id, "internal", "credential store error: "
		    "%s", msg);
		break;
	}
}

static int64_t
expiry_of(const struct authd_request *req, int64_t now)
{
	int64_t ttl = req->has_ttl ? req->ttl : authd->set.default_ttl;

	return ttl == 0 ? 0 : now + ttl;
}

/*
 * Sends a reply carrying a fresh credential, then scrubs the copies authd
 * holds: the JSON string and the serialisation json-c cached.
 */
static void
reply_with_secret(struct ipc_conn *c, uint32_t type, uint32_t id,
    struct json_object *body, struct json_object *secret)
{
	const char *s;

	ipc_reply(c, type, id, body, -1);
	s = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	explicit_bzero((char *)s, strlen(s));
	s = json_object_get_string(secret);
	explicit_bzero((char *)s, strlen(s));
}

static void
ctl_issue(struct ipc_conn *c, struct ipc_msg *msg, struct authd_request *req)
{
	struct json_object *body, *secret;
	struct auth_policy policy;
	struct store_ids revoked = { 0, NULL };
	uint8_t hash[CRED_HASH_LEN];
	char tok[CRED_LEN + 1], id[CRED_ID_LEN + 1];
	int64_t now = time(NULL), exp = expiry_of(req, now);
	int created = 0;
	char err[STORE_ERR_MAX];
	enum store_rc rc;

	if (cred_generate(tok) == -1 || cred_hash(tok, CRED_LEN, hash) == -1) {
		log_warn("issue: generate credential");
		explicit_bzero(tok, sizeof(tok));
		ipc_reply_error(c, msg->id, "internal", "cannot generate a "
		    "credential");
		return;
	}
	cred_id(hash, id);
	if (msg->type == IPC_AUTHCTL_ISSUE)
		rc = store_issue(authd->store, req->workspace,
		    req->patch.fields != 0 ? &req->patch : NULL,
		    &authd->set.defaults, hash, now, exp, &created, &policy,
		    err, sizeof(err));
	else
		rc = store_rotate(authd->store, req->workspace,
		    req->cred_id[0] != '\0' ? req->cred_id : NULL, hash, now,
		    exp, &policy, &revoked, err, sizeof(err));
	explicit_bzero(hash, sizeof(hash));
	if (rc != STORE_OK) {
		explicit_bzero(tok, sizeof(tok));
		ctl_store_error(c, msg->id, rc, err);
		return;
	}
	log_info("%s: workspace %s%s credential %s by uid %u%s",
	    msg->type == IPC_AUTHCTL_ISSUE ? "issue" : "rotate",
	    req->workspace, created ? " (new)" : "", id,
	    (unsigned int)ipc_conn_peercred(c)->uid,
	    revoked.n > 0 ? ", older credentials revoked" : "");
	body = json_object_new_object();
	secret = json_object_new_string(tok);
	explicit_bzero(tok, sizeof(tok));
	json_object_object_add(body, "workspace",
	    json_object_new_string(req->workspace));
	json_object_object_add(body, "credential_id",
	    json_object_new_string(id));
	json_object_object_add(body, "credential", json_object_get(secret));
	json_object_object_add(body, "created_at", json_object_new_int64(now));
	json_object_object_add(body, "expires_at", json_object_new_int64(exp));
	json_object_object_add(body, "policy", policy_to_json(&policy));
	if (msg->type == IPC_AUTHCTL_ISSUE)
		json_object_object_add(body, "new_workspace",
		    json_object_new_boolean(created));
	else {
		struct json_object *arr = json_object_new_array();

		for (size_t i = 0; i < revoked.n; i++) {
			json_object_array_add(arr,
			    json_object_new_string(revoked.ids[i]));
			log_info("rotate: credential %s of workspace %s "
			    "revoked", revoked.ids[i], req->workspace);
		}
		json_object_object_add(body, "revoked", arr);
	}
	/*
	 * Subscribers hear of the revocations before authctl hears that
	 * they are done: mcpd and vmmd keep answers until told otherwise.
	 */
	for (size_t i = 0; i < revoked.n; i++)
		peer_event(req->workspace, revoked.ids[i], "revoked");
	reply_with_secret(c, msg->type + 1, msg->id, body, secret);
	json_object_put(secret);
	json_object_put(body);
	store_ids_free(&revoked);
}

static void
ctl_revoke_token(struct ipc_conn *c, struct ipc_msg *msg,
    struct authd_request *req)
{
	struct json_object *body;
	char ws[AUTH_WORKSPACE_MAX + 1];
	int already;
	char err[STORE_ERR_MAX];
	enum store_rc rc;

	rc = store_revoke_cred(authd->store, req->cred_id, time(NULL), ws,
	    &already, err, sizeof(err));
	if (rc != STORE_OK) {
		ctl_store_error(c, msg->id, rc, err);
		return;
	}
	if (!already) {
		log_info("revoke-token: credential %s of workspace %s by "
		    "uid %u", req->cred_id, ws,
		    (unsigned int)ipc_conn_peercred(c)->uid);
		peer_event(ws, req->cred_id, "revoked");
	}
	body = json_object_new_object();
	json_object_object_add(body, "workspace", json_object_new_string(ws));
	json_object_object_add(body, "credential_id",
	    json_object_new_string(req->cred_id));
	json_object_object_add(body, "already_revoked",
	    json_object_new_boolean(already));
	ipc_reply(c, IPC_AUTHCTL_REVOKE_TOKEN_RESULT, msg->id, body, -1);
	json_object_put(body);
}

static void
ctl_revoke_workspace(struct ipc_conn *c, struct ipc_msg *msg,
    struct authd_request *req)
{
	struct json_object *body, *arr;
	struct store_ids revoked;
	int already;
	char err[STORE_ERR_MAX];
	enum store_rc rc;

	rc = store_revoke_workspace(authd->store, req->workspace, time(NULL),
	    &already, &revoked, err, sizeof(err));
	if (rc != STORE_OK) {
		ctl_store_error(c, msg->id, rc, err);
		return;
	}
	if (!already) {
		log_info("revoke-workspace: workspace %s by uid %u "
		    "(%zu active credentials)", req->workspace,
		    (unsigned int)ipc_conn_peercred(c)->uid, revoked.n);
		peer_event(req->workspace, NULL, "revoked");
	}
	body = json_object_new_object();
	arr = json_object_new_array();
	for (size_t i = 0; i < revoked.n; i++)
		json_object_array_add(arr,
		    json_object_new_string(revoked.ids[i]));
	json_object_object_add(body, "workspace",
	    json_object_new_string(req->workspace));
	json_object_object_add(body, "already_revoked",
	    json_object_new_boolean(already));
	json_object_object_add(body, "revoked", arr);
	ipc_reply(c, IPC_AUTHCTL_REVOKE_WORKSPACE_RESULT, msg->id, body, -1);
	json_object_put(body);
	store_ids_free(&revoked);
}

static void
ctl_policy_set(struct ipc_conn *c, struct ipc_msg *msg,
    struct authd_request *req)
{
	struct json_object *body;
	struct auth_policy policy;
	char err[STORE_ERR_MAX];
	enum store_rc rc;

	rc = store_policy_set(authd->store, req->workspace, &req->patch,
	    &policy, err, sizeof(err));
	if (rc != STORE_OK) {
		ctl_store_error(c, msg->id, rc, err);
		return;
	}
	log_info("policy set: workspace %s by uid %u", req->workspace,
	    (unsigned int)ipc_conn_peercred(c)->uid);
	/* Peers re-verify to learn the new policy; vmmd also takes it from
	 * the event to its running VMs. */
	peer_event_policy(req->workspace, &policy);
	body = json_object_new_object();
	json_object_object_add(body, "workspace",
	    json_object_new_string(req->workspace));
	json_object_object_add(body, "policy", policy_to_json(&policy));
	ipc_reply(c, IPC_AUTHCTL_POLICY_SET_RESULT, msg->id, body, -1);
	json_object_put(body);
}

static struct json_object *
workspace_json(const struct store_workspace *w)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "workspace", json_object_new_string(w->id));
	json_object_object_add(o, "created_at",
	    json_object_new_int64(w->created_at));
	json_object_object_add(o, "revoked_at",
	    json_object_new_int64(w->revoked_at));
	json_object_object_add(o, "active_credentials",
	    json_object_new_int64(w->active));
	json_object_object_add(o, "credentials",
	    json_object_new_int64(w->total));
	json_object_object_add(o, "policy", policy_to_json(&w->policy));
	return o;
}

static void
ctl_list(struct ipc_conn *c, struct ipc_msg *msg)
{
	struct json_object *body, *arr;
	struct store_workspace *ws;
	size_t n;
	int trunc;
	char err[STORE_ERR_MAX];
	enum store_rc rc;

	rc = store_list(authd->store, time(NULL), AUTHD_LIST_MAX, &ws, &n,
	    &trunc, err, sizeof(err));
	if (rc != STORE_OK) {
		ctl_store_error(c, msg->id, rc, err);
		return;
	}
	body = json_object_new_object();
	arr = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(arr, workspace_json(&ws[i]));
	json_object_object_add(body, "workspaces", arr);
	json_object_object_add(body, "truncated",
	    json_object_new_boolean(trunc));
	ipc_reply(c, IPC_AUTHCTL_LIST_RESULT, msg->id, body, -1);
	json_object_put(body);
	free(ws);
}

static void
ctl_show(struct ipc_conn *c, struct ipc_msg *msg, struct authd_request *req)
{
	struct json_object *body, *arr;
	struct store_workspace w;
	struct store_cred *cs;
	int64_t now = time(NULL);
	size_t n;
	int trunc;
	char err[STORE_ERR_MAX];
	enum store_rc rc;

	rc = store_show(authd->store, req->workspace, now, AUTHD_SHOW_MAX, &w,
	    &cs, &n, &trunc, err, sizeof(err));
	if (rc != STORE_OK) {
		ctl_store_error(c, msg->id, rc, err);
		return;
	}
	body = workspace_json(&w);
	arr = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_new_object();
		const char *state = "active";

		if (cs[i].revoked_at != 0 || w.revoked_at != 0)
			state = "revoked";
		else if (cs[i].expires_at != 0 && cs[i].expires_at <= now)
			state = "expired";
		json_object_object_add(o, "credential_id",
		    json_object_new_string(cs[i].id));
		json_object_object_add(o, "created_at",
		    json_object_new_int64(cs[i].created_at));
		json_object_object_add(o, "expires_at",
		    json_object_new_int64(cs[i].expires_at));
		json_object_object_add(o, "revoked_at",
		    json_object_new_int64(cs[i].revoked_at));
		json_object_object_add(o, "state",
		    json_object_new_string(state));
		json_object_array_add(arr, o);
	}
	json_object_object_add(body, "credential_list", arr);
	json_object_object_add(body, "truncated",
	    json_object_new_boolean(trunc));
	ipc_reply(c, IPC_AUTHCTL_SHOW_RESULT, msg->id, body, -1);
	json_object_put(body);
	free(cs);
}

void
authd_dispatch_authctl(struct ipc_conn *c, struct ipc_msg *msg, void *arg)
{
	struct authd_request req;
	char why[256];

	if (authd_request_decode(msg->type, msg->body, &req, why,
	    sizeof(why)) == -1) {
		ipc_reply_error(c, msg->id, "invalid_argument", "%s", why);
		return;
	}
	switch (msg->type) {
	case IPC_AUTHCTL_ISSUE:
	case IPC_AUTHCTL_ROTATE:
		ctl_issue(c, msg, &req);
		break;
	case IPC_AUTHCTL_REVOKE_TOKEN:
		ctl_revoke_token(c, msg, &req);
		break;
	case IPC_AUTHCTL_REVOKE_WORKSPACE:
		ctl_revoke_workspace(c, msg, &req);
		break;
	case IPC_AUTHCTL_POLICY_SET:
		ctl_policy_set(c, msg, &req);
		break;
	case IPC_AUTHCTL_LIST:
		ctl_list(c, msg);
		break;
	case IPC_AUTHCTL_SHOW:
		ctl_show(c, msg, &req);
		break;
	default:
		ipc_reply_error(c, msg->id, "invalid_argument",
		    "unexpected message type %u", msg->type);
		break;
	}
	/* Anything that may have changed the store voids cached answers;
	 * nothing else runs in between on this single-threaded loop. */
	if (msg->type != IPC_AUTHCTL_LIST && msg->type != IPC_AUTHCTL_SHOW)
		peer_cache_flush();
	explicit_bzero(&req, sizeof(req));
}
