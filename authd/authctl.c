/*
 * authctl: the operator's command line for authd.  Issues, rotates and
 * revokes workspace credentials and edits workspace policies over
 * authctl.sock.  Runs as root or as a member of authd's admin group.
 * A credential goes to a file created 0600 with O_EXCL|O_NOFOLLOW, or to
 * stdout only when --stdout asks for it.
 */
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "conf.h"
#include "cred.h"
#include "ipc.h"
#include "policy.h"
#include "request.h"

/* Exit codes; authctl.8 documents them. */
#define EX_OK		0
#define EX_REFUSED	1	/* authd answered with an error */
#define EX_USAGE	2	/* bad arguments or configuration */
#define EX_UNREACHABLE	3	/* authd could not be reached */
#define EX_TOKENFILE	4	/* the credential file could not be written */

#define CALL_TIMEOUT_MS	10000

static const char *socket_path;
static const char *config_path = MCPVM_CONF_PATH;
static int json_out;

/* --help: the usage on stdout and success; a mistake: on stderr, 2. */
static void __attribute__((noreturn))
usage_to(FILE *f, int code)
{
	fprintf(f,
	    "usage: authctl [-j|--json] [-s|--socket PATH | -c|--config FILE]"
	    " COMMAND\n"
	    "  issue --workspace W (--output FILE [--owner USER] | --stdout)\n"
	    "        [--ttl DURATION] [--allow-network] [--image ID]...\n"
	    "        [--max-vms N] [--memory-mib N] [--storage-gib N]"
	    " [--max-streams N]\n"
	    "        [--egress-public | --egress-allow CIDR|NAME... |"
	    " --egress-deny CIDR...]\n"
	    "        [--egress-rate BYTES]\n"
	    "        [--gate CLASS[=N]]... [--ungate CLASS]... [--supervised]\n"
	    "        [--gate-memory-above MIB] [--gate-vcpus-above N]\n"
	    "  rotate --workspace W (--output FILE [--owner USER] |"
	    " --stdout)\n"
	    "        [--ttl DURATION] [--credential ID]\n"
	    "  revoke-token (--credential ID | --token-file FILE)\n"
	    "  revoke-workspace --workspace W\n"
	    "  policy set --workspace W [--allow-network | --deny-network]\n"
	    "        [--image ID]... [--all-images] [--max-vms N]"
	    " [--memory-mib N]\n"
	    "        [--storage-gib N] [--max-streams N]\n"
	    "        [--egress-public | --egress-allow CIDR|NAME... |"
	    " --egress-deny CIDR...]\n"
	    "        [--egress-rate BYTES]\n"
	    "        [--gate CLASS[=N]]... [--ungate CLASS]... [--supervised]\n"
	    "        [--gate-memory-above MIB] [--gate-vcpus-above N]\n"
	    "  list\n"
	    "  show --workspace W\n"
	    "  -h, --help | -V, --version\n"
	    "See authctl(8).\n");
	exit(code);
}

static void __attribute__((noreturn))
usage(void)
{
	usage_to(stderr, EX_USAGE);
}

