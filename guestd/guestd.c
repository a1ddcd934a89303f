/*
 * guestd: PID 1 (stage two) of every mcpvm guest, or a plain process under a
 * test harness (--no-init).  Owns the event loop and the link to the host:
 * opens it, re-opens it after every drop, and feeds it to glink.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include "guestd.h"
#include "log.h"

/*
 * The contract: whom guestd serves, what each may send, what it keeps.
 *
 *   peer       channel                        admitted
 *   the host   the link: virtio-serial port   whoever holds the port
 *   (vmproxy)  GUEST_VIRTIO_PORT, or vsock    (QEMU's chardev); on vsock
 *              GUEST_VSOCK_PORT; a test's     only a connection from
 *              --link-fd, --link-unix or      VMADDR_CID_HOST to the link
 *              --link-dev                     port (vsockpeer.c), the
 *                                             newest one winning
 *   jobs       each job's stdin, stdout and   the children guestd forked
 *              stderr pipes (jobs.c)
 *   a guest    127.0.0.1:<port>, connected    any program listening there
 *   program    to on the host's OPEN
 *              (streams.c)
 *   a broker   a SEQPACKET socketpair to      its own child; it passes on
 *   relay      guestd (broker.c)              only peers in its job's
 *                                             cgroup (broker_relay.c)
 *
 * The host's frames (proto/guest.h) are parsed by common/glink.c and
 * handed out by frame_cb below: CTRL requests to guestd_dispatch_host
 * (ctrl.c), which decodes each one with req_decode (request.c, every
 * field checked, fuzzed) and switches on its op: ping, hello, clock_set,
 * thaw, freeze, activity and shutdown in ctrl.c; exec, job_status,
 * job_output, job_cancel in jobs.c; file_read, file_write in files.c;
 * identity in identity.c.  OPEN goes to streams_open, every other stream
 * frame to streams_frame (streams.c).  A frame out of protocol, or a
 * request without a usable id or op, drops the link, which is opened
 * again; a bad argument gets an invalid_argument reply.  guestd sends
 * the host replies in request order, the "hello" event after each
 * (re)connect, stream frames, and ACCEPT for each broker connection it
 * takes.  A broker relay sends guestd a preamble and one descriptor a
 * message (broker_ctl_io, broker.c); anything else is dropped.
 *
 * What it keeps: the jobs (at most GUEST_MAX_JOBS, with their output,
 * jobs.c) and their broker relays, which outlive a link drop; the open
 * streams, which do not; the boot id that hello reports.  On disk only
 * what the identity op writes (/etc/machine-id, /etc/hostname, a boot id
 * under /run) and the files file_write writes beneath the workspace.
 *
 * Capabilities: all of root's, as PID 1 of the guest must have to mount
 * the API filesystems, set the clock and eth0, reseed the RNG, run the
 * job cgroups and power off (init.c, identity.c, jobs.c).  What runs
 * for others drops them: a job does setgroups, setresgid and setresuid
 * to the workspace user, then NoNewPrivs, and checks that uid 0 cannot
 * come back (jobs.c); file_read and file_write act with that user's
 * filesystem uid and gid (files.c); a broker relay runs as
 * BROKER_RELAY_UID, NoNewPrivs and not dumpable (broker_relay.c).
 *
 * Seccomp: none.  guestd is PID 1 in a VM its tenant owns, and nothing
 * on the host trusts it (vmproxy alone parses its bytes); and a filter
 * installed here would be inherited by every job it forks, which runs
 * whatever its command runs.
 */

/*
 * A port that is closed, or has no host on it, is tried again after
 * LINK_RETRY_FIRST_MS, doubling up to LINK_RETRY_MS.  After a restore the
 * host side is new and connects within milliseconds; a guest that waited
 * the whole LINK_RETRY_MS would hold up the restored VM's first hello.
 */
#define LINK_RETRY_FIRST_MS	5
#define LINK_RETRY_MS		200
#define MAX_PFDS	2048

