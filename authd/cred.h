/*
 * Workspace credentials: generation, well-formedness, hashing and the public
 * credential id.  Used by authd (issue, verify) and authctl (token files).
 *
 * A credential is "mcpvm_" followed by the base64url (no padding) of 32
 * bytes from getrandom(2): 49 characters.  The prefix lets log redaction
 * (common/log.c) and secret scanners recognise it.  Only SHA-256 of the
 * whole string is ever stored.
 */
#ifndef MCPVM_AUTHD_CRED_H
#define MCPVM_AUTHD_CRED_H

#include <stddef.h>
#include <stdint.h>

#define CRED_PREFIX		"mcpvm_"
#define CRED_PREFIX_LEN		6
#define CRED_RANDOM_BYTES	32
#define CRED_B64_LEN		43	/* 32 bytes, base64url, no padding */
#define CRED_LEN		(CRED_PREFIX_LEN + CRED_B64_LEN)
#define CRED_HASH_LEN		32	/* SHA-256 */
#define CRED_ID_LEN		16	/* hex of the first 8 hash bytes */

/* Fills tok (CRED_LEN + 1 bytes) with a new credential.  0 or -1/errno. */
int	cred_generate(char tok[CRED_LEN + 1]);

/* 1 when s (len bytes, not necessarily NUL-terminated) has the format. */
int	cred_wellformed(const char *s, size_t len);

/* SHA-256 of the len bytes at s.  0, or -1 if libcrypto failed. */
int	cred_hash(const char *s, size_t len, uint8_t out[CRED_HASH_LEN]);

/*
 * The public id of a credential: lowercase hex of the first 8 bytes of its
 * hash.  Safe to show and log; it reveals nothing usable about the secret.
 */
void	cred_id(const uint8_t hash[CRED_HASH_LEN], char id[CRED_ID_LEN + 1]);

/* 1 when s looks like a credential id (16 lowercase hex digits). */
int	cred_id_valid(const char *s);

/* Constant-time equality of two hashes (CRYPTO_memcmp). */
int	cred_hash_equal(const uint8_t a[CRED_HASH_LEN],
	    const uint8_t b[CRED_HASH_LEN]);

#endif
