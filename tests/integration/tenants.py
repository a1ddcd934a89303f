"""Two workspaces on one host, through mcpd (#25's harness): workspace B
runs a steady load of vm_list and vm_exec with wait_seconds on its own
VM, over JSON HTTP (POST /v1/tools/{name}) on keep-alive connections,
first alone and then while workspace A runs each attack in turn:

  readfile  vm_read_file calls (300 in the full run) against A's VM while
            nothing in it answers, each client connection dropped after
            0.2 s, mid-call.  The guest's tenant cannot stop guestd: its
            commands run as uid 1000, and a PID 1 ignores SIGSTOP sent
            from inside its namespace.  So, as the vmmd-hostile suite
            does, the harness stops the VM's QEMU (SIGSTOP from the host):
            vmproxy then sees what a stopped guestd gives it, a guest link
            that stays open and silent.
  linkdown  a fake vmproxy (fake_vmproxy.py, mode linkdown) for a VM A
            creates through mcpd: it reports the guest's link down and
            then answers nothing.  vmmd runs it because the stack's
            configured vmproxy is a wrapper that picks the fake while a
            mode file exists (Host.fake_vmproxy_switch); A's calls to that
            VM, each dropped after 0.2 s, then go through mcpd as a user's.
  streams   bursts of 10 WebSocket stream opens at once, through mcpd, to
            a listener in A's VM paused with force (each burst wakes it),
            closed and paused again while the attack lasts.
  listens   256 stateless (MCP 2026-07-28) subscriptions/listen streams
            on A's one credential, held while the attack lasts.
  fork      100,000 finished job rows written into A's VM's history (in
            vmmd's store, as test_vmmd_snapshot does: making them through
            vm_exec would take hours), then vm_fork of that VM.

B must get no error.  Its p99 per tool, alone and under each attack, is
printed side by side; it is never compared with a bound here (timing
figures are printed, not asserted).  The e2e suite runs this in its short
form; tests/bench/two_workspaces.py in its full form.
"""
import base64
import http.client
import json
import os
import signal
import socket
import threading
import time

import vmmdlib as base

MEM = 512
EXEC_PERIOD = 0.5       # B starts a vm_exec every 0.5 s: a guest keeps
                        # 256 jobs in its lifetime, the full run stays below
LIST_PAUSE = 0.02
DROP_AFTER = 0.2        # seconds an attacking client waits before it goes
HOLD_PORT = 7002
SL = "2026-07-28"
SL_META = {"io.modelcontextprotocol/protocolVersion": SL,
           "io.modelcontextprotocol/clientCapabilities": {}}

# What each attack does, full and short (CI) form.
FULL = {"seconds": 20, "alone": 20, "readfile": 300, "listens": 256,
        "rows": 100000, "burst": 10}
SHORT = {"seconds": 3, "alone": 4, "readfile": 60, "listens": 256,
         "rows": 100000, "burst": 10}


