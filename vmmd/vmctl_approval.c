/*
 * vmctl approval list|show|approve|deny: the human's side of a gated
 * action (issue #28), over vmmd's approvals socket (root and the
 * mcpvm-approvers group).  The agent has no path here: no MCP tool and no
 * HTTP route reaches this socket.
 *
 * What is shown comes from the agent (its command, its arguments), so it
 * is printed with every control character and every Unicode direction
 * override escaped: nothing the agent wrote can move the cursor, recolour,
 * or reorder what the human reads.  Before signing, vmctl recomputes the
 * argument digest from the arguments it showed and refuses to sign when
 * vmmd's digest differs, so a signature always covers what was on screen.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "approval.h"
#include "conf.h"
#include "ipc.h"
#include "receipts.h"
#include "vmctl_keys.h"

#define CALL_TIMEOUT_MS	30000

/*
 * Writes s for a person: printable ASCII and other UTF-8 as they are,
 * newline and tab too when keep_nl, and everything that could act on a
 * terminal or reorder text escaped as \xNN or \u{NNNN}.
 */
void
vmctl_put_safe(FILE *f, const char *s, int keep_nl)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p != '\0') {
		unsigned int cp;
		int n;

		if ((*p == '\n' || *p == '\t') && keep_nl) {
			fputc(*p++, f);
			continue;
		}
		if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\x%02x", *p++);
			continue;
		}
		if (*p < 0x80) {
			fputc(*p++, f);
			continue;
		}
		/* Decode one UTF-8 sequence; a malformed byte is escaped. */
		if ((*p & 0xe0) == 0xc0 && (p[1] & 0xc0) == 0x80) {
			cp = ((p[0] & 0x1fu) << 6) | (p[1] & 0x3fu);
			n = 2;
		} else if ((*p & 0xf0) == 0xe0 && (p[1] & 0xc0) == 0x80 &&
		    (p[2] & 0xc0) == 0x80) {
			cp = ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) |
			    (p[2] & 0x3fu);
			n = 3;
		} else if ((*p & 0xf8) == 0xf0 && (p[1] & 0xc0) == 0x80 &&
		    (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80) {
			cp = ((p[0] & 0x07u) << 18) | ((p[1] & 0x3fu) << 12) |
			    ((p[2] & 0x3fu) << 6) | (p[3] & 0x3fu);
			n = 4;
		} else {
			fprintf(f, "\\x%02x", *p++);
			continue;
		}
		/* C1 controls, and the marks and overrides that reorder. */
		if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x200e ||
		    cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
		    (cp >= 0x2066 && cp <= 0x2069) || cp == 0x061c)
			fprintf(f, "\\u{%04x}", cp);
		else
			fwrite(p, 1, (size_t)n, f);
		p += n;
	}
}

static void
print_proposal_row(struct json_object *p)
{
	printf("%-33s  %-16s  %-18s  %-8s  %3s/%-3s  %s\n", vmctl_str(p, "id"),
	    vmctl_str(p, "workspace"), vmctl_str(p, "tool"),
	    vmctl_str(p, "state"), vmctl_str(p, "approvals"),
	    vmctl_str(p, "approvals_needed"), vmctl_str(p, "expires_at"));
	fputs("    ", stdout);
	vmctl_put_safe(stdout, vmctl_str(p, "effect"), 0);
	fputc('\n', stdout);
}

static void
print_list(struct json_object *res)
{
	struct json_object *l = json_object_object_get(res, "proposals");
	size_t n = l != NULL ? json_object_array_length(l) : 0;

	printf("%-33s  %-16s  %-18s  %-8s  %7s  %s\n", "PROPOSAL",
	    "WORKSPACE", "TOOL", "STATE", "SIGNED", "EXPIRES");
	for (size_t i = 0; i < n; i++)
		print_proposal_row(json_object_array_get_idx(l, i));
	if (n == 0)
		printf("(no proposals)\n");
}

/*
 * The proposal in full, never truncated; returns 0 when vmmd's argument
 * digest is the digest of the arguments shown, else -1 (and says so).
 */
