/*
 * libFuzzer target: base64 from clients (file data, stdin) and base64url
 * credentials.  Invariants: whatever decodes re-encodes to exactly the same
 * text (only canonical input is accepted), and any bytes survive an encode
 * and decode round trip in both alphabets.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
canonical(const char *in, size_t len, int url)
{
	uint8_t	*out;
	char	*enc;
	size_t	 n, m;

	if ((url ? b64url_decode(in, len, &out, &n) :
	    b64_decode(in, len, &out, &n)) == -1)
		return;
	if (n > b64_decoded_max(len))
		abort();
	enc = url ? b64url_encode(out, n, &m) : b64_encode(out, n, &m);
	if (enc == NULL || m != len || memcmp(enc, in, len) != 0)
		abort();
	free(enc);
	free(out);
}

static void
round_trip(const uint8_t *in, size_t len, int url)
{
	uint8_t	*out;
	char	*enc;
	size_t	 n, m;

	enc = url ? b64url_encode(in, len, &n) : b64_encode(in, len, &n);
	if (enc == NULL || strlen(enc) != n)
		abort();
	if ((url ? b64url_decode(enc, n, &out, &m) :
	    b64_decode(enc, n, &out, &m)) == -1)
		abort();
	if (m != len || memcmp(out, in, len) != 0)
		abort();
	free(out);
	free(enc);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	canonical((const char *)data, size, 0);
	canonical((const char *)data, size, 1);
	round_trip(data, size, 0);
	round_trip(data, size, 1);
	return 0;
}
