/*
 * vmctl: the operator's command for vmmd, over vmctl.sock (root and the
 * admin group).  Tables for people, --json for scripts.
 *
 * Exit status: 0 done; 1 vmmd refused or a check failed; 2 usage;
 * 3 vmmd could not be reached.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "conf.h"
#include "ipc.h"
#include "log.h"
#include "vmctl_keys.h"

#define EXIT_REFUSED	1
#define EXIT_USAGE	2
#define EXIT_UNREACHABLE 3
#define CALL_TIMEOUT_MS	600000	/* a hibernation may take a while */

static int json_out;

/* --help: the usage on stdout and success; a mistake: on stderr, 2. */
static __attribute__((noreturn)) void
usage_to(FILE *f, int code)
{
	fprintf(f,
	    "usage: vmctl [-j|--json] [-s|--socket PATH | -c|--config FILE]"
	    " COMMAND\n"
	    "commands:\n"
	    "  list [-w|--workspace W]   every VM (of one workspace)\n"
	    "  status VM                 one VM in detail\n"
	    "  destroy VM                kill it and remove its disk\n"
	    "  suspend VM [--pause]      hibernate it (or pause it)\n"
	    "  resume VM                 bring it back\n"
	    "  stop-workspace W          stop every VM of W at once\n"
	    "  preflight                 check the host, one line each\n"
	    "  audit verify              check the audit log's hash chain\n"
	    "  snapshots [-w W]          every snapshot (of one workspace)\n"
	    "  snapshot-delete ID        delete a snapshot\n"
	    "  approver-key init [-o|--out PATH]\n"
	    "                            make your approver key\n"
	    "  approver-key enroll NAME PUBFILE | revoke NAME   (root)\n"
	    "  approval list             proposals waiting for a decision\n"
	    "  approval show ID          one proposal, in full\n"
	    "  approval approve|deny [-k|--key PATH] ID\n"
	    "                            sign your decision (mcpvm-approvers)\n"
	    "  -h, --help | -V, --version\n"
	    "See vmctl(8).\n");
	exit(code);
}

static __attribute__((noreturn)) void
usage(void)
{
	usage_to(stderr, EXIT_USAGE);
}

const char *
vmctl_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || v == NULL)
		return "-";
	return json_object_get_string(v);
}

int
vmctl_call(const char *sock, const char *admits, uint32_t type,
    struct json_object *req, int as_json, int timeout_ms,
    struct json_object **reply, struct json_object **res)
{
	uint32_t rtype;
	int fd;

	*reply = *res = NULL;
	if ((fd = ipc_sync_connect(sock, "vmctl", 5000)) == -1) {
		fprintf(stderr, "vmctl: cannot reach vmmd at %s: ", sock);
		if (errno == EPROTO || errno == ECONNRESET || errno == EACCES)
			fprintf(stderr, "refused (root or %s only)\n", admits);
		else
			fprintf(stderr, "%s\n", strerror(errno));
		return EXIT_UNREACHABLE;
	}
	if (ipc_sync_call(fd, type, req, -1, &rtype, reply, NULL,
	    timeout_ms) == -1) {
		fprintf(stderr, "vmctl: %s\n", strerror(errno));
		close(fd);
		return EXIT_UNREACHABLE;
	}
	close(fd);
	if (rtype == IPC_ERROR) {
		struct json_object *e = json_object_object_get(*reply, "error");

		if (as_json)
			printf("%s\n", json_object_to_json_string_ext(*reply,
			    JSON_C_TO_STRING_PRETTY));
		else {
			/* Its message may quote what an agent chose. */
			fprintf(stderr, "vmctl: %s: ", vmctl_str(e, "code"));
			vmctl_put_safe(stderr, vmctl_str(e, "message"), 0);
			fputc('\n', stderr);
		}
		return EXIT_REFUSED;
	}
	if ((*res = json_object_object_get(*reply, "result")) == NULL) {
		fprintf(stderr, "vmctl: vmmd's answer has no result\n");
		return EXIT_REFUSED;
	}
	return 0;
}

