/*
 * The anchored-pattern matcher; see pattern.h.  Runs in mcpd and vmmd,
 * through common/schema, on strings from clients and from vmmd's results.
 *
 * The pattern is parsed into items (a byte set or a group, each with a
 * repeat count), then emitted as a Thompson program: SET consumes one byte
 * in a set, SPLIT forks, JMP jumps, MATCH accepts.  A bounded repeat is
 * unrolled, its optional copies nested so that any of them can skip to
 * the end at once; that keeps the set of live threads small.  Matching
 * runs every live thread in lockstep over the input (Pike's VM without
 * captures), so the cost is linear in the input whatever the pattern.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pattern.h"

#define PROG_MAX	1024	/* instructions; beyond that, regexec */
#define REPEAT_MAX	255	/* the largest n or m in {n,m} */
#define DEPTH_MAX	16	/* nested groups */
#define INF		(-1)

enum { OP_SET, OP_SPLIT, OP_JMP, OP_MATCH };

struct inst {
	uint8_t		 op;
	uint16_t	 x, y;		/* SPLIT: both; JMP: x; SET: x = set */
};

struct pattern {
	struct inst	*prog;
	size_t		 n;
	uint8_t		(*sets)[32];
	size_t		 nsets;
};

/* An item of a parsed sequence: a byte set, or a group of items. */
struct item {
	int		 set;		/* -1 for a group */
	struct item	*kids;
	size_t		 nkids;
	int		 min, max;
};

struct parser {
	const char	*p, *end;
	struct pattern	*pat;
	int		 depth;
};

static void
items_free(struct item *it, size_t n)
{
	for (size_t i = 0; i < n; i++)
		items_free(it[i].kids, it[i].nkids);
	free(it);
}

static int
new_set(struct pattern *pat)
{
	uint8_t (*s)[32];

	if (pat->nsets >= PROG_MAX)
		return -1;
	if ((s = realloc(pat->sets, (pat->nsets + 1) * sizeof(*s))) == NULL)
		return -1;
	pat->sets = s;
	memset(pat->sets[pat->nsets], 0, sizeof(*s));
	return (int)pat->nsets++;
}

static void
set_add(uint8_t *set, unsigned int lo, unsigned int hi)
{
	for (unsigned int c = lo; c <= hi; c++)
		set[c >> 3] |= (uint8_t)(1u << (c & 7));
}

/* A bracket expression, p just past '['.  The set index, or -1. */
static int
parse_bracket(struct parser *ps)
{
	const char *p = ps->p;
	uint8_t *set;
	int idx, neg = 0, first = 1;
	unsigned char lo, hi;

	if ((idx = new_set(ps->pat)) == -1)
		return -1;
	set = ps->pat->sets[idx];
	if (p < ps->end && *p == '^') {
		neg = 1;
		p++;
	}
	for (;;) {
		if (p >= ps->end)
			return -1;
		lo = (unsigned char)*p;
		if (lo == ']' && !first)
			break;
		/* [:alpha:], [.x.] and [=x=] are left to regcomp. */
		if (lo == '[' && p + 1 < ps->end &&
		    (p[1] == ':' || p[1] == '.' || p[1] == '='))
			return -1;
		p++;
		hi = lo;
		if (p + 1 < ps->end && *p == '-' && p[1] != ']') {
			hi = (unsigned char)p[1];
			if (hi == '[' || hi < lo)
				return -1;
			p += 2;
		}
		set_add(set, lo, hi);
		first = 0;
	}
	ps->p = p + 1;
	if (neg)
		for (size_t i = 0; i < 32; i++)
			set[i] = (uint8_t)~set[i];
	/* No string reaching a pattern holds NUL; never match it. */
	set[0] &= (uint8_t)~1u;
	return idx;
}

static int
parse_count(struct parser *ps)
{
	int v = 0, digits = 0;

	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
		v = v * 10 + (*ps->p++ - '0');
		if (v > REPEAT_MAX)
			return -1;
		digits++;
	}
	return digits > 0 ? v : -1;
}

