/*
 * vmmd's VMs: the state machine and every lifecycle operation (create,
 * pause, hibernate, resume, destroy), admission, idle suspension and
 * crash recovery.  Each transition is written to the store before its side
 * effect and again after it.  Nothing here blocks the loop: disk work runs
 * on the worker pool, QEMU is driven through the backend's callbacks.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "disk.h"
#include "guest.h"
#include "jsonx.h"
#include "log.h"
#include "schema.h"
#include "netclient.h"
#include "vmmd.h"
#include "broker.h"
#include "worker.h"

#define CHECKPOINT	"checkpoint.bin"
#define DISK		"disk.raw"
#define KERNEL		"vmlinuz"
#define INITRD		"initrd.img"
#define QEMU_OVERHEAD_MIB	768	/* QEMU's own memory beside the guest */
#define IDLE_TICK_SECONDS	1
#define CONSOLE_PIPE_BYTES	(1024 * 1024)	/* the default pipe-max-size */

static struct event *idle_tick;

/*
 * VMs that are gone but may still be named: by a caller further up the
 * stack (a callback that ended the VM returns into code that holds it) or
 * by a disk job on the worker pool.  vm_reap frees them on a later turn of
 * the loop, each once no disk job of its own is out.
 */
static TAILQ_HEAD(, vm) dead_vms = TAILQ_HEAD_INITIALIZER(dead_vms);
static struct event *reap_ev;

