/*
 * QEMU's command line, the accelerator choice and the jailed fork+exec,
 * for vmmd's QEMU backend (backend_qemu.c).  Private to vmmd/.
 */
#ifndef VMMD_QEMU_EXEC_H
#define VMMD_QEMU_EXEC_H

#include <stddef.h>
#include <sys/types.h>

struct cg_attach;

/* QEMU sees its TAP device (network on) as this descriptor. */
#define QEMU_TAP_FD	3
/* and the pipe its serial console goes to as this one. */
#define QEMU_CONSOLE_FD	4

/*
 * Forks and execs argv[0] with argv and a minimal environment, never
 * through a shell.  The child, before exec: its own session, the cgroup
 * (cga, may be NULL), stdin from /dev/null, stdout and stderr appended to
 * logfd, tap_fd (or -1) as QEMU_TAP_FD, console_fd (or -1) as
 * QEMU_CONSOLE_FD and no other descriptor, then
 * setgroups (kvm_gid alone, or none), setresgid, setresuid to uid:gid and
 * no_new_privs.  Returns the pid once the child has exec'd (it waits only
 * for that), or -1 with the failed step in err.
 */
pid_t	qemu_spawn(char *const argv[], const struct cg_attach *cga, uid_t uid,
	    gid_t gid, gid_t kvm_gid, int tap_fd, int console_fd, int logfd,
	    char *err, size_t errlen);

#endif