/* The quantifier after an atom, if any: sets min and max. */
static int
parse_quant(struct parser *ps, struct item *it)
{
	it->min = it->max = 1;
	if (ps->p >= ps->end)
		return 0;
	switch (*ps->p) {
	case '?':
		it->min = 0;
		break;
	case '*':
		it->min = 0;
		it->max = INF;
		break;
	case '+':
		it->max = INF;
		break;
	case '{':
		ps->p++;
		if ((it->min = parse_count(ps)) == -1 || ps->p >= ps->end)
			return -1;
		it->max = it->min;
		if (*ps->p == ',') {
			ps->p++;
			if (ps->p < ps->end && *ps->p == '}')
				it->max = INF;
			else if ((it->max = parse_count(ps)) == -1 ||
			    it->max < it->min)
				return -1;
		}
		if (ps->p >= ps->end || *ps->p != '}')
			return -1;
		break;
	default:
		return 0;
	}
	ps->p++;
	/* a** and a{2}{3}: regcomp has its own reading; leave it those. */
	if (ps->p < ps->end && strchr("?*+{", *ps->p) != NULL)
		return -1;
	return 0;
}

static int parse_seq(struct parser *, struct item **, size_t *);

static int
parse_atom(struct parser *ps, struct item *it)
{
	unsigned char c = (unsigned char)*ps->p++;

	memset(it, 0, sizeof(*it));
	it->set = -1;
	switch (c) {
	case '(':
		if (++ps->depth > DEPTH_MAX ||
		    parse_seq(ps, &it->kids, &it->nkids) == -1)
			return -1;
		ps->depth--;
		if (it->nkids == 0 || ps->p >= ps->end || *ps->p != ')')
			return -1;
		ps->p++;
		break;
	case '[':
		if ((it->set = parse_bracket(ps)) == -1)
			return -1;
		break;
	case '.':
		if ((it->set = new_set(ps->pat)) == -1)
			return -1;
		set_add(ps->pat->sets[it->set], 1, 255);
		break;
	case '\\':
		if (ps->p >= ps->end || *ps->p == '\0' ||
		    strchr(".[]()*+?{}|^$\\", *ps->p) == NULL)
			return -1;
		c = (unsigned char)*ps->p++;
		goto literal;
	case ')': case '|': case '^': case '$':
	case '*': case '+': case '?': case '{':
		return -1;
	default:
 literal:
		if ((it->set = new_set(ps->pat)) == -1)
			return -1;
		set_add(ps->pat->sets[it->set], c, c);
		break;
	}
	return parse_quant(ps, it);
}

static int
parse_seq(struct parser *ps, struct item **out, size_t *nout)
{
	struct item *v = NULL, *nv;
	size_t n = 0;

	while (ps->p < ps->end && *ps->p != ')') {
		if ((nv = realloc(v, (n + 1) * sizeof(*v))) == NULL)
			goto fail;
		v = nv;
		if (parse_atom(ps, &v[n]) == -1) {
			n++;
			goto fail;
		}
		n++;
	}
	*out = v;
	*nout = n;
	return 0;
 fail:
	items_free(v, n);
	*out = NULL;
	*nout = 0;
	return -1;
}

static int
emit(struct pattern *pat, int op, int x, int y)
{
	if (pat->n >= PROG_MAX)
		return -1;
	pat->prog[pat->n].op = (uint8_t)op;
	pat->prog[pat->n].x = (uint16_t)x;
	pat->prog[pat->n].y = (uint16_t)y;
	return (int)pat->n++;
}

static int emit_items(struct pattern *, const struct item *, size_t);

static int
emit_once(struct pattern *pat, const struct item *it)
{
	if (it->set >= 0)
		return emit(pat, OP_SET, it->set, 0) == -1 ? -1 : 0;
	return emit_items(pat, it->kids, it->nkids);
}

static int
emit_item(struct pattern *pat, const struct item *it)
{
	int pc, i, opt[REPEAT_MAX];

	for (i = 0; i < it->min; i++)
		if (emit_once(pat, it) == -1)
			return -1;
	if (it->max == INF) {
		if ((pc = emit(pat, OP_SPLIT, (int)pat->n + 1, 0)) == -1 ||
		    emit_once(pat, it) == -1 ||
		    emit(pat, OP_JMP, pc, 0) == -1)
			return -1;
		pat->prog[pc].y = (uint16_t)pat->n;
		return 0;
	}
	for (i = 0; i < it->max - it->min; i++)
		if ((opt[i] = emit(pat, OP_SPLIT, (int)pat->n + 1, 0)) == -1 ||
		    emit_once(pat, it) == -1)
			return -1;
	while (i-- > 0)
		pat->prog[opt[i]].y = (uint16_t)pat->n;
	return 0;
}

