/*
 * mcpd configuration loading; see config.h.  Runs in mcpd before the
 * privilege drop.  Unknown keys in [mcpd] are errors so typos surface.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

struct config_ctx {
	struct mcpd_config *cfg;
	char		*err;
	size_t		 errlen;
	int		 listen_seen;
};

void
config_defaults(struct mcpd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	strcpy(cfg->listen[0].host, "127.0.0.1");
	cfg->listen[0].port = 8090;
	cfg->nlisten = 1;
	cfg->max_header_bytes = 16384;
	cfg->max_body_bytes = 1048576;
	cfg->max_requests_per_connection = 1000;
	cfg->max_connections = 1024;
	cfg->max_connections_per_client = 256;
	cfg->request_timeout = 15;
	cfg->idle_timeout = 60;
	cfg->max_sessions = 4096;
	cfg->max_sessions_per_workspace = 64;
	cfg->session_idle_timeout = 3600;
	cfg->tool_timeout = 900;
	cfg->max_streams = 32;
	strcpy(cfg->user, "mcpvm");
	strcpy(cfg->authd_socket, "/run/mcpvm/authd.sock");
	strcpy(cfg->vmmd_socket, "/run/mcpvm/vmmd.sock");
}

int
config_parse_listen(const char *s, struct mcpd_listen *out)
{
	const char *colon;
	size_t hlen;
	char host[MCPD_ADDR_MAX];
	unsigned char addr[sizeof(struct in6_addr)];
	char *end;
	long port;

	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (rb == NULL || rb[1] != ':')
			return -1;
		hlen = rb - s - 1;
		if (hlen == 0 || hlen >= sizeof(host))
			return -1;
		memcpy(host, s + 1, hlen);
		host[hlen] = '\0';
		if (inet_pton(AF_INET6, host, addr) != 1)
			return -1;
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL)
			return -1;
		hlen = colon - s;
		if (hlen == 0 || hlen >= sizeof(host))
			return -1;
		memcpy(host, s, hlen);
		host[hlen] = '\0';
		if (inet_pton(AF_INET, host, addr) != 1)
			return -1;
	}
	if (colon[1] < '0' || colon[1] > '9')
		return -1;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || port < 1 || port > 65535)
		return -1;
	strcpy(out->host, host);
	out->port = (uint16_t)port;
	return 0;
}

static int
parse_uint(const char *v, unsigned long long min, unsigned long long max,
    unsigned long long *out)
{
	char *end;
	unsigned long long n;

	if (v[0] < '0' || v[0] > '9')
		return -1;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < min || n > max)
		return -1;
	*out = n;
	return 0;
}

/* Splits a space- or comma-separated list into fixed slots. */
static int
parse_list(const char *v, char *slots, size_t slotlen, size_t maxslots,
    size_t *nslots)
{
	const char *p = v;

	while (*p != '\0') {
		size_t n;

		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		n = strcspn(p, " ,\t");
		if (n >= slotlen || *nslots >= maxslots)
			return -1;
		memcpy(slots + *nslots * slotlen, p, n);
		slots[*nslots * slotlen + n] = '\0';
		(*nslots)++;
		p += n;
	}
	return 0;
}

