/*
 * RFC 6455 WebSocket codec for mcpd's guest streams, as pure functions:
 * handshake checks and Sec-WebSocket-Accept, an incremental frame parser
 * for client frames (masking required, fragmentation, control frames,
 * close codes, UTF-8 text, a message size limit) and server frame headers.
 */
#ifndef MCPD_WS_H
#define MCPD_WS_H

#include <stddef.h>
#include <stdint.h>

#include "utf8.h"

#define WS_OP_CONT	0x0
#define WS_OP_TEXT	0x1
#define WS_OP_BINARY	0x2
#define WS_OP_CLOSE	0x8
#define WS_OP_PING	0x9
#define WS_OP_PONG	0xa

#define WS_CLOSE_NORMAL		1000
#define WS_CLOSE_GOING_AWAY	1001
#define WS_CLOSE_PROTOCOL	1002
#define WS_CLOSE_UNSUPPORTED	1003
#define WS_CLOSE_NO_STATUS	1005	/* never sent; "no code given" */
#define WS_CLOSE_BAD_DATA	1007
#define WS_CLOSE_POLICY		1008
#define WS_CLOSE_TOO_BIG	1009
#define WS_CLOSE_INTERNAL	1011

#define WS_MAX_MESSAGE		(1024 * 1024)
#define WS_MAX_HEADER		14
#define WS_ACCEPT_LEN		28

/*
 * Checks the client's opening handshake headers (any may be NULL).
 * Returns 0, or an HTTP status (400, or 426 for a wrong version) with
 * *why saying which header is wrong.
 */
int	ws_handshake_check(const char *upgrade, const char *connection,
	    const char *key, const char *version, const char **why);
/* Loads what the codec needs (OpenSSL) before the sandbox: 0 or -1. */
int	ws_init(void);
/* Sec-WebSocket-Accept for key; out gets WS_ACCEPT_LEN + NUL. */
int	ws_accept_key(const char *key, char out[WS_ACCEPT_LEN + 1]);

enum ws_event_kind {
	WS_EV_DATA,	/* a piece of a text or binary message */
	WS_EV_PING,
	WS_EV_PONG,
	WS_EV_CLOSE,
};

struct ws_event {
	enum ws_event_kind kind;
	uint8_t		*payload;	/* unmasked, inside the input buffer */
	size_t		 len;
	int		 opcode;	/* DATA: the message's opcode */
	int		 fin;		/* DATA: last piece of the message */
	uint64_t	 msg_len;	/* DATA: message bytes so far */
	uint16_t	 close_code;	/* CLOSE: the code, or 1005 */
	const char	*reason;	/* CLOSE: points into payload */
	size_t		 reason_len;
};

/* Receiver state: one per connection. */
struct ws_rx {
	int		 in_msg;
	int		 msg_op;
	uint64_t	 msg_len;
	size_t		 max_msg;
	struct utf8_stream utf8;
};

void	ws_rx_init(struct ws_rx *, size_t max_msg);
/*
 * Parses one frame at the start of buf (unmasking it in place).
 * Returns the bytes consumed with *ev filled in, 0 if more input is
 * needed, or -1 with *close_code set to the code to close with (1002
 * protocol error, 1007 invalid UTF-8, 1009 message too big).
 */
long	ws_rx_parse(struct ws_rx *, uint8_t *buf, size_t len,
	    struct ws_event *ev, uint16_t *close_code);

/*
 * The whole size of the frame whose header starts buf, or 0 if the
 * header is not complete yet.  For sizing reads only; ws_rx_parse checks.
 */
size_t	ws_frame_size(const uint8_t *buf, size_t len);
/* Writes an unmasked server frame header; returns its length. */
size_t	ws_frame_header(uint8_t out[WS_MAX_HEADER], int fin, int opcode,
	    uint64_t len);
/* A close payload (code + reason truncated to fit 125 bytes). */
size_t	ws_close_payload(uint8_t out[125], uint16_t code, const char *reason);
/* 1 if code may appear in a close frame on the wire. */
int	ws_close_code_valid(unsigned int code);

#endif
