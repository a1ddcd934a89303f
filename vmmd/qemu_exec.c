/*
 * QEMU's command line, the accelerator choice and the jailed fork+exec
 * (see qemu_exec.h and backend.h).  Runs in vmmd; the child side of
 * qemu_spawn runs between fork and exec.
 */
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <linux/kvm.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cgroup.h"
#include "qemu_exec.h"
#include "spawn.h"
#include "util.h"

#define DEFAULT_MACHINE		"q35"


static int
argv_add(struct qemu_argv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
argv_add(struct qemu_argv *a, const char *fmt, ...)
{
	va_list ap;
	char **nv, *s;

	if (a->n + 2 > a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 64;

		if ((nv = realloc(a->v, ncap * sizeof(*nv))) == NULL)
			return -1;
		a->v = nv;
		a->cap = ncap;
	}
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1) {
		va_end(ap);
		return -1;
	}
	va_end(ap);
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
	return 0;
}

void
qemu_argv_free(struct qemu_argv *a)
{
	size_t i;

	for (i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

/*
 * QEMU option values end at a comma; a literal comma is written twice.
 * Without this a path like "x,readonly=off" would add an option.
 */
static char *
opt_escape(const char *s)
{
	size_t n = 0;
	const char *p;
	char *out, *q;

	for (p = s; *p != '\0'; p++)
		n += *p == ',' ? 2 : 1;
	if ((out = malloc(n + 1)) == NULL)
		return NULL;
	for (p = s, q = out; *p != '\0'; p++) {
		*q++ = *p;
		if (*p == ',')
			*q++ = ',';
	}
	*q = '\0';
	return out;
}

/* 8-4-4-4-12 lowercase hex: nothing QEMU's option parser would split. */
static int
uuid_ok(const char *u)
{
	size_t i;

	for (i = 0; u[i] != '\0'; i++)
		if (i == 8 || i == 13 || i == 18 || i == 23 ? u[i] != '-' :
		    !((u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' &&
		    u[i] <= 'f')))
			return 0;
	return i == 36;
}

int
qemu_build_argv(const struct qemu_conf *conf, const struct vm_spec *s,
    int kvm, int incoming, struct qemu_argv *a)
{
	char *rd = NULL, *disk = NULL;
	const char *machine = conf->machine ? conf->machine : DEFAULT_MACHINE;
	/*
	 * microvm has no PCI bus by default: its devices sit on virtio-mmio.
	 * Both machines checkpoint and restore with a virtio-serial link
	 * under TCG on QEMU 7.2; q35 stays the default because a stock
	 * distribution kernel finds PCI devices without extra modules.
	 */
	const char *bus = strncmp(machine, "microvm", 7) == 0 ? "device" :
	    "pci";
	int rc = -1;

	memset(a, 0, sizeof(*a));
	if (s->vcpus == 0 || s->memory_mib == 0 || s->rundir == NULL ||
	    (s->vmgenid != NULL && !uuid_ok(s->vmgenid))) {
		errno = EINVAL;
		return -1;
	}
	if ((rd = opt_escape(s->rundir)) == NULL)
		goto out;
	if (s->disk != NULL && (disk = opt_escape(s->disk)) == NULL)
		goto out;
	if (argv_add(a, "%s", conf->binary) == -1 ||
	    argv_add(a, "-name") == -1 ||
	    argv_add(a, "mcpvm-%u", s->slot) == -1 ||
	    argv_add(a, "-accel") == -1 ||
	    (kvm || conf->tcg_tb_mib == 0 ? argv_add(a, "%s", kvm ? "kvm" :
	    "tcg") : argv_add(a, "tcg,tb-size=%u", conf->tcg_tb_mib)) == -1 ||
	    argv_add(a, "-nodefaults") == -1 ||
	    argv_add(a, "-no-user-config") == -1 ||
	    argv_add(a, "-nographic") == -1 ||
	    argv_add(a, "-sandbox") == -1 ||
	    argv_add(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
	    "resourcecontrol=deny") == -1 ||
	    argv_add(a, "-machine") == -1 ||
	    argv_add(a, "%s", machine) == -1 ||
	    argv_add(a, "-m") == -1 ||
	    argv_add(a, "%uM", s->memory_mib) == -1 ||
	    argv_add(a, "-smp") == -1 ||
	    argv_add(a, "%u", s->vcpus) == -1)
		goto out;
	/* KVM passes the host CPU through; TCG keeps QEMU's default model. */
	if (kvm && (argv_add(a, "-cpu") == -1 || argv_add(a, "host") == -1))
		goto out;
	if (s->kernel != NULL) {
		if (argv_add(a, "-kernel") == -1 ||
		    argv_add(a, "%s", s->kernel) == -1)
			goto out;
		if (s->initrd != NULL && (argv_add(a, "-initrd") == -1 ||
		    argv_add(a, "%s", s->initrd) == -1))
			goto out;
		if (s->append != NULL && (argv_add(a, "-append") == -1 ||
		    argv_add(a, "%s", s->append) == -1))
			goto out;
	}
	/*
	 * cache=none: O_DIRECT, so guest data is not cached twice (and not
	 * charged to the VM's memory cgroup as host page cache), and a guest
	 * flush becomes an fdatasync of the image: after a host crash the
	 * disk holds everything the guest had flushed, as a real disk would.
	 * Migration drains and flushes the disk before it completes.
	 * aio=native (Linux AIO, which needs O_DIRECT) instead of a thread
	 * pool: QEMU's I/O threads would count against the VM's pids limit.
	 */
	if (disk != NULL && (argv_add(a, "-drive") == -1 ||
	    argv_add(a, "file=%s,format=raw,if=none,id=disk0,cache=none,"
	    "aio=native,discard=unmap", disk) == -1 ||
	    argv_add(a, "-device") == -1 ||
	    argv_add(a, "virtio-blk-%s,drive=disk0", bus) == -1))
		goto out;
	if (argv_add(a, "-device") == -1 ||
	    argv_add(a, "virtio-serial-%s,id=vser0", bus) == -1 ||
	    argv_add(a, "-chardev") == -1 ||
	    argv_add(a, "socket,id=link0,path=%s/%s,server=on,wait=off", rd,
	    VMM_LINK_SOCK) == -1 ||
	    argv_add(a, "-device") == -1 ||
	    argv_add(a, "virtserialport,bus=vser0.0,chardev=link0,name=%s",
	    VMM_LINK_PORT) == -1 ||
	    argv_add(a, "-chardev") == -1 ||
	    argv_add(a, "socket,id=qmp0,path=%s/%s,server=on,wait=off", rd,
	    VMM_QMP_SOCK) == -1 ||
	    argv_add(a, "-mon") == -1 ||
	    argv_add(a, "chardev=qmp0,mode=control") == -1 ||
	    argv_add(a, "-chardev") == -1 ||
	    (s->console_fd != -1 ?
	    argv_add(a, "file,id=con0,path=/dev/fd/%d", QEMU_CONSOLE_FD) :
	    argv_add(a, "file,id=con0,path=%s/%s", rd, VMM_CONSOLE_LOG)) == -1 ||
	    argv_add(a, "-serial") == -1 ||
	    argv_add(a, "chardev:con0") == -1)
		goto out;
	if (s->tap_fd != -1 && (argv_add(a, "-netdev") == -1 ||
	    argv_add(a, "tap,id=net0,fd=%d", QEMU_TAP_FD) == -1 ||
	    argv_add(a, "-device") == -1 ||
	    (s->mac != NULL ? argv_add(a, "virtio-net-%s,netdev=net0,mac=%s",
	    bus, s->mac) : argv_add(a, "virtio-net-%s,netdev=net0", bus)) ==
	    -1))
		goto out;
	if (s->vmgenid != NULL && (argv_add(a, "-device") == -1 ||
	    argv_add(a, "vmgenid,guid=%s", s->vmgenid) == -1))
		goto out;
	if (argv_add(a, "-pidfile") == -1 ||
	    argv_add(a, "%s/%s", s->rundir, VMM_PIDFILE) == -1 ||
	    argv_add(a, "-msg") == -1 ||
	    argv_add(a, "timestamp=on") == -1)
		goto out;
	/* -S too: the guest runs only when vmmd says cont. */
	if (incoming && (argv_add(a, "-S") == -1 ||
	    argv_add(a, "-incoming") == -1 || argv_add(a, "defer") == -1))
		goto out;
	rc = 0;
out:
	free(rd);
	free(disk);
	if (rc == -1)
		qemu_argv_free(a);
	return rc;
}

/* ---------- accelerator ---------- */

int
qemu_kvm_usable(gid_t *gid, char *why, size_t whylen)
{
	struct stat st;
	int fd, v;

	*gid = (gid_t)-1;
	if (stat("/dev/kvm", &st) == -1)
		return errf(why, whylen, "/dev/kvm: %s", strerror(errno)), 0;
	if (!S_ISCHR(st.st_mode))
		return errf(why, whylen, "/dev/kvm is not a device"), 0;
	if ((fd = open("/dev/kvm", O_RDWR | O_CLOEXEC)) == -1)
		return errf(why, whylen, "/dev/kvm: %s", strerror(errno)), 0;
	v = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (v != KVM_API_VERSION) {
		close(fd);
		return errf(why, whylen, "/dev/kvm: API version %d, want %d",
		    v, KVM_API_VERSION), 0;
	}
	v = ioctl(fd, KVM_CREATE_VM, 0);
	close(fd);
	if (v == -1)
		return errf(why, whylen, "/dev/kvm: cannot create a VM: %s",
		    strerror(errno)), 0;
	close(v);
	/* QEMU runs as the VM uid, not as root: it must be able to open it. */
	if ((st.st_mode & 0006) == 0006)
		return 1;
	if ((st.st_mode & 0060) == 0060 && st.st_gid != 0) {
		*gid = st.st_gid;
		return 1;
	}
	return errf(why, whylen, "/dev/kvm (mode %04o, gid %u) cannot be opened "
	    "by the VM uids; make it group kvm, mode 0660",
	    (unsigned)(st.st_mode & 07777), (unsigned)st.st_gid), 0;
}

/* ---------- spawn ---------- */

pid_t
qemu_spawn(char *const argv[], const char *vm, unsigned slot, int cgroup,
    gid_t kvm_gid, int tap_fd, int console_fd, int logfd, char *err,
    size_t errlen)
{
	struct spawn_fd fds[4];
	struct spawn_req r;
	size_t n = 0;

	/* stdout and stderr appended to the log, the TAP device and the
	 * console pipe in their places, nothing else (see spawn.h). */
	fds[n++] = (struct spawn_fd){ logfd, 1 };
	fds[n++] = (struct spawn_fd){ logfd, 2 };
	if (tap_fd != -1)
		fds[n++] = (struct spawn_fd){ tap_fd, QEMU_TAP_FD };
	if (console_fd != -1)
		fds[n++] = (struct spawn_fd){ console_fd, QEMU_CONSOLE_FD };
	memset(&r, 0, sizeof(r));
	r.kind = SPAWN_QEMU;
	r.slot = slot;
	r.vm = vm;
	r.cgroup = cgroup;
	r.kvm_gid = kvm_gid;
	r.argv = argv;
	r.fds = fds;
	r.nfds = n;
	return spawn_run(&r, err, errlen);
}
