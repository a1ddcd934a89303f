/*
 * Unit tests for common/ipc: the frame reader, policy checks, and real
 * connections between two processes passing real descriptors.  Each broken
 * frame must close only its own connection while the server goes on.  The
 * admission check runs against peers of real uids and groups (as root).
 */
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc.h"
#include "ipc_priv.h"	/* ipc_encode, for what a sender writes */
#include "log.h"
#include "../check_run.h"

static const struct ipc_rule test_rules[] = {
	{ IPC_TEST_ECHO, 0 },
	{ IPC_TEST_FD, IPC_RULE_FD },
};
static const struct ipc_policy test_policy = {
	"tester", test_rules, sizeof(test_rules) / sizeof(test_rules[0])
};
static const struct ipc_rule reply_rules[] = {
	{ IPC_TEST_ECHO_RESULT, IPC_RULE_FD },
	{ IPC_ERROR, 0 },
};
static const struct ipc_policy reply_policy = {
	"server", reply_rules, sizeof(reply_rules) / sizeof(reply_rules[0])
};

/* ---- reader ------------------------------------------------------------ */

static void
hdr(uint8_t *b, uint32_t type, uint32_t len, uint32_t id, uint32_t flags)
{
	uint32_t h[4] = { type, len, id, flags };

	memcpy(b, h, sizeof(h));
}

/* Feeds buf one byte at a time; returns the last commit result. */
static int
feed_bytes(struct ipc_reader *r, const uint8_t *buf, size_t len,
    struct ipc_frame *f, const char **err)
{
	int rc = 0;

	for (size_t i = 0; i < len; i++) {
		size_t want;
		uint8_t *dst = ipc_reader_space(r, &want);

		ck_assert_uint_ge(want, 1);
		*dst = buf[i];
		if ((rc = ipc_reader_commit(r, 1, f, err)) != 0 &&
		    i + 1 != len)
			ck_abort_msg("frame ended early at byte %zu", i);
	}
	return rc;
}

START_TEST(reader_byte_by_byte)
{
	struct ipc_reader r;
	struct ipc_frame f;
	const char *err = NULL;
	uint8_t buf[64];
	const char *js = "{\"a\":1}";

	ipc_reader_init(&r);
	hdr(buf, 7, (uint32_t)strlen(js), 42, 0);
	memcpy(buf + 16, js, strlen(js));
	ck_assert_int_eq(feed_bytes(&r, buf, 16 + strlen(js), &f, &err), 1);
	ck_assert_uint_eq(f.type, 7);
	ck_assert_uint_eq(f.id, 42);
	ck_assert_uint_eq(f.len, strlen(js));
	ck_assert_str_eq(f.payload, js);
	ck_assert_int_eq(f.fd, -1);
	ipc_reader_reset(&r);
}
END_TEST

START_TEST(reader_empty_payload)
{
	struct ipc_reader r;
	struct ipc_frame f;
	const char *err = NULL;
	uint8_t buf[16];

	ipc_reader_init(&r);
	hdr(buf, 3, 0, 1, 0);
	ck_assert_int_eq(feed_bytes(&r, buf, 16, &f, &err), 1);
	ck_assert_uint_eq(f.len, 0);
	ipc_reader_reset(&r);
}
END_TEST

START_TEST(reader_rejects_oversize)
{
	struct ipc_reader r;
	struct ipc_frame f;
	const char *err = NULL;
	uint8_t buf[16];

	ipc_reader_init(&r);
	hdr(buf, 3, IPC_MAX_PAYLOAD + 1, 1, 0);
	ck_assert_int_eq(feed_bytes(&r, buf, 16, &f, &err), -1);
	ck_assert_str_eq(err, "frame payload exceeds 1 MiB");
	ipc_reader_reset(&r);

	/* Exactly the limit is allowed: the header alone is accepted. */
	ipc_reader_init(&r);
	hdr(buf, 3, IPC_MAX_PAYLOAD, 1, 0);
	ck_assert_int_eq(feed_bytes(&r, buf, 16, &f, &err), 0);
	ipc_reader_reset(&r);
}
END_TEST

START_TEST(reader_rejects_unknown_flags)
{
	struct ipc_reader r;
	struct ipc_frame f;
	const char *err = NULL;
	uint8_t buf[16];

	ipc_reader_init(&r);
	hdr(buf, 3, 2, 1, 0x80);
	ck_assert_int_eq(feed_bytes(&r, buf, 16, &f, &err), -1);
	ck_assert_str_eq(err, "unknown frame flags");
	ipc_reader_reset(&r);
}
END_TEST

