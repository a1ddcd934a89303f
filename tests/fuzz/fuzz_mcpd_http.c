/*
 * libFuzzer target: the request pieces mcpd parses itself (route, Host,
 * Origin, Authorization, Accept, Content-Type, WebSocket handshake
 * headers, listen addresses).  evhttp parses the rest.  The input is split
 * at newlines, one piece per parser, as a request's headers would be.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "httputil.h"
#include "mcpd_conf.h"
#include "ws.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mcpd_config cfg;
	static int init;
	char *buf, *f[8] = { 0 };
	char tok[512];
	struct route r;
	struct mcpd_listen l;
	const char *why;
	size_t i, n = 0;
	char err[128];

	if (!init) {
		config_defaults(&cfg);
		strcpy(cfg.allowed_hosts[cfg.nallowed_hosts++], "example.org");
		strcpy(cfg.allowed_hosts[cfg.nallowed_hosts++], "[::1]:8090");
		strcpy(cfg.allowed_origins[cfg.nallowed_origins++],
		    "https://app.example");
		config_finish(&cfg, err, sizeof(err));
		init = 1;
	}
	if ((buf = malloc(size + 1)) == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	f[n++] = buf;
	for (i = 0; i < size && n < 8; i++) {
		if (buf[i] == '\n') {
			buf[i] = '\0';
			f[n++] = buf + i + 1;
		}
	}
	route_parse(f[0], &r);
	if (r.kind == ROUTE_TOOL && strlen(r.tool) == 0)
		abort();
	host_allowed(&cfg, f[1 % n]);
	origin_allowed(&cfg, f[2 % n]);
	if (bearer_parse(f[3 % n], tok, sizeof(tok)) == 0 &&
	    strlen(tok) >= sizeof(tok))
		abort();
	accept_parse(f[4 % n]);
	content_type_is_json(f[5 % n]);
	if (ws_handshake_check(f[6 % n], f[6 % n], f[7 % n], "13", &why) == 0) {
		char acc[WS_ACCEPT_LEN + 1];

		if (ws_accept_key(f[7 % n], acc) != 0)
			abort();
	}
	config_parse_listen(f[0], &l);
	free(buf);
	return 0;
}
