/*
 * vmmd's lifecycle tools: vm_create, vm_list, vm_status, vm_suspend,
 * vm_resume and vm_destroy, as tools.c dispatches them, and the making of
 * a VM that vm_create and vm_run (run.c) share.  The state
 * machine they drive is vm.c's; here are the checks before it and the
 * shapes of the answers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "audit.h"
#include "vmmd_broker.h"
#include "guest.h"
#include "log.h"
#include "netclient.h"
#include "snapshot.h"
#include "tools.h"
#include "warmpool.h"

/* ---- vm_create --------------------------------------------------------- */

static void
create_done(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		tools_reply_error(req, code, msg);
		return;
	}
	request_progress(req, 4, 4, "ready");
	request_reply(req, vm_summary(vm));
}

/* A VM from the warm pool: its snapshot served this one VM, either way. */
struct warm_ctx {
	struct request		*req;
	const struct conf_image	*im;
	struct snap_record	 snap;
	int			 vcpus, memory, network, idle_seconds;
	int			 idle_pause;
	vm_done_cb		 done;
	void			*arg;
};

static void
warm_done(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct warm_ctx *w = arg;
	struct request *req = w->req;
	char err[512];
	int fallback;

	/*
	 * A failed restore boots instead; netd's refusal of the clone's
	 * slot is the caller's answer, as a boot would ask netd the same.
	 */
	fallback = code != NULL && vm != NULL &&
	    vm->rec.state != VM_DESTROYING && !vm->net_refused;

	/* The caller first: the delete is a rename and a store write, and
	 * a crash before it leaves the 'fork' row to snap_init. */
	if (!fallback)
		w->done(vm, code, msg, w->arg);
	if (snap_delete(&w->snap, err, sizeof(err)) == -1)
		log_warnx("warm pool: snapshot %s: %s", w->snap.id, err);
	warmpool_used(w->im, w->network);
	if (fallback) {
		char acode[32], amsg[256];

		/* The pool is vmmd's business: its failure is not the
		 * caller's, who gets the VM booted instead, admitted again
		 * now that the restored VM is gone: a boot needs more of the
		 * state volume than a restore's clone, and the host changed
		 * while the restore ran. */
		log_warnx("vm %s: not restored from the warm pool (%s); "
		    "booting a VM instead", vm->rec.id, msg);
		if (vm_admit(req, w->im, w->vcpus, w->memory, acode,
		    sizeof(acode), amsg, sizeof(amsg)) == -1)
			w->done(NULL, acode, amsg, w->arg);
		else
			vm_create(req, w->im, w->vcpus, w->memory, w->network,
			    w->idle_seconds, w->idle_pause, w->done, w->arg);
	}
	free(w);
}

/*
 * What vm_create and vm_run check before they create anything: the
 * snapshot (the workspace's own, and for one with memory the size and
 * network it was taken with), the image, the policy, networking, vCPUs,
 * memory and admission.  What to create into *c, or an error reply and -1.
 */
