/*
 * The verify-answer cache of authd's clients; see authcache.h.  Runs in
 * mcpd and vmmd, on their event loops (not thread-safe).
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "authcache.h"

/* Direct-mapped: a collision only costs the next request a round trip. */
#define SLOTS		1024

struct slot {
	uint8_t		 key[AUTHCACHE_KEY_LEN];
	json_object	*result;	/* NULL: empty */
	char		 workspace[128];
	char		 credential_id[128];
	int64_t		 until;		/* wall seconds, exclusive */
};

struct authcache {
	struct slot	 slots[SLOTS];
	uint64_t	 hits, misses;
};

struct authcache *
authcache_new(void)
{
	return calloc(1, sizeof(struct authcache));
}

static void
slot_clear(struct slot *s)
{
	json_object_put(s->result);
	explicit_bzero(s, sizeof(*s));
}

void
authcache_flush(struct authcache *c)
{
	for (size_t i = 0; i < SLOTS; i++)
		if (c->slots[i].result != NULL)
			slot_clear(&c->slots[i]);
}

void
authcache_free(struct authcache *c)
{
	if (c == NULL)
		return;
	authcache_flush(c);
	free(c);
}

int
authcache_key(const char *credential, uint8_t key[AUTHCACHE_KEY_LEN])
{
	unsigned int n = 0;

	if (EVP_Digest(credential, strlen(credential), key, &n, EVP_sha256(),
	    NULL) != 1 || n != AUTHCACHE_KEY_LEN)
		return -1;
	return 0;
}

static struct slot *
slot_of(struct authcache *c, const uint8_t key[AUTHCACHE_KEY_LEN])
{
	uint32_t h;

	memcpy(&h, key, sizeof(h));
	return &c->slots[h % SLOTS];
}

json_object *
authcache_get(struct authcache *c, const uint8_t key[AUTHCACHE_KEY_LEN],
    int64_t now)
{
	struct slot *s = slot_of(c, key);

	if (s->result == NULL || memcmp(s->key, key, AUTHCACHE_KEY_LEN) != 0) {
		c->misses++;
		return NULL;
	}
	if (now >= s->until) {
		slot_clear(s);
		c->misses++;
		return NULL;
	}
	c->hits++;
	return s->result;
}

static const char *
string_of(json_object *o, const char *name)
{
	json_object *v;

	if (!json_object_object_get_ex(o, name, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

void
authcache_put(struct authcache *c, const uint8_t key[AUTHCACHE_KEY_LEN],
    json_object *result, int64_t now)
{
	struct slot *s = slot_of(c, key);
	const char *ws = string_of(result, "workspace");
	const char *id = string_of(result, "credential_id");
	json_object *v;
	int64_t exp = 0;

	/* Without a workspace an event could not find the entry. */
	if (ws == NULL || strlen(ws) >= sizeof(s->workspace) ||
	    (id != NULL && strlen(id) >= sizeof(s->credential_id)))
		return;
	if (json_object_object_get_ex(result, "expires_at", &v) &&
	    json_object_is_type(v, json_type_int))
		exp = json_object_get_int64(v);
	if (exp != 0 && exp <= now)
		return;
	if (s->result != NULL)
		slot_clear(s);
	memcpy(s->key, key, AUTHCACHE_KEY_LEN);
	s->result = json_object_get(result);
	strcpy(s->workspace, ws);
	strcpy(s->credential_id, id != NULL ? id : "");
	s->until = now + AUTHCACHE_TTL;
	if (exp != 0 && exp < s->until)
		s->until = exp;
}

void
authcache_drop(struct authcache *c, const char *workspace,
    const char *credential_id)
{
	struct slot *s;

	for (size_t i = 0; i < SLOTS; i++) {
		s = &c->slots[i];
		if (s->result == NULL || strcmp(s->workspace, workspace) != 0)
			continue;
		/* An entry without an id goes with any of its workspace's. */
		if (credential_id != NULL && s->credential_id[0] != '\0' &&
		    strcmp(s->credential_id, credential_id) != 0)
			continue;
		slot_clear(s);
	}
}

void
authcache_stats(const struct authcache *c, uint64_t *hits, uint64_t *misses)
{
	*hits = c->hits;
	*misses = c->misses;
}
