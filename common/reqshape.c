/*
 * The table-driven request decoder skeleton of reqshape.h.  Runs in authd
 * and netd on every request body a peer sends, before any handler.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "jsonx.h"
#include "reqshape.h"

static const struct reqshape *
shape_of(const struct reqshape_table *t, uint32_t type)
{
	for (size_t i = 0; i < t->nshapes; i++)
		if (t->shapes[i].type == type)
			return &t->shapes[i];
	return NULL;
}

static unsigned int
key_bit(const struct reqshape_table *t, const char *name)
{
	for (size_t i = 0; i < t->nkeys; i++)
		if (strcmp(name, t->keys[i].name) == 0)
			return t->keys[i].bit;
	return 0;
}

int
reqshape_bad_bit(char *why, size_t whylen)
{
	snprintf(why, whylen, "internal: unknown key bit");
	return -1;
}

int
reqshape_decode(const struct reqshape_table *t, uint32_t type,
    struct json_object *body, void *req, const void *arg, char *why,
    size_t whylen)
{
	const struct reqshape *shape;
	unsigned int seen = 0;

	if ((shape = shape_of(t, type)) == NULL) {
		snprintf(why, whylen, "message type %u is not a request",
		    type);
		return -1;
	}
	if (body == NULL || !json_object_is_type(body, json_type_object)) {
		snprintf(why, whylen, "$: expected object, got %s",
		    body == NULL ? "null" : jsonx_type_name(body));
		return -1;
	}
	json_object_object_foreach(body, key, v) {
		unsigned int bit = key_bit(t, key);

		(void)v;
		if (bit == 0 || (shape->allowed & bit) == 0) {
			snprintf(why, whylen, "%s", t->unknown_key);
			return -1;
		}
		if (t->decode(req, bit, body, arg, why, whylen) == -1)
			return -1;
		seen |= bit;
	}
	for (size_t i = 0; i < t->nkeys; i++)
		if ((shape->required & t->keys[i].bit) &&
		    !(seen & t->keys[i].bit)) {
			snprintf(why, whylen, "$.%s: is required",
			    t->keys[i].name);
			return -1;
		}
	return 0;
}
