/*
 * vmmd: the tool table and what the files serving the tools share
 * (tools.c, tools_vm.c, tools_job.c, run.c).  Private to vmmd's daemon.
 */
#ifndef VMMD_TOOLS_H
#define VMMD_TOOLS_H

#include "vmmd_shared.h"

/* What vmmd does around a tool's handler (tool_def.flags). */
#define TOOL_MUTATES	0x1u	/* changes something: goes to the audit log */
#define TOOL_RECEIPT	0x2u	/* request_id receipts: a retry never reruns */
#define TOOL_WAKES	0x4u	/* needs the guest: wakes a suspended VM */
/* Its job or run goes on when mcpd's connection ends (an mcpd restart is
 * not a cancel); the receipt keeps the answer for the retry. */
#define TOOL_OUTLIVES	0x8u

/*
 * One tool of proto/tools.json as vmmd serves it: tools.c's table is the
 * only list of tool names in vmmd, and tools_table_check() holds it to
 * tools.json at startup.
 */
struct tool_def {
	const char	*name;
	unsigned int	 flags;
	void		(*handler)(struct request *);
	/* tool_job's tools: the guest call it makes, and its answer's shape */
	const char	*guest_op;
	proxy_cb	 guest_done;
	/* Arguments a retry may change without being another request: left
	 * out of the receipt's digest (NULL-terminated, or NULL). */
	const char *const *undigested;
	/* mcpd's question about one call of the tool, under way or ended
	 * (an MCP task's get or cancel, decode.c), or NULL: not asked. */
	void		(*task)(struct request *);
};

/* tools.c: the table, dispatch, receipts and what the handlers share */
const struct tool_def *tool_def_find(const char *name);
struct vm *tools_vm_named(struct request *, const char *vm_id);
struct vm *tools_owned_vm(struct request *);
void	tools_reply_error(struct request *, const char *code, const char *msg);

/* tools_vm.c: creating, listing, suspending, resuming and destroying */
void	tool_vm_create(struct request *);
void	tool_vm_list(struct request *);
void	tool_vm_status(struct request *);
void	tool_vm_suspend(struct request *);
void	tool_vm_resume(struct request *);
void	tool_vm_destroy(struct request *);

/* tools_job.c: commands, their jobs, and files */
void	tool_vm_exec(struct request *);
/* vm_job_*, vm_read_file, vm_write_file: one guest call each */
void	tool_job(struct request *);
void	job_status_done(struct vm *, struct json_object *, const char *,
	    const char *, int, void *);
void	job_cancel_done(struct vm *, struct json_object *, const char *,
	    const char *, int, void *);
void	job_output_done(struct vm *, struct json_object *, const char *,
	    const char *, int, void *);

/* snapshot.c: vm_snapshot, vm_snapshot_list, vm_snapshot_delete */
void	tool_vm_snapshot(struct request *);
void	tool_vm_snapshot_list(struct request *);
void	tool_vm_snapshot_delete(struct request *);

/* fork.c: vm_fork; and whether job copies of forks are still on the
 * worker pool (vmmd_pending_register). */
void	tool_vm_fork(struct request *);
int	fork_work_pending(void);

#endif
