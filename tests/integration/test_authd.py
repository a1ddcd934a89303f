#!/usr/bin/env python3
"""Integration tests for authd and authctl: the real daemon on real sockets
with a real database file in a temporary directory.

Needs root (authd drops to the user mcpvm-auth; wrong-uid peers run as
nobody) and the binaries in AUTHD= and AUTHCTL=.
"""
import grp
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpvm_ipc as ipc  # noqa: E402
import taplib  # noqa: E402

AUTHD = os.environ.get("AUTHD", "")
AUTHCTL = os.environ.get("AUTHCTL", "")
TOKEN_RE = re.compile(rb"mcpvm_[A-Za-z0-9_-]{43}")

# Exit codes authctl documents.
EX_OK, EX_REFUSED, EX_USAGE, EX_UNREACHABLE, EX_TOKENFILE = 0, 1, 2, 3, 4

# A policy's "approvals" with nothing gated (common/gates.h).
NO_GATES = {"exec": 0, "network": 0, "resources": 0, "destroy": 0,
            "snapshot_delete": 0, "broker_pipe": 0, "memory_mib_above": 0,
            "vcpus_above": 0}


def nobody():
    pw = pwd.getpwnam("nobody")
    return pw.pw_uid, pw.pw_gid


class Authd:
    """One authd in its own temporary directory."""

    def __init__(self, extra=""):
        self.dir = tempfile.mkdtemp(prefix="authd-it.")
        # authd's user and the wrong-uid clients must get through.
        os.chmod(self.dir, 0o755)
        self.run = os.path.join(self.dir, "run")
        self.state = os.path.join(self.dir, "state")
        for d in (self.run, self.state):
            os.mkdir(d)
            os.chmod(d, 0o755)
        self.sock = os.path.join(self.run, "authd.sock")
        self.ctl_sock = os.path.join(self.run, "authctl.sock")
        self.db = os.path.join(self.state, "authd", "authd.db")
        self.conf = os.path.join(self.dir, "mcpvm.conf")
        self.logpath = os.path.join(self.dir, "authd.log")
        with open(self.conf, "w") as f:
            f.write("[paths]\nruntime_dir = %s\nstate_dir = %s\n"
                    "[authd]\npeers = root\ndefault_ttl = 0\n%s"
                    % (self.run, self.state, extra))
        self.proc = None

    def start(self, expect_ready=True):
        for p in (self.sock, self.ctl_sock):
            if os.path.exists(p):
                os.unlink(p)
        mark = len(self.log())
        log = open(self.logpath, "ab")
        self.proc = subprocess.Popen([AUTHD, "-d", "-v", "-f", self.conf],
                                     stdout=log, stderr=log)
        log.close()
        if not expect_ready:
            return self.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if "ready:" in self.log()[mark:]:
                return 0
            if self.proc.poll() is not None:
                raise AssertionError("authd exited %d:\n%s"
                                     % (self.proc.returncode, self.log()))
            time.sleep(0.01)
        raise AssertionError("authd not ready:\n" + self.log())

    def stop(self, sig=signal.SIGTERM):
        """Stops authd; after SIGTERM it must exit 0 within 10 s (under
        ASan that includes a clean leak check)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("authd did not exit after signal %d:\n%s"
                                 % (sig, self.log()))
        if sig == signal.SIGTERM and rc != 0:
            raise AssertionError("authd exited %d after SIGTERM:\n%s"
                                 % (rc, self.log()))

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def ctl(self, *args, **kw):
        return subprocess.run([AUTHCTL, "--socket", self.ctl_sock,
                               *args], capture_output=True, timeout=20,
                              **kw)

    def issue(self, ws, *flags):
        out = os.path.join(self.dir, "tok-%s-%d" % (ws, time.monotonic_ns()))
        r = self.ctl("--json", "issue", "--workspace", ws, "--output", out,
                     *flags)
        if r.returncode != 0:
            raise AssertionError("issue failed %d: %s" %
                                 (r.returncode, r.stderr.decode()))
        with open(out) as f:
            tok = f.read().strip()
        return tok, json.loads(r.stdout), out

    def peer(self):
        return ipc.Conn(self.sock, "mcpd")

    def verify(self, tok, conn=None):
        c = conn or self.peer()
        try:
            return c.call(ipc.AUTH_VERIFY, {"credential": tok})
        finally:
            if conn is None:
                c.close()


def as_user(uid, gid, fn):
    """Runs fn() in a forked child as uid/gid with no supplementary groups;
    returns what it returned (a short string)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            res = fn()
        except Exception as e:  # reported to the parent
            res = "exception: %r" % e
        os.write(w, res.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return data.decode()


class AuthdTest(unittest.TestCase):
    extra = ""

    def setUp(self):
        self.a = Authd(self.extra)
        self.a.start()

    def tearDown(self):
        self.a.cleanup()

    def assertUnauthorized(self, reply):
        rtype, body = reply
        self.assertEqual(rtype, ipc.IPC_ERROR)
        # No detail of why: the same words whatever the reason.
        self.assertEqual(body, {"error": {"code": "unauthorized",
                                          "message": "unauthorized"}})

    def assertPolicyRefused(self, conn, ws, policy, why):
        """AUTHCTL_POLICY_SET of policy for ws over conn is refused as
        invalid_argument, with why in the message."""
        rtype, body = conn.call(ipc.AUTHCTL_POLICY_SET, {
            "workspace": ws, "policy": policy})
        self.assertEqual(rtype, ipc.IPC_ERROR, policy)
        self.assertEqual(body["error"]["code"], "invalid_argument")
        self.assertIn(why, body["error"]["message"])


class Verify(AuthdTest):
    def test_issue_then_verify(self):
        tok, out, path = self.a.issue("demo-alice", "--allow-network",
                                      "--image", "deb13", "--max-vms", "3")
        self.assertRegex(tok, r"^mcpvm_[A-Za-z0-9_-]{43}$")
        self.assertTrue(out["new_workspace"])
        self.assertNotIn("credential", out)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        rtype, body = self.a.verify(tok)
        self.assertEqual(rtype, ipc.AUTH_VERIFY_RESULT)
        self.assertEqual(body["workspace"], "demo-alice")
        self.assertEqual(body["credential_id"], out["credential_id"])
        self.assertEqual(body["expires_at"], 0)
        self.assertEqual(body["policy"], {
            "network": True, "images": ["deb13"], "max_vms": 3,
            "memory_mib": 4096, "storage_gib": 20, "max_streams": 8,
            "egress": {"mode": "public", "deny": []}, "egress_rate": 0,
            "approvals": NO_GATES})

    def test_unknown_malformed_revoked_unauthorized(self):
        tok, out, _ = self.a.issue("w1")
        tok2, out2, _ = self.a.issue("w1")
        other = "mcpvm_" + "A" * 42 + "E"
        c = self.a.peer()
        self.assertUnauthorized(c.call(ipc.AUTH_VERIFY, {"credential": other}))
        self.assertUnauthorized(c.call(ipc.AUTH_VERIFY, {"credential": "x"}))
        self.assertUnauthorized(c.call(ipc.AUTH_VERIFY,
                                       {"credential": tok[:-1]}))
        # Verified (and so cached by authd) just before it is revoked.
        self.assertEqual(c.call(ipc.AUTH_VERIFY, {"credential": tok})[0],
                         ipc.AUTH_VERIFY_RESULT)
        r = self.a.ctl("revoke-token", "--credential", out["credential_id"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertUnauthorized(c.call(ipc.AUTH_VERIFY, {"credential": tok}))
        self.assertEqual(c.call(ipc.AUTH_VERIFY, {"credential": tok2})[0],
                         ipc.AUTH_VERIFY_RESULT)
        r = self.a.ctl("revoke-workspace", "--workspace", "w1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertUnauthorized(c.call(ipc.AUTH_VERIFY, {"credential": tok2}))
        # A revoked workspace gets no new credential.
        r = self.a.ctl("issue", "--workspace", "w1", "--stdout")
        self.assertEqual(r.returncode, EX_REFUSED)
        self.assertIn(b"conflict", r.stderr)
        self.assertIsNone(TOKEN_RE.search(r.stdout))
        c.close()

    def test_revoke_token_by_file(self):
        tok, out, path = self.a.issue("w2")
        r = self.a.ctl("revoke-token", "--token-file", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(out["credential_id"].encode(), r.stdout)
        self.assertUnauthorized(self.a.verify(tok))

    def test_rotate_keeps_policy(self):
        tok, out, _ = self.a.issue("rot", "--allow-network", "--image", "a",
                                   "--storage-gib", "7")
        self.assertEqual(self.a.verify(tok)[0], ipc.AUTH_VERIFY_RESULT)
        p = os.path.join(self.a.dir, "rotated")
        r = self.a.ctl("--json", "rotate", "--workspace", "rot", "--output",
                       p, "--ttl", "1h")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        self.assertEqual(res["revoked"], [out["credential_id"]])
        with open(p) as f:
            new = f.read().strip()
        self.assertUnauthorized(self.a.verify(tok))
        rtype, body = self.a.verify(new)
        self.assertEqual(rtype, ipc.AUTH_VERIFY_RESULT)
        self.assertEqual(body["policy"], out["policy"])
        self.assertAlmostEqual(body["expires_at"], time.time() + 3600,
                               delta=30)

    def test_reissue_does_not_widen(self):
        tok, out, _ = self.a.issue("narrow", "--max-vms", "1")
        r = self.a.ctl("issue", "--workspace", "narrow", "--stdout",
                       "--allow-network")
        self.assertEqual(r.returncode, EX_REFUSED)
        self.assertIn(b"policy set", r.stderr)
        tok2, out2, _ = self.a.issue("narrow")
        self.assertFalse(out2["new_workspace"])
        for t in (tok, tok2):
            rtype, body = self.a.verify(t)
            self.assertEqual(rtype, ipc.AUTH_VERIFY_RESULT)
            self.assertFalse(body["policy"]["network"])
            self.assertEqual(body["policy"]["max_vms"], 1)

    def test_policy_set_changes_it(self):
        tok, out, _ = self.a.issue("pol")
        self.assertFalse(self.a.verify(tok)[1]["policy"]["network"])
        r = self.a.ctl("policy", "set", "--workspace", "pol",
                       "--allow-network", "--image", "x", "--image", "y",
                       "--max-streams", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"network:      on", r.stdout)
        body = self.a.verify(tok)[1]
        self.assertEqual(body["policy"]["network"], True)
        self.assertEqual(body["policy"]["images"], ["x", "y"])
        self.assertEqual(body["policy"]["max_streams"], 2)
        r = self.a.ctl("policy", "set", "--workspace", "pol",
                       "--deny-network", "--all-images")
        self.assertEqual(r.returncode, 0, r.stderr)
        body = self.a.verify(tok)[1]
        self.assertEqual(body["policy"]["network"], False)
        self.assertEqual(body["policy"]["images"], [])
        r = self.a.ctl("policy", "set", "--workspace", "nope",
                       "--allow-network")
        self.assertEqual(r.returncode, EX_REFUSED)
        self.assertIn(b"not_found", r.stderr)


class Egress(AuthdTest):
    """A workspace's egress policy: set and shown by authctl, handed to
    vmmd with the rest of the policy, refused whole when any entry is
    wrong, the list limit a key of mcpvm.conf."""
    extra = "egress_max_cidrs = 3\negress_max_names = 2\n"

    def policy(self, tok):
        return self.a.verify(tok)[1]["policy"]

    def test_public_by_default_then_allowlist_then_deny(self):
        tok, _, _ = self.a.issue("eg", "--allow-network")
        self.assertEqual(self.policy(tok)["egress"],
                         {"mode": "public", "deny": []})
        r = self.a.ctl("policy", "set", "--workspace", "eg",
                       "--egress-allow", "203.0.113.0/24",
                       "--egress-allow", "198.51.100.7/32")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"egress:       allowlist 198.51.100.7/32 "
                      b"203.0.113.0/24\n", r.stdout)
        pol = self.policy(tok)
        self.assertEqual(pol["egress"], {"mode": "allowlist", "allow": [
            "198.51.100.7/32", "203.0.113.0/24"]})
        self.assertTrue(pol["network"])
        r = self.a.ctl("policy", "set", "--workspace", "eg",
                       "--egress-deny", "192.0.2.0/24")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.policy(tok)["egress"],
                         {"mode": "public", "deny": ["192.0.2.0/24"]})
        r = self.a.ctl("show", "--workspace", "eg")
        self.assertIn(b"egress:       public, denying 192.0.2.0/24\n",
                      r.stdout)
        self.assertIn(b"egress rate:  unlimited\n", r.stdout)
        # A rate: set, shown, refused below netd's least, lifted by 0.
        r = self.a.ctl("policy", "set", "--workspace", "eg",
                       "--egress-rate", "131072")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"egress rate:  131072 bytes/s\n", r.stdout)
        self.assertEqual(self.policy(tok)["egress_rate"], 131072)
        r = self.a.ctl("policy", "set", "--workspace", "eg",
                       "--egress-rate", "100")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"--egress-rate 100: below the least limit, 4096",
                      r.stderr)
        self.assertEqual(self.policy(tok)["egress_rate"], 131072)
        r = self.a.ctl("policy", "set", "--workspace", "eg",
                       "--egress-rate", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.policy(tok)["egress_rate"], 0)
        r = self.a.ctl("policy", "set", "--workspace", "eg",
                       "--egress-public")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.policy(tok)["egress"],
                         {"mode": "public", "deny": []})
        # It survives authd's restart: it is in the database.
        self.a.ctl("policy", "set", "--workspace", "eg",
                   "--egress-allow", "203.0.113.0/24")
        self.a.stop()
        self.a.start()
        self.assertEqual(self.policy(tok)["egress"],
                         {"mode": "allowlist", "allow": ["203.0.113.0/24"]})

    def test_names_in_an_allowlist(self):
        tok, _, _ = self.a.issue("eg", "--allow-network")
        r = self.a.ctl("policy", "set", "--workspace", "eg",
                       "--egress-allow", "Pkgs.Example.org",
                       "--egress-allow", "*.github.com",
                       "--egress-allow", "203.0.113.0/24")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"egress:       allowlist 203.0.113.0/24 *.github.com "
                      b"pkgs.example.org\n", r.stdout)
        self.assertEqual(self.policy(tok)["egress"], {
            "mode": "allowlist",
            "allow": ["203.0.113.0/24", "*.github.com", "pkgs.example.org"]})
        for flags, why in (
                (["--egress-allow", "b\u00fccher.example"], b"punycode"),
                (["--egress-allow", "-x.example"], b"'-x.example': the "
                 b"name has a label that starts or ends with '-'"),
                (["--egress-allow", "a." + "b" * 64 + ".example"],
                 b"label of 64 bytes"),
                (["--egress-deny", "x_y.example"], b"'x_y.example': the "
                 b"name")):
            r = self.a.ctl("policy", "set", "--workspace", "eg", *flags)
            self.assertEqual(r.returncode, EX_USAGE, flags)
            self.assertIn(why, r.stderr)
        c = ipc.Conn(self.a.ctl_sock, "authctl")
        try:
            for eg, why in (
                    ({"mode": "allowlist", "allow": [
                        "a.example", "b.example", "c.example"]},
                     "$.policy.egress.allow: has 3 names; the limit is 2 "
                     "(egress_max_names)"),
                    ({"mode": "allowlist", "allow": ["a.*.example"]},
                     "$.policy.egress.allow[0]: \"a.*.example\" has a '*' "
                     "that is not a leading \"*.\""),
                    ({"mode": "public", "deny": [
                        "a.example", "b.example", "c.example"]},
                     "$.policy.egress.deny: has 3 names; the limit is 2 "
                     "(egress_max_names)")):
                self.assertPolicyRefused(c, "eg", {"egress": eg}, why)
        finally:
            c.close()
        self.assertEqual(self.policy(tok)["egress"]["allow"],
                         ["203.0.113.0/24", "*.github.com", "pkgs.example.org"])
        # A deny list takes names too: public, less them.
        r = self.a.ctl("policy", "set", "--workspace", "eg",
                       "--egress-deny", "Tracker.Example.NET",
                       "--egress-deny", "*.ads.example",
                       "--egress-deny", "192.0.2.0/24")
        self.assertEqual(r.returncode, 0, r.stderr)
        eg = self.policy(tok)["egress"]
        self.assertEqual(eg["mode"], "public")
        self.assertEqual(sorted(eg["deny"]), ["*.ads.example",
                                              "192.0.2.0/24",
                                              "tracker.example.net"])

    def test_bad_input_refused_and_nothing_lost(self):
        tok, _, _ = self.a.issue("eg", "--allow-network", "--max-vms", "3")
        self.assertEqual(self.a.ctl("policy", "set", "--workspace", "eg",
                                    "--egress-allow",
                                    "203.0.113.0/24").returncode, 0)
        before = self.policy(tok)
        # authctl refuses what it can check, naming the entry ...
        for flags, why in (
                (["--egress-allow", "10.0.0.1/8"], b"'10.0.0.1/8'"),
                (["--egress-deny", "1.2.3.4"], b"'1.2.3.4'"),
                (["--egress-allow", "192.0.2.0/24", "--egress-deny",
                  "198.51.100.0/24"], b"contradict"),
                (["--egress-public", "--egress-deny", "198.51.100.0/24"],
                 b"contradict")):
            r = self.a.ctl("policy", "set", "--workspace", "eg", *flags)
            self.assertEqual(r.returncode, EX_USAGE, flags)
            self.assertIn(why, r.stderr)
        # ... and authd refuses the same and more from any client.
        c = ipc.Conn(self.a.ctl_sock, "authctl")
        try:
            for eg, why in (
                    ({"mode": "allowlist", "allow": ["10.0.0.1/8"]},
                     "$.policy.egress.allow[0]: 10.0.0.1/8 has host bits "
                     "set; its network is 10.0.0.0/8"),
                    ({"mode": "allowlist", "allow": [
                        "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24",
                        "198.18.0.0/15"]},
                     "$.policy.egress.allow: has 4 entries; the limit is 3 "
                     "(egress_max_cidrs)"),
                    ({"mode": "public", "allow": []},
                     "mode public takes \"deny\""),
                    ({"mode": "allowlist", "allow": ["::/0"]},
                     "is not an IPv4 prefix"),
                    ({"mode": "everything"}, "$.policy.egress.mode")):
                self.assertPolicyRefused(c, "eg", {"max_vms": 1,
                                                   "egress": eg}, why)
        finally:
            c.close()
        # Nothing of the old policy was lost, the quota sent alongside
        # the refused list neither.
        self.assertEqual(self.policy(tok), before)
        self.assertEqual(before["max_vms"], 3)


