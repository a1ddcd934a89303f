/*
 * mcpd's verifier: asks authd who a bearer credential belongs to, through
 * common/authclient (which keeps answers a few seconds and reads authd's
 * events first), and closes the open streams of a revoked or expired
 * credential with 1008 when authd says so.  authd being away is
 * "unavailable" (503), never "let it through".
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "authclient.h"
#include "log.h"
#include "mcpd.h"

static struct authclient *authd;

struct verifying {
	auth_cb		 cb;
	void		*arg;
};

static void
authd_event(const char *ws, const char *cred, const char *reason, void *arg)
{
	/* A policy change (new quotas) leaves the streams be. */
	if (strcmp(reason, "policy") != 0)
		stream_revoke(ws, cred != NULL ? cred : "", reason);
}

static int
authd_start(void *ctx, struct event_base *base, const struct mcpd_config *cfg)
{
	authd = authclient_new(base, cfg->authd_socket, "mcpd", authd_event,
	    NULL);
	return authd == NULL ? -1 : 0;
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
authd_verified(enum authc_status st, json_object *result, void *arg)
{
	struct verifying v = *(struct verifying *)arg;
	struct auth_identity id;

	free(arg);
	switch (st) {
	case AUTHC_OK:
		if (identity_of(result, &id) == -1) {
			log_warnx("authd named a workspace mcpd cannot hold");
			v.cb(AUTH_UNAVAILABLE, NULL, v.arg);
			return;
		}
		v.cb(AUTH_OK, &id, v.arg);
		return;
	case AUTHC_UNAUTHORIZED:
		v.cb(AUTH_UNAUTHORIZED, NULL, v.arg);
		return;
	default:
		v.cb(AUTH_UNAVAILABLE, NULL, v.arg);
		return;
	}
}

static void
authd_verify(void *ctx, const char *token, auth_cb cb, void *arg)
{
	struct verifying *v;

	if ((v = malloc(sizeof(*v))) == NULL) {
		cb(AUTH_UNAVAILABLE, NULL, arg);
		return;
	}
	v->cb = cb;
	v->arg = arg;
	authclient_verify(authd, token, authd_verified, v);
}

const struct auth_ops authd_auth_ops = {
	"authd", authd_start, authd_verify,
};
