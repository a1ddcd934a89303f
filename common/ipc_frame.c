/*
 * Internal IPC, the part free of I/O: the frame reader, the check of a
 * frame against its peer's policy (proto/ipcmsg.h's catalogue), HELLO, and
 * the encoder.  Every daemon and CLI runs it on each frame a peer sends;
 * the ipc fuzzer drives it directly.  See ipc.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc.h"
#include "ipc_priv.h"
#include "jsonx.h"
#include "utf8.h"

/* ---- frame reader ------------------------------------------------------ */

void
ipc_reader_init(struct ipc_reader *r)
{
	memset(r, 0, sizeof(*r));
	r->saved = -1;
	r->in_fd = -1;
}

void
ipc_reader_set_bulk(struct ipc_reader *r)
{
	r->bulk = 1;
}

/* Frames may carry credentials: nothing of them stays in freed memory. */
static void
wipe_free(uint8_t *buf, size_t len)
{
	if (buf != NULL)
		explicit_bzero(buf, len);
	free(buf);
}

void
ipc_reader_reset(struct ipc_reader *r)
{
	wipe_free(r->buf, r->cap);
	if (r->in_fd != -1)
		close(r->in_fd);
	for (size_t i = 0; i < r->nfds; i++)
		close(r->fds[i].fd);
	ipc_reader_init(r);
}

static uint32_t
get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Puts back the byte a handed-out payload's NUL covered. */
static void
restore_saved(struct ipc_reader *r)
{
	if (r->saved != -1) {
		r->buf[r->saved_at] = (uint8_t)r->saved;
		r->saved = -1;
	}
}

/* Bytes the frame at r->start needs in all, once its header is in. */
static size_t
frame_size(const struct ipc_reader *r)
{
	if (r->end - r->start < IPC_HDR_LEN)
		return IPC_HDR_LEN;
	return IPC_HDR_LEN + (size_t)get_u32(r->buf + r->start + 4);
}

/* How many bytes the next read may bring. */
static size_t
room(const struct ipc_reader *r)
{
	size_t upto;

	if (r->buf == NULL)
		return 0;
	upto = r->bulk ? r->cap - 1 : r->start + frame_size(r);
	if (upto > r->cap - 1)
		upto = r->cap - 1;
	return upto > r->end ? upto - r->end : 0;
}

void *
ipc_reader_space(struct ipc_reader *r, size_t *want)
{
	size_t keep = r->end - r->start, need;
	uint8_t *nb;

	restore_saved(r);
	/* Frames handed out are done with: wipe them, keep what follows. */
	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, keep);
		explicit_bzero(r->buf + keep, r->end - keep);
		/* A read begun in a frame handed out began before any left. */
		for (size_t i = 0; i < r->nfds; i++) {
			r->fds[i].from = r->fds[i].from > r->start ?
			    r->fds[i].from - r->start : 0;
			r->fds[i].to = r->fds[i].to > r->start ?
			    r->fds[i].to - r->start : 0;
		}
		r->start = 0;
		r->end = keep;
	}
	/*
	 * Room for the frame begun (its header says how big; the length is
	 * checked when the header is whole, so this is at most the limit)
	 * and its NUL; a bulk reader keeps IPC_READ_BUF at least.
	 */
	need = frame_size(r);
	if (need > IPC_HDR_LEN + IPC_MAX_PAYLOAD)
		need = IPC_HDR_LEN;
	need++;
	if (r->bulk && need < IPC_READ_BUF)
		need = IPC_READ_BUF;
	if (r->cap < need || (keep == 0 && r->cap > need &&
	    r->cap > IPC_READ_BUF)) {
		/* Grown for a big frame, or back to size once it is gone. */
		if ((nb = malloc(need)) == NULL)
			return NULL;
		if (keep > 0)
			memcpy(nb, r->buf, keep);
		wipe_free(r->buf, r->cap);
		r->buf = nb;
		r->cap = need;
	}
	*want = room(r);
	return r->buf + r->end;
}

int
ipc_reader_commit(struct ipc_reader *r, size_t n, struct ipc_frame *f,
    const char **err)
{
	if (n > room(r)) {
		*err = "reader given more than it asked for";
		return -1;
	}
	if (r->in_fd != -1) {
		if (n == 0 || r->nfds == sizeof(r->fds) / sizeof(r->fds[0])) {
			*err = "descriptor arrived that no frame can carry";
			return -1;
		}
		r->fds[r->nfds].fd = r->in_fd;
		r->fds[r->nfds].from = r->end;
		r->fds[r->nfds].to = r->end + n;
		r->nfds++;
		r->in_fd = -1;
	}
	r->end += n;
	return ipc_reader_next(r, f, err);
}

