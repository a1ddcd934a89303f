/*
 * Tool catalogue for mcpd; see tools.h.
 *
 * TEMPORARY: a stub catalogue (names, one-line descriptions and open
 * object schemas) stands in until proto/tools.json and common/schema land
 * on main; then this file loads the embedded proto/tools.json and
 * validates with common/schema instead.
 */
#include <stdio.h>
#include <string.h>

#include "tools.h"

static const char stub_catalogue[] =
"["
"{\"name\":\"vm_create\",\"description\":\"Create and boot a microVM.\"},"
"{\"name\":\"vm_list\",\"description\":\"List this workspace's VMs.\"},"
"{\"name\":\"vm_status\",\"description\":\"Show one VM's state.\"},"
"{\"name\":\"vm_exec\",\"description\":\"Start a command in a VM.\"},"
"{\"name\":\"vm_job_status\",\"description\":\"Show a job's state.\"},"
"{\"name\":\"vm_job_output\",\"description\":\"Read a job's output.\"},"
"{\"name\":\"vm_job_cancel\",\"description\":\"Cancel a job.\"},"
"{\"name\":\"vm_read_file\",\"description\":\"Read a file.\"},"
"{\"name\":\"vm_write_file\",\"description\":\"Write a file.\"},"
"{\"name\":\"vm_suspend\",\"description\":\"Pause or hibernate a VM.\"},"
"{\"name\":\"vm_resume\",\"description\":\"Resume a VM.\"},"
"{\"name\":\"vm_destroy\",\"description\":\"Destroy a VM.\"}"
"]";

static struct json_object *catalogue;

int
tools_init(void)
{
	size_t i, n;

	if (catalogue != NULL)
		return 0;
	if ((catalogue = json_tokener_parse(stub_catalogue)) == NULL ||
	    !json_object_is_type(catalogue, json_type_array))
		return -1;
	n = json_object_array_length(catalogue);
	for (i = 0; i < n; i++) {
		struct json_object *t = json_object_array_get_idx(catalogue, i);
		struct json_object *schema = json_object_new_object();

		json_object_object_add(schema, "type",
		    json_object_new_string("object"));
		json_object_object_add(t, "inputSchema", schema);
		json_object_object_add(t, "outputSchema",
		    json_object_get(schema));
	}
	return 0;
}

void
tools_free(void)
{
	json_object_put(catalogue);
	catalogue = NULL;
}

struct json_object *
tools_list(void)
{
	return catalogue;
}

int
tools_exists(const char *name)
{
	size_t i, n;

	if (catalogue == NULL)
		return 0;
	n = json_object_array_length(catalogue);
	for (i = 0; i < n; i++) {
		struct json_object *t = json_object_array_get_idx(catalogue, i);
		struct json_object *v;

		if (json_object_object_get_ex(t, "name", &v) &&
		    strcmp(json_object_get_string(v), name) == 0)
			return 1;
	}
	return 0;
}

int
tools_validate_args(const char *name, struct json_object *args, char *msg,
    size_t msglen)
{
	if (!json_object_is_type(args, json_type_object)) {
		snprintf(msg, msglen, "%s: arguments must be a JSON object",
		    name);
		return -1;
	}
	return 0;
}