START_TEST(reader_fd_must_match_flag)
{
	struct ipc_reader r;
	struct ipc_frame f;
	const char *err = NULL;
	uint8_t buf[18];

	/* Flag without a descriptor. */
	ipc_reader_init(&r);
	hdr(buf, 3, 2, 1, IPC_FLAG_FD);
	memcpy(buf + 16, "{}", 2);
	ck_assert_int_eq(feed_bytes(&r, buf, 18, &f, &err), -1);
	ck_assert_str_eq(err, "frame announces a descriptor that did not "
	    "arrive");
	ipc_reader_reset(&r);

	/* A descriptor without the flag. */
	ipc_reader_init(&r);
	ck_assert_int_eq(ipc_reader_add_fd(&r, dup(0), &err), 0);
	hdr(buf, 3, 2, 1, 0);
	ck_assert_int_eq(feed_bytes(&r, buf, 18, &f, &err), -1);
	ck_assert_str_eq(err, "descriptor arrived with a frame that announces "
	    "none");
	ipc_reader_reset(&r);

	/* A second descriptor for one frame. */
	ipc_reader_init(&r);
	ck_assert_int_eq(ipc_reader_add_fd(&r, dup(0), &err), 0);
	ck_assert_int_eq(ipc_reader_add_fd(&r, dup(0), &err), -1);
	ck_assert_str_eq(err, "more than one descriptor for one frame");
	ipc_reader_reset(&r);
}
END_TEST

START_TEST(reader_rejects_overfeed)
{
	struct ipc_reader r;
	struct ipc_frame f;
	const char *err = NULL;
	size_t want;

	ipc_reader_init(&r);
	(void)ipc_reader_space(&r, &want);
	ck_assert_uint_eq(want, IPC_HDR_LEN);
	ck_assert_int_eq(ipc_reader_commit(&r, want + 1, &f, &err), -1);
	ipc_reader_reset(&r);
}
END_TEST

/* Copies len bytes into a bulk reader as one read, fd arriving with it. */
static int
bulk_read(struct ipc_reader *r, const uint8_t *buf, size_t len, int fd,
    struct ipc_frame *f, const char **err)
{
	size_t want;
	uint8_t *dst = ipc_reader_space(r, &want);

	ck_assert_ptr_nonnull(dst);
	ck_assert_uint_ge(want, len);
	if (fd != -1)
		ck_assert_int_eq(ipc_reader_add_fd(r, fd, err), 0);
	memcpy(dst, buf, len);
	return ipc_reader_commit(r, len, f, err);
}

/* Several frames in one read come out one by one, each NUL-ended. */
START_TEST(bulk_reader_several_frames_per_read)
{
	struct ipc_reader r;
	struct ipc_frame f;
	const char *err = NULL;
	uint8_t buf[256];
	size_t off = 0;
	int i;

	for (i = 0; i < 5; i++) {
		hdr(buf + off, 7, 7, (uint32_t)i, 0);
		memcpy(buf + off + 16, "{\"n\":1}", 7);
		buf[off + 16 + 5] = (uint8_t)('0' + i);
		off += 23;
	}
	ipc_reader_init(&r);
	ipc_reader_set_bulk(&r);
	/* All five and half a header of a sixth. */
	hdr(buf + off, 7, 7, 5, 0);
	ck_assert_int_eq(bulk_read(&r, buf, off + 8, -1, &f, &err), 1);
	for (i = 0; i < 5; i++) {
		if (i > 0)
			ck_assert_int_eq(ipc_reader_next(&r, &f, &err), 1);
		ck_assert_uint_eq(f.id, (uint32_t)i);
		ck_assert_uint_eq(f.len, 7);
		ck_assert_uint_eq((uint8_t)f.payload[5], '0' + i);
		ck_assert_int_eq(f.payload[7], '\0');
	}
	ck_assert_int_eq(ipc_reader_next(&r, &f, &err), 0);
	/* The NUL lent from the sixth header was given back. */
	memcpy(buf, buf + off + 8, 8);
	memcpy(buf + 8, "{\"n\":15}", 7);
	ck_assert_int_eq(bulk_read(&r, buf, 15, -1, &f, &err), 1);
	ck_assert_uint_eq(f.id, 5);
	ck_assert_uint_eq(f.type, 7);
	ipc_reader_reset(&r);
}
END_TEST

/*
 * A descriptor is the frame's whose bytes the read that brought it ended
 * in, and that frame must have begun within that read.
 */