static void vm_op_done(struct vm *, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void vm_wake_waiters(struct vm *);
static void vm_teardown(struct vm *);

/* ---- bookkeeping ------------------------------------------------------- */

static void
vm_set_state(struct vm *vm, enum vm_state s, const char *failure)
{
	/* Its record is already deleted; nothing may write it back. */
	if (vm->discarded)
		return;
	vm->rec.state = s;
	snprintf(vm->rec.failure, sizeof(vm->rec.failure), "%s",
	    s == VM_FAILED && failure != NULL ? failure : "");
	if (store_vm_set_state(env->store, vm->rec.id, s, failure) == -1)
		log_warnx("vm %s: state %s not recorded", vm->rec.id,
		    vm_state_name(s));
	log_debug("vm %s: %s", vm->rec.id, vm_state_name(s));
}

static struct vm *
vm_alloc(const struct vm_record *rec)
{
	struct vm *vm;

	if ((vm = calloc(1, sizeof(*vm))) == NULL)
		fatal("calloc");
	vm->rec = *rec;
	vm->uid = (uid_t)(env->conf.vmmd.uid_base + rec->slot);
	vm->gid = (gid_t)(env->conf.vmmd.uid_base + rec->slot);
	snprintf(vm->dir, sizeof(vm->dir), "%s/%s", env->conf.vmmd.vm_dir,
	    rec->id);
	snprintf(vm->rundir, sizeof(vm->rundir), "%s/%s",
	    env->conf.vmmd.run_dir, rec->id);
	vm->image = conf_find_image(&env->conf, rec->image);
	vm->last_active = mono_seconds();
	vm->console_rd = -1;
	vm->qemulog_rd = -1;
	proxy_mon_init(vm);
	TAILQ_INIT(&vm->ready_waiters);
	TAILQ_INIT(&vm->destroy_waiters);
	TAILQ_INIT(&vm->streams);
	TAILQ_INSERT_TAIL(&env->vms, vm, entry);
	return vm;
}

/* ---- streams ----------------------------------------------------------- */

void
vm_stream_add(struct vm *vm, const char *id, struct ipc_conn *conn)
{
	struct vm_stream *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		fatal("calloc");
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->conn = conn;
	TAILQ_INSERT_TAIL(&vm->streams, s, entry);
}

/*
 * Asks mcpd to close every stream of the VM (WebSocket 1001 with the
 * reason), before the VM stops answering them.  Streams that already ended
 * are unknown to mcpd by then and cost nothing.
 */
void
vm_streams_close(struct vm *vm, const char *reason)
{
	struct vm_stream *s;

	while ((s = TAILQ_FIRST(&vm->streams)) != NULL) {
		TAILQ_REMOVE(&vm->streams, s, entry);
		if (s->conn != NULL) {
			struct json_object *b = json_object_new_object();

			json_object_object_add(b, "stream_id",
			    json_object_new_string(s->id));
			json_object_object_add(b, "reason",
			    json_object_new_string(reason));
			ipc_send(s->conn, IPC_VM_STREAM_CLOSE, 0, b, -1);
			/* Now: mcpd must not see the guest end first. */
			ipc_conn_flush(s->conn);
			json_object_put(b);
		}
		free(s);
	}
}

/* vmproxy's count of open streams; none open: forget the names. */
void
vm_streams_count(struct vm *vm, int open)
{
	struct vm_stream *s;

	vm->open_streams = open;
	/* Attached broker pipes keep their names too. */
	if (open > 0 || broker_has_pipes(vm))
		return;
	while ((s = TAILQ_FIRST(&vm->streams)) != NULL) {
		TAILQ_REMOVE(&vm->streams, s, entry);
		free(s);
	}
}

void
vm_streams_forget_conn(struct ipc_conn *conn)
{
	struct vm_stream *s;
	struct vm *vm;

	TAILQ_FOREACH(vm, &env->vms, entry)
		TAILQ_FOREACH(s, &vm->streams, entry)
			if (s->conn == conn)
				s->conn = NULL;
}

static void
vm_console_close(struct vm *vm)
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

static void
vm_free(struct vm *vm)
{
	vm_console_close(vm);
	broker_vm_free(vm);
	vm_streams_count(vm, 0);
	if (vm->boot_timer != NULL)
		event_free(vm->boot_timer);
	vmm_free(vm->vmm);
	json_object_put(vm->listed);
	free(vm);
}

static void
vm_reap(int fd, short ev, void *arg)
{
	struct vm *vm, *next;

	TAILQ_FOREACH_SAFE(vm, &dead_vms, entry, next) {
		if (vm->io_pending > 0)
			continue;	/* its disk job's return reaps it */
		TAILQ_REMOVE(&dead_vms, vm, entry);
		vm_free(vm);
	}
}

/*
 * Takes a VM whose record is gone out of every lookup.  Its memory stays
 * until vm_reap: whoever called into the code that ended it may still
 * read it on the way out, and a disk job may still be out.
 */
static void
vm_discard(struct vm *vm)
{
	struct timeval now = { 0, 0 };

	if (vm->discarded)
		return;
	vm->rec.state = VM_GONE;
	vm->discarded = 1;
	vm->busy = 0;
	if (vm->boot_timer != NULL)
		event_del(vm->boot_timer);
	TAILQ_REMOVE(&env->vms, vm, entry);
	TAILQ_INSERT_TAIL(&dead_vms, vm, entry);
	if (reap_ev == NULL &&
	    (reap_ev = evtimer_new(env->base, vm_reap, NULL)) == NULL)
		fatal("%s: evtimer_new", __func__);
	evtimer_add(reap_ev, &now);
}

/* Is any VM, live or gone, still doing something vmmd must wait for? */
int
vm_work_pending(void)
{
	struct vm *vm;

	TAILQ_FOREACH(vm, &env->vms, entry)
		if (vm->busy || vm->io_pending > 0)
			return 1;
	TAILQ_FOREACH(vm, &dead_vms, entry)
		if (vm->io_pending > 0)
			return 1;
	return 0;
}

struct vm *
vm_find(const char *id)
{
	struct vm *vm;

	TAILQ_FOREACH(vm, &env->vms, entry)
		if (strcmp(vm->rec.id, id) == 0)
			return vm;
	return NULL;
}

/* Another workspace's VM is exactly as absent as one that never was. */
struct vm *
vm_find_owned(const char *id, const char *workspace)
{
	struct vm *vm = vm_find(id);

	if (vm == NULL || strcmp(vm->rec.workspace, workspace) != 0)
		return NULL;
	return vm;
}

void
vm_touch(struct vm *vm)
{
	vm->last_active = mono_seconds();
}

struct json_object *
vm_summary(const struct vm *vm)
{
	struct json_object *o = json_object_new_object();
	char when[40];
	/* Callers never see the internal 'gone'. */
	enum vm_state s = vm->rec.state == VM_GONE ? VM_DESTROYING :
	    vm->rec.state;

	iso8601_ms(vm->rec.created_at * 1000, when, sizeof(when));
	json_object_object_add(o, "vm_id", json_object_new_string(vm->rec.id));
	json_object_object_add(o, "state",
	    json_object_new_string(vm_state_name(s)));
	json_object_object_add(o, "image", json_object_new_string(
	    vm->rec.image));
	json_object_object_add(o, "vcpus", json_object_new_int(vm->rec.vcpus));
	json_object_object_add(o, "memory_mib",
	    json_object_new_int(vm->rec.memory_mib));
	json_object_object_add(o, "network",
	    json_object_new_string(vm->rec.network ? "on" : "off"));
	json_object_object_add(o, "idle_seconds",
	    json_object_new_int(vm->rec.idle_seconds));
	json_object_object_add(o, "idle_mode", json_object_new_string(
	    vm->rec.idle_mode_pause ? "pause" : "hibernate"));
	json_object_object_add(o, "created_at", json_object_new_string(when));
	return o;
}

struct json_object *
vm_list_entry(struct vm *vm, int *checked)
{
	const struct tool *t = tools_find("vm_list");
	struct json_object *o, *arr, *wrap;
	const char *text;
	size_t len;
	char err[256];
	int good;

	if (vm->listed != NULL && vm->listed_state == vm->rec.state)
		return json_object_get(vm->listed);
	o = vm_summary(vm);
	/* Checked as vm_list would check a list of just this one. */
	wrap = json_object_new_object();
	arr = json_object_new_array();
	json_object_array_add(arr, json_object_get(o));
	json_object_object_add(wrap, "vms", arr);
	good = t != NULL && tool_validate_output(t, wrap, err, sizeof(err)) ==
	    0;
	json_object_put(wrap);
	if (!good) {
		/* request_reply checks the whole and reports it. */
		*checked = 0;
		return o;
	}
	text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	json_object_put(vm->listed);
	if ((vm->listed = jsonx_raw_object(text, len)) == NULL)
		fatal("%s", __func__);
	vm->listed_state = vm->rec.state;
	json_object_put(o);
	return json_object_get(vm->listed);
}

/* Paths are bounded at startup (vm_dir is short); a cut one is empty. */
static void
vm_path(const struct vm *vm, const char *name, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/%s", vm->dir, name) >= len)
		buf[0] = '\0';
}

/*
 * Operations.  One at a time per VM (busy); op_seq tells its callbacks
 * apart from those of an operation that was cancelled, which may still
 * arrive (a guest reply, a failed call when vmproxy stops).  A callback
 * that got op_token() as its argument checks op_current() first.
 */
static void
vm_op_begin(struct vm *vm, vm_done_cb cb, void *arg)
{
	vm->busy = 1;
	vm->op_cb = cb;
	vm->op_arg = arg;
	vm->op_step = VM_STEP_NONE;
	vm->op_seq++;
}

static void *
op_token(const struct vm *vm)
{
	return (void *)(uintptr_t)vm->op_seq;
}

static int
op_current(const struct vm *vm, void *token)
{
	return vm->busy && !vm->discarded &&
	    (uintptr_t)token == (uintptr_t)vm->op_seq;
}

/* Ends the operation in progress and tells whoever started it. */
static void
vm_op_done(struct vm *vm, const char *code, const char *fmt, ...)
{
	vm_done_cb cb = vm->op_cb;
	void *arg = vm->op_arg;
	char msg[512] = "";

	if (fmt != NULL) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
	}
	vm->busy = 0;
	vm->op_cb = NULL;
	vm->op_arg = NULL;
	vm->op_step = VM_STEP_NONE;
	vm->op_seq++;
	vm->io_then = NULL;	/* a step of this operation, now over */
	if (vm->boot_timer != NULL)
		event_del(vm->boot_timer);
	if (cb != NULL)
		cb(vm, code, code != NULL ? msg : NULL, arg);
	/* The callback may have ended the VM (a failed create). */
	if (!vm->discarded)
		vm_wake_waiters(vm);
	vmmd_maybe_exit();
}

/*
 * Ends the operation in flight, if any, without waiting for it: whoever
 * started it hears code and msg now, and its callbacks still to come find
 * it stale.  Processes are the caller's to stop.
 */
static void
vm_cancel_op(struct vm *vm, const char *code, const char *msg)
{
	if (vm->busy)
		vm_op_done(vm, code, "%s", msg);
}

/*
 * A job on the worker pool is back: the last one lets a teardown finish
 * or a waiting resume go on.
 */
static void
vm_io_done(struct vm *vm)
{
	void (*then)(struct vm *);

	if (--vm->io_pending > 0)
		return;
	if (vm->doomed)
		vm_teardown(vm);
	else if ((then = vm->io_then) != NULL) {
		vm->io_then = NULL;
		then(vm);
	}
	vmmd_maybe_exit();
}

struct cg_job {
	struct vm	*vm;
	unsigned	 slot;
	int		 kill_rc, remove_rc;
	char		 kill_err[256], remove_err[256];
};

static void
cg_job_run(void *arg)
{
	struct cg_job *j = arg;

	j->kill_rc = cg_kill(&env->cg, j->slot, j->kill_err,
	    sizeof(j->kill_err));
	j->remove_rc = cg_remove(&env->cg, j->slot, j->remove_err,
	    sizeof(j->remove_err));
}

