/*
 * The internal IPC catalogue: frame layout and every message type, shared
 * by mcpd, authd, vmmd, netd, vmproxy and the operator CLIs.
 *
 * A frame is a 16-byte header in host byte order (both ends are on the same
 * host) followed by `len` bytes of one JSON object:
 *
 *	u32 type	enum ipc_type
 *	u32 len		payload bytes, at most IPC_MAX_PAYLOAD
 *	u32 id		request id; a reply carries its request's id
 *	u32 flags	bit 0, IPC_FLAG_FD: exactly one descriptor rides along
 *			bit 1, IPC_FLAG_REPLY: answers the peer's request `id`
 *
 * A frame with a descriptor is sent by a sendmsg of its own, the descriptor
 * (SCM_RIGHTS) with the frame's first byte; frames without may share one.
 * Receivers read several frames at a time and give a descriptor to the
 * frame holding the last byte of the read that brought it, which must have
 * begun in that read; anything else closes the connection.
 *
 * The first frame each way is IPC_HELLO {"version":IPC_VERSION,"role":"…"}.
 * Errors travel as IPC_ERROR {"error":{"code":"…","message":"…"}} with the
 * public codes (invalid_argument, unauthorized, forbidden, not_found,
 * conflict, busy, quota_exceeded, unavailable, internal).
 *
 * Types are grouped in ranges by peer pair so a policy table reads plainly.
 * Each component adds its own types inside its range.
 */
#ifndef MCPVM_PROTO_IPCMSG_H
#define MCPVM_PROTO_IPCMSG_H

#define IPC_VERSION		1
#define IPC_HDR_LEN		16
#define IPC_MAX_PAYLOAD		(1024 * 1024)
#define IPC_FLAG_FD		0x1u
#define IPC_FLAG_REPLY		0x2u
#define IPC_FLAGS_KNOWN		(IPC_FLAG_FD | IPC_FLAG_REPLY)
/* Workspace names in one IPC_AUTH_REVOKED: a protocol bound, not a
 * setting; vmmd asks in batches of it. */
#define IPC_AUTH_REVOKED_MAX	256

enum ipc_type {
	IPC_HELLO = 1,
	IPC_ERROR = 2,

	/* 100-199: mcpd, vmmd -> authd (authd.8 documents the bodies) */
	IPC_AUTH_BASE = 100,
	IPC_AUTH_VERIFY = 101,		/* {credential} */
	IPC_AUTH_VERIFY_RESULT = 102,	/* {workspace, credential_id,
					   expires_at, policy} */
	IPC_AUTH_SUBSCRIBE = 103,	/* {} */
	IPC_AUTH_SUBSCRIBE_RESULT = 104,	/* {} */
	IPC_AUTH_EVENT = 105,		/* pushed, id 0: {workspace,
					   [credential_id], reason} */
	/*
	 * vmmd's (mcpd never names a workspace, though authd admits it
	 * from every peer: it cannot tell the two apart by uid, see
	 * authd/authd.c): {workspaces:[name,…]}, at most
	 * IPC_AUTH_REVOKED_MAX distinct names -> {revoked:[name,…]}, those
	 * of the list that authd knows and that are revoked.  For the
	 * revocations vmmd may have missed while it was away from authd.
	 */
	IPC_AUTH_REVOKED = 106,
	IPC_AUTH_REVOKED_RESULT = 107,

	/* 200-299: authctl -> authd */
	IPC_AUTHCTL_BASE = 200,
	IPC_AUTHCTL_ISSUE = 201,
	IPC_AUTHCTL_ISSUE_RESULT = 202,
	IPC_AUTHCTL_ROTATE = 203,
	IPC_AUTHCTL_ROTATE_RESULT = 204,
	IPC_AUTHCTL_REVOKE_TOKEN = 205,
	IPC_AUTHCTL_REVOKE_TOKEN_RESULT = 206,
	IPC_AUTHCTL_REVOKE_WORKSPACE = 207,
	IPC_AUTHCTL_REVOKE_WORKSPACE_RESULT = 208,
	IPC_AUTHCTL_POLICY_SET = 209,
	IPC_AUTHCTL_POLICY_SET_RESULT = 210,
	IPC_AUTHCTL_LIST = 211,
	IPC_AUTHCTL_LIST_RESULT = 212,
	IPC_AUTHCTL_SHOW = 213,
	IPC_AUTHCTL_SHOW_RESULT = 214,

