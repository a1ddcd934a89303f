/*
 * Prints every mcpvm.conf key from the very tables the daemons parse with,
 * one per line: "section<TAB>key<TAB>default".  test_conf_doc.py checks
 * docs/mcpvm.conf.5 against it, so the reference cannot drift from code.
 */
#include <stdio.h>

#include "conf.h"

int
main(void)
{
	const struct cfg_schema *s = &mcpvm_conf_schema;

	for (size_t i = 0; i < s->nsections; i++) {
		const struct cfg_section *sec = &s->sections[i];

		for (size_t k = 0; k < sec->nkeys; k++)
			printf("%s\t%s\t%s\n", sec->name, sec->keys[k].name,
			    sec->keys[k].def != NULL ? sec->keys[k].def :
			    (sec->keys[k].flags & CFG_REQUIRED) ? "(required)" :
			    "(none)");
	}
	return 0;
}
