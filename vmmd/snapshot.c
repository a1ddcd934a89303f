/*
 * vmmd's snapshots: an immutable copy of a VM's disk, reflink-shared,
 * optionally with its memory and device state, taken at one instant.
 * vm_snapshot freezes the guest's jobs, stops QEMU (which drains and
 * flushes the disk), has the backend save the machine state when memory
 * is asked for (QEMU stays stopped), clones the disk on the worker pool,
 * then continues QEMU and thaws the guest with the time: paused_ms is the
 * stop to the cont.  The files are then digested, fsynced and described
 * by a manifest on the worker pool, and renamed into place.
 *
 * On disk: <state_dir>/snapshots/<id>/ with disk.raw, memory.bin (memory
 * only) and manifest.json, built as <id>.part/ and removed by renaming it
 * to <id>.del/ first; the files' side (paths, removal, manifest, startup
 * reconcile, checks before a restore) is snapshot_files.c's.  In the
 * store: a row that goes in as 'making' before any file and becomes
 * 'ready' after the rename.  Here: the making, the tools and vmctl's
 * commands.  Everything here runs on the loop but the file work, which is
 * the worker pool's.  vm_fork, on the same making, is fork.c's.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admit.h"
#include "audit.h"
#include "disk.h"
#include "log.h"
#include "preflight.h"
#include "quota.h"
#include "snapshot.h"
#include "snapshot_local.h"
#include "snapshot_revoke.h"
#include "tools.h"
#include "vm_local.h"
#include "worker.h"

/*
 * A disk-only snapshot's freeze of the guest's file systems: the guest
 * thaws them by itself after this much of its own running time if no
 * thaw comes (vmmd died in between); QEMU's stop for the clone does not
 * count, so it bounds only the few round trips around it.
 */
#define SNAP_THAW_AFTER_MS	60000

/* Snapshots whose files are being finished on the worker pool: vmmd's
 * exit waits for them (snap_work_pending, env.h). */
static int finishing;

/* ---- making one -------------------------------------------------------- */

struct snap_make {
	struct request		*req;
	struct vm		*vm;
	struct snap_record	 rec;
	const struct conf_image	*im;
	char			 part[PATH_MAX];	/* <id>.part */
	char			 final[PATH_MAX];	/* <id> */
	char			 vmdisk[PATH_MAX];
	/* On btrfs: the memory file QEMU writes in the VM's subvolume, so
	 * that it counts against the VM's limit (quota.h), and that
	 * finish_run clones into part and removes. */
	char			 vmmem[PATH_MAX];
	uid_t			 uid;
	gid_t			 gid;
	int			 stop;		/* QEMU is stopped by us */
	int			 cloning;	/* the clone job is out */
	int			 aborted;	/* the VM's operation ended */
	long long		 t_stop;
	long long		 cont_wall_ms;	/* when the source ran on */
	/* Run once complete instead of the reply (vm_fork's). */
	snap_made_cb		 made;
	void			*made_arg;
	/* The warm pool's (warmpool.c): told of a failure, owns made_arg. */
	snap_failed_cb		 failed;
	/* vm_run's commit (snap_commit): told of the end, either way, once,
	 * with made_arg; req is NULL. */
	snap_commit_cb		 commit;
	/* The first failure; the VM is still continued and thawed. */
	char			 err[512];
	/* the worker's */
	int			 rc;
	char			 werr[512];
};

static void make_clone(struct vm *);
/* snap_make_pool's, for the snap_make_begin it calls. */
static snap_failed_cb next_failed;
static void snap_finished(struct snap_make *, struct request *);
static void make_resume(struct vm *);

