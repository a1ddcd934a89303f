/*
 * vmmd's durable state in SQLite (WAL): VMs and their states, retry
 * receipts, and the jobs each VM has run.  Every transition is written
 * before its side effect (the in-between state) and after it (the final
 * state), so that a restart knows which side effects may be half done.
 * Runs in vmmd's loop thread, every call a short transaction, except
 * store_job_copy, which a worker thread runs on a connection of its own.
 */
#ifndef MCPVM_VMMD_STORE_H
#define MCPVM_VMMD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "egress.h"

struct store;

enum vm_state {
	VM_CREATING,
	VM_RUNNING,
	VM_PAUSED,
	VM_HIBERNATING,
	VM_HIBERNATED,
	VM_RESUMING,
	VM_DESTROYING,
	VM_FAILED,
	VM_GONE,
	VM_NSTATES
};

#define VM_ID_LEN	32	/* hex characters */
#define WORKSPACE_MAX	63

struct vm_record {
	char		 id[VM_ID_LEN + 1];
	char		 workspace[WORKSPACE_MAX + 1];
	int		 slot;
	enum vm_state	 state;
	char		 image[64];
	int		 vcpus;
	int		 memory_mib;
	long long	 disk_bytes;	/* the image size, for admission */
	int		 network;
	int		 idle_seconds;
	int		 idle_mode_pause;	/* 0 hibernate, 1 pause */
	long long	 created_at;	/* unix seconds */
	long long	 updated_at;
	int		 generation;	/* checkpoint generation */
	char		 failure[256];	/* why, when state is failed */
	char		 vmgenid[37];	/* its vmgenid GUID; "": no device */
	char		 snapshot_id[VM_ID_LEN + 1];	/* made from, or "" */
	char		 origin[12];	/* booted | snapshot | fork */
	int		 run;	/* vm_run's own VM: the next vmmd destroys it */
	/* Where it may connect, with network: its workspace's policy or
	 * the narrowing it was made with, as netd enforces it. */
	struct egress	 egress;
	/*
	 * What netd enforces now (vmmd.8, "Policy changes"): egress
	 * narrowed by the workspace's policy as authd last pushed it, that
	 * policy's rate (bytes a second, 0 none), and net_off when the
	 * workspace's network was turned off since: nothing gets out.
	 */
	struct egress	 egress_now;
	uint64_t	 egress_rate;
	int		 net_off;
};

const char	*vm_state_name(enum vm_state);
int		 vm_state_parse(const char *, enum vm_state *);
/* True for states a restart finds a side effect half done in. */
int		 vm_state_transient(enum vm_state);

/* Opens (creating 0600 if needed) and migrates; NULL with err. */
struct store	*store_open(const char *path, char *err, size_t errlen);
void		 store_close(struct store *);
/*
 * Makes every commit so far durable: one fdatasync for all of a loop
 * turn's, which vmmd runs before it writes any message (its IPC write
 * barrier), so nothing is answered, and no guest is asked to act, on a
 * commit a power loss could undo.  0, or -1 with err.
 */
int		 store_sync(struct store *, char *err, size_t errlen);

/*
 * Every call below that can fail returns -1 (NULL for a pointer) with err
 * saying why, and logs nothing: the caller does.
 */
int	store_vm_insert(struct store *, const struct vm_record *, char *err,
	    size_t errlen);
/* Sets state (and failure text for VM_FAILED, else clears it). */
int	store_vm_set_state(struct store *, const char *id, enum vm_state,
	    const char *failure, char *err, size_t errlen);
/* The three "now" fields of v, as vmmd applies a pushed policy. */
int	store_vm_set_egress_now(struct store *, const struct vm_record *v,
	    char *err, size_t errlen);
int	store_vm_set_generation(struct store *, const char *id, int gen,
	    char *err, size_t errlen);
int	store_vm_get(struct store *, const char *id, struct vm_record *,
	    char *err, size_t errlen);
/* Every VM not gone, ordered by creation; caller frees *out. */
int	store_vm_list(struct store *, const char *workspace_or_null,
	    struct vm_record **out, size_t *n, char *err, size_t errlen);
/* Marks a VM gone (its id stays known to its workspace) and forgets its
 * jobs. */
int	store_vm_delete(struct store *, const char *id, char *err,
	    size_t errlen);
/* 1 when id was a VM of workspace that has been destroyed, else 0. */
int	store_vm_was_destroyed(struct store *, const char *id,
	    const char *workspace, char *err, size_t errlen);
/* The lowest slot no retained VM uses, below max; -1 when all are. */
int	store_free_slot(struct store *, int max, char *err, size_t errlen);

/*
 * Retry receipts.  begin() records a pending request or tells what was
 * there before.
 */