struct guestd_opts opts = {
	.link_fd = -1,
	.workspace = "/workspace",
	.cgroup = "/sys/fs/cgroup",
	.home = "/home/dev",
	.uid = GUEST_UID,
	.gid = GUEST_GID,
	.cmdline = "/proc/cmdline",
};

struct glink *gl;
unsigned loop_gen;

static struct pollfd pfds[MAX_PFDS];
static struct {
	loop_cb	 cb;
	void	*arg;
}	 pcbs[MAX_PFDS];
static int npfds;
static int64_t loop_wait_ms;

static int link_fd = -1;	/* the connected transport */
static int link_up;
static int listen_fd = -1;	/* vsock listener */
static int64_t link_retry_at;
static int64_t link_retry_ms = LINK_RETRY_FIRST_MS;
static char boot_id[64];
static int shutting_down;

int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void
loop_add(int fd, short events, loop_cb cb, void *arg)
{
	if (npfds == MAX_PFDS) {
		log_warnx("loop: more than %d descriptors", MAX_PFDS);
		return;
	}
	pfds[npfds].fd = fd;
	pfds[npfds].events = events;
	pfds[npfds].revents = 0;
	pcbs[npfds].cb = cb;
	pcbs[npfds].arg = arg;
	npfds++;
}

void
loop_timeout(int64_t ms)
{
	if (ms < 0)
		ms = 0;
	if (loop_wait_ms < 0 || ms < loop_wait_ms)
		loop_wait_ms = ms;
}

int
link_is_up(void)
{
	return link_up;
}

void
link_reply(struct json_object *o, const void *body, size_t body_len)
{
	static int fallback;
	struct json_object *id;

	if (o == NULL)
		return;
	if (link_up && glink_send_json(gl, o, body, body_len) == -1) {
		log_warnx("link: %s", glink_error(gl));
		/* The host must never wait for an answer that is not coming. */
		if (!fallback && json_object_object_get_ex(o, "id", &id)) {
			fallback = 1;
			link_reply(reply_error((uint32_t)json_object_get_int64(
			    id), "internal", "reply did not fit the link"),
			    NULL, 0);
			fallback = 0;
		}
	}
	json_object_put(o);
}

/* Fills in what hello says, as an event or as a reply. */
void
guestd_hello(struct json_object *o)
{
	json_object_object_add(o, "version",
	    json_object_new_int(GLINK_VERSION));
	json_object_object_add(o, "boot_id", json_object_new_string(boot_id));
	json_object_object_add(o, "jobs", json_object_new_int(jobs_count()));
}

void
guestd_set_boot_id(const char *id)
{
	snprintf(boot_id, sizeof(boot_id), "%s", id);
}

static void
send_hello(void)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "event", json_object_new_string("hello"));
	guestd_hello(o);
	link_reply(o, NULL, 0);
}

static void
link_set_up(int fd)
{
	link_fd = fd;
	link_up = 1;
	link_retry_ms = LINK_RETRY_FIRST_MS;
	glink_reset(gl);
	log_info("link: up");
	send_hello();
}

/* The transport is gone or the host broke a rule: forget it, re-open. */
static void
link_drop(const char *why)
{
	if (link_fd == -1)
		return;
	log_info("link: down (%s)", why);
	streams_reset();
	glink_reset(gl);
	close(link_fd);
	link_fd = -1;
	link_up = 0;
	loop_gen++;
	if (opts.link_fd != -1) {
		/* A harness-provided descriptor cannot be re-opened. */
		if (!opts.init) {
			jobs_shutdown();
			exit(0);
		}
	}
	link_retry_at = now_ns() + link_retry_ms * 1000000;
}

