#!/usr/bin/env python3
"""Human approval of gated actions, end to end (issue #28): a real authd,
vmmd and mcpd (test_e2e.py's Stack) over a loop XFS volume, real VMs, and
real approvers: `vmctl approver-key init` and `vmctl approval approve|deny`
run on a pty as the unprivileged user nobody in the group mcpvm-approvers,
typing the passphrase as a person does.  Workspaces:

  ap-sup   supervised (`authctl issue --supervised`): every vm_exec and
           vm_run waits for one approval;
  ap-two   `--gate destroy`: vm_destroy needs two distinct approvers;
  ap-free  no gates: nothing waits.

Each outcome -- approved and run once, denied, expired, and a destroy
needing two distinct approvers -- goes through JSON HTTP and through the
official TypeScript SDK clients on MCP 2025-11-25 and on 2026-07-28 with
URL-mode elicitation (tests/mcp/approvals-flow.mjs); a raw 2026-07-28
call without it gets the 2025 tool error.  The attacks that need forged
envelopes or a hand-edited database are test_vmmd_approvals.py's,
against vmmd alone.
Prints the latency an approval adds beyond the human (the CLI's decision
to the retry's answer) as figures; nothing asserts on time.  TAP.
"""
import grp
import json
import os
import pty
import pwd
import select
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
import vmmdlib as base  # noqa: E402
import test_e2e  # noqa: E402

PORT = int(os.environ.get("APPROVALS_PORT", "18094"))
PASS = {"alice": "alice's long passphrase", "bob": "bob's long passphrase"}
TTL = 25            # [vmmd] approval_ttl: the expiry case waits it out
VMCTL = os.environ["VMCTL"]


def tap(good, what, detail=None):
    """One check, numbered with build_image's by taplib."""
    return taplib.ok(good, what, "" if good or detail is None else
                     repr(detail)[:4000])


class Stack(test_e2e.Stack):
    def write_more_conf(self, f):
        f.write("[mcpd]\nlisten = 127.0.0.1:%d\n"
                "allowed_hosts = 127.0.0.1 localhost\n" % PORT)


def rest(token, tool, args):
    return test_e2e.rest(token, tool, args, port=PORT)


class Approver:
    """An approver as a person is one: the unprivileged user nobody with
    the group mcpvm-approvers, its own key in its own directory, vmctl on
    a terminal."""

    def __init__(self, name, home, sock, conf, gid):
        self.name, self.sock, self.conf, self.gid = name, sock, conf, gid
        pw = pwd.getpwnam("nobody")
        self.uid, self.ugid = pw.pw_uid, pw.pw_gid
        self.key = os.path.join(home, name + ".pem")

    def _child(self, groups):
        os.setgroups(groups)
        os.setgid(self.ugid)
        os.setuid(self.uid)

    def on_pty(self, args, answers, groups=None):
        """vmctl ARGS on a new pty as this approver; each passphrase prompt
        is answered in turn.  (exit status, what the terminal showed,
        seconds from the last answer to the exit)."""
        pid, fd = pty.fork()
        if pid == 0:
            try:
                self._child([self.gid] if groups is None else groups)
                os.execv(VMCTL, [VMCTL] + args)
            finally:
                os._exit(127)
        seen, pending, answered, t_answer = b"", list(answers), 0, None
        while True:
            r, _, _ = select.select([fd], [], [], 120)
            if not r:
                break
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            asked = seen.count(b"New passphrase: ") + \
                seen.count(b"Again: ") + seen.count(b"Passphrase for ")
            while pending and answered < asked:
                os.write(fd, (pending.pop(0) + "\n").encode())
                answered += 1
                t_answer = time.monotonic()
        os.close(fd)
        _, status = os.waitpid(pid, 0)
        took = time.monotonic() - t_answer if t_answer else 0.0
        return (os.waitstatus_to_exitcode(status),
                seen.decode(errors="replace"), took)

    def init(self):
        return self.on_pty(["approver-key", "init", "--out", self.key],
                           [PASS[self.name], PASS[self.name]])

    def decide(self, verb, pid):
        return self.on_pty(["-s", self.sock, "approval", verb, "--key",
                            self.key, pid], [PASS[self.name]])

    def run(self, *args, groups=None):
        g = [self.gid] if groups is None else groups
        return subprocess.run([VMCTL, "-s", self.sock] + list(args),
                              capture_output=True, text=True,
                              stdin=subprocess.DEVNULL,
                              preexec_fn=lambda: self._child(g))


