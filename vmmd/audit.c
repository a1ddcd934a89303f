/*
 * vmmd's hash-chained audit log; see audit.h.  A line is the JSON text of
 * its fields in a fixed order, then ,"hash":"<sha256 of that text + "}">"
 * closing it, so that a verifier can recompute the hash from the bytes as
 * written without re-serialising anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/evp.h>

#include "audit.h"
#include "log.h"
#include "store.h"

#define AUDIT_LINE_MAX	4096
/* Lines that wait for audit_flush beyond this are flushed at once. */
#define AUDIT_PENDING_MAX	(256 * 1024)

struct audit {
	int		 fd;
	struct store	*store;
	long long	 seq;		/* the chain, with the pending lines */
	char		 hash[AUDIT_HASH_HEX + 1];
	long long	 flushed_seq;	/* as written and anchored */
	char		 flushed_hash[AUDIT_HASH_HEX + 1];
	char		*pend;		/* lines not written yet */
	size_t		 plen, pcap;
	void		(*kick)(void *);
	void		*kick_arg;
};

static const char zero_hash[AUDIT_HASH_HEX + 1] =
    "0000000000000000000000000000000000000000000000000000000000000000";
static const char hash_key[] = ",\"hash\":\"";

static void
sha256_hex(const char *data, size_t len, char out[AUDIT_HASH_HEX + 1])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
	for (unsigned int i = 0; i < 32; i++)
		snprintf(out + i * 2, 3, "%02x", md[i]);
}

/*
 * Checks one line (without its newline) against the chain so far.
 * On success stores its seq and hash in *seq and hash.
 */
static int
audit_check_line(const char *line, size_t len, long long *seq, char *hash,
    char *err, size_t errlen)
{
	char content[AUDIT_LINE_MAX], want[AUDIT_HASH_HEX + 1];
	size_t tail = sizeof(hash_key) - 1 + AUDIT_HASH_HEX + 2;
	struct json_object *obj, *v;
	const char *given;
	int rc = -1;

	if (len < tail + 2 || len >= sizeof(content)) {
		snprintf(err, errlen, "malformed line");
		return -1;
	}
	if (memcmp(line + len - tail, hash_key, sizeof(hash_key) - 1) != 0 ||
	    memcmp(line + len - 2, "\"}", 2) != 0) {
		snprintf(err, errlen, "line does not end with its hash");
		return -1;
	}
	given = line + len - tail + sizeof(hash_key) - 1;
	memcpy(content, line, len - tail);
	content[len - tail] = '}';
	sha256_hex(content, len - tail + 1, want);
	if (memcmp(given, want, AUDIT_HASH_HEX) != 0) {
		snprintf(err, errlen, "hash does not match the line's "
		    "content (edited)");
		return -1;
	}
	content[len - tail + 1] = '\0';
	if ((obj = json_tokener_parse(content)) == NULL) {
		snprintf(err, errlen, "not JSON");
		return -1;
	}
	if (!json_object_object_get_ex(obj, "seq", &v) ||
	    !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) != *seq + 1) {
		snprintf(err, errlen, "sequence number is not %lld (line "
		    "removed or reordered)", *seq + 1);
		goto out;
	}
	if (!json_object_object_get_ex(obj, "prev", &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    strcmp(json_object_get_string(v), hash) != 0) {
		snprintf(err, errlen, "does not chain to the line before "
		    "(removed or reordered)");
		goto out;
	}
	*seq += 1;
	memcpy(hash, want, AUDIT_HASH_HEX + 1);
	rc = 0;
 out:
	json_object_put(obj);
	return rc;
}

int
audit_verify(const char *path, long long anchor_seq, const char *anchor_hash,
    long long *nlines, char *err, size_t errlen)
{
	char hash[AUDIT_HASH_HEX + 1], msg[256];
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long long seq = 0;
	FILE *f;
	int rc = -1;

	*nlines = 0;
	memcpy(hash, zero_hash, sizeof(hash));
	if ((f = fopen(path, "re")) == NULL) {
		if (errno == ENOENT && anchor_seq == 0)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &cap, f)) != -1) {
		if (len == 0 || line[len - 1] != '\n') {
			snprintf(err, errlen, "line %lld: not terminated "
			    "(torn write)", seq + 1);
			goto out;
		}
		line[--len] = '\0';
		if (audit_check_line(line, (size_t)len, &seq, hash, msg,
		    sizeof(msg)) == -1) {
			snprintf(err, errlen, "line %lld: %s", seq + 1, msg);
			goto out;
		}
	}
	if (anchor_seq != 0 && (seq != anchor_seq ||
	    strcmp(hash, anchor_hash) != 0)) {
		snprintf(err, errlen, "the log ends at line %lld but the "
		    "database recorded %lld lines (lines cut off the end)",
		    seq, anchor_seq);
		goto out;
	}
	*nlines = seq;
	rc = 0;
 out:
	free(line);
	fclose(f);
	return rc;
}

