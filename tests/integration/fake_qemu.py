#!/usr/bin/env python3
"""A compromised QEMU, for tests: vmmd starts it in place of
qemu-system-x86_64 (the [vmmd] qemu key), as the VM's uid, with QEMU's
command line after `--mode-file FILE` (vmmd gives QEMU no environment,
so the test's wrapper passes that).  It writes its pid file, serves the
QMP socket vmmd connects to, and misbehaves as FILE says:

  garbage   a greeting that is no JSON, then binary bytes
  endless   one line without end: 64 MiB and no newline
  deep      a greeting nested 100000 arrays deep
  silent    accepts the connection and never says a word

It then waits to be killed."""
import os
import socket
import sys
import time


def arg_after(flag, prefix=None):
    argv = sys.argv[1:]
    for i, a in enumerate(argv[:-1]):
        if a == flag and (prefix is None or argv[i + 1].startswith(prefix)):
            return argv[i + 1]
    return None


def main():
    if len(sys.argv) < 3 or sys.argv[1] != "--mode-file":
        sys.exit(2)
    mode = open(sys.argv[2]).read().strip()
    del sys.argv[1:3]
    qmp = None
    argv = sys.argv[1:]
    for i, a in enumerate(argv[:-1]):
        if a == "-chardev" and argv[i + 1].startswith("socket,id=qmp0,"):
            for part in argv[i + 1].split(","):
                if part.startswith("path="):
                    qmp = part[5:]
    pidfile = arg_after("-pidfile")
    if pidfile:
        with open(pidfile, "w") as f:
            f.write("%d\n" % os.getpid())
    if qmp is None:
        time.sleep(3600)
        return
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(qmp)
    srv.listen(1)
    c, _ = srv.accept()
    try:
        if mode == "garbage":
            c.sendall(b"{this is not json}\r\n" + bytes(range(256)) * 64)
        elif mode == "endless":
            chunk = b"x" * (1 << 20)
            for _ in range(64):
                c.sendall(chunk)
        elif mode == "deep":
            c.sendall(b"[" * 100000 + b"\r\n")
        time.sleep(3600)
    except OSError:
        time.sleep(3600)


if __name__ == "__main__":
    main()
