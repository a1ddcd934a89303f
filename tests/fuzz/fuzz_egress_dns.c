/*
 * libFuzzer target for netd's DNS forwarder's parser (netd/dnsmsg.c): the
 * input is read as a guest's query and, after the first byte, as an
 * upstream's answer to the query "pkg.example" and to itself.  What the
 * parser accepts must be what the forwarder relies on: a question name
 * within bounds, answers within the count, and a REFUSED that is a prefix
 * of the query.  Read as a TCP stream too: a frame's length within what
 * was read and the bound, and the framed answer (up to DNSMSG_TCP_MAX).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dnsmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const uint8_t pkg_query[] = {
	0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
	3, 'p', 'k', 'g', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0, 0, 1, 0, 1,
};

static void
answers(const uint8_t *m, size_t len, const struct dnsmsg_q *q)
{
	uint32_t addrs[DNSMSG_MAX_ADDRS], ttls[DNSMSG_MAX_ADDRS];
	int n;

	if (len < 2)
		return;
	n = dnsmsg_answer(m, len, (uint16_t)(m[0] << 8 | m[1]), q, addrs,
	    ttls);
	if (n < -1 || n > DNSMSG_MAX_ADDRS)
		abort();
	for (int i = 0; i < n; i++)
		if (ttls[i] > 0x7fffffffu)
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dnsmsg_q q, pkg;
	uint8_t m[DNSMSG_MAX];

	long flen;

	if (size > 2 + DNSMSG_TCP_MAX)
		return 0;
	if (dnsmsg_query(pkg_query, sizeof(pkg_query), &pkg) != 0)
		abort();
	flen = dnsmsg_tcp_frame(data, size, DNSMSG_TCP_MAX);
	if (flen < -1 || flen > DNSMSG_TCP_MAX ||
	    (flen > 0 && (flen < 12 || (size_t)flen + 2 > size)) ||
	    dnsmsg_tcp_frame(data, size, DNSMSG_MAX) > DNSMSG_MAX)
		abort();
	if (flen > 0)
		answers(data + 2, (size_t)flen, &pkg);
	if (size > DNSMSG_MAX)
		return 0;
	if (dnsmsg_query(pkg_query, sizeof(pkg_query), &pkg) != 0 ||
	    !pkg.name_ok || strcmp(pkg.name, "pkg.example") != 0)
		abort();
	if (size > 1)
		answers(data + 1, size - 1, &pkg);
	if (dnsmsg_query(data, size, &q) == 0) {
		size_t n;

		if (strlen(q.name) > DNSNAME_MAX + 1 || q.end > size ||
		    q.end < 12 + 1 + 4)
			abort();
		memcpy(m, data, size);
		n = dnsmsg_refuse(m, &q, 5);
		if (n != q.end || (m[3] & 0x0f) != 5 || (m[2] & 0x80) == 0 ||
		    memcmp(m + 12, data + 12, n - 12) != 0)
			abort();
		answers(data, size, &q);
	}
	return 0;
}
