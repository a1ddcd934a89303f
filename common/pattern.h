/*
 * A linear-time matcher for the anchored patterns proto/tools.json uses
 * ("^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" and the like), for common/schema.
 * glibc's regexec spent half of vmmd's time on vm_list's results; this
 * compiles such a pattern once into a small Thompson program and matches
 * in one pass over the bytes, never backtracking.
 *
 * It understands a subset of POSIX ERE with the same meaning regcomp gives
 * it in the C locale: literals, `.`, bracket expressions with ranges and
 * `^` negation, `\` before a special character, groups, and the
 * quantifiers ? * + {n} {n,} {n,m}, with the whole pattern between ^ and
 * $.  Anything else (alternation, character classes such as [:alpha:],
 * back-references, GNU escapes) makes pattern_compile() return NULL, and
 * the caller keeps regexec for that pattern.  tests/fuzz/fuzz_pattern.c
 * checks every pattern it accepts against regexec.
 */
#ifndef MCPVM_PATTERN_H
#define MCPVM_PATTERN_H

#include <stddef.h>

struct pattern;

/* NULL when the pattern is outside the subset, too large, or invalid. */
struct pattern	*pattern_compile(const char *re);
void		 pattern_free(struct pattern *);
/* 1 if all of s[0..len) matches, 0 if not.  Bytes, as the C locale. */
int		 pattern_match(const struct pattern *, const char *s,
		    size_t len);

#endif