class Gates(AuthdTest):
    """The actions a human must approve (#28): set, kept and cleared by
    authctl one class at a time, shown, stored, handed to vmmd in the
    policy; mistakes refused with the valid choices named."""

    def policy(self, tok):
        rtype, body = self.a.verify(tok)
        self.assertEqual(rtype, ipc.AUTH_VERIFY_RESULT, body)
        return body["policy"]

    def set(self, *flags):
        r = self.a.ctl("policy", "set", "--workspace", "g", *flags)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode()

    def test_set_keep_clear_show(self):
        tok, out, _ = self.a.issue("g", "--gate", "destroy")
        self.assertEqual(out["policy"]["approvals"],
                         dict(NO_GATES, destroy=2))
        self.assertEqual(self.policy(tok)["approvals"],
                         dict(NO_GATES, destroy=2))
        # Gating exec leaves the destroy gate as it was.
        self.assertIn("approvals:    exec 1, destroy 2\n",
                      self.set("--supervised"))
        self.assertEqual(self.policy(tok)["approvals"],
                         dict(NO_GATES, exec=1, destroy=2))
        self.set("--gate", "destroy=1", "--gate", "network=2",
                 "--gate", "snapshot_delete", "--gate", "broker_pipe")
        self.assertEqual(self.policy(tok)["approvals"], dict(
            NO_GATES, exec=1, destroy=1, network=2, snapshot_delete=2,
            broker_pipe=1))
        self.set("--ungate", "exec", "--ungate", "network")
        self.assertEqual(self.policy(tok)["approvals"], dict(
            NO_GATES, destroy=1, snapshot_delete=2, broker_pipe=1))
        # Resources: a threshold, then the gate alone keeps it.
        self.assertIn("resources 1 (over 8 vCPUs)", self.set(
            "--gate", "resources", "--gate-vcpus-above", "8"))
        self.assertIn("resources 2 (over 4096 MiB or 8 vCPUs)", self.set(
            "--gate", "resources=2", "--gate-memory-above", "4096"))
        want = dict(NO_GATES, destroy=1, snapshot_delete=2, broker_pipe=1,
                    resources=2, memory_mib_above=4096, vcpus_above=8)
        self.assertEqual(self.policy(tok)["approvals"], want)
        # Other policy changes keep the gates.
        self.set("--max-vms", "5")
        self.assertEqual(self.policy(tok)["approvals"], want)
        r = self.a.ctl("show", "--workspace", "g")
        self.assertIn(b"approvals:    resources 2 (over 4096 MiB or 8 "
                      b"vCPUs), destroy 1, snapshot_delete 2, broker_pipe "
                      b"1\n", r.stdout)
        # Reissuing with the same gates is no change; other gates are.
        self.a.issue("g", "--gate", "destroy=1")
        r = self.a.ctl("issue", "--workspace", "g", "--stdout", "--gate",
                       "exec")
        self.assertEqual(r.returncode, EX_REFUSED)
        self.assertIn(b"conflict: workspace g exists with another policy",
                      r.stderr)
        # They are in the database.
        self.a.stop()
        self.a.start()
        self.assertEqual(self.policy(tok)["approvals"], want)
        self.assertIn("approvals:    none\n", self.set(
            "--ungate", "destroy", "--ungate", "resources", "--ungate",
            "snapshot_delete", "--ungate", "broker_pipe"))
        self.assertEqual(self.policy(tok)["approvals"], dict(
            NO_GATES, memory_mib_above=4096, vcpus_above=8))

    def test_refusals_name_the_choices(self):
        tok, _, _ = self.a.issue("g", "--gate", "destroy")
        before = self.policy(tok)
        classes = (b"(the classes are exec, network, resources, destroy, "
                   b"snapshot_delete, broker_pipe)")
        for flags, why in (
                (["--gate", "deploy"],
                 b"--gate 'deploy': no such gated action " + classes),
                (["--ungate", "vm_exec"],
                 b"--ungate 'vm_exec': no such gated action " + classes),
                (["--gate", "exec=3"],
                 b"--gate: '3' is not a number between 1 and 2"),
                (["--gate", "exec=0"],
                 b"--gate: '0' is not a number between 1 and 2"),
                (["--ungate", "exec=1"],
                 b"--ungate 'exec=1': takes a class alone"),
                (["--supervised", "--ungate", "exec"],
                 b"exec is named twice"),
                (["--gate-vcpus-above", "1025"],
                 b"--gate-vcpus-above: '1025' is not a number between 0 "
                 b"and 1024"),
                (["--gate-memory-above", "-1"],
                 b"--gate-memory-above: '-1' is not a number"),
                (["--gate", "resources", "--gate-memory-above", "0",
                  "--gate-vcpus-above", "0"],
                 b"--gate resources needs a threshold: --gate-memory-above "
                 b"MIB or --gate-vcpus-above N")):
            r = self.a.ctl("policy", "set", "--workspace", "g", *flags)
            self.assertEqual(r.returncode, EX_USAGE, flags)
            self.assertIn(why, r.stderr)
        # A new workspace has no threshold stored: authctl says so ...
        r = self.a.ctl("issue", "--workspace", "h", "--stdout", "--gate",
                       "resources")
        self.assertEqual(r.returncode, EX_USAGE)
        self.assertIn(b"--gate resources needs a threshold", r.stderr)
        r = self.a.ctl("rotate", "--workspace", "g", "--stdout", "--gate",
                       "exec")
        self.assertEqual(r.returncode, EX_USAGE)
        self.assertIn(b"--gate: not an option of 'rotate'", r.stderr)
        # ... and for a stored workspace authd does, after the merge.
        r = self.a.ctl("policy", "set", "--workspace", "g", "--gate",
                       "resources")
        self.assertEqual(r.returncode, EX_REFUSED)
        self.assertIn(b"invalid_argument: a resources gate needs a "
                      b"threshold: memory_mib_above or vcpus_above",
                      r.stderr)
        # authd refuses the same and more from any client.
        c = ipc.Conn(self.a.ctl_sock, "authctl")
        try:
            for ga, why in (
                    ({"deploy": 1}, "$.policy.approvals: has an unknown "
                     "key (known: exec, network, resources, destroy, "
                     "snapshot_delete, broker_pipe, memory_mib_above, "
                     "vcpus_above)"),
                    ({"exec": 3}, "policy.approvals.exec"),
                    ({"exec": "1"}, "policy.approvals.exec"),
                    ({"vcpus_above": 1.5}, "policy.approvals.vcpus_above"),
                    ({"resources": 1, "vcpus_above": 0},
                     "a resources gate needs a threshold"),
                    ([], "policy.approvals")):
                self.assertPolicyRefused(c, "g", {"max_vms": 1,
                                                  "approvals": ga}, why)
            rtype, body = c.call(ipc.AUTHCTL_ISSUE, {
                "workspace": "h", "policy": {"approvals": {
                    "resources": 1}}})
            self.assertEqual(rtype, ipc.IPC_ERROR)
            self.assertEqual(body["error"]["code"], "invalid_argument")
        finally:
            c.close()
        # Nothing changed, nothing was made.
        self.assertEqual(self.policy(tok), before)
        r = self.a.ctl("show", "--workspace", "h")
        self.assertEqual(r.returncode, EX_REFUSED)

    def test_schema_3_database_migrates(self):
        """A database authd wrote before gates existed (schema 3) is
        migrated in place: its workspaces keep their credentials and
        policies and gate nothing until told to."""
        tok, _, _ = self.a.issue("old", "--max-vms", "3",
                                 "--egress-rate", "65536")
        self.a.stop()
        st = os.stat(self.a.db)
        db = sqlite3.connect(self.a.db)
        db.execute("ALTER TABLE workspaces DROP COLUMN approvals")
        db.execute("PRAGMA user_version = 3")
        db.commit()
        db.close()
        for f in os.listdir(os.path.dirname(self.a.db)):
            os.chown(os.path.join(os.path.dirname(self.a.db), f),
                     st.st_uid, st.st_gid)
        self.assertNotIn("approvals", self.columns())
        self.a.start()
        pol = self.policy(tok)
        self.assertEqual(pol["approvals"], NO_GATES)
        self.assertEqual((pol["max_vms"], pol["egress_rate"]), (3, 65536))
        r = self.a.ctl("policy", "set", "--workspace", "old", "--gate",
                       "exec=2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.a.stop()
        self.assertIn("approvals", self.columns())
        db = sqlite3.connect("file:%s?mode=ro" % self.a.db, uri=True)
        self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 4)
        db.close()
        self.a.start()
        self.assertEqual(self.policy(tok)["approvals"],
                         dict(NO_GATES, exec=2))

    def columns(self):
        db = sqlite3.connect("file:%s?mode=ro" % self.a.db, uri=True)
        try:
            return [r[1] for r in db.execute(
                "PRAGMA table_info(workspaces)")]
        finally:
            db.close()


