/*
 * What the pieces of common/glink (frames and channels, the output
 * queue and senders) share and no user of glink.h may see: the link's
 * state, its channels and queued chunks.  Not for guestd or vmproxy.
 */
#ifndef MCPVM_GLINK_PRIV_H
#define MCPVM_GLINK_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "glink.h"

#define CH_OPENING	0x01	/* OPEN sent/received, no OPEN_OK yet */
#define CH_LOCAL_EOF	0x02
#define CH_REMOTE_EOF	0x04
#define CH_LOCAL_CLOSED	0x08

struct glink_chan {
	uint32_t	 id;		/* 0: slot free */
	uint8_t		 state;
	uint32_t	 send_credit;	/* bytes we may still send */
	uint32_t	 recv_credit;	/* bytes the peer may still send */
	uint32_t	 unacked;	/* consumed, not yet granted back */
	void		*udata;
};

struct glink_chunk {
	struct glink_chunk	*next;
	size_t			 len;
	size_t			 data_bytes;	/* of DATA payload */
	uint8_t			 buf[];
};

struct glink_queue {
	struct glink_chunk	*head;
	struct glink_chunk	*tail;
};

struct glink {
	enum glink_role		 role;
	char			 err[256];

	/* reader */
	uint8_t			 hdrbuf[GLINK_HDR_LEN];
	size_t			 hdrlen;
	struct glink_hdr	 hdr;
	int			 have_hdr;
	uint8_t			*payload;	/* GLINK_MAX_PAYLOAD */
	size_t			 paylen;

	/* CTRL awaiting its body */
	uint8_t			*pend_ctrl;
	size_t			 pend_ctrl_len;
	uint8_t			*body;
	size_t			 body_len;

	struct glink_chan	 chans[GLINK_MAX_CHANNELS + GLINK_MAX_ACCEPTED];
	int			 nchans;
	int			 naccepted;	/* of nchans, GLINK_GUEST_CHAN */
	int			 lenient;	/* drop unknown-channel frames */

	/* writer: cur is the frame being written, off bytes of it are out */
	struct glink_queue	 ctrlq;
	struct glink_queue	 dataq;
	struct glink_chunk	*cur;
	size_t			 off;
	size_t			 pending;
	size_t			 data_pending;
};

/* Sets glink_error() and returns -1. */
int	glink_fail(struct glink *, const char *, ...)
	    __attribute__((format(printf, 2, 3)));

static inline void
put32(uint8_t *p, uint32_t v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = (v >> 24) & 0xff;
}

static inline uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

/* glink.c: the channel table. */
struct glink_chan *glink_chan_find(const struct glink *, uint32_t);
struct glink_chan *glink_chan_new(struct glink *, uint32_t);
void	glink_chan_release(struct glink *, struct glink_chan *);

/* glink_send.c: the two-priority output queue. */
int	glink_enqueue(struct glink *, uint8_t type, uint8_t flags,
	    uint32_t ch, const void *, size_t, const void *, size_t);
struct glink_chunk *glink_dequeue(struct glink_queue *);

#endif
