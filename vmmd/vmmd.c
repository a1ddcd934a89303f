/*
 * vmmd: the root VM manager.  This file starts it (configuration, state,
 * preflight, sockets), asks authd whose credential each request carries,
 * and hands mcpd's requests to their handlers (request.c answers them).  It never trusts mcpd: the workspace comes from authd,
 * arguments are validated again, and every VM is checked for ownership.
 */

/*
 * vmmd's contract: whom it talks to, what each may send, who handles it.
 * Every frame passes ipc_frame_check against its peer's policy (the types
 * that peer may send; anything else closes the connection), then a decoder
 * into a typed struct (decode.c), then one handler.
 *
 *   peer     channel, who may connect      policy         decoder, handler
 *   mcpd     vmmd.sock: mcpd_user or root  mcpd_rules     decode_mcpd,
 *            (accept_mcpd)                 (below)        vmmd_dispatch_mcpd,
 *                                                         then mcpd_msgs[]
 *   vmctl    vmctl.sock: root or the       vmctl_rules    decode_vmctl,
 *            admin group (accept_vmctl)    (below)        vmmd_dispatch_vmctl
 *                                                         (control.c)
 *   vmproxy  one socketpair per VM, to     proxy_rules    decode_vmproxy,
 *            the vmproxy vmmd spawned      (to_vmproxy.c) vmmd_dispatch_vmproxy,
 *                                                         then vmproxy_msgs[]
 *                                                         (to_vmproxy.c)
 *   spawner  a SOCK_SEQPACKET socketpair,  fixed structs  spawn_run's reply
 *            forked before the drop        (spawn.c)      (spawn.c)
 *   netd     netd.sock, vmmd connects      netd_rules     vmmd_dispatch_netd
 *                                          (netclient.c)  and its replies
 *   authd    authd.sock, vmmd connects     authd_rules    authc_dispatch_authd
 *                                          (authclient.c) (common/authclient.c);
 *            vmmd asks IPC_AUTH_VERIFY,                   a whole-workspace
 *            IPC_AUTH_SUBSCRIBE and, after                revoke event or
 *            each subscription,                           REVOKED answer:
 *            IPC_AUTH_REVOKED                             snap_revoke_*
 *                                                         (snapshot_revoke.c)
 *
 * Privileges: uid 0 with CAP_CHOWN and CAP_KILL alone (vmmd_caps below
 * says why), dropped by vmmd_privdrop() in main() once the spawner is
 * forked and before any thread starts; switching uids and exec are the
 * spawner's (spawn.h).  Seccomp: privdrop.c's common base with
 * vmmd_syscalls and vmmd_ioctls below, installed last in main(), over
 * every thread.
 */
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <linux/btrfs.h>
#include <linux/fs.h>
#include <linux/kvm.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <malloc.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "approve.h"
#include "audit.h"
#include "authclient.h"
#include "backend.h"
#include "decode.h"
#include "disk.h"
#include "env_main.h"
#include "ipc.h"
#include "jsonx.h"
#include "log.h"
#include "preflight.h"
#include "privdrop.h"
#include "quota.h"
#include "schema.h"
#include "sdnotify.h"
#include "snapshot.h"
#include "snapshot_revoke.h"
#include "warmpool.h"
#include "spawn.h"
#include "store.h"
#include "netclient.h"
#include "tools.h"
#include "vmmd_shared.h"
#include "vmmd_broker.h"
#include "worker.h"


/*
 * mcpd's messages: the only types vmmd.sock admits (mcpd_rules is made
 * from this table), and what answers each once decode_mcpd has read it.
 * A credential's workspace comes from authd first, for all but the stats.
 */
static void vmmd_stats(struct request *);

static const struct mcpd_msg_def {
	uint32_t	 type;
	int		 verify;	/* ask authd about the credential */
	void		(*handler)(struct request *);
} mcpd_msgs[] = {
	{ IPC_VM_TOOL, 1, tools_dispatch },		/* tools.c */
	{ IPC_VM_STREAM_OPEN, 1, stream_open },		/* stream.c */
	{ IPC_VM_BROKER_OPEN, 1, broker_open },		/* vmmd_broker.c */
	{ IPC_VM_STATS, 0, vmmd_stats },
	/* No request of its own: marks the one it names (mcpd_cancel). */
	{ IPC_VM_CANCEL, 0, NULL },
};
#define NMCPD_MSGS	(sizeof(mcpd_msgs) / sizeof(mcpd_msgs[0]))

/* The types each socket's peer may send (ipc_frame_check's policy). */
static struct ipc_rule mcpd_rules[NMCPD_MSGS];	/* mcpd_msgs' types */
static const struct ipc_policy mcpd_policy = {
	"mcpd", mcpd_rules, NMCPD_MSGS
};
static const struct ipc_rule vmctl_rules[] = {
	{ IPC_VMCTL_LIST, 0 },
	{ IPC_VMCTL_STATUS, 0 },
	{ IPC_VMCTL_DESTROY, 0 },
	{ IPC_VMCTL_SUSPEND, 0 },
	{ IPC_VMCTL_RESUME, 0 },
	{ IPC_VMCTL_STOP_WORKSPACE, 0 },
	{ IPC_VMCTL_PREFLIGHT, 0 },
	{ IPC_VMCTL_AUDIT_VERIFY, 0 },
	{ IPC_VMCTL_SNAPSHOTS, 0 },
	{ IPC_VMCTL_SNAPSHOT_DELETE, 0 },
};
static const struct ipc_rule approvals_rules[] = {
	{ IPC_APPROVAL_LIST, 0 },
	{ IPC_APPROVAL_SHOW, 0 },
	{ IPC_APPROVAL_DECIDE, 0 },
};
static const struct ipc_policy approvals_policy = {
	"vmctl approval", approvals_rules,
	sizeof(approvals_rules) / sizeof(approvals_rules[0])
};
static const struct ipc_policy vmctl_policy = {
	"vmctl", vmctl_rules, sizeof(vmctl_rules) / sizeof(vmctl_rules[0])
};

