/*
 * vmmd: IPC_VM_STREAM_OPEN, a byte stream into a guest port for mcpd's
 * WebSocket.  After authd has named the workspace: the VM must be the
 * workspace's, the port open to streams on this host, and the host's,
 * the VM's and the workspace's stream limits not reached; then the VM
 * is woken if need be, vmproxy opens the channel, and its descriptor goes
 * to mcpd.  An open holds its place in the limits (opening_streams) from
 * the check to its answer, the wait for a paused or hibernated VM
 * included: a burst of opens on a sleeping VM cannot take vmproxy past
 * max_streams_per_vm, which vmmd would take for a broken vmproxy.
 * An open its caller gives up on is answered at once, wherever it
 * waits; one already out at vmproxy keeps its place until vmproxy
 * answers, for vmproxy may open it still (stream_abandon).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest.h"
#include "ipc.h"
#include "jsonx.h"
#include "log.h"
#include "tools.h"

static int
port_allowed(int port)
{
	const struct cfg_list *l = &vmmd_conf()->vmmd.stream_ports;

	/* 1023 and 1024 belong to the link itself. */
	if (port == GUEST_VSOCK_PORT || port == GUEST_VSOCK_PORT - 1)
		return 0;
	for (size_t i = 0; i < l->n; i++) {
		long lo, hi;
		char *end;

		lo = strtol(l->v[i], &end, 10);
		hi = *end == '-' ? strtol(end + 1, &end, 10) : lo;
		if (*end == '\0' && port >= lo && port <= hi)
			return 1;
	}
	return 0;
}

static void
stream_opened(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;
	struct json_object *o;
	struct jsonx_err jerr;
	int64_t channel;
	char sid[48];

	vm->opening_streams--;
	if (code != NULL) {
		tools_reply_error(req, code, msg);
		return;
	}
	/*
	 * Open from here: vmproxy's count of it comes in a report of its own
	 * after this reply, and an open read in between (the reply's
	 * descriptor ends a read) would otherwise find it in neither count.
	 * The report then sets the count as vmproxy has it.
	 */
	if (fd != -1)
		vm->open_streams++;
	/* vmproxy speaks for the guest: its channel number is checked. */
	if (fd == -1 || jsonx_get_int64(res, "channel", 1, 1, UINT32_MAX,
	    &channel, &jerr) != 1) {
		if (fd != -1)
			close(fd);
		log_warnx("vm %s: vmproxy's stream open result is malformed",
		    vm->rec.id);
		request_error(req, "internal", "vmproxy sent no valid stream");
		return;
	}
	snprintf(sid, sizeof(sid), "%s/%" PRId64, vm->rec.id, channel);
	o = json_object_new_object();
	json_object_object_add(o, "stream_id", json_object_new_string(sid));
	json_object_object_add(o, "vm_id", json_object_new_string(vm->rec.id));
	json_object_object_add(o, "port", json_object_new_int(req->msg.port));
	json_object_object_add(o, "workspace",
	    json_object_new_string(req->workspace));
	if (req->conn != NULL) {
		vm_stream_add(vm, sid, req->conn);
		ipc_reply(req->conn, IPC_VM_STREAM_OPEN_RESULT, req->id, o, fd);
	} else
		close(fd);
	json_object_put(o);
	request_drop(req);
}

static void
stream_ready(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		vm->opening_streams--;
		tools_reply_error(req, code, msg);
		return;
	}
	/*
	 * No second check: its place in every limit was held since
	 * stream_open's, so the opens in flight never outnumber them.  (A
	 * second count here could see a stream both in vmproxy's report
	 * and still opening, and refuse what fits.)
	 */
	if (proxy_stream_open(vm, req->msg.port, stream_opened, req) == -1) {
		vm->opening_streams--;
		request_error(req, "unavailable", "the guest link is down");
		return;
	}
}

/*
 * vmproxy's answer to an open whose caller left: the place it held is
 * given back, and a stream that did open is closed at once.  It counts
 * as open until vmproxy's next report, as in stream_opened, since
 * vmproxy counts it until it sees the close.
 */
static void
stream_opened_unheard(struct vm *vm, struct json_object *res,
    const char *code, const char *msg, int fd, void *arg)
{
	vm->opening_streams--;
	if (fd != -1) {
		vm->open_streams++;
		close(fd);
	}
}

int
stream_abandon(struct request *req)
{
	struct vm *vm;

	if (req->msg.type != IPC_VM_STREAM_OPEN)
		return 0;
	TAILQ_FOREACH(vm, vm_all(), entry)
		if (proxy_redirect(vm, req, stream_opened_unheard, NULL) > 0) {
			request_error(req, "unavailable", "cancelled: the "
			    "caller went away before the stream opened");
			return 1;
		}
	return 0;
}

/* Which stream limit one more stream would pass, or NULL. */
static const char *
stream_limit(const struct request *req, const struct vm *vm)
{
	const struct vm *v;
	int host = 0, ws = 0, here;

	/* Opens still on their way count: a burst cannot slip past. */
	TAILQ_FOREACH(v, vm_all(), entry) {
		host += v->open_streams + v->opening_streams;
		if (strcmp(v->rec.workspace, req->workspace) == 0)
			ws += v->open_streams + v->opening_streams;
	}
	here = vm->open_streams + vm->opening_streams;
	if (host >= vmmd_conf()->vmmd.max_streams)
		return "max_streams: the host's streams are all open";
	if (here >= vmmd_conf()->vmmd.max_streams_per_vm)
		return "max_streams_per_vm: this VM's streams are all open";
	if (req->policy.max_streams > 0 && ws >= req->policy.max_streams)
		return "workspace max_streams: its streams are all open";
	return NULL;
}

/* IPC_VM_STREAM_OPEN, once authd has named the workspace. */
void
stream_open(struct request *req)
{
	/* vm_id and port, 1..65535: decode_mcpd checked them. */
	int port = req->msg.port;
	const char *limit;
	struct vm *vm;

	if ((vm = tools_vm_named(req, req->msg.vm_id)) == NULL)
		return;
	if (port < 1 || port > 65535 || !port_allowed(port)) {
		request_error(req, "forbidden", "port %d is not open to "
		    "streams on this host", port);
		return;
	}
	if ((limit = stream_limit(req, vm)) != NULL) {
		request_error(req, "quota_exceeded", "%s", limit);
		return;
	}
	vm->opening_streams++;		/* until stream_opened, or refused */
	vm_ready(vm, stream_ready, req);
}
