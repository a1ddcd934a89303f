/*
 * A workspace's new policy, pushed by authd (IPC_AUTH_EVENT "policy"),
 * reaches its VMs: each VM's own egress narrowed by the workspace's new
 * one, the new rate, and the network switch, stored and sent to netd for
 * the VMs whose network is up.  Runs in vmmd, on its event loop.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "env.h"
#include "log.h"
#include "netclient.h"
#include "store.h"
#include "vmmd_shared.h"

/* Network off: an allowlist of nothing. */
static const struct egress nothing = { EGRESS_ALLOWLIST, 0, { { 0, 0 } } };

const struct egress *
vm_egress_now(const struct vm *vm)
{
	return vm->rec.net_off ? &nothing : &vm->rec.egress_now;
}

/* vm under the workspace policy p: 1 when what netd enforces changes. */
static int
vm_policy_apply(struct vm *vm, const struct policy *p)
{
	struct egress now;
	char why[256], d[64];
	int off = !p->network;

	if (egress_intersect(&vm->rec.egress, &p->egress, &now) == -1)
		log_warnx("vm %s: its egress narrowed by the workspace's new "
		    "policy takes more than %d prefixes; it reaches nothing",
		    vm->rec.id, EGRESS_MAX_CIDRS);
	if (vm->rec.net_off == off && vm->rec.egress_rate == p->egress_rate &&
	    egress_equal(&vm->rec.egress_now, &now))
		return 0;
	vm->rec.egress_now = now;
	vm->rec.egress_rate = p->egress_rate;
	vm->rec.net_off = off;
	if (store_vm_set_egress_now(vmmd_store(), &vm->rec, why,
	    sizeof(why)) == -1)
		log_warnx("vm %s: storing its new egress policy: %s",
		    vm->rec.id, why);
	egress_describe(vm_egress_now(vm), d, sizeof(d));
	log_info("vm %s: workspace %s's policy changed: network %s, egress "
	    "%s, rate %llu bytes/s (0: none)", vm->rec.id, vm->rec.workspace,
	    off ? "off" : "on", d, (unsigned long long)p->egress_rate);
	return 1;
}

void
egress_policy_pushed(const char *ws, struct json_object *o, void *arg)
{
	struct policy p;
	struct vm *vm;
	char err[256];
	int n = 0, sent = 0;

	(void)arg;
	if (policy_from_json(o, &p, err, sizeof(err)) == -1) {
		log_warnx("authd pushed a policy for workspace %s that vmmd "
		    "cannot read (%s); its VMs keep theirs", ws, err);
		return;
	}
	TAILQ_FOREACH(vm, vm_all(), entry) {
		if (strcmp(vm->rec.workspace, ws) != 0 || !vm->rec.network ||
		    !vm_policy_apply(vm, &p))
			continue;
		n++;
		/* A VM whose network is down gets it with its next setup. */
		if (netclient_egress(vm->rec.id, vm->rec.slot,
		    vm_egress_now(vm), vm->rec.egress_rate) == 0)
			sent++;
	}
	if (n > 0)
		log_info("workspace %s: policy applied to %d VM%s, %d of them "
		    "running", ws, n, n == 1 ? "" : "s", sent);
}
