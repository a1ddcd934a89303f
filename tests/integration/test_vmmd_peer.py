#!/usr/bin/env python3
# A compromised mcpd against the real vmmd (#14, the hostile-peer harness):
# vmmd's limits per peer (max_peer_connections, max_peer_requests), per
# workspace and for the host (max_requests_per_workspace, max_requests),
# exact checks of stream_open's and vmctl's arguments, the answers to mcpd's
# stats, stream and broker pipe opens, a peer of the wrong uid,
# and then a long seeded loop of valid-looking and malformed frames on
# vmmd.sock.  Throughout, vmmd must stay up and keep answering another
# workspace; afterwards it holds no more descriptors than before, its
# memory has not grown past a bound, and the VM it runs still works.
#
# MCPVM_PEER_SEED picks the loop's seed (printed either way), and
# MCPVM_PEER_ROUNDS its length (default 3000).
# Environment: as vmmdlib.py.  TAP on stdout.  Needs root.
import array
import base64
import json
import os
import random
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmmdlib as base  # noqa: E402
import vmmd_ipc as ipc  # noqa: E402
from vmmdlib import ok, note, read  # noqa: E402
from vmmdlib import vmmd_fds, vmmd_paths, vmmd_rss_kib  # noqa: E402

MEM = base.MEM
MAX_CONNS = 8
MAX_REQS = 16
# A workspace may have as many requests as one connection; the host more
# than one workspace's.
MAX_WS_REQS = MAX_REQS
MAX_HOST_REQS = 40
VMCTL_LIST = 401
VMCTL_SUSPEND = 404
VM_STATS_RESULT = 309
# Not vm_create nor vm_destroy: the loop keeps the one VM it aims at
# (random arguments can be valid ones).
TOOLS = ["vm_list", "vm_status", "vm_exec", "vm_job_status",
         "vm_job_output", "vm_job_cancel", "vm_read_file", "vm_write_file",
         "vm_suspend", "vm_resume", "no_such_tool", "",
         "vm_exec\u0000junk"]


def sock_path(h, name="vmmd.sock"):
    return os.path.join(h.run, name)


def hello_refused(path, timeout=5):
    """True when a connection gets no HELLO back: closed or refused."""
    try:
        c = ipc.Conn(path, "mcpd", timeout=timeout)
    except (OSError, EOFError, RuntimeError):
        return True
    c.close()
    return False


def check_connections(h, a):
    held = [ipc.Conn(sock_path(h), "mcpd") for _ in range(MAX_CONNS)]
    ok(hello_refused(sock_path(h)), "max_peer_connections: connection %d "
       "is closed at once" % (MAX_CONNS + 1))
    ok("max_peer_connections (%d) reached" % MAX_CONNS in read(h.vmmd_log),
       "and vmmd's log names the limit")
    for c in held:
        c.close()
    time.sleep(0.3)
    okk, r = base.Client(h, a.tok)("vm_list")
    ok(okk, "after they close, a new connection is served", r)


def check_wrong_uid(h):
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            os._exit(0 if hello_refused(sock_path(h)) else 1)
        except BaseException:
            os._exit(2)
    _, st = os.waitpid(pid, 0)
    ok(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "a peer of another "
       "uid than mcpd's gets no HELLO on vmmd.sock", st)


def check_arguments(h, a, vm):
    c = base.Client(h, a.tok)

    def stream(body):
        body = dict(body, credential=a.tok)
        t, r, fd = c.c.call(ipc.VM_STREAM_OPEN, body)
        if fd is not None:
            os.close(fd)
        return r.get("error", {}).get("code") if t == ipc.ERROR else "ok"
    ok(stream({"vm_id": vm, "port": 2 ** 32 + 8080}) == "invalid_argument",
       "stream_open: a port past 32 bits is invalid, not cut to 8080")
    ok(stream({"vm_id": vm, "port": "8080"}) == "invalid_argument",
       "stream_open: a port as a string is invalid")
    ok(stream({"vm_id": vm, "port": 8080, "workspace": "beta"}) ==
       "invalid_argument", "stream_open: an extra member is invalid")
    ok(stream({"vm_id": vm}) == "invalid_argument",
       "stream_open: no port is invalid")
    v = ipc.Conn(sock_path(h, "vmctl.sock"), "vmctl")
    t, r, _ = v.call(VMCTL_SUSPEND, {"vm_id": vm, "mode": 5})
    ok(t == ipc.ERROR and r["error"]["code"] == "invalid_argument",
       "vmctl suspend with a mode that is no string is refused", r)
    t, r, _ = v.call(VMCTL_SUSPEND, {"vm_id": vm, "mode": "nap"})
    ok(t == ipc.ERROR and r["error"]["code"] == "invalid_argument",
       "vmctl suspend with an unknown mode is refused", r)
    v.close()
    ok(c.state(vm) == "running", "and the VM was not suspended")
    c.c.close()


