/*
 * What vmmd holds for the whole process, in one place: its configuration,
 * the loop, the store, the audit log, the worker pool, the QEMU backend,
 * the cgroups, its servers and authd's client, the VMs and the requests
 * in flight.  main() (vmmd.c) fills it in before the loop runs; the rest
 * of vmmd reads it through env.
 */
#ifndef MCPVM_VMMD_ENV_H
#define MCPVM_VMMD_ENV_H

#include <sys/queue.h>
#include <sys/types.h>

#include "cgroup.h"
#include "conf.h"

struct audit;
struct authclient;
struct event_base;
struct ipc_server;
struct qemu_backend;
struct request;
struct store;
struct vm;
struct worker_pool;

struct vmmd {
	struct mcpvm_conf	 conf;
	const char		*conf_path;
	struct event_base	*base;
	struct store		*store;
	struct audit		*audit;
	struct worker_pool	*workers;
	struct qemu_backend	*qemu;
	struct cg_host		 cg;
	struct ipc_server	*srv_mcpd, *srv_ctl;
	struct authclient	*authd;
	uid_t			 mcpd_uid;
	gid_t			 admin_gid;
	int			 foreground, verbose;
	int			 shutting_down;
	/* VMs the shutdown could not hibernate, left running for the next
	 * vmmd to take up. */
	int			 left_running;
	TAILQ_HEAD(, vm)	 vms;
	TAILQ_HEAD(, request)	 requests;
};

extern struct vmmd *env;

/*
 * Once shutting_down, vmmd exits when no part has work left that it must
 * wait for: each part registers what tells it (1: some is left), and
 * calls vmmd_maybe_exit when some of its own ends.
 */
void	vmmd_pending_register(int (*pending)(void));
void	vmmd_maybe_exit(void);

#endif
