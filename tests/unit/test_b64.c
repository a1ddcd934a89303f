/*
 * Unit tests for common/b64: RFC 4648 vectors, round trips, and every kind
 * of input the strict decoders must refuse.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "../check_run.h"

static const struct {
	const char	*plain;
	const char	*std;
	const char	*url;
} vectors[] = {
	{ "", "", "" },
	{ "f", "Zg==", "Zg" },
	{ "fo", "Zm8=", "Zm8" },
	{ "foo", "Zm9v", "Zm9v" },
	{ "foob", "Zm9vYg==", "Zm9vYg" },
	{ "fooba", "Zm9vYmE=", "Zm9vYmE" },
	{ "foobar", "Zm9vYmFy", "Zm9vYmFy" },
	{ "\xfb\xff", "+/8=", "-_8" },
	{ "\xfb\xef\xbe", "++++", "----" },
	{ "\xff\xff\xff", "////", "____" },
};

START_TEST(rfc4648_vectors)
{
	uint8_t	*dec;
	char	*enc;
	size_t	 i, n, plen;

	for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		plen = strlen(vectors[i].plain);
		enc = b64_encode(vectors[i].plain, plen, &n);
		ck_assert_ptr_nonnull(enc);
		ck_assert_str_eq(enc, vectors[i].std);
		ck_assert_uint_eq(n, strlen(vectors[i].std));
		free(enc);
		enc = b64url_encode(vectors[i].plain, plen, &n);
		ck_assert_ptr_nonnull(enc);
		ck_assert_str_eq(enc, vectors[i].url);
		ck_assert_uint_eq(n, strlen(vectors[i].url));
		free(enc);

		ck_assert_int_eq(b64_decode(vectors[i].std,
		    strlen(vectors[i].std), &dec, &n), 0);
		ck_assert_ptr_nonnull(dec);
		ck_assert_uint_eq(n, plen);	/* padding is not data */
		ck_assert_mem_eq(dec, vectors[i].plain, plen);
		free(dec);
		ck_assert_int_eq(b64url_decode(vectors[i].url,
		    strlen(vectors[i].url), &dec, &n), 0);
		ck_assert_uint_eq(n, plen);
		ck_assert_mem_eq(dec, vectors[i].plain, plen);
		free(dec);
	}
}
END_TEST

START_TEST(round_trips_every_length)
{
	uint8_t	 buf[300], *dec;
	char	*enc;
	size_t	 len, i, n, m;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 151 + 7);
	for (len = 0; len <= sizeof(buf); len++) {
		enc = b64_encode(buf, len, &n);
		ck_assert_ptr_nonnull(enc);
		ck_assert_uint_eq(n, b64_encoded_len(len));
		ck_assert_int_eq(b64_decode(enc, n, &dec, &m), 0);
		ck_assert_uint_eq(m, len);
		ck_assert_uint_le(m, b64_decoded_max(n));
		ck_assert_mem_eq(dec, buf, len);
		free(dec);
		free(enc);
		enc = b64url_encode(buf, len, &n);
		ck_assert_ptr_nonnull(enc);
		ck_assert_ptr_null(strpbrk(enc, "+/="));
		ck_assert_int_eq(b64url_decode(enc, n, &dec, &m), 0);
		ck_assert_uint_eq(m, len);
		ck_assert_mem_eq(dec, buf, len);
		free(dec);
		free(enc);
	}
}
END_TEST

START_TEST(round_trips_a_full_file_transfer)
{
	size_t	 len = 128 * 1024, n, m, i;
	uint8_t	*buf = malloc(len), *dec;
	char	*enc;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(i ^ (i >> 8));
	enc = b64_encode(buf, len, &n);
	ck_assert_ptr_nonnull(enc);
	ck_assert_uint_eq(n, 174764);	/* tools.json states this bound */
	ck_assert_int_eq(b64_decode(enc, n, &dec, &m), 0);
	ck_assert_uint_eq(m, len);
	ck_assert_mem_eq(dec, buf, len);
	free(dec);
	free(enc);
	free(buf);
}
END_TEST

static void
refuse(const char *in, int url)
{
	uint8_t	*out = (uint8_t *)0x1;
	size_t	 n = 99;
	int	 r;

	errno = 0;
	r = url ? b64url_decode(in, strlen(in), &out, &n) :
	    b64_decode(in, strlen(in), &out, &n);
	ck_assert_msg(r == -1, "accepted \"%s\"", in);
	ck_assert_int_eq(errno, EINVAL);
	/* Nothing is handed back on failure. */
	ck_assert_ptr_eq(out, (uint8_t *)0x1);
	ck_assert_uint_eq(n, 99);
}

START_TEST(standard_rejections)
{
	/* Length not a multiple of 4, padded or not. */
	refuse("Z", 0);
	refuse("Zg", 0);
	refuse("Zg=", 0);
	refuse("Zm9vY", 0);
	/* Characters outside the alphabet, URL-safe ones included. */
	refuse("Zm9!", 0);
	refuse("Zm-v", 0);
	refuse("Zm_v", 0);
	refuse("Zm9\x80", 0);
	/* Whitespace anywhere, which EVP_DecodeBlock would skip. */
	refuse(" Zm9v", 0);
	refuse("Zm9v ", 0);
	refuse("Zm9v\n", 0);
	refuse("Zm\n9v", 0);
	refuse("Zm9v\r\nYg==", 0);
	/* Padding where it cannot be. */
	refuse("====", 0);
	refuse("Z===", 0);
	refuse("=Zg=", 0);
	refuse("Zg==Zg==", 0);
	refuse("Zm=v", 0);
	/* Non-canonical: bits after the last byte must be zero. */
	refuse("Zh==", 0);
	refuse("Zm9=", 0);
}
END_TEST

START_TEST(url_rejections)
{
	refuse("Z", 1);		/* one leftover character is never valid */
	refuse("Zm9vY", 1);
	refuse("Zg==", 1);	/* no padding in this alphabet */
	refuse("Zg=", 1);
	refuse("+/8", 1);	/* standard alphabet characters */
	refuse("Zm9/", 1);
	refuse("Zm 9", 1);
	refuse("Zh", 1);	/* non-canonical */
	refuse("Zm9", 1);
}
END_TEST

START_TEST(length_helpers)
{
	ck_assert_uint_eq(b64_encoded_len(0), 0);
	ck_assert_uint_eq(b64_encoded_len(1), 4);
	ck_assert_uint_eq(b64_encoded_len(3), 4);
	ck_assert_uint_eq(b64_encoded_len(4), 8);
	ck_assert_uint_eq(b64_encoded_len(65536), 87384);
	ck_assert_uint_eq(b64_encoded_len((size_t)-1), 0);
	ck_assert_uint_eq(b64_decoded_max(8), 6);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("b64");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, rfc4648_vectors);
	tcase_add_test(tc, round_trips_every_length);
	tcase_add_test(tc, round_trips_a_full_file_transfer);
	tcase_add_test(tc, standard_rejections);
	tcase_add_test(tc, url_rejections);
	tcase_add_test(tc, length_helpers);
	suite_add_tcase(s, tc);
	return check_run(s);
}
