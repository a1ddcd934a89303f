/*
 * Prints every mcpvm.conf key from the very tables the daemons parse with,
 * one per line: "section<TAB>key<TAB>default".  test_conf_doc.py checks
 * docs/mcpvm.conf.5 against it, so the reference cannot drift from code.
 * With --conffile it prints the packaged /etc/mcpvm/mcpvm.conf instead:
 * every key commented out with its default and its one-line description;
 * test_conffile.sh checks packaging/debian/mcpvm.conf is exactly that.
 */
#include <stdio.h>
#include <string.h>

#include "conf.h"

static void
conffile(const struct cfg_schema *s)
{
	printf("# /etc/mcpvm/mcpvm.conf: the configuration of authd, vmmd and "
	    "mcpd; see\n# mcpvm.conf(5).  Every key is shown commented out "
	    "with its default.\n# vmmd needs at least one [image ID] section "
	    "(mcpvm-image(8) prints one)\n# and a state_dir that can reflink "
	    "(XFS or btrfs) before the service is\n# enabled with `systemctl "
	    "enable --now mcpvm.target`.\n");
	for (size_t i = 0; i < s->nsections; i++) {
		const struct cfg_section *sec = &s->sections[i];

		/* An [image ID] needs its six required keys: a template. */
		if (sec->multi)
			printf("\n# One section per image, e.g.:\n"
			    "#[%s debian13-dev]\n", sec->name);
		else
			printf("\n[%s]\n", sec->name);
		for (size_t k = 0; k < sec->nkeys; k++) {
			const struct cfg_key *key = &sec->keys[k];

			printf("# %s%s\n", key->doc, (key->flags &
			    CFG_REQUIRED) ? " (required)" : "");
			printf("#%s = %s\n", key->name, key->def != NULL ?
			    key->def : "");
		}
	}
}

int
main(int argc, char **argv)
{
	const struct cfg_schema *s = &mcpvm_conf_schema;

	if (argc == 2 && strcmp(argv[1], "--conffile") == 0) {
		conffile(s);
		return 0;
	}
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
