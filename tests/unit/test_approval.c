/*
 * Signed approvals (common/approval.c, approvers.c): the canonical
 * statement, the envelope's strict decoder, Ed25519 sign and verify, every
 * refusal, counting distinct approvers, and the approvers directory's
 * ownership checks on real files.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <json-c/json.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "approval.h"
#include "receipts.h"
#include "../check_run.h"

#define NOW	1800000000LL

static EVP_PKEY *
newkey(void)
{
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");

	ck_assert_ptr_nonnull(k);
	return k;
}

/* The receipts' canonical digest of a JSON argument object, as bytes. */
static void
digest_of(const char *json, uint8_t out[APPROVAL_DIGEST_LEN])
{
	struct json_object *args = json_tokener_parse(json);
	char hex[RECEIPT_DIGEST_HEX + 1];

	ck_assert_ptr_nonnull(args);
	ck_assert_int_eq(receipt_digest(args, hex), 0);
	ck_assert_int_eq(approval_unhex(hex, out), 0);
	json_object_put(args);
}

static void
proposal(struct approval_statement *st, int decision)
{
	memset(st, 0, sizeof(*st));
	strcpy(st->proposal_id, "p-0123abcd");
	strcpy(st->workspace, "demo-alice");
	strcpy(st->tool, "vm_exec");
	digest_of("{\"vm_id\":\"v1\",\"command\":\"make test\"}",
	    st->args_digest);
	st->expires_at = NOW + 3600;
	st->decision = decision;
}

/* A key set holding the public halves of keys[0..n). */
static void
keyset_of(struct approval_keyset *ks, EVP_PKEY **keys, size_t n)
{
	memset(ks, 0, sizeof(*ks));
	ks->keys = calloc(n + 1, sizeof(*ks->keys));
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(EVP_PKEY_up_ref(keys[i]), 1);
		ks->keys[i].pkey = keys[i];
		ck_assert_int_eq(approval_key_id(keys[i], ks->keys[i].key_id),
		    0);
		snprintf(ks->keys[i].name, sizeof(ks->keys[i].name), "k%zu",
		    i);
	}
	ks->nkeys = n;
}

static void
sign(EVP_PKEY *k, const struct approval_statement *st,
    struct approval_envelope *env)
{
	char err[256];

	ck_assert_msg(approval_sign(st, k, env, err, sizeof(err)) == 0, "%s",
	    err);
}

START_TEST(canonical_bytes)
{
	struct approval_statement st, back;
	uint8_t buf[APPROVAL_STATEMENT_MAX], want[APPROVAL_STATEMENT_MAX];
	size_t len, off = 0;
	char err[256];

	proposal(&st, APPROVAL_APPROVE);
	st.expires_at = 0x0102030405060708LL;
	len = approval_statement_encode(&st, buf, sizeof(buf));
	/* The exact layout, written out by hand. */
	memcpy(want, "mcpvm-statement", 16);
	off = 16;
	want[off++] = 1;
	want[off++] = 10;
	memcpy(want + off, "p-0123abcd", 10);
	off += 10;
	want[off++] = 10;
	memcpy(want + off, "demo-alice", 10);
	off += 10;
	want[off++] = 7;
	memcpy(want + off, "vm_exec", 7);
	off += 7;
	memcpy(want + off, st.args_digest, 32);
	off += 32;
	for (int i = 1; i <= 8; i++)
		want[off++] = (uint8_t)i;
	want[off++] = 1;
	ck_assert_uint_eq(len, off);
	ck_assert_mem_eq(buf, want, len);

	ck_assert_int_eq(approval_statement_decode(buf, len, &back, err,
	    sizeof(err)), 0);
	ck_assert_str_eq(back.proposal_id, st.proposal_id);
	ck_assert_str_eq(back.workspace, st.workspace);
	ck_assert_str_eq(back.tool, st.tool);
	ck_assert_mem_eq(back.args_digest, st.args_digest, 32);
	ck_assert_int_eq(back.expires_at, st.expires_at);
	ck_assert_int_eq(back.decision, APPROVAL_APPROVE);

	/* Every proper prefix and one byte more are refused. */
	for (size_t i = 0; i < len; i++)
		ck_assert_int_eq(approval_statement_decode(buf, i, &back, err,
		    sizeof(err)), -1);
	buf[len] = 0;
	ck_assert_int_eq(approval_statement_decode(buf, len + 1, &back, err,
	    sizeof(err)), -1);
}
END_TEST

