/*
 * Workspace policy helpers: image ids, comparison and the JSON shape of a
 * policy (workspace names: common/wsname.c).  Linked into authd and authctl.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "jsonx.h"
#include "policy.h"

/* [authd] egress_max_cidrs and egress_max_names; their defaults until
 * authd sets them. */
static size_t egress_max = 64;
static size_t egress_max_names = 32;

void
policy_set_egress_max(size_t n)
{
	egress_max = n > EGRESS_MAX_CIDRS ? EGRESS_MAX_CIDRS : n;
}

void
policy_set_egress_max_names(size_t n)
{
	egress_max_names = n > EGRESS_MAX_NAMES ? EGRESS_MAX_NAMES : n;
}

size_t
policy_egress_max(void)
{
	return egress_max;
}

int
image_id_valid(const char *id, char *why, size_t whylen)
{
	size_t n = strlen(id);

	if (n == 0 || n > AUTH_IMAGE_MAX) {
		snprintf(why, whylen, "image id must be 1 to %d characters "
		    "long", AUTH_IMAGE_MAX);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			continue;
		if (i > 0 && (c == '.' || c == '_' || c == '-'))
			continue;
		snprintf(why, whylen, "image id must start with a lowercase "
		    "letter or digit and contain only [a-z0-9._-] "
		    "(character %zu is not allowed)", i + 1);
		return 0;
	}
	return 1;
}

static int
image_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Sorted and without duplicates, so equal sets compare equal. */
static void
images_normalise(struct auth_policy *p)
{
	size_t out = 0;

	qsort(p->images, p->nimages, sizeof(p->images[0]), image_cmp);
	for (size_t i = 0; i < p->nimages; i++) {
		if (out > 0 && strcmp(p->images[out - 1], p->images[i]) == 0)
			continue;
		if (out != i)
			memcpy(p->images[out], p->images[i],
			    sizeof(p->images[0]));
		out++;
	}
	p->nimages = out;
}

void
policy_apply(struct auth_policy *p, const struct auth_policy_patch *pt)
{
	if (pt->fields & POLICY_F_NETWORK)
		p->network = pt->p.network;
	if (pt->fields & POLICY_F_IMAGES) {
		p->nimages = pt->p.nimages;
		memcpy(p->images, pt->p.images, sizeof(p->images));
		images_normalise(p);
	}
	if (pt->fields & POLICY_F_MAX_VMS)
		p->max_vms = pt->p.max_vms;
	if (pt->fields & POLICY_F_MEMORY)
		p->memory_mib = pt->p.memory_mib;
	if (pt->fields & POLICY_F_STORAGE)
		p->storage_gib = pt->p.storage_gib;
	if (pt->fields & POLICY_F_STREAMS)
		p->max_streams = pt->p.max_streams;
	if (pt->fields & POLICY_F_EGRESS)
		p->egress = pt->p.egress;
	if (pt->fields & POLICY_F_RATE)
		p->egress_rate = pt->p.egress_rate;
	if (pt->fields & POLICY_F_GATES) {
		for (int c = 0; c < GATE_NCLASSES; c++)
			if (pt->gate_fields & GATE_F_CLASS(c))
				p->gates.need[c] = pt->p.gates.need[c];
		if (pt->gate_fields & GATE_F_MEMORY)
			p->gates.memory_mib_above =
			    pt->p.gates.memory_mib_above;
		if (pt->gate_fields & GATE_F_VCPUS)
			p->gates.vcpus_above = pt->p.gates.vcpus_above;
	}
}

int
policy_valid(const struct auth_policy *p, char *why, size_t whylen)
{
	if (p->gates.need[GATE_RESOURCES] != 0 &&
	    p->gates.memory_mib_above == 0 && p->gates.vcpus_above == 0) {
		snprintf(why, whylen, "a resources gate needs a threshold: "
		    "memory_mib_above or vcpus_above (authctl "
		    "--gate-memory-above MIB or --gate-vcpus-above N)");
		return 0;
	}
	return 1;
}