/* A snapshot that will not be: its row and files go, the caller hears. */
static void
make_fail(struct snap_make *mk, const char *code, const char *msg)
{
	char dberr[256];

	if (store_snap_delete(vmmd_store(), mk->rec.id, dberr, sizeof(dberr)) ==
	    -1)
		log_warnx("snapshot %s: %s", mk->rec.id, dberr);
	if (mk->vmmem[0] != '\0')
		unlink(mk->vmmem);
	remove_dir_async(mk->part);
	if (mk->req != NULL)
		request_error(mk->req, code, "%s", msg);
	if (mk->commit != NULL)
		mk->commit(NULL, code, msg, mk->made_arg);
	else if (mk->made != NULL && mk->failed != NULL)
		mk->failed(msg, mk->made_arg);
	else
		free(mk->made != NULL ? mk->made_arg : NULL);	/* vm_fork's */
	free(mk);
}

static struct snap_make *
make_of(struct vm *vm)
{
	return vm->op_arg;
}

/* Records the first failure; the VM goes on being put back. */
static void
make_err(struct snap_make *mk, const char *what, const char *why)
{
	if (mk->err[0] == '\0')
		snprintf(mk->err, sizeof(mk->err), "%s: %.400s", what, why);
}

/* The guest's jobs run again, with the time (as after a resume). */
static void
make_thawed(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct snap_make *mk;

	if (!op_current(vm, arg))
		return;
	mk = make_of(vm);
	if (code != NULL)
		log_warnx("vm %s: thaw after snapshot %s: %s", vm->rec.id,
		    mk->rec.id, msg);
	if (mk->err[0] != '\0')
		vm_op_done(vm, "unavailable", "the snapshot failed, the VM "
		    "runs on: %s", mk->err);
	else
		vm_op_done(vm, NULL, NULL);
}

/* The guest thaws its file systems and jobs, with the time. */
static void
make_thaw(struct vm *vm)
{
	struct json_object *call;

	call = json_object_new_object();
	json_object_object_add(call, "op", json_object_new_string("thaw"));
	json_object_object_add(call, "realtime_ns",
	    json_object_new_int64(wall_ms() * 1000000LL));
	if (!vm->guest_up || proxy_call(vm, call, GUEST_CTL_CALL_MS,
	    make_thawed, op_token(vm)) == -1)
		make_thawed(vm, NULL, "unavailable", "the guest is not up", -1,
		    op_token(vm));
	json_object_put(call);
}

static void
make_resumed(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;
	struct snap_make *mk = make_of(vm);

	mk->rec.paused_ms = mono_ms() - mk->t_stop;
	mk->cont_wall_ms = wall_ms();
	if (!ok) {
		char why[512];

		snprintf(why, sizeof(why), "QEMU did not continue after a "
		    "snapshot: %s", err);
		vm_fail(vm, why);	/* ends the operation, and the snapshot */
		return;
	}
	make_thaw(vm);
}

/* Puts the VM back as it was: QEMU continued and the jobs thawed. */
static void
make_resume(struct vm *vm)
{
	struct snap_make *mk = make_of(vm);

	if (!mk->stop) {
		/* Paused or hibernated: it stays so. */
		mk->rec.paused_ms = 0;
		mk->cont_wall_ms = wall_ms();
		if (mk->err[0] != '\0')
			vm_op_done(vm, "unavailable", "the snapshot failed: "
			    "%s", mk->err);
		else
			vm_op_done(vm, NULL, NULL);
		return;
	}
	if (vm->vmm == NULL || vmm_resume(vm->vmm, make_resumed, vm) == -1)
		make_resumed(vm->vmm, 0, "QEMU is busy or gone", vm);
}

struct clone_job {
	struct snap_make	*mk;
	char			 src[PATH_MAX], dst[PATH_MAX];
	uid_t			 uid;
	gid_t			 gid;
	long			 delay_ms;
	int			 rc;
	char			 err[512];
};

/*
 * The VM's disk is its uid's, mode 0600, and vmmd has no capability to
 * read past that: it takes the file for the clone (CAP_CHOWN) and gives
 * it back at once.  QEMU, stopped, keeps its open descriptor; a crash in
 * between is undone by the next boot, which hands the disk to the VM's
 * uid again (vm_boot.c).
 */
