/*
 * Unit tests for vmmd/worker: jobs run off the loop thread, their
 * completions come back in the loop thread, a slow job does not hold up
 * the loop, and freeing the pool finishes and delivers what was queued.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "worker.h"
#include "../check_run.h"

static pthread_t loop_thread;

struct job {
	int		 ran_off_loop;
	int		 done_on_loop;
	int		 sleep_ms;
	int		*order;
	int		*counter;
	int		 seq;
};

static void
job_run(void *arg)
{
	struct job *j = arg;

	j->ran_off_loop = !pthread_equal(pthread_self(), loop_thread);
	if (j->sleep_ms > 0)
		usleep((useconds_t)j->sleep_ms * 1000);
}

static void
job_done(void *arg)
{
	struct job *j = arg;

	j->done_on_loop = pthread_equal(pthread_self(), loop_thread);
	if (j->counter != NULL)
		j->seq = ++*j->counter;
}

static int ticks;

static void
tick(evutil_socket_t fd, short what, void *arg)
{
	ticks++;
}

START_TEST(runs_off_loop_and_completes_on_it)
{
	struct event_base *base = event_base_new();
	struct worker_pool *wp;
	struct job slow = { 0 }, fast[8];
	struct timeval tv = { 0, 5000 };
	struct event *t;
	int count = 0, i;

	loop_thread = pthread_self();
	wp = worker_pool_new(base, 2);
	ck_assert_ptr_nonnull(wp);
	memset(fast, 0, sizeof(fast));
	slow.sleep_ms = 300;
	slow.counter = &count;
	ck_assert_int_eq(worker_submit(wp, job_run, job_done, &slow), 0);
	for (i = 0; i < 8; i++) {
		fast[i].counter = &count;
		ck_assert_int_eq(worker_submit(wp, job_run, job_done, &fast[i]),
		    0);
	}
	ck_assert_uint_eq(worker_pending(wp), 9);
	t = event_new(base, -1, EV_PERSIST, tick, NULL);
	event_add(t, &tv);
	while (count < 9)
		event_base_loop(base, EVLOOP_ONCE);
	/* The loop kept ticking while the slow job slept. */
	ck_assert_int_gt(ticks, 10);
	ck_assert_uint_eq(worker_pending(wp), 0);
	ck_assert(slow.ran_off_loop && slow.done_on_loop);
	for (i = 0; i < 8; i++) {
		ck_assert(fast[i].ran_off_loop && fast[i].done_on_loop);
		/* With two threads the fast ones overtake the slow one. */
		ck_assert_int_lt(fast[i].seq, slow.seq);
	}
	event_free(t);
	worker_pool_free(wp);
	event_base_free(base);
}
END_TEST

START_TEST(free_finishes_queued_jobs)
{
	struct event_base *base = event_base_new();
	struct worker_pool *wp;
	struct job j[5];
	int count = 0, i;

	loop_thread = pthread_self();
	wp = worker_pool_new(base, 1);
	memset(j, 0, sizeof(j));
	for (i = 0; i < 5; i++) {
		j[i].sleep_ms = 20;
		j[i].counter = &count;
		ck_assert_int_eq(worker_submit(wp, job_run, job_done, &j[i]), 0);
	}
	worker_pool_free(wp);
	ck_assert_int_eq(count, 5);
	/* One thread: strictly in submission order. */
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(j[i].seq, i + 1);
	event_base_free(base);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("worker");
	TCase *tc = tcase_create("pool");

	tcase_add_test(tc, runs_off_loop_and_completes_on_it);
	tcase_add_test(tc, free_finishes_queued_jobs);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
