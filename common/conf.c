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

static const char *const accels[] = { "auto", "kvm", "tcg", NULL };
static const char *const quota_modes[] = { "auto", "require", "off", NULL };

#define V(f)	KEY(struct conf_vmmd, f)
static const struct cfg_key vmmd_keys[] = {
	{ "socket", CFG_PATH, V(socket), 0, "${runtime_dir}/vmmd.sock",
	    0, 0, NULL, "socket mcpd sends tool calls to" },
	{ "ctl_socket", CFG_PATH, V(ctl_socket), 0,
	    "${runtime_dir}/vmctl.sock", 0, 0, NULL,
	    "socket vmctl talks to (root and admin_group)" },
	{ "approvals_socket", CFG_PATH, V(approvals_socket), 0,
	    "${runtime_dir}/approvals.sock", 0, 0, NULL,
	    "socket vmctl approval talks to (root and mcpvm-approvers)" },
	{ "authd_socket", CFG_PATH, V(authd_socket), 0,
	    "${runtime_dir}/authd.sock", 0, 0, NULL,
	    "authd's socket, to verify credentials" },
	{ "netd_socket", CFG_PATH, V(netd_socket), 0,
	    "${runtime_dir}/netd.sock", 0, 0, NULL,
	    "netd's socket, for guest networks (optional)" },
	{ "database", CFG_PATH, V(database), 0, "${state_dir}/vmmd.db",
	    0, 0, NULL, "SQLite file holding VM states and receipts" },
	{ "audit_log", CFG_PATH, V(audit_log), 0, "${state_dir}/audit.log",
	    0, 0, NULL, "hash-chained log of every authorized mutation" },
	{ "vm_dir", CFG_PATH, V(vm_dir), 0, "${state_dir}/vms", 0, 0, NULL,
	    "per-VM disks and checkpoints; must reflink with the images" },
	{ "run_dir", CFG_PATH, V(run_dir), 0, "${runtime_dir}/vms", 0, 0,
	    NULL, "per-VM monitor and link sockets" },
	{ "mcpd_user", CFG_STRING, V(mcpd_user), 0, "mcpvm", 0, 0, NULL,
	    "user mcpd runs as: the only peer allowed on socket" },
	{ "admin_group", CFG_STRING, V(admin_group), 0, "mcpvm-admin", 0, 0,
	    NULL, "group whose members may use vmctl besides root" },
	{ "approvers_dir", CFG_PATH, V(approvers_dir), 0,
	    "/etc/mcpvm/approvers", 0, 0, NULL,
	    "approver public keys (NAME.pub), root's alone" },
	{ "approval_ttl", CFG_INT, V(approval_ttl), 0, "3600", 5, 604800,
	    NULL, "seconds a proposal of a gated call waits for its "
	    "approvals" },
	{ "max_proposals", CFG_INT, V(max_proposals), 0, "64", 1, 4096,
	    NULL, "proposals one workspace may have awaiting a decision" },
	{ "qemu", CFG_PATH, V(qemu), 0, "/usr/bin/qemu-system-x86_64", 0, 0,
	    NULL, "the QEMU binary" },
	{ "vmproxy", CFG_PATH, V(vmproxy), 0, "/usr/libexec/mcpvm/vmproxy",
	    0, 0, NULL, "the per-VM guest link proxy" },
	{ "accel", CFG_ENUM, V(accel), 0, "auto", 0, 0, accels,
	    "kvm, tcg, or auto: KVM when /dev/kvm is usable" },
	{ "cgroup_parent", CFG_STRING, V(cgroup_parent), 0, "mcpvm", 0, 0,
	    NULL, "cgroup under which each VM gets vm-<slot>; inside "
	    "cgroup_holder with -D" },
	{ "cgroup_holder", CFG_STRING, V(cgroup_holder), 0,
	    "/system.slice/mcpvm-vms.service", 0, 0, NULL,
	    "with -D: the delegated cgroup that holds the VMs' cgroups, "
	    "a path from the cgroup2 mount (the unit mcpvm-vms.service's, "
	    "so that VMs outlive a crash of vmmd's unit), or self: vmmd's "
	    "own" },
	{ "uid_base", CFG_INT, V(uid_base), 0, "900000", 1000, 2000000000,
	    NULL, "VM slot N runs as uid uid_base + N" },
	{ "max_vms", CFG_INT, V(max_vms), 0, "16", 1, 4096, NULL,
	    "VMs retained at once (hibernated ones count)" },
	{ "max_memory_mib", CFG_INT, V(max_memory_mib), 0, "16384", 256,
	    16777216, NULL, "memory of all retained VMs together, each "
	    "with QEMU's own (qemu_overhead_mib)" },
	{ "qemu_overhead_mib", CFG_INT, V(qemu_overhead_mib), 0, "0", 0,
	    65536, NULL, "QEMU's own memory per VM that max_memory_mib "
	    "counts; 0: 64, and 256 more for TCG's code cache" },
	{ "max_vcpus", CFG_INT, V(max_vcpus), 0, "0", 0, 65536, NULL,
	    "vCPUs of all retained VMs together; 0: four per host CPU" },
	{ "max_storage_gib", CFG_INT, V(max_storage_gib), 0, "256", 1,
	    1048576, NULL, "disk reserved for all retained VMs together" },
	{ "boot_timeout_seconds", CFG_INT, V(boot_timeout_seconds), 0, "120",
	    5, 3600, NULL, "how long a boot or restore may take" },
	{ "link_down_seconds", CFG_INT, V(link_down_seconds), 0, "60", 1,
	    3600, NULL, "how long a running VM's guest link may stay down" },
	{ "min_free_mib", CFG_INT, V(min_free_mib), 0, "1024", 0, 1048576,
	    NULL, "free space vm_dir keeps beyond every reservation" },
	{ "storage_quota", CFG_ENUM, V(storage_quota), 0, "auto", 0, 0,
	    quota_modes, "auto, require or off: each VM's limit on vm_dir, "
	    "an XFS project (mount with prjquota) or a btrfs qgroup (btrfs "
	    "quota enable)" },
	{ "stream_ports", CFG_LIST, V(stream_ports), 0, "1025-65535", 0, 0,
	    NULL, "guest ports streams may open, as ranges" },
	{ "max_streams", CFG_INT, V(max_streams), 0, "32", 0, 65535, NULL,
	    "open streams host-wide" },
	{ "max_streams_per_vm", CFG_INT, V(max_streams_per_vm), 0, "4", 0,
	    65535, NULL, "open streams per VM" },
	{ "max_peer_connections", CFG_INT, V(max_peer_connections), 0, "64",
	    1, 4096, NULL, "connections at once on each of vmmd.sock and "
	    "vmctl.sock" },
	{ "max_peer_requests", CFG_INT, V(max_peer_requests), 0, "1024", 1,
	    65536, NULL, "requests one connection may have unanswered" },
	{ "max_requests", CFG_INT, V(max_requests), 0, "1024", 1, 65536,
	    NULL, "mcpd's requests unanswered at once host-wide, over every "
	    "connection and workspace" },
	{ "max_requests_per_workspace", CFG_INT,
	    V(max_requests_per_workspace), 0, "64", 1, 65536, NULL,
	    "requests of one workspace unanswered at once, running or "
	    "waiting" },
	{ "max_joined_retries", CFG_INT, V(max_joined_retries), 0, "8", 0,
	    256, NULL, "retries of one waiting call that wait for its "
	    "answer" },
	{ "console_log_kib", CFG_INT, V(console_log_kib), 0, "1024", 16,
	    1048576, NULL, "most of a VM's serial console that console.log "
	    "keeps" },
	{ "qemu_log_kib", CFG_INT, V(qemu_log_kib), 0, "256", 16,
	    1048576, NULL, "most of QEMU's own output that qemu.log keeps" },
	{ "max_broker_pipes_per_vm", CFG_INT, V(max_broker_pipes_per_vm), 0,
	    "4", 1, 64, NULL, "job broker pipes attached at once per VM" },
	{ "broker_max_connections", CFG_INT, V(broker_max_connections), 0,
	    "64", 1, 1024, NULL, "guest connections one attached broker pipe "
	    "carries" },
	{ "broker_max_waiting", CFG_INT, V(broker_max_waiting), 0, "32", 0,
	    1024, NULL, "guest connections of a pipe that wait for a "
	    "controller" },
	{ "broker_buffer_kib", CFG_INT, V(broker_buffer_kib), 0, "1024", 128,
	    65536, NULL, "controller data buffered per guest connection" },
	{ "broker_stall_seconds", CFG_INT, V(broker_stall_seconds), 0, "10",
	    1, 3600, NULL, "a guest connection that reads nothing this long "
	    "is closed" },
	{ "broker_max_pending", CFG_INT, V(broker_max_pending), 0, "64", 1,
	    1024, NULL, "guest connections per VM whose preamble is being "
	    "read" },
	{ "broker_preamble_seconds", CFG_INT, V(broker_preamble_seconds), 0,
	    "2", 1, 60, NULL, "how long a guest connection may take to send "
	    "its preamble" },
	{ "max_snapshots_per_workspace", CFG_INT,
	    V(max_snapshots_per_workspace), 0, "32", 0, 100000, NULL,
	    "snapshots one workspace may keep at once" },
	{ "max_fork_count", CFG_INT, V(max_fork_count), 0, "4", 1, 64, NULL,
	    "VMs one vm_fork may make" },
	{ "max_finished_jobs_per_vm", CFG_INT, V(max_finished_jobs_per_vm),
	    0, "1024", 256, 1000000, NULL, "finished jobs vmmd remembers per "
	    "VM; the oldest go first" },
	{ "warm_pool", CFG_INT, V(warm_pool), 0, "0", 0, 8, NULL,
	    "ready memory snapshots vmmd keeps per image at the default size, "
	    "network off and (while netd works) on, restored instead of "
	    "booting; 0 turns the pool off; 1 is recommended (vmmd -n: its "
	    "cost)" },
};
#undef V