class Api:
    """Tool calls over JSON HTTP on one keep-alive connection."""

    def __init__(self, port, tok, timeout=300):
        self.port, self.tok, self.timeout = port, tok, timeout
        self.conn = None

    def __call__(self, name, **args):
        """(HTTP status, decoded body)."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                                   timeout=self.timeout)
        body = json.dumps(args)
        try:
            self.conn.request("POST", "/v1/tools/" + name, body=body,
                              headers={"Authorization": "Bearer " +
                                       self.tok,
                                       "Content-Type": "application/json"})
            r = self.conn.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        if r.getheader("Connection", "").lower() == "close":
            self.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, {"raw": data[:200].decode(errors="replace")}

    def ok(self, name, **args):
        st, r = self(name, **args)
        if st != 200:
            raise RuntimeError("%s: %d %r" % (name, st, r))
        return r

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


_rid = [0]
_rid_lock = threading.Lock()


def request_id(what):
    with _rid_lock:
        _rid[0] += 1
        return "tw-%s-%d-%d" % (what, os.getpid(), _rid[0])


class Load(threading.Thread):
    """Workspace B's steady load: one client lists its VMs back to back,
    another runs `echo b` with wait_seconds every EXEC_PERIOD.  Keeps
    each answer's latency per tool, and every error."""

    def __init__(self, port, tok, vm):
        super().__init__(daemon=True)
        self.port, self.tok, self.vm = port, tok, vm
        self.stop_ev = threading.Event()
        self.lat = {"vm_list": [], "vm_exec": []}
        self.slowest = {"vm_list": (0, 0), "vm_exec": (0, 0)}
        self.t0 = time.monotonic()
        self.when = {"vm_list": [], "vm_exec": []}
        self.errors = []
        self.lister = threading.Thread(target=self.list_loop, daemon=True)

    def run(self):
        self.lister.start()
        api = Api(self.port, self.tok)
        nxt = time.monotonic()
        while not self.stop_ev.is_set():
            t = time.monotonic()
            try:
                st, r = api("vm_exec", vm_id=self.vm,
                            request_id=request_id("b"), command="echo b",
                            wait_seconds=60)
            except (OSError, http.client.HTTPException) as e:
                st, r = 0, {"exception": repr(e)}
            dt = time.monotonic() - t
            if st == 200 and r.get("state") == "completed" and \
                    r.get("output", {}).get("stdout") == "b\n":
                self.keep("vm_exec", t, dt)
            else:
                self.errors.append(("vm_exec", st, r))
            nxt += EXEC_PERIOD
            self.stop_ev.wait(max(0.0, nxt - time.monotonic()))
        api.close()
        self.lister.join(60)

    def list_loop(self):
        api = Api(self.port, self.tok)
        while not self.stop_ev.is_set():
            t = time.monotonic()
            try:
                st, r = api("vm_list")
            except (OSError, http.client.HTTPException) as e:
                st, r = 0, {"exception": repr(e)}
            dt = time.monotonic() - t
            if st == 200 and any(v.get("vm_id") == self.vm
                                 for v in r.get("vms", [])):
                self.keep("vm_list", t, dt)
            else:
                self.errors.append(("vm_list", st, r))
            self.stop_ev.wait(LIST_PAUSE)
        api.close()

    def keep(self, tool, t, dt):
        self.lat[tool].append(dt)
        self.when[tool].append((t - self.t0, dt))
        if dt > self.slowest[tool][0]:
            self.slowest[tool] = (dt, t - self.t0)

    def finish(self):
        self.stop_ev.set()
        self.join(120)


def p99(xs):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * 0.99))]


# ---- the attacker's clients -------------------------------------------

def post_raw(port, tok, path, body, extra=""):
    """Sends one POST on a connection of its own and returns the socket,
    not waiting for the answer."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), 10)
    s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: "
               "Bearer %s\r\nContent-Type: application/json\r\n%s"
               "Content-Length: %d\r\n\r\n" % (path, port, tok, extra,
                                               len(data))).encode() + data)
    return s


def status_of(s, timeout):
    """The status of the answer on s within timeout, or 0 if none came."""
    s.settimeout(timeout)
    buf = b""
    try:
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    except OSError:
        return 0
    try:
        return int(buf.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


def dropped_calls(port, tok, n, name, args, stop_at):
    """n tool calls of A's, 50 at a time, each client gone after
    DROP_AFTER seconds if no answer came; returns a count per status
    (0: dropped unanswered)."""
    seen = {}
    sent = 0
    while sent < n and time.monotonic() < stop_at:
        batch = []
        for _ in range(min(50, n - sent)):
            a = dict(args)
            if name == "vm_exec":
                a["request_id"] = request_id("a")
            batch.append(post_raw(port, tok, "/v1/tools/" + name, a))
        sent += len(batch)
        t = time.monotonic() + DROP_AFTER
        for s in batch:
            st = status_of(s, max(0.01, t - time.monotonic()))
            seen[st] = seen.get(st, 0) + 1
            s.close()
    return seen


class Endpoint:
    """What mcpdlib.WS wants of a daemon: its port and Host."""

    def __init__(self, port):
        self.port = port
        self.host = "127.0.0.1:%d" % port


# ---- the attacks -------------------------------------------------------
#
# Each takes the run's context and returns a line saying what A saw; it
# ends by its own bound.

def attack_readfile(cx):
    """A's VM stopped under it, then vm_read_file calls dropped mid-call."""
    h, port, tok, vm = cx["h"], cx["port"], cx["tok_a"], cx["vm_a"]
    uid = base.vm_uid(h, vm)
    qemu = [pid for pid, u, cmd in h.jail_processes()
            if u == uid and "qemu" in cmd]
    for pid in qemu:
        os.kill(pid, signal.SIGSTOP)
    try:
        seen = dropped_calls(port, tok, cx["mode"]["readfile"],
                             "vm_read_file", {"vm_id": vm,
                                              "path": "hello.txt"},
                             time.monotonic() + cx["mode"]["seconds"] * 4)
        rest = cx["stop_at"] - time.monotonic()
        if rest > 0:
            time.sleep(rest)
    finally:
        for pid in qemu:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
    return "%d QEMU stopped; A's calls by status %s" % (len(qemu), seen)


