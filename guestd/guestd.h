/*
 * guestd: PID 1 (stage two) inside every mcpvm guest.  It runs jobs, moves
 * files and relays streams for the host over the link (proto/guest.h).
 * Shared declarations of its modules.
 */
#ifndef MCPVM_GUESTD_H
#define MCPVM_GUESTD_H

#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "glink.h"
#include "jobbuf.h"

struct guestd_opts {
	int		 init;		/* PID 1 duties */
	int		 link_fd;	/* --link-fd: exit when it ends */
	const char	*link_unix;	/* --link-unix: (re)connect */
	const char	*link_dev;	/* --link-dev: virtio-serial port */
	int		 link_vsock;	/* listen on GUEST_VSOCK_PORT */
	const char	*workspace;
	const char	*cgroup;	/* cgroup2 dir for mcpvm-jobs */
	const char	*home;
	uid_t		 uid;
	gid_t		 gid;
	int		 lo;		/* bring up lo (init does) */
	const char	*cmdline;	/* kernel command line file */
};
extern struct guestd_opts opts;

/* Event loop (guestd.c): interest is re-declared before every poll. */
typedef void (*loop_cb)(int, short, void *);
void	 loop_add(int, short, loop_cb, void *);
void	 loop_timeout(int64_t);	/* wake within this many ms */
int64_t	 now_ns(void);			/* CLOCK_MONOTONIC */
extern unsigned loop_gen;		/* bumped when objects were freed */

/* Link (guestd.c) */
extern struct glink *gl;
int	 link_is_up(void);
void	 link_reply(struct json_object *, const void *, size_t);
void	 guestd_shutdown(void);
void	 guestd_hello(struct json_object *);
void	 guestd_set_boot_id(const char *);	/* what hello says from now */

/*
 * Link peers (vsockpeer.c): 1 when an accepted vsock connection comes from
 * the host (VMADDR_CID_HOST) to GUEST_VSOCK_PORT, else 0.  Anything else
 * is a guest program trying to pass for the host.
 */
int	 vsock_peer_is_host(const struct sockaddr *peer, socklen_t peerlen,
	    const struct sockaddr *local, socklen_t locallen);

/* Requests (request.c): decoding of channel 0 messages, fuzzed. */
enum req_op {
	OP_PING = 1, OP_CLOCK_SET, OP_EXEC, OP_JOB_STATUS, OP_JOB_OUTPUT,
	OP_JOB_CANCEL, OP_FILE_READ, OP_FILE_WRITE, OP_FREEZE, OP_THAW,
	OP_ACTIVITY, OP_SHUTDOWN, OP_HELLO, OP_IDENTITY,
};

struct req {
	struct json_object *root;
	uint32_t	 id;
	enum req_op	 op;
	const char	*job_id;
	const char	*command;
	const char	*cwd;
	const char	*path;
	struct json_object *env;
	int64_t		 timeout_ms;
	const char	*broker_secret;
	int64_t		 cursor[2];
	int64_t		 max_bytes;
	int64_t		 mode;		/* -1: not given */
	int		 create_parents;
	int64_t		 realtime_ns;
	int		 has_time;
	int		 filesystems;	/* freeze: the file systems too */
	int64_t		 thaw_after_ms;	/* freeze: their bound */
	const uint8_t	*body;
	size_t		 body_len;
	int		 has_body;
	/* identity: checked by req_decode (proto/guest.h) */
	const char	*machine_id;
	const char	*boot_id;
	const char	*hostname;
	uint8_t		 entropy[GUEST_ENTROPY_BYTES];
	int		 has_net;	/* the clone's own network slot */
	struct glink_net net;
};

/* 0: decoded; 1: a reply-able argument error (id set); -1: link violation */
int	 req_decode(const void *, size_t, const void *, size_t, int,
	    struct req *, char *, size_t);
void	 req_free(struct req *);
int	 valid_job_id(const char *);

/* File systems frozen for a disk snapshot (fsfreeze.c) */
int	 fsfreeze_all(int64_t thaw_after_ms, char *, size_t);
void	 fsfreeze_thaw(void);
int	 fsfreeze_active(void);
void	 fsfreeze_poll(void);

/* Control dispatch (ctrl.c) */
int	 guestd_dispatch_host(const uint8_t *, size_t, const uint8_t *,
	    size_t, int);
struct json_object *reply_new(uint32_t);
struct json_object *reply_error(uint32_t, const char *, const char *, ...)
	    __attribute__((format(printf, 3, 4)));

/* Jobs (jobs.c) */
int	 jobs_init(void);
void	 jobs_poll(void);
void	 jobs_reaped(pid_t, int);
void	 jobs_check_timeouts(void);
struct json_object *jobs_exec(const struct req *);
struct json_object *jobs_status(const struct req *);
struct json_object *jobs_output(const struct req *, uint8_t **, size_t *);
struct json_object *jobs_cancel(const struct req *);
int	 jobs_freeze(void);
void	 jobs_thaw(void);
int	 jobs_active(void);
int	 jobs_running(void);
int	 jobs_count(void);
void	 jobs_shutdown(void);

/* Files (files.c) */
struct json_object *files_read(const struct req *, uint8_t **, size_t *);
struct json_object *files_write(const struct req *);
int	 ws_open_dir(const char *, int, char *, size_t);

/* Streams (streams.c) */
void	 streams_open(uint32_t, uint32_t);
void	 streams_frame(const struct glink_frame *);
void	 streams_poll(void);
void	 streams_reset(void);
int	 streams_count(void);
int	 streams_adopt(uint32_t, int, const void *);
int	 streams_count_owner(const void *);
void	 streams_close_owner(const void *);

/* The job broker pipe (guestd_broker.c): listener and relay for one job. */
struct broker;
struct broker *broker_start(const char *job_id, const char *jobcg,
	    const char *secret, char *err, size_t errlen);
int	 broker_nsfd(const struct broker *);
void	 broker_stop(struct broker *);
void	 broker_free(struct broker *);
void	 broker_poll(void);
int	 broker_relay_main(int, char **) __attribute__((noreturn));

/* A clone's new identity (identity.c) */
struct json_object *identity_apply(const struct req *);

/* PID 1 duties (init.c) */
void	 init_system(void);
void	 init_lo(void);
int	 init_eth0_renew(const struct glink_net *, char *, size_t);
void	 init_poweroff(void) __attribute__((noreturn));
void	 read_boot_id(char *, size_t);
int	 in_initial_pidns(void);	/* the VM's own kernel, not a harness */

#endif
