#!/usr/bin/env python3
"""The product mcpd with the real authd (credentials from authctl) and a
vmmd stand-in speaking the real IPC protocol on vmmd's socket: the
credential is verified by authd and forwarded to vmmd, results, errors and
progress come back, a stream fd crosses by SCM_RIGHTS, vmmd's close notice
ends a stream with 1001, and revocation ends one with 1008.  A gated call's
proposal (issue #28) is decoded by the product mcpd: vmmd's side of
approvals is another change, so the stand-in sends what vmmd would, and
hostile proposals, which mcpd must refuse whole without crashing.  TAP
output."""

import array
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcpdlib import MCP, WS, free_port, request, sse_events
from taplib import run_tests

MCPD = os.environ["MCPD"]
AUTHD = os.environ["AUTHD"]
AUTHCTL = os.environ["AUTHCTL"]

HDR = struct.Struct("=IIII")
HELLO, ERROR, REPLY = 1, 2, 0x2
VM_TOOL, VM_TOOL_RESULT, VM_PROGRESS, VM_CANCEL = 301, 302, 303, 304
VM_STREAM_OPEN, VM_STREAM_OPEN_RESULT, VM_STREAM_CLOSE = 305, 306, 307
VM_STATS, VM_STATS_RESULT = 308, 309