static void
print_vms(struct json_object *res)
{
	struct json_object *vms = json_object_object_get(res, "vms");
	size_t n = vms != NULL ? json_object_array_length(vms) : 0;

	printf("%-32s  %-16s  %-11s  %-16s  %5s  %6s\n", "VM", "WORKSPACE",
	    "STATE", "IMAGE", "VCPUS", "MEMORY");
	for (size_t i = 0; i < n; i++) {
		struct json_object *vm = json_object_array_get_idx(vms, i);

		printf("%-32s  %-16s  %-11s  %-16s  %5s  %6s\n",
		    vmctl_str(vm, "vm_id"), vmctl_str(vm, "workspace"),
		    vmctl_str(vm, "state"), vmctl_str(vm, "image"),
		    vmctl_str(vm, "vcpus"), vmctl_str(vm, "memory_mib"));
	}
	if (n == 0)
		printf("(no VMs)\n");
}

static void
print_snapshots(struct json_object *res)
{
	struct json_object *l = json_object_object_get(res, "snapshots");
	size_t n = l != NULL ? json_object_array_length(l) : 0;

	printf("%-32s  %-16s  %-6s  %-32s  %12s  %s\n", "SNAPSHOT",
	    "WORKSPACE", "MEMORY", "SOURCE VM", "BYTES", "NAME");
	for (size_t i = 0; i < n; i++) {
		struct json_object *s = json_object_array_get_idx(l, i);

		printf("%-32s  %-16s  %-6s  %-32s  %12s  %s\n",
		    vmctl_str(s, "snapshot_id"), vmctl_str(s, "workspace"),
		    json_object_get_boolean(json_object_object_get(s,
		    "memory")) ? "yes" : "no", vmctl_str(s, "source_vm_id"),
		    vmctl_str(s, "size_bytes"), vmctl_str(s, "name"));
	}
	if (n == 0)
		printf("(no snapshots)\n");
}