/*
 * vmmd's privileges.  It stays uid 0 (the state it keeps is root's) but
 * keeps only these capabilities, on every thread, with NoNewPrivs:
 *   CAP_CHOWN  hands a VM what it uses as its uid: the disk clone, the
 *              console pipe's end and the run directory's group; takes
 *              back a snapshot an older vmmd gave the VM; and takes a
 *              stopped VM's disk for the instant of a vm_snapshot's
 *              clone, then gives it back (snapshot.c);
 *   CAP_KILL   signals QEMU and vmproxy, which run as VM uids.
 * Switching uids (CAP_SETUID, CAP_SETGID) is the spawner's alone
 * (spawn.h), and vmmd may not exec: vmmd_syscalls has no execve.  It
 * opens nothing of a VM's uid's: QEMU's QMP socket and log are vmproxy's
 * (vmproxy_qmp.c), snapshots stay root's, files it gives away it sets up
 * first (mode, then owner), and the run directory is root's
 * (vm_rundir_own), so no CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH or
 * CAP_FOWNER.
 */
static const cap_value_t vmmd_caps[] = {
	CAP_CHOWN, CAP_KILL,
};

/*
 * What vmmd's loop and worker threads do beyond privdrop.c's common base:
 * files and directories of VM state and cgroups (sqlite's among them),
 * space checks, and its children's pidfds and exits.  Measured with
 * strace over the vmmd and vmmd-destroy suites; the rest are the same
 * calls on paths those suites do not take (a rename's fallback, a
 * directory fsync).  No execve, fork or clone: starting a program is
 * the spawner's (spawn.h).
 */
static const char *const vmmd_syscalls[] = {
	"openat", "unlink", "unlinkat", "mkdir", "rmdir", "rename",
	"renameat2", "getdents64", "fchown", "chown", "fchownat", "fchmod",
	"chmod",
	"fsync", "fdatasync", "ftruncate", "statfs", "fstatfs", "access",
	"faccessat", "faccessat2", "readlink", "getcwd", "wait4", "waitid",
	"pidfd_open", "pidfd_send_signal",
};

/*
 * ioctl for these alone: libevent's FIONREAD, the reflink clone of a
 * disk, a VM directory's project or btrfs subvolume and the commit that
 * makes its clones count (quota.c), and the KVM probe of `vmctl
 * preflight`.
 */
static const unsigned long vmmd_ioctls[] = {
	FIONREAD, FICLONE, FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR,
	BTRFS_IOC_SUBVOL_CREATE_V2, BTRFS_IOC_START_SYNC, BTRFS_IOC_WAIT_SYNC,
	KVM_GET_API_VERSION, KVM_CREATE_VM,
};

/* Drops to vmmd_caps; before any thread starts. */
static void
vmmd_privdrop(void)
{
	static const struct privdrop pd = { NULL, vmmd_caps,
	    sizeof(vmmd_caps) / sizeof(vmmd_caps[0]) };

	privdrop(&pd);
}


/* ---- authd ------------------------------------------------------------- */

int
policy_from_json(struct json_object *o, struct policy *p, char *err,
    size_t errlen)
{
	struct jsonx_err jerr;
	struct json_object *images, *eg, *ga;
	int64_t v;
	int b;

	memset(p, 0, sizeof(*p));
	if (jsonx_get_bool(o, "network", 1, &b, &jerr) != 1)
		goto bad;
	p->network = b;
	if (jsonx_get_array(o, "images", 1, &images, &jerr) != 1)
		goto bad;
	for (size_t i = 0; i < json_object_array_length(images); i++) {
		struct json_object *im = json_object_array_get_idx(images, i);

		if (i >= sizeof(p->images) / sizeof(p->images[0]) ||
		    !json_object_is_type(im, json_type_string)) {
			snprintf(err, errlen, "policy images are not a list "
			    "of ids");
			return -1;
		}
		snprintf(p->images[p->nimages++], sizeof(p->images[0]), "%s",
		    json_object_get_string(im));
	}
	if (jsonx_get_int64(o, "max_vms", 1, 0, INT32_MAX, &v, &jerr) != 1)
		goto bad;
	p->max_vms = v;
	if (jsonx_get_int64(o, "memory_mib", 1, 0, INT32_MAX, &v, &jerr) != 1)
		goto bad;
	p->memory_mib = v;
	if (jsonx_get_int64(o, "storage_gib", 1, 0, INT32_MAX, &v, &jerr) != 1)
		goto bad;
	p->storage_gib = v;
	if (jsonx_get_int64(o, "max_streams", 1, 0, INT32_MAX, &v, &jerr) !=
	    1)
		goto bad;
	p->max_streams = v;
	/* An authd from before egress policies sends none: public. */
	if (json_object_object_get_ex(o, "egress", &eg) &&
	    egress_from_json(eg, "policy.egress", EGRESS_MAX_CIDRS,
	    &p->egress, err, errlen) == -1)
		return -1;
	/* Nor a rate: none.  Else within netd's bounds, as authd keeps it. */
	if (jsonx_get_int64(o, "egress_rate", 0, 0, 1LL << 40, &v, &jerr) ==
	    -1)
		goto bad;
	if (json_object_object_get_ex(o, "egress_rate", NULL))
		p->egress_rate = (uint64_t)v;
	if (p->egress_rate != 0 && p->egress_rate < 4096) {
		snprintf(err, errlen, "policy.egress_rate: below 4096");
		return -1;
	}
	/* Nor gates (an authd from before #28): nothing needs approval.
	 * What it does send is decoded strictly. */
	if (json_object_object_get_ex(o, "approvals", &ga) &&
	    gates_from_json(ga, "policy.approvals", &p->gates, err,
	    errlen) == -1)
		return -1;
	return 0;
 bad:
	snprintf(err, errlen, "%s", jerr.msg);
	return -1;
}

/* The workspace and policy of authd's verify result into req. */
static int
request_identify(struct request *req, struct json_object *result)
{
	struct json_object *pol;
	struct jsonx_err jerr;
	const char *ws;
	char err[256];

	if (jsonx_get_string(result, "workspace", 1, &ws, &jerr) != 1 ||
	    jsonx_get_object(result, "policy", 1, &pol, &jerr) != 1 ||
	    policy_from_json(pol, &req->policy, err, sizeof(err)) == -1)
		return -1;
	snprintf(req->workspace, sizeof(req->workspace), "%s", ws);
	req->egress = req->policy.egress;
	return 0;
}