START_TEST(no_two_statements_share_bytes)
{
	struct approval_statement a, b;
	uint8_t ba[APPROVAL_STATEMENT_MAX], bb[APPROVAL_STATEMENT_MAX];
	size_t la, lb;

	/* Moving a character across a field boundary changes the bytes. */
	proposal(&a, APPROVAL_APPROVE);
	proposal(&b, APPROVAL_APPROVE);
	strcpy(a.workspace, "ab");
	strcpy(a.tool, "c");
	strcpy(b.workspace, "a");
	strcpy(b.tool, "bc");
	la = approval_statement_encode(&a, ba, sizeof(ba));
	lb = approval_statement_encode(&b, bb, sizeof(bb));
	ck_assert_uint_ne(la, 0);
	ck_assert_uint_eq(la, lb);
	ck_assert_int_ne(memcmp(ba, bb, la), 0);
	/* Approve and deny differ. */
	b = a;
	b.decision = APPROVAL_DENY;
	lb = approval_statement_encode(&b, bb, sizeof(bb));
	ck_assert_int_ne(memcmp(ba, bb, la), 0);
}
END_TEST

START_TEST(encoder_refuses_out_of_bounds)
{
	struct approval_statement st;
	uint8_t buf[APPROVAL_STATEMENT_MAX];

	proposal(&st, APPROVAL_APPROVE);
	st.workspace[0] = '\0';
	ck_assert_uint_eq(approval_statement_encode(&st, buf, sizeof(buf)), 0);
	proposal(&st, APPROVAL_APPROVE);
	strcpy(st.tool, "vm exec");	/* a space */
	ck_assert_uint_eq(approval_statement_encode(&st, buf, sizeof(buf)), 0);
	proposal(&st, 3);
	ck_assert_uint_eq(approval_statement_encode(&st, buf, sizeof(buf)), 0);
	proposal(&st, APPROVAL_APPROVE);
	st.expires_at = 0;
	ck_assert_uint_eq(approval_statement_encode(&st, buf, sizeof(buf)), 0);
	proposal(&st, APPROVAL_APPROVE);
	memset(st.proposal_id, 'x', APPROVAL_ID_MAX);
	st.proposal_id[APPROVAL_ID_MAX] = '\0';
	ck_assert_uint_ne(approval_statement_encode(&st, buf, sizeof(buf)), 0);
	ck_assert_uint_eq(approval_statement_encode(&st, buf, 40), 0);
}
END_TEST

START_TEST(decoder_refusals)
{
	struct approval_statement st, back;
	uint8_t buf[APPROVAL_STATEMENT_MAX], bad[APPROVAL_STATEMENT_MAX];
	size_t len;
	char err[256];

	proposal(&st, APPROVAL_DENY);
	len = approval_statement_encode(&st, buf, sizeof(buf));
	ck_assert_uint_ne(len, 0);
#define REFUSED(i, v, what) do {					\
	memcpy(bad, buf, len);						\
	bad[(i)] = (v);							\
	ck_assert_int_eq(approval_statement_decode(bad, len, &back, err, \
	    sizeof(err)), -1);						\
	ck_assert_msg(strstr(err, what) != NULL, "%s", err);		\
} while (0)
	REFUSED(0, 'M', "not an mcpvm statement");
	REFUSED(16, 2, "version 2");
	REFUSED(17, 0, "proposal id: length 0");
	REFUSED(17, 65, "proposal id: length 65");
	REFUSED(18, ' ', "not printable ASCII");
	REFUSED(18, 0x80, "not printable ASCII");
	REFUSED(len - 1, 3, "decision 3");
	REFUSED(len - 1, 0, "decision 0");
	/* A longer id swallows the next length: the tail no longer fits. */
	REFUSED(17, 11, "");
