/*
 * The JSON Schema subset validator; see schema.h.  Runs in mcpd and vmmd,
 * on every tool call's arguments and every result.  The tool registry
 * built on it is toolreg.c.
 */
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "pattern.h"
#include "schema.h"
#include "utf8.h"

#define T_NULL		0x01
#define T_BOOLEAN	0x02
#define T_INTEGER	0x04
#define T_NUMBER	0x08	/* integer or not */
#define T_STRING	0x10
#define T_ARRAY		0x20
#define T_OBJECT	0x40

/* Room for the path of the value being looked at, "$.env.PATH" style. */
#define SCHEMA_PATH_MAX	256

struct prop {
	const char	*name;
	struct schema	*schema;
};

struct schema {
	json_object	*src;		/* a reference; strings below point in */
	unsigned	 types;		/* 0: any type */
	json_object	*enum_values;
	json_object	*const_value;
	int		 has_const;
	/*
	 * Rendered at compile time: json-c caches a serialization inside the
	 * object, so doing it while validating would write to shared state.
	 */
	char		*allowed_text;
	int		 has_min, has_max;
	int64_t		 min, max;
	int64_t		 min_len, max_len;	/* -1 when absent */
	int64_t		 min_items, max_items;
	int64_t		 max_props;
	int		 has_pattern;
	int		 has_regex;	/* pattern holds a compiled regex */
	regex_t		 pattern;
	struct pattern	*fast;		/* the same, when pattern.c can */
	char		*pattern_text;	/* printable, for messages */
	struct prop	*props;		/* in the schema's order, for messages */
	struct prop	*byname;	/* the same sorted by name, for lookups */
	size_t		 nprops;
	const char	**required;
	size_t		 nrequired;
	int		 additional_forbidden;
	struct schema	*additional;
	struct schema	*property_names;
	struct schema	*items;
	struct schema	**one_of;
	size_t		 n_one_of;
	struct schema	**any_of;
	size_t		 n_any_of;
};

/* The validation walk: where it is, and where the first failure was. */
struct walk {
	char		 path[SCHEMA_PATH_MAX];
	size_t		 pathlen;
	char		*err;
	size_t		 errlen;
	size_t		 fail_depth;	/* pathlen at the failure */
};

static const struct {
	const char	*name;
	unsigned	 bit;
} type_names[] = {
	/* In the order messages list them: "expected integer or null". */
	{ "integer", T_INTEGER },
	{ "number", T_NUMBER },
	{ "string", T_STRING },
	{ "boolean", T_BOOLEAN },
	{ "object", T_OBJECT },
	{ "array", T_ARRAY },
	{ "null", T_NULL },
};

static struct schema *compile(json_object *, const char *, char *, size_t);
static int	validate(const struct schema *, json_object *, struct walk *);

static void __attribute__((format(printf, 3, 4)))
say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list	 ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	utf8_scrub(err);
}

void
schema_free(struct schema *s)
{
	size_t	 i;

	if (s == NULL)
		return;
	for (i = 0; i < s->nprops; i++)
		schema_free(s->props[i].schema);
	free(s->props);
	free(s->byname);
	free(s->required);
	schema_free(s->additional);
	schema_free(s->property_names);
	schema_free(s->items);
	for (i = 0; i < s->n_one_of; i++)
		schema_free(s->one_of[i]);
	free(s->one_of);
	for (i = 0; i < s->n_any_of; i++)
		schema_free(s->any_of[i]);
	free(s->any_of);
	if (s->has_regex)
		regfree(&s->pattern);
	pattern_free(s->fast);
	free(s->allowed_text);
	free(s->pattern_text);
	json_object_put(s->src);
	free(s);
}

