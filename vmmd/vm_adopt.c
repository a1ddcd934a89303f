/*
 * Taking up, after a restart, the VMs whose QEMU outlived the previous
 * vmmd (a crash, an OOM kill, `kill -9`, an upgrade's restart).  QEMU is
 * not vmmd's child and survives it; vmproxy does not (it ends with its
 * connection to vmmd), so each such VM gets a new vmproxy, which connects
 * to the QMP and link sockets QEMU still serves and says hello to the
 * guest again.  guestd keeps the jobs and their output, so nothing of a
 * job is lost; streams and broker pipes end and are opened again by their
 * clients.
 *
 * QEMU is found by the pid vmmd wrote when it started it (vm_pid_record),
 * which is trusted only once the process it names still has the VM's uid
 * and sits in the VM's cgroup (a pid may have been reused), and is held
 * by a pidfd from then on.  QEMU's
 * own status then decides the state (vm_fsm.c's found_running and
 * found_paused); a VM whose QEMU is gone is failed for that reason alone.
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"
#include "netclient.h"
#include "vmmd_broker.h"
#include "vmmd_shared.h"
#include "vm_local.h"

/* The pid in the VM's pid file, or -1 with why. */
static pid_t
adopt_pidfile(const struct vm *vm, char *why, size_t len)
{
	char path[PATH_MAX + 16], buf[32], *end;
	ssize_t n;
	long pid;
	int fd;

	vm_path(vm, VMM_PID, path, sizeof(path));
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		snprintf(why, len, "no record of QEMU's pid (%s)",
		    strerror(errno));
		return -1;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0) {
		snprintf(why, len, "QEMU's pid file is empty");
		return -1;
	}
	buf[n] = '\0';
	errno = 0;
	pid = strtol(buf, &end, 10);
	if (errno != 0 || end == buf || (*end != '\n' && *end != '\0') ||
	    pid <= 1 || pid > INT32_MAX) {
		snprintf(why, len, "QEMU's pid file does not hold a pid");
		return -1;
	}
	return (pid_t)pid;
}

/* 1 when pid runs with all four uids the VM's; -1 when it is gone. */
static int
adopt_uid_is(pid_t pid, uid_t uid)
{
	char path[64], line[256];
	unsigned long r, e, s, f;
	int found = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	if ((fp = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "Uid: %lu %lu %lu %lu", &r, &e, &s, &f) ==
		    4) {
			found = r == uid && e == uid && s == uid && f == uid;
			break;
		}
	fclose(fp);
	return found;
}

/*
 * QEMU's pid if this VM's QEMU still runs, checked as above; -1 with why
 * if it does not (or cannot be told apart from something else).
 */
static pid_t
adopt_find_qemu(const struct vm *vm, char *why, size_t len)
{
	pid_t pid, procs[64];
	ssize_t n;
	int in = 0;

	if ((pid = adopt_pidfile(vm, why, len)) == -1)
		return -1;
	if (vmmd_cg()->layout == CG_LAYOUT_NONE) {
		snprintf(why, len, "without cgroups a surviving QEMU cannot "
		    "be told apart from another process");
		return -1;
	}
	if ((n = cg_procs(vmmd_cg(), (unsigned)vm->rec.slot, procs,
	    sizeof(procs) / sizeof(procs[0]))) <= 0) {
		snprintf(why, len, "its cgroup holds no process");
		return -1;
	}
	for (ssize_t i = 0; i < n && i < (ssize_t)(sizeof(procs) /
	    sizeof(procs[0])); i++)
		if (procs[i] == pid)
			in = 1;
	if (!in) {
		snprintf(why, len, "pid %ld of QEMU's pid file is not in the "
		    "VM's cgroup", (long)pid);
		return -1;
	}
	switch (adopt_uid_is(pid, vm->uid)) {
	case 1:
		return pid;
	case 0:
		snprintf(why, len, "pid %ld does not run as the VM's uid",
		    (long)pid);
		return -1;
	default:
		snprintf(why, len, "QEMU (pid %ld) is gone", (long)pid);
		return -1;
	}
}

static void adopt_done(struct vm *, const char *, const char *, void *);

/* The adoption is still the VM's operation, with this QEMU: a VM failed
 * or destroyed meanwhile ended it (and the backend calls nobody back once
 * its QEMU is freed). */
static int
adopting(const struct vm *vm, const struct vmm *vmm)
{
	return vm->vmm == vmm && vm->busy && vm->op_cb == adopt_done;
}

static void
adopt_fail(struct vm *vm, const char *what, const char *err)
{
	char why[512];

	snprintf(why, sizeof(why), "vmmd restarted and could not take up the "
	    "VM's QEMU: %s: %s", what, err);
	/* The fail ends the adoption first, then wakes the waiters. */
	vm_fail(vm, why);
}

static void
adopt_paused(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;

	if (!adopting(vm, vmm) || vm->rec.state != VM_PAUSED)
		return;
	if (!ok) {
		adopt_fail(vm, "stopping QEMU as the paused VM it was", err);
		return;
	}
	vm_fsm_fire(vm, VM_EV_FOUND_PAUSED, "QEMU was running; stopped again");
	vm_op_done(vm, NULL, NULL);
}