class Revoked(AuthdTest):
    """IPC_AUTH_REVOKED: which of a list of workspaces are revoked, for
    the revocations vmmd missed while it was away."""

    def test_answers_the_revoked_of_a_list(self):
        self.a.issue("rv-gone")
        self.a.issue("rv-active")
        outs = [self.a.issue("rv-tokens")[1] for _ in range(2)]
        r = self.a.ctl("revoke-workspace", "--workspace", "rv-gone")
        self.assertEqual(r.returncode, 0, r.stderr)
        # Every credential revoked one by one: the workspace is not.
        for out in outs:
            r = self.a.ctl("revoke-token", "--credential",
                           out["credential_id"])
            self.assertEqual(r.returncode, 0, r.stderr)
        c = self.a.peer()
        rtype, body = c.call(ipc.AUTH_REVOKED, {"workspaces": [
            "rv-active", "rv-gone", "rv-unknown", "rv-tokens"]})
        self.assertEqual(rtype, ipc.AUTH_REVOKED_RESULT, body)
        self.assertEqual(body, {"revoked": ["rv-gone"]})
        rtype, body = c.call(ipc.AUTH_REVOKED, {"workspaces": []})
        self.assertEqual((rtype, body),
                         (ipc.AUTH_REVOKED_RESULT, {"revoked": []}))
        # The most one request may name, all of them revoked but one.
        names = ["rv-n%d" % i for i in range(ipc.AUTH_REVOKED_MAX - 1)]
        rtype, body = c.call(ipc.AUTH_REVOKED,
                             {"workspaces": names + ["rv-gone"]})
        self.assertEqual((rtype, body),
                         (ipc.AUTH_REVOKED_RESULT, {"revoked": ["rv-gone"]}))
        c.close()

    def test_refuses_bad_lists(self):
        c = self.a.peer()
        cases = [
            ({"workspaces": ["w%d" % i for i in
                             range(ipc.AUTH_REVOKED_MAX + 1)]},
             "at most 256 in one request (IPC_AUTH_REVOKED_MAX)"),
            ({"workspaces": ["ok", 7]}, "$.workspaces[1]: must be a string"),
            ({"workspaces": ["ok", "Not_Valid"]}, "$.workspaces[1]: "
             "workspace id may contain only lowercase"),
            ({"workspaces": ["x" * 64]}, "$.workspaces[0]: workspace id "
             "must be 1 to 63"),
            ({"workspaces": [""]}, "$.workspaces[0]: workspace id must be"),
            ({"workspaces": ["a", "b", "a"]},
             "$.workspaces[2]: repeats $.workspaces[0]"),
            ({"workspaces": "a"}, "$.workspaces: must be an array"),
            ({}, "workspaces"),
            ({"workspaces": [], "workspace": "a"}, "does not take"),
        ]
        for body, want in cases:
            rtype, reply = c.call(ipc.AUTH_REVOKED, body)
            self.assertEqual(rtype, ipc.IPC_ERROR, body)
            self.assertEqual(reply["error"]["code"], "invalid_argument")
            self.assertIn(want, reply["error"]["message"])
        # The connection still serves.
        rtype, reply = c.call(ipc.AUTH_REVOKED, {"workspaces": ["a"]})
        self.assertEqual((rtype, reply),
                         (ipc.AUTH_REVOKED_RESULT, {"revoked": []}))
        c.close()


