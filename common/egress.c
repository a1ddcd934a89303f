/*
 * Egress policies; see egress.h.  Linked into authd, authctl, vmmd, netd
 * and the fuzz targets; the decoder reads bytes a peer chose.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "egress.h"
#include "jsonx.h"

static int
cidr_cmp(const void *a, const void *b)
{
	const struct cidr *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (int)x->len - (int)y->len;
}

/* The entry itself when it is short and plain, so an error can name it
 * without echoing arbitrary peer bytes. */
static const char *
entry_text(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CIDR_TEXT_MAX)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		    s[i] == '/'))
			return NULL;
	return s;
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* One name entry into e->names[e->nnames]. */
static int
name_from_json(const char *s, size_t len, const char *path, const char *key,
    size_t i, struct egress *e, char *why, size_t whylen)
{
	char rule[128];

	if (strlen(s) != len || dnsname_check(s, len, 1,
	    e->names[e->nnames], rule, sizeof(rule)) == -1) {
		if (strlen(s) != len)
			snprintf(rule, sizeof(rule), "has a NUL byte");
		/* Name it when it is printable and not too long to read. */
		int plain = strlen(s) == len && len <= DNSNAME_MAX + 8;

		for (size_t k = 0; plain && k < len; k++)
			if ((unsigned char)s[k] < 0x20 ||
			    (unsigned char)s[k] > 0x7e || s[k] == '"' ||
			    s[k] == '\\')
				plain = 0;
		if (plain && len > 64)	/* long: its start names it */
			snprintf(why, whylen, "$.%s.%s[%zu]: \"%.40s...\" %s",
			    path, key, i, s, rule);
		else if (plain)
			snprintf(why, whylen, "$.%s.%s[%zu]: \"%s\" %s", path,
			    key, i, s, rule);
		else
			snprintf(why, whylen, "$.%s.%s[%zu]: the name %s", path,
			    key, i, rule);
		return -1;
	}
	e->nnames++;
	return 0;
}

static int
list_from_json(struct json_object *arr, const char *path, const char *key,
    size_t max, size_t max_names, struct egress *e, char *why,
    size_t whylen)
{
	size_t n = json_object_array_length(arr), nc = 0, nn = 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(arr, i);

		if (!json_object_is_type(v, json_type_string)) {
			snprintf(why, whylen, "$.%s.%s[%zu]: expected a string, "
			    "got %s", path, key, i, jsonx_type_name(v));
			return -1;
		}
		if (dnsname_like(json_object_get_string(v)))
			nn++;
		else
			nc++;
	}
	if (nc > max) {
		snprintf(why, whylen, "$.%s.%s: has %zu %s; the limit is "
		    "%zu (egress_max_cidrs)", path, key, nc, nn == 0 ?
		    "entries" : "prefixes", max);
		return -1;
	}
	if (nn > max_names) {
		snprintf(why, whylen, "$.%s.%s: has %zu names; the limit is "
		    "%zu (egress_max_names)", path, key, nn, max_names);
		return -1;
	}
	nc = 0;
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(arr, i);
		const char *s, *shown;

		s = json_object_get_string(v);
		if (dnsname_like(s)) {
			if (name_from_json(s, (size_t)json_object_get_string_len(
			    v), path, key, i, e, why, whylen) == -1)
				return -1;
			continue;
		}
		if (strlen(s) != (size_t)json_object_get_string_len(v) ||
		    cidr_parse(s, 0, &e->cidrs[nc]) == -1) {
			struct cidr c;
			const char *slash;

			shown = entry_text(s);
			/* Say which rule it broke when it is close. */
			slash = shown != NULL ? strchr(shown, '/') : NULL;
			if (slash != NULL) {
				char base[CIDR_TEXT_MAX + 1];
				char *end;
				long l = strtol(slash + 1, &end, 10);

				snprintf(base, sizeof(base), "%.*s",
				    (int)(slash - shown), shown);
				if (cidr_parse(base, 1, &c) == 0 &&
				    *end == '\0' && end != slash + 1 &&
				    l >= 0 && l <= 32 && (c.addr &
				    ~cidr_mask((uint8_t)l)) != 0) {
					char net[CIDR_TEXT_MAX + 1];

					c.len = (uint8_t)l;
					c.addr &= cidr_mask(c.len);
					cidr_format(&c, net, sizeof(net));
					snprintf(why, whylen, "$.%s.%s[%zu]: "
					    "%s has host bits set; its network "
					    "is %s", path, key, i, shown, net);
					return -1;
				}
			}
			snprintf(why, whylen, "$.%s.%s[%zu]: %s%s%sis not an IPv4 "
			    "prefix a.b.c.d/n%s", path, key, i,
			    shown != NULL ? "\"" : "", shown != NULL ? shown : "",
			    shown != NULL ? "\" " : "", strcmp(key, "allow") == 0 ?
			    " or a domain name" : "");
			return -1;
		}
		nc++;
	}
	e->ncidrs = nc;
	qsort(e->cidrs, nc, sizeof(e->cidrs[0]), cidr_cmp);
	{
		size_t out = 0;

		for (size_t i = 0; i < nc; i++) {
			if (out > 0 && cidr_cmp(&e->cidrs[out - 1],
			    &e->cidrs[i]) == 0)
				continue;
			e->cidrs[out++] = e->cidrs[i];
		}
		e->ncidrs = out;
	}
	qsort(e->names, e->nnames, sizeof(e->names[0]), name_cmp);
	{
		size_t out = 0;

		for (size_t i = 0; i < e->nnames; i++) {
			if (out > 0 && strcmp(e->names[out - 1],
			    e->names[i]) == 0)
				continue;
			if (out != i)
				memcpy(e->names[out], e->names[i],
				    sizeof(e->names[0]));
			out++;
		}
		e->nnames = out;
	}
	return 0;
}

