/*
 * IPv4 prefixes as the operator and the workspace policies write them,
 * "a.b.c.d/n", parsed strictly.  Shared by netd (its ranges and rulesets),
 * authd (egress policies) and vmmd (narrowing).
 */
#ifndef MCPVM_CIDR_H
#define MCPVM_CIDR_H

#include <stddef.h>
#include <stdint.h>

/* An IPv4 prefix in host byte order, host bits zero. */
struct cidr {
	uint32_t	addr;
	uint8_t		len;
};

/*
 * "a.b.c.d/n" (or "a.b.c.d" as /32 when allow_host) into *out: 0, or -1
 * when it is not exactly that, or has host bits set.
 */
int	cidr_parse(const char *s, int allow_host, struct cidr *out);
/* 1 when the two prefixes share an address. */
int	cidr_overlap(const struct cidr *, const struct cidr *);
/* 1 when every address of inner is in outer. */
int	cidr_within(const struct cidr *inner, const struct cidr *outer);
/* The prefix's netmask. */
uint32_t cidr_mask(uint8_t len);
/* "a.b.c.d/n" into buf (at least CIDR_TEXT_MAX bytes). */
#define CIDR_TEXT_MAX	19
void	cidr_format(const struct cidr *, char *buf, size_t len);

#endif
