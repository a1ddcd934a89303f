/*
 * vmctl approver-key: an approver's own Ed25519 key (init, any user) and
 * root's enrolment and revocation of public keys in the approvers
 * directory (common/approvers.c reads it).  No socket: files only.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "approval.h"
#include "conf.h"
#include "vmctl_keys.h"

#define PASS_MIN	8
#define PASS_MAX	1024

int
vmctl_ask(int tty, const char *prompt, char *buf, size_t bufsz)
{
	struct termios old, noecho;
	size_t len = 0;
	int rc = -1;
	char c;

	if (tcgetattr(tty, &old) == -1)
		return -1;
	noecho = old;
	noecho.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
	noecho.c_lflag |= ICANON;
	if (tcsetattr(tty, TCSAFLUSH, &noecho) == -1)
		return -1;
	if (write(tty, prompt, strlen(prompt)) == -1)
		goto out;
	for (;;) {
		ssize_t n = read(tty, &c, 1);

		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0 || c == '\n' || c == '\r')
			break;
		if (len + 1 >= bufsz)
			goto out;
		buf[len++] = c;
	}
	buf[len] = '\0';
	rc = (int)len;
 out:
	(void)write(tty, "\n", 1);
	tcsetattr(tty, TCSAFLUSH, &old);
	return rc;
}

static int
read_passphrase(char *pass, size_t passsz)
{
	char again[PASS_MAX];
	int tty, len, rc = -1;

	if ((tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1) {
		fprintf(stderr, "vmctl: approver-key init: the passphrase is "
		    "read from a terminal: /dev/tty: %s\n", strerror(errno));
		return -1;
	}
	if ((len = vmctl_ask(tty, "New passphrase: ", pass, passsz)) == -1) {
		fprintf(stderr, "vmctl: approver-key init: cannot read the "
		    "passphrase (at most %zu characters)\n", passsz - 1);
		goto out;
	}
	if (len < PASS_MIN) {
		fprintf(stderr, "vmctl: approver-key init: a passphrase needs "
		    "at least %d characters\n", PASS_MIN);
		goto out;
	}
	if (vmctl_ask(tty, "Again: ", again, sizeof(again)) == -1 ||
	    strcmp(again, pass) != 0) {
		fprintf(stderr, "vmctl: approver-key init: the passphrases "
		    "differ\n");
		goto out;
	}
	rc = len;
 out:
	explicit_bzero(again, sizeof(again));
	close(tty);
	return rc;
}

static void
print_fingerprint(const char *what, EVP_PKEY *k)
{
	uint8_t id[APPROVAL_KEYID_LEN];
	char hex[APPROVAL_HEX_LEN + 1];

	if (approval_key_id(k, id) == -1)
		return;
	approval_hex(id, hex);
	printf("%s fingerprint SHA256:%s\n", what, hex);
}

/*
 * The default key path, ~/.config/mcpvm/approver.pem of the real uid;
 * with create, its directories are made (0700) as needed.
 */
