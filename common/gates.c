/*
 * Gated action classes and their JSON form; see gates.h.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "gates.h"
#include "jsonx.h"

static const char *const class_names[GATE_NCLASSES] = {
	[GATE_EXEC] = "exec",
	[GATE_NETWORK] = "network",
	[GATE_RESOURCES] = "resources",
	[GATE_DESTROY] = "destroy",
	[GATE_SNAPSHOT_DELETE] = "snapshot_delete",
	[GATE_BROKER_PIPE] = "broker_pipe",
};

const char *
gate_class_name(enum gate_class c)
{
	return (unsigned)c < GATE_NCLASSES ? class_names[c] : NULL;
}

int
gate_class_from_name(const char *s)
{
	for (int c = 0; c < GATE_NCLASSES; c++)
		if (strcmp(s, class_names[c]) == 0)
			return c;
	return -1;
}

int
gate_default_need(enum gate_class c)
{
	return c == GATE_DESTROY || c == GATE_SNAPSHOT_DELETE ? 2 : 1;
}

int
gates_any(const struct gates *g)
{
	for (int c = 0; c < GATE_NCLASSES; c++)
		if (g->need[c] != 0)
			return 1;
	return 0;
}

struct json_object *
gates_to_json(const struct gates *g)
{
	struct json_object *o;

	if ((o = json_object_new_object()) == NULL)
		return NULL;
	for (int c = 0; c < GATE_NCLASSES; c++)
		json_object_object_add(o, class_names[c],
		    json_object_new_int(g->need[c]));
	json_object_object_add(o, "memory_mib_above",
	    json_object_new_int64(g->memory_mib_above));
	json_object_object_add(o, "vcpus_above",
	    json_object_new_int64(g->vcpus_above));
	return o;
}

int
gates_from_json(struct json_object *o, const char *path, struct gates *g,
    char *err, size_t errlen)
{
	struct jsonx_err jerr;
	int64_t v;

	memset(g, 0, sizeof(*g));
	if (!json_object_is_type(o, json_type_object)) {
		snprintf(err, errlen, "%s: must be an object", path);
		return -1;
	}
	json_object_object_foreach(o, key, unused) {
		(void)unused;
		if (gate_class_from_name(key) == -1 &&
		    strcmp(key, "memory_mib_above") != 0 &&
		    strcmp(key, "vcpus_above") != 0) {
			snprintf(err, errlen, "%s.%s: no such gated action "
			    "(exec, network, resources, destroy, "
			    "snapshot_delete, broker_pipe)", path, key);
			return -1;
		}
	}
	for (int c = 0; c < GATE_NCLASSES; c++) {
		if (jsonx_get_int64(o, class_names[c], 0, 0, GATE_NEED_MAX, &v,
		    &jerr) == -1)
			goto bad;
		if (json_object_object_get_ex(o, class_names[c], NULL))
			g->need[c] = (uint8_t)v;
	}
	if (jsonx_get_int64(o, "memory_mib_above", 0, 0, GATE_MEMORY_MIB_MAX,
	    &v, &jerr) == -1)
		goto bad;
	if (json_object_object_get_ex(o, "memory_mib_above", NULL))
		g->memory_mib_above = (uint32_t)v;
	if (jsonx_get_int64(o, "vcpus_above", 0, 0, GATE_VCPUS_MAX, &v,
	    &jerr) == -1)
		goto bad;
	if (json_object_object_get_ex(o, "vcpus_above", NULL))
		g->vcpus_above = (uint32_t)v;
	if (g->need[GATE_RESOURCES] != 0 && g->memory_mib_above == 0 &&
	    g->vcpus_above == 0) {
		snprintf(err, errlen, "%s.resources: a resources gate needs "
		    "memory_mib_above or vcpus_above", path);
		return -1;
	}
	return 0;
 bad:
	snprintf(err, errlen, "%s: %s", path, jerr.msg);
	return -1;
}
