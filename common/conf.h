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

enum conf_accel { CONF_ACCEL_AUTO, CONF_ACCEL_KVM, CONF_ACCEL_TCG };
enum conf_storage_quota {
	CONF_QUOTA_AUTO, CONF_QUOTA_REQUIRE, CONF_QUOTA_OFF
};

struct conf_vmmd {
	char		*socket;		/* mcpd's requests */
	char		*ctl_socket;		/* vmctl */
	char		*authd_socket;
	char		*netd_socket;		/* guest networks */
	char		*database;
	char		*audit_log;
	char		*vm_dir;		/* disks, kernels, checkpoints */
	char		*run_dir;		/* per-VM sockets and logs */
	char		*mcpd_user;		/* the only peer on socket */
	char		*admin_group;		/* may use ctl_socket */
	char		*approvers_dir;		/* enrolled approver keys */
	char		*approvals_socket;	/* vmctl approval */
	long long	 approval_ttl;		/* seconds a proposal lives */
	long long	 max_proposals;		/* pending, per workspace */
	char		*qemu;
	char		*vmproxy;
	int		 accel;			/* enum conf_accel */
	char		*cgroup_parent;
	char		*cgroup_holder;
	long long	 uid_base;		/* slot N runs as uid_base + N */
	long long	 max_vms;		/* also the size of the uid range */
	long long	 max_memory_mib;
	long long	 max_vcpus;		/* 0: four per host CPU */
	long long	 qemu_overhead_mib;	/* 0: by accelerator */
	long long	 max_storage_gib;
	long long	 boot_timeout_seconds;
	long long	 link_down_seconds;
	long long	 min_free_mib;		/* kept free on vm_dir's volume */
	int		 storage_quota;		/* enum conf_storage_quota */
	struct cfg_list	 stream_ports;		/* "1025-65535" ranges */
	long long	 max_streams;		/* host-wide */
	long long	 max_streams_per_vm;
	long long	 max_peer_connections;
	long long	 max_peer_requests;
	long long	 max_requests;		/* mcpd's, host-wide */
	long long	 max_requests_per_workspace;
	long long	 max_joined_retries;
	long long	 console_log_kib;
	long long	 qemu_log_kib;
	/* The job broker pipe (vmmd/broker.c, vmproxy_broker.c). */
	long long	 max_broker_pipes_per_vm;
	long long	 broker_max_connections;	/* per attachment */
	long long	 broker_max_waiting;		/* per pipe */
	long long	 broker_buffer_kib;		/* per connection */
	long long	 broker_stall_seconds;
	long long	 broker_max_pending;		/* per VM */
	long long	 broker_preamble_seconds;
	/* Snapshots (vmmd/snapshot.c). */
	long long	 max_snapshots_per_workspace;
	long long	 max_fork_count;		/* VMs per vm_fork */
	/* Jobs (vmmd/store.c). */
	long long	 max_finished_jobs_per_vm;
	long long	 warm_pool;	/* ready snapshots per image (warmpool.c) */
};

struct conf_image {
	char		*id;
	char		*rootfs;
	char		*kernel;
	char		*initrd;
	char		*rootfs_sha256;
	char		*kernel_sha256;
	char		*initrd_sha256;
	char		*append;		/* extra kernel arguments */
	int		 is_default;
	long long	 memory_mib;		/* default for vm_create */
	long long	 min_memory_mib;
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
	long long	 egress_max_cidrs;
	long long	 egress_max_names;
	long long	 fail_rate;
	long long	 fail_burst;
	long long	 fail_queue;
};

/* [mcpd]: the network front end; see mcpd.8. */
struct conf_mcpd {
	char		*user;		/* drops to it when started as root */
	struct cfg_list	 listen;	/* address:port, several allowed */
	char		*metrics_listen;	/* "" = no metrics listener */
	struct cfg_list	 allowed_hosts;	/* empty: the listeners' own names */
	struct cfg_list	 allowed_origins;
	char		*authd_socket;
	char		*vmmd_socket;
	long long	 max_header_bytes;
	long long	 max_body_bytes;
	long long	 max_requests_per_connection;
	long long	 max_connections;
	long long	 max_connections_per_client;
	long long	 request_timeout;
	long long	 idle_timeout;
	long long	 max_sessions;
	long long	 max_sessions_per_workspace;
	long long	 max_connections_per_workspace;
	long long	 max_calls_per_workspace;
	long long	 max_listens_per_workspace;
	long long	 session_idle_timeout;
	long long	 tool_timeout;
	long long	 stream_rate_bytes;	/* per direction; 0 = unlimited */
	long long	 stream_control_queue_bytes;	/* unread pongs */
};

/* [netd]: the network helper; see netd.8. */
struct conf_netd {
	char		*socket;	/* netd.sock, for vmmd only */
	char		*vmmd_user;	/* the only peer allowed on socket */
	char		*netns_dir;	/* where netns mcpvm-<slot> is bound */
	char		*uplink;	/* "" = networking unavailable */
	char		*host_range;	/* a /16: host<->netns /30s */
	char		*guest_range;	/* a /16: netns<->guest /30s */
	struct cfg_list	 dns;		/* resolvers for the guests */
	struct cfg_list	 blocked_cidrs;	/* destinations no guest reaches */
	long long	 max_conntrack_per_vm;	/* tracked flows of one VM */
	long long	 connection_rate_per_vm; /* its new flows a second */
	long long	 dns_ttl_min, dns_ttl_max;	/* allow4 timeouts */
};

struct mcpvm_conf {
	struct conf_paths	 paths;
	struct conf_vmmd	 vmmd;
	struct cfg_array	 images;	/* struct conf_image */
	struct conf_authd	 authd;
	struct conf_mcpd	 mcpd;
	struct conf_netd	 netd;
};

/* The image vm_create uses when it names none: NULL if none is marked. */
const struct conf_image *conf_default_image(const struct mcpvm_conf *);
const struct conf_image *conf_find_image(const struct mcpvm_conf *,
	    const char *id);

extern const struct cfg_schema mcpvm_conf_schema;

int	conf_load(const char *path, struct mcpvm_conf *, char *err, size_t);
void	conf_free(struct mcpvm_conf *);

#endif
