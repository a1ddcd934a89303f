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

#define AK(f)	KEY(struct conf_authd, f)

static const struct cfg_key authd_keys[] = {
	{ "user", CFG_STRING, AK(user), 0, "mcpvm-auth", 0, 0, NULL,
	    "user authd drops to when started as root" },
	{ "socket", CFG_PATH, AK(socket), 0, "${runtime_dir}/authd.sock",
	    0, 0, NULL, "socket for mcpd and vmmd (verify, subscribe)" },
	{ "ctl_socket", CFG_PATH, AK(ctl_socket), 0,
	    "${runtime_dir}/authctl.sock", 0, 0, NULL,
	    "socket for authctl (root and admin_group)" },
	{ "database", CFG_PATH, AK(database), 0, "${state_dir}/authd/authd.db",
	    0, 0, NULL, "SQLite credential store, mode 0600" },
	{ "admin_group", CFG_STRING, AK(admin_group), 0, "mcpvm-admin",
	    0, 0, NULL, "group whose members may use authctl" },
	{ "peers", CFG_LIST, AK(peers), 0, "mcpvm root", 0, 0, NULL,
	    "users (mcpd's, vmmd's) allowed on authd.sock" },
	{ "default_ttl", CFG_INT, AK(default_ttl), 0, "2592000",
	    0, 316224000, NULL,
	    "lifetime of a new credential in seconds without --ttl; 0 never "
	    "expires" },
	{ "default_max_vms", CFG_INT, AK(default_max_vms), 0, "2",
	    1, 1024, NULL, "a new workspace's VM quota" },
	{ "default_memory_mib", CFG_INT, AK(default_memory_mib), 0, "4096",
	    1, 1048576, NULL, "a new workspace's memory quota (MiB)" },
	{ "default_storage_gib", CFG_INT, AK(default_storage_gib), 0, "20",
	    1, 65536, NULL, "a new workspace's storage quota (GiB)" },
	{ "default_max_streams", CFG_INT, AK(default_max_streams), 0, "8",
	    1, 4096, NULL, "a new workspace's concurrent stream quota" },
	{ "fail_rate", CFG_INT, AK(fail_rate), 0, "20", 1, 1000000, NULL,
	    "failed verifications answered per second per peer user" },
	{ "fail_burst", CFG_INT, AK(fail_burst), 0, "100", 1, 1000000, NULL,
	    "failed verifications answered at once before fail_rate applies" },
	{ "fail_queue", CFG_INT, AK(fail_queue), 0, "1024", 0, 65536, NULL,
	    "failed verifications held back per peer user before 'busy'" },
};

#define NKEYS(t)	(sizeof(t) / sizeof((t)[0]))

static const struct cfg_section sections[] = {
	{ "paths", paths_keys, NKEYS(paths_keys),
	    offsetof(struct mcpvm_conf, paths), 0, 0, 0, NULL },
	{ "authd", authd_keys, NKEYS(authd_keys),
	    offsetof(struct mcpvm_conf, authd), 0, 0, 0, NULL },
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