/*
 * mcpd's one connection carries every workspace's requests, so besides
 * its connection's limit (max_peer_requests) and the host's (max_requests)
 * a request counts against its workspace's, once authd has named it:
 * every request of the workspace not yet answered, running or waiting on
 * a VM or a guest, whichever connection it came on (or none, once mcpd
 * left).  One over is busy, naming the limit; other workspaces' requests
 * go on.  -1 when req was refused so.
 */
static int
workspace_admit(struct request *req)
{
	const struct request *o;
	long long n = 0;

	TAILQ_FOREACH(o, request_all(), entry)
		if (o != req && !o->admin &&
		    strcmp(o->workspace, req->workspace) == 0)
			n++;
	if (n < env->conf.vmmd.max_requests_per_workspace)
		return 0;
	request_error(req, "busy", "max_requests_per_workspace (%lld): this "
	    "workspace already has %lld requests unanswered; retry once some "
	    "are answered", env->conf.vmmd.max_requests_per_workspace, n);
	return -1;
}

/* Answers req by its handler, unless vmmd is on its way out. */
static void
request_run(struct request *req)
{
	if (env->shutting_down) {
		request_error(req, "unavailable", "vmmd is shutting down");
		return;
	}
	req->handler(req);
}

/* authd's answer for req's credential; its handler follows. */
static void
authd_verified(enum authc_status st, json_object *result, void *arg)
{
	struct request *req = arg;

	switch (st) {
	case AUTHC_OK:
		if (request_identify(req, result) == -1) {
			log_warnx("authd sent a verify result vmmd cannot "
			    "read");
			request_error(req, "unavailable", "authd's answer was "
			    "not understood");
			return;
		}
		if (workspace_admit(req) == -1)
			return;
		request_run(req);
		return;
	case AUTHC_UNAUTHORIZED:
		/* authd says no more than that, and neither do we. */
		request_error(req, "unauthorized", "the credential is not "
		    "valid");
		return;
	default:
		request_error(req, "unavailable", "authd is not reachable or "
		    "did not answer; try again shortly");
		return;
	}
}

/* Asks authd about req's credential. */
static void
request_verify(struct request *req, const char *credential)
{
	authclient_verify(env->authd, credential, authd_verified, req);
}

/* ---- mcpd -------------------------------------------------------------- */

/* Requests of conn not yet answered. */
static long long
conn_requests(const struct ipc_conn *conn)
{
	const struct request *req;
	long long n = 0;

	TAILQ_FOREACH(req, request_all(), entry)
		if (req->conn == conn)
			n++;
	return n;
}

/* mcpd's requests not yet answered, on any connection or none (vmctl's
 * are not counted: an operator is heard when tenants fill the host). */
static long long
host_requests(void)
{
	const struct request *req;
	long long n = 0;

	TAILQ_FOREACH(req, request_all(), entry)
		if (!req->admin)
			n++;
	return n;
}

/* IPC_VM_STATS: the counts behind mcpd's /metrics. */
static void
vmmd_stats(struct request *req)
{
	struct json_object *res = json_object_new_object();
	struct json_object *by = json_object_new_object();
	struct json_object *drops;
	int counts[VM_NSTATES] = { 0 }, streams = 0;
	struct vm *vm;

	TAILQ_FOREACH(vm, vm_all(), entry) {
		counts[vm->rec.state]++;
		streams += vm->open_streams;
	}
	for (int i = 0; i < VM_NSTATES; i++)
		if (i != VM_GONE)
			json_object_object_add(by,
			    vm_state_name((enum vm_state)i),
			    json_object_new_int(counts[i]));
	json_object_object_add(res, "vms", by);
	json_object_object_add(res, "open_streams",
	    json_object_new_int(streams));
	/* Each networked VM's drops, as netd last counted them. */
	drops = json_object_new_array();
	TAILQ_FOREACH(vm, vm_all(), entry) {
		struct json_object *o;
		struct net_drops d;

		if (!vm->rec.network || netclient_drops(vm->rec.slot,
		    &d) == -1)
			continue;
		o = net_drops_json(&d);
		json_object_object_add(o, "vm_id",
		    json_object_new_string(vm->rec.id));
		json_object_array_add(drops, o);
	}
	json_object_object_add(res, "drops", drops);
	if (req->conn != NULL)
		ipc_reply(req->conn, IPC_VM_STATS_RESULT, req->id, res, -1);
	json_object_put(res);
	request_drop(req);
}

/*
 * A request its caller gave up on stops waiting for its VM to be ready
 * (paused, hibernated, its link down), so that it no longer counts
 * against its workspace's budget: nothing of it ran yet, and its answer
 * goes nowhere.  A guest call already sent is let go of too, unless a
 * receipt or its own life after the caller needs its answer; those end
 * with the guest's answer or its timeout.  So is a stream open.
 */
static int
request_abandon(struct request *req)
{
	struct vm *vm;

	TAILQ_FOREACH(vm, vm_all(), entry)
		if (vm_wait_cancel(vm, req, "unavailable", "cancelled: the "
		    "caller went away while the VM was not ready"))
			return 1;
	/*
	 * A guest call whose answer only its caller needs (no receipt keeps
	 * it, nothing outlives the caller): answered now, so that it stops
	 * counting against its workspace, and the guest's answer is dropped
	 * when it comes.  The guest may still carry out the operation.
	 */
	if (req->def != NULL &&
	    (req->def->flags & (TOOL_RECEIPT | TOOL_OUTLIVES)) == 0 &&
	    (vm = vm_find(req->vm_id)) != NULL && proxy_forget(vm, req) > 0) {
		request_error(req, "unavailable", "cancelled: the caller went "
		    "away before the guest answered");
		return 1;
	}
	/* A stream open out at vmproxy: its place in the limits stays. */
	return stream_abandon(req);
}

/* 1 while req is still one of vmmd's requests (an answer frees it). */
static int
request_alive(const struct request *req)
{
	const struct request *r;

	TAILQ_FOREACH(r, request_all(), entry)
		if (r == req)
			return 1;
	return 0;
}

/* IPC_VM_CANCEL: a wait stops early (vm_exec's job is cancelled, vm_run's
 * VM destroyed, a wait for the VM ends); nothing else is safe to abandon
 * half way. */
static void
mcpd_cancel(struct ipc_conn *conn, uint32_t id)
{
	struct request *req;

	TAILQ_FOREACH(req, request_all(), entry)
		if (req->conn == conn && req->id == id) {
			req->cancelled = 1;
			if (req->on_cancel != NULL)
				req->on_cancel(req);
			else
				request_abandon(req);
			break;
		}
}

