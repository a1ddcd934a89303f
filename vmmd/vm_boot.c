/*
 * vmmd's VMs: booting and creating.  A boot starts the VM's vmproxy, then
 * QEMU (fresh or from a checkpoint) through the backend, and waits for the
 * guest's hello to set its clock; a VM with network first gets its TAP
 * from netd.  A create copies the image's disk, kernel and initrd on the
 * worker pool, then boots.  The guest's hello reaches the boot through the
 * state machine (vm_fsm.c), whose boot actions are here; the guest itself
 * is trusted for nothing but its hello, and a boot that does not hear it
 * in time fails.  Shares vm_local.h with vm.c and vm_suspend.c.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "b64.h"
#include "backend.h"
#include "disk.h"
#include "log.h"
#include "netclient.h"
#include "quota.h"
#include "snapshot.h"
#include "vmmd_shared.h"
#include "vm_local.h"
#include "guest.h"
#include "vmmd_broker.h"
#include "worker.h"

#define QEMU_OVERHEAD_MIB	768	/* QEMU's own memory beside the guest */
#define CONSOLE_PIPE_BYTES	(1024 * 1024)	/* the default pipe-max-size */

/* ---- booting and restoring --------------------------------------------- */

static void boot_timeout_cb(int, short, void *);

static void
vm_exited(struct vmm *vmm, int wstatus, void *arg)
{
	struct vm *vm = arg;

	if (vm->vmm != vmm)
		return;
	/* Hibernation and destroy stop QEMU themselves; anything else is a
	 * VM that died under us (the table says which). */
	vm_fsm_fire(vm, VM_EV_QEMU_EXIT, "QEMU exited unexpectedly");
}

static void
vm_vmm_event(struct vmm *vmm, const char *name, void *arg)
{
	log_debug("vm %s: QEMU event %s", ((struct vm *)arg)->rec.id, name);
}

const struct vmm_cbs vm_vmm_cbs = { vm_exited, vm_vmm_event };

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
	spec->vm = vm->rec.id;
	spec->tap_fd = -1;	/* network on comes with netd */
	spec->console_fd = -1;	/* vm_boot makes the pipes */
	spec->log_fd = -1;
	spec->mon = &vm->mon;	/* QMP goes through vmproxy */
	spec->cg = vmmd_cg();
	/* The same on every boot and restore of this VM: "" is none. */
	spec->vmgenid = vm->rec.vmgenid[0] != '\0' ? vm->rec.vmgenid : NULL;
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
	vm_fsm_fire(vm, VM_EV_BOOTED, NULL);
	vm_touch(vm);
	vm_op_done(vm, NULL, NULL);
}

/* Sets the guest's clock, or thaws its jobs with it after a restore. */
static void
boot_clock(struct vm *vm)
{
	struct json_object *call = json_object_new_object();

	vm_op_step(vm, VM_STEP_CLOCK);
	json_object_object_add(call, "op", json_object_new_string(
	    vm->rec.state == VM_RESUMING || vm->restored ? "thaw" :
	    "clock_set"));
	json_object_object_add(call, "realtime_ns",
	    json_object_new_int64(wall_ms() * 1000000LL));
	if (proxy_call(vm, call, GUEST_CTL_CALL_MS, boot_clock_done,
	    op_token(vm)) == -1)
		boot_clock_done(vm, NULL, "unavailable", "vmproxy is gone", -1,
		    op_token(vm));
	json_object_put(call);
}

static void
boot_identity_done(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	if (!op_current(vm, arg))
		return;
	if (code != NULL) {
		/* Never a clone that shares its source's identity. */
		vm_fail(vm, "the clone could not be given an identity of its "
		    "own");
		vm_op_done(vm, "unavailable", "VM %s failed: the guest did not "
		    "take an identity of its own (%s)", vm->rec.id, msg);
		return;
	}
	boot_clock(vm);
}

/* 16 random bytes as 32 lowercase hex digits (vm_id, machine-id), or as a
 * version 4 UUID with its dashes when uuid is set (boot id, vmgenid). */
