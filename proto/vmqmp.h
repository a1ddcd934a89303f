/*
 * The QEMU operations vmmd asks of a VM's vmproxy, which alone speaks QMP
 * to QEMU (a QEMU the guest may have taken over), and the typed answers
 * and events it gives back (#14: root reads no byte QEMU writes).
 *
 * It lives in proto/ beside ipc.h because it is a catalogue of the wire
 * between two processes, not code of either: vmmd (vmmd/to_vmproxy.c,
 * decode.c, backend_qemu.c and qemu_*.c) and vmproxy
 * (vmproxy/vmproxy_qmp.c) both build against it, and neither directory
 * may include the other's.
 * Every field travels as one of the fixed names below or as a short
 * string of printable ASCII, and both ends check it.
 *
 * On the wire (proto/ipcmsg.h): IPC_PROXY_QMP {"op":NAME,"timeout_ms":n}
 * with the checkpoint's descriptor for "getfd"; IPC_PROXY_QMP_RESULT
 * {"ok":bool,"error":CLASS?,"message":"…"?,"status":RUNSTATE?,
 * "running":bool?,"migration":MIGSTATE?}; IPC_PROXY_QMP_EVENT
 * {"name":EVENT} and IPC_PROXY_QMP_LOST {"message":"…"}.
 */
#ifndef MCPVM_PROTO_VMQMP_H
#define MCPVM_PROTO_VMQMP_H

#include <stddef.h>

/* Longest message (QEMU's error text, last words) that travels, bytes. */
#define VMQ_MSG_MAX		200
/* Bounds of one operation's timeout, milliseconds. */
#define VMQ_TIMEOUT_MIN		1
#define VMQ_TIMEOUT_MAX		3600000
/* The name QEMU knows the checkpoint descriptor by (getfd). */
#define VMQ_CKPT_FDNAME		"mcpvm-ckpt"

/* One operation; vmproxy builds each QMP command itself. */
enum vmq_op {
	VMQ_CONNECT,		/* connect, greeting, qmp_capabilities */
	VMQ_STOP,
	VMQ_CONT,
	VMQ_QUERY_STATUS,	/* -> status, running */
	VMQ_QUERY_MIGRATE,	/* -> migration, message (error-desc) */
	VMQ_MIGRATE_PARAMS,	/* migrate-set-parameters, no throttle */
	VMQ_GETFD,		/* the checkpoint's descriptor rides along */
	VMQ_MIGRATE,		/* migrate to fd:VMQ_CKPT_FDNAME */
	VMQ_MIGRATE_INCOMING,	/* migrate-incoming from that fd */
	VMQ_MIGRATE_CANCEL,
	VMQ_QUIT,
	VMQ_LAST_WORDS,		/* -> message: QEMU's last line of output */
	VMQ_OP_COUNT
};

/* Why an operation failed. */
enum vmq_err {
	VMQE_NONE,		/* it did not */
	VMQE_QEMU,		/* QEMU refused it (its GenericError etc.) */
	VMQE_TIMEOUT,		/* QEMU did not answer in time */
	VMQE_DISCONNECTED,	/* the QMP connection is gone */
	VMQE_PROTOCOL,		/* QEMU answered out of protocol */
	VMQE_UNAVAILABLE,	/* vmproxy could not do it (no QMP yet, busy) */
	VMQE_COUNT
};

/* QEMU's RunState, as query-status names it; anything else is OTHER. */
enum vmq_run {
	VMQR_NONE,		/* not a query-status answer */
	VMQR_RUNNING,
	VMQR_PAUSED,
	VMQR_INMIGRATE,
	VMQR_POSTMIGRATE,
	VMQR_PRELAUNCH,
	VMQR_FINISH_MIGRATE,
	VMQR_SHUTDOWN,
	VMQR_SUSPENDED,
	VMQR_INTERNAL_ERROR,
	VMQR_IO_ERROR,
	VMQR_GUEST_PANICKED,
	VMQR_OTHER,
	VMQR_COUNT
};

/* A migration's status, as query-migrate names it. */
enum vmq_mig {
	VMQM_NONE,		/* no status: not started */
	VMQM_SETUP,
	VMQM_ACTIVE,
	VMQM_DEVICE,
	VMQM_COMPLETED,
	VMQM_FAILED,
	VMQM_CANCELLING,
	VMQM_CANCELLED,
	VMQM_OTHER,		/* a status of QEMU's not named here */
	VMQM_COUNT
};

/* The QEMU events vmproxy forwards; others are dropped there. */
enum vmq_event {
	VMQV_STOP,
	VMQV_RESUME,
	VMQV_SHUTDOWN,
	VMQV_MIGRATION,
	VMQV_COUNT
};

struct vmq_result {
	int		 ok;
	enum vmq_err	 err;			/* VMQE_NONE when ok */
	char		 msg[VMQ_MSG_MAX + 1];	/* printable ASCII */
	enum vmq_run	 status;		/* QUERY_STATUS */
	int		 running;		/* QUERY_STATUS */
	enum vmq_mig	 mig;			/* QUERY_MIGRATE */
};

/* NULL-terminated name lists, indexed by the enums above. */
extern const char *const vmq_op_names[];
extern const char *const vmq_err_names[];
extern const char *const vmq_run_names[];
extern const char *const vmq_mig_names[];
extern const char *const vmq_event_names[];

/* The index of s in names, or -1. */
int	vmq_lookup(const char *const *names, const char *s);
/*
 * Copies at most VMQ_MSG_MAX bytes of src into dst (VMQ_MSG_MAX + 1
 * bytes), each byte outside printable ASCII as '?'.  Returns dst.
 */
char	*vmq_sanitize(char *dst, const char *src, size_t srclen);
/* Is s at most VMQ_MSG_MAX bytes of printable ASCII? */
int	vmq_clean(const char *s);

#endif