static void
print_detail(struct json_object *res)
{
	json_object_object_foreach(res, k, v)
		printf("%-14s %s\n", k, v == NULL ? "-" :
		    json_object_get_string(v));
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "workspace", required_argument, NULL, 'w' },
		{ "pause", no_argument, NULL, 'p' },
		{ "out", required_argument, NULL, 'o' },
		{ "key", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	const char *conf_path = MCPVM_CONF_PATH, *sock = NULL, *ws = NULL;
	const char *out_path = NULL, *key_path = NULL;
	struct json_object *req, *reply = NULL, *res;
	struct mcpvm_conf conf;
	uint32_t type = 0;
	char err[1024];
	int ch, pause = 0, rc = 0;
	const char *cmd;

	log_init("vmctl", 1, 0);
	/* -c as authctl spells it, -f as the daemons do: the same option. */
	while ((ch = getopt_long(argc, argv, "c:f:js:w:o:k:hV", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'c':
		case 'f':
			conf_path = optarg;
			break;
		case 'h':
			usage_to(stdout, 0);
		case 'V':
			printf("vmctl %s\n", MCPVM_VERSION);
			return 0;
		case 'j':
			json_out = 1;
			break;
		case 's':
			sock = optarg;
			break;
		case 'w':
			ws = optarg;
			break;
		case 'p':
			pause = 1;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'k':
			key_path = optarg;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		usage();
	cmd = argv[0];
	/* Files only, no vmmd: an approver's key, root's enrolment. */
	if (strcmp(cmd, "approver-key") == 0) {
		if ((rc = vmctl_approver_key(argc, argv, out_path,
		    conf_path)) == -1)
			usage();
		return rc;
	}
	if (out_path != NULL)
		usage();
	/* The approvals socket, for members of mcpvm-approvers. */
	if (strcmp(cmd, "approval") == 0) {
		if ((rc = vmctl_approval(argc, argv, sock, conf_path,
		    key_path, json_out)) == -1)
			usage();
		return rc;
	}
	if (key_path != NULL)
		usage();
	req = json_object_new_object();
	if (strcmp(cmd, "list") == 0 && argc == 1) {
		type = IPC_VMCTL_LIST;
		if (ws != NULL)
			json_object_object_add(req, "workspace",
			    json_object_new_string(ws));
	} else if (strcmp(cmd, "status") == 0 && argc == 2)
		type = IPC_VMCTL_STATUS;
	else if (strcmp(cmd, "destroy") == 0 && argc == 2)
		type = IPC_VMCTL_DESTROY;
	else if (strcmp(cmd, "suspend") == 0 && argc == 2) {
		type = IPC_VMCTL_SUSPEND;
		json_object_object_add(req, "mode",
		    json_object_new_string(pause ? "pause" : "hibernate"));
	} else if (strcmp(cmd, "resume") == 0 && argc == 2)
		type = IPC_VMCTL_RESUME;
	else if (strcmp(cmd, "stop-workspace") == 0 && argc == 2) {
		type = IPC_VMCTL_STOP_WORKSPACE;
		json_object_object_add(req, "workspace",
		    json_object_new_string(argv[1]));
	} else if (strcmp(cmd, "preflight") == 0 && argc == 1)
		type = IPC_VMCTL_PREFLIGHT;
	else if (strcmp(cmd, "snapshots") == 0 && argc == 1) {
		type = IPC_VMCTL_SNAPSHOTS;
		if (ws != NULL)
			json_object_object_add(req, "workspace",
			    json_object_new_string(ws));
	} else if (strcmp(cmd, "snapshot-delete") == 0 && argc == 2) {
		type = IPC_VMCTL_SNAPSHOT_DELETE;
		json_object_object_add(req, "snapshot_id",
		    json_object_new_string(argv[1]));
	} else if (strcmp(cmd, "audit") == 0 && argc == 2 &&
	    strcmp(argv[1], "verify") == 0)
		type = IPC_VMCTL_AUDIT_VERIFY;
	else
		usage();
	if (type == IPC_VMCTL_STATUS || type == IPC_VMCTL_DESTROY ||
	    type == IPC_VMCTL_SUSPEND || type == IPC_VMCTL_RESUME)
		json_object_object_add(req, "vm_id",
		    json_object_new_string(argv[1]));

	memset(&conf, 0, sizeof(conf));
	if (sock == NULL) {
		if (conf_load(conf_path, &conf, err, sizeof(err)) == -1) {
			fprintf(stderr, "vmctl: %s\n", err);
			rc = EXIT_UNREACHABLE;
			goto out;
		}
		sock = conf.vmmd.ctl_socket;
	}
	if ((rc = vmctl_call(sock, "the admin group", type, req, json_out,
	    CALL_TIMEOUT_MS, &reply, &res)) != 0)
		goto out;
	if (json_out)
		printf("%s\n", json_object_to_json_string_ext(res,
		    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	else if (type == IPC_VMCTL_LIST)
		print_vms(res);
	else if (type == IPC_VMCTL_SNAPSHOTS)
		print_snapshots(res);
	else if (type == IPC_VMCTL_PREFLIGHT) {
		struct json_object *checks = json_object_object_get(res,
		    "checks");

		for (size_t i = 0; i < json_object_array_length(checks); i++) {
			struct json_object *c = json_object_array_get_idx(
			    checks, i);

			printf("%-4s %-10s %s\n", json_object_get_boolean(
			    json_object_object_get(c, "ok")) ? "ok" : "FAIL",
			    vmctl_str(c, "check"), vmctl_str(c, "message"));
		}
	} else if (type == IPC_VMCTL_AUDIT_VERIFY) {
		if (json_object_get_boolean(json_object_object_get(res, "ok")))
			printf("%s: %s lines, chain intact\n",
			    vmctl_str(res, "path"), vmctl_str(res, "lines"));
		else
			printf("%s: BROKEN: %s\n", vmctl_str(res, "path"),
			    vmctl_str(res, "error"));
	} else if (type == IPC_VMCTL_STOP_WORKSPACE) {
		struct json_object *s = json_object_object_get(res, "stopped");

		printf("workspace %s: %zu VM(s) stopped\n", vmctl_str(res,
		    "workspace"), json_object_array_length(s));
		for (size_t i = 0; i < json_object_array_length(s); i++)
			printf("  %s\n", json_object_get_string(
			    json_object_array_get_idx(s, i)));
	} else
		print_detail(res);

	if (type == IPC_VMCTL_PREFLIGHT &&
	    json_object_get_int(json_object_object_get(res, "failed")) > 0)
		rc = EXIT_REFUSED;
	if (type == IPC_VMCTL_AUDIT_VERIFY &&
	    !json_object_get_boolean(json_object_object_get(res, "ok")))
		rc = EXIT_REFUSED;
	/* Freed on every path: the ASan build checks vmctl for leaks too. */
 out:
	json_object_put(reply);
	json_object_put(req);
	conf_free(&conf);
	return rc;
}