static void
random_hex(char *out, int uuid)
{
	unsigned char rnd[16];
	size_t o = 0;

	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		fatalx("RAND_bytes failed");
	if (uuid) {
		rnd[6] = (unsigned char)((rnd[6] & 0x0f) | 0x40);
		rnd[8] = (unsigned char)((rnd[8] & 0x3f) | 0x80);
	}
	for (size_t i = 0; i < sizeof(rnd); i++) {
		if (uuid && (i == 4 || i == 6 || i == 8 || i == 10))
			out[o++] = '-';
		snprintf(out + o, 3, "%02x", rnd[i]);
		o += 2;
	}
}

/* The clone's own slot, as netd gave it (guest.h "identity", "net"). */
static struct json_object *
identity_net(const struct net_lease *l)
{
	struct json_object *o = json_object_new_object();
	struct json_object *dns = json_object_new_array();

	json_object_object_add(o, "mac", json_object_new_string(l->mac));
	json_object_object_add(o, "address",
	    json_object_new_string(l->address));
	json_object_object_add(o, "prefix", json_object_new_int(l->prefix));
	json_object_object_add(o, "gateway",
	    json_object_new_string(l->gateway));
	for (int i = 0; i < l->ndns; i++)
		json_object_array_add(dns, json_object_new_string(l->dns[i]));
	json_object_object_add(o, "dns", dns);
	return o;
}

/*
 * A VM restored from another's memory (a memory snapshot, a fork) still
 * holds that machine's machine-id, boot id, hostname and random state.
 * Before its jobs thaw, guestd takes new ones (guest.h "identity"): the
 * hostname is "mcpvm-" and the vm_id's first 12 hex digits, the rest is
 * fresh from the host's RNG, the entropy too; with network, eth0 moves
 * to the clone's own slot (its MAC, address, gateway and resolvers).
 * docs/snapshots.md says what a clone still shares.
 */
static void
boot_identity(struct vm *vm)
{
	unsigned char ent[GUEST_ENTROPY_BYTES];
	char machine_id[GUEST_MACHINE_ID_LEN + 1], boot_id[GUEST_UUID_LEN + 1];
	char host[GUEST_HOSTNAME_MAX + 1], *b64;
	struct json_object *call;
	size_t len;

	vm_op_step(vm, VM_STEP_IDENTITY);
	random_hex(machine_id, 0);
	random_hex(boot_id, 1);
	snprintf(host, sizeof(host), "mcpvm-%.12s", vm->rec.id);
	if (RAND_bytes(ent, sizeof(ent)) != 1)
		fatalx("RAND_bytes failed");
	if ((b64 = b64_encode(ent, sizeof(ent), &len)) == NULL)
		fatal("identity");
	OPENSSL_cleanse(ent, sizeof(ent));
	call = json_object_new_object();
	json_object_object_add(call, "op", json_object_new_string("identity"));
	json_object_object_add(call, "machine_id",
	    json_object_new_string(machine_id));
	json_object_object_add(call, "boot_id", json_object_new_string(boot_id));
	json_object_object_add(call, "hostname", json_object_new_string(host));
	json_object_object_add(call, "entropy_b64",
	    json_object_new_string_len(b64, (int)len));
	OPENSSL_cleanse(b64, len);
	free(b64);
	if (vm->rec.network && vm->net.mac[0] != '\0')
		json_object_object_add(call, "net", identity_net(&vm->net));
	log_info("vm %s: restored from a snapshot: giving it machine-id %s, "
	    "boot id %s, hostname %s%s%s", vm->rec.id, machine_id, boot_id,
	    host, vm->net.mac[0] != '\0' ? ", address " : "",
	    vm->net.mac[0] != '\0' ? vm->net.address : "");
	if (proxy_call(vm, call, GUEST_CTL_CALL_MS, boot_identity_done,
	    op_token(vm)) == -1)
		boot_identity_done(vm, NULL, "unavailable", "vmproxy is gone", -1,
		    op_token(vm));
	json_object_put(call);
}

/* The machine's boot_hello: the hello a create waited for.  A clone is
 * made a machine of its own first. */
void
vm_boot_hello(struct vm *vm, const char *why)
{
	vm->guest_up = 1;
	if (vm->restored)
		boot_identity(vm);
	else
		boot_clock(vm);
}

/* The machine's boot_thaw: the hello a restore waited for. */
void
vm_boot_thaw(struct vm *vm, const char *why)
{
	vm->guest_up = 1;
	boot_clock(vm);
}