START_TEST(bulk_reader_descriptor_attribution)
{
	struct ipc_reader r;
	struct ipc_frame f;
	const char *err = NULL;
	uint8_t buf[128];

	/* Frame 1 (none) whole and frame 2 (announced) begun: 2's. */
	ipc_reader_init(&r);
	ipc_reader_set_bulk(&r);
	hdr(buf, 7, 2, 1, 0);
	memcpy(buf + 16, "{}", 2);
	hdr(buf + 18, 7, 2, 2, IPC_FLAG_FD);
	memcpy(buf + 34, "{}", 2);
	ck_assert_int_eq(bulk_read(&r, buf, 20, dup(0), &f, &err), 1);
	ck_assert_uint_eq(f.id, 1);
	ck_assert_int_eq(f.fd, -1);
	ck_assert_int_eq(ipc_reader_next(&r, &f, &err), 0);
	ck_assert_int_eq(bulk_read(&r, buf + 20, 16, -1, &f, &err), 1);
	ck_assert_uint_eq(f.id, 2);
	ck_assert_int_ge(f.fd, 0);
	close(f.fd);
	ipc_reader_reset(&r);

	/* Both frames whole in the read: the last one's. */
	ipc_reader_init(&r);
	ipc_reader_set_bulk(&r);
	ck_assert_int_eq(bulk_read(&r, buf, 36, dup(0), &f, &err), 1);
	ck_assert_int_eq(f.fd, -1);
	ck_assert_int_eq(ipc_reader_next(&r, &f, &err), 1);
	ck_assert_int_ge(f.fd, 0);
	close(f.fd);
	ipc_reader_reset(&r);

	/* Arriving with bytes from the middle of a frame: refused. */
	ipc_reader_init(&r);
	ipc_reader_set_bulk(&r);
	ck_assert_int_eq(bulk_read(&r, buf + 18, 8, -1, &f, &err), 0);
	ck_assert_int_eq(bulk_read(&r, buf + 26, 10, dup(0), &f, &err), -1);
	ck_assert_str_eq(err, "descriptor arrived in the middle of a frame");
	ipc_reader_reset(&r);

	/* A read that ends in a frame announcing none: refused. */
	ipc_reader_init(&r);
	ipc_reader_set_bulk(&r);
	ck_assert_int_eq(bulk_read(&r, buf, 18, dup(0), &f, &err), -1);
	ck_assert_str_eq(err, "descriptor arrived with a frame that announces "
	    "none");
	ipc_reader_reset(&r);
}
END_TEST

/* A frame of the largest size fits, and the buffer shrinks after it. */
START_TEST(bulk_reader_big_frame)
{
	struct ipc_reader r;
	struct ipc_frame f;
	const char *err = NULL;
	uint8_t *big = malloc(16 + IPC_MAX_PAYLOAD);
	size_t off = 0;

	ck_assert_ptr_nonnull(big);
	hdr(big, 7, IPC_MAX_PAYLOAD, 9, 0);
	memset(big + 16, 'x', IPC_MAX_PAYLOAD);
	ipc_reader_init(&r);
	ipc_reader_set_bulk(&r);
	for (;;) {
		size_t want, n;
		uint8_t *dst = ipc_reader_space(&r, &want);
		int rc;

		ck_assert_ptr_nonnull(dst);
		n = 16 + IPC_MAX_PAYLOAD - off < want ? 16 + IPC_MAX_PAYLOAD -
		    off : want;
		memcpy(dst, big + off, n);
		off += n;
		if ((rc = ipc_reader_commit(&r, n, &f, &err)) == 1)
			break;
		ck_assert_int_eq(rc, 0);
	}
	ck_assert_uint_eq(f.len, IPC_MAX_PAYLOAD);
	ck_assert_int_eq(f.payload[IPC_MAX_PAYLOAD], '\0');
	ck_assert_uint_gt(r.cap, IPC_MAX_PAYLOAD);
	ck_assert_ptr_nonnull(ipc_reader_space(&r, &off));
	ck_assert_uint_eq(r.cap, IPC_READ_BUF);
	ipc_reader_reset(&r);
	free(big);
}
END_TEST

/* ---- policy and JSON --------------------------------------------------- */

static int
check_payload(uint32_t type, uint32_t flags, const char *payload, size_t len,
    char *err, size_t errlen)
{
	struct ipc_frame f = { type, 1, flags, payload, len, -1 };
	struct json_object *body;
	int rc;

	rc = ipc_frame_check(&f, &test_policy, &body, NULL, err, errlen);
	json_object_put(body);
	return rc;
}

