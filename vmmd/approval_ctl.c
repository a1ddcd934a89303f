/*
 * The approvals socket (approvals_socket: root and mcpvm-approvers):
 * vmctl approval's list, show, and decisions.  A decision is an envelope
 * signed by an approver's own key; vmmd verifies it at once against the
 * approvers directory as it is now, keeps it with the proposal (one per
 * key: a key's later decision replaces its earlier one), and verifies it
 * again when the gated call is retried (approve.c).  Nothing said here
 * but the signature counts: the socket's peer is audited, not trusted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approval.h"
#include "approve.h"
#include "audit.h"
#include "decode.h"
#include "ipc.h"
#include "log.h"
#include "store.h"
#include "vmmd_shared.h"

struct request *control_request_new(struct ipc_conn *, uint32_t);

/* Proposals used or expired longer ago than this leave the list. */
#define LIST_KEEP_SECONDS	86400

static void
ctl_audit(const struct proposal_record *r, const char *outcome)
{
	char tool[64];

	if (vmmd_audit() == NULL)
		return;
	snprintf(tool, sizeof(tool), "approval:%s", r->tool);
	audit_append(vmmd_audit(), r->workspace, tool, r->id, outcome);
}

static void
ctl_list(struct request *req)
{
	struct proposal_record *v;
	struct json_object *res, *arr;
	size_t n;
	char err[256];

	if (store_proposal_list(vmmd_store(), (long long)time(NULL) -
	    LIST_KEEP_SECONDS, &v, &n, err, sizeof(err)) == -1) {
		log_warnx("approval list: %s", err);
		request_error(req, "unavailable", "the proposal store failed");
		return;
	}
	arr = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(arr, proposal_to_json(&v[i], 1));
	proposal_records_free(v, n);
	res = json_object_new_object();
	json_object_object_add(res, "proposals", arr);
	request_reply(req, res);
}

/* The proposal named id into r, or an answer and -1. */
static int
ctl_get(struct request *req, const char *id, struct proposal_record *r)
{
	char err[256];
	int rc = store_proposal_get(vmmd_store(), id, r, err, sizeof(err));

	if (rc == 1)
		request_error(req, "not_found", "there is no proposal '%s'",
		    id);
	else if (rc == -1) {
		log_warnx("approval: proposal %s: %s", id, err);
		request_error(req, "unavailable", "the proposal store failed");
	}
	return rc == 0 ? 0 : -1;
}

static void
ctl_show(struct request *req, const char *id)
{
	struct proposal_record r;
	struct json_object *res, *args;

	if (ctl_get(req, id, &r) == -1)
		return;
	res = json_object_new_object();
	json_object_object_add(res, "proposal", proposal_to_json(&r, 1));
	if ((args = json_tokener_parse(r.args)) == NULL)
		args = json_object_new_object();
	json_object_object_add(res, "args", args);
	proposal_record_free(&r);
	request_reply(req, res);
}

/*
 * r's envelopes with env in place of any earlier one of the same key:
 * a new string, or NULL when r already holds as many keys as it may.
 */
static char *
envelopes_with(const struct proposal_record *r,
    const struct approval_envelope *env, const char *b64)
{
	const char *p = r->envelopes, *nl;
	/* Each kept line with its newline, a last one perhaps without. */
	size_t cap = strlen(r->envelopes) + strlen(b64) + 4, kept = 0;
	char *out, err[64];

	if ((out = calloc(1, cap)) == NULL)
		fatal("calloc");
	while (p != NULL && *p != '\0') {
		struct approval_envelope old;
		size_t len;

		nl = strchr(p, '\n');
		len = nl != NULL ? (size_t)(nl - p) : strlen(p);
		/* A line that does not decode, or of the same key, goes. */
		if (len > 0 && approval_envelope_from_b64(p, len, &old, err,
		    sizeof(err)) == 0 && memcmp(old.key_id, env->key_id,
		    APPROVAL_KEYID_LEN) != 0) {
			strncat(out, p, len);
			strcat(out, "\n");
			kept++;
		}
		p = nl != NULL ? nl + 1 : NULL;
	}
	if (kept >= APPROVERS_MAX_KEYS) {
		free(out);
		return NULL;
	}
	strcat(out, b64);
	strcat(out, "\n");
	return out;
}

