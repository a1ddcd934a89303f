/*
 * mcpd's configuration: the [mcpd] section of the shared mcpvm.conf, in
 * fixed-size form.  Read once by mcpd at start, before the privilege drop.
 */
#ifndef MCPD_MCPD_CONF_H
#define MCPD_MCPD_CONF_H

#include <stddef.h>
#include <stdint.h>

#define MCPD_MAX_LISTEN		8
#define MCPD_MAX_ALLOW		32
#define MCPD_ADDR_MAX		64	/* "[v6 literal]:port" fits */
#define MCPD_ORIGIN_MAX		256

struct mcpd_listen {
	char		host[MCPD_ADDR_MAX];	/* numeric address, no brackets */
	uint16_t	port;
};

struct mcpd_config {
	struct mcpd_listen listen[MCPD_MAX_LISTEN];
	size_t		nlisten;
	struct mcpd_listen metrics_listen;
	int		metrics_enabled;

	/* Host header values accepted: "name" (any port) or "name:port". */
	char		allowed_hosts[MCPD_MAX_ALLOW][MCPD_ADDR_MAX + 8];
	size_t		nallowed_hosts;
	/* Origins accepted when a request carries one; none by default. */
	char		allowed_origins[MCPD_MAX_ALLOW][MCPD_ORIGIN_MAX];
	size_t		nallowed_origins;

	size_t		max_header_bytes;
	size_t		max_body_bytes;
	unsigned int	max_requests_per_connection;
	unsigned int	max_connections;
	unsigned int	max_connections_per_client;
	unsigned int	request_timeout;	/* s to send one whole request */
	unsigned int	idle_timeout;		/* s without any I/O progress */

	unsigned int	max_sessions;
	unsigned int	max_sessions_per_workspace;
	/* Counted once a request's credential is verified (budget.h). */
	unsigned int	max_connections_per_workspace;
	unsigned int	max_calls_per_workspace;
	unsigned int	max_listens_per_workspace;
	unsigned int	session_idle_timeout;	/* s */
	unsigned int	tool_timeout;		/* s a backend call may take */
	size_t		stream_rate_bytes;	/* per direction; 0 = no limit */
	size_t		stream_control_queue_bytes;	/* pongs not read */

	char		user[64];
	char		authd_socket[256];
	char		vmmd_socket[256];
};

/* The defaults of common/conf.c's [mcpd] keys, without a file. */
void	config_defaults(struct mcpd_config *);
/* Defaults, then the file: 0, or -1 with "file:line: message" in err. */
int	config_load(struct mcpd_config *, const char *path, char *err,
	    size_t errlen);
/* After loading: fills in the default Host allowlist from the listeners. */
int	config_finish(struct mcpd_config *, char *err, size_t errlen);
/* "host:port", "[v6]:port"; 0 or -1.  Exposed for tests. */
int	config_parse_listen(const char *, struct mcpd_listen *);

#endif
