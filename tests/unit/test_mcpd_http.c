/*
 * Unit tests for mcpd's request-header parsers (mcpd/httputil.c), its
 * configuration (mcpd/mcpd_conf.c) and its counts per workspace
 * (mcpd/budget.c).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "httputil.h"
#include "mcpd_conf.h"
#include "../check_run.h"

static struct mcpd_config cfg;

static void
setup(void)
{
	char err[256];

	config_defaults(&cfg);
	ck_assert_int_eq(config_finish(&cfg, err, sizeof(err)), 0);
}

START_TEST(routes)
{
	struct route r;

	route_parse("/mcp", &r);
	ck_assert_int_eq(r.kind, ROUTE_MCP);
	route_parse("/mcp?x=1", &r);
	ck_assert_int_eq(r.kind, ROUTE_MCP);
	route_parse("/healthz", &r);
	ck_assert_int_eq(r.kind, ROUTE_HEALTHZ);
	route_parse("/v1/tools/vm_list", &r);
	ck_assert_int_eq(r.kind, ROUTE_TOOL);
	ck_assert_str_eq(r.tool, "vm_list");
	route_parse("/v1/vms/3f2a-b_c/streams/5000", &r);
	ck_assert_int_eq(r.kind, ROUTE_STREAM);
	ck_assert_str_eq(r.vm_id, "3f2a-b_c");
	ck_assert_uint_eq(r.port, 5000);
	route_parse("/v1/vms/v/streams/65535", &r);
	ck_assert_uint_eq(r.port, 65535);
	route_parse("/v1/vms/v/streams/0", &r);
	ck_assert_int_eq(r.kind, ROUTE_STREAM);
	ck_assert_uint_eq(r.port, 0);
	route_parse("/v1/vms/3f2a/jobs/j0a1b/broker", &r);
	ck_assert_int_eq(r.kind, ROUTE_BROKER);
	ck_assert_str_eq(r.vm_id, "3f2a");
	ck_assert_str_eq(r.job_id, "j0a1b");
	ck_assert_str_eq(route_label(r.kind), "broker");
	{
		static const char *none[] = {
			"", "mcp", "/", "/mcp/", "/mcpx", "/MCP", "/v1/tools/",
			"/v1/tools/a/b", "/v1/tools/a%20b", "/v1/tools/../x",
			"/v1/vms//streams/1", "/v1/vms/v/streams/",
			"/v1/vms/v/streams/65536", "/v1/vms/v/streams/01",
			"/v1/vms/v/streams/-1", "/v1/vms/v/streams/1a",
			"/v1/vms/v/streams/123456", "/v1/vms/v/stream/1",
			"/v1/vms/v.v/streams/1", "//mcp",
			"/v1/vms/v/jobs//broker", "/v1/vms/v/jobs/j/broker/",
			"/v1/vms/v/jobs/j/brokers", "/v1/vms/v/jobs/j",
			"/v1/vms/v/jobs/j.k/broker",
		};
		size_t i;

		for (i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
			route_parse(none[i], &r);
			ck_assert_msg(r.kind == ROUTE_NONE, "%s", none[i]);
		}
	}
	route_parse(NULL, &r);
	ck_assert_int_eq(r.kind, ROUTE_NONE);
}
END_TEST

START_TEST(hosts)
{
	/* Defaults for 127.0.0.1:8090. */
	ck_assert_int_eq(host_allowed(&cfg, "127.0.0.1:8090"), 1);
	ck_assert_int_eq(host_allowed(&cfg, "localhost:8090"), 1);
	ck_assert_int_eq(host_allowed(&cfg, "LocalHost:8090"), 1);
	ck_assert_int_eq(host_allowed(&cfg, "127.0.0.1"), 0);
	ck_assert_int_eq(host_allowed(&cfg, "127.0.0.1:8091"), 0);
	ck_assert_int_eq(host_allowed(&cfg, "evil.example:8090"), 0);
	ck_assert_int_eq(host_allowed(&cfg, "localhost.:8090"), 0);
	ck_assert_int_eq(host_allowed(&cfg, "localhost:8090:1"), 0);
	ck_assert_int_eq(host_allowed(&cfg, "localhost:"), 0);
	ck_assert_int_eq(host_allowed(&cfg, ""), 0);
	ck_assert_int_eq(host_allowed(&cfg, NULL), 0);
	ck_assert_int_eq(host_allowed(&cfg, "user@localhost:8090"), 0);
	/* A name without a port matches any port; v6 literals. */
	strcpy(cfg.allowed_hosts[cfg.nallowed_hosts++], "mcp.example.org");
	strcpy(cfg.allowed_hosts[cfg.nallowed_hosts++], "[::1]:8090");
	ck_assert_int_eq(host_allowed(&cfg, "mcp.example.org"), 1);
	ck_assert_int_eq(host_allowed(&cfg, "mcp.example.org:443"), 1);
	ck_assert_int_eq(host_allowed(&cfg, "[::1]:8090"), 1);
	ck_assert_int_eq(host_allowed(&cfg, "[::1]:8091"), 0);
	ck_assert_int_eq(host_allowed(&cfg, "[::1"), 0);
}
END_TEST