int
egress_from_json(struct json_object *o, const char *path, size_t max,
    struct egress *out, char *why, size_t whylen)
{
	return egress_from_json_lim(o, path, max, EGRESS_MAX_NAMES, out, why,
	    whylen);
}

int
egress_from_json_lim(struct json_object *o, const char *path, size_t max,
    size_t max_names, struct egress *out, char *why, size_t whylen)
{
	static const char *const modes[] = { "public", "allowlist", NULL };
	struct json_object *arr = NULL;
	struct jsonx_err jerr;
	struct egress *e;
	const char *mode, *want;
	int r;

	if (max > EGRESS_MAX_CIDRS)
		max = EGRESS_MAX_CIDRS;
	if (max_names > EGRESS_MAX_NAMES)
		max_names = EGRESS_MAX_NAMES;
	if (o == NULL || !json_object_is_type(o, json_type_object)) {
		snprintf(why, whylen, "$.%s: expected an object", path);
		return -1;
	}
	json_object_object_foreach(o, k, v) {
		(void)v;
		if (strcmp(k, "mode") != 0 && strcmp(k, "allow") != 0 &&
		    strcmp(k, "deny") != 0) {
			snprintf(why, whylen, "$.%s: has an unknown key "
			    "(known: mode, allow, deny)", path);
			return -1;
		}
	}
	if (jsonx_get_string(o, "mode", 1, &mode, &jerr) != 1) {
		snprintf(why, whylen, "$.%s: %s", path, jerr.msg);
		return -1;
	}
	for (r = 0; modes[r] != NULL; r++)
		if (strcmp(mode, modes[r]) == 0)
			break;
	if (modes[r] == NULL) {
		snprintf(why, whylen, "$.%s.mode: must be \"public\" or "
		    "\"allowlist\"", path);
		return -1;
	}
	want = r == EGRESS_PUBLIC ? "deny" : "allow";
	if (json_object_object_get_ex(o, r == EGRESS_PUBLIC ? "allow" :
	    "deny", NULL)) {
		snprintf(why, whylen, "$.%s: mode %s takes \"%s\", not \"%s\"",
		    path, modes[r], want, r == EGRESS_PUBLIC ? "allow" :
		    "deny");
		return -1;
	}
	if (json_object_object_get_ex(o, want, &arr) &&
	    !json_object_is_type(arr, json_type_array)) {
		snprintf(why, whylen, "$.%s.%s: expected an array, got %s",
		    path, want, jsonx_type_name(arr));
		return -1;
	}
	if (r == EGRESS_ALLOWLIST && arr == NULL) {
		snprintf(why, whylen, "$.%s: mode allowlist needs \"allow\", "
		    "the prefixes and names a VM may reach", path);
		return -1;
	}
	if ((e = calloc(1, sizeof(*e))) == NULL) {
		snprintf(why, whylen, "$.%s: out of memory", path);
		return -1;
	}
	e->mode = (enum egress_mode)r;
	if (arr != NULL &&
	    list_from_json(arr, path, want, max, max_names, e, why,
	    whylen) == -1) {
		free(e);
		return -1;
	}
	*out = *e;
	free(e);
	return 0;
}

