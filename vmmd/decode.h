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
};

enum decode_verdict decode_vmctl(uint32_t type, struct json_object *body,
	    struct vmctl_msg *, struct decode_err *);

/* vmproxy's events (IPC_PROXY_EVENT).  vmproxy speaks for the guest. */
enum proxy_event_kind {
	PROXY_EV_HELLO,		/* the guest said hello */
	PROXY_EV_LINK_DOWN,
	PROXY_EV_STREAMS,	/* open: how many streams are open */
	PROXY_EV_GUEST_ERROR,	/* the guest broke the link protocol */
	PROXY_EV_QMP,		/* a QEMU event: qmp_event */
	PROXY_EV_QMP_LOST,	/* vmproxy's QMP connection ended: message */
};

struct proxy_event {
	enum proxy_event_kind	 kind;
	int			 open;		/* STREAMS: 0..max_streams */
	int			 pipes;		/* STREAMS: attached broker
						 * pipes, 0..DECODE_MAX_PIPES */
	struct json_object	*guest;		/* HELLO: an object or NULL */
	enum vmq_event		 qmp_event;	/* QMP */
	const char		*message;	/* QMP_LOST: vmq_clean */
};

enum decode_verdict decode_proxy_event(struct json_object *body,
	    int max_streams, struct proxy_event *, struct decode_err *);

/*
 * vmproxy's answer to an IPC_PROXY_QMP request for op (vmqmp.h): every
 * member checked against what op can give, strings printable and short.
 */
enum decode_verdict decode_proxy_qmp_result(enum vmq_op op,
	    struct json_object *body, struct vmq_result *,
	    struct decode_err *);

#endif
