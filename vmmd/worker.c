/*
 * Worker threads for vmmd (see worker.h).  Completions are handed to the
 * loop thread through an eventfd, which needs no libevent thread support
 * and so works on any event_base however it was created.
 */
#include <sys/eventfd.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "worker.h"

struct job {
	struct job	*next;
	worker_fn	 fn;
	worker_done_fn	 done;
	void		*arg;
};

struct worker_pool {
	pthread_mutex_t	 mtx;
	pthread_cond_t	 cv;
	struct job	*todo, **todo_tail;	/* FIFO: clones start in order */
	struct job	*done, **done_tail;
	unsigned	 pending;		/* submitted, not yet delivered */
	int		 stopping;
	int		 efd;
	struct event	*ev;
	pthread_t	*threads;
	unsigned	 nthreads;
};

static void *
worker_main(void *arg)
{
	struct worker_pool *wp = arg;
	struct job *j;
	uint64_t one = 1;

	for (;;) {
		pthread_mutex_lock(&wp->mtx);
		while (wp->todo == NULL && !wp->stopping)
			pthread_cond_wait(&wp->cv, &wp->mtx);
		if (wp->todo == NULL) {
			pthread_mutex_unlock(&wp->mtx);
			return NULL;
		}
		j = wp->todo;
		wp->todo = j->next;
		if (wp->todo == NULL)
			wp->todo_tail = &wp->todo;
		pthread_mutex_unlock(&wp->mtx);

		j->fn(j->arg);

		pthread_mutex_lock(&wp->mtx);
		j->next = NULL;
		*wp->done_tail = j;
		wp->done_tail = &j->next;
		pthread_mutex_unlock(&wp->mtx);
		/* An eventfd counter cannot fill up at our rates; ignore EAGAIN. */
		(void)!write(wp->efd, &one, sizeof(one));
	}
}

/* Loop thread: deliver every finished job, oldest first. */
static void
worker_deliver(struct worker_pool *wp)
{
	struct job *list, *j;

	pthread_mutex_lock(&wp->mtx);
	list = wp->done;
	wp->done = NULL;
	wp->done_tail = &wp->done;
	pthread_mutex_unlock(&wp->mtx);

	while ((j = list) != NULL) {
		list = j->next;
		wp->pending--;
		if (j->done != NULL)
			j->done(j->arg);
		free(j);
	}
}

static void
worker_ready(evutil_socket_t fd, short what, void *arg)
{
	struct worker_pool *wp = arg;
	uint64_t n;

	(void)!read(fd, &n, sizeof(n));
	worker_deliver(wp);
}

struct worker_pool *
worker_pool_new(struct event_base *base, unsigned nthreads)
{
	struct worker_pool *wp;
	unsigned i;

	if (nthreads == 0)
		nthreads = 1;
	if ((wp = calloc(1, sizeof(*wp))) == NULL)
		return NULL;
	pthread_mutex_init(&wp->mtx, NULL);
	pthread_cond_init(&wp->cv, NULL);
	wp->todo_tail = &wp->todo;
	wp->done_tail = &wp->done;
	wp->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (wp->efd == -1)
		goto fail;
	wp->ev = event_new(base, wp->efd, EV_READ | EV_PERSIST, worker_ready,
	    wp);
	if (wp->ev == NULL || event_add(wp->ev, NULL) == -1)
		goto fail;
	if ((wp->threads = calloc(nthreads, sizeof(pthread_t))) == NULL)
		goto fail;
	for (i = 0; i < nthreads; i++) {
		if ((errno = pthread_create(&wp->threads[i], NULL, worker_main,
		    wp)) != 0)
			break;
		wp->nthreads++;
	}
	if (wp->nthreads == 0)
		goto fail;
	return wp;
fail:
	log_warn("%s", __func__);
	if (wp->ev != NULL)
		event_free(wp->ev);
	if (wp->efd != -1)
		close(wp->efd);
	free(wp->threads);
	free(wp);
	return NULL;
}

int
worker_submit(struct worker_pool *wp, worker_fn fn, worker_done_fn done,
    void *arg)
{
	struct job *j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		return -1;
	j->fn = fn;
	j->done = done;
	j->arg = arg;
	pthread_mutex_lock(&wp->mtx);
	if (wp->stopping) {
		pthread_mutex_unlock(&wp->mtx);
		free(j);
		errno = ESHUTDOWN;
		return -1;
	}
	*wp->todo_tail = j;
	wp->todo_tail = &j->next;
	wp->pending++;
	pthread_cond_signal(&wp->cv);
	pthread_mutex_unlock(&wp->mtx);
	return 0;
}

unsigned
worker_pending(const struct worker_pool *wp)
{
	return wp->pending;
}

void
worker_pool_free(struct worker_pool *wp)
{
	unsigned i;

	if (wp == NULL)
		return;
	pthread_mutex_lock(&wp->mtx);
	wp->stopping = 1;
	pthread_cond_broadcast(&wp->cv);
	pthread_mutex_unlock(&wp->mtx);
	/* Workers drain the queue before they exit. */
	for (i = 0; i < wp->nthreads; i++)
		pthread_join(wp->threads[i], NULL);
	worker_deliver(wp);
	event_free(wp->ev);
	close(wp->efd);
	pthread_cond_destroy(&wp->cv);
	pthread_mutex_destroy(&wp->mtx);
	free(wp->threads);
	free(wp);
}
