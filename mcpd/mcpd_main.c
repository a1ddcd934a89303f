/*
 * mcpd's process setup and event loop, shared by the product binary
 * (main.c, verifying with authd and forwarding to vmmd) and the test
 * daemon (tests/integration), which differ only in those two interfaces.
 */

/*
 * The contract: whom mcpd serves and asks, what each may send, what mcpd
 * keeps.
 *
 * Peers, each with what it may send and where that is handled:
 *
 *   clients   HTTP on the [mcpd] listen addresses.  http_limits.c admits
 *             and bounds each connection (max_connections,
 *             max_connections_per_client, max_header_bytes,
 *             request_timeout); http.c takes its requests
 *             (max_requests_per_connection); http_route.c checks each
 *             one's Host, Origin, route and method, has its bearer
 *             credential verified by authd, and hands it to its handler:
 *               POST, GET, DELETE /mcp        mcp_http_handle (mcp_http.c;
 *                                             JSON-RPC by mcp.c)
 *               POST /v1/tools/{name}         rest_handle (rest.c)
 *               GET /v1/vms/{vm_id}/streams/{port}
 *                                             stream_handle (stream.c; a
 *                                             WebSocket, ws.c)
 *               GET /v1/vms/{vm_id}/jobs/{job_id}/broker
 *                                             broker_handle (stream.c)
 *             GET /healthz is answered by http_route.c with no
 *             credential; anything else with an error.  A POST /mcp
 *             carries one JSON-RPC message for mcp_process (mcp.c): in a
 *             session, initialize (which opens it), ping, tools/list,
 *             tools/call and notifications (do_initialize, do_request,
 *             do_notification); in the stateless revision,
 *             server/discover, tools/list, tools/call and
 *             subscriptions/listen (do_stateless).  A request for
 *             another method is answered "method not found"; another
 *             notification is ignored.
 *   scrapers  HTTP on metrics_listen, if set: GET /metrics alone, no
 *             Origin, no credential (http_route_metrics).
 *   authd     authd.sock, which mcpd connects to (auth_authd.c through
 *             common/authclient.c).  mcpd sends IPC_AUTH_SUBSCRIBE first
 *             on each connection, then IPC_AUTH_VERIFY for a credential
 *             whose answer it has not kept; never IPC_AUTH_REVOKED.  What
 *             authd may send is authd_rules (common/authclient.c): the
 *             answers, IPC_ERROR, and unasked IPC_AUTH_EVENT, read by
 *             authc_dispatch_authd, then authd_event (auth_authd.c),
 *             which closes the streams of the credential or workspace
 *             named unless the event is a policy change (stream_revoke).
 *   vmmd      vmmd.sock, which mcpd connects to (backend_vmmd.c, whose
 *             contract lists what each side sends: vmmd_rules, read by
 *             mcpd_dispatch_vmmd and each call's reply callback).
 *   streams   the socket vmmd passes with IPC_VM_STREAM_OPEN_RESULT:
 *             stream.c relays its bytes to and from the client's
 *             WebSocket unread, but for a broker pipe, whose frames
 *             mcpd_broker.c checks (common/brokermux.c).
 *
 * Kept, in memory alone (mcpd writes no file): the connections and the
 * request each is answering, with its bearer credential until hreq_free
 * wipes it and the identity authd gave for it (workspace, credential id,
 * expiry); the MCP sessions (session.c; expired by sweep_cb below); the
 * tool calls and event streams in flight (mcp_http.c, rest.c); the open
 * streams with their workspace, credential id and expiry (stream.c;
 * closed at expiry by sweep_cb); authd's answers while subscribed, keyed
 * by a SHA-256 of the credential (common/authcache.c); the tools of
 * tools.json; the metrics.
 *
 * Privileges: the unit (mcpvm-mcpd.service) starts mcpd as root with
 * CAP_SETUID, CAP_SETGID and CAP_SETPCAP alone in its bounding set.
 * mcpd_main reads the configuration and tools.json, binds its listeners,
 * starts the verifier and the backend (their first connections), and then
 * privdrop() makes it [mcpd] user with no capability and NoNewPrivs;
 * started as another user, it keeps that uid, and privdrop() still
 * leaves it no capability and sets NoNewPrivs.  Seccomp:
 * common/privdrop.c's base allowlist and mcpd_syscalls below (a test
 * daemon adds mcpd_extra_syscalls), installed before the event loop.
 * The base has no open: what mcpd reads from files is read before.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mcpd.h"
#include "privdrop.h"
#include "sdnotify.h"
#include "ws.h"
#include "schema.h"

#ifndef MCPVM_SYSCONFDIR
#define MCPVM_SYSCONFDIR "/etc/mcpvm"
#endif

/* What mcpd does after the sandbox is in place, beyond the common base. */
static const char *const mcpd_syscalls[] = {
	"ioctl",	/* FIONREAD: libevent sizes its reads */
};

const char *const *mcpd_extra_syscalls;
size_t mcpd_nextra_syscalls;

static void
usage(void)
{
	fprintf(stderr, "usage: mcpd [-dnv] [-f config]\n");
	exit(2);
}

