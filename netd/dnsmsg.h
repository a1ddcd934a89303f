/*
 * DNS messages as netd's forwarder reads them: the guest's question and
 * the upstream resolver's answer, parsed strictly and within bounds
 * (compression pointers only backwards, at most DNSMSG_MAX_PTRS of them
 * per name).  No I/O, so the fuzz target drives it as the forwarder does.
 */
#ifndef MCPVM_NETD_DNSMSG_H
#define MCPVM_NETD_DNSMSG_H

#include <stddef.h>
#include <stdint.h>

#include "dnsname.h"

#define DNSMSG_MAX	1232	/* what the forwarder reads or sends */
#define DNSMSG_TCP_MAX	65535	/* an answer over TCP (RFC 1035 4.2.2) */
#define DNSMSG_MAX_ADDRS	32	/* A records taken from one answer */
#define DNSMSG_MAX_PTRS	16
#define DNSMSG_MAX_RRS	1024	/* answer records read, a TCP answer's too */

struct dnsmsg_q {
	char		 name[DNSNAME_MAX + 2];	/* lowercase, no final dot */
	uint16_t	 qtype, qclass;
	size_t		 end;		/* offset past the question */
	int		 name_ok;	/* name passed dnsname_check */
};

/*
 * A query: header with QR 0, opcode 0, exactly one question and no
 * answers, its name uncompressed.  0, or -1 when it is not one.
 */
int	dnsmsg_query(const uint8_t *m, size_t len, struct dnsmsg_q *q);
/*
 * A message framed for TCP: a 2-byte length, then that many bytes.  With
 * have bytes of it read into m: the message's length once all of it is
 * there, 0 while more is to come, -1 when its length is under 12 (no DNS
 * header) or over max.
 */
long	dnsmsg_tcp_frame(const uint8_t *m, size_t have, size_t max);
/*
 * An answer to q (same id as id, QR 1, the same one question): each A
 * record of class IN in the answer section into addrs/ttls (host byte
 * order), at most DNSMSG_MAX_ADDRS; len is at most DNSMSG_TCP_MAX (a UDP
 * answer is at most DNSMSG_MAX by the forwarder's buffer).  Returns how
 * many, or -1 when the message is malformed or not the answer to q.
 */
int	dnsmsg_answer(const uint8_t *m, size_t len, uint16_t id,
	    const struct dnsmsg_q *q, uint32_t *addrs, uint32_t *ttls);
/* Makes m (the query, len bytes) into an answer with rcode and no
 * records: the header and question only.  The new length. */
size_t	dnsmsg_refuse(uint8_t *m, const struct dnsmsg_q *q, int rcode);

#endif
