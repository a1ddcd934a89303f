/*
 * Unit tests for guestd/request: what a host request must look like before
 * any handler runs, and which mistakes end the link versus get a reply.
 */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guestd.h"
#include "../check_run.h"

#define P(s)	(s), strlen(s)

static int
decode(const char *json, const char *body, struct req *r, char *err)
{
	return req_decode(P(json), body, body ? strlen(body) : 0,
	    body != NULL, r, err, 256);
}

START_TEST(exec_decoded)
{
	struct req r;
	char err[256];

	ck_assert_int_eq(decode("{\"id\":4,\"op\":\"exec\",\"job_id\":\"j-1\","
	    "\"command\":\"ls\",\"cwd\":\"src\",\"timeout_ms\":3000,"
	    "\"env\":{\"A\":\"1\"}}", "in", &r, err), 0);
	ck_assert_uint_eq(r.id, 4);
	ck_assert_int_eq(r.op, OP_EXEC);
	ck_assert_str_eq(r.job_id, "j-1");
	ck_assert_str_eq(r.cwd, "src");
	ck_assert_int_eq(r.timeout_ms, 3000);
	ck_assert_int_eq(r.has_body, 1);
	ck_assert_uint_eq(r.body_len, 2);
	req_free(&r);
}
END_TEST

/* freeze: jobs alone, or the file systems too, with their bound. */
START_TEST(freeze_decoded)
{
	struct req r;
	char err[256];

	ck_assert_int_eq(decode("{\"id\":2,\"op\":\"freeze\"}", NULL, &r,
	    err), 0);
	ck_assert_int_eq(r.filesystems, 0);
	ck_assert_int_eq(r.thaw_after_ms, GUEST_THAW_AFTER_MS_DEFAULT);
	req_free(&r);
	ck_assert_int_eq(decode("{\"id\":2,\"op\":\"freeze\","
	    "\"filesystems\":true,\"thaw_after_ms\":1000}", NULL, &r, err),
	    0);
	ck_assert_int_eq(r.filesystems, 1);
	ck_assert_int_eq(r.thaw_after_ms, 1000);
	req_free(&r);
}
END_TEST

START_TEST(envelope_errors_end_the_link)
{
	struct req r;
	char err[256];

	ck_assert_int_eq(decode("{\"op\":\"ping\"}", NULL, &r, err), -1);
	req_free(&r);
	ck_assert_int_eq(decode("{\"id\":\"1\",\"op\":\"ping\"}", NULL, &r,
	    err), -1);
	req_free(&r);
	ck_assert_int_eq(decode("{\"id\":1,\"op\":7}", NULL, &r, err), -1);
	req_free(&r);
	ck_assert_int_eq(decode("not json", NULL, &r, err), -1);
	req_free(&r);
}
END_TEST

START_TEST(argument_errors_get_replies)
{
	static const char *bad[] = {
		"{\"id\":1,\"op\":\"nope\"}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a b\","
		    "\"command\":\"x\"}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a\",\"command\":\"\"}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a\",\"command\":1}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a\",\"command\":\"x\","
		    "\"env\":{\"1A\":\"x\"}}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a\",\"command\":\"x\","
		    "\"env\":{\"A\":2}}",
		"{\"id\":1,\"op\":\"exec\",\"job_id\":\"a\",\"command\":\"x\","
		    "\"timeout_ms\":-1}",
		"{\"id\":1,\"op\":\"job_output\",\"job_id\":\"a\","
		    "\"max_bytes\":16385}",
		"{\"id\":1,\"op\":\"job_output\",\"job_id\":\"a\","
		    "\"stdout_cursor\":-5}",
		"{\"id\":1,\"op\":\"job_cancel\"}",
		"{\"id\":1,\"op\":\"file_read\",\"path\":true}",
		"{\"id\":1,\"op\":\"file_write\",\"path\":\"a\",\"mode\":4095}",
		"{\"id\":1,\"op\":\"file_write\",\"path\":\"a\"}",
		"{\"id\":1,\"op\":\"clock_set\"}",
		"{\"id\":1,\"op\":\"freeze\",\"filesystems\":\"yes\"}",
		"{\"id\":1,\"op\":\"freeze\",\"filesystems\":true,"
		    "\"thaw_after_ms\":999}",
		"{\"id\":1,\"op\":\"freeze\",\"thaw_after_ms\":600001}",
	};
	struct req r;
	char err[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(decode(bad[i], NULL, &r, err) == 1,
		    "accepted: %s", bad[i]);
		ck_assert_uint_eq(r.id, 1);
		ck_assert_str_ne(err, "");
		req_free(&r);
	}
	/* A body where none belongs. */
	ck_assert_int_eq(decode("{\"id\":1,\"op\":\"ping\"}", "x", &r, err),
	    1);
	req_free(&r);
}
END_TEST

