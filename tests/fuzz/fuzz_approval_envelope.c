/*
 * libFuzzer target: the approval envelope decoder (common/approval.c),
 * which reads what vmctl sends over a socket and what comes back from the
 * database.  Invariants: whatever decodes re-encodes to exactly the same
 * bytes (there is one encoding of each envelope), the statement inside
 * re-encodes to its own bytes, and verifying it against a key set that
 * holds one key neither crashes nor says yes to bytes nobody signed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "approval.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static struct approval_keyset ks;

static void
keyset_once(void)
{
	static struct approval_key key;
	uint8_t seed[32] = { 1 };

	if (ks.nkeys != 0)
		return;
	/* A fixed key: the fuzzer cannot make its signature by chance. */
	key.pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed,
	    sizeof(seed));
	if (key.pkey == NULL || approval_key_id(key.pkey, key.key_id) == -1)
		abort();
	ks.keys = &key;
	ks.nkeys = 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct approval_envelope env, env2;
	uint8_t buf[APPROVAL_ENVELOPE_MAX], sbuf[APPROVAL_STATEMENT_MAX];
	char err[256], *b64;
	size_t n;

	keyset_once();
	if (approval_envelope_decode(data, size, &env, err, sizeof(err)) ==
	    -1)
		return 0;
	n = approval_envelope_encode(&env, buf, sizeof(buf));
	if (n != size || memcmp(buf, data, size) != 0)
		abort();
	n = approval_statement_encode(&env.st, sbuf, sizeof(sbuf));
	if (n != env.stmt_len || memcmp(sbuf, env.stmt, n) != 0)
		abort();
	if (approval_verify(&env, &ks, &env.st, 0) == APPROVAL_OK)
		abort();
	if ((b64 = approval_envelope_to_b64(&env)) == NULL)
		abort();
	if (approval_envelope_from_b64(b64, strlen(b64), &env2, err,
	    sizeof(err)) == -1 || memcmp(env2.stmt, env.stmt, n) != 0)
		abort();
	free(b64);
	return 0;
}
