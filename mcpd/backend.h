/*
 * The interface mcpd forwards tool calls through.  The product backend
 * talks to vmmd over common/ipc; tests plug in a fake one.  The credential
 * travels with every call so vmmd can verify it again: mcpd never names a
 * workspace of its own choosing.
 */
#ifndef MCPD_BACKEND_H
#define MCPD_BACKEND_H

#include <json-c/json.h>

#include "auth.h"
#include "proposal.h"

struct backend_call;

struct backend_result {
	int			 ok;
	/*
	 * ok: the tool's result object, to be put in a reply, as one of:
	 * text, a JSON object's text already checked as strict JSON (vmmd's
	 * answer as it came: JSON HTTP sends it as it is), or result.
	 */
	const char		*text;
	size_t			 textlen;
	struct json_object	*result;
	const char		*code;		/* !ok: a public error code */
	const char		*message;	/* !ok: for a person to act on */
	/*
	 * !ok with code approval_required, approval_denied or
	 * approval_expired: the proposal, decoded (proposal.h); else NULL.
	 */
	const struct proposal	*proposal;
};

/* result, text and the strings are valid only during the callback. */
typedef void (*backend_result_cb)(const struct backend_result *, void *arg);
/* Progress of a slow tool (vm_create booting, vm_resume restoring). */
typedef void (*backend_progress_cb)(double progress, double total,
    const char *message, void *arg);

/* fd >= 0: the stream and its id (for the backend's close notices). */
typedef void (*backend_stream_cb)(int fd, const char *stream_id,
    const char *code, const char *message, void *arg);

struct mcpd_config;
struct event_base;

struct backend_ops {
	const char *name;
	/* Called once with mcpd's event loop, before any call. */
	int	(*start)(void *ctx, struct event_base *,
		    const struct mcpd_config *);
	/*
	 * Starts tool with args (not consumed).  Calls done exactly once
	 * unless cancelled, never before call returns (failures to start
	 * arrive through done too); progress any number of times before
	 * done.  Never returns NULL.
	 */
	struct backend_call *(*call)(void *ctx, const char *tool,
	    struct json_object *args, const char *credential,
	    const struct auth_identity *, backend_result_cb done,
	    backend_progress_cb progress, void *arg);
	/* No callback runs for call after this returns. */
	void	(*cancel)(void *ctx, struct backend_call *call);
	/*
	 * Opens a byte stream to port in vm_id.  done gets the stream's fd
	 * (a connected socket; done owns it) or -1 with a public error code
	 * and message.  Same calling rules as call; cancel applies too.
	 */
	struct backend_call *(*stream_open)(void *ctx, const char *vm_id,
	    unsigned int port, const char *credential,
	    const struct auth_identity *, backend_stream_cb done, void *arg);
	/*
	 * Attaches to job_id's broker pipe with its token, as stream_open;
	 * NULL in a backend without broker pipes.
	 */
	struct backend_call *(*broker_open)(void *ctx, const char *vm_id,
	    const char *job_id, const char *pipe_token,
	    const char *credential, const struct auth_identity *,
	    backend_stream_cb done, void *arg);
	/*
	 * Asks after the vm_run of request_id in the caller's workspace (a
	 * vm_run task, tasks.h): op "get" tells where it is, "cancel"
	 * cancels it as well; done gets the backend's answer (vmmd's
	 * run_task), as call's.  Same calling rules as call; NULL in a
	 * backend without runs.
	 */
	struct backend_call *(*run_task)(void *ctx, const char *op,
	    const char *request_id, const char *credential,
	    const struct auth_identity *, backend_result_cb done, void *arg);
};

#endif
