/*
 * One client connection of mcpd's HTTP front end: http.c makes it with
 * evhttp's and frees it when evhttp lets it go, http_limits.c admits it
 * and bounds it, and a request (http_reply.h) points at it until it is
 * answered.
 */
#ifndef MCPD_HTTP_CONN_H
#define MCPD_HTTP_CONN_H

#include <sys/queue.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/event.h>

struct budget;
struct bufferevent;
struct evhttp_connection;
struct hreq;
struct mcpd;

struct hconn {
	TAILQ_ENTRY(hconn)	 entry;
	struct mcpd		*m;
	struct bufferevent	*bev;		/* evhttp owns it */
	struct evhttp_connection *evcon;	/* known once admitted */
	struct event		*admit_ev;
	struct event		*deadline;
	struct sockaddr_storage	 peer;
	char			 peerstr[INET6_ADDRSTRLEN + 8];
	int			 admitted;
	int			 rejected;
	unsigned int		 nrequests;
	struct hreq		*active;
	/* The workspace it is busy with (http_limits.c), or NULL. */
	struct budget		*budget;
	/* Our own count of request-head bytes, for a 413 (evhttp says 400). */
	struct evbuffer_cb_entry *incb;
	int			 hphase;	/* HEAD, BODY or RAW */
	int			 heol;		/* end-of-head matcher state */
	size_t			 hbytes;
};

#define HPHASE_HEAD	0	/* request line and headers arriving */
#define HPHASE_BODY	1	/* head complete; evhttp checks the body */
#define HPHASE_RAW	2	/* taken over (WebSocket): not HTTP now */

#endif
