/*
 * Benchmark: credential verifications per second over authd's real socket
 * with 1 and 8 concurrent clients, and their p50/p99 latency, against
 * 10,000 stored credentials.  Two references are measured in the same run:
 * the store lookup alone (hash + SQLite, in process) and the same frame
 * round trip against a trivial echo server on a Unix socket.
 *
 * usage: bench_authd AUTHD [requests]   (as root; starts its own authd)
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "ipc.h"
#include "store.h"

#define NCRED		10000
#define NWS		100
#define MAX_THREADS	8

static char tokens[NCRED][CRED_LEN + 1];
static int nreq = 50000;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static int
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int
read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n <= 0) {
			if (n == -1 && errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One frame: returns its type, fills body (NUL-terminated). */
static uint32_t
read_frame(int fd, char *body, size_t cap, uint32_t *id)
{
	uint32_t hdr[4];

	if (read_all(fd, hdr, sizeof(hdr)) == -1 || hdr[1] >= cap)
		die("read frame (authd.log in the bench directory says more)");
	if (read_all(fd, body, hdr[1]) == -1)
		die("read body");
	body[hdr[1]] = '\0';
	if (id != NULL)
		*id = hdr[2];
	return hdr[0];
}

static void
send_frame(int fd, uint32_t type, uint32_t id, const char *body)
{
	char buf[512];
	uint32_t hdr[4] = { type, (uint32_t)strlen(body), id, 0 };

	memcpy(buf, hdr, sizeof(hdr));
	memcpy(buf + sizeof(hdr), body, hdr[1]);
	if (write_all(fd, buf, sizeof(hdr) + hdr[1]) == -1)
		die("write frame");
}

static int
connect_to(const char *path, int hello)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char body[4096];
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -1;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		die("socket");
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
		return -1;
	if (hello) {
		send_frame(fd, IPC_HELLO, 0,
		    "{\"version\":1,\"role\":\"bench\"}");
		if (read_frame(fd, body, sizeof(body), NULL) != IPC_HELLO)
			die("hello");
	}
	return fd;
}

/* ---- the echo reference ------------------------------------------------- */

static void *
echo_thread(void *arg)
{
	int fd = *(int *)arg;
	char body[4096];
	uint32_t id, type;

	for (;;) {
		uint32_t hdr[4];

		if (read_all(fd, hdr, sizeof(hdr)) == -1)
			break;
		type = hdr[0];
		id = hdr[2];
		if (hdr[1] >= sizeof(body) || read_all(fd, body, hdr[1]) == -1)
			break;
		body[hdr[1]] = '\0';
		send_frame(fd, type + 1, id, body);
	}
	close(fd);
	return NULL;
}

/*
 * The third reference: common/ipc with a dispatch that answers every
 * verify with a fixed reply of the same shape, so the difference to authd
 * is authd's own work.
 */
static struct json_object *canned;

static void
ipc_echo_dispatch(struct ipc_conn *c, struct ipc_msg *m, void *arg)
{
	ipc_reply(c, IPC_AUTH_VERIFY_RESULT, m->id, canned, -1);
}

static const struct ipc_rule echo_rules[] = { { IPC_AUTH_VERIFY, 0 } };
static const struct ipc_policy echo_policy = { "bench", echo_rules, 1 };
static const struct ipc_handlers echo_handlers = { ipc_echo_dispatch, NULL };

static const struct ipc_policy *
ipc_echo_accept(const struct ucred *cred, void *arg)
{
	return &echo_policy;
}

static void __attribute__((noreturn))
ipc_echo_server(const char *path)
{
	struct event_base *base = event_base_new();

	canned = json_tokener_parse("{\"workspace\":\"bench-1\","
	    "\"credential_id\":\"0123456789abcdef\",\"expires_at\":0,"
	    "\"policy\":{\"network\":false,\"images\":[],\"max_vms\":2,"
	    "\"memory_mib\":1024,\"storage_gib\":10,\"max_streams\":8}}");
	if (base == NULL || canned == NULL ||
	    ipc_server_new(base, path, 0600, "bench", ipc_echo_accept,
	    &echo_handlers, NULL) == NULL)
		_exit(1);
	event_base_dispatch(base);
	_exit(0);
}

/* ---- measuring ---------------------------------------------------------- */

struct run {
	int		 fd;
	int		 n;
	unsigned int	 seed;
	double		*lat;
	int		 failures;
};

static void *
client_thread(void *arg)
{
	struct run *r = arg;
	char req[128], body[4096];

	for (int i = 0; i < r->n; i++) {
		int k = (int)(rand_r(&r->seed) % NCRED);
		uint32_t type;
		double t0;

		snprintf(req, sizeof(req), "{\"credential\":\"%.49s\"}",
		    tokens[k]);
		t0 = now();
		send_frame(r->fd, IPC_AUTH_VERIFY, (uint32_t)i + 1, req);
		type = read_frame(r->fd, body, sizeof(body), NULL);
		r->lat[i] = now() - t0;
		if (type != IPC_AUTH_VERIFY_RESULT && type != IPC_AUTH_VERIFY + 1)
			r->failures++;
	}
	return NULL;
}

