/*
 * guestd: jobs.  Each is `/bin/bash -lc <command>` as the dev user in its own
 * cgroup under <cgroup>/mcpvm-jobs, so cancel, timeout and freeze reach every
 * descendant, setsid or not.  Output pipes are drained as they fill.
 */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guestd.h"
#include "log.h"

enum job_state {
	JOB_RUNNING,
	JOB_COMPLETED,
	JOB_FAILED,
	JOB_CANCELLED,
	JOB_TIMED_OUT,
};

static const char *state_names[] = {
	"running", "completed", "failed", "cancelled", "timed_out",
};

struct job {
	char		 id[GUEST_JOB_ID_MAX + 1];
	enum job_state	 state;
	pid_t		 pid;		/* 0 once reaped */
	int		 status;	/* wait status once reaped */
	int		 fd[2];		/* stdout/stderr pipe or -1 */
	int		 infd;		/* stdin write end or -1 */
	uint8_t		*in;
	size_t		 inlen, inoff;
	struct jobout	 out;
	struct budget	 budget;
	char		 cg[PATH_MAX];	/* "" without a cgroup */
	char		 error[256];
	struct broker	*broker;	/* its broker pipe, or NULL */
};

static struct job *jobs[GUEST_MAX_JOBS];
static int njobs;
static char cgbase[PATH_MAX];
static int have_cgroup;
static int frozen;

static int
write_file(const char *dir, const char *name, const char *val)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* Reads "key value" from a cgroup.events-style file; -1 if unreadable. */
static int
read_key(const char *dir, const char *file, const char *key)
{
	char path[PATH_MAX], line[128];
	size_t klen = strlen(key);
	FILE *f;
	int v = -1;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
			v = atoi(line + klen + 1);
	fclose(f);
	return v;
}

int
jobs_init(void)
{
	snprintf(cgbase, sizeof(cgbase), "%s/mcpvm-jobs", opts.cgroup);
	if (mkdir(cgbase, 0755) == -1 && errno != EEXIST) {
		log_warn("jobs: mkdir %s", cgbase);
		return -1;
	}
	/* A stale freeze (guestd restarted) must not stall new jobs. */
	if (write_file(cgbase, "cgroup.freeze", "0") == -1) {
		log_warn("jobs: %s/cgroup.freeze", cgbase);
		return -1;
	}
	have_cgroup = 1;
	return 0;
}

static struct job *
job_find(const char *id)
{
	int i;

	for (i = 0; i < njobs; i++)
		if (strcmp(jobs[i]->id, id) == 0)
			return jobs[i];
	return NULL;
}

int
jobs_count(void)
{
	return njobs;
}

int
jobs_running(void)
{
	int i, n = 0;

	for (i = 0; i < njobs; i++)
		if (jobs[i]->state == JOB_RUNNING)
			n++;
	return n;
}

static void
close_fd(int *fd)
{
	if (*fd != -1) {
		close(*fd);
		*fd = -1;
	}
}

/* The job ended (exit, cancel, timeout): its broker pipe goes with it. */
static void
job_broker_end(struct job *j)
{
	if (j->broker != NULL) {
		log_info("job %s: broker pipe closed", j->id);
		broker_free(j->broker);
		j->broker = NULL;
	}
}

static void
job_kill(struct job *j)
{
	job_broker_end(j);
	if (j->cg[0] != '\0' && write_file(j->cg, "cgroup.kill", "1") == -1 &&
	    errno != ENOENT)
		log_warn("job %s: cgroup.kill", j->id);
	/* Belt and braces for the main process if the cgroup write failed. */
	if (j->pid > 0)
		kill(j->pid, SIGKILL);
}

static void
job_cleanup_cgroup(struct job *j)
{
	if (j->cg[0] == '\0' || j->pid != 0)
		return;
	if (read_key(j->cg, "cgroup.events", "populated") != 0)
		return;
	if (rmdir(j->cg) == 0 || errno == ENOENT)
		j->cg[0] = '\0';
}

