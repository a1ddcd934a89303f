/*
 * What vmmd holds for the whole process, and the one way the rest of vmmd
 * reaches it: its configuration, the loop, the store, the audit log, the
 * worker pool, the QEMU backend, the cgroups, authd's client, and whether
 * it is shutting down.  main() (vmmd.c) fills it in (env_main.h) before
 * the loop runs; every other file reads it through these functions, so
 * what a part depends on is named here and nothing else writes it.  The
 * VMs are vm.c's (vm_all), the requests in flight request.c's
 * (request_all).
 */
#ifndef MCPVM_VMMD_ENV_H
#define MCPVM_VMMD_ENV_H

struct audit;
struct authclient;
struct cg_host;
struct event_base;
struct mcpvm_conf;
struct qemu_backend;
struct store;
struct worker_pool;

const struct mcpvm_conf	*vmmd_conf(void);
struct event_base	*vmmd_base(void);
struct store		*vmmd_store(void);
struct audit		*vmmd_audit(void);
struct worker_pool	*vmmd_workers(void);
struct qemu_backend	*vmmd_qemu(void);
const struct cg_host	*vmmd_cg(void);
struct authclient	*vmmd_authd(void);
/* vmmd -d: logs go to stderr, and so do its children's. */
int	vmmd_foreground(void);
/* How many -v. */
int	vmmd_verbose(void);
int	vmmd_shutting_down(void);
/* A VM the shutdown could not hibernate is left running for the next
 * vmmd to take up: main says how many at exit. */
void	vmmd_left_running(void);
/* A VM the shutdown hibernated: main says how many at exit. */
void	vmmd_hibernated(void);

/*
 * Once shutting_down, vmmd exits when no part has work left that it must
 * wait for: each part registers what tells it (1: some is left), and
 * calls vmmd_maybe_exit when some of its own ends.  Nothing exits before
 * every step of the shutdown has started (vmmd_stop_started): a step that
 * ends at once, such as a booting VM destroyed, must not end vmmd before
 * the VMs' hibernations have begun.
 */
void	vmmd_pending_register(int (*pending)(void));
void	vmmd_maybe_exit(void);
void	vmmd_stop_started(void);

#endif
