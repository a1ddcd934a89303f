/*
 * vmmd's vm_fork: count new VMs that continue from a running VM's present
 * instant.  One memory snapshot of the source is made as vm_snapshot makes
 * one (snapshot.c), recorded as 'fork' so that it is never listed and a
 * crash leaves it to start-up, then count VMs are restored from it, each
 * admitted as a new VM (with network, in a network slot of its own:
 * vm_boot.c); then the snapshot goes.  Each child gets the
 * source's jobs table as it was at the snapshot, under its own vm_id with
 * the same job ids, copied in one transaction on the worker pool: a
 * source with a long history never holds the loop.  All or nothing: a
 * child that fails takes the others with it.  Runs on the loop, but for
 * that copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "log.h"
#include "netclient.h"
#include "snapshot.h"
#include "tools.h"
#include "worker.h"

#define FORK_MAX	64	/* max_fork_count's maximum */

struct fork_ctx {
	struct request		*req;
	struct snap_record	 snap;
	char			 source[VM_ID_LEN + 1];
	int			 count, pending, launching, failed;
	int			 idle_seconds, idle_pause;
	char			 code[32];
	char			 err[512];
	char			 ids[FORK_MAX][VM_ID_LEN + 1];
	int			 nids;
	long long		 cont_wall_ms;	/* jobs started by then */
};

static void
fork_gone(struct vm *vm, const char *code, const char *msg, void *arg)
{
}

static void
fork_finish(struct fork_ctx *fk)
{
	struct request *req = fk->req;
	struct json_object *o, *arr;
	char err[512];

	if (snap_delete(&fk->snap, err, sizeof(err)) == -1)
		log_warnx("vm_fork of %s: its snapshot %s: %s", fk->source,
		    fk->snap.id, err);
	snprintf(req->vm_id, sizeof(req->vm_id), "%s", fk->source);
	if (fk->failed > 0) {
		for (int i = 0; i < fk->nids; i++) {
			struct vm *vm = vm_find(fk->ids[i]);

			if (vm != NULL && vm->rec.state != VM_GONE &&
			    vm->rec.state != VM_DESTROYING)
				vm_destroy(vm, fork_gone, NULL);
		}
		request_error(req, fk->code, "%s", fk->err);
		free(fk);
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, "source_vm_id",
	    json_object_new_string(fk->source));
	json_object_object_add(o, "paused_ms",
	    json_object_new_int64(fk->snap.paused_ms));
	arr = json_object_new_array();
	for (int i = 0; i < fk->nids; i++)
		json_object_array_add(arr, json_object_new_string(fk->ids[i]));
	json_object_object_add(o, "vm_ids", arr);
	log_info("vm %s forked into %d VMs, paused %lld ms", fk->source,
	    fk->nids, fk->snap.paused_ms);
	free(fk);
	request_reply(req, o);
}

static void
fork_fail(struct fork_ctx *fk, const char *code, const char *msg)
{
	if (fk->failed++ == 0) {
		snprintf(fk->code, sizeof(fk->code), "%s", code);
		snprintf(fk->err, sizeof(fk->err), "%s", msg);
	}
}

/* One child's copy of the source's jobs, on the worker pool. */
struct fork_copy {
	struct fork_ctx	*fk;	/* the loop's: the worker never reads it */
	char		 source[VM_ID_LEN + 1];
	char		 child[VM_ID_LEN + 1];
	long long	 upto_ms;
	int		 rc;
	char		 err[256];
};

static int copying;	/* copies queued or running: exit waits for them */

int
fork_work_pending(void)
{
	return copying > 0;
}

static void
fork_copy_run(void *arg)
{
	struct fork_copy *c = arg;

	c->rc = store_job_copy(vmmd_store(), c->source, c->child, c->upto_ms,
	    c->err, sizeof(c->err));
}

static void
fork_copy_done(void *arg)
{
	struct fork_copy *c = arg;
	struct fork_ctx *fk = c->fk;

	if (c->rc == -1)
		log_warnx("vm %s: the jobs of its source %s not copied: %s",
		    c->child, c->source, c->err);
	free(c);
	copying--;
	if (--fk->pending == 0 && !fk->launching)
		fork_finish(fk);
	vmmd_maybe_exit();
}

/* The source's jobs as they were at the snapshot, under the child. */
static void
fork_jobs(struct fork_ctx *fk, const char *child)
{
	struct fork_copy *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("calloc");
	c->fk = fk;
	snprintf(c->source, sizeof(c->source), "%s", fk->source);
	snprintf(c->child, sizeof(c->child), "%s", child);
	c->upto_ms = fk->cont_wall_ms;
	copying++;
	/* A pool that stopped taking jobs (vmmd stops): here, then. */
	if (worker_submit(vmmd_workers(), fork_copy_run, fork_copy_done, c) ==
	    -1) {
		fork_copy_run(c);
		fork_copy_done(c);
	}
}

