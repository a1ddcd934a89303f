#!/usr/bin/env python3
"""Daemons started in any order, into directories nobody made (issue 13):
mcpd first, before authd exists and before the runtime directory does;
then authd, which makes the runtime, state and database directories
itself.  mcpd says once that authd is away, retries, and says when it got
through; nothing logs "cannot read its connection first".  authd then
restarts into the directories it left, and an authd whose database
directory its user cannot write says so and exits.

Needs root (the daemons drop to mcpvm and mcpvm-auth) and AUTHD=, AUTHCTL=,
MCPD= from the environment.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import taplib

AUTHD = os.environ.get("AUTHD", "")
AUTHCTL = os.environ.get("AUTHCTL", "")
MCPD = os.environ.get("MCPD", "")
PORT = 18190


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def wait_for(pred, seconds, what):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class StartOrder(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root")
        self.dir = tempfile.mkdtemp(prefix="start-order.")
        os.chmod(self.dir, 0o755)    # the daemons' users pass through
        # Neither exists: the daemons make them.
        self.run = os.path.join(self.dir, "run")
        self.state = os.path.join(self.dir, "state")
        self.conf = os.path.join(self.dir, "mcpvm.conf")
        with open(self.conf, "w") as f:
            f.write("[paths]\nruntime_dir = %s\nstate_dir = %s\n"
                    "[authd]\npeers = root mcpvm\n"
                    "[mcpd]\nlisten = 127.0.0.1:%d\n"
                    "allowed_hosts = 127.0.0.1\n"
                    % (self.run, self.state, PORT))
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                p.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, exe, name):
        log = os.path.join(self.dir, name + ".log")
        with open(log, "ab") as f:
            p = subprocess.Popen([exe, "-d", "-f", self.conf], stdout=f,
                                 stderr=f)
        self.procs.append(p)
        return p, log

    def test_mcpd_before_authd(self):
        mcpd, mlog = self.start(MCPD, "mcpd")
        wait_for(lambda: "started (" in read(mlog) or mcpd.poll() is not
                 None, 20, "mcpd to start")
        self.assertIsNone(mcpd.poll(), read(mlog))
        # Three retries with nobody there: one warning, not three.
        time.sleep(3.2)
        self.assertEqual(read(mlog).count("authd at "), 1, read(mlog))
        self.assertIn("retrying", read(mlog))

        authd, alog = self.start(AUTHD, "authd")
        wait_for(lambda: "ready:" in read(alog) or authd.poll() is not
                 None, 20, "authd ready")
        self.assertIsNone(authd.poll(), read(alog))
        st = os.stat(self.run)
        self.assertEqual(oct(st.st_mode & 0o7777), "0o755")
        self.assertEqual(oct(os.stat(self.state).st_mode & 0o7777), "0o711")
        db_dir = os.path.join(self.state, "authd")
        st = os.stat(db_dir)
        self.assertEqual(oct(st.st_mode & 0o7777), "0o700")
        import pwd
        self.assertEqual(st.st_uid, pwd.getpwnam("mcpvm-auth").pw_uid)

        wait_for(lambda: "authd at %s/authd.sock: connected" % self.run
                 in read(mlog), 10, "mcpd to reach authd")
        log = read(mlog) + read(alog)
        self.assertNotIn("cannot read its connection first", log)
        # The credential path works end to end through mcpd's verifier.
        tok = os.path.join(self.dir, "t.token")
        subprocess.run([AUTHCTL, "--config", self.conf, "issue",
                        "--workspace", "order", "--output", tok],
                       check=True, capture_output=True)

        # A second start finds everything made and keeps the credential.
        authd.terminate()
        authd.wait(10)
        authd, alog2 = self.start(AUTHD, "authd2")
        wait_for(lambda: "ready:" in read(alog2) or authd.poll() is not
                 None, 20, "authd ready again")
        self.assertNotIn("made ", read(alog2))
        out = subprocess.run([AUTHCTL, "--config", self.conf, "show",
                              "--workspace", "order"], check=True,
                             capture_output=True, text=True).stdout
        self.assertIn("order", out)

    def test_unusable_database_directory(self):
        os.mkdir(self.state, 0o711)
        os.mkdir(os.path.join(self.state, "authd"), 0o700)   # root's
        authd, alog = self.start(AUTHD, "authd")
        authd.wait(20)
        self.assertNotEqual(authd.returncode, 0)
        self.assertIn("not usable as mcpvm-auth", read(alog))


if __name__ == "__main__":
    if not (AUTHD and AUTHCTL and MCPD):
        print("AUTHD, AUTHCTL and MCPD must be set", file=sys.stderr)
        sys.exit(2)
    taplib.run_unittest()