class SdkFlow:
    """tests/mcp/approvals-flow.mjs: one gated call through an SDK client,
    proposed now; finish() lets it retry once the human decided (or the
    proposal expired) and says whether it got what it expected."""

    def __init__(self, rev, token, tool, args, expect, gates=("exec",)):
        self.what = "MCP %s (the SDK client): %s" % (rev, tool)
        env = dict(os.environ, MCPVM_URL="http://127.0.0.1:%d" % PORT,
                   TOKEN=token, TOOL=tool, ARGS=json.dumps(args),
                   GATES=json.dumps(list(gates)), EXPECT=expect,
                   REVISION=rev)
        mcp = os.path.join(base.SRCDIR, "tests", "mcp")
        self.node = subprocess.Popen(
            [os.environ.get("NODE", "node"),
             os.path.join(mcp, "approvals-flow.mjs")],
            cwd=mcp, env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.seen, self.pid = "", ""
        for line in self.node.stdout:
            self.seen += line
            if line.startswith("PROPOSAL "):
                self.pid = line.split()[1]
                break
        self.expires = time.time() + TTL

    def finish(self):
        try:
            self.node.stdin.write("decided\n")
            self.node.stdin.close()
        except BrokenPipeError:
            pass
        self.seen += self.node.stdout.read()
        self.node.wait(120)
        return bool(self.pid) and self.node.returncode == 0 and \
            "SDK OK" in self.seen


def proposal_of(body):
    return body.get("proposal", {}) if isinstance(body, dict) else {}


def main():
    if os.geteuid() != 0:
        base.skip_all("needs root")
    try:
        gid = grp.getgrnam("mcpvm-approvers").gr_gid
    except KeyError:
        print("Bail out! the group mcpvm-approvers is missing: "
              "packaging/dev/install-deps makes it")
        return 1
    base.become_subreaper()
    base.exit_cleanly_on_sigterm()
    h = Stack(base.build_image())
    try:
        return body(h, gid)
    finally:
        h.cleanup()


def body(h, gid):
    h.setup()
    adir = os.path.join(h.dir, "approvers")
    home = tempfile.mkdtemp(prefix="approvers-home.", dir=h.dir)
    os.chown(home, pwd.getpwnam("nobody").pw_uid, -1)
    os.chmod(home, 0o700)
    h.write_conf(mcpd_user="mcpvm", approvers_dir=adir,
                 approval_ttl=TTL)
    h.start_authd()
    h.start_vmmd()
    h.start_mcpd()
    sock = os.path.join(h.run, "approvals.sock")
    st = os.stat(sock)
    tap(st.st_gid == gid and (st.st_mode & 0o777) == 0o660,
        "vmmd's approvals socket is 0660 root:mcpvm-approvers",
        oct(st.st_mode))
    alice = Approver("alice", home, sock, h.conf, gid)
    bob = Approver("bob", home, sock, h.conf, gid)
    for a in (alice, bob):
        rc, out, _ = a.init()
        pub = out[out.find("-----BEGIN PUBLIC KEY"):]
        pub = pub[:pub.find("-----END PUBLIC KEY-----") + 24]
        pubfile = os.path.join(h.dir, a.name + ".pub")
        with open(pubfile, "w") as f:
            f.write(pub.replace("\r\n", "\n") + "\n")
        e = subprocess.run([VMCTL, "-c", h.conf, "approver-key", "enroll",
                            a.name, pubfile], capture_output=True, text=True)
        tap(rc == 0 and e.returncode == 0, "%s makes a key on a pty as "
            "nobody; root enrolls it" % a.name, out + e.stderr)

    sup = h.issue("ap-sup", "--supervised")
    two = h.issue("ap-two", "--gate", "destroy", "--max-vms", "3")
    free = h.issue("ap-free")

    # -- who may reach the decision: people, never the agent ---------------
    r = alice.run("approval", "list", groups=[])
    tap(r.returncode == 3 and "approvals" in r.stderr or
        r.returncode == 3, "nobody outside mcpvm-approvers cannot reach "
        "the approvals socket (exit 3)", r.stderr)
    for tool in ("approval_approve", "vm_approve", "approve"):
        s, b = rest(sup, tool, {"id": "p" + "0" * 32})
        tap(s == 404, "no HTTP route %s for a workspace credential" %
            tool, (s, b))

    # -- ungated: nothing waits --------------------------------------------
    s, b = rest(free, "vm_create", {"request_id": "f-vm"})
    free_vm = b.get("vm_id", "")
    s2, b2 = rest(free, "vm_exec", {"vm_id": free_vm, "request_id": "f-1",
                                    "command": "echo free",
                                    "wait_seconds": 60})
    tap(s == 200 and s2 == 200 and b2.get("output", {}).get("stdout") ==
        "free\n", "a workspace without gates runs vm_exec at once", b2)
    s, b = rest(free, "vm_status", {"vm_id": free_vm})
    tap(s == 200 and b.get("approvals", {}).get("exec") == 0,
        "its vm_status says exec is not gated", b.get("approvals"))
    rest(free, "vm_destroy", {"vm_id": free_vm})

    # -- supervised, over JSON HTTP: proposed, pending, approved, once -----
    s, b = rest(sup, "vm_create", {"request_id": "s-vm",
                                   "idle_seconds": 900})
    vm = b.get("vm_id", "")
    tap(s == 200 and b.get("state") == "running",
        "a supervised workspace creates its VM without approval (only "
        "exec is gated)", b)
    s, b = rest(sup, "vm_status", {"vm_id": vm})
    tap(b.get("approvals", {}).get("exec") == 1,
        "vm_status tells the agent that exec needs one approval",
        b.get("approvals"))
    eargs = {"vm_id": vm, "request_id": "h-3",
             "command": "touch /workspace/late"}
    s, b = rest(sup, "vm_exec", eargs)
    epid = proposal_of(b).get("id", "")
    expires_at = time.time() + TTL
    # The SDK clients' expiries too: nobody decides these.
    late = [SdkFlow(rev, sup, "vm_exec", {
        "vm_id": vm, "request_id": "late-" + rev,
        "command": "touch /workspace/late-" + rev}, "expired")
        for rev in ("2025-11-25", "2026-07-28")]
    args = {"vm_id": vm, "request_id": "h-1", "wait_seconds": 60,
            "command": "echo ran >> /workspace/ran; wc -l < /workspace/ran"}
    s, b = rest(sup, "vm_exec", args)
    p = proposal_of(b)
    tap(s == 202 and b.get("error", {}).get("code") ==
        "approval_required" and p.get("state") == "pending" and
        p.get("approvals_needed") == 1 and p.get("gates") == ["exec"] and
        "echo ran" in p.get("effect", ""),
        "HTTP: a gated vm_exec answers 202 with its proposal", (s, b))
    pid = p.get("id", "")
    s, b = rest(sup, "vm_exec", args)
    tap(s == 202 and proposal_of(b).get("id") == pid,
        "HTTP: its retry before a decision: 202, the same proposal",
        (s, b))
    s, b = rest(sup, "vm_read_file", {"vm_id": vm, "path": "/workspace/ran"})
    tap(s != 200, "nothing ran meanwhile", (s, b))
    s, b = rest(sup, "vm_exec", dict(args, command="echo other"))
    tap(s == 409 and b.get("error", {}).get("code") == "conflict",
        "the same request_id with other arguments: conflict", (s, b))
    # A command whose effect text overflows: cut on a character boundary,
    # said so, and vmmd's connection to mcpd (which refuses a frame that
    # is not UTF-8) stays up for everyone.
    # Four alignments: one of them puts the cut inside a character.
    got = []
    for pad in range(4):
        s, b = rest(sup, "vm_exec", {"vm_id": vm, "request_id": "long-%d" %
                                     pad, "command": "x" * pad +
                                     "echo " + "\u00e9\u20ac" * 600})
        got.append((s, proposal_of(b).get("effect", "")[-40:] or b))
    s2, b2 = rest(free, "vm_list", {})
    tap(all(s == 202 and str(e).endswith("[cut: the arguments are in "
                                         "full]") for s, e in got) and
        s2 == 200, "a command too long for the effect text: cut at a "
        "character, said so, and mcpd still reaches vmmd", (got, s2, b2))
    r = alice.run("approval", "list")
    tap(r.returncode == 0 and pid in r.stdout and "echo ran" in r.stdout,
        "vmctl approval list shows it to an approver", r.stdout + r.stderr)
    r = alice.run("approval", "show", pid)
    tap(r.returncode == 0 and "echo ran >> /workspace/ran; wc -l < /workspace/ran" in
        r.stdout and "matches the arguments above" in r.stdout,
        "vmctl approval show: the command in full and a checked digest",
        r.stdout + r.stderr)
    rc, out, took = alice.decide("approve", pid)
    tap(rc == 0 and "1 of 1" in out, "alice approves it on her terminal",
        out)
    t = time.monotonic()
    s, b = rest(sup, "vm_exec", args)
    ran_after = time.monotonic() - t
    tap(s == 200 and b.get("output", {}).get("stdout") == "1\n",
        "HTTP: the retry runs it, once", (s, b))
    print("# approval latency beyond the human: vmctl approve %.3f s "
          "after the passphrase; the retry answered in %.3f s" %
          (took, ran_after))
    s, b = rest(sup, "vm_exec", args)
    tap(s == 200 and b.get("output", {}).get("stdout") == "1\n",
        "HTTP: a further retry returns the same result, not a second run",
        (s, b))
    rc, out, _ = bob.decide("approve", pid)
    tap(rc != 0, "a used proposal takes no more decisions", out)

    # -- denied ------------------------------------------------------------
    dargs = {"vm_id": vm, "request_id": "h-2", "wait_seconds": 60,
             "command": "touch /workspace/denied"}
    s, b = rest(sup, "vm_exec", dargs)
    pid = proposal_of(b).get("id", "")
    rc, out, _ = bob.decide("deny", pid)
    s, b = rest(sup, "vm_exec", dargs)
    s2, _ = rest(sup, "vm_read_file", {"vm_id": vm, "path": "/workspace/denied"})
    tap(rc == 0 and s == 403 and b.get("error", {}).get("code") ==
        "approval_denied" and proposal_of(b).get("state") == "denied" and
        s2 != 200, "HTTP: denied by bob: 403 approval_denied, nothing ran",
        (out, s, b))
    rc, out, _ = alice.decide("approve", pid)
    tap(rc != 0, "an approval after the denial is refused", out)

    # -- the SDK clients: MCP 2025-11-25, and 2026-07-28 with elicitation --
    for rid, verb, expect, rev in (
            ("m-1", "approve", "ran", "2025-11-25"),
            ("m-2", "deny", "denied", "2025-11-25"),
            ("v-1", "approve", "ran", "2026-07-28"),
            ("v-2", "deny", "denied", "2026-07-28")):
        f = SdkFlow(rev, sup, "vm_exec", {
            "vm_id": vm, "request_id": rid, "wait_seconds": 60,
            "command": "echo sdk >> /workspace/sdk-%s; wc -l < "
            "/workspace/sdk-%s" % (rid, rid)}, expect)
        rc, out, _ = alice.decide(verb, f.pid) if f.pid else (1, "", 0)
        tap(f.finish() and rc == 0, "%s proposed, %s with vmctl, then %s" %
            (f.what, {"approve": "approved", "deny": "denied"}[verb],
             expect), f.seen + out)

    # -- MCP 2026-07-28 without URL elicitation: the tool error ------------
    s, b = test_e2e.mcp_stateless(sup, "tools/call", {
        "name": "vm_exec", "arguments": {"vm_id": vm, "request_id": "n-1",
                                         "command": "echo n26"}},
        "vm_exec", meta={
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}, port=PORT)
    sc = b.get("result", {}).get("structuredContent", {})
    tap(b.get("result", {}).get("isError") is True and
        sc.get("error", {}).get("code") == "approval_required" and
        sc.get("proposal", {}).get("state") == "pending",
        "MCP 2026-07-28 without URL elicitation: the 2025 tool error", b)

    # -- two approvers for a destroy ---------------------------------------
    s, b = rest(two, "vm_create", {"request_id": "t-vm"})
    tvm = b.get("vm_id", "")
    s, b = rest(two, "vm_destroy", {"vm_id": tvm})
    p = proposal_of(b)
    tap(s == 202 and p.get("approvals_needed") == 2 and
        p.get("gates") == ["destroy"],
        "vm_destroy in ap-two: 202, two approvals needed", (s, b))
    rc1, out1, _ = alice.decide("approve", p.get("id", ""))
    rc2, out2, _ = alice.decide("approve", p.get("id", ""))
    s, b = rest(two, "vm_destroy", {"vm_id": tvm})
    tap(rc1 == 0 and "1 of 2" in out1 and "1 of 2" in out2 and s == 202 and
        proposal_of(b).get("approvals") == 1,
        "alice approving twice counts once: still pending", (out2, s, b))
    rc, out, _ = bob.decide("approve", p.get("id", ""))
    s, b = rest(two, "vm_destroy", {"vm_id": tvm})
    s2, b2 = rest(two, "vm_status", {"vm_id": tvm})
    tap(rc == 0 and "2 of 2" in out and s == 200 and s2 == 404,
        "bob's approval makes two: the retry destroys it", (out, s, b, s2))

    for rev in ("2025-11-25", "2026-07-28"):
        s, b = rest(two, "vm_create", {"request_id": "t-vm-" + rev})
        f = SdkFlow(rev, two, "vm_destroy", {"vm_id": b.get("vm_id", "")},
                    "destroyed", gates=("destroy",))
        rc1, out1, _ = alice.decide("approve", f.pid) if f.pid else \
            (1, "", 0)
        rc2, out2, _ = bob.decide("approve", f.pid) if f.pid else (1, "", 0)
        tap(f.finish() and rc1 == 0 and "1 of 2" in out1 and rc2 == 0 and
            "2 of 2" in out2, "%s proposed, approved by alice and bob, "
            "then destroyed" % f.what, f.seen + out1 + out2)

    # -- expired: proposed first thing, checked last -----------------------
    # A person who comes back after the proposal's expiry.  The wait is
    # the behaviour under test; the cases above fill most of it.
    time.sleep(max(0, max([expires_at] + [f.expires for f in late]) -
                   time.time() + 1))
    rc, out, _ = alice.decide("approve", epid)
    s, b = rest(sup, "vm_exec", eargs)
    s2, _ = rest(sup, "vm_read_file", {"vm_id": vm, "path": "/workspace/late"})
    tap(rc != 0 and s == 410 and b.get("error", {}).get("code") ==
        "approval_expired" and s2 != 200,
        "after approval_ttl: the approval is refused, the retry is 410 "
        "approval_expired, nothing ran", (out, s, b))
    for f in late:
        good = f.finish()
        s2, _ = rest(sup, "vm_read_file", {"vm_id": vm, "path":
                                           "/workspace/late-" +
                                           f.what.split()[1]})
        tap(good and s2 != 200, "%s proposed, nobody decided, then "
            "expired; nothing ran" % f.what, f.seen)

    # -- what the audit log holds ------------------------------------------
    r = h.vmctl("audit", "verify")
    log = base.read(os.path.join(h.mnt, "audit.log"))
    want = ("proposed: gates exec", "args digest ",
            "decision: approve by key alice", ", envelope ",
            "decision: deny by key bob", "used: approved by keys alice,bob",
            "outcome: ok")
    tap(r.returncode == 0 and all(w in log for w in want),
        "the audit chain holds, with the proposals, the signed decisions "
        "and the uses",
        (r.stdout + r.stderr, [w for w in want if w not in log]))
    rest(sup, "vm_destroy", {"vm_id": vm})
    taplib.done()


if __name__ == "__main__":
    sys.exit(main())
