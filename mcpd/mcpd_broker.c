/*
 * mcpd: checks the job broker pipe's frames on their way through (see
 * mcpd_broker.h).  The bytes are forwarded unchanged; only their framing and
 * conn_ids are looked at, never the payload.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpd_broker.h"

struct broker_mux *
broker_mux_new(void)
{
	struct broker_mux *b;

	if ((b = calloc(1, sizeof(*b))) == NULL)
		return NULL;
	bmux_init(&b->ctl, 1);
	bmux_init(&b->svc, 0);
	return b;
}

void
broker_mux_free(struct broker_mux *b)
{
	free(b);
}

static int
ctl_frame(const struct bmux_frame *f, void *arg)
{
	struct broker_mux *b = arg;

	/* The service assigns conn_ids; anything else is a broken client. */
	if (f->conn_id > b->max_id) {
		snprintf(b->ctl.err, sizeof(b->ctl.err), "conn_id %u was "
		    "never assigned", f->conn_id);
		return -1;
	}
	return 0;
}

static int
svc_frame(const struct bmux_frame *f, void *arg)
{
	struct broker_mux *b = arg;

	if (f->type == BMUX_OPEN) {
		if (f->conn_id <= b->max_id) {
			snprintf(b->svc.err, sizeof(b->svc.err), "conn_id %u "
			    "opened out of order", f->conn_id);
			return -1;
		}
		b->max_id = f->conn_id;
		b->opened++;
	} else if (f->type == BMUX_CLOSE)
		b->closed++;
	return 0;
}

int
broker_mux_from_controller(struct broker_mux *b, const void *p, size_t n)
{
	return bmux_feed(&b->ctl, p, n, ctl_frame, b);
}

int
broker_mux_from_service(struct broker_mux *b, const void *p, size_t n)
{
	return bmux_feed(&b->svc, p, n, svc_frame, b);
}

int
broker_token_valid(const char *t)
{
	size_t n = t != NULL ? strlen(t) : 0;

	return n >= 43 && n <= BROKER_TOKEN_MAX && strspn(t,
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
	    == n;
}