START_TEST(file_write_body_limit)
{
	struct req r;
	char err[256];
	char *big = malloc(GUEST_MAX_FILE + 2);

	memset(big, 'a', GUEST_MAX_FILE + 1);
	big[GUEST_MAX_FILE + 1] = '\0';
	ck_assert_int_eq(decode("{\"id\":2,\"op\":\"file_write\",\"path\":"
	    "\"f\"}", big, &r, err), 1);
	ck_assert_ptr_nonnull(strstr(err, "limit"));
	req_free(&r);
	big[GUEST_MAX_FILE] = '\0';
	ck_assert_int_eq(decode("{\"id\":2,\"op\":\"file_write\",\"path\":"
	    "\"f\",\"mode\":493,\"create_parents\":true}", big, &r, err), 0);
	ck_assert_int_eq(r.mode, 0755);
	ck_assert_int_eq(r.create_parents, 1);
	req_free(&r);
	free(big);
}
END_TEST

/* Base64 of the bytes 0..63, and an identity request built around fields. */
#define ENT64	"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKiss" \
		"LS4vMDEyMzQ1Njc4OTo7PD0+Pw=="
#define MID	"0123456789abcdef0123456789abcdef"
#define BID	"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"

static int
decode_identity(const char *mid, const char *bid, const char *host,
    const char *ent, struct req *r, char *err)
{
	char json[1024];

	snprintf(json, sizeof(json), "{\"id\":9,\"op\":\"identity\","
	    "\"machine_id\":\"%s\",\"boot_id\":\"%s\",\"hostname\":\"%s\","
	    "\"entropy_b64\":\"%s\"}", mid, bid, host, ent);
	return decode(json, NULL, r, err);
}

START_TEST(identity_decoded)
{
	struct req r;
	char err[256];
	size_t i;

	ck_assert_int_eq(decode_identity(MID, BID, "clone-7", ENT64, &r, err),
	    0);
	ck_assert_int_eq(r.op, OP_IDENTITY);
	ck_assert_str_eq(r.machine_id, MID);
	ck_assert_str_eq(r.boot_id, BID);
	ck_assert_str_eq(r.hostname, "clone-7");
	for (i = 0; i < GUEST_ENTROPY_BYTES; i++)
		ck_assert_uint_eq(r.entropy[i], i);
	req_free(&r);
	/* The edges of what is allowed. */
	ck_assert_int_eq(decode_identity(MID, BID, "a", ENT64, &r, err), 0);
	req_free(&r);
	ck_assert_int_eq(decode_identity(MID, BID, "0-0", ENT64, &r, err), 0);
	req_free(&r);
	ck_assert_int_eq(decode_identity(MID, BID, "abcdefghijklmnopqrstuvwxyz"
	    "abcdefghijklmnopqrstuvwxyz0123456789a", ENT64, &r, err), 0);
	req_free(&r);
}
END_TEST

