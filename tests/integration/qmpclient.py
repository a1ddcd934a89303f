"""A minimal QMP client for the tests and benchmarks that drive a bare
QEMU themselves (test_clone_identity.py, tests/bench/bare_qmp.py): no
vmproxy and no vmmd in between.  Standard library only."""
import json
import socket
import time


class Qmp:
    """One QMP connection: connect (retrying until QEMU has made its
    socket, for timeout seconds, every connect_poll), negotiate, then
    commands one at a time; events are skipped."""

    def __init__(self, path, timeout=30, connect_poll=0.05, poll=0.05):
        self.poll = poll
        end = time.monotonic() + timeout
        while True:
            try:
                self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.s.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                self.s.close()
                if time.monotonic() > end:
                    raise
                time.sleep(connect_poll)
        self.s.settimeout(120)
        self.f = self.s.makefile("r")
        self.read()                      # the greeting
        self.cmd("qmp_capabilities")

    def read(self):
        while True:
            line = self.f.readline()
            if not line:
                raise EOFError("QMP closed")
            msg = json.loads(line)
            if "event" not in msg:
                return msg

    def cmd(self, name, args=None, fd=None):
        m = {"execute": name}
        if args is not None:
            m["arguments"] = args
        data = (json.dumps(m) + "\n").encode()
        if fd is None:
            self.s.sendall(data)
        else:
            socket.send_fds(self.s, [data], [fd])
        r = self.read()
        if "error" in r:
            raise RuntimeError(f"{name}: {r['error']}")
        return r["return"]

    def wait_migration(self, timeout=300):
        """Polls query-migrate every self.poll until it completes."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st = self.cmd("query-migrate").get("status")
            if st == "completed":
                return
            if st in ("failed", "cancelled"):
                raise RuntimeError("migration " + st)
            time.sleep(self.poll)
        raise TimeoutError("migration did not complete")

    def close(self):
        self.s.close()