static void
clone_run(void *arg)
{
	struct clone_job *j = arg;
	char err[256];

	if (j->delay_ms > 0)
		usleep((useconds_t)j->delay_ms * 1000);
	if (disk_chown(j->src, 0, 0, j->err, sizeof(j->err)) == -1) {
		j->rc = -1;
		return;
	}
	j->rc = disk_clone(j->src, j->dst, 0, 0, j->err, sizeof(j->err));
	if (disk_chown(j->src, j->uid, j->gid, err, sizeof(err)) == -1) {
		if (j->rc == 0)
			snprintf(j->err, sizeof(j->err), "%s", err);
		j->rc = -1;
	}
}

static void
clone_done(void *arg)
{
	struct clone_job *j = arg;
	struct snap_make *mk = j->mk;
	struct vm *vm = mk->vm;

	mk->cloning = 0;
	if (mk->aborted) {
		/* The operation ended without us (a destroy, a failure):
		 * make_op_done has answered; the files go now. */
		make_fail(mk, "unavailable", "");
		free(j);
		vm_io_done(vm);
		return;
	}
	vm->io_pending--;
	if (j->rc == -1)
		make_err(mk, "the disk clone", j->err);

	free(j);
	make_resume(vm);
}

/* A test's failpoint, as disk.c's: holds the clone, with QEMU stopped. */
static long
clone_delay_ms(void)
{
	const char *v = getenv("MCPVM_TEST_DISK_DELAY_MS");
	char *end;
	long ms;

	if (v == NULL)
		return 0;
	errno = 0;
	ms = strtol(v, &end, 10);
	return errno == 0 && *end == '\0' && ms > 0 && ms <= 600000 ? ms : 0;
}

static void
make_clone(struct vm *vm)
{
	struct snap_make *mk = make_of(vm);
	struct clone_job *j;

	if (mk->err[0] != '\0') {
		make_resume(vm);
		return;
	}
	if ((j = calloc(1, sizeof(*j))) == NULL)
		fatal("calloc");
	j->mk = mk;
	snprintf(j->src, sizeof(j->src), "%s", mk->vmdisk);
	pjoin(j->dst, sizeof(j->dst), mk->part, SNAP_DISK);
	j->uid = vm->uid;
	j->gid = vm->gid;
	j->delay_ms = clone_delay_ms();
	if (worker_submit(vmmd_workers(), clone_run, clone_done, j) == -1) {
		free(j);
		make_err(mk, "the disk clone", "the worker pool refused it");
		make_resume(vm);
		return;
	}
	mk->cloning = 1;
	vm->io_pending++;
}

static void
make_saved(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;

	if (!ok)
		make_err(make_of(vm), "saving the memory", err);
	make_clone(vm);
}

/*
 * The memory file QEMU is about to write (the backend's "<path>.part",
 * which it opens without O_EXCL), made first in the VM's project: the
 * VM's QEMU writes it through its descriptor, so it counts against that
 * VM's limit until finish_run gives it to the snapshot.
 */
static int
memory_part_charged(struct vm *vm, const char *path, char *err,
    size_t errlen)
{
	char part[PATH_MAX];
	int fd, rc;

	if (!quota_enabled() || quota_subvolumes())
		return 0;
	if ((size_t)snprintf(part, sizeof(part), "%s.part", path) >=
	    sizeof(part))
		return errf(err, errlen, "%s: path too long", path);
	if ((fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) == -1)
		return errf(err, errlen, "%s: %s", part, strerror(errno));
	rc = quota_assign(fd, (uint32_t)vm->uid, err, errlen);
	close(fd);
	return rc;
}