START_TEST(identity_refused)
{
	static const struct {
		const char *mid, *bid, *host, *ent, *says;
	} bad[] = {
		/* machine_id: length, case, alphabet, all zero */
		{ "0123456789abcdef0123456789abcde", BID, "h", ENT64,
		    "machine_id" },
		{ "0123456789abcdef0123456789abcdef0", BID, "h", ENT64,
		    "machine_id" },
		{ "0123456789ABCDEF0123456789abcdef", BID, "h", ENT64,
		    "machine_id" },
		{ "0123456789abcdeg0123456789abcdef", BID, "h", ENT64,
		    "machine_id" },
		{ "00000000000000000000000000000000", BID, "h", ENT64,
		    "machine_id" },
		/* boot_id: dashes, case, length, alphabet */
		{ MID, "0f1e2d3c4b5a-4978-8695-a4b3c2d1e0f9a", "h", ENT64,
		    "boot_id" },
		{ MID, "0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F9", "h", ENT64,
		    "boot_id" },
		{ MID, "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f", "h", ENT64,
		    "boot_id" },
		{ MID, "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0fz", "h", ENT64,
		    "boot_id" },
		{ MID, "{f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f}", "h", ENT64,
		    "boot_id" },
		/* hostname: empty, dash at either end, case, dot, length */
		{ MID, BID, "", ENT64, "hostname" },
		{ MID, BID, "-a", ENT64, "hostname" },
		{ MID, BID, "a-", ENT64, "hostname" },
		{ MID, BID, "Clone", ENT64, "hostname" },
		{ MID, BID, "a.b", ENT64, "hostname" },
		{ MID, BID, "a_b", ENT64, "hostname" },
		{ MID, BID, "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"
		    "0123456789ab", ENT64, "hostname" },
		/* entropy: 63 and 65 bytes, bad padding, stray bits, alphabet */
		{ MID, BID, "h", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIj"
		    "JCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+", "entropy_b64" },
		{ MID, BID, "h", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIj"
		    "JCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0A=", "entropy_b64" },
		{ MID, BID, "h", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIj"
		    "JCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw", "entropy_b64" },
		{ MID, BID, "h", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIj"
		    "JCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Px==", "entropy_b64" },
		{ MID, BID, "h", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIj"
		    "JCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0-Pw==", "entropy_b64" },
		{ MID, BID, "h", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIj"
		    "JCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+PwAA", "entropy_b64" },
		{ MID, BID, "h", "", "entropy_b64" },
	};
	struct req r;
	char err[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(decode_identity(bad[i].mid, bad[i].bid,
		    bad[i].host, bad[i].ent, &r, err) == 1, "accepted #%zu", i);
		ck_assert_uint_eq(r.id, 9);
		ck_assert_msg(strstr(err, bad[i].says) != NULL, "#%zu: %s", i,
		    err);
		req_free(&r);
	}
	/* Every field is required, and of its type. */
	ck_assert_int_eq(decode("{\"id\":9,\"op\":\"identity\",\"machine_id\":"
	    "\"" MID "\",\"boot_id\":\"" BID "\",\"hostname\":\"h\"}", NULL,
	    &r, err), 1);
	ck_assert_ptr_nonnull(strstr(err, "entropy_b64"));
	req_free(&r);
	ck_assert_int_eq(decode("{\"id\":9,\"op\":\"identity\",\"machine_id\":"
	    "7,\"boot_id\":\"" BID "\",\"hostname\":\"h\",\"entropy_b64\":\""
	    ENT64 "\"}", NULL, &r, err), 1);
	req_free(&r);
	ck_assert_int_eq(decode("{\"id\":9,\"op\":\"identity\",\"machine_id\":"
	    "\"" MID "\",\"boot_id\":\"" BID "\",\"hostname\":\"h\","
	    "\"entropy_b64\":\"" ENT64 "\"}", "body", &r, err), 1);
	req_free(&r);
}
END_TEST

/* An identity request with a "net" member of the given text. */
static int
decode_net(const char *net, struct req *r, char *err)
{
	char json[1536];

	snprintf(json, sizeof(json), "{\"id\":9,\"op\":\"identity\","
	    "\"machine_id\":\"" MID "\",\"boot_id\":\"" BID "\","
	    "\"hostname\":\"h\",\"entropy_b64\":\"" ENT64 "\",\"net\":%s}",
	    net);
	return decode(json, NULL, r, err);
}

#define NET(mac, addr, prefix, gw, dns) \
	"{\"mac\":\"" mac "\",\"address\":\"" addr "\",\"prefix\":" prefix \
	",\"gateway\":\"" gw "\",\"dns\":" dns "}"
#define NET_OK	NET("02:6d:76:00:00:07", "10.232.7.2", "30", "10.232.7.1", \
	"[\"203.0.113.53\",\"8.8.8.8\"]")

START_TEST(identity_net_decoded)
{
	static const uint8_t mac[6] = { 0x02, 0x6d, 0x76, 0x00, 0x00, 0x07 };
	struct req r;
	char err[256];

	ck_assert_int_eq(decode_net(NET_OK, &r, err), 0);
	ck_assert_int_eq(r.has_net, 1);
	ck_assert_mem_eq(r.net.mac, mac, 6);
	ck_assert_uint_eq(r.net.address, htonl(0x0ae80702));
	ck_assert_uint_eq(r.net.gateway, htonl(0x0ae80701));
	ck_assert_int_eq(r.net.prefix, 30);
	ck_assert_int_eq(r.net.ndns, 2);
	ck_assert_uint_eq(r.net.dns[0], htonl(0xcb007135));
	ck_assert_uint_eq(r.net.dns[1], htonl(0x08080808));
	req_free(&r);
	/* Without it, nothing about the network is asked. */
	ck_assert_int_eq(decode_identity(MID, BID, "h", ENT64, &r, err), 0);
	ck_assert_int_eq(r.has_net, 0);
	req_free(&r);
	/* The edges: /8 and no resolver, three resolvers. */
	ck_assert_int_eq(decode_net(NET("02:00:00:00:00:01", "10.0.0.2", "8",
	    "10.255.255.254", "[]"), &r, err), 0);
	ck_assert_int_eq(r.net.ndns, 0);
	req_free(&r);
	ck_assert_int_eq(decode_net(NET("02:6d:76:00:00:07", "10.232.7.2",
	    "30", "10.232.7.1", "[\"1.1.1.1\",\"1.0.0.1\",\"9.9.9.9\"]"), &r,
	    err), 0);
	ck_assert_int_eq(r.net.ndns, 3);
	req_free(&r);
}
END_TEST

