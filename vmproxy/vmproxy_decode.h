/*
 * vmproxy: every message vmmd may send it, decoded into a typed struct and
 * bounded before any handler runs (#14).  Pure, like vmmd's own decoders
 * (vmmd/decode.h), with the same verdicts (common/verdict.h): a body in,
 * a struct or a verdict out, so that fuzz_vmproxy_decode drives exactly
 * what the socket does.
 *
 * DECODE_BAD (a member vmproxy does not know, a wrong type) is what only
 * a broken or compromised vmmd sends: vmproxy logs it and closes the
 * connection, which ends it.  DECODE_REFUSE answers a value that is out of
 * bounds with its code and reason.
 */
#ifndef VMPROXY_VMPROXY_DECODE_H
#define VMPROXY_VMPROXY_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "guestreply.h"
#include "verdict.h"

#define VMPROXY_STRING_MAX	65536	/* exec's command, the longest */

struct vmmd_msg {
	uint32_t		 type;
	/* IPC_PROXY_CALL */
	struct guest_call	 call;		/* what the reply needs */
	struct json_object	*request;	/* for the guest, no id: owned */
	uint8_t			*body;		/* stdin or file data: owned */
	size_t			 body_len;
	/* IPC_PROXY_STREAM_OPEN */
	int			 port;		/* 1..65535 */
	/* IPC_PROXY_QMP */
	int			 qmp_op;	/* enum vmq_op */
	int64_t			 qmp_timeout_ms;
};

/* Frees what a decoder left in m (after DECODE_OK, or any verdict). */
void	vmmd_msg_clear(struct vmmd_msg *m);

/* The job broker pipe's messages: exactly their members, typed. */
enum decode_verdict vmproxy_decode_broker_route(struct json_object *body,
	    struct vmmd_msg *, struct decode_err *);
enum decode_verdict vmproxy_decode_broker_attach(struct json_object *body,
	    struct vmmd_msg *, struct decode_err *);
enum decode_verdict vmproxy_decode_broker_limits(struct json_object *body,
	    struct vmmd_msg *, struct decode_err *);
/* A QEMU operation (vmqmp.h): one of vmq_op_names and its timeout. */
enum decode_verdict vmproxy_decode_qmp(struct json_object *body,
	    struct vmmd_msg *, struct decode_err *);
enum decode_verdict vmproxy_decode_call(struct json_object *body,
	    struct vmmd_msg *, struct decode_err *);
enum decode_verdict vmproxy_decode_stream_open(struct json_object *body,
	    struct vmmd_msg *, struct decode_err *);

#endif