class Peers(AuthdTest):
    def test_wrong_uid_refused_on_authd_sock(self):
        uid, gid = nobody()
        sock = self.a.sock

        def attempt():
            c = None
            try:
                c = ipc.Conn(sock, "mcpd", hello=False)
                c.send_raw(ipc.frame(ipc.IPC_HELLO,
                                     {"version": 1, "role": "mcpd"}))
                c.recv()
                c.call(ipc.AUTH_VERIFY, {"credential": "x"})
                return "served"
            except (ipc.Closed, ConnectionResetError, BrokenPipeError):
                return "closed"
            finally:
                if c is not None:
                    c.close()
        self.assertEqual(as_user(uid, gid, attempt), "closed")
        self.assertRegex(self.a.log(), r"refused peer pid \d+ uid %d" % uid)
        # Root, the configured peer, is still served.
        self.assertUnauthorized(self.a.verify("x"))

    def test_wrong_uid_refused_on_authctl_sock(self):
        uid, gid = nobody()
        r = subprocess.run([AUTHCTL, "--socket", self.a.ctl_sock, "list"],
                           capture_output=True, user=uid, group=gid,
                           extra_groups=[], timeout=20)
        self.assertEqual(r.returncode, EX_UNREACHABLE, r.stderr)
        self.assertIn(b"admin group", r.stderr)
        self.assertRegex(self.a.log(), r"authctl.sock: refused peer pid "
                         r"\d+ uid %d" % uid)
        # The same user in the admin group (a supplementary group) may.
        admin = grp.getgrnam("mcpvm-admin").gr_gid
        r = subprocess.run([AUTHCTL, "--socket", self.a.ctl_sock, "list"],
                           capture_output=True, user=uid, group=gid,
                           extra_groups=[admin], timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"WORKSPACE", r.stdout)

    def test_bad_messages_close_only_that_connection(self):
        tok, _, _ = self.a.issue("ok")
        good = self.a.peer()
        bad_frames = [
            ipc.frame(ipc.AUTHCTL_ISSUE, {"workspace": "x"}, 1),  # not allowed
            ipc.frame(999, {}, 1),
            ipc.frame(ipc.AUTH_VERIFY, b"{not json", 1),
            ipc.HDR.pack(ipc.AUTH_VERIFY, 2 << 20, 1, 0),  # too long
            ipc.frame(ipc.AUTH_VERIFY, {"credential": tok}, 1, 0x80),
            ipc.frame(ipc.IPC_HELLO, {"version": 1, "role": "x"}, 1),
        ]
        for data in bad_frames:
            c = self.a.peer()
            c.send_raw(data)
            self.assertTrue(c.is_closed(), data[:32])
            c.close()
            self.assertEqual(self.a.verify(tok, good)[0],
                             ipc.AUTH_VERIFY_RESULT)
        # Before HELLO, anything else closes the connection too.
        c = ipc.Conn(self.a.sock, hello=False)
        c.send_raw(ipc.frame(ipc.AUTH_VERIFY, {"credential": tok}, 1))
        self.assertTrue(c.is_closed())
        c.close()
        # A request authctl.sock does not take closes that connection.
        c = ipc.Conn(self.a.ctl_sock, "authctl")
        c.send_raw(ipc.frame(ipc.AUTH_VERIFY, {"credential": tok}, 1))
        self.assertTrue(c.is_closed())
        c.close()
        # An allowed type with a bad body is answered, not disconnected.
        rtype, body = good.call(ipc.AUTH_VERIFY, {"credential": 5})
        self.assertEqual(rtype, ipc.IPC_ERROR)
        self.assertEqual(body["error"]["code"], "invalid_argument")
        rtype, body = good.call(ipc.AUTH_VERIFY, {"credential": tok,
                                                  "extra": 1})
        self.assertEqual(body["error"]["code"], "invalid_argument")
        self.assertEqual(self.a.verify(tok, good)[0], ipc.AUTH_VERIFY_RESULT)
        self.assertIsNone(self.a.proc.poll())
        self.assertIn("closing connection", self.a.log())
        good.close()