/* CPU seconds (user + system) pid has used so far. */
static double
cpu_of(pid_t pid)
{
	char p[64], buf[1024], *c;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	if ((f = fopen(p, "r")) == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) == NULL) {
		fclose(f);
		return 0;
	}
	fclose(f);
	/* Fields 14 and 15, counted after the ")" that ends the name. */
	if ((c = strrchr(buf, ')')) == NULL ||
	    sscanf(c + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	    &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static pid_t server_pid;

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Runs nthreads clients on the socket; prints one line. */
static double
measure(const char *label, const char *path, int nthreads, int hello)
{
	pthread_t th[MAX_THREADS];
	struct run runs[MAX_THREADS];
	double *all, t0, secs, rate, cpu0;
	int per = nreq / nthreads, total = per * nthreads, k = 0, failures = 0;

	all = calloc((size_t)total, sizeof(double));
	for (int i = 0; i < nthreads; i++) {
		runs[i].fd = connect_to(path, hello);
		if (runs[i].fd == -1)
			die(path);
		runs[i].n = per;
		runs[i].seed = (unsigned int)(i * 7919 + 1);
		runs[i].lat = all + i * per;
		runs[i].failures = 0;
	}
	cpu0 = cpu_of(server_pid);
	t0 = now();
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, client_thread, &runs[i]);
	for (int i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		failures += runs[i].failures;
		close(runs[i].fd);
	}
	secs = now() - t0;
	(void)k;
	qsort(all, (size_t)total, sizeof(double), cmp_double);
	rate = total / secs;
	printf("%-34s %2d  %9.0f/s  p50 %7.1f us  p99 %7.1f us  "
	    "server CPU %5.1f us/op%s\n", label, nthreads, rate,
	    all[total / 2] * 1e6, all[total * 99 / 100] * 1e6,
	    (cpu_of(server_pid) - cpu0) / total * 1e6,
	    failures ? "  (FAILURES)" : "");
	free(all);
	if (failures)
		exit(1);
	return rate;
}

int
main(int argc, char **argv)
{
	char dir[] = "/tmp/bench-authd.XXXXXX";
	char path[256], conf[256], sock[256], echo_sock[256],
	    err[STORE_ERR_MAX];
	struct auth_policy defaults = { .max_vms = 2, .memory_mib = 1024,
	    .storage_gib = 10, .max_streams = 8 };
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct passwd *pw;
	struct store *st;
	pid_t pid;
	double t0, rate1, rate8, ipc1 = 0, ipc8 = 0, echo1 = 0;
	int lfd;
	FILE *f;

	if (argc < 2) {
		fprintf(stderr, "usage: bench_authd AUTHD [requests]\n");
		return 2;
	}
	if (argc > 2)
		nreq = atoi(argv[2]);
	if (nreq < 800)
		nreq = 800;
	if (geteuid() != 0 || (pw = getpwnam("mcpvm-auth")) == NULL) {
		printf("SKIP: needs root and the user mcpvm-auth\n");
		return 77;
	}
	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	chmod(dir, 0755);
	snprintf(path, sizeof(path), "%s/authd", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/authd/authd.db", dir);

	/* 10,000 credentials over 100 workspaces, through the store API. */
	t0 = now();
	if ((st = store_open(path, err, sizeof(err))) == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	/* Bulk loading only; authd itself always writes durably. */
	store_set_durable(st, 0);
	for (int i = 0; i < NCRED; i++) {
		uint8_t hash[CRED_HASH_LEN];
		struct auth_policy p;
		char ws[32];
		int created;

		snprintf(ws, sizeof(ws), "bench-%d", i % NWS);
		if (cred_generate(tokens[i]) == -1 ||
		    cred_hash(tokens[i], CRED_LEN, hash) == -1 ||
		    store_issue(st, ws, NULL, &defaults, hash, 1, 0, &created,
		    &p, err, sizeof(err)) != STORE_OK) {
			fprintf(stderr, "populate: %s\n", err);
			return 1;
		}
	}
	printf("populated %d credentials in %d workspaces in %.1f s\n",
	    NCRED, NWS, now() - t0);

	/* Reference 1: hash + SQLite lookup alone, in process. */
	t0 = now();
	for (int i = 0; i < nreq; i++) {
		uint8_t hash[CRED_HASH_LEN];
		struct store_verdict v;
		int k = (int)((unsigned int)i * 2654435761u % NCRED);

		cred_hash(tokens[k], CRED_LEN, hash);
		if (store_verify(st, hash, 2, &v, err,
		    sizeof(err)) != STORE_OK) {
			fprintf(stderr, "store_verify failed\n");
			return 1;
		}
	}
	printf("%-34s %2d  %9.0f/s\n", "reference: store lookup alone", 1,
	    nreq / (now() - t0));
	store_close(st);
	/* authd opens it as its own user. */
	snprintf(conf, sizeof(conf), "%s/authd", dir);
	if (chown(conf, pw->pw_uid, pw->pw_gid) == -1)
		die(conf);
	for (int i = 0; i < 3; i++) {
		static const char *const sfx[] = { "", "-wal", "-shm" };
		char p[300];

		snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
		if (chown(p, pw->pw_uid, pw->pw_gid) == -1 && errno != ENOENT)
			die(p);
	}

	/* Reference 2: the same frames echoed by a trivial server. */
	snprintf(echo_sock, sizeof(echo_sock), "%s/echo.sock", dir);
	if (strlen(echo_sock) >= sizeof(sun.sun_path))
		die("echo socket path too long");
	memcpy(sun.sun_path, echo_sock, strlen(echo_sock) + 1);
	if ((lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    listen(lfd, 16) == -1)
		die("echo socket");
	{
		pthread_t th[MAX_THREADS + 1];
		int fds[MAX_THREADS + 1];
		int nth = 0;
		pid_t epid = fork();

		if (epid == 0) {
			/* A separate process, as authd is. */
			for (;;) {
				int c = accept(lfd, NULL, NULL);

				if (c == -1)
					_exit(0);
				fds[nth] = c;
				pthread_create(&th[nth], NULL, echo_thread,
				    &fds[nth]);
				pthread_detach(th[nth]);
				if (++nth > MAX_THREADS)
					nth = 0;
			}
		}
		close(lfd);
		server_pid = epid;
		echo1 = measure("reference: echo over Unix socket",
		    echo_sock, 1, 0);
		measure("reference: echo over Unix socket", echo_sock, 8, 0);
		kill(epid, SIGKILL);
		waitpid(epid, NULL, 0);
	}

	snprintf(echo_sock, sizeof(echo_sock), "%s/ipc-echo.sock", dir);
	if ((pid = fork()) == 0)
		ipc_echo_server(echo_sock);
	for (int i = 0; i < 500; i++) {
		int fd = connect_to(echo_sock, 0);

		if (fd != -1) {
			close(fd);
			break;
		}
		usleep(10000);
	}
	server_pid = pid;
	ipc1 = measure("reference: common/ipc canned reply", echo_sock, 1, 1);
	ipc8 = measure("reference: common/ipc canned reply", echo_sock, 8, 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	/* The real thing. */
	snprintf(sock, sizeof(sock), "%s/authd.sock", dir);
	snprintf(conf, sizeof(conf), "%s/mcpvm.conf", dir);
	if ((f = fopen(conf, "w")) == NULL)
		die(conf);
	fprintf(f, "[paths]\nruntime_dir = %s\nstate_dir = %s\n[authd]\n"
	    "peers = root\n", dir, dir);
	fclose(f);
	if ((pid = fork()) == 0) {
		char logp[300];
		int logfd;

		snprintf(logp, sizeof(logp), "%s/authd.log", dir);
		if ((logfd = open(logp, O_WRONLY | O_CREAT, 0600)) != -1)
			dup2(logfd, STDERR_FILENO);
		execl(argv[1], "authd", "-d", "-f", conf, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		int fd = connect_to(sock, 0);

		if (fd != -1) {
			close(fd);
			break;
		}
		usleep(10000);
	}
	server_pid = pid;
	/* Cold: each credential once, so every answer comes from SQLite. */
	{
		int fd = connect_to(sock, 1);
		char req[128], body[4096];
		double cpu0 = cpu_of(pid), c0 = now(), secs;

		for (int i = 0; i < NCRED; i++) {
			snprintf(req, sizeof(req), "{\"credential\":\"%.49s\"}",
			    tokens[i]);
			send_frame(fd, IPC_AUTH_VERIFY, (uint32_t)i + 1, req);
			if (read_frame(fd, body, sizeof(body), NULL) !=
			    IPC_AUTH_VERIFY_RESULT)
				die("cold verify");
		}
		secs = now() - c0;
		printf("%-34s %2d  %9.0f/s  %36s %5.1f us/op\n",
		    "authd verify, cold (SQLite)", 1, NCRED / secs,
		    "server CPU", (cpu_of(pid) - cpu0) / NCRED * 1e6);
		close(fd);
	}
	rate1 = measure("authd verify", sock, 1, 1);
	rate8 = measure("authd verify", sock, 8, 1);
	/* Rows for tests/bench/run: figure, unit, reference, its figure. */
	printf("BENCH\tauthd verify, 1 client\t%.0f\tper s\t"
	    "common/ipc canned reply, 1 client\t%.0f\n", rate1, ipc1);
	printf("BENCH\tauthd verify, 8 clients\t%.0f\tper s\t"
	    "common/ipc canned reply, 8 clients\t%.0f\n", rate8, ipc8);
	printf("BENCH\tcommon/ipc canned reply, 1 client\t%.0f\tper s\t"
	    "echo over a Unix socket, 1 client\t%.0f\n", ipc1, echo1);
	printf("goal: >= 20000 verifications/s from one client: %s\n",
	    rate1 >= 20000 ? "met" : "NOT met");
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	if (getenv("BENCH_KEEP") != NULL) {
		printf("kept %s\n", dir);
		return 0;
	}
	snprintf(conf, sizeof(conf), "rm -rf '%s'", dir);
	if (system(conf) != 0)
		fprintf(stderr, "cleanup of %s failed\n", dir);
	return 0;
}
