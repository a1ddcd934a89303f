/*
 * vmmd: the root VM manager.  What the daemon's parts share: struct vm and
 * the declarations of vm.c with vm_boot.c and vm_suspend.c (the
 * lifecycle's work, under the state machine of vm_fsm.h), to_vmproxy.c
 * (each VM's vmproxy), tools.c with tools_vm.c and tools_job.c (the
 * tools), stream.c, run.c and control.c (vmctl); with env.h (what the
 * process holds) and request.h (a request and its answer).  vmmd.c is
 * main: startup, sockets, authd.
 */
#ifndef MCPVM_VMMD_VMMD_SHARED_H
#define MCPVM_VMMD_VMMD_SHARED_H

#include <sys/queue.h>
#include <sys/types.h>

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include "backend.h"
#include "cgroup.h"
#include "ipc.h"
#include "netclient.h"
#include "conf.h"
#include "env.h"
#include "request.h"
#include "decode.h"
#include "store.h"
#include "util.h"
#include "vm_fsm.h"

/* glibc's sys/queue.h lacks the BSD _SAFE iterators. */
#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

/*
 * How long vmmd waits for vmproxy's answer to one guest call before it
 * fails the call: a tool's (exec, job output, file I/O of up to 16 MiB,
 * vm_run's steps), and the lifecycle's own (the clock, freeze, thaw, the
 * idle probe), which a healthy guest answers at once; one that does not
 * fails its hibernation or resume in half the time.
 */
#define GUEST_TOOL_CALL_MS	60000
#define GUEST_CTL_CALL_MS	30000

/*
 * The warm pool's VMs and snapshots (warmpool.c) belong to this
 * workspace, which no credential can name (authd's workspace ids are
 * [a-z0-9-]): no workspace lists them, vmctl does.  Admission, snapshots
 * and boots tell the pool apart here, without depending on the pool,
 * which depends on all three.
 */
#define POOL_WORKSPACE	"@warm-pool"

static inline int
warmpool_is_pool(const char *workspace)
{
	return strcmp(workspace, POOL_WORKSPACE) == 0;
}

struct audit;
struct event;
struct event_base;
struct ipc_conn;
struct ipc_server;
struct qemu_backend;
struct vmm;
struct worker_pool;
struct vm;

struct proxy;
struct broker_vm;

/* A stream handed to mcpd: closed by name when the VM suspends or goes. */
struct vm_stream {
	TAILQ_ENTRY(vm_stream)	 entry;
	char			 id[64];
	struct ipc_conn		*conn;	/* NULL once mcpd's connection ended */
};