static int
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl == -1 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Without udev, the port is found by its name in sysfs. */
static int
find_virtio_port(char *path, size_t len)
{
	DIR *d;
	struct dirent *de;
	char p[PATH_MAX], name[128];
	int found = 0;

	snprintf(path, len, "/dev/virtio-ports/%s", GUEST_VIRTIO_PORT);
	if (access(path, F_OK) == 0)
		return 0;
	if ((d = opendir("/sys/class/virtio-ports")) == NULL)
		return -1;
	while (!found && (de = readdir(d)) != NULL) {
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/sys/class/virtio-ports/%s/name",
		    de->d_name);
		if ((f = fopen(p, "re")) == NULL)
			continue;
		if (fgets(name, sizeof(name), f) != NULL) {
			name[strcspn(name, "\n")] = '\0';
			if (strcmp(name, GUEST_VIRTIO_PORT) == 0) {
				snprintf(path, len, "/dev/%s", de->d_name);
				found = 1;
			}
		}
		fclose(f);
	}
	closedir(d);
	return found ? 0 : -1;
}

static void
link_try_open(void)
{
	struct sockaddr_un sun;
	struct pollfd p;
	char path[PATH_MAX];
	int fd;

	if (opts.link_unix != NULL) {
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		strncpy(sun.sun_path, opts.link_unix, sizeof(sun.sun_path) - 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd == -1)
			return;
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
		    set_nonblock(fd) == -1) {
			close(fd);
			return;
		}
		link_set_up(fd);
		return;
	}
	if (opts.link_dev != NULL)
		snprintf(path, sizeof(path), "%s", opts.link_dev);
	else if (find_virtio_port(path, sizeof(path)) == -1)
		return;
	if ((fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)) == -1)
		return;
	/* POLLHUP: no host side yet.  Writes would block; wait for it. */
	p.fd = fd;
	p.events = POLLIN | POLLOUT;
	if (poll(&p, 1, 0) == -1 || (p.revents & (POLLHUP | POLLERR))) {
		close(fd);
		return;
	}
	link_set_up(fd);
}

static int
frame_cb(struct glink *l, const struct glink_frame *f, void *arg)
{
	switch (f->type) {
	case GLINK_CTRL:
		return guestd_dispatch_host(f->data, f->len, f->body,
		    f->body_len, (f->flags & GLINK_F_BODY) != 0);
	case GLINK_OPEN:
		streams_open(f->channel, (uint32_t)f->data[0] |
		    (uint32_t)f->data[1] << 8);
		return 0;
	default:
		streams_frame(f);
		return 0;
	}
}

static void
link_io(int fd, short revents, void *arg)
{
	static uint8_t buf[65536];
	ssize_t n;

	if (revents & POLLIN) {
		n = read(fd, buf, sizeof(buf));
		if (n == 0) {
			link_drop("end of stream");
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			link_drop(strerror(errno));
			return;
		}
		if (glink_feed(gl, buf, (size_t)n, frame_cb, NULL) == -1) {
			if (link_fd == -1)
				return;
			log_warnx("link: host broke the protocol: %s",
			    glink_error(gl));
			link_drop("protocol violation");
			return;
		}
	} else if (revents & (POLLHUP | POLLERR | POLLNVAL)) {
		link_drop("host disconnected");
		return;
	}
	if ((revents & POLLOUT) && link_fd != -1 &&
	    glink_flush(gl, link_fd) == -1)
		link_drop(strerror(errno));
}

static void
listen_io(int fd, short revents, void *arg)
{
	struct sockaddr_vm peer, local;
	socklen_t plen = sizeof(peer), llen = sizeof(local);
	int c;

	memset(&peer, 0, sizeof(peer));
	memset(&local, 0, sizeof(local));
	if ((c = accept4(fd, (struct sockaddr *)&peer, &plen,
	    SOCK_NONBLOCK | SOCK_CLOEXEC)) == -1)
		return;
	/*
	 * A guest program may connect too; only the host is the link, and
	 * it must not cost the host's link.
	 */
	if (getsockname(c, (struct sockaddr *)&local, &llen) == -1 ||
	    !vsock_peer_is_host((struct sockaddr *)&peer, plen,
	    (struct sockaddr *)&local, llen)) {
		log_warnx("link: refused a vsock connection from cid %u "
		    "port %u: not the host", peer.svm_cid, peer.svm_port);
		close(c);
		return;
	}
	/* A new connection from the host means its old one is gone. */
	if (link_fd != -1)
		link_drop("host reconnected");
	link_set_up(c);
}