int
tools_create_check(struct request *req, struct create_args *c)
{
	const struct conf_image *im;
	const char *image = req_arg_str(req, "image", NULL);
	const char *sid = req_arg_str(req, "snapshot", NULL);
	const char *network = req_arg_str(req, "network", NULL);
	struct snap_record *snap = &c->snap;
	char code[32], msg[256];
	int64_t memory, ncpu;
	size_t i;

	memset(c, 0, sizeof(*c));
	if (sid != NULL) {
		if (snap_find_owned(sid, req->workspace, snap) == -1) {
			request_error(req, "not_found", "there is no snapshot "
			    "'%.64s' in this workspace", sid);
			return -1;
		}
		c->has_snap = 1;
	}
	if (c->has_snap && snap->memory) {
		/* Its device state has a NIC or none: the network, the
		 * vCPUs and the memory follow it. */
		if ((ncpu = req_arg_int(req, "vcpus", snap->vcpus)) !=
		    snap->vcpus) {
			request_error(req, "invalid_argument", "vcpus: "
			    "snapshot %s has its memory with %d vCPUs, not "
			    "%lld", snap->id, snap->vcpus, (long long)ncpu);
			return -1;
		}
		if ((memory = req_arg_int(req, "memory_mib",
		    snap->memory_mib)) != snap->memory_mib) {
			request_error(req, "invalid_argument", "memory_mib: "
			    "snapshot %s has its memory with %d MiB, not %lld",
			    snap->id, snap->memory_mib, (long long)memory);
			return -1;
		}
		if (network != NULL && strcmp(network, snap->network ? "on" :
		    "off") != 0) {
			request_error(req, "invalid_argument", "network: "
			    "snapshot %s has its memory from a VM with "
			    "networking %s; a VM restored from it has network "
			    "%s", snap->id, snap->network ? "on" : "off",
			    snap->network ? "on" : "off");
			return -1;
		}
		network = snap->network ? "on" : "off";
	} else if (network == NULL)
		network = "off";
	if (c->has_snap) {
		if (image != NULL && strcmp(image, snap->image) != 0) {
			request_error(req, "invalid_argument", "image: "
			    "snapshot %s was made from image %s", snap->id,
			    snap->image);
			return -1;
		}
		image = snap->image;
		if ((im = conf_find_image(vmmd_conf(), image)) == NULL) {
			request_error(req, "unavailable", "snapshot %s's image "
			    "%s is no longer on this host", snap->id, image);
			return -1;
		}
	} else
		im = image != NULL ? conf_find_image(vmmd_conf(), image) :
		    conf_default_image(vmmd_conf());
	if (im == NULL) {
		request_error(req, image != NULL ? "invalid_argument" :
		    "unavailable", image != NULL ? "there is no image "
		    "'%.64s' on this host" : "this host has no default image",
		    image);
		return -1;
	}
	if (req->policy.nimages > 0) {
		for (i = 0; i < req->policy.nimages; i++)
			if (strcmp(req->policy.images[i], im->id) == 0)
				break;
		if (i == req->policy.nimages) {
			request_error(req, "forbidden", "this workspace may "
			    "not use image '%s'", im->id);
			return -1;
		}
	}
	if (strcmp(network, "on") == 0) {
		if (!req->policy.network) {
			request_error(req, "forbidden", "this workspace may "
			    "not turn networking on");
			return -1;
		}
		if (!netclient_available(msg, sizeof(msg))) {
			request_error(req, "unavailable", "%s", msg);
			return -1;
		}
		if (tools_egress(req, &req->policy.egress) == -1)
			return -1;
	} else if (json_object_object_get_ex(req->args, "egress", NULL)) {
		request_error(req, "invalid_argument", "egress: a VM without "
		    "network has no egress to narrow (network is off)");
		return -1;
	}
	memory = req_arg_int(req, "memory_mib", c->has_snap && snap->memory ?
	    snap->memory_mib : im->memory_mib);
	if (memory < im->min_memory_mib) {
		request_error(req, "invalid_argument", "image %s needs at "
		    "least %lld MiB of memory", im->id, im->min_memory_mib);
		return -1;
	}
	ncpu = req_arg_int(req, "vcpus", c->has_snap && snap->memory ?
	    snap->vcpus : 1);
	if (vm_admit(req, im, (int)ncpu, (int)memory, code, sizeof(code), msg,
	    sizeof(msg)) == -1) {
		request_error(req, code, "%s", msg);
		return -1;
	}
	c->im = im;
	c->vcpus = (int)ncpu;
	c->memory_mib = (int)memory;
	c->network = strcmp(network, "on") == 0;
	return 0;
}

/*
 * The one way vm_create and vm_run make their VM, checked: from the
 * snapshot if one was named (a disk-only one boots on a clone of its
 * disk, one with memory is restored), else restored from the warm pool
 * when it has a VM of this image, size and network (with network in a
 * slot of its own, under the egress policy checked above), else booted.  done hears the
 * VM once it is ready, or the error.
 */
