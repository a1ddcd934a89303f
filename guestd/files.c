/*
 * guestd: file_read and file_write beneath the workspace.  Paths resolve
 * with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so neither "..", an
 * absolute path nor a symlink planted by a job can lead outside it; and
 * every operation runs with the workspace user's filesystem uid and gid, so
 * that what a job plants (a hard link to a root-only file, a directory
 * swapped between two calls) gets it nothing uid 1000 could not do itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "guestd.h"
#include "log.h"

#define RESOLVE_FLAGS	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | \
			    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int
openat2_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.mode = (flags & O_CREAT) ? mode : 0;
	how.resolve = RESOLVE_FLAGS;
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* Refuses what openat2 would refuse anyway, with a clearer message. */
static int
check_path(const char *path, int allow_empty, char *err, size_t errlen)
{
	const char *p = path;

	if (path[0] == '\0' && !allow_empty) {
		snprintf(err, errlen, "empty path");
		return -1;
	}
	if (path[0] == '/') {
		snprintf(err, errlen, "path \"%s\" must be relative to "
		    "/workspace", path);
		return -1;
	}
	while (*p != '\0') {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.') {
			snprintf(err, errlen, "path \"%s\": \"..\" is not "
			    "allowed", path);
			return -1;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	return 0;
}

/* Keeps errno: callers pick the error code from it afterwards. */
static void
resolve_error(const char *path, char *err, size_t errlen)
{
	int e = errno;

	if (errno == ELOOP)
		snprintf(err, errlen, "path \"%s\": symlinks are not "
		    "followed", path);
	else if (errno == EXDEV)
		snprintf(err, errlen, "path \"%s\" leads outside /workspace",
		    path);
	else
		snprintf(err, errlen, "path \"%s\": %s", path,
		    strerror(errno));
	errno = e;
}

static int
ws_root(char *err, size_t errlen)
{
	int fd;

	if ((fd = open(opts.workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) ==
	    -1)
		snprintf(err, errlen, "%s: %s", opts.workspace,
		    strerror(errno));
	return fd;
}

/* Escapes, and what the workspace user may not touch. */
static int
is_forbidden(void)
{
	return errno == ELOOP || errno == EXDEV || errno == EACCES ||
	    errno == EPERM;
}

/*
 * Takes the workspace user's filesystem credentials (and, once, drops
 * supplementary groups, which jobs do not have either): the kernel then
 * checks every open and creates everything as uid 1000, so nothing is
 * chowned by name afterwards.  *saved gets what fs_leave restores.
 */
struct fscred {
	uid_t	 uid;
	gid_t	 gid;
};

static int
fs_enter(struct fscred *saved, char *err, size_t errlen)
{
	if (getgroups(0, NULL) > 0 && setgroups(0, NULL) == -1) {
		snprintf(err, errlen, "setgroups: %s", strerror(errno));
		return -1;
	}
	saved->gid = (gid_t)setfsgid(opts.gid);
	saved->uid = (uid_t)setfsuid(opts.uid);
	/* setfsuid reports nothing; asking again says whether it held. */
	if ((uid_t)setfsuid((uid_t)-1) != opts.uid ||
	    (gid_t)setfsgid((gid_t)-1) != opts.gid) {
		setfsuid(saved->uid);
		setfsgid(saved->gid);
		snprintf(err, errlen, "cannot act as uid %u gid %u",
		    (unsigned)opts.uid, (unsigned)opts.gid);
		return -1;
	}
	return 0;
}

static void
fs_leave(const struct fscred *saved)
{
	setfsuid(saved->uid);
	setfsgid(saved->gid);
}

/*
 * Opens directory rel beneath the workspace ("" is the workspace itself);
 * with create, missing components are made, owned by the dev user because
 * files_write calls this with its filesystem credentials.
 */
int
ws_open_dir(const char *rel, int create, char *err, size_t errlen)
{
	char comp[NAME_MAX + 1];
	const char *p = rel;
	int fd, next;

	if (check_path(rel, 1, err, errlen) == -1)
		return -1;
	if ((fd = ws_root(err, errlen)) == -1)
		return -1;
	if (!create) {
		int e;

		if (rel[0] == '\0')
			return fd;
		next = openat2_beneath(fd, rel, O_RDONLY | O_DIRECTORY, 0);
		e = errno;
		if (next == -1)
			resolve_error(rel, err, errlen);
		close(fd);
		errno = e;
		return next;
	}
	while (*p != '\0') {
		size_t n = strcspn(p, "/");

		if (n > NAME_MAX) {
			snprintf(err, errlen, "path \"%s\": name too long",
			    rel);
			goto fail;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		p += n;
		while (*p == '/')
			p++;
		if (n == 0 || strcmp(comp, ".") == 0)
			continue;
		next = openat2_beneath(fd, comp, O_RDONLY | O_DIRECTORY, 0);
		if (next == -1 && errno == ENOENT) {
			/* No chown by name: whatever is there by then is
			 * opened as a directory, beneath, or refused. */
			if (mkdirat(fd, comp, 0755) == -1 && errno != EEXIST) {
				resolve_error(rel, err, errlen);
				goto fail;
			}
			next = openat2_beneath(fd, comp,
			    O_RDONLY | O_DIRECTORY, 0);
		}
		if (next == -1) {
			resolve_error(rel, err, errlen);
			goto fail;
		}
		close(fd);
		fd = next;
	}
	return fd;
fail:
	next = errno;
	close(fd);
	errno = next;
	return -1;
}

struct json_object *
files_read(const struct req *r, uint8_t **body, size_t *body_len)
{
	struct json_object *o = NULL;
	struct fscred cred;
	char err[512];
	struct stat st;
	uint8_t *buf = NULL;
	size_t got = 0;
	ssize_t n;
	int root = -1, fd = -1;

	if (check_path(r->path, 0, err, sizeof(err)) == -1)
		return reply_error(r->id, "forbidden_path", "%s", err);
	if (fs_enter(&cred, err, sizeof(err)) == -1)
		return reply_error(r->id, "internal", "%s", err);
	if ((root = ws_root(err, sizeof(err))) == -1) {
		fs_leave(&cred);
		return reply_error(r->id, "io_error", "%s", err);
	}
	/* O_NONBLOCK: a FIFO must not hang the open. */
	fd = openat2_beneath(root, r->path, O_RDONLY | O_NOFOLLOW |
	    O_NONBLOCK | O_NOCTTY, 0);
	if (fd == -1) {
		resolve_error(r->path, err, sizeof(err));
		o = reply_error(r->id, is_forbidden() ? "forbidden_path" :
		    errno == ENOENT ? "not_found" : "io_error", "%s", err);
		goto out;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		o = reply_error(r->id, "invalid_argument", "path \"%s\" is not "
		    "a regular file", r->path);
		goto out;
	}
	/* A second name for someone else's file: not the workspace's. */
	if (st.st_nlink > 1 && st.st_uid != opts.uid) {
		o = reply_error(r->id, "forbidden_path", "path \"%s\" is a "
		    "hard link to a file uid %u does not own", r->path,
		    (unsigned)opts.uid);
		goto out;
	}
	if (st.st_size > (off_t)GUEST_MAX_FILE) {
		o = reply_error(r->id, "too_large", "file \"%s\" has %lld "
		    "bytes; at most %u are read per call", r->path,
		    (long long)st.st_size, GUEST_MAX_FILE);
		goto out;
	}
	/* One byte more than the limit shows a file that grew meanwhile. */
	if ((buf = malloc(GUEST_MAX_FILE + 1)) == NULL) {
		o = reply_error(r->id, "internal", "out of memory");
		goto out;
	}
	while (got <= GUEST_MAX_FILE) {
		n = read(fd, buf + got, GUEST_MAX_FILE + 1 - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			o = reply_error(r->id, "io_error", "read \"%s\": %s",
			    r->path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > GUEST_MAX_FILE) {
		o = reply_error(r->id, "too_large", "file \"%s\" exceeds %u "
		    "bytes", r->path, GUEST_MAX_FILE);
		goto out;
	}
	o = reply_new(r->id);
	json_object_object_add(o, "size", json_object_new_int64((int64_t)got));
	json_object_object_add(o, "mode",
	    json_object_new_int(st.st_mode & 07777));
	*body = buf;
	*body_len = got;
	buf = NULL;
out:
	free(buf);
	if (fd != -1)
		close(fd);
	close(root);
	fs_leave(&cred);
	return o;
}

struct json_object *
files_write(const struct req *r)
{
	struct json_object *o = NULL;
	struct fscred cred;
	char err[512], *dir = NULL, tmp[NAME_MAX + 1];
	const char *name, *slash;
	struct stat st;
	mode_t mode = r->mode >= 0 ? (mode_t)r->mode : 0644;
	uint64_t rnd = 0;
	size_t off = 0;
	ssize_t n;
	int dfd = -1, fd = -1;

	if (check_path(r->path, 0, err, sizeof(err)) == -1)
		return reply_error(r->id, "forbidden_path", "%s", err);
	slash = strrchr(r->path, '/');
	name = slash != NULL ? slash + 1 : r->path;
	if (name[0] == '\0' || strcmp(name, ".") == 0 || strlen(name) >
	    NAME_MAX - 24)
		return reply_error(r->id, "invalid_argument", "path \"%s\" "
		    "does not name a file", r->path);
	if ((dir = strndup(r->path, slash != NULL ? (size_t)(slash - r->path) :
	    0)) == NULL)
		return reply_error(r->id, "internal", "out of memory");
	if (fs_enter(&cred, err, sizeof(err)) == -1) {
		free(dir);
		return reply_error(r->id, "internal", "%s", err);
	}
	if ((dfd = ws_open_dir(dir, r->create_parents, err, sizeof(err))) ==
	    -1) {
		o = reply_error(r->id, is_forbidden() ? "forbidden_path" :
		    errno == ENOENT ? "not_found" : "io_error", "%s", err);
		goto out;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode)) {
			o = reply_error(r->id, "forbidden_path", "path \"%s\" "
			    "is a symlink; symlinks are not followed",
			    r->path);
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			o = reply_error(r->id, "invalid_argument", "path \"%s\""
			    " exists and is not a regular file", r->path);
			goto out;
		}
		if (r->mode < 0)
			mode = st.st_mode & 0777;
	}
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint64_t)now_ns();
	snprintf(tmp, sizeof(tmp), ".%s.%016llx", name,
	    (unsigned long long)rnd);
	if ((fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) == -1) {
		o = reply_error(r->id, is_forbidden() ? "forbidden_path" :
		    "io_error", "create in \"%s\": %s", dir[0] != '\0' ? dir :
		    ".", strerror(errno));
		goto out;
	}
	while (off < r->body_len) {
		n = write(fd, r->body + off, r->body_len - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			break;
		off += (size_t)n;
	}
	/* Created as the user already; the group too, whatever the dir's. */
	if (off < r->body_len || fchown(fd, opts.uid, opts.gid) == -1 ||
	    fchmod(fd, mode) == -1 || fsync(fd) == -1 ||
	    renameat(dfd, tmp, dfd, name) == -1) {
		o = reply_error(r->id, "io_error", "write \"%s\": %s", r->path,
		    strerror(errno));
		unlinkat(dfd, tmp, 0);
		goto out;
	}
	o = reply_new(r->id);
	json_object_object_add(o, "size",
	    json_object_new_int64((int64_t)r->body_len));
out:
	if (fd != -1)
		close(fd);
	if (dfd != -1)
		close(dfd);
	fs_leave(&cred);
	free(dir);
	return o;
}