START_TEST(frame_check_cases)
{
	char err[256];

	ck_assert_int_eq(check_payload(IPC_TEST_ECHO, 0, "{\"x\":[1,2]}", 11,
	    err, sizeof(err)), 0);
	ck_assert_int_eq(check_payload(IPC_TEST_ECHO_RESULT, 0, "{}", 2,
	    err, sizeof(err)), -1);
	ck_assert_str_eq(err, "message type 903 is not allowed from tester");
	ck_assert_int_eq(check_payload(IPC_TEST_ECHO, IPC_FLAG_FD, "{}", 2,
	    err, sizeof(err)), -1);
	ck_assert_str_eq(err, "message type 901 may not carry a descriptor");
	ck_assert_int_eq(check_payload(IPC_TEST_FD, IPC_FLAG_FD, "{}", 2,
	    err, sizeof(err)), 0);
	ck_assert_int_eq(check_payload(IPC_TEST_ECHO, 0, "{\"a\":", 5,
	    err, sizeof(err)), -1);
	ck_assert_str_eq(err, "invalid JSON at byte 5: unexpected end of input "
	    "(truncated)");
	ck_assert_int_eq(check_payload(IPC_TEST_ECHO, 0, "{} {}", 5,
	    err, sizeof(err)), -1);
	ck_assert_str_eq(err, "invalid JSON at byte 3: unexpected data after "
	    "the JSON value");
	ck_assert_int_eq(check_payload(IPC_TEST_ECHO, 0, "[1]", 3,
	    err, sizeof(err)), -1);
	ck_assert_str_eq(err, "$: expected object, got array");
	ck_assert_int_eq(check_payload(IPC_TEST_ECHO, 0, "{\"a\":\"\xff\"}",
	    8, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "invalid JSON: text is not valid UTF-8");
	/* What json-c alone would take: NaN, single quotes. */
	ck_assert_int_eq(check_payload(IPC_TEST_ECHO, 0, "{\"a\":NaN}", 9,
	    err, sizeof(err)), -1);
	ck_assert_int_eq(check_payload(IPC_TEST_ECHO, 0, "{'a':1}", 7,
	    err, sizeof(err)), -1);
	ck_assert_int_eq(check_payload(IPC_TEST_ECHO, 0, "{}\0", 3,
	    err, sizeof(err)), -1);
	ck_assert_str_eq(err, "invalid JSON at byte 2: NUL byte");
	ck_assert_int_eq(check_payload(IPC_TEST_ECHO, 0, "", 0,
	    err, sizeof(err)), -1);
	/* Deep nesting is refused, not recursed into. */
	{
		char deep[200];

		memset(deep, '[', 100);
		memset(deep + 100, ']', 100);
		deep[0] = '{';
		ck_assert_int_eq(check_payload(IPC_TEST_ECHO, 0, deep,
		    sizeof(deep), err, sizeof(err)), -1);
	}
}
END_TEST

/*
 * What a daemon sends always passes its peer's check: a string that is not
 * UTF-8 (a client's text quoted in an error, or cut inside a character)
 * has its ill-formed bytes sent as '?', and well-formed ones untouched.
 */
START_TEST(encode_scrubs_ill_formed_utf8)
{
	struct json_object *body, *got;
	struct ipc_out *o;
	char err[256];

	body = json_object_new_object();
	json_object_object_add(body, "m", json_object_new_string(
	    "a\xff b \xc3 \xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82"));
	o = ipc_encode(IPC_TEST_ECHO, 7, 0, body, -1);
	json_object_put(body);
	ck_assert_ptr_nonnull(o);
	{
		struct ipc_frame f = { IPC_TEST_ECHO, 7, 0,
		    (const char *)o->buf + IPC_HDR_LEN, o->len - IPC_HDR_LEN,
		    -1 };

		ck_assert_int_eq(ipc_frame_check(&f, &test_policy, &got, NULL,
		    err, sizeof(err)), 0);
	}
	ck_assert_str_eq(json_object_get_string(json_object_object_get(got,
	    "m")), "a? b ? \xc3\xa9 \xf0\x9f\x98\x80 ??");
	json_object_put(got);
	ipc_out_free(o);
}
END_TEST

/* ---- live connections -------------------------------------------------- */

struct server_state {
	struct event_base	*base;
	int			 accepted, closed, dispatched;
	uid_t			 refuse_uid;
	int			 last_uid;
};

static const struct ipc_policy *
srv_accept(const struct ucred *cred, void *arg)
{
	struct server_state *st = arg;

	st->last_uid = (int)cred->uid;
	if (cred->uid == st->refuse_uid)
		return NULL;
	st->accepted++;
	return &test_policy;
}

static void
srv_dispatch(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	struct server_state *st = arg;

	st->dispatched++;
	switch (m->type) {
	case IPC_TEST_ECHO:
		ipc_reply(c, IPC_TEST_ECHO_RESULT, m->id, m->body, -1);
		break;
	case IPC_TEST_FD: {
		/* Read what the sender put in the descriptor, echo it back
		 * together with a fresh pipe whose other end says "pong". */
		struct json_object *r = json_object_new_object();
		char buf[64] = "";
		ssize_t n;
		int p[2];

		lseek(m->fd, 0, SEEK_SET);
		n = read(m->fd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = '\0';
		json_object_object_add(r, "content",
		    json_object_new_string(buf));
		ck_assert_int_eq(pipe(p), 0);
		ck_assert_int_eq(write(p[1], "pong", 4), 4);
		close(p[1]);
		ipc_reply(c, IPC_TEST_ECHO_RESULT, m->id, r, p[0]);
		json_object_put(r);
		break;
	}
	default:
		ipc_reply_error(c, m->id, "invalid_argument", "unexpected");
	}
}

static void
srv_closed(struct ipc_conn *c, void *arg)
{
	struct server_state *st = arg;

	st->closed++;
}

static const struct ipc_handlers srv_handlers = {
	srv_dispatch, srv_closed
};

static char sockdir[] = "/tmp/mcpvm-ipc-XXXXXX";
static char sockpath[128];
/* When set, spawn_server's server admits only these peers. */
static const struct ipc_admit *spawn_admit;

/*
 * Runs a server in a forked child so that the test process can act as a
 * raw, misbehaving client.  The child exits when it receives SIGTERM and
 * reports how many connections it saw close through its exit status.
 */
static pid_t
spawn_server(uid_t refuse_uid)
{
	int ready[2];
	pid_t pid;
	char c;

	ck_assert_ptr_nonnull(mkdtemp(sockdir));
	snprintf(sockpath, sizeof(sockpath), "%s/test.sock", sockdir);
	ck_assert_int_eq(pipe(ready), 0);
	if ((pid = fork()) == 0) {
		struct server_state st = { 0 };
		struct ipc_server *s;

		close(ready[0]);
		st.refuse_uid = refuse_uid;
		st.base = event_base_new();
		s = ipc_server_new(st.base, sockpath, 0666, "server",
		    srv_accept, &srv_handlers, &st);
		if (s == NULL)
			_exit(99);
		if (spawn_admit != NULL)
			ipc_server_set_admit(s, spawn_admit);
		if (write(ready[1], "r", 1) != 1)
			_exit(98);
		close(ready[1]);
		signal(SIGTERM, SIG_DFL);
		event_base_dispatch(st.base);
		_exit(0);
	}
	close(ready[1]);
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	return pid;
}

static void
stop_server(pid_t pid)
{
	int status;

	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	/* Killed by our signal, not by a crash of its own. */
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	unlink(sockpath);
	rmdir(sockdir);
	strcpy(sockdir, "/tmp/mcpvm-ipc-XXXXXX");
}

static int
raw_connect(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	strcpy(sun.sun_path, sockpath);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)),
	    0);
	return fd;
}