static void __attribute__((noreturn, format(printf, 2, 3)))
die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("authctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

/* ---- arguments ---------------------------------------------------------- */

struct args {
	const char	*workspace;
	const char	*output;
	const char	*owner;
	const char	*cred_id;
	const char	*token_file;
	int		 to_stdout;
	int		 has_ttl;
	long long	 ttl;
	int		 all_images;
	int		 egress_public;
	struct json_object *allow, *deny;	/* the egress lists given */
	struct json_object *policy;	/* what the flags set */
	struct json_object *gates;	/* its "approvals", if any */
	unsigned int	 gate_set;	/* classes named by the flags */
	int		 gate_mem, gate_vcpus;	/* a threshold given: 1 + n */
	int		 gate_resources;	/* --gate resources given */
};

static long long
parse_number(const char *opt, const char *s, long long min, long long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		die(EX_USAGE, "%s: '%s' is not a number between %lld and %lld",
		    opt, s, min, max);
	return v;
}

/* "3600", "90s", "45m", "12h", "30d", or "never" (0). */
static long long
parse_duration(const char *s)
{
	long long mult = 1, v;
	char buf[32];
	size_t n = strlen(s);

	if (strcmp(s, "never") == 0)
		return 0;
	if (n == 0 || n >= sizeof(buf))
		die(EX_USAGE, "--ttl: '%s' is not a duration", s);
	memcpy(buf, s, n + 1);
	switch (buf[n - 1]) {
	case 's': mult = 1; buf[n - 1] = '\0'; break;
	case 'm': mult = 60; buf[n - 1] = '\0'; break;
	case 'h': mult = 3600; buf[n - 1] = '\0'; break;
	case 'd': mult = 86400; buf[n - 1] = '\0'; break;
	default: break;
	}
	v = parse_number("--ttl", buf, 0, AUTH_TTL_MAX / mult);
	return v * mult;
}

static void
policy_flag(struct args *a, const char *key, struct json_object *v)
{
	if (a->policy == NULL)
		a->policy = json_object_new_object();
	json_object_object_add(a->policy, key, v);
}

enum {
	O_WORKSPACE = 256, O_OUTPUT, O_OWNER, O_STDOUT, O_TTL, O_NET,
	O_NONET, O_IMAGE, O_ALLIMG, O_VMS, O_MEM, O_STORE, O_STREAMS,
	O_CRED, O_TOKFILE, O_JSON, O_EG_PUBLIC, O_EG_ALLOW, O_EG_DENY,
	O_EG_RATE, O_GATE, O_UNGATE, O_SUPERVISED, O_GATE_MEM, O_GATE_VCPUS,
};

static const char gate_classes[] = "exec, network, resources, destroy, "
    "snapshot_delete, broker_pipe";

/* One member of the policy's "approvals". */
static void
gate_flag(struct args *a, const char *key, int64_t v)
{
	if (a->gates == NULL) {
		a->gates = json_object_new_object();
		policy_flag(a, "approvals", a->gates);
	}
	json_object_object_add(a->gates, key, json_object_new_int64(v));
}

/* --gate CLASS[=N], --ungate CLASS (off) and --supervised (exec). */
static void
gate_class_flag(struct args *a, const char *opt, const char *v, int off)
{
	char name[32];
	const char *eq = strchr(v, '=');
	size_t n = eq != NULL ? (size_t)(eq - v) : strlen(v);
	long long need;
	int c;

	if (n >= sizeof(name))
		n = sizeof(name) - 1;
	memcpy(name, v, n);
	name[n] = '\0';
	if ((c = gate_class_from_name(name)) == -1)
		die(EX_USAGE, "%s '%s': no such gated action (the classes are "
		    "%s)", opt, name, gate_classes);
	if (eq != NULL && off)
		die(EX_USAGE, "%s '%s': takes a class alone", opt, v);
	if (off)
		need = 0;
	else if (eq != NULL)
		need = parse_number(opt, eq + 1, 1, GATE_NEED_MAX);
	else
		need = gate_default_need(c);
	if (a->gate_set & (1u << c))
		die(EX_USAGE, "%s: %s is named twice (by --gate, --ungate or "
		    "--supervised)", opt, name);
	a->gate_set |= 1u << c;
	if (c == GATE_RESOURCES)
		a->gate_resources = need != 0;
	gate_flag(a, name, need);
}

/* --egress-allow and --egress-deny: one prefix or domain name, checked
 * as authd will. */
static void
egress_flag(struct args *a, const char *opt, const char *v,
    struct json_object **list, const char *mode, const char *key)
{
	struct json_object *eg;
	struct cidr c;
	char name[DNSNAME_MAX + 1], why[128];

	if (dnsname_like(v)) {
		if (dnsname_check(v, strlen(v), 1, name, why,
		    sizeof(why)) == -1)
			die(EX_USAGE, "%s '%.*s': the name %s", opt,
			    DNSNAME_MAX + 8, v, why);
		v = name;
	} else if (cidr_parse(v, 0, &c) == -1)
		die(EX_USAGE, "%s '%s': not an IPv4 prefix a.b.c.d/n with its "
		    "host bits zero", opt, v);
	if (*list == NULL) {
		eg = json_object_new_object();
		*list = json_object_new_array();
		json_object_object_add(eg, "mode",
		    json_object_new_string(mode));
		json_object_object_add(eg, key, *list);
		policy_flag(a, "egress", eg);
	}
	json_object_array_add(*list, json_object_new_string(v));
}

/* Which options each command takes. */
#define A_WS	0x001
#define A_OUT	0x002
#define A_TTL	0x004
#define A_POL	0x008	/* --allow-network --image and the quotas */
#define A_NONET	0x010	/* --deny-network --all-images */
#define A_CRED	0x020
#define A_TOKF	0x040

static void
parse_args(int argc, char **argv, unsigned int allowed, struct args *a)
{
	static const struct option opts[] = {
		{ "workspace", required_argument, NULL, O_WORKSPACE },
		{ "output", required_argument, NULL, O_OUTPUT },
		{ "owner", required_argument, NULL, O_OWNER },
		{ "stdout", no_argument, NULL, O_STDOUT },
		{ "ttl", required_argument, NULL, O_TTL },
		{ "allow-network", no_argument, NULL, O_NET },
		{ "deny-network", no_argument, NULL, O_NONET },
		{ "image", required_argument, NULL, O_IMAGE },
		{ "all-images", no_argument, NULL, O_ALLIMG },
		{ "max-vms", required_argument, NULL, O_VMS },
		{ "memory-mib", required_argument, NULL, O_MEM },
		{ "storage-gib", required_argument, NULL, O_STORE },
		{ "max-streams", required_argument, NULL, O_STREAMS },
		{ "credential", required_argument, NULL, O_CRED },
		{ "token-file", required_argument, NULL, O_TOKFILE },
		{ "json", no_argument, NULL, O_JSON },
		{ "egress-public", no_argument, NULL, O_EG_PUBLIC },
		{ "egress-allow", required_argument, NULL, O_EG_ALLOW },
		{ "egress-deny", required_argument, NULL, O_EG_DENY },
		{ "egress-rate", required_argument, NULL, O_EG_RATE },
		{ "gate", required_argument, NULL, O_GATE },
		{ "ungate", required_argument, NULL, O_UNGATE },
		{ "supervised", no_argument, NULL, O_SUPERVISED },
		{ "gate-memory-above", required_argument, NULL, O_GATE_MEM },
		{ "gate-vcpus-above", required_argument, NULL, O_GATE_VCPUS },
		{ NULL, 0, NULL, 0 },
	};
	struct json_object *images = NULL;
	char why[160];
	int ch, li = 0;

	memset(a, 0, sizeof(*a));
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "", opts, &li)) != -1) {
		unsigned int need;

		switch (ch) {
		case O_WORKSPACE: need = A_WS; break;
		case O_OUTPUT: case O_OWNER: case O_STDOUT: need = A_OUT; break;
		case O_TTL: need = A_TTL; break;
		case O_NET: case O_IMAGE: case O_VMS: case O_MEM:
		case O_STORE: case O_STREAMS: case O_EG_PUBLIC:
		case O_EG_ALLOW: case O_EG_DENY: case O_EG_RATE:
		case O_GATE: case O_UNGATE: case O_SUPERVISED:
		case O_GATE_MEM: case O_GATE_VCPUS:
			need = A_POL; break;
		case O_NONET: case O_ALLIMG: need = A_NONET; break;
		case O_CRED: need = A_CRED; break;
		case O_TOKFILE: need = A_TOKF; break;
		case O_JSON: need = 0; break;
		default:
			die(EX_USAGE, "%s: unknown option or missing value "
			    "(see authctl --help)", argv[optind - 1]);
		}
		/* Named by the option, not by its value ("--gate exec"). */
		if (need != 0 && (allowed & need) == 0)
			die(EX_USAGE, "--%s: not an option of '%s'",
			    opts[li].name, argv[0]);
		switch (ch) {
		case O_WORKSPACE:
			if (!workspace_id_valid(optarg, why, sizeof(why)))
				die(EX_USAGE, "--workspace '%s': %s", optarg,
				    why);
			a->workspace = optarg;
			break;
		case O_OUTPUT: a->output = optarg; break;
		case O_OWNER: a->owner = optarg; break;
		case O_STDOUT: a->to_stdout = 1; break;
		case O_TTL:
			a->ttl = parse_duration(optarg);
			a->has_ttl = 1;
			break;
		case O_NET:
			policy_flag(a, "network", json_object_new_boolean(1));
			break;
		case O_NONET:
			policy_flag(a, "network", json_object_new_boolean(0));
			break;
		case O_IMAGE:
			if (!image_id_valid(optarg, why, sizeof(why)))
				die(EX_USAGE, "--image '%s': %s", optarg, why);
			if (images == NULL) {
				images = json_object_new_array();
				policy_flag(a, "images", images);
			}
			json_object_array_add(images,
			    json_object_new_string(optarg));
			break;
		case O_ALLIMG:
			a->all_images = 1;
			policy_flag(a, "images", json_object_new_array());
			break;
		case O_VMS:
			policy_flag(a, "max_vms", json_object_new_int64(
			    parse_number("--max-vms", optarg, 1,
			    AUTH_MAX_VMS_LIMIT)));
			break;
		case O_MEM:
			policy_flag(a, "memory_mib", json_object_new_int64(
			    parse_number("--memory-mib", optarg, 1,
			    AUTH_MEMORY_MIB_LIMIT)));
			break;
		case O_STORE:
			policy_flag(a, "storage_gib", json_object_new_int64(
			    parse_number("--storage-gib", optarg, 1,
			    AUTH_STORAGE_GIB_LIMIT)));
			break;
		case O_STREAMS:
			policy_flag(a, "max_streams", json_object_new_int64(
			    parse_number("--max-streams", optarg, 1,
			    AUTH_STREAMS_LIMIT)));
			break;
		case O_CRED:
			if (!cred_id_valid(optarg))
				die(EX_USAGE, "--credential '%s': a credential "
				    "id is %d lowercase hex digits, as "
				    "'authctl show' prints", optarg,
				    CRED_ID_LEN);
			a->cred_id = optarg;
			break;
		case O_TOKFILE: a->token_file = optarg; break;
		case O_JSON: json_out = 1; break;
		case O_EG_PUBLIC:
			a->egress_public = 1;
			{
				struct json_object *eg =
				    json_object_new_object();

				json_object_object_add(eg, "mode",
				    json_object_new_string("public"));
				policy_flag(a, "egress", eg);
			}
			break;
		case O_EG_ALLOW:
			egress_flag(a, "--egress-allow", optarg, &a->allow,
			    "allowlist", "allow");
			break;
		case O_EG_DENY:
			egress_flag(a, "--egress-deny", optarg, &a->deny,
			    "public", "deny");
			break;
		case O_EG_RATE:
			{
				long long r = parse_number("--egress-rate",
				    optarg, 0, AUTH_RATE_MAX);

				if (r != 0 && r < AUTH_RATE_MIN)
					die(EX_USAGE, "--egress-rate %lld: "
					    "below the least limit, %d bytes "
					    "a second (0 lifts the limit)", r,
					    AUTH_RATE_MIN);
				policy_flag(a, "egress_rate",
				    json_object_new_int64(r));
			}
			break;
		case O_GATE:
			gate_class_flag(a, "--gate", optarg, 0);
			break;
		case O_UNGATE:
			gate_class_flag(a, "--ungate", optarg, 1);
			break;
		case O_SUPERVISED:
			gate_class_flag(a, "--supervised", "exec", 0);
			break;
		case O_GATE_MEM:
			a->gate_mem = 1 + (int)parse_number(
			    "--gate-memory-above", optarg, 0,
			    GATE_MEMORY_MIB_MAX);
			gate_flag(a, "memory_mib_above", a->gate_mem - 1);
			break;
		case O_GATE_VCPUS:
			a->gate_vcpus = 1 + (int)parse_number(
			    "--gate-vcpus-above", optarg, 0, GATE_VCPUS_MAX);
			gate_flag(a, "vcpus_above", a->gate_vcpus - 1);
			break;
		}
	}
	if (optind < argc)
		die(EX_USAGE, "%s: unexpected argument", argv[optind]);
	if (a->all_images && images != NULL)
		die(EX_USAGE, "--all-images and --image contradict each other");
	if (a->egress_public + (a->allow != NULL) + (a->deny != NULL) > 1)
		die(EX_USAGE, "--egress-public, --egress-allow and --egress-deny "
		    "contradict each other (one egress policy at a time)");
	if ((allowed & A_WS) && a->workspace == NULL)
		die(EX_USAGE, "%s needs --workspace", argv[0]);
	/* A resources gate needs a threshold: a new workspace has none
	 * stored, and 0 given for both clears them. */
	if (a->gate_resources &&
	    a->gate_mem <= 1 && a->gate_vcpus <= 1 &&
	    ((allowed & A_OUT) || (a->gate_mem == 1 && a->gate_vcpus == 1)))
		die(EX_USAGE, "--gate resources needs a threshold: "
		    "--gate-memory-above MIB or --gate-vcpus-above N (above "
		    "0)");
	if (allowed & A_OUT) {
		if (a->output != NULL && a->to_stdout)
			die(EX_USAGE, "--output and --stdout contradict each "
			    "other");
		if (a->output == NULL && !a->to_stdout)
			die(EX_USAGE, "%s needs --output FILE (or --stdout to "
			    "print the credential)", argv[0]);
		if (a->owner != NULL && a->output == NULL)
			die(EX_USAGE, "--owner goes with --output");
	}
}