static void
fork_child_done(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct fork_ctx *fk = arg;

	if (code != NULL)
		fork_fail(fk, code, msg != NULL ? msg : code);
	else if (fk->nids < FORK_MAX) {
		snprintf(fk->ids[fk->nids++], sizeof(fk->ids[0]), "%s",
		    vm->rec.id);
		/* Its copy ends this child's part. */
		fork_jobs(fk, vm->rec.id);
		return;
	}
	if (--fk->pending == 0 && !fk->launching)
		fork_finish(fk);
}

/* The hidden snapshot is complete: its children, one by one admitted. */
static void
fork_made(const struct snap_record *snap, long long cont_wall_ms, void *arg)
{
	struct fork_ctx *fk = arg;
	const struct conf_image *im;
	char code[32], msg[256];

	fk->snap = *snap;
	fk->cont_wall_ms = cont_wall_ms;
	if ((im = conf_find_image(vmmd_conf(), fk->snap.image)) == NULL) {
		fork_fail(fk, "unavailable", "the source's image is no longer "
		    "configured");
		fork_finish(fk);
		return;
	}
	fk->launching = 1;
	for (int i = 0; i < fk->count && fk->failed == 0; i++) {
		/* Each child's record goes in at once: the next admission
		 * counts it. */
		if (vm_admit(fk->req, im, fk->snap.vcpus, fk->snap.memory_mib, code,
		    sizeof(code), msg, sizeof(msg)) == -1) {
			fork_fail(fk, code, msg);
			break;
		}
		fk->pending++;
		vm_create_snap(fk->req, im, &fk->snap, fk->snap.vcpus,
		    fk->snap.memory_mib, fk->snap.network, fk->idle_seconds,
		    fk->idle_pause, fork_child_done, fk);
	}
	fk->launching = 0;
	if (fk->pending == 0)
		fork_finish(fk);
}

void
tool_vm_fork(struct request *req)
{
	int64_t count = req_arg_int(req, "count", 1);
	const struct egress *base = NULL;
	char code[32], msg[256];
	struct fork_ctx *fk;
	struct vm *vm;

	if ((vm = tools_owned_vm(req)) == NULL)
		return;
	if (count < 1 || count > vmmd_conf()->vmmd.max_fork_count ||
	    count > FORK_MAX) {
		request_error(req, "quota_exceeded", "max_fork_count: at most "
		    "%lld VMs per vm_fork", vmmd_conf()->vmmd.max_fork_count);
		return;
	}
	if (vm->image == NULL) {
		request_error(req, "unavailable", "the VM's image %s is no "
		    "longer configured", vm->rec.image);
		return;
	}
	if (snap_make_check(req, vm, 1) == -1)
		return;
	/* Children of a VM with network have it too, each its own slot. */
	if (vm->rec.network) {
		if (!req->policy.network) {
			request_error(req, "forbidden", "this workspace may "
			    "not turn networking on");
			return;
		}
		if (!netclient_available(msg, sizeof(msg))) {
			request_error(req, "unavailable", "%s", msg);
			return;
		}
		/*
		 * The children's egress never reaches further than the
		 * source's nor than the workspace's now: the source's when
		 * it is within the workspace's, else the workspace's when
		 * that is within the source's; a narrowing must narrow that.
		 */
		if (egress_narrows(&req->policy.egress, &vm->rec.egress, msg,
		    sizeof(msg)))
			base = &vm->rec.egress;
		else if (egress_narrows(&vm->rec.egress, &req->policy.egress,
		    msg, sizeof(msg)))
			base = &req->policy.egress;
		else if (!json_object_object_get_ex(req->args, "egress",
		    NULL)) {
			request_error(req, "forbidden", "egress: the source "
			    "VM's egress policy and the workspace's differ "
			    "now; pass egress, within both");
			return;
		}
		if (base != NULL && tools_egress(req, base) == -1)
			return;
		if (base == NULL && (tools_egress(req, &req->policy.egress) ==
		    -1 || tools_egress(req, &vm->rec.egress) == -1))
			return;
	} else if (json_object_object_get_ex(req->args, "egress", NULL)) {
		request_error(req, "invalid_argument", "egress: a VM without "
		    "network has no egress to narrow (network is off)");
		return;
	}
	/* Every child as a new VM, and the snapshot's storage meanwhile. */
	if (vm_admit_n(req, vm->image, vm->rec.vcpus, vm->rec.memory_mib,
	    (int)count, code, sizeof(code), msg, sizeof(msg)) == -1 ||
	    snap_admit(req, vm->rec.disk_bytes + ((long long)vm->rec.memory_mib
	    << 20), 0, code, sizeof(code), msg, sizeof(msg)) == -1) {
		request_error(req, code, "%s", msg);
		return;
	}
	if ((fk = calloc(1, sizeof(*fk))) == NULL)
		fatal("calloc");
	fk->req = req;
	fk->count = (int)count;
	fk->idle_seconds = vm->rec.idle_seconds;
	fk->idle_pause = vm->rec.idle_mode_pause;
	snprintf(fk->source, sizeof(fk->source), "%s", vm->rec.id);
	if (snap_make_begin(req, vm, "", 1, 1, fork_made, fk) == -1)
		free(fk);
}
