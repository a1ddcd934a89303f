/*
 * The start every mcpvm daemon shares; see daemon.h.  Runs first in authd
 * and netd, as root, before anything is opened.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>

#include "conf.h"
#include "daemon.h"
#include "log.h"

static void __attribute__((noreturn))
usage(const char *name)
{
	fprintf(stderr, "usage: %s [-dnv] [-f config]\n", name);
	exit(2);
}

void
daemon_start(const char *name, int argc, char **argv, struct daemon_args *a,
    struct mcpvm_conf *conf)
{
	char err[512];
	int ch;

	a->config = MCPVM_CONF_PATH;
	a->foreground = a->check_only = a->verbose = 0;
	while ((ch = getopt(argc, argv, "df:nv")) != -1) {
		switch (ch) {
		case 'd': a->foreground = 1; break;
		case 'f': a->config = optarg; break;
		case 'n': a->check_only = 1; break;
		case 'v': a->verbose++; break;
		default: usage(name);
		}
	}
	if (optind != argc)
		usage(name);
	log_init(name, 1, a->verbose);
	if (conf_load(a->config, conf, err, sizeof(err)) == -1)
		fatalx("%s", err);
}

void
daemon_config_ok(const char *name, const struct daemon_args *a)
{
	fprintf(stderr, "%s: configuration %s OK\n", name, a->config);
}

void
daemon_signals(struct event_base *base, void (*cb)(int, short, void *),
    void *arg, struct event *ev[2])
{
	ev[0] = evsignal_new(base, SIGTERM, cb, arg);
	ev[1] = evsignal_new(base, SIGINT, cb, arg);
	if (ev[0] == NULL || ev[1] == NULL || evsignal_add(ev[0], NULL) ||
	    evsignal_add(ev[1], NULL))
		fatalx("signal events");
}
