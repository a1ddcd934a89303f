/*
 * Unit tests for vmmd's VM state machine (vmmd/vm_fsm.c), driven alone
 * with hooks that record what it asks of vmmd: every row of the table
 * takes its transition and its action, every pair the table does not
 * list is refused and changes nothing, operations tell stale callbacks
 * apart, waiters hear what the state means for them, and
 * docs/vmmd-states.md shows the table as it is.
 *
 * test_vm_fsm --print writes the table as the document shows it.
 */
#include <sys/queue.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "vmmd_shared.h"
#include "vm_fsm.h"
#include "../check_run.h"

static const char *doc_path;

/* What the hooks saw. */
static int records, acts, last_act, settles, resumes, resume_ok;
static const char *last_why;

static void
h_record(struct vm *vm)
{
	records++;
}

static int
h_resume(struct vm *vm, char *why, size_t len)
{
	resumes++;
	if (!resume_ok) {
		snprintf(why, len, "vmmd is shutting down");
		return -1;
	}
	return 0;
}

static void
h_settled(void)
{
	settles++;
}

#define ACT(name, a)							\
static void								\
h_##name(struct vm *vm, const char *why)				\
{									\
	acts++;								\
	last_act = a;							\
	last_why = why;							\
}
ACT(boot_hello, VM_ACT_BOOT_HELLO)
ACT(boot_thaw, VM_ACT_BOOT_THAW)
ACT(resume_thaw, VM_ACT_RESUME_THAW)
ACT(boot_expired, VM_ACT_BOOT_EXPIRED)
ACT(fail, VM_ACT_FAIL)
ACT(qemu_gone, VM_ACT_QEMU_GONE)
ACT(destroy, VM_ACT_DESTROY)

static struct vm *
new_vm(void)
{
	struct vm *vm;

	ck_assert_ptr_nonnull(vm = calloc(1, sizeof(*vm)));
	snprintf(vm->rec.id, sizeof(vm->rec.id), "%032d", 7);
	TAILQ_INIT(&vm->waits);
	TAILQ_INIT(&vm->streams);
	return vm;
}

static void
setup(void)
{
	struct vm_fsm_hooks h;

	memset(&h, 0, sizeof(h));
	h.record = h_record;
	h.resume = h_resume;
	h.settled = h_settled;
	h.act[VM_ACT_BOOT_HELLO] = h_boot_hello;
	h.act[VM_ACT_BOOT_THAW] = h_boot_thaw;
	h.act[VM_ACT_RESUME_THAW] = h_resume_thaw;
	h.act[VM_ACT_BOOT_EXPIRED] = h_boot_expired;
	h.act[VM_ACT_FAIL] = h_fail;
	h.act[VM_ACT_QEMU_GONE] = h_qemu_gone;
	h.act[VM_ACT_DESTROY] = h_destroy;
	vm_fsm_init(&h);
	records = acts = settles = resumes = 0;
	last_act = -1;
	last_why = NULL;
	resume_ok = 1;
}

/* The operation states every guard is tried with. */
static const struct {
	int		busy;
	enum vm_op_step	step;
} ops[] = {
	{ 0, VM_STEP_NONE },
	{ 0, VM_STEP_PROBE },
	{ 1, VM_STEP_NONE },
	{ 1, VM_STEP_HELLO },
	{ 1, VM_STEP_IDENTITY },
	{ 1, VM_STEP_CLOCK },
};
#define NOPS	(sizeof(ops) / sizeof(ops[0]))

static int
pair_listed(enum vm_state s, enum vm_event ev)
{
	const struct vm_fsm_row *t;
	size_t n;

	t = vm_fsm_table(&n);
	for (size_t i = 0; i < n; i++)
		if (t[i].from == s && t[i].ev == ev)
			return 1;
	return 0;
}

/* Every row, where its guard holds and no row before it does, takes its
 * transition, records a changed state, and runs its action. */
