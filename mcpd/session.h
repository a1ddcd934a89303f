/*
 * MCP sessions (Mcp-Session-Id) in mcpd: random ids, each bound to the
 * workspace whose credential opened it, with idle expiry and limits.
 */
#ifndef MCPD_SESSION_H
#define MCPD_SESSION_H

#include <sys/queue.h>
#include <time.h>

#include "auth.h"

#define SESSION_ID_LEN	32	/* hex characters of 16 random bytes */

struct mcp_call;
struct sse_stream;

struct session {
	TAILQ_ENTRY(session)	 entry;
	char			 id[SESSION_ID_LEN + 1];
	char			 workspace[AUTH_WORKSPACE_MAX];
	char			 version[16];	/* negotiated protocol */
	time_t			 last_used;
	int			 initialized;	/* notifications/initialized */
	struct sse_stream	*get_stream;	/* GET /mcp, at most one */
	TAILQ_HEAD(, mcp_call)	 calls;		/* tools/call in flight */
};

struct sessions {
	TAILQ_HEAD(, session)	 list;
	unsigned int		 count;
	unsigned int		 max;
	unsigned int		 max_per_workspace;
	unsigned int		 idle_timeout;
	/* Called before a session is freed, to end what hangs off it. */
	void			(*on_free)(struct session *, void *);
	void			*on_free_arg;
};

enum session_err {
	SESSION_OK,
	SESSION_TOO_MANY,		/* host-wide limit */
	SESSION_TOO_MANY_WORKSPACE,	/* per-workspace limit */
	SESSION_NO_RANDOM,		/* no random bytes, or no memory */
};

void	sessions_init(struct sessions *, unsigned int max,
	    unsigned int max_per_workspace, unsigned int idle_timeout);
enum session_err sessions_create(struct sessions *, const char *workspace,
	    const char *version, struct session **);
/*
 * The session with this id, if it belongs to workspace.  Another
 * workspace's session is indistinguishable from an unknown one.
 */
struct session *sessions_find(struct sessions *, const char *id,
	    const char *workspace);
void	sessions_remove(struct sessions *, struct session *);
/* Ends sessions idle for longer than the timeout; returns how many. */
unsigned int sessions_expire(struct sessions *, time_t now);
void	sessions_clear(struct sessions *);

#endif
