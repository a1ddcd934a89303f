/*
 * mcpd: the job broker pipe's frames as they pass through (mcpd_broker.c).  The
 * attachment is a stream (stream.c) whose bytes are checked both ways: the
 * service's frames tell which conn_ids exist, and a controller frame for
 * any other closes the pipe with 1002.
 */
#ifndef MCPD_BROKER_H
#define MCPD_BROKER_H

#include <stddef.h>
#include <stdint.h>

#include "brokermux.h"

#define BROKER_TOKEN_MAX	128

struct broker_mux {
	struct bmux_dec	 ctl;		/* from the controller */
	struct bmux_dec	 svc;		/* from vmproxy */
	uint32_t	 max_id;	/* the highest conn_id opened */
	uint64_t	 opened, closed;
};

struct broker_mux *broker_mux_new(void);
void	 broker_mux_free(struct broker_mux *);
/* 0, or -1 when the controller broke the protocol (why in ctl.err). */
int	 broker_mux_from_controller(struct broker_mux *, const void *, size_t);
/* 0, or -1 when vmproxy did (svc.err). */
int	 broker_mux_from_service(struct broker_mux *, const void *, size_t);
/* 1 when a token has the shape vm_exec accepts. */
int	 broker_token_valid(const char *);

#endif
