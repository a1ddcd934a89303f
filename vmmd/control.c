/*
 * vmmd's operator side: what vmctl asks on vmctl.sock (root and the admin
 * group only).  An operator acts on any workspace's VMs; each action is
 * audited under the VM's workspace with the tool name "vmctl:<command>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "ipc.h"
#include "jsonx.h"
#include "log.h"
#include "decode.h"
#include "netclient.h"
#include "preflight.h"
#include "snapshot.h"
#include "vmmd_shared.h"
#include "worker.h"

struct request *control_request_new(struct ipc_conn *, uint32_t);

static struct json_object *
vm_detail(const struct vm *vm)
{
	struct json_object *o = vm_summary(vm);

	json_object_object_add(o, "workspace",
	    json_object_new_string(vm->rec.workspace));
	json_object_object_add(o, "slot", json_object_new_int(vm->rec.slot));
	json_object_object_add(o, "uid", json_object_new_int64(vm->uid));
	json_object_object_add(o, "open_streams",
	    json_object_new_int(vm->open_streams));
	/* Opens admitted and on their way to vmproxy: they hold places in
	 * the stream limits as open ones do. */
	json_object_object_add(o, "opening_streams",
	    json_object_new_int(vm->opening_streams));
	json_object_object_add(o, "failure",
	    json_object_new_string(vm->rec.failure));
	if (vm->rec.network)
		json_object_object_add(o, "egress",
		    egress_to_json(vm_egress_now(vm)));
	return o;
}

static void
ctl_done(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		request_error(req, code, "%s", msg != NULL ? msg : code);
		return;
	}
	if (vm != NULL && vm->rec.state != VM_GONE)
		request_reply(req, vm_detail(vm));
	else {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "vm_id",
		    json_object_new_string(req->vm_id));
		json_object_object_add(o, "destroyed",
		    json_object_new_boolean(1));
		request_reply(req, o);
	}
}

/* Every VM, or those of workspace ws. */
static void
ctl_list(struct request *req, const char *ws)
{
	struct json_object *res = json_object_new_object();
	struct json_object *arr = json_object_new_array();
	struct vm *vm;

	TAILQ_FOREACH(vm, vm_all(), entry)
		if (vm->rec.state != VM_GONE &&
		    (ws == NULL || strcmp(ws, vm->rec.workspace) == 0))
			json_object_array_add(arr, vm_detail(vm));
	json_object_object_add(res, "vms", arr);
	request_reply(req, res);
}

/* Stops every VM of a workspace now: processes killed, nothing resumable.
 * Disks stay for inspection until destroyed. */
static void
ctl_stop_workspace(struct request *req, const char *ws)
{
	struct json_object *res = json_object_new_object();
	struct json_object *arr = json_object_new_array();
	struct vm *vm, *next;

	TAILQ_FOREACH_SAFE(vm, vm_all(), entry, next) {
		if (vm->rec.state == VM_GONE ||
		    strcmp(vm->rec.workspace, ws) != 0)
			continue;
		vm_fail(vm, "stopped by the operator");
		audit_append(vmmd_audit(), ws, "vmctl:stop-workspace",
		    vm->rec.id, "ok");
		json_object_array_add(arr, json_object_new_string(vm->rec.id));
		log_info("vm %s: stopped by the operator (workspace %s)",
		    vm->rec.id, ws);
	}
	json_object_object_add(res, "workspace", json_object_new_string(ws));
	json_object_object_add(res, "stopped", arr);
	request_reply(req, res);
}

/*
 * vmctl preflight hashes every image file (GiBs) and asks NSS about the
 * uid range: on the worker pool, so that the loop serves every VM
 * meanwhile.
 */
struct preflight_job {
	struct request	*req;
	struct pf_conf	 pc;
	struct pf_file	*files;
	struct pf_report rep;
	int		 rc;
};

static void
preflight_job_run(void *arg)
{
	struct preflight_job *j = arg;

	j->rc = preflight_run(&j->pc, &j->rep);
}

static void
preflight_job_done(void *arg)
{
	struct preflight_job *j = arg;
	struct json_object *res, *arr;

	if (j->rc == -1) {
		request_error(j->req, "internal", "preflight could not run");
		goto out;
	}
	res = json_object_new_object();
	arr = json_object_new_array();
	for (size_t i = 0; i < j->rep.n; i++) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "check",
		    json_object_new_string(j->rep.r[i].name));
		json_object_object_add(o, "ok",
		    json_object_new_boolean(j->rep.r[i].ok));
		json_object_object_add(o, "message",
		    json_object_new_string(j->rep.r[i].msg));
		json_object_array_add(arr, o);
	}
	netclient_preflight(arr);
	{
		struct json_object *last = json_object_array_get_idx(arr,
		    json_object_array_length(arr) - 1);

		if (!json_object_get_boolean(json_object_object_get(last,
		    "ok")))
			j->rep.failed++;
	}
	json_object_object_add(res, "checks", arr);
	json_object_object_add(res, "failed",
	    json_object_new_int((int)j->rep.failed));
	preflight_free(&j->rep);
	request_reply(j->req, res);
out:
	free(j->files);
	free(j);
}

