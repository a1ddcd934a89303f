/*
 * vmproxy's parts and what they share: main and vmmd's table
 * (vmproxy.c), the guest link (link.c) and the guest streams (streams.c);
 * the QEMU side and the broker have headers of their own.  Each part
 * keeps the rest of its state to itself.
 */
#ifndef VMPROXY_VMPROXY_H
#define VMPROXY_VMPROXY_H

struct event_base;
struct glink;
struct glink_frame;
struct ipc_conn;
struct ipc_msg;
struct vmmd_msg;

struct vmproxy {
	struct event_base	*base;
	struct ipc_conn		*vmmd;		/* NULL once vmmd is gone */
	const char		*vm_id;
	struct glink		*g;		/* the link's frames, channels */
};
extern struct vmproxy px;

/* link.c: connects to path and keeps reconnecting until the loop ends. */
void	link_init(const char *path);
/* Connected, and the guest answered this session's hello. */
int	link_up(void);
/* Output is queued on the link: write it when the socket takes it. */
void	link_want_write(void);
/* vmmd's IPC_PROXY_CALL, decoded: the request goes to the guest. */
void	link_call(struct ipc_msg *, struct vmmd_msg *);

/* streams.c: vmmd's IPC_PROXY_STREAM_OPEN, decoded. */
void	stream_open(struct ipc_msg *, struct vmmd_msg *);
/* A frame of a host-opened channel; 0, or -1 for a broken guest. */
int	streams_frame(const struct glink_frame *);
/* Credit may have come back: stalled streams read again. */
void	streams_resume(void);
/* Tells vmmd how many streams and broker pipes are open (activity). */
void	streams_report(void);
/* The link dropped: every stream with it. */
void	streams_drop(void);

#endif
