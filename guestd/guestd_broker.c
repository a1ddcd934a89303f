/*
 * guestd: the job broker pipe.  For a job started with a broker secret,
 * guestd forks a relay that makes a mount namespace for the job with a
 * listener at BROKER_SOCKET_PATH, moves itself into a cgroup beside the
 * job's and re-executes guestd as --broker-relay under BROKER_RELAY_UID.
 * The relay accepts only peers in the job's cgroup and hands each one back
 * to guestd with its preamble (job id and route secret); guestd carries it
 * to the host on its own ACCEPT channel, up to BROKER_MAX_GUEST_CONNS at
 * once; one more is closed unread.  The secret lives in the relay, which
 * jobs (uid 1000) cannot read or trace.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdmsg.h"
#include "guestd.h"
#include "log.h"

/* The relay's descriptors after exec. */
#define RELAY_LISTEN_FD	3
#define RELAY_SECRET_FD	4
#define RELAY_CTL_FD	5
#define RELAY_READY_FD	6

struct broker {
	struct broker	*next;
	char		 job_id[GUEST_JOB_ID_MAX + 1];
	char		 cg[PATH_MAX];	/* the relay's cgroup */
	pid_t		 pid;
	int		 ctl;		/* SEQPACKET: preamble + fd */
	int		 nsfd;		/* the job's mount namespace */
};

static struct broker *brokers;

