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
 * Starts QEMU through vmmd's spawner (spawn.h): argv[1..] with a minimal
 * environment, never through a shell, as the slot's VM uid in its cgroup
 * (when cgroup is set), with /dev/kvm's group kvm_gid (or none), stdin
 * from /dev/null, stdout and stderr appended to logfd, tap_fd (or -1) as
 * QEMU_TAP_FD, console_fd (or -1) as QEMU_CONSOLE_FD and no other
 * descriptor, its own session and no_new_privs, in the jail of VM vm
 * (NULL: none; see spawn.h).  Returns the pid once the child has exec'd
 * (it waits only for that), or -1 with the failed step in err.
 */
pid_t	qemu_spawn(char *const argv[], const char *vm, unsigned slot,
	    int cgroup, gid_t kvm_gid, int tap_fd, int console_fd, int logfd,
	    char *err, size_t errlen);

#endif
