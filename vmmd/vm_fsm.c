/*
 * vmmd's VM lifecycle as one state machine (vm_fsm.h): the table, the one
 * function that takes a VM from one state to the next, the operation a VM
 * runs and the requests that wait for it.  Everything vmmd does around a
 * transition (the store, QEMU, vmproxy, the streams) is a hook that
 * vm_init.c registers, so that the machine can be driven alone, as
 * tests/unit/test_vm_fsm.c does.
 */
#include <sys/queue.h>
#include <sys/types.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "vmmd_shared.h"
#include "vm_fsm.h"

#define R(from, ev, guard, to, act)					\
	{ VM_##from, VM_EV_##ev, VM_G_##guard, VM_##to, VM_ACT_##act }

/*
 * The table.  Rows of one (state, event) pair stand together, the most
 * particular guard first and VM_G_ANY last.  A VM in a transient state
 * (creating, hibernating, resuming, destroying) has an operation running
 * that ends with its own event.  When vmmd starts again, a VM whose QEMU
 * still runs is taken up (vm_adopt.c) and found running or paused; any
 * other VM but a hibernated or failed one had its outcome lost with its
 * processes (restart).
 */
static const struct vm_fsm_row table[] = {
	R(CREATING,	BOOTED,		ANY,	RUNNING,	NONE),
	R(CREATING,	FAIL,		ANY,	FAILED,		FAIL),
	R(CREATING,	DESTROY,	ANY,	DESTROYING,	DESTROY),
	R(CREATING,	RESTART,	ANY,	FAILED,		NONE),
	R(CREATING,	HELLO,		HELLO,	CREATING,	BOOT_HELLO),
	R(CREATING,	HELLO,		ANY,	CREATING,	GUEST_UP),
	R(CREATING,	LINK_DOWN,	ANY,	CREATING,	GUEST_DOWN),
	R(CREATING,	PROXY_EXIT,	ANY,	CREATING,	GUEST_DOWN),
	R(CREATING,	QEMU_EXIT,	ANY,	CREATING,	NONE),
	R(CREATING,	BOOT_TIMEOUT,	HELLO,	CREATING,	BOOT_EXPIRED),
	R(CREATING,	BOOT_TIMEOUT,	ANY,	CREATING,	NONE),
	R(CREATING,	LINK_TIMEOUT,	ANY,	CREATING,	NONE),

	R(RUNNING,	PAUSED,		ANY,	PAUSED,		NONE),
	R(RUNNING,	CHECKPOINT,	ANY,	HIBERNATING,	NONE),
	R(RUNNING,	FAIL,		ANY,	FAILED,		FAIL),
	R(RUNNING,	DESTROY,	ANY,	DESTROYING,	DESTROY),
	R(RUNNING,	RESTART,	ANY,	FAILED,		NONE),
	R(RUNNING,	FOUND_RUNNING,	ANY,	RUNNING,	NONE),
	/* vmmd died between the guest's freeze and recording the pause. */
	R(RUNNING,	FOUND_PAUSED,	ANY,	PAUSED,		NONE),
	R(RUNNING,	HELLO,		ANY,	RUNNING,	GUEST_UP),
	R(RUNNING,	LINK_DOWN,	ANY,	RUNNING,	GUEST_DOWN),
	R(RUNNING,	PROXY_EXIT,	IDLE,	FAILED,		FAIL),
	R(RUNNING,	PROXY_EXIT,	ANY,	RUNNING,	GUEST_DOWN),
	R(RUNNING,	QEMU_EXIT,	IDLE,	FAILED,		QEMU_GONE),
	R(RUNNING,	QEMU_EXIT,	ANY,	RUNNING,	NONE),
	/* guestd gone or hung: its waiters hear why instead of parking. */
	R(RUNNING,	LINK_TIMEOUT,	IDLE,	FAILED,		FAIL),
	R(RUNNING,	LINK_TIMEOUT,	ANY,	RUNNING,	NONE),

	R(PAUSED,	THAWED,		ANY,	RUNNING,	NONE),
	R(PAUSED,	CHECKPOINT,	ANY,	HIBERNATING,	NONE),
	R(PAUSED,	FAIL,		ANY,	FAILED,		FAIL),
	R(PAUSED,	DESTROY,	ANY,	DESTROYING,	DESTROY),
	R(PAUSED,	RESTART,	ANY,	FAILED,		NONE),
	/* A paused VM's QEMU found running is stopped first (vm_adopt.c). */
	R(PAUSED,	FOUND_PAUSED,	ANY,	PAUSED,		NONE),
	R(PAUSED,	HELLO,		HELLO,	PAUSED,		RESUME_THAW),
	R(PAUSED,	HELLO,		ANY,	PAUSED,		GUEST_UP),
	R(PAUSED,	LINK_DOWN,	ANY,	PAUSED,		GUEST_DOWN),
	R(PAUSED,	PROXY_EXIT,	ANY,	PAUSED,		GUEST_DOWN),
	R(PAUSED,	QEMU_EXIT,	IDLE,	FAILED,		QEMU_GONE),
	R(PAUSED,	QEMU_EXIT,	ANY,	PAUSED,		NONE),
	R(PAUSED,	BOOT_TIMEOUT,	HELLO,	PAUSED,		BOOT_EXPIRED),
	R(PAUSED,	BOOT_TIMEOUT,	ANY,	PAUSED,		NONE),
	R(PAUSED,	LINK_TIMEOUT,	ANY,	PAUSED,		NONE),

	R(HIBERNATING,	CHECKPOINTED,	ANY,	HIBERNATED,	NONE),
	R(HIBERNATING,	RUNS_ON,	ANY,	RUNNING,	NONE),
	R(HIBERNATING,	STAYS_PAUSED,	ANY,	PAUSED,		NONE),
	R(HIBERNATING,	FAIL,		ANY,	FAILED,		FAIL),
	R(HIBERNATING,	DESTROY,	ANY,	DESTROYING,	DESTROY),
	R(HIBERNATING,	RESTART,	ANY,	FAILED,		NONE),
	/* QEMU outlived the hibernation vmmd died in: it is given up. */
	R(HIBERNATING,	FOUND_RUNNING,	ANY,	RUNNING,	NONE),
	R(HIBERNATING,	FOUND_PAUSED,	ANY,	PAUSED,		NONE),
	R(HIBERNATING,	HELLO,		ANY,	HIBERNATING,	GUEST_UP),
	R(HIBERNATING,	LINK_DOWN,	ANY,	HIBERNATING,	GUEST_DOWN),
	R(HIBERNATING,	PROXY_EXIT,	ANY,	HIBERNATING,	GUEST_DOWN),
	R(HIBERNATING,	QEMU_EXIT,	ANY,	HIBERNATING,	NONE),
	R(HIBERNATING,	LINK_TIMEOUT,	ANY,	HIBERNATING,	NONE),

	R(HIBERNATED,	RESTORE,	ANY,	RESUMING,	NONE),
	R(HIBERNATED,	FAIL,		ANY,	FAILED,		FAIL),
	R(HIBERNATED,	DESTROY,	ANY,	DESTROYING,	DESTROY),
	R(HIBERNATED,	RESTART,	ANY,	FAILED,		NONE),

	R(RESUMING,	BOOTED,		ANY,	RUNNING,	NONE),
	R(RESUMING,	FAIL,		ANY,	FAILED,		FAIL),
	R(RESUMING,	DESTROY,	ANY,	DESTROYING,	DESTROY),
	R(RESUMING,	RESTART,	ANY,	FAILED,		NONE),
	R(RESUMING,	HELLO,		HELLO,	RESUMING,	BOOT_THAW),
	R(RESUMING,	HELLO,		ANY,	RESUMING,	GUEST_UP),
	R(RESUMING,	LINK_DOWN,	ANY,	RESUMING,	GUEST_DOWN),
	R(RESUMING,	PROXY_EXIT,	ANY,	RESUMING,	GUEST_DOWN),
	R(RESUMING,	QEMU_EXIT,	ANY,	RESUMING,	NONE),
	R(RESUMING,	BOOT_TIMEOUT,	HELLO,	RESUMING,	BOOT_EXPIRED),
	R(RESUMING,	BOOT_TIMEOUT,	ANY,	RESUMING,	NONE),
	R(RESUMING,	LINK_TIMEOUT,	ANY,	RESUMING,	NONE),

	R(DESTROYING,	TORN_DOWN,	ANY,	GONE,		NONE),
	/* The destroy goes on: a second one joins it, a failure is only
	 * logged. */
	R(DESTROYING,	FAIL,		ANY,	DESTROYING,	NONE),
	R(DESTROYING,	DESTROY,	ANY,	DESTROYING,	NONE),
	R(DESTROYING,	RESTART,	ANY,	FAILED,		NONE),

	R(FAILED,	FAIL,		ANY,	FAILED,		FAIL),
	R(FAILED,	DESTROY,	ANY,	DESTROYING,	DESTROY),
};
#define NROWS	(sizeof(table) / sizeof(table[0]))

static const char *const event_names[VM_NEVENTS] = {
	"booted", "thawed", "paused", "checkpoint", "checkpointed",
	"runs_on", "stays_paused", "restore", "fail", "destroy", "torn_down",
	"restart", "found_running", "found_paused", "hello", "link_down", "proxy_exit", "qemu_exit",
	"boot_timeout", "link_timeout",
};

static const char *const guard_names[VM_NGUARDS] = {
	"any", "idle", "waits for hello",
};

static const char *const action_names[VM_NACTIONS] = {
	"none", "guest_up", "guest_down", "boot_hello", "boot_thaw",
	"resume_thaw",
	"boot_expired", "fail", "qemu_gone", "destroy",
};

static struct vm_fsm_hooks hooks;

void
vm_fsm_init(const struct vm_fsm_hooks *h)
{
	hooks = *h;
}

const struct vm_fsm_row *
vm_fsm_table(size_t *n)
{
	*n = NROWS;
	return table;
}

const char *
vm_event_name(enum vm_event ev)
{
	return (unsigned)ev < VM_NEVENTS ? event_names[ev] : "unknown";
}

const char *
vm_guard_name(enum vm_guard g)
{
	return (unsigned)g < VM_NGUARDS ? guard_names[g] : "unknown";
}

const char *
vm_action_name(enum vm_action a)
{
	return (unsigned)a < VM_NACTIONS ? action_names[a] : "unknown";
}

static int
guard_holds(enum vm_guard g, int busy, enum vm_op_step step)
{
	switch (g) {
	case VM_G_IDLE:
		return !busy;
	case VM_G_HELLO:
		return busy && step == VM_STEP_HELLO;
	default:
		return 1;
	}
}

const struct vm_fsm_row *
vm_fsm_find(enum vm_state s, enum vm_event ev, int busy,
    enum vm_op_step step)
{
	for (size_t i = 0; i < NROWS; i++)
		if (table[i].from == s && table[i].ev == ev &&
		    guard_holds(table[i].guard, busy, step))
			return &table[i];
	return NULL;
}

int
vm_fsm_fire(struct vm *vm, enum vm_event ev, const char *why)
{
	const struct vm_fsm_row *r;
	enum vm_state from = vm->rec.state;

	if ((r = vm_fsm_find(from, ev, vm->busy, vm->op_step)) == NULL) {
		log_warnx("vm %s: event %s refused: the table has no "
		    "transition for it from %s%s%s%s%s", vm->rec.id,
		    vm_event_name(ev), vm_state_name(from),
		    vm->busy ? " with an operation running" : "",
		    why != NULL ? " (" : "", why != NULL ? why : "",
		    why != NULL ? ")" : "");
		return -1;
	}
	if (r->to != from || r->to == VM_FAILED) {
		vm->rec.state = r->to;
		snprintf(vm->rec.failure, sizeof(vm->rec.failure), "%s",
		    r->to == VM_FAILED && why != NULL ? why : "");
		if (hooks.record != NULL)
			hooks.record(vm);
	}
	log_debug("vm %s: %s --%s%s%s--> %s (%s)", vm->rec.id,
	    vm_state_name(from), vm_event_name(ev),
	    r->guard != VM_G_ANY ? ", " : "",
	    r->guard != VM_G_ANY ? vm_guard_name(r->guard) : "",
	    vm_state_name(r->to), vm_action_name(r->act));
	switch (r->act) {
	case VM_ACT_NONE:
		break;
	case VM_ACT_GUEST_UP:
		vm->guest_up = 1;
		if (hooks.link != NULL)
			hooks.link(vm, 1);
		vm_wake_waiters(vm);
		break;
	case VM_ACT_GUEST_DOWN:
		vm->guest_up = 0;
		if (hooks.link != NULL)
			hooks.link(vm, 0);
		break;
	default:
		if (hooks.act[r->act] != NULL)
			hooks.act[r->act](vm, why);
		break;
	}
	return 0;
}

/* The table in Markdown, then its state changes as a graphviz digraph. */
char *
vm_fsm_doc(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		return NULL;
	fprintf(f, "| state | event | guard | next state | action |\n");
	fprintf(f, "| --- | --- | --- | --- | --- |\n");
	for (size_t i = 0; i < NROWS; i++)
		fprintf(f, "| %s | %s | %s | %s | %s |\n",
		    vm_state_name(table[i].from),
		    vm_event_name(table[i].ev),
		    vm_guard_name(table[i].guard),
		    vm_state_name(table[i].to),
		    vm_action_name(table[i].act));
	fprintf(f, "\n```dot\ndigraph vm {\n");
	for (size_t i = 0; i < NROWS; i++) {
		if (table[i].from == table[i].to)
			continue;
		fprintf(f, "\t%s -> %s [label=\"%s%s%s\"];\n",
		    vm_state_name(table[i].from),
		    vm_state_name(table[i].to),
		    vm_event_name(table[i].ev),
		    table[i].guard != VM_G_ANY ? ", " : "",
		    table[i].guard != VM_G_ANY ?
		    vm_guard_name(table[i].guard) : "");
	}
	fprintf(f, "}\n```\n");
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ---- operations -------------------------------------------------------- */

void
vm_op_begin(struct vm *vm, vm_done_cb cb, void *arg)
{
	vm->busy = 1;
	vm->op_cb = cb;
	vm->op_arg = arg;
	vm->op_step = VM_STEP_NONE;
	vm->op_seq++;
}

void
vm_op_step(struct vm *vm, enum vm_op_step step)
{
	vm->op_step = step;
}

void *
op_token(const struct vm *vm)
{
	return (void *)(uintptr_t)vm->op_seq;
}

int
op_current(const struct vm *vm, void *token)
{
	return vm->busy && !vm->discarded &&
	    (uintptr_t)token == (uintptr_t)vm->op_seq;
}

void
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
	if (hooks.settled != NULL)
		hooks.settled();
}

/*
 * Whoever started the operation in flight hears code and msg now, and its
 * callbacks still to come find it stale.  Processes are the caller's to
 * stop.
 */
void
vm_op_cancel(struct vm *vm, const char *code, const char *msg)
{
	if (vm->busy)
		vm_op_done(vm, code, "%s", msg);
}

/* ---- waiters ----------------------------------------------------------- */

static struct vm_waiter *
wait_add(struct vm *vm, enum vm_wait_kind kind, vm_done_cb cb, void *arg)
{
	struct vm_waiter *w;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("calloc");
	w->kind = kind;
	w->cb = cb;
	w->arg = arg;
	TAILQ_INSERT_TAIL(&vm->waits, w, entry);
	return w;
}

void
vm_ready(struct vm *vm, vm_done_cb cb, void *arg)
{
	struct vm_waiter *w;
	char why[128];

	vm->last_active = mono_seconds();
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
	w = wait_add(vm, VM_WAIT_READY, cb, arg);
	if (!vm->busy && (vm->rec.state == VM_PAUSED ||
	    vm->rec.state == VM_HIBERNATED)) {
		snprintf(why, sizeof(why), "the VM cannot be resumed");
		if (hooks.resume == NULL ||
		    hooks.resume(vm, why, sizeof(why)) == -1) {
			TAILQ_REMOVE(&vm->waits, w, entry);
			free(w);
			cb(vm, "unavailable", why, arg);
		}
	}
}

int
vm_wait_cancel(struct vm *vm, void *arg, const char *code, const char *msg)
{
	struct vm_waiter *w;

	TAILQ_FOREACH(w, &vm->waits, entry)
		if (w->kind == VM_WAIT_READY && w->arg == arg) {
			TAILQ_REMOVE(&vm->waits, w, entry);
			w->cb(vm, code, msg, w->arg);
			free(w);
			return 1;
		}
	return 0;
}

void
vm_wait_gone(struct vm *vm, vm_done_cb cb, void *arg)
{
	wait_add(vm, VM_WAIT_GONE, cb, arg);
}

/* Takes the waiters of one kind off the VM, in their order. */
static void
waits_take(struct vm *vm, enum vm_wait_kind kind, struct vm_waiter **out,
    size_t *n)
{
	struct vm_waiter *w, *next;

	*n = 0;
	TAILQ_FOREACH_SAFE(w, &vm->waits, entry, next) {
		if (w->kind != kind)
			continue;
		TAILQ_REMOVE(&vm->waits, w, entry);
		out[(*n)++] = w;
	}
}

static size_t
waits_count(struct vm *vm, enum vm_wait_kind kind)
{
	struct vm_waiter *w;
	size_t n = 0;

	TAILQ_FOREACH(w, &vm->waits, entry)
		if (w->kind == kind)
			n++;
	return n;
}

void
vm_wake_waiters(struct vm *vm)
{
	struct vm_waiter **list;
	size_t n;

	if (vm->busy)
		return;
	if (vm->rec.state == VM_RUNNING && !vm->guest_up)
		return;	/* the link is coming back: hello wakes them */
	if ((n = waits_count(vm, VM_WAIT_READY)) == 0)
		return;
	if ((list = calloc(n, sizeof(*list))) == NULL)
		fatal("calloc");
	waits_take(vm, VM_WAIT_READY, list, &n);
	for (size_t i = 0; i < n; i++) {
		vm_ready(vm, list[i]->cb, list[i]->arg);
		free(list[i]);
	}
	free(list);
}

void
vm_waits_gone(struct vm *vm)
{
	struct vm_waiter **list;
	size_t n;

	if ((n = waits_count(vm, VM_WAIT_GONE)) == 0)
		return;
	if ((list = calloc(n, sizeof(*list))) == NULL)
		fatal("calloc");
	waits_take(vm, VM_WAIT_GONE, list, &n);
	for (size_t i = 0; i < n; i++) {
		list[i]->cb(vm, NULL, NULL, list[i]->arg);
		free(list[i]);
	}
	free(list);
}
