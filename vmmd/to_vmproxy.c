/*
 * vmmd's side of its conversation with each VM's vmproxy: starting it as
 * the VM's uid inside the VM's cgroup, calling it, and noticing when it
 * ends.  Named to_vmproxy.c so that no one takes it for the process
 * itself, which lives in ../vmproxy/ (its functions keep the proxy_
 * prefix the rest of vmmd calls).  vmproxy is the only
 * process that reads guest bytes, and the only one that speaks QMP to
 * QEMU or reads QEMU's output; what it sends here is still checked (every
 * tool result against its schema, in vmmd.c; every QEMU result and event
 * by decode.c).  Each VM's vm->mon is the QEMU backend's way to vmproxy's
 * QMP client.
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "decode.h"
#include "ipc.h"
#include "log.h"
#include "spawn.h"
#include "vmmd_shared.h"

/* Where vmproxy's events go: into the VM state machine, as vm_init.c
 * registered. */
static struct proxy_reports reports;

void
proxy_set_reports(const struct proxy_reports *r)
{
	reports = *r;
}

void
proxy_console_close(struct vm *vm)
{
	if (vm->console_rd != -1) {
		close(vm->console_rd);
		vm->console_rd = -1;
	}
	if (vm->qemulog_rd != -1) {
		close(vm->qemulog_rd);
		vm->qemulog_rd = -1;
	}
}

struct pcall;

struct proxy {
	struct vm	*vm;
	TAILQ_HEAD(, pcall) calls;	/* out at vmproxy, unanswered */
	struct ipc_conn	*conn;
	pid_t		 pid;
	int		 pidfd;
	struct event	*pidev;
	int		 guest_fault;	/* it reported a guest_error */
	int		 stopping;	/* proxy_stop: calls out fail now */
};

struct pcall {
	TAILQ_ENTRY(pcall) entry;
	struct proxy	*p;
	struct vm	*vm;
	proxy_cb	 cb;	/* NULL: forgotten, its answer is dropped */
	void		*arg;
};

/* A QEMU operation out at vmproxy. */
struct qcall {
	struct proxy	*p;
	enum vmq_op	 op;
	vmm_mon_cb	 cb;
	void		*arg;
};

/* vmproxy's QMP is gone with it: the backend hears so. */
static void
proxy_mon_lost(struct vm *vm, const char *why)
{
	if (vm != NULL && vm->mon.owner != NULL && vm->mon.lost != NULL)
		vm->mon.lost(vm->mon.owner, why);
}

static void
qcall_reply(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct qcall *qc = arg;
	struct proxy *p = qc->p;
	struct vmq_result res;
	struct decode_err de;
	struct json_object *e, *v;

	memset(&res, 0, sizeof(res));
	if (m == NULL) {
		res.err = VMQE_DISCONNECTED;
		snprintf(res.msg, sizeof(res.msg), "%s", p->stopping ?
		    "vmproxy stopped" : "vmproxy did not answer");
	} else if (m->type == IPC_ERROR) {
		res.err = VMQE_UNAVAILABLE;
		snprintf(res.msg, sizeof(res.msg), "vmproxy refused it");
		if (json_object_object_get_ex(m->body, "error", &e) &&
		    json_object_object_get_ex(e, "message", &v) &&
		    json_object_is_type(v, json_type_string) &&
		    vmq_clean(json_object_get_string(v)))
			snprintf(res.msg, sizeof(res.msg), "%s",
			    json_object_get_string(v));
	} else if (decode_proxy_qmp_result(qc->op, m->body, &res, &de) !=
	    DECODE_OK) {
		/* Out of protocol: the VM fails and its vmproxy goes.  The
		 * backend hears of it after, with its qvm gone or going. */
		log_warnx("vm %s: vmproxy sent a malformed QEMU result: %s",
		    p->vm != NULL ? p->vm->rec.id : "?", de.msg);
		memset(&res, 0, sizeof(res));
		res.err = VMQE_DISCONNECTED;
		snprintf(res.msg, sizeof(res.msg), "vmproxy broke the "
		    "protocol");
		if (p->vm != NULL)
			reports.event(p->vm, VM_EV_FAIL,
			    "vmproxy broke the protocol");
		else
			ipc_conn_free(conn);
	}
	qc->cb(&res, qc->arg);
	free(qc);
}

