/*
 * The key tables of mcpvm.conf; see conf.h.  Each daemon's section is a
 * table here, so that every process validates the whole file the same way
 * and an unknown key is an error wherever it is.
 */
#include <stddef.h>
#include <string.h>

#include "conf.h"

#define KEY(s, f)	offsetof(s, f)

static const struct cfg_key paths_keys[] = {
	{ "runtime_dir", CFG_PATH, KEY(struct conf_paths, runtime_dir), 0,
	    "/run/mcpvm", 0, 0, NULL,
	    "directory for the daemons' sockets" },
	{ "state_dir", CFG_PATH, KEY(struct conf_paths, state_dir), 0,
	    "/var/lib/mcpvm", 0, 0, NULL,
	    "directory for databases, VM disks and checkpoints" },
};

#define NKEYS(t)	(sizeof(t) / sizeof((t)[0]))

static const struct cfg_section sections[] = {
	{ "paths", paths_keys, NKEYS(paths_keys),
	    offsetof(struct mcpvm_conf, paths), 0, 0, 0, NULL },
};

const struct cfg_schema mcpvm_conf_schema = {
	sections, NKEYS(sections),
	offsetof(struct mcpvm_conf, paths.runtime_dir),
	offsetof(struct mcpvm_conf, paths.state_dir),
};

int
conf_load(const char *path, struct mcpvm_conf *conf, char *err,
    size_t errlen)
{
	memset(conf, 0, sizeof(*conf));
	if (cfg_parse_file(&mcpvm_conf_schema, path, conf, err, errlen) ==
	    -1) {
		conf_free(conf);
		return -1;
	}
	return 0;
}

void
conf_free(struct mcpvm_conf *conf)
{
	cfg_free(&mcpvm_conf_schema, conf);
}
