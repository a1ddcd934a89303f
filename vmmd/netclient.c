/*
 * vmmd's side of netd.sock; see netclient.h.  vmmd sends netd slot
 * numbers only: netd builds every name and address from them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "conf.h"
#include "env.h"
#include "ipc.h"
#include "jsonx.h"
#include "log.h"
#include "netclient.h"
#include "store.h"

#define NETD_TIMEOUT_MS		15000
#define NETD_RETRY_SECONDS	2
#define NET_SLOTS		256	/* netd's limit: 10.23x.<slot>.0/30 */

static const struct ipc_rule netd_rules[] = {
	{ IPC_NET_SYNC_RESULT, 0 },
	{ IPC_NET_SETUP_RESULT, IPC_RULE_FD },
	{ IPC_NET_TEARDOWN_RESULT, 0 },
	{ IPC_NET_STATUS_RESULT, 0 },
	{ IPC_NET_EGRESS_RESULT, 0 },
	{ IPC_NET_COUNTERS_RESULT, 0 },
	{ IPC_ERROR, 0 },
};
static const struct ipc_policy netd_policy = {
	"netd", netd_rules, sizeof(netd_rules) / sizeof(netd_rules[0])
};

static struct ipc_conn *conn;
static struct event *retry_ev, *status_ev;
static struct json_object *last_status;	/* netd's IPC_NET_STATUS_RESULT */
static int synced, available;
static char unavailable_why[256] = "netd is not running";
/* Slots whose network netd made for a VM still using it. */
static unsigned char up[NET_SLOTS];
/* Each such slot's egress policy (IPC_NET_EGRESS's body) as vmmd last
 * sent it: every sync carries them, so a restarted netd has them too. */
static struct json_object *policy[NET_SLOTS];
/* Each slot's drops as netd last counted them; known[s] says whether. */
static struct net_drops drops[NET_SLOTS];
static unsigned char drops_known[NET_SLOTS];
/* vm_find, from netclient_init. */
static struct vm *(*vm_by_id)(const char *);

struct setup_wait {
	struct vm	*vm;
	char		 id[VM_ID_LEN + 1];
	unsigned	 slot;
	net_setup_cb	 cb;
	void		*arg;
};

static void	netc_connect(void);

/* Remembers slot's policy for the syncs to come. */
static void
policy_set(unsigned slot, const struct egress *eg, uint64_t rate)
{
	struct json_object *b = json_object_new_object();

	json_object_object_add(b, "slot", json_object_new_int((int)slot));
	json_object_object_add(b, "egress", egress_to_json(eg));
	if (rate != 0)
		json_object_object_add(b, "rate",
		    json_object_new_int64((int64_t)rate));
	if (policy[slot] != NULL)
		json_object_put(policy[slot]);
	policy[slot] = b;
}

static void
policy_forget(unsigned slot)
{
	if (policy[slot] != NULL)
		json_object_put(policy[slot]);
	policy[slot] = NULL;
}

static void
vmmd_dispatch_netd(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	/* netd sends nothing unasked. */
	log_debug("netd: unexpected message type %u", m->type);
}

static void
vmmd_closed_netd(struct ipc_conn *c, void *arg)
{
	struct timeval tv = { NETD_RETRY_SECONDS, 0 };

	conn = NULL;
	synced = available = 0;
	if (last_status != NULL)
		json_object_put(last_status);
	last_status = NULL;
	snprintf(unavailable_why, sizeof(unavailable_why), "netd is not "
	    "reachable");
	log_warnx("lost netd; reconnecting");
	evtimer_add(retry_ev, &tv);
}

static const struct ipc_handlers netd_handlers = {
	vmmd_dispatch_netd, vmmd_closed_netd
};

static void
netc_status(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	struct jsonx_err jerr;
	const char *why = "netd says guest networking is unavailable";
	int ok = 0;

	if (m == NULL || m->type != IPC_NET_STATUS_RESULT ||
	    jsonx_get_bool(m->body, "available", 1, &ok, &jerr) != 1)
		ok = 0;
	if (!ok && m != NULL && m->type == IPC_NET_STATUS_RESULT)
		(void)jsonx_get_string(m->body, "reason", 0, &why, &jerr);
	available = ok;
	if (!ok)
		snprintf(unavailable_why, sizeof(unavailable_why), "%s", why);
	if (last_status != NULL)
		json_object_put(last_status);
	last_status = m != NULL && m->type == IPC_NET_STATUS_RESULT ?
	    json_object_get(m->body) : NULL;
}

