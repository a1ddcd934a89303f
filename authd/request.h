/*
 * Decoding of the JSON bodies authd receives (from mcpd and vmmd on
 * authd.sock, from authctl on authctl.sock) into typed requests.  Strict:
 * unknown keys, wrong types and out-of-range values are refused with a
 * message that names the field.  This is the fuzz target's entry point.
 */
#ifndef MCPVM_AUTHD_REQUEST_H
#define MCPVM_AUTHD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "cred.h"
#include "../proto/ipcmsg.h"
#include "policy.h"

struct json_object;

/* The longest ttl a credential may get: ten years. */
#define AUTH_TTL_MAX	(10LL * 366 * 24 * 3600)

struct authd_request {
	uint32_t	type;
	char		workspace[AUTH_WORKSPACE_MAX + 1];	/* "" = none */
	char		cred_id[CRED_ID_LEN + 1];		/* "" = none */
	/* VERIFY: the credential, only when it is well-formed. */
	int		cred_ok;
	char		credential[CRED_LEN + 1];
	int		has_ttl;
	int64_t		ttl;		/* seconds; 0 = never expires */
	struct auth_policy_patch patch;	/* ISSUE, POLICY_SET */
	/*
	 * REVOKED: distinct, valid workspace names, in the decoded body
	 * (valid while it is; pointers keep a verify's struct small).
	 */
	size_t		nworkspaces;
	const char	*workspaces[IPC_AUTH_REVOKED_MAX];
};

/*
 * Fills req from body for message type.  0 on success; -1 with why (a
 * sentence for an invalid_argument reply) when the body is not a valid
 * request of that type, or the type is not a request authd serves.
 * The caller must explicit_bzero(req) when it is done with a VERIFY.
 */
int	authd_request_decode(uint32_t type, struct json_object *body,
	    struct authd_request *req, char *why, size_t whylen);

#endif
