/*
 * mcpd, the product binary: verifies credentials with authd and forwards
 * tool calls and stream opens to vmmd.
 *
 * Until common/ipc, authd and vmmd exist on main, both ends answer
 * "unavailable" (503): mcpd then serves /healthz and refuses everything
 * else, which is the only honest behaviour without them.
 */
#include <stdlib.h>

#include <event2/event.h>

#include "log.h"
#include "mcpd.h"

struct pending {
	struct backend_call	*self;
	struct event		*ev;
	backend_result_cb	 done;
	backend_stream_cb	 sdone;
	void			*arg;
};

struct backend_call {
	struct pending		 p;
};

static struct event_base *vmmd_base;

static int
authd_start(void *ctx, struct event_base *base, const struct mcpd_config *cfg)
{
	return 0;
}

static int
vmmd_start(void *ctx, struct event_base *base, const struct mcpd_config *cfg)
{
	vmmd_base = base;
	return 0;
}

static void
authd_verify(void *ctx, const char *token, auth_cb cb, void *arg)
{
	/* TODO(ipc): IPC_AUTH_VERIFY to authd over common/ipc. */
	cb(AUTH_UNAVAILABLE, NULL, arg);
}

static const struct auth_ops authd_auth = { "authd", authd_start, authd_verify };

static void
vmmd_unavailable_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct backend_call *c = arg;
	struct backend_result br = { 0, NULL, "unavailable",
	    "vmmd is not reachable" };

	event_free(c->p.ev);
	if (c->p.done != NULL)
		c->p.done(&br, c->p.arg);
	else
		c->p.sdone(-1, "unavailable", "vmmd is not reachable",
		    c->p.arg);
	free(c);
}

static struct backend_call *
vmmd_pending(backend_result_cb done,
    backend_stream_cb sdone, void *arg)
{
	struct backend_call *c;

	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->p.ev = event_new(vmmd_base, -1, 0, vmmd_unavailable_cb, c)) == NULL)
		fatal("%s", __func__);
	c->p.done = done;
	c->p.sdone = sdone;
	c->p.arg = arg;
	event_active(c->p.ev, EV_TIMEOUT, 1);
	return c;
}

static struct backend_call *
vmmd_call(void *ctx, const char *tool, struct json_object *args,
    const char *credential, const struct auth_identity *id,
    backend_result_cb done, backend_progress_cb progress, void *arg)
{
	/* TODO(ipc): IPC_VM_TOOL to vmmd over common/ipc. */
	return vmmd_pending(done, NULL, arg);
}

static struct backend_call *
vmmd_stream_open(void *ctx, const char *vm_id, unsigned int port,
    const char *credential, const struct auth_identity *id,
    backend_stream_cb done, void *arg)
{
	/* TODO(ipc): IPC_VM_STREAM_OPEN to vmmd; the fd comes back. */
	return vmmd_pending(NULL, done, arg);
}

static void
vmmd_cancel(void *ctx, struct backend_call *c)
{
	event_free(c->p.ev);
	free(c);
}

int
main(int argc, char **argv)
{
	static const struct backend_ops vmmd_backend = {
		"vmmd", vmmd_start, vmmd_call, vmmd_cancel, vmmd_stream_open,
	};

	return mcpd_main(argc, argv, &authd_auth, NULL, &vmmd_backend, NULL);
}
