/*
 * Preflight checks of the host vmmd runs on: accelerator, QEMU, cgroups,
 * reflinks and free space in the state directory, the reserved uid range,
 * image digests.  Each check passes or fails with a message a person can
 * act on; `vmctl preflight` prints them and vmmd runs them at startup.
 * Blocking (digests read whole images): run from a worker thread.
 */
#ifndef VMMD_PREFLIGHT_H
#define VMMD_PREFLIGHT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PF_MSG_MAX	512

struct pf_result {
	char	name[32];	/* "accel", "qemu", "cgroups", ... */
	int	ok;
	char	msg[PF_MSG_MAX];
};

/* A file whose SHA-256 is pinned in the configuration. */
struct pf_file {
	const char	*label;		/* e.g. "image default rootfs" */
	const char	*path;
	const char	*sha256;	/* 64 hex digits */
};

struct pf_conf {
	const char		*qemu_binary;
	const char		*state_dir;
	uint64_t		 min_free_bytes;
	uid_t			 uid_base;
	unsigned		 uid_count;
	const char		*passwd;	/* NULL: /etc/passwd */
	const char		*cgroup_parent;	/* NULL: "mcpvm" */
	const struct pf_file	*files;
	size_t			 nfiles;
};

struct pf_report {
	struct pf_result	*r;
	size_t			 n;
	size_t			 failed;
};

/* Runs every check; returns how many failed, or -1 if out of memory. */
int	preflight_run(const struct pf_conf *, struct pf_report *);
void	preflight_free(struct pf_report *);

/* The single checks, for tests and for callers that want one. */
void	pf_check_accel(struct pf_result *);
void	pf_check_qemu(const char *binary, struct pf_result *);
void	pf_check_cgroups(const char *parent, struct pf_result *);
void	pf_check_reflink(const char *state_dir, struct pf_result *);
void	pf_check_space(const char *state_dir, uint64_t min_free,
	    struct pf_result *);
void	pf_check_uids(const char *passwd, uid_t base, unsigned count,
	    struct pf_result *);
void	pf_check_digest(const struct pf_file *, struct pf_result *);

/* "QEMU emulator version 7.2.22 (...)" → 7, 2, 22.  0 or -1. */
int	pf_parse_qemu_version(const char *out, int *major, int *minor,
	    int *micro);
/* SHA-256 of a file as 64 lowercase hex digits (hex: 65 bytes). */
int	pf_sha256_file(const char *path, char hex[65], char *err,
	    size_t errlen);

#endif
