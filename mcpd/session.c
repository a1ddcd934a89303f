/*
 * MCP session table for mcpd; see session.h.  Ids come from getrandom so
 * a session cannot be guessed; a known id is still useless to another
 * workspace because every lookup also matches the caller's workspace.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "session.h"

void
sessions_init(struct sessions *s, unsigned int max,
    unsigned int max_per_workspace, unsigned int idle_timeout)
{
	memset(s, 0, sizeof(*s));
	TAILQ_INIT(&s->list);
	s->max = max;
	s->max_per_workspace = max_per_workspace;
	s->idle_timeout = idle_timeout;
}

enum session_err
sessions_create(struct sessions *s, const char *workspace,
    const char *version, struct session **out)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char rnd[SESSION_ID_LEN / 2];
	struct session *sess;
	unsigned int n = 0;
	size_t i;

	if (s->count >= s->max)
		return SESSION_TOO_MANY;
	TAILQ_FOREACH(sess, &s->list, entry)
		if (strcmp(sess->workspace, workspace) == 0)
			n++;
	if (n >= s->max_per_workspace)
		return SESSION_TOO_MANY_WORKSPACE;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return SESSION_NO_RANDOM;
	if ((sess = calloc(1, sizeof(*sess))) == NULL)
		return SESSION_NO_RANDOM;
	for (i = 0; i < sizeof(rnd); i++) {
		sess->id[2 * i] = hex[rnd[i] >> 4];
		sess->id[2 * i + 1] = hex[rnd[i] & 0xf];
	}
	strncpy(sess->workspace, workspace, sizeof(sess->workspace) - 1);
	strncpy(sess->version, version, sizeof(sess->version) - 1);
	sess->last_used = time(NULL);
	TAILQ_INIT(&sess->calls);
	TAILQ_INSERT_HEAD(&s->list, sess, entry);
	s->count++;
	*out = sess;
	return SESSION_OK;
}

struct session *
sessions_find(struct sessions *s, const char *id, const char *workspace)
{
	struct session *sess;

	if (id == NULL || strlen(id) != SESSION_ID_LEN)
		return NULL;
	TAILQ_FOREACH(sess, &s->list, entry) {
		if (strcmp(sess->id, id) != 0)
			continue;
		if (strcmp(sess->workspace, workspace) != 0)
			return NULL;
		sess->last_used = time(NULL);
		return sess;
	}
	return NULL;
}

void
sessions_remove(struct sessions *s, struct session *sess)
{
	if (s->on_free != NULL)
		s->on_free(sess, s->on_free_arg);
	TAILQ_REMOVE(&s->list, sess, entry);
	s->count--;
	free(sess);
}

unsigned int
sessions_expire(struct sessions *s, time_t now)
{
	struct session *sess, *next;
	unsigned int n = 0;

	for (sess = TAILQ_FIRST(&s->list); sess != NULL; sess = next) {
		next = TAILQ_NEXT(sess, entry);
		/* A session with work in flight or a stream open is in use. */
		if (!TAILQ_EMPTY(&sess->calls) || sess->get_stream != NULL)
			continue;
		if (now - sess->last_used > (time_t)s->idle_timeout) {
			sessions_remove(s, sess);
			n++;
		}
	}
	return n;
}

void
sessions_clear(struct sessions *s)
{
	struct session *sess;

	while ((sess = TAILQ_FIRST(&s->list)) != NULL)
		sessions_remove(s, sess);
}