	/*
	 * 300-399: mcpd <-> vmmd.  Every request carries the bearer
	 * credential as the client presented it; vmmd asks authd whose it
	 * is.  mcpd never names a workspace.
	 */
	IPC_VM_BASE = 300,
	/* {"credential","tool","arguments":{…}} */
	IPC_VM_TOOL = 301,
	/* {"result":{…}} matching the tool's outputSchema; or IPC_ERROR */
	IPC_VM_TOOL_RESULT = 302,
	/*
	 * vmmd -> mcpd while a slow tool runs, carrying the request's id
	 * without IPC_FLAG_REPLY: {"progress":n,"total":m,"message":"…"}
	 */
	IPC_VM_PROGRESS = 303,
	/* {"id":<ipc id of the request>}: the client gave up on it */
	IPC_VM_CANCEL = 304,
	/* {"credential","vm_id","port"} */
	IPC_VM_STREAM_OPEN = 305,
	/* {"stream_id","vm_id","port","workspace"} + the stream's fd */
	IPC_VM_STREAM_OPEN_RESULT = 306,
	/* vmmd -> mcpd: {"stream_id","reason":"suspended"|"destroyed"} */
	IPC_VM_STREAM_CLOSE = 307,
	/* {} -> {"vms":{"running":n,…},"open_streams":n} for /metrics; no
	 * credential, and vmmd asks authd nothing */
	IPC_VM_STATS = 308,
	IPC_VM_STATS_RESULT = 309,
	/* {"credential","vm_id","job_id","pipe_token"} -> IPC_VM_STREAM_OPEN_
	 * RESULT {"stream_id","vm_id","port":0,"workspace"} + the broker
	 * pipe's fd, closed later like a stream by IPC_VM_STREAM_CLOSE */
	IPC_VM_BROKER_OPEN = 310,

	/* 400-499: vmctl -> vmmd; every reply is IPC_VMCTL_RESULT
	 * {"result":{…}} or IPC_ERROR */
	IPC_VMCTL_BASE = 400,
	IPC_VMCTL_LIST = 401,		/* {"workspace"?} */
	IPC_VMCTL_STATUS = 402,		/* {"vm_id"} */
	IPC_VMCTL_DESTROY = 403,	/* {"vm_id"} */
	IPC_VMCTL_SUSPEND = 404,	/* {"vm_id","mode"?} */
	IPC_VMCTL_RESUME = 405,		/* {"vm_id"} */
	IPC_VMCTL_STOP_WORKSPACE = 406,	/* {"workspace"} */
	IPC_VMCTL_PREFLIGHT = 407,	/* {} */
	IPC_VMCTL_AUDIT_VERIFY = 408,	/* {} */
	IPC_VMCTL_SNAPSHOTS = 409,	/* {"workspace"?} */
	IPC_VMCTL_SNAPSHOT_DELETE = 410, /* {"snapshot_id"} */
	/* On approvals_socket alone (root and mcpvm-approvers; issue #28):
	 * the proposals of gated calls and the signed decisions on them.
	 * P is the proposal object with "workspace" (vmmd.8). */
	IPC_APPROVAL_LIST = 411,	/* {} -> {"proposals":[P…]} */
	IPC_APPROVAL_SHOW = 412,	/* {"id"} -> {"proposal":P,"args":{…}} */
	IPC_APPROVAL_DECIDE = 413,	/* {"id","envelope":base64} ->
					 * {"proposal":P} */
	IPC_VMCTL_RESULT = 420,

	/*
	 * 500-599: vmmd -> netd (netd.8 documents the bodies).  netd takes
	 * only slot numbers and builds every name and address itself.
	 */
	IPC_NET_BASE = 500,
	/* {"slots":[n,…],"policies"?:[{"slot","egress","rate"?},…]}: the
	 * slots of live VMs with network, and their egress policies (each
	 * an IPC_NET_EGRESS body, for a listed slot); netd removes every
	 * mcpvm network object of any other slot, and applies each kept
	 * slot's policy, its forwarder too (netd.8) */
	IPC_NET_SYNC = 501,
	IPC_NET_SYNC_RESULT = 502,	/* {"kept":[n,…],"removed":[n,…]} */
	/* {"slot":n,"egress"?,"rate"?} -> {"slot","mac","address","prefix",
	 * "gateway","dns":[…]} + the TAP's fd */
	IPC_NET_SETUP = 503,
	IPC_NET_SETUP_RESULT = 504,
	IPC_NET_TEARDOWN = 505,		/* {"slot":n} */
	IPC_NET_TEARDOWN_RESULT = 506,	/* {"slot":n} */
	/* {} -> {"slots":[…],"uplink","uplink_ok","ip_forward",
	 * "host_range","guest_range","forward_drop"} for vmctl preflight */
	IPC_NET_STATUS = 507,
	IPC_NET_STATUS_RESULT = 508,
	/* {"slot":n,"egress":{…},"rate":bytes/s?}: a live slot's egress
	 * table replaced in one transaction, its drop counts carried over
	 * -> {"slot":n,"counters":{…}} */
	IPC_NET_EGRESS = 509,
	IPC_NET_EGRESS_RESULT = 510,
	/* {} -> {"slots":[{"slot":n,"egress_dropped":…,…},…]}, the drop
	 * counters of every live slot (netd.8) */
	IPC_NET_COUNTERS = 511,
	IPC_NET_COUNTERS_RESULT = 512,