def attack_linkdown(cx):
    h, port, tok = cx["h"], cx["port"], cx["tok_a"]
    api = Api(port, tok)
    with open(h.mode_file, "w") as f:
        f.write("linkdown\n")
    # A's workspace may still be busy with what an attack before left
    # counted: the create is retried as a client would, for up to 60 s.
    try:
        while True:
            st, r = api("vm_create", request_id=request_id("ld"),
                        memory_mib=MEM, idle_seconds=0)
            if st != 409 or r.get("error", {}).get("code") != "busy" or \
                    time.monotonic() - cx["t0"] > 60:
                break
            time.sleep(0.5)
    finally:
        os.unlink(h.mode_file)
    made = time.monotonic() - cx["t0"]
    # Idle while the attack lasts: the destroy opens a connection anew.
    api.close()
    if st != 200:
        return "the fake's VM was not created: %d %r" % (st, r)
    vm = r["vm_id"]
    seen = {}
    end = max(cx["stop_at"], time.monotonic() + cx["mode"]["seconds"])
    while time.monotonic() < end:
        for k, v in dropped_calls(port, tok, 50, "vm_exec",
                                  {"vm_id": vm, "command": "true"},
                                  end).items():
            seen[k] = seen.get(k, 0) + v
    t = time.monotonic()
    st, d = api("vm_destroy", vm_id=vm)
    api.close()
    return "created by %.1f s; A's execs on the link-down VM by status %s; "\
        "its destroy %d from %.1f s to %.1f s" % (
            made, seen, st, t - cx["t0"], time.monotonic() - cx["t0"])


def attack_streams(cx):
    import mcpdlib
    port, tok, vm = cx["port"], cx["tok_a"], cx["vm_a"]
    api = Api(port, tok)
    ep = Endpoint(port)
    seen, bursts, msgs = {}, 0, set()
    while time.monotonic() < cx["stop_at"]:
        st, r = api("vm_suspend", vm_id=vm, mode="pause", force=True)
        if st != 200:
            seen["suspend %d" % st] = seen.get("suspend %d" % st, 0) + 1
            break
        got = []

        def one():
            try:
                got.append(mcpdlib.WS(ep, "/v1/vms/%s/streams/%d" % (
                    vm, HOLD_PORT), auth=tok))
            except OSError:
                got.append(None)
        th = [threading.Thread(target=one, daemon=True)
              for _ in range(cx["mode"]["burst"])]
        for t in th:
            t.start()
        for t in th:
            t.join(120)
        bursts += 1
        for w in got:
            k = w.status if w is not None else 0
            seen[k] = seen.get(k, 0) + 1
            if w is not None and k != 101:
                msgs.add(w.body[:160].decode(errors="replace"))
            if w is not None:
                w.close()
        # Resumed, so that the guest can answer the closes of this
        # burst's streams: a paused guest cannot, and while they count an
        # open is refused before it would wake the VM.
        api("vm_resume", vm_id=vm)
    st, r = api("vm_status", vm_id=vm)
    api.close()
    return "%d bursts, opens by status %s; A's VM is %s; refusals: %s" % (
        bursts, seen, r.get("state") if st == 200 else st, sorted(msgs))


def attack_listens(cx):
    port, tok = cx["port"], cx["tok_a"]
    held, seen = [], {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
            "params": {"notifications": {}, "_meta": SL_META}}
    extra = ("Accept: text/event-stream\r\nMCP-Protocol-Version: %s\r\n"
             "Mcp-Method: subscriptions/listen\r\n" % SL)
    for _ in range(cx["mode"]["listens"]):
        held.append(post_raw(port, tok, "/mcp", body, extra))
    for s in held:
        st = status_of(s, 5)
        seen[st] = seen.get(st, 0) + 1
    rest = cx["stop_at"] - time.monotonic()
    if rest > 0:
        time.sleep(rest)
    for s in held:
        s.close()
    return "A's listens by status %s" % seen


def attack_fork(cx):
    port, tok, vm = cx["port"], cx["tok_a"], cx["vm_a"]
    api = Api(port, tok)
    t = time.monotonic()
    st, r = api("vm_fork", vm_id=vm, request_id=request_id("fork"),
                count=1)
    took = time.monotonic() - t
    kids = r.get("vm_ids", []) if st == 200 else []
    for k in kids:
        api("vm_destroy", vm_id=k)
    api.close()
    rest = cx["stop_at"] - time.monotonic()
    if rest > 0:
        time.sleep(rest)
    return "vm_fork %d after %.1f s (%d child destroyed)" % (st, took,
                                                             len(kids))


def before_fork(cx):
    base.add_history(cx["h"], cx["vm_a"], cx["mode"]["rows"])


