"""The job broker pipe against a real guestd: two jobs, one with a pipe.
Only that job reaches the listener (the other is refused through the path
and through /proc/<pid>/root), each connection comes to the host on its
own ACCEPT channel behind its preamble, a client that shuts down its write
side still reads the answer, a 33rd connection is closed unread (end-of-file,
then EPIPE) while the 32 before it stay open, the relay's secret is
unreadable to jobs, and the relay goes when the job ends."""

import json
import os
import secrets
import time
import unittest

from guestd_case import GuestdCase, main

# The job with the pipe: one HTTP exchange with a half-close, then it waits
# (pid in the workspace) so that the other job can try its socket.
CLIENT = r"""
import os, socket, sys, time
open("a.pid", "w").write(str(os.getpid()))
path = os.environ["MCPVM_BROKER_SOCKET"]
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.sendall(b"POST /v1/call HTTP/1.1\r\nHost: broker\r\nContent-Length: 5\r\n\r\nhello")
s.shutdown(socket.SHUT_WR)
reply = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    reply += d
sys.stdout.write("reply:" + reply.decode())
sys.stdout.flush()
while not os.path.exists("a.done"):
    time.sleep(0.05)
"""

# The other job: the same path is not there; through the first job's root
# the connection is made and closed at once; nothing secret is readable.
INTRUDER = r"""
import os, socket, sys
pid = open("a.pid").read().strip()
print("own path exists:", os.path.exists("/run/mcpvm-broker/broker.sock"))
for path in ("/run/mcpvm-broker/broker.sock",
             "/proc/%s/root/run/mcpvm-broker/broker.sock" % pid):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        s.settimeout(10)
        print(path, "read:", repr(s.recv(100)))
    except OSError as e:
        print(path, "error:", e.__class__.__name__)
    s.close()
"""

# Reads whatever it may of every process: argv, environment and memory.
SNOOP = r"""
import os
out = open("snoop.bin", "wb")
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    relay = False
    for name in ("cmdline", "environ", "mem"):
        try:
            with open("/proc/%s/%s" % (pid, name), "rb") as f:
                if name == "mem":
                    if relay:
                        out.write(b"RELAY MEM READABLE\n")
                else:
                    data = f.read()
                    out.write(data)
                    if name == "cmdline" and b"--broker-relay" in data:
                        relay = True
                        out.write(b"RELAY SEEN\n")
        except OSError:
            pass
print("snooped")
"""


# 33 connections, none written to.  guestd carries 32; the 33rd is closed
# before a byte of it is read: a read sees end-of-file, a write after that
# fails with EPIPE.  Then each of the 32 has nothing to read and takes a
# write (its number), which the host reads behind the preamble.
MANY = r"""
import json, os, select, socket
socks = []
for i in range(33):
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["MCPVM_BROKER_SOCKET"])
    socks.append(s)
res = {}
last = socks.pop()
last.settimeout(60)
try:
    res["read"] = repr(last.recv(1))
except OSError as e:
    res["read"] = repr(e)
try:
    last.send(b"x")
    res["write"] = "sent"
except OSError as e:
    res["write"] = e.__class__.__name__
res["others"] = []
for i, s in enumerate(socks):
    r, _, _ = select.select([s], [], [], 0)
    try:
        s.sendall(b"%02d" % i)
        res["others"].append("readable" if r else "open")
    except OSError as e:
        res["others"].append(repr(e))
with open("many.tmp", "w") as f:
    json.dump(res, f)
os.rename("many.tmp", "many.out")
while not os.path.exists("many.done"):
    select.select([], [], [], 1)
"""


