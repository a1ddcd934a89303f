/*
 * Internal IPC between mcpvm processes: framed JSON messages on Unix stream
 * sockets, driven by libevent, with at most one descriptor per frame
 * (SCM_RIGHTS).  Every daemon and CLI uses this; the frame layout and the
 * message catalogue are in proto/ipcmsg.h.
 *
 * Each connection has a policy: the table of message types its peer may
 * send, and which of them may carry a descriptor.  A frame that breaks the
 * rules closes that connection and is logged; the process lives on.
 */
#ifndef MCPVM_IPC_H
#define MCPVM_IPC_H

#include <sys/socket.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "jsonx.h"

/* The message catalogue every peer's table is built from. */
#include "../proto/ipcmsg.h"

struct event_base;
struct ipc_conn;
struct ipc_server;

struct ipc_msg {
	uint32_t		 type;
	uint32_t		 id;
	uint32_t		 flags;
	struct json_object	*body;	/* owned by ipc for the callback */
	int			 fd;	/* -1, or taken by setting it to -1 */
	/* The payload as sent, valid for the callback; never NUL-ended. */
	const char		*text;
	size_t			 textlen;
	/* For an IPC_RULE_TEXT type: its top-level members, as checked. */
	const struct jsonx_members *members;
};

#define IPC_RULE_FD	0x1u	/* this type may carry one descriptor */
/*
 * This type is checked as strictly as any (one JSON object, RFC 8259,
 * UTF-8, depth) but not made into objects: body is NULL and the receiver
 * reads text, for a payload it mostly passes on (mcpd with vmmd's tool
 * results, which can be a MiB).
 */
#define IPC_RULE_TEXT	0x2u

struct ipc_rule {
	uint32_t	type;
	unsigned int	flags;
};

struct ipc_policy {
	const char		*peer;	/* for logs: "mcpd", "authctl" */
	const struct ipc_rule	*rules;
	size_t			 nrules;
};

struct ipc_handlers {
	void	(*dispatch)(struct ipc_conn *, struct ipc_msg *, void *);
	/* Called once when the connection ends; it is freed on return. */
	void	(*closed)(struct ipc_conn *, void *);
};

/* A reply, or NULL when the request timed out or the connection ended. */
typedef void (*ipc_reply_cb)(struct ipc_conn *, struct ipc_msg *, void *);

/*
 * accept(): the policy for this peer, or NULL to refuse it.  It runs after
 * the server's admission check (ipc_server_set_admit), for what is the
 * daemon's own to decide: which policy a uid gets, per-peer limits.
 */
typedef const struct ipc_policy *(*ipc_accept_cb)(const struct ucred *,
    void *);
/*
 * Within an accept callback: does the peer hold gid as its primary or a
 * supplementary group?  From the kernel (SO_PEERGROUPS, the groups it had
 * when it connected): no group database, no NSS, nothing that blocks.
 */
int		 ipc_peer_in_group(const struct ucred *, gid_t);

/*
 * Who may connect to a server: a peer whose uid is one of uids, or whose
 * primary or supplementary groups include one of gids.  Supplementary
 * groups come from SO_PEERGROUPS (Linux 4.13 and later): the groups the
 * peer held when it connected.  Where the kernel lacks it, only the
 * primary group counts, so a member through a supplementary group alone
 * is refused (never admitted by mistake), and the log says so once.
 * need is what the refusal's log line says the socket requires, such as
 * "neither root nor in group mcpvm-admin".
 */
#define IPC_ADMIT_MAX	16
struct ipc_admit {
	uid_t		uids[IPC_ADMIT_MAX];
	size_t		nuids;
	gid_t		gids[IPC_ADMIT_MAX];
	size_t		ngids;
	char		need[128];
};
/* -1 when the list is full (IPC_ADMIT_MAX). */
int		 ipc_admit_uid(struct ipc_admit *, uid_t);
int		 ipc_admit_gid(struct ipc_admit *, gid_t);
/* 1 when the peer on fd, whose SO_PEERCRED is cred, is admitted. */
int		 ipc_admit_check(const struct ipc_admit *, int fd,
		    const struct ucred *);

