/*
 * vmmd's warm pool.  With [vmmd] warm_pool = N > 0, vmmd keeps N ready
 * memory snapshots of each configured image at vm_create's default size
 * (1 vCPU, the image's memory_mib) for each kind of create: network off,
 * and, while netd says guest networking works, network on.  The two kinds
 * differ in their machine (one has a NIC, the other none), so neither
 * serves the other.  One is built in the background, one at a time per
 * image: an internal VM of the pool's own
 * workspace (POOL_WORKSPACE, which no credential can name) is created,
 * snapshotted with its memory as vm_snapshot does (snapshot.c) and
 * destroyed.  A network-on build's VM has a netd slot of its own while it
 * lives, with an empty allowlist (it reaches nothing), released with it;
 * the snapshot keeps the NIC's device state, and each VM restored from it
 * gets a slot of its own as a fork's child does (vm_boot.c).  Every step
 * is one of the asynchronous VM operations or the
 * worker pool's, so the loop is never held.  A failure is logged and
 * retried after a back-off; a build that host limits would refuse is
 * skipped, logged once, and tried again later.
 *
 * Each pool snapshot is named by its key: the SHA-256 of everything a
 * restore needs to match (the image's files and pinned digests, the QEMU
 * binary and its version, the machine and accelerator, the size, and for
 * network on the NIC).  One
 * whose key is not the current one is retired at startup and whenever a
 * vm_create looks, and the pool builds anew.
 *
 * A vm_create takes one (warmpool_take): its row becomes 'fork', never
 * listed, so a crash during the restore leaves it to snap_init to
 * remove; the VM's create deletes it once the disk is cloned and the
 * memory restored.  The pool builds again only when no restore from it
 * of the image is under way (warmpool_used), so that a tenant's restore
 * does not share the CPU with a pool VM's boot.  A pool VM that a crash
 * left is destroyed at startup; a half-made pool snapshot is snap_init's,
 * as any other.
 */
#include <sys/stat.h>

#include <event2/event.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "log.h"
#include "netclient.h"
#include "preflight.h"
#include "snapshot.h"
#include "vm_local.h"
#include "warmpool.h"

#define RETRY_MIN_S	5	/* after a failed build, doubling */
#define RETRY_MAX_S	300
#define LIMITS_RETRY_S	30	/* after a build host limits refused */
#define POOL_IDLE_S	3600	/* a pool VM is destroyed long before */

/* One kind of one image: pools[2 * i] network off, pools[2 * i + 1] on. */
struct pool_image {
	const struct conf_image	*im;
	int			 network;	/* its machine has a NIC */
	char			 key[65];
	int			 building;	/* one operation at a time */
	int			 retry_s;	/* the next back-off */
	int			 limited;	/* skipped, said once */
	int			 nonet;		/* no netd now, said once */
	int			 taken;		/* restores not yet done */
	struct request		*req;		/* the build's own */
	char			 vm_id[VM_ID_LEN + 1];
	struct event		*timer;
};

static struct pool_image *pools;
static size_t npools;
static char qemu_version[PF_MSG_MAX];

static void pool_kick(struct pool_image *);

static void
key_add(EVP_MD_CTX *c, const char *name, const char *value)
{
	EVP_DigestUpdate(c, name, strlen(name));
	EVP_DigestUpdate(c, "=", 1);
	EVP_DigestUpdate(c, value != NULL ? value : "", value != NULL ?
	    strlen(value) : 0);
	EVP_DigestUpdate(c, "\n", 1);
}

/* A file's size and modification time: a changed file changes the key
 * even where no digest is pinned. */
static void
key_add_file(EVP_MD_CTX *c, const char *name, const char *path)
{
	struct stat st;
	char buf[128];

	if (path == NULL || stat(path, &st) == -1)
		snprintf(buf, sizeof(buf), "missing");
	else
		snprintf(buf, sizeof(buf), "%lld %lld.%09ld",
		    (long long)st.st_size, (long long)st.st_mtim.tv_sec,
		    st.st_mtim.tv_nsec);
	key_add(c, name, buf);
}