enum receipt_status {
	RECEIPT_NEW,		/* recorded as pending: go ahead */
	RECEIPT_DONE,		/* same arguments, finished: *result is it */
	RECEIPT_MISMATCH,	/* same id, other tool or arguments */
	RECEIPT_PENDING,	/* same request still running here */
	RECEIPT_UNCERTAIN,	/* was running when vmmd died */
};

#define RECEIPTS_PER_WORKSPACE	4096

int	store_receipt_begin(struct store *, const char *workspace,
	    const char *request_id, const char *tool, const char *digest,
	    enum receipt_status *, char **result, char *err, size_t errlen);
/* 1 when request_id has a receipt (of any status), 0 when not, -1. */
int	store_receipt_known(struct store *, const char *workspace,
	    const char *request_id, char *err, size_t errlen);
/*
 * What request_id's receipt of tool holds: 1 with *status (DONE, PENDING
 * or UNCERTAIN) and, when done, *result (the stored answer; the caller
 * frees it); 0 when there is none of tool's; -1 with err.
 */
int	store_receipt_get(struct store *, const char *workspace,
	    const char *request_id, const char *tool,
	    enum receipt_status *status, char **result, char *err,
	    size_t errlen);
int	store_receipt_finish(struct store *, const char *workspace,
	    const char *request_id, const char *result, char *err,
	    size_t errlen);
/* Forgets a receipt whose request had no effect (e.g. refused). */
int	store_receipt_forget(struct store *, const char *workspace,
	    const char *request_id, char *err, size_t errlen);
/* A request that may have run but whose result was lost. */
int	store_receipt_uncertain(struct store *, const char *workspace,
	    const char *request_id, char *err, size_t errlen);
/* At startup: every pending receipt's outcome is now unknown. */
int	store_receipts_mark_uncertain(struct store *, char *err,
	    size_t errlen);

/*
 * Jobs a VM has run: vm_status's reconciliation list, and the last state
 * seen, which status calls report without waking a suspended VM.
 */
struct job_record {
	char		 job_id[65];
	char		 request_id[129];
	char		 state[16];	/* running, completed, ... */
	int		 exit_code;	/* -1: none */
	long long	 started_at;	/* unix milliseconds */
	long long	 finished_at;	/* 0 while running */
};

/*
 * At most max finished jobs per VM (0: all).  A job that finishes past
 * it pushes that VM's oldest finished one out, in the same transaction;
 * running jobs are never pushed out.  Set it once, before the first use.
 */
void	store_jobs_keep(struct store *, long long max);
int	store_job_add(struct store *, const char *vm_id, const char *job_id,
	    const char *request_id, long long started_ms, char *err,
	    size_t errlen);
int	store_job_update(struct store *, const char *vm_id, const char *job_id,
	    const char *state, int exit_code, long long finished_ms, char *err,
	    size_t errlen);
/* Forgets a job that never started (its guest refused it). */
int	store_job_forget(struct store *, const char *vm_id, const char *job_id,
	    char *err, size_t errlen);
/* Every VM's finished jobs cut to the cap (at startup: it may be lower). */
int	store_jobs_prune(struct store *, char *err, size_t errlen);
int	store_job_get(struct store *, const char *vm_id, const char *job_id,
	    struct job_record *, char *err, size_t errlen);
int	store_job_list(struct store *, const char *vm_id,
	    struct job_record **out, size_t *n, char *err, size_t errlen);
/*
 * vm_fork's: the jobs of from that started by upto_ms (its running ones,
 * and the newest finished ones the cap keeps) copied under to, with
 * their ids and last known state, in one transaction; nothing when to is
 * gone.  It opens a connection of its own for the copy, so a worker thread
 * may call it while the loop goes on using the store.
 */
int	store_job_copy(struct store *, const char *from, const char *to,
	    long long upto_ms, char *err, size_t errlen);

/* The audit chain's anchor: the last sequence number and hash. */
int	store_audit_anchor_get(struct store *, long long *seq, char *hash,
	    size_t hashlen, char *err, size_t errlen);
int	store_audit_anchor_set(struct store *, long long seq,
	    const char *hash, char *err, size_t errlen);

/*
 * The SHA-256 last computed for an image file, remembered with what
 * stat(2) said of the file just before it was read: device, inode, size,
 * and the modification and change times in nanoseconds.  Any write or
 * replacement changes the change time, which no one can set, so a file
 * whose identity still matches need not be read again at startup.
 */
struct file_identity {
	long long	dev, ino, size, mtime_ns, ctime_ns;
};
/* path's identity now; -1 with errno when stat(2) fails. */
int	file_identity_of(const char *path, struct file_identity *);
int	file_identity_same(const struct file_identity *,
	    const struct file_identity *);