static void
cg_job_done(void *arg)
{
	struct cg_job *j = arg;
	struct vm *vm = j->vm;

	if (j->kill_rc == -1)
		log_warnx("vm %s: %s", vm->rec.id, j->kill_err);
	if (j->remove_rc == -1)
		log_debug("vm %s: %s", vm->rec.id, j->remove_err);
	free(j);
	vm_io_done(vm);
}

/*
 * Kills whatever is left in the VM's cgroup and removes it, on the worker
 * pool: cg_kill and cg_remove poll for up to seconds when a process is
 * slow to die, and the loop serves every other VM meanwhile.  The slot
 * stays the VM's until then: a teardown, which frees it, waits for
 * io_pending, and so does a resume, which makes the cgroup again.
 */
static void
vm_cg_clean(struct vm *vm)
{
	struct cg_job *j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		fatal("calloc");
	j->vm = vm;
	j->slot = (unsigned)vm->rec.slot;
	vm->io_pending++;
	if (worker_submit(env->workers, cg_job_run, cg_job_done, j) == -1) {
		/* The pool is going (vmmd stops): do it here and now. */
		cg_job_run(j);
		cg_job_done(j);
	}
}

/* Stops every process of the VM: vmproxy, QEMU, and its cgroup. */
static void
vm_kill_processes(struct vm *vm)
{
	proxy_stop(vm);
	if (vm->vmm != NULL) {
		vmm_kill(vm->vmm);
		vmm_free(vm->vmm);
		vm->vmm = NULL;
	}
	vm_console_close(vm);
	vm->guest_up = 0;
	vm_cg_clean(vm);
	/* No VMM, no network: failed, destroyed and never-booted VMs. */
	netclient_release(vm);
}

/*
 * Marks the VM failed and stops it: what a broken guest or clock earns,
 * and what an operator's stop-workspace does.  An operation in flight
 * ends with it (a create that fails leaves no VM), and whoever waits for
 * the VM to run hears why it will not.
 */
void
vm_fail(struct vm *vm, const char *why)
{
	char msg[512];

	if (vm->discarded)
		return;
	log_warnx("vm %s: failed: %s", vm->rec.id, why);
	/* First: nothing that the cancel wakes may start the VM again. */
	vm_set_state(vm, VM_FAILED, why);
	snprintf(msg, sizeof(msg), "VM %s failed: %s", vm->rec.id, why);
	vm_cancel_op(vm, "unavailable", msg);
	if (vm->discarded)
		return;
	vm_streams_close(vm, "failed");
	vm_kill_processes(vm);
	vm_wake_waiters(vm);
}

/* ---- admission --------------------------------------------------------- */

static long long
image_disk_bytes(const struct conf_image *im)
{
	struct stat st;

	return stat(im->rootfs, &st) == 0 ? (long long)st.st_size : 0;
}

int
vm_admit(const struct request *req, const struct conf_image *im,
    int memory_mib, char *code, size_t codelen, char *msg, size_t msglen)
{
	long long host_vms = 0, host_mem = 0, host_disk = 0;
	long long ws_vms = 0, ws_mem = 0, ws_disk = 0;
	long long disk = image_disk_bytes(im);
	uint64_t avail = 0, total = 0;
	char err[256];
	struct vm *vm;

	snprintf(code, codelen, "quota_exceeded");
	TAILQ_FOREACH(vm, &env->vms, entry) {
		if (vm->rec.state == VM_GONE)
			continue;
		host_vms++;
		host_mem += vm->rec.memory_mib;
		host_disk += vm->rec.disk_bytes;
		if (strcmp(vm->rec.workspace, req->workspace) == 0) {
			ws_vms++;
			ws_mem += vm->rec.memory_mib;
			ws_disk += vm->rec.disk_bytes;
		}
	}
	if (host_vms + 1 > env->conf.vmmd.max_vms) {
		snprintf(msg, msglen, "max_vms: the host already keeps %lld "
		    "VMs, its limit", host_vms);
		return -1;
	}
	if (host_mem + memory_mib > env->conf.vmmd.max_memory_mib) {
		snprintf(msg, msglen, "max_memory_mib: %lld MiB are reserved "
		    "of %lld; %d more do not fit", host_mem,
		    env->conf.vmmd.max_memory_mib, memory_mib);
		return -1;
	}
	if ((host_disk + disk) > env->conf.vmmd.max_storage_gib << 30) {
		snprintf(msg, msglen, "max_storage_gib: the host's %lld GiB "
		    "are reserved", env->conf.vmmd.max_storage_gib);
		return -1;
	}
	if (req->policy.max_vms > 0 && ws_vms + 1 > req->policy.max_vms) {
		snprintf(msg, msglen, "workspace max_vms: it already has %lld "
		    "VMs, its limit", ws_vms);
		return -1;
	}
	if (req->policy.memory_mib > 0 &&
	    ws_mem + memory_mib > req->policy.memory_mib) {
		snprintf(msg, msglen, "workspace memory_mib: %lld of its %lld "
		    "MiB are in use; %d more do not fit", ws_mem,
		    req->policy.memory_mib, memory_mib);
		return -1;
	}
	if (req->policy.storage_gib > 0 &&
	    ws_disk + disk > req->policy.storage_gib << 30) {
		snprintf(msg, msglen, "workspace storage_gib: its %lld GiB "
		    "are reserved", req->policy.storage_gib);
		return -1;
	}
	/* A VM's whole disk and two checkpoint generations must fit. */
	if (disk_space(env->conf.vmmd.vm_dir, &avail, &total, err,
	    sizeof(err)) == 0) {
		unsigned long long need = (unsigned long long)disk +
		    2ULL * ((unsigned long long)memory_mib << 20) +
		    ((unsigned long long)env->conf.vmmd.min_free_mib << 20);

		if (avail < need) {
			snprintf(msg, msglen, "free disk: %s has %llu MiB "
			    "free, a new VM needs %llu MiB",
			    env->conf.vmmd.vm_dir,
			    (unsigned long long)(avail >> 20), need >> 20);
			return -1;
		}
	}
	return 0;
}

/* ---- booting and restoring --------------------------------------------- */

static void boot_timeout_cb(int, short, void *);

static void
vm_exited(struct vmm *vmm, int wstatus, void *arg)
{
	struct vm *vm = arg;

	if (vm->vmm != vmm)
		return;
	/* Hibernation and destroy stop QEMU themselves; anything else is a
	 * VM that died under us. */
	if (!vm->busy && (vm->rec.state == VM_RUNNING ||
	    vm->rec.state == VM_PAUSED)) {
		vmm_free(vm->vmm);
		vm->vmm = NULL;
		vm_fail(vm, "QEMU exited unexpectedly");
	}
}

static void
vm_vmm_event(struct vmm *vmm, const char *name, void *arg)
{
	log_debug("vm %s: QEMU event %s", ((struct vm *)arg)->rec.id, name);
}

