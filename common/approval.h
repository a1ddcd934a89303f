/*
 * Signed approval decisions (issue #28): the canonical statement an
 * approver signs with an Ed25519 key, the envelope that carries it, and
 * the verification vmmd runs before a gated action.  Envelopes come from
 * vmctl over a socket and back from the database: they are untrusted
 * bytes, decoded strictly and within fixed bounds.
 */
#ifndef MCPVM_APPROVAL_H
#define MCPVM_APPROVAL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/evp.h>

#define APPROVAL_VERSION	1
#define APPROVAL_ID_MAX		64	/* proposal id */
#define APPROVAL_WS_MAX		64	/* workspace name */
#define APPROVAL_TOOL_MAX	64
#define APPROVAL_DIGEST_LEN	32	/* SHA-256 of the canonical arguments */
#define APPROVAL_KEYID_LEN	32	/* SHA-256 of the raw public key */
#define APPROVAL_SIG_LEN	64	/* Ed25519 */
#define APPROVAL_HEX_LEN	64	/* a digest or key id in hex */
/* Largest canonical statement and envelope (see approval.c). */
#define APPROVAL_STATEMENT_MAX	(16 + 1 + 3 * (1 + 64) + 32 + 8 + 1)
#define APPROVAL_ENVELOPE_MAX	(16 + 1 + 2 + APPROVAL_STATEMENT_MAX + \
	APPROVAL_KEYID_LEN + APPROVAL_SIG_LEN)

#define APPROVERS_MAX_KEYS	64	/* key files in the approvers dir */
#define APPROVERS_KEY_FILE_MAX	4096	/* bytes of one NAME.pub */
#define APPROVERS_NAME_MAX	64	/* NAME of NAME.pub */
#define APPROVERS_REVOKED_FILE	"revoked"	/* fingerprints, one a line */
#define APPROVERS_REVOKED_MAX	1024	/* lines of it */

enum approval_decision {
	APPROVAL_APPROVE = 1,
	APPROVAL_DENY = 2,
};

/* What an approver signs: one decision about one exact proposal. */
struct approval_statement {
	char		proposal_id[APPROVAL_ID_MAX + 1];
	char		workspace[APPROVAL_WS_MAX + 1];
	char		tool[APPROVAL_TOOL_MAX + 1];
	uint8_t		args_digest[APPROVAL_DIGEST_LEN];
	int64_t		expires_at;	/* Unix seconds */
	int		decision;	/* enum approval_decision */
};

/* A statement, the canonical bytes it was decoded from, and who signed. */
struct approval_envelope {
	struct approval_statement st;
	uint8_t		stmt[APPROVAL_STATEMENT_MAX];
	size_t		stmt_len;
	uint8_t		key_id[APPROVAL_KEYID_LEN];
	uint8_t		sig[APPROVAL_SIG_LEN];
};

struct approval_key {
	char		name[APPROVERS_NAME_MAX + 1];
	uint8_t		key_id[APPROVAL_KEYID_LEN];
	EVP_PKEY	*pkey;
};

/* The enrolled keys, and the fingerprints of revoked ones. */
struct approval_keyset {
	struct approval_key	*keys;
	size_t			 nkeys;
	uint8_t			(*revoked)[APPROVAL_KEYID_LEN];
	size_t			 nrevoked;
};

enum approval_verdict {
	APPROVAL_OK = 0,
	APPROVAL_UNKNOWN_KEY,
	APPROVAL_REVOKED_KEY,
	APPROVAL_BAD_SIGNATURE,
	APPROVAL_MISMATCH,	/* signed over another proposal or arguments */
	APPROVAL_EXPIRED,
	APPROVAL_DENIED,	/* a valid signature over "deny" */
};

/* "ok", "unknown key", ...: for logs and error messages. */
const char	*approval_verdict_str(enum approval_verdict);

/*
 * The canonical bytes of a statement, into buf (APPROVAL_STATEMENT_MAX).
 * Returns the length, or 0 when a field is out of its bounds.
 */
size_t	approval_statement_encode(const struct approval_statement *,
	    uint8_t *buf, size_t bufsz);
/* Strict decode of exactly [buf, buf + len): 0, or -1 with a reason. */
int	approval_statement_decode(const uint8_t *buf, size_t len,
	    struct approval_statement *, char *err, size_t errlen);

/* An envelope to bytes (APPROVAL_ENVELOPE_MAX): the length, or 0. */
size_t	approval_envelope_encode(const struct approval_envelope *,
	    uint8_t *buf, size_t bufsz);
/*
 * Strict, bounded decode of untrusted bytes: 0, or -1 with a reason in err.
 * The signature is not checked here: approval_verify does that.
 */
int	approval_envelope_decode(const uint8_t *buf, size_t len,
	    struct approval_envelope *, char *err, size_t errlen);

/* The same, as base64 text (for JSON and the database). */
char	*approval_envelope_to_b64(const struct approval_envelope *);
int	approval_envelope_from_b64(const char *s, size_t len,
	    struct approval_envelope *, char *err, size_t errlen);

/* SHA-256 of the raw Ed25519 public key of pkey: 0, or -1. */
int	approval_key_id(EVP_PKEY *pkey, uint8_t out[APPROVAL_KEYID_LEN]);
/* Lowercase hex of 32 bytes. */
void	approval_hex(const uint8_t in[32], char out[APPROVAL_HEX_LEN + 1]);
/* 64 hex digits to 32 bytes: 0, or -1. */
int	approval_unhex(const char *s, uint8_t out[32]);
/* An Ed25519 public key from PEM text: the key, or NULL with a reason. */
EVP_PKEY *approval_pubkey_from_pem(const char *pem, size_t len, char *err,
	    size_t errlen);

/* Sign st with the private key priv into env: 0, or -1 with a reason. */
int	approval_sign(const struct approval_statement *st, EVP_PKEY *priv,
	    struct approval_envelope *env, char *err, size_t errlen);

/*
 * Whether env approves exactly the proposal `want` (its decision field is
 * ignored) at time now, by a key of ks that is not revoked.
 */
enum approval_verdict approval_verify(const struct approval_envelope *env,
	    const struct approval_keyset *ks,
	    const struct approval_statement *want, time_t now);

/*
 * How many distinct enrolled keys approve `want` validly among envs[0..n):
 * the same key twice counts once.
 */
size_t	approval_count(const struct approval_envelope *envs, size_t n,
	    const struct approval_keyset *ks,
	    const struct approval_statement *want, time_t now);

void	approval_keyset_free(struct approval_keyset *);

/*
 * Load the approvers directory: every NAME.pub, and the revoked list.
 * The directory and each file must be owned by root and writable by no
 * one else; symlinks are refused.  0, or -1 with a reason that names the
 * file.  A missing directory is an empty set, not an error.
 */
int	approvers_load(const char *dir, struct approval_keyset *ks,
	    char *err, size_t errlen);
/* Whether NAME is a valid approver name ([A-Za-z0-9_.-], not dot-first). */
int	approvers_name_ok(const char *name);

#endif
