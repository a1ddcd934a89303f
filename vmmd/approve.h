/*
 * vmmd's enforcement of human approval (issue #28): which calls a
 * workspace's gates hold back, the proposal each such call leaves for a
 * human, and the check, at run time, that enough distinct enrolled keys
 * signed exactly that proposal.  The decisions arrive on the approvals
 * socket (approval_ctl.c); vmmd trusts neither the socket's word nor the
 * database's "state" column, only signatures it verifies itself.
 */
#ifndef VMMD_APPROVE_H
#define VMMD_APPROVE_H

#include <stddef.h>

#include <json-c/json.h>

/* Who may use approvals_socket besides root (packaging makes it). */
#define APPROVERS_GROUP	"mcpvm-approvers"

struct request;
struct proposal_record;
struct ipc_conn;
struct ipc_msg;

/*
 * Before a tool's receipt check: 0 when the call may go on (no gate
 * applies, a receipt governs its request_id, or enough valid approvals
 * were just used up), -1 when it was answered (approval_required,
 * approval_denied, approval_expired, conflict, ...).
 */
int	approve_gate(struct request *);

/*
 * The agent- and operator-visible proposal object of r, with "workspace"
 * when with_ws.  Its "approvals" is the count of valid approvals now.
 */
struct json_object *proposal_to_json(const struct proposal_record *,
	    int with_ws);

/* The approvals socket's messages (IPC_APPROVAL_*), from peer uid. */
void	approvals_dispatch(struct ipc_conn *, struct ipc_msg *, void *);

/* After a gated call that ran: its outcome into its proposal. */
void	approve_outcome(const char *proposal_id, const char *outcome);

#endif
