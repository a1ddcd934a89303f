/*
 * The host <-> guest link protocol (proto/guest.h): frame decoding with
 * every rule checked, channel state and credit windows, a two-priority
 * output queue, and bounded JSON helpers for channel 0.  Used by guestd in
 * the guest and by vmproxy on the host; it does no I/O of its own except
 * glink_flush(), so either event loop can drive it.
 */
#ifndef MCPVM_GLINK_H
#define MCPVM_GLINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "guest.h"

enum glink_role {
	GLINK_ROLE_HOST,
	GLINK_ROLE_GUEST,
};

struct glink;

struct glink_hdr {
	uint8_t		type;
	uint8_t		flags;
	uint16_t	reserved;
	uint32_t	channel;
	uint32_t	len;
};

/*
 * One validated frame.  For CTRL, data/len is the JSON text and body/
 * body_len the assembled body (NULL/0 without GLINK_F_BODY); BODY frames are
 * never delivered on their own.  udata is the channel's user pointer.
 * Pointers are valid only during the callback.
 */
struct glink_frame {
	uint8_t		 type;
	uint8_t		 flags;
	uint32_t	 channel;
	const uint8_t	*data;
	size_t		 len;
	const uint8_t	*body;
	size_t		 body_len;
	void		*udata;
};

/* Return 0 to go on, -1 to stop feeding (glink_feed then returns -1). */
typedef int (*glink_cb)(struct glink *, const struct glink_frame *, void *);

void	 glink_hdr_encode(uint8_t out[GLINK_HDR_LEN],
	    const struct glink_hdr *);
void	 glink_hdr_decode(const uint8_t in[GLINK_HDR_LEN],
	    struct glink_hdr *);

struct glink *glink_new(enum glink_role);
void	 glink_free(struct glink *);
/* The transport dropped: forget channels, partial frames and queued output. */
void	 glink_reset(struct glink *);
/*
 * A new session on the same transport ("hello" request): forget every
 * channel and the stream frames not yet started; control traffic stays.
 */
void	 glink_reset_channels(struct glink *);
/*
 * Host, from sending "hello" until its reply: frames for channels it does
 * not know are dropped rather than ending the link (they were in flight
 * from the guest's previous session).
 */
void	 glink_set_lenient(struct glink *, int);

/*
 * Feeds received bytes.  Returns 0, or -1 when the peer broke a rule (the
 * caller must drop the transport; glink_error() says which rule) or the
 * callback returned -1.
 */
int	 glink_feed(struct glink *, const void *, size_t, glink_cb, void *);
const char *glink_error(const struct glink *);

/* Senders: each returns 0, or -1 (and sets glink_error) on misuse. */
int	 glink_send_ctrl(struct glink *, const char *, size_t, const void *,
	    size_t);
int	 glink_send_json(struct glink *, struct json_object *, const void *,
	    size_t);
int	 glink_send_open(struct glink *, uint32_t, uint16_t);
/* Guest: a connection made in the guest, channel id with GLINK_GUEST_CHAN. */
int	 glink_send_accept(struct glink *, uint32_t);
int	 glink_send_open_ok(struct glink *, uint32_t);
int	 glink_send_open_fail(struct glink *, uint32_t, const char *);
int	 glink_send_eof(struct glink *, uint32_t);
int	 glink_send_close(struct glink *, uint32_t);
/* Queues up to the channel's credit; returns the bytes taken or -1. */
ssize_t	 glink_send_data(struct glink *, uint32_t, const void *, size_t);
/* The application consumed n received bytes: grants the peer credit. */
int	 glink_consumed(struct glink *, uint32_t, size_t);

/* Channel queries; a closed or unknown channel has no credit and no udata. */
size_t	 glink_credit(const struct glink *, uint32_t);
int	 glink_chan_exists(const struct glink *, uint32_t);
int	 glink_chan_set_udata(struct glink *, uint32_t, void *);
void	*glink_chan_udata(const struct glink *, uint32_t);
int	 glink_nchannels(const struct glink *);
/* Host: the lowest free channel id, 0 if the table is full. */
uint32_t glink_free_channel(const struct glink *);
/* Guest: the lowest free GLINK_GUEST_CHAN id, 0 if its share is full. */
uint32_t glink_free_accept_channel(const struct glink *);

/* Output: control frames always leave before queued stream data. */
size_t	 glink_out_pending(const struct glink *);
size_t	 glink_out_data_pending(const struct glink *);
void	 glink_out_peek(const struct glink *, const uint8_t **, size_t *);
void	 glink_out_consume(struct glink *, size_t);
/* Writes what it can to a non-blocking fd; -1 on a write error (errno). */
ssize_t	 glink_flush(struct glink *, int);

/*
 * Channel 0 JSON: glink_json_parse() takes exactly len bytes (no NUL needed)
 * and parses them with jsonx_parse (common/jsonx: strict grammar and UTF-8,
 * int64 and finite numbers), refusing nesting deeper than GLINK_JSON_DEPTH,
 * trailing bytes and anything but an object.  Getters type-check one field: they return 1 when present
 * and valid, 0 when absent (an error if required), -1 with err filled when
 * wrong.  Strings must be valid UTF-8 without NUL and at most max bytes.
 */
struct json_object *glink_json_parse(const void *, size_t, char *, size_t);
int	 glink_json_str(struct json_object *, const char *, int, size_t,
	    const char **, char *, size_t);
int	 glink_json_int(struct json_object *, const char *, int, int64_t,
	    int64_t, int64_t *, char *, size_t);
int	 glink_json_bool(struct json_object *, const char *, int, int *,
	    char *, size_t);
int	 glink_json_obj(struct json_object *, const char *, int,
	    struct json_object **, char *, size_t);
int	 glink_json_array(struct json_object *, const char *, int, size_t,
	    struct json_object **, char *, size_t);

/*
 * The identity op's values (proto/guest.h): 1 when valid.  glink_b64_exact
 * decodes canonical padded base64 of exactly want bytes into out, 0 or -1.
 */
int	 glink_valid_machine_id(const char *);
int	 glink_valid_uuid(const char *);
int	 glink_valid_hostname(const char *);
int	 glink_b64_exact(const char *, size_t, uint8_t *, size_t);

/*
 * The identity op's optional "net" member (proto/guest.h): the clone's
 * own network slot.  glink_net_decode checks every member of the object
 * (only these, each in its one form) into typed values: 0, or -1 with
 * err naming the member.  Addresses are in network byte order.
 */
struct glink_net {
	uint8_t		 mac[6];
	uint32_t	 address;
	int		 prefix;
	uint32_t	 gateway;
	uint32_t	 dns[GUEST_NET_MAX_DNS];
	int		 ndns;
};
int	 glink_net_decode(struct json_object *, struct glink_net *, char *,
	    size_t);

/*
 * Decodes a guest -> host message's envelope: an event (hello) or a reply.
 * For a reply, *id is set and *ok says whether it succeeded; on error
 * code/message point into the object.  Returns 0 or -1 with err filled.
 */
struct glink_reply {
	const char	*event;		/* non-NULL for an event */
	uint32_t	 id;
	int		 ok;
	const char	*code;
	const char	*message;
};
int	 glink_reply_decode(struct json_object *, struct glink_reply *,
	    char *, size_t);

#endif