class FakeVmmd:
    """Listens where vmmd would; answers from a table the test sets."""

    def __init__(self, path):
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(4)
        self.seen = []
        self.gated = {}
        self.guests = []
        self.conn = None
        self.lock = threading.Lock()
        threading.Thread(target=self.loop, daemon=True).start()

    def send(self, mtype, body, mid=0, flags=0, fd=None):
        data = json.dumps(body).encode()
        msg = HDR.pack(mtype, len(data), mid, flags | (1 if fd else 0)) + data
        with self.lock:
            if fd is None:
                self.conn.sendall(msg)
            else:
                self.conn.sendmsg([msg], [(socket.SOL_SOCKET,
                                           socket.SCM_RIGHTS,
                                           array.array("i", [fd]))])

    def recv(self, c):
        buf = b""
        while len(buf) < 16:
            chunk = c.recv(16 - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        mtype, n, mid, flags = HDR.unpack(buf)
        data = b""
        while len(data) < n:
            data += c.recv(n - len(data))
        return mtype, mid, json.loads(data)

    def loop(self):
        while True:
            c, _ = self.srv.accept()
            self.conn = c
            self.send(HELLO, {"version": 1, "role": "vmmd"})
            try:
                self.recv(c)                    # mcpd's HELLO
                while True:
                    mtype, mid, body = self.recv(c)
                    self.seen.append((mtype, body))
                    threading.Thread(target=self.answer,
                                     args=(mtype, mid, body),
                                     daemon=True).start()
            except (EOFError, OSError):
                continue

    def answer(self, mtype, mid, body):
        if mtype == VM_STATS:
            self.send(VM_STATS_RESULT, {
                "vms": {"running": 2, "hibernated": 1},
                "drops": [
                    {"vm_id": "vm-a1", "egress": 7, "bandwidth": 3,
                     "conn_rate": 0, "conn_count": 1},
                    # Nothing a label may not hold gets printed.
                    {"vm_id": "x\"} 1\nfake", "egress": 9,
                     "bandwidth": 0, "conn_rate": 0, "conn_count": 0}]},
                      mid, REPLY)
        elif mtype == VM_TOOL:
            args = body["arguments"]
            if body["tool"] == "vm_create":
                for i in (1, 2):
                    self.send(VM_PROGRESS, {"progress": i, "total": 3,
                                            "message": "booting"}, mid)
                    time.sleep(0.05)
                self.send(VM_TOOL_RESULT, {"result": {"vm_id": "v1"}},
                          mid, REPLY)
            elif args.get("vm_id", "") in self.gated:
                # vmmd's answer to a gated call: a test sets the body.
                self.send(ERROR, self.gated[args["vm_id"]], mid, REPLY)
            elif args.get("vm_id", "").startswith("err-"):
                self.send(ERROR, {"error": {"code": args["vm_id"][4:],
                                            "message": "from vmmd"}},
                          mid, REPLY)
            else:
                self.send(VM_TOOL_RESULT, {"result": {"vms": []}}, mid,
                          REPLY)
        elif mtype == VM_STREAM_OPEN:
            if body["vm_id"] == "nope":
                self.send(ERROR, {"error": {"code": "not_found",
                                            "message": "no such VM"}},
                          mid, REPLY)
                return
            if body["vm_id"].startswith("err-"):
                self.send(ERROR, {"error": {"code": body["vm_id"][4:],
                                            "message": "from vmmd"}},
                          mid, REPLY)
                return
            a, b = socket.socketpair()
            self.guests.append(b)
            self.send(VM_STREAM_OPEN_RESULT,
                      {"stream_id": "%s/%d" % (body["vm_id"], len(self.guests)),
                       "vm_id": body["vm_id"], "port": body["port"],
                       "workspace": "ws"}, mid, REPLY, fd=a.fileno())
            a.close()


class Stack:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="mcpd-ipc.")
        os.chmod(self.dir, 0o755)
        self.run = os.path.join(self.dir, "run")
        self.state = os.path.join(self.dir, "state")
        for d in (self.run, self.state):
            os.mkdir(d)
            os.chmod(d, 0o755)
        self.port = free_port()
        self.mport = free_port()
        self.host = "127.0.0.1:%d" % self.port
        self.conf = os.path.join(self.dir, "mcpvm.conf")
        with open(self.conf, "w") as f:
            f.write("[paths]\nruntime_dir = %s\nstate_dir = %s\n"
                    "[authd]\npeers = root mcpvm\ndefault_ttl = 0\n"
                    "[mcpd]\nlisten = 127.0.0.1:%d\n"
                    "metrics_listen = 127.0.0.1:%d\n"
                    % (self.run, self.state, self.port, self.mport))
        self.vmmd = FakeVmmd(os.path.join(self.run, "vmmd.sock"))
        self.authd = self.start([AUTHD, "-d", "-v", "-f", self.conf],
                                "authd.log", "ready:")
        # Where a Type=notify unit would listen.
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(os.path.join(self.run, "notify"))
        # As systemd's own: anyone may send, mcpd has dropped to mcpvm.
        os.chmod(os.path.join(self.run, "notify"), 0o777)
        self.notify.settimeout(5)
        self.mcpd = self.start([MCPD, "-d", "-v", "-f", self.conf],
                               "mcpd.log", "started",
                               {"NOTIFY_SOCKET": os.path.join(self.run,
                                                              "notify")})
        deadline = time.time() + 10
        while time.time() < deadline and not any(
                t == VM_STATS for t, _ in self.vmmd.seen):
            time.sleep(0.05)

    def start(self, argv, log, word, env=None):
        path = os.path.join(self.dir, log)
        out = open(path, "wb")
        p = subprocess.Popen(argv, stdout=out, stderr=out,
                             env=dict(os.environ, **(env or {})))
        out.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            if word in open(path).read():
                return p
            if p.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError("%s did not start:\n%s" % (argv[0],
                                                        open(path).read()))

    def issue(self, ws):
        out = os.path.join(self.dir, "tok-" + ws)
        r = subprocess.run([AUTHCTL, "--config", self.conf, "issue",
                            "--workspace", ws, "--output", out],
                           capture_output=True, timeout=20)
        assert r.returncode == 0, r.stderr
        return open(out).read().strip()

    def authctl(self, *args):
        r = subprocess.run([AUTHCTL, "--config", self.conf, *args],
                           capture_output=True, timeout=20)
        assert r.returncode == 0, r.stderr

    def stop(self, p):
        if p.poll() is None:
            p.terminate()
            rc = p.wait(10)
            assert rc == 0, "exit %s" % rc

    def close(self):
        self.stop(self.mcpd)
        if self.authd.poll() is None:
            self.stop(self.authd)
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        return open(os.path.join(self.dir, "mcpd.log")).read()


S = None
TOK = None


def stack():
    global S, TOK
    if S is None:
        S = Stack()
        TOK = S.issue("alice")
    return S


def test_tool_call_through_authd_and_vmmd():
    s = stack()
    r = request(s, "POST", "/v1/tools/vm_list", body={}, auth=TOK)
    assert r.status == 200, (r.status, r.body)
    assert r.json() == {"vms": []}
    t, body = [x for x in s.vmmd.seen if x[0] == VM_TOOL][-1]
    # The caller's credential goes along: vmmd verifies it again.
    assert body["credential"] == TOK and body["tool"] == "vm_list"
    assert body["arguments"] == {} and body["progress"] is False
    assert TOK not in s.log(), "a credential was logged"