/* ---- talking to authd --------------------------------------------------- */

static const char *
ctl_socket(void)
{
	static struct mcpvm_conf conf;
	char err[512];

	if (socket_path != NULL)
		return socket_path;
	if (conf_load(config_path, &conf, err, sizeof(err)) == -1) {
		/* No file at the default path: the default socket. */
		if (access(config_path, F_OK) == -1 && errno == ENOENT &&
		    strcmp(config_path, MCPVM_CONF_PATH) == 0)
			return "/run/mcpvm/authctl.sock";
		die(EX_USAGE, "%s", err);
	}
	return conf.authd.ctl_socket;
}

static int ctl_fd = -1;

/* One request: the reply body and its type, or NULL if authd is out of
 * reach (errno says why). */
static struct json_object *
call(uint32_t type, struct json_object *req, uint32_t *rtype)
{
	struct json_object *reply = NULL;
	const char *path = ctl_socket();

	if (ctl_fd == -1 &&
	    (ctl_fd = ipc_sync_connect(path, "authctl", CALL_TIMEOUT_MS)) ==
	    -1)
		return NULL;
	if (ipc_sync_call(ctl_fd, type, req, -1, rtype, &reply, NULL,
	    CALL_TIMEOUT_MS) == -1)
		return NULL;
	return reply;
}

