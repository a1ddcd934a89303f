/*
 * libFuzzer target for the inputs of netd's ruleset builder: lines of
 * configuration text (blocked_cidrs, dns, uplink as an operator writes
 * them) go through the same parsers netd uses, then into nft_build_vm()
 * (with its tag), nft_build_hostaddrs() and nft_build_host().  A prefix
 * that parses must print back exactly as written; a ruleset must fit its
 * buffer or be refused, name itself with a tag, and may contain only the
 * bytes netd itself writes.  Anything else aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nft.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check_text(const char *t, int n, size_t cap)
{
	if (n < 0)
		return;
	if ((size_t)n >= cap || strlen(t) != (size_t)n)
		abort();
	for (int i = 0; i < n; i++) {
		char c = t[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr(" \t\n.,:/;{}_\"@!=-*",
		    c) != NULL))
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cidr blocked[NETD_MAX_CIDRS];
	static uint32_t dns[NETD_MAX_DNS], hosts[4];
	static char buf[64 * 1024], small[512];
	struct nft_vm_spec vs;
	struct nft_host_spec hs;
	char *text, *line, *save, back[32], uplink[32] = "";
	size_t nb = 0, nd = 0;
	int n;

	if (size < 3 || size > 16384)
		return 0;
	text = malloc(size - 2);
	memcpy(text, data + 2, size - 3);
	text[size - 3] = '\0';
	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		struct cidr c;

		if (strncmp(line, "uplink ", 7) == 0) {
			snprintf(uplink, sizeof(uplink), "%s", line + 7);
			continue;
		}
		if (cidr_parse(line, 1, &c) == -1)
			continue;
		snprintf(back, sizeof(back), "%u.%u.%u.%u", c.addr >> 24,
		    (c.addr >> 16) & 0xff, (c.addr >> 8) & 0xff,
		    c.addr & 0xff);
		if (strchr(line, '/') != NULL)
			snprintf(back + strlen(back), sizeof(back) -
			    strlen(back), "/%u", c.len);
		if (strcmp(back, line) != 0 || c.len > 32)
			abort();
		if (c.len == 32 && nd < NETD_MAX_DNS)
			dns[nd++] = c.addr;
		else if (nb < NETD_MAX_CIDRS)
			blocked[nb++] = c;
	}
	memset(&vs, 0, sizeof(vs));
	vs.slot = data[0] | (unsigned)(data[1] & 1) << 8;
	vs.host_base = 0x0ae70000u;
	vs.guest_base = 0x0ae80000u;
	netd_guest_mac(vs.slot, vs.mac);
	vs.blocked = blocked;
	vs.nblocked = nb;
	hosts[0] = 0xc6336401u;
	vs.hostaddrs = hosts;
	vs.nhostaddrs = 1;
	vs.ct_max = 16u + (uint32_t)(data[1] >> 1) * 8209u;
	vs.ct_rate = 1u + (uint32_t)(data[0] ^ data[1]) * 391u;
	n = nft_build_vm(&vs, buf, sizeof(buf));
	if (vs.slot < NETD_MAX_SLOTS && n < 0)
		abort();	/* everything fits in 64 KiB */
	check_text(buf, n, sizeof(buf));
	if (n >= 0 && nft_vm_tag(buf, back, sizeof(back)) == -1)
		abort();	/* every ruleset names itself */
	n = nft_build_hostaddrs(vs.slot, dns, nd, small, sizeof(small));
	if ((n >= 0) != (vs.slot < NETD_MAX_SLOTS))
		abort();
	check_text(small, n, sizeof(small));
	check_text(small, nft_build_vm(&vs, small, sizeof(small)),
	    sizeof(small));
	hs.uplink = uplink;
	hs.host_base = vs.host_base;
	hs.guest_base = vs.guest_base;
	n = nft_build_host(&hs, buf, sizeof(buf));
	if ((n >= 0) != (netd_ifname_valid(uplink) != 0))
		abort();
	check_text(buf, n, sizeof(buf));
	free(text);
	return 0;
}
