/*
 * Per-VM cgroups for vmmd (see cgroup.h).  Runs in vmmd: creation and
 * removal at VM start and destroy, kill at destroy and crash recovery
 * (cg_kill blocks for milliseconds; callers on the loop use a worker).
 */
#include <sys/stat.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "util.h"
#include "worker.h"

#define KILL_TIMEOUT_MS		5000
#define FREEZE_TIMEOUT_MS	1000

static const char *ctrl_names[CG_NCTRL] = {
	"memory", "cpu", "pids", "freezer",
};

const char *
cg_layout_name(enum cg_layout l)
{
	switch (l) {
	case CG_LAYOUT_V2:
		return "v2";
	case CG_LAYOUT_V1:
		return "v1";
	default:
		return "none";
	}
}

const char *
cg_ctrl_name(enum cg_ctrl c)
{
	return c < CG_NCTRL ? ctrl_names[c] : "?";
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Is word w in the space separated list s? */
static int
has_word(const char *s, const char *w)
{
	size_t n = strlen(w);
	const char *p = s;

	while ((p = strstr(p, w)) != NULL) {
		if ((p == s || isspace((unsigned char)p[-1])) &&
		    (p[n] == '\0' || isspace((unsigned char)p[n])))
			return 1;
		p += n;
	}
	return 0;
}

/* Is word w in the comma separated mount options o? */
static int
has_opt(const char *o, const char *w)
{
	size_t n = strlen(w);
	const char *p = o;

	while ((p = strstr(p, w)) != NULL) {
		if ((p == o || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
			return 1;
		p += n;
	}
	return 0;
}

static int
parent_ok(const char *parent)
{
	const char *p;

	if (parent == NULL || *parent == '\0' ||
	    strlen(parent) >= CG_PARENT_MAX)
		return 0;
	/* One path component of plain characters: it names our subtree. */
	for (p = parent; *p != '\0'; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' &&
		    *p != '.')
			return 0;
	return strcmp(parent, ".") != 0 && strcmp(parent, "..") != 0;
}

#define V2_ALL	((1u << CG_MEMORY) | (1u << CG_CPU) | (1u << CG_PIDS))

/* " memory pids": the controllers of want that have lacks, for errors. */
static void
ctrl_names_in(unsigned want, unsigned have, char *buf, size_t len)
{
	int c;

	buf[0] = '\0';
	for (c = 0; c < CG_NCTRL; c++)
		if ((want & (1u << c)) && !(have & (1u << c)))
			snprintf(buf + strlen(buf), len - strlen(buf), " %s",
			    ctrl_names[c]);
}

/* The controllers of memory, cpu and pids that a v2 cgroup offers. */
static unsigned
v2_ctrls_of(const char *dir)
{
	char path[PATH_MAX + 32], ctrls[1024];
	unsigned m = 0;
	int c;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
	if (read_file_str(path, ctrls, sizeof(ctrls)) < 0)
		return 0;
	for (c = CG_MEMORY; c <= CG_PIDS; c++)
		if (has_word(ctrls, ctrl_names[c]))
			m |= 1u << c;
	return m;
}

int
cg_detect_from(FILE *mounts, struct cg_host *h, const char *parent,
    char *err, size_t errlen)
{
	char line[4096], dev[256], dir[PATH_MAX], type[64], opts[1024];
	char missing[128];
	unsigned m;
	int c;

	memset(h, 0, sizeof(*h));
	if (!parent_ok(parent))
		return errf(err, errlen, "cgroup parent name \"%s\" must be one "
		    "path component of letters, digits, '-', '_' or '.'",
		    parent == NULL ? "" : parent);
	strcpy(h->parent, parent);
	while (fgets(line, sizeof(line), mounts) != NULL) {
		if (sscanf(line, "%255s %4095s %63s %1023s", dev, dir, type,
		    opts) != 4)
			continue;
		if (strcmp(type, "cgroup2") == 0 && h->v2[0] == '\0')
			snprintf(h->v2, sizeof(h->v2), "%s", dir);
		else if (strcmp(type, "cgroup") == 0)
			for (c = 0; c < CG_NCTRL; c++)
				if (h->v1[c][0] == '\0' &&
				    has_opt(opts, ctrl_names[c]))
					snprintf(h->v1[c], sizeof(h->v1[c]),
					    "%s", dir);
	}
	if (h->v2[0] != '\0') {
		snprintf(h->v2_base, sizeof(h->v2_base), "%s", h->v2);
		h->v2_ctrls = v2_ctrls_of(h->v2);
		h->v2_has_ctrls = h->v2_ctrls == V2_ALL;
	}
	if (h->v2_has_ctrls) {
		h->layout = CG_LAYOUT_V2;
		return 0;
	}
	for (m = 0, c = 0; c < CG_NCTRL; c++)
		if (h->v1[c][0] != '\0')
			m |= 1u << c;
	ctrl_names_in((1u << CG_NCTRL) - 1, m, missing, sizeof(missing));
	if (missing[0] == '\0') {
		h->layout = CG_LAYOUT_V1;
		return 0;
	}
	h->layout = CG_LAYOUT_NONE;
	return errf(err, errlen, "no usable cgroups: %s, and the v1 "
	    "hierarchies for%s are not mounted (mount cgroup2 with the memory, "
	    "cpu and pids controllers, or the v1 controllers)",
	    h->v2[0] != '\0' ? "cgroup2 is mounted without the memory, cpu "
	    "and pids controllers" : "no cgroup2 mount", missing);
}

/* Is holder the name of vmmd's own cgroup ("self", or nothing)? */
static int
holder_is_self(const char *holder)
{
	return holder == NULL || *holder == '\0' || strcmp(holder, "self") == 0;
}

/*
 * A holder unit's cgroup (mcpvm-vms.service), by its path from the
 * cgroup2 mount: checked, and found, into base.
 */
static int
holder_base(const struct cg_host *h, const char *holder, char *base,
    size_t len, char *err, size_t errlen)
{
	int n;

	if (holder[0] != '/' || strcmp(holder, "/") == 0 ||
	    strstr(holder, "/..") != NULL || strstr(holder, "//") != NULL)
		return errf(err, errlen, "cgroup_holder \"%s\" is not a "
		    "cgroup below the root, written from the cgroup2 mount "
		    "(e.g. /system.slice/mcpvm-vms.service), nor \"self\"",
		    holder);
	n = snprintf(base, len, "%s%s", h->v2, holder);
	if (n < 0 || (size_t)n >= len)
		return errf(err, errlen, "cgroup_holder too long");
	if (access(base, F_OK) == -1)
		return errf(err, errlen, "cgroup_holder %s: %s: is "
		    "mcpvm-vms.service running? (vmmd's unit requires it)",
		    base, strerror(errno));
	if (strcmp(h->parent, CG_HOLDER_LEAF) == 0)
		return errf(err, errlen, "cgroup_parent \"%s\" is the name of "
		    "vmhold's leaf in the holder's cgroup", h->parent);
	return 0;
}

/* v2_track's cgroup for slot (or, slot ~0u, its parent). */
static int
track_path(const struct cg_host *h, unsigned slot, char *buf, size_t len)
{
	int n;

	if (slot == ~0u)
		n = snprintf(buf, len, "%s/%s", h->v2_track, h->parent);
	else
		n = snprintf(buf, len, "%s/%s/vm-%u", h->v2_track, h->parent,
		    slot);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int
cg_own_from(FILE *self, char *buf, size_t len)
{
	char line[PATH_MAX + 64];
	size_t n;

	while (fgets(line, sizeof(line), self) != NULL)
		if (strncmp(line, "0::", 3) == 0) {
			n = strcspn(line + 3, "\n");
			if (n == 0 || n >= len || line[3] != '/')
				return -1;
			memcpy(buf, line + 3, n);
			buf[n] = '\0';
			return 0;
		}
	return -1;
}

int
cg_delegate_from(struct cg_host *h, FILE *self, const char *holder,
    char *err, size_t errlen)
{
	char own[PATH_MAX], base[sizeof(h->v2_base)];
	unsigned m;
	int len;

	/* v1 under a hybrid systemd: the holder's cgroup in the unified
	 * tree, where systemd tracks units. */
	if (h->layout == CG_LAYOUT_V1 && h->v2[0] != '\0' &&
	    !holder_is_self(holder))
		return holder_base(h, holder, h->v2_track,
		    sizeof(h->v2_track), err, errlen);
	if (h->layout != CG_LAYOUT_V2)
		return 0;
	if (!holder_is_self(holder)) {
		if (holder_base(h, holder, base, sizeof(base), err,
		    errlen) == -1)
			return -1;
	} else {
		if (cg_own_from(self, own, sizeof(own)) == -1)
			return errf(err, errlen, "delegated cgroup: no cgroup2 "
			    "entry (0::) in /proc/self/cgroup, or one too long");
		if (strcmp(own, "/") == 0 || strstr(own, "/..") != NULL)
			return errf(err, errlen, "delegated cgroup: vmmd runs "
			    "in the root cgroup, which nothing delegated to it "
			    "(-D with cgroup_holder = self is for a unit with "
			    "Delegate=yes)");
		if (strcmp(h->parent, CG_DAEMON_LEAF) == 0)
			return errf(err, errlen, "cgroup_parent \"%s\" is the "
			    "name of vmmd's own leaf in its delegated cgroup",
			    h->parent);
		len = snprintf(base, sizeof(base), "%s%s", h->v2, own);
		if (len < 0 || (size_t)len >= sizeof(base))
			return errf(err, errlen, "delegated cgroup path too "
			    "long");
	}
	if ((m = v2_ctrls_of(base)) != V2_ALL) {
		char missing[64];

		ctrl_names_in(V2_ALL, m, missing, sizeof(missing));
		return errf(err, errlen, "delegated cgroup %s lacks%s "
		    "(Delegate=yes hands them over)", base, missing);
	}
	memcpy(h->v2_base, base, sizeof(h->v2_base));
	h->v2_ctrls = m;
	h->delegated = 1;
	h->daemon_inside = holder_is_self(holder);
	return 0;
}

int
cg_delegate(struct cg_host *h, const char *holder, char *err, size_t errlen)
{
	FILE *f;
	int rc;

	if ((f = fopen("/proc/self/cgroup", "re")) == NULL)
		return errf(err, errlen, "/proc/self/cgroup: %s",
		    strerror(errno));
	rc = cg_delegate_from(h, f, holder, err, errlen);
	fclose(f);
	return rc;
}

int
cg_detect(struct cg_host *h, const char *parent, char *err, size_t errlen)
{
	FILE *f;
	int rc;

	if ((f = fopen("/proc/self/mounts", "re")) == NULL)
		return errf(err, errlen, "/proc/self/mounts: %s",
		    strerror(errno));
	rc = cg_detect_from(f, h, parent, err, errlen);
	fclose(f);
	return rc;
}

/* The hierarchies a VM cgroup has, as indexes into h->v1 (v2: one). */
static int
ctrl_count(const struct cg_host *h)
{
	return h->layout == CG_LAYOUT_V1 ? CG_NCTRL : 1;
}

/* Where hierarchy c's parent is made: a v1 mount, or v2's base. */
static const char *
mount_of(const struct cg_host *h, int c)
{
	return h->layout == CG_LAYOUT_V1 ? h->v1[c] : h->v2_base;
}

int
cg_path(const struct cg_host *h, unsigned slot, enum cg_ctrl c, char *buf,
    size_t len)
{
	int n;

	if (h->layout == CG_LAYOUT_NONE || (unsigned)c >= CG_NCTRL)
		return -1;
	n = snprintf(buf, len, "%s/%s/vm-%u", mount_of(h, c), h->parent, slot);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int
set_knob(const char *dir, const char *knob, const char *val, char *err,
    size_t errlen)
{
	char path[PATH_MAX + 64];

	int e;

	snprintf(path, sizeof(path), "%s/%s", dir, knob);
	if (write_file_str(path, val) == -1) {
		e = errno;
		errf(err, errlen, "%s: write \"%s\": %s", path, val,
		    strerror(e));
		errno = e;
		return -1;
	}
	return 0;
}

static int
mkdir_ok(const char *path, char *err, size_t errlen)
{
	if (mkdir(path, 0755) == -1 && errno != EEXIST)
		return errf(err, errlen, "mkdir %s: %s", path, strerror(errno));
	return 0;
}

/* v2: "+memory +cpu +pids", or the part of it v2_base has. */
static void
v2_enable_word(const struct cg_host *h, char *buf, size_t len)
{
	int c;

	buf[0] = '\0';
	for (c = CG_MEMORY; c <= CG_PIDS; c++)
		if (h->v2_ctrls & (1u << c))
			snprintf(buf + strlen(buf), len - strlen(buf), "%s+%s",
			    buf[0] != '\0' ? " " : "", ctrl_names[c]);
}

/* v2: the base and the parent must delegate the controllers down. */
static int
v2_enable(const struct cg_host *h, char *err, size_t errlen)
{
	char path[PATH_MAX + 64], word[64];

	v2_enable_word(h, word, sizeof(word));
	if (word[0] != '\0' && set_knob(h->v2_base, "cgroup.subtree_control",
	    word, err, errlen) == -1) {
		/* The kernel's "no internal processes" rule. */
		if (errno == EBUSY && h->delegated && !h->daemon_inside)
			return errf(err, errlen, "%s holds a process itself, so "
			    "it cannot hand controllers to the VMs: its unit's "
			    "process (vmhold) belongs in its leaf \"%s\"",
			    h->v2_base, CG_HOLDER_LEAF);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", h->v2_base, h->parent);
	if (mkdir_ok(path, err, errlen) == -1)
		return -1;
	if (word[0] == '\0')
		return 0;
	return set_knob(path, "cgroup.subtree_control", word, err, errlen);
}

/*
 * Delegated v2: vmmd leaves its own cgroup for a leaf inside it, so that
 * the cgroup may hand controllers to the VMs' parent beside that leaf.
 */
static int
v2_enter_leaf(const struct cg_host *h, char *err, size_t errlen)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", h->v2_base, CG_DAEMON_LEAF);
	if (mkdir_ok(path, err, errlen) == -1)
		return -1;
	return set_knob(path, "cgroup.procs", "0", err, errlen);
}

int
cg_prepare(const struct cg_host *h, char *err, size_t errlen)
{
	char path[PATH_MAX + 64];
	int c;

	if (h->layout == CG_LAYOUT_NONE)
		return errf(err, errlen, "no usable cgroup layout");
	if (h->layout == CG_LAYOUT_V2) {
		if (h->delegated && h->daemon_inside &&
		    v2_enter_leaf(h, err, errlen) == -1)
			return -1;
		return v2_enable(h, err, errlen);
	}
	for (c = 0; c < CG_NCTRL; c++) {
		snprintf(path, sizeof(path), "%s/%s", h->v1[c], h->parent);
		if (mkdir(path, 0755) == -1 && errno != EEXIST) {
			if (errno != EACCES && errno != EPERM)
				return errf(err, errlen, "mkdir %s: %s", path,
				    strerror(errno));
			return errf(err, errlen, "mkdir %s: %s: a v1 "
			    "hierarchy's root is writable only with "
			    "CAP_DAC_OVERRIDE, so `vmmd -P` makes the parent "
			    "with full privileges before vmmd starts (the "
			    "unit's ExecStartPre=+ runs it)", path,
			    strerror(errno));
		}
	}
	return 0;
}

int
cg_create(const struct cg_host *h, unsigned slot, const struct cg_limits *l,
    char *err, size_t errlen)
{
	char path[PATH_MAX + 64], val[64];
	uint64_t period;
	int c;

	if (h->layout == CG_LAYOUT_NONE)
		return errf(err, errlen, "no usable cgroup layout");
	period = l->cpu_period_us != 0 ? l->cpu_period_us : 100000;
	if (h->layout == CG_LAYOUT_V2) {
		if (v2_enable(h, err, errlen) == -1)
			return -1;
		cg_path(h, slot, 0, path, sizeof(path));
		if (mkdir_ok(path, err, errlen) == -1)
			return -1;
		if (l->memory_bytes != 0)
			snprintf(val, sizeof(val), "%" PRIu64, l->memory_bytes);
		else
			strcpy(val, "max");
		if ((h->v2_ctrls & (1u << CG_MEMORY)) &&
		    set_knob(path, "memory.max", val, err, errlen) == -1)
			return -1;
		if (l->cpu_quota_us != 0)
			snprintf(val, sizeof(val), "%" PRIu64 " %" PRIu64,
			    l->cpu_quota_us, period);
		else
			snprintf(val, sizeof(val), "max %" PRIu64, period);
		if ((h->v2_ctrls & (1u << CG_CPU)) &&
		    set_knob(path, "cpu.max", val, err, errlen) == -1)
			return -1;
		if (l->pids_max != 0)
			snprintf(val, sizeof(val), "%" PRIu64, l->pids_max);
		else
			strcpy(val, "max");
		if ((h->v2_ctrls & (1u << CG_PIDS)) &&
		    set_knob(path, "pids.max", val, err, errlen) == -1)
			return -1;
		return 0;
	}
	for (c = 0; c < CG_NCTRL; c++) {
		snprintf(path, sizeof(path), "%s/%s", h->v1[c], h->parent);
		if (mkdir_ok(path, err, errlen) == -1)
			return -1;
		cg_path(h, slot, c, path, sizeof(path));
		if (mkdir_ok(path, err, errlen) == -1)
			return -1;
		switch (c) {
		case CG_MEMORY:
			if (l->memory_bytes != 0)
				snprintf(val, sizeof(val), "%" PRIu64,
				    l->memory_bytes);
			else
				strcpy(val, "-1");
			if (set_knob(path, "memory.limit_in_bytes", val, err,
			    errlen) == -1)
				return -1;
			break;
		case CG_CPU:
			snprintf(val, sizeof(val), "%" PRIu64, period);
			if (set_knob(path, "cpu.cfs_period_us", val, err,
			    errlen) == -1)
				return -1;
			if (l->cpu_quota_us != 0)
				snprintf(val, sizeof(val), "%" PRIu64,
				    l->cpu_quota_us);
			else
				strcpy(val, "-1");
			if (set_knob(path, "cpu.cfs_quota_us", val, err,
			    errlen) == -1)
				return -1;
			break;
		case CG_PIDS:
			if (l->pids_max != 0)
				snprintf(val, sizeof(val), "%" PRIu64,
				    l->pids_max);
			else
				strcpy(val, "max");
			if (set_knob(path, "pids.max", val, err, errlen) == -1)
				return -1;
			break;
		default:
			break;
		}
	}
	if (h->v2_track[0] != '\0') {
		if (track_path(h, ~0u, path, sizeof(path)) == -1 ||
		    mkdir_ok(path, err, errlen) == -1)
			return -1;
		if (track_path(h, slot, path, sizeof(path)) == -1 ||
		    mkdir_ok(path, err, errlen) == -1)
			return -1;
	}
	return 0;
}

int
cg_attach_prepare(const struct cg_host *h, unsigned slot, struct cg_attach *a)
{
	char path[PATH_MAX];
	int c, n;

	memset(a, 0, sizeof(*a));
	for (c = 0; c < ctrl_count(h); c++) {
		if (cg_path(h, slot, c, path, sizeof(path)) == -1)
			return -1;
		n = snprintf(a->procs[c], sizeof(a->procs[c]),
		    "%s/cgroup.procs", path);
		if (n < 0 || (size_t)n >= sizeof(a->procs[c]))
			return -1;
		a->n++;
	}
	if (a->n > 0 && h->v2_track[0] != '\0') {
		if (track_path(h, slot, path, sizeof(path)) == -1)
			return -1;
		n = snprintf(a->procs[a->n], sizeof(a->procs[a->n]),
		    "%s/cgroup.procs", path);
		if (n < 0 || (size_t)n >= sizeof(a->procs[a->n]))
			return -1;
		a->n++;
	}
	return a->n > 0 ? 0 : -1;
}

int
cg_attach_apply(const struct cg_attach *a)
{
	unsigned i;
	int fd;

	for (i = 0; i < a->n; i++) {
		/* "0" is the writer itself, so nothing needs formatting. */
		if ((fd = open(a->procs[i], O_WRONLY | O_CLOEXEC)) == -1)
			return -1;
		if (write(fd, "0", 1) != 1) {
			close(fd);
			return -1;
		}
		close(fd);
	}
	return 0;
}

int
cg_attach_pid(const struct cg_host *h, unsigned slot, pid_t pid, char *err,
    size_t errlen)
{
	char path[PATH_MAX], val[32];
	int c;

	snprintf(val, sizeof(val), "%ld", (long)pid);
	for (c = 0; c < ctrl_count(h); c++) {
		if (cg_path(h, slot, c, path, sizeof(path)) == -1)
			return errf(err, errlen, "cgroup path too long");
		if (set_knob(path, "cgroup.procs", val, err, errlen) == -1)
			return -1;
	}
	if (h->v2_track[0] != '\0') {
		if (track_path(h, slot, path, sizeof(path)) == -1)
			return errf(err, errlen, "cgroup path too long");
		if (set_knob(path, "cgroup.procs", val, err, errlen) == -1)
			return -1;
	}
	return 0;
}

/* The hierarchy whose cgroup.procs we read and kill from. */
static enum cg_ctrl
kill_ctrl(const struct cg_host *h)
{
	return h->layout == CG_LAYOUT_V1 ? CG_FREEZER : 0;
}

ssize_t
cg_procs(const struct cg_host *h, unsigned slot, pid_t *pids, size_t max)
{
	char path[PATH_MAX + 32], dir[PATH_MAX];
	FILE *f;
	long v;
	ssize_t n = 0;

	if (cg_path(h, slot, kill_ctrl(h), dir, sizeof(dir)) == -1)
		return -1;
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if ((f = fopen(path, "re")) == NULL)
		return errno == ENOENT ? 0 : -1;
	while (fscanf(f, "%ld", &v) == 1) {
		if ((size_t)n < max)
			pids[n] = (pid_t)v;
		n++;
	}
	fclose(f);
	return n;
}

/* v1: FROZEN is reached asynchronously; poll until the state says so. */
static int
v1_freeze(const char *dir, const char *state, char *err, size_t errlen)
{
	char path[PATH_MAX + 32], cur[64];
	long deadline = now_ms() + FREEZE_TIMEOUT_MS;

	if (set_knob(dir, "freezer.state", state, err, errlen) == -1)
		return -1;
	snprintf(path, sizeof(path), "%s/freezer.state", dir);
	while (read_file_str(path, cur, sizeof(cur)) > 0 &&
	    strncmp(cur, state, strlen(state)) != 0) {
		if (now_ms() > deadline)
			return errf(err, errlen, "%s: still %s after %d ms",
			    path, cur, FREEZE_TIMEOUT_MS);
		sleep_ms(2);
	}
	return 0;
}

int
cg_kill(const struct cg_host *h, unsigned slot, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	pid_t pids[256];
	ssize_t n, i;
	long deadline = now_ms() + KILL_TIMEOUT_MS;
	int v2kill = 0;

	if (cg_path(h, slot, kill_ctrl(h), dir, sizeof(dir)) == -1)
		return errf(err, errlen, "cgroup path too long");
	if (access(dir, F_OK) == -1)
		return 0;
	if (h->layout == CG_LAYOUT_V2) {
		/* cgroup.kill (5.14+) kills racing forks too. */
		if (set_knob(dir, "cgroup.kill", "1", NULL, 0) == 0)
			v2kill = 1;
	}
	for (;;) {
		if ((n = cg_procs(h, slot, pids, sizeof(pids) /
		    sizeof(pids[0]))) == -1)
			return errf(err, errlen, "%s/cgroup.procs: %s", dir,
			    strerror(errno));
		if (n == 0)
			return 0;
		if (now_ms() > deadline)
			return errf(err, errlen, "%s: %zd processes still there "
			    "after %d ms", dir, n, KILL_TIMEOUT_MS);
		if (v2kill) {
			sleep_ms(5);
			continue;
		}
		/*
		 * Without cgroup.kill a process could fork between our read
		 * and our kill; frozen, it cannot.  A frozen task dies only
		 * once thawed, hence the thaw before the next look.
		 */
		if (h->layout == CG_LAYOUT_V1 &&
		    v1_freeze(dir, "FROZEN", err, errlen) == -1)
			return -1;
		if (h->layout == CG_LAYOUT_V2)
			set_knob(dir, "cgroup.freeze", "1", NULL, 0);
		n = cg_procs(h, slot, pids, sizeof(pids) / sizeof(pids[0]));
		for (i = 0; i < n && (size_t)i < sizeof(pids) / sizeof(pids[0]);
		    i++)
			kill(pids[i], SIGKILL);
		if (h->layout == CG_LAYOUT_V1 &&
		    v1_freeze(dir, "THAWED", err, errlen) == -1)
			return -1;
		if (h->layout == CG_LAYOUT_V2)
			set_knob(dir, "cgroup.freeze", "0", NULL, 0);
		sleep_ms(2);
	}
}

int
cg_remove(const struct cg_host *h, unsigned slot, char *err, size_t errlen)
{
	char path[PATH_MAX];
	long deadline = now_ms() + KILL_TIMEOUT_MS;
	int c;

	for (c = 0; c <= ctrl_count(h); c++) {
		if (c == ctrl_count(h)) {
			/* Last, the unified tree's, once the v1 ones emptied. */
			if (h->v2_track[0] == '\0')
				break;
			if (track_path(h, slot, path, sizeof(path)) == -1)
				return errf(err, errlen, "cgroup path too long");
		} else if (cg_path(h, slot, c, path, sizeof(path)) == -1)
			return errf(err, errlen, "cgroup path too long");
		/* EBUSY while the last killed tasks are still leaving. */
		while (rmdir(path) == -1) {
			if (errno == ENOENT)
				break;
			if (errno != EBUSY || now_ms() > deadline)
				return errf(err, errlen, "rmdir %s: %s", path,
				    strerror(errno));
			sleep_ms(5);
		}
	}
	return 0;
}

void
cg_remove_parent(const struct cg_host *h)
{
	char path[PATH_MAX + 64];
	int c;

	if (h->layout == CG_LAYOUT_NONE)
		return;
	for (c = 0; c < ctrl_count(h); c++) {
		snprintf(path, sizeof(path), "%s/%s", mount_of(h, c),
		    h->parent);
		rmdir(path);
	}
	if (h->v2_track[0] != '\0' && track_path(h, ~0u, path,
	    sizeof(path)) == 0)
		rmdir(path);
}

static int
cmp_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

ssize_t
cg_list(const struct cg_host *h, unsigned *slots, size_t max)
{
	char path[PATH_MAX + 64], *end;
	struct dirent *de;
	unsigned long v;
	DIR *d;
	size_t n = 0, i;
	int c;

	for (c = 0; c < ctrl_count(h); c++) {
		snprintf(path, sizeof(path), "%s/%s", mount_of(h, c),
		    h->parent);
		if ((d = opendir(path)) == NULL) {
			if (errno == ENOENT)
				continue;
			return -1;
		}
		while ((de = readdir(d)) != NULL) {
			if (strncmp(de->d_name, "vm-", 3) != 0 ||
			    !isdigit((unsigned char)de->d_name[3]))
				continue;
			errno = 0;
			v = strtoul(de->d_name + 3, &end, 10);
			if (*end != '\0' || errno != 0 || v > UINT32_MAX)
				continue;
			for (i = 0; i < n && i < max; i++)
				if (slots[i] == v)
					break;
			if (i < n && i < max)
				continue;
			if (n < max)
				slots[n] = (unsigned)v;
			n++;
		}
		closedir(d);
	}
	qsort(slots, n < max ? n : max, sizeof(*slots), cmp_uint);
	return (ssize_t)n;
}

struct cg_job {
	struct cg_host	 h;
	unsigned	 slot;
	int		 rc;
	char		 err[512];
	void		(*cb)(int, const char *, void *);
	void		*arg;
};

static void
cg_job_run(void *arg)
{
	struct cg_job *j = arg;

	j->err[0] = '\0';
	j->rc = cg_kill(&j->h, j->slot, j->err, sizeof(j->err));
	if (j->rc == 0)
		j->rc = cg_remove(&j->h, j->slot, j->err, sizeof(j->err));
}

static void
cg_job_done(void *arg)
{
	struct cg_job *j = arg;

	j->cb(j->rc, j->err, j->arg);
	free(j);
}

int
cg_destroy_async(struct worker_pool *wp, const struct cg_host *h,
    unsigned slot, void (*cb)(int, const char *, void *), void *arg)
{
	struct cg_job *j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		return -1;
	/* A copy: the worker must not share the caller's struct. */
	j->h = *h;
	j->slot = slot;
	j->cb = cb;
	j->arg = arg;
	if (worker_submit(wp, cg_job_run, cg_job_done, j) == -1) {
		free(j);
		return -1;
	}
	return 0;
}
