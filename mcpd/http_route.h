/*
 * mcpd's checks, authentication and dispatch of each request, for the
 * HTTP front end (http.c).
 */
#ifndef MCPD_HTTP_ROUTE_H
#define MCPD_HTTP_ROUTE_H

#include <event2/http.h>

struct hreq;

/*
 * Checks hr's Host, Origin, route, method and bearer credential, has the
 * credential verified, and hands hr to the handler of its route; or
 * answers the error itself.
 */
void	http_route(struct hreq *);
/* The metrics listener's request callback: GET /metrics alone. */
void	http_route_metrics(struct evhttp_request *, void *m);

#endif
