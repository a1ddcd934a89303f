#!/usr/bin/env python3
"""The real vmproxy against a compromised vmmd on its inherited socket:
every message is decoded before a handler runs, a value out of bounds is
answered with invalid_argument and the bound, a well-formed call reaches
its handler (the guest link is down: unavailable), and a message out of
its type's shape (an unknown member, a wrong type, an unknown operation,
a type vmmd never sends) is logged and closes the connection, which ends
vmproxy.  And on the guest's side: the guest's own hello while vmproxy's
is unanswered makes vmproxy ask again on the same connection.  Run as an
unprivileged uid, as vmmd runs it.  TAP output."""

import json
import os
import socket
import struct
import subprocess
import tempfile

import taplib
from taplib import ok

VMPROXY = os.environ["VMPROXY"]

HDR = struct.Struct("=IIII")
HELLO, ERROR, REPLY = 1, 2, 0x2
PROXY_CALL, PROXY_RESULT, PROXY_STREAM_OPEN = 601, 602, 603
NOBODY = 65534


class Proxy:
    """One vmproxy, with our end of its IPC socketpair as vmmd's."""

    def __init__(self, tmp, link=None):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = ours
        self.sock.settimeout(20)
        self.buf = b""
        self.err = tempfile.TemporaryFile(dir=tmp)

        def drop():
            if os.geteuid() == 0:
                os.setgroups([])
                os.setresgid(NOBODY, NOBODY, NOBODY)
                os.setresuid(NOBODY, NOBODY, NOBODY)

        fd = theirs.fileno()
        self.proc = subprocess.Popen(
            [VMPROXY, "-d", "--ipc-fd", str(fd), "--link",
             link or os.path.join(tmp, "no-such-link.sock"),
             "--vm", "peer-test"],
            pass_fds=[fd], stdout=subprocess.DEVNULL, stderr=self.err,
            preexec_fn=drop)
        theirs.close()
        self.sock.sendall(self.frame(HELLO, {"version": 1, "role": "vmmd"}))
        mtype, _, _, body = self.recv()
        assert mtype == HELLO and body.get("version") == 1, body

    @staticmethod
    def frame(mtype, body, mid=0, flags=0):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return HDR.pack(mtype, len(data), mid, flags) + data

    def _fill(self, want):
        while len(self.buf) < want:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk

    def recv(self):
        self._fill(HDR.size)
        mtype, length, mid, flags = HDR.unpack(self.buf[:HDR.size])
        self._fill(HDR.size + length)
        payload = self.buf[HDR.size:HDR.size + length]
        self.buf = self.buf[HDR.size + length:]
        return mtype, mid, flags, json.loads(payload)

    def call(self, mtype, body, mid):
        """The reply to a request, skipping vmproxy's events."""
        self.sock.sendall(self.frame(mtype, body, mid))
        while True:
            rtype, rid, flags, rbody = self.recv()
            if flags & REPLY and rid == mid:
                return rtype, rbody

    def closed(self):
        """Did vmproxy close the connection and exit?"""
        try:
            while True:
                self.recv()
        except (EOFError, ConnectionResetError):
            pass
        except socket.timeout:
            return False, None
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            return False, None
        return True, rc

    def log(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.sock.close()


def error_of(reply):
    rtype, body = reply
    if rtype != ERROR:
        return None, None
    e = body.get("error", {})
    return e.get("code"), e.get("message", "")


LINK_HDR = struct.Struct("<BBHII")     # glink: type, flags, 0, channel, len
LINK_CTRL = 1
GUEST_HELLO = 612


def link_recv(conn, buf):
    """One glink frame from the guest's end of the link: (type, payload,
    rest), or None at EOF."""
    while True:
        if len(buf) >= LINK_HDR.size:
            t, _, _, _, ln = LINK_HDR.unpack(buf[:LINK_HDR.size])
            if len(buf) >= LINK_HDR.size + ln:
                end = LINK_HDR.size + ln
                return t, buf[LINK_HDR.size:end], buf[end:]
        d = conn.recv(65536)
        if not d:
            return None
        buf += d


def link_send(conn, body):
    data = json.dumps(body).encode()
    conn.sendall(LINK_HDR.pack(LINK_CTRL, 0, 0, 0, len(data)) + data)


def hello_first(tmp):
    """guestd opens the port after vmproxy's hello was written: its own
    hello event makes vmproxy ask again on the same connection, instead of
    dropping it when HELLO_WAIT_MS is out."""
    path = os.path.join(tmp, "guest.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o777)
    srv.listen(1)
    srv.settimeout(20)
    p = Proxy(tmp, link=path)
    conn, _ = srv.accept()
    conn.settimeout(10)
    first = link_recv(conn, b"")
    m1 = json.loads(first[1]) if first else {}
    ok(first is not None and m1.get("op") == "hello",
       "vmproxy says hello first on a new link", first)
    # The first hello is "lost": not answered.  The guest's own hello:
    link_send(conn, {"event": "hello", "version": 1, "boot_id": "b" * 32,
                     "jobs": 0})
    second = link_recv(conn, first[2] if first else b"")
    m2 = json.loads(second[1]) if second else {}
    ok(second is not None and m2.get("op") == "hello" and
       m2.get("id") != m1.get("id"),
       "the guest's hello makes vmproxy ask again on the same connection",
       (second, p.log()))
    got = None
    if second is not None:
        link_send(conn, {"id": m2["id"], "ok": True, "version": 1,
                         "boot_id": "b" * 32, "jobs": 0})
        try:
            while got is None:
                mtype, _, _, body = p.recv()
                if mtype == GUEST_HELLO:
                    got = body
        except (EOFError, socket.timeout) as e:
            got = e
    ok(isinstance(got, dict),
       "and its answer tells vmmd the guest is there", (got, p.log()))
    conn.close()
    srv.close()
    p.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="mcpvm-vmproxy-peer-")
    os.chmod(tmp, 0o755)
    hello_first(tmp)

    p = Proxy(tmp)
    code, msg = error_of(p.call(PROXY_STREAM_OPEN, {"port": 0}, 1))
    ok(code == "invalid_argument" and "port must be within 1..65535" in msg,
       "a stream port out of bounds is refused with its bound", (code, msg))
    code, msg = error_of(p.call(PROXY_CALL, {"op": "file_write",
                                             "path": "a", "mode": "0999"}, 2))
    ok(code == "invalid_argument" and "not an octal permission" in msg,
       "a mode that is not octal is refused", (code, msg))
    code, msg = error_of(p.call(PROXY_CALL, {"op": "job_output",
                                             "job_id": "j", "cursor":
                                             {"stdout": 1 << 31}}, 3))
    ok(code == "invalid_argument" and "stdout must be within" in msg,
       "a cursor past its bound is refused", (code, msg))
    code, msg = error_of(p.call(PROXY_CALL, {"op": "file_write", "path": "a",
                                             "data_base64": "A"}, 4))
    ok(code == "invalid_argument" and "not valid base64" in msg,
       "data that is not base64 is refused", (code, msg))
    code, msg = error_of(p.call(PROXY_CALL, {"op": "ping"}, 5))
    ok(code == "unavailable" and "link is not up" in msg,
       "a well-formed call reaches its handler", (code, msg))
    ok(p.proc.poll() is None, "vmproxy serves on after refusals")
    p.sock.sendall(p.frame(PROXY_CALL, {"op": "exec", "job_id": "j",
                                        "command": "true", "broker": 1}, 6))
    gone, rc = p.closed()
    log = p.log()
    ok(gone and rc == 0, "an unknown member closes the connection and "
       "vmproxy exits", (gone, rc, log))
    ok("malformed message" in log and "unknown member 'broker'" in log,
       "and it is logged with the member", log)
    p.stop()

    bad = [
        ("a wrong type", PROXY_CALL, {"op": "exec", "job_id": "j",
                                      "command": 1}, "is integer, not"),
        ("an unknown operation", PROXY_CALL, {"op": "format_disk"},
         "no known operation"),
        ("a missing member", PROXY_CALL, {"op": "file_read"},
         "path is missing"),
        ("a stream open with more", PROXY_STREAM_OPEN,
         {"port": 22, "vm_id": "x"}, "unknown member 'vm_id'"),
        ("a type vmmd never sends", PROXY_RESULT, {"result": {}}, None),
    ]
    for name, mtype, body, why in bad:
        p = Proxy(tmp)
        p.sock.sendall(p.frame(mtype, body, 1))
        gone, rc = p.closed()
        log = p.log()
        ok(gone and (why is None or why in log),
           "%s closes the connection" % name, (gone, rc, log))
        p.stop()

    subprocess.run(["rm", "-rf", tmp])
    taplib.done()


if __name__ == "__main__":
    main()
