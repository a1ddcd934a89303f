/*
 * vmhold: the one process of mcpvm-vms.service, the unit whose delegated
 * cgroup holds every VM's cgroup, apart from vmmd's own unit.
 *
 * Why a unit of its own: when vmmd's main process dies (a crash, an OOM
 * kill, a seccomp kill), systemd kills what is left in vmmd's unit cgroup
 * (KillMode=mixed).  VMs kept there died with it, although their QEMU and
 * vmproxy were healthy and the next vmmd would have adopted them.  In
 * this unit's cgroup they outlive any vmmd.  A unit cgroup that hands
 * controllers to its children may hold no process itself (cgroup v2's
 * "no internal processes" rule), so vmhold first moves itself into the
 * leaf CG_HOLDER_LEAF, and only then tells systemd it is ready: vmmd, ordered
 * after this unit, then enables the controllers and makes
 * <cgroup_parent>/vm-N beside that leaf (vmmd(8), CGROUPS).
 *
 * After that it does nothing until SIGTERM: no capabilities, no files, a
 * seccomp allowlist of the calls a signal wait needs.  On a host without
 * a cgroup2 hierarchy there is nothing to hold; it still becomes ready,
 * so that vmmd's Requires= holds, and says so.
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <mntent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "privdrop.h"
#include "sdnotify.h"
#include "util.h"

static void
usage(void)
{
	fprintf(stderr, "usage: vmhold\n");
	exit(2);
}

/* The cgroup2 mount point, or -1 when there is none. */
static int
cgroup2_mount(char *buf, size_t len)
{
	struct mntent *m;
	FILE *f;
	int rc = -1;

	if ((f = setmntent("/proc/self/mounts", "re")) == NULL)
		fatal("/proc/self/mounts");
	while ((m = getmntent(f)) != NULL)
		if (strcmp(m->mnt_type, "cgroup2") == 0 &&
		    strlen(m->mnt_dir) < len) {
			snprintf(buf, len, "%s", m->mnt_dir);
			rc = 0;
			break;
		}
	endmntent(f);
	return rc;
}

/* This process's cgroup2 path, or -1. */
static int
own_cgroup(char *buf, size_t len)
{
	FILE *f;
	int rc;

	if ((f = fopen("/proc/self/cgroup", "re")) == NULL)
		fatal("/proc/self/cgroup");
	rc = cg_own_from(f, buf, len);
	fclose(f);
	return rc;
}

/* Moves this process into <own cgroup>/CG_HOLDER_LEAF; says where it holds. */
static void
enter_leaf(char *held, size_t len)
{
	char mnt[PATH_MAX], own[PATH_MAX], leaf[PATH_MAX * 2 + 32];
	char procs[sizeof(leaf) + 16], want[PATH_MAX + 8], after[PATH_MAX];

	held[0] = '\0';
	if (cgroup2_mount(mnt, sizeof(mnt)) == -1 ||
	    own_cgroup(own, sizeof(own)) == -1) {
		log_info("no cgroup2 hierarchy: nothing to hold (vmmd uses "
		    "the v1 hierarchies)");
		return;
	}
	if (strcmp(own, "/") == 0)
		fatalx("vmhold runs in the root cgroup: start it as "
		    "mcpvm-vms.service, whose cgroup is delegated to vmmd");
	snprintf(leaf, sizeof(leaf), "%s%s/" CG_HOLDER_LEAF, mnt, own);
	if (mkdir(leaf, 0755) == -1 && errno != EEXIST)
		fatal("mkdir %s", leaf);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", leaf);
	if (write_file_str(procs, "0") == -1)
		fatal("%s", procs);
	snprintf(want, sizeof(want), "%s/" CG_HOLDER_LEAF, own);
	if (own_cgroup(after, sizeof(after)) == -1 || strcmp(after, want) != 0)
		fatalx("moved into %s, but /proc/self/cgroup does not say %s",
		    leaf, want);
	snprintf(held, len, "%s", own);
}

int
main(int argc, char *argv[])
{
	static const char *const calls[] = { "rt_sigtimedwait" };
	const struct privdrop none = { NULL, NULL, 0 };
	char held[PATH_MAX], status[PATH_MAX + 32];
	sigset_t set;
	int sig;

	if (argc != 1)
		usage();
	(void)argv;
	log_init("vmhold", 1, 0);
	sd_notify_init();
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) == -1)
		fatal("sigprocmask");
	enter_leaf(held, sizeof(held));
	privdrop(&none);
	sandbox_seccomp(calls, sizeof(calls) / sizeof(calls[0]), 0);
	if (held[0] != '\0') {
		log_info("holding %s for the VMs' cgroups; this process is in "
		    "its leaf " CG_HOLDER_LEAF, held);
		snprintf(status, sizeof(status), "STATUS=holding %s", held);
		sd_notify_send(status);
	}
	sd_notify_send("READY=1");
	do
		sig = sigwaitinfo(&set, NULL);
	while (sig == SIGHUP || (sig == -1 && errno == EINTR));
	if (sig == -1)
		fatal("sigwaitinfo");
	log_info("stopping on signal %d", sig);
	return 0;
}
