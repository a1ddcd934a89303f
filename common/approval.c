/*
 * Signed approval decisions; see approval.h.  Used by vmctl (to sign) and
 * vmmd (to verify).  The canonical statement is a length-prefixed byte
 * string in one fixed order, so two different statements never share an
 * encoding, and the decoder accepts only what the encoder writes.
 *
 * statement: "mcpvm-statement\0" (16) | version u8 |
 *            proposal id, workspace, tool: each u8 length (1..64) + bytes |
 *            argument digest (32) | expires-at i64 BE (> 0) |
 *            decision u8 (1 approve, 2 deny)
 * envelope:  "mcpvm-envelope\0\0" (16) | version u8 |
 *            statement length u16 BE | statement | key id (32) |
 *            Ed25519 signature (64) over the statement bytes
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "approval.h"
#include "b64.h"
#include "errf.h"

static const uint8_t stmt_magic[16] = "mcpvm-statement";
static const uint8_t env_magic[16] = "mcpvm-envelope\0";

const char *
approval_verdict_str(enum approval_verdict v)
{
	switch (v) {
	case APPROVAL_OK:
		return "ok";
	case APPROVAL_UNKNOWN_KEY:
		return "unknown key";
	case APPROVAL_REVOKED_KEY:
		return "revoked key";
	case APPROVAL_BAD_SIGNATURE:
		return "bad signature";
	case APPROVAL_MISMATCH:
		return "statement does not match the proposal";
	case APPROVAL_EXPIRED:
		return "expired";
	case APPROVAL_DENIED:
		return "decision is deny";
	}
	return "invalid verdict";
}

/* A field's characters: printable ASCII without space. */
static int
field_ok(const char *s, size_t len, size_t max)
{
	if (len == 0 || len > max)
		return 0;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return 0;
	return 1;
}

static int
put_field(uint8_t *buf, size_t bufsz, size_t *off, const char *s,
    size_t max)
{
	size_t len = strnlen(s, max + 1);

	if (!field_ok(s, len, max) || *off + 1 + len > bufsz)
		return -1;
	buf[(*off)++] = (uint8_t)len;
	memcpy(buf + *off, s, len);
	*off += len;
	return 0;
}

size_t
approval_statement_encode(const struct approval_statement *st, uint8_t *buf,
    size_t bufsz)
{
	size_t off = 0;
	uint64_t t;

	if (bufsz < sizeof(stmt_magic) + 1)
		return 0;
	memcpy(buf, stmt_magic, sizeof(stmt_magic));
	off = sizeof(stmt_magic);
	buf[off++] = APPROVAL_VERSION;
	if (put_field(buf, bufsz, &off, st->proposal_id, APPROVAL_ID_MAX) ||
	    put_field(buf, bufsz, &off, st->workspace, APPROVAL_WS_MAX) ||
	    put_field(buf, bufsz, &off, st->tool, APPROVAL_TOOL_MAX))
		return 0;
	if (st->expires_at <= 0 || (st->decision != APPROVAL_APPROVE &&
	    st->decision != APPROVAL_DENY) ||
	    off + APPROVAL_DIGEST_LEN + 8 + 1 > bufsz)
		return 0;
	memcpy(buf + off, st->args_digest, APPROVAL_DIGEST_LEN);
	off += APPROVAL_DIGEST_LEN;
	t = (uint64_t)st->expires_at;
	for (int i = 7; i >= 0; i--)
		buf[off++] = (uint8_t)(t >> (i * 8));
	buf[off++] = (uint8_t)st->decision;
	return off;
}

static int
get_field(const uint8_t *buf, size_t len, size_t *off, char *out, size_t max,
    const char *what, char *err, size_t errlen)
{
	size_t n;

	if (*off >= len)
		return errf(err, errlen, "statement: %s: truncated", what);
	n = buf[(*off)++];
	if (n == 0 || n > max)
		return errf(err, errlen, "statement: %s: length %zu not in "
		    "1..%zu", what, n, max);
	if (len - *off < n)
		return errf(err, errlen, "statement: %s: truncated", what);
	if (!field_ok((const char *)buf + *off, n, max))
		return errf(err, errlen, "statement: %s: not printable ASCII",
		    what);
	memcpy(out, buf + *off, n);
	out[n] = '\0';
	*off += n;
	return 0;
}