static const struct vmm_cbs vm_cbs = { vm_exited, vm_vmm_event };

static void
vm_spec(struct vm *vm, struct vm_spec *spec, char *append, size_t applen,
    char *disk, char *kernel, char *initrd, size_t len)
{
	vm_path(vm, DISK, disk, len);
	vm_path(vm, KERNEL, kernel, len);
	vm_path(vm, INITRD, initrd, len);
	snprintf(append, applen, "console=ttyS0 root=/dev/vda rw quiet "
	    "panic=-1 mcpvm.vm=%s%s%s", vm->rec.id,
	    vm->image != NULL && vm->image->append[0] != '\0' ? " " : "",
	    vm->image != NULL ? vm->image->append : "");
	memset(spec, 0, sizeof(*spec));
	spec->slot = (unsigned)vm->rec.slot;
	spec->uid = vm->uid;
	spec->gid = vm->gid;
	spec->vcpus = (unsigned)vm->rec.vcpus;
	spec->memory_mib = (unsigned)vm->rec.memory_mib;
	spec->kernel = kernel;
	spec->initrd = initrd;
	spec->append = append;
	spec->disk = disk;
	spec->rundir = vm->rundir;
	spec->tap_fd = -1;	/* network on comes with netd */
	spec->console_fd = -1;	/* vm_boot makes the pipes */
	spec->log_fd = -1;
	spec->mon = &vm->mon;	/* QMP goes through vmproxy */
	spec->cg = &env->cg;
}

/* The guest said hello: set its clock (thaw after a restore), and run. */
static void
boot_clock_done(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	if (!op_current(vm, arg))
		return;		/* the boot was cancelled meanwhile */
	if (code != NULL) {
		vm_fail(vm, "the guest clock could not be set");
		vm_op_done(vm, "unavailable", "VM %s failed: its clock could "
		    "not be set (%s)", vm->rec.id, msg);
		return;
	}
	vm_set_state(vm, VM_RUNNING, NULL);
	vm_touch(vm);
	vm_op_done(vm, NULL, NULL);
}

/* vmproxy reports the guest; during a boot this completes it. */
void
vm_guest_event(struct vm *vm, const char *event, struct json_object *info)
{
	if (strcmp(event, "hello") == 0) {
		vm->guest_up = 1;
		if (vm->busy && (vm->rec.state == VM_CREATING ||
		    vm->rec.state == VM_RESUMING) && vm->op_step == VM_STEP_HELLO) {
			struct json_object *call = json_object_new_object();

			vm->op_step = VM_STEP_CLOCK;
			json_object_object_add(call, "op",
			    json_object_new_string(vm->rec.state ==
			    VM_RESUMING ? "thaw" : "clock_set"));
			json_object_object_add(call, "realtime_ns",
			    json_object_new_int64(wall_ms() * 1000000LL));
			if (proxy_call(vm, call, GUEST_CTL_CALL_MS,
			    boot_clock_done, op_token(vm)) == -1)
				boot_clock_done(vm, NULL, "unavailable",
				    "vmproxy is gone", -1, op_token(vm));
			json_object_put(call);
		} else
			vm_wake_waiters(vm);
	} else if (strcmp(event, "link_down") == 0)
		vm->guest_up = 0;
}

/* vmproxy exited.  A guest that broke the protocol fails its VM. */
void
vm_proxy_gone(struct vm *vm, int guest_fault)
{
	vm->guest_up = 0;
	if (guest_fault) {
		vm_fail(vm, "the guest broke the link protocol");
		if (vm->busy)
			vm_op_done(vm, "unavailable", "VM %s failed: the guest "
			    "broke the link protocol", vm->rec.id);
	} else if (!vm->busy && vm->rec.state == VM_RUNNING)
		vm_fail(vm, "vmproxy exited");
}

static void
boot_vmm_done(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;
	struct timeval tv = { env->conf.vmmd.boot_timeout_seconds, 0 };

	if (!ok) {
		vm_kill_processes(vm);
		vm_op_done(vm, "unavailable", "QEMU did not start: %s", err);
		return;
	}
	vm->op_step = VM_STEP_HELLO;
	if (vm->boot_timer == NULL)
		vm->boot_timer = evtimer_new(env->base, boot_timeout_cb, vm);
	evtimer_add(vm->boot_timer, &tv);
	/* vmproxy ran before QEMU: a quick guest may have said it already. */
	if (vm->guest_up)
		vm_guest_event(vm, "hello", NULL);
}

static void
boot_timeout_cb(int fd, short ev, void *arg)
{
	struct vm *vm = arg;

	if (!vm->busy || vm->op_step != VM_STEP_HELLO)
		return;
	vm_kill_processes(vm);
	vm_op_done(vm, "unavailable", "the guest did not come up within %lld "
	    "seconds", env->conf.vmmd.boot_timeout_seconds);
}

/*
 * The run directory: root's, the VM's group, 0770 (see vm_create).  The
 * chown comes first, so that the chmod is the owner's own.
 */
static int
vm_rundir_own(struct vm *vm)
{
	if (chown(vm->rundir, 0, vm->gid) == -1 ||
	    chmod(vm->rundir, 0770) == -1)
		return -1;
	return 0;
}

/* Starts QEMU (from a checkpoint when given) and waits for the guest;
 * with tap_fd (not consumed), the guest gets a NIC with that MAC and
 * netarg on its command line. */