struct vm {
	TAILQ_ENTRY(vm)		 entry;
	/* rec.state is written by vm_fsm_fire alone. */
	struct vm_record	 rec;
	uid_t			 uid;
	gid_t			 gid;
	char			 dir[PATH_MAX];		/* disk, kernel, cp */
	char			 rundir[PATH_MAX];	/* sockets, logs */
	const struct conf_image	*image;		/* NULL if unconfigured now */
	struct vmm		*vmm;		/* NULL: no VMM process */
	struct proxy		*proxy;		/* NULL: no vmproxy */
	/* The read end of QEMU's console pipe, until vmproxy has it. */
	int			 console_rd;
	/* The read end of QEMU's stdout/stderr pipe, until vmproxy has it. */
	int			 qemulog_rd;
	/* QEMU's monitor, through vmproxy (to_vmproxy.c): the backend's. */
	struct vmm_monitor	 mon;
	int			 guest_up;	/* hello since (re)connect */
	/* Created from a memory snapshot: its first hello thaws. */
	int			 restored;
	/* Its snapshot's check is still out: QEMU waits to read the file. */
	int			 hold_restore;
	/* Its network as netd gave it at this boot (net.mac "": none): a
	 * clone's identity op carries it. */
	struct net_lease	 net;
	/* Its last boot failed because netd gave it no network. */
	int			 net_refused;
	/* The operation, its step and op_seq are vm_fsm.c's to write. */
	int			 busy;		/* a lifecycle op runs */
	int			 adopted;	/* its QEMU outlived the last
						 * vmmd and was taken up */
	int			 adopt_thaw;	/* to thaw at its guest's hello */
	/*
	 * Disk jobs on the worker pool that will call back with this VM.  A
	 * VM is freed only once none is out (vm.c, vm_discard), so a worker
	 * finishing after a destroy finds the VM, not freed memory.
	 */
	int			 io_pending;
	/* Run once io_pending is back to 0 (a resume waits for the
	 * cleanup of the cgroup it is about to make again). */
	void			(*io_then)(struct vm *);
	int			 doomed;	/* torn down once io_pending is 0 */
	int			 discarded;	/* gone: off vm_all(), freed
						 * soon */
	/* Bumped whenever an operation starts or ends: a callback of an
	 * operation that was cancelled sees that it is stale. */
	unsigned		 op_seq;
	long long		 last_active;	/* monotonic seconds */
	int			 open_streams;	/* as vmproxy counts them */
	int			 opening_streams; /* asked for, not yet open */
	/* vm_list's entry for it as checked text, and the state it is for */
	struct json_object	*listed;
	enum vm_state		 listed_state;
	TAILQ_HEAD(, vm_stream)	 streams;	/* handed out, maybe closed */
	struct broker_vm	*broker;	/* job broker pipes, or NULL */
	struct event		*idle_timer;
	struct event		*boot_timer;
	struct event		*link_timer;	/* link down: its bound */
	TAILQ_HEAD(, vm_waiter)	 waits;		/* want it running, or gone */
	/* The lifecycle operation in progress. */
	vm_done_cb		 op_cb;
	void			*op_arg;
	enum vm_op_step		 op_step;	/* where a boot or probe is */
	int			 op_pause;	/* suspend: pause, not hibernate */
	char			 op_err[256];
	const char		*op_code;
};



/* vm.c, vm_boot.c, vm_suspend.c */
/* vmmd's VMs, in the order they were made or taken up (vm.c). */
TAILQ_HEAD(vm_head, vm);
/* egress_push.c: what netd is to enforce for vm now (an empty allowlist
 * when its workspace's network went off), and authd's pushed policies. */
const struct egress *vm_egress_now(const struct vm *);
void	egress_policy_pushed(const char *ws, struct json_object *policy,
	    void *arg);
/* vmmd.c: authd's policy object, decoded and bounded. */
int	policy_from_json(struct json_object *, struct policy *, char *err,
	    size_t errlen);
struct vm_head *vm_all(void);
void	vm_init_all(void);
struct vm *vm_find(const char *id);
struct vm *vm_find_owned(const char *id, const char *workspace);
void	vm_create(struct request *, const struct conf_image *, int vcpus,
	    int memory_mib, int network, int idle_seconds, int idle_pause,
	    vm_done_cb, void *);
/* vm_create on a snapshot's disk (and memory, restored, if it has it). */
void	vm_create_snap(struct request *, const struct conf_image *,
	    const struct snap_record *, int vcpus, int memory_mib,
	    int network, int idle_seconds, int idle_pause, vm_done_cb, void *);
void	vm_suspend(struct vm *, int pause, vm_done_cb, void *);
void	vm_destroy(struct vm *, vm_done_cb, void *);
void	vm_touch(struct vm *);
void	vm_fail(struct vm *, const char *why);
void	vm_hibernate_all(void);
int	vm_work_pending(void);
struct json_object *vm_summary(const struct vm *);
/*
 * vm_summary as vm_list lists it: text checked against vm_list's schema
 * once per state (the summary changes only with the state), so listing
 * ten VMs does not build, check and write ten objects each time.  *checked
 * is cleared when it could not be checked and is the plain object.
 */
struct json_object *vm_list_entry(struct vm *, int *checked);
void	vm_stream_add(struct vm *, const char *id, struct ipc_conn *);
void	vm_streams_close(struct vm *, const char *reason);
/* vmproxy's count of open streams, and whether broker pipes are attached
 * (they keep the streams' names too). */
void	vm_streams_count(struct vm *, int open, int pipes);
void	vm_streams_forget_conn(struct ipc_conn *);

/* to_vmproxy.c */
/* What vmproxy reports, and to whom: its events into the VM state
 * machine, its counts of open streams and broker pipes (vm_init.c
 * registers both). */
