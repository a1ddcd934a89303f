/*
 * What vm.c, vm_boot.c and vm_suspend.c share: the lifecycle's own
 * helpers, which the rest of vmmd reaches only through vmmd.h.  The three
 * files are one state machine cut by concern: bookkeeping, operations,
 * failure and destroy (vm.c); boot and create (vm_boot.c); pause,
 * hibernate, resume and idle (vm_suspend.c).
 */
#ifndef MCPVM_VMMD_VM_LOCAL_H
#define MCPVM_VMMD_VM_LOCAL_H

#include <stddef.h>

#include "vmmd.h"

/* A VM's files in its directory, by name. */
#define CHECKPOINT	"checkpoint.bin"
#define DISK		"disk.raw"
#define KERNEL		"vmlinuz"
#define INITRD		"initrd.img"

/* vm.c */
void	vm_set_state(struct vm *, enum vm_state, const char *failure);
struct vm *vm_alloc(const struct vm_record *);
void	vm_path(const struct vm *, const char *name, char *buf, size_t len);
long long image_disk_bytes(const struct conf_image *);
/* Operations, one at a time per VM: see vm_op_begin. */
void	vm_op_begin(struct vm *, vm_done_cb, void *);
void	*op_token(const struct vm *);
int	op_current(const struct vm *, void *token);
void	vm_op_done(struct vm *, const char *code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
void	vm_io_done(struct vm *);
void	vm_kill_processes(struct vm *);
void	vm_teardown(struct vm *);

/* vm_boot.c */
int	vm_boot(struct vm *, const char *checkpoint, char *err,
	    size_t errlen);

/* vm_suspend.c */
void	vm_wake_waiters(struct vm *);
void	vm_idle_start(void);

#endif