static void
ctl_decide(struct request *req, const struct approval_msg *m, uid_t uid)
{
	struct proposal_record r;
	struct approval_envelope env;
	struct approval_keyset ks = { 0 };
	struct approval_statement want;
	enum approval_verdict v;
	char err[256], name[APPROVERS_NAME_MAX + 1], hex[APPROVAL_HEX_LEN + 1];
	char line[512], *b64 = NULL, *envs;
	time_t now = time(NULL);

	if (approval_envelope_from_b64(m->envelope, m->envelope_len, &env, err,
	    sizeof(err)) == -1) {
		request_error(req, "invalid_argument", "%s", err);
		return;
	}
	if (ctl_get(req, m->id, &r) == -1)
		return;
	snprintf(req->workspace, sizeof(req->workspace), "%s", r.workspace);
	if (strcmp(r.state, "used") == 0 || strcmp(r.state, "denied") == 0 ||
	    strcmp(r.state, "expired") == 0 || now >= r.expires_at) {
		request_error(req, "conflict", "proposal %s is %s: it takes no "
		    "more decisions", r.id, now >= r.expires_at &&
		    strcmp(r.state, "used") != 0 && strcmp(r.state,
		    "denied") != 0 ? "expired" : r.state);
		goto out;
	}
	if (approvers_load(vmmd_conf()->vmmd.approvers_dir, &ks, err,
	    sizeof(err)) == -1) {
		log_warnx("approval %s: the approvers directory is refused: %s",
		    r.id, err);
		request_error(req, "unavailable", "the approvers directory is "
		    "refused: %s", err);
		goto out;
	}
	memset(&want, 0, sizeof(want));
	snprintf(want.proposal_id, sizeof(want.proposal_id), "%s", r.id);
	snprintf(want.workspace, sizeof(want.workspace), "%s", r.workspace);
	snprintf(want.tool, sizeof(want.tool), "%s", r.tool);
	want.expires_at = r.expires_at;
	if (approval_unhex(r.args_digest, want.args_digest) == -1) {
		request_error(req, "internal", "proposal %s is malformed",
		    r.id);
		goto out;
	}
	v = approval_verify(&env, &ks, &want, now);
	approval_hex(env.key_id, hex);
	snprintf(name, sizeof(name), "%.16s", hex);
	for (size_t i = 0; i < ks.nkeys; i++)
		if (memcmp(ks.keys[i].key_id, env.key_id,
		    APPROVAL_KEYID_LEN) == 0)
			snprintf(name, sizeof(name), "%s", ks.keys[i].name);
	if (v != APPROVAL_OK && v != APPROVAL_DENIED) {
		snprintf(line, sizeof(line), "refused decision by key %s (uid "
		    "%u): %s", name, (unsigned)uid, approval_verdict_str(v));
		ctl_audit(&r, line);
		log_warnx("proposal %s: %s", r.id, line);
		request_error(req, "unauthorized", "the decision is refused: "
		    "%s", approval_verdict_str(v));
		goto out;
	}
	if ((b64 = approval_envelope_to_b64(&env)) == NULL ||
	    (envs = envelopes_with(&r, &env, b64)) == NULL) {
		request_error(req, "quota_exceeded", "proposal %s holds "
		    "decisions of %d keys already", r.id, APPROVERS_MAX_KEYS);
		goto out;
	}
	free(r.envelopes);
	r.envelopes = envs;
	snprintf(line, sizeof(line), "%s%s%s (uid %u)", r.decided_by,
	    r.decided_by[0] != '\0' ? ", " : "", name, (unsigned)uid);
	snprintf(r.decided_by, sizeof(r.decided_by), "%.*s",
	    (int)sizeof(r.decided_by) - 1, line);
	if (v == APPROVAL_DENIED)
		snprintf(r.state, sizeof(r.state), "denied");
	else {
		struct json_object *p = proposal_to_json(&r, 0);

		/* A hint for lists; the retry counts the signatures again. */
		if (json_object_get_int(json_object_object_get(p,
		    "approvals")) >= r.need)
			snprintf(r.state, sizeof(r.state), "approved");
		json_object_put(p);
	}
	if (store_proposal_update(vmmd_store(), &r, err, sizeof(err)) == -1) {
		log_warnx("approval %s: %s", r.id, err);
		request_error(req, "unavailable", "the proposal store failed");
		goto out;
	}
	snprintf(line, sizeof(line), "decision: %s by key %s (uid %u)",
	    v == APPROVAL_DENIED ? "deny" : "approve", name, (unsigned)uid);
	log_info("proposal %s: %s", r.id, line);
	/* The signed envelope itself: with the proposed line's digest and
	 * expiry, the audit log alone lets anyone check the decision
	 * against the enrolled keys. */
	{
		char *aline;

		if (asprintf(&aline, "%s, envelope %s", line, b64) == -1)
			fatal("asprintf");
		ctl_audit(&r, aline);
		free(aline);
	}
	{
		struct json_object *res = json_object_new_object();

		json_object_object_add(res, "proposal",
		    proposal_to_json(&r, 1));
		request_reply(req, res);
	}
 out:
	free(b64);
	approval_keyset_free(&ks);
	proposal_record_free(&r);
}

void
approvals_dispatch(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct request *req = control_request_new(conn, m->id);
	const struct ucred *cred = ipc_conn_peercred(conn);
	struct approval_msg am;
	struct decode_err de;

	(void)arg;
	snprintf(req->tool, sizeof(req->tool), "vmctl:approval");
	if (decode_approval(m->type, m->body, &am, &de) != DECODE_OK) {
		request_error(req, de.code != NULL ? de.code :
		    "invalid_argument", "%s", de.msg);
		return;
	}
	switch (am.type) {
	case IPC_APPROVAL_LIST:
		ctl_list(req);
		break;
	case IPC_APPROVAL_SHOW:
		ctl_show(req, am.id);
		break;
	case IPC_APPROVAL_DECIDE:
		ctl_decide(req, &am, cred != NULL ? cred->uid : (uid_t)-1);
		break;
	}
}
