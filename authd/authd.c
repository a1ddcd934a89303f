/*
 * authd: holds workspace credentials (SHA-256 only) in SQLite, answers
 * verify requests from mcpd and vmmd on authd.sock and operator requests
 * from authctl on authctl.sock.  Starts as root, binds its sockets, drops
 * to its own user with no capabilities, then opens the database and
 * installs a seccomp allowlist before serving.
 */
#include <sys/stat.h>
#include <errno.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "authd.h"
#include "conf.h"
#include "daemon.h"
#include "log.h"
#include "privdrop.h"
#include "sdnotify.h"
#include "store.h"

/*
 * The contract: whom authd serves, what each may send, what authd keeps.
 *
 *   peer        socket        admitted (common/ipc_server.c, by the
 *                             kernel's SO_PEERCRED / SO_PEERGROUPS,
 *                             before a byte is read)
 *   mcpd, vmmd  authd.sock    the uids of [authd] peers
 *   authctl     authctl.sock  root, and the primary or supplementary
 *                             members of [authd] admin_group
 *
 * Each peer's table of message types and its handler follow; a frame of
 * another type closes that connection (common/ipc.c).  Every handler
 * decodes its body first into a struct authd_request (request.c) and
 * then switches on the type.  authd is a server only: it asks nothing
 * of its peers, and pushes revocation events to mcpd and vmmd.
 *
 *   authd.sock  IPC_AUTH_VERIFY, IPC_AUTH_SUBSCRIBE, IPC_AUTH_REVOKED
 *               (vmmd's; see peer_rules for why mcpd may send it too),
 *               handled by authd_dispatch_peer (peer.c)
 *   authctl.sock  IPC_AUTHCTL_*, handled by authd_dispatch_authctl
 *               (control.c)
 *
 * Privileges: root only until both sockets are bound and the database
 * directory exists; then privdrop() to [authd] user, its own group
 * alone, no capabilities, NoNewPrivs.  Seccomp: common/privdrop.c's base
 * allowlist and authd_syscalls below, for SQLite.
 */
/*
 * IPC_AUTH_REVOKED is vmmd's alone in purpose (after each subscription it
 * asks which owners of its snapshots were revoked meanwhile), but authd
 * cannot tell vmmd from mcpd by uid: vmmd runs as root, and mcpd, started
 * as root, connects to authd.sock before it drops to its user (so that
 * the connection is made while it still may), so root is in [authd]
 * peers for both.  The role a peer names in its HELLO is its own claim.
 * So every peer may ask.  What that gives a compromised mcpd, which by
 * design never learns workspace names (proto/ipcmsg.h, 300-399): for names
 * it already has, whether a workspace of that name exists and is revoked.
 * Never whether one is active (active and unknown answer the same), never
 * a credential, a policy or a name it did not bring, at most
 * IPC_AUTH_REVOKED_MAX names a request.
 */
static const struct ipc_rule peer_rules[] = {		/* mcpd, vmmd */
	{ IPC_AUTH_VERIFY, 0 },
	{ IPC_AUTH_SUBSCRIBE, 0 },
	{ IPC_AUTH_REVOKED, 0 },
};
static const struct ipc_handlers peer_handlers = {	/* peer.c */
	.dispatch = authd_dispatch_peer,
	.closed = authd_closed_peer,
};

static const struct ipc_rule ctl_rules[] = {		/* authctl */
	{ IPC_AUTHCTL_ISSUE, 0 },
	{ IPC_AUTHCTL_ROTATE, 0 },
	{ IPC_AUTHCTL_REVOKE_TOKEN, 0 },
	{ IPC_AUTHCTL_REVOKE_WORKSPACE, 0 },
	{ IPC_AUTHCTL_POLICY_SET, 0 },
	{ IPC_AUTHCTL_LIST, 0 },
	{ IPC_AUTHCTL_SHOW, 0 },
};
static const struct ipc_policy ctl_policy = {
	"authctl", ctl_rules, sizeof(ctl_rules) / sizeof(ctl_rules[0]),
};
static const struct ipc_handlers ctl_handlers = {	/* control.c */
	.dispatch = authd_dispatch_authctl,
};

/* Capabilities kept: none.  System calls beyond the base: SQLite's. */
static const char *const authd_syscalls[] = {
	"openat", "fsync", "fdatasync", "ftruncate", "fchown", "fchmod",
	"unlink", "unlinkat", "access", "faccessat", "faccessat2",
	"readlink", "readlinkat", "getcwd",
};

struct authd *authd;

_Static_assert(AUTHD_MAX_PEERS <= IPC_ADMIT_MAX,
    "every [authd] peers user fits authd.sock's admission list");