START_TEST(origins)
{
	ck_assert_int_eq(origin_allowed(&cfg, NULL), 1);
	/* Our own origin, by an allowed Host with its port. */
	ck_assert_int_eq(origin_allowed(&cfg, "http://localhost:8090"), 1);
	ck_assert_int_eq(origin_allowed(&cfg, "https://127.0.0.1:8090"), 1);
	ck_assert_int_eq(origin_allowed(&cfg, "http://localhost"), 0);
	ck_assert_int_eq(origin_allowed(&cfg, "http://localhost:3000"), 0);
	ck_assert_int_eq(origin_allowed(&cfg, "ftp://localhost:8090"), 0);
	ck_assert_int_eq(origin_allowed(&cfg, "http://localhost:8090/"), 0);
	ck_assert_int_eq(origin_allowed(&cfg, "http://evil.example"), 0);
	ck_assert_int_eq(origin_allowed(&cfg, "null"), 0);
	ck_assert_int_eq(origin_allowed(&cfg, ""), 0);
	strcpy(cfg.allowed_origins[cfg.nallowed_origins++],
	    "https://app.example");
	ck_assert_int_eq(origin_allowed(&cfg, "https://app.example"), 1);
	ck_assert_int_eq(origin_allowed(&cfg, "https://APP.example"), 1);
	ck_assert_int_eq(origin_allowed(&cfg, "https://app.example.evil"), 0);
	ck_assert_int_eq(origin_allowed(&cfg, "http://app.example"), 0);
}
END_TEST

/*
 * Issue 14, finding 15: an allowed host without a port stands for its
 * scheme's default port in an Origin (an origin is scheme, host and port),
 * never for every port of that host.
 */
START_TEST(origin_portless_host_means_default_port)
{
	strcpy(cfg.allowed_hosts[cfg.nallowed_hosts++], "mcp.example.org");
	/* The TLS proxy's own origin, with or without its default port. */
	ck_assert_int_eq(origin_allowed(&cfg, "https://mcp.example.org"), 1);
	ck_assert_int_eq(origin_allowed(&cfg, "https://mcp.example.org:443"),
	    1);
	ck_assert_int_eq(origin_allowed(&cfg, "http://mcp.example.org"), 1);
	ck_assert_int_eq(origin_allowed(&cfg, "http://mcp.example.org:80"), 1);
	/* Another service on the same name is another origin. */
	ck_assert_int_eq(origin_allowed(&cfg, "http://mcp.example.org:6666"),
	    0);
	ck_assert_int_eq(origin_allowed(&cfg, "https://mcp.example.org:8443"),
	    0);
	ck_assert_int_eq(origin_allowed(&cfg, "https://mcp.example.org:80"),
	    0);
	ck_assert_int_eq(origin_allowed(&cfg, "http://mcp.example.org:443"),
	    0);
	ck_assert_int_eq(origin_allowed(&cfg, "http://mcp.example.org:"), 0);
	/* An entry with a port still means exactly that port. */
	ck_assert_int_eq(origin_allowed(&cfg, "http://localhost:8090"), 1);
	ck_assert_int_eq(origin_allowed(&cfg, "http://localhost"), 0);
	ck_assert_int_eq(origin_allowed(&cfg, "http://localhost:80"), 0);
}
END_TEST

START_TEST(bearer)
{
	char tok[64];

	ck_assert_int_eq(bearer_parse("Bearer abc.DEF-_~+/==", tok,
	    sizeof(tok)), 0);
	ck_assert_str_eq(tok, "abc.DEF-_~+/==");
	ck_assert_int_eq(bearer_parse("bearer   x", tok, sizeof(tok)), 0);
	ck_assert_str_eq(tok, "x");
	ck_assert_int_eq(bearer_parse(NULL, tok, sizeof(tok)), -1);
	ck_assert_int_eq(bearer_parse("Bearer", tok, sizeof(tok)), -1);
	ck_assert_int_eq(bearer_parse("Bearer ", tok, sizeof(tok)), -1);
	ck_assert_int_eq(bearer_parse("Basic abc", tok, sizeof(tok)), -1);
	ck_assert_int_eq(bearer_parse("Bearer a b", tok, sizeof(tok)), -1);
	ck_assert_int_eq(bearer_parse("Bearer a=b", tok, sizeof(tok)), -1);
	ck_assert_int_eq(bearer_parse("Bearer =", tok, sizeof(tok)), -1);
	ck_assert_int_eq(bearer_parse("Bearer a\"", tok, sizeof(tok)), -1);
	ck_assert_int_eq(bearer_parse("Bearerx abc", tok, sizeof(tok)), -1);
	/* Too long for the buffer: refused, not truncated. */
	ck_assert_int_eq(bearer_parse("Bearer 0123456789", tok, 8), -1);
}
END_TEST

