/*
 * libFuzzer target for the configuration parser, with the real mcpvm key
 * tables: any text must give either a config or a "file:line: message".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcpvm_conf conf;
	char err[512];
	char *text;

	if ((text = malloc(size + 1)) == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&conf, 0, sizeof(conf));
	err[0] = '\0';
	if (cfg_parse_string(&mcpvm_conf_schema, "fuzz.conf", text, &conf,
	    err, sizeof(err)) == -1 && strncmp(err, "fuzz.conf", 9) != 0)
		abort();	/* every error names the file */
	cfg_free(&mcpvm_conf_schema, &conf);
	free(text);
	return 0;
}
