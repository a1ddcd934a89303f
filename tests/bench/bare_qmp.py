#!/usr/bin/env python3
"""Bare QEMU hibernate/restore, driven by a minimal QMP client.

The baseline for vmmd's QEMU backend in bench_vmmd: the same QEMU command
line, the same QMP steps (stop, raise the bandwidth cap, getfd, migrate,
poll query-migrate, fsync, quit; -incoming defer, getfd, migrate-incoming,
poll, cont), with nothing else around them.  Standard library only.

A restore is timed twice: to QEMU running again (restore_ms), and to the
restored guestd's answer to a hello sent on its link as QEMU starts
(ready_ms), which is where vmmd's "ready" begins; vmmd adds a new
identity and the thaw after it.

Usage: bare_qmp.py CONFIG.json  ->  prints {"hibernate_ms": [...],
"restore_ms": [...], "ready_ms": [...], "bytes": N} on stdout.
"""
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
from qmpclient import Qmp  # noqa: E402
import glink  # noqa: E402


def guest_answer(link, rid, deadline):
    """The reply to hello rid.  A guest that reopened its port after the
    restore says its own hello and never saw ours: it is asked again, as
    vmproxy does."""
    while time.monotonic() < deadline:
        try:
            return link.wait_reply(rid, timeout=0.01)
        except TimeoutError:
            pass
        if link.hello.is_set():
            link.hello.clear()
            rid = link.send_request("hello")
    raise TimeoutError("the restored guest never answered hello")


def clean(rundir):
    for n in ("qmp.sock", "link.sock"):
        try:
            os.unlink(os.path.join(rundir, n))
        except FileNotFoundError:
            pass


def main():
    cfg = json.load(open(sys.argv[1]))
    argv, rundir, ckpt = cfg["argv"], cfg["rundir"], cfg["ckpt"]
    qmp_path = os.path.join(rundir, "qmp.sock")
    log = open(os.path.join(rundir, "qemu.log"), "a")
    out = {"hibernate_ms": [], "restore_ms": [], "ready_ms": [], "bytes": 0}
    for _ in range(cfg["iterations"]):
        clean(rundir)
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                             stderr=log)
        q = Qmp(qmp_path, timeout=10, connect_poll=0.01, poll=0.02)
        time.sleep(cfg.get("settle_s", 0.2))
        # A host on the link when the state is taken, as vmproxy is.
        hs = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        hs.connect(os.path.join(rundir, "link.sock"))
        hlink = glink.GuestLink(hs)
        hlink.lenient = True
        guest_answer(hlink, hlink.send_request("hello"),
                     time.monotonic() + 30)
        t0 = time.monotonic()
        q.cmd("stop")
        q.cmd("migrate-set-parameters", {"max-bandwidth": 1 << 40})
        fd = os.open(ckpt, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        q.cmd("getfd", {"fdname": "ckpt"}, fd)
        q.cmd("migrate", {"uri": "fd:ckpt"})
        q.wait_migration()
        os.fsync(fd)
        os.close(fd)
        q.s.sendall(b'{"execute":"quit"}\n')
        p.wait()
        out["hibernate_ms"].append((time.monotonic() - t0) * 1000)
        hs.close()
        out["bytes"] = os.path.getsize(ckpt)

        clean(rundir)
        t0 = time.monotonic()
        p = subprocess.Popen(argv + ["-S", "-incoming", "defer"],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        q = Qmp(qmp_path, timeout=10, connect_poll=0.01, poll=0.02)
        # QEMU made its sockets before QMP answered.
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.connect(os.path.join(rundir, "link.sock"))
        link = glink.GuestLink(ls)
        link.lenient = True     # the guest's frames of its old session
        rid = link.send_request("hello")
        fd = os.open(ckpt, os.O_RDONLY)
        q.cmd("getfd", {"fdname": "ckpt"}, fd)
        os.close(fd)
        q.cmd("migrate-incoming", {"uri": "fd:ckpt"})
        q.wait_migration()
        q.cmd("cont")
        assert q.cmd("query-status")["status"] == "running"
        out["restore_ms"].append((time.monotonic() - t0) * 1000)
        guest_answer(link, rid, time.monotonic() + 10)
        out["ready_ms"].append((time.monotonic() - t0) * 1000)
        ls.close()
        q.s.sendall(b'{"execute":"quit"}\n')
        p.wait()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
