/*
 * libFuzzer target for egress policies (common/egress.c), as authd, vmmd
 * and netd read them: two policies from one input (a workspace's and a
 * VM's narrowing), each through the strict decoder, then the narrowing
 * check, the JSON round trip and netd's ruleset builder.  The first byte
 * is the list limit; the rest is "WS\nVM".  A decoded policy must be what
 * the enforcement relies on (bounded, sorted, no host bits), survive its
 * own round trip, and narrow itself; anything else aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "egress.h"
#include "nft.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check(const struct egress *e, size_t max)
{
	struct json_object *o;
	struct egress back;
	char why[256], *buf;

	if ((e->mode != EGRESS_PUBLIC && e->mode != EGRESS_ALLOWLIST) ||
	    e->ncidrs > max || e->ncidrs > EGRESS_MAX_CIDRS)
		abort();
	for (size_t i = 0; i < e->ncidrs; i++) {
		if (e->cidrs[i].len > 32 ||
		    (e->cidrs[i].addr & ~cidr_mask(e->cidrs[i].len)) != 0)
			abort();
		if (i > 0 && (e->cidrs[i - 1].addr > e->cidrs[i].addr ||
		    (e->cidrs[i - 1].addr == e->cidrs[i].addr &&
		    e->cidrs[i - 1].len >= e->cidrs[i].len)))
			abort();	/* sorted, no duplicates */
	}
	if ((o = egress_to_json(e)) == NULL)
		return;
	if (egress_from_json(o, "egress", EGRESS_MAX_CIDRS, &back, why,
	    sizeof(why)) == -1 || !egress_equal(e, &back))
		abort();
	json_object_put(o);
	if (!egress_narrows(e, e, why, sizeof(why)))
		abort();
	if ((buf = malloc(16384)) != NULL) {
		if (nft_build_egress(0, e, 0, NULL, buf, 16384) < 0)
			abort();
		free(buf);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *o[2] = { NULL, NULL };
	struct egress *e;
	const char *nl;
	char *text, why[256];
	size_t max;
	int ok[2] = { 0, 0 };

	if (size < 1 || size > 65536)
		return 0;
	max = data[0];
	if ((text = malloc(size)) == NULL)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if ((e = calloc(2, sizeof(*e))) == NULL) {
		free(text);
		return 0;
	}
	nl = strchr(text, '\n');
	o[0] = json_tokener_parse(text);
	if (nl != NULL)
		o[1] = json_tokener_parse(nl + 1);
	for (int i = 0; i < 2; i++) {
		if (o[i] == NULL)
			continue;
		why[0] = '\0';
		if (egress_from_json(o[i], "egress", max, &e[i], why,
		    sizeof(why)) == 0) {
			ok[i] = 1;
			check(&e[i], max);
		} else if (why[0] == '\0')
			abort();	/* a refusal always says why */
		json_object_put(o[i]);
	}
	if (ok[0] && ok[1]) {
		why[0] = '\0';
		if (!egress_narrows(&e[0], &e[1], why, sizeof(why)) &&
		    why[0] == '\0')
			abort();
	}
	free(e);
	free(text);
	return 0;
}
