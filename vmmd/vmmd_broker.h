/*
 * vmmd: job broker pipes (vmmd_broker.c).  What vmmd keeps of a pipe lives in
 * memory only: the SHA-256 of the controller's token and the route secret
 * that vmproxy and the job's relay in the guest share.
 */
#ifndef VMMD_BROKER_H
#define VMMD_BROKER_H

#include <json-c/json.h>

#define BROKER_SWEEP_SECONDS	5

struct vm;
struct request;

/* vm_exec with broker_pipe_token: a pending pipe, routed before the exec. */
void	 broker_exec_prepare(struct vm *, struct request *, const char *job_id,
	    struct json_object *call);
/* The exec call is sent: its copy of the secret is wiped before it goes. */
void	 broker_exec_wipe(struct json_object *call);
/* The exec's answer (res NULL: it failed): out gets "broker_pipe". */
void	 broker_exec_result(struct vm *, struct request *,
	    struct json_object *res, struct json_object *out);
/* A job status seen: a finished job's pipe goes. */
void	 broker_job_seen(struct vm *, const char *job_id, const char *state);
/* vmproxy (re)started: it learns every route again. */
void	 broker_proxy_up(struct vm *);
/* vmproxy's count of attached pipes. */
void	 broker_pipes_count(struct vm *, int);
int	 broker_has_pipes(const struct vm *);
void	 broker_vm_free(struct vm *);
/* IPC_VM_BROKER_OPEN, after authd named the workspace (vmmd.c). */
void	 broker_open(struct request *);
void	 broker_init(void);

#endif