static const struct mcpd_msg_def *
mcpd_msg_find(uint32_t type)
{
	for (size_t i = 0; i < NMCPD_MSGS; i++)
		if (mcpd_msgs[i].type == type)
			return &mcpd_msgs[i];
	return NULL;
}

static void
vmmd_dispatch_mcpd(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	const struct mcpd_msg_def *d;
	struct request *req;
	struct mcpd_msg mm;
	struct decode_err de;
	long long pending = conn_requests(conn), host = host_requests();

	/* Decoded and bounded first: no handler sees the raw body. */
	switch (decode_mcpd(m->type, m->body, &mm, &de)) {
	case DECODE_BAD:
		log_warnx("mcpd sent a malformed message (type %u): %s; "
		    "closing its connection", m->type, de.msg);
		ipc_conn_free(conn);
		return;
	case DECODE_REFUSE:
		request_error(request_new(conn, m->id), de.code, "%s", de.msg);
		return;
	case DECODE_OK:
		break;
	}
	if ((d = mcpd_msg_find(mm.type)) == NULL) {
		/* The policy admits only the table's types: vmmd's bug. */
		log_warnx("mcpd: no handler for message type %u", mm.type);
		ipc_conn_free(conn);
		return;
	}
	if (d->handler == NULL) {
		mcpd_cancel(conn, mm.cancel_id);
		return;
	}
	req = request_new(conn, m->id);
	/* mm's strings point into the body: it lives as long as req. */
	req->body = json_object_get(m->body);
	req->msg = mm;
	req->handler = d->handler;
	if (pending >= env->conf.vmmd.max_peer_requests) {
		request_error(req, "busy", "max_peer_requests (%lld): this "
		    "connection already has %lld requests unanswered",
		    env->conf.vmmd.max_peer_requests, pending);
		return;
	}
	if (host >= env->conf.vmmd.max_requests) {
		request_error(req, "busy", "max_requests (%lld): the host "
		    "already has %lld requests unanswered; retry shortly",
		    env->conf.vmmd.max_requests, host);
		return;
	}
	if (mm.type == IPC_VM_TOOL) {
		snprintf(req->tool, sizeof(req->tool), "%s", mm.tool);
		req->args = json_object_get(mm.args);
		req->progress = mm.progress;
	}
	if (!d->verify) {
		request_run(req);
		return;
	}
	request_verify(req, mm.credential);
}

/* Connections open now on vmmd.sock, vmctl.sock and approvals.sock. */
static long long nconns_mcpd, nconns_vmctl, nconns_approvals;

/* One more connection on a socket, if its limit allows. */
static int
conn_admit(long long *n, const char *sock, const struct ucred *cred)
{
	if (*n >= env->conf.vmmd.max_peer_connections) {
		log_warnx("%s: max_peer_connections (%lld) reached: closing "
		    "pid %d's connection", sock,
		    env->conf.vmmd.max_peer_connections, (int)cred->pid);
		return 0;
	}
	(*n)++;
	return 1;
}

/*
 * A connection is gone: its requests finish unheard, and one that waits
 * for its VM to be ready stops waiting.  A tool whose job or run has
 * begun and outlives its caller (TOOL_OUTLIVES: vm_exec, vm_run) goes on
 * to its own end (request.h): a gone mcpd is a restart, not a cancel.
 */
static void
conn_forget(struct ipc_conn *conn)
{
	struct request *req, **gone = NULL;
	size_t ngone = 0, cap = 0;

	TAILQ_FOREACH(req, request_all(), entry)
		if (req->conn == conn) {
			int outlives = req->def != NULL &&
			    (req->def->flags & TOOL_OUTLIVES);

			req->conn = NULL;
			/* Its client is as gone as if it had cancelled, unless
			 * its job or run has begun and outlives it. */
			if (!outlives) {
				req->cancelled = 1;
				if (req->on_cancel != NULL)
					req->on_cancel(req);
			}
			if (outlives || req->on_cancel == NULL) {
				/* Abandoned below: an answer frees requests,
				 * which this walk must not meet. */
				if (ngone == cap) {
					cap = cap ? cap * 2 : 16;
					if ((gone = reallocarray(gone, cap,
					    sizeof(*gone))) == NULL)
						fatal("reallocarray");
				}
				gone[ngone++] = req;
			}
		}
	for (size_t i = 0; i < ngone; i++) {
		req = gone[i];
		if (!request_alive(req) || request_abandon(req))
			continue;
		if (req->def != NULL && (req->def->flags & TOOL_OUTLIVES))
			log_info("%s%s%s goes on without its caller, whose "
			    "connection ended", req->tool,
			    req->request_id[0] != '\0' ? " " : "",
			    req->request_id);
	}
	free(gone);
	vm_streams_forget_conn(conn);
}

static void
vmmd_closed_mcpd(struct ipc_conn *conn, void *arg)
{
	nconns_mcpd--;
	conn_forget(conn);
}

static const struct ipc_handlers mcpd_handlers = {
	vmmd_dispatch_mcpd, vmmd_closed_mcpd
};

/* The server admitted mcpd's own user and root (which may test). */
static const struct ipc_policy *
accept_mcpd(const struct ucred *cred, void *arg)
{
	return conn_admit(&nconns_mcpd, "vmmd.sock", cred) ? &mcpd_policy :
	    NULL;
}

static void
vmmd_closed_vmctl(struct ipc_conn *conn, void *arg)
{
	nconns_vmctl--;
	conn_forget(conn);
}

static const struct ipc_handlers vmctl_handlers = {
	vmmd_dispatch_vmctl, vmmd_closed_vmctl
};

/* The server admitted root and the admin group (ipc_server.c). */
static const struct ipc_policy *
accept_vmctl(const struct ucred *cred, void *arg)
{
	return conn_admit(&nconns_vmctl, "vmctl.sock", cred) ?
	    &vmctl_policy : NULL;
}

static void
vmmd_closed_approvals(struct ipc_conn *conn, void *arg)
{
	nconns_approvals--;
	conn_forget(conn);
}

static const struct ipc_handlers approvals_handlers = {
	approvals_dispatch, vmmd_closed_approvals
};

