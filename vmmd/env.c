/*
 * vmmd's one process-wide state (env.h), and its exit once it stops: the
 * loop ends when no part that registered its pending work has any left.
 */
#include <stddef.h>

#include <event2/event.h>

#include "env.h"
#include "log.h"

#define MAX_PENDING	4

struct vmmd *env;

static int	(*pending[MAX_PENDING])(void);
static size_t	npending;

void
vmmd_pending_register(int (*fn)(void))
{
	if (npending == MAX_PENDING)
		fatalx("%s: too many", __func__);
	pending[npending++] = fn;
}

void
vmmd_maybe_exit(void)
{
	if (!env->shutting_down)
		return;
	for (size_t i = 0; i < npending; i++)
		if (pending[i]())
			return;
	event_base_loopexit(env->base, NULL);
}