static void
make_stopped(struct vmm *vmm, int ok, const char *err, void *arg)
{
	struct vm *vm = arg;
	struct snap_make *mk = make_of(vm);
	char path[PATH_MAX], why[512], name[128];

	if (!ok) {
		/* Not stopped: the guest runs; only its jobs to thaw. */
		mk->stop = 0;
		make_err(mk, "stopping QEMU", err);
		mk->stop = 1;
		make_resumed(vm->vmm, 1, "", vm);
		return;
	}
	if (!mk->rec.memory) {
		make_clone(vm);
		return;
	}
	/*
	 * On XFS the file is made in the snapshot, in the VM's project; on
	 * btrfs a file counts against the subvolume it is in, and a rename
	 * out of the VM's would be EXDEV: it is written in the VM's and
	 * cloned out.
	 */
	if (quota_subvolumes()) {
		/* Its own name: the next snapshot may start before this
		 * one's finish_run has cloned it out. */
		snprintf(name, sizeof(name), VM_MEMORY_PREFIX "%s.bin",
		    mk->rec.id);
		vm_path(vm, name, mk->vmmem, sizeof(mk->vmmem));
		snprintf(path, sizeof(path), "%s", mk->vmmem);
	} else
		pjoin(path, sizeof(path), mk->part, SNAP_MEMORY);
	if (memory_part_charged(vm, path, why, sizeof(why)) == -1) {
		make_err(mk, "saving the memory", why);
		make_clone(vm);
		return;
	}
	if (vmm_save(vm->vmm, path, make_saved, vm) == -1) {
		make_err(mk, "saving the memory", strerror(errno));
		make_clone(vm);
	}
}

/* The guest's jobs are frozen (or it could not freeze them): stop QEMU. */
static void
make_frozen(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct snap_make *mk;

	if (!op_current(vm, arg))
		return;
	mk = make_of(vm);
	if (!mk->rec.memory) {
		/*
		 * A disk-only snapshot holds only what is on the disk: unless
		 * the guest synced and froze its file systems, it fails,
		 * never silently missing what was just written.  Whatever
		 * froze (late, or in part) is thawed by the thaw sent now.
		 */
		if (code != NULL)
			make_err(mk, "freezing the guest's file systems", msg);
		else if (res == NULL ||
		    !json_object_object_get_ex(res, "filesystems", NULL))
			make_err(mk, "freezing the guest's file systems", "the "
			    "image's guestd predates the file systems' freeze");
		if (mk->err[0] != '\0') {
			log_warnx("vm %s: snapshot %s: %s", vm->rec.id,
			    mk->rec.id, mk->err);
			mk->rec.paused_ms = 0;
			mk->cont_wall_ms = wall_ms();
			make_thaw(vm);
			return;
		}
	} else if (code != NULL)
		log_warnx("vm %s: freeze before snapshot: %s", vm->rec.id, msg);
	if (vm->vmm == NULL) {
		vm_op_done(vm, "unavailable", "VM %s has no running VMM",
		    vm->rec.id);
		return;
	}
	mk->stop = 1;
	mk->t_stop = mono_ms();
	if (vmm_pause(vm->vmm, make_stopped, vm) == -1) {
		mk->stop = 0;
		vm_op_done(vm, "busy", "QEMU is busy");
	}
}

/* ---- finishing: digest, manifest, fsync, rename ------------------------ */

