/*
 * Internal IPC, the listening side: one accept path for every daemon's
 * sockets (authd.sock, authctl.sock, vmmd.sock, vmctl.sock, netd.sock).
 * accept4, SO_PEERCRED, the peer check by uid and group, then the
 * daemon's choice of policy, before any byte of the peer's is read.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc.h"
#include "ipc_priv.h"
#include "log.h"

struct ipc_server {
	struct event_base		*base;
	int				 fd;
	struct event			*ev;
	char				*path;
	char				 role[IPC_ROLE_MAX];
	struct ipc_admit		 admit;
	int				 has_admit;
	ipc_accept_cb			 accept;
	const struct ipc_handlers	*h;
	void				*arg;
};

/* What an accept callback's ucred points into: the peer's socket too. */
struct ipc_peer {
	struct ucred	cred;	/* first: the callback's pointer */
	int		fd;
};

/* Enough for most peers without a second call; more is asked for. */
#define IPC_PEER_GROUPS		64
/* The kernel's own bound (NGROUPS_MAX), so the second call is bounded. */
#define IPC_PEER_GROUPS_MAX	65536

/*
 * Is gid among the supplementary groups of the peer on fd, as the kernel
 * recorded them at connect?  1 yes, 0 no, or the kernel cannot say: the
 * caller has checked the primary group already, and a peer is never let
 * in on a guess.
 */
static int
peer_groups_have(int fd, const struct ucred *cred, gid_t gid)
{
	static int warned;
	gid_t small[IPC_PEER_GROUPS], *groups = small;
	socklen_t len = sizeof(small);
	int found = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == -1) {
		if (errno == ENOPROTOOPT) {
			if (!warned++)
				log_warnx("SO_PEERGROUPS: not supported by "
				    "this kernel (Linux 4.13 has it): only a "
				    "peer's primary group is checked");
			return 0;
		}
		/* ERANGE: len now says how much the peer's groups take. */
		if (errno != ERANGE || len > IPC_PEER_GROUPS_MAX *
		    sizeof(gid_t) || (groups = malloc(len)) == NULL ||
		    getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups,
		    &len) == -1) {
			log_warn("SO_PEERGROUPS of pid %d", (int)cred->pid);
			if (groups != small)
				free(groups);
			return 0;
		}
	}
	for (size_t i = 0; i < len / sizeof(gid_t) && !found; i++)
		found = groups[i] == gid;
	if (groups != small)
		free(groups);
	return found;
}

int
ipc_peer_in_group(const struct ucred *cred, gid_t gid)
{
	const struct ipc_peer *peer = (const struct ipc_peer *)cred;

	return cred->gid == gid || peer_groups_have(peer->fd, cred, gid);
}

/* uid_t and gid_t are both id_t on Linux: one adder serves either list. */
_Static_assert(_Generic((uid_t)0, id_t: 1, default: 0) &&
    _Generic((gid_t)0, id_t: 1, default: 0), "uid_t and gid_t are id_t");

static int
admit_add(id_t *ids, size_t *n, id_t id)
{
	for (size_t i = 0; i < *n; i++)
		if (ids[i] == id)
			return 0;
	if (*n == IPC_ADMIT_MAX)
		return -1;
	ids[(*n)++] = id;
	return 0;
}

int
ipc_admit_uid(struct ipc_admit *a, uid_t uid)
{
	return admit_add(a->uids, &a->nuids, uid);
}

int
ipc_admit_gid(struct ipc_admit *a, gid_t gid)
{
	return admit_add(a->gids, &a->ngids, gid);
}

int
ipc_admit_check(const struct ipc_admit *a, int fd, const struct ucred *cred)
{
	for (size_t i = 0; i < a->nuids; i++)
		if (a->uids[i] == cred->uid)
			return 1;
	for (size_t i = 0; i < a->ngids; i++)
		if (a->gids[i] == cred->gid ||
		    peer_groups_have(fd, cred, a->gids[i]))
			return 1;
	return 0;
}

void
ipc_server_set_admit(struct ipc_server *s, const struct ipc_admit *a)
{
	s->admit = *a;
	s->has_admit = 1;
}

static void
ipc_server_acceptcb(int lfd, short ev, void *arg)
{
	struct ipc_server *s = arg;
	const struct ipc_policy *pol;
	struct ipc_peer peer;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd;

	if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) ==
	    -1) {
		if (errno != EAGAIN && errno != EINTR &&
		    errno != ECONNABORTED)
			log_warn("%s: accept", s->path);
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		log_warn("%s: SO_PEERCRED", s->path);
		close(fd);
		return;
	}
	if (s->has_admit && !ipc_admit_check(&s->admit, fd, &cred)) {
		log_warnx("%s: refused peer pid %d uid %d gid %d: %s",
		    s->path, (int)cred.pid, (int)cred.uid, (int)cred.gid,
		    s->admit.need);
		close(fd);
		return;
	}
	peer.cred = cred;
	peer.fd = fd;
	if ((pol = s->accept(&peer.cred, s->arg)) == NULL) {
		log_warnx("%s: refused peer pid %d uid %d gid %d", s->path,
		    (int)cred.pid, (int)cred.uid, (int)cred.gid);
		close(fd);
		return;
	}
	if (ipc_conn_new(s->base, fd, s->role, pol, s->h, s->arg) == NULL) {
		log_warn("%s: new connection", s->path);
		close(fd);
	}
}

struct ipc_server *
ipc_server_new(struct event_base *base, const char *path, mode_t mode,
    const char *role, ipc_accept_cb accept_cb, const struct ipc_handlers *h,
    void *arg)
{
	struct sockaddr_un sun;
	struct ipc_server *s;
	struct stat st;
	mode_t old;
	int saved;

	if (ipc_sockaddr(&sun, path) == -1)
		return NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->fd = -1;
	s->base = base;
	s->accept = accept_cb;
	s->h = h;
	s->arg = arg;
	snprintf(s->role, sizeof(s->role), "%s", role);
	if ((s->path = strdup(path)) == NULL)
		goto fail;
	/* Only ever replace a socket: never unlink a file of another kind. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			errno = EEXIST;
			goto fail;
		}
		if (unlink(path) == -1)
			goto fail;
	}
	if ((s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) == -1)
		goto fail;
	/* Bind under a tight umask so the socket is never briefly open. */
	old = umask(0177);
	if (bind(s->fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		saved = errno;
		umask(old);
		errno = saved;
		goto fail;
	}
	umask(old);
	if (chmod(path, mode) == -1 || listen(s->fd, 128) == -1)
		goto fail;
	s->ev = event_new(base, s->fd, EV_READ | EV_PERSIST,
	    ipc_server_acceptcb, s);
	if (s->ev == NULL || event_add(s->ev, NULL) == -1)
		goto fail;
	return s;
 fail:
	saved = errno;
	ipc_server_free(s);
	errno = saved;
	return NULL;
}

void
ipc_server_free(struct ipc_server *s)
{
	if (s == NULL)
		return;
	if (s->ev != NULL)
		event_free(s->ev);
	if (s->fd != -1) {
		close(s->fd);
		unlink(s->path);
	}
	free(s->path);
	free(s);
}
