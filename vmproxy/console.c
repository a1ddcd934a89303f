/*
 * vmproxy: the VM's serial console, from QEMU's pipe into a bounded
 * console.log (console.h).  Runs after the seccomp filter is in place:
 * read, pread, pwrite and ftruncate on descriptors opened before it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "console.h"
#include "log.h"

#define CONSOLE_READ	(64 * 1024)

struct console {
	int		 pipe_fd, file_fd;
	size_t		 max, size;
	uint8_t		*keep;		/* max / 2 bytes, for trimming */
	struct event	*ev;
	int		 done;		/* end of the pipe, or a write error */
};

static int
pwrite_all(int fd, const uint8_t *p, size_t n, off_t at)
{
	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, at);

		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		at += w;
	}
	return 0;
}

static int
pread_all(int fd, uint8_t *p, size_t n, off_t at)
{
	while (n > 0) {
		ssize_t r = pread(fd, p, n, at);

		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
		at += r;
	}
	return 0;
}

int
console_append(struct console *c, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	size_t half = c->max / 2, old;

	if (c->size + n <= c->max) {
		if (pwrite_all(c->file_fd, p, n, (off_t)c->size) == -1)
			return -1;
		c->size += n;
		return 0;
	}
	/* Over: the file becomes the newest half of old and new together. */
	if (n >= half) {
		if (pwrite_all(c->file_fd, p + n - half, half, 0) == -1)
			return -1;
	} else {
		old = half - n;
		if (pread_all(c->file_fd, c->keep, old,
		    (off_t)(c->size - old)) == -1 ||
		    pwrite_all(c->file_fd, c->keep, old, 0) == -1 ||
		    pwrite_all(c->file_fd, p, n, (off_t)old) == -1)
			return -1;
	}
	if (ftruncate(c->file_fd, (off_t)half) == -1)
		return -1;
	c->size = half;
	return 0;
}

size_t
console_size(const struct console *c)
{
	return c->size;
}

/* One read from the pipe: 1 when there may be more to read. */
static int
console_read1(struct console *c)
{
	uint8_t buf[CONSOLE_READ];
	ssize_t n;

	if (c->done)
		return 0;
	n = read(c->pipe_fd, buf, sizeof(buf));
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		/* QEMU is gone: nothing more will come. */
		c->done = 1;
		if (c->ev != NULL)
			event_del(c->ev);
		return 0;
	}
	if (console_append(c, buf, (size_t)n) == -1) {
		log_warn("console.log");
		/* dropped from here on: QEMU runs on */
		c->done = 1;
		if (c->ev != NULL)
			event_del(c->ev);
		return 0;
	}
	return 1;
}

static void
console_readcb(int fd, short what, void *arg)
{
	console_read1(arg);
}

void
console_drain(struct console *c)
{
	int i;

	/* Bounded: a writer still at it cannot keep us here. */
	for (i = 0; i < 64 && c->pipe_fd != -1 && console_read1(c); i++)
		;
}

size_t
console_tail(struct console *c, void *buf, size_t len)
{
	size_t n = c->size < len ? c->size : len;

	if (n == 0 || pread_all(c->file_fd, buf, n, (off_t)(c->size - n)) ==
	    -1)
		return 0;
	return n;
}

struct console *
console_new(struct event_base *base, int pipe_fd, int file_fd, size_t max)
{
	struct console *c;
	int fl;

	if (max < 2 || (c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->pipe_fd = pipe_fd;
	c->file_fd = file_fd;
	c->max = max;
	if ((c->keep = malloc(max / 2)) == NULL)
		goto fail;
	if (base != NULL) {
		if ((fl = fcntl(pipe_fd, F_GETFL)) == -1 ||
		    fcntl(pipe_fd, F_SETFL, fl | O_NONBLOCK) == -1)
			goto fail;
		c->ev = event_new(base, pipe_fd, EV_READ | EV_PERSIST,
		    console_readcb, c);
		if (c->ev == NULL || event_add(c->ev, NULL) == -1)
			goto fail;
	}
	return c;
fail:
	if (c->ev != NULL)
		event_free(c->ev);
	free(c->keep);
	free(c);
	return NULL;
}

void
console_free(struct console *c)
{
	if (c == NULL)
		return;
	if (c->ev != NULL)
		event_free(c->ev);
	if (c->pipe_fd != -1)
		close(c->pipe_fd);
	if (c->file_fd != -1)
		close(c->file_fd);
	free(c->keep);
	free(c);
}
