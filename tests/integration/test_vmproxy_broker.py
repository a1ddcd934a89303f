#!/usr/bin/env python3
# vmproxy's side of the job broker pipe, against a fake guest that may send
# anything: the real vmproxy binary, its IPC to "vmmd" on a socketpair, and
# the guest link on a Unix socket.  A guest connection is routed only with
# the route secret vmmd gave: a wrong secret, a job id alone, a malformed
# preamble, one that never completes (broker_preamble_seconds) and one past
# broker_max_pending are closed; a routed one waits for the controller and
# then arrives as open + data, both ways, with the controller's close after
# its data as EOF.
#
# Environment: VMPROXY.  TAP on stdout.  Needs root (vmproxy runs as a
# VM uid, which only root can become).
import json
import os
import secrets
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
import vmmd_ipc as ipc  # noqa: E402
from taplib import ok, note  # noqa: E402

HDR = struct.Struct("<BBHII")
CTRL, BODY, OPEN, OPEN_OK, OPEN_FAIL, DATA, EOF, CLOSE, WINDOW, ACCEPT = \
    range(1, 11)
GUEST = 0x80000000
ROUTE, ATTACH, ATTACH_RESULT, LIMITS = 608, 609, 610, 611
UID = 939990


class FakeGuest:
    """The guest end of the link: answers hello, makes connections."""

    def __init__(self, path):
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        os.chmod(path, 0o777)
        self.srv.listen(1)
        self.s = None
        self.lock = threading.Condition()
        self.frames = []        # (type, channel, payload) but CTRL
        self.hello = False
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        self.s, _ = self.srv.accept()
        buf = b""
        try:
            while True:
                d = self.s.recv(65536)
                if not d:
                    break
                buf += d
                while len(buf) >= HDR.size:
                    t, fl, _, ch, ln = HDR.unpack(buf[:HDR.size])
                    if len(buf) < HDR.size + ln:
                        break
                    p = buf[HDR.size:HDR.size + ln]
                    buf = buf[HDR.size + ln:]
                    self.frame(t, ch, p)
        except OSError:
            pass

    def frame(self, t, ch, p):
        if t == CTRL:
            m = json.loads(p)
            if m.get("op") == "hello":
                self.send(CTRL, 0, json.dumps({
                    "id": m["id"], "ok": True, "version": 1,
                    "boot_id": "fake", "jobs": 0}).encode())
                with self.lock:
                    self.hello = True
                    self.lock.notify_all()
            return
        if t == CLOSE and (ch, CLOSE) not in self.answered:
            # Our answer, as glink gives it.
            self.answered.add((ch, CLOSE))
            self.send(CLOSE, ch)
        with self.lock:
            self.frames.append((t, ch, p))
            self.lock.notify_all()

    answered = set()

    def send(self, t, ch, p=b""):
        self.s.sendall(HDR.pack(t, 0, 0, ch, len(p)) + p)

    def wait(self, cond, timeout=10):
        with self.lock:
            end = time.monotonic() + timeout
            while not cond():
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(left)
            return True

    def got(self, ch, t):
        return any(f[0] == t and f[1] == ch for f in self.frames)

    def data(self, ch):
        return b"".join(f[2] for f in self.frames if f[0] == DATA and
                        f[1] == ch)