/* The guest has boot_timeout_seconds to say hello. */
void
vm_boot_timer_start(struct vm *vm)
{
	struct timeval tv = { vmmd_conf()->vmmd.boot_timeout_seconds, 0 };

	if (vm->boot_timer == NULL)
		vm->boot_timer = evtimer_new(vmmd_base(), boot_timeout_cb, vm);
	evtimer_add(vm->boot_timer, &tv);
}

static void
boot_vmm_done(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;

	if (!ok) {
		vm_kill_processes(vm);
		vm_op_done(vm, "unavailable", "QEMU did not start: %s", err);
		return;
	}
	vm_op_step(vm, VM_STEP_HELLO);
	vm_boot_timer_start(vm);
	/* vmproxy ran before QEMU: a quick guest may have said it already. */
	if (vm->guest_up)
		vm_fsm_fire(vm, VM_EV_HELLO, NULL);
}

static void
boot_timeout_cb(int fd, short ev, void *arg)
{
	vm_fsm_fire(arg, VM_EV_BOOT_TIMEOUT, NULL);
}

/* The machine's boot_expired: the boot waited for the hello in vain. */
void
vm_boot_expired(struct vm *vm, const char *why)
{
	vm_kill_processes(vm);
	vm_op_done(vm, "unavailable", "the guest did not come up within %lld "
	    "seconds", vmmd_conf()->vmmd.boot_timeout_seconds);
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
	if (cg_create(vmmd_cg(), (unsigned)vm->rec.slot, &lim, err, errlen) ==
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
	/* The disk is the VM's uid's; a snapshot's clone that a crash
	 * interrupted may have left it root's (snapshot.c). */
	if (disk_chown(disk, vm->uid, vm->gid, err, errlen) == -1)
		return -1;
	/*
	 * The console goes to a pipe that vmproxy drains into a bounded
	 * file (console_log_kib); until vmproxy runs the pipe holds what
	 * the boot prints, so it is made large enough for all of that.
	 */
	proxy_console_close(vm);
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
		proxy_console_close(vm);
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
	spec.hold = checkpoint != NULL && vm->hold_restore;
	vm_op_step(vm, VM_STEP_NONE);
	if (checkpoint == NULL)
		rc = qemu_backend_ops.start(vmmd_qemu(), &spec, &vm_vmm_cbs, vm,
		    boot_vmm_done, vm, &vm->vmm);
	else
		rc = qemu_backend_ops.restore(vmmd_qemu(), &spec, checkpoint,
		    &vm_vmm_cbs, vm, boot_vmm_done, vm, &vm->vmm);
	close(con[1]);		/* QEMU has its copies */
	close(qlog[1]);
	if (rc == -1) {
		snprintf(err, errlen, "QEMU: %s", strerror(errno));
		proxy_stop(vm);
		return -1;
	}
	vm_pid_record(vm, vmm_pid(vm->vmm));
	return 0;
}

/*
 * Writes QEMU's pid into the VM's own directory (root's), whole or not at
 * all, for a restarted vmmd to take QEMU up (vm_adopt.c).  Without it the
 * VM still runs; it just would not outlive a vmmd crash.
 */
void
vm_pid_record(struct vm *vm, pid_t pid)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8], buf[32];
	int fd, n;

	vm_path(vm, VMM_PID, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)pid);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) == -1 || write(fd, buf, (size_t)n) != n ||
	    close(fd) == -1 || rename(tmp, path) == -1) {
		log_warn("vm %s: %s", vm->rec.id, path);
		(void)unlink(tmp);
	}
}

/* A VM with network asks netd first; its TAP then goes to QEMU. */
struct boot_net {
	char	 checkpoint[PATH_MAX];
	int	 has_checkpoint;
	void	*op;		/* op_token() of the boot that asked */
};

static void
boot_net_done(struct vm *vm, int tap_fd, const struct net_lease *lease,
    const char *code, const char *msg, void *arg)
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
		netclient_release(vm->rec.id, vm->rec.slot);
		free(bn);
		return;
	}
	vm->net_refused = code != NULL;
	if (code == NULL)
		vm->net = *lease;
	if (code != NULL)
		vm_op_done(vm, "unavailable", "guest network: %s", msg);
	else if (vm_boot_vmm(vm, bn->has_checkpoint ? bn->checkpoint : NULL,
	    tap_fd, lease->mac, lease->cmdline, err, sizeof(err)) == -1)
		vm_op_done(vm, "unavailable", "the VM could not start: %s",
		    err);
	/* QEMU has its copy once started. */
	if (tap_fd != -1)
		close(tap_fd);
	free(bn);
}