static int
vm_boot_vmm(struct vm *vm, const char *checkpoint, int tap_fd,
    const char *mac, const char *netarg, char *err, size_t errlen)
{
	char append[768], disk[PATH_MAX], kernel[PATH_MAX], initrd[PATH_MAX];
	struct cg_limits lim;
	struct vm_spec spec;
	int rc, con[2], qlog[2];

	memset(&lim, 0, sizeof(lim));
	lim.memory_bytes = ((uint64_t)vm->rec.memory_mib + QEMU_OVERHEAD_MIB)
	    << 20;
	lim.cpu_quota_us = (uint64_t)vm->rec.vcpus * 100000;
	lim.cpu_period_us = 100000;
	lim.pids_max = 512;
	if (cg_create(&env->cg, (unsigned)vm->rec.slot, &lim, err, errlen) ==
	    -1)
		return -1;
	/* A run directory an older vmmd made (the VM's uid's, 0700) is
	 * made root's with the VM's group before QEMU starts in it. */
	if (vm_rundir_own(vm) == -1) {
		snprintf(err, errlen, "the run directory: %s", strerror(errno));
		return -1;
	}
	vm_spec(vm, &spec, append, sizeof(append), disk, kernel, initrd,
	    sizeof(disk));
	/*
	 * The console goes to a pipe that vmproxy drains into a bounded
	 * file (console_log_kib); until vmproxy runs the pipe holds what
	 * the boot prints, so it is made large enough for all of that.
	 */
	vm_console_close(vm);
	if (pipe2(con, O_CLOEXEC) == -1) {
		snprintf(err, errlen, "console pipe: %s", strerror(errno));
		return -1;
	}
	(void)fcntl(con[1], F_SETPIPE_SZ, CONSOLE_PIPE_BYTES);
	/* QEMU opens it again as /dev/fd/N, as the VM's uid. */
	if (fchown(con[1], vm->uid, vm->gid) == -1) {
		snprintf(err, errlen, "console pipe: %s", strerror(errno));
		close(con[0]);
		close(con[1]);
		return -1;
	}
	spec.console_fd = con[1];
	/*
	 * QEMU's stdout and stderr go to another pipe for vmproxy, which
	 * keeps a bounded qemu.log: root reads no byte QEMU writes (#14).
	 */
	if (pipe2(qlog, O_CLOEXEC) == -1) {
		snprintf(err, errlen, "QEMU log pipe: %s", strerror(errno));
		close(con[0]);
		close(con[1]);
		return -1;
	}
	spec.log_fd = qlog[1];
	vm->console_rd = con[0];
	vm->qemulog_rd = qlog[0];
	/*
	 * vmproxy first: it speaks QMP for the backend from QEMU's start on,
	 * and takes the pipes' read ends.
	 */
	if (proxy_spawn(vm, err, errlen) == -1) {
		vm_console_close(vm);
		close(con[1]);
		close(qlog[1]);
		return -1;
	}
	/* The broker pipes' limits and routes, before any job can run. */
	broker_proxy_up(vm);
	if (tap_fd != -1) {
		spec.tap_fd = tap_fd;
		spec.mac = mac;
		snprintf(append + strlen(append), sizeof(append) -
		    strlen(append), " %s", netarg);
	}
	vm->op_step = VM_STEP_NONE;
	if (checkpoint == NULL)
		rc = qemu_backend_ops.start(env->qemu, &spec, &vm_cbs, vm,
		    boot_vmm_done, vm, &vm->vmm);
	else
		rc = qemu_backend_ops.restore(env->qemu, &spec, checkpoint,
		    &vm_cbs, vm, boot_vmm_done, vm, &vm->vmm);
	close(con[1]);		/* QEMU has its copies */
	close(qlog[1]);
	if (rc == -1) {
		snprintf(err, errlen, "QEMU: %s", strerror(errno));
		proxy_stop(vm);
		return -1;
	}
	return 0;
}

/* A VM with network asks netd first; its TAP then goes to QEMU. */
struct boot_net {
	char	 checkpoint[PATH_MAX];
	int	 has_checkpoint;
	void	*op;		/* op_token() of the boot that asked */
};

static void
boot_net_done(struct vm *vm, int tap_fd, const char *mac,
    const char *netarg, const char *code, const char *msg, void *arg)
{
	struct boot_net *bn = arg;
	char err[512];

	if (vm == NULL) {
		/* The VM was destroyed meanwhile. */
		free(bn);
		return;
	}
	if (!op_current(vm, bn->op)) {
		/* The boot was cancelled (destroyed, failed) while netd
		 * worked: no QEMU, and the network goes straight back. */
		if (tap_fd != -1)
			close(tap_fd);
		netclient_release(vm);
		free(bn);
		return;
	}
	if (code != NULL)
		vm_op_done(vm, "unavailable", "guest network: %s", msg);
	else if (vm_boot_vmm(vm, bn->has_checkpoint ? bn->checkpoint : NULL,
	    tap_fd, mac, netarg, err, sizeof(err)) == -1)
		vm_op_done(vm, "unavailable", "the VM could not start: %s",
		    err);
	/* QEMU has its copy once started. */
	if (tap_fd != -1)
		close(tap_fd);
	free(bn);
}

static int
vm_boot(struct vm *vm, const char *checkpoint, char *err, size_t errlen)
{
	struct boot_net *bn;

	if (!vm->rec.network)
		return vm_boot_vmm(vm, checkpoint, -1, NULL, NULL, err,
		    errlen);
	if ((bn = calloc(1, sizeof(*bn))) == NULL)
		fatal("calloc");
	if (checkpoint != NULL) {
		snprintf(bn->checkpoint, sizeof(bn->checkpoint), "%s",
		    checkpoint);
		bn->has_checkpoint = 1;
	}
	vm->op_step = VM_STEP_NONE;
	bn->op = op_token(vm);
	netclient_setup(vm, boot_net_done, bn);
	return 0;
}

/* ---- create ------------------------------------------------------------ */

struct create_ctx {
	struct request	*req;
	int		 step;
	vm_done_cb	 cb;		/* the requester's */
	void		*arg;
};

static void create_step(struct vm *, int rc, const char *err);

static void
vm_remove_files(struct vm *vm)
{
	static const char *const names[] = { DISK, KERNEL, INITRD, CHECKPOINT,
	    CHECKPOINT ".part" };	/* the backend's unfinished one */
	char path[PATH_MAX];
	DIR *d;
	struct dirent *de;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		vm_path(vm, names[i], path, sizeof(path));
		unlink(path);
	}
	rmdir(vm->dir);
	/* The rundir holds only what QEMU and vmproxy made there. */
	if ((d = opendir(vm->rundir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			if ((size_t)snprintf(path, sizeof(path), "%s/%s",
			    vm->rundir, de->d_name) < sizeof(path))
				unlink(path);
		}
		closedir(d);
	}
	rmdir(vm->rundir);
}

/*
 * The end of a create, either way.  A VM that never came up leaves
 * nothing behind: no files, no processes, only its id as destroyed.  One
 * destroyed while it was being created is torn down by vm_destroy.
 */
static void
create_done(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct create_ctx *cx = arg;

	if (code != NULL && vm->rec.state == VM_DESTROYING) {
		char why[128];

		snprintf(why, sizeof(why), "VM %s was destroyed before it "
		    "finished booting", vm->rec.id);
		cx->cb(vm, "conflict", why, cx->arg);
	} else if (code != NULL) {
		log_warnx("vm %s: create failed: %s", vm->rec.id, msg);
		cx->cb(vm, code, msg, cx->arg);
		vm_teardown(vm);
	} else
		cx->cb(vm, NULL, NULL, cx->arg);
	free(cx);
}

/*
 * A disk job of a create came back.  The VM may have been destroyed or
 * failed meanwhile: its teardown waited for this job, and ends now.
 */
static void
create_disk_done(int rc, const char *err, void *arg)
{
	struct vm *vm = arg;

	if (vm->doomed) {
		vm_io_done(vm);
		return;
	}
	vm->io_pending--;
	create_step(vm, rc, err);
}

static int
create_disk_job(struct vm *vm, int reflink, const char *src,
    const char *name)
{
	char dst[PATH_MAX];
	int rc;

	vm_path(vm, name, dst, sizeof(dst));
	rc = (reflink ? disk_clone_async : disk_copy_async)(env->workers, src,
	    dst, vm->uid, vm->gid, create_disk_done, vm);
	if (rc == 0)
		vm->io_pending++;
	return rc == 0;
}

