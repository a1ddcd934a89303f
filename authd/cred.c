/*
 * Workspace credentials; see cred.h.  Runs in authd (generation, hashing)
 * and authctl (reading token files).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "b64.h"
#include "cred.h"

/* The base64url alphabet, for the format check (common/b64 encodes). */
static const char b64url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int
cred_generate(char tok[CRED_LEN + 1])
{
	uint8_t raw[CRED_RANDOM_BYTES];
	size_t got = 0, enclen;
	char *enc;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n == -1) {
			if (errno == EINTR)
				continue;
			explicit_bzero(raw, sizeof(raw));
			return -1;
		}
		got += (size_t)n;
	}
	enc = b64url_encode(raw, sizeof(raw), &enclen);
	explicit_bzero(raw, sizeof(raw));
	if (enc == NULL)
		return -1;
	if (enclen != CRED_B64_LEN) {
		explicit_bzero(enc, enclen);
		free(enc);
		errno = EINVAL;
		return -1;
	}
	memcpy(tok, CRED_PREFIX, CRED_PREFIX_LEN);
	memcpy(tok + CRED_PREFIX_LEN, enc, CRED_B64_LEN + 1);
	explicit_bzero(enc, enclen);
	free(enc);
	return 0;
}

int
cred_wellformed(const char *s, size_t len)
{
	if (len != CRED_LEN || memcmp(s, CRED_PREFIX, CRED_PREFIX_LEN) != 0)
		return 0;
	for (size_t i = CRED_PREFIX_LEN; i < len; i++)
		if (memchr(b64url, s[i], sizeof(b64url) - 1) == NULL ||
		    s[i] == '\0')
			return 0;
	/*
	 * 43 characters carry 258 bits: the last one may only use the top
	 * four bits, so exactly one spelling of each credential is valid.
	 */
	if ((strchr(b64url, s[len - 1]) - b64url) & 3)
		return 0;
	return 1;
}

int
cred_hash(const char *s, size_t len, uint8_t out[CRED_HASH_LEN])
{
	/* Fetched once: an implicit fetch per call costs locks on the hot
	 * path of every verification.  The processes are single-threaded. */
	static EVP_MD *sha256;
	unsigned int n = 0;

	if (sha256 == NULL && (sha256 = EVP_MD_fetch(NULL, "SHA256", NULL)) ==
	    NULL)
		return -1;
	if (EVP_Digest(s, len, out, &n, sha256, NULL) != 1 ||
	    n != CRED_HASH_LEN)
		return -1;
	return 0;
}

void
cred_id(const uint8_t hash[CRED_HASH_LEN], char id[CRED_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < CRED_ID_LEN / 2; i++) {
		id[2 * i] = hex[hash[i] >> 4];
		id[2 * i + 1] = hex[hash[i] & 15];
	}
	id[CRED_ID_LEN] = '\0';
}

int
cred_id_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == CRED_ID_LEN;
}

int
cred_hash_equal(const uint8_t a[CRED_HASH_LEN], const uint8_t b[CRED_HASH_LEN])
{
	return CRYPTO_memcmp(a, b, CRED_HASH_LEN) == 0;
}
