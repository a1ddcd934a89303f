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
	ipc_accept_cb			 accept;
	const struct ipc_handlers	*h;
	void				*arg;
};


/* What an accept callback's ucred points into: the peer's socket too. */
struct ipc_peer {
	struct ucred	cred;	/* first: the callback's pointer */
	int		fd;
};

#define IPC_PEER_MAX_GROUPS	256

int
ipc_peer_in_group(const struct ucred *cred, gid_t gid)
{
	const struct ipc_peer *peer = (const struct ipc_peer *)cred;
	gid_t groups[IPC_PEER_MAX_GROUPS];
	socklen_t len = sizeof(groups);

	if (cred->gid == gid)
		return 1;
	if (getsockopt(peer->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) ==
	    -1) {
		/* ERANGE: more groups than we look at; not a member then. */
		log_warn("SO_PEERGROUPS of pid %d", (int)cred->pid);
		return 0;
	}
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if (groups[i] == gid)
			return 1;
	return 0;
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
			log_warn("%s: accept on %s", s->role, s->path);
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		log_warn("%s: SO_PEERCRED on %s", s->role, s->path);
		close(fd);
		return;
	}
	peer.cred = cred;
	peer.fd = fd;
	if ((pol = s->accept(&peer.cred, s->arg)) == NULL) {
		log_warnx("%s: refused peer pid %d uid %d gid %d on %s",
		    s->role, (int)cred.pid, (int)cred.uid, (int)cred.gid,
		    s->path);
		close(fd);
		return;
	}
	if (ipc_conn_new(s->base, fd, s->role, pol, s->h, s->arg) == NULL) {
		log_warn("%s: new connection on %s", s->role, s->path);
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

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	strcpy(sun.sun_path, path);
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