struct ipc_conn	*ipc_conn_new(struct event_base *, int fd, const char *role,
		    const struct ipc_policy *, const struct ipc_handlers *,
		    void *arg);
struct ipc_conn	*ipc_connect(struct event_base *, const char *path,
		    const char *role, const struct ipc_policy *,
		    const struct ipc_handlers *, void *arg);
void		 ipc_conn_free(struct ipc_conn *);
/*
 * Fails every request of c still waiting for a reply, now: each callback
 * gets a NULL message, as when the connection closes.  Unlike a close it
 * does not wait for the end of a callback of c that is running.
 */
void		 ipc_conn_cancel_requests(struct ipc_conn *);
const struct ucred *ipc_conn_peercred(const struct ipc_conn *);
const char	*ipc_conn_peer_role(const struct ipc_conn *);
void		 ipc_conn_set_arg(struct ipc_conn *, void *);
void		*ipc_conn_arg(const struct ipc_conn *);
/*
 * libevent priority of the connection's reads (0 is first); for authd's
 * connection, whose revocations must be read before client requests that
 * became readable in the same loop turn.
 */
int		 ipc_conn_set_priority(struct ipc_conn *, int);

/*
 * Frames are written at the end of the loop turn that queued them; this
 * writes what is queued now, for a message that must reach the peer before
 * something else it can see happens (a stream's close notice before the
 * VM's processes die).  What the socket does not take goes later.
 */
void		 ipc_conn_flush(struct ipc_conn *);
/*
 * fn runs before any frame of any connection is written: what a reply
 * must follow (vmmd's audit lines, made durable) is done by then, once
 * for every frame that goes out together.
 */
void		 ipc_set_write_barrier(void (*fn)(void));

/* body is not consumed (NULL sends {}); fd is consumed (-1 for none). */
int		 ipc_send(struct ipc_conn *, uint32_t type, uint32_t id,
		    struct json_object *body, int fd);
int		 ipc_reply(struct ipc_conn *, uint32_t type, uint32_t id,
		    struct json_object *body, int fd);
int		 ipc_reply_error(struct ipc_conn *, uint32_t id,
		    const char *code, const char *fmt, ...)
		    __attribute__((format(printf, 4, 5)));
int		 ipc_request(struct ipc_conn *, uint32_t type,
		    struct json_object *body, int fd, int timeout_ms,
		    ipc_reply_cb, void *arg);
/* As ipc_request; *id gets the request's id, which a peer's unsolicited
 * messages about it (mcpd: IPC_VM_PROGRESS, IPC_VM_CANCEL) carry. */
int		 ipc_request_id(struct ipc_conn *, uint32_t type,
		    struct json_object *body, int fd, int timeout_ms,
		    ipc_reply_cb, void *arg, uint32_t *id);
/*
 * As ipc_request, for a peer that is not trusted to answer in kind: a
 * reply whose type is neither want nor IPC_ERROR closes the connection
 * (its descriptor too) instead of reaching cb.
 */
int		 ipc_request_want(struct ipc_conn *, uint32_t type,
		    struct json_object *body, int fd, int timeout_ms,
		    uint32_t want, ipc_reply_cb, void *arg);

/*
 * Listens on path (a stale socket there is replaced, a file of another
 * kind never), chmod mode; the peer check is the policy, not the mode.
 * Each connection is taken with accept4 (CLOEXEC, NONBLOCK) and
 * SO_PEERCRED, checked against the admission list if one is set, then
 * given to accept_cb for its policy, before any of its bytes is read.
 */
struct ipc_server *ipc_server_new(struct event_base *, const char *path,
		    mode_t mode, const char *role, ipc_accept_cb,
		    const struct ipc_handlers *, void *arg);
