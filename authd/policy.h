/*
 * Workspace policy: what a workspace's credentials allow.  Shared by authd
 * (store, request decoding, verify replies) and authctl (output).
 */
#ifndef MCPVM_AUTHD_POLICY_H
#define MCPVM_AUTHD_POLICY_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

#include "egress.h"
#include "gates.h"
#include "wsname.h"

#define AUTH_WORKSPACE_MAX	WSNAME_MAX	/* [a-z0-9-]{1,63} */
#define AUTH_IMAGE_MAX		64	/* [a-z0-9][a-z0-9._-]{0,63} */
#define AUTH_MAX_IMAGES		32

/* Upper bounds on quotas, so a typo cannot grant an absurd figure. */
#define AUTH_MAX_VMS_LIMIT	1024
#define AUTH_MEMORY_MIB_LIMIT	(1024 * 1024)
#define AUTH_STORAGE_GIB_LIMIT	65536
#define AUTH_STREAMS_LIMIT	4096

struct auth_policy {
	int		network;	/* 0 or 1 */
	size_t		nimages;	/* 0 = every configured image */
	char		images[AUTH_MAX_IMAGES][AUTH_IMAGE_MAX + 1];
	uint32_t	max_vms;
	uint32_t	memory_mib;
	uint32_t	storage_gib;
	uint32_t	max_streams;
	struct egress	egress;		/* default: public */
	/* Bytes a second a VM may send: 0 for no limit, else
	 * AUTH_RATE_MIN .. AUTH_RATE_MAX. */
	uint64_t	egress_rate;
	struct gates	gates;		/* default: nothing gated */
};

/* A partial policy from a request: only the fields whose bit is set. */
#define POLICY_F_NETWORK	0x01u
#define POLICY_F_IMAGES		0x02u
#define POLICY_F_MAX_VMS	0x04u
#define POLICY_F_MEMORY		0x08u
#define POLICY_F_STORAGE	0x10u
#define POLICY_F_STREAMS	0x20u
#define POLICY_F_EGRESS		0x40u
#define POLICY_F_RATE		0x80u
#define POLICY_F_GATES		0x100u	/* some of gate_fields */

/* netd's bounds on a VM's egress rate (netd/nft.h NETD_RATE_*). */
#define AUTH_RATE_MIN		4096
#define AUTH_RATE_MAX		(1LL << 40)

/*
 * Which members of "approvals" a patch sets: GATE_F_CLASS(c) for a class,
 * and the two thresholds.  Those it does not name keep their values, so
 * gating exec leaves a destroy gate as it was.
 */
#define GATE_F_CLASS(c)		(1u << (c))
#define GATE_F_MEMORY		(1u << GATE_NCLASSES)
#define GATE_F_VCPUS		(1u << (GATE_NCLASSES + 1))

struct auth_policy_patch {
	unsigned int	 fields;
	unsigned int	 gate_fields;	/* with POLICY_F_GATES */
	struct auth_policy p;
};

/*
 * Validation of identifiers (workspace names: wsname.h).  Returns 1 when
 * valid, else 0 with a sentence a person can act on in why.
 */
int	image_id_valid(const char *id, char *why, size_t whylen);

/* Applies the set fields of patch to p. */
void	policy_apply(struct auth_policy *p, const struct auth_policy_patch *);
/*
 * Whether a policy, patched or not, holds together: a resources gate needs
 * a threshold.  1, or 0 with a sentence naming the options in why.
 */
int	policy_valid(const struct auth_policy *, char *why, size_t whylen);
/* 1 when the two policies grant exactly the same. */
int	policy_equal(const struct auth_policy *, const struct auth_policy *);

/* Images as stored: "a,b,c" (ids never contain a comma). */
void	policy_images_join(const struct auth_policy *, char *buf, size_t len);
int	policy_images_split(struct auth_policy *, const char *s);

/*
 * The most prefixes an egress list may hold ([authd] egress_max_cidrs,
 * at most EGRESS_MAX_CIDRS), which policy_patch_from_json enforces.
 */
void	policy_set_egress_max(size_t);
/* The most names an allowlist may hold ([authd] egress_max_names). */
void	policy_set_egress_max_names(size_t);
size_t	policy_egress_max(void);

/* {"network":…,"images":[…],"max_vms":…,…,"egress":{…},
 * "egress_rate":n,"approvals":{gates_to_json}}; NULL on allocation
 * failure. */
struct json_object *policy_to_json(const struct auth_policy *);

/*
 * Parses the policy object parent[key] as authctl sends it (strict: unknown
 * keys, wrong types and out-of-range quotas are refused, with the JSON path
 * in the message).  0 on success, -1 with why.
 */
int	policy_patch_from_json(struct json_object *parent, const char *key,
	    struct auth_policy_patch *, char *why, size_t whylen);

#endif
