/*
 * vmmd's proposal object, decoded strictly (proposal.h).  vmmd is trusted
 * more than a client, but what it says reaches agents and people: a member
 * mcpd does not know, a string past its bound or of the wrong shape is
 * refused here, and the call fails as "internal" instead.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "jsonx.h"
#include "proposal.h"

static const char *const members[] = {
	"id", "tool", "request_id", "args_digest", "effect", "gates",
	"approvals_needed", "approvals", "state", "requested_at",
	"expires_at",
};

static const char *const states[] = {
	"pending", "approved", "denied", "expired", "used", NULL,
};

/* The tools vmmd may gate (approvals-design section 2). */
static const char *const gated_tools[] = {
	"vm_create", "vm_run", "vm_exec", "vm_destroy", "vm_snapshot_delete",
};

static const char *const codes[] = {
	"approval_required", "approval_denied", "approval_expired",
};

static int	fail(char *, size_t, const char *, ...)
		    __attribute__((format(printf, 3, 4)));

static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static int
is_lower_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int
is_digits(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* 2026-12-01T10:00:00Z, or with .mmm before the Z (vmmd's two forms). */
static int
is_rfc3339_utc(const char *s, size_t n)
{
	if (n != 20 && n != 24)
		return 0;
	if (!is_digits(s, 4) || s[4] != '-' || !is_digits(s + 5, 2) ||
	    s[7] != '-' || !is_digits(s + 8, 2) || s[10] != 'T' ||
	    !is_digits(s + 11, 2) || s[13] != ':' || !is_digits(s + 14, 2) ||
	    s[16] != ':' || !is_digits(s + 17, 2))
		return 0;
	if (n == 24 && (s[19] != '.' || !is_digits(s + 20, 3)))
		return 0;
	return s[n - 1] == 'Z';
}

/* tools.json's request_id: ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$ */
static int
is_request_id(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > PROPOSAL_REQUEST_ID_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9'))
			continue;
		if (i > 0 && (c == '.' || c == '_' || c == ':' || c == '-'))
			continue;
		return 0;
	}
	return 1;
}

/*
 * The effect quotes the agent's own arguments (a command may hold any
 * character): it is kept, but a control character other than newline and
 * tab, C0, DEL or C1 (U+0080-U+009F, terminal escapes too), becomes '?',
 * so that no terminal or client showing it to a person obeys it.  s is
 * UTF-8 (the IPC frame check made sure); out has room for n + 1 bytes.
 */
static void
effect_copy(char *out, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		if ((u[i] < 0x20 && u[i] != '\n' && u[i] != '\t') ||
		    u[i] == 0x7f)
			out[o++] = '?';
		else if (u[i] == 0xc2 && i + 1 < n && u[i + 1] >= 0x80 &&
		    u[i + 1] <= 0x9f) {
			out[o++] = '?';
			i++;
		} else
			out[o++] = s[i];
	}
	out[o] = '\0';
}

/* The string member key, its length in *n; -1 with err when not one. */
static int
get_string(struct json_object *o, const char *key, const char **s,
    size_t *n, char *err, size_t errlen)
{
	struct jsonx_err jerr;

	if (jsonx_get_string(o, key, 1, s, &jerr) != 1)
		return fail(err, errlen, "proposal.%s: %s", key, jerr.msg);
	*n = strlen(*s);
	return 0;
}

static int
get_int(struct json_object *o, const char *key, int64_t min, int64_t max,
    int *out, char *err, size_t errlen)
{
	struct jsonx_err jerr;
	int64_t v;

	if (jsonx_get_int64(o, key, 1, min, max, &v, &jerr) != 1)
		return fail(err, errlen, "proposal.%s: %s", key, jerr.msg);
	*out = (int)v;
	return 0;
}

static int
decode_gates(struct json_object *o, struct proposal *p, char *err,
    size_t errlen)
{
	struct json_object *a, *v;
	struct jsonx_err jerr;
	size_t i, j, n;
	int c;

	if (jsonx_get_array(o, "gates", 1, &a, &jerr) != 1)
		return fail(err, errlen, "proposal.gates: %s", jerr.msg);
	n = json_object_array_length(a);
	if (n == 0 || n > GATE_NCLASSES)
		return fail(err, errlen, "proposal.gates: %zu classes; between "
		    "1 and %d", n, GATE_NCLASSES);
	for (i = 0; i < n; i++) {
		v = json_object_array_get_idx(a, i);
		if (!json_object_is_type(v, json_type_string) ||
		    strlen(json_object_get_string(v)) !=
		    (size_t)json_object_get_string_len(v) ||
		    (c = gate_class_from_name(json_object_get_string(v))) ==
		    -1)
			return fail(err, errlen, "proposal.gates[%zu]: not a "
			    "gate class name", i);
		for (j = 0; j < i; j++)
			if (p->gates[j] == (enum gate_class)c)
				return fail(err, errlen, "proposal.gates[%zu]: "
				    "named twice", i);
		p->gates[i] = (enum gate_class)c;
	}
	p->ngates = n;
	return 0;
}