static int
config_handler(void *arg, const char *section, const char *name,
    const char *value)
{
	struct config_ctx *ctx = arg;
	struct mcpd_config *cfg = ctx->cfg;
	unsigned long long n;
	static const struct {
		const char *key;
		unsigned long long min, max;
		size_t off, size;
	} nums[] = {
#define NUM(k, lo, hi) { #k, lo, hi, offsetof(struct mcpd_config, k), \
	sizeof(((struct mcpd_config *)0)->k) }
		NUM(max_header_bytes, 1024, 1048576),
		NUM(max_body_bytes, 4096, 64 * 1048576),
		NUM(max_requests_per_connection, 1, 1000000),
		NUM(max_connections, 1, 65536),
		NUM(max_connections_per_client, 1, 65536),
		NUM(request_timeout, 1, 3600),
		NUM(idle_timeout, 1, 86400),
		NUM(max_sessions, 1, 1000000),
		NUM(max_sessions_per_workspace, 1, 1000000),
		NUM(session_idle_timeout, 10, 30 * 86400),
		NUM(tool_timeout, 1, 86400),
		NUM(max_streams, 0, 65536),
#undef NUM
	};
	size_t i;

	if (strcmp(section, "mcpd") != 0)
		return 1;	/* other daemons' sections */

	for (i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(name, nums[i].key) != 0)
			continue;
		if (parse_uint(value, nums[i].min, nums[i].max, &n) == -1) {
			snprintf(ctx->err, ctx->errlen, "%s: expected an "
			    "integer from %llu to %llu", name, nums[i].min,
			    nums[i].max);
			return 0;
		}
		if (nums[i].size == sizeof(size_t))
			*(size_t *)((char *)cfg + nums[i].off) = n;
		else
			*(unsigned int *)((char *)cfg + nums[i].off) =
			    (unsigned int)n;
		return 1;
	}

	if (strcmp(name, "listen") == 0) {
		char slots[MCPD_MAX_LISTEN][MCPD_ADDR_MAX + 8];
		size_t ns = 0, j;

		if (!ctx->listen_seen)
			cfg->nlisten = 0;
		ctx->listen_seen = 1;
		if (parse_list(value, &slots[0][0], sizeof(slots[0]),
		    MCPD_MAX_LISTEN, &ns) == -1 ||
		    cfg->nlisten + ns > MCPD_MAX_LISTEN) {
			snprintf(ctx->err, ctx->errlen, "listen: at most %d "
			    "addresses", MCPD_MAX_LISTEN);
			return 0;
		}
		for (j = 0; j < ns; j++) {
			if (config_parse_listen(slots[j],
			    &cfg->listen[cfg->nlisten]) == -1) {
				snprintf(ctx->err, ctx->errlen, "listen: "
				    "\"%s\" is not address:port with a "
				    "numeric address", slots[j]);
				return 0;
			}
			cfg->nlisten++;
		}
		return 1;
	}
	if (strcmp(name, "metrics_listen") == 0) {
		if (value[0] == '\0') {
			cfg->metrics_enabled = 0;
			return 1;
		}
		if (config_parse_listen(value, &cfg->metrics_listen) == -1) {
			snprintf(ctx->err, ctx->errlen, "metrics_listen: \"%s\" "
			    "is not address:port with a numeric address",
			    value);
			return 0;
		}
		cfg->metrics_enabled = 1;
		return 1;
	}
	if (strcmp(name, "allowed_hosts") == 0) {
		if (parse_list(value, &cfg->allowed_hosts[0][0],
		    sizeof(cfg->allowed_hosts[0]), MCPD_MAX_ALLOW,
		    &cfg->nallowed_hosts) == -1) {
			snprintf(ctx->err, ctx->errlen, "allowed_hosts: at "
			    "most %d entries of %zu bytes", MCPD_MAX_ALLOW,
			    sizeof(cfg->allowed_hosts[0]) - 1);
			return 0;
		}
		return 1;
	}
	if (strcmp(name, "allowed_origins") == 0) {
		if (parse_list(value, &cfg->allowed_origins[0][0],
		    sizeof(cfg->allowed_origins[0]), MCPD_MAX_ALLOW,
		    &cfg->nallowed_origins) == -1) {
			snprintf(ctx->err, ctx->errlen, "allowed_origins: at "
			    "most %d entries of %zu bytes", MCPD_MAX_ALLOW,
			    sizeof(cfg->allowed_origins[0]) - 1);
			return 0;
		}
		return 1;
	}
#define STR(k) \
	if (strcmp(name, #k) == 0) { \
		if (strlen(value) >= sizeof(cfg->k) || value[0] == '\0') { \
			snprintf(ctx->err, ctx->errlen, "%s: empty or longer " \
			    "than %zu bytes", name, sizeof(cfg->k) - 1); \
			return 0; \
		} \
		strcpy(cfg->k, value); \
		return 1; \
	}
	STR(user)
	STR(authd_socket)
	STR(vmmd_socket)
#undef STR

	snprintf(ctx->err, ctx->errlen, "unknown key \"%s\" in [mcpd]", name);
	return 0;
}

int
config_load(struct mcpd_config *cfg, const char *path, char *err,
    size_t errlen)
{
	struct config_ctx ctx = { cfg, err, errlen, 0 };
	char msg[256];
	int rc;

	err[0] = '\0';
	msg[0] = '\0';
	ctx.err = msg;
	ctx.errlen = sizeof(msg);
	rc = ini_parse(path, config_handler, &ctx);
	if (rc == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (rc != 0) {
		snprintf(err, errlen, "%s:%d: %s", path, rc,
		    msg[0] != '\0' ? msg : "syntax error");
		return -1;
	}
	return config_finish(cfg, err, errlen);
}

int
config_finish(struct mcpd_config *cfg, char *err, size_t errlen)
{
	size_t i;

	if (cfg->nlisten == 0) {
		snprintf(err, errlen, "listen: no address configured");
		return -1;
	}
	if (cfg->max_connections_per_client > cfg->max_connections)
		cfg->max_connections_per_client = cfg->max_connections;
	if (cfg->nallowed_hosts > 0)
		return 0;
	/*
	 * By default only the names a loopback client uses for our own
	 * listeners are accepted, which is what stops DNS rebinding.
	 */
	for (i = 0; i < cfg->nlisten && cfg->nallowed_hosts + 3 <=
	    MCPD_MAX_ALLOW; i++) {
		const struct mcpd_listen *l = &cfg->listen[i];
		int v6 = strchr(l->host, ':') != NULL;

		snprintf(cfg->allowed_hosts[cfg->nallowed_hosts++],
		    sizeof(cfg->allowed_hosts[0]), v6 ? "[%s]:%u" : "%s:%u",
		    l->host, l->port);
		if (strcmp(l->host, "127.0.0.1") == 0 ||
		    strcmp(l->host, "::1") == 0) {
			snprintf(cfg->allowed_hosts[cfg->nallowed_hosts++],
			    sizeof(cfg->allowed_hosts[0]), "localhost:%u",
			    l->port);
		}
	}
	return 0;
}