void
tools_create(struct request *req, struct create_args *c, int idle_seconds,
    int idle_pause, vm_done_cb done, void *arg)
{
	struct warm_ctx *w;
	char what[48];

	if (c->has_snap) {
		snprintf(what, sizeof(what), "%s:snapshot", req->tool);
		if (vmmd_audit() != NULL)
			audit_append(vmmd_audit(), req->workspace, what,
			    c->snap.id, "started");
		vm_create_snap(req, c->im, &c->snap, c->vcpus, c->memory_mib,
		    c->network, idle_seconds, idle_pause, done, arg);
		return;
	}
	if (warmpool_take(c->im, c->vcpus, c->memory_mib, c->network,
	    &c->snap) == -1) {
		vm_create(req, c->im, c->vcpus, c->memory_mib, c->network,
		    idle_seconds, idle_pause, done, arg);
		return;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("calloc");
	w->req = req;
	w->im = c->im;
	w->snap = c->snap;
	w->vcpus = c->vcpus;
	w->memory = c->memory_mib;
	w->network = c->network;
	w->idle_seconds = idle_seconds;
	w->idle_pause = idle_pause;
	w->done = done;
	w->arg = arg;
	vm_create_snap(req, c->im, &w->snap, c->vcpus, c->memory_mib,
	    c->network, idle_seconds, idle_pause, warm_done, w);
}

void
tool_vm_create(struct request *req)
{
	struct create_args c;

	if (tools_create_check(req, &c) == -1)
		return;
	tools_create(req, &c, (int)req_arg_int(req, "idle_seconds", 300),
	    strcmp(req_arg_str(req, "idle_mode", "hibernate"), "pause") == 0,
	    create_done, req);
}

/* ---- listing and status ------------------------------------------------ */

void
tool_vm_list(struct request *req)
{
	struct json_object *res = json_object_new_object();
	struct json_object *arr = json_object_new_array();
	struct vm *vm;
	int checked = 1;

	TAILQ_FOREACH(vm, vm_all(), entry)
		if (vm->rec.state != VM_GONE &&
		    strcmp(vm->rec.workspace, req->workspace) == 0)
			json_object_array_add(arr, vm_list_entry(vm,
			    &checked));
	json_object_object_add(res, "vms", arr);
	/*
	 * Each entry was checked as a list of one, and vm_list's schema
	 * bounds nothing about the list itself; were it to, this would have
	 * to check the whole again.
	 */
	req->checked = checked;
	request_reply(req, res);
}

static struct json_object *
job_entry(const struct job_record *j)
{
	struct json_object *o = json_object_new_object();
	char when[40];

	iso8601_ms(j->started_at, when, sizeof(when));
	json_object_object_add(o, "job_id", json_object_new_string(j->job_id));
	json_object_object_add(o, "request_id",
	    json_object_new_string(j->request_id));
	json_object_object_add(o, "state", json_object_new_string(j->state));
	json_object_object_add(o, "exit_code", j->exit_code >= 0 ?
	    json_object_new_int(j->exit_code) : NULL);
	json_object_object_add(o, "started_at", json_object_new_string(when));
	return o;
}

void
tool_vm_status(struct request *req)
{
	struct json_object *res, *arr;
	struct job_record *jobs;
	struct vm *vm;
	char err[256];
	size_t n;

	if ((vm = tools_owned_vm(req)) == NULL)
		return;
	/* Status never wakes a VM: jobs are as last seen. */
	res = vm_summary(vm);
	json_object_object_add(res, "origin", json_object_new_string(
	    vm->rec.origin[0] != '\0' ? vm->rec.origin : "booted"));
	json_object_object_add(res, "snapshot_id",
	    strcmp(vm->rec.origin, "snapshot") == 0 ?
	    json_object_new_string(vm->rec.snapshot_id) : NULL);
	json_object_object_add(res, "open_streams",
	    json_object_new_int(vm->open_streams));
	/* Where it may connect, as netd enforces it now. */
	if (vm->rec.network) {
		struct net_drops d;

		json_object_object_add(res, "egress",
		    egress_to_json(vm_egress_now(vm)));
		json_object_object_add(res, "egress_rate",
		    json_object_new_int64((int64_t)vm->rec.egress_rate));
		json_object_object_add(res, "network_cut",
		    json_object_new_boolean(vm->rec.net_off));
		if (netclient_drops(vm->rec.slot, &d) == 0)
			json_object_object_add(res, "drops",
			    net_drops_json(&d));
	}
	arr = json_object_new_array();
	if (store_job_list(vmmd_store(), vm->rec.id, &jobs, &n, err,
	    sizeof(err)) == -1)
		log_warnx("vm %s: jobs not listed: %s", vm->rec.id, err);
	else {
		for (size_t i = 0; i < n && i < GUEST_MAX_JOBS; i++)
			json_object_array_add(arr, job_entry(&jobs[i]));
		free(jobs);
	}
	json_object_object_add(res, "jobs", arr);
	/* What of this workspace's calls needs a human's approval. */
	json_object_object_add(res, "approvals",
	    gates_to_json(&req->policy.gates));
	request_reply(req, res);
}

/* ---- suspend, resume, destroy ------------------------------------------ */

int
tools_egress(struct request *req, const struct egress *base)
{
	struct json_object *arg;
	struct egress *e;
	char why[256];
	size_t max = (size_t)vmmd_conf()->authd.egress_max_cidrs;

	if (!json_object_object_get_ex(req->args, "egress", &arg) ||
	    arg == NULL) {
		req->egress = *base;
		return 0;
	}
	if ((e = calloc(1, sizeof(*e))) == NULL)
		fatal("calloc");
	if (egress_from_json_lim(arg, "egress", max,
	    (size_t)vmmd_conf()->authd.egress_max_names, e, why,
	    sizeof(why)) == -1) {
		request_error(req, "invalid_argument", "%s", why);
		free(e);
		return -1;
	}
	if (!egress_narrows(base, e, why, sizeof(why))) {
		request_error(req, "forbidden", "%s (a VM's egress may only "
		    "narrow its workspace's, and a fork's its source's too)",
		    why);
		free(e);
		return -1;
	}
	req->egress = *e;
	free(e);
	return 0;
}

static void
suspended(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;

	if (code != NULL) {
		tools_reply_error(req, code, msg);
		return;
	}
	request_reply(req, vm_summary(vm));
}

static void
suspend_checked(struct vm *vm, struct json_object *res, const char *code,
    const char *msg, int fd, void *arg)
{
	struct request *req = arg;
	struct json_object *v;

	if (code == NULL && json_object_object_get_ex(res, "jobs_running", &v) &&
	    json_object_get_int(v) > 0) {
		request_error(req, "busy", "%d job(s) are running; pass "
		    "force=true to freeze them across the suspension",
		    json_object_get_int(v));
		return;
	}
	if (code == NULL && json_object_object_get_ex(res, "active", &v) &&
	    json_object_get_boolean(v)) {
		request_error(req, "busy", "processes started by jobs are "
		    "still running; pass force=true to freeze them");
		return;
	}
	vm_suspend(vm, strcmp(req_arg_str(req, "mode", "hibernate"), "pause") == 0,
	    suspended, req);
}

void
tool_vm_suspend(struct request *req)
{
	struct json_object *call;
	struct vm *vm;

	if ((vm = tools_owned_vm(req)) == NULL)
		return;
	if (!req_arg_bool(req, "force", 0) && vm->rec.state == VM_RUNNING) {
		if (vm->open_streams > 0) {
			request_error(req, "busy", "%d stream(s) are open; "
			    "pass force=true to close them",
			    vm->open_streams);
			return;
		}
		if (broker_has_pipes(vm)) {
			request_error(req, "busy", "a job broker pipe is "
			    "attached; pass force=true to close it");
			return;
		}
		if (vm->guest_up && !vm->busy) {
			call = json_object_new_object();
			json_object_object_add(call, "op",
			    json_object_new_string("activity"));
			if (proxy_call(vm, call, GUEST_TOOL_CALL_MS,
			    suspend_checked, req) == 0) {
				json_object_put(call);
				return;
			}
			json_object_put(call);
		}
	}
	vm_suspend(vm, strcmp(req_arg_str(req, "mode", "hibernate"), "pause") == 0,
	    suspended, req);
}

static void
resumed(struct vm *vm, const char *code, const char *msg, void *arg)
{
	suspended(vm, code, msg, arg);
}

void
tool_vm_resume(struct request *req)
{
	struct vm *vm;

	if ((vm = tools_owned_vm(req)) == NULL)
		return;
	request_progress(req, 1, 2, "resuming");
	vm_ready(vm, resumed, req);
}

static void
destroyed(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct request *req = arg;
	struct json_object *o;

	if (code != NULL) {
		tools_reply_error(req, code, msg);
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, "vm_id", json_object_new_string(req->vm_id));
	json_object_object_add(o, "destroyed", json_object_new_boolean(1));
	json_object_object_add(o, "already_destroyed",
	    json_object_new_boolean(0));
	request_reply(req, o);
}

void
tool_vm_destroy(struct request *req)
{
	const char *id = req_arg_str(req, "vm_id", "");
	struct vm *vm = vm_find_owned(id, req->workspace);
	char err[256];

	snprintf(req->vm_id, sizeof(req->vm_id), "%.*s", VM_ID_LEN, id);
	if (vm == NULL) {
		struct json_object *o;

		/* Destroying twice is fine; destroying what was never ours
		 * is not_found, as for every other tool. */
		if (store_vm_was_destroyed(vmmd_store(), id, req->workspace,
		    err, sizeof(err)) != 1) {
			request_error(req, "not_found", "there is no VM "
			    "'%.64s' in this workspace", id);
			return;
		}
		o = json_object_new_object();
		json_object_object_add(o, "vm_id", json_object_new_string(id));
		/* The schema's "destroyed" is always true: it is gone. */
		json_object_object_add(o, "destroyed",
		    json_object_new_boolean(1));
		json_object_object_add(o, "already_destroyed",
		    json_object_new_boolean(1));
		request_reply(req, o);
		return;
	}
	vm_destroy(vm, destroyed, req);
}

