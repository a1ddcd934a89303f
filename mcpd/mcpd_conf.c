/*
 * mcpd's configuration: the [mcpd] section of the shared mcpvm.conf, read
 * with common/conf (which checks every key and range) and turned into the
 * fixed-size form mcpd uses.  Runs in mcpd before the privilege drop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "mcpd_conf.h"

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

/* Copies a list of words into fixed slots; -1 if one does not fit. */
static int
copy_list(const struct cfg_list *l, char *slots, size_t slotlen,
    size_t maxslots, size_t *n, const char *key, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < l->n; i++) {
		if (*n >= maxslots || strlen(l->v[i]) >= slotlen) {
			snprintf(err, errlen, "[mcpd] %s: at most %zu entries "
			    "of %zu bytes", key, maxslots, slotlen - 1);
			return -1;
		}
		strcpy(slots + *n * slotlen, l->v[i]);
		(*n)++;
	}
	return 0;
}

static int
copy_path(char *dst, size_t len, const char *src, const char *key, char *err,
    size_t errlen)
{
	if (strlen(src) >= len) {
		snprintf(err, errlen, "[mcpd] %s: longer than %zu bytes", key,
		    len - 1);
		return -1;
	}
	strcpy(dst, src);
	return 0;
}

/* Fills cfg from conf's [mcpd], whose key table has checked every range. */
static int
config_from(struct mcpd_config *cfg, const struct mcpvm_conf *conf,
    char *err, size_t errlen)
{
	const struct conf_mcpd *c = &conf->mcpd;
	size_t i;

	cfg->nlisten = 0;
	for (i = 0; i < c->listen.n; i++) {
		if (cfg->nlisten >= MCPD_MAX_LISTEN) {
			snprintf(err, errlen, "[mcpd] listen: at most %d "
			    "addresses", MCPD_MAX_LISTEN);
			return -1;
		}
		if (config_parse_listen(c->listen.v[i],
		    &cfg->listen[cfg->nlisten]) == -1) {
			snprintf(err, errlen, "[mcpd] listen: \"%s\" is not "
			    "address:port with a numeric address",
			    c->listen.v[i]);
			return -1;
		}
		cfg->nlisten++;
	}
	cfg->metrics_enabled = c->metrics_listen[0] != '\0';
	if (cfg->metrics_enabled && config_parse_listen(c->metrics_listen,
	    &cfg->metrics_listen) == -1) {
		snprintf(err, errlen, "[mcpd] metrics_listen: \"%s\" is not "
		    "address:port with a numeric address", c->metrics_listen);
		return -1;
	}
	if (copy_list(&c->allowed_hosts, &cfg->allowed_hosts[0][0],
	    sizeof(cfg->allowed_hosts[0]), MCPD_MAX_ALLOW,
	    &cfg->nallowed_hosts, "allowed_hosts", err, errlen) == -1 ||
	    copy_list(&c->allowed_origins, &cfg->allowed_origins[0][0],
	    sizeof(cfg->allowed_origins[0]), MCPD_MAX_ALLOW,
	    &cfg->nallowed_origins, "allowed_origins", err, errlen) == -1 ||
	    copy_path(cfg->user, sizeof(cfg->user), c->user, "user", err,
	    errlen) == -1 ||
	    copy_path(cfg->authd_socket, sizeof(cfg->authd_socket),
	    c->authd_socket, "authd_socket", err, errlen) == -1 ||
	    copy_path(cfg->vmmd_socket, sizeof(cfg->vmmd_socket),
	    c->vmmd_socket, "vmmd_socket", err, errlen) == -1)
		return -1;
	/* The key table has already checked every range. */
	cfg->max_header_bytes = (size_t)c->max_header_bytes;
	cfg->max_body_bytes = (size_t)c->max_body_bytes;
	cfg->max_requests_per_connection =
	    (unsigned int)c->max_requests_per_connection;
	cfg->max_connections = (unsigned int)c->max_connections;
	cfg->max_connections_per_client =
	    (unsigned int)c->max_connections_per_client;
	cfg->request_timeout = (unsigned int)c->request_timeout;
	cfg->idle_timeout = (unsigned int)c->idle_timeout;
	cfg->max_sessions = (unsigned int)c->max_sessions;
	cfg->max_sessions_per_workspace =
	    (unsigned int)c->max_sessions_per_workspace;
	cfg->max_connections_per_workspace =
	    (unsigned int)c->max_connections_per_workspace;
	cfg->max_calls_per_workspace = (unsigned int)c->max_calls_per_workspace;
	cfg->max_listens_per_workspace =
	    (unsigned int)c->max_listens_per_workspace;
	cfg->session_idle_timeout = (unsigned int)c->session_idle_timeout;
	cfg->tool_timeout = (unsigned int)c->tool_timeout;
	cfg->stream_rate_bytes = (size_t)c->stream_rate_bytes;
	cfg->stream_control_queue_bytes =
	    (size_t)c->stream_control_queue_bytes;
	return 0;
}

/*
 * The defaults: common/conf.c's key table's own, read from an empty
 * configuration, so that they are written in one place.
 */
void
config_defaults(struct mcpd_config *cfg)
{
	struct mcpvm_conf conf;
	char err[256];

	memset(cfg, 0, sizeof(*cfg));
	memset(&conf, 0, sizeof(conf));
	if (cfg_parse_string(&mcpvm_conf_schema, "(defaults)", "", &conf, err,
	    sizeof(err)) == -1 || config_from(cfg, &conf, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "mcpd: the built-in defaults: %s\n", err);
		abort();
	}
	conf_free(&conf);
}

/* Reads the [mcpd] section of the shared mcpvm.conf (common/conf). */
int
config_load(struct mcpd_config *cfg, const char *path, char *err,
    size_t errlen)
{
	struct mcpvm_conf conf;
	int rc;

	if (conf_load(path, &conf, err, errlen) == -1)
		return -1;
	rc = config_from(cfg, &conf, err, errlen);
	if (rc == 0)
		rc = config_finish(cfg, err, errlen);
	conf_free(&conf);
	return rc;
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
	if (cfg->max_connections_per_workspace > cfg->max_connections)
		cfg->max_connections_per_workspace = cfg->max_connections;
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