static int
compile_types(struct schema *s, json_object *v, const char *where, char *err,
    size_t errlen)
{
	json_object *one;
	size_t	 i, j, n;
	const char *name;

	n = json_object_is_type(v, json_type_array) ?
	    json_object_array_length(v) : 1;
	if (n == 0)
		goto bad;
	for (i = 0; i < n; i++) {
		one = json_object_is_type(v, json_type_array) ?
		    json_object_array_get_idx(v, i) : v;
		if (!json_object_is_type(one, json_type_string))
			goto bad;
		name = json_object_get_string(one);
		for (j = 0; j < sizeof(type_names) / sizeof(type_names[0]);
		    j++)
			if (strcmp(name, type_names[j].name) == 0)
				break;
		if (j == sizeof(type_names) / sizeof(type_names[0]))
			goto bad;
		s->types |= type_names[j].bit;
	}
	return 0;
 bad:
	say(err, errlen, "schema %s: type must be a type name or a non-empty "
	    "array of them", where);
	return -1;
}

static int
compile_count(json_object *v, const char *kw, const char *where,
    int64_t *out, char *err, size_t errlen)
{
	if (!json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) < 0) {
		say(err, errlen, "schema %s: %s must be a non-negative integer",
		    where, kw);
		return -1;
	}
	*out = json_object_get_int64(v);
	return 0;
}

static int
compile_list(json_object *v, const char *kw, const char *where,
    struct schema ***out, size_t *nout, char *err, size_t errlen)
{
	char	 sub[SCHEMA_PATH_MAX];
	size_t	 i, n;