static void __attribute__((noreturn))
unreachable(void)
{
	int saved = errno;
	const char *path = ctl_socket();

	errno = saved;
	if (errno == ECONNRESET || errno == EPIPE || errno == EPROTO ||
	    errno == 0)
		die(EX_UNREACHABLE, "authd at %s closed the connection: authctl "
		    "needs root or membership of authd's admin group", path);
	die(EX_UNREACHABLE, "cannot reach authd at %s: %s", path,
	    strerror(errno));
}

static const char *
jstr(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (o != NULL && json_object_object_get_ex(o, key, &v) &&
	    json_object_is_type(v, json_type_string))
		return json_object_get_string(v);
	return "";
}

static int64_t
jint(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (o != NULL && json_object_object_get_ex(o, key, &v))
		return json_object_get_int64(v);
	return 0;
}

static struct json_object *
jobj(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (o != NULL && json_object_object_get_ex(o, key, &v))
		return v;
	return NULL;
}

static void
print_json(struct json_object *o)
{
	printf("%s\n", json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* An error reply: printed (JSON on stdout with --json) and exit 1. */
static void __attribute__((noreturn))
refused(struct json_object *reply)
{
	struct json_object *e = jobj(reply, "error");

	if (json_out)
		print_json(reply);
	fprintf(stderr, "authctl: %s: %s\n", jstr(e, "code"),
	    jstr(e, "message"));
	exit(EX_REFUSED);
}

static struct json_object *
request(uint32_t type, struct json_object *req)
{
	struct json_object *reply;
	uint32_t rtype = 0;

	if ((reply = call(type, req, &rtype)) == NULL)
		unreachable();
	if (rtype == IPC_ERROR)
		refused(reply);
	if (rtype != type + 1)
		die(EX_UNREACHABLE, "authd answered with message type %u",
		    rtype);
	return reply;
}

/* ---- output ------------------------------------------------------------- */

static const char *
fmt_time(int64_t t, char *buf, size_t len)
{
	struct tm tm;
	time_t tt = (time_t)t;

	if (t == 0)
		return "never";
	gmtime_r(&tt, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

static void
images_text(struct json_object *policy, char *buf, size_t len)
{
	struct json_object *imgs = jobj(policy, "images");
	size_t n = imgs != NULL ? json_object_array_length(imgs) : 0, off = 0;

	if (n == 0) {
		snprintf(buf, len, "all");
		return;
	}
	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%s", i ? "," : "",
		    json_object_get_string(json_object_array_get_idx(imgs, i)));

		if (w < 0)
			break;
		off += (size_t)w;
	}
}

/* "egress:       allowlist 203.0.113.0/24 …" */
static void
egress_print(FILE *f, struct json_object *eg)
{
	const char *mode = jstr(eg, "mode");
	int allow = strcmp(mode, "allowlist") == 0;
	struct json_object *l = jobj(eg, allow ? "allow" : "deny");
	size_t n = l != NULL ? json_object_array_length(l) : 0;

	fprintf(f, "egress:       %s", allow ? "allowlist" : "public");
	if (!allow && n > 0)
		fprintf(f, ", denying");
	if (allow && n == 0)
		fprintf(f, " (empty: nothing is reachable)");
	for (size_t i = 0; i < n; i++)
		fprintf(f, " %s", json_object_get_string(
		    json_object_array_get_idx(l, i)));
	fputc('\n', f);
}

/* "approvals:    exec 1, resources 1 (over 4096 MiB or 8 vCPUs),
 * destroy 2": each gated class, in gates.h's order, and the approvals it
 * needs; "none" without any. */
static void
gates_print(FILE *f, struct json_object *g)
{
	int64_t mem = jint(g, "memory_mib_above"), cpus = jint(g,
	    "vcpus_above");
	int any = 0;

	fprintf(f, "approvals:    ");
	for (int c = 0; c < GATE_NCLASSES; c++) {
		const char *name = gate_class_name(c);
		int64_t need = jint(g, name);

		if (need == 0)
			continue;
		fprintf(f, "%s%s %" PRId64, any ? ", " : "", name, need);
		any = 1;
		if (c != GATE_RESOURCES)
			continue;
		fprintf(f, " (over");
		if (mem != 0)
			fprintf(f, " %" PRId64 " MiB", mem);
		if (mem != 0 && cpus != 0)
			fprintf(f, " or");
		if (cpus != 0)
			fprintf(f, " %" PRId64 " vCPUs", cpus);
		fputc(')', f);
	}
	fprintf(f, "%s\n", any ? "" : "none");
}

static void
print_policy(FILE *f, struct json_object *p)
{
	char imgs[AUTH_MAX_IMAGES * (AUTH_IMAGE_MAX + 1) + 8];

	images_text(p, imgs, sizeof(imgs));
	fprintf(f, "network:      %s\n",
	    json_object_get_boolean(jobj(p, "network")) ? "on" : "off");
	fprintf(f, "images:       %s\n", imgs);
	fprintf(f, "max VMs:      %" PRId64 "\n", jint(p, "max_vms"));
	fprintf(f, "memory:       %" PRId64 " MiB\n", jint(p, "memory_mib"));
	fprintf(f, "storage:      %" PRId64 " GiB\n", jint(p, "storage_gib"));
	fprintf(f, "streams:      %" PRId64 "\n", jint(p, "max_streams"));
	egress_print(f, jobj(p, "egress"));
	if (jobj(p, "egress_rate") != NULL && jint(p, "egress_rate") != 0)
		fprintf(f, "egress rate:  %" PRId64 " bytes/s\n",
		    jint(p, "egress_rate"));
	else
		fprintf(f, "egress rate:  unlimited\n");
	gates_print(f, jobj(p, "approvals"));
}

/* ---- token files -------------------------------------------------------- */

static int
open_token_file(const char *path, const char *owner)
{
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd == -1)
		die(EX_TOKENFILE, "%s: %s%s", path, strerror(errno),
		    errno == EEXIST ? " (authctl never overwrites a "
		    "credential file)" : "");
	/* Whatever the umask said, the file is the owner's alone. */
	if (fchmod(fd, 0600) == -1)
		goto fail;
	if (owner != NULL) {
		struct passwd *pw = getpwnam(owner);

		if (pw == NULL) {
			errno = 0;
			unlink(path);
			close(fd);
			die(EX_USAGE, "--owner %s: no such user", owner);
		}
		if (fchown(fd, pw->pw_uid, pw->pw_gid) == -1)
			goto fail;
	}
	return fd;
fail:
	{
		int saved = errno;

		unlink(path);
		close(fd);
		die(EX_TOKENFILE, "%s: %s", path, strerror(saved));
	}
}

static int
write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Scrubs the credential out of a reply before it is freed. */
static void
scrub(struct json_object *reply)
{
	struct json_object *v = jobj(reply, "credential");

	if (v != NULL && json_object_is_type(v, json_type_string)) {
		const char *s = json_object_get_string(v);

		explicit_bzero((char *)s, strlen(s));
	}
}

/* ---- commands ----------------------------------------------------------- */

static int
cmd_issue(int argc, char **argv)
{
	struct json_object *req, *reply;
	struct args a;
	const char *tok, *id;
	char t1[32], t2[32];
	int rotate = strcmp(argv[0], "rotate") == 0;
	uint32_t rtype = 0;
	int fd = -1;

	parse_args(argc, argv, A_WS | A_OUT | A_TTL |
	    (rotate ? A_CRED : A_POL), &a);
	req = json_object_new_object();
	json_object_object_add(req, "workspace",
	    json_object_new_string(a.workspace));
	if (a.has_ttl)
		json_object_object_add(req, "ttl", json_object_new_int64(a.ttl));
	if (a.policy != NULL)
		json_object_object_add(req, "policy", a.policy);
	if (a.cred_id != NULL)
		json_object_object_add(req, "credential_id",
		    json_object_new_string(a.cred_id));
	/* The file first: a credential nobody can store is not issued. */
	if (a.output != NULL)
		fd = open_token_file(a.output, a.owner);
	reply = call(rotate ? IPC_AUTHCTL_ROTATE : IPC_AUTHCTL_ISSUE, req,
	    &rtype);
	json_object_put(req);
	if (reply == NULL || rtype != (rotate ? IPC_AUTHCTL_ROTATE_RESULT :
	    IPC_AUTHCTL_ISSUE_RESULT)) {
		if (fd != -1) {
			unlink(a.output);
			close(fd);
		}
		if (reply == NULL)
			unreachable();
		if (rtype != IPC_ERROR)
			die(EX_UNREACHABLE, "authd answered with message type "
			    "%u", rtype);
		refused(reply);
	}
	tok = jstr(reply, "credential");
	id = jstr(reply, "credential_id");
	if (!cred_wellformed(tok, strlen(tok)))
		die(EX_UNREACHABLE, "authd sent a malformed credential");
	if (fd != -1) {
		if (write_all(fd, tok, strlen(tok)) == -1 ||
		    write_all(fd, "\n", 1) == -1 || fsync(fd) == -1 ||
		    close(fd) == -1) {
			int saved = errno;
			struct json_object *rv = json_object_new_object();

			unlink(a.output);
			scrub(reply);
			/* Nobody holds it: take it back. */
			json_object_object_add(rv, "credential_id",
			    json_object_new_string(id));
			json_object_put(call(IPC_AUTHCTL_REVOKE_TOKEN, rv,
			    &(uint32_t){ 0 }));
			json_object_put(rv);
			die(EX_TOKENFILE, "%s: %s; credential %s was revoked "
			    "again", a.output, strerror(saved), id);
		}
	}
	if (json_out) {
		if (!a.to_stdout) {
			scrub(reply);
			json_object_object_del(reply, "credential");
			json_object_object_add(reply, "output",
			    json_object_new_string(a.output));
		}
		print_json(reply);
	} else {
		FILE *info = a.to_stdout ? stderr : stdout;

		if (a.to_stdout)
			printf("%s\n", tok);
		fprintf(info, "%s credential %s for workspace %s%s\n",
		    rotate ? "rotated:" : "issued", id, a.workspace,
		    json_object_get_boolean(jobj(reply, "new_workspace")) ?
		    " (new workspace)" : "");
		fprintf(info, "created:      %s\n",
		    fmt_time(jint(reply, "created_at"), t1, sizeof(t1)));
		fprintf(info, "expires:      %s\n",
		    fmt_time(jint(reply, "expires_at"), t2, sizeof(t2)));
		if (a.output != NULL)
			fprintf(info, "written to:   %s\n", a.output);
		if (rotate) {
			struct json_object *r = jobj(reply, "revoked");

			for (size_t i = 0; r != NULL &&
			    i < json_object_array_length(r); i++)
				fprintf(info, "revoked:      %s\n",
				    json_object_get_string(
				    json_object_array_get_idx(r, i)));
		}
		print_policy(info, jobj(reply, "policy"));
	}
	fflush(stdout);
	scrub(reply);
	json_object_put(reply);
	return EX_OK;
}

/* The id of the credential in a token file, never sending the secret. */
static void
id_from_file(const char *path, char id[CRED_ID_LEN + 1])
{
	char buf[CRED_LEN + 3];
	uint8_t hash[CRED_HASH_LEN];
	ssize_t n;
	size_t len;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		die(EX_TOKENFILE, "%s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		die(EX_TOKENFILE, "%s: %s", path, strerror(errno));
	len = (size_t)n;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	if (!cred_wellformed(buf, len)) {
		explicit_bzero(buf, sizeof(buf));
		die(EX_USAGE, "%s does not hold an mcpvm credential", path);
	}
	cred_hash(buf, len, hash);
	explicit_bzero(buf, sizeof(buf));
	cred_id(hash, id);
}

static int
cmd_revoke_token(int argc, char **argv)
{
	struct json_object *req, *reply;
	struct args a;
	char id[CRED_ID_LEN + 1];

	parse_args(argc, argv, A_CRED | A_TOKF, &a);
	if ((a.cred_id == NULL) == (a.token_file == NULL))
		die(EX_USAGE, "revoke-token needs one of --credential ID or "
		    "--token-file FILE");
	if (a.token_file != NULL)
		id_from_file(a.token_file, id);
	else
		snprintf(id, sizeof(id), "%s", a.cred_id);
	req = json_object_new_object();
	json_object_object_add(req, "credential_id",
	    json_object_new_string(id));
	reply = request(IPC_AUTHCTL_REVOKE_TOKEN, req);
	json_object_put(req);
	if (json_out)
		print_json(reply);
	else
		printf("credential %s of workspace %s %s\n", id,
		    jstr(reply, "workspace"),
		    json_object_get_boolean(jobj(reply, "already_revoked")) ?
		    "was already revoked" : "revoked");
	json_object_put(reply);
	return EX_OK;
}

static int
cmd_revoke_workspace(int argc, char **argv)
{
	struct json_object *req, *reply;
	struct args a;

	parse_args(argc, argv, A_WS, &a);
	req = json_object_new_object();
	json_object_object_add(req, "workspace",
	    json_object_new_string(a.workspace));
	reply = request(IPC_AUTHCTL_REVOKE_WORKSPACE, req);
	json_object_put(req);
	if (json_out)
		print_json(reply);
	else if (json_object_get_boolean(jobj(reply, "already_revoked")))
		printf("workspace %s was already revoked\n", a.workspace);
	else
		printf("workspace %s revoked (%zu active credentials)\n",
		    a.workspace,
		    json_object_array_length(jobj(reply, "revoked")));
	json_object_put(reply);
	return EX_OK;
}

static int
cmd_policy(int argc, char **argv)
{
	struct json_object *req, *reply;
	struct args a;

	if (argc < 2 || strcmp(argv[1], "set") != 0)
		die(EX_USAGE, "policy: the only subcommand is 'policy set'");
	argv[1] = "policy set";
	parse_args(argc - 1, argv + 1, A_WS | A_POL | A_NONET, &a);
	if (a.policy == NULL)
		die(EX_USAGE, "policy set: nothing to set (see authctl --help)");
	req = json_object_new_object();
	json_object_object_add(req, "workspace",
	    json_object_new_string(a.workspace));
	json_object_object_add(req, "policy", a.policy);
	reply = request(IPC_AUTHCTL_POLICY_SET, req);
	json_object_put(req);
	if (json_out)
		print_json(reply);
	else {
		printf("workspace:    %s\n", a.workspace);
		print_policy(stdout, jobj(reply, "policy"));
	}
	json_object_put(reply);
	return EX_OK;
}

static int
cmd_list(int argc, char **argv)
{
	struct json_object *reply, *arr;
	struct args a;
	char imgs[AUTH_MAX_IMAGES * (AUTH_IMAGE_MAX + 1) + 8];
	size_t n;

	parse_args(argc, argv, 0, &a);
	reply = request(IPC_AUTHCTL_LIST, NULL);
	if (json_out) {
		print_json(reply);
		json_object_put(reply);
		return EX_OK;
	}
	arr = jobj(reply, "workspaces");
	n = arr != NULL ? json_object_array_length(arr) : 0;
	printf("%-24s %-8s %6s %5s %-7s %4s %8s %7s %7s  %s\n", "WORKSPACE",
	    "STATE", "ACTIVE", "TOTAL", "NETWORK", "VMS", "MEM_MIB",
	    "DISK_GB", "STREAMS", "IMAGES");
	for (size_t i = 0; i < n; i++) {
		struct json_object *w = json_object_array_get_idx(arr, i);
		struct json_object *p = jobj(w, "policy");

		images_text(p, imgs, sizeof(imgs));
		printf("%-24s %-8s %6" PRId64 " %5" PRId64 " %-7s %4" PRId64
		    " %8" PRId64 " %7" PRId64 " %7" PRId64 "  %s\n",
		    jstr(w, "workspace"),
		    jint(w, "revoked_at") != 0 ? "revoked" : "active",
		    jint(w, "active_credentials"), jint(w, "credentials"),
		    json_object_get_boolean(jobj(p, "network")) ? "on" : "off",
		    jint(p, "max_vms"), jint(p, "memory_mib"),
		    jint(p, "storage_gib"), jint(p, "max_streams"), imgs);
	}
	if (json_object_get_boolean(jobj(reply, "truncated")))
		printf("(more workspaces not shown; use --json and ask for "
		    "fewer)\n");
	json_object_put(reply);
	return EX_OK;
}

static int
cmd_show(int argc, char **argv)
{
	struct json_object *req, *reply, *arr;
	struct args a;
	char t1[32], t2[32], t3[32];
	size_t n;

	parse_args(argc, argv, A_WS, &a);
	req = json_object_new_object();
	json_object_object_add(req, "workspace",
	    json_object_new_string(a.workspace));
	reply = request(IPC_AUTHCTL_SHOW, req);
	json_object_put(req);
	if (json_out) {
		print_json(reply);
		json_object_put(reply);
		return EX_OK;
	}
	printf("workspace:    %s\n", jstr(reply, "workspace"));
	printf("created:      %s\n",
	    fmt_time(jint(reply, "created_at"), t1, sizeof(t1)));
	if (jint(reply, "revoked_at") != 0)
		printf("state:        revoked %s\n",
		    fmt_time(jint(reply, "revoked_at"), t1, sizeof(t1)));
	else
		printf("state:        active\n");
	print_policy(stdout, jobj(reply, "policy"));
	arr = jobj(reply, "credential_list");
	n = arr != NULL ? json_object_array_length(arr) : 0;
	printf("\n%-16s  %-8s  %-20s  %-20s  %s\n", "CREDENTIAL", "STATE",
	    "CREATED", "EXPIRES", "REVOKED");
	for (size_t i = 0; i < n; i++) {
		struct json_object *c = json_object_array_get_idx(arr, i);

		printf("%-16s  %-8s  %-20s  %-20s  %s\n",
		    jstr(c, "credential_id"), jstr(c, "state"),
		    fmt_time(jint(c, "created_at"), t1, sizeof(t1)),
		    fmt_time(jint(c, "expires_at"), t2, sizeof(t2)),
		    jint(c, "revoked_at") != 0 ?
		    fmt_time(jint(c, "revoked_at"), t3, sizeof(t3)) : "-");
	}
	if (json_object_get_boolean(jobj(reply, "truncated")))
		printf("(older credentials not shown)\n");
	json_object_put(reply);
	return EX_OK;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "issue", cmd_issue },
		{ "rotate", cmd_issue },
		{ "revoke-token", cmd_revoke_token },
		{ "revoke-workspace", cmd_revoke_workspace },
		{ "policy", cmd_policy },
		{ "list", cmd_list },
		{ "show", cmd_show },
	};
	int ch;

	/* A credential file must never be readable by others, even briefly. */
	umask(077);
	/* -f as the daemons spell it, -c as vmctl does: the same option. */
	while ((ch = getopt_long(argc, argv, "+s:c:f:jhV", opts, NULL)) != -1) {
		switch (ch) {
		case 's': socket_path = optarg; break;
		case 'c':
		case 'f': config_path = optarg; break;
		case 'h': usage_to(stdout, EX_OK);
		case 'j': json_out = 1; break;
		case 'V':
			printf("authctl %s\n", MCPVM_VERSION);
			return EX_OK;
		default: usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0)
		usage();
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[0], cmds[i].name) == 0)
			return cmds[i].fn(argc, argv);
	die(EX_USAGE, "%s: unknown command (see authctl --help)", argv[0]);
}
