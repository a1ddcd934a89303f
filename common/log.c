/*
 * Logging shared by every mcpvm process; see log.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX	2048

static const char *log_name = "mcpvm";
static int log_foreground = 1;
static int log_verbose;

void
log_init(const char *procname, int foreground, int verbose)
{
	log_name = procname;
	log_foreground = foreground;
	log_verbose = verbose;
	if (!foreground)
		/* LOG_NDELAY: connect now, before the sandbox forbids it. */
		openlog(procname, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	tzset();
}

void
log_setverbose(int verbose)
{
	log_verbose = verbose;
}

int
log_getverbose(void)
{
	return log_verbose;
}

const char *
log_procname(void)
{
	return log_name;
}

static int
is_b64url(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '_';
}

void
log_redact(char *buf)
{
	static const char prefix[] = "mcpvm_";
	static const char marker[] = "mcpvm_<redacted>";
	char *p = buf;

	while ((p = strstr(p, prefix)) != NULL) {
		char *q = p + sizeof(prefix) - 1;
		size_t n = 0;

		while (is_b64url(q[n]))
			n++;
		if (n < 20) {
			p = q;
			continue;
		}
		/* The marker is never longer than what it replaces. */
		memcpy(p, marker, sizeof(marker) - 1);
		memmove(p + sizeof(marker) - 1, q + n, strlen(q + n) + 1);
		p += sizeof(marker) - 1;
	}
}

/* Writes one finished line: redacted, control characters neutralised. */
static void
log_emit(int pri, char *line)
{
	log_redact(line);
	/* Control characters from peers must not forge log lines. */
	for (char *c = line; *c != '\0'; c++)
		if ((unsigned char)*c < 0x20 && *c != '\t')
			*c = '?';
	if (log_foreground)
		dprintf(STDERR_FILENO, "%s[%d]: %s\n", log_name, (int)getpid(),
		    line);
	else
		syslog(pri, "%s", line);
}

static void __attribute__((format(printf, 3, 0)))
vlog_errno(int pri, int code, const char *fmt, va_list ap)
{
	char msg[LOG_LINE_MAX];
	int saved_errno = errno;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (code != 0) {
		char line[LOG_LINE_MAX + 128];

		snprintf(line, sizeof(line), "%s: %s", msg, strerror(code));
		log_emit(pri, line);
	} else
		log_emit(pri, msg);
	errno = saved_errno;
}

void
vlog(int pri, const char *fmt, va_list ap)
{
	vlog_errno(pri, 0, fmt, ap);
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;
	int code = errno;

	va_start(ap, fmt);
	vlog_errno(LOG_ERR, code, fmt, ap);
	va_end(ap);
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog_errno(LOG_ERR, 0, fmt, ap);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog_errno(LOG_INFO, 0, fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (log_verbose < 1)
		return;
	va_start(ap, fmt);
	vlog_errno(LOG_DEBUG, 0, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;
	int code = errno;

	va_start(ap, fmt);
	vlog_errno(LOG_CRIT, code, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog_errno(LOG_CRIT, 0, fmt, ap);
	va_end(ap);
	exit(1);
}
