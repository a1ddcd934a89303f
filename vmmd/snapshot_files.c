/*
 * vmmd's snapshots on disk: <state_dir>/snapshots/<id>/ with disk.raw,
 * memory.bin (memory snapshots only) and manifest.json, built as
 * <id>.part/ and removed by renaming to <id>.del/ first (snapshot.c makes
 * them).  Here: the paths, removal on the worker pool, the manifest and
 * its checks, snap_init's reconcile of what a crash left at startup (the
 * store's rows against the directories), the usage that counts against
 * the limits, lookups by owner, and the check of a snapshot's files
 * against its manifest before a restore (size and SHA-256, on the worker
 * pool).  Nothing here trusts a file it did not check: a manifest is read
 * with a bound and parsed strictly.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "disk.h"
#include "jsonx.h"
#include "log.h"
#include "preflight.h"
#include "snapshot_files.h"
#include "snapshot_local.h"
#include "tools.h"
#include "vm_local.h"
#include "worker.h"

char snap_root[PATH_MAX];

/* <root>/<id><suffix>[/<name>]; "" when it does not fit. */
void
snap_path(const char *id, const char *suffix, const char *name, char *buf,
    size_t len)
{
	int n = name != NULL ? snprintf(buf, len, "%s/%s%s/%s", snap_root, id,
	    suffix, name) : snprintf(buf, len, "%s/%s%s", snap_root, id,
	    suffix);

	if (n < 0 || (size_t)n >= len)
		buf[0] = '\0';
}

/* dir/name into buf; "" when it does not fit. */
void
pjoin(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= len)
		buf[0] = '\0';
}

int
fsync_path(const char *path, int dir)
{
	int fd, rc;

	if ((fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) |
	    O_CLOEXEC | O_NOFOLLOW)) == -1)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* Removes a snapshot directory's files, then the directory.  Blocking. */
static void
remove_dir(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir,
			    de->d_name) < sizeof(path))
				unlink(path);
		}
		closedir(d);
	}
	if (rmdir(dir) == -1 && errno != ENOENT)
		log_warn("snapshot: rmdir %s", dir);
}

struct remove_job {
	char	dir[PATH_MAX];
};

static void
remove_job_run(void *arg)
{
	remove_dir(((struct remove_job *)arg)->dir);
}

static void
remove_job_done(void *arg)
{
	free(arg);
}

/* Removes dir on the worker pool (here when the pool is gone). */
void
remove_dir_async(const char *dir)
{
	struct remove_job *j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		fatal("calloc");
	snprintf(j->dir, sizeof(j->dir), "%s", dir);
	if (worker_submit(vmmd_workers(), remove_job_run, remove_job_done, j) ==
	    -1) {
		remove_job_run(j);
		remove_job_done(j);
	}
}

/*
 * Deletes r: renamed to <id>.del (fsynced) first, then its row, then
 * the files on the worker pool.  A crash at any point leaves the
 * snapshot whole and listed, or gone.
 */
int
snap_delete(const struct snap_record *r, char *err, size_t errlen)
{
	char dir[PATH_MAX], del[PATH_MAX], dberr[256];

	snap_path(r->id, "", NULL, dir, sizeof(dir));
	snap_path(r->id, ".del", NULL, del, sizeof(del));
	if (rename(dir, del) == -1 && errno != ENOENT)
		return errf(err, errlen, "%s: %s", dir, strerror(errno));
	fsync_path(snap_root, 1);
	if (store_snap_delete(vmmd_store(), r->id, dberr, sizeof(dberr)) ==
	    -1) {
		/* Its peer hears that it failed, the log where. */
		log_warnx("snapshot %s: %s", r->id, dberr);
		return errf(err, errlen, "the store failed");
	}
	remove_dir_async(del);
	log_info("snapshot %s (workspace %s) deleted", r->id, r->workspace);
	return 0;
}

/* ---- the manifest ------------------------------------------------------ */