static void
finish_run(void *arg)
{
	struct snap_make *mk = arg;
	struct json_object *m;
	char path[PATH_MAX], parent[PATH_MAX];
	const char *text;
	struct stat st;
	size_t len;
	int fd, rc;

	mk->rc = -1;
	pjoin(path, sizeof(path), mk->part, SNAP_DISK);
	if (stat(path, &st) == -1) {
		errf(mk->werr, sizeof(mk->werr), "%s: %s", path,
		    strerror(errno));
		return;
	}
	mk->rec.disk_bytes = (long long)st.st_size;
	if (fsync_path(path, 0) == -1) {
		errf(mk->werr, sizeof(mk->werr), "fsync %s: %s", path,
		    strerror(errno));
		return;
	}
	if (mk->rec.memory) {
		pjoin(path, sizeof(path), mk->part, SNAP_MEMORY);
		if (mk->vmmem[0] != '\0') {
			/* Out of the VM's subvolume (a reflink across
			 * subvolumes of one volume): no longer the VM's. */
			rc = disk_clone(mk->vmmem, path, 0, 0, mk->werr,
			    sizeof(mk->werr));
			unlink(mk->vmmem);
			mk->vmmem[0] = '\0';
			if (rc == -1)
				return;
		}
		if (stat(path, &st) == -1) {
			errf(mk->werr, sizeof(mk->werr), "%s: %s", path,
			    strerror(errno));
			return;
		}
		mk->rec.memory_bytes = (long long)st.st_size;
		/* Written: the snapshot's, outside the VM's project. */
		if (quota_assign_path(path, 0, mk->werr,
		    sizeof(mk->werr)) == -1)
			return;
		if (snap_memory_digest(&mk->rec, path, mk->rec.memory_sha256,
		    mk->werr, sizeof(mk->werr)) == -1)
			return;
	}
	m = manifest_new(&mk->rec, mk->im);
	text = json_object_to_json_string_length(m, JSON_C_TO_STRING_PRETTY,
	    &len);
	pjoin(path, sizeof(path), mk->part, SNAP_MANIFEST);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) == -1 || write(fd, text, len) !=
	    (ssize_t)len || fsync(fd) == -1) {
		errf(mk->werr, sizeof(mk->werr), "%s: %s", path,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		json_object_put(m);
		return;
	}
	close(fd);
	json_object_put(m);
	snprintf(parent, sizeof(parent), "%s", snap_root);
	if (fsync_path(mk->part, 1) == -1 ||
	    rename(mk->part, mk->final) == -1 ||
	    fsync_path(parent, 1) == -1) {
		errf(mk->werr, sizeof(mk->werr), "%s: %s", mk->final,
		    strerror(errno));
		return;
	}
	mk->rc = 0;
}

static void
finish_done(void *arg)
{
	struct snap_make *mk = arg;
	struct request *req = mk->req;

	finishing--;
	snap_finished(mk, req);
	vmmd_maybe_exit();
}

int
snap_work_pending(void)
{
	return finishing > 0;
}

static void
snap_finished(struct snap_make *mk, struct request *req)
{
	char dberr[256];

	if (mk->rc == -1) {
		log_warnx("snapshot %s: %s", mk->rec.id, mk->werr);
		make_fail(mk, "unavailable", mk->werr);
		return;
	}
	if (store_snap_ready(vmmd_store(), &mk->rec, dberr, sizeof(dberr)) ==
	    -1) {
		log_warnx("snapshot %s: %s", mk->rec.id, dberr);
		/* Startup would drop it: removed now, and said so. */
		snprintf(mk->part, sizeof(mk->part), "%s", mk->final);
		make_fail(mk, "unavailable", "the snapshot could not be "
		    "recorded");
		return;
	}
	log_info("snapshot %s of vm %s (workspace %s): %s, %lld bytes, "
	    "paused %lld ms", mk->rec.id, mk->rec.source_vm,
	    mk->rec.workspace, mk->rec.memory ? "disk and memory" : "disk",
	    mk->rec.disk_bytes + mk->rec.memory_bytes, mk->rec.paused_ms);
	if (mk->made != NULL)
		mk->made(&mk->rec, mk->cont_wall_ms, mk->made_arg);
	else if (snap_revoke_made(&mk->rec)) {
		/* Its workspace went meanwhile (snapshot_revoke.c). */
		if (req != NULL)
			request_error(req, "unauthorized", "workspace %s was "
			    "revoked while the snapshot was made; it is "
			    "deleted", mk->rec.workspace);
		if (mk->commit != NULL)
			mk->commit(NULL, "unauthorized", "the workspace was "
			    "revoked while the snapshot was made; it is "
			    "deleted", mk->made_arg);
	} else if (mk->commit != NULL)
		mk->commit(&mk->rec, NULL, NULL, mk->made_arg);
	else if (req != NULL)
		request_reply(req, snap_json(&mk->rec));
	free(mk);
}

/* The source's part is over, either way. */
static void
make_op_done(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct snap_make *mk = arg;

	if (code != NULL) {
		if (mk->cloning) {
			/* The clone job still writes into part: it cleans
			 * up when it is back (clone_done). */
			mk->aborted = 1;
			if (mk->req != NULL)
				request_error(mk->req, code, "%s", msg);
			mk->req = NULL;
			if (mk->commit != NULL)
				mk->commit(NULL, code, msg, mk->made_arg);
			mk->commit = NULL;
			return;
		}
		make_fail(mk, code, msg);
		return;
	}
	if (worker_submit(vmmd_workers(), finish_run, finish_done, mk) == -1)
		make_fail(mk, "unavailable", "vmmd is shutting down");
	else
		finishing++;
}