START_TEST(every_row_transitions)
{
	const struct vm_fsm_row *t;
	size_t n, taken = 0;

	t = vm_fsm_table(&n);
	ck_assert_uint_gt(n, 0);
	for (size_t i = 0; i < n; i++) {
		for (size_t o = 0; o < NOPS; o++) {
			struct vm *vm;
			int rc;

			if (vm_fsm_find(t[i].from, t[i].ev, ops[o].busy,
			    ops[o].step) != &t[i])
				continue;
			setup();
			vm = new_vm();
			vm->rec.state = t[i].from;
			vm->busy = ops[o].busy;
			vm->op_step = ops[o].step;
			vm->guest_up = t[i].act == VM_ACT_GUEST_DOWN;
			rc = vm_fsm_fire(vm, t[i].ev, "why");
			ck_assert_msg(rc == 0, "row %zu refused", i);
			ck_assert_int_eq(vm->rec.state, t[i].to);
			ck_assert_int_eq(records, t[i].to != t[i].from ||
			    t[i].to == VM_FAILED);
			if (t[i].to == VM_FAILED)
				ck_assert_str_eq(vm->rec.failure, "why");
			switch (t[i].act) {
			case VM_ACT_NONE:
				ck_assert_int_eq(acts, 0);
				break;
			case VM_ACT_GUEST_UP:
				ck_assert_int_eq(acts, 0);
				ck_assert_int_eq(vm->guest_up, 1);
				break;
			case VM_ACT_GUEST_DOWN:
				ck_assert_int_eq(acts, 0);
				ck_assert_int_eq(vm->guest_up, 0);
				break;
			default:
				ck_assert_int_eq(acts, 1);
				ck_assert_int_eq(last_act, t[i].act);
				ck_assert_str_eq(last_why, "why");
			}
			taken++;
			free(vm);
		}
	}
	/* Each row was reachable with some operation state. */
	for (size_t i = 0; i < n; i++) {
		int reached = 0;

		for (size_t o = 0; o < NOPS; o++)
			if (vm_fsm_find(t[i].from, t[i].ev, ops[o].busy,
			    ops[o].step) == &t[i])
				reached = 1;
		ck_assert_msg(reached, "row %zu (%s, %s) is never taken", i,
		    vm_state_name(t[i].from), vm_event_name(t[i].ev));
	}
	ck_assert_uint_ge(taken, n);
}
END_TEST

/* A pair the table lists has a row whatever the operation; one it does
 * not list is refused in every operation state, and nothing changes. */
START_TEST(unlisted_pairs_refused)
{
	size_t refused = 0;

	for (int s = 0; s < VM_NSTATES; s++) {
		for (int ev = 0; ev < VM_NEVENTS; ev++) {
			for (size_t o = 0; o < NOPS; o++) {
				struct vm *vm;
				int rc;

				setup();
				vm = new_vm();
				vm->rec.state = (enum vm_state)s;
				vm->busy = ops[o].busy;
				vm->op_step = ops[o].step;
				vm->guest_up = 1;
				if (pair_listed((enum vm_state)s,
				    (enum vm_event)ev)) {
					ck_assert_ptr_nonnull(vm_fsm_find(
					    (enum vm_state)s,
					    (enum vm_event)ev, ops[o].busy,
					    ops[o].step));
					free(vm);
					continue;
				}
				rc = vm_fsm_fire(vm, (enum vm_event)ev, NULL);
				ck_assert_int_eq(rc, -1);
				ck_assert_int_eq(vm->rec.state, s);
				ck_assert_int_eq(vm->guest_up, 1);
				ck_assert_int_eq(records + acts, 0);
				refused++;
				free(vm);
			}
		}
	}
	ck_assert_uint_gt(refused, 0);
}
END_TEST

/* A gone VM takes no event at all. */
START_TEST(gone_is_final)
{
	const struct vm_fsm_row *t;
	size_t n;

	t = vm_fsm_table(&n);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_ne(t[i].from, VM_GONE);
}
END_TEST

static int done_calls;
static const char *done_code;