#define I(f)	KEY(struct conf_image, f)
static const struct cfg_key image_keys[] = {
	{ "rootfs", CFG_PATH, I(rootfs), CFG_REQUIRED, NULL, 0, 0, NULL,
	    "raw ext4 root disk, on vm_dir's volume" },
	{ "kernel", CFG_PATH, I(kernel), CFG_REQUIRED, NULL, 0, 0, NULL,
	    "guest kernel (bzImage for QEMU)" },
	{ "initrd", CFG_PATH, I(initrd), CFG_REQUIRED, NULL, 0, 0, NULL,
	    "initramfs with guestd's stage one" },
	{ "rootfs_sha256", CFG_STRING, I(rootfs_sha256), CFG_REQUIRED, NULL,
	    0, 0, NULL, "SHA-256 of rootfs, checked at startup" },
	{ "kernel_sha256", CFG_STRING, I(kernel_sha256), CFG_REQUIRED, NULL,
	    0, 0, NULL, "SHA-256 of kernel" },
	{ "initrd_sha256", CFG_STRING, I(initrd_sha256), CFG_REQUIRED, NULL,
	    0, 0, NULL, "SHA-256 of initrd" },
	{ "append", CFG_STRING, I(append), 0, "", 0, 0, NULL,
	    "extra kernel command line arguments" },
	{ "default", CFG_BOOL, I(is_default), 0, "no", 0, 0, NULL,
	    "the image vm_create uses when it names none" },
	{ "memory_mib", CFG_INT, I(memory_mib), 0, "1024", 256, 16384, NULL,
	    "memory when vm_create gives none" },
	{ "min_memory_mib", CFG_INT, I(min_memory_mib), 0, "256", 256, 16384,
	    NULL, "smallest memory a VM of this image may have" },
};
#undef I