static struct json_object *
job_json(const struct job *j, uint32_t id)
{
	struct json_object *o = id != 0 ? reply_new(id) :
	    json_object_new_object();

	json_object_object_add(o, "job_id", json_object_new_string(j->id));
	json_object_object_add(o, "state",
	    json_object_new_string(state_names[j->state]));
	if (j->state == JOB_COMPLETED) {
		if (WIFEXITED(j->status))
			json_object_object_add(o, "exit_code",
			    json_object_new_int(WEXITSTATUS(j->status)));
		else if (WIFSIGNALED(j->status)) {
			json_object_object_add(o, "exit_code",
			    json_object_new_int(128 + WTERMSIG(j->status)));
			json_object_object_add(o, "signal",
			    json_object_new_int(WTERMSIG(j->status)));
		}
	}
	if (j->state == JOB_FAILED)
		json_object_object_add(o, "error",
		    json_object_new_string(j->error));
	json_object_object_add(o, "truncated",
	    json_object_new_boolean(j->out.truncated));
	json_object_object_add(o, "timed_out",
	    json_object_new_boolean(j->state == JOB_TIMED_OUT));
	json_object_object_add(o, "stdout_bytes",
	    json_object_new_int64((int64_t)j->out.len[0]));
	json_object_object_add(o, "stderr_bytes",
	    json_object_new_int64((int64_t)j->out.len[1]));
	json_object_object_add(o, "streams_open",
	    json_object_new_boolean(j->fd[0] != -1 || j->fd[1] != -1));
	if (j->broker != NULL)
		json_object_object_add(o, "broker_pipe",
		    json_object_new_boolean(1));
	json_object_object_add(o, "run_ms",
	    json_object_new_int64(budget_used(&j->budget, now_ns()) /
	    1000000));
	return o;
}

static void __attribute__((format(printf, 2, 3)))
job_error(struct job *j, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(j->error, sizeof(j->error), fmt, ap);
	va_end(ap);
}

