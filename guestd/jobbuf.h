/*
 * guestd: a job's retained output (two streams sharing one byte budget, read
 * by byte cursor) and its timeout budget, which only counts running time.
 * Pure bookkeeping without I/O, so the unit tests drive it directly.
 */
#ifndef MCPVM_GUESTD_JOBBUF_H
#define MCPVM_GUESTD_JOBBUF_H

#include <stddef.h>
#include <stdint.h>

#define JOB_STDOUT	0
#define JOB_STDERR	1

struct jobout {
	uint8_t		*data[2];
	size_t		 len[2];	/* retained bytes */
	size_t		 cap[2];
	uint64_t	 seen[2];	/* bytes the command wrote */
	size_t		 limit;		/* for both streams */
	int		 truncated;
};

void	 jobout_init(struct jobout *, size_t);
/* Keeps what fits under the shared limit, drops the rest; -1 on ENOMEM. */
int	 jobout_append(struct jobout *, int, const void *, size_t);
/* Bytes at cursor, at most max; *p points into the buffer. */
size_t	 jobout_read(const struct jobout *, int, uint64_t, size_t,
	    const uint8_t **);
void	 jobout_free(struct jobout *);

/*
 * Timeout accounting.  Time counts only between start/thaw and freeze/stop,
 * so a suspended guest never eats a job's budget.  Times in ns on
 * CLOCK_MONOTONIC; limit_ns 0 means no timeout.
 */
struct budget {
	int64_t		 limit_ns;
	int64_t		 used_ns;
	int64_t		 since_ns;
	int		 counting;
	int		 frozen;
	int		 stopped;
};

void	 budget_start(struct budget *, int64_t, int64_t, int);
void	 budget_freeze(struct budget *, int64_t);
void	 budget_thaw(struct budget *, int64_t);
void	 budget_stop(struct budget *, int64_t);
int64_t	 budget_used(const struct budget *, int64_t);
/* ns left before the timeout; INT64_MAX without one or while not counting */
int64_t	 budget_left(const struct budget *, int64_t);

#endif
