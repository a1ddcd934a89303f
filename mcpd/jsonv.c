/*
 * Strict JSON syntax validation for mcpd; see jsonv.h.  A small iterative
 * recursive-descent checker with an explicit container stack.
 */
#include <stdint.h>

#include "jsonv.h"
#include "utf8v.h"

struct jv {
	const unsigned char	*p;
	const unsigned char	*end;
	const unsigned char	*start;
	const char		*why;
};

static void
ws(struct jv *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' ||
	    *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int
fail(struct jv *j, const char *why)
{
	j->why = why;
	return -1;
}

static int
hex4(struct jv *j, unsigned int *out)
{
	unsigned int v = 0;
	int i;

	if (j->end - j->p < 4)
		return fail(j, "truncated \\u escape");
	for (i = 0; i < 4; i++) {
		unsigned char c = j->p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return fail(j, "bad \\u escape");
	}
	j->p += 4;
	*out = v;
	return 0;
}

static int
string(struct jv *j)
{
	const unsigned char *run;
	struct utf8v v = UTF8V_INIT;
	unsigned int u, lo;

	j->p++;				/* the opening quote */
	run = j->p;
	for (;;) {
		if (j->p >= j->end)
			return fail(j, "unterminated string");
		if (*j->p == '"' || *j->p == '\\') {
			if (utf8v_feed(&v, run, j->p - run) == -1 ||
			    !utf8v_complete(&v))
				return fail(j, "invalid UTF-8 in a string");
			if (*j->p == '"') {
				j->p++;
				return 0;
			}
			j->p++;
			if (j->p >= j->end)
				return fail(j, "unterminated string");
			switch (*j->p++) {
			case '"': case '\\': case '/': case 'b': case 'f':
			case 'n': case 'r': case 't':
				break;
			case 'u':
				if (hex4(j, &u) == -1)
					return -1;
				if (u >= 0xdc00 && u <= 0xdfff)
					return fail(j, "unpaired surrogate "
					    "escape");
				if (u >= 0xd800 && u <= 0xdbff) {
					if (j->end - j->p < 6 || j->p[0] !=
					    '\\' || j->p[1] != 'u')
						return fail(j, "unpaired "
						    "surrogate escape");
					j->p += 2;
					if (hex4(j, &lo) == -1)
						return -1;
					if (lo < 0xdc00 || lo > 0xdfff)
						return fail(j, "unpaired "
						    "surrogate escape");
				}
				break;
			default:
				return fail(j, "bad escape in a string");
			}
			run = j->p;
			continue;
		}
		if (*j->p < 0x20)
			return fail(j, "control character in a string");
		j->p++;
	}
}

static int
digits(struct jv *j)
{
	const unsigned char *s = j->p;

	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > s ? 0 : fail(j, "bad number");
}

static int
number(struct jv *j)
{
	if (*j->p == '-')
		j->p++;
	if (j->p < j->end && *j->p == '0')
		j->p++;
	else if (digits(j) == -1)
		return -1;
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		if (digits(j) == -1)
			return -1;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (digits(j) == -1)
			return -1;
	}
	return 0;
}

static int
literal(struct jv *j, const char *word, size_t n)
{
	size_t i;

	if ((size_t)(j->end - j->p) < n)
		return fail(j, "truncated literal");
	for (i = 0; i < n; i++)
		if (j->p[i] != (unsigned char)word[i])
			return fail(j, "unexpected character");
	j->p += n;
	return 0;
}

/* One scalar, or the opening of a container (pushed on the stack). */
static int
value(struct jv *j, char *stack, int *depth)
{
	ws(j);
	if (j->p >= j->end)
		return fail(j, "truncated JSON");
	switch (*j->p) {
	case '{':
	case '[':
		if (*depth >= JSONV_MAX_DEPTH)
			return fail(j, "nested too deeply");
		stack[(*depth)++] = (char)*j->p++;
		return 1;
	case '"':
		return string(j);
	case 't':
		return literal(j, "true", 4);
	case 'f':
		return literal(j, "false", 5);
	case 'n':
		return literal(j, "null", 4);
	default:
		if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
			return number(j);
		return fail(j, "unexpected character");
	}
}

int
jsonv_check(const char *buf, size_t len, const char **why, size_t *off)
{
	struct jv j;
	char stack[JSONV_MAX_DEPTH];
	int depth = 0, r, first;

	j.start = j.p = (const unsigned char *)buf;
	j.end = j.p + len;
	j.why = NULL;

	if ((r = value(&j, stack, &depth)) == -1)
		goto bad;
	first = r == 1;		/* just opened a container */
	while (depth > 0) {
		char top = stack[depth - 1];

		ws(&j);
		if (j.p >= j.end) {
			fail(&j, "truncated JSON");
			goto bad;
		}
		if ((top == '{' && *j.p == '}') || (top == '[' && *j.p == ']')) {
			j.p++;
			depth--;
			first = 0;
			continue;
		}
		if (!first) {
			if (*j.p != ',') {
				fail(&j, top == '{' ? "expected , or }" :
				    "expected , or ]");
				goto bad;
			}
			j.p++;
			ws(&j);
		}
		if (top == '{') {
			if (j.p >= j.end || *j.p != '"') {
				fail(&j, "expected a string key");
				goto bad;
			}
			if (string(&j) == -1)
				goto bad;
			ws(&j);
			if (j.p >= j.end || *j.p != ':') {
				fail(&j, "expected :");
				goto bad;
			}
			j.p++;
		}
		if ((r = value(&j, stack, &depth)) == -1)
			goto bad;
		first = r == 1;
	}
	ws(&j);
	if (j.p != j.end) {
		fail(&j, "trailing data after the JSON value");
		goto bad;
	}
	return 0;
bad:
	*why = j.why;
	*off = (size_t)(j.p - j.start);
	return -1;
}