static const struct ipc_policy *
accept_approvals(const struct ucred *cred, void *arg)
{
	return conn_admit(&nconns_approvals, "approvals.sock", cred) ?
	    &approvals_policy : NULL;
}

/*
 * approvals.sock (issue #28): 0660 root:mcpvm-approvers, and admitted by
 * the same rule: root, or a process in that group.
 */
static void
approvals_listen(void)
{
	struct ipc_admit ap = { 0 };
	const char *path = env->conf.vmmd.approvals_socket;

	(void)ipc_admit_uid(&ap, 0);
	if (env->approvers_gid != (gid_t)-1)
		(void)ipc_admit_gid(&ap, env->approvers_gid);
	snprintf(ap.need, sizeof(ap.need), "neither root nor in group "
	    APPROVERS_GROUP);
	env->srv_approvals = ipc_server_new(env->base, path, 0660, "vmmd",
	    accept_approvals, &approvals_handlers, NULL);
	if (env->srv_approvals == NULL)
		fatal("%s", path);
	if (chown(path, 0, env->approvers_gid != (gid_t)-1 ?
	    env->approvers_gid : 0) == -1)
		fatal("chown %s", path);
	ipc_server_set_admit(env->srv_approvals, &ap);
}

/*
 * vmmd.sock: mcpd's user, and root; vmctl.sock: root, and a process whose
 * groups include the admin group, as the kernel saw them at connect
 * (SO_PEERGROUPS): no NSS lookup on the loop.
 */
static void
vmmd_listen(void)
{
	struct ipc_admit mcpd = { 0 }, vmctl = { 0 };

	(void)ipc_admit_uid(&mcpd, env->mcpd_uid);
	(void)ipc_admit_uid(&mcpd, 0);
	snprintf(mcpd.need, sizeof(mcpd.need), "neither root nor mcpd's "
	    "user %s", env->conf.vmmd.mcpd_user);
	(void)ipc_admit_uid(&vmctl, 0);
	if (env->admin_gid != (gid_t)-1)
		(void)ipc_admit_gid(&vmctl, env->admin_gid);
	snprintf(vmctl.need, sizeof(vmctl.need), "neither root nor in group "
	    "%s", env->conf.vmmd.admin_group);
	env->srv_mcpd = ipc_server_new(env->base, env->conf.vmmd.socket,
	    0666, "vmmd", accept_mcpd, &mcpd_handlers, NULL);
	if (env->srv_mcpd == NULL)
		fatal("%s", env->conf.vmmd.socket);
	ipc_server_set_admit(env->srv_mcpd, &mcpd);
	env->srv_ctl = ipc_server_new(env->base, env->conf.vmmd.ctl_socket,
	    0666, "vmmd", accept_vmctl, &vmctl_handlers, NULL);
	if (env->srv_ctl == NULL)
		fatal("%s", env->conf.vmmd.ctl_socket);
	ipc_server_set_admit(env->srv_ctl, &vmctl);
	approvals_listen();
}

struct request *control_request_new(struct ipc_conn *, uint32_t);

struct request *
control_request_new(struct ipc_conn *conn, uint32_t id)
{
	struct request *req = request_new(conn, id);

	req->admin = 1;
	return req;
}

/* ---- startup and shutdown ---------------------------------------------- */

static double
gib(long long bytes)
{
	return (double)bytes / (1LL << 30);
}

/*
 * vmmd -n: what the warm pool will cost, as admission counts it (a pool
 * snapshot is a root disk and a memory file; a reflink clone of the disk
 * takes less until written, but max_storage_gib counts it whole), for
 * each kind: network off, and network on while netd works.  At rest the
 * pool holds no memory: only its one VM per image that builds the next
 * snapshot does, for a boot (with network on, a netd slot as long).
 */
static void
pool_cost(const struct mcpvm_conf *c)
{
	const struct conf_image *ims = c->images.v;
	long long n = c->vmmd.warm_pool, all = 0;
	struct stat st;

	if (n == 0) {
		printf("warm pool: off (warm_pool = 0): vm_create boots every "
		    "VM\n");
		return;
	}
	for (size_t i = 0; i < c->images.n; i++) {
		const struct conf_image *im = &ims[i];
		long long disk = stat(im->rootfs, &st) == 0 ?
		    (long long)st.st_size : 0, mem = im->memory_mib << 20;

		printf("warm pool: image %s (1 vCPU, %lld MiB), %lld "
		    "snapshot(s) with network off and %lld with network on: "
		    "%.1f GiB disk + %.1f GiB memory file each, %.1f GiB of "
		    "storage (%.1f GiB without netd); memory: one %lld MiB VM "
		    "while a snapshot is built, none at rest\n", im->id,
		    im->memory_mib, n, n, gib(disk), gib(mem),
		    gib((disk + mem) * n * 2), gib((disk + mem) * n),
		    im->memory_mib);
		all += (disk + mem) * n * 2;
	}
	printf("warm pool: %.1f GiB of storage in all, of max_storage_gib "
	    "= %lld; network on is built only while netd says guest "
	    "networking works\n", gib(all), c->vmmd.max_storage_gib);
}

static void
signal_cb(int sig, short ev, void *arg)
{
	if (env->shutting_down)
		return;
	log_info("signal %d: hibernating every VM, then exiting", sig);
	env->shutting_down = 1;
	sd_notify_send("STOPPING=1");
	ipc_server_free(env->srv_mcpd);
	env->srv_mcpd = NULL;
	run_shutdown();		/* vm_run's VMs go, never to a checkpoint */
	vm_hibernate_all();
	/* After the tenants': a pool VM's destroy may end at once. */
	warmpool_shutdown();
	vmmd_stop_started();	/* exits when nothing is left to wait for */
}

/*
 * One pinned image file: its SHA-256 must be the configured one.  A file
 * whose identity (store.h) is what it was when its digest last matched is
 * not read again: a 3 GiB rootfs costs seconds at every start otherwise.
 */
