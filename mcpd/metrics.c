/*
 * Prometheus text rendering of mcpd's counters; see metrics.h.
 */
#include <stdio.h>

#include "metrics.h"

static const double bounds[METRICS_BUCKETS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30,
};

void
metrics_request(struct metrics *m, enum route_kind r, int status,
    double seconds)
{
	size_t i;

	if ((unsigned int)r >= METRICS_ROUTES)
		r = ROUTE_NONE;
	if (status < 100 || status > 599)
		status = 599;
	m->requests[r][status]++;
	m->count[r]++;
	m->sum[r] += seconds;
	for (i = 0; i < METRICS_BUCKETS; i++)
		if (seconds <= bounds[i])
			m->buckets[r][i]++;
}

static struct json_object *vms_by_state;

void
metrics_set_vms(struct json_object *vms)
{
	json_object_put(vms_by_state);
	vms_by_state = json_object_get(vms);
}

static struct json_object *vm_drops;

void
metrics_set_drops(struct json_object *drops)
{
	json_object_put(vm_drops);
	vm_drops = json_object_get(drops);
}

/* A label value from vmmd, printed only when it is an id's characters. */
static int
label_ok(const char *s)
{
	size_t n = 0;

	if (s == NULL)
		return 0;
	for (; s[n] != '\0'; n++)
		if (n >= 64 || !((s[n] >= 'a' && s[n] <= 'z') ||
		    (s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= '0' &&
		    s[n] <= '9') || s[n] == '-' || s[n] == '_'))
			return 0;
	return n > 0;
}

/* Per VM: its egress packets the host dropped, by why. */
static void
render_drops(struct evbuffer *b)
{
	static const char *const why[] = { "egress", "bandwidth",
	    "conn_rate", "conn_count" };
	size_t n;

	if (vm_drops == NULL)
		return;
	evbuffer_add_printf(b, "# HELP mcpd_vm_dropped_packets_total Packets "
	    "a VM sent that the host dropped, by reason (egress policy, "
	    "bandwidth limit, connection rate and count), as vmmd last "
	    "reported.\n# TYPE mcpd_vm_dropped_packets_total counter\n");
	n = json_object_array_length(vm_drops);
	for (size_t i = 0; i < n && i < 4096; i++) {
		struct json_object *e = json_object_array_get_idx(vm_drops, i);
		struct json_object *id, *v;

		/* The VM's id only: /metrics asks for no credential, and a
		 * workspace's name is its owner's business. */
		if (!json_object_object_get_ex(e, "vm_id", &id) ||
		    !json_object_is_type(id, json_type_string) ||
		    !label_ok(json_object_get_string(id)))
			continue;
		for (size_t k = 0; k < sizeof(why) / sizeof(why[0]); k++) {
			if (!json_object_object_get_ex(e, why[k], &v) ||
			    !json_object_is_type(v, json_type_int))
				continue;
			evbuffer_add_printf(b, "mcpd_vm_dropped_packets_total"
			    "{vm_id=\"%s\",reason=\"%s\"} %lld\n",
			    json_object_get_string(id), why[k],
			    (long long)json_object_get_int64(v));
		}
	}
	evbuffer_add_printf(b, "# HELP mcpd_vm_dns_refused_total Names a VM "
	    "asked its egress allowlist's DNS forwarder for that the list "
	    "does not name, as vmmd last reported.\n"
	    "# TYPE mcpd_vm_dns_refused_total counter\n");
	for (size_t i = 0; i < n && i < 4096; i++) {
		struct json_object *e = json_object_array_get_idx(vm_drops, i);
		struct json_object *id, *v;

		if (!json_object_object_get_ex(e, "vm_id", &id) ||
		    !json_object_is_type(id, json_type_string) ||
		    !label_ok(json_object_get_string(id)) ||
		    !json_object_object_get_ex(e, "dns_refused", &v) ||
		    !json_object_is_type(v, json_type_int))
			continue;
		evbuffer_add_printf(b, "mcpd_vm_dns_refused_total{vm_id=\"%s\"} "
		    "%lld\n", json_object_get_string(id),
		    (long long)json_object_get_int64(v));
	}
}

