/*
 * mcpvm-attach: bridges stdin and stdout to a guest stream
 * (GET /v1/vms/{vm_id}/streams/{port}, a WebSocket), so a guest's stdio
 * MCP server can be an ordinary MCP client's command and files can be
 * piped in and out.  The credential is read from a file, never taken on
 * the command line.  Exit 0 when the stream closes normally (1000), 1
 * otherwise.  Runs as the user who calls it.
 *
 * --broker JOB_ID attaches to that job's broker pipe instead
 * (GET /v1/vms/{vm_id}/jobs/{job_id}/broker) and relays each guest
 * connection to a new connection to a local Unix or TCP endpoint, so that
 * an operator can try the pipe with a stock HTTP server.
 */
#include <sys/socket.h>
#include <sys/random.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <sys/un.h>

#include "brokermux.h"
#include "ws.h"

#define CHUNK	(64 * 1024)

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mcpvm-attach: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void
usage(void)
{
	fprintf(stderr, "usage: mcpvm-attach --endpoint http://HOST:PORT "
	    "--token-file FILE --vm VM_ID --port PORT [--ignore-stdin-eof]\n"
	    "       mcpvm-attach --endpoint http://HOST:PORT --token-file FILE "
	    "--vm VM_ID --broker JOB_ID\n"
	    "           --pipe-token-file FILE --connect unix:PATH|tcp:HOST:PORT"
	    "\n");
	exit(1);
}

static void
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("write: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* Sends one masked client frame, as RFC 6455 requires of clients. */
static void
send_frame(int s, int opcode, const uint8_t *data, size_t len)
{
	uint8_t hdr[WS_MAX_HEADER], mask[4], *buf;
	size_t h = ws_frame_header(hdr, 1, opcode, len), i;

	if (getrandom(mask, sizeof(mask), 0) != sizeof(mask))
		die("getrandom: %s", strerror(errno));
	hdr[1] |= 0x80;
	memcpy(hdr + h, mask, 4);
	h += 4;
	if ((buf = malloc(h + len)) == NULL)
		die("out of memory");
	memcpy(buf, hdr, h);
	for (i = 0; i < len; i++)
		buf[h + i] = data[i] ^ mask[i & 3];
	write_all(s, buf, h + len);
	free(buf);
}

static int
dial(const char *endpoint, char *hostport, size_t hplen)
{
	struct addrinfo hints, *res, *ai;
	char host[256], port[16];
	const char *p, *colon;
	int s = -1, rc;

	if (strncmp(endpoint, "http://", 7) != 0)
		die("--endpoint must be http://host:port (use a local TLS "
		    "proxy for remote hosts)");
	p = endpoint + 7;
	snprintf(hostport, hplen, "%.*s", (int)strcspn(p, "/"), p);
	if (hostport[0] == '[') {
		const char *rb = strchr(hostport, ']');

		if (rb == NULL)
			die("bad --endpoint");
		snprintf(host, sizeof(host), "%.*s", (int)(rb - hostport - 1),
		    hostport + 1);
		colon = rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = strrchr(hostport, ':');
		snprintf(host, sizeof(host), "%.*s", colon != NULL ?
		    (int)(colon - hostport) : (int)strlen(hostport), hostport);
	}
	snprintf(port, sizeof(port), "%s", colon != NULL ? colon + 1 : "80");
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0)
		die("%s: %s", host, gai_strerror(rc));
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if ((s = socket(ai->ai_family, ai->ai_socktype |
		    SOCK_CLOEXEC, ai->ai_protocol)) == -1)
			continue;
		if (connect(s, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(s);
		s = -1;
	}
	freeaddrinfo(res);
	if (s == -1)
		die("cannot connect to %s", hostport);
	return s;
}

static char *
read_token(const char *path)
{
	static char tok[1024];
	FILE *f;
	size_t n;

	if ((f = fopen(path, "r")) == NULL)
		die("%s: %s", path, strerror(errno));
	n = fread(tok, 1, sizeof(tok) - 1, f);
	fclose(f);
	tok[n] = '\0';
	tok[strcspn(tok, " \t\r\n")] = '\0';
	if (tok[0] == '\0')
		die("%s: no credential in it", path);
	return tok;
}

/* Sends the upgrade request and checks the answer; leftover frame bytes
 * are returned in buf/len. */
static void
handshake(int s, const char *hostport, const char *path, const char *pipe,
    const char *token, uint8_t *buf, size_t cap, size_t *len)
{
	unsigned char rnd[16];
	char key[32], accept[WS_ACCEPT_LEN + 1], req[2048], *end, *line;
	int status, n;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		die("getrandom: %s", strerror(errno));
	EVP_EncodeBlock((unsigned char *)key, rnd, sizeof(rnd));
	n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\n"
	    "Host: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	    "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
	    "Authorization: Bearer %s\r\n%s%s%s\r\n", path, hostport, key,
	    token, pipe != NULL ? "X-Broker-Pipe: " : "",
	    pipe != NULL ? pipe : "", pipe != NULL ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(req))
		die("request too long");
	write_all(s, req, (size_t)n);
	explicit_bzero(req, sizeof(req));

	*len = 0;
	for (;;) {
		ssize_t r = read(s, buf + *len, cap - 1 - *len);

		if (r <= 0)
			die("connection closed during the handshake");
		*len += (size_t)r;
		buf[*len] = '\0';
		if ((end = strstr((char *)buf, "\r\n\r\n")) != NULL)
			break;
		if (*len >= cap - 1)
			die("answer headers too long");
	}
	*end = '\0';
	if (sscanf((char *)buf, "HTTP/1.1 %d", &status) != 1)
		die("not an HTTP answer");
	if (status != 101) {
		/* The body says why; show it (it is mcpd's JSON error). */
		const char *body = end + 4;

		die("refused with HTTP %d: %s", status, body);
	}
	ws_accept_key(key, accept);
	for (line = strtok((char *)buf, "\r\n"); line != NULL;
	    line = strtok(NULL, "\r\n"))
		if (strncasecmp(line, "Sec-WebSocket-Accept:", 21) == 0) {
			line += 21;
			while (*line == ' ')
				line++;
			if (strcmp(line, accept) != 0)
				die("bad Sec-WebSocket-Accept");
			break;
		}
	if (line == NULL)
		die("no Sec-WebSocket-Accept");
	end += 4;
	*len -= (size_t)(end - (char *)buf);
	memmove(buf, end, *len);
}

