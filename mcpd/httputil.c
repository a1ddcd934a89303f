/*
 * Pure request-header parsers for mcpd's HTTP front end; see httputil.h.
 * Every input here comes straight from the network.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "httputil.h"

static int
name_char(int c)
{
	return isalnum(c) || c == '_' || c == '-';
}

/* Copies a path segment of [A-Za-z0-9_-]; returns its length or 0. */
static size_t
segment(const char *p, char *out, size_t outlen)
{
	size_t n = 0;

	while (p[n] != '\0' && p[n] != '/' && p[n] != '?') {
		if (!name_char((unsigned char)p[n]) || n + 1 >= outlen)
			return 0;
		n++;
	}
	memcpy(out, p, n);
	out[n] = '\0';
	return n;
}

static int
at_end(const char *p)
{
	return *p == '\0' || *p == '?';
}

void
route_parse(const char *target, struct route *r)
{
	const char *p;
	size_t n;

	memset(r, 0, sizeof(*r));
	r->kind = ROUTE_NONE;
	if (target == NULL || target[0] != '/')
		return;

	if (strncmp(target, "/mcp", 4) == 0 && at_end(target + 4)) {
		r->kind = ROUTE_MCP;
		return;
	}
	if (strncmp(target, "/healthz", 8) == 0 && at_end(target + 8)) {
		r->kind = ROUTE_HEALTHZ;
		return;
	}
	if (strncmp(target, "/metrics", 8) == 0 && at_end(target + 8)) {
		r->kind = ROUTE_METRICS;
		return;
	}
	if (strncmp(target, "/v1/tools/", 10) == 0) {
		p = target + 10;
		if ((n = segment(p, r->tool, sizeof(r->tool))) == 0 ||
		    !at_end(p + n)) {
			r->tool[0] = '\0';
			return;
		}
		r->kind = ROUTE_TOOL;
		return;
	}
	if (strncmp(target, "/v1/approvals/", 14) == 0) {
		size_t i;

		p = target + 14;
		if ((n = segment(p, r->proposal, sizeof(r->proposal))) != 33 ||
		    !at_end(p + n) || p[0] != 'p')
			goto none;
		for (i = 1; i < n; i++)
			if (!((p[i] >= '0' && p[i] <= '9') ||
			    (p[i] >= 'a' && p[i] <= 'f')))
				goto none;
		r->kind = ROUTE_APPROVAL;
		return;
	}
	if (strncmp(target, "/v1/vms/", 8) == 0) {
		unsigned long port = 0;
		size_t i;

		p = target + 8;
		if ((n = segment(p, r->vm_id, sizeof(r->vm_id))) == 0)
			goto none;
		p += n;
		if (strncmp(p, "/jobs/", 6) == 0) {
			p += 6;
			if ((n = segment(p, r->job_id, sizeof(r->job_id))) ==
			    0 || strncmp(p + n, "/broker", 7) != 0 ||
			    !at_end(p + n + 7))
				goto none;
			r->kind = ROUTE_BROKER;
			return;
		}
		if (strncmp(p, "/streams/", 9) != 0)
			goto none;
		p += 9;
		/* Decimal without sign or leading zeros, at most 65535. */
		for (i = 0; p[i] >= '0' && p[i] <= '9'; i++) {
			if (i == 5 || (i == 1 && p[0] == '0'))
				goto none;
			port = port * 10 + (unsigned long)(p[i] - '0');
		}
		if (i == 0 || port > 65535 || !at_end(p + i))
			goto none;
		r->port = (uint16_t)port;
		r->kind = ROUTE_STREAM;
		return;
	}
	return;
none:
	memset(r, 0, sizeof(*r));
	r->kind = ROUTE_NONE;
}

const char *
route_label(enum route_kind k)
{
	switch (k) {
	case ROUTE_MCP:
		return "mcp";
	case ROUTE_TOOL:
		return "tools";
	case ROUTE_STREAM:
		return "streams";
	case ROUTE_BROKER:
		return "broker";
	case ROUTE_HEALTHZ:
		return "healthz";
	case ROUTE_METRICS:
		return "metrics";
	case ROUTE_APPROVAL:
		return "approvals";
	case ROUTE_NONE:
		break;
	}
	return "other";
}

/*
 * Splits a Host value into name and optional port, checking the syntax of
 * RFC 9110 (reg-name, IPv4 or a bracketed IPv6 literal).
 */
static int
host_split(const char *host, const char **name, size_t *namelen,
    const char **port)
{
	const char *p;

	if (host[0] == '[') {
		p = strchr(host, ']');
		if (p == NULL || p == host + 1)
			return -1;
		for (const char *q = host + 1; q < p; q++)
			if (!isxdigit((unsigned char)*q) && *q != ':' &&
			    *q != '.')
				return -1;
		*name = host;
		*namelen = p - host + 1;
		p++;
	} else {
		for (p = host; *p != '\0' && *p != ':'; p++)
			if (!isalnum((unsigned char)*p) && *p != '-' &&
			    *p != '.' && *p != '_')
				return -1;
		*name = host;
		*namelen = p - host;
		if (*namelen == 0)
			return -1;
	}
	if (*p == '\0') {
		*port = NULL;
		return 0;
	}
	if (*p != ':')
		return -1;
	p++;
	if (*p == '\0' || strlen(p) > 5)
		return -1;
	for (const char *q = p; *q != '\0'; q++)
		if (!isdigit((unsigned char)*q))
			return -1;
	*port = p;
	return 0;
}

