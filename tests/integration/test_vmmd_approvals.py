#!/usr/bin/env python3
"""vmmd's enforcement of human approval (issue #28), against a real vmmd,
its real SQLite store and audit log, one real VM, and Ed25519 keys made
with openssl and enrolled with vmctl approver-key.  authd is a small fake
here that answers each credential with a workspace and a policy carrying
"approvals" (gates), and pushes a workspace's revocation: the policy is
authd's to keep (another suite), vmmd's to enforce (this one).

Decisions go over approvals.sock as vmctl approval sends them: an
envelope signed over (proposal id, workspace, tool, argument digest,
expires-at, decision), built here from the documented encoding
(common/approval.c) and signed by openssl.  TAP.
"""
import calendar
import hashlib
import json
import os
import socket
import sqlite3
import struct
import subprocess
import tempfile
import threading
import time

import vmmdlib
import vmmd_ipc as ipc
from vmmdlib import ok, note, run_suite, wait_for, read

APPROVAL_LIST, APPROVAL_SHOW, APPROVAL_DECIDE = 411, 412, 413
APPROVE, DENY = 1, 2

SUP = {"exec": 1, "destroy": 2}
NET = {"network": 1, "resources": 2, "memory_mib_above": 512,
       "snapshot_delete": 1, "broker_pipe": 1}


# ---- a fake authd ------------------------------------------------------

class FakeAuthd:
    """authd.sock: HELLO, VERIFY by a table of credentials, SUBSCRIBE,
    REVOKED; revoke(ws) pushes the event to the subscribers."""

    def __init__(self, path, tokens):
        self.tokens = tokens            # credential -> (workspace, gates)
        self.revoked = set()
        self.subs = []
        self.lock = threading.Lock()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(path):
            os.unlink(path)
        self.srv.bind(path)
        self.srv.listen(8)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                s, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(s,),
                             daemon=True).start()

    @staticmethod
    def send(s, type, id, body, flags=ipc.FLAG_REPLY):
        payload = json.dumps(body).encode()
        s.sendall(struct.pack("=IIII", type, len(payload), id, flags) +
                  payload)

    @staticmethod
    def recv(s):
        def exact(n):
            buf = b""
            while len(buf) < n:
                d = s.recv(n - len(buf))
                if not d:
                    raise EOFError
                buf += d
            return buf
        t, n, i, _ = struct.unpack("=IIII", exact(16))
        return t, i, json.loads(exact(n)) if n else {}

    def policy(self, gates):
        return {"network": "network" in gates, "images": [], "max_vms": 0,
                "memory_mib": 0, "storage_gib": 0, "max_streams": 4,
                "approvals": gates}

    def serve(self, s):
        try:
            self.send(s, ipc.HELLO, 0, {"version": 1, "role": "authd"}, 0)
            self.recv(s)                # its HELLO
            while True:
                t, i, body = self.recv(s)
                if t == 101:            # VERIFY
                    cred = body.get("credential")
                    if cred in self.tokens and \
                            self.tokens[cred][0] not in self.revoked:
                        ws, gates = self.tokens[cred]
                        self.send(s, 102, i, {
                            "workspace": ws, "credential_id": "c-" + ws,
                            "expires_at": 0, "policy": self.policy(gates)})
                    else:
                        self.send(s, ipc.ERROR, i, {"error": {
                            "code": "unauthorized", "message": "no"}})
                elif t == 103:          # SUBSCRIBE
                    with self.lock:
                        self.subs.append(s)
                    self.send(s, 104, i, {})
                elif t == 106:          # REVOKED
                    self.send(s, 107, i, {"revoked": [
                        w for w in body.get("workspaces", [])
                        if w in self.revoked]})
        except (EOFError, OSError):
            pass

    def revoke(self, ws):
        self.revoked.add(ws)
        with self.lock:
            for s in self.subs:
                try:
                    self.send(s, 105, 0, {"workspace": ws,
                                          "reason": "revoked"}, 0)
                except OSError:
                    pass