int
proposal_from_json(struct json_object *o, struct proposal *p, char *err,
    size_t errlen)
{
	struct jsonx_err jerr;
	const char *s = NULL;
	size_t n = 0, i;
	int known, st;

	memset(p, 0, sizeof(*p));
	if (!json_object_is_type(o, json_type_object))
		return fail(err, errlen, "proposal: not an object");
	json_object_object_foreach(o, key, val) {
		(void)val;
		known = 0;
		for (i = 0; i < sizeof(members) / sizeof(members[0]); i++)
			if (strcmp(key, members[i]) == 0)
				known = 1;
		if (!known)
			return fail(err, errlen, "proposal: unknown member "
			    "\"%.32s\"", key);
	}

	if (get_string(o, "id", &s, &n, err, errlen) == -1)
		return -1;
	if (n != PROPOSAL_ID_LEN || s[0] != 'p' || !is_lower_hex(s + 1,
	    n - 1))
		return fail(err, errlen, "proposal.id: not \"p\" and 32 "
		    "lowercase hex digits");
	memcpy(p->id, s, n);

	if (get_string(o, "tool", &s, &n, err, errlen) == -1)
		return -1;
	for (i = 0; i < sizeof(gated_tools) / sizeof(gated_tools[0]); i++)
		if (strcmp(s, gated_tools[i]) == 0)
			break;
	if (i == sizeof(gated_tools) / sizeof(gated_tools[0]))
		return fail(err, errlen, "proposal.tool: not a tool that may "
		    "need approval");
	memcpy(p->tool, s, n);

	if (get_string(o, "request_id", &s, &n, err, errlen) == -1)
		return -1;
	if (n != 0 && !is_request_id(s, n))
		return fail(err, errlen, "proposal.request_id: not \"\" nor a "
		    "request_id (at most %d characters)",
		    PROPOSAL_REQUEST_ID_MAX);
	memcpy(p->request_id, s, n);

	if (get_string(o, "args_digest", &s, &n, err, errlen) == -1)
		return -1;
	if (n != PROPOSAL_DIGEST_LEN || !is_lower_hex(s, n))
		return fail(err, errlen, "proposal.args_digest: not %d "
		    "lowercase hex digits", PROPOSAL_DIGEST_LEN);
	memcpy(p->args_digest, s, n);

	if (get_string(o, "effect", &s, &n, err, errlen) == -1)
		return -1;
	if (n == 0 || n > PROPOSAL_EFFECT_MAX)
		return fail(err, errlen, "proposal.effect: %zu bytes; between "
		    "1 and %d", n, PROPOSAL_EFFECT_MAX);
	effect_copy(p->effect, s, n);

	if (decode_gates(o, p, err, errlen) == -1)
		return -1;
	if (get_int(o, "approvals_needed", 1, GATE_NEED_MAX,
	    &p->approvals_needed, err, errlen) == -1 ||
	    get_int(o, "approvals", 0, PROPOSAL_APPROVALS_MAX, &p->approvals,
	    err, errlen) == -1)
		return -1;

	if (jsonx_get_enum(o, "state", 1, states, &st, &jerr) != 1)
		return fail(err, errlen, "proposal.state: %s", jerr.msg);
	p->state = (enum proposal_state)st;

	if (get_string(o, "requested_at", &s, &n, err, errlen) == -1)
		return -1;
	if (!is_rfc3339_utc(s, n))
		return fail(err, errlen, "proposal.requested_at: not an RFC "
		    "3339 UTC time");
	memcpy(p->requested_at, s, n);
	if (get_string(o, "expires_at", &s, &n, err, errlen) == -1)
		return -1;
	if (!is_rfc3339_utc(s, n))
		return fail(err, errlen, "proposal.expires_at: not an RFC "
		    "3339 UTC time");
	memcpy(p->expires_at, s, n);
	return 0;
}

const char *
proposal_state_name(enum proposal_state s)
{
	if ((int)s < 0 || (size_t)s >= sizeof(states) / sizeof(states[0]) - 1)
		return "pending";
	return states[s];
}

struct json_object *
proposal_to_json(const struct proposal *p)
{
	struct json_object *o = json_object_new_object();
	struct json_object *g = json_object_new_array();
	size_t i;

	json_object_object_add(o, "id", json_object_new_string(p->id));
	json_object_object_add(o, "tool", json_object_new_string(p->tool));
	json_object_object_add(o, "request_id",
	    json_object_new_string(p->request_id));
	json_object_object_add(o, "args_digest",
	    json_object_new_string(p->args_digest));
	json_object_object_add(o, "effect", json_object_new_string(p->effect));
	for (i = 0; i < p->ngates; i++)
		json_object_array_add(g, json_object_new_string(
		    gate_class_name(p->gates[i])));
	json_object_object_add(o, "gates", g);
	json_object_object_add(o, "approvals_needed",
	    json_object_new_int(p->approvals_needed));
	json_object_object_add(o, "approvals",
	    json_object_new_int(p->approvals));
	json_object_object_add(o, "state",
	    json_object_new_string(proposal_state_name(p->state)));
	json_object_object_add(o, "requested_at",
	    json_object_new_string(p->requested_at));
	json_object_object_add(o, "expires_at",
	    json_object_new_string(p->expires_at));
	return o;
}

const char *
proposal_code(const char *code)
{
	size_t i;

	for (i = 0; code != NULL && i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(code, codes[i]) == 0)
			return codes[i];
	return NULL;
}