int
host_allowed(const struct mcpd_config *cfg, const char *host)
{
	const char *name, *port, *ename, *eport;
	size_t namelen, enamelen, i;

	if (host == NULL || host_split(host, &name, &namelen, &port) == -1)
		return 0;
	for (i = 0; i < cfg->nallowed_hosts; i++) {
		const char *e = cfg->allowed_hosts[i];

		if (host_split(e, &ename, &enamelen, &eport) == -1)
			continue;
		if (enamelen != namelen ||
		    strncasecmp(ename, name, namelen) != 0)
			continue;
		if (eport == NULL)
			return 1;
		if (port != NULL && strcmp(eport, port) == 0)
			return 1;
	}
	return 0;
}

/*
 * An Origin's host and port against allowed_hosts.  An origin is scheme,
 * host and port, so an entry without a port means the scheme's default
 * port here (80 for http, 443 for https), not any port: another service on
 * the same name is another origin.
 */
static int
origin_host_allowed(const struct mcpd_config *cfg, const char *hostport,
    long defport)
{
	const char *name, *port, *ename, *eport;
	size_t namelen, enamelen, i;
	long want, have;

	if (host_split(hostport, &name, &namelen, &port) == -1)
		return 0;
	have = port != NULL ? strtol(port, NULL, 10) : defport;
	for (i = 0; i < cfg->nallowed_hosts; i++) {
		const char *e = cfg->allowed_hosts[i];

		if (host_split(e, &ename, &enamelen, &eport) == -1)
			continue;
		if (enamelen != namelen ||
		    strncasecmp(ename, name, namelen) != 0)
			continue;
		want = eport != NULL ? strtol(eport, NULL, 10) : defport;
		if (have == want)
			return 1;
	}
	return 0;
}

int
origin_allowed(const struct mcpd_config *cfg, const char *origin)
{
	size_t i;

	if (origin == NULL)
		return 1;
	for (i = 0; i < cfg->nallowed_origins; i++)
		if (strcasecmp(cfg->allowed_origins[i], origin) == 0)
			return 1;
	/*
	 * Our own origin (scheme and an allowed Host) is not foreign: a
	 * rebinding attacker's page carries its own name.
	 */
	if (strncasecmp(origin, "http://", 7) == 0)
		return origin_host_allowed(cfg, origin + 7, 80);
	if (strncasecmp(origin, "https://", 8) == 0)
		return origin_host_allowed(cfg, origin + 8, 443);
	return 0;
}

/* RFC 6750 b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
int
bearer_parse(const char *authz, char *tok, size_t toklen)
{
	const char *p;
	size_t n;

	if (authz == NULL || strncasecmp(authz, "Bearer ", 7) != 0)
		return -1;
	p = authz + 7;
	while (*p == ' ')
		p++;
	for (n = 0; isalnum((unsigned char)p[n]) || p[n] == '-' ||
	    p[n] == '.' || p[n] == '_' || p[n] == '~' || p[n] == '+' ||
	    p[n] == '/'; n++)
		;
	if (n == 0)
		return -1;
	while (p[n] == '=')
		n++;
	/* Trailing whitespace is trimmed by the HTTP parser; nothing else. */
	if (p[n] != '\0' || n >= toklen)
		return -1;
	memcpy(tok, p, n);
	tok[n] = '\0';
	return 0;
}

static int
q_is_zero(const char *params, size_t len)
{
	const char *p = params, *end = params + len;

	while (p < end) {
		while (p < end && (*p == ';' || *p == ' ' || *p == '\t'))
			p++;
		if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') &&
		    p[1] == '=') {
			p += 2;
			if (p < end && *p == '0') {
				p++;
				if (p < end && *p == '.')
					p++;
				while (p < end && *p == '0')
					p++;
				return p == end || *p == ';' || *p == ' ' ||
				    *p == '\t';
			}
			return 0;
		}
		while (p < end && *p != ';')
			p++;
	}
	return 0;
}

unsigned int
accept_parse(const char *accept)
{
	const char *p = accept;
	unsigned int flags = 0;

	/* No Accept header means anything is acceptable (RFC 9110). */
	if (accept == NULL)
		return ACCEPT_JSON | ACCEPT_SSE;
	while (*p != '\0') {
		size_t len, mlen;
		const char *params;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		len = strcspn(p, ",");
		params = memchr(p, ';', len);
		mlen = params != NULL ? (size_t)(params - p) : len;
		while (mlen > 0 && (p[mlen - 1] == ' ' || p[mlen - 1] == '\t'))
			mlen--;
		if (params == NULL || !q_is_zero(params, len - (params - p))) {
#define IS(s) (mlen == sizeof(s) - 1 && strncasecmp(p, s, mlen) == 0)
			if (IS("application/json") || IS("application/*"))
				flags |= ACCEPT_JSON;
			else if (IS("text/event-stream") || IS("text/*"))
				flags |= ACCEPT_SSE;
			else if (IS("*/*"))
				flags |= ACCEPT_JSON | ACCEPT_SSE;
#undef IS
		}
		p += len;
	}
	return flags;
}

int
content_type_is_json(const char *ct)
{
	size_t n;

	if (ct == NULL)
		return 0;
	while (*ct == ' ')
		ct++;
	n = strcspn(ct, "; \t");
	if (n != 16 || strncasecmp(ct, "application/json", 16) != 0)
		return 0;
	ct += n;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return *ct == '\0' || *ct == ';';
}
