/*
 * The approvers directory (/etc/mcpvm/approvers): the Ed25519 public keys
 * vmmd accepts approvals from, one NAME.pub each, and the list of revoked
 * fingerprints.  Read by vmmd and vmctl.  Whoever can write here can
 * approve anything, so the directory and every file must be root's alone;
 * each check is made on the opened descriptor.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "approval.h"
#include "errf.h"

int
approvers_name_ok(const char *name)
{
	size_t len = strnlen(name, APPROVERS_NAME_MAX + 1);

	if (len == 0 || len > APPROVERS_NAME_MAX || name[0] == '.' ||
	    name[0] == '-')
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		    (name[i] >= 'A' && name[i] <= 'Z') ||
		    (name[i] >= '0' && name[i] <= '9') ||
		    name[i] == '_' || name[i] == '.' || name[i] == '-'))
			return 0;
	return 1;
}

/* Root's alone: owned by uid 0, no write bit for group or other. */
static int
root_only(const struct stat *st, const char *path, char *err, size_t errlen)
{
	if (st->st_uid != 0)
		return errf(err, errlen, "%s: owned by uid %u, not root: "
		    "refused", path, (unsigned)st->st_uid);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return errf(err, errlen, "%s: writable by group or others "
		    "(mode %04o): refused", path,
		    (unsigned)(st->st_mode & 07777));
	return 0;
}

/* Read a whole small root-only file below dfd into buf: its length, or -1. */
static ssize_t
read_file(int dfd, const char *dir, const char *name, char *buf,
    size_t bufsz, char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct stat st;
	ssize_t n;
	size_t len = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) == -1) {
		if (errno == ELOOP)
			return errf(err, errlen, "%s: a symbolic link: "
			    "refused", path);
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	}
	if (fstat(fd, &st) == -1) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		errf(err, errlen, "%s: not a regular file: refused", path);
		goto fail;
	}
	if (root_only(&st, path, err, errlen) == -1)
		goto fail;
	if (st.st_size < 0 || (size_t)st.st_size >= bufsz) {
		errf(err, errlen, "%s: %lld bytes, more than %zu", path,
		    (long long)st.st_size, bufsz - 1);
		goto fail;
	}
	while (len < bufsz - 1) {
		n = read(fd, buf + len, bufsz - 1 - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			errf(err, errlen, "%s: %s", path, strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len == bufsz - 1) {
		errf(err, errlen, "%s: more than %zu bytes", path, bufsz - 1);
		goto fail;
	}
	buf[len] = '\0';
	close(fd);
	return (ssize_t)len;
 fail:
	close(fd);
	return -1;
}

static int
load_revoked(int dfd, const char *dir, struct approval_keyset *ks,
    char *err, size_t errlen)
{
	char *buf, *line, *save = NULL;
	size_t bufsz = (size_t)APPROVERS_REVOKED_MAX * (APPROVAL_HEX_LEN + 1) + 1;
	ssize_t len;
	int rc = -1;

	if (faccessat(dfd, APPROVERS_REVOKED_FILE, F_OK,
	    AT_SYMLINK_NOFOLLOW) == -1 && errno == ENOENT)
		return 0;
	if ((buf = malloc(bufsz)) == NULL)
		return errf(err, errlen, "out of memory");
	if ((len = read_file(dfd, dir, APPROVERS_REVOKED_FILE, buf, bufsz, err,
	    errlen)) == -1)
		goto out;
	if ((ks->revoked = calloc(APPROVERS_REVOKED_MAX,
	    sizeof(*ks->revoked))) == NULL) {
		errf(err, errlen, "out of memory");
		goto out;
	}
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (ks->nrevoked == APPROVERS_REVOKED_MAX) {
			errf(err, errlen, "%s/%s: more than %d lines", dir,
			    APPROVERS_REVOKED_FILE, APPROVERS_REVOKED_MAX);
			goto out;
		}
		if (approval_unhex(line, ks->revoked[ks->nrevoked]) == -1) {
			errf(err, errlen, "%s/%s: a line is not 64 lowercase "
			    "hex digits", dir, APPROVERS_REVOKED_FILE);
			goto out;
		}
		ks->nrevoked++;
	}
	rc = 0;
 out:
	free(buf);
	return rc;
}

