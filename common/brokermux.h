/*
 * The job broker pipe's wire formats, shared by vmproxy and mcpd: the
 * preamble guestd's relay writes first on each guest connection, and the
 * big-endian open/data/close frames carried over the controller's
 * WebSocket (a message may split or combine frames).
 */
#ifndef MCPVM_BROKERMUX_H
#define MCPVM_BROKERMUX_H

#include <stddef.h>
#include <stdint.h>

#include "guest.h"

enum bmux_type {
	BMUX_OPEN = 1,		/* u8 type, u32 conn_id */
	BMUX_DATA = 2,		/* u8 type, u32 conn_id, u32 len, payload */
	BMUX_CLOSE = 3,		/* u8 type, u32 conn_id */
};

#define BMUX_MAX_DATA	65536u
#define BMUX_HDR_MAX	9

struct bmux_frame {
	uint8_t		 type;
	uint32_t	 conn_id;
	const uint8_t	*data;		/* BMUX_DATA, valid in the callback */
	uint32_t	 len;
};

/* Return 0 to go on, -1 to stop (bmux_feed then returns -1). */
typedef int (*bmux_cb)(const struct bmux_frame *, void *);

struct bmux_dec {
	int		 from_controller;	/* only data and close allowed */
	uint8_t		 hdr[BMUX_HDR_MAX];
	size_t		 hlen;
	uint8_t		 payload[BMUX_MAX_DATA];
	uint32_t	 plen;
	char		 err[128];
};

void	 bmux_init(struct bmux_dec *, int from_controller);
/*
 * Feeds bytes; each whole frame goes to cb.  Returns 0, or -1 with d->err
 * saying which rule the peer broke (or that cb stopped).
 */
int	 bmux_feed(struct bmux_dec *, const void *, size_t, bmux_cb, void *);
/* Encoders: return the header length written (5 or 9). */
size_t	 bmux_encode(uint8_t out[BMUX_HDR_MAX], uint8_t type, uint32_t id,
	    uint32_t len);

/*
 * The preamble: "<job_id> <64 lowercase hex>\n", at most
 * BROKER_PREAMBLE_MAX bytes.  Returns the bytes it took (1..max) once
 * complete, 0 while more is needed, -1 when it can never be valid.
 */
struct broker_preamble {
	char		 job_id[GUEST_JOB_ID_MAX + 1];
	uint8_t		 secret[BROKER_SECRET_HEX / 2];
};
int	 broker_preamble_parse(const uint8_t *, size_t,
	    struct broker_preamble *);

#endif
