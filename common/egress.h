/*
 * A workspace's (or a VM's) egress policy: public, public less some denied
 * prefixes, or an allowlist of prefixes.  authd stores it, vmmd narrows it
 * and hands it to netd with a VM's slot, netd enforces it in the slot's
 * ruleset.  The same strict JSON decoder runs in all three.
 */
#ifndef MCPVM_EGRESS_H
#define MCPVM_EGRESS_H

#include <stddef.h>

#include "cidr.h"
#include "dnsname.h"

struct json_object;

/* The most any list may hold; [authd] egress_max_cidrs and
 * egress_max_names may lower them. */
#define EGRESS_MAX_CIDRS	256
#define EGRESS_MAX_NAMES	64

enum egress_mode {
	EGRESS_PUBLIC = 0,	/* the default: everything public */
	EGRESS_ALLOWLIST,	/* only cidrs and names */
};

struct egress {
	enum egress_mode mode;
	size_t		 ncidrs;	/* public: denied; allowlist: allowed */
	struct cidr	 cidrs[EGRESS_MAX_CIDRS];	/* sorted, no dups */
	/* Allowlists only: names ("pkgs.example.org", "*.github.com"), lowercase,
	 * sorted, no dups; reached by the addresses netd's forwarder
	 * resolves for them. */
	size_t		 nnames;
	char		 names[EGRESS_MAX_NAMES][DNSNAME_MAX + 1];
};

/*
 * Decodes the egress object o, {"mode":"public","deny":[…]} or
 * {"mode":"allowlist","allow":[…]}, strictly: unknown keys, a list the
 * mode does not take, a prefix with host bits, a name that is not one
 * (dnsname_check), and more than max prefixes or
 * EGRESS_MAX_NAMES names are refused with a message naming path and the
 * entry.  0, or -1 with why; *e is only written on success.
 */
int	egress_from_json(struct json_object *o, const char *path, size_t max,
	    struct egress *e, char *why, size_t whylen);
/* The same with a limit on names too (at most EGRESS_MAX_NAMES). */
int	egress_from_json_lim(struct json_object *o, const char *path,
	    size_t max_cidrs, size_t max_names, struct egress *e, char *why,
	    size_t whylen);
/* 1 when the checked, lowercase query name q is one e lets resolve: one
 * an allowlist names, or one a public policy does not deny. */
int	egress_name_allowed(const struct egress *e, const char *q);
/* The same shape; NULL on allocation failure. */
struct json_object *egress_to_json(const struct egress *);
int	egress_equal(const struct egress *, const struct egress *);
/*
 * 1 when every destination vm reaches, ws reaches too (vm only narrows
 * ws); else 0 with why naming the first entry that widens it.
 */
int	egress_narrows(const struct egress *ws, const struct egress *vm,
	    char *why, size_t whylen);
/*
 * What both a and b allow, into out: a running VM's own policy narrowed
 * by its workspace's new one.  0; or -1 when the result would take more
 * than EGRESS_MAX_CIDRS prefixes or EGRESS_MAX_NAMES names, with out an
 * empty allowlist (never
 * wider than either).
 */
int	egress_intersect(const struct egress *a, const struct egress *b,
	    struct egress *out);
/* "public", "public, denying 2 prefixes", "allowlist of 3 prefixes and 2 names". */
void	egress_describe(const struct egress *, char *buf, size_t len);

#endif
