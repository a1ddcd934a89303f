/*
 * A non-blocking QMP (QEMU Machine Protocol) client on libevent, used by
 * vmproxy (vmproxy_qmp.c) on behalf of vmmd's QEMU backend.  QEMU is not
 * trusted to be well-behaved: every message is size-limited, parsed with
 * a bounded json-c tokener and type-checked before anything is handed to
 * a caller.
 */
#ifndef VMPROXY_QMP_H
#define VMPROXY_QMP_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct json_object;
struct qmp;

/* Largest message (one line of JSON) we accept from QEMU. */
#define QMP_MSG_MAX	(256 * 1024)
/* Deepest JSON nesting we accept. */
#define QMP_DEPTH_MAX	16

enum qmp_kind {
	QMP_GREETING,
	QMP_RETURN,
	QMP_ERROR,
	QMP_EVENT,
};

/* One parsed message.  Pointers point into `root`, freed by qmp_msg_free. */
struct qmp_msg {
	enum qmp_kind		 kind;
	int			 has_id;
	uint64_t		 id;		/* ids we send are integers */
	struct json_object	*ret;		/* QMP_RETURN: "return" */
	const char		*err_class;	/* QMP_ERROR */
	const char		*err_desc;	/* QMP_ERROR */
	const char		*event;		/* QMP_EVENT: name */
	struct json_object	*data;		/* QMP_EVENT: "data", may be NULL */
	struct json_object	*root;
};

/*
 * Parses one message (without its line ending).  Returns 0, or -1 with a
 * reason in err for anything that is not well-formed QMP.
 */
int	qmp_parse(const char *buf, size_t len, struct qmp_msg *msg, char *err,
	    size_t errlen);
void	qmp_msg_free(struct qmp_msg *);

/* The outcome of one command, valid only during the callback. */
struct qmp_reply {
	int			 ok;
	struct json_object	*ret;		/* ok: "return" value */
	/* !ok: QEMU's error class, or "timeout" / "disconnected" */
	const char		*err_class;
	const char		*err_desc;
};

typedef void (*qmp_reply_cb)(struct qmp *, const struct qmp_reply *,
	    void *arg);

struct qmp_cbs {
	/* Greeting read and qmp_capabilities accepted. */
	void	(*ready)(struct qmp *, void *arg);
	/* An asynchronous event: "STOP", "RESUME", "MIGRATION", ... */
	void	(*event)(struct qmp *, const char *name,
		    struct json_object *data, void *arg);
	/*
	 * The connection is gone (QEMU exited, protocol error, connect
	 * timeout); pending commands were failed first.  The qmp object
	 * stays allocated until qmp_free.
	 */
	void	(*closed)(struct qmp *, const char *why, void *arg);
};

/*
 * Connects to QEMU's QMP socket at path, retrying while QEMU creates it,
 * for at most connect_ms.  Returns NULL only if out of memory or the path
 * is too long.
 */
struct qmp *qmp_open(struct event_base *, const char *path, int connect_ms,
	    const struct qmp_cbs *, void *arg);
/*
 * Queues a command.  args (may be NULL) is taken over.  fd, unless -1, is
 * sent with the command by SCM_RIGHTS (for getfd / add-fd) and is not
 * closed.  cb (may be NULL) runs exactly once, unless qmp_free comes
 * first.  Returns -1 if the connection is closed.
 */
int	qmp_command(struct qmp *, const char *cmd, struct json_object *args,
	    int fd, int timeout_ms, qmp_reply_cb cb, void *arg);
int	qmp_is_ready(const struct qmp *);
/* Frees everything; callbacks of pending commands do not run.  May be
 * called from inside any qmp callback. */
void	qmp_free(struct qmp *);

#endif