int
vmctl_approver_key_path(char *path, size_t pathsz, int create)
{
	struct passwd *pw = getpwuid(getuid());
	char dir[PATH_MAX];

	if (pw == NULL || pw->pw_dir == NULL || pw->pw_dir[0] != '/') {
		fprintf(stderr, "vmctl: no home directory for uid %u; give "
		    "the key's path\n", (unsigned)getuid());
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s/.config", pw->pw_dir);
	if (create && mkdir(dir, 0700) == -1 && errno != EEXIST)
		goto fail;
	snprintf(dir, sizeof(dir), "%s/.config/mcpvm", pw->pw_dir);
	if (create && mkdir(dir, 0700) == -1 && errno != EEXIST)
		goto fail;
	if ((size_t)snprintf(path, pathsz, "%s/approver.pem", dir) >= pathsz) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	return 0;
 fail:
	fprintf(stderr, "vmctl: %s: %s\n", dir, strerror(errno));
	return -1;
}

static int
key_init(const char *out)
{
	char path[PATH_MAX], pass[PASS_MAX];
	EVP_PKEY *k = NULL;
	FILE *f = NULL;
	int fd = -1, len, rc = 1;

	if (out != NULL) {
		if (strlen(out) >= sizeof(path)) {
			fprintf(stderr, "vmctl: --out: path too long\n");
			return 2;
		}
		strcpy(path, out);
	} else if (vmctl_approver_key_path(path, sizeof(path), 1) == -1)
		return 1;
	/* Refuse early, before asking for a passphrase. */
	if (access(path, F_OK) == 0) {
		fprintf(stderr, "vmctl: approver-key init: %s exists; not "
		    "overwritten\n", path);
		return 1;
	}
	if ((len = read_passphrase(pass, sizeof(pass))) == -1)
		goto out;
	if ((k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519")) == NULL) {
		fprintf(stderr, "vmctl: approver-key init: key generation "
		    "failed\n");
		goto out;
	}
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) == -1 || (f = fdopen(fd, "w")) == NULL) {
		fprintf(stderr, "vmctl: approver-key init: %s: %s\n", path,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		goto out;
	}
	if (PEM_write_PKCS8PrivateKey(f, k, EVP_aes_256_cbc(), pass, len,
	    NULL, NULL) != 1 || fflush(f) != 0 || fsync(fd) == -1) {
		fprintf(stderr, "vmctl: approver-key init: %s: cannot write "
		    "the key\n", path);
		fclose(f);
		unlink(path);
		goto out;
	}
	if (fclose(f) != 0) {
		fprintf(stderr, "vmctl: approver-key init: %s: %s\n", path,
		    strerror(errno));
		unlink(path);
		goto out;
	}
	fprintf(stderr, "vmctl: wrote the encrypted private key to %s\n",
	    path);
	PEM_write_PUBKEY(stdout, k);
	print_fingerprint("#", k);
	rc = 0;
 out:
	explicit_bzero(pass, sizeof(pass));
	EVP_PKEY_free(k);
	return rc;
}

static const char *
approvers_dir(const char *conf_path, struct mcpvm_conf *conf)
{
	char err[1024];

	if (conf_load(conf_path, conf, err, sizeof(err)) == -1) {
		fprintf(stderr, "vmctl: %s\n", err);
		return NULL;
	}
	return conf->vmmd.approvers_dir;
}

/* Write data into dir (dfd) as name, atomically, root:root 0644. */
static int
write_atomic(int dfd, const char *dir, const char *name, const char *data,
    size_t len)
{
	char tmp[APPROVERS_NAME_MAX + 16];
	int fd;

	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	(void)unlinkat(dfd, tmp, 0);
	if ((fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0644)) == -1)
		goto fail;
	if (fchown(fd, 0, 0) == -1 || fchmod(fd, 0644) == -1 ||
	    write(fd, data, len) != (ssize_t)len || fsync(fd) == -1) {
		close(fd);
		unlinkat(dfd, tmp, 0);
		goto fail;
	}
	close(fd);
	if (renameat(dfd, tmp, dfd, name) == -1) {
		unlinkat(dfd, tmp, 0);
		goto fail;
	}
	return 0;
 fail:
	fprintf(stderr, "vmctl: %s/%s: %s\n", dir, name, strerror(errno));
	return -1;
}

static EVP_PKEY *
read_pubfile(const char *path)
{
	char buf[APPROVERS_KEY_FILE_MAX + 1], err[256];
	struct stat st;
	EVP_PKEY *k;
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1 ||
	    fstat(fd, &st) == -1) {
		fprintf(stderr, "vmctl: %s: %s\n", path, strerror(errno));
		if (fd != -1)
			close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > APPROVERS_KEY_FILE_MAX) {
		fprintf(stderr, "vmctl: %s: not a regular file of at most %d "
		    "bytes\n", path, APPROVERS_KEY_FILE_MAX);
		close(fd);
		return NULL;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || n > APPROVERS_KEY_FILE_MAX) {
		fprintf(stderr, "vmctl: %s: cannot read it whole\n", path);
		return NULL;
	}
	if ((k = approval_pubkey_from_pem(buf, (size_t)n, err,
	    sizeof(err))) == NULL)
		fprintf(stderr, "vmctl: %s: %s\n", path, err);
	return k;
}

static int
key_enroll(const char *conf_path, const char *name, const char *pubfile)
{
	struct approval_keyset ks = { 0 };
	struct mcpvm_conf conf = { 0 };
	uint8_t id[APPROVAL_KEYID_LEN];
	char hex[APPROVAL_HEX_LEN + 1], file[APPROVERS_NAME_MAX + 8];
	char err[1024], *pem = NULL;
	const char *dir;
	EVP_PKEY *k = NULL;
	BIO *bio = NULL;
	long pemlen;
	int dfd = -1, rc = 1;

	if (!approvers_name_ok(name)) {
		fprintf(stderr, "vmctl: approver name '%s': 1 to %d of "
		    "[A-Za-z0-9_.-], not starting with . or -\n", name,
		    APPROVERS_NAME_MAX);
		return 2;
	}
	if ((dir = approvers_dir(conf_path, &conf)) == NULL)
		goto out;
	if ((k = read_pubfile(pubfile)) == NULL ||
	    approval_key_id(k, id) == -1)
		goto out;
	approval_hex(id, hex);
	if (mkdir(dir, 0755) == -1 && errno != EEXIST) {
		fprintf(stderr, "vmctl: %s: %s\n", dir, strerror(errno));
		goto out;
	}
	/* Everything vmmd would refuse is refused here too. */
	if (approvers_load(dir, &ks, err, sizeof(err)) == -1) {
		fprintf(stderr, "vmctl: %s\n", err);
		goto out;
	}
	for (size_t i = 0; i < ks.nkeys; i++) {
		if (strcmp(ks.keys[i].name, name) == 0) {
			fprintf(stderr, "vmctl: approver %s is enrolled "
			    "already; revoke it first\n", name);
			goto out;
		}
		if (memcmp(ks.keys[i].key_id, id, sizeof(id)) == 0) {
			fprintf(stderr, "vmctl: that key is enrolled already, "
			    "as %s\n", ks.keys[i].name);
			goto out;
		}
	}
	for (size_t i = 0; i < ks.nrevoked; i++)
		if (memcmp(ks.revoked[i], id, sizeof(id)) == 0) {
			fprintf(stderr, "vmctl: key SHA256:%s was revoked; "
			    "make a new one\n", hex);
			goto out;
		}
	if ((bio = BIO_new(BIO_s_mem())) == NULL ||
	    PEM_write_bio_PUBKEY(bio, k) != 1 ||
	    (pemlen = BIO_get_mem_data(bio, &pem)) <= 0)
		goto out;
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1) {
		fprintf(stderr, "vmctl: %s: %s\n", dir, strerror(errno));
		goto out;
	}
	snprintf(file, sizeof(file), "%s.pub", name);
	if (write_atomic(dfd, dir, file, pem, (size_t)pemlen) == -1)
		goto out;
	fsync(dfd);
	printf("enrolled %s: fingerprint SHA256:%s\n", name, hex);
	rc = 0;
 out:
	if (dfd != -1)
		close(dfd);
	BIO_free(bio);
	EVP_PKEY_free(k);
	approval_keyset_free(&ks);
	conf_free(&conf);
	return rc;
}

