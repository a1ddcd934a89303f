/*
 * vmmd's one process-wide state (env.h), handed out field by field, and
 * its exit once it stops: the loop ends when no part that registered its
 * pending work has any left.
 */
#include <stddef.h>

#include <event2/event.h>

#include "env.h"
#include "env_main.h"
#include "log.h"

#define MAX_PENDING	4

struct vmmd *env;

static int	(*pending[MAX_PENDING])(void);
static size_t	npending;

const struct mcpvm_conf *
vmmd_conf(void)
{
	return &env->conf;
}

struct event_base *
vmmd_base(void)
{
	return env->base;
}

struct store *
vmmd_store(void)
{
	return env->store;
}

struct audit *
vmmd_audit(void)
{
	return env->audit;
}

struct worker_pool *
vmmd_workers(void)
{
	return env->workers;
}

struct qemu_backend *
vmmd_qemu(void)
{
	return env->qemu;
}

const struct cg_host *
vmmd_cg(void)
{
	return &env->cg;
}

struct authclient *
vmmd_authd(void)
{
	return env->authd;
}

int
vmmd_foreground(void)
{
	return env->foreground;
}

int
vmmd_verbose(void)
{
	return env->verbose;
}

int
vmmd_shutting_down(void)
{
	return env->shutting_down;
}

void
vmmd_left_running(void)
{
	env->left_running++;
}

void
vmmd_hibernated(void)
{
	env->hibernated++;
}

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
	if (!env->shutting_down || !env->stop_started)
		return;
	for (size_t i = 0; i < npending; i++)
		if (pending[i]())
			return;
	event_base_loopexit(env->base, NULL);
}

void
vmmd_stop_started(void)
{
	env->stop_started = 1;
	vmmd_maybe_exit();
}