def test_runs_unprivileged_and_sandboxed():
    s = stack()
    st = dict(l.split(":", 1) for l in
              open("/proc/%d/status" % s.mcpd.pid).read().splitlines()
              if ":" in l)
    uids = st["Uid"].split()
    if os.geteuid() == 0:
        # Started as root: now the configured user, every id.
        import pwd
        want = pwd.getpwnam("mcpvm").pw_uid
        assert all(int(u) == want for u in uids), uids
    assert int(st["CapEff"].strip(), 16) == 0, st["CapEff"]
    assert int(st["CapPrm"].strip(), 16) == 0, st["CapPrm"]
    assert int(st["CapBnd"].strip(), 16) == 0, st["CapBnd"]
    assert st["NoNewPrivs"].strip() == "1"
    assert st["Seccomp"].strip() == "2"


def test_tells_systemd_it_is_ready():
    s = stack()
    assert s.notify.recv(100) == b"READY=1"


def test_unknown_credential_never_reaches_vmmd():
    s = stack()
    n = len(s.vmmd.seen)
    r = request(s, "POST", "/v1/tools/vm_list", body={},
                auth="mcpvm_" + "A" * 43)
    assert r.status == 401, r.status
    assert len([x for x in s.vmmd.seen[n:] if x[0] == VM_TOOL]) == 0


