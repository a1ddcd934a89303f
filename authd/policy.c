/*
 * Workspace policy helpers: identifier validation, comparison and the JSON
 * shape of a policy.  Linked into authd and authctl.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "policy.h"

int
workspace_id_valid(const char *id, char *why, size_t whylen)
{
	size_t n = strlen(id);

	if (n == 0 || n > AUTH_WORKSPACE_MAX) {
		snprintf(why, whylen, "workspace id must be 1 to %d "
		    "characters long", AUTH_WORKSPACE_MAX);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-')
			continue;
		snprintf(why, whylen, "workspace id may contain only "
		    "lowercase letters, digits and '-' (character %zu is "
		    "not one)", i + 1);
		return 0;
	}
	return 1;
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
}

int
policy_equal(const struct auth_policy *a, const struct auth_policy *b)
{
	if (a->network != b->network || a->nimages != b->nimages ||
	    a->max_vms != b->max_vms || a->memory_mib != b->memory_mib ||
	    a->storage_gib != b->storage_gib ||
	    a->max_streams != b->max_streams)
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
	struct json_object *o, *imgs;

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
	return o;
fail:
	json_object_put(o);
	return NULL;
}

/* A quota: a JSON integer in [1, max]. */
static int
quota_get(struct json_object *v, const char *key, uint32_t max,
    uint32_t *out, char *why, size_t whylen)
{
	int64_t n;

	if (!json_object_is_type(v, json_type_int)) {
		snprintf(why, whylen, "policy.%s must be an integer", key);
		return -1;
	}
	errno = 0;
	n = json_object_get_int64(v);
	if (errno != 0 || n < 1 || n > (int64_t)max) {
		snprintf(why, whylen, "policy.%s must be between 1 and %u",
		    key, max);
		return -1;
	}
	*out = (uint32_t)n;
	return 0;
}

int
policy_patch_from_json(struct json_object *o, struct auth_policy_patch *pt,
    char *why, size_t whylen)
{
	memset(pt, 0, sizeof(*pt));
	if (!json_object_is_type(o, json_type_object)) {
		snprintf(why, whylen, "policy must be an object");
		return -1;
	}
	json_object_object_foreach(o, key, v) {
		if (strcmp(key, "network") == 0) {
			if (!json_object_is_type(v, json_type_boolean)) {
				snprintf(why, whylen,
				    "policy.network must be true or false");
				return -1;
			}
			pt->p.network = json_object_get_boolean(v) ? 1 : 0;
			pt->fields |= POLICY_F_NETWORK;
		} else if (strcmp(key, "images") == 0) {
			size_t n;

			if (!json_object_is_type(v, json_type_array)) {
				snprintf(why, whylen,
				    "policy.images must be an array of "
				    "image ids");
				return -1;
			}
			n = json_object_array_length(v);
			if (n > AUTH_MAX_IMAGES) {
				snprintf(why, whylen, "policy.images has %zu "
				    "entries; the limit is %d", n,
				    AUTH_MAX_IMAGES);
				return -1;
			}
			for (size_t i = 0; i < n; i++) {
				struct json_object *e =
				    json_object_array_get_idx(v, i);
				const char *s;
				char iwhy[160];

				if (!json_object_is_type(e, json_type_string)) {
					snprintf(why, whylen, "policy.images"
					    "[%zu] must be a string", i);
					return -1;
				}
				s = json_object_get_string(e);
				if (strlen(s) != (size_t)
				    json_object_get_string_len(e) ||
				    !image_id_valid(s, iwhy, sizeof(iwhy))) {
					snprintf(why, whylen, "policy.images"
					    "[%zu]: %s", i, strlen(s) !=
					    (size_t)json_object_get_string_len(e)
					    ? "contains a NUL byte" : iwhy);
					return -1;
				}
				memcpy(pt->p.images[i], s, strlen(s) + 1);
			}
			pt->p.nimages = n;
			images_normalise(&pt->p);
			pt->fields |= POLICY_F_IMAGES;
		} else if (strcmp(key, "max_vms") == 0) {
			if (quota_get(v, key, AUTH_MAX_VMS_LIMIT,
			    &pt->p.max_vms, why, whylen) == -1)
				return -1;
			pt->fields |= POLICY_F_MAX_VMS;
		} else if (strcmp(key, "memory_mib") == 0) {
			if (quota_get(v, key, AUTH_MEMORY_MIB_LIMIT,
			    &pt->p.memory_mib, why, whylen) == -1)
				return -1;
			pt->fields |= POLICY_F_MEMORY;
		} else if (strcmp(key, "storage_gib") == 0) {
			if (quota_get(v, key, AUTH_STORAGE_GIB_LIMIT,
			    &pt->p.storage_gib, why, whylen) == -1)
				return -1;
			pt->fields |= POLICY_F_STORAGE;
		} else if (strcmp(key, "max_streams") == 0) {
			if (quota_get(v, key, AUTH_STREAMS_LIMIT,
			    &pt->p.max_streams, why, whylen) == -1)
				return -1;
			pt->fields |= POLICY_F_STREAMS;
		} else {
			snprintf(why, whylen, "policy has an unknown key "
			    "(known: network, images, max_vms, memory_mib, "
			    "storage_gib, max_streams)");
			return -1;
		}
	}
	return 0;
}
