/*
 * Logging for every mcpvm process, in the manner of OpenBSD's log.c.
 * Foreground processes write to stderr; daemons write to syslog (the journal
 * under systemd).  Credentials are redacted before anything is written.
 */
#ifndef MCPVM_LOG_H
#define MCPVM_LOG_H

#include <stdarg.h>

/* Verbosity: 0 = warnings and info, 1 = debug. */
void	log_init(const char *procname, int foreground, int verbose);
void	log_setverbose(int verbose);
int	log_getverbose(void);
const char *log_procname(void);

void	log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void	fatal(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));
void	fatalx(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));
void	vlog(int priority, const char *fmt, va_list ap)
	    __attribute__((format(printf, 2, 0)));

/*
 * Replaces anything in buf that looks like a workspace credential
 * ("mcpvm_" followed by 20 or more base64url characters) with a marker.
 * Exposed for tests; every log line passes through it.
 */
void	log_redact(char *buf);

#endif