static void
adopt_status(struct vmm *vmm, int ok, const char *status, void *arg)
{
	struct vm *vm = arg;

	if (!adopting(vm, vmm))
		return;
	if (!ok) {
		adopt_fail(vm, "QEMU's status", status != NULL ? status :
		    "no answer");
		return;
	}
	log_info("vm %s: taken up; QEMU says %s, the record %s", vm->rec.id,
	    status, vm_state_name(vm->rec.state));
	if (vm->rec.state == VM_HIBERNATING) {
		char cp[PATH_MAX], part[PATH_MAX + 8];

		/* The hibernation is given up: its checkpoint, whole or
		 * not, must never be restored over a disk that runs on. */
		vm_path(vm, CHECKPOINT, cp, sizeof(cp));
		snprintf(part, sizeof(part), "%s.part", cp);
		(void)unlink(part);
		(void)unlink(cp);
	}
	if (strcmp(status, "running") == 0) {
		if (vm->rec.state == VM_PAUSED) {
			/* A resume vmmd died in: stopped again, its next
			 * resume thaws the jobs. */
			if (vmm_pause(vm->vmm, adopt_paused, vm) == -1)
				adopt_fail(vm, "stopping QEMU",
				    strerror(errno));
			return;
		}
		vm_fsm_fire(vm, VM_EV_FOUND_RUNNING, status);
		vm_touch(vm);
		/* A snapshot's freeze vmmd died in is undone at once, not
		 * after guestd's own 60 s: thawed at the guest's hello. */
		vm->adopt_thaw = 1;
		if (vm->guest_up)
			vm_adopt_thaw(vm);
	} else if (strcmp(status, "paused") == 0 ||
	    strcmp(status, "postmigrate") == 0 ||
	    strcmp(status, "finish-migrate") == 0)
		vm_fsm_fire(vm, VM_EV_FOUND_PAUSED, status);
	else {
		adopt_fail(vm, "QEMU's status", status);
		return;
	}
	vm_op_done(vm, NULL, NULL);
}

static void
adopt_vmm_done(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;

	if (!adopting(vm, vmm))
		return;
	if (!ok) {
		adopt_fail(vm, "QEMU's monitor", err);
		return;
	}
	/* The broker pipes' limits and routes, before any job can run. */
	broker_proxy_up(vm);
	if (vmm_status(vm->vmm, adopt_status, vm) == -1)
		adopt_fail(vm, "QEMU's status", strerror(errno));
}

/*
 * A running VM taken up is thawed once: jobs and file systems that a
 * snapshot vmmd died in had frozen (the thaw of a guest that is not
 * frozen only sets its clock).
 */
void
vm_adopt_thaw(struct vm *vm)
{
	struct json_object *call;

	if (!vm->adopt_thaw || vm->rec.state != VM_RUNNING)
		return;
	vm->adopt_thaw = 0;
	call = json_object_new_object();
	json_object_object_add(call, "op", json_object_new_string("thaw"));
	json_object_object_add(call, "realtime_ns",
	    json_object_new_int64(wall_ms() * 1000000LL));
	if (proxy_call(vm, call, GUEST_CTL_CALL_MS, NULL, NULL) == -1)
		log_warnx("vm %s: taken up, but not thawed: vmproxy is gone",
		    vm->rec.id);
	json_object_put(call);
}

static void
adopt_done(struct vm *vm, const char *code, const char *msg, void *arg)
{
	if (code != NULL)
		log_warnx("vm %s: not taken up: %s", vm->rec.id, msg);
}

int
vm_adopt(struct vm *vm, char *why, size_t len)
{
	struct vm_spec spec;
	pid_t pid;
	char err[256];

	if ((pid = adopt_find_qemu(vm, why, len)) == -1)
		return -1;
	/* The operation holds requests back until QEMU's status is known. */
	vm_op_begin(vm, adopt_done, NULL);
	if (proxy_spawn(vm, err, sizeof(err)) == -1) {
		vm_op_done(vm, "unavailable", "vmproxy: %s", err);
		snprintf(why, len, "vmproxy could not start: %s", err);
		return -1;
	}
	memset(&spec, 0, sizeof(spec));
	spec.slot = (unsigned)vm->rec.slot;
	spec.uid = vm->uid;
	spec.gid = vm->gid;
	spec.rundir = vm->rundir;
	spec.tap_fd = -1;
	spec.console_fd = -1;
	spec.log_fd = -1;
	spec.mon = &vm->mon;
	spec.cg = vmmd_cg();
	if (qemu_backend_ops.adopt(vmmd_qemu(), &spec, pid, &vm_vmm_cbs, vm,
	    adopt_vmm_done, vm, &vm->vmm) == -1) {
		snprintf(why, len, "QEMU (pid %ld): %s", (long)pid,
		    strerror(errno));
		proxy_stop(vm);
		vm_op_done(vm, "unavailable", "%s", why);
		return -1;
	}
	/* netd keeps the slot's objects: its next sync must list it. */
	if (vm->rec.network)
		netclient_keep(vm->rec.slot, vm_egress_now(vm),
		    vm->rec.egress_rate);
	return 0;
}