def start_listener(api, vm):
    """A guest listener on HOLD_PORT that reads until its client goes."""
    prog = ("import socket, threading\n"
            "def hold(c):\n"
            "    while c.recv(65536):\n"
            "        pass\n"
            "    c.close()\n"
            "s = socket.socket()\n"
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind(('127.0.0.1', %d))\n"
            "s.listen(64)\n"
            "open('/workspace/listening', 'w').close()\n"
            "while True:\n"
            "    threading.Thread(target=hold, args=(s.accept()[0],),\n"
            "                     daemon=True).start()\n" % HOLD_PORT)
    api.ok("vm_write_file", vm_id=vm, path="hold.py",
           data_base64=base64.b64encode(prog.encode()).decode())
    r = api.ok("vm_exec", vm_id=vm, request_id=request_id("listen"),
               command="echo a > hello.txt; nohup python3 hold.py "
               ">hold.log 2>&1 & for i in $(seq 100); do [ -e listening ] "
               "&& exit 0; sleep 0.2; done; exit 1", wait_seconds=60)
    if r.get("state") != "completed":
        raise RuntimeError("the guest listener did not start: %r" % r)


# In this order: A's VM is still whole for the streams and the fork, and
# stopped last by readfile; linkdown makes a VM of its own.
ATTACKS = [
    ("256 stateless listens on one credential", None, attack_listens),
    ("stream bursts on A's paused VM", None, attack_streams),
    ("100,000 job rows, then vm_fork", before_fork, attack_fork),
    ("vm_read_file on a stopped guest, dropped", None, attack_readfile),
    ("fake vmproxy: link down, then silent", None, attack_linkdown),
]


def phase(cx, name, before, attack):
    """B's load for the phase's seconds, with A's attack beside it when
    there is one; returns the phase's row."""
    if before is not None:
        before(cx)
    load = Load(cx["port"], cx["tok_b"], cx["vm_b"])
    secs = cx["mode"]["alone" if attack is None else "seconds"]
    t = time.monotonic()
    cx["stop_at"] = t + secs
    cx["t0"] = t
    load.start()
    what = attack(cx) if attack is not None else ""
    rest = cx["stop_at"] - time.monotonic()
    if rest > 0:
        time.sleep(rest)
    load.finish()
    what += "; B's slowest: %s" % ", ".join(
        "%s %.0f ms at %.1f s" % (k, v[0] * 1000, v[1])
        for k, v in load.slowest.items())
    return {"name": name, "secs": time.monotonic() - t, "what": what,
            "lat": load.lat, "errors": load.errors, "when": load.when}


def table(rows):
    """B's p99s, alone and under each attack, side by side."""
    alone = rows[0]["lat"]
    out = ["%-42s %5s %9s %6s %5s %9s %6s %6s" % (
        "B's load while A runs", "lists", "p99 ms", "x alone", "execs",
        "p99 ms", "x alone", "errors")]
    for r in rows:
        cells = []
        for tool in ("vm_list", "vm_exec"):
            v, a = p99(r["lat"][tool]), p99(alone[tool])
            cells += [len(r["lat"][tool]), v * 1000, v / a if a else 0]
        out.append("%-42s %5d %9.1f %6.2f %5d %9.1f %6.2f %6d" % (
            (r["name"],) + tuple(cells) + (len(r["errors"]),)))
    return "\n".join(out)


def run(h, port, tok_a, tok_b, mode, only=None):
    """The whole harness on a running stack (authd, vmmd with
    Host.fake_vmproxy_switch, mcpd on port); returns the rows.  only:
    words, one of which an attack's name must hold to be run."""
    a, b = Api(port, tok_a), Api(port, tok_b)
    vm_b = b.ok("vm_create", request_id=request_id("vmb"), memory_mib=MEM,
                idle_seconds=0)["vm_id"]
    vm_a = a.ok("vm_create", request_id=request_id("vma"), memory_mib=MEM,
                idle_seconds=0)["vm_id"]
    cx = {"h": h, "port": port, "tok_a": tok_a, "tok_b": tok_b,
          "vm_a": vm_a, "vm_b": vm_b, "mode": mode}
    try:
        start_listener(a, vm_a)
        b.ok("vm_exec", vm_id=vm_b, request_id=request_id("warm"),
             command="echo b", wait_seconds=60)
        rows = [phase(cx, "nothing (B alone)", None, None)]
        for name, before, attack in ATTACKS:
            if only and not any(w in attack.__name__ for w in only):
                continue
            rows.append(phase(cx, name, before, attack))
    finally:
        for api, vm in ((a, vm_a), (b, vm_b)):
            try:
                api("vm_destroy", vm_id=vm)
            except (OSError, http.client.HTTPException):
                pass
            api.close()
    return rows