/* One {"packets","bytes"} count of netd's, bounded; -1 if malformed. */
static int
drop_count(struct json_object *o, const char *key, long long *out)
{
	struct json_object *c;
	struct jsonx_err jerr;
	int64_t v;

	if (jsonx_get_object(o, key, 1, &c, &jerr) != 1 ||
	    jsonx_get_int64(c, "packets", 1, 0, INT64_MAX, &v, &jerr) != 1)
		return -1;
	*out = (long long)v;
	return 0;
}

/*
 * The refused names of a slot's entry (optional: a netd from before them
 * sends none): a count, and at most NET_REFUSED_KEEP names, each short
 * printable ASCII.  -1 if malformed.
 */
static int
refused_take(struct json_object *e, struct net_drops *d)
{
	struct json_object *last;
	struct jsonx_err jerr;
	int64_t v;
	size_t n;
	int r;

	if ((r = jsonx_get_int64(e, "dns_refused", 0, 0, INT64_MAX, &v,
	    &jerr)) == -1)
		return -1;
	d->dns_refused = r == 1 ? (long long)v : 0;
	if ((r = jsonx_get_array(e, "dns_refused_last", 0, &last,
	    &jerr)) == -1)
		return -1;
	if (r == 0)
		return 0;
	if ((n = json_object_array_length(last)) > NET_REFUSED_KEEP)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct json_object *s = json_object_array_get_idx(last, i);
		const char *t;
		size_t len;

		if (!json_object_is_type(s, json_type_string))
			return -1;
		t = json_object_get_string(s);
		len = (size_t)json_object_get_string_len(s);
		if (len == 0 || len >= NET_REFUSED_NAME || strlen(t) != len)
			return -1;
		for (size_t k = 0; k < len; k++)
			if (t[k] < 0x20 || t[k] > 0x7e)
				return -1;
		memcpy(d->refused_last[i], t, len + 1);
	}
	d->nrefused_last = n;
	return 0;
}

/* One slot's entry of netd's counters, into drops[]; -1 if malformed. */
static int
drops_take(struct json_object *e)
{
	struct jsonx_err jerr;
	struct net_drops d;
	int64_t slot;

	memset(&d, 0, sizeof(d));
	if (jsonx_get_int64(e, "slot", 1, 0, NET_SLOTS - 1, &slot,
	    &jerr) != 1 || drop_count(e, "egress", &d.egress) == -1 ||
	    drop_count(e, "bandwidth", &d.bandwidth) == -1 ||
	    drop_count(e, "conn_rate", &d.conn_rate) == -1 ||
	    drop_count(e, "conn_count", &d.conn_count) == -1 ||
	    refused_take(e, &d) == -1)
		return -1;
	drops[slot] = d;
	drops_known[slot] = 1;
	return 0;
}

static void
netc_counters(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	struct json_object *slots;
	struct jsonx_err jerr;
	size_t n;

	if (m == NULL || m->type != IPC_NET_COUNTERS_RESULT ||
	    jsonx_get_array(m->body, "slots", 1, &slots, &jerr) != 1)
		return;
	if ((n = json_object_array_length(slots)) > NET_SLOTS) {
		log_warnx("netd: counters for %zu slots, more than %d", n,
		    NET_SLOTS);
		return;
	}
	memset(drops_known, 0, sizeof(drops_known));
	for (size_t i = 0; i < n; i++)
		if (drops_take(json_object_array_get_idx(slots, i)) == -1) {
			log_warnx("netd: unreadable counters");
			return;
		}
}

int
netclient_drops(int slot, struct net_drops *d)
{
	if (slot < 0 || slot >= NET_SLOTS || !drops_known[slot] || !up[slot])
		return -1;
	*d = drops[slot];
	return 0;
}

struct json_object *
net_drops_json(const struct net_drops *d)
{
	struct json_object *o = json_object_new_object(), *last;

	json_object_object_add(o, "egress", json_object_new_int64(d->egress));
	json_object_object_add(o, "bandwidth",
	    json_object_new_int64(d->bandwidth));
	json_object_object_add(o, "conn_rate",
	    json_object_new_int64(d->conn_rate));
	json_object_object_add(o, "conn_count",
	    json_object_new_int64(d->conn_count));
	json_object_object_add(o, "dns_refused",
	    json_object_new_int64(d->dns_refused));
	last = json_object_new_array();
	for (size_t i = 0; i < d->nrefused_last; i++)
		json_object_array_add(last,
		    json_object_new_string(d->refused_last[i]));
	json_object_object_add(o, "dns_refused_last", last);
	return o;
}