int
ipc_reader_next(struct ipc_reader *r, struct ipc_frame *f, const char **err)
{
	const uint8_t *h;
	size_t size;
	uint32_t len, flags;
	int fd = -1;

	restore_saved(r);
	if (r->end - r->start < IPC_HDR_LEN)
		return 0;
	h = r->buf + r->start;
	len = get_u32(h + 4);
	flags = get_u32(h + 12);
	if (len > IPC_MAX_PAYLOAD) {
		*err = "frame payload exceeds 1 MiB";
		return -1;
	}
	if (flags & ~IPC_FLAGS_KNOWN) {
		*err = "unknown frame flags";
		return -1;
	}
	size = IPC_HDR_LEN + (size_t)len;
	/* The descriptor of a read that ends within this frame is its own. */
	if (r->nfds > 0 && r->fds[0].to <= r->start) {
		*err = "descriptor arrived that no frame can carry";
		return -1;
	}
	if (r->nfds > 0 && r->fds[0].to - 1 < r->start + size) {
		if (r->fds[0].from > r->start) {
			*err = "descriptor arrived in the middle of a frame";
			return -1;
		}
	}
	if (r->end - r->start < size)
		return 0;
	if (r->nfds > 0 && r->fds[0].to - 1 < r->start + size) {
		fd = r->fds[0].fd;
		r->nfds--;
		memmove(&r->fds[0], &r->fds[1], r->nfds * sizeof(r->fds[0]));
	}
	/* The frame is complete: its descriptor must match its flag. */
	if ((flags & IPC_FLAG_FD) && fd == -1) {
		*err = "frame announces a descriptor that did not arrive";
		return -1;
	}
	if (!(flags & IPC_FLAG_FD) && fd != -1) {
		close(fd);
		*err = "descriptor arrived with a frame that announces none";
		return -1;
	}
	f->type = get_u32(h);
	f->id = get_u32(h + 8);
	f->flags = flags;
	f->payload = (const char *)h + IPC_HDR_LEN;
	f->len = len;
	f->fd = fd;		/* the caller's now */
	/* NUL-terminated for the caller: borrow the next byte meanwhile. */
	r->saved_at = r->start + size;
	r->saved = r->buf[r->saved_at];
	r->buf[r->saved_at] = '\0';
	r->start += size;
	return 1;
}

int
ipc_reader_add_fd(struct ipc_reader *r, int fd, const char **err)
{
	if (r->in_fd != -1) {
		close(fd);
		*err = "more than one descriptor for one frame";
		return -1;
	}
	r->in_fd = fd;
	return 0;
}

/*
 * One JSON object, parsed strictly (jsonx: RFC 8259 grammar, UTF-8, no NUL,
 * bounded depth, nothing after it), so that what json-c alone would let
 * through (NaN, single quotes, clamped integers) never reaches a handler.
 */
struct json_object *
ipc_parse_json(const char *buf, size_t len, char *err, size_t errlen)
{
	struct json_object *obj;
	struct jsonx_err jerr;

	if (len == 0) {
		snprintf(err, errlen, "empty payload");
		return NULL;
	}
	if ((obj = jsonx_parse_object(buf, len, IPC_JSON_DEPTH, &jerr)) ==
	    NULL && (size_t)snprintf(err, errlen, "%s", jerr.msg) >= errlen)
		err[errlen - 1] = '\0';	/* cut, but said */
	return obj;
}