	/*
	 * 600-699: vmmd <-> vmproxy.  vmproxy is the only process that
	 * parses what a guest sends, or what the VM's QEMU sends (QMP, its
	 * output); what it hands vmmd is already checked and shaped as the
	 * tools' results or proto/vmqmp.h's typed QEMU results.
	 */
	IPC_PROXY_BASE = 600,
	/* {"op":"exec"|"job_status"|"jobs"|"job_output"|"job_cancel"|
	 *  "file_read"|"file_write"|"freeze"|"thaw"|"activity"|"ping"|
	 *  "shutdown"|"clock_set"|"identity", args…} */
	IPC_PROXY_CALL = 601,
	IPC_PROXY_RESULT = 602,		/* {"result":{…}} or IPC_ERROR */
	IPC_PROXY_STREAM_OPEN = 603,	/* {"port":n} */
	IPC_PROXY_STREAM_OPEN_RESULT = 604,	/* {"channel":n} + fd */
	/* 605 was IPC_PROXY_EVENT, now the types at 612-617. */
	/*
	 * vmmd -> vmproxy, which alone speaks QMP to QEMU (proto/vmqmp.h):
	 * {"op","timeout_ms"} (+ the checkpoint's fd for "getfd") ->
	 * {"ok",["error"],["message"],["status","running"],["migration"]}
	 */
	IPC_PROXY_QMP = 606,
	IPC_PROXY_QMP_RESULT = 607,
	/* vmmd -> vmproxy, no reply: {"job_id","secret":<64 hex>} routes
	 * guest connections with that preamble to the job's broker pipe;
	 * {"job_id","remove":true} ends the pipe */
	IPC_PROXY_BROKER_ROUTE = 608,
	/* {"job_id"} -> IPC_PROXY_BROKER_ATTACH_RESULT {"job_id"} + the
	 * controller's end of the pipe (brokermux.h frames), or IPC_ERROR */
	IPC_PROXY_BROKER_ATTACH = 609,
	IPC_PROXY_BROKER_ATTACH_RESULT = 610,
	/* vmmd -> vmproxy, no reply, first after it starts: the [vmmd]
	 * broker_* limits {"max_attached","max_connections","max_waiting",
	 * "buffer_bytes","stall_seconds","max_pending","preamble_seconds"} */
	IPC_PROXY_BROKER_LIMITS = 611,
	/*
	 * vmproxy -> vmmd, unasked (id 0, no reply), one type per event so
	 * that vmmd's policy admits each on its own and decodes it into its
	 * own shape (vmmd/decode.c, decode_vmproxy):
	 */
	/* {"guest"?:{"boot_id",…}}: the guest answered this session's hello */
	IPC_PROXY_GUEST_HELLO = 612,
	/* {}: the link dropped after a hello (hibernation, restore) */
	IPC_PROXY_LINK_DOWN = 613,
	/* {"open":n,"pipes"?:n}: open streams and attached broker pipes */
	IPC_PROXY_STREAMS = 614,
	/* {"message"?}: the guest broke the link protocol; vmproxy exits 3 */
	IPC_PROXY_GUEST_ERROR = 615,
	/* {"name":EVENT}: a QEMU event of proto/vmqmp.h's vmq_event_names */
	IPC_PROXY_QMP_EVENT = 616,
	/* {"message"}: vmproxy's QMP connection ended, short printable text */
	IPC_PROXY_QMP_LOST = 617,

	/* Test-only types, never in a daemon's policy table. */
	IPC_TEST_BASE = 900,
	IPC_TEST_ECHO = 901,
	IPC_TEST_FD = 902,
	IPC_TEST_ECHO_RESULT = 903,
};

#endif