void
metrics_render(const struct metrics *m, struct evbuffer *b)
{
	int r, s;
	size_t i;

	evbuffer_add_printf(b,
	    "# HELP mcpd_http_requests_total HTTP requests answered, by route "
	    "and status code.\n"
	    "# TYPE mcpd_http_requests_total counter\n");
	for (r = 0; r < METRICS_ROUTES; r++)
		for (s = 100; s < 600; s++)
			if (m->requests[r][s] != 0)
				evbuffer_add_printf(b, "mcpd_http_requests_total"
				    "{route=\"%s\",code=\"%d\"} %llu\n",
				    route_label(r), s,
				    (unsigned long long)m->requests[r][s]);

	evbuffer_add_printf(b,
	    "# HELP mcpd_http_request_duration_seconds Time from a complete "
	    "request to the start of its response.\n"
	    "# TYPE mcpd_http_request_duration_seconds histogram\n");
	for (r = 0; r < METRICS_ROUTES; r++) {
		if (m->count[r] == 0)
			continue;
		for (i = 0; i < METRICS_BUCKETS; i++)
			evbuffer_add_printf(b,
			    "mcpd_http_request_duration_seconds_bucket"
			    "{route=\"%s\",le=\"%g\"} %llu\n", route_label(r),
			    bounds[i], (unsigned long long)m->buckets[r][i]);
		evbuffer_add_printf(b,
		    "mcpd_http_request_duration_seconds_bucket"
		    "{route=\"%s\",le=\"+Inf\"} %llu\n"
		    "mcpd_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
		    "mcpd_http_request_duration_seconds_count{route=\"%s\"} "
		    "%llu\n", route_label(r), (unsigned long long)m->count[r],
		    route_label(r), m->sum[r], route_label(r),
		    (unsigned long long)m->count[r]);
	}
	evbuffer_add_printf(b,
	    "# HELP mcpd_connections_rejected_total Connections refused by "
	    "the connection limits.\n"
	    "# TYPE mcpd_connections_rejected_total counter\n"
	    "mcpd_connections_rejected_total %llu\n"
	    "# HELP mcpd_requests_timed_out_total Connections closed because "
	    "a request did not arrive in time.\n"
	    "# TYPE mcpd_requests_timed_out_total counter\n"
	    "mcpd_requests_timed_out_total %llu\n"
	    "# HELP mcpd_open_connections Client connections open now.\n"
	    "# TYPE mcpd_open_connections gauge\n"
	    "mcpd_open_connections %u\n"
	    "# HELP mcpd_open_sessions MCP sessions open now.\n"
	    "# TYPE mcpd_open_sessions gauge\n"
	    "mcpd_open_sessions %u\n"
	    "# HELP mcpd_open_streams Guest byte streams open now.\n"
	    "# TYPE mcpd_open_streams gauge\n"
	    "mcpd_open_streams %u\n"
	    "# HELP mcpd_inflight_tool_calls Tool calls waiting for the "
	    "backend.\n"
	    "# TYPE mcpd_inflight_tool_calls gauge\n"
	    "mcpd_inflight_tool_calls %u\n",
	    (unsigned long long)m->rejected_connections,
	    (unsigned long long)m->timed_out_requests, m->open_connections,
	    m->open_sessions, m->open_streams, m->inflight_calls);
	/* Only what vmmd told us: no number is better than a made-up one. */
	if (vms_by_state != NULL) {
		evbuffer_add_printf(b, "# HELP mcpd_vms VMs by state, as vmmd "
		    "last reported.\n# TYPE mcpd_vms gauge\n");
		json_object_object_foreach(vms_by_state, state, v) {
			const char *p;

			/* A label value we print must stay a label value. */
			for (p = state; *p != '\0'; p++)
				if (!((*p >= 'a' && *p <= 'z') || *p == '_'))
					break;
			if (*p != '\0' || !json_object_is_type(v,
			    json_type_int))
				continue;
			evbuffer_add_printf(b, "mcpd_vms{state=\"%s\"} %lld\n",
			    state, (long long)json_object_get_int64(v));
		}
	}
	render_drops(b);
}
