/*
 * Base64 for file transfer, binary job output and stdin (RFC 4648 section 4,
 * padded) and base64url without padding (section 5) for credentials.  Every
 * process that moves bytes through JSON uses these; decoding is strict
 * because the input comes from clients.
 */
#ifndef MCPVM_B64_H
#define MCPVM_B64_H

#include <stddef.h>
#include <stdint.h>

/* Encoded length of len bytes, padded; 0 when it would not fit a size_t. */
size_t	b64_encoded_len(size_t len);
/* Largest decoded length of an encoded string of len characters. */
size_t	b64_decoded_max(size_t len);

/*
 * Encode: return a malloc'd NUL-terminated string and its length in
 * *outlen, or NULL with errno ENOMEM or EOVERFLOW.
 */
char	*b64_encode(const void *in, size_t len, size_t *outlen);
char	*b64url_encode(const void *in, size_t len, size_t *outlen);

/*
 * Decode exactly in[0..len): return 0 with a malloc'd buffer in *out (never
 * NULL, even for zero bytes) and its length in *outlen, or -1 with errno:
 * EINVAL for anything but the canonical encoding (a character outside the
 * alphabet, whitespace, a length that is not a multiple of 4, '=' anywhere
 * but the last one or two places, nonzero bits after the last byte),
 * EOVERFLOW when len is too large, ENOMEM.
 * b64url_decode takes the URL-safe alphabet without '=' padding.
 */
int	b64_decode(const char *in, size_t len, uint8_t **out, size_t *outlen);
int	b64url_decode(const char *in, size_t len, uint8_t **out,
	    size_t *outlen);

/*
 * The value of one character of the standard alphabet, or -1.  Inline, so
 * that a user without OpenSSL (guestd's glink_b64_exact) shares it.
 */
static inline int
b64_digit(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* The value of one lowercase hex digit (0-9, a-f), or -1: the broker
 * preamble's secret and an approval's argument digest take only these. */
static inline int
hex_lower_digit(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

#endif