struct egress_wait {
	char		id[VM_ID_LEN + 1];
	unsigned	slot;
};

static void
egress_done(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	struct egress_wait *w = arg;
	struct json_object *cnt;
	struct jsonx_err jerr;

	if (m != NULL && m->type == IPC_NET_EGRESS_RESULT) {
		log_info("vm %s: netd applied its new egress policy (slot %u)",
		    w->id, w->slot);
		if (jsonx_get_object(m->body, "counters", 1, &cnt, &jerr) ==
		    1)
			(void)drops_take(cnt);
	} else
		log_warnx("vm %s: netd did not apply its new egress policy "
		    "(%s); the old one holds until its next setup", w->id,
		    m == NULL ? "no answer" : "refused, see netd's log");
	free(w);
}

int
netclient_egress(const char *id, int slot, const struct egress *eg,
    uint64_t rate)
{
	struct egress_wait *w;

	if (conn == NULL || !synced || slot < 0 || slot >= NET_SLOTS ||
	    !up[slot])
		return -1;
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("calloc");
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->slot = (unsigned)slot;
	/* The next sync sends it again, whether or not netd takes it now:
	 * the VM's record has it. */
	policy_set((unsigned)slot, eg, rate);
	if (ipc_request(conn, IPC_NET_EGRESS, policy[slot], -1,
	    NETD_TIMEOUT_MS, egress_done, w) == -1) {
		free(w);
		return -1;
	}
	return 0;
}

/* The host changes under netd (forwarding, the uplink): ask again now
 * and then, so that vm_create and preflight answer from fresh facts. */
static void
netc_status_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct timeval tv = { 10, 0 };

	if (conn != NULL && synced) {
		ipc_request(conn, IPC_NET_STATUS, NULL, -1, NETD_TIMEOUT_MS,
		    netc_status, NULL);
		ipc_request(conn, IPC_NET_COUNTERS, NULL, -1, NETD_TIMEOUT_MS,
		    netc_counters, NULL);
	}
	evtimer_add(status_ev, &tv);
}

static void
netc_synced(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	if (m == NULL || m->type != IPC_NET_SYNC_RESULT) {
		log_warnx("netd refused vmmd's sync; guest networking stays "
		    "unavailable until netd reconnects");
		return;
	}
	synced = 1;
	log_info("netd: in step (%zu removed as orphans)",
	    json_object_array_length(json_object_object_get(m->body,
	    "removed")));
	ipc_request(c, IPC_NET_STATUS, NULL, -1, NETD_TIMEOUT_MS, netc_status,
	    NULL);
}

static void
netc_retry_cb(evutil_socket_t fd, short ev, void *arg)
{
	netc_connect();
}

static void
netc_connect(void)
{
	struct timeval tv = { NETD_RETRY_SECONDS, 0 };
	struct json_object *body, *slots, *pols;

	conn = ipc_connect(vmmd_base(), vmmd_conf()->vmmd.netd_socket, "vmmd",
	    &netd_policy, &netd_handlers, NULL);
	if (conn == NULL) {
		log_debug("netd at %s: %s", vmmd_conf()->vmmd.netd_socket,
		    strerror(errno));
		evtimer_add(retry_ev, &tv);
		return;
	}
	/* First on the connection: what vmmd still uses, with each one's
	 * policy (a restarted netd has none); the rest goes. */
	body = json_object_new_object();
	slots = json_object_new_array();
	pols = json_object_new_array();
	for (unsigned s = 0; s < NET_SLOTS; s++) {
		if (!up[s])
			continue;
		json_object_array_add(slots, json_object_new_int((int)s));
		if (policy[s] != NULL)
			json_object_array_add(pols,
			    json_object_get(policy[s]));
	}
	json_object_object_add(body, "slots", slots);
	json_object_object_add(body, "policies", pols);
	if (ipc_request(conn, IPC_NET_SYNC, body, -1, NETD_TIMEOUT_MS,
	    netc_synced, NULL) == -1)
		log_warnx("netd: cannot send the sync");
	json_object_put(body);
}

void
netclient_init(struct vm *(*find)(const char *id))
{
	struct timeval tv = { 10, 0 };

	vm_by_id = find;
	if ((retry_ev = evtimer_new(vmmd_base(), netc_retry_cb, NULL)) ==
	    NULL || (status_ev = evtimer_new(vmmd_base(), netc_status_cb,
	    NULL)) == NULL)
		fatalx("netclient: evtimer_new");
	evtimer_add(status_ev, &tv);
	netc_connect();
}

