/*
 * Pure parsers for the parts of an HTTP request mcpd interprets itself:
 * route, Host, Origin, Authorization, Accept and Content-Type.  No I/O, so
 * they are unit tested and fuzzed directly.  Used by mcpd's HTTP front end.
 */
#ifndef MCPD_HTTPUTIL_H
#define MCPD_HTTPUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "mcpd_conf.h"

enum route_kind {
	ROUTE_NONE,		/* no such resource */
	ROUTE_MCP,		/* /mcp */
	ROUTE_TOOL,		/* /v1/tools/{name} */
	ROUTE_STREAM,		/* /v1/vms/{vm_id}/streams/{port} */
	ROUTE_HEALTHZ,		/* /healthz */
	ROUTE_METRICS,		/* /metrics */
	ROUTE_BROKER,		/* /v1/vms/{vm_id}/jobs/{job_id}/broker */
	ROUTE_APPROVAL,		/* /v1/approvals/{proposal id} */
};

#define ROUTE_NAME_MAX	64

struct route {
	enum route_kind	kind;
	char		tool[ROUTE_NAME_MAX];
	char		vm_id[ROUTE_NAME_MAX];
	char		job_id[ROUTE_NAME_MAX];
	char		proposal[ROUTE_NAME_MAX];	/* p + 32 hex */
	uint16_t	port;
};

/* Parses a request-target (path and optional query); never fails. */
void	route_parse(const char *target, struct route *);
const char *route_label(enum route_kind);

/* 1 if the Host header value is allowed by cfg, else 0. */
int	host_allowed(const struct mcpd_config *, const char *host);
/*
 * 1 if the request may proceed: no Origin, one in allowed_origins, or
 * http(s)://host:port with a host:port the Host allowlist names.
 */
int	origin_allowed(const struct mcpd_config *, const char *origin);

/*
 * Extracts the credential of "Bearer <token>".  0 and the token copied to
 * tok, -1 if the header is absent or not a well-formed bearer credential.
 */
int	bearer_parse(const char *authz, char *tok, size_t toklen);

#define ACCEPT_JSON	0x1
#define ACCEPT_SSE	0x2
/* Which of application/json and text/event-stream an Accept allows. */
unsigned int accept_parse(const char *accept);
/* 1 if the Content-Type is application/json (any parameters), else 0. */
int	content_type_is_json(const char *ct);

#endif
