/*
 * The host <-> guest link: the one byte stream between a VM's vmproxy (host)
 * and guestd (PID 1 in the guest).  Shared by both; common/glink.{c,h}
 * implements the framing, channel and credit rules described here.
 *
 * TRANSPORT
 *   QEMU: virtio-serial port "org.mcpvm.link.0" (guestd finds its /dev/vportNpM
 *   by name in /sys/class/virtio-ports; no udev).  Firecracker (or
 *   vhost-vsock): guest vsock port 1024, guestd listens and the newest
 *   connection from the host (VMADDR_CID_HOST, 2) is the link; one from
 *   any other CID (a guest program) is refused and leaves the link alone.
 *   When the transport drops (host disconnects, hibernation, reset) every
 *   channel is gone on both sides and any half-received frame is discarded;
 *   jobs live on in guestd.  After every (re)connect guestd sends "hello"
 *   first.  The host may send requests before it has seen hello.
 *
 * FRAMES
 *   12-byte header, all integers little-endian:
 *     u8 type, u8 flags, u16 reserved (0), u32 channel, u32 len
 *   followed by len payload bytes, len <= GLINK_MAX_PAYLOAD (64 KiB).
 *   Any rule broken below (unknown type, flag or non-zero reserved, a len too
 *   large, a frame for a channel that is not open, DATA beyond credit, ...)
 *   ends the link: the receiver drops the transport and reconnects.  It never
 *   ends a process.
 *
 *   CTRL   (1) channel 0. Payload: one JSON object (UTF-8), see CONTROL.
 *              flags GLINK_F_BODY: the message has a raw byte body which
 *              follows in BODY frames.
 *   BODY   (2) channel 0. Raw body bytes for the last CTRL that had
 *              GLINK_F_BODY; flags GLINK_F_END on the last one (which may be
 *              empty).  Between that CTRL and the END frame no other CTRL
 *              may be sent by the same side (other channels may interleave).
 *              A body is at most GLINK_MAX_BODY bytes.  This is how file
 *              contents (128 KiB > one frame), exec stdin and job output
 *              travel: raw, never base64.
 *   OPEN   (3) host -> guest, channel >= 1 not in use.  Payload: u32 port
 *              (1..65535).  guestd connects to 127.0.0.1:<port> in the guest.
 *   OPEN_OK   (4) guest -> host, empty.  The stream is connected.
 *   OPEN_FAIL (5) guest -> host.  Payload: UTF-8 reason (<= 256 bytes,
 *              e.g. "connect 127.0.0.1:5000: Connection refused").  The
 *              channel is released on both sides at once (no CLOSE).
 *   DATA   (6) either way on an open channel, 1..64 KiB of stream bytes.
 *              Costs the sender len bytes of credit.
 *   EOF    (7) half-close: the sender writes nothing more on this channel
 *              (guestd then shutdown(SHUT_WR)s the TCP socket; a guest
 *              program's shutdown(SHUT_WR) becomes EOF to the host).
 *   CLOSE  (8) the sender has released the channel (abort or both sides
 *              done).  The receiver answers CLOSE unless it already sent one;
 *              frames crossing a CLOSE are ignored.  The id may be reused
 *              once each side has both sent and received CLOSE.
 *   WINDOW (9) Payload: u32 credit increment (>= 1).  The receiver of data
 *              grants more credit as it consumes bytes.
 *   ACCEPT (10) guest -> host, empty: a connection made inside the guest
 *              (the job broker pipe, guestd/guestd_broker.c).  Its channel id has
 *              GLINK_GUEST_CHAN set, so the two sides never pick the same
 *              id; at most GLINK_MAX_ACCEPTED such channels are open at
 *              once.  The channel is open at once, with the initial credit
 *              both ways and no OPEN_OK; the host refuses it with CLOSE.
 *              Its first bytes are the broker preamble (BROKER_PREAMBLE_MAX
 *              bytes at most): "<job_id> <64 hex route secret>\n".
 *   Every channel starts with GLINK_INITIAL_WINDOW credit in each direction
 *   (from OPEN_OK on); total credit may never exceed GLINK_MAX_WINDOW.
 *   Because a sender can never have more than its credit in flight, a bulk
 *   stream never fills the link ahead of control frames, and both ends queue
 *   CTRL/BODY frames ahead of stream data.
 *
 * CONTROL (channel 0)
 *   Request  host -> guest: {"id": <1..2^32-1>, "op": "<op>", args...}
 *   Reply    guest -> host: {"id": <same>, "ok": true, results...}
 *                        or {"id": <same>, "ok": false,
 *                            "error": {"code": "<code>", "message": "..."}}
 *   Event    guest -> host: {"event": "hello", "version": 1,
 *                            "boot_id": "<uuid>", "jobs": <n kept>}
 *            boot_id changes only when the guest boots again, so the host
 *            tells a reconnect or a restored snapshot from a reboot.
 *   Replies come in request order.  Messages are parsed with a depth limit
 *   (GLINK_JSON_DEPTH) and every field is type-checked; unknown fields are
 *   ignored.  Error codes: invalid_argument, not_found, already_exists,
 *   limit_exceeded, too_large, forbidden_path, frozen, io_error, internal.
 *   A request whose envelope is unusable (not a JSON object, no integer
 *   "id" or string "op") ends the link like any other broken rule; a bad
 *   argument gets an invalid_argument reply.
 *
 *   hello       {} -> {"version", "boot_id", "jobs"} as in the event.
 *               Starts a new host session on a transport guestd may not
 *               have seen drop (a snapshot restored while connected): the
 *               guest forgets every channel, closing its streams without
 *               CLOSE frames.  Until the reply, the host drops frames for
 *               channels it does not know (glink_set_lenient).
 *   ping        {} -> {}
 *   clock_set   {"realtime_ns": int} -> {}   sets CLOCK_REALTIME
 *   exec        {"job_id": str [A-Za-z0-9_-]{1,64}, "command": str,
 *                "cwd"?: str (relative to /workspace, default ""),
 *                "env"?: {NAME: str, ...} (at most 128),
 *                "timeout_ms"?: int (0 or absent: none),
 *                "broker_secret"?: str (64 lowercase hex: give this job a
 *                broker pipe whose relay writes it in each preamble)}
 *               + optional body: stdin bytes (else stdin is /dev/null)
 *               -> job status (below), plus "broker_pipe": true when the
 *               job's broker listener is up.  The host picks job_id, so an exec
 *               whose reply was lost can be looked up after a reconnect.
 *               At most GUEST_MAX_RUNNING running and GUEST_MAX_JOBS kept
 *               (limit_exceeded); a bad cwd gives state "failed" + "error";
 *               refused with "frozen" between freeze and thaw.  A job is
 *               completed when bash exits; descendants may still write, so
 *               read output until the cursors stop advancing and
 *               streams_open is false.
 *   job_status  {"job_id"?: str} -> job status, or without job_id
 *               {"jobs": [{"job_id", "state"}, ...]} for every kept job
 *   job status  {"job_id", "state": "running"|"completed"|"failed"|
 *                "cancelled"|"timed_out", "exit_code"?: int (completed),
 *                "signal"?: int (completed by a signal), "error"?: str
 *                (failed), "truncated": bool, "timed_out": bool,
 *                "stdout_bytes": int, "stderr_bytes": int (retained),
 *                "streams_open": bool (a pipe still has a writer),
 *                "run_ms": int (running time, suspension excluded)}
 *   job_output  {"job_id", "stdout_cursor"?: int, "stderr_cursor"?: int,
 *                "max_bytes"?: int 1..16384 (per stream, default 16384)}
 *               -> job status + {"stdout_len": n, "stderr_len": m,
 *                "stdout_next": int, "stderr_next": int}, body = n stdout
 *               bytes then m stderr bytes (always sent, maybe empty).
 *               Cursors are byte offsets in the retained prefix of each
 *               stream; reads are non-destructive and repeatable.
 *   job_cancel  {"job_id"} -> job status.  Kills the job's cgroup
 *               (cgroup.kill), detached descendants included; a running
 *               job's state becomes cancelled, a finished one keeps its.
 *   file_read   {"path": str} -> {"size": n, "mode": int}, body = contents
 *               (<= GUEST_MAX_FILE, else too_large; not_found; a directory
 *               or device is invalid_argument).
 *   file_write  {"path": str, "mode"?: int 0..0777 (default: the
 *                existing file's mode, else 0644),
 *                "create_parents"?: bool} + body (<= GUEST_MAX_FILE)
 *               -> {"size": n}.  Atomic (temp file + rename), uid/gid 1000.
 *               Paths are relative to /workspace, resolved with openat2
 *               RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS: ".." components,
 *               absolute paths and symlinks are refused (forbidden_path).
 *   freeze      {"filesystems"?: bool, "thaw_after_ms"?: int
 *                GUEST_THAW_AFTER_MS_MIN..MAX (default _DEFAULT)}
 *               -> {"frozen": bool, "filesystems"?: n}  freezes every job
 *               cgroup and stops timeout accounting.  With filesystems
 *               (vmmd asks it before a disk-only snapshot) guestd then
 *               syncs and freezes (FIFREEZE) every read-write file system
 *               on a block device and answers how many; one that cannot be
 *               frozen is io_error naming it, with none left frozen.  Until
 *               the thaw, file_write, identity and exec are refused as
 *               "frozen"; if no thaw comes within thaw_after_ms of the
 *               guest's running time, guestd thaws the file systems and
 *               the jobs by itself and logs it.
 *   thaw        {"realtime_ns"?: int} -> {}  thaws the file systems, sets
 *               CLOCK_REALTIME, restarts timeout accounting, then thaws
 *               the jobs.
 *   activity    {} -> {"active": bool, "jobs_running": n, "streams": n}
 *               active: some job cgroup still holds a process (detached
 *               descendants count, guest daemons do not).
 *   shutdown    {} -> {} then guestd syncs and powers off.
 *   identity    {"machine_id": 32 lowercase hex (not all zeros),
 *                "boot_id": UUID, 36 chars, lowercase 8-4-4-4-12,
 *                "hostname": [a-z0-9-]{1,63}, no '-' first or last,
 *                "entropy_b64": canonical padded base64 of exactly
 *                GUEST_ENTROPY_BYTES bytes,
 *                "net"?: the clone's own network slot, sent only to a
 *                clone of a VM with network: {"mac": 6 lowercase hex pairs
 *                joined by ':', unicast, not all zero; "address": a dotted
 *                quad (inet_pton's form, at most GUEST_IPV4_MAX chars),
 *                not in 0/8, 127/8 or 224/3, neither first nor last of
 *                its subnet; "prefix": GUEST_NET_MIN_PREFIX to
 *                GUEST_NET_MAX_PREFIX; "gateway": another host of that
 *                subnet, in the same form; "dns": an array of at most
 *                GUEST_NET_MAX_DNS dotted quads, in the same form}, no
 *                other member (glink_net_decode checks it, both ends)}
 *               -> {"boot_id": the new one}.  Makes a VM restored from a
 *               memory snapshot a machine of its own, in this order:
 *               "entropy": the bytes are written to /dev/urandom, credited
 *               with RNDADDENTROPY and the CRNG reseeded (RNDRESEEDCRNG),
 *               so no two clones draw the same random bytes from then on;
 *               "machine_id": /etc/machine-id (temp file + rename, 0444);
 *               "hostname": sethostname() and /etc/hostname;
 *               "net": eth0 down (its routes and neighbours go), its MAC
 *               set (SIOCSIFHWADDR), its address and mask replaced, every
 *               ARP entry left on eth0 deleted (one that remains is the
 *               step's error), eth0 up with the default route via the
 *               gateway, /etc/resolv.conf rewritten (when dns is not
 *               empty);
 *               "boot_id": a file under /run bind-mounted (read-only) over
 *               /proc/sys/kernel/random/boot_id, replacing an earlier
 *               overlay, and hello says this boot id from then on.
 *               A step that fails is an io_error naming it ("hostname:
 *               sethostname: ..."); the steps before it stay done, and
 *               the op may be sent again (it is idempotent).  Only guestd
 *               as PID 1 of the VM's own kernel applies it; otherwise
 *               invalid_argument.
 */
