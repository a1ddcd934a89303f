/*
 * vmmd: every message a peer may send, decoded into a typed struct and
 * bounded before any handler runs (#14).  Pure: a JSON body in, a struct
 * or a verdict out, no state, so that fuzz_vmmd_decode drives exactly
 * what the sockets do.  Strings in a struct point into the body and live
 * as long as it does.
 *
 * Each decoder's verdict (common/verdict.h) is one of three: the message
 * is good; a value is refused, with code and msg; or it is not of its
 * type's shape, and the peer's connection is closed and logged.
 */
#ifndef VMMD_DECODE_H
#define VMMD_DECODE_H

#include <stdint.h>

#include <json-c/json.h>

#include "verdict.h"
#include "vmqmp.h"

#define DECODE_CREDENTIAL_MAX	512
#define DECODE_MAX_PIPES	64	/* max_broker_pipes_per_vm's maximum */

/* vmmd.sock: mcpd. */
struct mcpd_msg {
	uint32_t		 type;
	const char		*credential;	/* TOOL, STREAM_OPEN */
	const char		*tool;		/* TOOL: a tool of tools.json */
	struct json_object	*args;		/* TOOL: an object, borrowed */
	int			 progress;	/* TOOL */
	/* TOOL of vm_run: "get" or "cancel" asks after the run of
	 * arguments.request_id (an MCP task, mcpd/tasks.h); NULL: a call. */
	const char		*task;
	const char		*vm_id;		/* STREAM_OPEN, BROKER_OPEN */
	const char		*job_id;	/* BROKER_OPEN */
	const char		*pipe_token;	/* BROKER_OPEN */
	int			 port;		/* STREAM_OPEN: 1..65535 */
	uint32_t		 cancel_id;	/* CANCEL: the request's id */
};

enum decode_verdict decode_mcpd(uint32_t type, struct json_object *body,
	    struct mcpd_msg *, struct decode_err *);

/* vmctl.sock: the operator's vmctl. */
struct vmctl_msg {
	uint32_t	 type;
	const char	*vm_id;		/* STATUS, DESTROY, SUSPEND, RESUME */
	const char	*workspace;	/* STOP_WORKSPACE; LIST: NULL for all */
	int		 pause;		/* SUSPEND: mode "pause" */
	const char	*snapshot_id;	/* SNAPSHOT_DELETE */
};

enum decode_verdict decode_vmctl(uint32_t type, struct json_object *body,
	    struct vmctl_msg *, struct decode_err *);

/* approvals.sock: vmctl approval (IPC_APPROVAL_*). */
#define DECODE_PROPOSAL_ID_LEN	33	/* "p" and 32 lowercase hex */
#define DECODE_ENVELOPE_B64_MAX	1024	/* > base64 of APPROVAL_ENVELOPE_MAX */

struct approval_msg {
	uint32_t	 type;
	const char	*id;		/* SHOW, DECIDE: a proposal id */
	const char	*envelope;	/* DECIDE: base64, not yet decoded */
	size_t		 envelope_len;
};

/* Shapes and bounds only: the envelope is decoded and verified by
 * approval_ctl.c (approval_envelope_from_b64, approval_verify). */
enum decode_verdict decode_approval(uint32_t type, struct json_object *body,
	    struct approval_msg *, struct decode_err *);

/*
 * What vmproxy sends unasked, one message type per event (proto/ipcmsg.h,
 * 612-617).  vmproxy speaks for the guest.
 */
struct vmproxy_msg {
	uint32_t		 type;
	struct json_object	*guest;		/* GUEST_HELLO: object or NULL */
	int			 open;		/* STREAMS: 0..max_streams */
	int			 pipes;		/* STREAMS: attached broker
						 * pipes, 0..DECODE_MAX_PIPES */
	enum vmq_event		 qmp_event;	/* QMP_EVENT */
	const char		*message;	/* QMP_LOST: vmq_clean;
						 * GUEST_ERROR: any, or NULL */
};

/*
 * Each type has a decoder of its own, picked by type; a type that is not
 * one of the six is DECODE_BAD.  max_streams bounds STREAMS' "open".
 */
enum decode_verdict decode_vmproxy(uint32_t type, struct json_object *body,
	    int max_streams, struct vmproxy_msg *, struct decode_err *);

/*
 * vmproxy's answer to an IPC_PROXY_QMP request for op (vmqmp.h): every
 * member checked against what op can give, strings printable and short.
 */
enum decode_verdict decode_proxy_qmp_result(enum vmq_op op,
	    struct json_object *body, struct vmq_result *,
	    struct decode_err *);

#endif