static void
signal_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct mcpd *m = arg;

	log_info("received signal %d, exiting", (int)sig);
	event_base_loopbreak(m->base);
}

static void
sweep_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct mcpd *m = arg;
	unsigned int n;

	stream_expire(time(NULL));
	if ((n = sessions_expire(&m->sessions, time(NULL))) > 0)
		log_debug("expired %u idle MCP sessions", n);
	m->metrics.open_sessions = m->sessions.count;
}

int
mcpd_main(int argc, char **argv, const struct auth_ops *auth, void *auth_ctx,
    const struct backend_ops *backend, void *backend_ctx)
{
	struct mcpd_config cfg;
	struct mcpd m;
	struct event *sigterm, *sigint;
	struct event_config *evcfg;
	struct timeval sweep_tv = { 5, 0 };
	const char *conffile = MCPVM_SYSCONFDIR "/mcpvm.conf";
	char err[512];
	int ch, debug = 0, noaction = 0, verbose = 0;

	while ((ch = getopt(argc, argv, "df:nv")) != -1) {
		switch (ch) {
		case 'd':
			debug = 1;
			break;
		case 'f':
			conffile = optarg;
			break;
		case 'n':
			noaction = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();

	log_init("mcpd", debug || noaction, verbose);
	config_defaults(&cfg);
	if (config_load(&cfg, conffile, err, sizeof(err)) == -1)
		fatalx("%s", err);
	if (noaction) {
		fprintf(stderr, "configuration OK\n");
		return 0;
	}
	if (tools_init(err, sizeof(err)) == -1)
		fatalx("tools.json: %s", err);

	memset(&m, 0, sizeof(m));
	m.cfg = &cfg;
	m.auth = auth;
	m.auth_ctx = auth_ctx;
	m.backend = backend;
	m.backend_ctx = backend_ctx;
	signal(SIGPIPE, SIG_IGN);
	/*
	 * The changelist folds the add/delete pairs evhttp makes on every
	 * request (read off while a reply is built, write on to send it, read
	 * back on) into one epoll_ctl per descriptor per loop turn.  libevent
	 * warns that it misbehaves with dup()ed descriptors; mcpd has none.
	 */
	if ((evcfg = event_config_new()) == NULL ||
	    event_config_set_flag(evcfg,
	    EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST) == -1 ||
	    (m.base = event_base_new_with_config(evcfg)) == NULL)
		fatalx("event_base_new failed");
	event_config_free(evcfg);
	/* Two priorities: authd's events (0) before clients (1, default). */
	if (event_base_priority_init(m.base, 2) == -1)
		fatalx("event_base_priority_init failed");
	sessions_init(&m.sessions, cfg.max_sessions,
	    cfg.max_sessions_per_workspace, cfg.session_idle_timeout);
	budgets_init(&m.budgets, cfg.max_connections_per_workspace,
	    cfg.max_calls_per_workspace, cfg.max_listens_per_workspace);
	mcp_http_init(&m);
	if (stream_init(&cfg) == -1)
		fatalx("stream_rate_bytes: cannot set up the rate limit");
	/* What needs privilege or the filesystem happens first. */
	if (http_init(&m) == -1)
		fatalx("cannot listen; see above");
	if (auth->start(auth_ctx, m.base, &cfg) == -1)
		fatalx("cannot start the %s verifier", auth->name);
	if (backend->start(backend_ctx, m.base, &cfg) == -1)
		fatalx("cannot start the %s backend", backend->name);
	if (ws_init() == -1)
		fatalx("OpenSSL initialisation failed");
	/* The unit is Type=notify: find its socket while we still may. */
	sd_notify_init();
	privdrop(&(struct privdrop){ .user = geteuid() == 0 ? cfg.user : "" });

	sigterm = evsignal_new(m.base, SIGTERM, signal_cb, &m);
	sigint = evsignal_new(m.base, SIGINT, signal_cb, &m);
	m.sweep = event_new(m.base, -1, EV_PERSIST, sweep_cb, &m);
	if (sigterm == NULL || sigint == NULL || m.sweep == NULL)
		fatalx("out of memory");
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	evtimer_add(m.sweep, &sweep_tv);
	{
		const char *sc[sizeof(mcpd_syscalls) / sizeof(mcpd_syscalls[0]) +
		    16];
		size_t n = 0, i;

		for (i = 0; i < sizeof(mcpd_syscalls) /
		    sizeof(mcpd_syscalls[0]); i++)
			sc[n++] = mcpd_syscalls[i];
		for (i = 0; i < mcpd_nextra_syscalls && n < sizeof(sc) /
		    sizeof(sc[0]); i++)
			sc[n++] = mcpd_extra_syscalls[i];
		sandbox_seccomp(sc, n, 0);
	}
	log_info("started (auth: %s, backend: %s)", auth->name,
	    backend->name);
	sd_notify_send("READY=1");

	event_base_dispatch(m.base);
	sd_notify_send("STOPPING=1");

	stream_free_all(&m);
	mcp_http_free_all(&m);
	sessions_clear(&m.sessions);
	http_free(&m);
	event_free(m.sweep);
	event_free(sigterm);
	event_free(sigint);
	event_base_free(m.base);
	tools_cleanup();
	return 0;
}
