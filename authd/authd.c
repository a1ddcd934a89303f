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

struct authd *authd;

/* SQLite's needs on top of the common base. */
static const char *const authd_syscalls[] = {
	"openat", "fsync", "fdatasync", "ftruncate", "fchown", "fchmod",
	"unlink", "unlinkat", "access", "faccessat", "faccessat2",
	"readlink", "readlinkat", "getcwd",
};

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
	struct ipc_server *srv;
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
	if ((srv = peer_listen(&a)) == NULL)
		fatal("listen on %s", a.set.socket);
	if (control_listen(&a) == -1)
		fatal("listen on %s", a.set.ctl_socket);
	make_db_dir(a.set.database, a.set.user, dir, sizeof(dir));
	sd_notify_init();

	privdrop(&(struct privdrop){ .user = a.set.user });
	if (access(dir, W_OK | X_OK) == -1)
		fatal("database directory %s: not usable as %s", dir,
		    a.set.user[0] != '\0' ? a.set.user : "this user");

	/* Opened as authd's user, so a new file belongs to it. */
	if ((a.store = store_open(a.set.database, err)) == NULL)
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
	control_shutdown();
	ipc_server_free(srv);
	event_free(sig[0]);
	event_free(sig[1]);
	store_close(a.store);
	event_base_free(a.base);
	conf_free(&conf);
	return 0;
}
