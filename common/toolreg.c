/*
 * The tool registry: the tools of proto/tools.json, embedded at build time
 * (tools_json.c), each with its input and output schema compiled once by
 * schema.c.  mcpd answers tools/list and validates every call and result
 * through it; vmmd validates again before it acts.  The interface is in
 * schema.h, beside the validator it is built on.
 *
 * Everything here is written once, by tools_init() before any thread
 * exists, and only read afterwards.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "schema.h"
#include "tools_json.h"
#include "utf8.h"

struct tool {
	const char	*name;
	json_object	*def;
	struct schema	*input;
	struct schema	*output;
};

static struct {
	json_object	*doc;
	json_object	*list;
	struct tool	*tools;
	size_t		 ntools;
} reg;

static int
load_tool(struct tool *t, json_object *def, size_t idx, char *err,
    size_t errlen)
{
	struct jsonx_err jerr;
	json_object *in, *out, *entry, *v;
	char	 where[96];
	static const char *const listed[] = { "name", "title",
	    "description", "inputSchema", "outputSchema", "annotations" };
	size_t	 i;

	snprintf(where, sizeof(where), "tools.json tool %zu", idx);
	if (jsonx_get_string(def, "name", 1, &t->name, &jerr) == -1 ||
	    jsonx_get_object(def, "inputSchema", 1, &in, &jerr) == -1 ||
	    jsonx_get_object(def, "outputSchema", 1, &out, &jerr) == -1) {
		snprintf(err, errlen, "%s: %s", where, jerr.msg);
		return -1;
	}
	snprintf(where, sizeof(where), "tools.json %s", t->name);
	t->def = def;
	if ((t->input = schema_compile(in, err, errlen)) == NULL ||
	    (t->output = schema_compile(out, err, errlen)) == NULL) {
		char	 inner[512];

		snprintf(inner, sizeof(inner), "%s", err);
		snprintf(err, errlen, "%s: %s", where, inner);
		return -1;
	}
	if ((entry = json_object_new_object()) == NULL ||
	    json_object_array_add(reg.list, entry) != 0) {
		json_object_put(entry);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < sizeof(listed) / sizeof(listed[0]); i++)
		if (json_object_object_get_ex(def, listed[i], &v))
			json_object_object_add(entry, listed[i],
			    json_object_get(v));
	return 0;
}

int
tools_init(char *err, size_t errlen)
{
	struct jsonx_err jerr;
	json_object *tools;
	size_t	 i, n;

	if (reg.doc != NULL)
		return 0;
	if ((reg.doc = jsonx_parse_object((const char *)mcpvm_tools_json,
	    mcpvm_tools_json_len, 32, &jerr)) == NULL) {
		snprintf(err, errlen, "tools.json: %s", jerr.msg);
		goto fail;
	}
	if (jsonx_get_array(reg.doc, "tools", 1, &tools, &jerr) == -1) {
		snprintf(err, errlen, "tools.json: %s", jerr.msg);
		goto fail;
	}
	n = json_object_array_length(tools);
	if ((reg.tools = calloc(n ? n : 1, sizeof(*reg.tools))) == NULL ||
	    (reg.list = json_object_new_array()) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (i = 0; i < n; i++) {
		if (load_tool(&reg.tools[i], json_object_array_get_idx(tools,
		    i), i, err, errlen) == -1) {
			reg.ntools = i + 1;
			goto fail;
		}
	}
	reg.ntools = n;
	/*
	 * Compiling left holes in the heap (each regex compiled, then freed
	 * once pattern.c had it): give their pages back, once, before the
	 * daemon settles.  Cheap (one pass over the arena) and idempotent.
	 */
	malloc_trim(0);
	return 0;
 fail:
	/* A truncated message may end inside a character. */
	utf8_scrub(err);
	tools_cleanup();
	return -1;
}

void
tools_cleanup(void)
{
	size_t	 i;

	for (i = 0; i < reg.ntools; i++) {
		schema_free(reg.tools[i].input);
		schema_free(reg.tools[i].output);
	}
	free(reg.tools);
	json_object_put(reg.list);
	json_object_put(reg.doc);
	memset(&reg, 0, sizeof(reg));
}

size_t
tools_count(void)
{
	return reg.ntools;
}

const struct tool *
tools_at(size_t i)
{
	return i < reg.ntools ? &reg.tools[i] : NULL;
}

const struct tool *
tools_find(const char *name)
{
	size_t	 i;

	for (i = 0; i < reg.ntools; i++)
		if (strcmp(reg.tools[i].name, name) == 0)
			return &reg.tools[i];
	return NULL;
}

const char *
tool_name(const struct tool *t)
{
	return t->name;
}

json_object *
tool_definition(const struct tool *t)
{
	return t->def;
}

json_object *
tools_list_json(void)
{
	return reg.list;
}

json_object *
tools_document(void)
{
	return reg.doc;
}

int
tool_validate_input(const struct tool *t, json_object *args, char *err,
    size_t errlen)
{
	return schema_validate(t->input, args, err, errlen);
}

int
tool_validate_output(const struct tool *t, json_object *result, char *err,
    size_t errlen)
{
	return schema_validate(t->output, result, err, errlen);
}
