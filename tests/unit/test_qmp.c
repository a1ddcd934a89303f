/*
 * Unit tests for vmproxy/qmp.c: the bounded QMP parser, and the client
 * against scripted fake QEMUs (forked children on a real Unix socket):
 * handshake, replies by id, events, an fd passed with getfd, timeouts,
 * oversized or malformed messages, QEMU going away, freeing from inside a
 * callback.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "log.h"
#include "qmp.h"
#include "../check_run.h"

/* ---------- parser ---------- */

static int
parse(const char *s, struct qmp_msg *m, char *err)
{
	return qmp_parse(s, strlen(s), m, err, 256);
}

START_TEST(parses_the_four_kinds)
{
	struct qmp_msg m;
	char err[256];

	ck_assert_int_eq(parse("{\"QMP\": {\"version\": {}, \"capabilities\": "
	    "[]}}\r", &m, err), 0);
	ck_assert_int_eq(m.kind, QMP_GREETING);
	qmp_msg_free(&m);
	ck_assert_int_eq(parse("{\"return\": {\"status\": \"running\"}, "
	    "\"id\": 42}", &m, err), 0);
	ck_assert_int_eq(m.kind, QMP_RETURN);
	ck_assert(m.has_id);
	ck_assert_uint_eq(m.id, 42);
	ck_assert(json_object_is_type(m.ret, json_type_object));
	qmp_msg_free(&m);
	ck_assert_int_eq(parse("{\"error\": {\"class\": \"GenericError\", "
	    "\"desc\": \"no\"}, \"id\": 3}", &m, err), 0);
	ck_assert_int_eq(m.kind, QMP_ERROR);
	ck_assert_str_eq(m.err_class, "GenericError");
	ck_assert_str_eq(m.err_desc, "no");
	qmp_msg_free(&m);
	ck_assert_int_eq(parse("{\"timestamp\": {\"seconds\": 1}, \"event\": "
	    "\"STOP\"}", &m, err), 0);
	ck_assert_int_eq(m.kind, QMP_EVENT);
	ck_assert_str_eq(m.event, "STOP");
	ck_assert_ptr_null(m.data);
	qmp_msg_free(&m);
	ck_assert_int_eq(parse("{\"event\": \"MIGRATION\", \"data\": "
	    "{\"status\": \"completed\"}}", &m, err), 0);
	ck_assert_ptr_nonnull(m.data);
	qmp_msg_free(&m);
}
END_TEST

START_TEST(rejects_malformed_and_mistyped)
{
	static const char *bad[] = {
		"",
		"[]",
		"\"return\"",
		"{\"return\": 1",			/* truncated */
		"{\"return\": {}} x",			/* trailing bytes */
		"{}",					/* no kind */
		"{\"return\": {}, \"event\": \"STOP\"}",	/* two kinds */
		"{\"error\": \"bad\"}",
		"{\"error\": {\"class\": 1, \"desc\": \"x\"}}",
		"{\"error\": {\"class\": \"X\"}}",
		"{\"event\": 7}",
		"{\"event\": \"STOP\", \"data\": []}",
		"{\"QMP\": 1}",
		"{\"return\": {}, \"id\": \"abc\"}",
		"{\"return\": {}, \"id\": -1}",
		"{\"return\": {}, \"id\": 1.5}",
		"{\"return\": tru}",
	};
	struct qmp_msg m;
	char err[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_msg(parse(bad[i], &m, err) == -1, "accepted %s",
		    bad[i]);
		ck_assert_msg(err[0] != '\0', "no reason for %s", bad[i]);
		ck_assert_ptr_null(m.root);
	}
}
END_TEST

