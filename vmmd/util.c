/*
 * Helpers for vmmd's building blocks (see util.h); run in vmmd and in its
 * worker threads, so nothing here keeps state.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
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