class BrokerTest(GuestdCase):
    def write_ws(self, name, text):
        path = os.path.join(self.g.workspace, name)
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, 1000, 1000)

    def wait_file(self, name, timeout=20):
        path = os.path.join(self.g.workspace, name)
        end = time.monotonic() + timeout
        while not os.path.exists(path) or not os.path.getsize(path):
            if time.monotonic() > end:
                raise TimeoutError(name)
            time.sleep(0.05)

    def relay_cgroup(self, job):
        return os.path.join(self.g.cgroup, "mcpvm-jobs", job + ".broker")

    def test_pipe_for_one_job(self):
        secret = secrets.token_hex(32)
        for n, text in (("client.py", CLIENT), ("intruder.py", INTRUDER),
                        ("snoop.py", SNOOP)):
            self.write_ws(n, text)
        st, _ = self.call("exec", job_id="ja", command="python3 client.py",
                          broker_secret=secret)
        self.assertEqual(st["state"], "running", st)
        self.assertIs(st["broker_pipe"], True)
        self.assertTrue(os.path.isdir(self.relay_cgroup("ja")))

        ch = self.link.wait_accept(timeout=20)
        self.assertIsNotNone(ch, "no ACCEPT from the guest")
        preamble = f"ja {secret}\n".encode()
        request = (b"POST /v1/call HTTP/1.1\r\nHost: broker\r\n"
                   b"Content-Length: 5\r\n\r\nhello")
        got = b""
        while len(got) < len(preamble) + len(request) or not ch.rx_eof:
            d = ch.recv(timeout=20)
            if not d:
                break
            got += d
        self.assertEqual(got, preamble + request)
        self.assertTrue(ch.rx_eof, "the client's half-close is EOF")
        # The client shut down its write side and still reads this.
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        # The host's end (the controller's close) is EOF after the data.
        ch.send(answer)
        ch.send_eof()

        # The other job: no socket at its path; refused through /proc.
        self.wait_file("a.pid")
        st, _ = self.call("exec", job_id="jb", command="python3 intruder.py")
        self.assertNotIn("broker_pipe", st)
        stb = self.wait_done("jb")
        out, _ = self.g.output("jb")
        out = out.decode()
        self.assertEqual(stb.get("exit_code"), 0, out)
        self.assertIn("own path exists: False", out)
        self.assertIn("/run/mcpvm-broker/broker.sock error:", out)
        self.assertRegex(out, r"/proc/\d+/root/run/mcpvm-broker/broker.sock "
                              r"(read: b''|error: (Connection|BrokenPipe))")
        self.assertIsNone(self.link.wait_accept(timeout=1),
                          "a refused peer reached the host")

        # Neither job can read the relay's secret.
        for job in ("jc", "jd"):
            self.exec_snoop(job, secret)

        # The client read the answer after its half-close.
        self.write_ws("a.done", "1")
        sta = self.wait_done("ja")
        out, _ = self.g.output("ja")
        self.assertEqual(sta.get("exit_code"), 0, out)
        self.assertIn(b"reply:" + answer, out)
        self.assertNotIn(secret.encode(), out)
        # Once the client let go, guestd released the channel.
        with ch.cond:
            end = time.monotonic() + 10
            while not ch.closed and time.monotonic() < end:
                ch.cond.wait(1)
        self.assertTrue(ch.closed, "the channel outlived its connection")
        # The job ended: its relay went, with its cgroup.
        self.wait_gone(self.relay_cgroup("ja"))

    def exec_snoop(self, job, secret):
        path = os.path.join(self.g.workspace, "snoop.bin")
        if os.path.exists(path):
            os.unlink(path)
        self.call("exec", job_id=job, command="python3 snoop.py")
        st = self.wait_done(job)
        self.assertEqual(st.get("exit_code"), 0)
        with open(path, "rb") as f:
            data = f.read()
        self.assertNotIn(secret.encode(), data)
        # It sees the relay, but the relay's memory stays closed to it.
        self.assertIn(b"RELAY SEEN\n", data)
        self.assertNotIn(b"RELAY MEM READABLE", data)

    @staticmethod
    def is_relay(pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return b"--broker-relay" in f.read()
        except OSError:
            return False

    def wait_done(self, job, timeout=30):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st, _ = self.call("job_status", job_id=job)
            if st["state"] != "running" and not st["streams_open"]:
                return st
            time.sleep(0.05)
        raise TimeoutError(job)

    def wait_gone(self, path, timeout=10):
        end = time.monotonic() + timeout
        while os.path.exists(path):
            if time.monotonic() > end:
                self.fail(f"{path} is still there")
            time.sleep(0.05)

    def test_cancel_ends_the_relay(self):
        secret = secrets.token_hex(32)
        st, _ = self.call("exec", job_id="jk", command="sleep 60",
                          broker_secret=secret)
        self.assertIs(st["broker_pipe"], True)
        self.assertTrue(any(self.is_relay(p) for p in os.listdir("/proc")
                            if p.isdigit()))
        self.call("job_cancel", job_id="jk")
        self.wait_gone(self.relay_cgroup("jk"))

    def test_at_most_32_connections(self):
        # The job makes 33 connections; the host sees 32 of them, and the
        # 33rd is closed at once, not when one of the 32 ends.
        secret = secrets.token_hex(32)
        self.write_ws("many.py", MANY)
        self.call("exec", job_id="jm", command="python3 many.py",
                  broker_secret=secret)
        try:
            self.wait_file("many.out", timeout=90)
        except TimeoutError:
            st, _ = self.call("job_status", job_id="jm")
            self.fail("%r %r" % (st, self.g.output("jm", "stderr")))
        with open(os.path.join(self.g.workspace, "many.out")) as f:
            res = json.load(f)
        self.assertEqual(res, {"read": "b''", "write": "BrokenPipeError",
                               "others": ["open"] * 32}, res)
        preamble = f"jm {secret}\n".encode()
        got = []
        for i in range(32):
            ch = self.link.wait_accept(timeout=20)
            self.assertIsNotNone(ch, f"{i} ACCEPTs, not 32")
            data = b""
            while len(data) < len(preamble) + 2:
                d = ch.recv(timeout=20)
                if not d:
                    break
                data += d
            self.assertEqual(data[:len(preamble)], preamble)
            got.append(data[len(preamble):])
        self.assertEqual(sorted(got), [b"%02d" % i for i in range(32)])
        # The job wrote those bytes after the 33rd was closed, and the
        # link is in order: an ACCEPT for the 33rd would be here by now.
        self.assertIsNone(self.link.wait_accept(timeout=0),
                          "a 33rd connection reached the host")
        self.write_ws("many.done", "1")
        st = self.wait_done("jm")
        self.assertEqual(st.get("exit_code"), 0,
                         self.g.output("jm", "stderr"))
        self.wait_gone(self.relay_cgroup("jm"))

    def test_bad_secret_refused(self):
        with self.assertRaises(Exception) as cm:
            self.call("exec", job_id="jx", command="true",
                      broker_secret="ABC")
        self.assertIn("broker_secret", str(cm.exception))


if __name__ == "__main__":
    main()