static void
done_cb(struct vm *vm, const char *code, const char *msg, void *arg)
{
	done_calls++;
	done_code = code;
}

/* A callback of an ended or cancelled operation sees that it is stale. */
START_TEST(op_tokens_go_stale)
{
	struct vm *vm = new_vm();
	void *tok;

	setup();
	done_calls = 0;
	vm->rec.state = VM_RUNNING;
	vm_op_begin(vm, done_cb, NULL);
	tok = op_token(vm);
	ck_assert(op_current(vm, tok));
	vm_op_step(vm, VM_STEP_CLOCK);
	ck_assert_int_eq(vm->op_step, VM_STEP_CLOCK);
	vm_op_cancel(vm, "not_found", "the VM was destroyed");
	ck_assert_int_eq(done_calls, 1);
	ck_assert_str_eq(done_code, "not_found");
	ck_assert(!op_current(vm, tok));
	ck_assert_int_eq(vm->busy, 0);
	ck_assert_int_eq(vm->op_step, VM_STEP_NONE);
	ck_assert_int_eq(settles, 1);
	/* A new operation's token is not the old one's. */
	vm_op_begin(vm, done_cb, NULL);
	ck_assert(!op_current(vm, tok));
	vm_op_done(vm, NULL, NULL);
	ck_assert_int_eq(done_calls, 2);
	ck_assert_ptr_null(done_code);
	/* Cancelling when nothing runs tells no one. */
	vm_op_cancel(vm, "unavailable", "x");
	ck_assert_int_eq(done_calls, 2);
	free(vm);
}
END_TEST

/* A create waits for the hello; the waiters hear once the VM runs. */
START_TEST(waiters_follow_the_state)
{
	struct vm *vm = new_vm();

	setup();
	done_calls = 0;
	vm->rec.state = VM_CREATING;
	vm_op_begin(vm, NULL, NULL);
	vm_ready(vm, done_cb, NULL);
	ck_assert_int_eq(done_calls, 0);
	/* A hello before QEMU is up only marks the guest up. */
	ck_assert_int_eq(vm_fsm_fire(vm, VM_EV_HELLO, NULL), 0);
	ck_assert_int_eq(acts, 0);
	ck_assert_int_eq(vm->guest_up, 1);
	vm_op_step(vm, VM_STEP_HELLO);
	ck_assert_int_eq(vm_fsm_fire(vm, VM_EV_HELLO, NULL), 0);
	ck_assert_int_eq(last_act, VM_ACT_BOOT_HELLO);
	ck_assert_int_eq(vm_fsm_fire(vm, VM_EV_BOOTED, NULL), 0);
	ck_assert_int_eq(done_calls, 0);	/* the operation still runs */
	vm_op_done(vm, NULL, NULL);
	ck_assert_int_eq(done_calls, 1);
	ck_assert_ptr_null(done_code);
	ck_assert(TAILQ_EMPTY(&vm->waits));

	/* A paused VM is resumed for its waiter, unless vmmd stops. */
	done_calls = 0;
	vm->rec.state = VM_PAUSED;
	vm_ready(vm, done_cb, NULL);
	ck_assert_int_eq(resumes, 1);
	ck_assert_int_eq(done_calls, 0);
	ck_assert(!TAILQ_EMPTY(&vm->waits));
	resume_ok = 0;
	vm_ready(vm, done_cb, NULL);
	ck_assert_int_eq(done_calls, 1);
	ck_assert_str_eq(done_code, "unavailable");

	/* A failure answers the waiter still queued. */
	ck_assert_int_eq(vm_fsm_fire(vm, VM_EV_FAIL, "broken"), 0);
	vm_wake_waiters(vm);
	ck_assert_int_eq(done_calls, 2);
	ck_assert_str_eq(done_code, "unavailable");
	ck_assert(TAILQ_EMPTY(&vm->waits));

	/* Gone waiters hear only at the teardown, each once. */
	done_calls = 0;
	vm_wait_gone(vm, done_cb, NULL);
	vm_wait_gone(vm, done_cb, NULL);
	ck_assert_int_eq(vm_fsm_fire(vm, VM_EV_DESTROY, NULL), 0);
	ck_assert_int_eq(last_act, VM_ACT_DESTROY);
	ck_assert_int_eq(vm_fsm_fire(vm, VM_EV_DESTROY, NULL), 0);
	ck_assert_int_eq(done_calls, 0);
	vm_ready(vm, done_cb, NULL);
	ck_assert_int_eq(done_calls, 1);
	ck_assert_str_eq(done_code, "not_found");
	ck_assert_int_eq(vm_fsm_fire(vm, VM_EV_TORN_DOWN, NULL), 0);
	vm_waits_gone(vm);
	ck_assert_int_eq(done_calls, 3);
	ck_assert(TAILQ_EMPTY(&vm->waits));
	ck_assert_int_eq(vm_fsm_fire(vm, VM_EV_FAIL, "late"), -1);
	free(vm);
}
END_TEST

