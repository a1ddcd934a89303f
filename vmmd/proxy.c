/*
 * vmmd's side of each VM's vmproxy: starting it as the VM's uid inside the
 * VM's cgroup, calling it, and noticing when it ends.  vmproxy is the only
 * process that reads guest bytes; what it sends here is still checked
 * (every tool result against its schema, in vmmd.c).
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "broker.h"
#include "decode.h"
#include "ipc.h"
#include "log.h"
#include "vmmd.h"

struct proxy {
	struct vm	*vm;
	struct ipc_conn	*conn;
	pid_t		 pid;
	int		 pidfd;
	struct event	*pidev;
	int		 guest_fault;	/* it reported a guest_error */
	int		 stopping;	/* proxy_stop: calls out fail now */
};

struct pcall {
	struct proxy	*p;
	struct vm	*vm;
	proxy_cb	 cb;
	void		*arg;
};

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
	/* Past proxy_stop (which fails every call first) no one is left. */
	if (pc->cb != NULL && pc->p->vm != NULL)
		pc->cb(pc->vm, res, code, msg, fd, pc->arg);
	else if (fd != -1)
		close(fd);
	json_object_put(res);
	free(pc);
}

int
proxy_call(struct vm *vm, struct json_object *call, int timeout_ms,
    proxy_cb cb, void *arg)
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
	if (ipc_request_want(vm->proxy->conn, IPC_PROXY_CALL, call, -1,
	    timeout_ms, IPC_PROXY_RESULT, proxy_reply, pc) == -1) {
		free(pc);
		return -1;
	}
	return 0;
}

int
proxy_stream_open(struct vm *vm, int port, proxy_cb cb, void *arg)
{
	struct json_object *body;
	struct pcall *pc;
	int rc;

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
	body = json_object_new_object();
	json_object_object_add(body, "port", json_object_new_int(port));
	rc = ipc_request_want(vm->proxy->conn, IPC_PROXY_STREAM_OPEN, body, -1,
	    10000, IPC_PROXY_STREAM_OPEN_RESULT, proxy_reply, pc);
	json_object_put(body);
	if (rc == -1)
		free(pc);
	return rc;
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
	struct json_object *body;
	struct pcall *pc;
	int rc;

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
	body = json_object_new_object();
	json_object_object_add(body, "job_id", json_object_new_string(job_id));
	rc = ipc_request_want(vm->proxy->conn, IPC_PROXY_BROKER_ATTACH, body,
	    -1, 10000, IPC_PROXY_BROKER_ATTACH_RESULT, proxy_reply, pc);
	json_object_put(body);
	if (rc == -1)
		free(pc);
	return rc;
}

static void
proxy_dispatch(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct proxy *p = arg;
	struct proxy_event ev;
	struct decode_err de;

	/* IPC_PROXY_EVENT is all the policy admits unasked for. */
	if (decode_proxy_event(m->body,
	    (int)env->conf.vmmd.max_streams_per_vm, &ev, &de) != DECODE_OK) {
		/* A proxy out of protocol is one the guest has taken over:
		 * its VM fails, and the connection goes with it. */
		log_warnx("vm %s: vmproxy sent a malformed event: %s",
		    p->vm != NULL ? p->vm->rec.id : "?", de.msg);
		if (p->vm != NULL)
			vm_fail(p->vm, "vmproxy broke the protocol");
		else
			ipc_conn_free(conn);
		return;
	}
	if (ev.kind == PROXY_EV_GUEST_ERROR) {
		p->guest_fault = 1;
		return;
	}
	if (p->vm == NULL)
		return;
	switch (ev.kind) {
	case PROXY_EV_STREAMS:
		broker_pipes_count(p->vm, ev.pipes);
		vm_streams_count(p->vm, ev.open);
		break;
	case PROXY_EV_HELLO:
		vm_guest_event(p->vm, "hello", ev.guest);
		break;
	case PROXY_EV_LINK_DOWN:
		vm_guest_event(p->vm, "link_down", NULL);
		break;
	case PROXY_EV_GUEST_ERROR:
		break;
	}
}

static void
proxy_closed(struct ipc_conn *conn, void *arg)
{
	struct proxy *p = arg;

	p->conn = NULL;
}