struct json_object *
manifest_new(const struct snap_record *r, const struct conf_image *im)
{
	struct json_object *o = json_object_new_object(), *d;

	json_object_object_add(o, "format", json_object_new_int(SNAP_FORMAT));
	json_object_object_add(o, "id", json_object_new_string(r->id));
	json_object_object_add(o, "workspace",
	    json_object_new_string(r->workspace));
	json_object_object_add(o, "name", json_object_new_string(r->name));
	json_object_object_add(o, "source_vm",
	    json_object_new_string(r->source_vm));
	json_object_object_add(o, "memory", json_object_new_boolean(r->memory));
	json_object_object_add(o, "network",
	    json_object_new_boolean(r->network));
	json_object_object_add(o, "disk_bytes",
	    json_object_new_int64(r->disk_bytes));
	json_object_object_add(o, "memory_bytes",
	    json_object_new_int64(r->memory_bytes));
	json_object_object_add(o, "memory_sha256",
	    json_object_new_string(r->memory_sha256));
	json_object_object_add(o, "image", json_object_new_string(r->image));
	d = json_object_new_object();
	json_object_object_add(d, "rootfs", json_object_new_string(
	    im != NULL ? im->rootfs_sha256 : ""));
	json_object_object_add(d, "kernel", json_object_new_string(
	    im != NULL ? im->kernel_sha256 : ""));
	json_object_object_add(d, "initrd", json_object_new_string(
	    im != NULL ? im->initrd_sha256 : ""));
	json_object_object_add(o, "image_sha256", d);
	json_object_object_add(o, "qemu",
	    json_object_new_string(vmmd_conf()->vmmd.qemu));
	json_object_object_add(o, "machine", json_object_new_string("q35"));
	json_object_object_add(o, "vcpus", json_object_new_int(r->vcpus));
	json_object_object_add(o, "memory_mib",
	    json_object_new_int(r->memory_mib));
	json_object_object_add(o, "created_at",
	    json_object_new_int64(r->created_at));
	return o;
}

/*
 * Reads dir's manifest and checks it against the record: its id,
 * workspace, memory and network flags (a manifest without "network" is
 * an older one, of a machine without a NIC), sizes and digest.  0, or -1
 * with why.
 * Blocking.
 */
static int
manifest_check(const char *dir, const struct snap_record *r,
    struct json_object **out, char *err, size_t errlen)
{
	char path[PATH_MAX], buf[MANIFEST_MAX + 1];
	struct json_object *m = NULL;
	struct jsonx_err jerr;
	const char *s;
	int64_t v;
	int fd, b, net;
	ssize_t n;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, SNAP_MANIFEST)
	    >= sizeof(path))
		return errf(err, errlen, "%s: path too long", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || n > MANIFEST_MAX)
		return errf(err, errlen, "%s: unreadable or over %d bytes",
		    path, MANIFEST_MAX);
	buf[n] = '\0';
	if ((m = json_tokener_parse(buf)) == NULL ||
	    !json_object_is_type(m, json_type_object)) {
		json_object_put(m);
		return errf(err, errlen, "%s: not a JSON object", path);
	}
	if (jsonx_get_int64(m, "format", 1, 0, 1000, &v, &jerr) != 1 ||
	    v != SNAP_FORMAT ||
	    jsonx_get_string(m, "id", 1, &s, &jerr) != 1 ||
	    strcmp(s, r->id) != 0 ||
	    jsonx_get_string(m, "workspace", 1, &s, &jerr) != 1 ||
	    strcmp(s, r->workspace) != 0 ||
	    jsonx_get_bool(m, "memory", 1, &b, &jerr) != 1 ||
	    b != r->memory ||
	    (net = 0, jsonx_get_bool(m, "network", 0, &net, &jerr) == -1) ||
	    net != r->network ||
	    jsonx_get_int64(m, "disk_bytes", 1, 0, INT64_MAX, &v, &jerr) != 1 ||
	    v != r->disk_bytes ||
	    jsonx_get_int64(m, "memory_bytes", 1, 0, INT64_MAX, &v, &jerr) !=
	    1 || v != r->memory_bytes ||
	    jsonx_get_string(m, "memory_sha256", 1, &s, &jerr) != 1 ||
	    strcmp(s, r->memory_sha256) != 0 ||
	    jsonx_get_int64(m, "vcpus", 1, 1, 1024, &v, &jerr) != 1 ||
	    v != r->vcpus ||
	    jsonx_get_int64(m, "memory_mib", 1, 1, INT32_MAX, &v, &jerr) !=
	    1 || v != r->memory_mib) {
		json_object_put(m);
		return errf(err, errlen, "%s: does not describe snapshot %s "
		    "as the store does", path, r->id);
	}
	if (out != NULL)
		*out = m;
	else
		json_object_put(m);
	return 0;
}

