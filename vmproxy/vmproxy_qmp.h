/*
 * vmproxy's QEMU side (#14): the QMP client (qmp.c) and QEMU's output log
 * run here, as the VM's uid under seccomp, never in root vmmd.  vmmd asks
 * for one typed operation at a time (vmqmp.h) and gets a typed, bounded
 * answer; QEMU's events go to vmmd as typed events.
 *
 * vpq_* is the operation layer, usable in-process (the backend's
 * integration test drives real QEMU through it); vmproxy_qmp_* is its
 * IPC face, one entry point per message for vmproxy's dispatch.
 */
#ifndef VMPROXY_VMPROXY_QMP_H
#define VMPROXY_VMPROXY_QMP_H

#include "vmqmp.h"

struct console;
struct event_base;
struct ipc_conn;
struct ipc_msg;
struct json_object;
struct qmp_reply;
struct vpq;

/*
 * Pure, for vmproxy and its fuzz target: QEMU's reply to op's command as
 * a typed result (only names of vmqmp.h's lists, and at most VMQ_MSG_MAX
 * bytes of printable text), and that result as vmproxy sends it.
 */
void		 vmq_from_qmp(enum vmq_op, const struct qmp_reply *,
		    struct vmq_result *);
struct json_object *vmq_result_json(const struct vmq_result *);

struct vpq_cbs {
	/* A QEMU event vmmd cares about. */
	void	(*event)(enum vmq_event, void *arg);
	/* The QMP connection ended (QEMU exited, or broke the protocol). */
	void	(*lost)(const char *why, void *arg);
};

typedef void (*vpq_cb)(const struct vmq_result *, void *arg);

/*
 * qmp_path: QEMU's QMP socket.  log (may be NULL): the bounded qemu.log
 * that QEMU's stdout and stderr drain into; vpq does not own it.
 */
struct vpq	*vpq_new(struct event_base *, const char *qmp_path,
		    struct console *log, const struct vpq_cbs *, void *arg);
/*
 * Starts op; cb runs exactly once, later (vpq_free runs the ones still
 * out, with VMQE_DISCONNECTED).  fd (VMQ_GETFD only, else -1) stays the
 * caller's and must stay open until cb.  Returns -1 (EINVAL) for an op
 * out of range or an fd where none belongs.
 */
int		 vpq_call(struct vpq *, enum vmq_op, int fd, int timeout_ms,
		    vpq_cb, void *arg);
/* QEMU's last line of output, sanitized, into buf (VMQ_MSG_MAX + 1). */
void		 vpq_last_words(struct vpq *, char *buf);
void		 vpq_free(struct vpq *);

/*
 * vmproxy: serve IPC_PROXY_QMP on conn, forwarding QEMU's events on it
 * as IPC_PROXY_QMP_EVENT and the connection's end as IPC_PROXY_QMP_LOST.
 * NULL qmp_path: this vmproxy has no QEMU to talk to, and every request
 * is answered "unavailable".
 */
int		 vmproxy_qmp_init(struct event_base *, struct ipc_conn *,
		    const char *qmp_path, struct console *log);
/* One IPC_PROXY_QMP request (its descriptor, if any, is taken). */
void		 vmproxy_qmp_request(struct ipc_conn *, struct ipc_msg *,
		    int op, int64_t timeout_ms);
void		 vmproxy_qmp_free(void);

#endif