static void
raw_send(int fd, uint32_t type, uint32_t id, uint32_t flags,
    const char *payload, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 16)];
	} cm;
	uint8_t buf[1024];
	struct msghdr msg = { 0 };
	struct iovec iov;

	hdr(buf, type, (uint32_t)len, id, flags);
	memcpy(buf + 16, payload, len);
	iov.iov_base = buf;
	iov.iov_len = 16 + len;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof(cm));
		msg.msg_control = cm.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	ck_assert_int_eq(sendmsg(fd, &msg, MSG_NOSIGNAL), (ssize_t)(16 + len));
}

static void
raw_hello(int fd)
{
	const char *h = "{\"version\":1,\"role\":\"raw\"}";

	raw_send(fd, IPC_HELLO, 0, 0, h, strlen(h), NULL, 0);
}

/* True when the server closed the connection (after its own HELLO). */
static int
closed_by_server(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char buf[4096];
	ssize_t n;

	for (;;) {
		if (poll(&pfd, 1, 5000) != 1)
			return 0;
		n = read(fd, buf, sizeof(buf));
		if (n == 0)
			return 1;
		if (n < 0)
			return errno == ECONNRESET;
	}
}

/* A good request still works: the server survived what came before. */
static void
assert_server_alive(void)
{
	struct json_object *req, *rep;
	uint32_t rtype;
	int fd;

	fd = ipc_sync_connect(sockpath, "checker", 5000);
	ck_assert_msg(fd >= 0, "connect: %s", strerror(errno));
	req = json_object_new_object();
	json_object_object_add(req, "ping", json_object_new_string("héllo"));
	ck_assert_int_eq(ipc_sync_call(fd, IPC_TEST_ECHO, req, -1, &rtype,
	    &rep, NULL, 5000), 0);
	ck_assert_uint_eq(rtype, IPC_TEST_ECHO_RESULT);
	ck_assert_str_eq(json_object_get_string(
	    json_object_object_get(rep, "ping")), "héllo");
	json_object_put(req);
	json_object_put(rep);
	close(fd);
}

START_TEST(sync_echo_and_fd_both_ways)
{
	struct json_object *rep;
	uint32_t rtype;
	char buf[16] = "";
	pid_t srv;
	int fd, mfd, rfd;

	srv = spawn_server((uid_t)-1);
	fd = ipc_sync_connect(sockpath, "client", 5000);
	ck_assert_int_ge(fd, 0);
	mfd = memfd_create("payload", MFD_CLOEXEC);
	ck_assert_int_eq(write(mfd, "ping-through-fd", 15), 15);
	ck_assert_int_eq(ipc_sync_call(fd, IPC_TEST_FD, NULL, mfd, &rtype,
	    &rep, &rfd, 5000), 0);
	ck_assert_uint_eq(rtype, IPC_TEST_ECHO_RESULT);
	ck_assert_str_eq(json_object_get_string(
	    json_object_object_get(rep, "content")), "ping-through-fd");
	ck_assert_int_ge(rfd, 0);
	ck_assert_int_eq(read(rfd, buf, sizeof(buf)), 4);
	ck_assert_str_eq(buf, "pong");
	close(rfd);
	json_object_put(rep);
	close(fd);
	assert_server_alive();
	stop_server(srv);
}
END_TEST

struct malformed {
	const char	*name;
	void		(*send)(int);
};

static void
m_no_hello(int fd)
{
	raw_send(fd, IPC_TEST_ECHO, 1, 0, "{}", 2, NULL, 0);
}

static void
m_wrong_version(int fd)
{
	const char *h = "{\"version\":2,\"role\":\"raw\"}";

	raw_send(fd, IPC_HELLO, 0, 0, h, strlen(h), NULL, 0);
}

static void
m_short_frame(int fd)
{
	uint8_t b[10] = { 0 };

	raw_hello(fd);
	ck_assert_int_eq(write(fd, b, sizeof(b)), 10);
	shutdown(fd, SHUT_WR);
}

