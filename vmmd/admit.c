/*
 * vmmd's admission: whether a new VM, or n at once, or a snapshot fits
 * the host's limits and its workspace's (authd's policy), counted from
 * the VMs and snapshots held now and the state volume's free space.  A
 * refusal is quota_exceeded, naming the limit.
 *
 * The host's limits count what the host really gives: each VM's vCPUs
 * (max_vcpus), and its guest memory with QEMU's own beside it
 * (qemu_overhead_mib), against max_memory_mib.  A workspace's memory_mib
 * is its guests' memory only, the figure its tenant chooses.
 */
#include <sys/queue.h>
#include <sys/types.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "disk.h"
#include "admit.h"
#include "snapshot_files.h"
#include "vmmd_shared.h"
#include "vm_local.h"

int
vm_admit(const struct request *req, const struct conf_image *im,
    int vcpus, int memory_mib, char *code, size_t codelen, char *msg,
    size_t msglen)
{
	return vm_admit_n(req, im, vcpus, memory_mib, 1, code, codelen, msg,
	    msglen);
}

/* QEMU's own memory beside each guest's: its process, and under TCG the
 * translation cache vmmd gives it. */
static long long
admit_overhead_mib(void)
{
	if (vmmd_conf()->vmmd.qemu_overhead_mib > 0)
		return vmmd_conf()->vmmd.qemu_overhead_mib;
	return 64 + (vmmd_qemu() != NULL && qemu_backend_kvm(vmmd_qemu()) ? 0 :
	    QEMU_TCG_TB_MIB);
}

static long long
admit_max_vcpus(void)
{
	long n;

	if (vmmd_conf()->vmmd.max_vcpus > 0)
		return vmmd_conf()->vmmd.max_vcpus;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return 4 * (n > 0 ? n : 1);
}

/*
 * What is held now, on the host and by req's workspace: VMs, their memory,
 * and the storage of VMs and snapshots.  For a tenant the warm pool's VMs
 * and snapshots are left out: the pool builds only within what is free,
 * and a tenant is never refused for what it holds (warmpool.c).
 */
struct admit_usage {
	long long	 host_vms, host_mem, host_disk, host_vcpus;
	long long	 ws_vms, ws_mem, ws_disk, ws_snaps;
};

static void
admit_usage(const struct request *req, struct admit_usage *u)
{
	int tenant = !warmpool_is_pool(req->workspace);
	long long overhead = admit_overhead_mib();
	struct vm *vm;

	memset(u, 0, sizeof(*u));
	snap_usage(req->workspace, &u->host_disk, &u->ws_disk, &u->ws_snaps);
	if (tenant) {
		long long all, pool, n;

		snap_usage(POOL_WORKSPACE, &all, &pool, &n);
		u->host_disk -= pool;
	}
	TAILQ_FOREACH(vm, vm_all(), entry) {
		if (vm->rec.state == VM_GONE ||
		    (tenant && warmpool_is_pool(vm->rec.workspace)))
			continue;
		u->host_vms++;
		u->host_vcpus += vm->rec.vcpus;
		u->host_mem += vm->rec.memory_mib + overhead;
		u->host_disk += vm->rec.disk_bytes;
		if (strcmp(vm->rec.workspace, req->workspace) == 0) {
			u->ws_vms++;
			u->ws_mem += vm->rec.memory_mib;
			u->ws_disk += vm->rec.disk_bytes;
		}
	}
}

/* The state volume has room for need bytes more and min_free_mib. */
static int
admit_free_disk(unsigned long long need, const char *what, char *msg,
    size_t msglen)
{
	uint64_t avail = 0, total = 0;
	char err[256];

	need += (unsigned long long)vmmd_conf()->vmmd.min_free_mib << 20;
	if (disk_space(vmmd_conf()->vmmd.vm_dir, &avail, &total, err,
	    sizeof(err)) == 0 && avail < need) {
		snprintf(msg, msglen, "free disk: %s has %llu MiB free, %s "
		    "needs %llu MiB", vmmd_conf()->vmmd.vm_dir,
		    (unsigned long long)(avail >> 20), what, need >> 20);
		return -1;
	}
	return 0;
}

/* n VMs of vcpus, memory_mib and im's disk at once (vm_fork's
 * children). */