class Host(vmmdlib.Host):
    def start_authd(self):
        self.fake = FakeAuthd(os.path.join(self.run, "authd.sock"), {
            "tok-sup": ("sup", SUP),
            "tok-gone": ("gone", {"exec": 1}),
            "tok-open": ("open", {}),
            "tok-net": ("net", NET),
        })


# ---- signing, as vmctl approval does -------------------------------------

def openssl(*args, data=None):
    p = subprocess.run(("openssl",) + args, input=data, capture_output=True)
    if p.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (args, p.stderr.decode()))
    return p.stdout


class Key:
    def __init__(self, d, name):
        self.name = name
        self.path = os.path.join(d, name + ".key")
        openssl("genpkey", "-algorithm", "ed25519", "-out", self.path)
        self.pub = os.path.join(d, name + ".pub")
        openssl("pkey", "-in", self.path, "-pubout", "-out", self.pub)
        der = openssl("pkey", "-in", self.path, "-pubout", "-outform",
                      "DER")
        self.key_id = hashlib.sha256(der[-32:]).digest()

    def sign(self, stmt):
        with tempfile.NamedTemporaryFile() as f:
            f.write(stmt)
            f.flush()
            return openssl("pkeyutl", "-sign", "-inkey", self.path,
                           "-rawin", "-in", f.name)


def field(s):
    b = s.encode()
    return bytes([len(b)]) + b


def statement(pid, ws, tool, digest_hex, expires, decision):
    return (b"mcpvm-statement\0" + bytes([1]) + field(pid) + field(ws) +
            field(tool) + bytes.fromhex(digest_hex) +
            struct.pack(">q", expires) + bytes([decision]))


def envelope(key, stmt):
    import base64
    raw = (b"mcpvm-envelope\0\0" + bytes([1]) + struct.pack(">H", len(stmt))
           + stmt + key.key_id + key.sign(stmt))
    return base64.b64encode(raw).decode()


def epoch(rfc3339):
    return calendar.timegm(time.strptime(rfc3339[:19], "%Y-%m-%dT%H:%M:%S"))


def sign_for(key, p, decision=APPROVE, digest=None):
    return envelope(key, statement(p["id"], p["workspace"], p["tool"],
                                   digest or p["args_digest"],
                                   epoch(p["expires_at"]), decision))


def canonical(o):
    """receipt_digest's form: keys sorted, no spaces, json-c's escapes
    ('/' as '\\/'), request_id left out at the top."""
    def enc(v):
        if isinstance(v, dict):
            return "{" + ",".join(enc(k) + ":" + enc(v[k])
                                  for k in sorted(v)) + "}"
        if isinstance(v, list):
            return "[" + ",".join(enc(x) for x in v) + "]"
        return json.dumps(v).replace("/", "\\/")
    return enc({k: v for k, v in o.items() if k != "request_id"})


def digest(args):
    return hashlib.sha256(canonical(args).encode()).hexdigest()


# ---- calls -------------------------------------------------------------

def call(conn, tok, name, **args):
    """(True, result) or (False, the whole error body)."""
    t, body, fd = conn.call(ipc.VM_TOOL, {"credential": tok, "tool": name,
                                          "arguments": args})
    if fd is not None:
        os.close(fd)
    return (t != ipc.ERROR), body if t == ipc.ERROR else body["result"]


def code(res):
    return None if res[0] else res[1]["error"]["code"]


class Approvals:
    def __init__(self, h):
        self.h = h
        self.c = ipc.Conn(os.path.join(h.run, "approvals.sock"), "vmctl")

    def ask(self, type, body):
        t, b, _ = self.c.call(type, body)
        return t == ipc.VMCTL_RESULT, b.get("result", b.get("error"))

    def list(self):
        return self.ask(APPROVAL_LIST, {})[1]["proposals"]

    def show(self, pid):
        return self.ask(APPROVAL_SHOW, {"id": pid})

    def decide(self, pid, env):
        return self.ask(APPROVAL_DECIDE, {"id": pid, "envelope": env})


def keyctl(h, *args):
    """vmctl's root-only key commands, on the suite's configuration."""
    return vmmdlib.run(os.environ["VMCTL"], "-c", h.conf, *args,
                       check=False)