static int
write_str(const char *path, const char *val)
{
	ssize_t n;
	int fd;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* The relay child before exec, still root.  Never returns. */
static void __attribute__((noreturn))
relay_child(const struct broker *b, int secretfd, int ctlfd, int readyfd)
{
	struct sockaddr_un sun;
	char path[PATH_MAX + 16];
	const char *stage;
	char *argv[] = { "guestd", "--broker-relay", (char *)b->job_id, NULL };
	char *envp[] = { NULL };
	int lfd, e;

	stage = "join cgroup";
	snprintf(path, sizeof(path), "%s/cgroup.procs", b->cg);
	if (write_str(path, "0") == -1)
		goto fail;
	stage = "mount namespace";
	if (unshare(CLONE_NEWNS) == -1 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1)
		goto fail;
	stage = "mkdir " BROKER_SOCKET_DIR;
	if (mkdir(BROKER_SOCKET_DIR, 0755) == -1 && errno != EEXIST)
		goto fail;
	/* Private to this namespace: other jobs do not see the path. */
	stage = "mount " BROKER_SOCKET_DIR;
	snprintf(path, sizeof(path), "mode=0750,uid=%d,gid=%d,size=64k",
	    BROKER_RELAY_UID, (int)opts.gid);
	if (mount("mcpvm-broker", BROKER_SOCKET_DIR, "tmpfs", MS_NOSUID |
	    MS_NODEV | MS_NOEXEC, path) == -1)
		goto fail;
	stage = "listen on " BROKER_SOCKET_PATH;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", BROKER_SOCKET_PATH);
	if ((lfd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
	    bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    chown(BROKER_SOCKET_PATH, BROKER_RELAY_UID, opts.gid) == -1 ||
	    chmod(BROKER_SOCKET_PATH, 0660) == -1 || listen(lfd, 64) == -1)
		goto fail;
	stage = "set up descriptors";
	if (dup2(lfd, 10) == -1 || dup2(secretfd, 11) == -1 ||
	    dup2(ctlfd, 12) == -1 || dup2(readyfd, 13) == -1 ||
	    dup2(10, RELAY_LISTEN_FD) == -1 ||
	    dup2(11, RELAY_SECRET_FD) == -1 || dup2(12, RELAY_CTL_FD) == -1 ||
	    dup2(13, RELAY_READY_FD) == -1)
		goto fail;
	syscall(SYS_close_range, RELAY_READY_FD + 1, ~0U, 0);
	stage = "execute the relay";
	execve("/proc/self/exe", argv, envp);
fail:
	e = errno;
	dprintf(readyfd, "%s: %s", stage, strerror(e));
	_exit(127);
}

struct broker *
broker_start(const char *job_id, const char *jobcg, const char *secret,
    char *err, size_t errlen)
{
	int sp[2] = { -1, -1 }, sec[2] = { -1, -1 }, rdy[2] = { -1, -1 };
	char why[256], path[64];
	struct broker *b;
	ssize_t n;
	pid_t pid;

	if ((b = calloc(1, sizeof(*b))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	b->ctl = b->nsfd = -1;
	snprintf(b->job_id, sizeof(b->job_id), "%s", job_id);
	/* Job ids have no '.', so this sibling never names a job. */
	if (snprintf(b->cg, sizeof(b->cg), "%s.broker", jobcg) >=
	    (int)sizeof(b->cg)) {
		snprintf(err, errlen, "cgroup path too long");
		goto fail;
	}
	if (mkdir(b->cg, 0755) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "cgroup %s: %s", b->cg, strerror(errno));
		b->cg[0] = '\0';
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == -1 ||
	    pipe2(sec, O_CLOEXEC) == -1 || pipe2(rdy, O_CLOEXEC) == -1) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	if ((pid = fork()) == -1) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0)
		relay_child(b, sec[0], sp[1], rdy[1]);
	b->pid = pid;
	close(sp[1]);
	close(sec[0]);
	close(rdy[1]);
	sp[1] = sec[0] = rdy[1] = -1;
	/* The secret goes on a pipe: never argv, never the environment. */
	if (write(sec[1], secret, BROKER_SECRET_HEX) != BROKER_SECRET_HEX) {
		snprintf(err, errlen, "relay: secret: %s", strerror(errno));
		goto fail;
	}
	close(sec[1]);
	sec[1] = -1;
	/* "ok" once it listens with its privileges dropped, else why not. */
	while ((n = read(rdy[0], why, sizeof(why) - 1)) == -1 &&
	    errno == EINTR)
		;
	if (n != 2 || memcmp(why, "ok", 2) != 0) {
		why[n > 0 ? n : 0] = '\0';
		snprintf(err, errlen, "broker relay: %s", n > 0 ? why :
		    "exited before listening");
		goto fail;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	if ((b->nsfd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	close(rdy[0]);
	b->ctl = sp[0];
	fcntl(b->ctl, F_SETFL, O_NONBLOCK);
	b->next = brokers;
	brokers = b;
	log_info("job %s: broker pipe listening, relay pid %d", job_id,
	    (int)pid);
	return b;
fail:
	if (sp[0] != -1)
		close(sp[0]);
	if (sp[1] != -1)
		close(sp[1]);
	if (sec[0] != -1)
		close(sec[0]);
	if (sec[1] != -1)
		close(sec[1]);
	if (rdy[0] != -1)
		close(rdy[0]);
	if (rdy[1] != -1)
		close(rdy[1]);
	broker_stop(b);
	free(b);
	return NULL;
}

int
broker_nsfd(const struct broker *b)
{
	return b->nsfd;
}

/* The job ended: the relay and every connection it handed over go. */
void
broker_stop(struct broker *b)
{
	struct broker **pp;
	char path[PATH_MAX + 16];

	if (b == NULL)
		return;
	for (pp = &brokers; *pp != NULL; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	if (b->cg[0] != '\0') {
		snprintf(path, sizeof(path), "%s/cgroup.kill", b->cg);
		if (write_str(path, "1") == -1 && errno != ENOENT)
			log_warn("job %s: broker cgroup.kill", b->job_id);
	}
	if (b->pid > 0)
		kill(b->pid, SIGKILL);
	b->pid = 0;
	if (b->ctl != -1) {
		close(b->ctl);
		b->ctl = -1;
		loop_gen++;
	}
	if (b->nsfd != -1) {
		close(b->nsfd);
		b->nsfd = -1;
	}
	streams_close_owner(b);
}

/* After the stop, once its processes are gone: the cgroup goes too. */
void
broker_free(struct broker *b)
{
	int i;

	if (b == NULL)
		return;
	broker_stop(b);
	/* Killed processes leave the cgroup shortly; wait a little. */
	for (i = 0; b->cg[0] != '\0' && i < 100; i++) {
		if (rmdir(b->cg) == 0 || errno == ENOENT)
			break;
		if (errno != EBUSY)
			break;
		usleep(2000);
	}
	free(b);
}

/* A connection from the relay: preamble and the accepted guest socket. */
static void
broker_ctl_io(int fd, short revents, void *arg)
{
	struct broker *b = arg;
	uint8_t pre[BROKER_PREAMBLE_MAX + 1];
	FDMSG_BUF(cm, 1);
	struct iovec iov = { pre, sizeof(pre) };
	struct msghdr msg;
	uint32_t ch;
	ssize_t n;
	int cfd = -1, got;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cm.buf;
	msg.msg_controllen = sizeof(cm.buf);
	n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	/* One descriptor or none; anything more is closed here. */
	got = n >= 0 ? fdmsg_take(&msg, &cfd, 1) : 0;
	if (got != 1)
		cfd = -1;
	if (n <= 0) {
		/* The relay is gone: no more connections for this job. */
		if (cfd != -1)
			close(cfd);
		log_info("job %s: broker relay ended", b->job_id);
		close(b->ctl);
		b->ctl = -1;
		loop_gen++;
		return;
	}
	if (cfd == -1 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (size_t)n > BROKER_PREAMBLE_MAX) {
		log_warnx("job %s: bad message from the broker relay",
		    b->job_id);
		goto drop;
	}
	if (!link_is_up()) {
		log_info("job %s: broker connection refused: no host link",
		    b->job_id);
		goto drop;
	}
	if (streams_count_owner(b) >= BROKER_MAX_GUEST_CONNS) {
		log_info("job %s: broker connection refused: %d connections "
		    "are open, the most one job may have", b->job_id,
		    BROKER_MAX_GUEST_CONNS);
		goto drop;
	}
	if ((ch = glink_free_accept_channel(gl)) == 0) {
		log_info("job %s: broker connection refused: the link has "
		    "%d guest connections", b->job_id, GLINK_MAX_ACCEPTED);
		goto drop;
	}
	if (glink_send_accept(gl, ch) == -1 ||
	    glink_send_data(gl, ch, pre, (size_t)n) != n) {
		log_warnx("job %s: broker accept: %s", b->job_id,
		    glink_error(gl));
		goto drop;
	}
	fcntl(cfd, F_SETFL, O_NONBLOCK);
	if (streams_adopt(ch, cfd, b) == -1) {
		glink_send_close(gl, ch);
		goto drop;
	}
	explicit_bzero(pre, sizeof(pre));
	return;
drop:
	/*
	 * Refused: closed now, before any byte of it is read, not kept until
	 * a slot frees.  The job's connect() had succeeded; its read sees
	 * end-of-file (ECONNRESET had it written) and a write then EPIPE.
	 */
	explicit_bzero(pre, sizeof(pre));
	if (cfd != -1)
		close(cfd);
}

void
broker_poll(void)
{
	struct broker *b;

	for (b = brokers; b != NULL; b = b->next)
		if (b->ctl != -1)
			loop_add(b->ctl, POLLIN, broker_ctl_io, b);
}