static int
emit_items(struct pattern *pat, const struct item *it, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (emit_item(pat, &it[i]) == -1)
			return -1;
	return 0;
}

struct pattern *
pattern_compile(const char *re)
{
	struct pattern *pat;
	struct parser ps;
	struct item *items = NULL;
	size_t len = strlen(re), nitems = 0, bs = 0;
	int rc;

	if (len < 2 || re[0] != '^' || re[len - 1] != '$')
		return NULL;
	/* "\$" at the end is a literal dollar, not the anchor. */
	while (bs < len - 2 && re[len - 2 - bs] == '\\')
		bs++;
	if (bs % 2 == 1)
		return NULL;
	if ((pat = calloc(1, sizeof(*pat))) == NULL ||
	    (pat->prog = calloc(PROG_MAX, sizeof(*pat->prog))) == NULL) {
		pattern_free(pat);
		return NULL;
	}
	ps.p = re + 1;
	ps.end = re + len - 1;
	ps.pat = pat;
	ps.depth = 0;
	rc = parse_seq(&ps, &items, &nitems);
	if (rc == 0 && ps.p != ps.end)
		rc = -1;		/* a stray ')' */
	if (rc == 0)
		rc = emit_items(pat, items, nitems);
	if (rc == 0 && emit(pat, OP_MATCH, 0, 0) == -1)
		rc = -1;
	items_free(items, nitems);
	if (rc == -1) {
		pattern_free(pat);
		return NULL;
	}
	return pat;
}

void
pattern_free(struct pattern *pat)
{
	if (pat == NULL)
		return;
	free(pat->prog);
	free(pat->sets);
	free(pat);
}

/*
 * Adds the thread at pc, and everything it reaches without reading a
 * byte, to list.  mark[] keeps a pc from being added twice in one step,
 * which also ends loops over an empty body such as (a?)*.
 */
static void
add(const struct pattern *pat, uint16_t *list, size_t *n, uint32_t *mark,
    uint32_t gen, uint16_t pc, uint16_t *stack)
{
	size_t sp = 0;

	stack[sp++] = pc;
	while (sp > 0) {
		pc = stack[--sp];
		if (mark[pc] == gen)
			continue;
		mark[pc] = gen;
		switch (pat->prog[pc].op) {
		case OP_JMP:
			stack[sp++] = pat->prog[pc].x;
			break;
		case OP_SPLIT:
			/* y first, so that x is looked at first. */
			stack[sp++] = pat->prog[pc].y;
			stack[sp++] = pat->prog[pc].x;
			break;
		default:
			list[(*n)++] = pc;
			break;
		}
	}
}

int
pattern_match(const struct pattern *pat, const char *s, size_t len)
{
	uint16_t a[PROG_MAX], b[PROG_MAX], stack[2 * PROG_MAX + 1];
	uint16_t *cur = a, *next = b, *t;
	uint32_t mark[PROG_MAX];
	uint32_t gen = 1;
	size_t ncur = 0, nnext, i, k;
	unsigned char c;
	const struct inst *in;

	memset(mark, 0, pat->n * sizeof(mark[0]));
	add(pat, cur, &ncur, mark, gen, 0, stack);
	for (i = 0; i < len && ncur > 0; i++) {
		c = (unsigned char)s[i];
		nnext = 0;
		gen++;
		for (k = 0; k < ncur; k++) {
			in = &pat->prog[cur[k]];
			if (in->op == OP_SET &&
			    (pat->sets[in->x][c >> 3] & (1u << (c & 7))))
				add(pat, next, &nnext, mark, gen,
				    (uint16_t)(cur[k] + 1), stack);
		}
		t = cur;
		cur = next;
		next = t;
		ncur = nnext;
	}
	if (i < len)
		return 0;
	for (k = 0; k < ncur; k++)
		if (pat->prog[cur[k]].op == OP_MATCH)
			return 1;
	return 0;
}