void
netclient_preflight(struct json_object *checks)
{
	struct json_object *o = json_object_new_object();
	struct jsonx_err jerr;
	const char *uplink = "", *hr = "?", *gr = "?";
	char msg[512];
	int ok = 1, fwd = 0, drop = 0;

	if (conn == NULL || !synced)
		snprintf(msg, sizeof(msg), "netd is not running at %s: "
		    "network \"on\" is refused", vmmd_conf()->vmmd.netd_socket);
	else if (last_status == NULL)
		snprintf(msg, sizeof(msg), "netd has not said how it is yet");
	else {
		(void)jsonx_get_string(last_status, "uplink", 0, &uplink, &jerr);
		(void)jsonx_get_string(last_status, "host_range", 0, &hr, &jerr);
		(void)jsonx_get_string(last_status, "guest_range", 0, &gr,
		    &jerr);
		(void)jsonx_get_bool(last_status, "ip_forward", 0, &fwd, &jerr);
		(void)jsonx_get_bool(last_status, "forward_drop", 0, &drop,
		    &jerr);
		ok = available;
		snprintf(msg, sizeof(msg), "%s%suplink %s, IPv4 forwarding %s, "
		    "ranges %s and %s%s", ok ? "" : unavailable_why,
		    ok ? "" : "; ", uplink[0] != '\0' ? uplink : "(none)",
		    fwd ? "on" : "off", hr, gr, drop ? "; a host forward "
		    "chain drops by policy: netd adds accept rules for its "
		    "interfaces" : "");
	}
	json_object_object_add(o, "check", json_object_new_string("network"));
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	json_object_object_add(o, "message", json_object_new_string(msg));
	json_object_array_add(checks, o);
}

int
netclient_available(char *why, size_t whylen)
{
	if (conn != NULL && synced && available)
		return 1;
	snprintf(why, whylen, "guest networking is unavailable: %s",
	    unavailable_why);
	return 0;
}

static void
teardown_done(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	if (m == NULL || m->type != IPC_NET_TEARDOWN_RESULT)
		log_warnx("netd did not release slot %u; its next sync will",
		    (unsigned)(uintptr_t)arg);
}

/* A dotted quad in inet_pton's strict form. */
static int
ipv4_ok(const char *s)
{
	struct in_addr a;

	return strlen(s) <= 15 && inet_pton(AF_INET, s, &a) == 1;
}

static void
setup_done(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	struct setup_wait *w = arg;
	struct jsonx_err jerr;
	const char *mac, *addr, *gw, *code = "unavailable", *msg;
	struct json_object *dns;
	struct net_lease lease;
	int64_t prefix;
	int fd = -1, alive = vm_by_id(w->id) == w->vm;

	if (m != NULL && m->type == IPC_NET_SETUP_RESULT) {
		fd = m->fd;
		m->fd = -1;
		up[w->slot] = 1;
	} else
		policy_forget(w->slot);
	if (!alive) {
		/* Destroyed meanwhile: give the network straight back. */
		if (fd != -1)
			close(fd);
		if (up[w->slot] && conn != NULL) {
			struct json_object *b = json_object_new_object();

			json_object_object_add(b, "slot",
			    json_object_new_int((int)w->slot));
			ipc_request(conn, IPC_NET_TEARDOWN, b, -1,
			    NETD_TIMEOUT_MS, teardown_done,
			    (void *)(uintptr_t)w->slot);
			json_object_put(b);
		}
		up[w->slot] = 0;
		policy_forget(w->slot);
		w->cb(NULL, -1, NULL, "not_found", "the VM is gone",
		    w->arg);
		free(w);
		return;
	}
	if (m == NULL) {
		w->cb(w->vm, -1, NULL, "unavailable", "netd did not "
		    "answer", w->arg);
		free(w);
		return;
	}
	if (m->type == IPC_ERROR) {
		if (jsonx_get_string(m->body, "error.code", 1, &code,
		    &jerr) != 1 || jsonx_get_string(m->body, "error.message",
		    1, &msg, &jerr) != 1)
			msg = "netd refused";
		w->cb(w->vm, -1, NULL, "unavailable", msg, w->arg);
		free(w);
		return;
	}
	/* netd is trusted less than that: check what QEMU and the guest
	 * will be told. */
	if (fd == -1 ||
	    jsonx_get_string(m->body, "mac", 1, &mac, &jerr) != 1 ||
	    jsonx_get_string(m->body, "address", 1, &addr, &jerr) != 1 ||
	    jsonx_get_string(m->body, "gateway", 1, &gw, &jerr) != 1 ||
	    jsonx_get_int64(m->body, "prefix", 1, 8, 30, &prefix,
	    &jerr) != 1 ||
	    jsonx_get_array(m->body, "dns", 1, &dns, &jerr) != 1 ||
	    strspn(mac, "0123456789abcdef:") != strlen(mac) ||
	    strlen(mac) != 17 || !ipv4_ok(addr) || !ipv4_ok(gw)) {
		if (fd != -1)
			close(fd);
		w->cb(w->vm, -1, NULL, "internal", "netd's answer was "
		    "not understood", w->arg);
		free(w);
		return;
	}
	memset(&lease, 0, sizeof(lease));
	snprintf(lease.mac, sizeof(lease.mac), "%s", mac);
	snprintf(lease.address, sizeof(lease.address), "%s", addr);
	snprintf(lease.gateway, sizeof(lease.gateway), "%s", gw);
	lease.prefix = (int)prefix;
	snprintf(lease.cmdline, sizeof(lease.cmdline), "mcpvm.net=%s/%d,gw=%s",
	    addr, (int)prefix, gw);
	for (size_t i = 0; i < json_object_array_length(dns) &&
	    lease.ndns < NET_LEASE_MAX_DNS; i++) {
		const char *d = json_object_get_string(
		    json_object_array_get_idx(dns, i));

		if (d == NULL || !ipv4_ok(d))
			continue;
		snprintf(lease.dns[lease.ndns++], sizeof(lease.dns[0]), "%s", d);
		snprintf(lease.cmdline + strlen(lease.cmdline),
		    sizeof(lease.cmdline) - strlen(lease.cmdline), ",dns=%s", d);
	}
	w->cb(w->vm, fd, &lease, NULL, NULL, w->arg);
	free(w);
}