static void
pool_key(const struct conf_image *im, int vcpus, int memory_mib, int network,
    char key[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char num[32];
	EVP_MD_CTX *c;

	if ((c = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1)
		fatalx("%s: sha256", __func__);
	key_add(c, "format", "mcpvm warm pool 1");
	key_add(c, "image", im->id);
	key_add(c, "rootfs", im->rootfs);
	key_add(c, "rootfs_sha256", im->rootfs_sha256);
	key_add_file(c, "rootfs_file", im->rootfs);
	key_add(c, "kernel", im->kernel);
	key_add(c, "kernel_sha256", im->kernel_sha256);
	key_add_file(c, "kernel_file", im->kernel);
	key_add(c, "initrd", im->initrd);
	key_add(c, "initrd_sha256", im->initrd_sha256);
	key_add_file(c, "initrd_file", im->initrd);
	key_add(c, "append", im->append);
	key_add(c, "qemu", vmmd_conf()->vmmd.qemu);
	key_add(c, "qemu_version", qemu_version);
	key_add_file(c, "qemu_file", vmmd_conf()->vmmd.qemu);
	key_add(c, "machine", "q35");
	key_add(c, "accel", qemu_backend_kvm(vmmd_qemu()) ? "kvm" : "tcg");
	snprintf(num, sizeof(num), "%d", vcpus);
	key_add(c, "vcpus", num);
	snprintf(num, sizeof(num), "%d", memory_mib);
	key_add(c, "memory_mib", num);
	/* Network off adds nothing: its keys stay what they were. */
	if (network)
		key_add(c, "network", "virtio-net tap");
	if (EVP_DigestFinal_ex(c, md, &mdlen) != 1 || mdlen != 32)
		fatalx("%s: sha256", __func__);
	EVP_MD_CTX_free(c);
	for (unsigned int i = 0; i < mdlen; i++)
		snprintf(key + i * 2, 3, "%02x", md[i]);
}

static struct pool_image *
pool_of(const char *image, int network)
{
	for (size_t i = 0; i < npools; i++)
		if (strcmp(pools[i].im->id, image) == 0 &&
		    pools[i].network == network)
			return &pools[i];
	return NULL;
}

/* The other kind of pi's image. */
static struct pool_image *
pool_sibling(struct pool_image *pi)
{
	return &pools[(size_t)(pi - pools) ^ 1];
}

/* One build at a time per image, and none while a restore of it runs. */
static int
pool_busy(struct pool_image *pi)
{
	struct pool_image *o = pool_sibling(pi);

	return pi->building || pi->taken > 0 || o->building || o->taken > 0;
}

/* Both kinds of pi's image may build now: the first that wants to does. */
static void
pool_kick_image(struct pool_image *pi)
{
	struct pool_image *first = pi->network ? pool_sibling(pi) : pi;

	pool_kick(first);
	pool_kick(pool_sibling(first));
}

/* Deletes a pool snapshot that no restore may use, and says why. */
static void
pool_retire(const struct snap_record *r, const char *why)
{
	char err[512];

	log_info("warm pool: snapshot %s of image %s retired: %s", r->id,
	    r->image, why);
	if (snap_delete(r, err, sizeof(err)) == -1)
		log_warnx("warm pool: snapshot %s: %s", r->id, err);
}

/*
 * The pool's ready snapshots of pi's image with the current key; the
 * others of the pool (another key, an image gone, a pool turned off) are
 * retired on the way.  take: the first is taken into *out instead.
 */
static int
pool_scan(struct pool_image *pi, int take, struct snap_record *out)
{
	struct snap_record *recs;
	char dberr[256];
	size_t n;
	int ready = 0, taken = 0;

	if (store_snap_list(vmmd_store(), POOL_WORKSPACE, &recs, &n, dberr,
	    sizeof(dberr)) == -1) {
		log_warnx("warm pool: %s", dberr);
		return take ? -1 : 0;
	}
	for (size_t i = 0; i < n; i++) {
		struct snap_record *r = &recs[i];
		struct pool_image *of = pool_of(r->image, r->network);

		if (strcmp(r->state, "ready") != 0)
			continue;
		if (of == NULL || vmmd_conf()->vmmd.warm_pool == 0) {
			pool_retire(r, "its image is not pooled");
			continue;
		}
		if (strcmp(r->name, of->key) != 0) {
			pool_retire(r, "its key is not the image's present "
			    "one (the image, QEMU or the size changed)");
			continue;
		}
		if (of != pi)
			continue;
		if (take && !taken && snap_take(r) == 0) {
			*out = *r;
			taken = 1;
			continue;
		}
		ready++;
	}
	free(recs);
	return take ? (taken ? 0 : -1) : ready;
}

/* ---- building one ------------------------------------------------------ */

static void
pool_timer_cb(int fd, short ev, void *arg)
{
	pool_kick(arg);
}

static void
pool_later(struct pool_image *pi, int seconds)
{
	struct timeval tv = { seconds, 0 };

	evtimer_add(pi->timer, &tv);
}

/* The pool's own request, answered nowhere: a VM's create and snapshot
 * need one, as a tool's do. */
static struct request *
pool_request(int network)
{
	struct request *req;

	if ((req = calloc(1, sizeof(*req))) == NULL)
		fatal("calloc");
	snprintf(req->tool, sizeof(req->tool), "warm_pool");
	snprintf(req->workspace, sizeof(req->workspace), "%s",
	    POOL_WORKSPACE);
	req->admin = 1;
	/* A network-on build's VM reaches nothing: an empty allowlist. */
	if (network)
		req->egress.mode = EGRESS_ALLOWLIST;
	TAILQ_INSERT_TAIL(request_all(), req, entry);
	return req;
}

static void
pool_vm_gone(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct pool_image *pi = arg;

	pi->building = 0;
	pi->vm_id[0] = '\0';
	if (pi->retry_s == 0)
		pool_kick_image(pi);	/* the next, if more are wanted */
	else
		pool_kick(pool_sibling(pi));
}

/* The build is over, either way: its VM goes, the pool goes on. */
static void
pool_end(struct pool_image *pi, const char *why)
{
	struct vm *vm;

	if (why != NULL && vmmd_shutting_down())
		log_info("warm pool: image %s: building a snapshot abandoned, "
		    "vmmd is stopping", pi->im->id);
	else if (why != NULL) {
		log_warnx("warm pool: image %s: building a snapshot failed, "
		    "retried in %d s: %s", pi->im->id, pi->retry_s > 0 ?
		    pi->retry_s : RETRY_MIN_S, why);
		pi->retry_s = pi->retry_s > 0 ? pi->retry_s : RETRY_MIN_S;
		pool_later(pi, pi->retry_s);
		pi->retry_s = pi->retry_s * 2 > RETRY_MAX_S ? RETRY_MAX_S :
		    pi->retry_s * 2;
	} else
		pi->retry_s = 0;
	if (pi->vm_id[0] != '\0' && (vm = vm_find(pi->vm_id)) != NULL &&
	    vm->rec.state != VM_GONE) {
		vm_destroy(vm, pool_vm_gone, pi);
		return;
	}
	pi->building = 0;
	pi->vm_id[0] = '\0';
	if (why == NULL)
		pool_kick_image(pi);
	else
		pool_kick(pool_sibling(pi));
}

static void
pool_made(const struct snap_record *snap, long long cont_wall_ms, void *arg)
{
	struct pool_image *pi = arg;

	log_info("warm pool: image %s: snapshot %s ready", pi->im->id,
	    snap->id);
	if (pi->req != NULL)
		request_drop(pi->req);
	pi->req = NULL;
	pool_end(pi, NULL);
}

/* snapshot.c answered (and freed) the request already. */
static void
pool_make_failed(const char *why, void *arg)
{
	struct pool_image *pi = arg;

	pi->req = NULL;
	pool_end(pi, why);
}

static void
pool_vm_up(struct vm *vm, const char *code, const char *msg, void *arg)
{
	struct pool_image *pi = arg;
	struct request *req = pi->req;

	if (code != NULL) {
		pi->req = NULL;
		request_drop(req);
		if (vm == NULL)
			pi->vm_id[0] = '\0';	/* none was made */
		pool_end(pi, msg != NULL ? msg : code);
		return;
	}
	snprintf(pi->vm_id, sizeof(pi->vm_id), "%s", vm->rec.id);
	if (vmmd_shutting_down()) {
		pi->req = NULL;
		request_drop(req);
		pool_end(pi, "vmmd is stopping");
		return;
	}
	/* A failure of either replies to the request, which frees it. */
	if (snap_make_check(req, vm, 1) == -1 ||
	    snap_make_pool(req, vm, pi->key, pool_made, pool_make_failed,
	    pi) == -1) {
		pi->req = NULL;
		pool_end(pi, "the snapshot could not be started");
	}
}

/* Builds one more snapshot for pi if the pool wants one and may. */
static void
pool_kick(struct pool_image *pi)
{
	const struct conf_image *im = pi->im;
	long long bytes = image_disk_bytes(im) + (im->memory_mib << 20);
	char code[32], msg[256];
	struct request *req;

	if (vmmd_shutting_down() || pool_busy(pi) ||
	    vmmd_conf()->vmmd.warm_pool == 0 ||
	    evtimer_pending(pi->timer, NULL))
		return;
	if (pool_scan(pi, 0, NULL) >= vmmd_conf()->vmmd.warm_pool)
		return;
	/* Network on is built only while netd can give its VM a slot. */
	if (pi->network && !netclient_available(msg, sizeof(msg))) {
		if (!pi->nonet)
			log_info("warm pool: image %s: network on not built "
			    "now (%s); tried again every %d s", im->id, msg,
			    LIMITS_RETRY_S);
		pi->nonet = 1;
		pool_later(pi, LIMITS_RETRY_S);
		return;
	}
	pi->nonet = 0;
	req = pool_request(pi->network);
	/*
	 * Host limits only (the pool's workspace has no policy of its own),
	 * with room for a tenant's VM besides: tenants do not count the
	 * pool (vm.c), so it takes no VM slot or memory one would need.
	 */
	if (vm_admit_n(req, im, 1, (int)im->memory_mib, 2, code,
	    sizeof(code), msg, sizeof(msg)) == -1 || snap_admit(req, bytes, 0, code,
	    sizeof(code), msg, sizeof(msg)) == -1) {
		request_drop(req);
		if (!pi->limited)
			log_info("warm pool: image %s: not built now, the "
			    "host's limits are reached (%s); tried again "
			    "every %d s", im->id, msg, LIMITS_RETRY_S);
		pi->limited = 1;
		pool_later(pi, LIMITS_RETRY_S);
		return;
	}
	pi->limited = 0;
	pi->building = 1;
	pi->req = req;
	pi->vm_id[0] = '\0';
	log_info("warm pool: image %s: building a snapshot, network %s",
	    im->id, pi->network ? "on" : "off");
	vm_create(req, im, 1, (int)im->memory_mib, pi->network, POOL_IDLE_S, 0,
	    pool_vm_up, pi);
}

/* ---- taking one -------------------------------------------------------- */

int
warmpool_take(const struct conf_image *im, int vcpus, int memory_mib,
    int network, struct snap_record *r)
{
	struct pool_image *pi;
	int rc;

	if (vmmd_conf()->vmmd.warm_pool == 0 || vcpus != 1 ||
	    memory_mib != im->memory_mib ||
	    (pi = pool_of(im->id, network != 0)) == NULL)
		return -1;
	/* The key again: a file changed since startup retires them all. */
	pool_key(im, 1, (int)im->memory_mib, 0, pool_of(im->id, 0)->key);
	pool_key(im, 1, (int)im->memory_mib, 1, pool_of(im->id, 1)->key);
	rc = pool_scan(pi, 1, r);
	if (rc == 0) {
		log_info("warm pool: image %s: snapshot %s taken, network %s",
		    im->id, r->id, network ? "on" : "off");
		/* No build starts before warmpool_used: a pool VM booting
		 * now would take the CPU from the restore it replaces. */
		pi->taken++;
	} else
		pool_kick_image(pi);
	return rc;
}

void
warmpool_used(const struct conf_image *im, int network)
{
	struct pool_image *pi;

	if ((pi = pool_of(im->id, network != 0)) == NULL || pi->taken == 0)
		return;
	if (--pi->taken == 0)
		pool_kick_image(pi);
}

/* ---- startup and shutdown ---------------------------------------------- */

static void
pool_vm_removed(struct vm *vm, const char *code, const char *msg, void *arg)
{
}

/*
 * A pool VM is destroyed, not waited for: a boot under TCG takes many
 * seconds, and its snapshot would be of no use to a vmmd that stops.
 * The build's own callbacks hear of it and end quietly (pool_end); what
 * a snapshot left half made is snap_init's at the next start.  The
 * destroy may end at once; vmmd_maybe_exit waits for the shutdown's
 * other steps all the same (env.h).
 */
void
warmpool_shutdown(void)
{
	struct vm *vm, *next;

	for (size_t i = 0; i < npools; i++)
		evtimer_del(pools[i].timer);
	TAILQ_FOREACH_SAFE(vm, vm_all(), entry, next)
		if (warmpool_is_pool(vm->rec.workspace) &&
		    vm->rec.state != VM_GONE &&
		    vm->rec.state != VM_DESTROYING) {
			log_info("warm pool: VM %s destroyed: vmmd is "
			    "stopping", vm->rec.id);
			vm_destroy(vm, pool_vm_removed, NULL);
		}
}

void
warmpool_init(void)
{
	const struct conf_image *ims = vmmd_conf()->images.v;
	struct pf_result pr;
	struct vm *vm, *next;

	/* A pool VM now is one a crash left: it goes. */
	TAILQ_FOREACH_SAFE(vm, vm_all(), entry, next)
		if (warmpool_is_pool(vm->rec.workspace) &&
		    vm->rec.state != VM_GONE &&
		    vm->rec.state != VM_DESTROYING) {
			log_info("warm pool: VM %s left by an earlier vmmd; "
			    "destroyed", vm->rec.id);
			vm_destroy(vm, pool_vm_removed, NULL);
		}
	if (vmmd_conf()->vmmd.warm_pool > 0) {
		/* Once, before serving: QEMU's own word on its version. */
		memset(&pr, 0, sizeof(pr));
		pf_check_qemu(vmmd_conf()->vmmd.qemu, &pr);
		snprintf(qemu_version, sizeof(qemu_version), "%s", pr.msg);
		npools = 2 * vmmd_conf()->images.n;
		if ((pools = calloc(npools ? npools : 1, sizeof(*pools))) ==
		    NULL)
			fatal("calloc");
		for (size_t i = 0; i < npools; i++) {
			pools[i].im = &ims[i / 2];
			pools[i].network = (int)(i % 2);
			pool_key(pools[i].im, 1, (int)pools[i].im->memory_mib,
			    pools[i].network, pools[i].key);
			if ((pools[i].timer = evtimer_new(vmmd_base(),
			    pool_timer_cb, &pools[i])) == NULL)
				fatal("%s: evtimer_new", __func__);
		}
	}
	/* Retires what no longer matches (all of it with the pool off). */
	pool_scan(NULL, 0, NULL);
	for (size_t i = 0; i < npools; i++) {
		log_info("warm pool: image %s: keeping %lld snapshots with "
		    "network %s, key %s", pools[i].im->id,
		    vmmd_conf()->vmmd.warm_pool, pools[i].network ? "on" :
		    "off", pools[i].key);
		pool_later(&pools[i], 0);
	}
}
