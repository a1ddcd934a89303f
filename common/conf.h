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

/* [authd]: the credential daemon and authctl; see authd.8. */
struct conf_authd {
	char		*user;		/* drops to it when started as root */
	char		*socket;	/* authd.sock, for mcpd and vmmd */
	char		*ctl_socket;	/* authctl.sock, for operators */
	char		*database;
	char		*admin_group;	/* may use authctl besides root */
	struct cfg_list	 peers;		/* users allowed on authd.sock */
	long long	 default_ttl;
	long long	 default_max_vms;
	long long	 default_memory_mib;
	long long	 default_storage_gib;
	long long	 default_max_streams;
	long long	 fail_rate;
	long long	 fail_burst;
	long long	 fail_queue;
};

struct mcpvm_conf {
	struct conf_paths	 paths;
	struct conf_authd	 authd;
};

extern const struct cfg_schema mcpvm_conf_schema;

int	conf_load(const char *path, struct mcpvm_conf *, char *err, size_t);
void	conf_free(struct mcpvm_conf *);

#endif