static int
gates_equal(const struct gates *a, const struct gates *b)
{
	for (int c = 0; c < GATE_NCLASSES; c++)
		if (a->need[c] != b->need[c])
			return 0;
	return a->memory_mib_above == b->memory_mib_above &&
	    a->vcpus_above == b->vcpus_above;
}

int
policy_equal(const struct auth_policy *a, const struct auth_policy *b)
{
	if (a->network != b->network || a->nimages != b->nimages ||
	    a->max_vms != b->max_vms || a->memory_mib != b->memory_mib ||
	    a->storage_gib != b->storage_gib ||
	    a->max_streams != b->max_streams ||
	    a->egress_rate != b->egress_rate ||
	    !gates_equal(&a->gates, &b->gates) ||
	    !egress_equal(&a->egress, &b->egress))
		return 0;
	for (size_t i = 0; i < a->nimages; i++)
		if (strcmp(a->images[i], b->images[i]) != 0)
			return 0;
	return 1;
}

void
policy_images_join(const struct auth_policy *p, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < p->nimages && off < len; i++) {
		int n = snprintf(buf + off, len - off, "%s%s",
		    i > 0 ? "," : "", p->images[i]);

		if (n < 0)
			break;
		off += (size_t)n;
	}
}

int
policy_images_split(struct auth_policy *p, const char *s)
{
	char why[128];
	const char *c = s;

	p->nimages = 0;
	while (*c != '\0') {
		const char *e = strchr(c, ',');
		size_t n = e != NULL ? (size_t)(e - c) : strlen(c);

		if (p->nimages == AUTH_MAX_IMAGES || n > AUTH_IMAGE_MAX)
			return -1;
		memcpy(p->images[p->nimages], c, n);
		p->images[p->nimages][n] = '\0';
		if (!image_id_valid(p->images[p->nimages], why, sizeof(why)))
			return -1;
		p->nimages++;
		if (e == NULL)
			break;
		c = e + 1;
	}
	return 0;
}

struct json_object *
policy_to_json(const struct auth_policy *p)
{
	struct json_object *o, *imgs, *eg, *ga;

	if ((o = json_object_new_object()) == NULL)
		return NULL;
	if ((imgs = json_object_new_array()) == NULL)
		goto fail;
	json_object_object_add(o, "network",
	    json_object_new_boolean(p->network));
	json_object_object_add(o, "images", imgs);
	for (size_t i = 0; i < p->nimages; i++)
		json_object_array_add(imgs,
		    json_object_new_string(p->images[i]));
	json_object_object_add(o, "max_vms",
	    json_object_new_int64(p->max_vms));
	json_object_object_add(o, "memory_mib",
	    json_object_new_int64(p->memory_mib));
	json_object_object_add(o, "storage_gib",
	    json_object_new_int64(p->storage_gib));
	json_object_object_add(o, "max_streams",
	    json_object_new_int64(p->max_streams));
	if ((eg = egress_to_json(&p->egress)) == NULL)
		goto fail;
	json_object_object_add(o, "egress", eg);
	json_object_object_add(o, "egress_rate",
	    json_object_new_int64((int64_t)p->egress_rate));
	if ((ga = gates_to_json(&p->gates)) == NULL)
		goto fail;
	json_object_object_add(o, "approvals", ga);
	return o;
fail:
	json_object_put(o);
	return NULL;
}

/* The limits of each quota, 1 .. max. */
static const struct {
	const char	*key;
	unsigned int	 bit;
	uint32_t	 max;
	size_t		 off;
} quotas[] = {
	{ "max_vms", POLICY_F_MAX_VMS, AUTH_MAX_VMS_LIMIT,
	    offsetof(struct auth_policy, max_vms) },
	{ "memory_mib", POLICY_F_MEMORY, AUTH_MEMORY_MIB_LIMIT,
	    offsetof(struct auth_policy, memory_mib) },
	{ "storage_gib", POLICY_F_STORAGE, AUTH_STORAGE_GIB_LIMIT,
	    offsetof(struct auth_policy, storage_gib) },
	{ "max_streams", POLICY_F_STREAMS, AUTH_STREAMS_LIMIT,
	    offsetof(struct auth_policy, max_streams) },
};