static void
create_step(struct vm *vm, int rc, const char *err)
{
	struct create_ctx *cx = vm->op_arg;
	const struct conf_image *im = vm->image;
	char why[512];
	int queued = 0;

	if (!vm->busy || vm->op_cb != create_done) {
		/* Only a teardown ends a create early, and it is doomed. */
		log_warnx("vm %s: %s: no create in progress", vm->rec.id,
		    __func__);
		return;
	}
	if (rc == -1) {
		vm_op_done(vm, "unavailable", "the VM could not be created: "
		    "%s", err);
		return;
	}
	switch (cx->step++) {
	case 0:
		request_progress(cx->req, 1, 4, "cloning the disk");
		queued = create_disk_job(vm, 1, im->rootfs, DISK);
		break;
	case 1:
		queued = create_disk_job(vm, 0, im->kernel, KERNEL);
		break;
	case 2:
		queued = create_disk_job(vm, 0, im->initrd, INITRD);
		break;
	default:
		request_progress(cx->req, 2, 4, "booting");
		if (vm_boot(vm, NULL, why, sizeof(why)) == -1)
			vm_op_done(vm, "unavailable", "the VM could not be "
			    "created: %s", why);
		return;
	}
	if (!queued)
		vm_op_done(vm, "unavailable", "the VM could not be created: "
		    "the worker pool refused the job");
}

void
vm_create(struct request *req, const struct conf_image *im, int vcpus,
    int memory_mib, int network, int idle_seconds, int idle_pause,
    vm_done_cb cb, void *arg)
{
	struct vm_record rec;
	struct create_ctx *cx;
	unsigned char rnd[16];
	struct vm *vm;
	int slot;

	memset(&rec, 0, sizeof(rec));
	if ((slot = store_free_slot(env->store,
	    (int)env->conf.vmmd.max_vms)) == -1) {
		cb(NULL, "quota_exceeded", "max_vms: every VM slot is taken",
		    arg);
		return;
	}
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		fatalx("RAND_bytes failed");
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(rec.id + i * 2, 3, "%02x", rnd[i]);
	snprintf(rec.workspace, sizeof(rec.workspace), "%s", req->workspace);
	snprintf(rec.image, sizeof(rec.image), "%s", im->id);
	rec.slot = slot;
	rec.state = VM_CREATING;
	rec.vcpus = vcpus;
	rec.memory_mib = memory_mib;
	rec.disk_bytes = image_disk_bytes(im);
	rec.network = network;
	rec.idle_seconds = idle_seconds;
	rec.idle_mode_pause = idle_pause;
	rec.created_at = wall_ms() / 1000;
	/* Recorded before any side effect: a crash from here on leaves a
	 * VM that startup marks failed and kills. */
	if (store_vm_insert(env->store, &rec) == -1) {
		cb(NULL, "unavailable", "the VM could not be recorded", arg);
		return;
	}
	vm = vm_alloc(&rec);
	snprintf(req->vm_id, sizeof(req->vm_id), "%s", rec.id);
	if ((cx = calloc(1, sizeof(*cx))) == NULL)
		fatal("calloc");
	cx->req = req;
	cx->cb = cb;
	cx->arg = arg;
	vm_op_begin(vm, create_done, cx);
	/*
	 * The rundir is root's with the VM's group, 0770 (vm_rundir_own,
	 * before each boot): QEMU and vmproxy (that gid) make their sockets
	 * and logs there, and vmmd, its owner, removes them without a
	 * capability that overrides permissions.
	 */
	if (mkdir(vm->dir, 0711) == -1 || mkdir(vm->rundir, 0770) == -1) {
		vm_op_done(vm, "unavailable", "the VM could not be created: "
		    "%s", strerror(errno));
		return;
	}
	create_step(vm, 0, NULL);
}

/* ---- suspend and resume ------------------------------------------------ */

static void
suspend_vmm_done(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;
	char cp[PATH_MAX];

	if (vm->op_pause) {
		if (!ok) {
			vm_op_done(vm, "unavailable", "pause failed: %s", err);
			return;
		}
		vm_set_state(vm, VM_PAUSED, NULL);
		vm_op_done(vm, NULL, NULL);
		return;
	}
	if (!ok) {
		struct json_object *call = json_object_new_object();

		/* The VM was left running: thaw its jobs and say why. */
		log_warnx("vm %s: hibernation failed: %s", vm->rec.id, err);
		json_object_object_add(call, "op",
		    json_object_new_string("thaw"));
		json_object_object_add(call, "realtime_ns",
		    json_object_new_int64(wall_ms() * 1000000LL));
		proxy_call(vm, call, GUEST_CTL_CALL_MS, NULL, NULL);
		json_object_put(call);
		vm_set_state(vm, VM_RUNNING, NULL);
		vm_op_done(vm, "unavailable", "hibernation failed, the VM "
		    "runs on: %s", err);
		return;
	}
	/* On disk: QEMU has exited, vmproxy and the cgroup go too. */
	vm_path(vm, CHECKPOINT, cp, sizeof(cp));
	vm_kill_processes(vm);	/* the network too: resume makes it again */
	store_vm_set_generation(env->store, vm->rec.id, vm->rec.generation + 1);
	vm->rec.generation++;
	vm_set_state(vm, VM_HIBERNATED, NULL);
	vm_op_done(vm, NULL, NULL);
}

static void
suspend_frozen(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	char cp[PATH_MAX];

	if (!op_current(vm, arg))
		return;		/* cancelled: destroyed or failed meanwhile */
	/* A guest that cannot freeze still stops: its timeouts then count
	 * the suspension, which is the lesser harm. */
	if (code != NULL)
		log_warnx("vm %s: freeze before suspend: %s", vm->rec.id, msg);
	if (vm->vmm == NULL) {
		vm_op_done(vm, "unavailable", "VM %s has no running VMM",
		    vm->rec.id);
		return;
	}
	if (vm->op_pause) {
		if (vmm_pause(vm->vmm, suspend_vmm_done, vm) == -1)
			vm_op_done(vm, "busy", "QEMU is busy");
		return;
	}
	vm_set_state(vm, VM_HIBERNATING, NULL);
	vm_path(vm, CHECKPOINT, cp, sizeof(cp));
	if (vmm_snapshot(vm->vmm, cp, suspend_vmm_done, vm) == -1) {
		vm_set_state(vm, VM_RUNNING, NULL);
		vm_op_done(vm, "busy", "QEMU is busy");
	}
}