static void
ctl_preflight(struct request *req)
{
	const struct conf_image *im = vmmd_conf()->images.v;
	struct preflight_job *j;
	size_t nf = 0;

	if ((j = calloc(1, sizeof(*j))) == NULL ||
	    (j->files = calloc(vmmd_conf()->images.n * 3 + 1,
	    sizeof(*j->files))) == NULL)
		fatal("calloc");
	for (size_t i = 0; i < vmmd_conf()->images.n; i++) {
		j->files[nf++] = (struct pf_file){ "rootfs", im[i].rootfs,
		    im[i].rootfs_sha256 };
		j->files[nf++] = (struct pf_file){ "kernel", im[i].kernel,
		    im[i].kernel_sha256 };
		j->files[nf++] = (struct pf_file){ "initrd", im[i].initrd,
		    im[i].initrd_sha256 };
	}
	j->req = req;
	j->pc.qemu_binary = vmmd_conf()->vmmd.qemu;
	j->pc.state_dir = vmmd_conf()->vmmd.vm_dir;
	j->pc.min_free_bytes = (uint64_t)vmmd_conf()->vmmd.min_free_mib << 20;
	j->pc.uid_base = (uid_t)vmmd_conf()->vmmd.uid_base;
	j->pc.uid_count = (unsigned)vmmd_conf()->vmmd.max_vms;
	j->pc.cgroup_parent = vmmd_conf()->vmmd.cgroup_parent;
	j->pc.files = j->files;
	j->pc.nfiles = nf;
	if (worker_submit(vmmd_workers(), preflight_job_run, preflight_job_done,
	    j) == -1) {
		request_error(req, "unavailable", "vmmd is shutting down");
		free(j->files);
		free(j);
	}
}

static void
ctl_audit_verify(struct request *req)
{
	char hash[65], err[512];
	long long seq, n;
	struct json_object *res;

	if (store_audit_anchor_get(vmmd_store(), &seq, hash, sizeof(hash), err,
	    sizeof(err)) == -1) {
		log_warnx("vmctl audit verify: %s", err);
		request_error(req, "internal", "cannot read the audit anchor");
		return;
	}
	res = json_object_new_object();
	if (audit_verify(vmmd_conf()->vmmd.audit_log, seq, hash, &n, err,
	    sizeof(err)) == -1) {
		json_object_object_add(res, "ok", json_object_new_boolean(0));
		json_object_object_add(res, "error",
		    json_object_new_string(err));
	} else {
		json_object_object_add(res, "ok", json_object_new_boolean(1));
		json_object_object_add(res, "lines",
		    json_object_new_int64(n));
	}
	json_object_object_add(res, "path",
	    json_object_new_string(vmmd_conf()->vmmd.audit_log));
	request_reply(req, res);
}

void
vmmd_dispatch_vmctl(struct ipc_conn *conn, struct ipc_msg *m, void *arg)
{
	struct request *req = control_request_new(conn, m->id);
	struct vmctl_msg cm;
	struct decode_err de;
	struct vm *vm = NULL;

	/* Decoded and bounded first; an operator gets a reason, not a
	 * closed connection. */
	if (decode_vmctl(m->type, m->body, &cm, &de) != DECODE_OK) {
		request_error(req, de.code != NULL ? de.code :
		    "invalid_argument", "%s", de.msg);
		return;
	}
	switch (cm.type) {
	case IPC_VMCTL_LIST:
		ctl_list(req, cm.workspace);
		return;
	case IPC_VMCTL_PREFLIGHT:
		ctl_preflight(req);
		return;
	case IPC_VMCTL_AUDIT_VERIFY:
		ctl_audit_verify(req);
		return;
	case IPC_VMCTL_STOP_WORKSPACE:
		ctl_stop_workspace(req, cm.workspace);
		return;
	case IPC_VMCTL_SNAPSHOTS:
		snap_ctl_list(req, cm.workspace);
		return;
	case IPC_VMCTL_SNAPSHOT_DELETE:
		snap_ctl_delete(req, cm.snapshot_id);
		return;
	}
	/* The rest name one VM, of any workspace. */
	snprintf(req->vm_id, sizeof(req->vm_id), "%.*s", VM_ID_LEN, cm.vm_id);
	if ((vm = vm_find(cm.vm_id)) == NULL || vm->rec.state == VM_GONE) {
		request_error(req, "not_found", "there is no VM '%.64s'",
		    cm.vm_id);
		return;
	}
	snprintf(req->workspace, sizeof(req->workspace), "%s",
	    vm->rec.workspace);
	req->mutation = cm.type != IPC_VMCTL_STATUS;
	switch (cm.type) {
	case IPC_VMCTL_STATUS:
		request_reply(req, vm_detail(vm));
		break;
	case IPC_VMCTL_DESTROY:
		snprintf(req->tool, sizeof(req->tool), "vmctl:destroy");
		vm_destroy(vm, ctl_done, req);
		break;
	case IPC_VMCTL_SUSPEND:
		snprintf(req->tool, sizeof(req->tool), "vmctl:suspend");
		vm_suspend(vm, cm.pause, ctl_done, req);
		break;
	case IPC_VMCTL_RESUME:
		snprintf(req->tool, sizeof(req->tool), "vmctl:resume");
		vm_ready(vm, ctl_done, req);
		break;
	}
}
