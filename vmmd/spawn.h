/*
 * vmmd's spawner: the one process of vmmd's that may start programs.
 *
 * vmmd forks it at startup, before it drops capabilities, starts a thread
 * or installs its seccomp filter, so that neither the filter nor the
 * missing capabilities reach QEMU and vmproxy (a filter is inherited
 * across exec; QEMU needs far more than vmmd does).  vmmd itself may then
 * not execve at all.
 *
 * The spawner keeps only CAP_SETUID and CAP_SETGID (and CAP_SYS_ADMIN
 * for the jail below, when it has one), talks to no one but vmmd (an
 * inherited SOCK_SEQPACKET socketpair), and starts only three things,
 * each checked against what it was told at startup:
 *   SPAWN_QEMU     the configured QEMU, as a VM's uid, in the VM's cgroup;
 *   SPAWN_VMPROXY  the configured vmproxy, likewise;
 *   SPAWN_VERSION  the configured QEMU with "--version" alone, as nobody.
 * A compromised vmmd therefore cannot use it to run anything as root.
 *
 * With a jail (spawn_conf's vm_dir and run_dir), QEMU and vmproxy start
 * in a mount namespace of their own: a private tmpfs on /tmp and on
 * /dev/shm, an empty tmpfs over vm_dir and over run_dir, and only their
 * VM's two directories, vm_dir/<vm> and run_dir/<vm>, bound back at the
 * same paths.  The two processes of one VM are two spawns and so two
 * namespaces, each with the same view.  The programs themselves must
 * therefore not live under /tmp, /dev/shm, vm_dir or run_dir.
 *
 * Children are cloned with CLONE_PARENT: they are vmmd's children, so
 * vmmd reaps them, polls their pidfds and signals them as before.  Private
 * to vmmd/.
 */
#ifndef VMMD_SPAWN_H
#define VMMD_SPAWN_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

struct cg_host;

enum spawn_kind {
	SPAWN_QEMU = 1,
	SPAWN_VMPROXY,
	SPAWN_VERSION,
};

/* Limits of one request, checked by the spawner. */
#define SPAWN_MAX_FDS		6	/* descriptors passed to the child */
#define SPAWN_FD_LIMIT		16	/* a passed fd lands below this */
#define SPAWN_ARGC_MAX		128
#define SPAWN_ARGS_MAX		16384	/* argv's strings with their NULs */
#define SPAWN_VM_MAX		64	/* a VM's name: [0-9A-Za-z_-] */

struct spawn_conf {
	const char		*qemu;		/* binary for SPAWN_QEMU/VERSION */
	const char		*vmproxy;	/* binary for SPAWN_VMPROXY */
	uid_t			 uid_base;	/* VM uids: uid_base + slot */
	unsigned		 nslots;
	const struct cg_host	*cg;		/* NULL: no VM cgroups */
	/* Absolute parents of every VM's directories; NULL: no jail. */
	const char		*vm_dir;
	const char		*run_dir;
};

struct spawn_fd {
	int	fd;	/* in the caller */
	int	at;	/* its number in the child, 0..SPAWN_FD_LIMIT-1 */
};

struct spawn_req {
	enum spawn_kind		 kind;
	unsigned		 slot;		/* the VM's (QEMU, VMPROXY) */
	int			 cgroup;	/* join the slot's cgroup */
	int			 keep_stderr;	/* vmmd's stderr as fd 2 */
	gid_t			 kvm_gid;	/* (gid_t)-1: no extra group */
	/*
	 * The VM whose directories the jail shows (QEMU, VMPROXY): needed
	 * when the spawner has a jail, refused when it has none.
	 */
	const char		*vm;
	char *const		*argv;		/* argv[0] is a name only */
	const struct spawn_fd	*fds;
	size_t			 nfds;
};

/*
 * Forks the spawner.  Call before any thread starts and before privdrop;
 * the caller keeps the socket.  Fatal on error: vmmd cannot run without.
 */
void	spawn_start(const struct spawn_conf *);

/*
 * Starts r->kind's program and returns its pid once it has exec'd, or -1
 * with the reason in err.  A child that failed before exec is reaped
 * here.  Descriptors 0, 1 and 2 not in r->fds are /dev/null; every other
 * descriptor the child has is one of r->fds.  Safe from any thread
 * (requests are serialised); blocks only until the child reaches exec.
 */
pid_t	spawn_run(const struct spawn_req *r, char *err, size_t errlen);

/* Closes vmmd's end: the spawner exits.  spawn_run fails from here on. */
void	spawn_stop(void);

/*
 * The spawner's decoder alone, for its fuzz target: 0 if the spawner,
 * configured with c, would act on the len bytes of msg arriving with
 * nfds descriptors; -1 if it would refuse them.
 */
int	spawn_check(const struct spawn_conf *c, const void *msg, size_t len,
	    int nfds);

/* The spawner's pid, for tests and logs; -1 before spawn_start. */
pid_t	spawn_pid(void);

#endif
