/*
 * libFuzzer target: bytes a client could send as tool arguments.  They go
 * through jsonx_parse and, when they parse, through every tool's input and
 * output schema.  Invariants: no crash or leak, messages are valid UTF-8,
 * jsonx's grammar check and json-c agree, and what jsonx accepts survives
 * json-c's serializer and parses again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "schema.h"
#include "utf8.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check_msg(const char *msg)
{
	if (!utf8_valid((const uint8_t *)msg, strlen(msg)))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int inited;
	struct jsonx_err jerr;
	json_object *obj, *again;
	const char *text;
	char	 err[512];
	size_t	 i, len;

	if (!inited) {
		if (tools_init(err, sizeof(err)) == -1) {
			fprintf(stderr, "fuzz_schema: %s\n", err);
			abort();
		}
		inited = 1;
	}
	if ((obj = jsonx_parse((const char *)data, size, 16, &jerr)) == NULL) {
		check_msg(jerr.msg);
		/* The grammar check and json-c must agree on what is JSON. */
		if (strstr(jerr.msg, "(json-c)") != NULL) {
			fprintf(stderr, "fuzz_schema: %s\n", jerr.msg);
			abort();
		}
		return 0;
	}
	text = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN,
	    &len);
	if ((again = jsonx_parse(text, len, 16, &jerr)) == NULL) {
		fprintf(stderr, "fuzz_schema: re-parse failed: %s\n", jerr.msg);
		abort();
	}
	json_object_put(again);
	for (i = 0; i < tools_count(); i++) {
		err[0] = '\0';
		if (tool_validate_input(tools_at(i), obj, err, sizeof(err)) ==
		    -1)
			check_msg(err);
		err[0] = '\0';
		if (tool_validate_output(tools_at(i), obj, err, sizeof(err)) ==
		    -1)
			check_msg(err);
	}
	json_object_put(obj);
	return 0;
}