/* The file's size must be bytes. */
static int
size_check(const char *dir, const char *name, long long bytes, char *err,
    size_t errlen)
{
	char path[PATH_MAX];
	struct stat st;

	pjoin(path, sizeof(path), dir, name);
	if (lstat(path, &st) == -1)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode) || (long long)st.st_size != bytes)
		return errf(err, errlen, "%s: %lld bytes, the manifest says "
		    "%lld", path, (long long)st.st_size, bytes);
	return 0;
}

/* ---- startup ----------------------------------------------------------- */

static int
is_snap_id(const char *s, size_t len)
{
	if (len != VM_ID_LEN)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/*
 * What a crash left: unfinished (.part) and half-deleted (.del)
 * directories go, 'making' rows go, and a 'ready' row whose directory or
 * manifest is missing or does not match is logged and dropped.  A
 * directory no row names is removed too.  Blocking: at startup, before
 * vmmd serves.
 */
void
snap_init(void)
{
	struct snap_record *recs;
	char dir[PATH_MAX], err[512];
	struct dirent *de;
	size_t n;
	DIR *d;

	if ((size_t)snprintf(snap_root, sizeof(snap_root), "%s/snapshots",
	    vmmd_conf()->paths.state_dir) >= sizeof(snap_root) - 64)
		fatalx("state_dir is too long for its snapshots");
	if (mkdir(snap_root, 0700) == -1 && errno != EEXIST)
		fatal("mkdir %s", snap_root);
	if (chmod(snap_root, 0700) == -1)
		fatal("chmod %s", snap_root);
	if (store_snap_list(vmmd_store(), NULL, &recs, &n, err, sizeof(err)) ==
	    -1)
		fatalx("cannot read snapshots from the store: %s", err);
	for (size_t i = 0; i < n; i++) {
		struct snap_record *r = &recs[i];

		snap_path(r->id, "", NULL, dir, sizeof(dir));
		if (strcmp(r->state, "ready") != 0) {
			log_info("snapshot %s: vmmd stopped while making it "
			    "(or forking from it); removed", r->id);
			if (store_snap_delete(vmmd_store(), r->id, err,
			    sizeof(err)) == -1)
				log_warnx("snapshot %s: %s", r->id, err);
			continue;
		}
		if (manifest_check(dir, r, NULL, err, sizeof(err)) == -1 ||
		    size_check(dir, SNAP_DISK, r->disk_bytes, err,
		    sizeof(err)) == -1 ||
		    (r->memory && size_check(dir, SNAP_MEMORY,
		    r->memory_bytes, err, sizeof(err)) == -1)) {
			log_warnx("snapshot %s (workspace %s) dropped: %s",
			    r->id, r->workspace, err);
			if (store_snap_delete(vmmd_store(), r->id, err,
			    sizeof(err)) == -1)
				log_warnx("snapshot %s: %s", r->id, err);
			remove_dir(dir);
		}
	}
	free(recs);
	if ((d = opendir(snap_root)) == NULL)
		fatal("opendir %s", snap_root);
	while ((de = readdir(d)) != NULL) {
		struct snap_record r;
		size_t len = strlen(de->d_name);
		const char *dot = strchr(de->d_name, '.');

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", snap_root,
		    de->d_name) >= sizeof(dir))
			continue;
		if (dot != NULL && (strcmp(dot, ".part") == 0 ||
		    strcmp(dot, ".del") == 0)) {
			log_info("snapshot directory %s: left by a crash; "
			    "removed", de->d_name);
			remove_dir(dir);
			continue;
		}
		if (is_snap_id(de->d_name, len) &&
		    store_snap_get(vmmd_store(), de->d_name, &r, err,
		    sizeof(err)) == 0)
			continue;
		log_warnx("snapshot directory %s: no snapshot of that id; "
		    "removed", de->d_name);
		remove_dir(dir);
	}
	closedir(d);
	fsync_path(snap_root, 1);
}

/* ---- what others ask --------------------------------------------------- */

void
snap_usage(const char *workspace, long long *host_bytes, long long *ws_bytes,
    long long *ws_count)
{
	struct snap_record *recs;
	char dberr[256];
	size_t n;

	*host_bytes = *ws_bytes = *ws_count = 0;
	if (store_snap_list(vmmd_store(), NULL, &recs, &n, dberr,
	    sizeof(dberr)) == -1) {
		log_warnx("snapshot usage: %s", dberr);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		long long b = recs[i].disk_bytes + recs[i].memory_bytes;

		/* A memory snapshot still being written holds its whole
		 * size already: two made at once are both counted. */
		if (recs[i].memory && recs[i].memory_bytes == 0)
			b += (long long)recs[i].memory_mib << 20;

		*host_bytes += b;
		if (workspace != NULL &&
		    strcmp(recs[i].workspace, workspace) == 0) {
			*ws_bytes += b;
			/* vm_fork's own is no snapshot of the workspace's */
			if (strcmp(recs[i].state, "fork") != 0)
				(*ws_count)++;
		}
	}
	free(recs);
}