/* ---- --broker: each guest connection to a new local connection ---- */

#define BRK_MAX_CONNS	256

static struct {
	uint32_t	 id;
	int		 fd;	/* -1: free */
}	 lconns[BRK_MAX_CONNS];
static const char *connect_to;
static int ws_sock;

static int
write_some(int fd, const uint8_t *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void
send_mux(uint8_t type, uint32_t id, const uint8_t *data, size_t len)
{
	static uint8_t buf[BMUX_HDR_MAX + CHUNK];
	size_t h = bmux_encode(buf, type, id, (uint32_t)len);

	if (len > 0)
		memcpy(buf + h, data, len);
	send_frame(ws_sock, WS_OP_BINARY, buf, h + len);
}

/* A new connection to --connect unix:PATH or tcp:HOST:PORT, or -1. */
static int
local_connect(void)
{
	struct addrinfo hints, *res, *ai;
	char host[256];
	const char *p, *colon;
	int fd = -1;

	if (strncmp(connect_to, "unix:", 5) == 0) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };

		if (strlen(connect_to + 5) >= sizeof(sun.sun_path))
			die("--connect: path too long");
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s",
		    connect_to + 5);
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) ==
		    -1)
			return -1;
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
			close(fd);
			return -1;
		}
		return fd;
	}
	p = connect_to + 4;
	if ((colon = strrchr(p, ':')) == NULL)
		die("--connect tcp:HOST:PORT needs a port");
	snprintf(host, sizeof(host), "%.*s", (int)(colon - p), p);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
		return -1;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if ((fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol)) == -1)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

static int
lconn_find(uint32_t id)
{
	int i;

	for (i = 0; i < BRK_MAX_CONNS; i++)
		if (lconns[i].fd != -1 && lconns[i].id == id)
			return i;
	return -1;
}

static void
lconn_drop(int i)
{
	close(lconns[i].fd);
	lconns[i].fd = -1;
}

static int
svc_frame(const struct bmux_frame *f, void *arg)
{
	int i;

	switch (f->type) {
	case BMUX_OPEN:
		for (i = 0; i < BRK_MAX_CONNS && lconns[i].fd != -1; i++)
			;
		if (i == BRK_MAX_CONNS ||
		    (lconns[i].fd = local_connect()) == -1) {
			fprintf(stderr, "mcpvm-attach: connection %u: %s\n",
			    f->conn_id, i == BRK_MAX_CONNS ? "too many" :
			    "cannot connect to --connect");
			if (i < BRK_MAX_CONNS)
				lconns[i].fd = -1;
			send_mux(BMUX_CLOSE, f->conn_id, NULL, 0);
			break;
		}
		lconns[i].id = f->conn_id;
		break;
	case BMUX_DATA:
		/* Frames for one we closed are ignored, as on the far side. */
		if ((i = lconn_find(f->conn_id)) == -1)
			break;
		if (write_some(lconns[i].fd, f->data, f->len) == -1) {
			lconn_drop(i);
			send_mux(BMUX_CLOSE, f->conn_id, NULL, 0);
		}
		break;
	case BMUX_CLOSE:
		/* The guest connection is gone. */
		if ((i = lconn_find(f->conn_id)) != -1)
			lconn_drop(i);
		break;
	}
	return 0;
}