static void
m_oversize(int fd)
{
	uint8_t b[16];

	raw_hello(fd);
	hdr(b, IPC_TEST_ECHO, IPC_MAX_PAYLOAD + 1, 1, 0);
	ck_assert_int_eq(write(fd, b, sizeof(b)), 16);
}

static void
m_not_allowed(int fd)
{
	raw_hello(fd);
	raw_send(fd, IPC_TEST_ECHO_RESULT, 1, 0, "{}", 2, NULL, 0);
}

static void
m_unknown_type(int fd)
{
	raw_hello(fd);
	raw_send(fd, 0xdeadbeef, 1, 0, "{}", 2, NULL, 0);
}

static void
m_fd_not_allowed(int fd)
{
	int p = dup(0);

	raw_hello(fd);
	raw_send(fd, IPC_TEST_ECHO, 1, IPC_FLAG_FD, "{}", 2, &p, 1);
	close(p);
}

static void
m_two_fds(int fd)
{
	int p[2] = { dup(0), dup(0) };

	raw_hello(fd);
	raw_send(fd, IPC_TEST_FD, 1, IPC_FLAG_FD, "{}", 2, p, 2);
	close(p[0]);
	close(p[1]);
}

/* n descriptors for one frame: all but none may stay open in the server. */
static void
send_n_fds(int fd, int n)
{
	int p[16], i;

	ck_assert_int_le(n, 16);
	for (i = 0; i < n; i++)
		p[i] = dup(0);
	raw_hello(fd);
	raw_send(fd, IPC_TEST_FD, 1, IPC_FLAG_FD, "{}", 2, p, n);
	for (i = 0; i < n; i++)
		close(p[i]);
}

static void
m_three_fds(int fd)
{
	send_n_fds(fd, 3);
}

static void
m_eight_fds(int fd)
{
	send_n_fds(fd, 8);	/* as many as the server's control buffer */
}

static void
m_sixteen_fds(int fd)
{
	send_n_fds(fd, 16);	/* more than fit: MSG_CTRUNC */
}

static void
m_fd_without_flag(int fd)
{
	int p = dup(0);

	raw_hello(fd);
	raw_send(fd, IPC_TEST_FD, 1, 0, "{}", 2, &p, 1);
	close(p);
}

static void
m_bad_json(int fd)
{
	raw_hello(fd);
	raw_send(fd, IPC_TEST_ECHO, 1, 0, "{\"a\":tru}", 9, NULL, 0);
}

static void
m_bad_utf8(int fd)
{
	raw_hello(fd);
	raw_send(fd, IPC_TEST_ECHO, 1, 0, "{\"a\":\"\xc3\x28\"}", 10, NULL, 0);
}

static const struct malformed malformed_cases[] = {
	{ "no HELLO first", m_no_hello },
	{ "wrong version", m_wrong_version },
	{ "short frame", m_short_frame },
	{ "oversized frame", m_oversize },
	{ "type not allowed", m_not_allowed },
	{ "unknown type", m_unknown_type },
	{ "fd where none is allowed", m_fd_not_allowed },
	{ "second fd", m_two_fds },
	{ "three fds", m_three_fds },
	{ "eight fds", m_eight_fds },
	{ "sixteen fds", m_sixteen_fds },
	{ "fd without flag", m_fd_without_flag },
	{ "invalid JSON", m_bad_json },
	{ "invalid UTF-8", m_bad_utf8 },
};

/* How many descriptors process pid holds open. */
static int
count_fds(pid_t pid)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	ck_assert_msg(d != NULL, "%s: %s", path, strerror(errno));
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

START_TEST(malformed_closes_only_that_connection)
{
	const struct malformed *m = &malformed_cases[_i];
	pid_t srv;
	int fd, bystander, fds_before;
	struct json_object *rep;
	uint32_t rtype;

	srv = spawn_server((uid_t)-1);
	/* A well-behaved client connected before and after the bad one. */
	bystander = ipc_sync_connect(sockpath, "bystander", 5000);
	ck_assert_int_ge(bystander, 0);
	fds_before = count_fds(srv);
	fd = raw_connect();
	m->send(fd);
	ck_assert_msg(closed_by_server(fd), "%s: connection left open",
	    m->name);
	close(fd);
	ck_assert_int_eq(ipc_sync_call(bystander, IPC_TEST_ECHO, NULL, -1,
	    &rtype, &rep, NULL, 5000), 0);
	json_object_put(rep);
	/* Whatever the bad peer sent, none of it stays open in the server. */
	ck_assert_msg(count_fds(srv) == fds_before,
	    "%s: server holds %d descriptors, %d before", m->name,
	    count_fds(srv), fds_before);
	close(bystander);
	assert_server_alive();
	stop_server(srv);
}
END_TEST