def check_messages(h, a, b, vm):
    """mcpd's requests beside tool calls, each with a handler of its own:
    the stats need no credential, the opens are verified with authd."""
    c = ipc.Conn(sock_path(h), "mcpd")
    t, r, _ = c.call(ipc.VM_STATS, {})
    vms = r.get("vms", {})
    ok(t == VM_STATS_RESULT and vms.get("running", 0) >= 1 and
       "gone" not in vms and r.get("open_streams") == 0,
       "stats: VMs by state and open streams, with no credential", r)

    def code(t, r, fd):
        if fd is not None:
            os.close(fd)
        return r.get("error", {}).get("code") if t == ipc.ERROR else t
    ok(code(*c.call(ipc.VM_STREAM_OPEN, {"credential": "mcpvm_bad",
                                         "vm_id": vm, "port": 8080})) ==
       "unauthorized", "stream_open: a bad credential is unauthorized")
    t, r, fd = c.call(ipc.VM_STREAM_OPEN, {"credential": b.tok,
                                           "vm_id": vm, "port": 8080})
    ok(code(t, r, fd) == "not_found" and "in this workspace" in
       r["error"]["message"], "stream_open: another workspace's VM is "
       "not_found, as for a tool", r)
    ok(code(*c.call(ipc.VM_STREAM_OPEN, {"credential": a.tok,
                                         "vm_id": vm, "port": 22})) ==
       "forbidden", "stream_open: a port outside stream_ports is forbidden")
    ok(code(*c.call(ipc.VM_BROKER_OPEN, {
        "credential": a.tok, "vm_id": vm, "job_id": "jnone",
        "pipe_token": "A" * 43})) == "not_found",
       "broker_open: a job with no pipe is not_found")
    t, r, _ = c.call(ipc.VM_STATS, {})
    ok(t == VM_STATS_RESULT, "the connection still serves the stats", r)
    c.send(ipc.VM_STATS, {"x": 1})
    try:
        c.recv()
        closed = False
    except (OSError, EOFError):
        closed = True
    ok(closed and "stats takes no members" in read(h.vmmd_log),
       "stats with a member is malformed: the connection is closed, "
       "and the log says why")
    c.close()


LISTENER = r"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080))
s.listen(32)
open("/workspace/listening", "w").close()
held = []
while True:
    held.append(s.accept()[0])