int
vm_boot(struct vm *vm, const char *checkpoint, char *err, size_t errlen)
{
	struct boot_net *bn;

	memset(&vm->net, 0, sizeof(vm->net));
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
	vm_op_step(vm, VM_STEP_NONE);
	bn->op = op_token(vm);
	netclient_setup(vm, vm->rec.id, vm->rec.slot, vm_egress_now(vm),
	    vm->rec.egress_rate, boot_net_done, bn);
	return 0;
}

/* ---- create ------------------------------------------------------------ */

struct create_ctx {
	struct request	*req;
	vm_done_cb	 cb;		/* the requester's */
	void		*arg;
	int		 jobs;		/* file jobs still out (create_files) */
	int		 settled;	/* quota_settle's job was sent */
	/* From a snapshot: checked, its disk cloned, its memory restored. */
	int		 has_snap;
	struct snap_record snap;
};

static void create_boot(struct vm *);
static void create_settle(struct vm *);

/* A failed create's answer, kept until its VM is gone. */
struct create_failed {
	vm_done_cb	 cb;
	void		*arg;
	char		 code[32];
	char		 msg[600];
};

static void
create_failed_gone(struct vm *vm, const char *code, const char *msg,
    void *arg)
{
	struct create_failed *f = arg;

	f->cb(vm, f->code, f->msg, f->arg);
	free(f);
}

/*
 * The end of a create, either way.  A VM that never came up leaves
 * nothing behind: no files, no processes, only its id as destroyed, and
 * its requester hears of the failure only once that is so (a QEMU that
 * was started is killed and its cgroup removed first).  One destroyed
 * while it was being created is torn down by vm_destroy.
 */
static void
create_done(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct create_ctx *cx = arg;
	struct create_failed *f;

	if (code != NULL && vm->rec.state == VM_DESTROYING) {
		char why[128];

		snprintf(why, sizeof(why), "VM %s was destroyed before it "
		    "finished booting", vm->rec.id);
		cx->cb(vm, "conflict", why, cx->arg);
	} else if (code != NULL) {
		log_warnx("vm %s: create failed: %s", vm->rec.id, msg);
		if ((f = calloc(1, sizeof(*f))) == NULL)
			fatal("calloc");
		f->cb = cx->cb;
		f->arg = cx->arg;
		snprintf(f->code, sizeof(f->code), "%s", code);
		snprintf(f->msg, sizeof(f->msg), "%s", msg);
		vm_destroy(vm, create_failed_gone, f);
	} else
		cx->cb(vm, NULL, NULL, cx->arg);
	free(cx);
}

/*
 * One job of a create came back.  The VM may have been destroyed or
 * failed meanwhile: its teardown waited for every job, and goes on as
 * each returns.  Otherwise a failure ends the create at once (the
 * teardown waits for the jobs still out), and the last file job boots
 * the VM.  The snapshot's check gates only the restore itself.
 */
static void
create_job_done(struct vm *vm, int rc, const char *code, const char *err,
    int check)
{
	struct create_ctx *cx;

	if (vm->doomed) {
		vm_io_done(vm);
		return;
	}
	vm->io_pending--;
	if (!vm->busy || vm->op_cb != create_done) {
		/* Only a teardown ends a create early, and it is doomed. */
		log_warnx("vm %s: %s: no create in progress", vm->rec.id,
		    __func__);
		return;
	}
	cx = vm->op_arg;
	if (rc == -1) {
		vm_op_done(vm, code, "%s", err);
		return;
	}
	if (check && cx->snap.memory) {
		vm->hold_restore = 0;
		/* A QEMU already started waits for this. */
		if (vm->vmm != NULL)
			qemu_backend_ops.release(vm->vmm);
	} else if (--cx->jobs == 0)
		create_settle(vm);
}

struct settle_job {
	struct vm	*vm;
	char		 dir[PATH_MAX];
	int		 rc;
	char		 err[512];
};

