/*
 * vmproxy: one per VM, spawned by vmmd as that VM's jail uid with no
 * capabilities and a seccomp allowlist.  It is the only process that
 * parses bytes a guest sends, or that the VM's QEMU (which a guest may
 * have taken over) writes: root vmmd gets only typed, checked IPC frames.
 * This file is its main: the contract below, the privilege drop, vmmd's
 * message table and the event loop.
 */

/*
 * The contract.
 *
 * Peers, each with what it may send and where that is handled; every one
 * is treated as compromised:
 *
 *   vmmd    the socketpair on --ipc-fd (proto/ipcmsg.h, 600-699).  In:
 *           vmmd_msgs[] below, each type with its decoder
 *           (vmproxy_decode.c) and handler, dispatched by
 *           vmproxy_dispatch_vmmd; anything else closes the connection,
 *           which ends vmproxy.  Out: results, QEMU results, and one
 *           message type per event: IPC_PROXY_GUEST_HELLO, _LINK_DOWN,
 *           _STREAMS, _GUEST_ERROR (link.c, streams.c), _QMP_EVENT and
 *           _QMP_LOST (vmproxy_qmp.c).
 *   guestd  the guest link on --link (proto/guest.h frames, common/glink.c
 *           parser).  vmproxy_dispatch_guest (link.c) hands control
 *           replies to link.c and guestreply.c, stream channels to
 *           streams.c, the guest's own connections to vmproxy_broker.c.
 *           A frame out of protocol ends vmproxy with exit status 3.
 *   QEMU    its QMP socket on --qmp: qmp.c parses, vmproxy_qmp.c turns
 *           replies and events into proto/vmqmp.h's names.  Its console
 *           and its stdout/stderr on --console-fd and --qemu-log-fd are
 *           never parsed: console.c keeps their newest bytes in files.
 *   broker  each job's controller, on the socket vmproxy hands to vmmd
 *           for mcpd: common/brokermux.c frames, read by on_ctl_frame in
 *           vmproxy_broker.c, which also reads the preamble of each guest
 *           connection and routes it only with vmmd's secret.
 *
 * Capabilities kept: none.  vmmd's spawner starts vmproxy as the VM's
 * uid with NoNewPrivs; main refuses to run as root, and privdrop()
 * (common/privdrop.c, keep_none) clears the permitted, effective,
 * inheritable and ambient sets and verifies that nothing is left and that
 * root cannot be regained, fatally.
 *
 * Seccomp: common/privdrop.c's base list plus vmproxy_syscalls[] below,
 * installed before the event loop; it has no open, so main opens the two
 * log files first.
 */
#include <sys/queue.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "console.h"
#include "glink.h"
#include "ipc.h"
#include "log.h"
#include "privdrop.h"
#include "vmproxy.h"
#include "vmproxy_broker.h"
#include "vmproxy_decode.h"
#include "vmproxy_qmp.h"

#if defined(__SANITIZE_ADDRESS__)
#define VMPROXY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VMPROXY_SANITIZED 1
#endif
#endif

/*
 * Nothing beyond the common base, except under ASan: LeakSanitizer's
 * exit-time tracer lists threads with getdents, and a tracer the filter
 * kills leaves the process waiting for it forever.  The QMP client needs
 * nothing more either (socket, connect, sendmsg with SCM_RIGHTS are in the
 * base; it reads without libevent's FIONREAD ioctl).
 */
static const char *const vmproxy_syscalls[] = {
	"ftruncate",		/* console.log keeps its newest bytes */
#ifdef VMPROXY_SANITIZED
	"getdents",
#endif
	NULL
};

/* What link.c, streams.c and main share (vmproxy.h). */
struct vmproxy px;

static void
qmp_request(struct ipc_msg *msg, struct vmmd_msg *m)
{
	vmproxy_qmp_request(px.vmmd, msg, m->qmp_op, m->qmp_timeout_ms);
}

/* The broker's members were checked (vmproxy_decode_broker_*); vpb_*
 * reads their values. */
static void
broker_route(struct ipc_msg *msg, struct vmmd_msg *m)
{
	vpb_route(px.vmmd, msg->id, msg->body);
}

static void
broker_attach(struct ipc_msg *msg, struct vmmd_msg *m)
{
	vpb_attach(px.vmmd, msg->id, msg->body);
}

