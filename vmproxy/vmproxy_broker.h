/*
 * vmproxy's side of the job broker pipe (vmproxy_broker.c): guest
 * connections arriving on ACCEPT channels, routed by their preamble's
 * secret to a job's pipe, multiplexed onto the socket handed to mcpd.
 */
#ifndef MCPVM_VMPROXY_BROKER_H
#define MCPVM_VMPROXY_BROKER_H

#include <event2/event.h>
#include <json-c/json.h>

#include "glink.h"
#include "ipc.h"

/* Limits: vmmd sends the [vmmd] broker_* keys; until then, defaults. */
struct vpb_limits {
	long long	 max_attached;		/* per VM */
	long long	 max_connections;	/* carried, per attachment */
	long long	 max_waiting;		/* for a controller, per pipe */
	long long	 buffer_bytes;		/* controller data, per conn */
	long long	 stall_seconds;
	long long	 max_pending;		/* preambles being read, per VM */
	long long	 preamble_seconds;
};

struct vpb_hooks {
	struct event_base	*base;
	struct glink		*g;
	const char		*vm_id;
	void			(*want_write)(void);
	void			(*report)(void);	/* attachments changed */
};

void	 vpb_init(const struct vpb_hooks *);
/* Frames of GLINK_GUEST_CHAN channels, ACCEPT included; 0 or -1 (fatal). */
int	 vpb_link_frame(const struct glink_frame *);
/* The link dropped: guest connections go, attachments stay. */
void	 vpb_link_reset(void);
/* Credit may have come back. */
void	 vpb_resume(void);
int	 vpb_attached(void);
/* vmmd's IPC_PROXY_BROKER_ROUTE and IPC_PROXY_BROKER_ATTACH. */
void	 vpb_route(struct ipc_conn *, uint32_t, struct json_object *);
void	 vpb_attach(struct ipc_conn *, uint32_t, struct json_object *);
void	 vpb_limits(struct ipc_conn *, uint32_t, struct json_object *);

#endif