/*
 * The server's next whole frame at in: its size (0 until it is all
 * there), its opcode and its header's length.  A masked one is fatal.
 */
static size_t
next_frame(const uint8_t *in, size_t len, int *op, size_t *hl)
{
	size_t h;

	if (len < 2)
		return 0;
	if (in[1] & 0x80)
		die("the server masked a frame");
	h = ws_frame_size(in, len);
	if (h == 0 || h > len)
		return 0;
	*op = in[0] & 0x0f;
	*hl = (in[1] & 0x7f) < 126 ? 2 : (in[1] & 0x7f) == 126 ? 4 : 10;
	return h;
}

/*
 * The server's close (its payload p, n bytes): says why on stderr (not
 * for a normal 1000 when quiet_normal), answers it, returns its code.
 */
static int
close_frame(int s, const uint8_t *p, size_t n, int quiet_normal)
{
	int code = n >= 2 ? (p[0] << 8 | p[1]) : 1005;

	if (!quiet_normal || code != 1000)
		fprintf(stderr, "mcpvm-attach: closed with %d%s%.*s\n", code,
		    n > 2 || !quiet_normal ? ": " : "",
		    n > 2 ? (int)(n - 2) : 0, p + 2);
	send_frame(s, WS_OP_CLOSE, p, n >= 2 ? 2 : 0);
	return code;
}