static int
policy_images_from_json(struct json_object *arr, const char *path,
    struct auth_policy_patch *pt, char *why, size_t whylen)
{
	size_t n = json_object_array_length(arr);

	if (n > AUTH_MAX_IMAGES) {
		snprintf(why, whylen, "$.%s: has %zu entries; the limit is %d",
		    path, n, AUTH_MAX_IMAGES);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);
		const char *s;
		char iwhy[160];

		if (!json_object_is_type(e, json_type_string)) {
			snprintf(why, whylen, "$.%s[%zu]: expected string, "
			    "got %s", path, i, jsonx_type_name(e));
			return -1;
		}
		s = json_object_get_string(e);
		if (strlen(s) != (size_t)json_object_get_string_len(e)) {
			snprintf(why, whylen, "$.%s[%zu]: must not contain NUL "
			    "characters", path, i);
			return -1;
		}
		if (!image_id_valid(s, iwhy, sizeof(iwhy))) {
			snprintf(why, whylen, "$.%s[%zu]: %s", path, i, iwhy);
			return -1;
		}
		memcpy(pt->p.images[i], s, strlen(s) + 1);
	}
	pt->p.nimages = n;
	images_normalise(&pt->p);
	pt->fields |= POLICY_F_IMAGES;
	return 0;
}

/*
 * The members of parent[path] ("policy.approvals") that a patch sets, each
 * checked as gates_from_json checks it.  Whether a resources gate has its
 * threshold is policy_valid's question, once the patch met the policy.
 */
static int
policy_gates_from_json(struct json_object *parent, const char *path,
    struct auth_policy_patch *pt, char *why, size_t whylen)
{
	static const struct {
		const char	*key;
		unsigned int	 bit;
		int64_t		 max;
	} limits[] = {
		{ "memory_mib_above", GATE_F_MEMORY, GATE_MEMORY_MIB_MAX },
		{ "vcpus_above", GATE_F_VCPUS, GATE_VCPUS_MAX },
	};
	struct json_object *ga;
	struct jsonx_err jerr;
	char mpath[96];
	int64_t n;
	int r;

	if ((r = jsonx_get_object(parent, path, 0, &ga, &jerr)) == -1)
		goto jfail;
	if (r == 0)
		return 0;
	json_object_object_foreach(ga, k, v) {
		(void)v;
		if (gate_class_from_name(k) != -1 ||
		    strcmp(k, limits[0].key) == 0 ||
		    strcmp(k, limits[1].key) == 0)
			continue;
		/* The key itself is peer data: not echoed. */
		snprintf(why, whylen, "$.%s: has an unknown key (known: exec, "
		    "network, resources, destroy, snapshot_delete, "
		    "broker_pipe, memory_mib_above, vcpus_above)", path);
		return -1;
	}
	for (int c = 0; c < GATE_NCLASSES; c++) {
		snprintf(mpath, sizeof(mpath), "%s.%s", path,
		    gate_class_name(c));
		if ((r = jsonx_get_int64(parent, mpath, 0, 0, GATE_NEED_MAX,
		    &n, &jerr)) == -1)
			goto jfail;
		if (r == 1) {
			pt->p.gates.need[c] = (uint8_t)n;
			pt->gate_fields |= GATE_F_CLASS(c);
		}
	}
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		snprintf(mpath, sizeof(mpath), "%s.%s", path, limits[i].key);
		if ((r = jsonx_get_int64(parent, mpath, 0, 0, limits[i].max,
		    &n, &jerr)) == -1)
			goto jfail;
		if (r == 0)
			continue;
		if (limits[i].bit == GATE_F_MEMORY)
			pt->p.gates.memory_mib_above = (uint32_t)n;
		else
			pt->p.gates.vcpus_above = (uint32_t)n;
		pt->gate_fields |= limits[i].bit;
	}
	/* {} sets nothing, as "policy":{} does not. */
	if (pt->gate_fields != 0)
		pt->fields |= POLICY_F_GATES;
	return 0;
