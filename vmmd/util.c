/*
 * Helpers for vmmd's building blocks (see util.h); run in vmmd and in its
 * worker threads, so nothing here keeps state.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

int
write_file_str(const char *path, const char *s)
{
	size_t len = strlen(s);
	ssize_t n;
	int fd, saved;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	n = write(fd, s, len);
	saved = errno;
	close(fd);
	if (n != (ssize_t)len) {
		errno = n == -1 ? saved : EIO;
		return -1;
	}
	return 0;
}

ssize_t
read_file_str(const char *path, char *buf, size_t cap)
{
	size_t off = 0;
	ssize_t n;
	int fd, saved;

	if (cap == 0)
		return -1;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while (off < cap - 1) {
		n = read(fd, buf + off, cap - 1 - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	close(fd);
	buf[off] = '\0';
	return (ssize_t)off;
}

long long
mono_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec;
}

long long
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
iso8601_ms(long long ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	int frac = (int)(ms % 1000);
	struct tm tm;
	size_t n;

	gmtime_r(&t, &tm);
	/* strftime has no milliseconds: ".mmmZ" goes on by hand. */
	if ((n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm)) == 0 ||
	    len - n < sizeof(".000Z")) {
		if (len > 0)
			buf[0] = '\0';
		return;
	}
	if (frac < 0)
		frac = 0;
	buf[n++] = '.';
	buf[n++] = (char)('0' + frac / 100);
	buf[n++] = (char)('0' + frac / 10 % 10);
	buf[n++] = (char)('0' + frac % 10);
	buf[n++] = 'Z';
	buf[n] = '\0';
}