static void
broker_limits(struct ipc_msg *msg, struct vmmd_msg *m)
{
	vpb_limits(px.vmmd, msg->id, msg->body);
}

/*
 * Everything vmmd may send, one line each: the message type, its rule
 * flags for ipc's policy, its decoder and its handler.  No handler sees
 * a body its decoder did not accept.
 */
static const struct {
	uint32_t		 type;
	unsigned int		 flags;
	enum decode_verdict	(*decode)(struct json_object *,
				    struct vmmd_msg *, struct decode_err *);
	void			(*handle)(struct ipc_msg *, struct vmmd_msg *);
} vmmd_msgs[] = {
	{ IPC_PROXY_CALL, 0, vmproxy_decode_call, link_call },
	{ IPC_PROXY_STREAM_OPEN, 0, vmproxy_decode_stream_open, stream_open },
	/* getfd's checkpoint is the one descriptor vmmd sends. */
	{ IPC_PROXY_QMP, IPC_RULE_FD, vmproxy_decode_qmp, qmp_request },
	/* The job broker pipe (vmproxy_broker.c). */
	{ IPC_PROXY_BROKER_ROUTE, 0, vmproxy_decode_broker_route,
	    broker_route },
	{ IPC_PROXY_BROKER_ATTACH, 0, vmproxy_decode_broker_attach,
	    broker_attach },
	{ IPC_PROXY_BROKER_LIMITS, 0, vmproxy_decode_broker_limits,
	    broker_limits },
};
#define NVMMD_MSGS	(sizeof(vmmd_msgs) / sizeof(vmmd_msgs[0]))

static void
vmproxy_dispatch_vmmd(struct ipc_conn *conn, struct ipc_msg *msg, void *arg)
{
	struct vmmd_msg m;
	struct decode_err de;
	size_t i;

	for (i = 0; i < NVMMD_MSGS; i++)
		if (vmmd_msgs[i].type == msg->type)
			break;
	if (i == NVMMD_MSGS) {
		/* ipc's policy admits only the table's types. */
		log_warnx("vm %s: vmmd sent message type %u, which is not "
		    "in the table; closing", px.vm_id, msg->type);
		ipc_conn_free(conn);
		return;
	}
	switch (vmmd_msgs[i].decode(msg->body, &m, &de)) {
	case DECODE_BAD:
		log_warnx("vm %s: vmmd sent a malformed message (type %u): "
		    "%s; closing its connection", px.vm_id, msg->type, de.msg);
		vmmd_msg_clear(&m);
		ipc_conn_free(conn);
		return;
	case DECODE_REFUSE:
		ipc_reply_error(conn, msg->id, de.code, "%s", de.msg);
		break;
	case DECODE_OK:
		vmmd_msgs[i].handle(msg, &m);
		break;
	}
	vmmd_msg_clear(&m);
}

static void
vmproxy_closed_vmmd(struct ipc_conn *conn, void *arg)
{
	/* vmmd is gone or let us go: nothing to serve any more. */
	px.vmmd = NULL;
	event_base_loopbreak(px.base);
}

/* ipc's policy for vmmd, from vmmd_msgs[] (filled in main). */
static struct ipc_rule vmmd_rules[NVMMD_MSGS];
static const struct ipc_policy vmmd_policy = {
	"vmmd", vmmd_rules, NVMMD_MSGS
};
static const struct ipc_handlers vmmd_handlers = {
	vmproxy_dispatch_vmmd, vmproxy_closed_vmmd
};