int
snap_find_owned(const char *id, const char *workspace,
    struct snap_record *r)
{
	char dberr[256];

	if (store_snap_get(vmmd_store(), id, r, dberr, sizeof(dberr)) == -1 ||
	    strcmp(r->workspace, workspace) != 0 ||
	    strcmp(r->state, "ready") != 0)
		return -1;
	return 0;
}

void
snap_file(const struct snap_record *r, int memory, char *buf, size_t len)
{
	snap_path(r->id, "", memory ? SNAP_MEMORY : SNAP_DISK, buf, len);
}

struct json_object *
snap_json(const struct snap_record *r)
{
	struct json_object *o = json_object_new_object();
	char when[40];

	iso8601_ms(r->created_at, when, sizeof(when));
	json_object_object_add(o, "snapshot_id", json_object_new_string(r->id));
	json_object_object_add(o, "name", json_object_new_string(r->name));
	json_object_object_add(o, "memory", json_object_new_boolean(r->memory));
	json_object_object_add(o, "network",
	    json_object_new_string(r->network ? "on" : "off"));
	json_object_object_add(o, "source_vm_id",
	    json_object_new_string(r->source_vm));
	json_object_object_add(o, "image", json_object_new_string(r->image));
	json_object_object_add(o, "vcpus", json_object_new_int(r->vcpus));
	json_object_object_add(o, "memory_mib",
	    json_object_new_int(r->memory_mib));
	json_object_object_add(o, "size_bytes",
	    json_object_new_int64(r->disk_bytes + r->memory_bytes));
	json_object_object_add(o, "created_at", json_object_new_string(when));
	json_object_object_add(o, "paused_ms",
	    json_object_new_int64(r->paused_ms));
	return o;
}

/* ---- verifying before a restore ---------------------------------------- */

/*
 * The warm pool's snapshots are made by vmmd itself, restored once and
 * then removed, and hashing a pool snapshot's memory file again before
 * its one restore is most of what a warm vm_create waits for beyond the
 * bare restore (#29).  So when vmmd has digested a pool snapshot's
 * memory file as it made it, it remembers what that file was: device,
 * inode, size, modification and change times, the same before and after
 * the hash.  The restore's check takes that entry and, when the file is
 * still the same, does not hash it again.
 *
 * What keeps the file whole meanwhile: it is root's, 0600, in root's
 * snapshot directory, hidden from every VM's jail; QEMU wrote it through
 * vmmd's descriptor, which is closed.  Any write to it, or a new file in
 * its place, changes its change time or inode (which no one can set
 * back), and then it is hashed as every other snapshot is.  What this
 * does not catch is the storage itself altering bytes in the seconds a
 * pool snapshot waits; neither does anything for the image's files.  An
 * entry lives in this vmmd's memory only: after a restart every pool
 * snapshot is hashed before its restore.
 */
#define DIGESTED_MAX	16	/* about the pool's keys; more are hashed */

static struct digested {
	char			id[VM_ID_LEN + 1];
	struct file_identity	file;
} digested[DIGESTED_MAX];
static size_t ndigested;
static pthread_mutex_t digested_mu = PTHREAD_MUTEX_INITIALIZER;

int
snap_memory_digest(const struct snap_record *r, const char *path,
    char hex[65], char *err, size_t errlen)
{
	struct file_identity before, after;

	if (file_identity_of(path, &before) == -1)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	if (pf_sha256_file(path, hex, err, errlen) == -1)
		return -1;
	/* Remembered only when the file did not change during the hash;
	 * when the table is full the oldest entry goes (and is hashed). */
	if (!warmpool_is_pool(r->workspace) ||
	    file_identity_of(path, &after) == -1 ||
	    !file_identity_same(&before, &after))
		return 0;
	pthread_mutex_lock(&digested_mu);
	if (ndigested == DIGESTED_MAX) {
		memmove(&digested[0], &digested[1],
		    (DIGESTED_MAX - 1) * sizeof(digested[0]));
		ndigested--;
	}
	snprintf(digested[ndigested].id, sizeof(digested[0].id), "%s", r->id);
	digested[ndigested++].file = after;
	pthread_mutex_unlock(&digested_mu);
	return 0;
}