START_TEST(bounds_depth_and_size)
{
	char deep[256], err[256], *big;
	struct qmp_msg m;
	int i, n = 0;

	n += sprintf(deep + n, "{\"return\": ");
	for (i = 0; i < 40; i++)
		deep[n++] = '[';
	for (i = 0; i < 40; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	deep[n] = '\0';
	ck_assert_int_eq(parse(deep, &m, err), -1);
	ck_assert_msg(strstr(err, "deeper") != NULL, "%s", err);

	big = malloc(QMP_MSG_MAX + 64);
	ck_assert_ptr_nonnull(big);
	n = sprintf(big, "{\"return\": \"");
	memset(big + n, 'a', QMP_MSG_MAX);
	strcpy(big + n + QMP_MSG_MAX, "\"}");
	ck_assert_int_eq(qmp_parse(big, strlen(big), &m, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "limit") != NULL, "%s", err);
	free(big);
}
END_TEST

/* ---------- client against fake QEMUs ---------- */

static char dir[] = "/tmp/mcpvm-qmp-XXXXXX";
static char sock[256];
static struct event_base *base;

static void
setup(void)
{
	log_init("test_qmp", 1, 0);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/qmp.sock", dir);
	base = event_base_new();
	signal(SIGPIPE, SIG_IGN);
}

static void
teardown(void)
{
	event_base_free(base);
	unlink(sock);
	rmdir(dir);
}

/* The fake QEMU's side: blocking, one client. */
static FILE *srv_in;
static int srv_fd;

static void
srv_send(const char *s)
{
	(void)!write(srv_fd, s, strlen(s));
}

/* Reads one command line; returns its id (-1 on EOF). */
static long
srv_cmd(char *cmd, size_t len)
{
	char line[4096];
	struct json_object *o, *v;
	long id;

	if (fgets(line, sizeof(line), srv_in) == NULL)
		return -1;
	o = json_tokener_parse(line);
	if (o == NULL || !json_object_object_get_ex(o, "execute", &v))
		_exit(90);
	snprintf(cmd, len, "%s", json_object_get_string(v));
	if (!json_object_object_get_ex(o, "id", &v))
		_exit(91);
	id = (long)json_object_get_int64(v);
	json_object_put(o);
	return id;
}

static void
srv_handshake(void)
{
	char cmd[64], reply[128];
	long id;

	srv_send("{\"QMP\": {\"version\": {\"qemu\": {\"major\": 7}}, "
	    "\"capabilities\": [\"oob\"]}}\r\n");
	id = srv_cmd(cmd, sizeof(cmd));
	if (strcmp(cmd, "qmp_capabilities") != 0)
		_exit(92);
	snprintf(reply, sizeof(reply), "{\"return\": {}, \"id\": %ld}\r\n", id);
	srv_send(reply);
}

/* Forks a fake QEMU listening on sock and running script. */
static pid_t
fake_qemu(void (*script)(void))
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int l;
	pid_t pid;

	strcpy(sun.sun_path, sock);
	unlink(sock);
	l = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sun, sizeof(sun)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	if ((pid = fork()) == 0) {
		srv_fd = accept(l, NULL, NULL);
		srv_in = fdopen(dup(srv_fd), "r");
		script();
		_exit(0);
	}
	close(l);
	return pid;
}

