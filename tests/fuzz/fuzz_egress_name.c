/*
 * libFuzzer target for egress domain names (common/dnsname.c): the input
 * is "PATTERN\nQUERY".  Each part goes through the checker as a policy
 * entry and a query would; what it accepts must be lowercase, of valid
 * labels and within the length limit, and check to itself again.  Matching
 * and covering of accepted names must agree with each other: a pattern
 * covers itself, matches what it covers, and a wildcard never matches its
 * own parent.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dnsname.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
valid_or_die(const char *n)
{
	size_t len = strlen(n), lab = 0;

	if (len == 0 || len > DNSNAME_MAX)
		abort();
	for (size_t i = 0; i < len; i++) {
		char c = n[i];

		if (i == 0 && c == '*' && n[1] == '.')
			continue;
		if (c == '.') {
			if (lab == 0 && !(i == 1 && n[0] == '*'))
				abort();
			lab = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-'))
			abort();
		if (++lab > DNSNAME_LABEL_MAX)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data, *nl;
	char p[DNSNAME_MAX + 1], q[DNSNAME_MAX + 1], again[DNSNAME_MAX + 1];
	char why[128];
	size_t pl, ql;
	int pok, qok;

	nl = memchr(s, '\n', size);
	pl = nl != NULL ? (size_t)(nl - s) : size;
	ql = nl != NULL ? size - pl - 1 : 0;
	pok = dnsname_check(s, pl, 1, p, why, sizeof(why)) == 0;
	qok = nl != NULL && dnsname_check(nl + 1, ql, 0, q, why,
	    sizeof(why)) == 0;
	if (pok) {
		valid_or_die(p);
		if (dnsname_check(p, strlen(p), 1, again, why,
		    sizeof(why)) != 0 || strcmp(p, again) != 0)
			abort();
		if (!dnsname_covers(p, p))
			abort();
		if (p[0] == '*' && dnsname_match(p, p + 2))
			abort();
		if (p[0] != '*' && !dnsname_match(p, p))
			abort();
	}
	if (qok) {
		valid_or_die(q);
		if (q[0] == '*')
			abort();
	}
	if (pok && qok && dnsname_covers(p, q) != dnsname_match(p, q))
		abort();
	return 0;
}
