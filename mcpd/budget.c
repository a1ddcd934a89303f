/*
 * mcpd's counts per workspace (budget.h).  A workspace has an entry only
 * while it holds something, so the list is at most as long as the
 * connections open (max_connections bounds it).  Runs in mcpd.
 */
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "log.h"

static const char *const budget_keys[BUDGET_NKINDS] = {
	"max_connections_per_workspace",
	"max_calls_per_workspace",
	"max_listens_per_workspace",
};

void
budgets_init(struct budgets *bs, unsigned int max_connections,
    unsigned int max_calls, unsigned int max_listens)
{
	memset(bs, 0, sizeof(*bs));
	TAILQ_INIT(&bs->list);
	bs->limit[BUDGET_CONNECTIONS] = max_connections;
	bs->limit[BUDGET_CALLS] = max_calls;
	bs->limit[BUDGET_LISTENS] = max_listens;
}

static struct budget *
budget_find(const struct budgets *bs, const char *workspace)
{
	struct budget *b;

	TAILQ_FOREACH(b, &bs->list, entry)
		if (strcmp(b->workspace, workspace) == 0)
			return b;
	return NULL;
}

int
budget_take(struct budgets *bs, const char *workspace, enum budget_kind k,
    struct budget **out)
{
	struct budget *b;

	*out = NULL;
	if ((b = budget_find(bs, workspace)) == NULL) {
		if (bs->limit[k] == 0)
			return -1;
		if ((b = calloc(1, sizeof(*b))) == NULL) {
			log_warn("%s", __func__);
			return -1;
		}
		strncpy(b->workspace, workspace, sizeof(b->workspace) - 1);
		TAILQ_INSERT_HEAD(&bs->list, b, entry);
	}
	if (b->n[k] >= bs->limit[k])
		return -1;
	b->n[k]++;
	*out = b;
	return 0;
}

void
budget_put(struct budgets *bs, struct budget *b, enum budget_kind k)
{
	int k2;

	if (b == NULL || b->n[k] == 0)
		return;
	b->n[k]--;
	for (k2 = 0; k2 < BUDGET_NKINDS; k2++)
		if (b->n[k2] != 0)
			return;
	TAILQ_REMOVE(&bs->list, b, entry);
	free(b);
}

unsigned int
budget_held(const struct budgets *bs, const char *workspace,
    enum budget_kind k)
{
	const struct budget *b = budget_find(bs, workspace);

	return b != NULL ? b->n[k] : 0;
}

const char *
budget_key(enum budget_kind k)
{
	return budget_keys[k];
}