int
approval_statement_decode(const uint8_t *buf, size_t len,
    struct approval_statement *st, char *err, size_t errlen)
{
	size_t off;
	uint64_t t = 0;

	memset(st, 0, sizeof(*st));
	if (len > APPROVAL_STATEMENT_MAX)
		return errf(err, errlen, "statement: %zu bytes, more than "
		    "%d", len, APPROVAL_STATEMENT_MAX);
	if (len < sizeof(stmt_magic) + 1 ||
	    memcmp(buf, stmt_magic, sizeof(stmt_magic)) != 0)
		return errf(err, errlen, "statement: not an mcpvm statement");
	off = sizeof(stmt_magic);
	if (buf[off] != APPROVAL_VERSION)
		return errf(err, errlen, "statement: version %u, want %d",
		    buf[off], APPROVAL_VERSION);
	off++;
	if (get_field(buf, len, &off, st->proposal_id, APPROVAL_ID_MAX,
	    "proposal id", err, errlen) ||
	    get_field(buf, len, &off, st->workspace, APPROVAL_WS_MAX,
	    "workspace", err, errlen) ||
	    get_field(buf, len, &off, st->tool, APPROVAL_TOOL_MAX, "tool",
	    err, errlen))
		return -1;
	if (len - off != APPROVAL_DIGEST_LEN + 8 + 1)
		return errf(err, errlen, "statement: %zu bytes after the tool, "
		    "want %d", len - off, APPROVAL_DIGEST_LEN + 8 + 1);
	memcpy(st->args_digest, buf + off, APPROVAL_DIGEST_LEN);
	off += APPROVAL_DIGEST_LEN;
	for (int i = 0; i < 8; i++)
		t = (t << 8) | buf[off++];
	if (t == 0 || t > INT64_MAX)
		return errf(err, errlen, "statement: expires-at out of range");
	st->expires_at = (int64_t)t;
	if (buf[off] != APPROVAL_APPROVE && buf[off] != APPROVAL_DENY)
		return errf(err, errlen, "statement: decision %u is neither "
		    "approve (1) nor deny (2)", buf[off]);
	st->decision = buf[off];
	return 0;
}

size_t
approval_envelope_encode(const struct approval_envelope *env, uint8_t *buf,
    size_t bufsz)
{
	size_t off = 0;

	if (env->stmt_len == 0 || env->stmt_len > APPROVAL_STATEMENT_MAX ||
	    bufsz < sizeof(env_magic) + 3 + env->stmt_len +
	    APPROVAL_KEYID_LEN + APPROVAL_SIG_LEN)
		return 0;
	memcpy(buf, env_magic, sizeof(env_magic));
	off = sizeof(env_magic);
	buf[off++] = APPROVAL_VERSION;
	buf[off++] = (uint8_t)(env->stmt_len >> 8);
	buf[off++] = (uint8_t)env->stmt_len;
	memcpy(buf + off, env->stmt, env->stmt_len);
	off += env->stmt_len;
	memcpy(buf + off, env->key_id, APPROVAL_KEYID_LEN);
	off += APPROVAL_KEYID_LEN;
	memcpy(buf + off, env->sig, APPROVAL_SIG_LEN);
	off += APPROVAL_SIG_LEN;
	return off;
}

int
approval_envelope_decode(const uint8_t *buf, size_t len,
    struct approval_envelope *env, char *err, size_t errlen)
{
	size_t off, slen;

	memset(env, 0, sizeof(*env));
	if (len > APPROVAL_ENVELOPE_MAX)
		return errf(err, errlen, "envelope: %zu bytes, more than %d",
		    len, APPROVAL_ENVELOPE_MAX);
	if (len < sizeof(env_magic) + 3 ||
	    memcmp(buf, env_magic, sizeof(env_magic)) != 0)
		return errf(err, errlen, "envelope: not an mcpvm approval");
	off = sizeof(env_magic);
	if (buf[off] != APPROVAL_VERSION)
		return errf(err, errlen, "envelope: version %u, want %d",
		    buf[off], APPROVAL_VERSION);
	off++;
	slen = (size_t)buf[off] << 8 | buf[off + 1];
	off += 2;
	if (slen > APPROVAL_STATEMENT_MAX)
		return errf(err, errlen, "envelope: statement of %zu bytes, "
		    "more than %d", slen, APPROVAL_STATEMENT_MAX);
	if (len - off != slen + APPROVAL_KEYID_LEN + APPROVAL_SIG_LEN)
		return errf(err, errlen, "envelope: %zu bytes, want %zu",
		    len, off + slen + APPROVAL_KEYID_LEN + APPROVAL_SIG_LEN);
	if (approval_statement_decode(buf + off, slen, &env->st, err,
	    errlen) == -1)
		return -1;
	memcpy(env->stmt, buf + off, slen);
	env->stmt_len = slen;
	off += slen;
	memcpy(env->key_id, buf + off, APPROVAL_KEYID_LEN);
	off += APPROVAL_KEYID_LEN;
	memcpy(env->sig, buf + off, APPROVAL_SIG_LEN);
	return 0;
}