struct proxy_reports {
	void	(*event)(struct vm *, enum vm_event, const char *why);
	void	(*streams)(struct vm *, int open, int pipes);
};
void	proxy_set_reports(const struct proxy_reports *);
int	proxy_spawn(struct vm *, char *err, size_t errlen);
/* Closes vmmd's read ends of the console and QEMU log pipes, once vmproxy
 * has them. */
void	proxy_console_close(struct vm *);
void	proxy_stop(struct vm *);
/* Makes vm->mon reach QEMU's QMP through the VM's vmproxy. */
void	proxy_mon_init(struct vm *);
typedef void (*proxy_cb)(struct vm *, struct json_object *result,
	    const char *code, const char *message, int fd, void *arg);
int	proxy_call(struct vm *, struct json_object *call, int timeout_ms,
	    proxy_cb, void *);
int	proxy_stream_open(struct vm *, int port, proxy_cb, void *);
/*
 * The calls out at vm's vmproxy for arg are forgotten: their answers,
 * when they come, are dropped and no callback runs.  How many there were.
 */
int	proxy_forget(struct vm *, void *arg);
/* Their answers go to cb with newarg instead; how many there were. */
int	proxy_redirect(struct vm *, void *arg, proxy_cb, void *newarg);
/* The job broker pipe (vmmd_broker.c): a route (no reply), an attachment. */
void	proxy_broker_route(struct vm *, struct json_object *);
void	proxy_broker_limits(struct vm *, struct json_object *);
int	proxy_broker_attach(struct vm *, const char *job_id, proxy_cb, void *);

/* tools.c: the tool table (tools.h), whose tools are served by
 * tools_vm.c, tools_job.c and run.c */
int	tools_table_check(char *err, size_t errlen);
/* IPC_VM_TOOL */
void	tools_dispatch(struct request *);
/* A tool's arguments, already validated against its schema (tools.c). */
const char *req_arg_str(struct request *, const char *key, const char *def);
int64_t	req_arg_int(struct request *, const char *key, int64_t def);
int	req_arg_bool(struct request *, const char *key, int def);
struct json_object *tools_exec_call(struct request *, const char *job_id,
	    int64_t timeout_ms);
/* What vm_create and vm_run make (tools_vm.c): checked and admitted by
 * tools_create_check (0, or an error reply and -1), made by tools_create
 * from the snapshot named, the warm pool or a boot. */
struct create_args {
	const struct conf_image	*im;
	int			 has_snap;
	struct snap_record	 snap;
	int			 vcpus, memory_mib, network;
};
int	tools_create_check(struct request *, struct create_args *);
void	tools_create(struct request *, struct create_args *,
	    int idle_seconds, int idle_pause, vm_done_cb, void *);
void	tools_job_remember(struct vm *, struct json_object *status);
int	job_poll_ms(long waited_ms);

/* Retries that joined a held request: each gets a copy of its answer.
 * [vmmd] max_joined_retries bounds them, at most this. */
#define REQUEST_JOINERS	256
struct request_joiners {
	struct request	*r[REQUEST_JOINERS];
	int		 n;
};
int	joiners_add(struct request_joiners *, struct request *retry);
void	joiners_reply(struct request_joiners *, struct json_object *result);
void	joiners_error(struct request_joiners *, const char *code,
	    const char *msg);

/* stream.c: IPC_VM_STREAM_OPEN */
void	stream_open(struct request *);
/* 1 if req was a stream open out at a vmproxy, now answered as cancelled. */
int	stream_abandon(struct request *);

/* run.c: vm_run, one command in a VM of its own */
void	tool_vm_run(struct request *);
/* vm_run's task "get" or "cancel" from mcpd (decode.c): the run of a
 * request_id in the caller's workspace, under way or ended. */
void	run_task(struct request *);
void	run_shutdown(void);

/* control.c */
void	vmmd_dispatch_vmctl(struct ipc_conn *, struct ipc_msg *, void *);

/*
 * tools_vm.c: sets req->egress, the egress policy of the VMs it makes:
 * the tool's "egress" argument, which may only narrow base (forbidden
 * otherwise, naming the entry), or base.  0, or -1 with the error
 * answered.
 */
int	tools_egress(struct request *, const struct egress *base);

#endif