/* Image ids appear in tools.json's pattern: keep the two in step. */
static const char *
check_image_id(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > 64)
		return "image ids are 1 to 64 characters";
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
			return "image ids are letters, digits, '.', '_' and "
			    "'-', starting with a letter or digit";
	}
	return NULL;
}
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
	{ "egress_max_cidrs", CFG_INT, AK(egress_max_cidrs), 0, "64",
	    0, 256, NULL, "the most prefixes a workspace's egress allow or "
	    "deny list may hold" },
	{ "egress_max_names", CFG_INT, AK(egress_max_names), 0, "32",
	    0, 64, NULL, "the most domain names a workspace's egress "
	    "allowlist may hold" },
	{ "fail_rate", CFG_INT, AK(fail_rate), 0, "20", 1, 1000000, NULL,
	    "failed verifications answered per second per peer user" },
	{ "fail_burst", CFG_INT, AK(fail_burst), 0, "100", 1, 1000000, NULL,
	    "failed verifications answered at once before fail_rate applies" },
	{ "fail_queue", CFG_INT, AK(fail_queue), 0, "1024", 0, 65536, NULL,
	    "failed verifications held back per peer user before 'busy'" },
};

#define MK(f)	KEY(struct conf_mcpd, f)

static const struct cfg_key mcpd_keys[] = {
	{ "user", CFG_STRING, MK(user), 0, "mcpvm", 0, 0, NULL,
	    "user mcpd drops to when started as root" },
	{ "listen", CFG_LIST, MK(listen), 0, "127.0.0.1:8090", 0, 0, NULL,
	    "address:port to serve HTTP on, numeric; several allowed" },
	{ "metrics_listen", CFG_STRING, MK(metrics_listen), 0, "", 0, 0, NULL,
	    "address:port for GET /metrics alone; empty: none" },
	{ "allowed_hosts", CFG_LIST, MK(allowed_hosts), 0, "", 0, 0, NULL,
	    "Host header values accepted (name or name:port); empty: the "
	    "listeners' addresses and localhost" },
	{ "allowed_origins", CFG_LIST, MK(allowed_origins), 0, "", 0, 0, NULL,
	    "Origin values accepted; a request with any other Origin is 403" },
	{ "authd_socket", CFG_PATH, MK(authd_socket), 0,
	    "${runtime_dir}/authd.sock", 0, 0, NULL,
	    "authd's socket, to verify credentials" },
	{ "vmmd_socket", CFG_PATH, MK(vmmd_socket), 0,
	    "${runtime_dir}/vmmd.sock", 0, 0, NULL,
	    "vmmd's socket, where tool calls and streams go" },
	{ "max_header_bytes", CFG_INT, MK(max_header_bytes), 0, "16384",
	    1024, 1048576, NULL, "request line and headers, at most (413)" },
	{ "max_body_bytes", CFG_INT, MK(max_body_bytes), 0, "1048576",
	    4096, 67108864, NULL, "request body, at most (413)" },
	{ "max_requests_per_connection", CFG_INT,
	    MK(max_requests_per_connection), 0, "1000", 1, 1000000, NULL,
	    "requests on one keep-alive connection before it is closed" },
	{ "max_connections", CFG_INT, MK(max_connections), 0, "1024", 1,
	    65536, NULL, "client connections at once (503 beyond)" },
	{ "max_connections_per_client", CFG_INT,
	    MK(max_connections_per_client), 0, "256", 1, 65536, NULL,
	    "client connections at once from one address (429 beyond)" },
	{ "request_timeout", CFG_INT, MK(request_timeout), 0, "15", 1, 3600,
	    NULL, "seconds a client has to send a whole request (408)" },
	{ "idle_timeout", CFG_INT, MK(idle_timeout), 0, "60", 1, 86400, NULL,
	    "seconds without progress reading or writing a connection" },
	{ "max_sessions", CFG_INT, MK(max_sessions), 0, "4096", 1, 1000000,
	    NULL, "MCP sessions open at once" },
	{ "max_sessions_per_workspace", CFG_INT,
	    MK(max_sessions_per_workspace), 0, "64", 1, 1000000, NULL,
	    "MCP sessions one workspace may have open" },
	{ "max_connections_per_workspace", CFG_INT,
	    MK(max_connections_per_workspace), 0, "128", 1, 65536, NULL,
	    "client connections busy with one workspace's requests or "
	    "streams at once (429 beyond)" },
	{ "max_calls_per_workspace", CFG_INT, MK(max_calls_per_workspace), 0,
	    "64", 1, 65536, NULL, "tool calls of one workspace in flight at "
	    "once (429 beyond)" },
	{ "max_listens_per_workspace", CFG_INT,
	    MK(max_listens_per_workspace), 0, "16", 1, 65536, NULL,
	    "stateless subscriptions/listen streams one workspace may have "
	    "open (429 beyond)" },
	{ "session_idle_timeout", CFG_INT, MK(session_idle_timeout), 0,
	    "3600", 10, 2592000, NULL, "seconds an unused MCP session lives" },
	{ "tool_timeout", CFG_INT, MK(tool_timeout), 0, "900", 1, 86400,
	    NULL, "seconds mcpd waits for one tool call" },
	{ "stream_rate_bytes", CFG_INT, MK(stream_rate_bytes), 0, "33554432",
	    0, 1073741824, NULL,
	    "bytes per second per direction of one stream; 0: unlimited" },
	{ "stream_control_queue_bytes", CFG_INT,
	    MK(stream_control_queue_bytes), 0, "16384", 256, 1048576, NULL,
	    "bytes of WebSocket replies (pongs) queued for a client that does "
	    "not read them, before the stream is closed" },
};