class Files(AuthdTest):
    def test_modes(self):
        tok, _, path = self.a.issue("m")
        # Exclusive locking keeps the WAL index in memory: no -shm file.
        self.assertFalse(os.path.exists(self.a.db + "-shm"))
        for suffix in ("", "-wal"):
            st = os.stat(self.a.db + suffix)
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o600, suffix)
            self.assertEqual(st.st_uid, pwd.getpwnam("mcpvm-auth").pw_uid)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        # --owner hands the file over; still 0600.
        p = os.path.join(self.a.dir, "owned")
        r = self.a.ctl("issue", "--workspace", "m", "--output", p,
                       "--owner", "nobody")
        self.assertEqual(r.returncode, 0, r.stderr)
        st = os.stat(p)
        self.assertEqual(st.st_uid, nobody()[0])
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)

    def test_never_overwrites_or_follows(self):
        p = os.path.join(self.a.dir, "exists")
        with open(p, "w") as f:
            f.write("keep")
        r = self.a.ctl("issue", "--workspace", "x", "--output", p)
        self.assertEqual(r.returncode, EX_TOKENFILE)
        self.assertIn(b"never overwrites", r.stderr)
        with open(p) as f:
            self.assertEqual(f.read(), "keep")
        link = os.path.join(self.a.dir, "link")
        target = os.path.join(self.a.dir, "target")
        os.symlink(target, link)
        r = self.a.ctl("issue", "--workspace", "x", "--output", link)
        self.assertEqual(r.returncode, EX_TOKENFILE)
        self.assertFalse(os.path.exists(target))
        # Nothing was issued for either attempt.
        r = self.a.ctl("show", "--workspace", "x")
        self.assertEqual(r.returncode, EX_REFUSED)

    def test_token_never_leaks(self):
        toks = [self.a.issue("leak-%d" % i, "--allow-network")[0]
                for i in range(3)]
        r = self.a.ctl("--json", "rotate", "--workspace", "leak-0",
                       "--output", os.path.join(self.a.dir, "r"))
        self.assertEqual(r.returncode, 0)
        self.assertIsNone(TOKEN_RE.search(r.stdout + r.stderr))
        with open(os.path.join(self.a.dir, "r")) as f:
            toks.append(f.read().strip())
        for t in toks:
            self.a.verify(t)
            self.a.verify(t[:-2] + "AA")
        outputs = b""
        for args in (["list"], ["--json", "list"],
                     ["show", "--workspace", "leak-0"],
                     ["--json", "show", "--workspace", "leak-1"]):
            r = self.a.ctl(*args)
            self.assertEqual(r.returncode, 0, r.stderr)
            outputs += r.stdout + r.stderr
        self.a.stop()
        blobs = [outputs, self.a.log().encode()]
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.a.db + suffix):
                with open(self.a.db + suffix, "rb") as f:
                    blobs.append(f.read())
        for t in toks:
            body = t[len("mcpvm_"):].encode()
            for b in blobs:
                self.assertNotIn(body, b)
        self.assertIsNone(TOKEN_RE.search(b"".join(blobs)))

    def test_stdout_only_when_asked(self):
        r = self.a.ctl("issue", "--workspace", "s")
        self.assertEqual(r.returncode, EX_USAGE)
        self.assertIn(b"--output FILE (or --stdout", r.stderr)
        r = self.a.ctl("issue", "--workspace", "s", "--stdout")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 1)
        self.assertRegex(lines[0], r"^mcpvm_[A-Za-z0-9_-]{43}$")
        self.assertEqual(self.a.verify(lines[0])[0], ipc.AUTH_VERIFY_RESULT)
        r = self.a.ctl("--json", "issue", "--workspace", "s", "--stdout")
        tok = json.loads(r.stdout)["credential"]
        self.assertEqual(self.a.verify(tok)[0], ipc.AUTH_VERIFY_RESULT)