/* Every waiter has a deadline field, none set by today's waits. */
START_TEST(waiters_have_deadlines)
{
	struct vm *vm = new_vm();
	struct vm_waiter *w;

	setup();
	vm->rec.state = VM_HIBERNATED;
	vm->busy = 1;
	vm_ready(vm, done_cb, NULL);
	vm_wait_gone(vm, done_cb, NULL);
	TAILQ_FOREACH(w, &vm->waits, entry)
		ck_assert_int_eq(w->deadline_ms, 0);
	while ((w = TAILQ_FIRST(&vm->waits)) != NULL) {
		TAILQ_REMOVE(&vm->waits, w, entry);
		free(w);
	}
	free(vm);
}
END_TEST

/* What lies between the document's two markers, or NULL. */
static char *
doc_table(const char *path)
{
	static const char begin[] = "<!-- BEGIN vm_fsm table -->\n";
	static const char end[] = "<!-- END vm_fsm table -->";
	char *text, *b, *e, *out;
	FILE *f;
	long len;

	if ((f = fopen(path, "r")) == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	ck_assert_ptr_nonnull(text = calloc(1, (size_t)len + 1));
	ck_assert_uint_eq(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	if ((b = strstr(text, begin)) == NULL ||
	    (e = strstr(b, end)) == NULL) {
		free(text);
		return NULL;
	}
	b += strlen(begin);
	ck_assert_ptr_nonnull(out = strndup(b, (size_t)(e - b)));
	free(text);
	return out;
}

/* docs/vmmd-states.md shows the table vm_fsm.c has, and its diagram. */
START_TEST(doc_in_sync)
{
	char *want, *have;

	ck_assert_ptr_nonnull(doc_path);
	ck_assert_ptr_nonnull(want = vm_fsm_doc());
	have = doc_table(doc_path);
	ck_assert_msg(have != NULL, "%s: no table between the markers",
	    doc_path);
	ck_assert_msg(strcmp(want, have) == 0, "%s is out of date: write "
	    "test_vm_fsm --print between its markers", doc_path);
	free(want);
	free(have);
}
END_TEST

int
main(int argc, char **argv)
{
	Suite *s;
	TCase *tc;

	if (argc == 2 && strcmp(argv[1], "--print") == 0) {
		char *doc = vm_fsm_doc();

		if (doc == NULL)
			return 1;
		fputs(doc, stdout);
		free(doc);
		return 0;
	}
	if (argc == 2)
		doc_path = argv[1];
	log_init("test_vm_fsm", 1, 0);
	s = suite_create("vm_fsm");
	tc = tcase_create("core");
	tcase_add_test(tc, every_row_transitions);
	tcase_add_test(tc, unlisted_pairs_refused);
	tcase_add_test(tc, gone_is_final);
	tcase_add_test(tc, op_tokens_go_stale);
	tcase_add_test(tc, waiters_follow_the_state);
	tcase_add_test(tc, waiters_have_deadlines);
	tcase_add_test(tc, doc_in_sync);
	suite_add_tcase(s, tc);
	return check_run(s);
}