/* vm->mon.call: one QEMU operation through the VM's vmproxy. */
static int
proxy_mon_call(struct vmm_monitor *mon, enum vmq_op op, int fd,
    int timeout_ms, vmm_mon_cb cb, void *arg)
{
	struct vm *vm = (struct vm *)((char *)mon - offsetof(struct vm, mon));
	struct json_object *body;
	struct qcall *qc;
	int dfd = -1, rc;

	if (vm->proxy == NULL || vm->proxy->conn == NULL) {
		errno = ENOTCONN;
		return -1;
	}
	/* The IPC layer consumes what it sends; the caller keeps its own. */
	if (fd != -1 && (dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) == -1)
		return -1;
	if ((qc = calloc(1, sizeof(*qc))) == NULL)
		fatal("calloc");
	qc->p = vm->proxy;
	qc->op = op;
	qc->cb = cb;
	qc->arg = arg;
	body = json_object_new_object();
	json_object_object_add(body, "op",
	    json_object_new_string(vmq_op_names[op]));
	json_object_object_add(body, "timeout_ms",
	    json_object_new_int(timeout_ms));
	/* vmproxy times QEMU out itself; this is the backstop. */
	rc = ipc_request_want(vm->proxy->conn, IPC_PROXY_QMP, body, dfd,
	    timeout_ms + 10000, IPC_PROXY_QMP_RESULT, qcall_reply, qc);
	json_object_put(body);
	if (rc == -1)
		free(qc);
	return rc;
}

void
proxy_mon_init(struct vm *vm)
{
	memset(&vm->mon, 0, sizeof(vm->mon));
	vm->mon.call = proxy_mon_call;
}

static void
proxy_reply(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct pcall *pc = arg;
	struct json_object *res = NULL, *e, *v;
	const char *code = NULL, *msg = NULL;
	int fd = -1;

	if (m == NULL) {
		code = "unavailable";
		msg = pc->p->stopping ? "the VM stopped before the guest "
		    "answered" : "the guest did not answer in time";
	} else if (m->type == IPC_ERROR) {
		code = "internal";
		msg = "vmproxy failed";
		if (json_object_object_get_ex(m->body, "error", &e)) {
			if (json_object_object_get_ex(e, "code", &v) &&
			    json_object_is_type(v, json_type_string))
				code = json_object_get_string(v);
			if (json_object_object_get_ex(e, "message", &v) &&
			    json_object_is_type(v, json_type_string))
				msg = json_object_get_string(v);
		}
	} else if (m->type == IPC_PROXY_STREAM_OPEN_RESULT ||
	    m->type == IPC_PROXY_BROKER_ATTACH_RESULT) {
		/* {"channel": n} itself, with the stream's descriptor. */
		res = json_object_get(m->body);
		fd = m->fd;
		m->fd = -1;
	} else {
		if (!json_object_object_get_ex(m->body, "result", &res) ||
		    !json_object_is_type(res, json_type_object))
			res = json_object_new_object();
		else
			json_object_get(res);
		fd = m->fd;
		m->fd = -1;
	}
	TAILQ_REMOVE(&pc->p->calls, pc, entry);
	/* Past proxy_stop (which fails every call first) no one is left. */
	if (pc->cb != NULL && pc->p->vm != NULL)
		pc->cb(pc->vm, res, code, msg, fd, pc->arg);
	else if (fd != -1)
		close(fd);
	json_object_put(res);
	free(pc);
}

