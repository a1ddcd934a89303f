/*
 * authd request decoding; see request.h.  Runs in authd on every message
 * from mcpd, vmmd and authctl, so it treats each body as hostile.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "jsonx.h"
#include "reqshape.h"
#include "request.h"

#define K_CREDENTIAL	0x01u
#define K_WORKSPACE	0x02u
#define K_TTL		0x04u
#define K_POLICY	0x08u
#define K_CRED_ID	0x10u
#define K_WORKSPACES	0x20u

/* The longest string authd reads from a request. */
#define REQ_STRING_MAX	256

static const struct reqshape shapes[] = {
	{ IPC_AUTH_VERIFY, K_CREDENTIAL, K_CREDENTIAL },
	{ IPC_AUTH_SUBSCRIBE, 0, 0 },
	{ IPC_AUTH_REVOKED, K_WORKSPACES, K_WORKSPACES },
	{ IPC_AUTHCTL_ISSUE, K_WORKSPACE | K_TTL | K_POLICY, K_WORKSPACE },
	{ IPC_AUTHCTL_ROTATE, K_WORKSPACE | K_TTL | K_CRED_ID, K_WORKSPACE },
	{ IPC_AUTHCTL_REVOKE_TOKEN, K_CRED_ID, K_CRED_ID },
	{ IPC_AUTHCTL_REVOKE_WORKSPACE, K_WORKSPACE, K_WORKSPACE },
	{ IPC_AUTHCTL_POLICY_SET, K_WORKSPACE | K_POLICY,
	    K_WORKSPACE | K_POLICY },
	{ IPC_AUTHCTL_LIST, 0, 0 },
	{ IPC_AUTHCTL_SHOW, K_WORKSPACE, K_WORKSPACE },
};

static const struct reqshape_key keys[] = {
	{ K_CREDENTIAL, "credential" },
	{ K_WORKSPACE, "workspace" },
	{ K_TTL, "ttl" },
	{ K_POLICY, "policy" },
	{ K_CRED_ID, "credential_id" },
	{ K_WORKSPACES, "workspaces" },
};

/* A string member, NUL-free (jsonx) and at most REQ_STRING_MAX long. */
static const char *
get_string(struct json_object *body, const char *key, char *why,
    size_t whylen)
{
	struct jsonx_err jerr;
	const char *s;

	if (jsonx_get_string(body, key, 1, &s, &jerr) != 1) {
		snprintf(why, whylen, "%s", jerr.msg);
		return NULL;
	}
	if (strlen(s) > REQ_STRING_MAX) {
		snprintf(why, whylen, "$.%s: longer than %d bytes", key,
		    REQ_STRING_MAX);
		return NULL;
	}
	return s;
}

/* $.workspaces: an array of at most IPC_AUTH_REVOKED_MAX distinct valid
 * workspace names. */
static int
decode_workspaces(struct authd_request *req, struct json_object *body,
    char *why, size_t whylen)
{
	struct json_object *arr, *v;
	char vwhy[160];
	const char *s;
	size_t n;

	if (!json_object_object_get_ex(body, "workspaces", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		snprintf(why, whylen, "$.workspaces: must be an array of "
		    "workspace names");
		return -1;
	}
	n = json_object_array_length(arr);
	if (n > IPC_AUTH_REVOKED_MAX) {
		snprintf(why, whylen, "$.workspaces: %zu names; at most %d in "
		    "one request (IPC_AUTH_REVOKED_MAX)", n,
		    IPC_AUTH_REVOKED_MAX);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		v = json_object_array_get_idx(arr, i);
		if (!json_object_is_type(v, json_type_string)) {
			snprintf(why, whylen, "$.workspaces[%zu]: must be a "
			    "string", i);
			return -1;
		}
		s = json_object_get_string(v);
		if ((size_t)json_object_get_string_len(v) != strlen(s)) {
			snprintf(why, whylen, "$.workspaces[%zu]: contains "
			    "a NUL byte", i);
			return -1;
		}
		if (!workspace_id_valid(s, vwhy, sizeof(vwhy))) {
			snprintf(why, whylen, "$.workspaces[%zu]: %s", i, vwhy);
			return -1;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(req->workspaces[j], s) == 0) {
				snprintf(why, whylen, "$.workspaces[%zu]: "
				    "repeats $.workspaces[%zu]", i, j);
				return -1;
			}
		req->workspaces[i] = s;
	}
	req->nworkspaces = n;
	return 0;
}

static int
decode_key(void *r, unsigned int bit, struct json_object *body,
    const void *arg, char *why, size_t whylen)
{
	struct authd_request *req = r;
	struct jsonx_err jerr;
	const char *s;
	char vwhy[160];

	switch (bit) {
	case K_CREDENTIAL:
		if ((s = get_string(body, "credential", why, whylen)) == NULL)
			return -1;
		/* A malformed credential is merely unauthorized. */
		if (cred_wellformed(s, strlen(s))) {
			memcpy(req->credential, s, CRED_LEN + 1);
			req->cred_ok = 1;
		}
		/* The body is freed without zeroing; do not leave it. */
		explicit_bzero((char *)s, strlen(s));
		return 0;
	case K_WORKSPACE:
		if ((s = get_string(body, "workspace", why, whylen)) == NULL)
			return -1;
		if (!workspace_id_valid(s, vwhy, sizeof(vwhy))) {
			snprintf(why, whylen, "$.workspace: %s", vwhy);
			return -1;
		}
		memcpy(req->workspace, s, strlen(s) + 1);
		return 0;
	case K_WORKSPACES:
		return decode_workspaces(req, body, why, whylen);
	case K_CRED_ID:
		if ((s = get_string(body, "credential_id", why, whylen)) ==
		    NULL)
			return -1;
		if (!cred_id_valid(s)) {
			snprintf(why, whylen, "$.credential_id: must be %d "
			    "lowercase hex digits (see 'authctl show')",
			    CRED_ID_LEN);
			return -1;
		}
		memcpy(req->cred_id, s, CRED_ID_LEN + 1);
		return 0;
	case K_TTL:
		if (jsonx_get_int64(body, "ttl", 1, 0, AUTH_TTL_MAX, &req->ttl,
		    &jerr) != 1) {
			snprintf(why, whylen, "%s (seconds; 0 never expires)",
			    jerr.msg);
			return -1;
		}
		req->has_ttl = 1;
		return 0;
	case K_POLICY:
		if (policy_patch_from_json(body, "policy", &req->patch, why,
		    whylen) == -1)
			return -1;
		if (req->type == IPC_AUTHCTL_POLICY_SET &&
		    req->patch.fields == 0) {
			snprintf(why, whylen, "$.policy: sets nothing");
			return -1;
		}
		return 0;
	}
	return reqshape_bad_bit(why, whylen);
}

static const struct reqshape_table table = REQSHAPE_TABLE(shapes, keys,
    "$: has a key this request type does not take", decode_key);

int
authd_request_decode(uint32_t type, struct json_object *body,
    struct authd_request *req, char *why, size_t whylen)
{
	memset(req, 0, sizeof(*req));
	req->type = type;
	if (reqshape_decode(&table, type, body, req, NULL, why, whylen) ==
	    -1) {
		/* A credential may have been copied in before the refusal. */
		explicit_bzero(req, sizeof(*req));
		req->type = type;
		return -1;
	}
	return 0;
}
