/*
 * systemd readiness and watchdog notifications over $NOTIFY_SOCKET, without
 * libsystemd.  sd_notify_init() opens the socket before the sandbox is
 * installed; later calls only send.  Outside systemd they do nothing.
 */
#ifndef MCPVM_SDNOTIFY_H
#define MCPVM_SDNOTIFY_H

#include <stdint.h>

void		sd_notify_init(void);
/* "READY=1", "STOPPING=1", "WATCHDOG=1", "STATUS=…": 0 sent or no systemd,
 * -1 with errno when sending failed. */
int		sd_notify_send(const char *state);
/* The watchdog period from $WATCHDOG_USEC (0 when there is none). */
uint64_t	sd_watchdog_usec(void);

#endif