/* authd.sock: each [authd] peers uid gets a policy named for its user. */
static const struct ipc_policy *
peer_accept(const struct ucred *cred, void *arg)
{
	for (size_t i = 0; i < authd->npeers; i++)
		if (authd->peer_uid[i] == cred->uid)
			return &authd->peer_policy[i];
	return NULL;	/* not reached: the admission list is these uids */
}

static const struct ipc_policy *
ctl_accept(const struct ucred *cred, void *arg)
{
	return &ctl_policy;
}

/* Binds both sockets with the contract's admission lists. */
static void
authd_listen(struct authd *a, struct ipc_server **srv,
    struct ipc_server **ctl)
{
	struct ipc_admit peers = { .need = "not a user in [authd] peers" };
	struct ipc_admit admins = { 0 };

	for (size_t i = 0; i < a->npeers; i++) {
		a->peer_policy[i].peer = a->peer_name[i];
		a->peer_policy[i].rules = peer_rules;
		a->peer_policy[i].nrules = sizeof(peer_rules) /
		    sizeof(peer_rules[0]);
		if (ipc_admit_uid(&peers, a->peer_uid[i]) == -1)
			fatalx("[authd] peers: more than %d users",
			    IPC_ADMIT_MAX);
	}
	(void)ipc_admit_uid(&admins, 0);
	(void)ipc_admit_gid(&admins, a->admin_gid);
	snprintf(admins.need, sizeof(admins.need), "neither root nor in "
	    "group %s", a->set.admin_group);
	if ((*srv = ipc_server_new(a->base, a->set.socket, 0666, "authd",
	    peer_accept, &peer_handlers, NULL)) == NULL)
		fatal("listen on %s", a->set.socket);
	ipc_server_set_admit(*srv, &peers);
	/* Anyone may connect (0666); the admission list decides. */
	if ((*ctl = ipc_server_new(a->base, a->set.ctl_socket, 0666, "authd",
	    ctl_accept, &ctl_handlers, NULL)) == NULL)
		fatal("listen on %s", a->set.ctl_socket);
	ipc_server_set_admit(*ctl, &admins);
}

static void
on_signal(int sig, short ev, void *arg)
{
	log_info("signal %d: shutting down", sig);
	event_base_loopexit(authd->base, NULL);
}

/* A user name or a numeric uid, as [authd] peers lists them. */
static void
add_peer(struct authd *a, const char *name)
{
	char err[256];
	uid_t uid;
	gid_t gid;
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(name, &end, 10);
	if (*name != '\0' && *end == '\0' && errno == 0 && n < (uid_t)-1)
		uid = (uid_t)n;
	else if (privdrop_lookup(name, &uid, &gid, err, sizeof(err)) == -1)
		fatalx("[authd] peers: %s", err);
	for (size_t i = 0; i < a->npeers; i++)
		if (a->peer_uid[i] == uid)
			return;
	if (a->npeers == AUTHD_MAX_PEERS)
		fatalx("[authd] peers: more than %d users", AUTHD_MAX_PEERS);
	a->peer_uid[a->npeers] = uid;
	snprintf(a->peer_name[a->npeers], sizeof(a->peer_name[0]), "%s", name);
	a->npeers++;
}

/*
 * The directory of path, made with mode when it does not exist (its own
 * parent must): 1 when it was made, 0 when it was there.  Whichever
 * daemon starts first, by hand or not, finds what it needs or says why.
 */
static int
make_parent(const char *what, const char *path, mode_t mode, char *dir,
    size_t dirlen)
{
	struct stat sb;
	char *copy;

	if ((copy = strdup(path)) == NULL)
		fatal("strdup");
	snprintf(dir, dirlen, "%s", dirname(copy));
	free(copy);
	if (mkdir(dir, mode) == 0) {
		/* Not the umask's mode: others must reach the sockets. */
		if (chmod(dir, mode) == -1)
			fatal("%s %s: chmod", what, dir);
		log_info("made %s %s", what, dir);
		return 1;
	}
	if (errno != EEXIST)
		fatal("%s %s", what, dir);
	if (stat(dir, &sb) == -1)
		fatal("%s %s", what, dir);
	if (!S_ISDIR(sb.st_mode))
		fatalx("%s %s: not a directory", what, dir);
	return 0;
}

/*
 * The database directory, made for authd's user when it does not exist
 * (and the state directory above it, as vmmd makes it); an existing one
 * is left as the operator made it, and checked once authd is its user.
 */
