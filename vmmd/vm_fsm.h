/*
 * vmmd's VM lifecycle as one state machine.  A VM's state (store.h, the
 * one its record keeps) changes only in vm_fsm_fire, by one row of one
 * table: for a state, an event and a guard, the next state and the action
 * that follows.  A pair the table does not list is refused and logged.
 * docs/vmmd-states.md shows the table; tests/unit/test_vm_fsm.c keeps it
 * in sync and drives every row.
 *
 * The machine also keeps what goes with the state: the one operation a VM
 * runs at a time (busy, its step, its sequence number, which tells the
 * callbacks of a cancelled operation that they are stale) and the
 * requests that wait for the VM, each with a deadline.  It calls nothing
 * of vmmd's above it: what an action does, and where a state is written,
 * are hooks that vm_init.c registers (vm_fsm_init).  vmproxy, QEMU and the
 * timers report their events with vm_fsm_fire.
 */
#ifndef MCPVM_VMMD_VM_FSM_H
#define MCPVM_VMMD_VM_FSM_H

#include <sys/queue.h>

#include <stddef.h>

#include "store.h"

struct vm;

/* What happens to a VM.  The first ones are the lifecycle's own steps
 * ending; the last ones are reported from outside (vmproxy, QEMU, the
 * boot timer) and name no outcome of their own. */
enum vm_event {
	VM_EV_BOOTED,		/* the guest's clock is set after a boot */
	VM_EV_THAWED,		/* a paused VM's QEMU continued, jobs thawed */
	VM_EV_PAUSED,		/* QEMU paused after the guest froze */
	VM_EV_CHECKPOINT,	/* the checkpoint is being written */
	VM_EV_CHECKPOINTED,	/* the checkpoint is on disk, QEMU gone */
	VM_EV_RUNS_ON,		/* no checkpoint: the VM runs on */
	VM_EV_STAYS_PAUSED,	/* QEMU refused a paused VM's checkpoint */
	VM_EV_RESTORE,		/* QEMU starts from the checkpoint */
	VM_EV_FAIL,		/* the VM is broken, or stopped by the operator */
	VM_EV_DESTROY,		/* destroy asked */
	VM_EV_TORN_DOWN,	/* files, record and processes are gone */
	VM_EV_RESTART,		/* vmmd restarted, and the VM's QEMU is gone */
	VM_EV_FOUND_RUNNING,	/* vmmd restarted and took up its QEMU, which
				 * runs the guest */
	VM_EV_FOUND_PAUSED,	/* ... which has the guest stopped */
	VM_EV_HELLO,		/* the guest said hello */
	VM_EV_LINK_DOWN,	/* vmproxy lost the guest's link */
	VM_EV_PROXY_EXIT,	/* vmproxy exited, not for a guest's fault */
	VM_EV_QEMU_EXIT,	/* QEMU exited */
	VM_EV_BOOT_TIMEOUT,	/* boot_timeout_seconds passed */
	VM_EV_LINK_TIMEOUT,	/* the link stayed down link_down_seconds */
	VM_NEVENTS
};

/* What else must hold for a row to apply.  The rows of one (state,
 * event) pair end with VM_G_ANY, so a listed pair always has a row. */
enum vm_guard {
	VM_G_ANY,
	VM_G_IDLE,		/* no operation runs */
	VM_G_HELLO,		/* the operation waits for the guest's hello */
	VM_NGUARDS
};

/* What follows a transition. */
enum vm_action {
	VM_ACT_NONE,		/* the new state is recorded, nothing more */
	VM_ACT_GUEST_UP,	/* guest_up; the waiters go on */
	VM_ACT_GUEST_DOWN,	/* not guest_up until the next hello */
	VM_ACT_BOOT_HELLO,	/* a create goes on: identity for a clone, or
				 * the clock */
	VM_ACT_BOOT_THAW,	/* a restore goes on: the clock and a thaw */
	VM_ACT_RESUME_THAW,	/* a resume goes on: the thaw waited for the
				 * hello of a VM taken up while paused */
	VM_ACT_BOOT_EXPIRED,	/* no hello in time: processes killed, the
				 * boot fails */
	VM_ACT_FAIL,		/* the operation ends, streams close,
				 * processes die, the waiters hear why */
	VM_ACT_QEMU_GONE,	/* VM_ACT_FAIL, QEMU already dead */
	VM_ACT_DESTROY,		/* the operation ends, streams close,
				 * waiters hear, the teardown starts */
	VM_NACTIONS
};