#define NK(f)	KEY(struct conf_netd, f)

static const struct cfg_key netd_keys[] = {
	{ "socket", CFG_PATH, NK(socket), 0, "${runtime_dir}/netd.sock",
	    0, 0, NULL, "socket vmmd asks for guest networks on" },
	{ "vmmd_user", CFG_STRING, NK(vmmd_user), 0, "root", 0, 0, NULL,
	    "user vmmd runs as: the only peer allowed on socket" },
	{ "netns_dir", CFG_PATH, NK(netns_dir), 0, "/run/netns", 0, 0, NULL,
	    "directory where each VM's netns mcpvm-<slot> is bound" },
	{ "uplink", CFG_STRING, NK(uplink), 0, "", 0, 0, NULL,
	    "interface guests' traffic leaves by, masqueraded; empty: no "
	    "guest networking" },
	{ "host_range", CFG_STRING, NK(host_range), 0, "10.231.0.0/16", 0, 0,
	    NULL, "a /16 for the host<->netns links, 10.231.<slot>.0/30" },
	{ "guest_range", CFG_STRING, NK(guest_range), 0, "10.232.0.0/16", 0,
	    0, NULL, "a /16 for the netns<->guest links, 10.232.<slot>.0/30" },
	{ "dns", CFG_LIST, NK(dns), 0, "", 0, 0, NULL,
	    "IPv4 resolvers netd's DNS forwarder asks for the guests (at "
	    "most 3); empty: none" },
	{ "blocked_cidrs", CFG_LIST, NK(blocked_cidrs), 0, "", 0, 0, NULL,
	    "more IPv4 destinations guests never reach" },
	{ "max_conntrack_per_vm", CFG_INT, NK(max_conntrack_per_vm), 0,
	    "2048", 16, 1048576, NULL, "connection-tracking entries one "
	    "guest may hold; its new flows beyond them are dropped" },
	{ "connection_rate_per_vm", CFG_INT, NK(connection_rate_per_vm), 0,
	    "100", 1, 100000, NULL, "new connections one guest may open a "
	    "second, and at once; more are dropped" },
	{ "dns_ttl_min", CFG_INT, NK(dns_ttl_min), 0, "30", 1, 86400, NULL,
	    "the shortest time an address resolved for an allowlisted name "
	    "stays reachable (s)" },
	{ "dns_ttl_max", CFG_INT, NK(dns_ttl_max), 0, "3600", 1, 604800,
	    NULL, "the longest time an address resolved for an allowlisted "
	    "name stays reachable (s)" },
};