/* A request to vmproxy answered by want; body stays the caller's. */
static int
pcall_request(struct vm *vm, uint32_t type, struct json_object *body,
    int timeout_ms, uint32_t want, proxy_cb cb, void *arg)
{
	struct pcall *pc;

	if (vm->proxy == NULL || vm->proxy->conn == NULL) {
		errno = ENOTCONN;
		return -1;
	}
	if ((pc = calloc(1, sizeof(*pc))) == NULL)
		fatal("calloc");
	pc->p = vm->proxy;
	pc->vm = vm;
	pc->cb = cb;
	pc->arg = arg;
	if (ipc_request_want(vm->proxy->conn, type, body, -1, timeout_ms,
	    want, proxy_reply, pc) == -1) {
		free(pc);
		return -1;
	}
	TAILQ_INSERT_TAIL(&vm->proxy->calls, pc, entry);
	return 0;
}

int
proxy_redirect(struct vm *vm, void *arg, proxy_cb cb, void *newarg)
{
	struct pcall *pc;
	int n = 0;

	if (vm->proxy == NULL)
		return 0;
	TAILQ_FOREACH(pc, &vm->proxy->calls, entry)
		if (pc->arg == arg && pc->cb != NULL) {
			pc->cb = cb;
			pc->arg = newarg;
			n++;
		}
	return n;
}

int
proxy_forget(struct vm *vm, void *arg)
{
	return proxy_redirect(vm, arg, NULL, NULL);
}

int
proxy_call(struct vm *vm, struct json_object *call, int timeout_ms,
    proxy_cb cb, void *arg)
{
	return pcall_request(vm, IPC_PROXY_CALL, call, timeout_ms,
	    IPC_PROXY_RESULT, cb, arg);
}

/* A request to vmproxy that answers with want and a descriptor; body is
 * consumed. */
static int
pcall_fd_request(struct vm *vm, uint32_t type, struct json_object *body,
    uint32_t want, proxy_cb cb, void *arg)
{
	int rc = pcall_request(vm, type, body, 10000, want, cb, arg);

	json_object_put(body);
	return rc;
}

int
proxy_stream_open(struct vm *vm, int port, proxy_cb cb, void *arg)
{
	struct json_object *body = json_object_new_object();

	json_object_object_add(body, "port", json_object_new_int(port));
	return pcall_fd_request(vm, IPC_PROXY_STREAM_OPEN, body,
	    IPC_PROXY_STREAM_OPEN_RESULT, cb, arg);
}

void
proxy_broker_route(struct vm *vm, struct json_object *body)
{
	if (vm->proxy != NULL && vm->proxy->conn != NULL)
		ipc_send(vm->proxy->conn, IPC_PROXY_BROKER_ROUTE, 0, body, -1);
}

void
proxy_broker_limits(struct vm *vm, struct json_object *body)
{
	if (vm->proxy != NULL && vm->proxy->conn != NULL)
		ipc_send(vm->proxy->conn, IPC_PROXY_BROKER_LIMITS, 0, body, -1);
}

int
proxy_broker_attach(struct vm *vm, const char *job_id, proxy_cb cb,
    void *arg)
{
	struct json_object *body = json_object_new_object();

	json_object_object_add(body, "job_id", json_object_new_string(job_id));
	return pcall_fd_request(vm, IPC_PROXY_BROKER_ATTACH, body,
	    IPC_PROXY_BROKER_ATTACH_RESULT, cb, arg);
}

/* A guest error ends vmproxy (exit 3): the VM fails when it exits. */
static void
on_guest_error(struct proxy *p, const struct vmproxy_msg *m)
{
	p->guest_fault = 1;
}

static void
on_guest_hello(struct proxy *p, const struct vmproxy_msg *m)
{
	if (p->vm != NULL)
		reports.event(p->vm, VM_EV_HELLO, NULL);
}

static void
on_link_down(struct proxy *p, const struct vmproxy_msg *m)
{
	if (p->vm != NULL)
		reports.event(p->vm, VM_EV_LINK_DOWN, NULL);
}

static void
on_streams(struct proxy *p, const struct vmproxy_msg *m)
{
	if (p->vm == NULL)
		return;
	reports.streams(p->vm, m->open, m->pipes);
}

