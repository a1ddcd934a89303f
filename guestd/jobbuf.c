/*
 * guestd: job output retention and timeout budgets; see jobbuf.h.
 */
#include <stdlib.h>
#include <string.h>

#include "jobbuf.h"

void
jobout_init(struct jobout *o, size_t limit)
{
	memset(o, 0, sizeof(*o));
	o->limit = limit;
}

int
jobout_append(struct jobout *o, int s, const void *buf, size_t n)
{
	size_t room = o->limit - o->len[0] - o->len[1];
	size_t keep = n < room ? n : room;

	o->seen[s] += n;
	if (keep < n)
		o->truncated = 1;
	if (keep == 0)
		return 0;
	if (o->len[s] + keep > o->cap[s]) {
		size_t cap = o->cap[s] == 0 ? 4096 : o->cap[s];
		uint8_t *p;

		while (cap < o->len[s] + keep)
			cap *= 2;
		if (cap > o->limit)
			cap = o->limit;
		if ((p = realloc(o->data[s], cap)) == NULL)
			return -1;
		o->data[s] = p;
		o->cap[s] = cap;
	}
	memcpy(o->data[s] + o->len[s], buf, keep);
	o->len[s] += keep;
	return 0;
}

size_t
jobout_read(const struct jobout *o, int s, uint64_t cursor, size_t max,
    const uint8_t **p)
{
	size_t n;

	*p = NULL;
	if (cursor >= o->len[s])
		return 0;
	n = o->len[s] - (size_t)cursor;
	if (n > max)
		n = max;
	*p = o->data[s] + cursor;
	return n;
}

void
jobout_free(struct jobout *o)
{
	free(o->data[0]);
	free(o->data[1]);
	memset(o, 0, sizeof(*o));
}

void
budget_start(struct budget *b, int64_t limit_ns, int64_t now, int frozen)
{
	memset(b, 0, sizeof(*b));
	b->limit_ns = limit_ns;
	b->frozen = frozen;
	b->counting = !frozen;
	b->since_ns = now;
}

void
budget_freeze(struct budget *b, int64_t now)
{
	if (b->stopped || b->frozen)
		return;
	if (b->counting && now > b->since_ns)
		b->used_ns += now - b->since_ns;
	b->counting = 0;
	b->frozen = 1;
}

void
budget_thaw(struct budget *b, int64_t now)
{
	if (b->stopped || !b->frozen)
		return;
	b->frozen = 0;
	b->counting = 1;
	b->since_ns = now;
}

void
budget_stop(struct budget *b, int64_t now)
{
	if (b->stopped)
		return;
	b->used_ns = budget_used(b, now);
	b->counting = 0;
	b->stopped = 1;
}

int64_t
budget_used(const struct budget *b, int64_t now)
{
	if (b->counting && now > b->since_ns)
		return b->used_ns + (now - b->since_ns);
	return b->used_ns;
}

int64_t
budget_left(const struct budget *b, int64_t now)
{
	int64_t used;

	if (b->limit_ns == 0 || !b->counting)
		return INT64_MAX;
	used = budget_used(b, now);
	return used >= b->limit_ns ? 0 : b->limit_ns - used;
}
