/*
 * Names and checks of the vmmd <-> vmproxy QEMU protocol (vmqmp.h).
 * Pure: no state.  Built into libcommon, so vmmd and vmproxy link the
 * same tables.
 */
#include <string.h>

#include "vmqmp.h"

const char *const vmq_op_names[] = {
	"connect", "stop", "cont", "query_status", "query_migrate",
	"migrate_params", "getfd", "migrate", "migrate_incoming",
	"migrate_cancel", "quit", "last_words", NULL
};

const char *const vmq_err_names[] = {
	"none", "qemu", "timeout", "disconnected", "protocol", "unavailable",
	NULL
};

/* QEMU's own words for them (query-status "status"). */
const char *const vmq_run_names[] = {
	"none", "running", "paused", "inmigrate", "postmigrate", "prelaunch",
	"finish-migrate", "shutdown", "suspended", "internal-error",
	"io-error", "guest-panicked", "other", NULL
};

/* QEMU's own words (query-migrate "status"). */
const char *const vmq_mig_names[] = {
	"none", "setup", "active", "device", "completed", "failed",
	"cancelling", "cancelled", "other", NULL
};

/* QEMU's event names. */
const char *const vmq_event_names[] = {
	"STOP", "RESUME", "SHUTDOWN", "MIGRATION", NULL
};

int
vmq_lookup(const char *const *names, const char *s)
{
	int i;

	if (s == NULL)
		return -1;
	for (i = 0; names[i] != NULL; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -1;
}

char *
vmq_sanitize(char *dst, const char *src, size_t srclen)
{
	size_t i, n = srclen < VMQ_MSG_MAX ? srclen : VMQ_MSG_MAX;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = c >= 0x20 && c <= 0x7e ? (char)c : '?';
	}
	dst[n] = '\0';
	return dst;
}

int
vmq_clean(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (i >= VMQ_MSG_MAX || (unsigned char)s[i] < 0x20 ||
		    (unsigned char)s[i] > 0x7e)
			return 0;
	return 1;
}