static void
on_qmp_event(struct proxy *p, const struct vmproxy_msg *m)
{
	if (p->vm != NULL && p->vm->mon.owner != NULL &&
	    p->vm->mon.event != NULL)
		p->vm->mon.event(p->vm->mon.owner, m->qmp_event);
}

static void
on_qmp_lost(struct proxy *p, const struct vmproxy_msg *m)
{
	if (p->vm != NULL)
		proxy_mon_lost(p->vm, m->message);
}

/*
 * What vmproxy may send unasked, one line per message type: decoded by
 * decode_vmproxy (decode.c) before its handler runs.  Its replies go to
 * the request that asked for them (ipc_request_want), never here.
 */
static const struct {
	uint32_t	 type;
	void		(*handle)(struct proxy *, const struct vmproxy_msg *);
} vmproxy_msgs[] = {
	{ IPC_PROXY_GUEST_HELLO, on_guest_hello },
	{ IPC_PROXY_LINK_DOWN, on_link_down },
	{ IPC_PROXY_STREAMS, on_streams },
	{ IPC_PROXY_GUEST_ERROR, on_guest_error },
	{ IPC_PROXY_QMP_EVENT, on_qmp_event },
	{ IPC_PROXY_QMP_LOST, on_qmp_lost },
};
#define NVMPROXY_MSGS	(sizeof(vmproxy_msgs) / sizeof(vmproxy_msgs[0]))

static void
vmmd_dispatch_vmproxy(struct ipc_conn *conn, struct ipc_msg *msg, void *arg)
{
	struct proxy *p = arg;
	struct vmproxy_msg m;
	struct decode_err de;
	size_t i;

	for (i = 0; i < NVMPROXY_MSGS; i++)
		if (vmproxy_msgs[i].type == msg->type)
			break;
	if (i == NVMPROXY_MSGS || decode_vmproxy(msg->type, msg->body,
	    (int)vmmd_conf()->vmmd.max_streams_per_vm, &m, &de) != DECODE_OK) {
		/* A proxy out of protocol is one the guest has taken over:
		 * its VM fails, and the connection goes with it. */
		if (i == NVMPROXY_MSGS)
			snprintf(de.msg, sizeof(de.msg), "type %u unasked",
			    msg->type);
		log_warnx("vm %s: vmproxy sent a malformed event: %s",
		    p->vm != NULL ? p->vm->rec.id : "?", de.msg);
		if (p->vm != NULL)
			reports.event(p->vm, VM_EV_FAIL,
			    "vmproxy broke the protocol");
		else
			ipc_conn_free(conn);
		return;
	}
	vmproxy_msgs[i].handle(p, &m);
}

static void
vmmd_closed_vmproxy(struct ipc_conn *conn, void *arg)
{
	struct proxy *p = arg;

	p->conn = NULL;
	if (p->vm != NULL && p->vm->proxy == p)
		proxy_mon_lost(p->vm, "the connection to vmproxy closed");
}

static const struct ipc_rule proxy_rules[] = {
	{ IPC_PROXY_RESULT, 0 },
	{ IPC_PROXY_QMP_RESULT, 0 },
	{ IPC_PROXY_STREAM_OPEN_RESULT, IPC_RULE_FD },
	{ IPC_PROXY_BROKER_ATTACH_RESULT, IPC_RULE_FD },
	{ IPC_ERROR, 0 },
	/* Unasked, each of vmproxy_msgs[] on its own line. */
	{ IPC_PROXY_GUEST_HELLO, 0 },
	{ IPC_PROXY_LINK_DOWN, 0 },
	{ IPC_PROXY_STREAMS, 0 },
	{ IPC_PROXY_GUEST_ERROR, 0 },
	{ IPC_PROXY_QMP_EVENT, 0 },
	{ IPC_PROXY_QMP_LOST, 0 },
};
static const struct ipc_policy proxy_policy = {
	"vmproxy", proxy_rules, sizeof(proxy_rules) / sizeof(proxy_rules[0])
};
static const struct ipc_handlers proxy_handlers = {
	vmmd_dispatch_vmproxy, vmmd_closed_vmproxy
};

