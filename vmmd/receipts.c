/*
 * Canonical argument digests for retry receipts; see receipts.h.  Two
 * requests with the same arguments in another key order are the same
 * request; a changed value anywhere is not.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "receipts.h"

struct sbuf {
	char	*p;
	size_t	 len, cap;
	int	 failed;
};

static void
sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *np;

		while (cap < b->len + n + 1)
			cap *= 2;
		if ((np = realloc(b->p, cap)) == NULL) {
			b->failed = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static int
cmp_keys(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void
canonical(struct sbuf *b, struct json_object *o, int top)
{
	switch (json_object_get_type(o)) {
	case json_type_object: {
		size_t n = (size_t)json_object_object_length(o), i = 0;
		const char **keys = calloc(n ? n : 1, sizeof(*keys));
		int first = 1;

		if (keys == NULL) {
			b->failed = 1;
			return;
		}
		json_object_object_foreach(o, k, unused) {
			(void)unused;
			keys[i++] = k;
		}
		qsort(keys, n, sizeof(*keys), cmp_keys);
		sb_add(b, "{", 1);
		for (i = 0; i < n; i++) {
			struct json_object *key, *v;
			const char *ks;

			if (top && strcmp(keys[i], "request_id") == 0)
				continue;
			if (!first)
				sb_add(b, ",", 1);
			first = 0;
			key = json_object_new_string(keys[i]);
			ks = json_object_to_json_string_ext(key,
			    JSON_C_TO_STRING_PLAIN);
			sb_add(b, ks, strlen(ks));
			json_object_put(key);
			sb_add(b, ":", 1);
			v = json_object_object_get(o, keys[i]);
			canonical(b, v, 0);
		}
		sb_add(b, "}", 1);
		free(keys);
		break;
	}
	case json_type_array: {
		size_t n = json_object_array_length(o);

		sb_add(b, "[", 1);
		for (size_t i = 0; i < n; i++) {
			if (i > 0)
				sb_add(b, ",", 1);
			canonical(b, json_object_array_get_idx(o, i), 0);
		}
		sb_add(b, "]", 1);
		break;
	}
	default: {
		const char *s = o == NULL ? "null" :
		    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);

		sb_add(b, s, strlen(s));
	}
	}
}

int
receipt_digest(struct json_object *args, char out[RECEIPT_DIGEST_HEX + 1])
{
	struct sbuf b = { 0 };
	unsigned char md[32];
	unsigned int mdlen = 0;

	canonical(&b, args, 1);
	if (b.failed || b.p == NULL) {
		free(b.p);
		return -1;
	}
	EVP_Digest(b.p, b.len, md, &mdlen, EVP_sha256(), NULL);
	free(b.p);
	for (unsigned int i = 0; i < 32; i++) {
		static const char hex[] = "0123456789abcdef";

		out[i * 2] = hex[md[i] >> 4];
		out[i * 2 + 1] = hex[md[i] & 0xf];
	}
	out[RECEIPT_DIGEST_HEX] = '\0';
	return 0;
}