static __attribute__((noreturn)) void
usage(void)
{
	fprintf(stderr, "usage: vmproxy [-dv] --ipc-fd N --link PATH --vm ID "
	    "[--console-fd N --console PATH --console-max BYTES]\n"
	    "\t[--qmp PATH] [--qemu-log-fd N --qemu-log PATH "
	    "--qemu-log-max BYTES]\n");
	exit(2);
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "ipc-fd", required_argument, NULL, 'f' },
		{ "link", required_argument, NULL, 'l' },
		{ "vm", required_argument, NULL, 'm' },
		{ "console-fd", required_argument, NULL, 'c' },
		{ "console", required_argument, NULL, 'C' },
		{ "console-max", required_argument, NULL, 'M' },
		{ "qmp", required_argument, NULL, 'q' },
		{ "qemu-log-fd", required_argument, NULL, 'g' },
		{ "qemu-log", required_argument, NULL, 'G' },
		{ "qemu-log-max", required_argument, NULL, 'X' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct privdrop keep_none = { NULL, NULL, 0 };
	int ch, foreground = 0, verbose = 0, ipc_fd = -1, con_fd = -1;
	int con_file = -1, qlog_fd = -1, qlog_file = -1;
	const char *link_path = NULL, *con_path = NULL, *qmp_path = NULL;
	const char *qlog_path = NULL;
	long long con_max = 0, qlog_max = 0;
	struct console *con = NULL, *qlog = NULL;
	char *end;

	while ((ch = getopt_long(argc, argv, "dv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			foreground = 1;
			break;
		case 'v':
			verbose++;
			break;
		case 'f':
			ipc_fd = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || ipc_fd < 3)
				usage();
			break;
		case 'l':
			link_path = optarg;
			break;
		case 'm':
			px.vm_id = optarg;
			break;
		case 'c':
			con_fd = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || con_fd < 3)
				usage();
			break;
		case 'C':
			con_path = optarg;
			break;
		case 'M':
			con_max = strtoll(optarg, &end, 10);
			if (*end != '\0' || con_max < 2 || con_max > 1LL << 30)
				usage();
			break;
		case 'q':
			qmp_path = optarg;
			break;
		case 'g':
			qlog_fd = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || qlog_fd < 3)
				usage();
			break;
		case 'G':
			qlog_path = optarg;
			break;
		case 'X':
			qlog_max = strtoll(optarg, &end, 10);
			if (*end != '\0' || qlog_max < 2 || qlog_max > 1LL << 30)
				usage();
			break;
		default:
			usage();
		}
	}
	if (ipc_fd == -1 || link_path == NULL || px.vm_id == NULL ||
	    (con_fd != -1) != (con_path != NULL) ||
	    (con_fd != -1) != (con_max != 0) ||
	    (qlog_fd != -1) != (qlog_path != NULL) ||
	    (qlog_fd != -1) != (qlog_max != 0))
		usage();
	log_init("vmproxy", foreground, verbose);
	signal(SIGPIPE, SIG_IGN);

	/* vmmd started us as the VM's uid: we keep nothing, and say so. */
	if (geteuid() == 0)
		fatalx("vmproxy must not run as root");
	privdrop(&keep_none);
	/* Opened before the filter, which has no open of any kind. */
	if (con_path != NULL && (con_file = open(con_path, O_RDWR | O_CREAT |
	    O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
		fatal("%s", con_path);
	/*
	 * QEMU's stdout and stderr: root vmmd never reads them (#14).  A
	 * new file of ours, whatever is under that name now.
	 */
	if (qlog_path != NULL) {
		(void)unlink(qlog_path);
		if ((qlog_file = open(qlog_path, O_RDWR | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
			fatal("%s", qlog_path);
	}
	sandbox_seccomp(vmproxy_syscalls, sizeof(vmproxy_syscalls) /
	    sizeof(vmproxy_syscalls[0]) - 1, 0);

	if ((px.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	if ((px.g = glink_new(GLINK_ROLE_HOST)) == NULL)
		fatalx("glink_new");
	if (con_fd != -1 && (con = console_new(px.base, con_fd, con_file,
	    (size_t)con_max)) == NULL)
		fatal("console");
	if (qlog_fd != -1 && (qlog = console_new(px.base, qlog_fd, qlog_file,
	    (size_t)qlog_max)) == NULL)
		fatal("qemu log");
	{
		struct vpb_hooks h = { px.base, px.g, px.vm_id,
		    link_want_write, streams_report };

		vpb_init(&h);
	}
	for (size_t i = 0; i < NVMMD_MSGS; i++) {
		vmmd_rules[i].type = vmmd_msgs[i].type;
		vmmd_rules[i].flags = vmmd_msgs[i].flags;
	}
	if ((px.vmmd = ipc_conn_new(px.base, ipc_fd, "vmproxy", &vmmd_policy,
	    &vmmd_handlers, NULL)) == NULL)
		fatal("ipc to vmmd");
	if (vmproxy_qmp_init(px.base, px.vmmd, qmp_path, qlog) == -1)
		fatal("qmp");
	link_init(link_path);
	event_base_dispatch(px.base);
	vmproxy_qmp_free();
	console_free(qlog);
	console_free(con);
	/* A guest that broke the protocol: exit status 3 tells vmmd so. */
	return px.vmmd != NULL ? 3 : 0;
}

