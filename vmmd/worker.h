/*
 * A small thread pool for vmmd: blocking work (disk clones, fsyncs, digests)
 * runs in a worker thread and its completion is delivered back in the
 * libevent loop thread, so the loop never waits on the disk.
 */
#ifndef VMMD_WORKER_H
#define VMMD_WORKER_H

struct event_base;
struct worker_pool;

/* Runs in a worker thread: must not touch the event loop or its objects. */
typedef void	(*worker_fn)(void *arg);
/* Runs afterwards in the loop thread, with the same argument. */
typedef void	(*worker_done_fn)(void *arg);

struct worker_pool *worker_pool_new(struct event_base *, unsigned nthreads);
/*
 * Queues fn(arg); done(arg) follows in the loop thread once fn returned.
 * Call from the loop thread.  Jobs start in submission order.  Returns -1
 * (errno set) when the pool is shutting down or out of memory.
 */
int	worker_submit(struct worker_pool *, worker_fn fn, worker_done_fn done,
	    void *arg);
/* Jobs queued or running, not yet delivered to their done callback. */
unsigned worker_pending(const struct worker_pool *);
/*
 * Waits for running and queued jobs to finish, runs their done callbacks,
 * then frees the pool.  Call from the loop thread, outside a done callback.
 */
void	worker_pool_free(struct worker_pool *);

#endif