struct json_object *
egress_to_json(const struct egress *e)
{
	struct json_object *o, *arr;
	char buf[CIDR_TEXT_MAX + 1];

	if ((o = json_object_new_object()) == NULL)
		return NULL;
	if ((arr = json_object_new_array()) == NULL) {
		json_object_put(o);
		return NULL;
	}
	json_object_object_add(o, "mode", json_object_new_string(
	    e->mode == EGRESS_ALLOWLIST ? "allowlist" : "public"));
	for (size_t i = 0; i < e->ncidrs; i++) {
		cidr_format(&e->cidrs[i], buf, sizeof(buf));
		json_object_array_add(arr, json_object_new_string(buf));
	}
	for (size_t i = 0; i < e->nnames; i++)
		json_object_array_add(arr, json_object_new_string(
		    e->names[i]));
	json_object_object_add(o, e->mode == EGRESS_ALLOWLIST ? "allow" :
	    "deny", arr);
	return o;
}

int
egress_equal(const struct egress *a, const struct egress *b)
{
	if (a->mode != b->mode || a->ncidrs != b->ncidrs)
		return 0;
	for (size_t i = 0; i < a->ncidrs; i++)
		if (cidr_cmp(&a->cidrs[i], &b->cidrs[i]) != 0)
			return 0;
	if (a->nnames != b->nnames)
		return 0;
	for (size_t i = 0; i < a->nnames; i++)
		if (strcmp(a->names[i], b->names[i]) != 0)
			return 0;
	return 1;
}

int
egress_name_allowed(const struct egress *e, const char *q)
{
	for (size_t i = 0; i < e->nnames; i++)
		if (dnsname_match(e->names[i], q))
			return e->mode == EGRESS_ALLOWLIST;
	return e->mode == EGRESS_PUBLIC;
}

/* Whether c lies inside one of the prefixes of e. */
static int
within_any(const struct cidr *c, const struct egress *e)
{
	for (size_t i = 0; i < e->ncidrs; i++)
		if (cidr_within(c, &e->cidrs[i]))
			return 1;
	return 0;
}