int
approvers_load(const char *dir, struct approval_keyset *ks, char *err,
    size_t errlen)
{
	char name[APPROVERS_NAME_MAX + 1], buf[APPROVERS_KEY_FILE_MAX + 1];
	char perr[256];
	struct dirent *de;
	struct stat st;
	DIR *d = NULL;
	int dfd, rc = -1;

	memset(ks, 0, sizeof(*ks));
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return 0;	/* no approver: nothing is approved */
		if (errno == ELOOP || errno == ENOTDIR)
			return errf(err, errlen, "%s: not a directory (or a "
			    "symbolic link): refused", dir);
		return errf(err, errlen, "%s: %s", dir, strerror(errno));
	}
	if (fstat(dfd, &st) == -1) {
		errf(err, errlen, "%s: %s", dir, strerror(errno));
		close(dfd);
		return -1;
	}
	if (root_only(&st, dir, err, errlen) == -1) {
		close(dfd);
		return -1;
	}
	if (load_revoked(dfd, dir, ks, err, errlen) == -1)
		goto out;
	if ((ks->keys = calloc(APPROVERS_MAX_KEYS, sizeof(*ks->keys))) ==
	    NULL) {
		errf(err, errlen, "out of memory");
		goto out;
	}
	/* fdopendir owns a duplicate: the checked directory, not its path. */
	{
		int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);

		if (dup_fd == -1 || (d = fdopendir(dup_fd)) == NULL) {
			errf(err, errlen, "%s: %s", dir, strerror(errno));
			if (dup_fd != -1)
				close(dup_fd);
			goto out;
		}
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		struct approval_key *k;
		ssize_t n;

		/* Hidden names are vmctl's files being written. */
		if (de->d_name[0] == '.' || len < 5 ||
		    strcmp(de->d_name + len - 4, ".pub") != 0)
			continue;
		if (len - 4 > APPROVERS_NAME_MAX) {
			errf(err, errlen, "%s/%s: name longer than %d", dir,
			    de->d_name, APPROVERS_NAME_MAX);
			goto out;
		}
		memcpy(name, de->d_name, len - 4);
		name[len - 4] = '\0';
		if (!approvers_name_ok(name)) {
			errf(err, errlen, "%s/%s: not a valid approver name "
			    "([A-Za-z0-9_.-])", dir, de->d_name);
			goto out;
		}
		if (ks->nkeys == APPROVERS_MAX_KEYS) {
			errf(err, errlen, "%s: more than %d keys", dir,
			    APPROVERS_MAX_KEYS);
			goto out;
		}
		if ((n = read_file(dfd, dir, de->d_name, buf, sizeof(buf), err,
		    errlen)) == -1)
			goto out;
		k = &ks->keys[ks->nkeys];
		if ((k->pkey = approval_pubkey_from_pem(buf, (size_t)n, perr,
		    sizeof(perr))) == NULL) {
			errf(err, errlen, "%s/%s: %s", dir, de->d_name, perr);
			goto out;
		}
		if (approval_key_id(k->pkey, k->key_id) == -1) {
			EVP_PKEY_free(k->pkey);
			k->pkey = NULL;
			errf(err, errlen, "%s/%s: no key id", dir, de->d_name);
			goto out;
		}
		memcpy(k->name, name, strlen(name) + 1);
		ks->nkeys++;
		for (size_t i = 0; i + 1 < ks->nkeys; i++)
			if (memcmp(ks->keys[i].key_id, k->key_id,
			    APPROVAL_KEYID_LEN) == 0) {
				errf(err, errlen, "%s/%s: the same key as "
				    "%s.pub: refused", dir, de->d_name,
				    ks->keys[i].name);
				goto out;
			}
	}
	if (errno != 0) {
		errf(err, errlen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	rc = 0;
 out:
	if (d != NULL)
		closedir(d);
	close(dfd);
	explicit_bzero(buf, sizeof(buf));
	if (rc == -1)
		approval_keyset_free(ks);
	return rc;
}