START_TEST(peer_refused_by_uid)
{
	pid_t srv, child;
	int status;

	/* Acting as a second uid needs root; tests/run runs as root. */
	ck_assert_msg(geteuid() == 0, "this test needs root");
	srv = spawn_server(65534);
	chmod(sockdir, 0755);
	if ((child = fork()) == 0) {
		int fd;

		if (setresgid(65534, 65534, 65534) == -1 ||
		    setresuid(65534, 65534, 65534) == -1)
			_exit(3);
		fd = ipc_sync_connect(sockpath, "intruder", 3000);
		/* The server closes without a HELLO: connect must fail. */
		_exit(fd == -1 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	assert_server_alive();
	stop_server(srv);
}
END_TEST

/*
 * Connects from a child that holds exactly uid, gid and groups: 1 when
 * the server admitted it (its HELLO came back), 0 when it was refused.
 */
static int
admitted_as(uid_t uid, gid_t gid, const gid_t *groups, size_t ngroups)
{
	pid_t child;
	int status;

	if ((child = fork()) == 0) {
		int fd;

		if (setgroups(ngroups, groups) == -1 ||
		    setresgid(gid, gid, gid) == -1 ||
		    setresuid(uid, uid, uid) == -1)
			_exit(3);
		fd = ipc_sync_connect(sockpath, "peer", 3000);
		_exit(fd == -1 ? 1 : 0);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status));
	ck_assert_msg(WEXITSTATUS(status) != 3, "cannot take uid %u gid %u",
	    (unsigned)uid, (unsigned)gid);
	return WEXITSTATUS(status) == 0;
}

/*
 * The admission check: a listed uid, or a listed group held as the
 * primary group or, through SO_PEERGROUPS, as a supplementary one.  A
 * supplementary member is let in only if the group check asks the
 * kernel; everyone else is refused before the accept callback.
 */
START_TEST(peer_admitted_by_uid_or_group)
{
	static struct ipc_admit admit = { .need = "not uid 65533 nor in "
	    "group 4242" };
	gid_t member[] = { 4242 }, others[] = { 4241, 4243 };
	gid_t many[100];
	pid_t srv;

	ck_assert_msg(geteuid() == 0, "this test needs root");
	ck_assert_int_eq(ipc_admit_uid(&admit, 65533), 0);
	ck_assert_int_eq(ipc_admit_gid(&admit, 4242), 0);
	/* More groups than the first SO_PEERGROUPS call has room for. */
	for (size_t i = 0; i < 100; i++)
		many[i] = (gid_t)(5000 + i);
	many[99] = 4242;
	spawn_admit = &admit;
	srv = spawn_server((uid_t)-1);
	spawn_admit = NULL;
	chmod(sockdir, 0755);

	ck_assert_msg(!admitted_as(65534, 65534, NULL, 0),
	    "a peer without the group is refused");
	ck_assert_msg(!admitted_as(65534, 65534, others, 2),
	    "a peer with other groups only is refused");
	ck_assert_msg(!admitted_as(0, 0, NULL, 0),
	    "root is refused where it is not listed");
	/* The server lives on after the refusals and admits its peers. */
	ck_assert_msg(admitted_as(65534, 65534, member, 1),
	    "a supplementary member of the group is admitted");
	ck_assert_msg(admitted_as(65534, 65534, many, 100),
	    "a member among 100 supplementary groups is admitted");
	ck_assert_msg(admitted_as(65534, 4242, NULL, 0),
	    "a peer whose primary group it is is admitted");
	ck_assert_msg(admitted_as(65533, 65533, NULL, 0),
	    "the listed uid is admitted");
	stop_server(srv);
}
END_TEST

/* ---- event-driven client against the forked server --------------------- */

struct client_state {
	struct event_base	*base;
	int			 replies, timeouts;
	char			 content[64];
	char			 pipe_said[8];
};

static void
on_reply(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	struct client_state *cs = arg;

	if (m == NULL) {
		cs->timeouts++;
	} else {
		struct json_object *v;

		cs->replies++;
		if (json_object_object_get_ex(m->body, "content", &v))
			snprintf(cs->content, sizeof(cs->content), "%s",
			    json_object_get_string(v));
		if (m->fd != -1) {
			ssize_t n = read(m->fd, cs->pipe_said,
			    sizeof(cs->pipe_said) - 1);

			cs->pipe_said[n > 0 ? n : 0] = '\0';
		}
	}
	if (cs->replies + cs->timeouts == 2)
		event_base_loopexit(cs->base, NULL);
}

START_TEST(async_requests)
{
	struct client_state cs = { 0 };
	struct ipc_conn *c;
	struct json_object *req;
	struct timeval tv = { 10, 0 };
	pid_t srv;
	int mfd;

	srv = spawn_server((uid_t)-1);
	cs.base = event_base_new();
	c = ipc_connect(cs.base, sockpath, "client", &reply_policy, NULL,
	    &cs);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq((int)ipc_conn_peercred(c)->pid, (int)srv);
	req = json_object_new_object();
	json_object_object_add(req, "n", json_object_new_int(1));
	ck_assert_int_eq(ipc_request(c, IPC_TEST_ECHO, req, -1, 5000,
	    on_reply, &cs), 0);
	json_object_put(req);
	mfd = memfd_create("x", MFD_CLOEXEC);
	ck_assert_int_eq(write(mfd, "async-fd", 8), 8);
	ck_assert_int_eq(ipc_request(c, IPC_TEST_FD, NULL, mfd, 5000,
	    on_reply, &cs), 0);
	event_base_loopexit(cs.base, &tv);
	event_base_dispatch(cs.base);
	ck_assert_int_eq(cs.replies, 2);
	ck_assert_int_eq(cs.timeouts, 0);
	ck_assert_str_eq(cs.content, "async-fd");
	ck_assert_str_eq(cs.pipe_said, "pong");
	ck_assert_str_eq(ipc_conn_peer_role(c), "server");
	ipc_conn_free(c);
	event_base_free(cs.base);
	stop_server(srv);
}
END_TEST

struct burst_state {
	struct event_base	*base;
	int			 replies, fds, bad;
	int			 want;
};

static void
on_burst_reply(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	struct burst_state *bs = arg;
	struct json_object *v;

	if (m == NULL || m->type != IPC_TEST_ECHO_RESULT)
		bs->bad++;
	else if (m->fd != -1) {
		/* A descriptor request: its content and a pipe come back. */
		if (!json_object_object_get_ex(m->body, "content", &v) ||
		    strncmp(json_object_get_string(v), "fd-", 3) != 0)
			bs->bad++;
		bs->fds++;
	} else if (!json_object_object_get_ex(m->body, "n", &v))
		bs->bad++;
	if (++bs->replies == bs->want)
		event_base_loopexit(bs->base, NULL);
}

/*
 * Hundreds of requests queued in one go, every seventh with a descriptor:
 * they leave several to a sendmsg and arrive several to a read on both
 * sides, and every descriptor still reaches its own frame.
 */
START_TEST(burst_of_requests_with_descriptors)
{
	struct burst_state bs = { 0 };
	struct ipc_conn *c;
	struct timeval tv = { 20, 0 };
	pid_t srv;
	int i;

	srv = spawn_server((uid_t)-1);
	bs.base = event_base_new();
	bs.want = 700;
	c = ipc_connect(bs.base, sockpath, "client", &reply_policy, NULL,
	    &bs);
	ck_assert_ptr_nonnull(c);
	for (i = 0; i < bs.want; i++) {
		struct json_object *req = NULL;
		int fd = -1;
		char tag[32];

		if (i % 7 == 3) {
			fd = memfd_create("x", MFD_CLOEXEC);
			snprintf(tag, sizeof(tag), "fd-%d", i);
			ck_assert_int_eq(write(fd, tag, strlen(tag)),
			    (ssize_t)strlen(tag));
		} else {
			req = json_object_new_object();
			json_object_object_add(req, "n",
			    json_object_new_int(i));
		}
		ck_assert_int_eq(ipc_request(c, fd != -1 ? IPC_TEST_FD :
		    IPC_TEST_ECHO, req, fd, 15000, on_burst_reply, &bs), 0);
		json_object_put(req);
	}
	event_base_loopexit(bs.base, &tv);
	event_base_dispatch(bs.base);
	ck_assert_int_eq(bs.replies, bs.want);
	ck_assert_int_eq(bs.bad, 0);
	ck_assert_int_eq(bs.fds, bs.want / 7);
	ipc_conn_free(c);
	event_base_free(bs.base);
	stop_server(srv);
}
END_TEST

START_TEST(server_refuses_to_replace_non_socket)
{
	struct event_base *base = event_base_new();
	char dir[] = "/tmp/mcpvm-ipc-XXXXXX";
	char path[128];
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_ptr_null(ipc_server_new(base, path, 0600, "server",
	    srv_accept, &srv_handlers, NULL));
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(access(path, F_OK), 0);
	unlink(path);
	rmdir(dir);
	event_base_free(base);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("ipc");
	TCase *reader = tcase_create("reader");
	TCase *live = tcase_create("live");

	log_init("test_ipc", 1, 0);
	tcase_add_test(reader, reader_byte_by_byte);
	tcase_add_test(reader, reader_empty_payload);
	tcase_add_test(reader, reader_rejects_oversize);
	tcase_add_test(reader, reader_rejects_unknown_flags);
	tcase_add_test(reader, reader_fd_must_match_flag);
	tcase_add_test(reader, reader_rejects_overfeed);
	tcase_add_test(reader, bulk_reader_several_frames_per_read);
	tcase_add_test(reader, bulk_reader_descriptor_attribution);
	tcase_add_test(reader, bulk_reader_big_frame);
	tcase_add_test(reader, frame_check_cases);
	tcase_add_test(reader, encode_scrubs_ill_formed_utf8);
	suite_add_tcase(s, reader);

	tcase_set_timeout(live, 60);
	tcase_add_test(live, sync_echo_and_fd_both_ways);
	tcase_add_loop_test(live, malformed_closes_only_that_connection, 0,
	    (int)(sizeof(malformed_cases) / sizeof(malformed_cases[0])));
	tcase_add_test(live, peer_refused_by_uid);
	tcase_add_test(live, peer_admitted_by_uid_or_group);
	tcase_add_test(live, async_requests);
	tcase_add_test(live, burst_of_requests_with_descriptors);
	tcase_add_test(live, server_refuses_to_replace_non_socket);
	suite_add_tcase(s, live);

	return check_run(s);
}