int
egress_narrows(const struct egress *ws, const struct egress *vm, char *why,
    size_t whylen)
{
	char a[CIDR_TEXT_MAX + 1], b[CIDR_TEXT_MAX + 1];

	if (ws->mode == EGRESS_ALLOWLIST && vm->mode == EGRESS_PUBLIC) {
		snprintf(why, whylen, "egress.mode: public would widen the "
		    "workspace's allowlist");
		return 0;
	}
	if (ws->mode == EGRESS_ALLOWLIST) {
		for (size_t i = 0; i < vm->ncidrs; i++) {
			if (within_any(&vm->cidrs[i], ws))
				continue;
			cidr_format(&vm->cidrs[i], a, sizeof(a));
			snprintf(why, whylen, "egress.allow: %s is not inside "
			    "the workspace's allowlist", a);
			return 0;
		}
		for (size_t i = 0; i < vm->nnames; i++) {
			size_t j;

			for (j = 0; j < ws->nnames; j++)
				if (dnsname_covers(ws->names[j],
				    vm->names[i]))
					break;
			if (j < ws->nnames)
				continue;
			snprintf(why, whylen, "egress.allow: %s is not "
			    "covered by a name of the workspace's allowlist%s",
			    vm->names[i], vm->names[i][0] == '*' ? " (a "
			    "wildcard needs a wildcard that covers it)" : "");
			return 0;
		}
		return 1;
	}
	/* A name resolves to any address, denied prefixes too, and one
	 * an allowlist holds may be one the workspace denies. */
	if ((ws->ncidrs > 0 || ws->nnames > 0) &&
	    vm->mode == EGRESS_ALLOWLIST && vm->nnames > 0) {
		snprintf(why, whylen, "egress.allow: %s may resolve into "
		    "what the workspace denies; names need a workspace "
		    "that is public without a deny list, or an allowlist",
		    vm->names[0]);
		return 0;
	}
	/* The names it denies, the VM denies too (or a wider name). */
	for (size_t i = 0; i < ws->nnames && vm->mode == EGRESS_PUBLIC;
	    i++) {
		size_t j;

		for (j = 0; j < vm->nnames; j++)
			if (dnsname_covers(vm->names[j], ws->names[i]))
				break;
		if (j < vm->nnames)
			continue;
		snprintf(why, whylen, "egress.deny: the workspace denies %s; "
		    "a VM's policy must deny it too", ws->names[i]);
		return 0;
	}
	/* The workspace is public less ws->cidrs. */
	for (size_t i = 0; i < ws->ncidrs; i++) {
		if (vm->mode == EGRESS_PUBLIC) {
			if (within_any(&ws->cidrs[i], vm))
				continue;
			cidr_format(&ws->cidrs[i], a, sizeof(a));
			snprintf(why, whylen, "egress.deny: the workspace "
			    "denies %s; a VM's policy must deny it too", a);
			return 0;
		}
		for (size_t j = 0; j < vm->ncidrs; j++) {
			if (!cidr_overlap(&vm->cidrs[j], &ws->cidrs[i]))
				continue;
			cidr_format(&vm->cidrs[j], a, sizeof(a));
			cidr_format(&ws->cidrs[i], b, sizeof(b));
			snprintf(why, whylen, "egress.allow: %s reaches into "
			    "%s, which the workspace denies", a, b);
			return 0;
		}
	}
	return 1;
}

void
egress_describe(const struct egress *e, char *buf, size_t len)
{
	if (e->mode == EGRESS_ALLOWLIST && e->nnames > 0)
		snprintf(buf, len, "allowlist of %zu prefix%s and %zu name%s",
		    e->ncidrs, e->ncidrs == 1 ? "" : "es", e->nnames,
		    e->nnames == 1 ? "" : "s");
	else if (e->mode == EGRESS_ALLOWLIST)
		snprintf(buf, len, "allowlist of %zu prefix%s", e->ncidrs,
		    e->ncidrs == 1 ? "" : "es");
	else if (e->nnames > 0)
		snprintf(buf, len, "public, denying %zu prefix%s and %zu "
		    "name%s", e->ncidrs, e->ncidrs == 1 ? "" : "es",
		    e->nnames, e->nnames == 1 ? "" : "s");
	else if (e->ncidrs > 0)
		snprintf(buf, len, "public, denying %zu prefix%s", e->ncidrs,
		    e->ncidrs == 1 ? "" : "es");
	else
		snprintf(buf, len, "public");
}

/* Appends c to e, 0; -1 when e is full. */
static int
push(struct egress *e, const struct cidr *c)
{
	if (e->ncidrs >= EGRESS_MAX_CIDRS)
		return -1;
	e->cidrs[e->ncidrs++] = *c;
	return 0;
}

/*
 * c less every prefix of d, appended to out as prefixes: where one of d
 * lies strictly inside c, c splits into the halves that miss it.
 */
static int
subtract(const struct cidr *c, const struct egress *d, struct egress *out)
{
	for (size_t i = 0; i < d->ncidrs; i++) {
		const struct cidr *x = &d->cidrs[i];

		if (cidr_within(c, x))
			return 0;	/* all of c is denied */
		if (cidr_within(x, c)) {
			struct cidr lo, hi;

			lo.len = hi.len = (uint8_t)(c->len + 1);
			lo.addr = c->addr;
			hi.addr = c->addr | (1u << (31 - c->len));
			if (subtract(&lo, d, out) == -1 ||
			    subtract(&hi, d, out) == -1)
				return -1;
			return 0;
		}
	}
	return push(out, c);
}

