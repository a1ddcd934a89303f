/*
 * The verdict of a decoder of a peer's message, shared by every decoder
 * that turns a frame body into a typed struct before a handler runs:
 * vmmd's of mcpd, vmctl and vmproxy (vmmd/decode.c) and vmproxy's of vmmd
 * (vmproxy/vmproxy_decode.c).
 *
 * A verdict is one of three: the message is good; it is well formed but a
 * value is refused, and the peer is answered with code and msg; or it is
 * not of its type's shape, which only a broken or compromised peer sends,
 * and its connection is closed and logged.
 */
#ifndef MCPVM_VERDICT_H
#define MCPVM_VERDICT_H

enum decode_verdict {
	DECODE_OK,
	DECODE_REFUSE,		/* answer code, msg */
	DECODE_BAD,		/* close the connection, log msg */
};

struct decode_err {
	const char	*code;	/* a public error code, for DECODE_REFUSE */
	char		 msg[256];
};

/*
 * Fills e (code may be NULL for DECODE_BAD) and returns v, for
 * `return verdict(e, DECODE_BAD, NULL, "…")`.
 */
enum decode_verdict verdict(struct decode_err *e, enum decode_verdict v,
	    const char *code, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));

#endif