#ifndef MCPVM_PROTO_GUEST_H
#define MCPVM_PROTO_GUEST_H

#include <stdint.h>

#define GLINK_VERSION		1

#define GLINK_HDR_LEN		12
#define GLINK_MAX_PAYLOAD	65536u
#define GLINK_MAX_BODY		(256u * 1024)
#define GLINK_INITIAL_WINDOW	(256u * 1024)
#define GLINK_MAX_WINDOW	(16u * 1024 * 1024)
#define GLINK_MAX_CHANNELS	256	/* opened by the host */
#define GLINK_MAX_ACCEPTED	128	/* opened by the guest (ACCEPT) */
#define GLINK_GUEST_CHAN	0x80000000u
#define GLINK_JSON_DEPTH	8
#define GLINK_OPEN_FAIL_MAX	256

enum glink_type {
	GLINK_CTRL = 1,
	GLINK_BODY = 2,
	GLINK_OPEN = 3,
	GLINK_OPEN_OK = 4,
	GLINK_OPEN_FAIL = 5,
	GLINK_DATA = 6,
	GLINK_EOF = 7,
	GLINK_CLOSE = 8,
	GLINK_WINDOW = 9,
	GLINK_ACCEPT = 10,
};

#define GLINK_F_BODY		0x01	/* CTRL: BODY frames follow */
#define GLINK_F_END		0x01	/* BODY: the last frame */

