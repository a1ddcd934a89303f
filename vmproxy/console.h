/*
 * vmproxy's copy of its VM's serial console.  QEMU writes the console to
 * a pipe, never to a file of its own: a guest that prints without end
 * would otherwise fill the host's /run.  vmproxy drains the pipe into
 * console.log, which keeps only the most recent output, between max / 2
 * and max bytes of it, in order.
 */
#ifndef VMPROXY_CONSOLE_H
#define VMPROXY_CONSOLE_H

#include <stddef.h>

struct console;
struct event_base;

/*
 * Takes pipe_fd (read, made non-blocking here) and file_fd (open for
 * reading and writing, empty) and owns both.  base NULL: no reading; the
 * caller feeds console_append (tests, fuzzing).  NULL on ENOMEM or when
 * max is below 2; the descriptors are then still the caller's.
 */
struct console	*console_new(struct event_base *, int pipe_fd, int file_fd,
		    size_t max);
/* Appends to the file, first dropping its oldest bytes past max. */
int		 console_append(struct console *, const void *, size_t);
/* Bytes the file holds now. */
size_t		 console_size(const struct console *);
/* Takes in what the pipe holds now, without waiting for more. */
void		 console_drain(struct console *);
/* Copies the file's last bytes, at most len, into buf; returns how many. */
size_t		 console_tail(struct console *, void *buf, size_t len);
void		 console_free(struct console *);

#endif
