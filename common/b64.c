/*
 * Base64 through OpenSSL's block coder with the strictness OpenSSL leaves
 * out; see b64.h.  Linked into every process through libcommon.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "b64.h"

/*
 * EVP_EncodeBlock and EVP_DecodeBlock take int lengths; stay well inside
 * them (and inside any sane request).
 */
#define B64_MAX_IN	((size_t)INT_MAX / 4 * 3 - 3)

size_t
b64_encoded_len(size_t len)
{
	if (len > B64_MAX_IN)
		return 0;
	return (len + 2) / 3 * 4;
}

size_t
b64_decoded_max(size_t len)
{
	return len / 4 * 3 + (len % 4 ? 3 : 0);
}

char *
b64_encode(const void *in, size_t len, size_t *outlen)
{
	char	*out;
	size_t	 n;
	int	 r;

	if (len > B64_MAX_IN) {
		errno = EOVERFLOW;
		return NULL;
	}
	n = b64_encoded_len(len);
	if ((out = malloc(n + 1)) == NULL)
		return NULL;
	r = EVP_EncodeBlock((unsigned char *)out, in, (int)len);
	if (r < 0 || (size_t)r != n) {
		free(out);
		errno = EINVAL;
		return NULL;
	}
	out[n] = '\0';
	*outlen = n;
	return out;
}

int
b64_decode(const char *in, size_t len, uint8_t **out, size_t *outlen)
{
	const unsigned char *s = (const unsigned char *)in;
	uint8_t	*buf;
	size_t	 i, pad = 0, n;
	int	 v, r;

	if (len > B64_MAX_IN) {
		errno = EOVERFLOW;
		return -1;
	}
	/*
	 * EVP_DecodeBlock skips leading and trailing whitespace, accepts
	 * '=' mid-string in places and counts padding as output bytes, so
	 * every rule is checked here first and OpenSSL only does the
	 * arithmetic on input known to be canonical.
	 */
	if (len % 4 != 0)
		goto bad;
	if (len > 0 && s[len - 1] == '=')
		pad = (s[len - 2] == '=') ? 2 : 1;
	for (i = 0; i < len - pad; i++)
		if (b64_digit(s[i]) < 0)
			goto bad;
	/* The bits past the last whole byte must be zero to be canonical. */
	if (pad > 0) {
		v = b64_digit(s[len - pad - 1]);
		if ((pad == 1 && (v & 0x03)) || (pad == 2 && (v & 0x0f)))
			goto bad;
	}
	n = len / 4 * 3;
	/* One spare byte so a zero-length result is still a real pointer. */
	if ((buf = malloc(n + 1)) == NULL)
		return -1;
	if (len > 0) {
		r = EVP_DecodeBlock(buf, s, (int)len);
		if (r < 0 || (size_t)r != n) {
			free(buf);
			goto bad;
		}
	}
	*out = buf;
	*outlen = n - pad;
	return 0;
 bad:
	errno = EINVAL;
	return -1;
}

char *
b64url_encode(const void *in, size_t len, size_t *outlen)
{
	char	*out;
	size_t	 i, n;

	if ((out = b64_encode(in, len, &n)) == NULL)
		return NULL;
	while (n > 0 && out[n - 1] == '=')
		n--;
	out[n] = '\0';
	for (i = 0; i < n; i++) {
		if (out[i] == '+')
			out[i] = '-';
		else if (out[i] == '/')
			out[i] = '_';
	}
	*outlen = n;
	return out;
}

int
b64url_decode(const char *in, size_t len, uint8_t **out, size_t *outlen)
{
	char	*std;
	size_t	 i, n;
	int	 r, saved;

	/* A lone trailing character carries only 6 bits: never canonical. */
	if (len % 4 == 1) {
		errno = EINVAL;
		return -1;
	}
	if (len > B64_MAX_IN) {
		errno = EOVERFLOW;
		return -1;
	}
	n = (len + 3) / 4 * 4;
	if ((std = malloc(n + 1)) == NULL)
		return -1;
	/*
	 * Translate into the standard alphabet; '+', '/' and '=' are not
	 * part of this one, so map them to a byte the strict decoder refuses.
	 */
	for (i = 0; i < len; i++) {
		switch (in[i]) {
		case '-':
			std[i] = '+';
			break;
		case '_':
			std[i] = '/';
			break;
		case '+':
		case '/':
		case '=':
			std[i] = '!';
			break;
		default:
			std[i] = in[i];
			break;
		}
	}
	for (; i < n; i++)
		std[i] = '=';
	r = b64_decode(std, n, out, outlen);
	saved = errno;
	free(std);
	errno = saved;
	return r;
}