class Database(unittest.TestCase):
    def setUp(self):
        self.a = Authd()

    def tearDown(self):
        self.a.cleanup()

    def test_corrupt_database(self):
        os.makedirs(os.path.dirname(self.a.db))
        junk = bytes((i * 7 + 3) & 0xff for i in range(8192))
        with open(self.a.db, "wb") as f:
            f.write(junk)
        os.chmod(self.a.db, 0o600)
        auth = pwd.getpwnam("mcpvm-auth")
        os.chown(os.path.dirname(self.a.db), auth.pw_uid, auth.pw_gid)
        os.chown(self.a.db, auth.pw_uid, auth.pw_gid)
        rc = self.a.start(expect_ready=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("file is not a database", self.a.log())
        self.assertIn(self.a.db, self.a.log())
        with open(self.a.db, "rb") as f:
            self.assertEqual(f.read(), junk)

    def test_unwritable_database_keeps_data(self):
        self.a.start()
        tok, _, _ = self.a.issue("keep")
        self.a.stop()
        with open(self.a.db, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        os.chmod(self.a.db, 0o400)
        rc = self.a.start(expect_ready=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("must be 0600", self.a.log())
        with open(self.a.db, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest)
        # A directory authd cannot write: WAL cannot work there.
        os.chmod(self.a.db, 0o600)
        d = os.path.dirname(self.a.db)
        os.chown(d, 0, 0)
        os.chmod(d, 0o755)
        rc = self.a.start(expect_ready=False)
        self.assertNotEqual(rc, 0)
        # authd checks the directory itself before SQLite gets to it.
        self.assertRegex(self.a.log(), r"database directory .*/authd: "
                         r"not usable as mcpvm-auth")
        auth = pwd.getpwnam("mcpvm-auth")
        os.chown(d, auth.pw_uid, auth.pw_gid)
        self.a.start()
        self.assertEqual(self.a.verify(tok)[0], ipc.AUTH_VERIFY_RESULT)

    def test_sigkill_during_issue_burst(self):
        self.a.start()
        committed = []
        stop = threading.Event()
        c = ipc.Conn(self.a.ctl_sock, "authctl")

        def burst():
            n = 0
            try:
                while not stop.is_set():
                    rtype, body = c.call(ipc.AUTHCTL_ISSUE,
                                         {"workspace": "b%d" % (n % 5)})
                    if rtype == ipc.AUTHCTL_ISSUE + 1:
                        committed.append(body["credential"])
                    n += 1
            except (ipc.Closed, ConnectionResetError, OSError):
                pass
        t = threading.Thread(target=burst)
        t.start()
        deadline = time.monotonic() + 10
        while len(committed) < 40 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.a.stop(signal.SIGKILL)
        stop.set()
        t.join(10)
        c.close()
        self.assertGreaterEqual(len(committed), 40)
        self.a.start()
        v = self.a.peer()
        for tok in committed:
            self.assertEqual(self.a.verify(tok, v)[0],
                             ipc.AUTH_VERIFY_RESULT)
        v.close()

    def test_second_authd_on_same_database_refuses(self):
        self.a.start()
        tok, _, _ = self.a.issue("one")
        other = Authd()
        try:
            # Its own sockets, the first one's database.
            with open(other.conf, "a") as f:
                f.write("database = %s\n" % self.a.db)
            rc = other.start(expect_ready=False)
            self.assertNotEqual(rc, 0)
            self.assertIn("database is locked (is another authd using it?)",
                          other.log())
        finally:
            other.cleanup()
        self.assertEqual(self.a.verify(tok)[0], ipc.AUTH_VERIFY_RESULT)

    def test_bad_config_is_reported_with_line(self):
        with open(self.a.conf, "a") as f:
            f.write("fail_rate = lots\n")
        rc = self.a.start(expect_ready=False)
        self.assertNotEqual(rc, 0)
        self.assertRegex(self.a.log(), r"mcpvm.conf:\d+: .*fail_rate")


class Events(AuthdTest):
    def subscriber(self):
        s = self.a.peer()
        self.assertEqual(s.call(ipc.AUTH_SUBSCRIBE, {})[0],
                         ipc.AUTH_SUBSCRIBE_RESULT)
        return s

    def test_revocation_reaches_subscriber(self):
        tok, out, _ = self.a.issue("ev")
        tok2, out2, _ = self.a.issue("ev")
        s = self.subscriber()
        t0 = time.monotonic()
        r = self.a.ctl("revoke-token", "--credential", out["credential_id"])
        self.assertEqual(r.returncode, 0)
        self.assertEqual(s.next_event(), (ipc.AUTH_EVENT, {
            "workspace": "ev", "credential_id": out["credential_id"],
            "reason": "revoked"}))
        self.assertLess(time.monotonic() - t0, 5)
        t0 = time.monotonic()
        r = self.a.ctl("revoke-workspace", "--workspace", "ev")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(s.next_event(), (ipc.AUTH_EVENT, {
            "workspace": "ev", "reason": "revoked"}))
        self.assertLess(time.monotonic() - t0, 5)
        s.close()

    def test_expiry_reaches_subscriber(self):
        s = self.subscriber()
        # 3 s: the verify before the expiry must come first even under
        # ASan on a loaded machine (with 1 s it once did not).
        tok, out, _ = self.a.issue("exp", "--ttl", "3")
        self.assertEqual(self.a.verify(tok)[0], ipc.AUTH_VERIFY_RESULT)
        s.sock.settimeout(8)
        rtype, body = s.next_event()
        now = time.time()
        self.assertEqual((rtype, body), (ipc.AUTH_EVENT, {
            "workspace": "exp", "credential_id": out["credential_id"],
            "reason": "expired"}))
        self.assertLess(now - out["expires_at"], 5)
        self.assertUnauthorized(self.a.verify(tok))
        s.close()

    def test_rotate_and_policy_events(self):
        tok, out, _ = self.a.issue("rp")
        s = self.subscriber()
        r = self.a.ctl("rotate", "--workspace", "rp", "--stdout")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(s.next_event()[1], {
            "workspace": "rp", "credential_id": out["credential_id"],
            "reason": "revoked"})
        r = self.a.ctl("policy", "set", "--workspace", "rp", "--max-vms", "4")
        self.assertEqual(r.returncode, 0)
        # The event carries the new policy, for vmmd's running VMs.
        ev = s.next_event()[1]
        self.assertEqual((ev["workspace"], ev["reason"]), ("rp", "policy"))
        # The whole policy, as a verify answer carries it.
        self.assertEqual(sorted(ev["policy"]), [
            "approvals", "egress", "egress_rate", "images", "max_streams",
            "max_vms", "memory_mib", "network", "storage_gib"])
        self.assertEqual(ev["policy"]["max_vms"], 4)
        self.assertEqual(ev["policy"]["approvals"], NO_GATES)
        r = self.a.ctl("policy", "set", "--workspace", "rp",
                       "--egress-rate", "65536", "--egress-allow",
                       "203.0.113.0/24")
        self.assertEqual(r.returncode, 0, r.stderr)
        ev = s.next_event()[1]
        self.assertEqual(ev["policy"]["egress_rate"], 65536)
        self.assertEqual(ev["policy"]["egress"],
                         {"mode": "allowlist", "allow": ["203.0.113.0/24"]})
        # Gates travel the same way, and the verify answer agrees.
        r = self.a.ctl("policy", "set", "--workspace", "rp", "--supervised",
                       "--gate", "destroy")
        self.assertEqual(r.returncode, 0, r.stderr)
        ev = s.next_event()[1]
        self.assertEqual(ev["policy"]["approvals"],
                         dict(NO_GATES, exec=1, destroy=2))
        tok, _, _ = self.a.issue("rp")
        rtype, body = self.a.verify(tok)
        self.assertEqual(rtype, ipc.AUTH_VERIFY_RESULT)
        self.assertEqual(body["policy"], ev["policy"])
        s.close()


class RateLimit(AuthdTest):
    extra = "fail_rate = 20\nfail_burst = 5\nfail_queue = 10\n"

    def test_failures_are_slowed_valid_ones_are_not(self):
        tok, _, _ = self.a.issue("rl")
        c = self.a.peer()
        bad = "mcpvm_" + "B" * 42 + "A"
        ids = [c.send(ipc.AUTH_VERIFY, {"credential": bad})
               for _ in range(20)]
        t0 = time.monotonic()
        good = c.send(ipc.AUTH_VERIFY, {"credential": tok})
        replies = {}
        order = []
        while len(replies) < 21:
            rtype, rid, flags, body = c.recv()
            replies[rid] = (rtype, body, time.monotonic() - t0)
            order.append(rid)
        # The valid one overtook the held-back failures: before it came
        # only the burst's 5 answers and the 5 refused as busy.
        self.assertEqual(replies[good][0], ipc.AUTH_VERIFY_RESULT)
        before = [replies[i][1]["error"]["code"]
                  for i in order[:order.index(good)]]
        self.assertEqual(sorted(before), ["busy"] * 5 + ["unauthorized"] * 5)
        self.assertLess(replies[good][2], 0.5)
        codes = [replies[i][1]["error"]["code"] for i in ids]
        # 5 at once (burst), 10 held back, 5 refused as busy.
        self.assertEqual(codes.count("unauthorized"), 15)
        self.assertEqual(codes.count("busy"), 5)
        slowest = max(replies[i][2] for i in ids)
        self.assertGreater(slowest, 0.3)   # 10 held back at 20/s
        c.close()


class Cli(AuthdTest):
    def test_usage_and_exit_codes(self):
        r = self.a.ctl("issue", "--workspace", "Bad_Id", "--stdout")
        self.assertEqual(r.returncode, EX_USAGE)
        self.assertIn(b"lowercase letters, digits and '-'", r.stderr)
        r = self.a.ctl("issue", "--workspace", "a" * 64, "--stdout")
        self.assertEqual(r.returncode, EX_USAGE)
        self.assertIn(b"1 to 63", r.stderr)
        r = self.a.ctl("frobnicate")
        self.assertEqual(r.returncode, EX_USAGE)
        r = self.a.ctl("show")
        self.assertEqual(r.returncode, EX_USAGE)
        r = self.a.ctl("list", "--allow-network")
        self.assertEqual(r.returncode, EX_USAGE)
        r = self.a.ctl("issue", "--workspace", "t", "--stdout", "--ttl",
                       "soon")
        self.assertEqual(r.returncode, EX_USAGE)
        r = self.a.ctl("--json", "show", "--workspace", "missing")
        self.assertEqual(r.returncode, EX_REFUSED)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "not_found")
        r = subprocess.run([AUTHCTL, "--socket",
                            os.path.join(self.a.dir, "nope.sock"), "list"],
                           capture_output=True)
        self.assertEqual(r.returncode, EX_UNREACHABLE)
        self.assertIn(b"cannot reach authd", r.stderr)
        # Without --socket the socket comes from [authd] ctl_socket.
        r = subprocess.run([AUTHCTL, "--config", self.a.conf, "list"],
                           capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([AUTHCTL, "--config", "/nonexistent.conf",
                            "list"], capture_output=True)
        self.assertEqual(r.returncode, EX_USAGE)

    def test_list_and_show_tables(self):
        self.a.issue("tab-a", "--allow-network", "--image", "img1")
        self.a.issue("tab-b", "--ttl", "2d")
        r = self.a.ctl("list")
        lines = r.stdout.decode().splitlines()
        self.assertTrue(lines[0].startswith("WORKSPACE"))
        self.assertRegex(lines[1], r"^tab-a\s+active\s+1\s+1\s+on\s.*img1$")
        self.assertRegex(lines[2], r"^tab-b\s+active\s+1\s+1\s+off\s.*all$")
        r = self.a.ctl("--json", "list")
        ws = json.loads(r.stdout)["workspaces"]
        self.assertEqual([w["workspace"] for w in ws], ["tab-a", "tab-b"])
        r = self.a.ctl("show", "--workspace", "tab-b")
        self.assertRegex(r.stdout.decode(),
                         r"\n[0-9a-f]{16}  active\s+\S+Z\s+\S+Z\s+-\n")


if __name__ == "__main__":
    if os.geteuid() != 0:
        taplib.skip_all("needs root: authd drops to mcpvm-auth and the "
                        "wrong-uid tests run clients as nobody")
    for user in ("mcpvm-auth", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            taplib.skip_all("no user %s (tests/run creates it)" % user)
    if not AUTHD or not AUTHCTL:
        sys.exit("AUTHD= and AUTHCTL= must name the built binaries")
    taplib.run_unittest()
