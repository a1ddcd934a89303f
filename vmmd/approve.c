/*
 * Human approval of gated calls (approve.h).  A call its workspace's
 * gates hold back leaves a proposal and is answered approval_required;
 * its retry runs it once enough distinct enrolled approver keys have
 * signed exactly that proposal: its id, workspace, tool, the digest of
 * its stored arguments and its expiry.  The signatures are verified
 * again at each retry against the approvers directory as it is now, so
 * that a key revoked after signing no longer counts, and the proposal's
 * "state" column, which anyone who can write the database can change,
 * decides nothing.
 */
#include <sys/random.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approval.h"
#include "approve.h"
#include "audit.h"
#include "conf.h"
#include "gates.h"
#include "jsonx.h"
#include "log.h"
#include "receipts.h"
#include "snapshot_files.h"
#include "store.h"
#include "tools.h"
#include "util.h"

/* How many envelopes one proposal keeps: one per key, and no more keys
 * than the approvers directory may hold. */
#define PROPOSAL_MAX_ENVELOPES	APPROVERS_MAX_KEYS
#define EFFECT_MAX		2048

/* Arguments that neither the digest nor the stored proposal holds. */
static const char *const unstored[] = { "wait_seconds", "broker_pipe_token",
    "request_id", NULL };

static int
is_unstored(const char *key)
{
	for (const char *const *k = unstored; *k != NULL; k++)
		if (strcmp(*k, key) == 0)
			return 1;
	return 0;
}

/* ---- which gates a call meets ------------------------------------------ */

/*
 * The classes of req's call that its policy gates, as a bit mask, and the
 * approvals they need together (the most any of them needs).
 */
static unsigned int
classify(struct request *req, int *need)
{
	const struct gates *g = &req->policy.gates;
	const char *t = req->tool;
	unsigned int m = 0;
	int create = strcmp(t, "vm_create") == 0, run = strcmp(t,
	    "vm_run") == 0, exec = strcmp(t, "vm_exec") == 0;

	if ((exec || run) && g->need[GATE_EXEC])
		m |= 1u << GATE_EXEC;
	if ((exec || run) && g->need[GATE_BROKER_PIPE] &&
	    json_object_object_get_ex(req->args, "broker_pipe_token", NULL))
		m |= 1u << GATE_BROKER_PIPE;
	if (strcmp(t, "vm_destroy") == 0 && g->need[GATE_DESTROY])
		m |= 1u << GATE_DESTROY;
	if (strcmp(t, "vm_snapshot_delete") == 0 &&
	    g->need[GATE_SNAPSHOT_DELETE])
		m |= 1u << GATE_SNAPSHOT_DELETE;
	if (create || run) {
		const char *net = req_arg_str(req, "network", NULL);
		const char *sid = req_arg_str(req, "snapshot", NULL);
		const char *image = req_arg_str(req, "image", NULL);
		const struct conf_image *im;
		struct snap_record snap;
		int has_snap = sid != NULL && snap_find_owned(sid,
		    req->workspace, &snap) == 0 && snap.memory;
		long long mem, cpus;

		/* A memory snapshot brings its machine's NIC along. */
		if (net == NULL && has_snap)
			net = snap.network ? "on" : "off";
		/* A workspace that may not have network is refused by the
		 * handler: no human is asked to approve what can not run. */
		if (g->need[GATE_NETWORK] && req->policy.network &&
		    net != NULL && strcmp(net, "on") == 0)
			m |= 1u << GATE_NETWORK;
		im = image != NULL ? conf_find_image(vmmd_conf(), image) :
		    conf_default_image(vmmd_conf());
		mem = req_arg_int(req, "memory_mib", has_snap ?
		    snap.memory_mib : im != NULL ? im->memory_mib : 0);
		cpus = req_arg_int(req, "vcpus", has_snap ? snap.vcpus : 1);
		if (g->need[GATE_RESOURCES] &&
		    ((g->memory_mib_above != 0 &&
		    mem > (long long)g->memory_mib_above) ||
		    (g->vcpus_above != 0 && cpus > (long long)g->vcpus_above)))
			m |= 1u << GATE_RESOURCES;
	}
	*need = 0;
	for (int c = 0; c < GATE_NCLASSES; c++)
		if ((m & (1u << c)) && g->need[c] > *need)
			*need = g->need[c];
	return m;
}