static int
vsock_listen(void)
{
	struct sockaddr_vm svm;
	int fd;

	if ((fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return -1;
	memset(&svm, 0, sizeof(svm));
	svm.svm_family = AF_VSOCK;
	svm.svm_port = GUEST_VSOCK_PORT;
	svm.svm_cid = VMADDR_CID_ANY;
	if (bind(fd, (struct sockaddr *)&svm, sizeof(svm)) == -1 ||
	    listen(fd, 4) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

static void
link_poll(void)
{
	int64_t now;

	if (listen_fd != -1)
		loop_add(listen_fd, POLLIN, listen_io, NULL);
	/* Connect-style transports are retried; vsock waits for the host. */
	if (link_fd == -1 && opts.link_fd == -1 && !opts.link_vsock) {
		now = now_ns();
		if (now >= link_retry_at) {
			link_try_open();
			link_retry_at = now + link_retry_ms * 1000000;
			if ((link_retry_ms *= 2) > LINK_RETRY_MS)
				link_retry_ms = LINK_RETRY_MS;
		}
		if (link_fd == -1)
			loop_timeout((link_retry_at - now) / 1000000 + 1);
	}
	if (link_fd != -1)
		loop_add(link_fd, POLLIN | (glink_out_pending(gl) > 0 ?
		    POLLOUT : 0), link_io, NULL);
}

static void
signal_io(int fd, short revents, void *arg)
{
	struct signalfd_siginfo si;
	int status;
	pid_t pid;

	while (read(fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			continue;
		if (opts.init)
			continue;	/* PID 1 ends only by "shutdown" */
		log_info("signal %u: exiting", si.ssi_signo);
		shutting_down = 1;
	}
	/* PID 1 (or a subreaper) inherits every orphan: reap them all. */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		jobs_reaped(pid, status);
}

static __attribute__((noreturn)) void
usage(void)
{
	fprintf(stderr, "usage: guestd [--no-init] [--link-fd N | --link-unix "
	    "PATH | --link-dev PATH | --link-vsock]\n"
	    "\t[--workspace DIR] [--cgroup DIR] [--home DIR] [--uid N] "
	    "[--gid N] [--lo] [--cmdline FILE] [-v]\n");
	exit(2);
}

static long
num_arg(const char *s, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s || v < 0 || v > max)
		usage();
	return v;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "no-init", no_argument, NULL, 'n' },
		{ "link-fd", required_argument, NULL, 'f' },
		{ "link-unix", required_argument, NULL, 'u' },
		{ "link-dev", required_argument, NULL, 'd' },
		{ "link-vsock", no_argument, NULL, 'V' },
		{ "workspace", required_argument, NULL, 'w' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ "home", required_argument, NULL, 'H' },
		{ "uid", required_argument, NULL, 'U' },
		{ "gid", required_argument, NULL, 'G' },
		{ "lo", no_argument, NULL, 'l' },
		{ "cmdline", required_argument, NULL, 'C' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	sigset_t mask;
	int ch, sigfd, verbose = 0, noinit = 0;

	/* Re-executed by guestd_broker.c as a job's broker relay. */
	if (argc >= 2 && strcmp(argv[1], "--broker-relay") == 0)
		broker_relay_main(argc, argv);
	opts.init = getpid() == 1;
	while ((ch = getopt_long(argc, argv, "v", longopts, NULL)) != -1) {
		switch (ch) {
		case 'n': noinit = 1; break;
		case 'f': opts.link_fd = (int)num_arg(optarg, INT_MAX); break;
		case 'u': opts.link_unix = optarg; break;
		case 'd': opts.link_dev = optarg; break;
		case 'V': opts.link_vsock = 1; break;
		case 'w': opts.workspace = optarg; break;
		case 'c': opts.cgroup = optarg; break;
		case 'H': opts.home = optarg; break;
		case 'U': opts.uid = (uid_t)num_arg(optarg, INT_MAX); break;
		case 'G': opts.gid = (gid_t)num_arg(optarg, INT_MAX); break;
		case 'l': opts.lo = 1; break;
		case 'C': opts.cmdline = optarg; break;
		case 'v': verbose++; break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	if (noinit)
		opts.init = 0;
	if (opts.uid == 0 || opts.gid == 0) {
		fprintf(stderr, "guestd: jobs never run as root\n");
		exit(2);
	}
	log_init("guestd", 1, verbose);

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if ((sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) == -1)
		fatal("signalfd");
	signal(SIGPIPE, SIG_IGN);

	if (opts.init)
		init_system();
	else {
		/* Orphaned job descendants must come back to be reaped. */
		if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1)
			log_warn("PR_SET_CHILD_SUBREAPER");
		if (opts.lo)
			init_lo();
	}
	read_boot_id(boot_id, sizeof(boot_id));
	if (jobs_init() == -1)
		log_warnx("jobs: no cgroup; every exec will fail");
	if ((gl = glink_new(GLINK_ROLE_GUEST)) == NULL)
		fatal("glink_new");

	if (opts.link_fd != -1) {
		if (set_nonblock(opts.link_fd) == -1)
			fatal("--link-fd %d", opts.link_fd);
		link_set_up(opts.link_fd);
	} else if (opts.link_vsock) {
		if ((listen_fd = vsock_listen()) == -1)
			fatal("vsock port %d", GUEST_VSOCK_PORT);
	} else if (opts.init && opts.link_unix == NULL && opts.link_dev ==
	    NULL) {
		/*
		 * Autodetect: the virtio-serial port is looked for until it
		 * shows up (QEMU), and the host may also connect over vsock
		 * (Firecracker, vhost-vsock) when the VM has that device.
		 */
		if ((listen_fd = vsock_listen()) == -1)
			log_debug("no vsock: virtio-serial only");
	}

	while (!shutting_down) {
		unsigned gen;
		int i, n;

		npfds = 0;
		loop_wait_ms = -1;
		loop_add(sigfd, POLLIN, signal_io, NULL);
		link_poll();
		jobs_poll();
		streams_poll();
		broker_poll();
		fsfreeze_poll();
		jobs_check_timeouts();
		n = poll(pfds, (nfds_t)npfds, (int)(loop_wait_ms > INT_MAX ?
		    INT_MAX : loop_wait_ms));
		if (n == -1) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		gen = loop_gen;
		for (i = 0; i < npfds && n > 0; i++) {
			if (pfds[i].revents == 0)
				continue;
			n--;
			pcbs[i].cb(pfds[i].fd, pfds[i].revents, pcbs[i].arg);
			if (loop_gen != gen)
				break;
		}
		jobs_check_timeouts();
		/* Answer now rather than after another trip through poll. */
		if (link_fd != -1 && glink_out_pending(gl) > 0 &&
		    glink_flush(gl, link_fd) == -1 && errno != EAGAIN)
			link_drop(strerror(errno));
	}
	jobs_shutdown();
	glink_free(gl);
	return 0;
}

/* "shutdown" from the host: answer first, then stop everything. */
void
guestd_shutdown(void)
{
	int i;

	for (i = 0; i < 50 && link_fd != -1 && glink_out_pending(gl) > 0;
	    i++) {
		struct pollfd p = { link_fd, POLLOUT, 0 };

		if (glink_flush(gl, link_fd) == -1)
			break;
		if (glink_out_pending(gl) > 0)
			poll(&p, 1, 20);
	}
	if (opts.init)
		init_poweroff();
	shutting_down = 1;
}