def main():
    if os.geteuid() != 0:
        taplib.skip_all("needs root")
    d = tempfile.mkdtemp(prefix="vmproxy-broker.")
    os.chmod(d, 0o755)
    link = os.path.join(d, "link.sock")
    g = FakeGuest(link)
    a_, b_ = socket.socketpair()

    def demote():
        os.setgroups([])
        os.setgid(UID)
        os.setuid(UID)
    p = subprocess.Popen([os.environ["VMPROXY"], "-d", "-v", "--ipc-fd",
                          str(b_.fileno()), "--link", link, "--vm", "bt"],
                         pass_fds=(b_.fileno(),), preexec_fn=demote,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    b_.close()
    c = ipc.Conn.__new__(ipc.Conn)
    c.sock = a_
    c.sock.settimeout(20)
    c.next_id = 1
    c.fds = []
    try:
        c.send(ipc.HELLO, {"version": 1, "role": "vmmd"}, id=0)
        run(c, g)
    except Exception:
        import traceback
        ok(False, "the run went through", traceback.format_exc())
    finally:
        p.kill()
        out = p.communicate()[0].decode(errors="replace")
        if taplib.failed:
            note("\n".join(out.splitlines()[-40:]))
        bad = [w for w in ("AddressSanitizer", "runtime error:") if w in out]
        ok(not bad, "no sanitizer report from vmproxy", out[-3000:])
    taplib.done()


def run(c, g):
    ok(g.wait(lambda: g.hello), "the fake guest's link is up")
    c.send(LIMITS, {"max_attached": 2, "max_connections": 64,
                    "max_waiting": 32, "buffer_bytes": 1 << 20,
                    "stall_seconds": 10, "max_pending": 3,
                    "preamble_seconds": 1}, id=0)
    job = "j" + secrets.token_hex(12)
    sec = secrets.token_hex(32)
    c.send(ROUTE, {"job_id": job, "secret": sec}, id=0)
    good = ("%s %s\n" % (job, sec)).encode()

    ch = [GUEST | i for i in range(1, 20)]

    def accept(i, payload):
        g.send(ACCEPT, ch[i])
        if payload:
            g.send(DATA, ch[i], payload)

    # Refusals: each is closed by vmproxy, and nothing else happens.
    cases = [
        ("a wrong secret", ("%s %s\n" % (job, secrets.token_hex(32))).encode()),
        ("a job id alone", ("%s\n" % job).encode()),
        ("another job's id", ("j%s %s\n" % (secrets.token_hex(12),
                                            sec)).encode()),
        ("a malformed preamble", b"GET / HTTP/1.0\r\n\r\n"),
        ("uppercase hex", ("%s %s\n" % (job, sec.upper())).encode()),
    ]
    for i, (what, pre) in enumerate(cases):
        accept(i, pre)
        ok(g.wait(lambda: g.got(ch[i], CLOSE)), "refused: %s" % what,
           g.frames[-5:])
    # A preamble that never ends is refused after broker_preamble_seconds;
    # past broker_max_pending (3), one more is refused at once.
    for i in (5, 6, 7):
        accept(i, good[:10])
    accept(8, None)
    ok(g.wait(lambda: g.got(ch[8], CLOSE), 5), "past broker_max_pending: "
       "refused at once")
    ok(g.wait(lambda: all(g.got(ch[i], CLOSE) for i in (5, 6, 7)), 10),
       "preambles that do not end are refused after "
       "broker_preamble_seconds")

    # A routed connection waits for the controller, the preamble split.
    accept(9, good[:30])
    g.send(DATA, ch[9], good[30:] + b"hello")
    time.sleep(0.5)
    ok(not g.got(ch[9], CLOSE), "the right secret is routed: it waits")
    t, body, fd = c.call(ATTACH, {"job_id": job})
    ok(t == ATTACH_RESULT and fd is not None, "attach gives the pipe's "
       "socket", (t, body))
    if fd is None:
        return
    ctl = socket.socket(fileno=fd)
    ctl.settimeout(10)
    t2, body2, _ = c.call(ATTACH, {"job_id": job})
    ok(t2 == ipc.ERROR and body2["error"]["code"] == "conflict",
       "a second attach of the pipe: conflict", body2)
    t3, body3, _ = c.call(ATTACH, {"job_id": "jnone"})
    ok(t3 == ipc.ERROR and body3["error"]["code"] == "not_found",
       "attach of a pipe that is not there: not_found", body3)
    want = struct.pack("!BI", 1, 1) + struct.pack("!BII", 2, 1, 5) + b"hello"
    got = b""
    while len(got) < len(want):
        got += ctl.recv(65536)
    ok(got == want, "the controller gets open(1) and the bytes after the "
       "preamble, not the preamble", got)
    # Controller to guest, then its close: EOF after the data.
    ctl.sendall(struct.pack("!BII", 2, 1, 3) + b"abc" +
                struct.pack("!BI", 3, 1))
    ok(g.wait(lambda: g.got(ch[9], EOF)), "the controller's close reaches "
       "the guest as EOF")
    ok(g.data(ch[9]) == b"abc", "after the data before it", g.data(ch[9]))
    # A conn_id never assigned ends the attachment.
    ctl.sendall(struct.pack("!BII", 2, 9, 1) + b"x")
    ctl.settimeout(10)
    try:
        rest = ctl.recv(100)
    except OSError:
        rest = b""
    ok(rest == b"", "a conn_id never assigned: vmproxy lets the "
       "attachment go", rest)
    ctl.close()
    # The route's removal closes the guest connections of the job.
    accept(10, good)
    time.sleep(0.3)
    c.send(ROUTE, {"job_id": job, "remove": True}, id=0)
    ok(g.wait(lambda: g.got(ch[10], CLOSE)), "removing the route closes "
       "its waiting connection")
    accept(11, good)
    ok(g.wait(lambda: g.got(ch[11], CLOSE)), "and a new one with the old "
       "secret is refused")


if __name__ == "__main__":
    main()