/* The child: never returns.  Reports a setup failure on errfd. */
static void __attribute__((noreturn))
child(const struct req *r, int cgfd, int dirfd, int infd, int outfd,
    int errfd, int reportfd, char **envp, int nsfd)
{
	char *argv[] = { "bash", "-lc", (char *)r->command, NULL };
	char why[128];
	const char *stage;
	sigset_t none;
	int e, sig;

	stage = "join cgroup";
	if (cgfd != -1 && write(cgfd, "0", 1) != 1)
		goto fail;
	if (nsfd != -1) {
		/* The broker relay's namespace, where its socket is. */
		stage = "join the broker pipe's mount namespace";
		if (setns(nsfd, CLONE_NEWNS) == -1)
			goto fail;
		/* Looked up again: the old descriptor is in the old one. */
		stage = why;
		close(dirfd);
		if ((dirfd = ws_open_dir(r->cwd != NULL ? r->cwd : "", 0,
		    why, sizeof(why))) == -1) {
			errno = ENOENT;
			goto fail;
		}
	}
	setsid();
	stage = "set up descriptors";
	/* Move the report pipe above 2 first so dup2 cannot clobber it. */
	if (reportfd <= 2 && (reportfd = fcntl(reportfd, F_DUPFD_CLOEXEC,
	    3)) == -1)
		goto fail;
	if (dup2(infd, 0) == -1 || dup2(outfd, 1) == -1 ||
	    dup2(errfd, 2) == -1)
		goto fail;
	stage = "enter the working directory";
	if (fchdir(dirfd) == -1)
		goto fail;
	if (dup2(reportfd, 3) == -1)
		goto fail;
	reportfd = 3;
	if (fcntl(3, F_SETFD, FD_CLOEXEC) == -1)
		goto fail;
	syscall(SYS_close_range, 4, ~0U, 0);
	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	stage = "drop privileges";
	if (setgroups(0, NULL) == -1 ||
	    setresgid(opts.gid, opts.gid, opts.gid) == -1 ||
	    setresuid(opts.uid, opts.uid, opts.uid) == -1 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		goto fail;
	if (setresuid(0, 0, 0) == 0) {
		errno = EPERM;
		goto fail;
	}
	stage = "execute /bin/bash";
	execve("/bin/bash", argv, envp);
fail:
	e = errno;
	dprintf(reportfd, "%s: %s", stage, strerror(e));
	_exit(127);
}

static char **
build_env(const struct req *r)
{
	static const char *fixed[] = {
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"SHELL=/bin/bash",
		"USER=dev",
		"LOGNAME=dev",
		"LANG=C.UTF-8",
		"TERM=dumb",
	};
	size_t n = sizeof(fixed) / sizeof(fixed[0]), i = 0, k;
	char **envp, *e;

	if (r->env != NULL)
		n += (size_t)json_object_object_length(r->env);
	if ((envp = calloc(n + 3, sizeof(*envp))) == NULL)
		return NULL;
	if (asprintf(&e, "HOME=%s", opts.home) == -1)
		goto fail;
	envp[i++] = e;
	for (k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++)
		if ((envp[i++] = strdup(fixed[k])) == NULL)
			goto fail;
	if (r->env != NULL) {
		json_object_object_foreach(r->env, key, val) {
			size_t m;

			/* A caller's value replaces a default of that name. */
			for (m = 0; m < i; m++)
				if (strncmp(envp[m], key, strlen(key)) == 0 &&
				    envp[m][strlen(key)] == '=')
					break;
			/* asprintf leaves e undefined on failure. */
			if (asprintf(&e, "%s=%s", key,
			    json_object_get_string(val)) == -1)
				goto fail;
			if (m < i)
				free(envp[m]);
			envp[m] = e;
			if (m == i)
				i++;
		}
	}
	if (r->broker_secret != NULL) {
		size_t m, kl = strlen(BROKER_SOCKET_ENV);

		/* Last, so a caller's variable of that name cannot hide it. */
		for (m = 0; m < i; m++)
			if (strncmp(envp[m], BROKER_SOCKET_ENV, kl) == 0 &&
			    envp[m][kl] == '=')
				break;
		if ((e = strdup(BROKER_SOCKET_ENV "=" BROKER_SOCKET_PATH)) ==
		    NULL)
			goto fail;
		if (m < i)
			free(envp[m]);
		envp[m] = e;
		if (m == i)
			i++;
	}
	envp[i] = NULL;
	return envp;
fail:
	for (k = 0; k < n + 3; k++)
		free(envp[k]);
	free(envp);
	return NULL;
}

static void
free_env(char **envp)
{
	size_t i;

	for (i = 0; envp != NULL && envp[i] != NULL; i++)
		free(envp[i]);
	free(envp);
}

/* Sets up and forks the job; on failure j->state is JOB_FAILED. */
static void
job_start(struct job *j, const struct req *r)
{
	int outp[2] = { -1, -1 }, errp[2] = { -1, -1 }, inp[2] = { -1, -1 };
	int rep[2] = { -1, -1 }, cgfd = -1, dirfd = -1, nullfd = -1;
	char **envp = NULL, path[PATH_MAX], why[256];
	ssize_t n;
	pid_t pid;

	if ((dirfd = ws_open_dir(r->cwd != NULL ? r->cwd : "", 0, why,
	    sizeof(why))) == -1) {
		job_error(j, "cwd: %s", why);
		goto fail;
	}
	if (!have_cgroup) {
		job_error(j, "no cgroup2 for jobs "
		    "under %s", opts.cgroup);
		goto fail;
	}
	if (snprintf(j->cg, sizeof(j->cg), "%s/%s", cgbase, j->id) >=
	    (int)sizeof(j->cg)) {
		job_error(j, "cgroup path too long");
		j->cg[0] = '\0';
		goto fail;
	}
	if (mkdir(j->cg, 0755) == -1 && errno != EEXIST) {
		job_error(j, "cgroup %s: %s", j->cg,
		    strerror(errno));
		j->cg[0] = '\0';
		goto fail;
	}
	if (snprintf(path, sizeof(path), "%s/cgroup.procs", j->cg) >=
	    (int)sizeof(path)) {
		job_error(j, "cgroup path too long");
		goto fail;
	}
	if ((cgfd = open(path, O_WRONLY | O_CLOEXEC)) == -1) {
		job_error(j, "%s: %s", path,
		    strerror(errno));
		goto fail;
	}
	if (pipe2(outp, O_CLOEXEC) == -1 || pipe2(errp, O_CLOEXEC) == -1 ||
	    pipe2(rep, O_CLOEXEC) == -1) {
		job_error(j, "pipe: %s",
		    strerror(errno));
		goto fail;
	}
	if (r->has_body) {
		if (pipe2(inp, O_CLOEXEC) == -1) {
			job_error(j, "pipe: %s",
			    strerror(errno));
			goto fail;
		}
	} else if ((nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1) {
		job_error(j, "/dev/null: %s",
		    strerror(errno));
		goto fail;
	}
	if (r->broker_secret != NULL && (j->broker = broker_start(j->id,
	    j->cg, r->broker_secret, why, sizeof(why))) == NULL) {
		job_error(j, "%s", why);
		goto fail;
	}
	if ((envp = build_env(r)) == NULL) {
		job_error(j, "out of memory");
		goto fail;
	}
	if ((pid = fork()) == -1) {
		job_error(j, "fork: %s",
		    strerror(errno));
		goto fail;
	}
	if (pid == 0)
		child(r, cgfd, dirfd, r->has_body ? inp[0] : nullfd, outp[1],
		    errp[1], rep[1], envp, j->broker != NULL ?
		    broker_nsfd(j->broker) : -1);
	j->pid = pid;
	budget_start(&j->budget, r->timeout_ms * 1000000, now_ns(), frozen);
	close_fd(&rep[1]);
	/* EOF at exec (CLOEXEC), or the child's reason it could not start. */
	while ((n = read(rep[0], why, sizeof(why) - 1)) == -1 &&
	    errno == EINTR)
		;
	if (n > 0) {
		why[n] = '\0';
		job_error(j, "%s", why);
		goto fail;
	}
	j->fd[0] = outp[0];
	j->fd[1] = errp[0];
	outp[0] = errp[0] = -1;
	fcntl(j->fd[0], F_SETFL, O_NONBLOCK);
	fcntl(j->fd[1], F_SETFL, O_NONBLOCK);
	if (r->has_body) {
		j->infd = inp[1];
		inp[1] = -1;
		fcntl(j->infd, F_SETFL, O_NONBLOCK);
		if (r->body_len > 0 && (j->in = malloc(r->body_len)) != NULL) {
			memcpy(j->in, r->body, r->body_len);
			j->inlen = r->body_len;
		}
	}
	j->state = JOB_RUNNING;
	log_info("job %s: started, pid %d", j->id, (int)pid);
	goto out;
fail:
	j->state = JOB_FAILED;
	job_broker_end(j);
	budget_stop(&j->budget, now_ns());
	log_info("job %s: failed to start: %s", j->id, j->error);
out:
	close_fd(&outp[0]);
	close_fd(&outp[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	close_fd(&inp[0]);
	close_fd(&inp[1]);
	close_fd(&rep[0]);
	close_fd(&rep[1]);
	close_fd(&cgfd);
	close_fd(&dirfd);
	close_fd(&nullfd);
	free_env(envp);
}

struct json_object *
jobs_exec(const struct req *r)
{
	struct job *j;

	/* A child that joins a frozen cgroup would never reach exec. */
	if (frozen)
		return reply_error(r->id, "frozen", "the guest's jobs are "
		    "frozen; thaw before starting a job");
	if (job_find(r->job_id) != NULL)
		return reply_error(r->id, "already_exists", "job %s already "
		    "exists", r->job_id);
	if (njobs >= GUEST_MAX_JOBS)
		return reply_error(r->id, "limit_exceeded", "this VM already "
		    "keeps %d jobs, the most it keeps", GUEST_MAX_JOBS);
	if (jobs_running() >= GUEST_MAX_RUNNING)
		return reply_error(r->id, "limit_exceeded", "%d jobs are "
		    "running, the most that may run at once",
		    GUEST_MAX_RUNNING);
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return reply_error(r->id, "internal", "out of memory");
	snprintf(j->id, sizeof(j->id), "%s", r->job_id);
	j->fd[0] = j->fd[1] = j->infd = -1;
	jobout_init(&j->out, GUEST_OUTPUT_MAX);
	jobs[njobs++] = j;
	job_start(j, r);
	return job_json(j, r->id);
}

static struct json_object *
not_found(const struct req *r)
{
	return reply_error(r->id, "not_found", "no job %s", r->job_id);
}

struct json_object *
jobs_status(const struct req *r)
{
	struct json_object *o, *a;
	struct job *j;
	int i;

	if (r->job_id != NULL) {
		if ((j = job_find(r->job_id)) == NULL)
			return not_found(r);
		return job_json(j, r->id);
	}
	/* Short entries: 256 full ones could outgrow one control frame. */
	o = reply_new(r->id);
	a = json_object_new_array();
	for (i = 0; i < njobs; i++) {
		struct json_object *e = json_object_new_object();

		j = jobs[i];
		json_object_object_add(e, "job_id",
		    json_object_new_string(j->id));
		json_object_object_add(e, "state",
		    json_object_new_string(state_names[j->state]));
		json_object_array_add(a, e);
	}
	json_object_object_add(o, "jobs", a);
	return o;
}

struct json_object *
jobs_output(const struct req *r, uint8_t **body, size_t *body_len)
{
	const uint8_t *p[2];
	size_t n[2];
	struct json_object *o;
	struct job *j;
	int s;

	if ((j = job_find(r->job_id)) == NULL)
		return not_found(r);
	for (s = 0; s < 2; s++)
		n[s] = jobout_read(&j->out, s, (uint64_t)r->cursor[s],
		    (size_t)r->max_bytes, &p[s]);
	if ((*body = malloc(n[0] + n[1] + 1)) == NULL)
		return reply_error(r->id, "internal", "out of memory");
	if (n[0] > 0)
		memcpy(*body, p[0], n[0]);
	if (n[1] > 0)
		memcpy(*body + n[0], p[1], n[1]);
	*body_len = n[0] + n[1];
	o = job_json(j, r->id);
	json_object_object_add(o, "stdout_len", json_object_new_int64(
	    (int64_t)n[0]));
	json_object_object_add(o, "stderr_len", json_object_new_int64(
	    (int64_t)n[1]));
	/* A cursor past the end stays where it was: nothing was skipped. */
	json_object_object_add(o, "stdout_next", json_object_new_int64(
	    r->cursor[0] + (int64_t)n[0]));
	json_object_object_add(o, "stderr_next", json_object_new_int64(
	    r->cursor[1] + (int64_t)n[1]));
	return o;
}

struct json_object *
jobs_cancel(const struct req *r)
{
	struct job *j;

	if ((j = job_find(r->job_id)) == NULL)
		return not_found(r);
	if (j->state == JOB_RUNNING) {
		j->state = JOB_CANCELLED;
		budget_stop(&j->budget, now_ns());
		log_info("job %s: cancelled", j->id);
	}
	/* Detached descendants of a finished job go too. */
	job_kill(j);
	return job_json(j, r->id);
}

static int	job_pipe_read(struct job *, int);

void
jobs_reaped(pid_t pid, int status)
{
	struct job *j = NULL;
	int i, k;

	for (i = 0; i < njobs; i++)
		if (jobs[i]->pid == pid)
			j = jobs[i];
	if (j == NULL)
		return;		/* an orphan we adopted */
	j->pid = 0;
	j->status = status;
	budget_stop(&j->budget, now_ns());
	/*
	 * What it wrote before exiting is in its pipes: take it before the
	 * state says completed, or a read in this same loop turn would see
	 * the final state without the last output and stop there.  A pipe
	 * holds what was written before the exit; bounded, as a detached
	 * descendant may still be writing to it.
	 */
	for (i = 0; i < 2; i++)
		for (k = 0; k < 16 && j->fd[i] != -1 &&
		    job_pipe_read(j, i); k++)
			;
	if (j->state == JOB_RUNNING)
		j->state = JOB_COMPLETED;
	job_broker_end(j);
	log_debug("job %s: exited, status 0x%x", j->id, status);
	job_cleanup_cgroup(j);
}

/* One read of the job's stdout (s 0) or stderr (1); 1 if it had bytes. */
static int
job_pipe_read(struct job *j, int s)
{
	static uint8_t buf[65536];
	ssize_t n;

	/* Drained whatever the retention: a full pipe must never block. */
	n = read(j->fd[s], buf, sizeof(buf));
	if (n > 0) {
		if (jobout_append(&j->out, s, buf, (size_t)n) == -1)
			log_warnx("job %s: out of memory for output", j->id);
		return 1;
	}
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return 0;
	close_fd(&j->fd[s]);
	/* Its poll entry may still be pending in this loop turn. */
	loop_gen++;
	return 0;
}

static void
job_pipe_io(int fd, short revents, void *arg)
{
	struct job *j = arg;

	job_pipe_read(j, fd == j->fd[0] ? 0 : 1);
}

static void
job_stdin_io(int fd, short revents, void *arg)
{
	struct job *j = arg;
	ssize_t n;

	if (j->inoff < j->inlen) {
		n = write(fd, j->in + j->inoff, j->inlen - j->inoff);
		if (n > 0)
			j->inoff += (size_t)n;
		else if (n == -1 && (errno == EAGAIN || errno == EINTR))
			return;
		else
			j->inoff = j->inlen;	/* reader gone */
	}
	if (j->inoff >= j->inlen || (revents & (POLLERR | POLLHUP))) {
		close_fd(&j->infd);
		free(j->in);
		j->in = NULL;
	}
}

void
jobs_poll(void)
{
	int i, s;

	for (i = 0; i < njobs; i++) {
		struct job *j = jobs[i];

		for (s = 0; s < 2; s++)
			if (j->fd[s] != -1)
				loop_add(j->fd[s], POLLIN, job_pipe_io, j);
		if (j->infd != -1)
			loop_add(j->infd, POLLOUT, job_stdin_io, j);
	}
}

void
jobs_check_timeouts(void)
{
	int64_t now = now_ns(), left;
	int i;

	for (i = 0; i < njobs; i++) {
		struct job *j = jobs[i];

		if (j->state != JOB_RUNNING)
			continue;
		left = budget_left(&j->budget, now);
		if (left == INT64_MAX)
			continue;
		if (left > 0) {
			loop_timeout(left / 1000000 + 1);
			continue;
		}
		j->state = JOB_TIMED_OUT;
		budget_stop(&j->budget, now);
		log_info("job %s: timed out", j->id);
		job_kill(j);
	}
}

int
jobs_freeze(void)
{
	int64_t now = now_ns();
	int i, ev;

	if (!have_cgroup)
		return -1;
	for (i = 0; i < njobs; i++)
		budget_freeze(&jobs[i]->budget, now);
	frozen = 1;
	if (write_file(cgbase, "cgroup.freeze", "1") == -1) {
		log_warn("jobs: freeze");
		return -1;
	}
	/* Frozen means every task stopped; wait briefly for it. */
	for (i = 0; i < 200; i++) {
		if ((ev = read_key(cgbase, "cgroup.events", "frozen")) == 1)
			return 0;
		usleep(5000);
	}
	log_warnx("jobs: not frozen after 1 s");
	return -1;
}

void
jobs_thaw(void)
{
	int64_t now = now_ns();
	int i;

	/* Budgets first, so no timeout fires on time spent suspended. */
	for (i = 0; i < njobs; i++)
		budget_thaw(&jobs[i]->budget, now);
	frozen = 0;
	if (have_cgroup && write_file(cgbase, "cgroup.freeze", "0") == -1)
		log_warn("jobs: thaw");
}

int
jobs_active(void)
{
	int i;

	for (i = 0; i < njobs; i++)
		job_cleanup_cgroup(jobs[i]);
	if (!have_cgroup)
		return jobs_running() > 0;
	return read_key(cgbase, "cgroup.events", "populated") == 1;
}

/* guestd is leaving (tests): take every job and its cgroup with it. */
void
jobs_shutdown(void)
{
	int i, k;

	if (!have_cgroup)
		return;
	write_file(cgbase, "cgroup.freeze", "0");
	for (i = 0; i < njobs; i++) {
		job_broker_end(jobs[i]);
		if (jobs[i]->cg[0] != '\0')
			write_file(jobs[i]->cg, "cgroup.kill", "1");
	}
	for (k = 0; k < 100; k++) {
		int status;

		while (waitpid(-1, &status, WNOHANG) > 0)
			;
		if (read_key(cgbase, "cgroup.events", "populated") != 1)
			break;
		usleep(10000);
	}
	for (i = 0; i < njobs; i++)
		if (jobs[i]->cg[0] != '\0')
			rmdir(jobs[i]->cg);
	rmdir(cgbase);
}