static void
settle_run(void *arg)
{
	struct settle_job *j = arg;

	j->rc = quota_settle(j->dir, j->err, sizeof(j->err));
}

static void
settle_done(void *arg)
{
	struct settle_job *j = arg;
	struct vm *vm = j->vm;
	char why[600];

	snprintf(why, sizeof(why), "the VM could not be created: %s", j->err);
	if (j->rc == 0) {
		/* The last job: create_job_done boots. */
		create_job_done(vm, 0, NULL, NULL, 0);
	} else
		create_job_done(vm, -1, "unavailable", why, 0);
	free(j);
}

/*
 * The files are there.  On btrfs the disk clone's extents count against
 * the VM's subvolume only once the volume commits (quota_settle, on the
 * worker pool): before QEMU may write, as one more job.
 */
static void
create_settle(struct vm *vm)
{
	struct create_ctx *cx = vm->op_arg;
	struct settle_job *j;

	if (!quota_subvolumes() || cx->settled) {
		create_boot(vm);
		return;
	}
	if ((j = calloc(1, sizeof(*j))) == NULL)
		fatal("calloc");
	j->vm = vm;
	snprintf(j->dir, sizeof(j->dir), "%s", vm->dir);
	if (worker_submit(vmmd_workers(), settle_run, settle_done, j) == -1) {
		free(j);
		vm_op_done(vm, "unavailable", "the VM could not be created: "
		    "the worker pool refused the job");
		return;
	}
	vm->io_pending++;
	cx->jobs++;
	cx->settled = 1;
}

static void
create_disk_done(int rc, const char *err, void *arg)
{
	char why[512];

	snprintf(why, sizeof(why), "the VM could not be created: %s", err);
	create_job_done(arg, rc, "unavailable", why, 0);
}

/* The snapshot's files were checked. */
static void
create_verified(int rc, const char *err, void *arg)
{
	char why[600];

	snprintf(why, sizeof(why), "the snapshot was not restored: %s", err);
	create_job_done(arg, rc, "conflict", why, 1);
}

static int
create_disk_job(struct vm *vm, int reflink, const char *src,
    const char *name)
{
	char dst[PATH_MAX];

	vm_path(vm, name, dst, sizeof(dst));
	return (reflink ? disk_clone_async : disk_copy_async)(vmmd_workers(),
	    src, dst, vm->uid, vm->gid, create_disk_done, vm);
}

/*
 * Every file a VM needs, made at once on the worker pool: the disk (a
 * clone of the image's or of the snapshot's), the kernel and initrd
 * (copies, so that a new image version never changes a VM's boot), and
 * for a snapshot the check of its files.  QEMU starts once the files are
 * there; a memory snapshot's QEMU then waits (spec.hold) until the check
 * has passed, so it never reads a file that is not what the manifest
 * says, and its start overlaps the check.
 */
static void
create_files(struct vm *vm)
{
	struct create_ctx *cx = vm->op_arg;
	const struct conf_image *im = vm->image;
	char path[PATH_MAX];
	int ok = 1;

	request_progress(cx->req, 1, 4, cx->has_snap ? "checking and cloning "
	    "the snapshot" : "cloning the disk");
	if (cx->has_snap) {
		if ((ok = snap_verify_async(&cx->snap, im, create_verified,
		    vm) == 0)) {
			vm->io_pending++;
			/* A disk-only one is checked before the boot. */
			if (cx->snap.memory)
				vm->hold_restore = 1;
			else
				cx->jobs++;
		}
		snap_file(&cx->snap, 0, path, sizeof(path));
	}
	if (ok && (ok = create_disk_job(vm, 1, cx->has_snap ? path :
	    im->rootfs, DISK) == 0)) {
		vm->io_pending++;
		cx->jobs++;
	}
	if (ok && (ok = create_disk_job(vm, 0, im->kernel, KERNEL) == 0)) {
		vm->io_pending++;
		cx->jobs++;
	}
	if (ok && (ok = create_disk_job(vm, 0, im->initrd, INITRD) == 0)) {
		vm->io_pending++;
		cx->jobs++;
	}
	/* The jobs already out come back to a teardown. */
	if (!ok)
		vm_op_done(vm, "unavailable", "the VM could not be created: "
		    "the worker pool refused the job");
}

