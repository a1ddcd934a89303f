/*
 * A validator for the JSON Schema subset proto/tools.json uses, and the
 * registry of the tools compiled from the copy of tools.json embedded at
 * build time.  mcpd validates every tool call and result with it; vmmd
 * validates again with the same code before acting.
 */
#ifndef MCPVM_SCHEMA_H
#define MCPVM_SCHEMA_H

#include <stddef.h>

#include <json-c/json.h>

struct schema;

/*
 * Compile a schema.  Keywords understood: type (a name or an array of
 * names), properties, required, additionalProperties (false or a schema),
 * propertyNames, maxProperties, enum, const, minimum, maximum (integers),
 * minLength, maxLength (in code points), pattern (POSIX ERE, anchored with
 * ^ and $), items, minItems, maxItems, oneOf, anyOf; description, title
 * and default are accepted and ignored.  Any other keyword is an error, so
 * a schema can never rely on something this validator would skip.
 *
 * Two deliberate differences from draft 2020-12: "integer" matches only a
 * JSON integer literal (1.0 is a number, as the jsonx getters see it), and
 * a string with U+0000 never matches a pattern (regexec would stop there).
 *
 * Returns NULL with a message in err on failure.  The schema keeps a
 * reference to the json_object it was compiled from.
 */
struct schema	*schema_compile(json_object *schema, char *err, size_t errlen);
void		 schema_free(struct schema *);

/*
 * 0 when instance is valid; otherwise -1 and err holds the first failing
 * location and what to change, e.g. "$.memory_mib: must be at most 16384".
 * The message is valid UTF-8.  A compiled schema is only read here, so
 * threads may validate against the same one at once.
 */
int		 schema_validate(const struct schema *, json_object *instance,
		    char *err, size_t errlen);

/*
 * The tool registry (toolreg.c).  tools_init() parses and compiles the embedded
 * tools.json; call it once at startup before any other thread exists (it
 * is idempotent).  tools_cleanup() frees it all.
 */
struct tool;

int		 tools_init(char *err, size_t errlen);
void		 tools_cleanup(void);
size_t		 tools_count(void);
const struct tool *tools_at(size_t);
const struct tool *tools_find(const char *name);
const char	*tool_name(const struct tool *);
/* The tool's object in tools.json (borrowed), with its examples. */
json_object	*tool_definition(const struct tool *);
/*
 * The array MCP's tools/list returns (borrowed): name, title,
 * description, inputSchema, outputSchema and annotations of each tool.
 * json-c caches serializations inside objects, so serialize it (or
 * tools_document()) from one thread only, e.g. once at startup.
 */
json_object	*tools_list_json(void);
/* The whole tools.json document (borrowed). */
json_object	*tools_document(void);
int		 tool_validate_input(const struct tool *, json_object *args,
		    char *err, size_t errlen);
int		 tool_validate_output(const struct tool *, json_object *result,
		    char *err, size_t errlen);

#endif
