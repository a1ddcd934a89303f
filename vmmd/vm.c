/*
 * vmmd's VMs: the bookkeeping of the state machine's VMs (records,
 * lookups, the summary vm_list shows), streams, and the machine's record
 * hook and its fail and destroy actions (vm_fsm.c).  Booting and creating
 * are in vm_boot.c, pausing, hibernating, resuming and idle suspension in
 * vm_suspend.c; vm_local.h is what the three share, vm_init.c puts them
 * together and recovers the VMs at startup, admit.c counts what a new VM
 * may take.  Each transition is written to the store before its side effect
 * and again after it.  Nothing here blocks the loop: disk work runs on the
 * worker pool, QEMU is driven through the backend's callbacks.  It trusts
 * vmmd's own state and the store; what vmproxy, the guest and mcpd say
 * reaches it already decoded.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "jsonx.h"
#include "log.h"
#include "schema.h"
#include "netclient.h"
#include "vmmd_shared.h"
#include "vm_local.h"
#include "worker.h"

/* The VMs vmmd knows: made, booting, running, suspended, or failed. */
static struct vm_head vms = TAILQ_HEAD_INITIALIZER(vms);

/*
 * VMs that are gone but may still be named: by a caller further up the
 * stack (a callback that ended the VM returns into code that holds it) or
 * by a disk job on the worker pool.  vm_reap frees them on a later turn of
 * the loop, each once no disk job of its own is out.
 */
static TAILQ_HEAD(, vm) dead_vms = TAILQ_HEAD_INITIALIZER(dead_vms);
static struct event *reap_ev;
/* What vm_free frees of a part above vm.c (vm_on_free). */
static void (*free_hook)(struct vm *);

/* ---- bookkeeping ------------------------------------------------------- */

struct vm_head *
vm_all(void)
{
	return &vms;
}

/* The machine's record hook: the state vm_fsm_fire set, in the store. */
void
vm_record_state(struct vm *vm)
{
	enum vm_state s = vm->rec.state;
	char err[256];

	/* Its record is already deleted; nothing may write it back. */
	if (vm->discarded)
		return;
	if (store_vm_set_state(vmmd_store(), vm->rec.id, s, s == VM_FAILED ?
	    vm->rec.failure : NULL, err, sizeof(err)) == -1)
		log_warnx("vm %s: state %s not recorded: %s", vm->rec.id,
		    vm_state_name(s), err);
}