int
vm_admit_n(const struct request *req, const struct conf_image *im,
    int vcpus, int memory_mib, int n, char *code, size_t codelen, char *msg,
    size_t msglen)
{
	long long disk = image_disk_bytes(im) * n;
	long long mem = (long long)memory_mib * n;
	long long overhead = admit_overhead_mib();
	long long max_vcpus = admit_max_vcpus();
	struct admit_usage u;

	snprintf(code, codelen, "quota_exceeded");
	admit_usage(req, &u);
	if (u.host_vms + n > vmmd_conf()->vmmd.max_vms) {
		snprintf(msg, msglen, "max_vms: the host already keeps %lld "
		    "VMs, its limit", u.host_vms);
		return -1;
	}
	if (u.host_vcpus + (long long)vcpus * n > max_vcpus) {
		snprintf(msg, msglen, "max_vcpus: %lld vCPUs are reserved of "
		    "%lld; %lld more do not fit", u.host_vcpus, max_vcpus,
		    (long long)vcpus * n);
		return -1;
	}
	if (u.host_mem + mem + overhead * n >
	    vmmd_conf()->vmmd.max_memory_mib) {
		snprintf(msg, msglen, "max_memory_mib: %lld MiB are reserved "
		    "of %lld, with %lld MiB of QEMU's own per VM; %lld more "
		    "do not fit", u.host_mem, vmmd_conf()->vmmd.max_memory_mib,
		    overhead, mem + overhead * n);
		return -1;
	}
	if ((u.host_disk + disk) > vmmd_conf()->vmmd.max_storage_gib << 30) {
		snprintf(msg, msglen, "max_storage_gib: the host's %lld GiB "
		    "are reserved", vmmd_conf()->vmmd.max_storage_gib);
		return -1;
	}
	if (req->policy.max_vms > 0 && u.ws_vms + n > req->policy.max_vms) {
		snprintf(msg, msglen, "workspace max_vms: it already has %lld "
		    "VMs, its limit", u.ws_vms);
		return -1;
	}
	if (req->policy.memory_mib > 0 &&
	    u.ws_mem + mem > req->policy.memory_mib) {
		snprintf(msg, msglen, "workspace memory_mib: %lld of its %lld "
		    "MiB are in use; %lld more do not fit", u.ws_mem,
		    req->policy.memory_mib, mem);
		return -1;
	}
	if (req->policy.storage_gib > 0 &&
	    u.ws_disk + disk > req->policy.storage_gib << 30) {
		snprintf(msg, msglen, "workspace storage_gib: its %lld GiB "
		    "are reserved", req->policy.storage_gib);
		return -1;
	}
	/* A VM's whole disk and two checkpoint generations must fit. */
	return admit_free_disk((unsigned long long)disk +
	    2ULL * ((unsigned long long)mem << 20), "a new VM", msg, msglen);
}

/*
 * A snapshot of bytes more (its disk as a VM's counts, and its memory):
 * the workspace's count, then the same storage limits as vm_admit's.
 */
int
snap_admit(const struct request *req, long long bytes, int counted,
    char *code, size_t codelen, char *msg, size_t msglen)
{
	struct admit_usage u;

	snprintf(code, codelen, "quota_exceeded");
	admit_usage(req, &u);
	if (counted &&
	    u.ws_snaps + 1 > vmmd_conf()->vmmd.max_snapshots_per_workspace) {
		snprintf(msg, msglen, "max_snapshots_per_workspace: the "
		    "workspace already keeps %lld snapshots, its limit",
		    u.ws_snaps);
		return -1;
	}
	if (u.host_disk + bytes > vmmd_conf()->vmmd.max_storage_gib << 30) {
		snprintf(msg, msglen, "max_storage_gib: the host's %lld GiB "
		    "are reserved", vmmd_conf()->vmmd.max_storage_gib);
		return -1;
	}
	if (req->policy.storage_gib > 0 &&
	    u.ws_disk + bytes > req->policy.storage_gib << 30) {
		snprintf(msg, msglen, "workspace storage_gib: its %lld GiB "
		    "are reserved", req->policy.storage_gib);
		return -1;
	}
	return admit_free_disk((unsigned long long)bytes, "the snapshot", msg,
	    msglen);
}
