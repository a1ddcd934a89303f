/*
 * One request to vmmd, from mcpd or vmctl, and its answer: the reply
 * (checked against the tool's output schema first), the error, the
 * progress notices, and what every answer leaves behind, the retry
 * receipt and the audit line (request.c).
 */
#ifndef MCPVM_VMMD_REQUEST_H
#define MCPVM_VMMD_REQUEST_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "decode.h"
#include "gates.h"
#include "store.h"

struct ipc_conn;
struct request_joiners;

/* What authd says a credential may do. */
struct policy {
	int		network;
	size_t		nimages;	/* 0: every configured image */
	char		images[32][65];
	long long	max_vms;	/* 0: no limit of its own */
	long long	memory_mib;
	long long	storage_gib;
	long long	max_streams;
	struct egress	egress;		/* public when authd sends none */
	uint64_t	egress_rate;	/* bytes a second; 0 none */
	struct gates	gates;		/* what needs approval; none when
					 * authd sends none */
};

struct tool;
struct tool_def;

/*
 * One request of mcpd's (a tool call, a stream or broker pipe open, the
 * stats) or of vmctl's, from its arrival until its reply.  The connection
 * it came on may end first: conn is then NULL and the reply goes nowhere,
 * but the work and its receipt still finish.
 */
struct request {
	TAILQ_ENTRY(request)	 entry;
	struct ipc_conn		*conn;
	uint32_t		 id;
	/* mcpd's message as decode_mcpd read it; its strings point into
	 * body, which the request holds until it is freed. */
	struct mcpd_msg		 msg;
	struct json_object	*body;
	/* What answers it, once authd has named the workspace (vmmd.c's
	 * table of mcpd's messages). */
	void			(*handler)(struct request *);
	/* IPC_VM_TOOL: the tool, its entry in the tool table (tools.h) and
	 * its schemas; vmctl's audited commands name a "vmctl:" tool. */
	char			 tool[32];
	const struct tool_def	*def;
	const struct tool	*schema;
	struct json_object	*args;
	char			 workspace[64];
	struct policy		 policy;
	/* The egress policy of the VMs this request makes: the policy's,
	 * or the narrowing its "egress" argument asked for (tool_egress). */
	struct egress		 egress;
	int			 admin;		/* from vmctl: any workspace */
	char			 request_id[129];	/* receipt, or "" */
	long long		 arrived_ms;	/* wall clock; the receipt's */
	char			 vm_id[VM_ID_LEN + 1];	/* for the audit */
	char			 job_id[32];	/* vm_exec's, once recorded */
	int			 mutation;	/* audited */
	int			 progress;	/* client wants progress */
	int			 checked;	/* result checked in parts */
	/* It reached the guest and may have run there: a failure now
	 * leaves its receipt uncertain, never forgotten. */
	int			 uncertain;
	/*
	 * Set while a tool holds the request across a wait (vm_exec's
	 * wait_seconds, vm_run): on_cancel when mcpd cancels it (it never
	 * answers from inside), on_join when a retry of the same
	 * request_id arrives meanwhile (0: it will be answered with this
	 * request's answer).  A request without on_join keeps such retries
	 * in joined, and request_reply or request_error answers them with
	 * its own answer.  When mcpd's connection ends instead (mcpd
	 * restarts), a request of a TOOL_OUTLIVES tool goes on unheard: its
	 * job or run is not its caller's to lose, the receipt keeps the
	 * answer, and a retry joins it meanwhile.  Any other is cancelled.
	 */
	int			 cancelled;	/* mcpd cancelled it, or left */
	void			(*on_cancel)(struct request *);
	int			(*on_join)(struct request *,
				    struct request *retry);
	struct request_joiners	*joined;	/* NULL until a retry joins */
	void			*hold;
	/* A gated call's proposal (approve.c): its IPC_ERROR carries it. */
	struct json_object	*proposal;
	/* The proposal whose approvals this call used: its outcome goes
	 * there too. */
	char			 proposal_id[PROPOSAL_ID_LEN + 1];
};

/* vmmd's requests in flight, oldest first. */
TAILQ_HEAD(request_head, request);
struct request_head *request_all(void);
/* A new request on conn (NULL: none), among vmmd's requests. */
struct request *request_new(struct ipc_conn *, uint32_t id);
void	request_reply(struct request *, struct json_object *result);
/*
 * Makes retry, a retry of first's request_id, wait for first's answer:
 * through first's on_join while a tool holds it, else in first->joined.
 * 0, or -1 when max_joined_retries (or memory) says no.
 */
int	request_join(struct request *first, struct request *retry);
void	request_error(struct request *, const char *code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
/* The request was answered some other way (a stream, the stats). */
void	request_drop(struct request *);
void	request_progress(struct request *, int progress, int total,
	    const char *message);

#endif
