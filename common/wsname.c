/* A workspace's name (wsname.h). */
#include <stdio.h>
#include <string.h>

#include "wsname.h"

int
workspace_id_valid(const char *id, char *why, size_t whylen)
{
	size_t n = strlen(id);

	if (n == 0 || n > WSNAME_MAX) {
		snprintf(why, whylen, "workspace id must be 1 to %d "
		    "characters long", WSNAME_MAX);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-')
			continue;
		snprintf(why, whylen, "workspace id may contain only "
		    "lowercase letters, digits and '-' (character %zu is "
		    "not one)", i + 1);
		return 0;
	}
	return 1;
}