	if (!json_object_is_type(v, json_type_array) ||
	    (n = json_object_array_length(v)) == 0) {
		say(err, errlen, "schema %s: %s must be a non-empty array",
		    where, kw);
		return -1;
	}
	if ((*out = calloc(n, sizeof(**out))) == NULL) {
		say(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < n; i++) {
		snprintf(sub, sizeof(sub), "%s/%s/%zu", where, kw, i);
		if (((*out)[i] = compile(json_object_array_get_idx(v, i), sub,
		    err, errlen)) == NULL)
			return -1;
		(*nout)++;
	}
	return 0;
}

static int
prop_cmp(const void *a, const void *b)
{
	return strcmp(((const struct prop *)a)->name,
	    ((const struct prop *)b)->name);
}

static int
compile_properties(struct schema *s, json_object *v, const char *where,
    char *err, size_t errlen)
{
	char	 sub[SCHEMA_PATH_MAX];
	size_t	 n;

	if (!json_object_is_type(v, json_type_object)) {
		say(err, errlen, "schema %s: properties must be an object",
		    where);
		return -1;
	}
	n = (size_t)json_object_object_length(v);
	if ((s->props = calloc(n ? n : 1, sizeof(*s->props))) == NULL) {
		say(err, errlen, "out of memory");
		return -1;
	}
	json_object_object_foreach(v, name, sub_schema) {
		snprintf(sub, sizeof(sub), "%s/properties/%s", where, name);
		s->props[s->nprops].name = name;
		if ((s->props[s->nprops].schema = compile(sub_schema, sub, err,
		    errlen)) == NULL)
			return -1;
		s->nprops++;
	}
	if ((s->byname = calloc(n ? n : 1, sizeof(*s->byname))) == NULL) {
		say(err, errlen, "out of memory");
		return -1;
	}
	memcpy(s->byname, s->props, n * sizeof(*s->byname));
	qsort(s->byname, n, sizeof(*s->byname), prop_cmp);
	return 0;
}

static int
compile_required(struct schema *s, json_object *v, const char *where,
    char *err, size_t errlen)
{
	json_object *name;
	size_t	 i, n;

	if (!json_object_is_type(v, json_type_array))
		goto bad;
	n = json_object_array_length(v);
	if ((s->required = calloc(n ? n : 1, sizeof(*s->required))) == NULL) {
		say(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < n; i++) {
		name = json_object_array_get_idx(v, i);
		if (!json_object_is_type(name, json_type_string))
			goto bad;
		s->required[s->nrequired++] = json_object_get_string(name);
	}
	return 0;
 bad:
	say(err, errlen, "schema %s: required must be an array of names",
	    where);
	return -1;
}

static int
compile_pattern(struct schema *s, json_object *v, const char *where,
    char *err, size_t errlen)
{
	const char *p;
	size_t	 n, i, o;
	unsigned char c;
	int	 r;

	if (!json_object_is_type(v, json_type_string))
		goto bad;
	p = json_object_get_string(v);
	n = strlen(p);
	/* JSON Schema patterns are unanchored searches; ERE's are too. */
	if (n < 2 || p[0] != '^' || p[n - 1] != '$')
		goto bad;
	if ((r = regcomp(&s->pattern, p, REG_EXTENDED | REG_NOSUB)) != 0) {
		say(err, errlen, "schema %s: pattern %s is not a POSIX ERE "
		    "(regcomp error %d)", where, p, r);
		return -1;
	}
	s->has_pattern = 1;
	s->has_regex = 1;
	/* regcomp decides what the pattern means; pattern.c only runs it. */
	s->fast = pattern_compile(p);
	/*
	 * Then the regex goes: glibc's compiled form of a bounded repeat such
	 * as {0,63} is tens of KiB, and tools.json's hundred patterns held
	 * 4.5 MiB of each validating daemon's heap for nothing.
	 */
	if (s->fast != NULL) {
		regfree(&s->pattern);
		s->has_regex = 0;
	}
	/* Control characters are shown as escapes, never sent raw. */
	if ((s->pattern_text = malloc(n * 4 + 1)) == NULL) {
		say(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0, o = 0; i < n; i++) {
		c = p[i];
		if (c == '\n')
			o += sprintf(s->pattern_text + o, "\\n");
		else if (c == '\r')
			o += sprintf(s->pattern_text + o, "\\r");
		else if (c < 0x20 || c == 0x7f)
			o += sprintf(s->pattern_text + o, "\\x%02x", c);
		else
			s->pattern_text[o++] = c;
	}
	s->pattern_text[o] = '\0';
	return 0;
 bad:
	say(err, errlen, "schema %s: pattern must be a string anchored with "
	    "^ and $", where);
	return -1;
}

static int
compile_bound(json_object *v, const char *kw, const char *where,
    int64_t *out, int *has, char *err, size_t errlen)
{
	if (!json_object_is_type(v, json_type_int)) {
		say(err, errlen, "schema %s: %s must be an integer", where, kw);
		return -1;
	}
	*out = json_object_get_int64(v);
	*has = 1;
	return 0;
}

/* "must be X" / "must be one of X, Y" text for const and enum. */
static int
render_allowed(struct schema *s, char *err, size_t errlen)
{
	char	 buf[512];
	size_t	 i, n, used = 0;

	buf[0] = '\0';
	if (s->has_const)
		snprintf(buf, sizeof(buf), "must be %s",
		    json_object_to_json_string_ext(s->const_value,
		    JSON_C_TO_STRING_PLAIN));
	else {
		n = json_object_array_length(s->enum_values);
		for (i = 0; i < n && used < sizeof(buf); i++)
			used += snprintf(buf + used, sizeof(buf) - used,
			    "%s%s", i ? ", " : "must be one of ",
			    json_object_to_json_string_ext(
			    json_object_array_get_idx(s->enum_values, i),
			    JSON_C_TO_STRING_PLAIN));
	}
	if ((s->allowed_text = strdup(buf)) == NULL) {
		say(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static struct schema *
compile(json_object *js, const char *where, char *err, size_t errlen)
{
	struct schema *s;
	char	 sub[SCHEMA_PATH_MAX];
	size_t	 i;
	int	 r = 0, found;

	if (!json_object_is_type(js, json_type_object)) {
		say(err, errlen, "schema %s: must be an object", where);
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		say(err, errlen, "out of memory");
		return NULL;
	}
	s->src = json_object_get(js);
	s->min_len = s->max_len = -1;
	s->min_items = s->max_items = -1;
	s->max_props = -1;

	json_object_object_foreach(js, kw, v) {
		if (strcmp(kw, "description") == 0 ||
		    strcmp(kw, "title") == 0 || strcmp(kw, "default") == 0)
			continue;
		else if (strcmp(kw, "type") == 0)
			r = compile_types(s, v, where, err, errlen);
		else if (strcmp(kw, "properties") == 0)
			r = compile_properties(s, v, where, err, errlen);
		else if (strcmp(kw, "required") == 0)
			r = compile_required(s, v, where, err, errlen);
		else if (strcmp(kw, "additionalProperties") == 0) {
			if (json_object_is_type(v, json_type_boolean))
				s->additional_forbidden =
				    !json_object_get_boolean(v);
			else {
				snprintf(sub, sizeof(sub),
				    "%s/additionalProperties", where);
				if ((s->additional = compile(v, sub, err,
				    errlen)) == NULL)
					r = -1;
			}
		} else if (strcmp(kw, "propertyNames") == 0) {
			snprintf(sub, sizeof(sub), "%s/propertyNames", where);
			if ((s->property_names = compile(v, sub, err,
			    errlen)) == NULL)
				r = -1;
		} else if (strcmp(kw, "maxProperties") == 0)
			r = compile_count(v, kw, where, &s->max_props, err,
			    errlen);
		else if (strcmp(kw, "enum") == 0) {
			if (!json_object_is_type(v, json_type_array) ||
			    json_object_array_length(v) == 0) {
				say(err, errlen, "schema %s: enum must be a "
				    "non-empty array", where);
				r = -1;
			}
			s->enum_values = v;
		} else if (strcmp(kw, "const") == 0) {
			s->const_value = v;
			s->has_const = 1;
		} else if (strcmp(kw, "minimum") == 0)
			r = compile_bound(v, kw, where, &s->min, &s->has_min,
			    err, errlen);
		else if (strcmp(kw, "maximum") == 0)
			r = compile_bound(v, kw, where, &s->max, &s->has_max,
			    err, errlen);
		else if (strcmp(kw, "minLength") == 0)
			r = compile_count(v, kw, where, &s->min_len, err,
			    errlen);
		else if (strcmp(kw, "maxLength") == 0)
			r = compile_count(v, kw, where, &s->max_len, err,
			    errlen);
		else if (strcmp(kw, "minItems") == 0)
			r = compile_count(v, kw, where, &s->min_items, err,
			    errlen);
		else if (strcmp(kw, "maxItems") == 0)
			r = compile_count(v, kw, where, &s->max_items, err,
			    errlen);
		else if (strcmp(kw, "pattern") == 0)
			r = compile_pattern(s, v, where, err, errlen);
		else if (strcmp(kw, "items") == 0) {
			snprintf(sub, sizeof(sub), "%s/items", where);
			if ((s->items = compile(v, sub, err, errlen)) == NULL)
				r = -1;
		} else if (strcmp(kw, "oneOf") == 0)
			r = compile_list(v, kw, where, &s->one_of,
			    &s->n_one_of, err, errlen);
		else if (strcmp(kw, "anyOf") == 0)
			r = compile_list(v, kw, where, &s->any_of,
			    &s->n_any_of, err, errlen);
		else {
			say(err, errlen, "schema %s: unsupported keyword %s",
			    where, kw);
			r = -1;
		}
		if (r == -1)
			goto fail;
	}

	if ((s->has_const || s->enum_values != NULL) &&
	    render_allowed(s, err, errlen) == -1)
		goto fail;
	/* A required name the schema cannot describe is a typo. */
	for (i = 0; s->props != NULL && i < s->nrequired; i++) {
		found = 0;
		for (size_t j = 0; j < s->nprops; j++)
			if (strcmp(s->props[j].name, s->required[i]) == 0)
				found = 1;
		if (!found) {
			say(err, errlen, "schema %s: required property %s is "
			    "not in properties", where, s->required[i]);
			goto fail;
		}
	}
	return s;
 fail:
	schema_free(s);
	return NULL;
}

struct schema *
schema_compile(json_object *js, char *err, size_t errlen)
{
	return compile(js, "#", err, errlen);
}

/*
 * Path handling for the walk: push a member or an index, pop it after.  A
 * path too long for the buffer ends in "..." and stops growing.
 */
static void
append(struct walk *w, const char *s, size_t len)
{
	if (w->pathlen + len < sizeof(w->path)) {
		memcpy(w->path + w->pathlen, s, len);
		w->pathlen += len;
		w->path[w->pathlen] = '\0';
		return;
	}
	memcpy(w->path + sizeof(w->path) - 4, "...", 4);
	w->pathlen = sizeof(w->path) - 1;
}

static size_t
push_member(struct walk *w, const char *name)
{
	size_t	 saved = w->pathlen, i;
	int	 plain = (name[0] != '\0');
	char	 esc[8];
	unsigned char c;

	for (i = 0; name[i] != '\0'; i++)
		if (!(name[i] == '_' || (name[i] >= 'a' && name[i] <= 'z') ||
		    (name[i] >= 'A' && name[i] <= 'Z') ||
		    (name[i] >= '0' && name[i] <= '9')))
			plain = 0;
	if (plain) {
		append(w, ".", 1);
		append(w, name, strlen(name));
		return saved;
	}
	/* Quote odd names; control bytes never reach a message. */
	append(w, "[\"", 2);
	for (i = 0; name[i] != '\0'; i++) {
		c = name[i];
		if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
			snprintf(esc, sizeof(esc), "\\x%02x", c);
			append(w, esc, 4);
		} else
			append(w, (const char *)&c, 1);
	}
	append(w, "\"]", 2);
	return saved;
}

static size_t
push_index(struct walk *w, size_t idx)
{
	size_t	 saved = w->pathlen;
	char	 buf[32];
	int	 n;

	n = snprintf(buf, sizeof(buf), "[%zu]", idx);
	append(w, buf, (size_t)n);
	return saved;
}

static void
pop(struct walk *w, size_t saved)
{
	w->pathlen = saved;
	w->path[saved] = '\0';
}

static int __attribute__((format(printf, 2, 3)))
reject(struct walk *w, const char *fmt, ...)
{
	char	 reason[512];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	say(w->err, w->errlen, "%s: %s", w->path, reason);
	w->fail_depth = w->pathlen;
	return -1;
}

static unsigned
type_bit(json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null:
		return T_NULL;
	case json_type_boolean:
		return T_BOOLEAN;
	case json_type_int:
		return T_INTEGER | T_NUMBER;
	case json_type_double:
		return T_NUMBER;
	case json_type_string:
		return T_STRING;
	case json_type_array:
		return T_ARRAY;
	case json_type_object:
		return T_OBJECT;
	}
	return 0;
}

static int
check_type(const struct schema *s, json_object *v, struct walk *w)
{
	char	 want[96];
	size_t	 i, used = 0;

	if (s->types == 0 || (type_bit(v) & s->types) != 0)
		return 0;
	want[0] = '\0';
	for (i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
		if (s->types & type_names[i].bit)
			used += snprintf(want + used, sizeof(want) - used,
			    "%s%s", used ? " or " : "", type_names[i].name);
	return reject(w, "expected %s, got %s", want, jsonx_type_name(v));
}

static int
check_enum(const struct schema *s, json_object *v, struct walk *w)
{
	size_t	 i, n;

	if (s->has_const && !json_object_equal(v, s->const_value))
		return reject(w, "%s", s->allowed_text);
	if (s->enum_values == NULL)
		return 0;
	n = json_object_array_length(s->enum_values);
	for (i = 0; i < n; i++)
		if (json_object_equal(v,
		    json_object_array_get_idx(s->enum_values, i)))
			return 0;
	return reject(w, "%s", s->allowed_text);
}

static int
check_number(const struct schema *s, json_object *v, struct walk *w)
{
	int64_t	 i;
	double	 d;

	if (json_object_is_type(v, json_type_int)) {
		i = json_object_get_int64(v);
		/* A uint64 past INT64_MAX reads back clamped to INT64_MAX. */
		if (s->has_max && (i > s->max || (i == INT64_MAX &&
		    json_object_get_uint64(v) > (uint64_t)INT64_MAX)))
			return reject(w, "must be at most %lld",
			    (long long)s->max);
		if (s->has_min && i < s->min)
			return reject(w, "must be at least %lld",
			    (long long)s->min);
	} else if (json_object_is_type(v, json_type_double)) {
		d = json_object_get_double(v);
		if (s->has_max && !(d <= (double)s->max))
			return reject(w, "must be at most %lld",
			    (long long)s->max);
		if (s->has_min && !(d >= (double)s->min))
			return reject(w, "must be at least %lld",
			    (long long)s->min);
	}
	return 0;
}

static int
check_string(const struct schema *s, json_object *v, struct walk *w)
{
	const char *str = json_object_get_string(v);
	size_t	 len = (size_t)json_object_get_string_len(v), cps;

	if (s->min_len >= 0 || s->max_len >= 0) {
		cps = utf8_count(str, len);
		if (s->min_len >= 0 && cps < (uint64_t)s->min_len)
			return reject(w, "must be at least %lld character%s "
			    "long", (long long)s->min_len,
			    s->min_len == 1 ? "" : "s");
		if (s->max_len >= 0 && cps > (uint64_t)s->max_len)
			return reject(w, "must be at most %lld character%s "
			    "long", (long long)s->max_len,
			    s->max_len == 1 ? "" : "s");
	}
	if (s->has_pattern) {
		if (strlen(str) != len)
			return reject(w, "must not contain NUL characters");
		if (s->fast != NULL ? !pattern_match(s->fast, str, len) :
		    regexec(&s->pattern, str, 0, NULL, 0) != 0)
			return reject(w, "must match the pattern %s",
			    s->pattern_text);
	}
	return 0;
}

static const struct schema *
find_prop(const struct schema *s, const char *name)
{
	const struct prop key = { name, NULL }, *p;

	if (s->nprops == 0)
		return NULL;
	p = bsearch(&key, s->byname, s->nprops, sizeof(*p), prop_cmp);
	return p != NULL ? p->schema : NULL;
}

/* Names first: a misspelt name is better reported than the "missing" one. */
static int
check_names(const struct schema *s, json_object *v, struct walk *w)
{
	char	 allowed[256];
	json_object *key;
	size_t	 saved, i, used = 0;
	int	 r;

	json_object_object_foreach(v, name, val) {
		(void)val;
		if (s->property_names != NULL) {
			if ((key = json_object_new_string(name)) == NULL)
				return reject(w, "out of memory");
			saved = push_member(w, name);
			r = validate(s->property_names, key, w);
			json_object_put(key);
			if (r == -1)
				return -1;
			pop(w, saved);
		}
		if (find_prop(s, name) != NULL || !s->additional_forbidden)
			continue;
		allowed[0] = '\0';
		for (i = 0; i < s->nprops && used < sizeof(allowed); i++)
			used += snprintf(allowed + used, sizeof(allowed) - used,
			    "%s%s", i ? ", " : "", s->props[i].name);
		push_member(w, name);
		if (s->nprops == 0)
			return reject(w, "unknown property; this object takes "
			    "no properties");
		return reject(w, "unknown property; allowed: %s", allowed);
	}
	return 0;
}

static int
check_members(const struct schema *s, json_object *v, struct walk *w)
{
	const struct schema *sub;
	size_t	 saved;

	json_object_object_foreach(v, name, val) {
		if ((sub = find_prop(s, name)) == NULL)
			sub = s->additional;
		if (sub == NULL)
			continue;
		saved = push_member(w, name);
		if (validate(sub, val, w) == -1)
			return -1;
		pop(w, saved);
	}
	return 0;
}

static int
check_object(const struct schema *s, json_object *v, struct walk *w)
{
	size_t	 i;

	if (s->max_props >= 0 &&
	    (int64_t)json_object_object_length(v) > s->max_props)
		return reject(w, "must have at most %lld members",
		    (long long)s->max_props);
	if (check_names(s, v, w) == -1)
		return -1;
	for (i = 0; i < s->nrequired; i++) {
		if (json_object_object_get_ex(v, s->required[i], NULL))
			continue;
		push_member(w, s->required[i]);
		return reject(w, "is required");
	}
	return check_members(s, v, w);
}

static int
check_array(const struct schema *s, json_object *v, struct walk *w)
{
	size_t	 n = json_object_array_length(v), i, saved;

	if (s->min_items >= 0 && n < (uint64_t)s->min_items)
		return reject(w, "must have at least %lld item%s",
		    (long long)s->min_items, s->min_items == 1 ? "" : "s");
	if (s->max_items >= 0 && n > (uint64_t)s->max_items)
		return reject(w, "must have at most %lld item%s",
		    (long long)s->max_items, s->max_items == 1 ? "" : "s");
	if (s->items == NULL)
		return 0;
	for (i = 0; i < n; i++) {
		saved = push_index(w, i);
		if (validate(s->items, json_object_array_get_idx(v, i), w) ==
		    -1)
			return -1;
		pop(w, saved);
	}
	return 0;
}

/*
 * 0 when the value contradicts a const member of an object branch, such as
 * vm_job_output's "encoding": then it was plainly not aiming at that shape.
 * -1, lower still, when the value has members and the branch names none of
 * them (a gated tool's approval shape, to a result that failed its own).
 */
static int
consts_match(const struct schema *s, json_object *v)
{
	json_object *member;
	size_t	 i, named = 0;

	if (!json_object_is_type(v, json_type_object))
		return 1;
	for (i = 0; i < s->nprops; i++)
		if (json_object_object_get_ex(v, s->props[i].name, NULL))
			named++;
	if (named == 0 && s->nprops > 0 && json_object_object_length(v) > 0)
		return -1;
	for (i = 0; i < s->nprops; i++) {
		if (!s->props[i].schema->has_const ||
		    !json_object_object_get_ex(v, s->props[i].name, &member))
			continue;
		if (!json_object_equal(member, s->props[i].schema->const_value))
			return 0;
	}
	return 1;
}

/*
 * oneOf / anyOf: try each branch on a scratch walk.  When none matches,
 * report the branch the caller was most likely aiming at: one whose const
 * members agree with the value, and of those the one that got deepest into
 * the value before failing.
 */
static int
check_branches(struct schema *const *branches, size_t n, int exactly_one,
    json_object *v, struct walk *w)
{
	struct walk scratch;
	char	 best[512], msg[512];
	size_t	 i, matched = 0, best_depth = 0;
	int	 have_best = 0, best_consts = 0, consts;

	for (i = 0; i < n; i++) {
		scratch = *w;
		scratch.err = msg;
		scratch.errlen = sizeof(msg);
		if (validate(branches[i], v, &scratch) == 0) {
			matched++;
			continue;
		}
		consts = consts_match(branches[i], v);
		if (!have_best || consts > best_consts ||
		    (consts == best_consts && scratch.fail_depth > best_depth)) {
			memcpy(best, msg, sizeof(best));
			best_depth = scratch.fail_depth;
			best_consts = consts;
			have_best = 1;
		}
	}
	if (matched == 0) {
		say(w->err, w->errlen, "%s", best);
		w->fail_depth = best_depth;
		return -1;
	}
	if (exactly_one && matched > 1)
		return reject(w, "matches %zu of the allowed shapes, not "
		    "exactly one", matched);
	return 0;
}

static int
validate(const struct schema *s, json_object *v, struct walk *w)
{
	unsigned bit;

	if (check_type(s, v, w) == -1 || check_enum(s, v, w) == -1)
		return -1;
	bit = type_bit(v);
	if ((bit & T_NUMBER) && check_number(s, v, w) == -1)
		return -1;
	if ((bit & T_STRING) && check_string(s, v, w) == -1)
		return -1;
	if ((bit & T_OBJECT) && check_object(s, v, w) == -1)
		return -1;
	if ((bit & T_ARRAY) && check_array(s, v, w) == -1)
		return -1;
	if (s->n_any_of > 0 &&
	    check_branches(s->any_of, s->n_any_of, 0, v, w) == -1)
		return -1;
	if (s->n_one_of > 0 &&
	    check_branches(s->one_of, s->n_one_of, 1, v, w) == -1)
		return -1;
	return 0;
}

int
schema_validate(const struct schema *s, json_object *instance, char *err,
    size_t errlen)
{
	struct walk w;

	memset(&w, 0, sizeof(w));
	strcpy(w.path, "$");
	w.pathlen = 1;
	w.err = err;
	w.errlen = errlen;
	return validate(s, instance, &w);
}
