/*
 * libFuzzer target for authd's request decoding: the body of a frame as
 * mcpd, vmmd or authctl could send it goes through the same JSON check as
 * on the socket (ipc_frame_check) and then authd_request_decode().  The
 * first byte picks the message type (index 10, IPC_AUTH_REVOKED, is
 * vmmd's list of workspaces).  A decoded request must satisfy the
 * invariants the handlers rely on; anything else aborts.  A policy's
 * "approvals" also goes through the decoder vmmd reads it with.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ipc.h"
#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const struct ipc_rule rules[] = {
	{ IPC_AUTH_VERIFY, 0 }, { IPC_AUTH_SUBSCRIBE, 0 },
	{ IPC_AUTHCTL_ISSUE, 0 }, { IPC_AUTHCTL_ROTATE, 0 },
	{ IPC_AUTHCTL_REVOKE_TOKEN, 0 }, { IPC_AUTHCTL_REVOKE_WORKSPACE, 0 },
	{ IPC_AUTHCTL_POLICY_SET, 0 }, { IPC_AUTHCTL_LIST, 0 },
	{ IPC_AUTHCTL_SHOW, 0 }, { IPC_AUTH_VERIFY_RESULT, 0 },
	{ IPC_AUTH_REVOKED, 0 },
};
static const struct ipc_policy policy = { "fuzz", rules,
	sizeof(rules) / sizeof(rules[0]) };

/*
 * A patch's gates: only the members it names, each within its bounds;
 * applied to a policy that then holds, they survive the JSON round trip
 * vmmd's decoder makes of them.
 */
static void
check_gates(const struct auth_policy_patch *pt)
{
	struct auth_policy p;
	struct json_object *o;
	struct gates back;
	char why[256];

	if (!(pt->fields & POLICY_F_GATES)) {
		if (pt->gate_fields != 0)
			abort();
		return;
	}
	if (pt->gate_fields >> (GATE_NCLASSES + 2) != 0)
		abort();
	for (int c = 0; c < GATE_NCLASSES; c++)
		if (pt->p.gates.need[c] > GATE_NEED_MAX ||
		    (!(pt->gate_fields & GATE_F_CLASS(c)) &&
		    pt->p.gates.need[c] != 0))
			abort();
	if (pt->p.gates.memory_mib_above > GATE_MEMORY_MIB_MAX ||
	    pt->p.gates.vcpus_above > GATE_VCPUS_MAX)
		abort();
	memset(&p, 0, sizeof(p));
	policy_apply(&p, pt);
	if (!policy_valid(&p, why, sizeof(why)))
		return;
	if ((o = gates_to_json(&p.gates)) == NULL)
		return;
	if (gates_from_json(o, "policy.approvals", &back, why,
	    sizeof(why)) == -1 || memcmp(&back, &p.gates, sizeof(back)) != 0)
		abort();
	json_object_put(o);
}

/*
 * vmmd's decoder of the gates in authd's policy, fed whatever "approvals"
 * the frame holds: what it takes is within the bounds the enforcement
 * relies on, and a refusal says why.
 */
static void
check_vmmd_gates(struct json_object *body)
{
	struct json_object *pol, *ga;
	struct gates g;
	char why[256];

	if (!json_object_object_get_ex(body, "policy", &pol) ||
	    !json_object_object_get_ex(pol, "approvals", &ga))
		return;
	why[0] = '\0';
	if (gates_from_json(ga, "policy.approvals", &g, why,
	    sizeof(why)) == -1) {
		if (why[0] == '\0')
			abort();
		return;
	}
	for (int c = 0; c < GATE_NCLASSES; c++)
		if (g.need[c] > GATE_NEED_MAX)
			abort();
	if (g.memory_mib_above > GATE_MEMORY_MIB_MAX ||
	    g.vcpus_above > GATE_VCPUS_MAX ||
	    (g.need[GATE_RESOURCES] != 0 && g.memory_mib_above == 0 &&
	    g.vcpus_above == 0))
		abort();
}

static void
check(const struct authd_request *r)
{
	char why[256];

	if (r->workspace[0] != '\0' &&
	    !workspace_id_valid(r->workspace, why, sizeof(why)))
		abort();
	if (r->cred_id[0] != '\0' && !cred_id_valid(r->cred_id))
		abort();
	if (r->cred_ok && !cred_wellformed(r->credential, strlen(r->credential)))
		abort();
	if (r->has_ttl && (r->ttl < 0 || r->ttl > AUTH_TTL_MAX))
		abort();
	if (r->patch.p.nimages > AUTH_MAX_IMAGES)
		abort();
	for (size_t i = 0; i < r->patch.p.nimages; i++) {
		if (!image_id_valid(r->patch.p.images[i], why, sizeof(why)))
			abort();
		if (i > 0 && strcmp(r->patch.p.images[i - 1],
		    r->patch.p.images[i]) >= 0)
			abort();	/* sorted, no duplicates */
	}
	if ((r->patch.fields & POLICY_F_MAX_VMS) &&
	    (r->patch.p.max_vms < 1 || r->patch.p.max_vms > AUTH_MAX_VMS_LIMIT))
		abort();
	if (r->type == IPC_AUTHCTL_POLICY_SET && r->patch.fields == 0)
		abort();
	check_gates(&r->patch);
	if (r->nworkspaces > IPC_AUTH_REVOKED_MAX ||
	    (r->nworkspaces > 0 && r->type != IPC_AUTH_REVOKED))
		abort();
	for (size_t i = 0; i < r->nworkspaces; i++) {
		if (!workspace_id_valid(r->workspaces[i], why, sizeof(why)))
			abort();
		for (size_t j = 0; j < i; j++)
			if (strcmp(r->workspaces[i], r->workspaces[j]) == 0)
				abort();	/* distinct */
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *body = NULL;
	struct authd_request req;
	struct ipc_frame f;
	char *payload, err[256];

	if (size < 1 || size > 65536)
		return 0;
	payload = malloc(size);
	memcpy(payload, data + 1, size - 1);
	payload[size - 1] = '\0';
	memset(&f, 0, sizeof(f));
	f.type = rules[data[0] % policy.nrules].type;
	f.id = 1;
	f.payload = payload;
	f.len = size - 1;
	f.fd = -1;
	if (ipc_frame_check(&f, &policy, &body, NULL, err,
	    sizeof(err)) == 0) {
		check_vmmd_gates(body);
		if (authd_request_decode(f.type, body, &req, err,
		    sizeof(err)) == 0)
			check(&req);
		else if (err[0] == '\0')
			abort();	/* a refusal always says why */
		json_object_put(body);
	}
	free(payload);
	return 0;
}
