/*
 * libFuzzer target: common/pattern against glibc's regexec.  The first
 * byte is the length of a pattern body, which goes between ^ and $; the
 * rest is the string to match.  Whatever pattern.c agrees to compile,
 * regcomp must accept too (the schema validator asks regcomp first), and
 * the two must then give the same answer.
 *
 * The oracle has a limit of its own: glibc's regcomp takes exponential
 * time on a loop that can match empty nested in another under a count
 * (^((a*)*){24}$ ran over 15 s here, {16} in 0.07 s; a third level of
 * nesting over {12}).  The schema validator only compiles tools.json's
 * own patterns, so such inputs say nothing about mcpvm and are skipped;
 * pattern.c's own handling of them is still run.
 */
#include <regex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pattern.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Whether regcomp could take exponential time on re (see above): a
 * quantifier closing a group (nested loops) together with a count over 8,
 * or three such closings with one over 4. */
static int
oracle_too_slow(const char *re)
{
	long big = 0;
	int nested = 0;

	for (const char *p = re; *p != '\0'; p++) {
		if ((*p == '*' || *p == '+' || *p == '?' || *p == '}') &&
		    p[1] == ')')
			nested++;
		if (*p == '{') {
			char *end;
			long v = strtol(p + 1, &end, 10);

			if (v > big)
				big = v;
			if (*end == ',' && (v = strtol(end + 1, NULL, 10)) >
			    big)
				big = v;
		}
	}
	return (nested >= 1 && big > 8) || (nested >= 3 && big > 4);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pattern *p;
	regex_t rx;
	char re[260], *s;
	size_t n, slen;
	int fast, slow;

	if (size < 1)
		return 0;
	n = data[0];
	if (n > size - 1)
		n = size - 1;
	re[0] = '^';
	memcpy(re + 1, data + 1, n);
	re[n + 1] = '$';
	re[n + 2] = '\0';
	if (memchr(re, '\0', n + 2) != NULL)
		return 0;
	if ((p = pattern_compile(re)) == NULL)
		return 0;
	if (oracle_too_slow(re)) {
		pattern_free(p);
		return 0;
	}
	if (regcomp(&rx, re, REG_EXTENDED | REG_NOSUB) != 0) {
		/* The validator would never get here; that is all right. */
		pattern_free(p);
		return 0;
	}
	slen = size - 1 - n;
	if ((s = malloc(slen + 1)) == NULL)
		abort();
	memcpy(s, data + 1 + n, slen);
	s[slen] = '\0';
	slen = strlen(s);	/* no string with NUL reaches a pattern */
	fast = pattern_match(p, s, slen);
	slow = regexec(&rx, s, 0, NULL, 0) == 0;
	if (fast != slow)
		abort();
	free(s);
	regfree(&rx);
	pattern_free(p);
	return 0;
}