START_TEST(identity_net_refused)
{
	static const struct {
		const char *net, *says;
	} bad[] = {
		{ "[]", "net" },
		{ "\"x\"", "net" },
		/* mac: length, case, separators, multicast, zero, type */
		{ NET("02:6d:76:00:00:7", "10.232.7.2", "30", "10.232.7.1",
		    "[]"), "mac" },
		{ NET("02:6D:76:00:00:07", "10.232.7.2", "30", "10.232.7.1",
		    "[]"), "mac" },
		{ NET("02-6d-76-00-00-07", "10.232.7.2", "30", "10.232.7.1",
		    "[]"), "mac" },
		{ NET("02:6d:76:00:00:07:", "10.232.7.2", "30", "10.232.7.1",
		    "[]"), "mac" },
		{ NET("03:6d:76:00:00:07", "10.232.7.2", "30", "10.232.7.1",
		    "[]"), "mac" },
		{ NET("00:00:00:00:00:00", "10.232.7.2", "30", "10.232.7.1",
		    "[]"), "mac" },
		{ "{\"mac\":7,\"address\":\"10.232.7.2\",\"prefix\":30,"
		    "\"gateway\":\"10.232.7.1\",\"dns\":[]}", "mac" },
		/* prefix: the range, the type */
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "31", "10.232.7.1",
		    "[]"), "prefix" },
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "7", "10.232.7.1",
		    "[]"), "prefix" },
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "\"30\"",
		    "10.232.7.1", "[]"), "prefix" },
		/* address: form, leading zero, loopback, multicast, the
		 * subnet's first and last */
		{ NET("02:6d:76:00:00:07", "10.232.7", "30", "10.232.7.1",
		    "[]"), "address" },
		{ NET("02:6d:76:00:00:07", "10.232.7.02", "30", "10.232.7.1",
		    "[]"), "address" },
		{ NET("02:6d:76:00:00:07", "127.0.0.2", "30", "127.0.0.1",
		    "[]"), "address" },
		{ NET("02:6d:76:00:00:07", "224.0.0.2", "30", "224.0.0.1",
		    "[]"), "address" },
		{ NET("02:6d:76:00:00:07", "10.232.7.0", "30", "10.232.7.1",
		    "[]"), "address" },
		{ NET("02:6d:76:00:00:07", "10.232.7.3", "30", "10.232.7.1",
		    "[]"), "address" },
		{ NET("02:6d:76:00:00:07", "10.232.7.2 ", "30", "10.232.7.1",
		    "[]"), "address" },
		/* gateway: another subnet, the address itself, broadcast */
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "30", "10.232.8.1",
		    "[]"), "gateway" },
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "30", "10.232.7.2",
		    "[]"), "gateway" },
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "30", "10.232.7.3",
		    "[]"), "gateway" },
		/* dns: too many, not addresses, not an array */
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "30", "10.232.7.1",
		    "[\"1.1.1.1\",\"1.0.0.1\",\"9.9.9.9\",\"8.8.8.8\"]"),
		    "dns" },
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "30", "10.232.7.1",
		    "[\"dns.example\"]"), "dns[0]" },
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "30", "10.232.7.1",
		    "[\"1.1.1.1\",7]"), "dns[1]" },
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "30", "10.232.7.1",
		    "[\"0.0.0.0\"]"), "dns[0]" },
		{ NET("02:6d:76:00:00:07", "10.232.7.2", "30", "10.232.7.1",
		    "\"1.1.1.1\""), "dns" },
		/* a member missing, or one more */
		{ "{\"mac\":\"02:6d:76:00:00:07\",\"address\":\"10.232.7.2\","
		    "\"prefix\":30,\"dns\":[]}", "gateway" },
		{ "{\"mac\":\"02:6d:76:00:00:07\",\"address\":\"10.232.7.2\","
		    "\"prefix\":30,\"gateway\":\"10.232.7.1\",\"dns\":[],"
		    "\"mtu\":1500}", "unknown member \"mtu\"" },
	};
	struct req r;
	char err[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(decode_net(bad[i].net, &r, err) == 1,
		    "accepted #%zu", i);
		ck_assert_uint_eq(r.id, 9);
		ck_assert_msg(strstr(err, bad[i].says) != NULL, "#%zu: %s", i,
		    err);
		req_free(&r);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("guestd_request");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, exec_decoded);
	tcase_add_test(tc, freeze_decoded);
	tcase_add_test(tc, envelope_errors_end_the_link);
	tcase_add_test(tc, argument_errors_get_replies);
	tcase_add_test(tc, file_write_body_limit);
	tcase_add_test(tc, identity_decoded);
	tcase_add_test(tc, identity_refused);
	tcase_add_test(tc, identity_net_decoded);
	tcase_add_test(tc, identity_net_refused);
	suite_add_tcase(s, tc);
	return check_run(s);
}