void
vm_suspend(struct vm *vm, int pause, vm_done_cb cb, void *arg)
{
	struct json_object *call;

	if (vm->busy) {
		cb(vm, "busy", "another operation on this VM is in progress",
		    arg);
		return;
	}
	if (vm->rec.state == VM_HIBERNATED ||
	    (vm->rec.state == VM_PAUSED && pause)) {
		cb(vm, NULL, NULL, arg);	/* already there */
		return;
	}
	if (vm->rec.state == VM_PAUSED && !pause) {
		/* Pause to hibernate: run it just long enough to checkpoint
		 * (the jobs stay frozen). */
		vm_op_begin(vm, cb, arg);
		vm->op_pause = 0;
		vm_set_state(vm, VM_HIBERNATING, NULL);
		{
			char cp[PATH_MAX];

			vm_path(vm, CHECKPOINT, cp, sizeof(cp));
			if (vmm_snapshot(vm->vmm, cp, suspend_vmm_done, vm) ==
			    -1) {
				vm_set_state(vm, VM_PAUSED, NULL);
				vm_op_done(vm, "busy", "QEMU is busy");
			}
		}
		return;
	}
	if (vm->rec.state != VM_RUNNING) {
		char msg[128];

		snprintf(msg, sizeof(msg), "the VM is %s and cannot be "
		    "suspended", vm_state_name(vm->rec.state));
		cb(vm, "conflict", msg, arg);
		return;
	}
	vm_op_begin(vm, cb, arg);
	vm->op_pause = pause;
	vm_streams_close(vm, "suspended");
	call = json_object_new_object();
	json_object_object_add(call, "op", json_object_new_string("freeze"));
	if (!vm->guest_up || proxy_call(vm, call, GUEST_CTL_CALL_MS,
	    suspend_frozen, op_token(vm)) == -1)
		suspend_frozen(vm, NULL, "unavailable", "guest not up", -1,
		    op_token(vm));
	json_object_put(call);
}

static void
resume_thawed(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	if (!op_current(vm, arg))
		return;
	if (code != NULL) {
		vm_fail(vm, "the guest clock could not be set after resume");
		vm_op_done(vm, "unavailable", "VM %s failed: its clock could "
		    "not be set after resume (%s)", vm->rec.id, msg);
		return;
	}
	vm_set_state(vm, VM_RUNNING, NULL);
	vm_touch(vm);
	vm_op_done(vm, NULL, NULL);
}

static void
resume_vmm_done(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;
	struct json_object *call;

	if (!ok) {
		vm_op_done(vm, "unavailable", "resume failed: %s", err);
		return;
	}
	call = json_object_new_object();
	json_object_object_add(call, "op", json_object_new_string("thaw"));
	json_object_object_add(call, "realtime_ns",
	    json_object_new_int64(wall_ms() * 1000000LL));
	if (proxy_call(vm, call, GUEST_CTL_CALL_MS, resume_thawed,
	    op_token(vm)) == -1)
		resume_thawed(vm, NULL, "unavailable", "vmproxy is gone", -1,
		    op_token(vm));
	json_object_put(call);
}

static void
restore_done(struct vm *vm, const char *code, const char *msg, void *arg)
{
	char cp[PATH_MAX];

	vm_path(vm, CHECKPOINT, cp, sizeof(cp));
	if (code == NULL) {
		/* The disk has run since: this checkpoint must never be
		 * restored again. */
		unlink(cp);
		return;
	}
	/* An interrupted restore must not be retried over a disk that may
	 * have run: the VM is failed (unless it already is, or goes). */
	if (vm->rec.state == VM_RESUMING)
		vm_fail(vm, msg != NULL ? msg : "restore failed");
}

/* The hibernated half of vm_resume: QEMU from the checkpoint. */
static void
vm_restore(struct vm *vm)
{
	char cp[PATH_MAX], err[256];

	vm_path(vm, CHECKPOINT, cp, sizeof(cp));
	if (vm_boot(vm, cp, err, sizeof(err)) == -1)
		vm_op_done(vm, "unavailable", "restore failed: %s", err);
}

/* Resumes a paused or hibernated VM; cb when it runs again. */
static void
vm_resume(struct vm *vm)
{

	if (vm->rec.state == VM_PAUSED) {
		vm_op_begin(vm, NULL, NULL);
		if (vmm_resume(vm->vmm, resume_vmm_done, vm) == -1)
			vm_op_done(vm, "busy", "QEMU is busy");
		return;
	}
	vm_op_begin(vm, restore_done, NULL);
	vm_set_state(vm, VM_RESUMING, NULL);
	/* The cgroup of its last run may still be on its way out. */
	if (vm->io_pending > 0) {
		vm->io_then = vm_restore;
		return;
	}
	vm_restore(vm);
}

static void
vm_wake_waiters(struct vm *vm)
{
	TAILQ_HEAD(, vm_waiter) list;
	struct vm_waiter *w;

	if (vm->busy)
		return;
	if (vm->rec.state == VM_RUNNING && !vm->guest_up)
		return;	/* the link is coming back: hello wakes them */
	TAILQ_INIT(&list);
	TAILQ_CONCAT(&list, &vm->ready_waiters, entry);
	while ((w = TAILQ_FIRST(&list)) != NULL) {
		TAILQ_REMOVE(&list, w, entry);
		vm_ready(vm, w->cb, w->arg);
		free(w);
	}
}