jfail:
	snprintf(why, whylen, "%s", jerr.msg);
	return -1;
}

int
policy_patch_from_json(struct json_object *parent, const char *key,
    struct auth_policy_patch *pt, char *why, size_t whylen)
{
	struct json_object *pol, *arr, *eg;
	struct jsonx_err jerr;
	char path[64];
	int64_t n;
	int b, r;

	memset(pt, 0, sizeof(*pt));
	if (jsonx_get_object(parent, key, 1, &pol, &jerr) != 1)
		goto jfail;
	/* Strict: a key authd does not know is a mistake, not an extra. */
	json_object_object_foreach(pol, k, v) {
		int known = strcmp(k, "network") == 0 ||
		    strcmp(k, "images") == 0 || strcmp(k, "egress") == 0 ||
		    strcmp(k, "egress_rate") == 0 ||
		    strcmp(k, "approvals") == 0;

		(void)v;
		for (size_t i = 0; i < sizeof(quotas) / sizeof(quotas[0]); i++)
			known |= strcmp(k, quotas[i].key) == 0;
		if (!known) {
			/* The key itself is peer data: not echoed. */
			snprintf(why, whylen, "$.%s: has an unknown key (known: "
			    "network, images, max_vms, memory_mib, "
			    "storage_gib, max_streams, egress, egress_rate, "
			    "approvals)",
			    key);
			return -1;
		}
	}
	snprintf(path, sizeof(path), "%s.network", key);
	if ((r = jsonx_get_bool(parent, path, 0, &b, &jerr)) == -1)
		goto jfail;
	if (r == 1) {
		pt->p.network = b;
		pt->fields |= POLICY_F_NETWORK;
	}
	snprintf(path, sizeof(path), "%s.images", key);
	if ((r = jsonx_get_array(parent, path, 0, &arr, &jerr)) == -1)
		goto jfail;
	if (r == 1 && policy_images_from_json(arr, path, pt, why, whylen) == -1)
		return -1;
	snprintf(path, sizeof(path), "%s.egress", key);
	if (json_object_object_get_ex(pol, "egress", &eg)) {
		if (egress_from_json_lim(eg, path, egress_max,
		    egress_max_names, &pt->p.egress, why, whylen) == -1)
			return -1;
		pt->fields |= POLICY_F_EGRESS;
	}
	/* 0 lifts the limit; anything else is within netd's bounds. */
	snprintf(path, sizeof(path), "%s.egress_rate", key);
	if ((r = jsonx_get_int64(parent, path, 0, 0, AUTH_RATE_MAX, &n,
	    &jerr)) == -1)
		goto jfail;
	if (r == 1) {
		if (n != 0 && n < AUTH_RATE_MIN) {
			snprintf(why, whylen, "$.%s: %lld bytes a second is "
			    "below the least limit, %d (0 for none)", path,
			    (long long)n, AUTH_RATE_MIN);
			return -1;
		}
		pt->p.egress_rate = (uint64_t)n;
		pt->fields |= POLICY_F_RATE;
	}
	snprintf(path, sizeof(path), "%s.approvals", key);
	if (policy_gates_from_json(parent, path, pt, why, whylen) == -1)
		return -1;
	for (size_t i = 0; i < sizeof(quotas) / sizeof(quotas[0]); i++) {
		snprintf(path, sizeof(path), "%s.%s", key, quotas[i].key);
		if ((r = jsonx_get_int64(parent, path, 0, 1, quotas[i].max, &n,
		    &jerr)) == -1)
			goto jfail;
		if (r == 1) {
			*(uint32_t *)((char *)&pt->p + quotas[i].off) =
			    (uint32_t)n;
			pt->fields |= quotas[i].bit;
		}
	}
	return 0;
jfail:
	snprintf(why, whylen, "%s", jerr.msg);
	return -1;
}