"""


def check_stream_burst(h, a, vm):
    """Ten stream opens at once on the tenant's own paused VM: the VM's
    limit (max_streams_per_vm, 4) open, the rest are refused naming it,
    and the VM runs on.  (Each open used to pass its check before the
    wait for the VM; vmproxy then opened five, and vmmd failed the VM for
    reporting more than the limit.)"""
    a.reconnect()
    okk, r = a("vm_write_file", vm_id=vm, path="listener.py",
               data_base64=base64.b64encode(LISTENER.encode()).decode())
    ok(okk, "the listener is written", r)
    st, _, out, err = a.sh(vm, "rm -f /workspace/listening; nohup python3 "
                           "/workspace/listener.py >/dev/null 2>&1 & "
                           "for i in $(seq 100); do [ -e /workspace/"
                           "listening ] && break; sleep 0.1; done; "
                           "ls /workspace/listening", "burst-listen")
    ok(st == "completed", "a guest listener on port 8080", (st, out, err))
    okk, r = a("vm_suspend", vm_id=vm, mode="pause", force=True)
    ok(okk and r["state"] == "paused", "the VM is paused", r)
    mark = len(read(h.vmmd_log))
    c = ipc.Conn(sock_path(h), "mcpd")
    ids = [c.send(ipc.VM_STREAM_OPEN, {"credential": a.tok, "vm_id": vm,
                                       "port": 8080}) for _ in range(10)]
    opened, refused, other = [], [], []
    for _ in ids:
        t, rid, body, fd = c.recv()
        if fd is not None:
            opened.append(fd)
        elif t == ipc.ERROR and body["error"]["code"] == "quota_exceeded" \
                and "max_streams_per_vm" in body["error"]["message"]:
            refused.append(rid)
        else:
            other.append((t, body))
    ok(len(opened) == 4 and len(refused) == 6 and not other,
       "10 opens at once on a paused VM: 4 open, 6 refused naming "
       "max_streams_per_vm", (len(opened), len(refused), other))
    ok(a.state(vm) == "running" and "malformed" not in
       read(h.vmmd_log)[mark:], "the VM was resumed and runs on; vmproxy "
       "reported no more streams than the limit", a.state(vm))
    for fd in opened:
        os.close(fd)
    c.close()
    # The listener holds what it accepted: its exit closes the guest ends.
    a.sh(vm, "pkill -f listener.py; true", "burst-stop")

    def closed():
        s = ipc.Conn(sock_path(h), "mcpd")
        t, r, _ = s.call(ipc.VM_STATS, {})
        s.close()
        return r.get("open_streams") == 0
    base.wait_for(closed, 20, "the streams to close")
    # As the other checks leave it: the descriptor count below is taken
    # with no client connection open.
    a.c.close()


def busy_now(c, body):
    """One request on c; the error code and message of its answer."""
    t, r, _ = c.call(ipc.VM_TOOL, body)
    e = r.get("error", {}) if t == ipc.ERROR else {}
    return e.get("code"), e.get("message", "")


def check_workspace_requests(h, a, b, fresh):
    """With a's MAX_WS_REQS requests parked on its stopped VM: a's next
    one is busy whatever connection it comes on, b's is answered; then
    the host's total fills, with b's requests held at a stopped authd,
    and only then is b refused."""
    c = ipc.Conn(sock_path(h), "mcpd")
    code, msg = busy_now(c, {"credential": a.tok, "tool": "vm_list",
                             "arguments": {}})
    ok(code == "busy" and msg.startswith("max_requests_per_workspace "
                                         "(%d):" % MAX_WS_REQS),
       "max_requests_per_workspace: a's next request on another "
       "connection is busy, naming the limit and its value", (code, msg))
    t, r, _ = c.call(ipc.VM_TOOL, {"credential": b.tok, "tool": "vm_list",
                                   "arguments": {}})
    ok(t == ipc.VM_TOOL_RESULT, "while a is at its limit, b is answered on "
       "the same connection", r)
    # b's requests wait at authd, counted against the host alone.
    room = MAX_HOST_REQS - MAX_WS_REQS
    held = [ipc.Conn(sock_path(h), "mcpd") for _ in range(2)]
    os.kill(h.authd.pid, signal.SIGSTOP)
    try:
        for i in range(room):
            held[i % 2].send(ipc.VM_TOOL, {"credential": fresh,
                                           "tool": "vm_list",
                                           "arguments": {}})
        code, msg = busy_now(c, {"credential": b.tok, "tool": "vm_list",
                                 "arguments": {}})
        ok(code == "busy" and msg.startswith("max_requests (%d):" %
                                             MAX_HOST_REQS),
           "max_requests: with the host's %d requests unanswered, the next "
           "is busy, naming the limit and its value" % MAX_HOST_REQS,
           (code, msg))
        v = ipc.Conn(sock_path(h, "vmctl.sock"), "vmctl")
        t, r, _ = v.call(VMCTL_LIST, {})
        ok(t == ipc.VMCTL_RESULT, "and vmctl is still answered", r)
        v.close()
    finally:
        os.kill(h.authd.pid, signal.SIGCONT)
    # The held ones are answered once authd is back (or time out there).
    answered = 0
    for conn in held:
        conn.sock.settimeout(30)
        try:
            for _ in range(room // 2):
                conn.recv()
                answered += 1
        except (OSError, EOFError):
            pass
        conn.close()
    ok(answered == room, "the %d requests held at authd are answered" %
       room, answered)
    t, r, _ = c.call(ipc.VM_TOOL, {"credential": b.tok, "tool": "vm_list",
                                   "arguments": {}})
    ok(t == ipc.VM_TOOL_RESULT, "then b is answered again", r)
    c.close()


def check_requests(h, a, b, vm):
    """MAX_REQS + 8 guest calls on one connection to a guest that does not
    answer (its QEMU is stopped): the ones past the limit are busy."""
    fresh = h.issue("beta")     # never used: vmmd asks authd about it
    uid = base.vm_uid(h, vm)
    qemu = [p for p, u, cmd in h.jail_processes() if u == uid and
            "qemu" in cmd]
    if not ok(qemu != [], "requests: the VM's QEMU is found"):
        return
    os.kill(qemu[0], signal.SIGSTOP)
    c = ipc.Conn(sock_path(h), "mcpd")
    try:
        ids = [c.send(ipc.VM_TOOL, {"credential": a.tok,
                                    "tool": "vm_read_file",
                                    "arguments": {"vm_id": vm,
                                                  "path": "f%d" % i}})
               for i in range(MAX_REQS + 8)]
        busy = []
        c.sock.settimeout(10)
        try:
            while len(busy) < 8:
                t, rid, body, _ = c.recv()
                if t == ipc.ERROR and body["error"]["code"] == "busy":
                    busy.append((rid, body["error"]["message"]))
        except socket.timeout:
            pass
        ok(len(busy) == 8 and sorted(r for r, _ in busy) == ids[MAX_REQS:] and
           all("max_peer_requests" in m for _, m in busy),
           "max_peer_requests: the %d requests past %d are busy at once, "
           "naming the limit" % (8, MAX_REQS), busy)
        check_workspace_requests(h, a, b, fresh)
    finally:
        os.kill(qemu[0], signal.SIGCONT)
    c.close()


# ---- the seeded loop ----------------------------------------------------

def rand_value(rng, depth=0):
    k = rng.randrange(9 if depth < 3 else 6)
    if k == 0:
        return None
    if k == 1:
        return rng.choice([True, False])
    if k == 2:
        return rng.choice([0, -1, 1, 2 ** 31, 2 ** 63 - 1, -2 ** 63, 65536,
                           rng.randrange(-1000, 1000)])
    if k == 3:
        return rng.choice([0.5, 1e300, -0.0])
    if k == 4:
        return rng.choice(["", "a" * rng.randrange(300), "../../etc/passwd",
                           "\u0000", "\udcff".encode("utf-8",
                                                     "surrogatepass").decode(
                               "latin-1"), "é" * 10])
    if k == 5:
        return "x%d" % rng.randrange(100)
    if k == 6:
        return [rand_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["vm_id", "path", "command", "request_id", "port",
                        "mode", "force", "cursor", "x"]):
            rand_value(rng, depth + 1) for _ in range(rng.randrange(5))}


def rand_frame(rng, tok, vm):
    """(header and payload bytes, descriptors to attach)."""
    kind = rng.randrange(8)
    fds = []
    if kind <= 3:
        args = rand_value(rng)
        if not isinstance(args, dict):
            args = {}
        if rng.random() < 0.5:
            args["vm_id"] = vm
        body = {"credential": rng.choice([tok, tok, "", "bad", 5]),
                "tool": rng.choice(TOOLS), "arguments": args}
        if rng.random() < 0.2:
            body["arguments"] = rand_value(rng)
        payload = json.dumps(body).encode()
        if rng.random() < 0.2:
            body.update(job_id=rng.choice(["j0", 5, "", "x" * 300]),
                        pipe_token=rng.choice(["A" * 43, "short", 7,
                                               "A" * 129]))
        typ = rng.choice([ipc.VM_TOOL, ipc.VM_TOOL, ipc.VM_STREAM_OPEN,
                          ipc.VM_STATS, 304, ipc.VM_BROKER_OPEN])
    elif kind == 4:
        payload = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
        typ = rng.randrange(1000)
    elif kind == 5:
        payload = json.dumps(rand_value(rng)).encode()
        typ = rng.choice([ipc.VM_TOOL, 1, 2, 302, 401, 601])
    elif kind == 6:
        # A length past the 1 MiB bound, with nothing behind it.
        return struct.pack("=IIII", ipc.VM_TOOL, (1 << 20) + 1 +
                           rng.randrange(1 << 20), 1, 0), [], True
    else:
        payload = b'{"credential":"x","tool":"vm_list","arguments":{}}'
        typ = ipc.VM_TOOL
        fds = [os.open("/dev/null", os.O_RDONLY)
               for _ in range(rng.randrange(1, 4))]
    flags = ipc.FLAG_FD if fds else 0
    if rng.random() < 0.05:
        flags |= rng.choice([ipc.FLAG_REPLY, 0x80000000])
    hdr = struct.pack("=IIII", typ, len(payload), rng.randrange(1, 1 << 32),
                      flags)
    return hdr + payload, fds, False


def seeded_loop(h, a, b, vm, seed, rounds):
    rng = random.Random(seed)
    c = None
    closed = sent = 0
    worst = 0.0
    probe = base.Client(h, b.tok)
    for i in range(rounds):
        if c is None:
            try:
                c = ipc.Conn(sock_path(h), "mcpd", timeout=10)
            except (OSError, EOFError, RuntimeError):
                time.sleep(0.05)
                continue
        data, fds, cut = rand_frame(rng, a.tok, vm)
        try:
            anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                    array.array("i", fds))] if fds else []
            if cut:
                data = data[:rng.randrange(1, len(data) + 1)]
            c.sock.sendmsg([data], anc)
            sent += 1
        except OSError:
            c.close()
            c = None
            closed += 1
        for fd in fds:
            os.close(fd)
        if c is not None and (cut or rng.random() < 0.02):
            c.close()
            c = None
            closed += 1
        if i % 250 == 0:
            t = time.monotonic()
            okk, r = probe("vm_list")
            worst = max(worst, time.monotonic() - t)
            if not okk or h.vmmd.poll() is not None:
                ok(False, "seed %d: vmmd stopped answering at round %d" %
                   (seed, i), r)
                return
    if c is not None:
        c.close()
    ok(h.vmmd.poll() is None, "seed %d: vmmd is up after %d frames (%d "
       "connections closed)" % (seed, sent, closed),
       read(h.vmmd_log)[-2000:])
    okk, r = probe("vm_list")
    ok(okk, "seed %d: another workspace was answered throughout (slowest "
       "%.0f ms)" % (seed, worst * 1000), r)
    note("slowest answer to the other workspace during the loop: %.1f ms" %
         (worst * 1000))
    probe.c.close()


def suite(h, seed, rounds):
    # authd answers bad credentials at once: the loop's would otherwise
    # wait there, and fill the host's total of requests.
    h.write_conf(authd={"fail_rate": 1000000, "fail_burst": 1000000},
                 max_peer_connections=MAX_CONNS,
                 max_peer_requests=MAX_REQS,
                 max_requests_per_workspace=MAX_WS_REQS,
                 max_requests=MAX_HOST_REQS)
    h.start_authd()
    h.start_vmmd()
    a = base.Client(h, h.issue("alpha"))
    b = base.Client(h, h.issue("beta"))
    okk, r = a("vm_create", request_id="p-1", memory_mib=MEM,
               idle_seconds=0)
    if not ok(okk and r["state"] == "running", "a running VM", r):
        raise RuntimeError("no VM")
    vm = r["vm_id"]
    a.c.close()
    b.c.close()
    time.sleep(0.3)
    fds, rss = vmmd_fds(h), vmmd_rss_kib(h)
    fd_names = vmmd_paths(h)
    check_connections(h, a)
    check_wrong_uid(h)
    check_arguments(h, a, vm)
    check_messages(h, a, b, vm)
    check_stream_burst(h, a, vm)
    check_requests(h, a, b, vm)
    seeded_loop(h, a, b, vm, seed, rounds)
    now = vmmd_fds(h, fds)
    ok(now <= fds, "vmmd holds no more descriptors than before (%d, "
       "was %d)" % (now, fds), sorted(set(vmmd_paths(h)) - set(fd_names)))
    grown, bound = vmmd_rss_kib(h) - rss, base.rss_bound_kib(32 * 1024)
    ok(grown < bound, "vmmd's resident memory grew by %d KiB (bound %d "
       "KiB)" % (grown, bound))
    a.reconnect()
    st, _, out, _ = a.sh(vm, "echo still", "p-x")
    ok(out == "still\n", "the VM still runs commands", (st, out))
    okk, r = a("vm_destroy", vm_id=vm)
    ok(okk, "and is destroyed", r)
    rc, secs = h.stop_vmmd()
    ok(rc == 0, "vmmd exits 0 (%.1f s)" % secs, rc)


def main():
    seed = int(os.environ.get("MCPVM_PEER_SEED", "0") or 0) or \
        random.randrange(1, 1 << 31)
    rounds = int(os.environ.get("MCPVM_PEER_ROUNDS", "3000"))
    note("seed %d, %d rounds (MCPVM_PEER_SEED=%d repeats it)" % (
        seed, rounds, seed))
    base.run_suite("vmmd-peer", lambda h: suite(h, seed, rounds))


if __name__ == "__main__":
    main()
