#!/usr/bin/env python3
"""A compromised vmproxy, for tests: started by vmmd in place of the real
one (through the test's wrapper), it speaks vmmd's IPC on fd 3 as vmproxy
does, up to the guest's hello, and then misbehaves as MODE says:

  wrongtype   answers the clock call with a stream-open result carrying a
              descriptor (a reply of another type, with an fd)
  streamsneg  answers properly, then reports -5 open streams
  streamshuge answers properly, then reports 10**12 open streams
  manyfds     sends a link-down frame carrying three descriptors
  flood       answers properly, then sends 20000 events as fast as it can
  qmpshape    answers QEMU's connect with a run state, which only
              query_status has (a result of the wrong shape)
  qmptext     answers QEMU's connect as failed, its message full of
              terminal escapes and far longer than the 200 bytes allowed
  qmpevent    after the guest's hello, reports a QEMU event of no known
              name
  nofreeze    never answers a freeze of the guest's file systems (a guest
              whose guestd hangs in it), answering all else
  oldfreeze   answers that freeze as a guestd older than it does: frozen
              jobs, no count of file systems
  linkdown    answers the create's clock call, reports the guest's link
              down, and then answers nothing at all (a guestd that its
              root stopped, or a hung vmproxy)
  mute        answers the create's clock call, then no guest call at all,
              its link up (a guest whose QEMU is stopped)

vmmd asks vmproxy for QEMU operations too (IPC_PROXY_QMP): outside the
qmp* modes they are answered as a real vmproxy would, without ever
speaking QMP, so QEMU runs unwatched until vmmd kills it.

It then waits for vmmd to close the connection, and exits 0.  Arguments
are vmproxy's; MODE comes from the file named by $FAKE_VMPROXY_MODE.
"""
import array
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmmd_ipc as ipc  # noqa: E402

PROXY_CALL = 601
PROXY_RESULT = 602
PROXY_STREAM_OPEN_RESULT = 604
PROXY_QMP = 606
PROXY_QMP_RESULT = 607
# vmproxy's unasked messages, one type per event (proto/ipcmsg.h).
PROXY_GUEST_HELLO = 612
PROXY_LINK_DOWN = 613
PROXY_STREAMS = 614
PROXY_QMP_EVENT = 616


def qmp_answer(c, mode, rid, body):
    """One QEMU operation, answered as a real vmproxy would, or not."""
    op = body.get("op")
    res = {"ok": True}
    if op == "connect" and mode == "qmpshape":
        res = {"ok": True, "status": "running", "running": True}
    elif op == "connect" and mode == "qmptext":
        res = {"ok": False, "error": "qemu",
               "message": "\x1b[2J\x1b]0;owned\x07" * 40}
    elif op == "query_status":
        res = {"ok": True, "status": "running", "running": True}
    elif op == "query_migrate":
        res = {"ok": True, "migration": "completed"}
    c.send(PROXY_QMP_RESULT, res, id=rid, flags=ipc.FLAG_REPLY)


class FdConn(ipc.Conn):
    """vmmd_ipc.Conn on an inherited socket, vmproxy's end."""

    def __init__(self, fd):
        self.sock = socket.socket(fileno=fd)
        self.next_id = 1
        self.fds = []
        self.send(ipc.HELLO, {"version": 1, "role": "vmproxy"}, id=0)
        t, _, self.peer, _ = self.recv()
        if t != ipc.HELLO:
            sys.exit(2)


def send_fds(c, type, body, fds):
    import json
    import struct
    payload = json.dumps(body).encode()
    hdr = struct.pack("=IIII", type, len(payload), 0, ipc.FLAG_FD)
    c.sock.sendmsg([hdr + payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                      array.array("i", fds))])


def main():
    with open(os.environ["FAKE_VMPROXY_MODE"]) as f:
        mode = f.read().strip()
    c = FdConn(3)
    hello = silent = False
    calls = 0
    try:
        while True:
            t, rid, body, fd = c.recv()
            if fd is not None:
                os.close(fd)
            if silent:
                continue
            if t == PROXY_QMP:
                qmp_answer(c, mode, rid, body)
                # The guest's hello once QEMU is "up", as a real one.
                if not hello and body.get("op") == "connect":
                    hello = True
                    c.send(PROXY_GUEST_HELLO, {"guest": {"boot_id": "fake"}},
                           id=0)
                    if mode == "qmpevent":
                        c.send(PROXY_QMP_EVENT, {"name": "GUEST_PWNED"},
                               id=0)
                continue
            if t != PROXY_CALL:
                continue
            calls += 1
            if mode == "mute" and calls > 1:
                continue
            if mode == "wrongtype":
                r, w = os.pipe()
                c.send(PROXY_STREAM_OPEN_RESULT, {"channel": 1}, id=rid,
                       flags=ipc.FLAG_REPLY, fd=r)
                os.close(r)
                os.close(w)
                continue
            if body.get("op") == "freeze" and body.get("filesystems"):
                if mode == "nofreeze":
                    continue
                c.send(PROXY_RESULT, {"result": {} if mode == "oldfreeze"
                                      else {"filesystems": 1}}, id=rid,
                       flags=ipc.FLAG_REPLY)
                continue
            c.send(PROXY_RESULT, {"result": {}}, id=rid,
                   flags=ipc.FLAG_REPLY)
            if mode == "linkdown":
                c.send(PROXY_LINK_DOWN, {}, id=0)
                silent = True
            elif mode == "streamsneg":
                c.send(PROXY_STREAMS, {"open": -5}, id=0)
            elif mode == "streamshuge":
                c.send(PROXY_STREAMS, {"open": 10**12}, id=0)
            elif mode == "manyfds":
                # After the create is answered: this case is about the
                # descriptors, not about a boot that races them.
                time.sleep(0.5)
                fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(3)]
                send_fds(c, PROXY_LINK_DOWN, {}, fds)
                for fd in fds:
                    os.close(fd)
            elif mode == "flood":
                for _ in range(20000):
                    c.send(PROXY_STREAMS, {"open": 0}, id=0)
    except (EOFError, OSError):
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
