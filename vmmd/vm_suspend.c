/*
 * vmmd's VMs: pausing, hibernating and resuming, the waiters for a VM to
 * run again, idle suspension and the hibernation of every VM when vmmd
 * stops.  A suspend freezes the guest's jobs first, then pauses QEMU or
 * has the backend write a checkpoint; a resume continues QEMU or boots it
 * from the checkpoint (vm_boot.c), then thaws the guest with the time.
 * The guest's answers count only as what they are: one that cannot
 * freeze is stopped anyway, one whose clock cannot be set fails its VM.
 * The states change through the machine (vm_fsm.c), which keeps the
 * waiters; it resumes a VM for them with vm_resume.  Shares vm_local.h
 * with vm.c and vm_boot.c.
 */
#include <sys/types.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "log.h"
#include "vmmd_shared.h"
#include "vm_local.h"
#include "vmmd_broker.h"

#define IDLE_TICK_SECONDS	1

static struct event *idle_tick;

/* ---- suspend and resume ------------------------------------------------ */

static void
suspend_vmm_done(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;
	char cp[PATH_MAX], why[256];

	if (vm->op_pause) {
		if (!ok) {
			vm_op_done(vm, "unavailable", "pause failed: %s", err);
			return;
		}
		vm_fsm_fire(vm, VM_EV_PAUSED, NULL);
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
		vm_fsm_fire(vm, VM_EV_RUNS_ON, err);
		vm_op_done(vm, "unavailable", "hibernation failed, the VM "
		    "runs on: %s", err);
		return;
	}
	/* On disk: QEMU has exited, vmproxy and the cgroup go too. */
	vm_path(vm, CHECKPOINT, cp, sizeof(cp));
	vm_kill_processes(vm);	/* the network too: resume makes it again */
	if (store_vm_set_generation(vmmd_store(), vm->rec.id,
	    vm->rec.generation + 1, why, sizeof(why)) == -1)
		log_warnx("vm %s: generation %d not recorded: %s", vm->rec.id,
		    vm->rec.generation + 1, why);
	vm->rec.generation++;
	vm_fsm_fire(vm, VM_EV_CHECKPOINTED, NULL);
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
	vm_fsm_fire(vm, VM_EV_CHECKPOINT, NULL);
	vm_path(vm, CHECKPOINT, cp, sizeof(cp));
	if (vmm_snapshot(vm->vmm, cp, suspend_vmm_done, vm) == -1) {
		vm_fsm_fire(vm, VM_EV_RUNS_ON, "QEMU is busy");
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
		vm_fsm_fire(vm, VM_EV_CHECKPOINT, NULL);
		{
			char cp[PATH_MAX];

			vm_path(vm, CHECKPOINT, cp, sizeof(cp));
			if (vmm_snapshot(vm->vmm, cp, suspend_vmm_done, vm) ==
			    -1) {
				vm_fsm_fire(vm, VM_EV_STAYS_PAUSED,
				    "QEMU is busy");
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
	vm_fsm_fire(vm, VM_EV_THAWED, NULL);
	vm_touch(vm);
	vm_op_done(vm, NULL, NULL);
}

/* The machine's resume_thaw, and a resume's own end: QEMU runs again, so
 * the guest's jobs are thawed with the time. */
void
vm_resume_thaw(struct vm *vm, const char *why)
{
	struct json_object *call;

	vm->guest_up = 1;
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
resume_vmm_done(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;

	if (!ok) {
		vm_op_done(vm, "unavailable", "resume failed: %s", err);
		return;
	}
	if (vm->guest_up) {
		vm_resume_thaw(vm, NULL);
		return;
	}
	/*
	 * A VM taken up while paused (vm_adopt.c) has a new vmproxy whose
	 * hello a stopped guest could not answer: the thaw waits for it,
	 * as long as a boot would.
	 */
	vm_op_step(vm, VM_STEP_HELLO);
	vm_boot_timer_start(vm);
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

/* Resumes a paused or hibernated VM for its waiters (the machine's resume
 * hook): they hear when it runs again. */
int
vm_resume(struct vm *vm, char *why, size_t len)
{

	if (vm->rec.state == VM_PAUSED) {
		vm_op_begin(vm, NULL, NULL);
		if (vmm_resume(vm->vmm, resume_vmm_done, vm) == -1)
			vm_op_done(vm, "busy", "QEMU is busy");
		return 0;
	}
	vm_op_begin(vm, restore_done, NULL);
	vm_fsm_fire(vm, VM_EV_RESTORE, NULL);
	/* The cgroup of its last run may still be on its way out. */
	if (vm->io_pending > 0) {
		vm->io_then = vm_restore;
		return 0;
	}
	vm_restore(vm);
	return 0;
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

	vm_op_step(vm, VM_STEP_NONE);
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

	TAILQ_FOREACH_SAFE(vm, vm_all(), entry, next) {
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
		vm_op_step(vm, VM_STEP_PROBE);
		if (proxy_call(vm, call, GUEST_CTL_CALL_MS, idle_activity, NULL) ==
		    -1)
			vm_op_step(vm, VM_STEP_NONE);
		json_object_put(call);
	}
	if (!vmmd_shutting_down())
		evtimer_add(idle_tick, &tv);
}

static void
shutdown_suspended(struct vm *vm, const char *code, const char *msg,
    void *arg)
{
	/*
	 * A VM whose checkpoint could not be written (a full disk) runs on,
	 * its jobs thawed: vmmd leaves its QEMU running, and the next vmmd
	 * takes it up (vm_adopt.c).  Failing it would lose what the disk
	 * could not hold.
	 */
	if (code != NULL) {
		log_warnx("vm %s: not hibernated at shutdown: %s; left %s for "
		    "the next vmmd to take up", vm->rec.id, msg,
		    vm_state_name(vm->rec.state));
		vmmd_left_running();
	} else
		vmmd_hibernated();
	vmmd_maybe_exit();
}

void
vm_hibernate_all(void)
{
	struct vm *vm, *next;

	TAILQ_FOREACH_SAFE(vm, vm_all(), entry, next) {
		if (vm->rec.state == VM_RUNNING || vm->rec.state == VM_PAUSED)
			vm_suspend(vm, 0, shutdown_suspended, NULL);
	}
}

/* The idle tick, from startup on. */
void
vm_idle_start(void)
{
	struct timeval tv = { IDLE_TICK_SECONDS, 0 };

	idle_tick = evtimer_new(vmmd_base(), idle_tick_cb, NULL);
	evtimer_add(idle_tick, &tv);
}