static void
check_image_file(const char *image, const struct pf_file *f)
{
	struct pf_result r;
	struct file_identity id;
	char hex[65], err[256];
	int known = 0;

	memset(&r, 0, sizeof(r));
	if (file_identity_of(f->path, &id) == 0) {
		known = 1;
		if (store_digest_get(env->store, f->path, &id, hex, err,
		    sizeof(err)) == 1 &&
		    strcasecmp(hex, f->sha256) == 0) {
			log_info("image %s: %s %s: unchanged since its digest "
			    "matched; not read again", image, f->label,
			    f->path);
			return;
		}
	}
	/* The identity was taken first: a write while reading changes it. */
	pf_check_digest(f, &r);
	if (!r.ok)
		fatalx("image %s: %s", image, r.msg);
	if (known) {
		for (int k = 0; k < 64; k++)
			hex[k] = (char)tolower((unsigned char)f->sha256[k]);
		hex[64] = '\0';
		if (store_digest_put(env->store, f->path, &id, hex, err,
		    sizeof(err)) == -1)
			log_warnx("image %s: cannot remember the digest of "
			    "%s: %s", image, f->path, err);
	}
}

static void
check_images(void)
{
	const struct conf_image *im = env->conf.images.v;
	int ndefault = 0;

	for (size_t i = 0; i < env->conf.images.n; i++) {
		const struct pf_file files[3] = {
			{ "rootfs", im[i].rootfs, im[i].rootfs_sha256 },
			{ "kernel", im[i].kernel, im[i].kernel_sha256 },
			{ "initrd", im[i].initrd, im[i].initrd_sha256 },
		};

		for (int f = 0; f < 3; f++)
			check_image_file(im[i].id, &files[f]);
		if (im[i].is_default)
			ndefault++;
		if (im[i].min_memory_mib > im[i].memory_mib)
			fatalx("image %s: memory_mib is below min_memory_mib",
			    im[i].id);
	}
	if (ndefault > 1)
		fatalx("%s: more than one image says default = yes",
		    env->conf_path);
	if (env->conf.images.n > 1 && ndefault == 0)
		fatalx("%s: several images and none says default = yes",
		    env->conf_path);
}

static void
make_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) == -1 && errno != EEXIST)
		fatal("mkdir %s", path);
	if (chmod(path, mode) == -1)
		fatal("chmod %s", path);
}

/* The audit log's group commit (audit.h). */
static struct event	*audit_ev;

/*
 * The store's commits and the audit lines are made durable together
 * (store.h, audit.h).  A store that cannot sync ends vmmd: what it
 * answered may be gone after a power loss, and the next vmmd re-adopts
 * the VMs from what the store holds.
 */
static void
durable_flush(void)
{
	char err[512];

	if (store_sync(env->store, err, sizeof(err)) == -1)
		fatalx("state store: %s", err);
	audit_flush(env->audit);
}

static void
audit_flush_cb(evutil_socket_t fd, short ev, void *arg)
{
	durable_flush();
}

static void
audit_kick(void *arg)
{
	event_active(audit_ev, EV_TIMEOUT, 0);
}

static void
audit_barrier(void)
{
	durable_flush();
}

static uint64_t
file_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/*
 * The VMs' storage limits (quota.h).  Each gets, at every start, the
 * largest reservation a VM can have here: the largest image's files and
 * max_memory_mib (capped at one VM's most).
 *
 * On XFS, Q_XSETQLIM needs CAP_SYS_ADMIN, which no later step of vmmd
 * should hold.  Started by hand or by packaging/dev/up, vmmd is root
 * with every capability here and sets the limits before it drops them;
 * under the packaged unit its bounding set never had CAP_SYS_ADMIN, so
 * `vmmd -P` (prepare, the unit's ExecStartPre=+, with full privileges)
 * sets them and vmmd only makes its VM directories projects.  VM
 * directories are made projects later (vm_boot.c), with no capability;
 * a limit stays with its slot when a VM goes, and its files going frees
 * the project's blocks.
 *
 * On btrfs nothing is set here: each VM directory is made a subvolume
 * whose qgroup gets the limit as it is made (vm_boot.c), which takes no
 * capability, and its qgroup goes with it.  The probe has made one, with
 * this process's capabilities, and seen the limit hold.
 */
static int
can_sys_admin(void)
{
	cap_flag_value_t v = CAP_CLEAR;
	cap_t c;

	if ((c = cap_get_proc()) == NULL)
		return 0;
	if (cap_get_flag(c, CAP_SYS_ADMIN, CAP_EFFECTIVE, &v) == -1)
		v = CAP_CLEAR;
	cap_free(c);
	return v == CAP_SET;
}

static void
storage_quota_setup(int prepare_only)
{
	const struct conf_vmmd *c = &env->conf.vmmd;
	const struct conf_image *im = env->conf.images.v;
	uint64_t files = 0, f, bytes;
	char msg[512];
	int state = 0;

	if (c->storage_quota != CONF_QUOTA_OFF)
		state = quota_probe(c->vm_dir);
	switch (quota_decide(c->storage_quota, disk_fs_name(c->vm_dir),
	    state, c->vm_dir, msg, sizeof(msg))) {
	case QUOTA_REFUSE:
		fatalx("%s (storage_quota = require)", msg);
	case QUOTA_WITHOUT:
		if (msg[0] != '\0')
			log_warnx("%s", msg);
		else
			log_info("storage_quota = off: no per-VM limit on %s",
			    c->vm_dir);
		return;
	case QUOTA_ENFORCE:
		break;
	}
	for (size_t i = 0; i < env->conf.images.n; i++) {
		f = file_bytes(im[i].rootfs) + file_bytes(im[i].kernel) +
		    file_bytes(im[i].initrd);
		if (f > files)
			files = f;
	}
	bytes = quota_slot_bytes(files, c->max_memory_mib);
	if (strcmp(disk_fs_name(c->vm_dir), "btrfs") == 0) {
		quota_enable(1, c->storage_quota == CONF_QUOTA_REQUIRE);
		quota_use_subvolumes(bytes);
		log_info("storage_quota: each VM may use %llu MiB of %s (a "
		    "btrfs subvolume per VM, its qgroup's referenced limit)",
		    (unsigned long long)(bytes >> 20), c->vm_dir);
		return;
	}
	if (!prepare_only && !can_sys_admin()) {
		quota_enable(1, c->storage_quota == CONF_QUOTA_REQUIRE);
		log_info("storage_quota: each VM may use %llu MiB of %s, as "
		    "set by vmmd -P (this vmmd cannot set limits: it lacks "
		    "CAP_SYS_ADMIN)", (unsigned long long)(bytes >> 20),
		    c->vm_dir);
		return;
	}
	if (quota_set_limits(c->vm_dir, (uint32_t)c->uid_base,
	    (unsigned)c->max_vms, bytes, msg, sizeof(msg)) == -1) {
		if (c->storage_quota == CONF_QUOTA_REQUIRE)
			fatalx("storage_quota: %s", msg);
		log_warnx("storage_quota: %s: no per-VM limit", msg);
		return;
	}
	quota_enable(1, c->storage_quota == CONF_QUOTA_REQUIRE);
	log_info("storage_quota: each VM may use %llu MiB of %s (an XFS "
	    "project per VM, its uid)", (unsigned long long)(bytes >> 20),
	    c->vm_dir);
}