static int
broker_loop(int s, uint8_t *in, size_t cap, size_t len)
{
	static struct bmux_dec dec;
	struct pollfd pfd[1 + BRK_MAX_CONNS];
	uint8_t chunk[CHUNK];
	int code = -1, map[1 + BRK_MAX_CONNS], i, n;

	ws_sock = s;
	bmux_init(&dec, 0);
	for (i = 0; i < BRK_MAX_CONNS; i++)
		lconns[i].fd = -1;
	while (code == -1) {
		size_t h, hl;
		int op;

		while ((h = next_frame(in, len, &op, &hl)) != 0) {
			if (op == WS_OP_BINARY || op == WS_OP_CONT) {
				if (bmux_feed(&dec, in + hl, h - hl, svc_frame,
				    NULL) == -1)
					die("bad frames from the service: %s",
					    dec.err);
			} else if (op == WS_OP_PING)
				send_frame(s, WS_OP_PONG, in + hl, h - hl);
			else if (op == WS_OP_CLOSE) {
				code = close_frame(s, in + hl, h - hl, 0);
				break;
			}
			memmove(in, in + h, len - h);
			len -= h;
		}
		if (code != -1)
			break;
		if (len >= cap - 1)
			die("frame too large");
		pfd[0].fd = s;
		pfd[0].events = POLLIN;
		for (i = 0, n = 1; i < BRK_MAX_CONNS; i++)
			if (lconns[i].fd != -1) {
				pfd[n].fd = lconns[i].fd;
				pfd[n].events = POLLIN;
				map[n++] = i;
			}
		if (poll(pfd, (nfds_t)n, -1) == -1) {
			if (errno == EINTR)
				continue;
			die("poll: %s", strerror(errno));
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = read(s, in + len, cap - len);

			if (r <= 0) {
				fprintf(stderr, "mcpvm-attach: connection lost "
				    "without a close\n");
				return 1;
			}
			len += (size_t)r;
		}
		for (i = 1; i < n; i++) {
			int k = map[i];
			ssize_t r;

			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) ||
			    lconns[k].fd != pfd[i].fd)
				continue;
			r = read(lconns[k].fd, chunk, sizeof(chunk));
			if (r > 0)
				send_mux(BMUX_DATA, lconns[k].id, chunk,
				    (size_t)r);
			else if (r == 0 || errno != EINTR) {
				/* The local side is done: the guest reads the
				 * rest and then end-of-file. */
				send_mux(BMUX_CLOSE, lconns[k].id, NULL, 0);
				lconn_drop(k);
			}
		}
	}
	close(s);
	return code == 1000 || code == 1001 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "endpoint", required_argument, NULL, 'e' },
		{ "token-file", required_argument, NULL, 't' },
		{ "vm", required_argument, NULL, 'v' },
		{ "port", required_argument, NULL, 'p' },
		{ "ignore-stdin-eof", no_argument, NULL, 'i' },
		{ "broker", required_argument, NULL, 'b' },
		{ "pipe-token-file", required_argument, NULL, 'P' },
		{ "connect", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	const char *endpoint = NULL, *tokfile = NULL, *vm = NULL, *port = NULL;
	const char *job = NULL, *pipefile = NULL;
	char path[512], pipetok[1024];
	static uint8_t in[WS_MAX_MESSAGE + 2 * WS_MAX_HEADER];
	uint8_t chunk[CHUNK];
	char hostport[300];
	size_t len = 0;
	int ch, s, stdin_open = 1, ignore_eof = 0, code = -1;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'e': endpoint = optarg; break;
		case 't': tokfile = optarg; break;
		case 'v': vm = optarg; break;
		case 'p': port = optarg; break;
		case 'i': ignore_eof = 1; break;
		case 'b': job = optarg; break;
		case 'P': pipefile = optarg; break;
		case 'c': connect_to = optarg; break;
		default: usage();
		}
	}
	if (endpoint == NULL || tokfile == NULL || vm == NULL ||
	    optind != argc || (job == NULL) == (port == NULL) ||
	    (job != NULL && (pipefile == NULL || connect_to == NULL)) ||
	    (job == NULL && (pipefile != NULL || connect_to != NULL)))
		usage();
	if (connect_to != NULL && strncmp(connect_to, "unix:", 5) != 0 &&
	    strncmp(connect_to, "tcp:", 4) != 0)
		die("--connect takes unix:PATH or tcp:HOST:PORT");
	if (strcspn(vm, "/?#% \r\n") != strlen(vm) ||
	    (job != NULL && strcspn(job, "/?#% \r\n") != strlen(job)))
		die("bad --vm or --broker");
	signal(SIGPIPE, SIG_IGN);
	if (job != NULL) {
		/* Read first: a missing file must not leave a half-open pipe. */
		snprintf(pipetok, sizeof(pipetok), "%s", read_token(pipefile));
		snprintf(path, sizeof(path), "/v1/vms/%s/jobs/%s/broker", vm,
		    job);
	} else
		snprintf(path, sizeof(path), "/v1/vms/%s/streams/%s", vm,
		    port);
	s = dial(endpoint, hostport, sizeof(hostport));
	handshake(s, hostport, path, job != NULL ? pipetok : NULL,
	    read_token(tokfile), in, sizeof(in), &len);
	explicit_bzero(pipetok, sizeof(pipetok));
	if (job != NULL)
		return broker_loop(s, in, sizeof(in), len);

	while (code == -1) {
		struct pollfd pfd[2] = {
			{ s, POLLIN, 0 },
			{ STDIN_FILENO, POLLIN, 0 },
		};
		size_t h, hl;
		int op;

		/* Frames already buffered first. */
		while ((h = next_frame(in, len, &op, &hl)) != 0) {
			if (op == WS_OP_BINARY || op == WS_OP_TEXT ||
			    op == WS_OP_CONT)
				write_all(STDOUT_FILENO, in + hl, h - hl);
			else if (op == WS_OP_PING)
				send_frame(s, WS_OP_PONG, in + hl, h - hl);
			else if (op == WS_OP_CLOSE) {
				code = close_frame(s, in + hl, h - hl, 1);
				break;
			}
			memmove(in, in + h, len - h);
			len -= h;
		}
		if (code != -1)
			break;
		if (len >= sizeof(in) - 1)
			die("frame too large");
		if (poll(pfd, stdin_open ? 2 : 1, -1) == -1) {
			if (errno == EINTR)
				continue;
			die("poll: %s", strerror(errno));
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = read(s, in + len, sizeof(in) - len);

			if (n <= 0) {
				fprintf(stderr, "mcpvm-attach: connection lost "
				    "without a close\n");
				return 1;
			}
			len += (size_t)n;
		}
		if (stdin_open && (pfd[1].revents & (POLLIN | POLLHUP))) {
			ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));

			if (n > 0) {
				send_frame(s, WS_OP_BINARY, chunk, (size_t)n);
			} else if (n == 0 || errno != EINTR) {
				stdin_open = 0;
				/* An empty binary message: EOF for the guest. */
				if (!ignore_eof)
					send_frame(s, WS_OP_BINARY, NULL, 0);
			}
		}
	}
	close(s);
	return code == 1000 ? 0 : 1;
}