void
netclient_setup(struct vm *vm, const char *id, int slot,
    const struct egress *eg, uint64_t rate, net_setup_cb cb, void *arg)
{
	struct setup_wait *w;
	struct json_object *b;
	char why[300];

	if (!netclient_available(why, sizeof(why))) {
		cb(vm, -1, NULL, "unavailable", why, arg);
		return;
	}
	if (slot < 0 || slot >= NET_SLOTS) {
		cb(vm, -1, NULL, "unavailable", "this VM's slot is "
		    "beyond what guest networking can address", arg);
		return;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("calloc");
	w->vm = vm;
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->slot = (unsigned)slot;
	w->cb = cb;
	w->arg = arg;
	b = json_object_new_object();
	json_object_object_add(b, "slot", json_object_new_int(slot));
	/* Public is what netd does without one, and what an older netd
	 * understands. */
	if (eg->mode != EGRESS_PUBLIC || eg->ncidrs > 0)
		json_object_object_add(b, "egress", egress_to_json(eg));
	policy_set((unsigned)slot, eg, rate);
	if (rate != 0)
		json_object_object_add(b, "rate",
		    json_object_new_int64((int64_t)rate));
	if (ipc_request(conn, IPC_NET_SETUP, b, -1, NETD_TIMEOUT_MS,
	    setup_done, w) == -1) {
		free(w);
		cb(vm, -1, NULL, "unavailable", "netd is not reachable",
		    arg);
	}
	json_object_put(b);
}

void
netclient_keep(int slot, const struct egress *eg, uint64_t rate)
{
	if (slot < 0 || slot >= NET_SLOTS)
		return;
	up[slot] = 1;
	policy_set((unsigned)slot, eg, rate);
}

void
netclient_release(const char *id, int slot)
{
	struct json_object *b;
	unsigned s;

	if (slot < 0 || slot >= NET_SLOTS || !up[slot])
		return;
	s = (unsigned)slot;
	up[s] = 0;
	policy_forget(s);
	/* Without netd now, its next sync leaves this slot out. */
	if (conn == NULL)
		return;
	b = json_object_new_object();
	json_object_object_add(b, "slot", json_object_new_int((int)s));
	if (ipc_request(conn, IPC_NET_TEARDOWN, b, -1, NETD_TIMEOUT_MS,
	    teardown_done, (void *)(uintptr_t)s) == -1)
		log_warnx("vm %s: cannot ask netd to release slot %u", id,
		    s);
	json_object_put(b);
	log_debug("vm %s: network of slot %u released", id, s);
}