def test_bad_credentials_do_not_slow_good_ones():
    """A flood of bad credentials (authd holds their answers back) while
    a good one keeps being served at once."""
    s = stack()
    stop = threading.Event()
    sent = [0]
    statuses = set()

    def flood():
        while not stop.is_set():
            try:
                r = request(s, "POST", "/v1/tools/vm_list", body={},
                            auth="mcpvm_" + "B" * 43, timeout=30)
                statuses.add(r.status)
            except OSError:
                pass
            sent[0] += 1
    threads = [threading.Thread(target=flood) for _ in range(32)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    worst = 0.0
    try:
        for _ in range(40):
            t0 = time.time()
            r = request(s, "POST", "/v1/tools/vm_list", body={}, auth=TOK)
            worst = max(worst, time.time() - t0)
            assert r.status == 200, r.status
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert worst < 0.5, "a good request took %.2f s" % worst
    # Refused as unauthorized, or busy while authd's queue is full.
    assert statuses <= {401, 503}, statuses


def test_vmmd_errors_map_to_statuses():
    s = stack()
    for code, status in (("busy", 409), ("not_found", 404),
                         ("quota_exceeded", 429), ("forbidden", 403),
                         ("bogus_code", 500)):
        r = request(s, "POST", "/v1/tools/vm_status",
                    body={"vm_id": "err-" + code}, auth=TOK)
        assert r.status == status, (code, r.status)


PROPOSAL = {
    "id": "p" + "0123456789abcdef" * 2, "tool": "vm_exec",
    "request_id": "r1", "args_digest": "ab" * 32,
    "effect": "run `make test` as uid 1000 in vm-3f2a9c1e",
    "gates": ["exec"], "approvals_needed": 1, "approvals": 0,
    "state": "pending", "requested_at": "2026-12-01T10:00:00.000Z",
    "expires_at": "2026-12-01T11:00:00.000Z"}


def gated(code, proposal):
    body = {"error": {"code": code, "message": "from vmmd"}}
    if proposal is not None:
        body["proposal"] = proposal
    return body


def gated_exec(s, vm, body):
    s.vmmd.gated[vm] = body
    return request(s, "POST", "/v1/tools/vm_exec", body={
        "vm_id": vm, "request_id": "r1", "command": "make test"}, auth=TOK)


def test_proposal_from_vmmd_reaches_the_agent():
    s = stack()
    for code, status, state in (("approval_required", 202, "pending"),
                                ("approval_denied", 403, "denied"),
                                ("approval_expired", 410, "expired")):
        p = dict(PROPOSAL, state=state)
        r = gated_exec(s, "prop-" + state, gated(code, p))
        assert r.status == status, (code, r.status, r.body)
        assert r.json() == {"error": {"code": code, "message": "from vmmd"},
                            "proposal": p}, r.body
    c = MCP(s, auth=TOK)
    assert c.initialize().status == 200
    res = c.call("tools/call", {"name": "vm_exec", "arguments": {
        "vm_id": "prop-pending", "request_id": "r1",
        "command": "make test"}}).json()["result"]
    assert res["isError"] is True and \
        res["structuredContent"]["proposal"] == PROPOSAL, res
    assert "vmctl approval approve " + PROPOSAL["id"] in \
        res["content"][1]["text"]


def hostile_proposals():
    """(what, vmmd's error body) that mcpd must refuse."""
    def p(**kw):
        d = dict(PROPOSAL)
        d.update(kw)
        return gated("approval_required", d)

    def without(k):
        d = dict(PROPOSAL)
        del d[k]
        return gated("approval_required", d)
    # Nested within the IPC frame's depth bound (a deeper frame is the
    # frame check's to refuse, and ends the connection).
    deep = {}
    for _ in range(20):
        deep = {"a": deep}
    return [
        ("no proposal", gated("approval_required", None)),
        ("proposal null", gated("approval_required", None) | {
            "proposal": None}),
        ("proposal an array", gated("approval_required", [PROPOSAL])),
        ("proposal a string", gated("approval_required", "p" * 33)),
        ("an unknown member", p(approved_by="agent")),
        ("an unknown nested member", p(x=deep)),
        ("no effect", without("effect")),
        ("no expires_at", without("expires_at")),
        ("effect past 4096 bytes", p(effect="e" * 4097)),
        ("effect of 200 KiB", p(effect="e" * 204800)),
        ("id of 10000 characters", p(id="p" + "a" * 9999)),
        ("id not hex", p(id="p" + "g" * 32)),
        ("id uppercase", p(id="P" + "A" * 32)),
        ("id a number", p(id=1)),
        ("request_id with a slash", p(request_id="../r1")),
        ("request_id with NUL", p(request_id="r1\u0000x")),
        ("request_id past 128", p(request_id="r" * 129)),
        ("args_digest short", p(args_digest="ab" * 31)),
        ("tool not gateable", p(tool="vm_list")),
        ("gates empty", p(gates=[])),
        ("gates twice", p(gates=["exec", "exec"])),
        ("gates unknown", p(gates=["root"])),
        ("gates a string", p(gates="exec")),
        ("gates of numbers", p(gates=[1])),
        ("approvals_needed a string", p(approvals_needed="1")),
        ("approvals_needed 3", p(approvals_needed=3)),
        ("approvals_needed 1.0", p(approvals_needed=1.0)),
        ("approvals negative", p(approvals=-1)),
        ("approvals huge", p(approvals=2 ** 62)),
        ("state unknown", p(state="approved_by_agent")),
        ("state null", p(state=None)),
        ("expires_at not a time", p(expires_at="tomorrow")),
        ("requested_at with an offset", p(
            requested_at="2026-12-01T10:00:00+01:00")),
        ("a code mcpd does not know", gated("approval_granted",
                                            PROPOSAL)),
    ]


def test_hostile_proposals_refused_whole():
    s = stack()
    c = MCP(s, auth=TOK)
    assert c.initialize().status == 200
    for i, (what, body) in enumerate(hostile_proposals()):
        vm = "prop-bad%d" % i
        r = gated_exec(s, vm, body)
        assert r.status == 500, (what, r.status, r.body)
        j = r.json()
        assert j["error"]["code"] == "internal" and "proposal" not in j, \
            (what, j)
        res = c.call("tools/call", {"name": "vm_exec", "arguments": {
            "vm_id": vm, "request_id": "r1",
            "command": "make test"}}).json()["result"]
        assert res["isError"] is True and "structuredContent" not in res, \
            (what, res)
        assert json.loads(res["content"][0]["text"])["error"]["code"] == \
            "internal", (what, res)
    assert s.mcpd.poll() is None, "mcpd died"
    log = s.log()
    assert "with a proposal mcpd refuses: proposal: unknown member " \
        "\"approved_by\"" in log, log[-2000:]
    assert "proposal.effect: 4097 bytes; between 1 and 4096" in log
    assert "approval_required without a proposal" in log
    # An effect quoting a command with terminal escapes (C0 and C1) is
    # shown with them as "?", never passed on to a person's terminal.
    r = gated_exec(s, "prop-escape", gated("approval_required", dict(
        PROPOSAL, effect="runs `printf \x1b[2J\r\u009b31m`\n\tok")))
    assert r.status == 202, r.body
    assert r.json()["proposal"]["effect"] == "runs `printf ?[2J??31m`\n\tok"
    # Still serving, and a good proposal after the bad ones is whole.
    r = gated_exec(s, "prop-pending", gated("approval_required",
                                            PROPOSAL))
    assert r.status == 202 and r.json()["proposal"] == PROPOSAL


def test_mcp_progress_from_vmmd():
    s = stack()
    c = MCP(s, auth=TOK)
    assert c.initialize().status == 200
    r = c.call("tools/call", {"name": "vm_create",
                              "arguments": {"request_id": "c1"},
                              "_meta": {"progressToken": 5}})
    ev = sse_events(r.body)
    prog = [e for e in ev if e.get("method") == "notifications/progress"]
    assert [p["params"]["progress"] for p in prog] == [1, 2], ev
    assert ev[-1]["result"]["structuredContent"] == {"vm_id": "v1"}
    t, body = [x for x in s.vmmd.seen if x[0] == VM_TOOL][-1]
    assert body["progress"] is True


def test_stream_fd_and_close_notice():
    s = stack()
    w = WS(s, "/v1/vms/v9/streams/5000", auth=TOK)
    assert w.status == 101, w.status
    guest = s.vmmd.guests[-1]
    w.send(2, b"to-guest")
    guest.settimeout(5)
    assert guest.recv(100) == b"to-guest"
    guest.sendall(b"to-client")
    assert w.recv() == (2, b"to-client")
    # vmmd suspends the VM: the stream closes with 1001 and the reason.
    sid = "v9/%d" % len(s.vmmd.guests)
    s.vmmd.send(VM_STREAM_CLOSE, {"stream_id": sid, "reason": "suspended"})
    assert w.recv_close() == (1001, "suspended")
    w.close()
    w = WS(s, "/v1/vms/nope/streams/5000", auth=TOK)
    assert w.status == 404, w.status


def test_stream_refusals_map_to_statuses():
    """vmmd's refusals of a stream, as statuses of the upgrade; a full
    quota is 409 there (mcpd(8)), where a tool's is 429."""
    s = stack()
    for code, status in (("quota_exceeded", 409), ("conflict", 409),
                         ("forbidden", 403), ("not_found", 404),
                         ("unavailable", 503)):
        w = WS(s, "/v1/vms/err-%s/streams/5000" % code, auth=TOK)
        assert w.status == status, (code, w.status)
        assert json.loads(w.body)["error"]["code"] == code, w.body
        w.close()


def test_revocation_closes_streams_and_refuses():
    s = stack()
    tok = s.issue("bob")
    w = WS(s, "/v1/vms/v9/streams/5000", auth=tok)
    assert w.status == 101
    s.authctl("revoke-workspace", "--workspace", "bob")
    w.s.settimeout(5)
    code, reason = w.recv_close()
    assert code == 1008, (code, reason)
    w.close()
    r = request(s, "POST", "/v1/tools/vm_list", body={}, auth=tok)
    assert r.status == 401, r.status


def tool_calls(s):
    return sum(1 for t, _ in s.vmmd.seen if t == VM_TOOL)


def test_kept_answers_yield_to_events():
    """mcpd keeps authd's answers a few seconds (common/authcache): a
    policy change leaves the workspace's streams open, and a revocation
    still counts at once, without a call reaching vmmd."""
    s = stack()
    tok = s.issue("carol")
    r = request(s, "POST", "/v1/tools/vm_list", body={}, auth=tok)
    assert r.status == 200, r.status
    w = WS(s, "/v1/vms/v9/streams/5000", auth=tok)
    assert w.status == 101, w.status
    guest = s.vmmd.guests[-1]
    s.authctl("policy", "set", "--workspace", "carol", "--max-streams",
              "7")
    w.send(2, b"still-open")
    guest.settimeout(5)
    assert guest.recv(100) == b"still-open"
    calls = tool_calls(s)
    s.authctl("revoke-token", "--token-file",
              os.path.join(s.dir, "tok-carol"))
    r = request(s, "POST", "/v1/tools/vm_list", body={}, auth=tok)
    assert r.status == 401, r.status
    assert tool_calls(s) == calls, "a revoked credential reached vmmd"
    w.s.settimeout(5)
    code, reason = w.recv_close()
    assert code == 1008, (code, reason)
    w.close()


def revoked_under_load(s, ws, *revoke):
    """Four clients keep asking on keep-alive connections with ws's
    credential while authctl runs revoke: every request sent after
    authctl returned must be refused, whatever mcpd kept.  Returns the
    statuses before the revocation, for the caller's checks."""
    tok = s.issue(ws)
    done = threading.Event()
    revoked_at = [None]
    runs = [[] for _ in range(4)]
    warm = threading.Barrier(len(runs) + 1)

    def client(out):
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        hdrs = {"Host": s.host, "Authorization": "Bearer " + tok,
                "Content-Type": "application/json"}
        after = 0
        waited = False
        try:
            while not done.is_set() and after < 20:
                t = time.monotonic()
                conn.request("POST", "/v1/tools/vm_list", body=b"{}",
                             headers=hdrs)
                r = conn.getresponse()
                r.read()
                out.append((t, r.status))
                if revoked_at[0] is not None and t > revoked_at[0]:
                    after += 1
                if not waited and len(out) >= 20:
                    waited = True
                    warm.wait(30)
        finally:
            conn.close()
    threads = [threading.Thread(target=client, args=(r,)) for r in runs]
    for t in threads:
        t.start()
    try:
        # Every client has been answered 20 times: authd's answer is kept.
        warm.wait(30)
        s.authctl(*revoke)
        revoked_at[0] = time.monotonic()
        for t in threads:
            t.join(60)
    finally:
        done.set()
        for t in threads:
            t.join(60)
    before = [st for run in runs for t, st in run if t < revoked_at[0]]
    after = [st for run in runs for t, st in run if t > revoked_at[0]]
    assert len(after) == 20 * len(runs), len(after)
    assert set(after) == {401}, "sent after the revocation returned: %s" % (
        sorted(set(after)),)
    return before


def test_revoked_token_refused_at_once_under_load():
    """The kept answer of a busy credential goes with its revocation:
    not one request sent after authctl revoke-token returned gets
    through, on any of the connections that kept using it."""
    s = stack()
    path = os.path.join(s.dir, "tok-frank")
    before = revoked_under_load(s, "frank", "revoke-token", "--token-file",
                                path)
    assert before.count(200) >= 80, before.count(200)


def test_revoked_workspace_refused_at_once_under_load():
    """The same for a workspace revoked as a whole (one event for every
    credential of it)."""
    s = stack()
    before = revoked_under_load(s, "grace", "revoke-workspace",
                                "--workspace", "grace")
    assert before.count(200) >= 80, before.count(200)


def test_lost_authd_forgets_kept_answers():
    """A revocation made while mcpd had lost authd counts as soon as it
    is back: nothing kept from before is trusted meanwhile."""
    s = stack()
    tok = s.issue("dave")
    r = request(s, "POST", "/v1/tools/vm_list", body={}, auth=tok)
    assert r.status == 200, r.status
    s.stop(s.authd)
    s.authd = s.start([AUTHD, "-d", "-v", "-f", s.conf], "authd.log",
                      "ready:")
    s.authctl("revoke-token", "--token-file",
              os.path.join(s.dir, "tok-dave"))
    deadline = time.time() + 10
    while True:
        r = request(s, "POST", "/v1/tools/vm_list", body={}, auth=tok)
        if r.status != 503 or time.time() > deadline:
            break
        time.sleep(0.1)
    assert r.status == 401, r.status
    r = request(s, "POST", "/v1/tools/vm_list", body={}, auth=TOK)
    assert r.status == 200, r.status


def test_metrics_show_vms_by_state():
    s = stack()
    r = request(s, "GET", "/metrics", port=s.mport, auth=None)
    assert 'mcpd_vms{state="running"} 2' in r.body.decode(), r.body


def test_metrics_show_each_vms_drops():
    s = stack()
    body = request(s, "GET", "/metrics", port=s.mport, auth=None).body
    text = body.decode()
    for reason, n in (("egress", 7), ("bandwidth", 3), ("conn_rate", 0),
                      ("conn_count", 1)):
        line = ('mcpd_vm_dropped_packets_total{vm_id="vm-a1",'
                'reason="%s"} %d' % (reason, n))
        assert line in text.splitlines(), text
    assert "fake" not in text, text


def test_authd_down_is_503():
    s = stack()
    s.stop(s.authd)
    time.sleep(0.3)
    r = request(s, "POST", "/v1/tools/vm_list", body={}, auth=TOK)
    assert r.status == 503, r.status
    assert request(s, "GET", "/healthz", auth=None).status == 200


def test_clean_exit():
    S.close()


if __name__ == "__main__":
    run_tests([v for k, v in list(globals().items())
               if k.startswith("test_")])