START_TEST(accept_header)
{
	ck_assert_uint_eq(accept_parse(NULL), ACCEPT_JSON | ACCEPT_SSE);
	ck_assert_uint_eq(accept_parse("application/json, text/event-stream"),
	    ACCEPT_JSON | ACCEPT_SSE);
	ck_assert_uint_eq(accept_parse("application/json"), ACCEPT_JSON);
	ck_assert_uint_eq(accept_parse("text/event-stream"), ACCEPT_SSE);
	ck_assert_uint_eq(accept_parse("*/*"), ACCEPT_JSON | ACCEPT_SSE);
	ck_assert_uint_eq(accept_parse("text/*;q=0.5"), ACCEPT_SSE);
	ck_assert_uint_eq(accept_parse("Application/JSON;charset=utf-8"),
	    ACCEPT_JSON);
	ck_assert_uint_eq(accept_parse("application/json;q=0, */*"),
	    ACCEPT_JSON | ACCEPT_SSE);
	ck_assert_uint_eq(accept_parse("application/json;q=0.0"), 0);
	ck_assert_uint_eq(accept_parse("application/json; q=0.001"),
	    ACCEPT_JSON);
	ck_assert_uint_eq(accept_parse("image/png"), 0);
	ck_assert_uint_eq(accept_parse(""), 0);
	ck_assert_uint_eq(accept_parse(",,,"), 0);
	ck_assert_uint_eq(accept_parse("application/jsonx"), 0);
}
END_TEST

START_TEST(content_type)
{
	ck_assert_int_eq(content_type_is_json("application/json"), 1);
	ck_assert_int_eq(content_type_is_json("application/json; charset=utf-8"),
	    1);
	ck_assert_int_eq(content_type_is_json("APPLICATION/JSON"), 1);
	ck_assert_int_eq(content_type_is_json("application/jsonx"), 0);
	ck_assert_int_eq(content_type_is_json("text/plain"), 0);
	ck_assert_int_eq(content_type_is_json(NULL), 0);
}
END_TEST

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(config_file)
{
	char path[] = "/tmp/mcpd-conf-XXXXXX";
	char err[512];
	struct mcpd_config c;
	int fd = mkstemp(path);

	close(fd);
	/* The shared file: other daemons' sections are fine. */
	write_file(path, "[paths]\nruntime_dir = /tmp/r\n[authd]\n"
	    "default_ttl = 0\n[mcpd]\n"
	    "listen = 127.0.0.1:9001 [::1]:9002\nlisten = 127.0.0.2:9003\n"
	    "max_body_bytes = 8192\nallowed_origins = https://a.example\n"
	    "metrics_listen = 127.0.0.1:9100\n");
	config_defaults(&c);
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.nlisten, 3);
	ck_assert_str_eq(c.listen[1].host, "::1");
	ck_assert_uint_eq(c.listen[2].port, 9003);
	ck_assert_uint_eq(c.max_body_bytes, 8192);
	ck_assert_int_eq(c.metrics_enabled, 1);
	ck_assert_uint_eq(c.metrics_listen.port, 9100);
	ck_assert_str_eq(c.authd_socket, "/tmp/r/authd.sock");
	ck_assert_int_eq(host_allowed(&c, "[::1]:9002"), 1);
	ck_assert_int_eq(host_allowed(&c, "localhost:9001"), 1);
	ck_assert_int_eq(origin_allowed(&c, "https://a.example"), 1);

	/* Defaults when [mcpd] is absent. */
	write_file(path, "[paths]\nruntime_dir = /tmp/r\n");
	config_defaults(&c);
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.nlisten, 1);
	ck_assert_uint_eq(c.listen[0].port, 8090);
	ck_assert_int_eq(c.metrics_enabled, 0);
	ck_assert_uint_eq(c.request_timeout, 15);
	ck_assert_uint_eq(c.max_connections_per_workspace, 128);
	ck_assert_uint_eq(c.max_calls_per_workspace, 64);
	ck_assert_uint_eq(c.max_listens_per_workspace, 16);

	/* The limits per workspace, read; connections within the host's. */
	write_file(path, "[mcpd]\nmax_connections = 10\n"
	    "max_connections_per_workspace = 20\nmax_calls_per_workspace = 3\n"
	    "max_listens_per_workspace = 2\n");
	config_defaults(&c);
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.max_connections_per_workspace, 10);
	ck_assert_uint_eq(c.max_calls_per_workspace, 3);
	ck_assert_uint_eq(c.max_listens_per_workspace, 2);
	write_file(path, "[mcpd]\nmax_calls_per_workspace = 0\n");
	config_defaults(&c);
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "max_calls_per_workspace"));
	write_file(path, "[mcpd]\nmax_listens_per_workspace = 65537\n");
	config_defaults(&c);
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "out of range"));

	write_file(path, "[mcpd]\nmax_body_bytes = 12x\n");
	config_defaults(&c);
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, ":2:"));

	write_file(path, "[mcpd]\nlisten = localhost:80\n");
	config_defaults(&c);
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "numeric address"));

	write_file(path, "[mcpd]\nlisten_typo = 1\n");
	config_defaults(&c);
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), -1);
	unlink(path);
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), -1);
}
END_TEST