struct vm_fsm_row {
	enum vm_state	from;
	enum vm_event	ev;
	enum vm_guard	guard;
	enum vm_state	to;
	enum vm_action	act;
};

/* Where a VM's boot, resume or idle probe stands. */
enum vm_op_step {
	VM_STEP_NONE = 0,
	VM_STEP_HELLO,		/* QEMU runs: waiting for the guest's hello */
	VM_STEP_IDENTITY,	/* hello from a clone: renewing its identity */
	VM_STEP_CLOCK,		/* hello seen: setting its clock, or thawing */
	VM_STEP_PROBE,		/* idle: an activity probe is out */
};

typedef void (*vm_done_cb)(struct vm *, const char *code, const char *msg,
	    void *arg);

/* What a request waits for: the VM running with its guest up, or gone. */
enum vm_wait_kind {
	VM_WAIT_READY,
	VM_WAIT_GONE,
};

struct vm_waiter {
	TAILQ_ENTRY(vm_waiter)	 entry;
	enum vm_wait_kind	 kind;
	/* Monotonic ms by which the wait ends, 0: none (each wait ends
	 * today with its VM's operation, or its VM). */
	long long		 deadline_ms;
	vm_done_cb		 cb;
	void			*arg;
};

/* What the machine calls in vmmd: each may be NULL. */
struct vm_fsm_hooks {
	/* Writes vm->rec.state (and failure) to the store. */
	void	(*record)(struct vm *);
	/* Starts a paused or hibernated VM again for its waiters: -1 with
	 * why when it may not (vmmd stops). */
	int	(*resume)(struct vm *, char *why, size_t);
	/* An operation ended: vmmd may be able to exit. */
	void	(*settled)(void);
	/* The guest's link came up (1) or went down (0): a link that stays
	 * down is bounded (link_down_seconds). */
	void	(*link)(struct vm *, int up);
	/* The actions above VM_ACT_GUEST_DOWN, with the event's why. */
	void	(*act[VM_NACTIONS])(struct vm *, const char *why);
};

void	vm_fsm_init(const struct vm_fsm_hooks *);

/*
 * The one way a VM's state changes: finds the row for the VM's state, ev
 * and its guards, sets and records the next state, logs the transition
 * and runs the row's action with why.  0, or -1 (logged) when the table
 * lists no row.
 */
int	vm_fsm_fire(struct vm *, enum vm_event, const char *why);
/* The row vm_fsm_fire would take, or NULL. */
const struct vm_fsm_row *vm_fsm_find(enum vm_state, enum vm_event,
	    int busy, enum vm_op_step);

const struct vm_fsm_row *vm_fsm_table(size_t *n);
const char *vm_event_name(enum vm_event);
const char *vm_guard_name(enum vm_guard);
const char *vm_action_name(enum vm_action);
/* The table as docs/vmmd-states.md shows it: Markdown, then graphviz. */
char	*vm_fsm_doc(void);

/*
 * Operations, one at a time per VM (busy); op_seq tells its callbacks
 * apart from those of an operation that was cancelled, which may still
 * arrive (a guest reply, a failed call when vmproxy stops).  A callback
 * that got op_token() as its argument checks op_current() first.
 */
void	vm_op_begin(struct vm *, vm_done_cb, void *);
void	vm_op_step(struct vm *, enum vm_op_step);
void	*op_token(const struct vm *);
int	op_current(const struct vm *, void *token);
/* Ends the operation in progress and tells whoever started it. */
void	vm_op_done(struct vm *, const char *code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
/* Ends the operation in flight, if any, without waiting for it. */
void	vm_op_cancel(struct vm *, const char *code, const char *msg);

/*
 * Requests that wait for a VM.  vm_ready calls back once the VM runs with
 * its guest up, waking it if need be, or at once with why it will not;
 * vm_wait_gone once the VM is torn down (vm_waits_gone).  Each waiter has
 * a deadline (monotonic ms, 0: none) for its wait.
 */
void	vm_ready(struct vm *, vm_done_cb, void *);
/* The request arg that waits for vm to be ready went away: its callback
 * hears code and msg now, and 1; 0 when it was not waiting for vm. */
int	vm_wait_cancel(struct vm *, void *arg, const char *code,
	    const char *msg);
void	vm_wait_gone(struct vm *, vm_done_cb, void *);
/* Ready waiters hear what the VM's state now means for them. */
void	vm_wake_waiters(struct vm *);
/* Every gone waiter hears that the VM is gone. */
void	vm_waits_gone(struct vm *);

#endif