/*
 * From now on the server admits only the peers a allows (copied), and
 * logs "PATH: refused peer pid P uid U gid G: NEED" for the others; their
 * connection closes before the accept callback sees them.  Set it before
 * the event loop runs.
 */
void		 ipc_server_set_admit(struct ipc_server *,
		    const struct ipc_admit *a);
void		 ipc_server_free(struct ipc_server *);

/* Blocking client side, for the operator CLIs and tests. */
int		 ipc_sync_connect(const char *path, const char *role,
		    int timeout_ms);
int		 ipc_sync_call(int fd, uint32_t type, struct json_object *req,
		    int send_fd, uint32_t *rtype, struct json_object **reply,
		    int *recv_fd, int timeout_ms);

/* Builds {"error":{"code":…,"message":…}}. */
struct json_object *ipc_error_body(const char *code, const char *message);

/*
 * The frame reader, free of I/O so that the fuzzer drives it exactly as the
 * sockets do: ipc_reader_space() says where the next bytes go and how many
 * at most; after reading n of them, ipc_reader_commit() accounts for them
 * and hands out the first complete frame, ipc_reader_next() the others.
 * Descriptors that arrive with a read are attached with ipc_reader_add_fd()
 * before its commit.
 *
 * A descriptor belongs to the frame holding the last byte of the read that
 * brought it, and that frame must begin within that read.  This holds for
 * every sender that puts a frame with a descriptor in a sendmsg of its own,
 * the descriptor with its first byte (ipc.c's do): Linux never returns
 * bytes from beyond a message that carried descriptors in the same read.
 *
 * An exact reader (the default) reads no further than the frame it is in,
 * for the blocking client, which reads one frame and stops; a bulk reader
 * (ipc_reader_set_bulk) takes whatever the socket has, several frames in
 * one read under load.
 */
#define IPC_READ_BUF	(64 * 1024)
struct ipc_reader {
	uint8_t		*buf;
	size_t		 cap;
	size_t		 start;		/* where the next frame begins */
	size_t		 end;		/* end of the bytes read */
	int		 bulk;
	int		 saved;		/* byte under a payload's NUL, or -1 */
	size_t		 saved_at;
	int		 in_fd;		/* came with the read not yet committed */
	struct {
		int	 fd;
		size_t	 from, to;	/* the read that brought it */
	}		 fds[2];
	size_t		 nfds;
};

struct ipc_frame {
	uint32_t	 type, id, flags;
	const char	*payload;	/* NUL-terminated; valid until the
					   next ipc_reader_space() or
					   ipc_reader_next() */
	size_t		 len;
	int		 fd;		/* -1, or the caller's to keep */
};

void	ipc_reader_init(struct ipc_reader *);
void	ipc_reader_set_bulk(struct ipc_reader *);
void	ipc_reader_reset(struct ipc_reader *);
/* NULL when out of memory. */
void	*ipc_reader_space(struct ipc_reader *, size_t *want);
/* 1: a frame is complete; 0: need more; -1: broken frame, *err says why */
int	ipc_reader_commit(struct ipc_reader *, size_t n, struct ipc_frame *,
	    const char **err);
/* The next frame already read, as ipc_reader_commit answers. */
int	ipc_reader_next(struct ipc_reader *, struct ipc_frame *,
	    const char **err);
/* -1 when a second descriptor arrives for one frame. */
int	ipc_reader_add_fd(struct ipc_reader *, int fd, const char **err);
/*
 * Checks a complete frame against a policy and parses its JSON body.
 * Returns 0 and sets *body (NULL for an IPC_RULE_TEXT type, whose payload
 * is checked only, its top-level members recorded in *mem unless that is
 * NULL), or -1 with *err.
 */
int	ipc_frame_check(const struct ipc_frame *, const struct ipc_policy *,
	    struct json_object **body, struct jsonx_members *, char *err,
	    size_t errlen);

#endif