/* The files are there: restore the snapshot's memory, or boot. */
static void
create_boot(struct vm *vm)
{
	struct create_ctx *cx = vm->op_arg;
	char why[512], path[PATH_MAX];

	if (cx->has_snap && cx->snap.memory) {
		/* Restored, not booted: QEMU reads the memory file through
		 * vmmd's descriptor, the first hello thaws. */
		request_progress(cx->req, 2, 4, "restoring");
		snap_file(&cx->snap, 1, path, sizeof(path));
		vm->restored = 1;
		if (vm_boot(vm, path, why, sizeof(why)) == -1)
			vm_op_done(vm, "unavailable", "the VM could not be "
			    "restored: %s", why);
		return;
	}
	request_progress(cx->req, 2, 4, "booting");
	if (vm_boot(vm, NULL, why, sizeof(why)) == -1)
		vm_op_done(vm, "unavailable", "the VM could not be created: %s",
		    why);
}

static void
create_vm(struct request *req, const struct conf_image *im,
    const struct snap_record *snap, int vcpus, int memory_mib, int network,
    int idle_seconds, int idle_pause, vm_done_cb cb, void *arg)
{
	struct vm_record rec;
	struct create_ctx *cx;
	struct vm *vm;
	char err[256];
	int slot;

	memset(&rec, 0, sizeof(rec));
	if ((slot = store_free_slot(vmmd_store(),
	    (int)vmmd_conf()->vmmd.max_vms, err, sizeof(err))) == -1) {
		cb(NULL, "quota_exceeded", "max_vms: every VM slot is taken",
		    arg);
		return;
	}
	random_hex(rec.id, 0);
	random_hex(rec.vmgenid, 1);	/* its vmgenid device's GUID */
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
	rec.run = strcmp(req->tool, "vm_run") == 0;
	rec.egress = req->egress;
	rec.egress_now = req->egress;
	rec.egress_rate = req->policy.egress_rate;
	snprintf(rec.origin, sizeof(rec.origin), "%s", snap == NULL ? "booted" :
	    warmpool_is_pool(snap->workspace) ? "warm" :
	    strcmp(snap->state, "fork") == 0 ? "fork" : "snapshot");
	if (snap != NULL && !warmpool_is_pool(snap->workspace))
		snprintf(rec.snapshot_id, sizeof(rec.snapshot_id), "%s",
		    snap->id);
	/* Recorded before any side effect: a crash from here on leaves a
	 * VM that startup marks failed and kills. */
	if (store_vm_insert(vmmd_store(), &rec, err, sizeof(err)) == -1) {
		log_warnx("vm %s: %s", rec.id, err);
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
	if (snap != NULL) {
		cx->has_snap = 1;
		cx->snap = *snap;
	}
	vm_op_begin(vm, create_done, cx);
	/*
	 * The rundir is root's with the VM's group, 0770 (vm_rundir_own,
	 * before each boot): QEMU and vmproxy (that gid) make their sockets
	 * and logs there, and vmmd, its owner, removes them without a
	 * capability that overrides permissions.
	 */
	/* Its limit before any file is made in it: an XFS project they
	 * all inherit, or a btrfs subvolume they are all in, the disk clone
	 * and the checkpoints QEMU writes too. */
	if (quota_mkdir(vm->dir, 0711, (uint32_t)vm->uid, err,
	    sizeof(err)) == -1) {
		vm_op_done(vm, "unavailable", "the VM could not be created: "
		    "%s", err);
		return;
	}
	if (mkdir(vm->rundir, 0770) == -1) {
		vm_op_done(vm, "unavailable", "the VM could not be created: "
		    "%s", strerror(errno));
		return;
	}
	create_files(vm);
}


void
vm_create(struct request *req, const struct conf_image *im, int vcpus,
    int memory_mib, int network, int idle_seconds, int idle_pause,
    vm_done_cb cb, void *arg)
{
	create_vm(req, im, NULL, vcpus, memory_mib, network, idle_seconds,
	    idle_pause, cb, arg);
}

void
vm_create_snap(struct request *req, const struct conf_image *im,
    const struct snap_record *snap, int vcpus, int memory_mib, int network,
    int idle_seconds, int idle_pause, vm_done_cb cb, void *arg)
{
	create_vm(req, im, snap, vcpus, memory_mib, network, idle_seconds,
	    idle_pause, cb, arg);
}