static void
make_db_dir(const char *db, const char *user, char *dir, size_t dirlen)
{
	char state[PATH_MAX], *copy;
	uid_t uid;
	gid_t gid;
	char err[256];

	if ((copy = strdup(db)) == NULL)
		fatal("strdup");
	make_parent("state directory", dirname(copy), 0711, state,
	    sizeof(state));
	free(copy);
	if (make_parent("database directory", db, 0700, dir, dirlen) &&
	    geteuid() == 0 && user[0] != '\0') {
		if (privdrop_lookup(user, &uid, &gid, err, sizeof(err)) == -1)
			fatalx("[authd] user: %s", err);
		if (chown(dir, uid, gid) == -1)
			fatal("database directory %s: chown", dir);
	}
}

int
main(int argc, char **argv)
{
	static struct authd a;
	struct daemon_args args;
	struct mcpvm_conf conf;
	struct ipc_server *srv, *ctl;
	struct event *sig[2];
	struct group *gr;
	char err[512], dir[PATH_MAX];

	daemon_start("authd", argc, argv, &args, &conf);
	authd = &a;
	a.set.socket = conf.authd.socket;
	a.set.ctl_socket = conf.authd.ctl_socket;
	a.set.database = conf.authd.database;
	a.set.user = geteuid() == 0 ? conf.authd.user : "";
	a.set.admin_group = conf.authd.admin_group;
	a.set.default_ttl = conf.authd.default_ttl;
	a.set.defaults.network = 0;
	a.set.defaults.max_vms = (uint32_t)conf.authd.default_max_vms;
	a.set.defaults.memory_mib = (uint32_t)conf.authd.default_memory_mib;
	a.set.defaults.storage_gib = (uint32_t)conf.authd.default_storage_gib;
	a.set.defaults.max_streams = (uint32_t)conf.authd.default_max_streams;
	policy_set_egress_max((size_t)conf.authd.egress_max_cidrs);
	policy_set_egress_max_names((size_t)conf.authd.egress_max_names);
	a.set.fail_rate = (unsigned int)conf.authd.fail_rate;
	a.set.fail_burst = (unsigned int)conf.authd.fail_burst;
	a.set.fail_queue = (unsigned int)conf.authd.fail_queue;
	a.set.expiry_ms = 1000;
	for (size_t i = 0; i < conf.authd.peers.n; i++)
		add_peer(&a, conf.authd.peers.v[i]);
	if (a.npeers == 0)
		fatalx("[authd] peers: no user may use authd.sock");
	errno = 0;
	if ((gr = getgrnam(a.set.admin_group)) == NULL)
		fatalx("[authd] admin_group %s: %s", a.set.admin_group,
		    errno != 0 ? strerror(errno) : "no such group");
	a.admin_gid = gr->gr_gid;
	if (args.check_only) {
		daemon_config_ok("authd", &args);
		return 0;
	}
	log_init("authd", args.foreground, args.verbose);
	/* Every file authd makes is its own; the database is 0600 anyway. */
	umask(077);
	signal(SIGPIPE, SIG_IGN);

	if ((a.base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	make_parent("runtime directory", a.set.socket, 0755, dir, sizeof(dir));
	make_parent("runtime directory", a.set.ctl_socket, 0755, dir,
	    sizeof(dir));
	authd_listen(&a, &srv, &ctl);
	make_db_dir(a.set.database, a.set.user, dir, sizeof(dir));
	sd_notify_init();

	privdrop(&(struct privdrop){ .user = a.set.user });
	if (access(dir, W_OK | X_OK) == -1)
		fatal("database directory %s: not usable as %s", dir,
		    a.set.user[0] != '\0' ? a.set.user : "this user");

	/* Opened as authd's user, so a new file belongs to it. */
	if ((a.store = store_open(a.set.database, err, sizeof(err))) == NULL)
		fatalx("%s", err);
	if (peer_init(&a) == -1)
		fatalx("peer_init failed");
	daemon_signals(a.base, on_signal, NULL, sig);

	sandbox_seccomp(authd_syscalls, sizeof(authd_syscalls) /
	    sizeof(authd_syscalls[0]), 0);

	log_info("ready: %s (%zu peer users), %s (root, group %s), "
	    "database %s", a.set.socket, a.npeers, a.set.ctl_socket,
	    a.set.admin_group, a.set.database);
	sd_notify_send("READY=1");
	event_base_dispatch(a.base);
	sd_notify_send("STOPPING=1");

	peer_shutdown();
	/* Their unlink fails once privileges are dropped; the next start
	 * replaces the stale sockets. */
	ipc_server_free(ctl);
	ipc_server_free(srv);
	event_free(sig[0]);
	event_free(sig[1]);
	store_close(a.store);
	event_base_free(a.base);
	conf_free(&conf);
	return 0;
}
