/*
 * What every mcpvm daemon does the same way before it does anything of
 * its own: the command line [-dnv] [-f config], logging while it starts,
 * the configuration loaded, and SIGTERM/SIGINT on its event loop.  Used
 * by authd and netd.
 */
#ifndef MCPVM_DAEMON_H
#define MCPVM_DAEMON_H

#include "conf.h"

struct event;
struct event_base;

struct daemon_args {
	const char	*config;	/* -f FILE; MCPVM_CONF_PATH */
	int		 foreground;	/* -d: stay in front, log to stderr */
	int		 check_only;	/* -n: check the configuration, exit */
	int		 verbose;	/* -v, once for each */
};

/*
 * Parses argv (anything else prints "usage: NAME [-dnv] [-f config]" and
 * exits 2), logs to stderr as name while starting, and loads the
 * configuration into conf: a file that does not load is fatal, with the
 * loader's words.
 */
void	daemon_start(const char *name, int argc, char **argv,
	    struct daemon_args *, struct mcpvm_conf *);
/* For -n, once the daemon has checked what it needs: says it on stderr. */
void	daemon_config_ok(const char *name, const struct daemon_args *);
/*
 * SIGTERM and SIGINT call cb on base's loop; ev[0] and ev[1] are the
 * caller's to free.  Fatal when libevent cannot watch them.
 */
void	daemon_signals(struct event_base *, void (*cb)(int, short, void *),
	    void *arg, struct event *ev[2]);

#endif
