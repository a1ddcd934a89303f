/*
 * The mcpvm configuration: one INI file (/etc/mcpvm/mcpvm.conf) shared by
 * every daemon, each reading the sections it needs.  Every filesystem path
 * is a key, so tests run whole suites inside a temporary directory.
 * docs/mcpvm.conf.5 is the reference; keep it in step with conf.c.
 */
#ifndef MCPVM_CONF_H
#define MCPVM_CONF_H

#include "config.h"

#define MCPVM_CONF_PATH	"/etc/mcpvm/mcpvm.conf"

struct conf_paths {
	char	*runtime_dir;	/* sockets: /run/mcpvm */
	char	*state_dir;	/* databases, disks: /var/lib/mcpvm */
};

struct mcpvm_conf {
	struct conf_paths	 paths;
};

extern const struct cfg_schema mcpvm_conf_schema;

int	conf_load(const char *path, struct mcpvm_conf *, char *err, size_t);
void	conf_free(struct mcpvm_conf *);

#endif