char *
approval_envelope_to_b64(const struct approval_envelope *env)
{
	uint8_t buf[APPROVAL_ENVELOPE_MAX];
	size_t len, outlen;

	if ((len = approval_envelope_encode(env, buf, sizeof(buf))) == 0) {
		errno = EINVAL;
		return NULL;
	}
	return b64_encode(buf, len, &outlen);
}

int
approval_envelope_from_b64(const char *s, size_t len,
    struct approval_envelope *env, char *err, size_t errlen)
{
	uint8_t *raw = NULL;
	size_t rawlen;
	int rc;

	memset(env, 0, sizeof(*env));
	if (len > b64_encoded_len(APPROVAL_ENVELOPE_MAX))
		return errf(err, errlen, "envelope: %zu characters of base64, "
		    "more than %zu", len, b64_encoded_len(APPROVAL_ENVELOPE_MAX));
	if (b64_decode(s, len, &raw, &rawlen) == -1)
		return errf(err, errlen, "envelope: not canonical base64");
	rc = approval_envelope_decode(raw, rawlen, env, err, errlen);
	free(raw);
	return rc;
}

int
approval_key_id(EVP_PKEY *pkey, uint8_t out[APPROVAL_KEYID_LEN])
{
	uint8_t raw[32];
	size_t rawlen = sizeof(raw);
	unsigned int mdlen = 0;

	if (pkey == NULL || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_ED25519 ||
	    EVP_PKEY_get_raw_public_key(pkey, raw, &rawlen) != 1 ||
	    rawlen != sizeof(raw))
		return -1;
	if (EVP_Digest(raw, rawlen, out, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen != APPROVAL_KEYID_LEN)
		return -1;
	return 0;
}

void
approval_hex(const uint8_t in[32], char out[APPROVAL_HEX_LEN + 1])
{
	static const char hx[] = "0123456789abcdef";

	for (size_t i = 0; i < 32; i++) {
		out[2 * i] = hx[in[i] >> 4];
		out[2 * i + 1] = hx[in[i] & 0xf];
	}
	out[APPROVAL_HEX_LEN] = '\0';
}

int
approval_unhex(const char *s, uint8_t out[32])
{
	if (strnlen(s, APPROVAL_HEX_LEN + 1) != APPROVAL_HEX_LEN)
		return -1;
	for (size_t i = 0; i < 32; i++) {
		int hi = hex_lower_digit((unsigned char)s[2 * i]);
		int lo = hex_lower_digit((unsigned char)s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

EVP_PKEY *
approval_pubkey_from_pem(const char *pem, size_t len, char *err,
    size_t errlen)
{
	EVP_PKEY *pkey = NULL;
	BIO *bio;

	if (len > APPROVERS_KEY_FILE_MAX) {
		errf(err, errlen, "%zu bytes, more than %d", len,
		    APPROVERS_KEY_FILE_MAX);
		return NULL;
	}
	if ((bio = BIO_new_mem_buf(pem, (int)len)) == NULL) {
		errf(err, errlen, "out of memory");
		return NULL;
	}
	pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
	BIO_free(bio);
	if (pkey == NULL) {
		errf(err, errlen, "not a PEM public key");
		return NULL;
	}
	if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(pkey);
		errf(err, errlen, "not an Ed25519 key");
		return NULL;
	}
	return pkey;
}

int
approval_sign(const struct approval_statement *st, EVP_PKEY *priv,
    struct approval_envelope *env, char *err, size_t errlen)
{
	EVP_MD_CTX *ctx = NULL;
	size_t siglen = APPROVAL_SIG_LEN;
	int rc = -1;

	memset(env, 0, sizeof(*env));
	if ((env->stmt_len = approval_statement_encode(st, env->stmt,
	    sizeof(env->stmt))) == 0)
		return errf(err, errlen, "statement: a field is out of its "
		    "bounds");
	env->st = *st;
	if (approval_key_id(priv, env->key_id) == -1)
		return errf(err, errlen, "not an Ed25519 key");
	if ((ctx = EVP_MD_CTX_new()) == NULL) {
		errf(err, errlen, "out of memory");
		goto out;
	}
	if (EVP_DigestSignInit(ctx, NULL, NULL, NULL, priv) != 1 ||
	    EVP_DigestSign(ctx, env->sig, &siglen, env->stmt,
	    env->stmt_len) != 1 || siglen != APPROVAL_SIG_LEN) {
		errf(err, errlen, "signing failed (not a private key?)");
		goto out;
	}
	rc = 0;
 out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

static int
sig_ok(const struct approval_envelope *env, EVP_PKEY *pub)
{
	EVP_MD_CTX *ctx;
	int ok;

	if ((ctx = EVP_MD_CTX_new()) == NULL)
		return 0;
	ok = EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pub) == 1 &&
	    EVP_DigestVerify(ctx, env->sig, APPROVAL_SIG_LEN, env->stmt,
	    env->stmt_len) == 1;
	EVP_MD_CTX_free(ctx);
	return ok;
}

enum approval_verdict
approval_verify(const struct approval_envelope *env,
    const struct approval_keyset *ks, const struct approval_statement *want,
    time_t now)
{
	struct approval_statement st;
	const struct approval_key *key = NULL;
	char err[8];

	for (size_t i = 0; i < ks->nrevoked; i++)
		if (memcmp(ks->revoked[i], env->key_id,
		    APPROVAL_KEYID_LEN) == 0)
			return APPROVAL_REVOKED_KEY;
	for (size_t i = 0; i < ks->nkeys && key == NULL; i++)
		if (memcmp(ks->keys[i].key_id, env->key_id,
		    APPROVAL_KEYID_LEN) == 0)
			key = &ks->keys[i];
	if (key == NULL)
		return APPROVAL_UNKNOWN_KEY;
	if (env->stmt_len == 0 || env->stmt_len > sizeof(env->stmt) ||
	    !sig_ok(env, key->pkey))
		return APPROVAL_BAD_SIGNATURE;
	/*
	 * Judge what was signed, decoded afresh from the signed bytes, never
	 * the struct beside them, which a caller may have filled otherwise.
	 */
	if (approval_statement_decode(env->stmt, env->stmt_len, &st, err,
	    sizeof(err)) == -1)
		return APPROVAL_BAD_SIGNATURE;
	if (strcmp(st.proposal_id, want->proposal_id) != 0 ||
	    strcmp(st.workspace, want->workspace) != 0 ||
	    strcmp(st.tool, want->tool) != 0 ||
	    memcmp(st.args_digest, want->args_digest,
	    APPROVAL_DIGEST_LEN) != 0 || st.expires_at != want->expires_at)
		return APPROVAL_MISMATCH;
	if ((int64_t)now >= st.expires_at)
		return APPROVAL_EXPIRED;
	if (st.decision != APPROVAL_APPROVE)
		return APPROVAL_DENIED;
	return APPROVAL_OK;
}

size_t
approval_count(const struct approval_envelope *envs, size_t n,
    const struct approval_keyset *ks, const struct approval_statement *want,
    time_t now)
{
	size_t count = 0;

	for (size_t i = 0; i < n; i++) {
		int seen = 0;

		if (approval_verify(&envs[i], ks, want, now) != APPROVAL_OK)
			continue;
		/* A key counts once, however many valid envelopes it made. */
		for (size_t j = 0; j < i && !seen; j++)
			seen = memcmp(envs[j].key_id, envs[i].key_id,
			    APPROVAL_KEYID_LEN) == 0 &&
			    approval_verify(&envs[j], ks, want, now) ==
			    APPROVAL_OK;
		if (!seen)
			count++;
	}
	return count;
}

void
approval_keyset_free(struct approval_keyset *ks)
{
	for (size_t i = 0; i < ks->nkeys; i++)
		EVP_PKEY_free(ks->keys[i].pkey);
	free(ks->keys);
	free(ks->revoked);
	memset(ks, 0, sizeof(*ks));
}