static void
proxy_free(struct proxy *p)
{
	if (p->conn != NULL)
		ipc_conn_free(p->conn);
	if (p->pidev != NULL)
		event_free(p->pidev);
	if (p->pidfd != -1)
		close(p->pidfd);
	free(p);
}

static void
proxy_exit_cb(int fd, short ev, void *arg)
{
	struct proxy *p = arg;
	struct vm *vm = p->vm;
	int st = 0, fault;

	if (waitpid(p->pid, &st, WNOHANG) <= 0)
		return;
	/* Exit status 3: the guest broke the link protocol. */
	fault = p->guest_fault || (WIFEXITED(st) && WEXITSTATUS(st) == 3);
	/* proxy_stop's own SIGKILL is no news; any other signal is. */
	if (WIFSIGNALED(st) && p->stopping && WTERMSIG(st) == SIGKILL)
		log_debug("vmproxy %d: stopped", (int)p->pid);
	else if (WIFSIGNALED(st))
		log_warnx("vm %s: vmproxy killed by signal %d",
		    vm != NULL ? vm->rec.id : "?", WTERMSIG(st));
	if (vm != NULL && vm->proxy == p) {
		vm->proxy = NULL;
		proxy_free(p);
		proxy_mon_lost(vm, "vmproxy exited");
		/* A guest that broke the protocol fails its VM. */
		reports.event(vm, fault ? VM_EV_FAIL : VM_EV_PROXY_EXIT, fault ?
		    "the guest broke the link protocol" : "vmproxy exited");
		return;
	}
	proxy_free(p);
}

