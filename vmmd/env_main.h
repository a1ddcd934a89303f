/*
 * struct vmmd, what vmmd holds for the whole process, field by field: for
 * main() (vmmd.c), which fills it in, and env.c, which hands it out.  The
 * rest of vmmd sees env.h alone.
 */
#ifndef MCPVM_VMMD_ENV_MAIN_H
#define MCPVM_VMMD_ENV_MAIN_H

#include <sys/types.h>

#include "cgroup.h"
#include "conf.h"

struct vmmd {
	struct mcpvm_conf	 conf;
	const char		*conf_path;
	struct event_base	*base;
	struct store		*store;
	struct audit		*audit;
	struct worker_pool	*workers;
	struct qemu_backend	*qemu;
	struct cg_host		 cg;
	struct ipc_server	*srv_mcpd, *srv_ctl, *srv_approvals;
	struct authclient	*authd;
	uid_t			 mcpd_uid;
	gid_t			 admin_gid;
	gid_t			 approvers_gid;	/* -1: no such group */
	int			 foreground, verbose;
	int			 shutting_down;
	/* Every step of the shutdown has started: until then no step's
	 * end may exit vmmd (vmmd_maybe_exit). */
	int			 stop_started;
	/* VMs the shutdown hibernated, said at exit. */
	int			 hibernated;
	/* VMs the shutdown could not hibernate, left running for the next
	 * vmmd to take up. */
	int			 left_running;
};

extern struct vmmd *env;

#endif
