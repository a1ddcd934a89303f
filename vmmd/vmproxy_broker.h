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

/* Limits (docs/api.md). */
#define VPB_MAX_PENDING		64	/* preambles being read, per VM */
#define VPB_PREAMBLE_SECONDS	2
#define VPB_MAX_ACTIVE		64	/* carried, per attachment */
#define VPB_MAX_WAITING		32	/* waiting for a controller, per pipe */
#define VPB_TX_MAX		(1024 * 1024)	/* controller data, per conn */
#define VPB_STALL_SECONDS	10
#define VPB_MAX_ATTACHED	4	/* per VM */

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

#endif