/* A workspace at its limit is refused; another is not; all is given back. */
START_TEST(budgets)
{
	struct budgets bs;
	struct budget *a[3], *b, *x;

	budgets_init(&bs, 5, 3, 1);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(budget_take(&bs, "ws-a", BUDGET_CALLS, &a[i]),
		    0);
	ck_assert_ptr_eq(a[0], a[2]);
	ck_assert_int_eq(budget_take(&bs, "ws-a", BUDGET_CALLS, &x), -1);
	ck_assert_ptr_null(x);
	ck_assert_uint_eq(budget_held(&bs, "ws-a", BUDGET_CALLS), 3);
	/* Another kind of the same workspace, and another workspace. */
	ck_assert_int_eq(budget_take(&bs, "ws-a", BUDGET_LISTENS, &x), 0);
	ck_assert_int_eq(budget_take(&bs, "ws-a", BUDGET_LISTENS, &b), -1);
	ck_assert_int_eq(budget_take(&bs, "ws-b", BUDGET_CALLS, &b), 0);
	ck_assert_ptr_ne(b, a[0]);
	ck_assert_uint_eq(budget_held(&bs, "ws-b", BUDGET_CALLS), 1);
	/* One given back makes room for one more. */
	budget_put(&bs, a[1], BUDGET_CALLS);
	ck_assert_int_eq(budget_take(&bs, "ws-a", BUDGET_CALLS, &a[1]), 0);
	/* NULL is nothing to give back. */
	budget_put(&bs, NULL, BUDGET_CALLS);
	for (int i = 0; i < 3; i++)
		budget_put(&bs, a[i], BUDGET_CALLS);
	ck_assert_uint_eq(budget_held(&bs, "ws-a", BUDGET_CALLS), 0);
	ck_assert_uint_eq(budget_held(&bs, "ws-a", BUDGET_LISTENS), 1);
	budget_put(&bs, x, BUDGET_LISTENS);
	budget_put(&bs, b, BUDGET_CALLS);
	/* A workspace holding nothing has no entry left. */
	ck_assert(TAILQ_EMPTY(&bs.list));
	ck_assert_str_eq(budget_key(BUDGET_CONNECTIONS),
	    "max_connections_per_workspace");
	ck_assert_str_eq(budget_key(BUDGET_CALLS), "max_calls_per_workspace");
	ck_assert_str_eq(budget_key(BUDGET_LISTENS),
	    "max_listens_per_workspace");
}
END_TEST

START_TEST(listen_syntax)
{
	struct mcpd_listen l;

	ck_assert_int_eq(config_parse_listen("127.0.0.1:1", &l), 0);
	ck_assert_int_eq(config_parse_listen("[::1]:65535", &l), 0);
	ck_assert_int_eq(config_parse_listen("127.0.0.1:0", &l), -1);
	ck_assert_int_eq(config_parse_listen("127.0.0.1:65536", &l), -1);
	ck_assert_int_eq(config_parse_listen("127.0.0.1", &l), -1);
	ck_assert_int_eq(config_parse_listen("::1:80", &l), -1);
	ck_assert_int_eq(config_parse_listen("[::1]80", &l), -1);
	ck_assert_int_eq(config_parse_listen(":80", &l), -1);
	ck_assert_int_eq(config_parse_listen("127.0.0.1:+80", &l), -1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("mcpd_http");
	TCase *tc = tcase_create("parsers");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, routes);
	tcase_add_test(tc, hosts);
	tcase_add_test(tc, origins);
	tcase_add_test(tc, origin_portless_host_means_default_port);
	tcase_add_test(tc, bearer);
	tcase_add_test(tc, accept_header);
	tcase_add_test(tc, content_type);
	tcase_add_test(tc, config_file);
	tcase_add_test(tc, listen_syntax);
	tcase_add_test(tc, budgets);
	suite_add_tcase(s, tc);
	return check_run(s);
}
