/*
 * Preflight checks for vmmd and `vmctl preflight` (see preflight.h).
 * Runs in vmmd's worker threads; nothing here touches the event loop.
 */
#include <sys/wait.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "backend.h"
#include "cgroup.h"
#include "disk.h"
#include "preflight.h"
#include "spawn.h"
#include "util.h"

#define QEMU_MIN_MAJOR	7
#define QEMU_MIN_MINOR	2
#define VERSION_OUT_MAX	4096

static void	result(struct pf_result *, const char *, int, const char *, ...)
		    __attribute__((format(printf, 4, 5)));

static void
result(struct pf_result *r, const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	snprintf(r->name, sizeof(r->name), "%s", name);
	r->ok = ok;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

void
pf_check_accel(struct pf_result *r)
{
	char why[256];
	gid_t gid;

	/* TCG is slower, not wrong: this check reports, it does not fail. */
	if (qemu_kvm_usable(&gid, why, sizeof(why)))
		result(r, "accel", 1, "kvm: /dev/kvm is usable by the VM uids");
	else
		result(r, "accel", 1, "tcg (software emulation, slower): %s",
		    why);
}

int
pf_parse_qemu_version(const char *out, int *major, int *minor, int *micro)
{
	const char *p;
	char *end;
	long v[3] = { 0, 0, 0 };
	int i;

	if ((p = strstr(out, "version ")) == NULL)
		return -1;
	p += strlen("version ");
	for (i = 0; i < 3; i++) {
		if (!isdigit((unsigned char)*p))
			return i >= 2 ? 0 : -1;
		errno = 0;
		v[i] = strtol(p, &end, 10);
		if (errno != 0 || v[i] > 10000)
			return -1;
		*major = (int)v[0];
		*minor = (int)v[1];
		*micro = (int)v[2];
		p = end;
		if (*p != '.')
			return i >= 1 ? 0 : -1;
		p++;
	}
	return 0;
}

/* Runs binary --version without a shell; out gets its stdout. */
static int
run_version(const char *binary, char *out, size_t outlen, char *err,
    size_t errlen)
{
	int p[2], st, devnull;
	size_t off = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) == -1)
		return errf(err, errlen, "pipe: %s", strerror(errno));
	if (spawn_pid() != -1) {
		/* In vmmd, which may not exec: its spawner runs it as nobody. */
		char *argv[] = { (char *)binary, "--version", NULL };
		struct spawn_fd out1 = { p[1], 1 };
		struct spawn_req sr = { .kind = SPAWN_VERSION,
		    .kvm_gid = (gid_t)-1, .argv = argv, .fds = &out1,
		    .nfds = 1 };

		pid = spawn_run(&sr, err, errlen);
		close(p[1]);
		p[1] = -1;
		if (pid == -1) {
			close(p[0]);
			return -1;
		}
	} else if ((pid = fork()) == -1) {
		close(p[0]);
		close(p[1]);
		return errf(err, errlen, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		char *argv[] = { (char *)binary, "--version", NULL };
		char *envp[] = { "LC_ALL=C", NULL };

		devnull = open("/dev/null", O_RDWR);
		dup2(devnull, 0);
		dup2(p[1], 1);
		dup2(devnull, 2);
		execve(binary, argv, envp);
		_exit(127);
	}
	if (p[1] != -1)
		close(p[1]);
	while (off < outlen - 1) {
		n = read(p[0], out + off, outlen - 1 - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	out[off] = '\0';
	close(p[0]);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return errf(err, errlen, "%s --version failed (%s %d)", binary,
		    WIFEXITED(st) ? "status" : "signal",
		    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return 0;
}

void
pf_check_qemu(const char *binary, struct pf_result *r)
{
	char out[VERSION_OUT_MAX], err[256];
	int maj, min, mic;

	if (binary == NULL || access(binary, X_OK) == -1) {
		result(r, "qemu", 0, "%s: %s (install qemu-system-x86)",
		    binary ? binary : "QEMU binary",
		    binary ? strerror(errno) : "not configured");
		return;
	}
	if (run_version(binary, out, sizeof(out), err, sizeof(err)) == -1) {
		result(r, "qemu", 0, "%s", err);
		return;
	}
	if (pf_parse_qemu_version(out, &maj, &min, &mic) == -1) {
		result(r, "qemu", 0, "%s: cannot read a version from its "
		    "--version output", binary);
		return;
	}
	if (maj < QEMU_MIN_MAJOR || (maj == QEMU_MIN_MAJOR &&
	    min < QEMU_MIN_MINOR)) {
		result(r, "qemu", 0, "%s is QEMU %d.%d.%d; %d.%d or later is "
		    "needed", binary, maj, min, mic, QEMU_MIN_MAJOR,
		    QEMU_MIN_MINOR);
		return;
	}
	result(r, "qemu", 1, "%s is QEMU %d.%d.%d", binary, maj, min, mic);
}

void
pf_check_cgroups(const char *parent, struct pf_result *r)
{
	struct cg_host h;
	char err[PF_MSG_MAX - 16];

	if (cg_detect(&h, parent ? parent : "mcpvm", err, sizeof(err)) == -1) {
		result(r, "cgroups", 0, "%s", err);
		return;
	}
	if (h.layout == CG_LAYOUT_V2)
		result(r, "cgroups", 1, "v2 at %s with memory, cpu and pids",
		    h.v2);
	else
		result(r, "cgroups", 1, "v1: memory at %s, cpu at %s, pids at "
		    "%s, freezer at %s", h.v1[CG_MEMORY], h.v1[CG_CPU],
		    h.v1[CG_PIDS], h.v1[CG_FREEZER]);
}

void
pf_check_reflink(const char *state_dir, struct pf_result *r)
{
	char err[PF_MSG_MAX - 16];

	if (disk_reflink_probe(state_dir, "state_dir", err, sizeof(err)) == -1)
		result(r, "reflink", 0, "%s", err);
	else
		result(r, "reflink", 1, "state_dir %s is on %s with reflinks",
		    state_dir, disk_fs_name(state_dir));
}

void
pf_check_space(const char *state_dir, uint64_t min_free, struct pf_result *r)
{
	char err[PF_MSG_MAX - 16];
	uint64_t avail, total;

	if (disk_space(state_dir, &avail, &total, err, sizeof(err)) == -1) {
		result(r, "space", 0, "%s", err);
		return;
	}
	if (avail < min_free)
		result(r, "space", 0, "state_dir %s has %" PRIu64 " MiB free, "
		    "less than the %" PRIu64 " MiB needed", state_dir,
		    avail >> 20, min_free >> 20);
	else
		result(r, "space", 1, "state_dir %s has %" PRIu64 " of %"
		    PRIu64 " MiB free", state_dir, avail >> 20, total >> 20);
}

void
pf_check_uids(const char *passwd, uid_t base, unsigned count,
    struct pf_result *r)
{
	char line[1024], *name, *f, *end, *save;
	unsigned long uid;
	uint64_t last = (uint64_t)base + count - 1;
	FILE *fp;
	int i;

	if (passwd == NULL)
		passwd = "/etc/passwd";
	if (count == 0 || base == 0 || last >= UINT32_MAX) {
		result(r, "uids", 0, "uid range %u+%u is not valid: it must "
		    "not include root or wrap", (unsigned)base, count);
		return;
	}
	if ((fp = fopen(passwd, "re")) == NULL) {
		result(r, "uids", 0, "%s: %s", passwd, strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), fp) != NULL) {
		/* name:password:uid:...; fields may be empty, so no strtok. */
		name = line;
		f = strchr(line, ':');
		for (i = 0; i < 1 && f != NULL; i++)
			f = strchr(f + 1, ':');
		if (f == NULL)
			continue;
		*strchr(line, ':') = '\0';
		f++;
		if ((save = strchr(f, ':')) != NULL)
			*save = '\0';
		errno = 0;
		uid = strtoul(f, &end, 10);
		if (errno != 0 || *end != '\0' || end == f || *f == '-')
			continue;
		if (uid >= base && uid <= last) {
			result(r, "uids", 0, "uid %lu (%s) in %s is inside the "
			    "range reserved for VMs, %u-%" PRIu64 ": choose "
			    "another uid_base", uid, name, passwd,
			    (unsigned)base, last);
			fclose(fp);
			return;
		}
	}
	fclose(fp);
	result(r, "uids", 1, "uids %u-%" PRIu64 " are unused in %s",
	    (unsigned)base, last, passwd);
}

int
pf_sha256_file(const char *path, char hex[65], char *err, size_t errlen)
{
	unsigned char md[EVP_MAX_MD_SIZE], *buf = NULL;
	unsigned int mdlen = 0, i;
	EVP_MD_CTX *ctx = NULL;
	ssize_t n;
	int fd, rc = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	if ((buf = malloc(1 << 20)) == NULL || (ctx = EVP_MD_CTX_new()) ==
	    NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		errf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (;;) {
		n = read(fd, buf, 1 << 20);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			errf(err, errlen, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1) {
			errf(err, errlen, "%s: digest failed", path);
			goto out;
		}
	}
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32) {
		errf(err, errlen, "%s: digest failed", path);
		goto out;
	}
	for (i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	free(buf);
	close(fd);
	return rc;
}

void
pf_check_digest(const struct pf_file *f, struct pf_result *r)
{
	char hex[65], err[PF_MSG_MAX - 64];
	size_t i;

	if (f->sha256 == NULL || strlen(f->sha256) != 64) {
		result(r, "digest", 0, "%s: the configured sha256 must be 64 hex "
		    "digits", f->label);
		return;
	}
	for (i = 0; i < 64; i++)
		if (!isxdigit((unsigned char)f->sha256[i])) {
			result(r, "digest", 0, "%s: the configured sha256 must "
			    "be 64 hex digits", f->label);
			return;
		}
	if (pf_sha256_file(f->path, hex, err, sizeof(err)) == -1) {
		result(r, "digest", 0, "%s: %s", f->label, err);
		return;
	}
	if (strcasecmp(hex, f->sha256) != 0) {
		result(r, "digest", 0, "%s: %s has sha256 %s, the configuration "
		    "pins %.64s: the file changed or the pin is wrong",
		    f->label, f->path, hex, f->sha256);
		return;
	}
	result(r, "digest", 1, "%s: %s matches its sha256", f->label, f->path);
}

int
preflight_run(const struct pf_conf *c, struct pf_report *rep)
{
	size_t n = 6 + c->nfiles, i, k = 0;

	memset(rep, 0, sizeof(*rep));
	if ((rep->r = calloc(n, sizeof(*rep->r))) == NULL)
		return -1;
	pf_check_accel(&rep->r[k++]);
	pf_check_qemu(c->qemu_binary, &rep->r[k++]);
	pf_check_cgroups(c->cgroup_parent, &rep->r[k++]);
	pf_check_reflink(c->state_dir, &rep->r[k++]);
	pf_check_space(c->state_dir, c->min_free_bytes, &rep->r[k++]);
	pf_check_uids(c->passwd, c->uid_base, c->uid_count, &rep->r[k++]);
	for (i = 0; i < c->nfiles; i++)
		pf_check_digest(&c->files[i], &rep->r[k++]);
	rep->n = k;
	for (i = 0; i < k; i++)
		if (!rep->r[i].ok)
			rep->failed++;
	return (int)rep->failed;
}

void
preflight_free(struct pf_report *rep)
{
	free(rep->r);
	memset(rep, 0, sizeof(*rep));
}