struct audit *
audit_open(const char *path, struct store *store, char *err, size_t errlen)
{
	struct audit *a;
	char anchor_hash[AUDIT_HASH_HEX + 1] = "", msg[512];
	long long anchor_seq = 0, n;

	if (store_audit_anchor_get(store, &anchor_seq, anchor_hash,
	    sizeof(anchor_hash), msg, sizeof(msg)) == -1) {
		snprintf(err, errlen, "%s: cannot read the audit anchor: %s",
		    path, msg);
		return NULL;
	}
	/* Never append to a chain that is already broken. */
	if (audit_verify(path, anchor_seq, anchor_hash, &n, msg,
	    sizeof(msg)) == -1) {
		snprintf(err, errlen, "%s: audit log does not verify: %s",
		    path, msg);
		return NULL;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	a->store = store;
	a->seq = n;
	if (n == 0)
		memcpy(a->hash, zero_hash, sizeof(a->hash));
	else
		memcpy(a->hash, anchor_hash, sizeof(a->hash));
	a->flushed_seq = a->seq;
	memcpy(a->flushed_hash, a->hash, sizeof(a->hash));
	if ((a->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		free(a);
		return NULL;
	}
	return a;
}

void
audit_close(struct audit *a)
{
	if (a == NULL)
		return;
	audit_flush(a);
	close(a->fd);
	free(a->pend);
	free(a);
}

void
audit_set_kick(struct audit *a, void (*kick)(void *), void *arg)
{
	a->kick = kick;
	a->kick_arg = arg;
}

int
audit_flush(struct audit *a)
{
	char err[256];
	ssize_t w;
	size_t off = 0;

	if (a == NULL || a->plen == 0)
		return 0;
	while (off < a->plen) {
		if ((w = write(a->fd, a->pend + off, a->plen - off)) <= 0) {
			if (w == -1 && errno == EINTR)
				continue;
			break;
		}
		off += (size_t)w;
	}
	if (off < a->plen || fdatasync(a->fd) == -1) {
		log_warn("audit: write of %lld lines", a->seq - a->flushed_seq);
		a->seq = a->flushed_seq;
		memcpy(a->hash, a->flushed_hash, sizeof(a->hash));
		a->plen = 0;
		return -1;
	}
	a->plen = 0;
	a->flushed_seq = a->seq;
	memcpy(a->flushed_hash, a->hash, sizeof(a->hash));
	if (store_audit_anchor_set(a->store, a->seq, a->hash, err,
	    sizeof(err)) == -1) {
		log_warnx("audit: anchor not updated: %s", err);
		return -1;
	}
	return 0;
}

int
audit_append(struct audit *a, const char *workspace, const char *tool,
    const char *vm_id, const char *outcome)
{
	struct json_object *o;
	char line[AUDIT_LINE_MAX], hash[AUDIT_HASH_HEX + 1], when[32];
	const char *js;
	struct timespec ts;
	struct tm tm;
	size_t len;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* json-c keeps insertion order, so the text is the same each time. */
	o = json_object_new_object();
	json_object_object_add(o, "seq", json_object_new_int64(a->seq + 1));
	json_object_object_add(o, "time", json_object_new_string(when));
	json_object_object_add(o, "workspace",
	    json_object_new_string(workspace != NULL ? workspace : ""));
	json_object_object_add(o, "tool", json_object_new_string(tool));
	json_object_object_add(o, "vm",
	    json_object_new_string(vm_id != NULL ? vm_id : ""));
	json_object_object_add(o, "outcome", json_object_new_string(outcome));
	json_object_object_add(o, "prev", json_object_new_string(a->hash));
	js = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	len = strlen(js);
	if (len + sizeof(hash_key) + AUDIT_HASH_HEX + 3 > sizeof(line)) {
		json_object_put(o);
		log_warnx("audit: entry too long, not written");
		return -1;
	}
	sha256_hex(js, len, hash);
	/* Replace the closing brace by the hash field. */
	n = snprintf(line, sizeof(line), "%.*s%s%s\"}\n", (int)(len - 1), js,
	    hash_key, hash);
	json_object_put(o);
	if (a->plen + (size_t)n > a->pcap) {
		size_t cap = a->pcap == 0 ? 8192 : a->pcap;
		char *p;

		while (cap < a->plen + (size_t)n)
			cap *= 2;
		if ((p = realloc(a->pend, cap)) == NULL) {
			log_warn("audit: pending lines");
			return -1;
		}
		a->pend = p;
		a->pcap = cap;
	}
	memcpy(a->pend + a->plen, line, (size_t)n);
	a->plen += (size_t)n;
	a->seq++;
	memcpy(a->hash, hash, sizeof(a->hash));
	if (a->plen >= AUDIT_PENDING_MAX)
		return audit_flush(a);
	if (a->kick != NULL)
		a->kick(a->kick_arg);
	return 0;
}
