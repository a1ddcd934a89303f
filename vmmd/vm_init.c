/*
 * vmmd's VM lifecycle put together: the state machine (vm_fsm.c) gets its
 * hooks (vm.c records states and fails or destroys VMs, vm_boot.c goes on
 * with a boot, vm_suspend.c resumes), vmproxy's reports go into the
 * machine, vm.c frees a VM's broker pipes with it, and at startup every
 * VM of the store is taken up again.
 * Nothing below calls up into this file.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmd_broker.h"
#include "log.h"
#include "vmmd_shared.h"
#include "vm_local.h"

/* ---- the machine's hooks ----------------------------------------------- */

/* vmmd stops: a VM that sleeps stays asleep. */
static int
vm_resume_hook(struct vm *vm, char *why, size_t len)
{
	if (vmmd_shutting_down()) {
		snprintf(why, len, "vmmd is shutting down");
		return -1;
	}
	return vm_resume(vm, why, len);
}

/* vmproxy's events (to_vmproxy.c), into the machine. */
static void
proxy_report(struct vm *vm, enum vm_event ev, const char *why)
{
	if (ev == VM_EV_FAIL)
		vm_fail(vm, why);
	else
		vm_fsm_fire(vm, ev, why);
}

/* vmproxy's counts: the broker's pipes, then the streams (which keep
 * their names while a pipe is attached). */
static void
proxy_streams(struct vm *vm, int open, int pipes)
{
	broker_pipes_count(vm, pipes);
	vm_streams_count(vm, open, broker_has_pipes(vm));
}

/* The guest's link: bounded while down (vm.c); a VM taken up after a
 * restart is thawed once it is up (vm_adopt.c). */
static void
vm_link_hook(struct vm *vm, int up)
{
	vm_link_watch(vm, up);
	if (up)
		vm_adopt_thaw(vm);
}

static void
vm_fsm_start(void)
{
	struct proxy_reports pr = { proxy_report, proxy_streams };
	struct vm_fsm_hooks h;

	memset(&h, 0, sizeof(h));
	h.record = vm_record_state;
	h.resume = vm_resume_hook;
	h.settled = vmmd_maybe_exit;
	h.link = vm_link_hook;
	h.act[VM_ACT_BOOT_HELLO] = vm_boot_hello;
	h.act[VM_ACT_BOOT_THAW] = vm_boot_thaw;
	h.act[VM_ACT_RESUME_THAW] = vm_resume_thaw;
	h.act[VM_ACT_BOOT_EXPIRED] = vm_boot_expired;
	h.act[VM_ACT_FAIL] = vm_act_fail;
	h.act[VM_ACT_QEMU_GONE] = vm_act_qemu_gone;
	h.act[VM_ACT_DESTROY] = vm_act_destroy;
	vm_fsm_init(&h);
	proxy_set_reports(&pr);
	vm_on_free(broker_vm_free);
	vmmd_pending_register(vm_work_pending);
}

/* ---- startup ----------------------------------------------------------- */

static void
run_destroyed(struct vm *vm, const char *code, const char *msg, void *arg)
{
	(void)vm;
	if (code != NULL)
		log_warnx("vm %s: destroying it: %s", (const char *)arg,
		    msg != NULL ? msg : code);
	free(arg);
}

/*
 * A VM of vm_run's that the last vmmd left: its command's caller heard
 * nothing (the receipt says uncertain) and nobody else may use the VM,
 * so it is failed, saying why, and destroyed as the shutdown would have.
 * Its processes died with their cgroup above.
 */
static void
run_left_behind(struct vm *vm)
{
	char *id;

	log_warnx("vm %s: vm_run's VM, left by the last vmmd: destroyed",
	    vm->rec.id);
	if (vm->rec.state != VM_FAILED)
		vm_fsm_fire(vm, VM_EV_RESTART, "vmmd stopped while vm_run's "
		    "command ran; its VM is destroyed");
	if ((id = strdup(vm->rec.id)) == NULL)
		fatal("strdup");
	vm_destroy(vm, run_destroyed, id);
}

void
vm_init_all(void)
{
	struct vm_record *recs;
	struct vm *vm;
	unsigned slots[4096];
	char err[256];
	ssize_t nslots;
	size_t n;

	vm_fsm_start();
	if (store_vm_list(vmmd_store(), NULL, &recs, &n, err, sizeof(err)) ==
	    -1)
		fatalx("cannot read VMs from the store: %s", err);
	/*
	 * A VM whose QEMU outlived the last vmmd is taken up (vm_adopt.c)
	 * and keeps its cgroup; whatever else a previous life left running
	 * dies through its cgroup.
	 */
	for (size_t i = 0; i < n; i++) {
		char why[256];

		vm = vm_alloc(&recs[i]);
		if (vm->rec.run)
			continue;	/* destroyed below */
		switch (vm->rec.state) {
		case VM_RUNNING:
		case VM_PAUSED:
		case VM_HIBERNATING:
			if (vm_adopt(vm, why, sizeof(why)) == 0)
				vm->adopted = 1;
			else
				log_info("vm %s: not taken up: %s",
				    vm->rec.id, why);
			break;
		default:
			break;
		}
	}
	nslots = cg_list(vmmd_cg(), slots, sizeof(slots) / sizeof(slots[0]));
	for (ssize_t i = 0; i < nslots; i++) {
		int kept = 0;

		TAILQ_FOREACH(vm, vm_all(), entry)
			if (vm->adopted && vm->rec.slot == (int)slots[i])
				kept = 1;
		if (kept)
			continue;
		if (cg_kill(vmmd_cg(), slots[i], err, sizeof(err)) == -1)
			log_warnx("leftover cgroup vm-%u: %s", slots[i], err);
		else
			log_info("killed what was left in cgroup vm-%u",
			    slots[i]);
		cg_remove(vmmd_cg(), slots[i], err, sizeof(err));
	}
	TAILQ_FOREACH(vm, vm_all(), entry) {
		char cp[PATH_MAX];
		struct stat st;

		if (vm->image == NULL)
			log_info("vm %s: image %s is no longer configured; the "
			    "VM keeps its own copy", vm->rec.id, vm->rec.image);
		if (vm->adopted)
			continue;
		if (vm->rec.run) {
			run_left_behind(vm);
			continue;
		}
		switch (vm->rec.state) {
		case VM_HIBERNATED:
			vm_path(vm, CHECKPOINT, cp, sizeof(cp));
			if (stat(cp, &st) == -1)
				vm_fsm_fire(vm, VM_EV_RESTART, "its checkpoint "
				    "is missing");
			break;
		case VM_FAILED:
			break;
		default: {
			char why[160];

			/* An interrupted boot, resume or destroy, or a VM
			 * whose QEMU is gone: its outcome is unknown. */
			snprintf(why, sizeof(why), "vmmd stopped while the VM "
			    "was %s, and its QEMU did not survive",
			    vm_state_name(vm->rec.state));
			vm_fsm_fire(vm, VM_EV_RESTART, why);
			log_warnx("vm %s: %s", vm->rec.id, why);
		}
		}
	}
	free(recs);
	vm_idle_start();
}