static int
key_revoke(const char *conf_path, const char *name)
{
	struct approval_keyset ks = { 0 };
	struct mcpvm_conf conf = { 0 };
	const struct approval_key *key = NULL;
	char hex[APPROVAL_HEX_LEN + 1], file[APPROVERS_NAME_MAX + 8];
	char err[1024], *list = NULL;
	const char *dir;
	size_t off = 0;
	int dfd = -1, rc = 1;

	if (!approvers_name_ok(name)) {
		fprintf(stderr, "vmctl: approver name '%s' is not valid\n",
		    name);
		return 2;
	}
	if ((dir = approvers_dir(conf_path, &conf)) == NULL)
		goto out;
	if (approvers_load(dir, &ks, err, sizeof(err)) == -1) {
		fprintf(stderr, "vmctl: %s\n", err);
		goto out;
	}
	for (size_t i = 0; i < ks.nkeys && key == NULL; i++)
		if (strcmp(ks.keys[i].name, name) == 0)
			key = &ks.keys[i];
	if (key == NULL) {
		fprintf(stderr, "vmctl: no approver %s in %s\n", name, dir);
		goto out;
	}
	if (ks.nrevoked >= APPROVERS_REVOKED_MAX) {
		fprintf(stderr, "vmctl: %s/%s holds %d fingerprints already\n",
		    dir, APPROVERS_REVOKED_FILE, APPROVERS_REVOKED_MAX);
		goto out;
	}
	approval_hex(key->key_id, hex);
	/* The revoked list first: a key is never gone without its record. */
	if ((list = malloc((ks.nrevoked + 1) * (APPROVAL_HEX_LEN + 1) + 1)) ==
	    NULL)
		goto out;
	for (size_t i = 0; i < ks.nrevoked; i++) {
		approval_hex(ks.revoked[i], list + off);
		off += APPROVAL_HEX_LEN;
		list[off++] = '\n';
	}
	memcpy(list + off, hex, APPROVAL_HEX_LEN);
	off += APPROVAL_HEX_LEN;
	list[off++] = '\n';
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1) {
		fprintf(stderr, "vmctl: %s: %s\n", dir, strerror(errno));
		goto out;
	}
	if (write_atomic(dfd, dir, APPROVERS_REVOKED_FILE, list, off) == -1)
		goto out;
	snprintf(file, sizeof(file), "%s.pub", name);
	if (unlinkat(dfd, file, 0) == -1) {
		fprintf(stderr, "vmctl: %s/%s: %s\n", dir, file,
		    strerror(errno));
		goto out;
	}
	fsync(dfd);
	printf("revoked %s: fingerprint SHA256:%s\n", name, hex);
	rc = 0;
 out:
	if (dfd != -1)
		close(dfd);
	free(list);
	approval_keyset_free(&ks);
	conf_free(&conf);
	return rc;
}

int
vmctl_approver_key(int argc, char **argv, const char *out,
    const char *conf_path)
{
	if (argc == 2 && strcmp(argv[1], "init") == 0)
		return key_init(out);
	if (out != NULL)
		return -1;
	if ((argc == 4 && strcmp(argv[1], "enroll") == 0) ||
	    (argc == 3 && strcmp(argv[1], "revoke") == 0)) {
		if (geteuid() != 0) {
			fprintf(stderr, "vmctl: approver-key %s: root only\n",
			    argv[1]);
			return 1;
		}
		return argv[1][0] == 'e' ? key_enroll(conf_path, argv[2],
		    argv[3]) : key_revoke(conf_path, argv[2]);
	}
	return -1;
}