static int
wait_child(pid_t pid)
{
	int st;

	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

struct ctx {
	int	ready, closed, events, replies;
	char	why[512];
	char	last_event[64];
	char	err_class[64], err_desc[256];
	int	ok;
	int	free_in_cb;
	struct qmp *q;
};

static void
c_ready(struct qmp *q, void *arg)
{
	((struct ctx *)arg)->ready = 1;
}

static void
c_event(struct qmp *q, const char *name, struct json_object *data, void *arg)
{
	struct ctx *c = arg;

	c->events++;
	snprintf(c->last_event, sizeof(c->last_event), "%s", name);
}

static void
c_closed(struct qmp *q, const char *why, void *arg)
{
	struct ctx *c = arg;

	c->closed = 1;
	snprintf(c->why, sizeof(c->why), "%s", why);
}

static const struct qmp_cbs cbs = { c_ready, c_event, c_closed };

static void
c_reply(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct ctx *c = arg;

	c->replies++;
	c->ok = r->ok;
	if (!r->ok) {
		snprintf(c->err_class, sizeof(c->err_class), "%s", r->err_class);
		snprintf(c->err_desc, sizeof(c->err_desc), "%s", r->err_desc);
	}
	if (c->free_in_cb) {
		qmp_free(q);
		c->q = NULL;
	}
}

static void
tick(evutil_socket_t fd, short what, void *arg)
{
}

static void
run_until(const int *flag, int ms)
{
	struct timeval tv = { 0, 10000 };
	struct timespec t0, t;
	struct event *ev = event_new(base, -1, EV_PERSIST, tick, NULL);

	event_add(ev, &tv);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		event_base_loop(base, EVLOOP_ONCE);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!*flag && (t.tv_sec - t0.tv_sec) * 1000 +
	    (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	event_free(ev);
}

static void
script_commands(void)
{
	char cmd[64], reply[256];
	long a, b;

	srv_handshake();
	a = srv_cmd(cmd, sizeof(cmd));		/* query-status */
	b = srv_cmd(cmd, sizeof(cmd));		/* bogus */
	srv_send("{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, "
	    "\"event\": \"STOP\"}\r\n");
	/* Answer out of order: ids must match the commands anyway. */
	snprintf(reply, sizeof(reply), "{\"id\": %ld, \"error\": {\"class\": "
	    "\"CommandNotFound\", \"desc\": \"The command bogus has not been "
	    "found\"}}\r\n", b);
	srv_send(reply);
	snprintf(reply, sizeof(reply), "{\"return\": {\"status\": \"paused\", "
	    "\"running\": false}, \"id\": %ld}\r\n", a);
	srv_send(reply);
	if (srv_cmd(cmd, sizeof(cmd)) != -1)
		_exit(93);
}

static struct ctx st_ctx, bogus_ctx;

static void
status_reply(struct qmp *q, const struct qmp_reply *r, void *arg)
{
	struct json_object *s;

	ck_assert(r->ok);
	ck_assert(json_object_object_get_ex(r->ret, "status", &s));
	ck_assert_str_eq(json_object_get_string(s), "paused");
	st_ctx.replies++;
}

START_TEST(handshake_commands_events)
{
	struct ctx c = { 0 };
	struct qmp *q;
	pid_t pid = fake_qemu(script_commands);

	memset(&st_ctx, 0, sizeof(st_ctx));
	memset(&bogus_ctx, 0, sizeof(bogus_ctx));
	q = qmp_open(base, sock, 2000, &cbs, &c);
	ck_assert_ptr_nonnull(q);
	/* Queued before the handshake: sent after qmp_capabilities. */
	ck_assert_int_eq(qmp_command(q, "query-status", NULL, -1, 2000,
	    status_reply, NULL), 0);
	ck_assert_int_eq(qmp_command(q, "bogus", NULL, -1, 2000, c_reply,
	    &bogus_ctx), 0);
	run_until(&st_ctx.replies, 3000);
	ck_assert(c.ready);
	ck_assert_int_eq(st_ctx.replies, 1);
	ck_assert_int_eq(bogus_ctx.replies, 1);
	ck_assert_int_eq(bogus_ctx.ok, 0);
	ck_assert_str_eq(bogus_ctx.err_class, "CommandNotFound");
	ck_assert_int_eq(c.events, 1);
	ck_assert_str_eq(c.last_event, "STOP");
	qmp_free(q);
	ck_assert_int_eq(wait_child(pid), 0);
}
END_TEST

static void
script_getfd(void)
{
	char buf[4096], reply[128], *nl;
	struct msghdr mh = { 0 };
	struct iovec iov = { buf, sizeof(buf) - 1 };
	union {
		struct cmsghdr hdr;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct cmsghdr *ch;
	struct stat a, b;
	struct json_object *o, *v;
	ssize_t n;
	int fd = -1;

	srv_handshake();
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.b;
	mh.msg_controllen = sizeof(cm.b);
	/* The buffered FILE has not read past the caps line: QMP waits. */
	n = recvmsg(srv_fd, &mh, 0);
	if (n <= 0)
		_exit(94);
	buf[n] = '\0';
	for (ch = CMSG_FIRSTHDR(&mh); ch != NULL; ch = CMSG_NXTHDR(&mh, ch))
		if (ch->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(ch), sizeof(int));
	if (fd == -1)
		_exit(95);
	/* It is the very file the test opened. */
	if (fstat(fd, &a) == -1 || stat("/proc/self/exe", &b) == -1 ||
	    a.st_ino != b.st_ino || a.st_dev != b.st_dev)
		_exit(96);
	if ((nl = strchr(buf, '\n')) != NULL)
		*nl = '\0';
	o = json_tokener_parse(buf);
	if (o == NULL || !json_object_object_get_ex(o, "execute", &v) ||
	    strcmp(json_object_get_string(v), "getfd") != 0)
		_exit(97);
	json_object_object_get_ex(o, "id", &v);
	snprintf(reply, sizeof(reply), "{\"return\": {}, \"id\": %ld}\r\n",
	    (long)json_object_get_int64(v));
	srv_send(reply);
	_exit(0);
}

START_TEST(getfd_passes_descriptor)
{
	struct ctx c = { 0 }, r = { 0 };
	struct json_object *args;
	struct qmp *q;
	pid_t pid = fake_qemu(script_getfd);
	int fd = open("/proc/self/exe", O_RDONLY);

	q = qmp_open(base, sock, 2000, &cbs, &c);
	run_until(&c.ready, 3000);
	ck_assert(c.ready);
	args = json_object_new_object();
	json_object_object_add(args, "fdname", json_object_new_string("x"));
	ck_assert_int_eq(qmp_command(q, "getfd", args, fd, 2000, c_reply, &r),
	    0);
	run_until(&r.replies, 3000);
	ck_assert_int_eq(r.replies, 1);
	ck_assert(r.ok);
	/* The caller's descriptor stays open. */
	ck_assert_int_ne(fcntl(fd, F_GETFD), -1);
	close(fd);
	qmp_free(q);
	ck_assert_int_eq(wait_child(pid), 0);
}
END_TEST

static void
script_silent(void)
{
	char cmd[64];

	srv_handshake();
	srv_cmd(cmd, sizeof(cmd));
	sleep(3);
}

START_TEST(command_times_out)
{
	struct ctx c = { 0 }, r = { 0 };
	struct qmp *q;
	pid_t pid = fake_qemu(script_silent);

	q = qmp_open(base, sock, 2000, &cbs, &c);
	ck_assert_int_eq(qmp_command(q, "query-status", NULL, -1, 200, c_reply,
	    &r), 0);
	run_until(&r.replies, 3000);
	ck_assert_int_eq(r.replies, 1);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_str_eq(r.err_class, "timeout");
	ck_assert_msg(strstr(r.err_desc, "query-status") != NULL, "%s",
	    r.err_desc);
	qmp_free(q);
	kill(pid, SIGKILL);
	wait_child(pid);
}
END_TEST

static void
script_huge(void)
{
	char cmd[64], chunk[65536];
	int i;

	srv_handshake();
	srv_cmd(cmd, sizeof(cmd));
	memset(chunk, 'x', sizeof(chunk));
	srv_send("{\"return\": \"");
	/* No newline, ever: the client must give up, not grow forever. */
	for (i = 0; i < 64; i++)
		if (write(srv_fd, chunk, sizeof(chunk)) <= 0)
			break;
}

START_TEST(oversized_message_closes_connection)
{
	struct ctx c = { 0 }, r = { 0 };
	struct qmp *q;
	pid_t pid = fake_qemu(script_huge);

	q = qmp_open(base, sock, 2000, &cbs, &c);
	qmp_command(q, "query-status", NULL, -1, 5000, c_reply, &r);
	run_until(&c.closed, 5000);
	ck_assert(c.closed);
	ck_assert_msg(strstr(c.why, "limit") != NULL, "%s", c.why);
	ck_assert_int_eq(r.replies, 1);
	ck_assert_str_eq(r.err_class, "disconnected");
	ck_assert_int_eq(qmp_command(q, "cont", NULL, -1, 100, NULL, NULL),
	    -1);
	qmp_free(q);
	wait_child(pid);
}
END_TEST

static void
script_garbage(void)
{
	char cmd[64];

	srv_handshake();
	srv_cmd(cmd, sizeof(cmd));
	srv_send("{\"return\": {}, \"id\": \"not ours\"}\r\n");
	sleep(1);
}

START_TEST(malformed_reply_closes_connection)
{
	struct ctx c = { 0 }, r = { 0 };
	struct qmp *q;
	pid_t pid = fake_qemu(script_garbage);

	q = qmp_open(base, sock, 2000, &cbs, &c);
	qmp_command(q, "query-status", NULL, -1, 5000, c_reply, &r);
	run_until(&c.closed, 5000);
	ck_assert_msg(strstr(c.why, "malformed") != NULL, "%s", c.why);
	ck_assert_str_eq(r.err_class, "disconnected");
	qmp_free(q);
	wait_child(pid);
}
END_TEST

static void
script_vanish(void)
{
	char cmd[64];

	srv_handshake();
	srv_cmd(cmd, sizeof(cmd));
	_exit(0);
}

START_TEST(qemu_going_away_fails_pending)
{
	struct ctx c = { 0 }, r1 = { 0 }, r2 = { 0 };
	struct qmp *q;
	pid_t pid = fake_qemu(script_vanish);

	q = qmp_open(base, sock, 2000, &cbs, &c);
	qmp_command(q, "stop", NULL, -1, 5000, c_reply, &r1);
	/* The first callback frees the client: the second must not run. */
	r1.free_in_cb = 1;
	qmp_command(q, "cont", NULL, -1, 5000, c_reply, &r2);
	run_until(&r1.replies, 5000);
	ck_assert_int_eq(r1.replies, 1);
	ck_assert_str_eq(r1.err_class, "disconnected");
	ck_assert_msg(strstr(r1.err_desc, "closed") != NULL, "%s",
	    r1.err_desc);
	/* Let the loop spin: nothing more may arrive. */
	{
		struct timeval tv = { 0, 100000 };

		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	ck_assert_int_eq(r2.replies, 0);
	ck_assert_int_eq(c.closed, 0);
	wait_child(pid);
}
END_TEST

START_TEST(connect_gives_up)
{
	struct ctx c = { 0 };
	struct qmp *q;

	unlink(sock);
	q = qmp_open(base, sock, 150, &cbs, &c);
	run_until(&c.closed, 3000);
	ck_assert(c.closed);
	ck_assert_msg(strstr(c.why, "gave up") != NULL, "%s", c.why);
	qmp_free(q);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("qmp");
	TCase *tp = tcase_create("parse");
	TCase *tc = tcase_create("client");

	tcase_add_test(tp, parses_the_four_kinds);
	tcase_add_test(tp, rejects_malformed_and_mistyped);
	tcase_add_test(tp, bounds_depth_and_size);
	suite_add_tcase(s, tp);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, handshake_commands_events);
	tcase_add_test(tc, getfd_passes_descriptor);
	tcase_add_test(tc, command_times_out);
	tcase_add_test(tc, oversized_message_closes_connection);
	tcase_add_test(tc, malformed_reply_closes_connection);
	tcase_add_test(tc, qemu_going_away_fails_pending);
	tcase_add_test(tc, connect_gives_up);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
