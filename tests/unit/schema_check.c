/*
 * Validates one JSON document on stdin against a tool's input or output
 * schema from proto/tools.json, with the same validator mcpd and vmmd use.
 * For test_readme.py, which checks every example in README.md.
 * usage: schema_check TOOL input|output < doc.json
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "schema.h"

int
main(int argc, char *argv[])
{
	static char buf[1 << 20];
	const struct tool *t;
	struct jsonx_err jerr;
	json_object *doc;
	char err[512];
	size_t n;
	int rc;

	if (argc != 3 || (strcmp(argv[2], "input") != 0 &&
	    strcmp(argv[2], "output") != 0)) {
		fprintf(stderr, "usage: schema_check TOOL input|output\n");
		return 2;
	}
	if (tools_init(err, sizeof(err)) == -1) {
		fprintf(stderr, "tools.json: %s\n", err);
		return 2;
	}
	if ((t = tools_find(argv[1])) == NULL) {
		fprintf(stderr, "no tool %s\n", argv[1]);
		return 1;
	}
	n = fread(buf, 1, sizeof(buf), stdin);
	if ((doc = jsonx_parse(buf, n, 64, &jerr)) == NULL) {
		fprintf(stderr, "%s\n", jerr.msg);
		return 1;
	}
	rc = strcmp(argv[2], "input") == 0 ?
	    tool_validate_input(t, doc, err, sizeof(err)) :
	    tool_validate_output(t, doc, err, sizeof(err));
	if (rc == -1)
		fprintf(stderr, "%s %s: %s\n", argv[1], argv[2], err);
	json_object_put(doc);
	tools_cleanup();
	return rc == -1 ? 1 : 0;
}
