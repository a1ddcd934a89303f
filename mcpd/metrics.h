/*
 * mcpd's Prometheus metrics: requests by route and status, a latency
 * histogram per route, and gauges for what is open right now.
 */
#ifndef MCPD_METRICS_H
#define MCPD_METRICS_H

#include <stdint.h>
#include <event2/buffer.h>
#include <json-c/json.h>

#include "httputil.h"

#define METRICS_ROUTES	8	/* enum route_kind */
#define METRICS_BUCKETS	12

struct metrics {
	uint64_t	requests[METRICS_ROUTES][600];
	uint64_t	buckets[METRICS_ROUTES][METRICS_BUCKETS];
	uint64_t	count[METRICS_ROUTES];
	double		sum[METRICS_ROUTES];
	uint64_t	rejected_connections;
	uint64_t	timed_out_requests;
	unsigned int	open_connections;
	unsigned int	open_sessions;
	unsigned int	open_streams;
	unsigned int	inflight_calls;
};

void	metrics_request(struct metrics *, enum route_kind, int status,
	    double seconds);
/* VMs by state from vmmd ({"running":n,...}); NULL: not known now. */
void	metrics_set_vms(struct json_object *);
/* Each networked VM's drops from vmmd ([{"vm_id","egress","bandwidth",
 * "conn_rate","conn_count"},…]); NULL: not known now. */
void	metrics_set_drops(struct json_object *);
/* Appends the Prometheus text exposition (format 0.0.4). */
void	metrics_render(const struct metrics *, struct evbuffer *);

#endif