/* ---- the tools --------------------------------------------------------- */

static int
valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		    s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

/*
 * What a snapshot of vm needs: a VM that is running, paused or (disk
 * only) hibernated, and not busy.  0, or an error reply and -1.
 */
int
snap_make_check(struct request *req, struct vm *vm, int memory)
{
	if (vm->busy) {
		request_error(req, "busy", "another operation on this VM is "
		    "in progress");
		return -1;
	}
	switch (vm->rec.state) {
	case VM_RUNNING:
	case VM_PAUSED:
		break;
	case VM_HIBERNATED:
		if (!memory)
			break;
		request_error(req, "conflict", "the VM is hibernated: resume "
		    "it first for a snapshot with memory (a disk-only one "
		    "needs no resume)");
		return -1;
	default:
		request_error(req, "conflict", "the VM is %s; a snapshot needs "
		    "it running, paused or hibernated",
		    vm_state_name(vm->rec.state));
		return -1;
	}
	if ((vm->rec.state == VM_RUNNING || vm->rec.state == VM_PAUSED) &&
	    vm->vmm == NULL) {
		request_error(req, "unavailable", "VM %s has no running VMM",
		    vm->rec.id);
		return -1;
	}
	return 0;
}

/*
 * Starts a snapshot of vm for req, checked and admitted: its row, its
 * .part directory, then the VM's operation.  made (or NULL: reply with
 * the snapshot) runs once it is complete; a failure is replied.  hidden:
 * vm_fork's own, never listed, removed once its children are up.
 */
static int
make_begin(struct request *req, struct vm *vm, const char *name,
    int memory, int hidden, snap_made_cb made, snap_commit_cb commit,
    void *arg)
{
	struct snap_make *mk;
	unsigned char rnd[16];
	char msg[256], dberr[256];

	if ((mk = calloc(1, sizeof(*mk))) == NULL)
		fatal("calloc");
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		fatalx("RAND_bytes failed");
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(mk->rec.id + i * 2, 3, "%02x", rnd[i]);
	mk->req = req;
	mk->vm = vm;
	mk->im = vm->image;
	mk->made = made;
	mk->made_arg = arg;
	mk->failed = next_failed;
	mk->commit = commit;
	next_failed = NULL;
	snprintf(mk->rec.state, sizeof(mk->rec.state), "%s", hidden ? "fork" :
	    "ready");
	snprintf(mk->rec.workspace, sizeof(mk->rec.workspace), "%s",
	    vm->rec.workspace);
	snprintf(mk->rec.name, sizeof(mk->rec.name), "%s", name);
	snprintf(mk->rec.source_vm, sizeof(mk->rec.source_vm), "%s",
	    vm->rec.id);
	snprintf(mk->rec.image, sizeof(mk->rec.image), "%s", vm->rec.image);
	mk->rec.memory = memory;
	/* Its restores need the NIC its device state has (each in a slot
	 * of its own); a disk-only one boots with the network asked for. */
	mk->rec.network = memory && vm->rec.network;
	mk->rec.vcpus = vm->rec.vcpus;
	mk->rec.memory_mib = vm->rec.memory_mib;
	mk->rec.disk_bytes = vm->rec.disk_bytes;
	mk->rec.created_at = wall_ms();
	snap_path(mk->rec.id, ".part", NULL, mk->part, sizeof(mk->part));
	snap_path(mk->rec.id, "", NULL, mk->final, sizeof(mk->final));
	vm_path(vm, DISK, mk->vmdisk, sizeof(mk->vmdisk));
	/* The row first: a crash from here on leaves 'making', removed at
	 * startup with whatever .part holds. */
	if (store_snap_insert(vmmd_store(), &mk->rec, dberr, sizeof(dberr)) ==
	    -1) {
		log_warnx("snapshot %s: %s", mk->rec.id, dberr);
		free(mk);
		if (req != NULL)
			request_error(req, "unavailable", "the snapshot could "
			    "not be recorded");
		if (commit != NULL)
			commit(NULL, "unavailable", "the snapshot could not be "
			    "recorded", arg);
		return -1;
	}
	if (mk->part[0] == '\0' || mkdir(mk->part, 0700) == -1) {
		snprintf(msg, sizeof(msg), "%.200s: %s", mk->part,
		    strerror(errno));
		mk->made = NULL;	/* arg stays the caller's to free */
		make_fail(mk, "unavailable", msg);
		return -1;
	}
	vm_op_begin(vm, make_op_done, mk);
	if (vm->rec.state == VM_RUNNING) {
		struct json_object *call = json_object_new_object();

		json_object_object_add(call, "op",
		    json_object_new_string("freeze"));
		/* Disk-only: what the guest wrote must be on the disk. */
		if (!memory) {
			json_object_object_add(call, "filesystems",
			    json_object_new_boolean(1));
			json_object_object_add(call, "thaw_after_ms",
			    json_object_new_int(SNAP_THAW_AFTER_MS));
		}
		if (!vm->guest_up || proxy_call(vm, call, GUEST_CTL_CALL_MS,
		    make_frozen, op_token(vm)) == -1)
			make_frozen(vm, NULL, "unavailable", "guest not up", -1,
			    op_token(vm));
		json_object_put(call);
		return 0;
	}
	/* Paused (QEMU stopped already, jobs frozen) or hibernated (no
	 * QEMU, the disk quiescent). */
	if (vm->rec.state == VM_PAUSED && memory) {
		make_stopped(vm->vmm, 1, "", vm);
		return 0;
	}
	make_clone(vm);
	return 0;
}