int
proxy_spawn(struct vm *vm, char *err, size_t errlen)
{
	struct spawn_fd fds[3];
	struct spawn_req r;
	struct proxy *p;
	char link[PATH_MAX], console[PATH_MAX], conmax[24];
	char qmp[PATH_MAX], qlog[PATH_MAX], qlogfd[16], qlogmax[24];
	char *argv[28];
	int sp[2], i = 0;
	size_t nfds = 0;
	pid_t pid;

	if ((size_t)snprintf(link, sizeof(link), "%s/%s", vm->rundir,
	    VMM_LINK_SOCK) >= sizeof(link)) {
		snprintf(err, errlen, "run_dir path too long");
		return -1;
	}
	if ((size_t)snprintf(console, sizeof(console), "%s/%s", vm->rundir,
	    VMM_CONSOLE_LOG) >= sizeof(console)) {
		snprintf(err, errlen, "run_dir path too long");
		return -1;
	}
	if ((size_t)snprintf(qmp, sizeof(qmp), "%s/%s", vm->rundir,
	    VMM_QMP_SOCK) >= sizeof(qmp) ||
	    (size_t)snprintf(qlog, sizeof(qlog), "%s/%s", vm->rundir,
	    VMM_STDERR_LOG) >= sizeof(qlog)) {
		snprintf(err, errlen, "run_dir path too long");
		return -1;
	}
	snprintf(conmax, sizeof(conmax), "%lld",
	    vmmd_conf()->vmmd.console_log_kib * 1024);
	snprintf(qlogmax, sizeof(qlogmax), "%lld",
	    vmmd_conf()->vmmd.qemu_log_kib * 1024);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == -1) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return -1;
	}
	argv[i++] = "vmproxy";
	if (vmmd_foreground())
		argv[i++] = "-d";
	if (vmmd_verbose())
		argv[i++] = "-v";
	argv[i++] = "--ipc-fd";
	argv[i++] = "3";
	argv[i++] = "--link";
	argv[i++] = link;
	argv[i++] = "--vm";
	argv[i++] = vm->rec.id;
	/* vmmd's end of the IPC socketpair as fd 3, QEMU's console pipe,
	 * when there is one, as fd 4, then QEMU's stdout/stderr pipe. */
	fds[nfds++] = (struct spawn_fd){ sp[1], 3 };
	if (vm->console_rd != -1) {
		fds[nfds++] = (struct spawn_fd){ vm->console_rd, 4 };
		argv[i++] = "--console-fd";
		argv[i++] = "4";
		argv[i++] = "--console";
		argv[i++] = console;
		argv[i++] = "--console-max";
		argv[i++] = conmax;
	}
	argv[i++] = "--qmp";
	argv[i++] = qmp;
	if (vm->qemulog_rd != -1) {
		int at = 3 + (int)nfds;

		fds[nfds++] = (struct spawn_fd){ vm->qemulog_rd, at };
		snprintf(qlogfd, sizeof(qlogfd), "%d", at);
		argv[i++] = "--qemu-log-fd";
		argv[i++] = qlogfd;
		argv[i++] = "--qemu-log";
		argv[i++] = qlog;
		argv[i++] = "--qemu-log-max";
		argv[i++] = qlogmax;
	}
	argv[i] = NULL;
	/*
	 * Its own session (a Ctrl-C meant for vmmd's terminal must not
	 * reach it, or the VM would fail instead of hibernating), the VM's
	 * cgroup and uid, gone with vmmd (SIGTERM), stderr vmmd's only in
	 * the foreground.
	 */
	memset(&r, 0, sizeof(r));
	r.kind = SPAWN_VMPROXY;
	r.slot = (unsigned)vm->rec.slot;
	r.vm = vm->rec.id;	/* its jail: this VM's directories alone */
	r.cgroup = vmmd_cg()->layout != CG_LAYOUT_NONE;
	r.keep_stderr = vmmd_foreground();
	r.kvm_gid = (gid_t)-1;
	r.argv = argv;
	r.fds = fds;
	r.nfds = nfds;
	if ((pid = spawn_run(&r, err, errlen)) == -1) {
		close(sp[0]);
		close(sp[1]);
		return -1;
	}
	close(sp[1]);
	/* vmproxy has the console and log pipes now. */
	proxy_console_close(vm);
	if ((p = calloc(1, sizeof(*p))) == NULL)
		fatal("calloc");
	TAILQ_INIT(&p->calls);
	p->vm = vm;
	p->pid = pid;
	p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (p->pidfd == -1 || (p->pidev = event_new(vmmd_base(), p->pidfd,
	    EV_READ | EV_PERSIST, proxy_exit_cb, p)) == NULL ||
	    event_add(p->pidev, NULL) == -1) {
		snprintf(err, errlen, "pidfd: %s", strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(sp[0]);
		if (p->pidfd != -1)
			close(p->pidfd);
		free(p);
		return -1;
	}
	if ((p->conn = ipc_conn_new(vmmd_base(), sp[0], "vmmd", &proxy_policy,
	    &proxy_handlers, p)) == NULL) {
		snprintf(err, errlen, "ipc: %s", strerror(errno));
		close(sp[0]);
		kill(pid, SIGKILL);
		/* The exit callback reaps and frees it. */
		p->vm = NULL;
		return -1;
	}
	vm->proxy = p;
	return 0;
}

/*
 * Ends the proxy: it exits when its connection to us closes.  Every guest
 * call still out fails first, while its VM is still there to hear it: a
 * request waiting for the guest is answered, never dropped.
 */
void
proxy_stop(struct vm *vm)
{
	struct proxy *p = vm->proxy;

	if (p == NULL)
		return;
	/* First: a callback below that calls in again finds no proxy. */
	vm->proxy = NULL;
	p->stopping = 1;
	proxy_mon_lost(vm, "vmproxy stopped");
	if (p->conn != NULL) {
		ipc_conn_cancel_requests(p->conn);
		ipc_conn_free(p->conn);
		p->conn = NULL;
	}
	p->vm = NULL;
	/* Belt and braces: it must not outlive its VM. */
	kill(p->pid, SIGKILL);
}