static void
normalise(struct egress *e)
{
	size_t out = 0;

	qsort(e->cidrs, e->ncidrs, sizeof(e->cidrs[0]), cidr_cmp);
	for (size_t i = 0; i < e->ncidrs; i++) {
		if (out > 0 && cidr_within(&e->cidrs[i], &e->cidrs[out - 1]))
			continue;
		e->cidrs[out++] = e->cidrs[i];
	}
	e->ncidrs = out;
	qsort(e->names, e->nnames, sizeof(e->names[0]), name_cmp);
	out = 0;
	for (size_t i = 0; i < e->nnames; i++) {
		if (out > 0 && strcmp(e->names[out - 1], e->names[i]) == 0)
			continue;
		if (out != i)
			memcpy(e->names[out], e->names[i], sizeof(e->names[0]));
		out++;
	}
	e->nnames = out;
}

/* Each name of from that one of by's covers, into out; -1 when full. */
static int
names_within(const struct egress *from, const struct egress *by,
    struct egress *out)
{
	for (size_t i = 0; i < from->nnames; i++)
		for (size_t j = 0; j < by->nnames; j++) {
			if (!dnsname_covers(by->names[j], from->names[i]))
				continue;
			if (out->nnames == EGRESS_MAX_NAMES)
				return -1;
			memcpy(out->names[out->nnames++], from->names[i],
			    sizeof(out->names[0]));
			break;
		}
	return 0;
}

int
egress_intersect(const struct egress *a, const struct egress *b,
    struct egress *out)
{
	const struct egress *al, *other;

	memset(out, 0, sizeof(*out));
	if (a->mode == EGRESS_PUBLIC && b->mode == EGRESS_PUBLIC) {
		/* Public less what either denies. */
		out->mode = EGRESS_PUBLIC;
		for (size_t i = 0; i < a->ncidrs; i++)
			if (push(out, &a->cidrs[i]) == -1)
				goto full;
		for (size_t i = 0; i < b->ncidrs; i++)
			if (push(out, &b->cidrs[i]) == -1)
				goto full;
		for (size_t i = 0; i < a->nnames + b->nnames; i++) {
			const char *n = i < a->nnames ? a->names[i] :
			    b->names[i - a->nnames];
			size_t j;

			for (j = 0; j < out->nnames; j++)
				if (strcmp(out->names[j], n) == 0)
					break;
			if (j < out->nnames)
				continue;
			if (out->nnames == EGRESS_MAX_NAMES)
				goto full;
			memcpy(out->names[out->nnames++], n,
			    sizeof(out->names[0]));
		}
		normalise(out);
		return 0;
	}
	out->mode = EGRESS_ALLOWLIST;
	if (a->mode == EGRESS_ALLOWLIST && b->mode == EGRESS_ALLOWLIST) {
		/* Two prefixes meet only when one holds the other. */
		for (size_t i = 0; i < a->ncidrs; i++)
			for (size_t j = 0; j < b->ncidrs; j++) {
				const struct cidr *x = &a->cidrs[i];
				const struct cidr *y = &b->cidrs[j];

				if (cidr_within(x, y) ? push(out, x) == -1 :
				    cidr_within(y, x) ? push(out, y) == -1 : 0)
					goto full;
			}
		/* A name both allow: one covered by a name of the other. */
		if (names_within(a, b, out) == -1 ||
		    names_within(b, a, out) == -1)
			goto full;
		normalise(out);
		return 0;
	}
	/*
	 * An allowlist less a deny list.  Its names go when the deny list
	 * holds anything: a name may resolve into a denied prefix, and
	 * netd opens what a name resolves to whatever the prefixes say (a
	 * VM allowlist with names under a workspace that denies anything
	 * is refused for the same reason).  Under public denying nothing,
	 * the allowlist stays whole, names included: a public VM whose
	 * workspace becomes an allowlist of names resolves them.
	 */
	al = a->mode == EGRESS_ALLOWLIST ? a : b;
	other = al == a ? b : a;
	for (size_t i = 0; i < al->ncidrs; i++)
		if (subtract(&al->cidrs[i], other, out) == -1)
			goto full;
	if (other->ncidrs == 0 && other->nnames == 0) {
		memcpy(out->names, al->names, al->nnames *
		    sizeof(out->names[0]));
		out->nnames = al->nnames;
	}
	normalise(out);
	return 0;
 full:
	/* Never wider than both: nothing at all. */
	memset(out, 0, sizeof(*out));
	out->mode = EGRESS_ALLOWLIST;
	return -1;
}