void
vm_ready(struct vm *vm, vm_done_cb cb, void *arg)
{
	struct vm_waiter *w;

	vm_touch(vm);
	if (!vm->busy && vm->rec.state == VM_RUNNING && vm->guest_up) {
		cb(vm, NULL, NULL, arg);
		return;
	}
	if (vm->rec.state == VM_FAILED) {
		cb(vm, "unavailable", vm->rec.failure[0] != '\0' ?
		    vm->rec.failure : "the VM failed", arg);
		return;
	}
	if (vm->rec.state == VM_DESTROYING || vm->rec.state == VM_GONE) {
		cb(vm, "not_found", "the VM is being destroyed", arg);
		return;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("calloc");
	w->cb = cb;
	w->arg = arg;
	TAILQ_INSERT_TAIL(&vm->ready_waiters, w, entry);
	if (!vm->busy && (vm->rec.state == VM_PAUSED ||
	    vm->rec.state == VM_HIBERNATED)) {
		if (env->shutting_down) {
			TAILQ_REMOVE(&vm->ready_waiters, w, entry);
			free(w);
			cb(vm, "unavailable", "vmmd is shutting down", arg);
			return;
		}
		vm_resume(vm);
	}
}

/* ---- destroy ----------------------------------------------------------- */

/*
 * Removes what is left of a VM whose processes are gone or going: its
 * files, its record and the VM itself, and answers whoever asked for its
 * destruction.  A disk job still writing into its directory is waited
 * for, and the cgroup cleanup of its processes: vm_io_done calls this
 * again when the last job is back.
 */
static void
vm_teardown(struct vm *vm)
{
	TAILQ_HEAD(, vm_waiter) list;
	struct vm_waiter *w;

	if (!vm->doomed) {
		vm->doomed = 1;
		vm_kill_processes(vm);
	}
	/* Done already, when the cgroup's cleanup ran inline (the worker
	 * pool refuses jobs once vmmd stops) and came back in here. */
	if (vm->io_pending > 0 || vm->discarded)
		return;
	vm_remove_files(vm);
	if (store_vm_delete(env->store, vm->rec.id) == -1)
		log_warnx("vm %s: not marked gone", vm->rec.id);
	TAILQ_INIT(&list);
	TAILQ_CONCAT(&list, &vm->destroy_waiters, entry);
	vm_discard(vm);
	while ((w = TAILQ_FIRST(&list)) != NULL) {
		TAILQ_REMOVE(&list, w, entry);
		w->cb(vm, NULL, NULL, w->arg);
		free(w);
	}
	vmmd_maybe_exit();
}

/*
 * Destroys the VM in whatever state it is.  An operation in flight is
 * cancelled, not awaited: its requester hears that the VM was destroyed
 * (a create: conflict), its QEMU and vmproxy are killed, and every guest
 * call still out fails.  The only thing waited for is a disk job on the
 * worker pool, which cannot be stopped half way; until it is back the VM
 * is listed as destroying, and a second destroy joins the first.
 */
void
vm_destroy(struct vm *vm, vm_done_cb cb, void *arg)
{
	struct vm_waiter *w;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("calloc");
	w->cb = cb;
	w->arg = arg;
	TAILQ_INSERT_TAIL(&vm->destroy_waiters, w, entry);
	if (vm->rec.state == VM_DESTROYING)
		return;
	/* First: nothing that the cancel wakes may start the VM again. */
	vm_set_state(vm, VM_DESTROYING, NULL);
	vm_streams_close(vm, "destroyed");
	vm_cancel_op(vm, "not_found", "the VM was destroyed");
	vm_wake_waiters(vm);	/* each hears it is being destroyed */
	vm_teardown(vm);	/* kills its processes first */
}

/* ---- idle and shutdown ------------------------------------------------- */

static void
idle_suspended(struct vm *vm, const char *code, const char *msg, void *arg)
{
	if (code != NULL)
		log_warnx("vm %s: idle suspension failed: %s", vm->rec.id, msg);
	else
		log_info("vm %s: idle for %d s: %s", vm->rec.id,
		    vm->rec.idle_seconds, vm_state_name(vm->rec.state));
}

static void
idle_activity(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct json_object *v;

	vm->op_step = VM_STEP_NONE;
	if (code != NULL || vm->busy || vm->rec.state != VM_RUNNING)
		return;
	/* Running jobs, detached descendants included, are activity. */
	if (json_object_object_get_ex(res, "active", &v) &&
	    json_object_get_boolean(v)) {
		vm_touch(vm);
		return;
	}
	vm_suspend(vm, vm->rec.idle_mode_pause, idle_suspended, NULL);
}

static void
idle_tick_cb(int fd, short ev, void *arg)
{
	struct timeval tv = { IDLE_TICK_SECONDS, 0 };
	long long now = mono_seconds();
	struct vm *vm, *next;

	TAILQ_FOREACH_SAFE(vm, &env->vms, entry, next) {
		struct json_object *call;

		if (vm->busy || vm->rec.state != VM_RUNNING ||
		    !vm->guest_up || vm->rec.idle_seconds == 0 ||
		    vm->open_streams > 0 || broker_has_pipes(vm) ||
		    vm->op_step == VM_STEP_PROBE ||
		    now - vm->last_active < vm->rec.idle_seconds)
			continue;
		call = json_object_new_object();
		json_object_object_add(call, "op",
		    json_object_new_string("activity"));
		vm->op_step = VM_STEP_PROBE;
		if (proxy_call(vm, call, GUEST_CTL_CALL_MS, idle_activity, NULL) ==
		    -1)
			vm->op_step = VM_STEP_NONE;
		json_object_put(call);
	}
	if (!env->shutting_down)
		evtimer_add(idle_tick, &tv);
}

static void
shutdown_suspended(struct vm *vm, const char *code, const char *msg,
    void *arg)
{
	if (code != NULL) {
		log_warnx("vm %s: not hibernated at shutdown: %s", vm->rec.id,
		    msg);
		vm_fail(vm, "vmmd stopped and the VM could not be hibernated");
	}
	vmmd_maybe_exit();
}

void
vm_hibernate_all(void)
{
	struct vm *vm, *next;

	TAILQ_FOREACH_SAFE(vm, &env->vms, entry, next) {
		if (vm->rec.state == VM_RUNNING || vm->rec.state == VM_PAUSED)
			vm_suspend(vm, 0, shutdown_suspended, NULL);
	}
}

/* ---- startup ----------------------------------------------------------- */

void
vm_init_all(void)
{
	struct vm_record *recs;
	struct timeval tv = { IDLE_TICK_SECONDS, 0 };
	unsigned slots[4096];
	char err[256];
	ssize_t nslots;
	size_t n;

	/* Whatever a previous life left running dies through its cgroup. */
	nslots = cg_list(&env->cg, slots, sizeof(slots) / sizeof(slots[0]));
	for (ssize_t i = 0; i < nslots; i++) {
		if (cg_kill(&env->cg, slots[i], err, sizeof(err)) == -1)
			log_warnx("leftover cgroup vm-%u: %s", slots[i], err);
		else
			log_info("killed what was left in cgroup vm-%u",
			    slots[i]);
		cg_remove(&env->cg, slots[i], err, sizeof(err));
	}
	if (store_vm_list(env->store, NULL, &recs, &n) == -1)
		fatalx("cannot read VMs from the store");
	for (size_t i = 0; i < n; i++) {
		struct vm *vm = vm_alloc(&recs[i]);
		char cp[PATH_MAX];
		struct stat st;

		if (vm->image == NULL)
			log_info("vm %s: image %s is no longer configured; the "
			    "VM keeps its own copy", vm->rec.id, vm->rec.image);
		switch (vm->rec.state) {
		case VM_HIBERNATED:
			vm_path(vm, CHECKPOINT, cp, sizeof(cp));
			if (stat(cp, &st) == -1)
				vm_set_state(vm, VM_FAILED, "its checkpoint "
				    "is missing");
			break;
		case VM_FAILED:
			break;
		default: {
			char why[128];

			/* An interrupted transition, or a VM whose VMM
			 * died with us: its outcome is unknown. */
			snprintf(why, sizeof(why), "vmmd stopped while the VM "
			    "was %s", vm_state_name(vm->rec.state));
			vm_set_state(vm, VM_FAILED, why);
			log_warnx("vm %s: %s", vm->rec.id, why);
		}
		}
	}
	free(recs);
	idle_tick = evtimer_new(env->base, idle_tick_cb, NULL);
	evtimer_add(idle_tick, &tv);
}