/* 1 and hex set when path is remembered with exactly this identity. */
int	store_digest_get(struct store *, const char *path,
	    const struct file_identity *, char hex[65], char *err,
	    size_t errlen);
int	store_digest_put(struct store *, const char *path,
	    const struct file_identity *, const char *hex, char *err,
	    size_t errlen);

/*
 * Snapshots (snapshot.c): a row goes in as 'making' before any file is
 * written and becomes 'ready' once the directory is complete and renamed
 * into place; startup removes what is still 'making'.
 */
struct snap_record {
	char		 id[VM_ID_LEN + 1];
	char		 workspace[WORKSPACE_MAX + 1];
	char		 name[65];
	char		 state[8];		/* making | ready | fork */
	char		 source_vm[VM_ID_LEN + 1];
	char		 image[64];
	int		 memory;		/* with memory and device state */
	int		 vcpus;
	int		 memory_mib;
	long long	 disk_bytes;		/* disk.raw's size */
	long long	 memory_bytes;		/* memory.bin's size, or 0 */
	char		 memory_sha256[65];	/* of memory.bin, or "" */
	long long	 paused_ms;		/* the source's pause */
	long long	 created_at;		/* unix milliseconds */
	int		 network;		/* memory: its machine has a NIC */
};

int	store_snap_insert(struct store *, const struct snap_record *,
	    char *err, size_t errlen);
/* Marks it ready (or, when r->state says so, "fork": vm_fork's own,
 * never listed) with its final sizes, digest and pause. */
int	store_snap_ready(struct store *, const struct snap_record *,
	    char *err, size_t errlen);
int	store_snap_get(struct store *, const char *id, struct snap_record *,
	    char *err, size_t errlen);
/* Snapshots (of one workspace, or all), oldest first; caller frees. */
int	store_snap_list(struct store *, const char *workspace_or_null,
	    struct snap_record **out, size_t *n, char *err, size_t errlen);
int	store_snap_delete(struct store *, const char *id, char *err,
	    size_t errlen);
/* A ready one taken for one use: state 'fork', never listed. */
int	store_snap_take(struct store *, const char *id, char *err,
	    size_t errlen);

/*
 * Proposals of gated calls (approve.c).  state is what vmmd last
 * recorded, for lists and the first check; whether a proposal may run is
 * decided by verifying its envelopes again, never by state.
 */
#define PROPOSAL_ID_LEN	33	/* "p" and 32 hex */

struct proposal_record {
	char		 id[PROPOSAL_ID_LEN + 1];
	char		 workspace[WORKSPACE_MAX + 1];
	char		 tool[32];
	char		 request_id[129];	/* "" none */
	char		 args_digest[65];
	char		*args;		/* JSON, the broker token left out */
	char		*effect;
	char		 classes[128];	/* gate names, comma separated */
	int		 need;
	long long	 requested_at;	/* unix seconds */
	long long	 expires_at;
	char		 state[12];	/* pending|approved|denied|expired|used */
	char		*envelopes;	/* base64 envelopes, one a line */
	char		 decided_by[256];
	char		 outcome[256];
};

void	proposal_record_free(struct proposal_record *);
void	proposal_records_free(struct proposal_record *, size_t n);
int	store_proposal_insert(struct store *, const struct proposal_record *,
	    char *err, size_t errlen);
/* These three: 0 with *r filled (free it), 1 when there is none, -1. */
int	store_proposal_get(struct store *, const char *id,
	    struct proposal_record *, char *err, size_t errlen);
/*
 * The proposal a call retries: by (workspace, request_id) when it has
 * one, else the newest one of (workspace, tool, digest) without, unless
 * it was used, or denied or expired and that told (outcome "told").
 */
int	store_proposal_find(struct store *, const char *workspace,
	    const char *tool, const char *request_id, const char *digest,
	    struct proposal_record *, char *err, size_t errlen);
/* state, envelopes, decided_by, outcome of r->id. */
int	store_proposal_update(struct store *, const struct proposal_record *,
	    char *err, size_t errlen);
/* Marks id used: 0 when this call did, 1 when it was already, -1. */
int	store_proposal_take(struct store *, const char *id, char *err,
	    size_t errlen);
/* A workspace's proposals still awaiting a decision at now. */
int	store_proposal_pending(struct store *, const char *workspace,
	    long long now, long long *n, char *err, size_t errlen);
/* Every proposal but those used or expired before since; newest first. */
int	store_proposal_list(struct store *, long long since,
	    struct proposal_record **out, size_t *n, char *err,
	    size_t errlen);
/* A revoked workspace's proposals go with it. */
int	store_proposals_delete_workspace(struct store *,
	    const char *workspace, char *err, size_t errlen);

#endif
