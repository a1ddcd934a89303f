/*
 * Small helpers shared by vmmd's building blocks: error strings a person can
 * act on (errf, from common/), and whole-file reads and writes for
 * sysfs-style files.
 */
#ifndef VMMD_UTIL_H
#define VMMD_UTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "errf.h"	/* errf, shared with vmproxy */

/* Writes the whole string with one write(2), as sysfs wants. */
int	write_file_str(const char *path, const char *s);
/* Reads at most cap-1 bytes and NUL-terminates; returns bytes read or -1. */
ssize_t	read_file_str(const char *path, char *buf, size_t cap);
/* The clocks: CLOCK_MONOTONIC in seconds, CLOCK_REALTIME in ms. */
long long mono_seconds(void);
long long mono_ms(void);
long long wall_ms(void);
/* ms since the epoch as "2026-01-02T03:04:05.678Z". */
void	iso8601_ms(long long ms, char *buf, size_t len);

#endif