def body(h):
    adir = os.path.join(h.dir, "approvers")
    os.mkdir(adir, 0o755)
    keydir = tempfile.mkdtemp(dir=h.dir)
    h.write_conf(approvers_dir=adir)
    h.start_authd()
    h.start_vmmd()
    conn = h.conn()
    keys = {n: Key(keydir, n) for n in ("alice", "bob", "carol",
                                        "mallory")}
    for n in ("alice", "bob", "carol"):
        r = keyctl(h, "approver-key", "enroll", n, keys[n].pub)
        ok(r.returncode == 0, "vmctl approver-key enroll " + n, r.stderr)
    alice, bob, carol, mallory = (keys[n] for n in ("alice", "bob",
                                                    "carol", "mallory"))
    db = os.path.join(h.mnt, "vmmd.db")

    sock = os.path.join(h.run, "approvals.sock")
    st = os.stat(sock)
    try:
        import grp
        gid = grp.getgrnam("mcpvm-approvers").gr_gid
    except KeyError:
        gid = 0
    ok(st.st_mode & 0o777 == 0o660 and st.st_uid == 0 and st.st_gid == gid,
       "approvals.sock is 0660 root:mcpvm-approvers (or root's alone)",
       "%o %d:%d" % (st.st_mode, st.st_uid, st.st_gid))

    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                        "--clear-groups", "python3", "-c",
                        "import socket,sys; s=socket.socket(socket.AF_UNIX);"
                        "s.connect(sys.argv[1])", sock],
                       capture_output=True, text=True)
    ok(r.returncode != 0 and "PermissionError" in r.stderr,
       "a user outside mcpvm-approvers cannot connect to approvals.sock",
       r.stderr[-300:])
    # mcpd's socket, which carries the agents' calls, has no approval
    # path: vmmd closes a connection that sends one.
    rogue = h.conn()
    rogue.send(APPROVAL_DECIDE, {"id": "p" + "0" * 32, "envelope": "AA=="})
    try:
        t, _, b, _ = rogue.recv()
        refused = t == ipc.ERROR
    except (EOFError, OSError):
        refused = True
    ok(refused, "vmmd.sock refuses the approval messages")
    rogue.close()

    res = call(conn, "tok-sup", "vm_create", request_id="mk")
    ok(res[0], "vm_create is not gated in a workspace gating exec",
       repr(res))
    vm = res[1]["vm_id"]
    res = call(conn, "tok-sup", "vm_status", vm_id=vm)
    ok(res[0] and res[1]["approvals"] == {
        "exec": 1, "network": 0, "resources": 0, "destroy": 2,
        "snapshot_delete": 0, "broker_pipe": 0, "memory_mib_above": 0,
        "vcpus_above": 0}, "vm_status lists the workspace's gates",
       repr(res))

    def jobs():
        r = call(conn, "tok-sup", "vm_status", vm_id=vm)
        return [j["request_id"] for j in r[1]["jobs"]]

    def exec_(rid, cmd, **kw):
        return call(conn, "tok-sup", "vm_exec", vm_id=vm, request_id=rid,
                    command=cmd, **kw)

    def propose(rid, cmd, **kw):
        res = exec_(rid, cmd, **kw)
        ok(code(res) == "approval_required" and "proposal" in res[1],
           "%s: a gated vm_exec is proposed, not run" % rid, repr(res))
        return res[1].get("proposal", {})

    appr = Approvals(h)

    # ---- proposed, pending, approved, run once, replayed --------------
    cmd = "echo ran >> /workspace/count; wc -l < /workspace/count"
    res = exec_("r1", cmd, wait_seconds=30)
    ok(code(res) == "approval_required", "vm_exec answers "
       "approval_required", repr(res))
    p1 = res[1].get("proposal", {})
    ok(sorted(p1) == sorted([
        "id", "tool", "request_id", "args_digest", "effect", "gates",
        "approvals_needed", "approvals", "state", "requested_at",
        "expires_at"]) and p1["gates"] == ["exec"] and
       p1["approvals_needed"] == 1 and p1["approvals"] == 0 and
       p1["state"] == "pending" and p1["request_id"] == "r1" and
       p1["tool"] == "vm_exec",
       "the error carries the proposal object", repr(p1))
    ok(vm in p1.get("effect", "") and cmd in p1.get("effect", ""),
       "the effect names the VM and the command", p1.get("effect"))
    stored = {"vm_id": vm, "command": cmd}
    ok(p1["args_digest"] == digest(stored),
       "args_digest is receipt_digest of the arguments without "
       "request_id and wait_seconds", p1["args_digest"])
    res = exec_("r1", cmd, wait_seconds=30)
    ok(code(res) == "approval_required" and
       res[1]["proposal"]["id"] == p1["id"],
       "its retry is pending on the same proposal", repr(res))
    ok(jobs() == [], "nothing ran")
    lst = appr.list()
    mine = [p for p in lst if p["id"] == p1["id"]]
    ok(len(mine) == 1 and mine[0]["workspace"] == "sup",
       "approval list shows it with its workspace", repr(lst))
    okk, sh = appr.show(p1["id"])
    ok(okk and sh["args"] == stored and
       digest(sh["args"]) == sh["proposal"]["args_digest"],
       "approval show gives the full args, whose digest vmctl can "
       "recompute", repr(sh))
    # vmctl approval, as the person runs it: what the agent wrote can not
    # act on the terminal or reorder the text (escapes shown instead).
    trick = "echo \x1b[2J\x1b[31mok \u202egnp.exe\u202c; rm -rf /workspace/x"
    ptrick = propose("r-trick", trick)
    vmctl = [os.environ["VMCTL"], "-s", sock, "approval"]
    r = subprocess.run(vmctl + ["show", ptrick.get("id", "")],
                       capture_output=True, text=True)
    ok(r.returncode == 0 and "\x1b" not in r.stdout and
       "\u202e" not in r.stdout and "\\x1b[2J" in r.stdout and
       "\\u{202e}" in r.stdout and "rm -rf /workspace/x" in r.stdout and
       "matches the arguments above" in r.stdout,
       "vmctl approval show escapes terminal controls and direction "
       "overrides, and checks the digest", repr(r.stdout + r.stderr))
    r = subprocess.run(vmctl + ["list"], capture_output=True, text=True)
    ok(r.returncode == 0 and ptrick.get("id", "-") in r.stdout and
       p1["id"] in r.stdout and "\x1b" not in r.stdout,
       "vmctl approval list shows both, escaped", r.stdout + r.stderr)
    r = subprocess.run(vmctl + ["show", "p" + "0" * 32],
                       capture_output=True, text=True)
    ok(r.returncode == 1 and "not_found" in r.stderr,
       "vmctl approval show of no such proposal: not_found, exit 1",
       r.stdout + r.stderr)
    p1w = sh["proposal"]
    env1 = sign_for(alice, p1w)
    t0 = time.monotonic()
    okk, r = appr.decide(p1["id"], env1)
    t_decide = time.monotonic() - t0
    ok(okk and r["proposal"]["approvals"] == 1 and
       r["proposal"]["state"] == "approved",
       "alice's signed approval is taken", repr(r))
    t0 = time.monotonic()
    res = exec_("r1", cmd, wait_seconds=30)
    t_run = time.monotonic() - t0
    ok(res[0] and res[1]["state"] == "completed" and
       res[1]["output"]["stdout"].strip() == "1" if res[0] else False,
       "the retry runs it, once", repr(res))
    # What an approval adds beyond the human: the decision's check and
    # store, and the retry's gate check (the rest of t_run is the job).
    exec_("r1-pending", cmd)
    t0 = time.monotonic()
    exec_("r1-pending", cmd)
    t_gate = time.monotonic() - t0
    note("decide %.1f ms; a pending retry's check %.1f ms; the approved "
         "retry with its job %.1f ms" % (t_decide * 1e3, t_gate * 1e3,
                                         t_run * 1e3))
    job = res[1].get("job_id") if res[0] else None
    res = exec_("r1", cmd, wait_seconds=30)
    ok(res[0] and res[1]["job_id"] == job,
       "another retry replays the result, not a rerun", repr(res))
    ok(jobs() == ["r1"], "one job ran", repr(jobs()))
    okk, r = appr.decide(p1["id"], sign_for(bob, p1w))
    ok(not okk and r["code"] == "conflict",
       "a used proposal takes no more decisions", repr(r))

    # ---- denied --------------------------------------------------------
    p = propose("r2", "echo denied")
    okk, sh = appr.show(p["id"])
    okk, r = appr.decide(p["id"], sign_for(alice, sh["proposal"], DENY))
    ok(okk and r["proposal"]["state"] == "denied", "a deny is taken",
       repr(r))
    res = exec_("r2", "echo denied")
    ok(code(res) == "approval_denied" and
       res[1]["proposal"]["state"] == "denied",
       "the retry of a denied proposal is approval_denied", repr(res))

    # ---- attacks: each refused, nothing run ----------------------------
    def db_exec(sql, *a):
        c = sqlite3.connect(db)
        c.execute(sql, a)
        c.commit()
        c.close()

    p = propose("r3", "echo forged")
    db_exec("UPDATE proposals SET state = 'approved' WHERE id = ?", p["id"])
    mark = len(read(h.vmmd_log))
    res = exec_("r3", "echo forged")
    ok(code(res) == "approval_required", "a row edited to approved in "
       "SQLite is refused", repr(res))
    ok("its row says approved" in read(h.vmmd_log)[mark:],
       "and the reason is logged", read(h.vmmd_log)[mark:][-600:])

    p = propose("r4", "echo mallory")
    okk, sh = appr.show(p["id"])
    env = sign_for(mallory, sh["proposal"])
    okk, r = appr.decide(p["id"], env)
    ok(not okk and r["code"] == "unauthorized" and
       "unknown key" in r["message"],
       "a key not enrolled is refused on the socket", repr(r))
    db_exec("UPDATE proposals SET envelopes = ?, state = 'approved' "
            "WHERE id = ?", env + "\n", p["id"])
    res = exec_("r4", "echo mallory")
    ok(code(res) == "approval_required",
       "and written into the row directly, it counts for nothing",
       repr(res))

    p = propose("r5", "echo carol")
    okk, sh = appr.show(p["id"])
    okk, r = appr.decide(p["id"], sign_for(carol, sh["proposal"]))
    ok(okk and r["proposal"]["approvals"] == 1, "carol approves", repr(r))
    r2 = keyctl(h, "approver-key", "revoke", "carol")
    ok(r2.returncode == 0, "root revokes carol's key", r2.stderr)
    res = exec_("r5", "echo carol")
    ok(code(res) == "approval_required" and
       res[1]["proposal"]["approvals"] == 0,
       "a key revoked after signing no longer counts", repr(res))

    p = propose("r6", "echo one")
    okk, sh = appr.show(p["id"])
    other = digest({"vm_id": vm, "command": "echo other"})
    okk, r = appr.decide(p["id"], sign_for(alice, sh["proposal"],
                                           digest=other))
    ok(not okk and r["code"] == "unauthorized" and
       "does not match" in r["message"],
       "an approval over other arguments is refused", repr(r))
    res = exec_("r6", "echo other")
    ok(code(res) == "conflict", "the same request_id with other "
       "arguments is a conflict", repr(res))

    p = propose("r7", cmd, wait_seconds=30)
    used = sign_for(alice, p1w)
    okk, r = appr.decide(p["id"], used)
    ok(not okk and r["code"] == "unauthorized",
       "a used approval replayed for another proposal is refused",
       repr(r))
    db_exec("UPDATE proposals SET envelopes = ? WHERE id = ?", used + "\n",
            p["id"])
    res = exec_("r7", cmd, wait_seconds=30)
    ok(code(res) == "approval_required",
       "and replayed into its row, it counts for nothing", repr(res))

    p = propose("r8", "echo writable")
    okk, sh = appr.show(p["id"])
    okk, r = appr.decide(p["id"], sign_for(alice, sh["proposal"]))
    ok(okk, "alice approves r8", repr(r))
    os.chmod(adir, 0o775)
    mark = len(read(h.vmmd_log))
    res = exec_("r8", "echo writable")
    ok(code(res) == "approval_required", "with the approvers directory "
       "group-writable nothing counts", repr(res))
    ok("approvers" in read(h.vmmd_log)[mark:], "and it is logged")
    os.chmod(adir, 0o755)
    ok(jobs() == ["r1"], "no attack ran anything", repr(jobs()))
    res = exec_("r8", "echo writable", wait_seconds=30)
    ok(res[0], "once the directory is root's again the approval runs it",
       repr(res))

    # ---- which classes a call meets --------------------------------------
    tok = "A" * 43
    p = propose("r12", "cat", broker_pipe_token=tok, wait_seconds=5)
    okk, sh = appr.show(p["id"])
    ok(okk and sh["args"] == {"vm_id": vm, "command": "cat",
                              "broker_pipe": True},
       "a pipe's token is not stored, but that a pipe was asked for is",
       repr(sh))
    ok(p["args_digest"] != digest({"vm_id": vm, "command": "cat"}),
       "so an approval without a pipe cannot serve a call with one")
    ok("broker pipe" in p["effect"], "the effect says a pipe is attached",
       p["effect"])

    def net(name, **args):
        return call(conn, "tok-net", name, **args)
    res = net("vm_create", image="nope", memory_mib=256)
    ok(code(res) == "invalid_argument", "an ungated vm_create goes on to "
       "its own checks", repr(res))
    res = net("vm_create", image="nope", memory_mib=1024, request_id="n1")
    pr = res[1].get("proposal", {}) if not res[0] else {}
    ok(code(res) == "approval_required" and pr["gates"] == ["resources"]
       and pr["approvals_needed"] == 2 and "1024 MiB" in pr["effect"],
       "memory above memory_mib_above is gated", repr(res))
    res = net("vm_create", image="nope", network="on", memory_mib=1024,
              request_id="n2")
    pr = res[1].get("proposal", {}) if not res[0] else {}
    ok(code(res) == "approval_required" and
       pr["gates"] == ["network", "resources"] and
       pr["approvals_needed"] == 2 and "network ON" in pr["effect"],
       "network on and memory: both gates, the larger need", repr(res))
    res = net("vm_snapshot_delete", snapshot_id="0" * 32)
    pr = res[1].get("proposal", {}) if not res[0] else {}
    ok(code(res) == "approval_required" and
       pr["gates"] == ["snapshot_delete"] and pr["request_id"] == "",
       "vm_snapshot_delete is gated", repr(res))
    res = net("vm_exec", vm_id=vm, request_id="n3", command="true",
              broker_pipe_token=tok)
    pr = res[1].get("proposal", {}) if not res[0] else {}
    ok(code(res) == "approval_required" and pr["gates"] == ["broker_pipe"],
       "a broker pipe is gated on its own", repr(res))
    res = net("vm_status", vm_id=vm)
    ok(code(res) == "not_found", "ungated calls of that workspace go on",
       repr(res))

    # ---- a revoked workspace's proposals go with it --------------------
    res = call(conn, "tok-gone", "vm_exec", vm_id=vm, request_id="g1",
                command="true")
    ok(code(res) == "approval_required", "workspace gone has a proposal",
       repr(res))

    def gone_rows():
        c = sqlite3.connect(db)
        n = c.execute("SELECT COUNT(*) FROM proposals WHERE workspace = "
                      "'gone'").fetchone()[0]
        c.close()
        return n
    h.fake.revoke("gone")
    wait_for(lambda: gone_rows() == 0, 30, "the revoked workspace's "
             "proposals deleted")
    ok(gone_rows() == 0, "a revoked workspace's proposals are deleted")

    # ---- two approvers for vm_destroy ----------------------------------
    res = call(conn, "tok-sup", "vm_destroy", vm_id=vm)
    ok(code(res) == "approval_required", "vm_destroy is proposed",
       repr(res))
    pd0 = res[1]["proposal"]
    okk, sh = appr.show(pd0["id"])
    okk, r = appr.decide(pd0["id"], sign_for(bob, sh["proposal"], DENY))
    res = call(conn, "tok-sup", "vm_destroy", vm_id=vm)
    ok(code(res) == "approval_denied" and
       res[1]["proposal"]["id"] == pd0["id"],
       "a denied call without request_id hears approval_denied",
       repr(res))
    res = call(conn, "tok-sup", "vm_destroy", vm_id=vm)
    ok(code(res) == "approval_required" and
       res[1]["proposal"]["id"] != pd0["id"] and
       res[1]["proposal"]["approvals_needed"] == 2 and
       res[1]["proposal"]["gates"] == ["destroy"],
       "vm_destroy needs two approvals", repr(res))
    pd = res[1]["proposal"]
    okk, sh = appr.show(pd["id"])
    okk, r = appr.decide(pd["id"], sign_for(alice, sh["proposal"]))
    okk2, r2 = appr.decide(pd["id"], sign_for(alice, sh["proposal"]))
    ok(okk and okk2 and r2["proposal"]["approvals"] == 1,
       "the same key twice counts once", repr(r2))
    res = call(conn, "tok-sup", "vm_destroy", vm_id=vm)
    ok(code(res) == "approval_required" and
       res[1]["proposal"]["id"] == pd["id"],
       "one approver is not enough", repr(res))
    okk, r = appr.decide(pd["id"], sign_for(bob, sh["proposal"]))
    ok(okk and r["proposal"]["approvals"] == 2, "bob approves too",
       repr(r))
    res = call(conn, "tok-sup", "vm_destroy", vm_id=vm)
    ok(res[0] and res[1].get("destroyed"),
       "with two distinct approvers it is destroyed", repr(res))
    if not res[0]:
        note("destroy was refused: the VM is left to cleanup")

    # ---- restart: proposals survive; expiry ----------------------------
    pending = propose("r9", "echo later")
    h.kill_vmmd()
    c = sqlite3.connect(db)
    waiting = c.execute("SELECT COUNT(*) FROM proposals WHERE workspace = "
                        "'sup' AND state IN ('pending', 'approved')"
                        ).fetchone()[0]
    c.close()
    # Room for one more: r10's.
    h.write_conf(approvers_dir=adir, approval_ttl=5,
                 max_proposals=waiting + 1)
    h.start_vmmd()
    conn = h.conn()
    appr = Approvals(h)
    ids = [p["id"] for p in appr.list()]
    ok(pending["id"] in ids and p1["id"] in ids,
       "proposals survive a vmmd restart", repr(ids))
    res = exec_("r9", "echo later")
    ok(code(res) == "approval_required" and
       res[1]["proposal"]["id"] == pending["id"],
       "a pending proposal is still pending after it", repr(res))
    p = propose("r10", "echo expiring")
    res = exec_("r11", "echo one too many")
    ok(code(res) == "quota_exceeded" and
       "max_proposals" in res[1]["error"]["message"],
       "one proposal over max_proposals is refused, naming it", repr(res))
    okk, sh = appr.show(p["id"])
    late = sign_for(alice, sh["proposal"])
    until = epoch(p["expires_at"])
    # Expiry is a time; waiting for it is the test.
    while time.time() < until + 1:
        time.sleep(until + 1 - time.time())
    res = exec_("r10", "echo expiring")
    ok(code(res) == "approval_expired", "a retry after expiry is "
       "approval_expired", repr(res))
    okk, r = appr.decide(p["id"], late)
    ok(not okk and r["code"] == "conflict",
       "an expired proposal takes no decision", repr(r))
    res = exec_("r11", "echo one too many")
    ok(code(res) == "approval_required",
       "an expired proposal no longer counts against max_proposals",
       repr(res))

    audit = read(os.path.join(h.mnt, "audit.log"))
    for what in ("proposed: gates exec", "decision: approve by key alice",
                 "decision: deny by key alice", "used: approved by keys "
                 "alice", "outcome: ok", "refused: row said approved",
                 "refused decision by key", "used: approved by keys "
                 "alice,bob"):
        ok(what in audit, "the audit log has '%s'" % what)
    r = h.vmctl("audit", "verify")
    ok(r.returncode == 0, "the audit chain verifies", r.stdout + r.stderr)


if __name__ == "__main__":
    run_suite("vmmd-approvals", body, Host)