/* guestd limits the host relies on. */
#define GUEST_MAX_RUNNING	4
#define GUEST_MAX_JOBS		256
#define GUEST_OUTPUT_MAX	(256u * 1024)	/* kept, both streams */
#define GUEST_OUTPUT_READ_MAX	16384u	/* per stream per call */
#define GUEST_MAX_FILE		(128u * 1024)
#define GUEST_THAW_AFTER_MS_MIN		1000
#define GUEST_THAW_AFTER_MS_MAX		600000
#define GUEST_THAW_AFTER_MS_DEFAULT	60000
#define GUEST_JOB_ID_MAX	64
#define GUEST_MAX_ENV		128
#define GUEST_VSOCK_PORT	1024
#define GUEST_VIRTIO_PORT	"org.mcpvm.link.0"
#define GUEST_UID		1000
#define GUEST_GID		1000

/* The identity op's values. */
#define GUEST_MACHINE_ID_LEN	32
#define GUEST_UUID_LEN		36
#define GUEST_HOSTNAME_MAX	63
#define GUEST_ENTROPY_BYTES	64
#define GUEST_ENTROPY_B64_LEN	88	/* base64 of GUEST_ENTROPY_BYTES */
#define GUEST_MAC_LEN		17	/* "02:6d:76:00:00:05" */
#define GUEST_IPV4_MAX		15	/* "255.255.255.255" */
#define GUEST_NET_MIN_PREFIX	8
#define GUEST_NET_MAX_PREFIX	30
#define GUEST_NET_MAX_DNS	3

/* The job broker pipe (guestd/broker.c, vmproxy/vmproxy_broker.c). */
#define BROKER_SOCKET_DIR	"/run/mcpvm-broker"
#define BROKER_SOCKET_PATH	"/run/mcpvm-broker/broker.sock"
#define BROKER_SOCKET_ENV	"MCPVM_BROKER_SOCKET"
#define BROKER_RELAY_UID	65534
#define BROKER_SECRET_HEX	64
#define BROKER_PREAMBLE_MAX	(GUEST_JOB_ID_MAX + 1 + BROKER_SECRET_HEX + 1)
/* Per job, in the guest; guestd closes one more unread (end-of-file). */
#define BROKER_MAX_GUEST_CONNS	32

#endif
