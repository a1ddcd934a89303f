/*
 * mcpd, the product binary: verifies credentials with authd and forwards
 * tool calls and stream opens to vmmd, both over common/ipc.
 */
#include "mcpd.h"

int
main(int argc, char **argv)
{
	return mcpd_main(argc, argv, &authd_auth_ops, NULL, &vmmd_backend_ops,
	    NULL);
}
