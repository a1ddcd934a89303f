/*
 * What the pieces of common/ipc (framing, descriptor passing, connections,
 * servers, the blocking client) share and no other file may see: the
 * encoded frame and its queue, and the checks of a frame that both the
 * event-driven and the blocking side run.  Not installed, not for daemons.
 */
#ifndef MCPVM_IPC_PRIV_H
#define MCPVM_IPC_PRIV_H

#include <sys/queue.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc.h"

#define IPC_JSON_DEPTH		32
#define IPC_ROLE_MAX		32

/* One encoded frame on its way out, with the descriptor it carries. */
struct ipc_out {
	TAILQ_ENTRY(ipc_out)	 entry;
	uint8_t			*buf;
	size_t			 len, off;
	int			 fd;
};
TAILQ_HEAD(ipc_outq, ipc_out);

/* ipc_frame.c: the catalogue's checks and the encoder. */
struct json_object *ipc_parse_json(const char *, size_t, char *, size_t);
int		 ipc_hello_check(const struct ipc_frame *, char *role,
		    size_t rolelen, char *err, size_t errlen);
/* NULL (errno) when out of memory or the body is over the limit. */
struct ipc_out	*ipc_encode(uint32_t type, uint32_t id, uint32_t flags,
		    struct json_object *body, int fd);
void		 ipc_out_free(struct ipc_out *);

/* ipc_fdpass.c: the socket side, SCM_RIGHTS with a frame's first byte. */
struct sockaddr_un;
/* The address of path; -1 (ENAMETOOLONG) when it does not fit. */
int		 ipc_sockaddr(struct sockaddr_un *, const char *path);
int		 ipc_out_write(int sock, struct ipc_out *);
int		 ipc_outq_write(int sock, struct ipc_outq *, size_t *bytes);
ssize_t		 ipc_recv(int sock, struct ipc_reader *, void *buf,
		    size_t want, const char **err);

#endif
