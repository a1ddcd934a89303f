/*
 * Dropping privileges and sandboxing, in the order STYLE.md gives and
 * every daemon follows: open what needs privilege first, then
 * privdrop() (groups, gid, uid, kept capabilities, NoNewPrivs), then
 * sandbox_seccomp(), then the event loop.  Each step is verified; one that
 * did not hold is fatal.
 */
#ifndef MCPVM_PRIVDROP_H
#define MCPVM_PRIVDROP_H

#include <sys/types.h>
#include <stddef.h>

#include <sys/capability.h>

struct privdrop {
	const char		*user;	/* NULL or "": keep the current uid */
	const cap_value_t	*keep;	/* capabilities to keep, may be NULL */
	size_t			 nkeep;
};

/* Looks up a user: 0, or -1 with a message in err. */
int	privdrop_lookup(const char *user, uid_t *, gid_t *, char *err,
	    size_t errlen);
/* Drops to p->user keeping only p->keep, sets NoNewPrivs; fatal on error. */
void	privdrop(const struct privdrop *p);

/*
 * Installs a seccomp allowlist: a common base that every daemon needs plus
 * `extra` (syscall names).  Anything else kills the process, or with
 * log_only is allowed and logged by the kernel (for finding what a new
 * code path needs; never in production).  Fatal on error.
 */
void	sandbox_seccomp(const char *const *extra, size_t nextra,
	    int log_only);
/* The same, and ioctl allowed for the requests in ioctls alone. */
void	sandbox_seccomp_ioctl(const char *const *extra, size_t nextra,
	    const unsigned long *ioctls, size_t nioctls, int log_only);

#endif