static __attribute__((noreturn)) void
usage(void)
{
	fprintf(stderr, "usage: vmmd [-DdnPv] [-f config]\n");
	exit(2);
}

int
main(int argc, char *argv[])
{
	static struct vmmd vmmd_env;
	struct event *sigterm, *sigint;
	struct qemu_conf qc;
	struct passwd *pw;
	struct group *gr;
	char err[1024];
	int ch, check_only = 0, prepare_only = 0, delegated = 0;

	env = &vmmd_env;
	env->conf_path = MCPVM_CONF_PATH;
	while ((ch = getopt(argc, argv, "Ddf:nPv")) != -1) {
		switch (ch) {
		case 'D':
			delegated = 1;
			break;
		case 'P':
			prepare_only = 1;
			break;
		case 'd':
			env->foreground = 1;
			break;
		case 'f':
			env->conf_path = optarg;
			break;
		case 'n':
			check_only = 1;
			break;
		case 'v':
			env->verbose++;
			break;
		default:
			usage();
		}
	}
	if (argc != optind)
		usage();
	log_init("vmmd", env->foreground || check_only || prepare_only,
	    env->verbose);
	if (conf_load(env->conf_path, &env->conf, err, sizeof(err)) == -1)
		fatalx("%s", err);
	if (check_only) {
		printf("%s: configuration OK\n", env->conf_path);
		pool_cost(&env->conf);
		return 0;
	}
	if (geteuid() != 0)
		fatalx("vmmd must start as root");
	/*
	 * The VMs' cgroups: where they go (a delegated v2 cgroup with -D),
	 * and their parent, made by -P with full privileges before vmmd
	 * starts without CAP_DAC_OVERRIDE, then found made at startup.
	 */
	if (cg_detect(&env->cg, env->conf.vmmd.cgroup_parent, err,
	    sizeof(err)) == -1 || (delegated && cg_delegate(&env->cg,
	    env->conf.vmmd.cgroup_holder, err, sizeof(err)) == -1))
		fatalx("cgroups: %s", err);
	if (prepare_only) {
		/* The unit's vmmd cannot set the storage limits: -P does. */
		umask(022);
		make_dir(env->conf.paths.state_dir, 0711);
		make_dir(env->conf.vmmd.vm_dir, 0711);
		storage_quota_setup(1);
		if (env->cg.delegated) {
			log_info("cgroups: v2, delegated at %s: vmmd makes %s "
			    "inside it as it starts", env->cg.v2_base,
			    env->cg.parent);
			return 0;
		}
		if (cg_prepare(&env->cg, err, sizeof(err)) == -1)
			fatalx("cgroups: %s", err);
		log_info("cgroups: %s, parent %s made", cg_layout_name(
		    env->cg.layout), env->cg.parent);
		return 0;
	}
	/*
	 * The VM directories vmmd makes must be traversable by each VM's uid
	 * (0711), and their modes are asked of mkdir against this umask; a
	 * stricter one inherited from the caller (a unit's UMask=, a shell)
	 * left QEMU unable to open its disk.
	 */
	umask(022);
	if (tools_init(err, sizeof(err)) == -1 ||
	    tools_table_check(err, sizeof(err)) == -1)
		fatalx("tools.json: %s", err);
	for (size_t i = 0; i < NMCPD_MSGS; i++)
		mcpd_rules[i].type = mcpd_msgs[i].type;
	signal(SIGPIPE, SIG_IGN);
	sd_notify_init();

	if ((pw = getpwnam(env->conf.vmmd.mcpd_user)) == NULL)
		fatalx("mcpd_user %s: no such user", env->conf.vmmd.mcpd_user);
	env->mcpd_uid = pw->pw_uid;
	env->admin_gid = (gid_t)-1;
	if ((gr = getgrnam(env->conf.vmmd.admin_group)) != NULL)
		env->admin_gid = gr->gr_gid;
	else
		log_warnx("admin_group %s does not exist: only root may use "
		    "vmctl", env->conf.vmmd.admin_group);
	env->approvers_gid = (gid_t)-1;
	if ((gr = getgrnam(APPROVERS_GROUP)) != NULL)
		env->approvers_gid = gr->gr_gid;
	else
		log_warnx("group %s does not exist: only root may decide "
		    "approvals on %s", APPROVERS_GROUP,
		    env->conf.vmmd.approvals_socket);

	make_dir(env->conf.paths.state_dir, 0711);
	make_dir(env->conf.paths.runtime_dir, 0755);
	make_dir(env->conf.vmmd.vm_dir, 0711);
	make_dir(env->conf.vmmd.run_dir, 0711);
	/* Before the database: a refusal leaves nothing behind. */
	storage_quota_setup(0);

	if ((env->store = store_open(env->conf.vmmd.database, err,
	    sizeof(err))) == NULL)
		fatalx("%s", err);
	check_images();
	if ((env->audit = audit_open(env->conf.vmmd.audit_log, env->store,
	    err, sizeof(err))) == NULL)
		fatalx("%s", err);
	{
		struct pf_result r;

		/* What would make every VM fail is refused at startup. */
		memset(&r, 0, sizeof(r));
		pf_check_reflink(env->conf.vmmd.vm_dir, &r);
		if (!r.ok)
			fatalx("%s", r.msg);
		memset(&r, 0, sizeof(r));
		pf_check_uids(NULL, (uid_t)env->conf.vmmd.uid_base,
		    (unsigned)env->conf.vmmd.max_vms, &r);
		if (!r.ok)
			fatalx("%s", r.msg);
	}
	if (cg_prepare(&env->cg, err, sizeof(err)) == -1)
		fatalx("cgroups: %s", err);
	if (env->cg.layout == CG_LAYOUT_V2)
		log_info("cgroups: v2, VMs under %s/%s%s", env->cg.v2_base,
		    env->cg.parent, !env->cg.delegated ? "" :
		    env->cg.daemon_inside ? " (delegated to vmmd's unit)" :
		    " (delegated to the holder unit, cgroup_holder)");
	else
		log_info("cgroups: v1, VMs under %s/%s and the other "
		    "hierarchies%s%s", env->cg.v1[CG_MEMORY], env->cg.parent,
		    env->cg.v2_track[0] != '\0' ? ", tracked in " : "",
		    env->cg.v2_track);

	/*
	 * What startup freed (check_images' 1 MiB read buffers, which glibc
	 * serves from the heap once its mmap threshold has risen) goes back
	 * now: the spawner's copy of the heap would hold it too.
	 */
	malloc_trim(0);
	/*
	 * The spawner, forked before anything below: it alone starts QEMU
	 * and vmproxy (see spawn.h), so that vmmd can drop the capabilities
	 * for switching uids and may not exec.
	 */
	{
		struct spawn_conf sc = {
			.qemu = env->conf.vmmd.qemu,
			.vmproxy = env->conf.vmmd.vmproxy,
			.uid_base = (uid_t)env->conf.vmmd.uid_base,
			.nslots = (unsigned)env->conf.vmmd.max_vms,
			.cg = &env->cg,
			/* QEMU and vmproxy see their VM's directories
			 * alone, and a /tmp and /dev/shm of their own. */
			.vm_dir = env->conf.vmmd.vm_dir,
			.run_dir = env->conf.vmmd.run_dir,
		};

		spawn_start(&sc);
	}
	vmmd_privdrop();

	if ((env->base = event_base_new()) == NULL)
		fatalx("event_base_new");
	/* Two priorities: authd's events (0) before mcpd's requests (1). */
	if (event_base_priority_init(env->base, 2) == -1)
		fatalx("event_base_priority_init");
	/*
	 * Audit lines are made durable together: before any answer is
	 * written, and at the end of the loop turn in which they were added
	 * (audit.h).  A storm of cancelled mutations, which each end with a
	 * line, costs one fdatasync per turn instead of one per request.
	 */
	if ((audit_ev = event_new(env->base, -1, 0, audit_flush_cb,
	    NULL)) == NULL)
		fatalx("event_new");
	audit_set_kick(env->audit, audit_kick, NULL);
	ipc_set_write_barrier(audit_barrier);
	/* Three: a create from a snapshot checks its memory file while its
	 * disk is cloned and its kernel copied (vm_boot.c create_files). */
	if ((env->workers = worker_pool_new(env->base, 3)) == NULL)
		fatalx("worker pool");
	memset(&qc, 0, sizeof(qc));
	qc.binary = env->conf.vmmd.qemu;
	qc.accel = env->conf.vmmd.accel == CONF_ACCEL_KVM ? QEMU_ACCEL_KVM :
	    env->conf.vmmd.accel == CONF_ACCEL_TCG ? QEMU_ACCEL_TCG :
	    QEMU_ACCEL_AUTO;
	/*
	 * TCG's default translation cache, 1 GiB, fills as guest code runs
	 * and does not fit the VM's cgroup beside its RAM: QEMU was killed
	 * for memory after some hundred jobs.  256 MiB fits the overhead.
	 */
	qc.tcg_tb_mib = QEMU_TCG_TB_MIB;
	if ((env->qemu = qemu_backend_new(env->base, env->workers, &qc, err,
	    sizeof(err))) == NULL)
		fatalx("qemu: %s", err);

	/* Before serving: what a crash left behind is settled first. */
	if (store_receipts_mark_uncertain(env->store, err, sizeof(err)) == -1)
		log_warnx("pending receipts not marked uncertain: %s", err);
	/* A lower cap than the last run's applies at once. */
	store_jobs_keep(env->store, env->conf.vmmd.max_finished_jobs_per_vm);
	if (store_jobs_prune(env->store, err, sizeof(err)) == -1)
		log_warnx("jobs past max_finished_jobs_per_vm not pruned: %s",
		    err);
	snap_init();
	vmmd_pending_register(snap_work_pending);	/* exit waits for them */
	vmmd_pending_register(fork_work_pending);
	vm_init_all();
	warmpool_init();
	broker_init();

	vmmd_listen();
	/* Streams are mcpd's to close; a workspace revoked takes its
	 * snapshots, and each subscription asks what was revoked while
	 * vmmd was away (snapshot_revoke.c). */
	if ((env->authd = authclient_new(env->base,
	    env->conf.vmmd.authd_socket, "vmmd", snap_revoke_event, NULL)) ==
	    NULL)
		fatalx("cannot set up authd's client");
	authclient_on_subscribed(env->authd, snap_revoke_subscribed, NULL);
	authclient_on_policy(env->authd, egress_policy_pushed, NULL);
	/* After vm_init_all: no VM has a network yet, so netd's first sync
	 * removes whatever an earlier vmmd's VMs left. */
	netclient_init(vm_find);

	sigterm = evsignal_new(env->base, SIGTERM, signal_cb, NULL);
	sigint = evsignal_new(env->base, SIGINT, signal_cb, NULL);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);

	/* Last, over every thread: the worker pool's are running. */
	sandbox_seccomp_ioctl(vmmd_syscalls, sizeof(vmmd_syscalls) /
	    sizeof(vmmd_syscalls[0]), vmmd_ioctls, sizeof(vmmd_ioctls) /
	    sizeof(vmmd_ioctls[0]), 0);

	log_info("ready: %s, %s acceleration", env->conf.vmmd.socket,
	    qemu_backend_kvm(env->qemu) ? "KVM" : "TCG (software)");
	sd_notify_send("READY=1");
	event_base_dispatch(env->base);

	if (env->left_running > 0)
		log_warnx("hibernated %d VM(s); %d could not be hibernated and "
		    "run on for the next vmmd to take up; exiting",
		    env->hibernated, env->left_running);
	else
		log_info("hibernated %d VM(s); every VM is on disk or stopped; "
		    "exiting", env->hibernated);
	ipc_server_free(env->srv_ctl);
	ipc_set_write_barrier(NULL);
	audit_close(env->audit);
	event_free(audit_ev);
	store_close(env->store);
	return 0;
}
