/*
 * Domain names as egress policies list them ("pkgs.example.org", "*.github.com")
 * and as the DNS forwarder matches queries against them.  Linked into
 * authd, authctl, vmmd, netd and the fuzz targets.
 */
#ifndef MCPVM_DNSNAME_H
#define MCPVM_DNSNAME_H

#include <stddef.h>

/* The longest name in text, without a trailing dot (RFC 1035). */
#define DNSNAME_MAX	253
#define DNSNAME_LABEL_MAX	63

/*
 * Checks the n bytes at s as a policy entry: labels of 1 to 63 of
 * [a-z0-9-] (upper case is folded), neither starting nor ending with '-',
 * 253 bytes at most, at least two labels, the last not all digits; with
 * wild, a leading "*." is allowed.  IDNs must be given as punycode
 * ("xn--…"): a byte over 0x7f is refused.  On success writes the
 * lowercase name to out (DNSNAME_MAX + 1 bytes) and returns 0; else -1
 * with why saying which rule the entry broke.
 */
int	dnsname_check(const char *s, size_t n, int wild, char *out,
	    char *why, size_t whylen);
/* 1 when s looks like a name rather than an IPv4 prefix (has a letter,
 * a '-' or a '*'). */
int	dnsname_like(const char *s);
/*
 * 1 when the (lowercase, checked) query name q falls under pattern p: the
 * same name, or, for "*.x", a name ending in ".x" with one or more
 * labels before it (never x itself).
 */
int	dnsname_match(const char *p, const char *q);
/* 1 when every name pattern inner matches, outer matches too. */
int	dnsname_covers(const char *outer, const char *inner);

#endif