#define NKEYS(t)	(sizeof(t) / sizeof((t)[0]))

static const struct cfg_section sections[] = {
	{ "paths", paths_keys, NKEYS(paths_keys),
	    offsetof(struct mcpvm_conf, paths), 0, 0, 0, NULL },
	{ "vmmd", vmmd_keys, NKEYS(vmmd_keys),
	    offsetof(struct mcpvm_conf, vmmd), 0, 0, 0, NULL },
	{ "image", image_keys, NKEYS(image_keys),
	    offsetof(struct mcpvm_conf, images), 1, sizeof(struct conf_image),
	    offsetof(struct conf_image, id), check_image_id },
	{ "authd", authd_keys, NKEYS(authd_keys),
	    offsetof(struct mcpvm_conf, authd), 0, 0, 0, NULL },
	{ "mcpd", mcpd_keys, NKEYS(mcpd_keys),
	    offsetof(struct mcpvm_conf, mcpd), 0, 0, 0, NULL },
	{ "netd", netd_keys, NKEYS(netd_keys),
	    offsetof(struct mcpvm_conf, netd), 0, 0, 0, NULL },
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

const struct conf_image *
conf_find_image(const struct mcpvm_conf *conf, const char *id)
{
	const struct conf_image *im = conf->images.v;

	for (size_t i = 0; i < conf->images.n; i++)
		if (strcmp(im[i].id, id) == 0)
			return &im[i];
	return NULL;
}

const struct conf_image *
conf_default_image(const struct mcpvm_conf *conf)
{
	const struct conf_image *im = conf->images.v;

	for (size_t i = 0; i < conf->images.n; i++)
		if (im[i].is_default)
			return &im[i];
	/* A single image is the default without saying so. */
	return conf->images.n == 1 ? &im[0] : NULL;
}

void
conf_free(struct mcpvm_conf *conf)
{
	cfg_free(&mcpvm_conf_schema, conf);
}