static int
print_show(struct json_object *res)
{
	struct json_object *p = json_object_object_get(res, "proposal");
	struct json_object *args = json_object_object_get(res, "args");
	struct json_object *gates;
	char digest[RECEIPT_DIGEST_HEX + 1];
	int ok;

	ok = p != NULL && json_object_is_type(args, json_type_object) &&
	    receipt_digest(args, digest) == 0 &&
	    strcmp(digest, vmctl_str(p, "args_digest")) == 0;
	printf("proposal      %s\n", vmctl_str(p, "id"));
	printf("workspace     %s\n", vmctl_str(p, "workspace"));
	printf("tool          %s\n", vmctl_str(p, "tool"));
	printf("request id    ");
	vmctl_put_safe(stdout, vmctl_str(p, "request_id"), 0);
	printf("\nstate         %s\n", vmctl_str(p, "state"));
	printf("approvals     %s of %s\n", vmctl_str(p, "approvals"),
	    vmctl_str(p, "approvals_needed"));
	printf("gated by      ");
	gates = json_object_object_get(p, "gates");
	for (size_t i = 0; gates != NULL &&
	    i < json_object_array_length(gates); i++)
		printf("%s%s", i ? ", " : "", json_object_get_string(
		    json_object_array_get_idx(gates, i)));
	printf("\nrequested at  %s\n", vmctl_str(p, "requested_at"));
	printf("expires at    %s\n", vmctl_str(p, "expires_at"));
	printf("effect\n    ");
	vmctl_put_safe(stdout, vmctl_str(p, "effect"), 0);
	printf("\narguments (every byte; escapes as \\xNN and \\u{NNNN})\n");
	/* json-c escapes control characters inside strings already; the
	 * direction overrides it leaves as UTF-8 are escaped here. */
	vmctl_put_safe(stdout, json_object_to_json_string_ext(args,
	    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE), 1);
	printf("\nargs digest   %s (%s)\n", vmctl_str(p, "args_digest"),
	    ok ? "matches the arguments above" :
	    "DOES NOT match the arguments above");
	return ok ? 0 : -1;
}