struct vm *
vm_alloc(const struct vm_record *rec)
{
	struct vm *vm;

	if ((vm = calloc(1, sizeof(*vm))) == NULL)
		fatal("calloc");
	vm->rec = *rec;
	vm->uid = (uid_t)(vmmd_conf()->vmmd.uid_base + rec->slot);
	vm->gid = (gid_t)(vmmd_conf()->vmmd.uid_base + rec->slot);
	snprintf(vm->dir, sizeof(vm->dir), "%s/%s", vmmd_conf()->vmmd.vm_dir,
	    rec->id);
	snprintf(vm->rundir, sizeof(vm->rundir), "%s/%s",
	    vmmd_conf()->vmmd.run_dir, rec->id);
	vm->image = conf_find_image(vmmd_conf(), rec->image);
	vm->last_active = mono_seconds();
	vm->console_rd = -1;
	vm->qemulog_rd = -1;
	proxy_mon_init(vm);
	TAILQ_INIT(&vm->waits);
	TAILQ_INIT(&vm->streams);
	TAILQ_INSERT_TAIL(&vms, vm, entry);
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
vm_streams_count(struct vm *vm, int open, int pipes)
{
	struct vm_stream *s;

	vm->open_streams = open;
	/* Attached broker pipes keep their names too. */
	if (open > 0 || pipes)
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

	TAILQ_FOREACH(vm, &vms, entry)
		TAILQ_FOREACH(s, &vm->streams, entry)
			if (s->conn == conn)
				s->conn = NULL;
}

void
vm_on_free(void (*fn)(struct vm *))
{
	free_hook = fn;
}

static void
vm_free(struct vm *vm)
{
	proxy_console_close(vm);
	if (free_hook != NULL)
		free_hook(vm);
	vm_streams_count(vm, 0, 0);
	if (vm->boot_timer != NULL)
		event_free(vm->boot_timer);
	if (vm->link_timer != NULL)
		event_free(vm->link_timer);
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
	vm->discarded = 1;
	vm->busy = 0;
	vm_fsm_fire(vm, VM_EV_TORN_DOWN, NULL);
	if (vm->boot_timer != NULL)
		event_del(vm->boot_timer);
	TAILQ_REMOVE(&vms, vm, entry);
	TAILQ_INSERT_TAIL(&dead_vms, vm, entry);
	if (reap_ev == NULL &&
	    (reap_ev = evtimer_new(vmmd_base(), vm_reap, NULL)) == NULL)
		fatal("%s: evtimer_new", __func__);
	evtimer_add(reap_ev, &now);
}

/* Is any VM, live or gone, still doing something vmmd must wait for? */
int
vm_work_pending(void)
{
	struct vm *vm;

	TAILQ_FOREACH(vm, &vms, entry)
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

	TAILQ_FOREACH(vm, &vms, entry)
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
void
vm_path(const struct vm *vm, const char *name, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/%s", vm->dir, name) >= len)
		buf[0] = '\0';
}

/*
 * A job on the worker pool is back: the last one lets a teardown finish
 * or a waiting resume go on.
 */
void
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

	j->kill_rc = cg_kill(vmmd_cg(), j->slot, j->kill_err,
	    sizeof(j->kill_err));
	j->remove_rc = cg_remove(vmmd_cg(), j->slot, j->remove_err,
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
	if (worker_submit(vmmd_workers(), cg_job_run, cg_job_done, j) == -1) {
		/* The pool is going (vmmd stops): do it here and now. */
		cg_job_run(j);
		cg_job_done(j);
	}
}

/* Stops every process of the VM: vmproxy, QEMU, and its cgroup. */
void
vm_kill_processes(struct vm *vm)
{
	proxy_stop(vm);
	if (vm->vmm != NULL) {
		vmm_kill(vm->vmm);
		vmm_free(vm->vmm);
		vm->vmm = NULL;
	}
	proxy_console_close(vm);
	vm->guest_up = 0;
	vm_cg_clean(vm);
	/* No VMM, no network: failed, destroyed and never-booted VMs. */
	netclient_release(vm->rec.id, vm->rec.slot);
}

/*
 * Marks the VM failed and stops it: what a broken guest or clock earns,
 * and what an operator's stop-workspace does.  An operation in flight
 * ends with it (a create that fails leaves no VM), and whoever waits for
 * the VM to run hears why it will not.
 */
/* The link stayed down link_down_seconds. */
static void
link_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct vm *vm = arg;
	char why[128];

	if (vm->guest_up || vm->rec.state != VM_RUNNING)
		return;
	/* An operation ends by its own bound first; the link's comes after. */
	if (vm->busy) {
		vm_link_watch(vm, 0);
		return;
	}
	snprintf(why, sizeof(why), "the guest link stayed down for %lld "
	    "seconds (link_down_seconds)", vmmd_conf()->vmmd.link_down_seconds);
	log_warnx("vm %s: %s", vm->rec.id, why);
	vm_fsm_fire(vm, VM_EV_LINK_TIMEOUT, why);
}

/* The machine's link hook: a running VM's link that goes down has
 * link_down_seconds to come back, or the VM fails and its waiters hear
 * why (they would otherwise park as long as guestd stays away). */
void
vm_link_watch(struct vm *vm, int up)
{
	struct timeval tv = { vmmd_conf()->vmmd.link_down_seconds, 0 };

	if (up || vm->rec.state != VM_RUNNING) {
		if (vm->link_timer != NULL)
			evtimer_del(vm->link_timer);
		return;
	}
	if (vm->link_timer == NULL &&
	    (vm->link_timer = evtimer_new(vmmd_base(), link_timer_cb, vm)) ==
	    NULL)
		fatalx("evtimer_new");
	evtimer_add(vm->link_timer, &tv);
}

void
vm_fail(struct vm *vm, const char *why)
{
	if (!vm->discarded)
		vm_fsm_fire(vm, VM_EV_FAIL, why);
}

/* The machine's fail action: the state is failed already, so that nothing
 * the cancel wakes may start the VM again. */
void
vm_act_fail(struct vm *vm, const char *why)
{
	char msg[512];

	log_warnx("vm %s: failed: %s", vm->rec.id, why);
	snprintf(msg, sizeof(msg), "VM %s failed: %s", vm->rec.id, why);
	vm_op_cancel(vm, "unavailable", msg);
	if (vm->discarded)
		return;
	vm_streams_close(vm, "failed");
	vm_kill_processes(vm);
	vm_wake_waiters(vm);
}

/* QEMU exited under a VM that was not stopping it. */
void
vm_act_qemu_gone(struct vm *vm, const char *why)
{
	vmm_free(vm->vmm);
	vm->vmm = NULL;
	vm_act_fail(vm, why);
}

/* An image's disk as admission counts it (admit.c). */
long long
image_disk_bytes(const struct conf_image *im)
{
	struct stat st;

	return stat(im->rootfs, &st) == 0 ? (long long)st.st_size : 0;
}

/* ---- destroy ----------------------------------------------------------- */

static void
vm_remove_files(struct vm *vm)
{
	static const char *const names[] = { DISK, KERNEL, INITRD, CHECKPOINT,
	    CHECKPOINT ".part",		/* the backend's unfinished one */
	    VMM_PID, VMM_PID ".new" };
	char path[PATH_MAX];
	DIR *d;
	struct dirent *de;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		vm_path(vm, names[i], path, sizeof(path));
		unlink(path);
	}
	/* A memory snapshot's file a crash left (btrfs, snapshot.c). */
	if ((d = opendir(vm->dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strncmp(de->d_name, VM_MEMORY_PREFIX,
			    strlen(VM_MEMORY_PREFIX)) != 0)
				continue;
			if ((size_t)snprintf(path, sizeof(path), "%s/%s",
			    vm->dir, de->d_name) < sizeof(path))
				unlink(path);
		}
		closedir(d);
	}
	/* On btrfs a subvolume: an empty one goes with rmdir too, with
	 * no capability, and its qgroup with it. */
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
 * Removes what is left of a VM whose processes are gone or going: its
 * files, its record and the VM itself, and answers whoever asked for its
 * destruction.  A disk job still writing into its directory is waited
 * for, and the cgroup cleanup of its processes: vm_io_done calls this
 * again when the last job is back.
 */
void
vm_teardown(struct vm *vm)
{
	char err[256];

	if (!vm->doomed) {
		vm->doomed = 1;
		vm_kill_processes(vm);
	}
	/* Done already, when the cgroup's cleanup ran inline (the worker
	 * pool refuses jobs once vmmd stops) and came back in here. */
	if (vm->io_pending > 0 || vm->discarded)
		return;
	vm_remove_files(vm);
	if (store_vm_delete(vmmd_store(), vm->rec.id, err, sizeof(err)) == -1)
		log_warnx("vm %s: not marked gone: %s", vm->rec.id, err);
	vm_discard(vm);
	vm_waits_gone(vm);
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
	vm_wait_gone(vm, cb, arg);
	vm_fsm_fire(vm, VM_EV_DESTROY, NULL);	/* a second one joins */
}

/* The machine's destroy action: the state is destroying already, so that
 * nothing the cancel wakes may start the VM again. */
void
vm_act_destroy(struct vm *vm, const char *why)
{
	vm_streams_close(vm, "destroyed");
	vm_op_cancel(vm, "not_found", "the VM was destroyed");
	vm_wake_waiters(vm);	/* each hears it is being destroyed */
	vm_teardown(vm);	/* kills its processes first */
}