static void
classes_text(unsigned int m, char *buf, size_t len)
{
	buf[0] = '\0';
	for (int c = 0; c < GATE_NCLASSES; c++)
		if (m & (1u << c))
			snprintf(buf + strlen(buf), len - strlen(buf), "%s%s",
			    buf[0] != '\0' ? "," : "", gate_class_name(c));
}

/* ---- what it would do, in words ---------------------------------------- */

static void
addf(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
addf(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	if (n >= len - 1)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

/* The machine a new VM of req would be: image, memory, vCPUs, network. */
static void
effect_machine(struct request *req, char *buf, size_t len)
{
	const char *image = req_arg_str(req, "image", NULL);
	const char *sid = req_arg_str(req, "snapshot", NULL);
	const char *net = req_arg_str(req, "network", "off");
	const struct conf_image *im = image != NULL ?
	    conf_find_image(vmmd_conf(), image) :
	    conf_default_image(vmmd_conf());
	struct json_object *eg;

	if (sid != NULL)
		addf(buf, len, "from snapshot %s", sid);
	else
		addf(buf, len, "from image %s", image != NULL ? image :
		    im != NULL ? im->id : "(default)");
	if (json_object_object_get_ex(req->args, "memory_mib", NULL))
		addf(buf, len, ", %lld MiB of memory",
		    (long long)req_arg_int(req, "memory_mib", 0));
	else if (im != NULL && sid == NULL)
		addf(buf, len, ", %lld MiB of memory", im->memory_mib);
	addf(buf, len, ", %lld vCPU%s", (long long)req_arg_int(req, "vcpus",
	    1), req_arg_int(req, "vcpus", 1) == 1 ? "" : "s");
	if (strcmp(net, "on") == 0) {
		addf(buf, len, ", network ON");
		if (json_object_object_get_ex(req->args, "egress", &eg))
			addf(buf, len, " (egress narrowed to %s)",
			    json_object_to_json_string_ext(eg,
			    JSON_C_TO_STRING_PLAIN));
		else
			addf(buf, len, " (the workspace's egress policy)");
	} else
		addf(buf, len, ", no network");
}

static void
effect_command(struct request *req, char *buf, size_t len)
{
	struct json_object *env;

	addf(buf, len, "runs the shell command `%s`",
	    req_arg_str(req, "command", ""));
	if (req_arg_str(req, "cwd", NULL) != NULL)
		addf(buf, len, " in %s", req_arg_str(req, "cwd", ""));
	if (json_object_object_get_ex(req->args, "env", &env))
		addf(buf, len, " with environment %s",
		    json_object_to_json_string_ext(env,
		    JSON_C_TO_STRING_PLAIN));
	if (json_object_object_get_ex(req->args, "stdin_base64", NULL))
		addf(buf, len, ", with input given");
	addf(buf, len, ", for at most %lld s",
	    (long long)req_arg_int(req, "timeout_seconds",
	    strcmp(req->tool, "vm_run") == 0 ? 60 : 600));
}

/*
 * A full buffer may end inside a character of the agent's command, and
 * mcpd refuses a frame that is not UTF-8 (and with it vmmd's connection):
 * cut back to a character boundary and say so.  The arguments, in full,
 * go beside the effect everywhere it is shown.
 */
static void
effect_cut(char *buf, size_t len)
{
	static const char mark[] = " [cut: the arguments are in full]";
	size_t n = strlen(buf);

	if (n < len - 1)
		return;
	n = len - sizeof(mark);
	while (n > 0 && ((unsigned char)buf[n] & 0xc0) == 0x80)
		n--;
	memcpy(buf + n, mark, sizeof(mark));
}

static char *
effect_text(struct request *req)
{
	char *buf;
	size_t len = EFFECT_MAX;
	struct vm *vm;

	if ((buf = calloc(1, len)) == NULL)
		fatal("calloc");
	if (strcmp(req->tool, "vm_exec") == 0) {
		const char *id = req_arg_str(req, "vm_id", "");

		addf(buf, len, "In VM %s", id);
		if ((vm = vm_find_owned(id, req->workspace)) != NULL)
			addf(buf, len, " (image %s, %d MiB, %d vCPU%s, %s)",
			    vm->rec.image, vm->rec.memory_mib, vm->rec.vcpus,
			    vm->rec.vcpus == 1 ? "" : "s", vm->rec.network ?
			    "network ON" : "no network");
		addf(buf, len, ": ");
		effect_command(req, buf, len);
		if (json_object_object_get_ex(req->args, "broker_pipe_token",
		    NULL))
			addf(buf, len, "; a broker pipe is attached: the "
			    "agent's side may talk to processes in the VM");
	} else if (strcmp(req->tool, "vm_run") == 0) {
		addf(buf, len, "Boots a new VM ");
		effect_machine(req, buf, len);
		addf(buf, len, "; ");
		effect_command(req, buf, len);
		addf(buf, len, "; then destroys the VM");
		if (json_object_object_get_ex(req->args, "commit", NULL))
			addf(buf, len, ", keeping its disk as a snapshot");
	} else if (strcmp(req->tool, "vm_create") == 0) {
		addf(buf, len, "Creates a VM ");
		effect_machine(req, buf, len);
	} else if (strcmp(req->tool, "vm_destroy") == 0) {
		const char *id = req_arg_str(req, "vm_id", "");

		addf(buf, len, "Destroys VM %s", id);
		if ((vm = vm_find_owned(id, req->workspace)) != NULL)
			addf(buf, len, " (image %s, %d MiB, %d vCPU%s, %s)",
			    vm->rec.image, vm->rec.memory_mib, vm->rec.vcpus,
			    vm->rec.vcpus == 1 ? "" : "s",
			    vm_state_name(vm->rec.state));
		addf(buf, len, ": its processes, memory and disk are gone "
		    "for good");
	} else if (strcmp(req->tool, "vm_snapshot_delete") == 0) {
		const char *id = req_arg_str(req, "snapshot_id", "");
		struct snap_record snap;

		addf(buf, len, "Deletes snapshot %s", id);
		if (snap_find_owned(id, req->workspace, &snap) == 0)
			addf(buf, len, " ('%s', of VM %s, image %s)",
			    snap.name, snap.source_vm, snap.image);
		addf(buf, len, " for good");
	} else
		addf(buf, len, "Calls %s", req->tool);
	addf(buf, len, "; workspace %s", req->workspace);
	effect_cut(buf, len);
	return buf;
}

/* ---- the proposal and its signatures ----------------------------------- */

static void
when_text(long long secs, char *buf, size_t len)
{
	iso8601_ms(secs * 1000, buf, len);
}

/* What an approval of r must have signed. */
static int
statement_of(const struct proposal_record *r, struct approval_statement *st)
{
	memset(st, 0, sizeof(*st));
	if (snprintf(st->proposal_id, sizeof(st->proposal_id), "%s",
	    r->id) >= (int)sizeof(st->proposal_id) ||
	    snprintf(st->workspace, sizeof(st->workspace), "%s",
	    r->workspace) >= (int)sizeof(st->workspace) ||
	    snprintf(st->tool, sizeof(st->tool), "%s", r->tool) >=
	    (int)sizeof(st->tool) ||
	    approval_unhex(r->args_digest, st->args_digest) == -1)
		return -1;
	st->expires_at = r->expires_at;
	st->decision = APPROVAL_APPROVE;
	return 0;
}

/*
 * The stored envelopes of r, decoded (each line of base64); lines that
 * do not decode are skipped and logged.  Returns how many, into envs
 * (PROPOSAL_MAX_ENVELOPES).
 */
static size_t
envelopes_of(const struct proposal_record *r, struct approval_envelope *envs)
{
	const char *p = r->envelopes, *nl;
	size_t n = 0;
	char err[128];

	while (p != NULL && *p != '\0' && n < PROPOSAL_MAX_ENVELOPES) {
		size_t len;

		nl = strchr(p, '\n');
		len = nl != NULL ? (size_t)(nl - p) : strlen(p);
		if (len > 0 && approval_envelope_from_b64(p, len, &envs[n],
		    err, sizeof(err)) == 0)
			n++;
		else if (len > 0)
			log_warnx("proposal %s: a stored envelope is "
			    "unreadable (%s): it counts for nothing", r->id,
			    err);
		p = nl != NULL ? nl + 1 : NULL;
	}
	return n;
}

/* The name of the enrolled key key_id, or its fingerprint's head. */
static void
key_name(const struct approval_keyset *ks, const uint8_t *key_id,
    char *buf, size_t len)
{
	char hex[APPROVAL_HEX_LEN + 1];

	for (size_t i = 0; i < ks->nkeys; i++)
		if (memcmp(ks->keys[i].key_id, key_id,
		    APPROVAL_KEYID_LEN) == 0) {
			snprintf(buf, len, "%s", ks->keys[i].name);
			return;
		}
	approval_hex(key_id, hex);
	snprintf(buf, len, "%.16s", hex);
}

/* Valid approvals of r now, with the keys' names; -1 when the approvers
 * directory cannot be read (err says why). */
struct tally {
	size_t	 valid;
	int	 denied;
	char	 keys[256];	/* names of the valid approvers */
	char	 verdicts[512];	/* every envelope's, for logs */
};

static int
tally(const struct proposal_record *r, time_t now, struct tally *t,
    char *err, size_t errlen)
{
	struct approval_envelope *envs;
	struct approval_keyset ks = { 0 };
	struct approval_statement want;
	size_t n;

	memset(t, 0, sizeof(*t));
	if (statement_of(r, &want) == -1) {
		snprintf(err, errlen, "proposal %s is malformed", r->id);
		return -1;
	}
	if (approvers_load(vmmd_conf()->vmmd.approvers_dir, &ks, err,
	    errlen) == -1)
		return -1;
	if ((envs = calloc(PROPOSAL_MAX_ENVELOPES, sizeof(*envs))) == NULL)
		fatal("calloc");
	n = envelopes_of(r, envs);
	for (size_t i = 0; i < n; i++) {
		enum approval_verdict v = approval_verify(&envs[i], &ks, &want,
		    now);
		char name[APPROVERS_NAME_MAX + 1];

		key_name(&ks, envs[i].key_id, name, sizeof(name));
		addf(t->verdicts, sizeof(t->verdicts), "%s%s: %s",
		    i > 0 ? "; " : "", name, approval_verdict_str(v));
		if (v == APPROVAL_DENIED)
			t->denied = 1;
	}
	t->valid = approval_count(envs, n, &ks, &want, now);
	/* The names of the distinct keys that count. */
	for (size_t i = 0; i < n; i++) {
		char name[APPROVERS_NAME_MAX + 1];
		int seen = 0;

		if (approval_verify(&envs[i], &ks, &want, now) != APPROVAL_OK)
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = memcmp(envs[j].key_id, envs[i].key_id,
			    APPROVAL_KEYID_LEN) == 0;
		if (seen)
			continue;
		key_name(&ks, envs[i].key_id, name, sizeof(name));
		addf(t->keys, sizeof(t->keys), "%s%s", t->keys[0] != '\0' ?
		    "," : "", name);
	}
	if (n == 0)
		snprintf(t->verdicts, sizeof(t->verdicts), "no signatures");
	free(envs);
	approval_keyset_free(&ks);
	return 0;
}

struct json_object *
proposal_to_json(const struct proposal_record *r, int with_ws)
{
	struct json_object *o = json_object_new_object(), *gates;
	struct tally t;
	char when[40], err[256], buf[sizeof(r->classes)], *save = NULL, *c;

	json_object_object_add(o, "id", json_object_new_string(r->id));
	if (with_ws)
		json_object_object_add(o, "workspace",
		    json_object_new_string(r->workspace));
	json_object_object_add(o, "tool", json_object_new_string(r->tool));
	json_object_object_add(o, "request_id",
	    json_object_new_string(r->request_id));
	json_object_object_add(o, "args_digest",
	    json_object_new_string(r->args_digest));
	json_object_object_add(o, "effect",
	    json_object_new_string(r->effect));
	gates = json_object_new_array();
	snprintf(buf, sizeof(buf), "%s", r->classes);
	for (c = strtok_r(buf, ",", &save); c != NULL;
	    c = strtok_r(NULL, ",", &save))
		json_object_array_add(gates, json_object_new_string(c));
	json_object_object_add(o, "gates", gates);
	json_object_object_add(o, "approvals_needed",
	    json_object_new_int(r->need));
	if (tally(r, time(NULL), &t, err, sizeof(err)) == -1)
		t.valid = 0;
	json_object_object_add(o, "approvals",
	    json_object_new_int((int)t.valid));
	/* Expiry is time's, whether or not a retry has come to record it. */
	json_object_object_add(o, "state", json_object_new_string(
	    (strcmp(r->state, "pending") == 0 || strcmp(r->state,
	    "approved") == 0) && (long long)time(NULL) >= r->expires_at ?
	    "expired" : r->state));
	when_text(r->requested_at, when, sizeof(when));
	json_object_object_add(o, "requested_at",
	    json_object_new_string(when));
	when_text(r->expires_at, when, sizeof(when));
	json_object_object_add(o, "expires_at",
	    json_object_new_string(when));
	return o;
}

static void
audit_proposal(const struct proposal_record *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* An audit line about proposal r: tool "approval:TOOL", vm the id. */
static void
audit_proposal(const struct proposal_record *r, const char *fmt, ...)
{
	char tool[64], outcome[512];
	va_list ap;

	if (vmmd_audit() == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(outcome, sizeof(outcome), fmt, ap);
	va_end(ap);
	snprintf(tool, sizeof(tool), "approval:%s", r->tool);
	audit_append(vmmd_audit(), r->workspace, tool, r->id, outcome);
}

/* req answered with code and its proposal; -1. */
static int
answer(struct request *req, const struct proposal_record *r,
    const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
answer(struct request *req, const struct proposal_record *r,
    const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	req->mutation = 0;	/* the proposal's own lines say it */
	req->proposal = proposal_to_json(r, 0);
	request_error(req, code, "%s", msg);
	return -1;
}

static void
store_warn(const struct proposal_record *r, const char *err)
{
	log_warnx("proposal %s: not updated: %s", r->id, err);
}

/* A new proposal for req, recorded and audited; answered.  -1. */
static int
propose(struct request *req, struct json_object *stored, const char *digest,
    unsigned int classes, int need, const char *rid)
{
	struct proposal_record r;
	uint8_t rnd[16];
	char err[256];
	long long pending;
	time_t now = time(NULL);

	if (store_proposal_pending(vmmd_store(), req->workspace, now,
	    &pending, err, sizeof(err)) == -1) {
		log_warnx("%s: proposals: %s", req->tool, err);
		request_error(req, "unavailable", "the proposal store failed");
		return -1;
	}
	if (pending >= vmmd_conf()->vmmd.max_proposals) {
		request_error(req, "quota_exceeded", "max_proposals (%lld): "
		    "this workspace already has %lld proposals awaiting a "
		    "decision; retry once some are decided or expired",
		    vmmd_conf()->vmmd.max_proposals, pending);
		return -1;
	}
	memset(&r, 0, sizeof(r));
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		fatal("getrandom");
	r.id[0] = 'p';
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(r.id + 1 + i * 2, 3, "%02x", rnd[i]);
	snprintf(r.workspace, sizeof(r.workspace), "%s", req->workspace);
	snprintf(r.tool, sizeof(r.tool), "%s", req->tool);
	snprintf(r.request_id, sizeof(r.request_id), "%s", rid);
	snprintf(r.args_digest, sizeof(r.args_digest), "%s", digest);
	r.args = (char *)json_object_to_json_string_ext(stored,
	    JSON_C_TO_STRING_PLAIN);
	r.effect = effect_text(req);
	classes_text(classes, r.classes, sizeof(r.classes));
	r.need = need;
	r.requested_at = now;
	r.expires_at = now + vmmd_conf()->vmmd.approval_ttl;
	snprintf(r.state, sizeof(r.state), "pending");
	if (store_proposal_insert(vmmd_store(), &r, err, sizeof(err)) == -1) {
		log_warnx("%s: proposal not recorded: %s", req->tool, err);
		free(r.effect);
		request_error(req, "unavailable", "the proposal store failed");
		return -1;
	}
	audit_proposal(&r, "proposed: gates %s, %d approval%s needed, "
	    "expires %lld, args digest %s", r.classes, need, need == 1 ? "" :
	    "s", r.expires_at, r.args_digest);
	log_info("proposal %s: %s %s in workspace %s awaits %d approval%s",
	    r.id, req->tool, digest, req->workspace, need, need == 1 ? "" :
	    "s");
	answer(req, &r, "approval_required", "%s needs %d approval%s by a "
	    "human: proposal %s (`vmctl approval approve %s`); retry this "
	    "call with the same arguments%s once it is approved", req->tool,
	    need, need == 1 ? "" : "s", r.id, r.id, rid[0] != '\0' ?
	    " and request_id" : "");
	free(r.effect);
	return -1;
}

/*
 * A denial or expiry, recorded and, for a proposal without request_id,
 * marked told: the same call again makes a new proposal, where one with
 * a request_id keeps its answer.
 */
static void
told(struct proposal_record *r)
{
	char err[256];

	if (r->request_id[0] == '\0')
		snprintf(r->outcome, sizeof(r->outcome), "told");
	if (store_proposal_update(vmmd_store(), r, err, sizeof(err)) == -1)
		store_warn(r, err);
}

static const char *
again(const struct proposal_record *r)
{
	return r->request_id[0] != '\0' ? "; a new request_id proposes it "
	    "again" : "; the same call again proposes it anew";
}

/* Whether a receipt already governs this request_id. */
static int
receipt_known(struct request *req, const char *rid)
{
	char err[256];
	int known;

	if (rid[0] == '\0' || !(req->def->flags & TOOL_RECEIPT))
		return 0;
	if ((known = store_receipt_known(vmmd_store(), req->workspace, rid,
	    err, sizeof(err))) == -1) {
		log_warnx("%s: receipt %s: %s", req->tool, rid, err);
		return 0;	/* gated as if new */
	}
	return known;
}

int
approve_gate(struct request *req)
{
	struct proposal_record r;
	struct json_object *stored;
	struct tally t;
	unsigned int classes;
	int need, rc;
	const char *rid = req_arg_str(req, "request_id", "");
	char digest[RECEIPT_DIGEST_HEX + 1], err[256];
	time_t now = time(NULL);

	if (!gates_any(&req->policy.gates) ||
	    (classes = classify(req, &need)) == 0)
		return 0;
	/* Its first answer, or the one still running, is the receipt's. */
	if (receipt_known(req, rid))
		return 0;
	stored = json_object_new_object();
	json_object_object_foreach(req->args, key, val)
		if (!is_unstored(key))
			json_object_object_add(stored, key,
			    json_object_get(val));
	/* An approval without a pipe can not serve a call with one. */
	if (json_object_object_get_ex(req->args, "broker_pipe_token", NULL))
		json_object_object_add(stored, "broker_pipe",
		    json_object_new_boolean(1));
	if (receipt_digest(stored, digest) == -1) {
		json_object_put(stored);
		request_error(req, "internal", "cannot digest the arguments");
		return -1;
	}
	rc = store_proposal_find(vmmd_store(), req->workspace, req->tool, rid,
	    digest, &r, err, sizeof(err));
	if (rc == -1) {
		json_object_put(stored);
		log_warnx("%s: proposals: %s", req->tool, err);
		request_error(req, "unavailable", "the proposal store failed");
		return -1;
	}
	if (rc == 1) {
		rc = propose(req, stored, digest, classes, need, rid);
		json_object_put(stored);
		return rc;
	}
	json_object_put(stored);
	rc = -1;
	if (strcmp(r.tool, req->tool) != 0 ||
	    strcmp(r.args_digest, digest) != 0) {
		req->mutation = 0;
		request_error(req, "conflict", "request_id '%s' was already "
		    "used with other arguments or another tool (proposal %s)",
		    rid, r.id);
		goto out;
	}
	if (strcmp(r.state, "used") == 0) {
		answer(req, &r, "conflict", "proposal %s was already used; "
		    "its approvals do not serve twice", r.id);
		goto out;
	}
	if (strcmp(r.state, "denied") == 0) {
		told(&r);
		answer(req, &r, "approval_denied", "proposal %s was denied: "
		    "it will not run%s", r.id, again(&r));
		goto out;
	}
	if (strcmp(r.state, "expired") == 0 || now >= r.expires_at) {
		if (strcmp(r.state, "expired") != 0) {
			snprintf(r.state, sizeof(r.state), "expired");
			audit_proposal(&r, "expired");
		}
		told(&r);
		answer(req, &r, "approval_expired", "proposal %s expired "
		    "before enough approvals%s", r.id, again(&r));
		goto out;
	}
	if (tally(&r, now, &t, err, sizeof(err)) == -1) {
		log_warnx("proposal %s: refused: the approvers cannot be read: "
		    "%s", r.id, err);
		audit_proposal(&r, "refused: approvers directory: %s", err);
		answer(req, &r, "approval_required", "proposal %s can not be "
		    "checked now: the approvers directory is refused (see "
		    "vmmd's log); an operator must fix it", r.id);
		goto out;
	}
	if (t.denied) {
		snprintf(r.state, sizeof(r.state), "denied");
		told(&r);
		answer(req, &r, "approval_denied", "proposal %s was denied: "
		    "it will not run%s", r.id, again(&r));
		goto out;
	}
	if (t.valid < (size_t)r.need) {
		if (strcmp(r.state, "pending") != 0) {
			/* Someone wrote "approved" without the signatures. */
			log_warnx("proposal %s: its row says %s but it has %zu "
			    "valid approval%s of %d (%s): refused, pending",
			    r.id, r.state, t.valid, t.valid == 1 ? "" : "s",
			    r.need, t.verdicts);
			audit_proposal(&r, "refused: row said %s with %zu of "
			    "%d valid approvals (%s)", r.state, t.valid,
			    r.need, t.verdicts);
			snprintf(r.state, sizeof(r.state), "pending");
			if (store_proposal_update(vmmd_store(), &r, err,
			    sizeof(err)) == -1)
				store_warn(&r, err);
		}
		answer(req, &r, "approval_required", "proposal %s has %zu of "
		    "the %d approval%s it needs (`vmctl approval approve %s`);"
		    " retry with the same arguments once it is approved",
		    r.id, t.valid, r.need, r.need == 1 ? "" : "s", r.id);
		goto out;
	}
	/* Enough: used now, once, whatever follows. */
	if ((rc = store_proposal_take(vmmd_store(), r.id, err,
	    sizeof(err))) != 0) {
		if (rc == -1)
			log_warnx("proposal %s: %s", r.id, err);
		answer(req, &r, rc == 1 ? "conflict" : "unavailable",
		    rc == 1 ? "proposal %s was already used" :
		    "proposal %s: the store failed", r.id);
		rc = -1;
		goto out;
	}
	audit_proposal(&r, "used: approved by keys %s", t.keys);
	log_info("proposal %s: approved by %s; %s runs", r.id, t.keys,
	    r.tool);
	snprintf(req->proposal_id, sizeof(req->proposal_id), "%s", r.id);
	rc = 0;
 out:
	proposal_record_free(&r);
	return rc;
}

void
approve_outcome(const char *id, const char *outcome)
{
	struct proposal_record r;
	char err[256];

	if (store_proposal_get(vmmd_store(), id, &r, err, sizeof(err)) != 0)
		return;
	snprintf(r.outcome, sizeof(r.outcome), "%s", outcome);
	if (store_proposal_update(vmmd_store(), &r, err, sizeof(err)) == -1)
		store_warn(&r, err);
	audit_proposal(&r, "outcome: %s", outcome);
	proposal_record_free(&r);
}