/* 1 when id's memory file at path is the one vmmd digested; the entry
 * is used up either way (a pool snapshot is restored once). */
static int
digested_take(const char *id, const char *path)
{
	struct file_identity now;
	int same = 0;

	if (file_identity_of(path, &now) == -1)
		return 0;
	pthread_mutex_lock(&digested_mu);
	for (size_t i = 0; i < ndigested; i++) {
		if (strcmp(digested[i].id, id) != 0)
			continue;
		same = file_identity_same(&digested[i].file, &now);
		memmove(&digested[i], &digested[i + 1],
		    (ndigested - i - 1) * sizeof(digested[0]));
		ndigested--;
		break;
	}
	pthread_mutex_unlock(&digested_mu);
	return same;
}

struct verify_job {
	struct snap_record	 rec;
	const struct conf_image	*im;
	char			 dir[PATH_MAX];
	int			 rc;
	int			 unhashed;	/* digested_take said so */
	char			 err[512];
	snap_verify_cb		 cb;
	void			*arg;
};

static void
verify_run(void *arg)
{
	struct verify_job *j = arg;
	struct json_object *m = NULL, *d;
	struct jsonx_err jerr;
	char path[PATH_MAX], hex[65];
	const char *s;

	j->rc = -1;
	if (manifest_check(j->dir, &j->rec, &m, j->err, sizeof(j->err)) == -1)
		return;
	/* The image must be the one the snapshot was made with. */
	if (j->im != NULL && jsonx_get_object(m, "image_sha256", 1, &d,
	    &jerr) == 1 && jsonx_get_string(d, "rootfs", 1, &s, &jerr) == 1 &&
	    strcasecmp(s, j->im->rootfs_sha256) != 0) {
		errf(j->err, sizeof(j->err), "snapshot %s was made with "
		    "another version of image %s", j->rec.id, j->rec.image);
		goto out;
	}
	if (j->rec.memory && j->im != NULL && (jsonx_get_object(m,
	    "image_sha256", 1, &d, &jerr) != 1 ||
	    jsonx_get_string(d, "kernel", 1, &s, &jerr) != 1 ||
	    strcasecmp(s, j->im->kernel_sha256) != 0)) {
		errf(j->err, sizeof(j->err), "snapshot %s was made with "
		    "another kernel of image %s", j->rec.id, j->rec.image);
		goto out;
	}
	if (size_check(j->dir, SNAP_DISK, j->rec.disk_bytes, j->err,
	    sizeof(j->err)) == -1)
		goto out;
	if (j->rec.memory) {
		if (size_check(j->dir, SNAP_MEMORY, j->rec.memory_bytes,
		    j->err, sizeof(j->err)) == -1)
			goto out;
		pjoin(path, sizeof(path), j->dir, SNAP_MEMORY);
		if (digested_take(j->rec.id, path)) {
			j->unhashed = 1;
			j->rc = 0;
			goto out;
		}
		if (pf_sha256_file(path, hex, j->err, sizeof(j->err)) == -1)
			goto out;
		if (strcmp(hex, j->rec.memory_sha256) != 0) {
			errf(j->err, sizeof(j->err), "%s: its SHA-256 is not "
			    "the manifest's: the file is damaged, and nothing "
			    "was restored", path);
			goto out;
		}
	}
	j->rc = 0;
out:
	json_object_put(m);
}

static void
verify_done(void *arg)
{
	struct verify_job *j = arg;

	if (j->unhashed)
		log_debug("snapshot %s: its memory file is the one vmmd "
		    "digested as it made it; not hashed again", j->rec.id);
	j->cb(j->rc, j->err, j->arg);
	free(j);
}

int
snap_verify_async(const struct snap_record *r, const struct conf_image *im,
    snap_verify_cb cb, void *arg)
{
	struct verify_job *j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		fatal("calloc");
	j->rec = *r;
	j->im = im;
	j->cb = cb;
	j->arg = arg;
	snap_path(r->id, "", NULL, j->dir, sizeof(j->dir));
	if (worker_submit(vmmd_workers(), verify_run, verify_done, j) == -1) {
		free(j);
		return -1;
	}
	return 0;
}
