/*
 * Strict JSON parsing and typed getters; see jsonx.h.  Linked into every
 * process through libcommon.  The grammar check runs before json-c so that
 * json-c only ever sees text RFC 8259 accepts.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "utf8.h"

/* Longest number literal accepted; far beyond any int64 or double. */
#define JSONX_NUMBER_MAX	128
/* Longest dotted key a getter takes. */
#define JSONX_KEY_MAX		128

struct scan {
	const uint8_t	*buf;
	size_t		 len;
	size_t		 pos;
	size_t		 max_depth;
	const char	*why;
	struct jsonx_members *members;	/* top-level spans, or NULL */
};

static int	scan_value(struct scan *, size_t);

static void __attribute__((format(printf, 2, 3)))
seterr(struct jsonx_err *err, const char *fmt, ...)
{
	va_list	 ap;

	if (err == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	utf8_scrub(err->msg);
}

static int
fail(struct scan *s, const char *why)
{
	s->why = why;
	return -1;
}

static void
skip_ws(struct scan *s)
{
	while (s->pos < s->len && (s->buf[s->pos] == ' ' ||
	    s->buf[s->pos] == '\t' || s->buf[s->pos] == '\n' ||
	    s->buf[s->pos] == '\r'))
		s->pos++;
}

static int
scan_hex4(struct scan *s, unsigned *out)
{
	unsigned v = 0;
	int	 i, c;

	if (s->len - s->pos < 4)
		return fail(s, "truncated \\u escape");
	for (i = 0; i < 4; i++) {
		c = s->buf[s->pos++];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return fail(s, "invalid \\u escape");
	}
	*out = v;
	return 0;
}

/*
 * Word-at-a-time tests (8 bytes): any byte with its top bit set; any byte
 * below 0x20, equal to '"' or equal to '\\'.  Each is exact for "is there
 * any" though not for which byte; the byte loop after finds that.
 */
#define ONES		0x0101010101010101ULL
#define HIGHS		0x8080808080808080ULL
#define ANY_ZERO(v)	(((v) - ONES) & ~(v) & HIGHS)
#define ANY_BELOW(v, n)	(((v) - ONES * (n)) & ~(v) & HIGHS)

static uint64_t
load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Skips string bytes that need no look: not '"', '\\' or a control. */
static void
skip_plain(struct scan *s)
{
	uint64_t v;

	while (s->len - s->pos >= 8) {
		v = load64(s->buf + s->pos);
		if (ANY_BELOW(v, 0x20) | ANY_ZERO(v ^ (ONES * '"')) |
		    ANY_ZERO(v ^ (ONES * '\\')))
			break;
		s->pos += 8;
	}
}

/*
 * The four hex digits after "\\u", and a low surrogate's after a high one.
 * Out of line, so that scan_string keeps no address-taken local and so no
 * stack guard: escapes are rare, strings are not.
 */
static __attribute__((noinline)) int
scan_u_escape(struct scan *s)
{
	unsigned u, lo;

	if (scan_hex4(s, &u) == -1)
		return -1;
	/* json-c would quietly turn a lone surrogate into U+FFFD. */
	if (u >= 0xdc00 && u <= 0xdfff)
		return fail(s, "unpaired surrogate escape");
	if (u >= 0xd800 && u <= 0xdbff) {
		if (s->len - s->pos < 2 || s->buf[s->pos] != '\\' ||
		    s->buf[s->pos + 1] != 'u')
			return fail(s, "unpaired surrogate escape");
		s->pos += 2;
		if (scan_hex4(s, &lo) == -1)
			return -1;
		if (lo < 0xdc00 || lo > 0xdfff)
			return fail(s, "unpaired surrogate escape");
	}
	return 0;
}

/* The bytes were checked as UTF-8 already; this checks JSON's own rules. */
static int
scan_string(struct scan *s)
{
	uint8_t	 c;

	s->pos++;
	for (;;) {
		/* Words while they are plain, then bytes up to the one that
		 * is not (asking the word test again for each of those last
		 * bytes made short strings cost a word test a byte). */
		skip_plain(s);
		while (s->pos < s->len && s->buf[s->pos] != '"' &&
		    s->buf[s->pos] != '\\' && s->buf[s->pos] >= 0x20)
			s->pos++;
		if (s->pos >= s->len)
			return fail(s, "unterminated string");
		c = s->buf[s->pos++];
		if (c == '"')
			return 0;
		if (c < 0x20)
			return fail(s, "control character in string");
		if (s->pos >= s->len)
			return fail(s, "unterminated string");
		switch (s->buf[s->pos++]) {
		case '"': case '\\': case '/': case 'b':
		case 'f': case 'n': case 'r': case 't':
			continue;
		case 'u':
			break;
		default:
			return fail(s, "invalid escape in string");
		}
		if (scan_u_escape(s) == -1)
			return -1;
	}
}

static int
is_digit(uint8_t c)
{
	return c >= '0' && c <= '9';
}

static int
scan_digits(struct scan *s)
{
	size_t	 start = s->pos;

	while (s->pos < s->len && is_digit(s->buf[s->pos]))
		s->pos++;
	return s->pos > start ? 0 : fail(s, "invalid number");
}

/*
 * json-c would clamp these to INT64_MAX or infinity without a word.  Out of
 * line, so that the buffer's stack guard costs only the numbers that need
 * it, not every value scanned.
 */
static __attribute__((noinline)) int
number_in_range(const uint8_t *text, size_t n, int integer)
{
	char	 num[JSONX_NUMBER_MAX + 1];

	memcpy(num, text, n);
	num[n] = '\0';
	errno = 0;
	if (integer) {
		(void)strtoll(num, NULL, 10);
		return errno != ERANGE;
	}
	return isfinite(strtod(num, NULL));
}

static int
scan_number(struct scan *s)
{
	size_t	 start = s->pos, n;
	int	 integer = 1;

	if (s->buf[s->pos] == '-')
		s->pos++;
	if (s->pos < s->len && s->buf[s->pos] == '0') {
		s->pos++;
		if (s->pos < s->len && is_digit(s->buf[s->pos]))
			return fail(s, "leading zero in number");
	} else if (scan_digits(s) == -1)
		return -1;
	if (s->pos < s->len && s->buf[s->pos] == '.') {
		integer = 0;
		s->pos++;
		if (scan_digits(s) == -1)
			return -1;
	}
	if (s->pos < s->len && (s->buf[s->pos] == 'e' ||
	    s->buf[s->pos] == 'E')) {
		integer = 0;
		s->pos++;
		if (s->pos < s->len && (s->buf[s->pos] == '+' ||
		    s->buf[s->pos] == '-'))
			s->pos++;
		if (scan_digits(s) == -1)
			return -1;
	}
	n = s->pos - start;
	if (n > JSONX_NUMBER_MAX)
		return fail(s, "number literal too long");
	/* Up to 18 digits and a sign: within int64 without asking strtoll. */
	if (integer && n <= 19 - (s->buf[start] != '-'))
		return 0;
	if (!number_in_range(s->buf + start, n, integer))
		return fail(s, integer ? "integer out of range" :
		    "number out of range");
	return 0;
}

static int
scan_literal(struct scan *s, const char *lit)
{
	size_t	 n = strlen(lit);

	if (s->len - s->pos < n || memcmp(s->buf + s->pos, lit, n) != 0)
		return fail(s, "unexpected character");
	s->pos += n;
	return 0;
}

static int
scan_container(struct scan *s, size_t depth)
{
	uint8_t	 close = s->buf[s->pos] == '{' ? '}' : ']';

	if (depth + 1 > s->max_depth)
		return fail(s, "nested too deep");
	s->pos++;
	skip_ws(s);
	if (s->pos < s->len && s->buf[s->pos] == close) {
		s->pos++;
		return 0;
	}
	for (;;) {
		struct jsonx_span *span = NULL;

		if (close == '}') {
			skip_ws(s);
			if (s->pos >= s->len || s->buf[s->pos] != '"')
				return fail(s, "expected a quoted member name");
			if (depth == 0 && s->members != NULL) {
				if (s->members->n < JSONX_MEMBERS_MAX)
					span = &s->members->m[s->members->n++];
				else
					s->members->overflow = 1;
			}
			if (span != NULL)
				span->key_off = s->pos + 1;
			if (scan_string(s) == -1)
				return -1;
			if (span != NULL)
				span->key_len = s->pos - 1 - span->key_off;
			skip_ws(s);
			if (s->pos >= s->len || s->buf[s->pos] != ':')
				return fail(s, "expected ':'");
			s->pos++;
			skip_ws(s);
		}
		if (span != NULL)
			span->off = s->pos;
		if (scan_value(s, depth + 1) == -1)
			return -1;
		if (span != NULL)
			span->len = s->pos - span->off;
		skip_ws(s);
		if (s->pos >= s->len)
			return fail(s, "unexpected end of input (truncated)");
		if (s->buf[s->pos] == close) {
			s->pos++;
			return 0;
		}
		if (s->buf[s->pos] != ',')
			return fail(s, close == '}' ? "expected ',' or '}'" :
			    "expected ',' or ']'");
		s->pos++;
	}
}

static int
scan_value(struct scan *s, size_t depth)
{
	skip_ws(s);
	if (s->pos >= s->len)
		return fail(s, "unexpected end of input (truncated)");
	switch (s->buf[s->pos]) {
	case '{':
	case '[':
		return scan_container(s, depth);
	case '"':
		return scan_string(s);
	case 't':
		return scan_literal(s, "true");
	case 'f':
		return scan_literal(s, "false");
	case 'n':
		return scan_literal(s, "null");
	default:
		if (s->buf[s->pos] == '-' || is_digit(s->buf[s->pos]))
			return scan_number(s);
		return fail(s, "unexpected character");
	}
}

/* The grammar, UTF-8, NUL and depth checks; s is left after the value. */
static int
check_text(const char *buf, size_t len, size_t max_depth,
    struct jsonx_members *mem, struct scan *s, struct jsonx_err *err)
{
	const char	*nul;

	if (len > INT_MAX - 1) {
		seterr(err, "invalid JSON: text too large");
		return -1;
	}
	if ((nul = memchr(buf, '\0', len)) != NULL) {
		seterr(err, "invalid JSON at byte %zu: NUL byte",
		    (size_t)(nul - buf));
		return -1;
	}
	if (!utf8_valid((const uint8_t *)buf, len)) {
		seterr(err, "invalid JSON: text is not valid UTF-8");
		return -1;
	}
	memset(s, 0, sizeof(*s));
	s->buf = (const uint8_t *)buf;
	s->len = len;
	s->max_depth = max_depth < JSONX_DEPTH_LIMIT ? max_depth :
	    JSONX_DEPTH_LIMIT;
	s->members = mem;
	if (scan_value(s, 0) == 0) {
		skip_ws(s);
		if (s->pos != s->len)
			fail(s, "unexpected data after the JSON value");
	}
	if (s->why != NULL) {
		if (strcmp(s->why, "nested too deep") == 0)
			seterr(err, "invalid JSON at byte %zu: nested deeper "
			    "than %zu levels", s->pos, s->max_depth);
		else
			seterr(err, "invalid JSON at byte %zu: %s", s->pos,
			    s->why);
		return -1;
	}
	return 0;
}

int
jsonx_check_object(const char *buf, size_t len, size_t max_depth,
    struct jsonx_err *err)
{
	return jsonx_check_object_members(buf, len, max_depth, NULL, err);
}

int
jsonx_check_object_members(const char *buf, size_t len, size_t max_depth,
    struct jsonx_members *mem, struct jsonx_err *err)
{
	struct scan	 s;
	size_t		 i = 0;

	if (mem != NULL)
		memset(mem, 0, sizeof(*mem));
	if (check_text(buf, len, max_depth, mem, &s, err) == -1)
		return -1;
	while (i < len && strchr(" \t\r\n", buf[i]) != NULL)
		i++;
	if (buf[i] != '{') {
		seterr(err, "$: expected object");
		return -1;
	}
	return 0;
}

int
jsonx_member_span(const char *buf, size_t len, const char *key,
    size_t *off, size_t *vlen)
{
	struct scan	 s;
	size_t		 klen = strlen(key), kstart, vstart;
	int		 found = 0, match;

	memset(&s, 0, sizeof(s));
	s.buf = (const uint8_t *)buf;
	s.len = len;
	s.max_depth = JSONX_DEPTH_LIMIT;
	skip_ws(&s);
	if (s.pos >= s.len || s.buf[s.pos] != '{')
		return 0;
	s.pos++;
	for (;;) {
		skip_ws(&s);
		if (s.pos >= s.len || s.buf[s.pos] != '"')
			return found;	/* '}': the end */
		kstart = s.pos + 1;
		if (scan_string(&s) == -1)
			return 0;
		/* As written: an escaped spelling of key is not key. */
		match = s.pos - 1 - kstart == klen &&
		    memcmp(buf + kstart, key, klen) == 0;
		skip_ws(&s);
		s.pos++;		/* ':' */
		skip_ws(&s);
		vstart = s.pos;
		if (scan_value(&s, 1) == -1)
			return 0;
		if (match) {
			/* The last one counts, as with json-c. */
			*off = vstart;
			*vlen = s.pos - vstart;
			found = 1;
		}
		skip_ws(&s);
		if (s.pos >= s.len || s.buf[s.pos] != ',')
			return found;
		s.pos++;
	}
}

int
jsonx_members_find(const struct jsonx_members *mem, const char *buf,
    size_t len, const char *key, size_t *off, size_t *vlen)
{
	size_t	 klen = strlen(key), i;
	int	 found = 0;

	if (mem == NULL || mem->overflow)
		return jsonx_member_span(buf, len, key, off, vlen);
	for (i = 0; i < mem->n; i++) {
		const struct jsonx_span *sp = &mem->m[i];

		/* As jsonx_member_span: as written, and the last one counts. */
		if (sp->key_len == klen && memcmp(buf + sp->key_off, key,
		    klen) == 0) {
			*off = sp->off;
			*vlen = sp->len;
			found = 1;
		}
	}
	return found;
}

/*
 * One tokener per thread, kept between texts: a request or frame then costs
 * no tokener allocation.  A thread's tokener is freed when the thread ends.
 */
static pthread_key_t	 tok_key;
static pthread_once_t	 tok_once = PTHREAD_ONCE_INIT;
static int		 tok_key_ok;

struct tok_cache {
	struct json_tokener	*tok;
	int			 depth;
};

static void
tok_cache_free(void *p)
{
	struct tok_cache *tc = p;

	if (tc->tok != NULL)
		json_tokener_free(tc->tok);
	free(tc);
}

static void
tok_key_init(void)
{
	tok_key_ok = pthread_key_create(&tok_key, tok_cache_free) == 0;
}

static struct json_tokener *
tokener(int depth)
{
	struct tok_cache *tc;

	(void)pthread_once(&tok_once, tok_key_init);
	if (!tok_key_ok)
		return NULL;
	if ((tc = pthread_getspecific(tok_key)) == NULL) {
		if ((tc = calloc(1, sizeof(*tc))) == NULL)
			return NULL;
		if (pthread_setspecific(tok_key, tc) != 0) {
			free(tc);
			return NULL;
		}
	}
	if (tc->tok != NULL && tc->depth != depth) {
		json_tokener_free(tc->tok);
		tc->tok = NULL;
	}
	if (tc->tok == NULL) {
		if ((tc->tok = json_tokener_new_ex(depth)) == NULL)
			return NULL;
		tc->depth = depth;
		json_tokener_set_flags(tc->tok, JSON_TOKENER_STRICT);
	}
	json_tokener_reset(tc->tok);
	return tc->tok;
}

int
jsonx_parse_value(const char *buf, size_t len, size_t max_depth,
    json_object **out, struct jsonx_err *err)
{
	struct scan	 s;
	struct json_tokener *tok;
	json_object	*obj = NULL;
	enum json_tokener_error jerr;

	*out = NULL;
	if (check_text(buf, len, max_depth, NULL, &s, err) == -1)
		return -1;

	/*
	 * From here on json-c sees only text the grammar check accepted, so
	 * a json-c failure (reported as such) is a bug the fuzzer looks for.
	 * It counts a scalar inside the deepest container as a level.
	 */
	if ((tok = tokener((int)s.max_depth + 2)) == NULL) {
		seterr(err, "out of memory");
		return -1;
	}
	obj = json_tokener_parse_ex(tok, buf, (int)len);
	/* A number at the very end needs a terminator to be complete. */
	if (obj == NULL && json_tokener_get_error(tok) == json_tokener_continue)
		obj = json_tokener_parse_ex(tok, "", 1);
	jerr = json_tokener_get_error(tok);
	json_tokener_reset(tok);
	if (jerr != json_tokener_success) {
		json_object_put(obj);
		seterr(err, "invalid JSON (json-c): %s",
		    json_tokener_error_desc(jerr));
		return -1;
	}
	*out = obj;		/* NULL: the text was null */
	return 0;
}

json_object *
jsonx_parse(const char *buf, size_t len, size_t max_depth,
    struct jsonx_err *err)
{
	json_object	*obj;

	if (jsonx_parse_value(buf, len, max_depth, &obj, err) == -1)
		return NULL;
	if (obj == NULL)
		seterr(err, "$: expected a value other than null");
	return obj;
}

json_object *
jsonx_parse_object(const char *buf, size_t len, size_t max_depth,
    struct jsonx_err *err)
{
	json_object	*obj;

	if ((obj = jsonx_parse(buf, len, max_depth, err)) == NULL)
		return NULL;
	if (!json_object_is_type(obj, json_type_object)) {
		seterr(err, "$: expected object, got %s",
		    jsonx_type_name(obj));
		json_object_put(obj);
		return NULL;
	}
	return obj;
}

struct raw_text {
	size_t	 len;
	char	 text[];
};

static int
raw_serialize(json_object *o, struct printbuf *pb, int level, int flags)
{
	const struct raw_text *r = json_object_get_userdata(o);

	return printbuf_memappend(pb, r->text, (int)r->len);
}

static void
raw_free(json_object *o, void *userdata)
{
	free(userdata);
}

json_object *
jsonx_raw_object(const char *text, size_t len)
{
	struct raw_text *r;
	json_object *o;

	if (len > INT_MAX || (r = malloc(sizeof(*r) + len)) == NULL)
		return NULL;
	r->len = len;
	memcpy(r->text, text, len);
	if ((o = json_object_new_object()) == NULL) {
		free(r);
		return NULL;
	}
	json_object_set_serializer(o, raw_serialize, r, raw_free);
	return o;
}

/* What a string byte becomes; NULL: itself.  json-c's table, less "\/". */
static const char *
escape_of(uint8_t c, char tmp[7])
{
	static const char hex[] = "0123456789abcdef";

	switch (c) {
	case '\b': return "\\b";
	case '\n': return "\\n";
	case '\r': return "\\r";
	case '\t': return "\\t";
	case '\f': return "\\f";
	case '"': return "\\\"";
	case '\\': return "\\\\";
	}
	if (c >= 0x20)
		return NULL;
	memcpy(tmp, "\\u00", 4);
	tmp[4] = hex[c >> 4];
	tmp[5] = hex[c & 0xf];
	tmp[6] = '\0';
	return tmp;
}

size_t
jsonx_escaped_len(const char *text, size_t len)
{
	const char *e;
	char tmp[7];
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += (e = escape_of((uint8_t)text[i], tmp)) != NULL ?
		    strlen(e) : 1;
	return n;
}

size_t
jsonx_escape(char *out, const char *text, size_t len)
{
	const char *e;
	char tmp[7], *o = out;
	size_t i, run = 0;

	for (i = 0; i < len; i++) {
		if ((e = escape_of((uint8_t)text[i], tmp)) == NULL)
			continue;
		memcpy(o, text + run, i - run);
		o += i - run;
		o = stpcpy(o, e);
		run = i + 1;
	}
	memcpy(o, text + run, len - run);
	o += len - run;
	return (size_t)(o - out);
}

const char *
jsonx_type_name(json_object *obj)
{
	switch (json_object_get_type(obj)) {
	case json_type_null:
		return "null";
	case json_type_boolean:
		return "boolean";
	case json_type_double:
		return "number";
	case json_type_int:
		return "integer";
	case json_type_object:
		return "object";
	case json_type_array:
		return "array";
	case json_type_string:
		return "string";
	}
	return "unknown";
}

/*
 * Find the member named by a dotted key.  The path in messages is "$."
 * followed by the key, cut at the member where the walk stopped.
 */
static int
lookup(json_object *obj, const char *key, int required, json_object **out,
    struct jsonx_err *err)
{
	char	 name[JSONX_KEY_MAX + 1];
	const char *seg = key, *dot;
	json_object *next;
	size_t	 n;

	if (!json_object_is_type(obj, json_type_object)) {
		seterr(err, "$: expected object, got %s",
		    jsonx_type_name(obj));
		return -1;
	}
	for (;;) {
		dot = strchr(seg, '.');
		n = dot != NULL ? (size_t)(dot - seg) : strlen(seg);
		if (n > JSONX_KEY_MAX) {
			seterr(err, "$.%s: key too long", key);
			return -1;
		}
		memcpy(name, seg, n);
		name[n] = '\0';
		if (!json_object_object_get_ex(obj, name, &next)) {
			if (!required)
				return 0;
			seterr(err, "$.%s: is required", key);
			return -1;
		}
		if (dot == NULL) {
			*out = next;
			return 1;
		}
		if (!json_object_is_type(next, json_type_object)) {
			seterr(err, "$.%.*s: expected object, got %s",
			    (int)(dot - key), key, jsonx_type_name(next));
			return -1;
		}
		obj = next;
		seg = dot + 1;
	}
}

static int
lookup_typed(json_object *obj, const char *key, int required,
    enum json_type type, json_object **out, struct jsonx_err *err)
{
	json_object *v;
	int	 r;

	if ((r = lookup(obj, key, required, &v, err)) != 1)
		return r;
	if (!json_object_is_type(v, type)) {
		seterr(err, "$.%s: expected %s, got %s", key,
		    type == json_type_int ? "integer" :
		    json_type_to_name(type), jsonx_type_name(v));
		return -1;
	}
	*out = v;
	return 1;
}

int
jsonx_get_string(json_object *obj, const char *key, int required,
    const char **out, struct jsonx_err *err)
{
	json_object *v;
	const char *s;
	int	 r;

	if ((r = lookup_typed(obj, key, required, json_type_string, &v,
	    err)) != 1)
		return r;
	s = json_object_get_string(v);
	if (strlen(s) != (size_t)json_object_get_string_len(v)) {
		seterr(err, "$.%s: must not contain NUL characters", key);
		return -1;
	}
	*out = s;
	return 1;
}

int
jsonx_get_int64(json_object *obj, const char *key, int required,
    int64_t min, int64_t max, int64_t *out, struct jsonx_err *err)
{
	json_object *v;
	int64_t	 i;
	int	 r;

	if ((r = lookup_typed(obj, key, required, json_type_int, &v,
	    err)) != 1)
		return r;
	i = json_object_get_int64(v);
	/* A uint64 above INT64_MAX reads back clamped; it exceeds any max. */
	if (i == INT64_MAX &&
	    json_object_get_uint64(v) > (uint64_t)INT64_MAX) {
		seterr(err, "$.%s: must be at most %lld", key, (long long)max);
		return -1;
	}
	if (i < min) {
		seterr(err, "$.%s: must be at least %lld", key, (long long)min);
		return -1;
	}
	if (i > max) {
		seterr(err, "$.%s: must be at most %lld", key, (long long)max);
		return -1;
	}
	*out = i;
	return 1;
}

int
jsonx_get_bool(json_object *obj, const char *key, int required, int *out,
    struct jsonx_err *err)
{
	json_object *v;
	int	 r;

	if ((r = lookup_typed(obj, key, required, json_type_boolean, &v,
	    err)) != 1)
		return r;
	*out = json_object_get_boolean(v) ? 1 : 0;
	return 1;
}

int
jsonx_get_object(json_object *obj, const char *key, int required,
    json_object **out, struct jsonx_err *err)
{
	return lookup_typed(obj, key, required, json_type_object, out, err);
}

int
jsonx_get_array(json_object *obj, const char *key, int required,
    json_object **out, struct jsonx_err *err)
{
	return lookup_typed(obj, key, required, json_type_array, out, err);
}

int
jsonx_get_enum(json_object *obj, const char *key, int required,
    const char *const *names, int *out, struct jsonx_err *err)
{
	char	 list[160];
	const char *s;
	size_t	 used = 0;
	int	 i, r;

	if ((r = jsonx_get_string(obj, key, required, &s, err)) != 1)
		return r;
	for (i = 0; names[i] != NULL; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			return 1;
		}
	}
	list[0] = '\0';
	for (i = 0; names[i] != NULL && used < sizeof(list); i++)
		used += snprintf(list + used, sizeof(list) - used, "%s\"%s\"",
		    i > 0 ? ", " : "", names[i]);
	seterr(err, "$.%s: must be one of %s", key, list);
	return -1;
}
