/*
 * The skeleton of a daemon's decoder of a peer's requests into a typed
 * struct: a table of message types, each with the keys it allows and the
 * keys it requires, and a table of key names.  reqshape_decode() walks a
 * body once, refuses a key its type does not take, hands each key it does
 * to the daemon's own decoder, and names a required key that is missing.
 * authd (authd/request.c) and netd (netd/request.c) decode this way.
 */
#ifndef MCPVM_REQSHAPE_H
#define MCPVM_REQSHAPE_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

struct reqshape {
	uint32_t	type;
	unsigned int	allowed;	/* key bits */
	unsigned int	required;
};

struct reqshape_key {
	unsigned int	 bit;
	const char	*name;
};

struct reqshape_table {
	const struct reqshape		*shapes;
	size_t				 nshapes;
	const struct reqshape_key	*keys;
	size_t				 nkeys;
	/* The refusal of a key the type does not take; the key itself is
	 * never echoed, it is peer data. */
	const char			*unknown_key;
	/* Decodes key bit of body into req: 0, or -1 with why filled. */
	int	(*decode)(void *req, unsigned int bit, struct json_object *body,
		    const void *arg, char *why, size_t whylen);
};

/* A table's initializer, counting its shapes and keys. */
#define REQSHAPE_TABLE(shapes, keys, unknown_key, decode) {		\
	(shapes), sizeof(shapes) / sizeof((shapes)[0]),			\
	(keys), sizeof(keys) / sizeof((keys)[0]),			\
	(unknown_key), (decode),					\
}

/*
 * The end of a decode(): a bit of the keys table that it has no case
 * for, which is the daemon's bug, not the peer's.  -1 with why filled.
 */
int	reqshape_bad_bit(char *why, size_t whylen);

/*
 * Decodes body as a request of message type into req, through t's
 * decode(req, bit, body, arg, ...) for each key.  0, or -1 with why (a
 * sentence for an invalid_argument reply): type is not in t, body is not
 * an object, a key is not the type's, decode() refused one, or a required
 * key is missing.  req is the caller's to clear before and after.
 */
int	reqshape_decode(const struct reqshape_table *t, uint32_t type,
	    struct json_object *body, void *req, const void *arg, char *why,
	    size_t whylen);

#endif
