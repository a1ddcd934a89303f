/*
 * Gated actions (issue #28): the fixed, typed set of actions a workspace's
 * policy may put behind a human's signed approval, and how many distinct
 * approvers each needs.  authd keeps a workspace's gates in its policy,
 * authctl sets them, vmmd enforces them; all three use this one encoding.
 * There is no policy language: a gate is on (1 or 2 approvals) or off.
 */
#ifndef MCPVM_GATES_H
#define MCPVM_GATES_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

enum gate_class {
	GATE_EXEC,		/* vm_exec and vm_run at all ("supervised") */
	GATE_NETWORK,		/* vm_create / vm_run with network on */
	GATE_RESOURCES,		/* memory or vCPUs above the thresholds */
	GATE_DESTROY,		/* vm_destroy */
	GATE_SNAPSHOT_DELETE,	/* vm_snapshot_delete */
	GATE_BROKER_PIPE,	/* vm_exec / vm_run with a broker pipe */
	GATE_NCLASSES
};

#define GATE_NEED_MAX		2	/* approvals one action may need */
#define GATE_MEMORY_MIB_MAX	(1024 * 1024)
#define GATE_VCPUS_MAX		1024

struct gates {
	/* Approvals each class needs: 0 (not gated), 1 or 2. */
	uint8_t		need[GATE_NCLASSES];
	/* GATE_RESOURCES: a VM asking for more than either (0: no bound of
	 * that kind) is gated.  A resources gate needs at least one. */
	uint32_t	memory_mib_above;
	uint32_t	vcpus_above;
};

/* "exec", "network", ...; NULL for a value out of range. */
const char	*gate_class_name(enum gate_class);
/* The class of a name, or -1. */
int		 gate_class_from_name(const char *);
/* What turning a class on without a count means: 2 for destroy and
 * snapshot_delete, else 1. */
int		 gate_default_need(enum gate_class);
/* Whether any class is on. */
int		 gates_any(const struct gates *);

/*
 * {"exec":0,"network":0,"resources":0,"destroy":2,"snapshot_delete":2,
 *  "broker_pipe":0,"memory_mib_above":0,"vcpus_above":0}: every member
 * always; NULL on allocation failure.
 */
struct json_object *gates_to_json(const struct gates *);

/*
 * Strict decode of such an object, as authd stores and vmmd receives it:
 * every member optional (absent is 0), unknown members, wrong types and
 * out-of-range values refused with path (e.g. "policy.approvals") in the
 * message, and a resources gate without a threshold refused.  0, or -1.
 */
int	gates_from_json(struct json_object *, const char *path,
	    struct gates *, char *err, size_t errlen);

#endif
