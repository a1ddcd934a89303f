/*
 * vmproxy: a guest's reply to a call, checked and turned into the tool
 * result vmmd builds on (proto/tools.json).  Pure: the call's typed
 * arguments and the guest's decoded reply in, a result or a verdict out;
 * no globals, no I/O, so that test_guestreply and fuzz_guest_reply drive
 * exactly what the link does.  This is the host's only reader of the JSON
 * a guest writes on channel 0.
 */
#ifndef VMPROXY_GUESTREPLY_H
#define VMPROXY_GUESTREPLY_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "glink.h"

/* The guest operations vmmd may call, in the order of guest_op_names. */
enum guest_op {
	GOP_EXEC,
	GOP_JOB_STATUS,
	GOP_JOBS,
	GOP_JOB_OUTPUT,
	GOP_JOB_CANCEL,
	GOP_FILE_READ,
	GOP_FILE_WRITE,
	GOP_FREEZE,
	GOP_THAW,
	GOP_ACTIVITY,
	GOP_PING,
	GOP_SHUTDOWN,
	GOP_CLOCK_SET,
	GOP_IDENTITY,
	GOP_COUNT
};

/* "exec", "job_status", ...; NULL-terminated, indexed by enum guest_op. */
extern const char *const guest_op_names[];

/*
 * What the translation needs of a call's arguments; the rest goes to the
 * guest as it is.  job_id and path point into the call's body and live as
 * long as it does.  A reply about a job must be about the one asked for.
 */
#define GUEST_CURSOR_MAX	(1LL << 30)	/* tools.json's cursor bound */
#define GUEST_OFFSET_MAX	(1LL << 40)	/* vm_read_file's offset bound */

struct guest_call {
	enum guest_op	 op;
	const char	*job_id;	/* exec, job_*: NULL when not known */
	int64_t		 cursor_stdout;	/* job_output: 0..GUEST_CURSOR_MAX */
	int64_t		 cursor_stderr;
	int		 base64;	/* job_output: encoding base64 */
	const char	*path;		/* file_read, file_write: never NULL */
	int64_t		 offset;	/* file_read: 0..GUEST_OFFSET_MAX */
	int64_t		 max_bytes;	/* file_read: 1..GUEST_MAX_FILE */
	const char	*boot_id;	/* identity: the one asked for */
};

/* A call's arguments when vmmd gave none: the tools' defaults. */
void	guest_call_init(struct guest_call *, enum guest_op);

enum guestreply_kind {
	GUESTREPLY_RESULT,	/* result: the tool result, a new reference */
	GUESTREPLY_ERROR,	/* the guest refused: code, message */
	GUESTREPLY_BROKEN,	/* the reply breaks the protocol: why */
};

struct guestreply {
	enum guestreply_kind	 kind;
	struct json_object	*result;
	const char		*code;		/* a public error code */
	const char		*message;	/* points into the reply */
	char			 why[256];
};

/*
 * The guest's reply r (its envelope decoded into rep by
 * glink_reply_decode, not an event) to call c, with the frame's body.
 * Fills *out and returns its kind.  An error the guest reports maps to a
 * public code; a reply that does not add up is BROKEN, and the guest with
 * it.
 */
enum guestreply_kind guestreply_translate(const struct guest_call *c,
	    struct json_object *r, const struct glink_reply *rep,
	    const uint8_t *body, size_t body_len, struct guestreply *out);

/* The public error code for a guest's: "internal" for one we don't know. */
const char	*guestreply_public_code(const char *guest_code);

/*
 * The guest's answer to our hello: 0 with *info (a new reference, what
 * vmmd's hello event carries: boot_id and jobs), or -1 with why filled.
 */
int	guestreply_hello(struct json_object *r, const struct glink_reply *rep,
	    struct json_object **info, char *why, size_t whylen);

#endif