/* 2026-12-03T15:04:05[.mmm]Z to Unix seconds: 0, or -1. */
static int
parse_utc(const char *s, int64_t *out)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	if ((end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
		return -1;
	if (*end == '.') {
		end++;
		while (*end >= '0' && *end <= '9')
			end++;
	}
	if (strcmp(end, "Z") != 0)
		return -1;
	*out = (int64_t)timegm(&tm);
	return 0;
}

static int
ask_passphrase(const char *path, char *buf, size_t bufsz)
{
	char prompt[PATH_MAX + 32];
	int tty, len;

	if ((tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1) {
		fprintf(stderr, "vmctl: the passphrase is read from a "
		    "terminal: /dev/tty: %s\n", strerror(errno));
		return -1;
	}
	snprintf(prompt, sizeof(prompt), "Passphrase for %s: ", path);
	if ((len = vmctl_ask(tty, prompt, buf, bufsz)) == -1)
		fprintf(stderr, "vmctl: cannot read the passphrase (at most "
		    "%zu characters)\n", bufsz - 1);
	close(tty);
	return len;
}

static EVP_PKEY *
load_private_key(const char *key_path)
{
	char path[PATH_MAX], pass[1024];
	EVP_PKEY *k = NULL;
	FILE *f;
	int len;

	if (key_path != NULL)
		snprintf(path, sizeof(path), "%s", key_path);
	else if (vmctl_approver_key_path(path, sizeof(path), 0) == -1)
		return NULL;
	if ((f = fopen(path, "re")) == NULL) {
		fprintf(stderr, "vmctl: %s: %s (make it with `vmctl "
		    "approver-key init`)\n", path, strerror(errno));
		return NULL;
	}
	if ((len = ask_passphrase(path, pass, sizeof(pass))) >= 0)
		k = PEM_read_PrivateKey(f, NULL, NULL, pass);
	explicit_bzero(pass, sizeof(pass));
	fclose(f);
	if (len >= 0 && k == NULL)
		fprintf(stderr, "vmctl: %s: wrong passphrase, or not an "
		    "approver key\n", path);
	if (k != NULL && EVP_PKEY_get_id(k) != EVP_PKEY_ED25519) {
		fprintf(stderr, "vmctl: %s: not an Ed25519 key\n", path);
		EVP_PKEY_free(k);
		k = NULL;
	}
	return k;
}

/* One call on the approvals socket (vmctl_call). */
static int
call(const char *sock, uint32_t type, struct json_object *req, int json_out,
    struct json_object **reply, struct json_object **res)
{
	return vmctl_call(sock, "the mcpvm-approvers group", type, req,
	    json_out, CALL_TIMEOUT_MS, reply, res);
}

/* approve or deny: show, check, sign, send. */
static int
decide(const char *sock, const char *id, int decision, const char *key_path,
    int json_out)
{
	struct approval_statement st;
	struct approval_envelope env;
	struct json_object *req, *reply = NULL, *res, *p;
	struct json_object *reply2 = NULL, *res2;
	char err[256], *b64 = NULL;
	EVP_PKEY *k = NULL;
	int rc;

	req = json_object_new_object();
	json_object_object_add(req, "id", json_object_new_string(id));
	if ((rc = call(sock, IPC_APPROVAL_SHOW, req, json_out, &reply,
	    &res)) != 0)
		goto out;
	rc = 1;
	if (print_show(res) == -1) {
		fprintf(stderr, "vmctl: not signed: the digest vmmd holds is "
		    "not the digest of the arguments shown\n");
		goto out;
	}
	p = json_object_object_get(res, "proposal");
	if (strcmp(vmctl_str(p, "state"), "pending") != 0 &&
	    strcmp(vmctl_str(p, "state"), "approved") != 0) {
		fprintf(stderr, "vmctl: proposal %s is %s: nothing to "
		    "decide\n", id, vmctl_str(p, "state"));
		goto out;
	}
	memset(&st, 0, sizeof(st));
	if (snprintf(st.proposal_id, sizeof(st.proposal_id), "%s",
	    vmctl_str(p, "id")) >= (int)sizeof(st.proposal_id) ||
	    snprintf(st.workspace, sizeof(st.workspace), "%s",
	    vmctl_str(p, "workspace")) >= (int)sizeof(st.workspace) ||
	    snprintf(st.tool, sizeof(st.tool), "%s", vmctl_str(p, "tool")) >=
	    (int)sizeof(st.tool) ||
	    approval_unhex(vmctl_str(p, "args_digest"), st.args_digest) == -1 ||
	    parse_utc(vmctl_str(p, "expires_at"), &st.expires_at) == -1) {
		fprintf(stderr, "vmctl: proposal %s: vmmd's answer is not a "
		    "proposal vmctl can sign\n", id);
		goto out;
	}
	if (st.expires_at <= (int64_t)time(NULL)) {
		fprintf(stderr, "vmctl: proposal %s expired at %s\n", id,
		    vmctl_str(p, "expires_at"));
		goto out;
	}
	st.decision = decision;
	printf("\n%s proposal %s with your key.\n", decision ==
	    APPROVAL_APPROVE ? "Approving" : "Denying", st.proposal_id);
	fflush(stdout);
	if ((k = load_private_key(key_path)) == NULL)
		goto out;
	if (approval_sign(&st, k, &env, err, sizeof(err)) == -1 ||
	    (b64 = approval_envelope_to_b64(&env)) == NULL) {
		fprintf(stderr, "vmctl: cannot sign: %s\n", err);
		goto out;
	}
	json_object_put(req);
	req = json_object_new_object();
	json_object_object_add(req, "id", json_object_new_string(
	    st.proposal_id));
	json_object_object_add(req, "envelope", json_object_new_string(b64));
	if ((rc = call(sock, IPC_APPROVAL_DECIDE, req, json_out, &reply2,
	    &res2)) != 0)
		goto out;
	p = json_object_object_get(res2, "proposal");
	if (json_out)
		printf("%s\n", json_object_to_json_string_ext(res2,
		    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	else if (decision == APPROVAL_APPROVE)
		printf("approved: proposal %s has %s of %s approvals (%s)\n",
		    vmctl_str(p, "id"), vmctl_str(p, "approvals"),
		    vmctl_str(p, "approvals_needed"), vmctl_str(p, "state"));
	else
		printf("denied: proposal %s (%s)\n", vmctl_str(p, "id"),
		    vmctl_str(p, "state"));
	rc = 0;
 out:
	free(b64);
	EVP_PKEY_free(k);
	json_object_put(reply);
	json_object_put(reply2);
	json_object_put(req);
	return rc;
}

int
vmctl_approval(int argc, char **argv, const char *sock,
    const char *conf_path, const char *key_path, int json_out)
{
	struct json_object *req = NULL, *reply = NULL, *res;
	struct mcpvm_conf conf;
	char err[1024];
	int rc = 1;

	if (argc < 2 || (strcmp(argv[1], "list") == 0 && argc != 2) ||
	    (strcmp(argv[1], "list") != 0 && argc != 3))
		return -1;
	if (key_path != NULL && strcmp(argv[1], "approve") != 0 &&
	    strcmp(argv[1], "deny") != 0)
		return -1;
	if (argc == 3 && strlen(argv[2]) > APPROVAL_ID_MAX) {
		fprintf(stderr, "vmctl: '%s' is not a proposal id\n", argv[2]);
		return 2;
	}
	memset(&conf, 0, sizeof(conf));
	if (sock == NULL) {
		if (conf_load(conf_path, &conf, err, sizeof(err)) == -1) {
			fprintf(stderr, "vmctl: %s\n", err);
			return 3;
		}
		sock = conf.vmmd.approvals_socket;
	}
	if (strcmp(argv[1], "approve") == 0 || strcmp(argv[1], "deny") == 0) {
		rc = decide(sock, argv[2], argv[1][0] == 'a' ?
		    APPROVAL_APPROVE : APPROVAL_DENY, key_path, json_out);
		goto out;
	}
	req = json_object_new_object();
	if (strcmp(argv[1], "list") == 0)
		rc = call(sock, IPC_APPROVAL_LIST, req, json_out, &reply, &res);
	else if (strcmp(argv[1], "show") == 0) {
		json_object_object_add(req, "id", json_object_new_string(
		    argv[2]));
		rc = call(sock, IPC_APPROVAL_SHOW, req, json_out, &reply, &res);
	} else {
		json_object_put(req);
		conf_free(&conf);
		return -1;
	}
	if (rc != 0)
		goto out;
	if (json_out)
		printf("%s\n", json_object_to_json_string_ext(res,
		    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	else if (strcmp(argv[1], "list") == 0)
		print_list(res);
	else if (print_show(res) == -1)
		rc = 1;
 out:
	json_object_put(reply);
	json_object_put(req);
	conf_free(&conf);
	return rc;
}