int
ipc_frame_check(const struct ipc_frame *f, const struct ipc_policy *pol,
    struct json_object **body, struct jsonx_members *mem, char *err,
    size_t errlen)
{
	const struct ipc_rule *rule = NULL;
	size_t i;

	*body = NULL;
	for (i = 0; i < pol->nrules; i++)
		if (pol->rules[i].type == f->type) {
			rule = &pol->rules[i];
			break;
		}
	if (rule == NULL) {
		snprintf(err, errlen, "message type %u is not allowed from %s",
		    f->type, pol->peer);
		return -1;
	}
	if ((f->flags & IPC_FLAG_FD) && !(rule->flags & IPC_RULE_FD)) {
		snprintf(err, errlen, "message type %u may not carry a "
		    "descriptor", f->type);
		return -1;
	}
	if (rule->flags & IPC_RULE_TEXT) {
		struct jsonx_err jerr;

		if (f->len == 0) {
			snprintf(err, errlen, "empty payload");
			return -1;
		}
		if (jsonx_check_object_members(f->payload, f->len,
		    IPC_JSON_DEPTH, mem, &jerr) == -1) {
			if ((size_t)snprintf(err, errlen, "%s", jerr.msg) >=
			    errlen)
				err[errlen - 1] = '\0';
			return -1;
		}
		return 0;
	}
	if ((*body = ipc_parse_json(f->payload, f->len, err, errlen)) == NULL)
		return -1;
	return 0;
}

/* Checks a HELLO frame: right type, no descriptor, our version. */
int
ipc_hello_check(const struct ipc_frame *f, char *role, size_t rolelen,
    char *err, size_t errlen)
{
	struct json_object *body, *v, *r;
	int rc = -1;

	if (f->type != IPC_HELLO) {
		snprintf(err, errlen, "first message is type %u, not HELLO",
		    f->type);
		return -1;
	}
	if (f->flags & IPC_FLAG_FD) {
		snprintf(err, errlen, "HELLO may not carry a descriptor");
		return -1;
	}
	if ((body = ipc_parse_json(f->payload, f->len, err, errlen)) == NULL)
		return -1;
	if (!json_object_object_get_ex(body, "version", &v) ||
	    !json_object_is_type(v, json_type_int)) {
		snprintf(err, errlen, "HELLO without an integer version");
		goto out;
	}
	if (json_object_get_int64(v) != IPC_VERSION) {
		snprintf(err, errlen, "peer speaks IPC version %lld, we "
		    "speak %d", (long long)json_object_get_int64(v),
		    IPC_VERSION);
		goto out;
	}
	if (!json_object_object_get_ex(body, "role", &r) ||
	    !json_object_is_type(r, json_type_string) ||
	    json_object_get_string_len(r) == 0 ||
	    (size_t)json_object_get_string_len(r) >= rolelen) {
		snprintf(err, errlen, "HELLO without a valid role");
		goto out;
	}
	snprintf(role, rolelen, "%s", json_object_get_string(r));
	for (char *c = role; *c != '\0'; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		    *c == '-' || *c == '_'))
			*c = '?';
	rc = 0;
 out:
	json_object_put(body);
	return rc;
}

/* ---- encoding ---------------------------------------------------------- */

struct ipc_out *
ipc_encode(uint32_t type, uint32_t id, uint32_t flags,
    struct json_object *body, int fd)
{
	struct ipc_out *o;
	const char *js = "{}";
	size_t jlen = 2;
	uint32_t hdr[4];

	if (body != NULL) {
		js = json_object_to_json_string_ext(body,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
		jlen = strlen(js);
	}
	if (jlen > IPC_MAX_PAYLOAD) {
		errno = EMSGSIZE;
		return NULL;
	}
	if ((o = calloc(1, sizeof(*o))) == NULL)
		return NULL;
	if ((o->buf = malloc(IPC_HDR_LEN + jlen)) == NULL) {
		free(o);
		return NULL;
	}
	if (fd != -1)
		flags |= IPC_FLAG_FD;
	hdr[0] = type;
	hdr[1] = (uint32_t)jlen;
	hdr[2] = id;
	hdr[3] = flags;
	memcpy(o->buf, hdr, IPC_HDR_LEN);
	memcpy(o->buf + IPC_HDR_LEN, js, jlen);
	/*
	 * json-c writes a string's bytes as they are, and a peer refuses
	 * (and drops the connection over) a frame that is not UTF-8.  A
	 * message that quotes a client's text, or was cut inside one of its
	 * characters, must not cost the connection: the ill-formed bytes
	 * become '?', which can only be inside a string here, since
	 * everything else json-c writes is ASCII.
	 */
	utf8_scrub_len((char *)o->buf + IPC_HDR_LEN, jlen);
	o->len = IPC_HDR_LEN + jlen;
	o->fd = fd;
	return o;
}

/* Frames may carry credentials: nothing of them stays in freed memory. */
void
ipc_out_free(struct ipc_out *o)
{
	if (o->fd != -1)
		close(o->fd);
	explicit_bzero(o->buf, o->len);
	free(o->buf);
	free(o);
}

