/*
 * What vm.c, vm_boot.c and vm_suspend.c share: the lifecycle's own
 * helpers, which the rest of vmmd reaches only through vmmd_shared.h.  The state
 * machine is vm_fsm.c; the three files do its work, cut by concern:
 * bookkeeping, failure and destroy (vm.c); boot and create (vm_boot.c);
 * pause, hibernate, resume and idle (vm_suspend.c).  vm_init.c gives the
 * machine their hooks.
 */
#ifndef MCPVM_VMMD_VM_LOCAL_H
#define MCPVM_VMMD_VM_LOCAL_H

#include <stddef.h>

#include "vmmd_shared.h"

/* A VM's files in its directory, by name. */
#define CHECKPOINT	"checkpoint.bin"
#define DISK		"disk.raw"
#define KERNEL		"vmlinuz"
#define INITRD		"initrd.img"
/* On btrfs, a memory snapshot's machine state as QEMU writes it, in the
 * VM's subvolume so that it counts against the VM's limit, until it is
 * cloned into the snapshot (snapshot.c): this, the snapshot's id, .bin. */
#define VM_MEMORY_PREFIX "memory-"
/* QEMU's pid as vmmd wrote it (the rundir's qemu.pid is QEMU's own, which
 * the VM's uid could rewrite): a restarted vmmd takes it up by this. */
#define VMM_PID		"vmm.pid"

/* vm.c */
struct vm *vm_alloc(const struct vm_record *);
/* The machine's record hook, and its fail, qemu_gone and destroy
 * actions (vm_init.c registers them). */
void	vm_record_state(struct vm *);
void	vm_act_fail(struct vm *, const char *why);
void	vm_act_qemu_gone(struct vm *, const char *why);
void	vm_act_destroy(struct vm *, const char *why);
/* The machine's link hook (link_down_seconds). */
void	vm_link_watch(struct vm *, int up);
/* What a part above vm.c keeps of a VM, freed with it (vm_init.c
 * registers the broker's pipes). */
void	vm_on_free(void (*fn)(struct vm *));
void	vm_path(const struct vm *, const char *name, char *buf, size_t len);
long long image_disk_bytes(const struct conf_image *);
void	vm_io_done(struct vm *);
void	vm_kill_processes(struct vm *);
void	vm_teardown(struct vm *);

/* vm_boot.c */
int	vm_boot(struct vm *, const char *checkpoint, char *err,
	    size_t errlen);
/* The machine's boot actions (vm_fsm.h): the hello a create or a restore
 * waited for, and none in time. */
void	vm_boot_hello(struct vm *, const char *why);
void	vm_boot_thaw(struct vm *, const char *why);
void	vm_boot_expired(struct vm *, const char *why);

/* The backend's callbacks for a VM's QEMU (exit, events). */
struct vmm_cbs;
extern const struct vmm_cbs vm_vmm_cbs;
/* Records QEMU's pid in the VM's directory (VMM_PID). */
void	vm_pid_record(struct vm *, pid_t);
/* Starts the wait for the guest's hello (boot_timeout_seconds). */
void	vm_boot_timer_start(struct vm *);

/* vm_adopt.c: takes up the VM's QEMU, which outlived the last vmmd; -1
 * with why when there is none to take up (nothing was started). */
int	vm_adopt(struct vm *, char *why, size_t);
/* Thaws a running VM taken up, once, when its guest is up. */
void	vm_adopt_thaw(struct vm *);

/* vm_suspend.c */
int	vm_resume(struct vm *, char *why, size_t);
/* The machine's resume_thaw: a resumed guest's jobs are thawed. */
void	vm_resume_thaw(struct vm *, const char *why);
void	vm_idle_start(void);

#endif