#undef REFUSED
	/* expires-at zero and beyond INT64_MAX. */
	memcpy(bad, buf, len);
	memset(bad + len - 9, 0, 8);
	ck_assert_int_eq(approval_statement_decode(bad, len, &back, err,
	    sizeof(err)), -1);
	bad[len - 9] = 0x80;
	ck_assert_int_eq(approval_statement_decode(bad, len, &back, err,
	    sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "expires-at"));
}
END_TEST

START_TEST(envelope_round_trip)
{
	EVP_PKEY *k = newkey();
	struct approval_statement st;
	struct approval_envelope env, back;
	struct approval_keyset ks;
	uint8_t buf[APPROVAL_ENVELOPE_MAX + 1];
	size_t len;
	char err[256], *b64;

	proposal(&st, APPROVAL_APPROVE);
	sign(k, &st, &env);
	keyset_of(&ks, &k, 1);
	ck_assert_int_eq(approval_verify(&env, &ks, &st, NOW), APPROVAL_OK);

	len = approval_envelope_encode(&env, buf, sizeof(buf));
	ck_assert_uint_eq(len, 16 + 3 + env.stmt_len + 32 + 64);
	ck_assert_int_eq(approval_envelope_decode(buf, len, &back, err,
	    sizeof(err)), 0);
	ck_assert_mem_eq(back.stmt, env.stmt, env.stmt_len);
	ck_assert_mem_eq(back.sig, env.sig, 64);
	ck_assert_mem_eq(back.key_id, ks.keys[0].key_id, 32);
	ck_assert_str_eq(back.st.workspace, "demo-alice");
	ck_assert_int_eq(approval_verify(&back, &ks, &st, NOW), APPROVAL_OK);
	for (size_t i = 0; i < len; i++)
		ck_assert_int_eq(approval_envelope_decode(buf, i, &back, err,
		    sizeof(err)), -1);
	buf[len] = 0;
	ck_assert_int_eq(approval_envelope_decode(buf, len + 1, &back, err,
	    sizeof(err)), -1);
	/* The statement length must be exact. */
	buf[18]++;
	ck_assert_int_eq(approval_envelope_decode(buf, len, &back, err,
	    sizeof(err)), -1);
	buf[18]--;

	b64 = approval_envelope_to_b64(&env);
	ck_assert_ptr_nonnull(b64);
	ck_assert_int_eq(approval_envelope_from_b64(b64, strlen(b64), &back,
	    err, sizeof(err)), 0);
	ck_assert_int_eq(approval_verify(&back, &ks, &st, NOW), APPROVAL_OK);
	ck_assert_int_eq(approval_envelope_from_b64("AAAA", 4, &back, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(approval_envelope_from_b64("!!", 2, &back, err,
	    sizeof(err)), -1);
	free(b64);
	approval_keyset_free(&ks);
	EVP_PKEY_free(k);
}
END_TEST

START_TEST(other_arguments_refused)
{
	EVP_PKEY *k = newkey();
	struct approval_statement st, other;
	struct approval_envelope env;
	struct approval_keyset ks;

	proposal(&st, APPROVAL_APPROVE);
	sign(k, &st, &env);
	keyset_of(&ks, &k, 1);
	/* The same proposal id, other arguments (key order is irrelevant). */
	other = st;
	digest_of("{\"command\":\"make test\",\"vm_id\":\"v1\"}",
	    other.args_digest);
	ck_assert_int_eq(approval_verify(&env, &ks, &other, NOW), APPROVAL_OK);
	digest_of("{\"vm_id\":\"v1\",\"command\":\"rm -rf /workspace\"}",
	    other.args_digest);
	ck_assert_int_eq(approval_verify(&env, &ks, &other, NOW),
	    APPROVAL_MISMATCH);
	/* Each other field of the proposal too. */
	other = st;
	strcpy(other.proposal_id, "p-0123abce");
	ck_assert_int_eq(approval_verify(&env, &ks, &other, NOW),
	    APPROVAL_MISMATCH);
	other = st;
	strcpy(other.workspace, "demo-bob");
	ck_assert_int_eq(approval_verify(&env, &ks, &other, NOW),
	    APPROVAL_MISMATCH);
	other = st;
	strcpy(other.tool, "vm_destroy");
	ck_assert_int_eq(approval_verify(&env, &ks, &other, NOW),
	    APPROVAL_MISMATCH);
	other = st;
	other.expires_at++;
	ck_assert_int_eq(approval_verify(&env, &ks, &other, NOW),
	    APPROVAL_MISMATCH);
	approval_keyset_free(&ks);
	EVP_PKEY_free(k);
}
END_TEST

START_TEST(expired_refused)
{
	EVP_PKEY *k = newkey();
	struct approval_statement st;
	struct approval_envelope env;
	struct approval_keyset ks;

	proposal(&st, APPROVAL_APPROVE);
	sign(k, &st, &env);
	keyset_of(&ks, &k, 1);
	ck_assert_int_eq(approval_verify(&env, &ks, &st, st.expires_at - 1),
	    APPROVAL_OK);
	ck_assert_int_eq(approval_verify(&env, &ks, &st, st.expires_at),
	    APPROVAL_EXPIRED);
	ck_assert_str_eq(approval_verdict_str(APPROVAL_EXPIRED), "expired");
	approval_keyset_free(&ks);
	EVP_PKEY_free(k);
}
END_TEST

START_TEST(unknown_key_refused)
{
	EVP_PKEY *k = newkey(), *enrolled = newkey();
	struct approval_statement st;
	struct approval_envelope env;
	struct approval_keyset ks;

	proposal(&st, APPROVAL_APPROVE);
	sign(k, &st, &env);
	keyset_of(&ks, &enrolled, 1);
	ck_assert_int_eq(approval_verify(&env, &ks, &st, NOW),
	    APPROVAL_UNKNOWN_KEY);
	/* Claiming the enrolled key's id does not make the signature its. */
	memcpy(env.key_id, ks.keys[0].key_id, 32);
	ck_assert_int_eq(approval_verify(&env, &ks, &st, NOW),
	    APPROVAL_BAD_SIGNATURE);
	approval_keyset_free(&ks);
	EVP_PKEY_free(k);
	EVP_PKEY_free(enrolled);
}
END_TEST

START_TEST(tampered_refused)
{
	EVP_PKEY *k = newkey();
	struct approval_statement st;
	struct approval_envelope env, t;
	struct approval_keyset ks;

	proposal(&st, APPROVAL_APPROVE);
	sign(k, &st, &env);
	keyset_of(&ks, &k, 1);
	for (size_t i = 0; i < APPROVAL_SIG_LEN; i++) {
		t = env;
		t.sig[i] ^= 0x01;
		ck_assert_int_eq(approval_verify(&t, &ks, &st, NOW),
		    APPROVAL_BAD_SIGNATURE);
	}
	for (size_t i = 0; i < env.stmt_len; i++) {
		t = env;
		t.stmt[i] ^= 0x01;
		ck_assert_int_eq(approval_verify(&t, &ks, &st, NOW),
		    APPROVAL_BAD_SIGNATURE);
	}
	approval_keyset_free(&ks);
	EVP_PKEY_free(k);
}
END_TEST

START_TEST(deny_is_not_approval)
{
	EVP_PKEY *k = newkey();
	struct approval_statement st;
	struct approval_envelope env;
	struct approval_keyset ks;

	proposal(&st, APPROVAL_DENY);
	sign(k, &st, &env);
	keyset_of(&ks, &k, 1);
	ck_assert_int_eq(approval_verify(&env, &ks, &st, NOW),
	    APPROVAL_DENIED);
	/* The decoded struct beside the bytes is not what is judged. */
	env.st.decision = APPROVAL_APPROVE;
	ck_assert_int_eq(approval_verify(&env, &ks, &st, NOW),
	    APPROVAL_DENIED);
	ck_assert_uint_eq(approval_count(&env, 1, &ks, &st, NOW), 0);
	approval_keyset_free(&ks);
	EVP_PKEY_free(k);
}
END_TEST

START_TEST(count_distinct_keys)
{
	EVP_PKEY *keys[3] = { newkey(), newkey(), newkey() };
	struct approval_statement st, deny;
	struct approval_envelope envs[4];
	struct approval_keyset ks;

	proposal(&st, APPROVAL_APPROVE);
	deny = st;
	deny.decision = APPROVAL_DENY;
	keyset_of(&ks, keys, 2);	/* keys[2] is not enrolled */
	sign(keys[0], &st, &envs[0]);
	sign(keys[0], &st, &envs[1]);
	ck_assert_uint_eq(approval_count(envs, 2, &ks, &st, NOW), 1);
	sign(keys[1], &st, &envs[1]);
	ck_assert_uint_eq(approval_count(envs, 2, &ks, &st, NOW), 2);
	/* Twice key 0, then key 1: still two. */
	sign(keys[0], &st, &envs[1]);
	sign(keys[1], &st, &envs[2]);
	ck_assert_uint_eq(approval_count(envs, 3, &ks, &st, NOW), 2);
	/* A denial and a stranger do not count. */
	sign(keys[1], &deny, &envs[1]);
	sign(keys[2], &st, &envs[2]);
	ck_assert_uint_eq(approval_count(envs, 3, &ks, &st, NOW), 1);
	/* An invalid envelope from key 1 first does not hide its valid one. */
	envs[0] = envs[1];		/* key 1, deny */
	sign(keys[1], &st, &envs[1]);
	sign(keys[0], &st, &envs[2]);
	ck_assert_uint_eq(approval_count(envs, 3, &ks, &st, NOW), 2);
	ck_assert_uint_eq(approval_count(envs, 3, &ks, &st, st.expires_at),
	    0);
	approval_keyset_free(&ks);
	for (size_t i = 0; i < 3; i++)
		EVP_PKEY_free(keys[i]);
}
END_TEST

/* The approvers directory, with real files. */

static char tmpdir[64];
static char adir[128];

static void
dir_setup(void)
{
	strcpy(tmpdir, "/tmp/test_approval.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(adir, sizeof(adir), "%s/approvers", tmpdir);
	ck_assert_int_eq(mkdir(adir, 0755), 0);
	ck_assert_int_eq(chmod(adir, 0755), 0);
}

static void
dir_teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static void
write_pub(const char *name, EVP_PKEY *k, mode_t mode)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", adir, name);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	ck_assert_int_eq(PEM_write_PUBKEY(f, k), 1);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
}

static void
load_fails(const char *what)
{
	struct approval_keyset ks;
	char err[512];

	ck_assert_int_eq(approvers_load(adir, &ks, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, what) != NULL, "'%s' lacks '%s'", err,
	    what);
	ck_assert_ptr_null(ks.keys);
}

static int
need_root(void)
{
	if (geteuid() == 0)
		return 1;
	fprintf(stderr, "approvers directory tests need root: skipped\n");
	return 0;
}

START_TEST(dir_loads_keys)
{
	EVP_PKEY *a = newkey(), *b = newkey();
	struct approval_keyset ks;
	struct approval_statement st;
	struct approval_envelope env;
	char err[512], path[256];
	uint8_t id[32];

	if (!need_root())
		return;
	write_pub("alice.pub", a, 0644);
	write_pub("bob.pub", b, 0600);
	/* Not NAME.pub, or hidden (vmctl's temporary files): ignored. */
	snprintf(path, sizeof(path), "%s/README", adir);
	close(open(path, O_CREAT | O_WRONLY, 0666));
	write_pub(".carol.pub.tmp", a, 0666);
	ck_assert_msg(approvers_load(adir, &ks, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_uint_eq(ks.nkeys, 2);
	ck_assert_uint_eq(ks.nrevoked, 0);
	ck_assert_int_eq(approval_key_id(a, id), 0);
	ck_assert(memcmp(ks.keys[0].key_id, id, 32) == 0 ||
	    memcmp(ks.keys[1].key_id, id, 32) == 0);
	proposal(&st, APPROVAL_APPROVE);
	sign(a, &st, &env);
	ck_assert_int_eq(approval_verify(&env, &ks, &st, NOW), APPROVAL_OK);
	approval_keyset_free(&ks);
	EVP_PKEY_free(a);
	EVP_PKEY_free(b);
}
END_TEST

START_TEST(dir_missing_is_empty)
{
	struct approval_keyset ks;
	char err[512], path[256];

	snprintf(path, sizeof(path), "%s/none", tmpdir);
	ck_assert_int_eq(approvers_load(path, &ks, err, sizeof(err)), 0);
	ck_assert_uint_eq(ks.nkeys, 0);
	approval_keyset_free(&ks);
}
END_TEST

START_TEST(dir_group_writable_refused)
{
	EVP_PKEY *a = newkey();

	if (!need_root())
		return;
	write_pub("alice.pub", a, 0644);
	ck_assert_int_eq(chmod(adir, 0775), 0);
	load_fails("writable by group or others (mode 0775)");
	ck_assert_int_eq(chmod(adir, 0757), 0);
	load_fails("writable by group or others");
	ck_assert_int_eq(chmod(adir, 0755), 0);
	ck_assert_int_eq(chown(adir, 65534, 0), 0);
	load_fails("owned by uid 65534, not root");
	EVP_PKEY_free(a);
}
END_TEST

START_TEST(key_not_root_only_refused)
{
	EVP_PKEY *a = newkey();
	char path[256];

	if (!need_root())
		return;
	write_pub("alice.pub", a, 0664);
	load_fails("alice.pub: writable by group or others (mode 0664)");
	write_pub("alice.pub", a, 0646);
	load_fails("alice.pub: writable by group or others");
	write_pub("alice.pub", a, 0644);
	snprintf(path, sizeof(path), "%s/alice.pub", adir);
	ck_assert_int_eq(chown(path, 65534, 65534), 0);
	load_fails("alice.pub: owned by uid 65534, not root");
	EVP_PKEY_free(a);
}
END_TEST

START_TEST(symlinks_refused)
{
	EVP_PKEY *a = newkey();
	char path[256], target[256];

	if (!need_root())
		return;
	/* A key file that is a link to a root-owned key elsewhere. */
	snprintf(target, sizeof(target), "%s/elsewhere.pem", tmpdir);
	write_pub("alice.pub", a, 0644);
	snprintf(path, sizeof(path), "%s/alice.pub", adir);
	ck_assert_int_eq(rename(path, target), 0);
	ck_assert_int_eq(symlink(target, path), 0);
	load_fails("alice.pub: a symbolic link: refused");
	ck_assert_int_eq(unlink(path), 0);
	/* The directory itself as a link. */
	snprintf(path, sizeof(path), "%s/link", tmpdir);
	ck_assert_int_eq(symlink(adir, path), 0);
	strcpy(adir, path);
	load_fails("symbolic link): refused");
	EVP_PKEY_free(a);
}
END_TEST

START_TEST(bad_key_files_refused)
{
	EVP_PKEY *a = newkey(), *ec;
	char path[256];
	FILE *f;

	if (!need_root())
		return;
	/* Not Ed25519. */
	ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	ck_assert_ptr_nonnull(ec);
	write_pub("ec.pub", ec, 0644);
	load_fails("ec.pub: not an Ed25519 key");
	snprintf(path, sizeof(path), "%s/ec.pub", adir);
	unlink(path);
	/* Not a key. */
	snprintf(path, sizeof(path), "%s/junk.pub", adir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs("hello\n", f);
	fclose(f);
	load_fails("junk.pub: not a PEM public key");
	/* Too big. */
	ck_assert_int_eq(truncate(path, APPROVERS_KEY_FILE_MAX + 1), 0);
	load_fails("junk.pub: 4097 bytes, more than 4096");
	unlink(path);
	/* Not a regular file. */
	snprintf(path, sizeof(path), "%s/fifo.pub", adir);
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	load_fails("fifo.pub: not a regular file");
	unlink(path);
	/* A bad name. */
	write_pub("al ice.pub", a, 0644);
	load_fails("not a valid approver name");
	snprintf(path, sizeof(path), "%s/al ice.pub", adir);
	unlink(path);
	/* One key under two names. */
	write_pub("alice.pub", a, 0644);
	write_pub("alice2.pub", a, 0644);
	load_fails("the same key as");
	EVP_PKEY_free(a);
	EVP_PKEY_free(ec);
}
END_TEST

START_TEST(too_many_keys_refused)
{
	char name[32];

	if (!need_root())
		return;
	for (int i = 0; i <= APPROVERS_MAX_KEYS; i++) {
		EVP_PKEY *k = newkey();

		snprintf(name, sizeof(name), "k%d.pub", i);
		write_pub(name, k, 0644);
		EVP_PKEY_free(k);
	}
	load_fails("more than 64 keys");
}
END_TEST

START_TEST(revoked_after_signing)
{
	EVP_PKEY *a = newkey(), *b = newkey();
	struct approval_keyset ks;
	struct approval_statement st;
	struct approval_envelope env;
	char err[512], path[256], hex[APPROVAL_HEX_LEN + 1];
	uint8_t id[32];
	FILE *f;

	if (!need_root())
		return;
	write_pub("alice.pub", a, 0644);
	write_pub("bob.pub", b, 0644);
	proposal(&st, APPROVAL_APPROVE);
	sign(a, &st, &env);
	ck_assert_int_eq(approvers_load(adir, &ks, err, sizeof(err)), 0);
	ck_assert_int_eq(approval_verify(&env, &ks, &st, NOW), APPROVAL_OK);
	approval_keyset_free(&ks);

	/* Removed from the directory: no longer known. */
	snprintf(path, sizeof(path), "%s/alice.pub", adir);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(approvers_load(adir, &ks, err, sizeof(err)), 0);
	ck_assert_int_eq(approval_verify(&env, &ks, &st, NOW),
	    APPROVAL_UNKNOWN_KEY);
	approval_keyset_free(&ks);

	/* Listed as revoked, as vmctl approver-key revoke leaves it: the
	 * revocation wins even over a key file put back. */
	ck_assert_int_eq(approval_key_id(a, id), 0);
	approval_hex(id, hex);
	snprintf(path, sizeof(path), "%s/revoked", adir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fprintf(f, "%s\n", hex);
	fclose(f);
	write_pub("alice.pub", a, 0644);
	ck_assert_int_eq(approvers_load(adir, &ks, err, sizeof(err)), 0);
	ck_assert_uint_eq(ks.nrevoked, 1);
	ck_assert_int_eq(approval_verify(&env, &ks, &st, NOW),
	    APPROVAL_REVOKED_KEY);
	approval_keyset_free(&ks);

	/* The revoked list is held to the same rules. */
	ck_assert_int_eq(chmod(path, 0666), 0);
	load_fails("revoked: writable by group or others");
	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_ptr_nonnull(f = fopen(path, "a"));
	fprintf(f, "not-hex\n");
	fclose(f);
	load_fails("revoked: a line is not 64 lowercase hex digits");
	EVP_PKEY_free(a);
	EVP_PKEY_free(b);
}
END_TEST

START_TEST(names)
{
	ck_assert(approvers_name_ok("alice"));
	ck_assert(approvers_name_ok("ops.bob-2_x"));
	ck_assert(!approvers_name_ok(""));
	ck_assert(!approvers_name_ok(".alice"));
	ck_assert(!approvers_name_ok("-alice"));
	ck_assert(!approvers_name_ok("a/b"));
	ck_assert(!approvers_name_ok("a b"));
	ck_assert(!approvers_name_ok(
	    "a1234567890123456789012345678901234567890123456789012345678901234"));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("approval");
	TCase *tc = tcase_create("statement");
	TCase *td = tcase_create("approvers_dir");

	tcase_add_test(tc, canonical_bytes);
	tcase_add_test(tc, no_two_statements_share_bytes);
	tcase_add_test(tc, encoder_refuses_out_of_bounds);
	tcase_add_test(tc, decoder_refusals);
	tcase_add_test(tc, envelope_round_trip);
	tcase_add_test(tc, other_arguments_refused);
	tcase_add_test(tc, expired_refused);
	tcase_add_test(tc, unknown_key_refused);
	tcase_add_test(tc, tampered_refused);
	tcase_add_test(tc, deny_is_not_approval);
	tcase_add_test(tc, count_distinct_keys);
	tcase_add_test(tc, names);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(td, dir_setup, dir_teardown);
	tcase_add_test(td, dir_loads_keys);
	tcase_add_test(td, dir_missing_is_empty);
	tcase_add_test(td, dir_group_writable_refused);
	tcase_add_test(td, key_not_root_only_refused);
	tcase_add_test(td, symlinks_refused);
	tcase_add_test(td, bad_key_files_refused);
	tcase_add_test(td, too_many_keys_refused);
	tcase_add_test(td, revoked_after_signing);
	suite_add_tcase(s, td);
	return check_run(s);
}