int
snap_make_begin(struct request *req, struct vm *vm, const char *name,
    int memory, int hidden, snap_made_cb made, void *arg)
{
	return make_begin(req, vm, name, memory, hidden, made, NULL, arg);
}

void
snap_commit(struct request *req, struct vm *vm, const char *name,
    snap_commit_cb done, void *arg)
{
	char code[32], msg[256];

	if (vm->busy) {
		done(NULL, "busy", "another operation on the VM is in "
		    "progress", arg);
		return;
	}
	if (vm->rec.state != VM_RUNNING || vm->vmm == NULL) {
		snprintf(msg, sizeof(msg), "the VM is %s, no longer running",
		    vm_state_name(vm->rec.state));
		done(NULL, "unavailable", msg, arg);
		return;
	}
	if (snap_admit(req, vm->rec.disk_bytes, 1, code, sizeof(code), msg,
	    sizeof(msg)) == -1) {
		done(NULL, code, msg, arg);
		return;
	}
	(void)make_begin(NULL, vm, name, 0, 0, NULL, done, arg);
}

void
tool_vm_snapshot(struct request *req)
{
	const char *name = req_arg_str(req, "name", "");
	int memory = req_arg_bool(req, "memory", 0);
	char code[32], msg[256];
	struct vm *vm;

	if ((vm = tools_owned_vm(req)) == NULL)
		return;
	if (name[0] != '\0' && !valid_name(name)) {
		request_error(req, "invalid_argument", "name: 1 to 64 of "
		    "A-Z a-z 0-9 . _ -");
		return;
	}
	if (snap_make_check(req, vm, memory) == -1)
		return;
	if (snap_admit(req, vm->rec.disk_bytes + (memory ?
	    (long long)vm->rec.memory_mib << 20 : 0), 1, code, sizeof(code),
	    msg, sizeof(msg)) == -1) {
		request_error(req, code, "%s", msg);
		return;
	}
	(void)snap_make_begin(req, vm, name, memory, 0, NULL, NULL);
}

