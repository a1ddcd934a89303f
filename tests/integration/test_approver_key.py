#!/usr/bin/env python3
"""vmctl approver-key, as people use it (#28): init asks for the passphrase
on the terminal (a real pty here), twice, with echo off, and writes an
encrypted key only its owner reads; root enrols the public key into the
approvers directory and revokes it.  TAP; VMCTL names the binary.
"""
import os
import pty
import re
import select
import shutil
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import ok  # noqa: E402

VMCTL = os.environ["VMCTL"]
PASS = "correct horse battery"


def on_pty(args, answers):
    """Run vmctl on a new pty; answer each prompt in turn.  Returns the
    exit status and everything the terminal showed."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execv(VMCTL, [VMCTL] + args)
        finally:
            os._exit(127)
    seen = b""
    pending = list(answers)
    answered = 0
    while True:
        r, _, _ = select.select([fd], [], [], 60)
        if not r:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
        # Each prompt is answered once, after it is shown.
        asked = seen.count(b"passphrase: ") + seen.count(b"Again: ")
        while pending and answered < asked:
            os.write(fd, (pending.pop(0) + "\n").encode())
            answered += 1
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


def run(args, **kw):
    return subprocess.run([VMCTL] + args, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, **kw)


def main():
    if os.geteuid() != 0:
        taplib.skip_all("enrolment needs root")
    tmp = tempfile.mkdtemp(prefix="approver-key.")
    try:
        os.chmod(tmp, 0o755)
        adir = os.path.join(tmp, "approvers")
        conf = os.path.join(tmp, "mcpvm.conf")
        with open(conf, "w") as f:
            f.write("[vmmd]\napprovers_dir = %s\n" % adir)
        key = os.path.join(tmp, "alice.pem")

        # Passphrases that differ: nothing written.
        rc, out = on_pty(["approver-key", "init", "--out", key],
                         [PASS, PASS + "x"])
        ok(rc == 1 and "differ" in out and not os.path.exists(key),
           "init with two different passphrases writes nothing", out)
        rc, out = on_pty(["approver-key", "init", "--out", key],
                         ["short", "short"])
        ok(rc == 1 and "at least 8" in out and not os.path.exists(key),
           "init refuses a passphrase under 8 characters", out)

        rc, out = on_pty(["approver-key", "init", "--out", key],
                         [PASS, PASS])
        ok(rc == 0, "init on a terminal succeeds", out)
        ok("New passphrase:" in out and "Again:" in out,
           "init asks for the passphrase twice", out)
        ok(PASS not in out, "the passphrase is not echoed", out)
        st = os.stat(key)
        ok(stat.S_IMODE(st.st_mode) == 0o600,
           "the key file is mode 0600", oct(st.st_mode))
        text = open(key).read()
        ok(text.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----"),
           "the private key is encrypted PEM", text[:60])
        m = re.search(r"(-----BEGIN PUBLIC KEY-----.*?"
                      r"-----END PUBLIC KEY-----)", out, re.S)
        fp = re.search(r"fingerprint SHA256:([0-9a-f]{64})", out)
        ok(m is not None and fp is not None,
           "init prints the public key and its fingerprint", out)
        pub = os.path.join(tmp, "alice.pub.in")
        with open(pub, "w") as f:
            f.write(m.group(1).replace("\r\n", "\n") + "\n")

        # The passphrase decrypts it (and only it does), with OpenSSL's CLI.
        r = subprocess.run(["openssl", "pkey", "-in", key, "-passin",
                            "pass:" + PASS, "-pubout"],
                           capture_output=True, text=True)
        ok(r.returncode == 0 and r.stdout.strip() ==
           m.group(1).replace("\r\n", "\n").strip(),
           "the passphrase decrypts the key to the printed public key",
           r.stderr)
        r = subprocess.run(["openssl", "pkey", "-in", key, "-passin",
                            "pass:wrong passphrase", "-pubout"],
                           capture_output=True, text=True)
        ok(r.returncode != 0, "another passphrase does not")

        rc, out = on_pty(["approver-key", "init", "--out", key],
                         [PASS, PASS])
        ok(rc == 1 and "exists" in out, "init never overwrites a key", out)

        # Without a terminal there is no passphrase to read.
        other = os.path.join(tmp, "other.pem")
        r = run(["approver-key", "init", "--out", other],
                start_new_session=True)
        ok(r.returncode == 1 and "/dev/tty" in r.stderr and
           not os.path.exists(other),
           "init without a terminal is refused", r.stderr)

        # Enrol.
        r = run(["-c", conf, "approver-key", "enroll", "alice", pub])
        ok(r.returncode == 0 and fp.group(1) in r.stdout,
           "enroll prints the fingerprint", r.stdout + r.stderr)
        dst = os.path.join(adir, "alice.pub")
        st = os.lstat(dst)
        ok(stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644
           and st.st_uid == 0 and st.st_gid == 0,
           "the enrolled key is a root:root 0644 file", oct(st.st_mode))
        ok(sorted(os.listdir(adir)) == ["alice.pub"],
           "no temporary file is left", os.listdir(adir))
        r = run(["-c", conf, "approver-key", "enroll", "alice2", pub])
        ok(r.returncode == 1 and "enrolled already, as alice" in r.stderr,
           "the same key under another name is refused", r.stderr)
        r = run(["-c", conf, "approver-key", "enroll", "../x", pub])
        ok(r.returncode == 2 and "not starting with" in r.stderr,
           "a name with a slash is refused", r.stderr)

        # A directory others may write is refused, as vmmd refuses it.
        os.chmod(adir, 0o775)
        r = run(["-c", conf, "approver-key", "enroll", "bob", pub])
        ok(r.returncode == 1 and "writable by group or others" in r.stderr,
           "a group-writable approvers directory is refused", r.stderr)
        os.chmod(adir, 0o755)

        # Not root: refused before anything is read.
        r = run(["-c", conf, "approver-key", "revoke", "alice"],
                user=65534)
        ok(r.returncode == 1 and "root only" in r.stderr,
           "revoke by another user is refused", r.stderr)

        # Revoke: the key goes, its fingerprint is recorded.
        r = run(["-c", conf, "approver-key", "revoke", "alice"])
        ok(r.returncode == 0 and fp.group(1) in r.stdout,
           "revoke prints the fingerprint", r.stdout + r.stderr)
        ok(not os.path.exists(dst), "revoke removes the key file")
        rev = os.path.join(adir, "revoked")
        ok(open(rev).read() == fp.group(1) + "\n" and
           stat.S_IMODE(os.stat(rev).st_mode) == 0o644,
           "the fingerprint is in the revoked list, root's alone")
        r = run(["-c", conf, "approver-key", "enroll", "alice", pub])
        ok(r.returncode == 1 and "was revoked" in r.stderr,
           "a revoked key cannot be enrolled again", r.stderr)
        r = run(["-c", conf, "approver-key", "revoke", "alice"])
        ok(r.returncode == 1 and "no approver alice" in r.stderr,
           "revoking an unknown approver says so", r.stderr)
        r = run(["approver-key", "enroll", "alice"])
        ok(r.returncode == 2 and r.stderr.startswith("usage: vmctl"),
           "a missing argument is a usage error", r.stderr)
    finally:
        shutil.rmtree(tmp)
    taplib.done()


if __name__ == "__main__":
    main()
