/*
 * What each workspace holds of mcpd at once, counted once its credential
 * is verified: connections busy with its requests, tool calls in flight
 * and stateless subscriptions/listen streams.  Behind a TLS proxy every
 * tenant comes from the proxy's address, so these, beside the limits per
 * address, are what keep one workspace from taking another's share.
 */
#ifndef MCPD_BUDGET_H
#define MCPD_BUDGET_H

#include <sys/queue.h>

#include "auth.h"

enum budget_kind {
	BUDGET_CONNECTIONS,	/* max_connections_per_workspace */
	BUDGET_CALLS,		/* max_calls_per_workspace */
	BUDGET_LISTENS,		/* max_listens_per_workspace */
	BUDGET_NKINDS
};

/* One workspace that holds something now; freed when it holds nothing. */
struct budget {
	TAILQ_ENTRY(budget)	 entry;
	char			 workspace[AUTH_WORKSPACE_MAX];
	unsigned int		 n[BUDGET_NKINDS];
};

struct budgets {
	TAILQ_HEAD(, budget)	 list;
	unsigned int		 limit[BUDGET_NKINDS];
};

void	budgets_init(struct budgets *, unsigned int max_connections,
	    unsigned int max_calls, unsigned int max_listens);
/*
 * One more of kind for workspace: 0 and its entry in *out, or -1 when
 * the workspace already holds its limit (or memory ran out, logged).
 */
int	budget_take(struct budgets *, const char *workspace,
	    enum budget_kind, struct budget **out);
/* Gives back one of kind taken with budget_take; b may be freed. */
void	budget_put(struct budgets *, struct budget *, enum budget_kind);
/* What workspace holds of kind now. */
unsigned int budget_held(const struct budgets *, const char *workspace,
	    enum budget_kind);
/* The mcpvm.conf key of kind's limit, for the messages that name it. */
const char *budget_key(enum budget_kind);

#endif
