/*
 * libFuzzer target: common/pattern against glibc's regexec.  The first
 * byte is the length of a pattern body, which goes between ^ and $; the
 * rest is the string to match.  Whatever pattern.c agrees to compile,
 * regcomp must accept too (the schema validator asks regcomp first), and
 * the two must then give the same answer.
 */
#include <regex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pattern.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

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