static const struct ipc_rule proxy_rules[] = {
	{ IPC_PROXY_RESULT, 0 },
	{ IPC_PROXY_STREAM_OPEN_RESULT, IPC_RULE_FD },
	{ IPC_PROXY_BROKER_ATTACH_RESULT, IPC_RULE_FD },
	{ IPC_PROXY_EVENT, 0 },
	{ IPC_ERROR, 0 },
};
static const struct ipc_policy proxy_policy = {
	"vmproxy", proxy_rules, sizeof(proxy_rules) / sizeof(proxy_rules[0])
};
static const struct ipc_handlers proxy_handlers = {
	proxy_dispatch, proxy_closed
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
	if (WIFSIGNALED(st))
		log_warnx("vm %s: vmproxy killed by signal %d",
		    vm != NULL ? vm->rec.id : "?", WTERMSIG(st));
	if (vm != NULL && vm->proxy == p) {
		vm->proxy = NULL;
		proxy_free(p);
		vm_proxy_gone(vm, fault);
		return;
	}
	proxy_free(p);
}

int
proxy_spawn(struct vm *vm, char *err, size_t errlen)
{
	struct cg_attach cga;
	struct proxy *p;
	char link[PATH_MAX], console[PATH_MAX], fdarg[16], conmax[24];
	int sp[2], have_cg;
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
	snprintf(conmax, sizeof(conmax), "%lld",
	    env->conf.vmmd.console_log_kib * 1024);
	have_cg = cg_attach_prepare(&env->cg, (unsigned)vm->rec.slot, &cga) ==
	    0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == -1) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(sp[0]);
		close(sp[1]);
		return -1;
	}
	if (pid == 0) {
		char *argv[16];
		int i = 0, devnull, keep = 4;

		/* Its own session: a Ctrl-C meant for vmmd's terminal must
		 * not reach it, or the VM would fail instead of hibernating. */
		if (setsid() == -1)
			_exit(119);
		/* Into the VM's cgroup and uid before anything else runs. */
		if (have_cg && cg_attach_apply(&cga) == -1)
			_exit(120);
		if (setgroups(0, NULL) == -1 ||
		    setresgid(vm->gid, vm->gid, vm->gid) == -1 ||
		    setresuid(vm->uid, vm->uid, vm->uid) == -1)
			_exit(121);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
			_exit(122);
		if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) == -1)
			_exit(123);
		if (dup2(sp[1], 3) == -1)
			_exit(124);
		/* QEMU's console pipe, when there is one, as fd 4. */
		if (vm->console_rd != -1) {
			if (dup2(vm->console_rd, 4) == -1)
				_exit(124);
			keep = 5;
		}
		if ((devnull = open("/dev/null", O_RDWR)) == -1 ||
		    dup2(devnull, 0) == -1 || dup2(devnull, 1) == -1)
			_exit(125);
		if (!env->foreground && dup2(devnull, 2) == -1)
			_exit(125);
		/* Nothing of vmmd's leaks into the proxy. */
		syscall(SYS_close_range, keep, ~0U, 0);
		snprintf(fdarg, sizeof(fdarg), "%d", 3);
		argv[i++] = "vmproxy";
		if (env->foreground)
			argv[i++] = "-d";
		if (env->verbose)
			argv[i++] = "-v";
		argv[i++] = "--ipc-fd";
		argv[i++] = fdarg;
		argv[i++] = "--link";
		argv[i++] = link;
		argv[i++] = "--vm";
		argv[i++] = vm->rec.id;
		if (keep == 5) {
			argv[i++] = "--console-fd";
			argv[i++] = "4";
			argv[i++] = "--console";
			argv[i++] = console;
			argv[i++] = "--console-max";
			argv[i++] = conmax;
		}
		argv[i] = NULL;
		execv(env->conf.vmmd.vmproxy, argv);
		_exit(127);
	}
	close(sp[1]);
	/* vmproxy has the console pipe now. */
	if (vm->console_rd != -1) {
		close(vm->console_rd);
		vm->console_rd = -1;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL)
		fatal("calloc");
	p->vm = vm;
	p->pid = pid;
	p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (p->pidfd == -1 || (p->pidev = event_new(env->base, p->pidfd,
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
	if ((p->conn = ipc_conn_new(env->base, sp[0], "vmmd", &proxy_policy,
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
	if (p->conn != NULL) {
		ipc_conn_cancel_requests(p->conn);
		ipc_conn_free(p->conn);
		p->conn = NULL;
	}
	p->vm = NULL;
	/* Belt and braces: it must not outlive its VM. */
	kill(p->pid, SIGKILL);
}