void
tool_vm_snapshot_list(struct request *req)
{
	struct json_object *res = json_object_new_object();
	struct json_object *arr = json_object_new_array();
	struct snap_record *recs;
	char dberr[256];
	size_t n;

	if (store_snap_list(vmmd_store(), req->workspace, &recs, &n, dberr,
	    sizeof(dberr)) == -1)
		log_warnx("vm_snapshot_list: %s", dberr);
	else {
		for (size_t i = 0; i < n; i++)
			if (strcmp(recs[i].state, "ready") == 0)
				json_object_array_add(arr,
				    snap_json(&recs[i]));
		free(recs);
	}
	json_object_object_add(res, "snapshots", arr);
	request_reply(req, res);
}

static struct json_object *
deleted_json(const char *id)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "snapshot_id", json_object_new_string(id));
	json_object_object_add(o, "deleted", json_object_new_boolean(1));
	return o;
}

void
tool_vm_snapshot_delete(struct request *req)
{
	const char *id = req_arg_str(req, "snapshot_id", "");
	struct snap_record r;
	char err[512];

	if (snap_find_owned(id, req->workspace, &r) == -1) {
		request_error(req, "not_found", "there is no snapshot '%.64s' "
		    "in this workspace", id);
		return;
	}
	if (snap_delete(&r, err, sizeof(err)) == -1) {
		request_error(req, "unavailable", "%s", err);
		return;
	}
	request_reply(req, deleted_json(r.id));
}

/* ---- vmctl ------------------------------------------------------------- */

void
snap_ctl_list(struct request *req, const char *workspace)
{
	struct json_object *res = json_object_new_object();
	struct json_object *arr = json_object_new_array();
	struct snap_record *recs;
	char dberr[256];
	size_t n;

	if (store_snap_list(vmmd_store(), workspace, &recs, &n, dberr,
	    sizeof(dberr)) == -1)
		log_warnx("vmctl snapshots: %s", dberr);
	else {
		for (size_t i = 0; i < n; i++) {
			struct json_object *o;

			if (strcmp(recs[i].state, "ready") != 0)
				continue;
			o = snap_json(&recs[i]);
			json_object_object_add(o, "workspace",
			    json_object_new_string(recs[i].workspace));
			json_object_array_add(arr, o);
		}
		free(recs);
	}
	json_object_object_add(res, "snapshots", arr);
	request_reply(req, res);
}

void
snap_ctl_delete(struct request *req, const char *id)
{
	struct snap_record r;
	char err[512];

	if (store_snap_get(vmmd_store(), id, &r, err, sizeof(err)) == -1 ||
	    strcmp(r.state, "ready") != 0) {
		request_error(req, "not_found", "there is no snapshot '%.64s'",
		    id);
		return;
	}
	snprintf(req->workspace, sizeof(req->workspace), "%s", r.workspace);
	snprintf(req->tool, sizeof(req->tool), "vmctl:snapshot-delete");
	req->mutation = 1;
	if (snap_delete(&r, err, sizeof(err)) == -1) {
		request_error(req, "unavailable", "%s", err);
		return;
	}
	request_reply(req, deleted_json(r.id));
}

/* ---- the warm pool's (warmpool.c) -------------------------------------- */

/*
 * snap_make_begin for the warm pool: a memory snapshot of its own VM,
 * named key, listed to no workspace.  failed (never made) hears why a
 * making that began fails, and then owns arg.  req is the pool's own.
 */
int
snap_make_pool(struct request *req, struct vm *vm, const char *key,
    snap_made_cb made, snap_failed_cb failed, void *arg)
{
	next_failed = failed;
	if (snap_make_begin(req, vm, key, 1, 0, made, arg) == -1) {
		next_failed = NULL;
		return -1;
	}
	return 0;
}

/* A ready snapshot taken for one use: no restart lists it again. */
int
snap_take(struct snap_record *r)
{
	char dberr[256];

	if (store_snap_take(vmmd_store(), r->id, dberr, sizeof(dberr)) == -1) {
		log_warnx("snapshot %s not taken: %s", r->id, dberr);
		return -1;
	}
	snprintf(r->state, sizeof(r->state), "fork");
	return 0;
}
