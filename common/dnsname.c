/*
 * Domain names of egress policies; see dnsname.h.  The checker reads
 * bytes a peer chose (authd's and netd's requests, the guest's queries).
 */
#include <stdio.h>
#include <string.h>

#include "dnsname.h"

int
dnsname_like(const char *s)
{
	for (; *s != '\0'; s++)
		if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    *s == '-' || *s == '*' || *s == '_' ||
		    (unsigned char)*s > 0x7f)
			return 1;
	return 0;
}

int
dnsname_check(const char *s, size_t n, int wild, char *out, char *why,
    size_t whylen)
{
	size_t i = 0, o = 0, lstart, nlabels = 0;
	int digits = 1;

	if (n == 0) {
		snprintf(why, whylen, "is empty");
		return -1;
	}
	if (n > DNSNAME_MAX) {
		snprintf(why, whylen, "is %zu bytes long; a name is at most "
		    "%d", n, DNSNAME_MAX);
		return -1;
	}
	if (n >= 2 && s[0] == '*' && s[1] == '.') {
		if (!wild) {
			snprintf(why, whylen, "is a wildcard, which is not "
			    "taken here");
			return -1;
		}
		out[o++] = '*';
		out[o++] = '.';
		i = 2;
	}
	lstart = i;
	for (; i <= n; i++) {
		unsigned char c = i < n ? (unsigned char)s[i] : '.';

		if (c == '.') {
			size_t len = i - lstart;

			if (len == 0) {
				snprintf(why, whylen, "has an empty label "
				    "(at byte %zu)", i + 1);
				return -1;
			}
			if (len > DNSNAME_LABEL_MAX) {
				snprintf(why, whylen, "has a label of %zu "
				    "bytes; a label is at most %d", len,
				    DNSNAME_LABEL_MAX);
				return -1;
			}
			if (s[lstart] == '-' || s[i - 1] == '-') {
				snprintf(why, whylen, "has a label that starts "
				    "or ends with '-'");
				return -1;
			}
			nlabels++;
			if (i < n) {
				digits = 1;
				out[o++] = '.';
			}
			lstart = i + 1;
			continue;
		}
		if (c > 0x7f) {
			snprintf(why, whylen, "is not ASCII; give an "
			    "internationalised name as punycode (xn--…)");
			return -1;
		}
		if (c == '*') {
			snprintf(why, whylen, "has a '*' that is not a "
			    "leading \"*.\"");
			return -1;
		}
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-')) {
			snprintf(why, whylen, "has a byte outside [a-z0-9-.] "
			    "(at byte %zu)", i + 1);
			return -1;
		}
		if (c < '0' || c > '9')
			digits = 0;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	if (nlabels < 2) {
		snprintf(why, whylen, "has a single label; give a name under "
		    "a top-level domain");
		return -1;
	}
	if (digits) {
		snprintf(why, whylen, "ends in an all-digit label, which no "
		    "top-level domain is");
		return -1;
	}
	return 0;
}

int
dnsname_match(const char *p, const char *q)
{
	size_t pl, ql;

	if (p[0] != '*')
		return strcmp(p, q) == 0;
	p += 1;			/* ".x" */
	pl = strlen(p);
	ql = strlen(q);
	return ql > pl && strcmp(q + ql - pl, p) == 0;
}

int
dnsname_covers(const char *outer, const char *inner)
{
	if (inner[0] != '*')
		return dnsname_match(outer, inner);
	/* A wildcard only under a wildcard: "*.a.x" under "*.x" or itself. */
	if (outer[0] != '*')
		return 0;
	return strcmp(outer, inner) == 0 || dnsname_match(outer, inner + 2);
}
