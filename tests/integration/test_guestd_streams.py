"""Streams against a real guestd: 100 MiB each way with half-close through
the credit windows, while control pings keep answering; OPEN_FAIL without
a listener; streams end with the link."""

import hashlib
import os
import threading
import time

import glink
from guestd_case import GuestdCase, main
from taplib import note

MIB = 1 << 20
SIZE = 100 * MIB

# Runs in the guest as the job: reads everything until EOF (the host's
# half-close), then answers with SIZE bytes and the digest of what it read.
SERVER = r"""
import hashlib, socket, sys
size = int(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(4)
print("listening", flush=True)
def serve(c):
    h = hashlib.sha256()
    n = 0
    while True:
        d = c.recv(1 << 16)
        if not d:
            break
        h.update(d)
        n += len(d)
    block = bytes(range(256)) * 256
    left = size
    while left:
        k = min(left, len(block))
        c.sendall(block[:k])
        left -= k
    c.sendall(("%d %s\n" % (n, h.hexdigest())).encode())
while True:
    c, _ = s.accept()
    try:
        serve(c)
    except OSError:
        pass        # the host went away mid-transfer
    c.close()
"""


def expected_download():
    block = bytes(range(256)) * 256
    h = hashlib.sha256()
    left = SIZE
    while left:
        k = min(left, len(block))
        h.update(block[:k])
        left -= k
    return h


class Streams(GuestdCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.g.link.call("file_write", body=SERVER.encode(), path="srv.py")
        cls.g.link.call("exec", job_id="srv",
                        command=f"exec python3 -u srv.py 5001 {SIZE}")
        for _ in range(200):
            st, body = cls.g.link.call("job_output", job_id="srv")
            if b"listening" in body:
                break
            time.sleep(0.05)

    def test_open_fail_without_listener(self):
        with self.assertRaises(glink.OpenFailed) as cm:
            self.link.open(5999)
        self.assertIn("127.0.0.1:5999", str(cm.exception))
        self.assertIn("refused", str(cm.exception))

    def test_100mib_each_way_with_pings(self):
        link = self.g.link
        ch = link.open(5001)
        rtts = []
        stop = threading.Event()

        def pinger():
            while not stop.is_set():
                t = time.monotonic()
                link.call("ping")
                rtts.append(time.monotonic() - t)
                time.sleep(0.005)

        pt = threading.Thread(target=pinger)
        pt.start()
        t0 = time.monotonic()
        up = hashlib.sha256()
        chunk = os.urandom(MIB)
        for _ in range(SIZE // MIB):
            ch.send(chunk)
            up.update(chunk)
        ch.send_eof()
        t_up = time.monotonic() - t0
        down = hashlib.sha256()
        got = 0
        tail = b""
        while True:
            d = ch.recv()
            if not d:
                break
            take = max(0, min(len(d), SIZE - got))
            down.update(d[:take])
            tail += d[take:]
            got += take
        t_all = time.monotonic() - t0
        stop.set()
        pt.join()
        self.assertEqual(got, SIZE)
        self.assertEqual(down.hexdigest(), expected_download().hexdigest())
        # The guest only replied after our EOF: half-close works.
        self.assertEqual(tail.decode().split(),
                         [str(SIZE), up.hexdigest()])
        rtts.sort()
        p99 = rtts[int(len(rtts) * 0.99) - 1] * 1000
        note(f"100 MiB up {SIZE / MIB / t_up:.0f} MiB/s, "
             f"up+down {2 * SIZE / MIB / t_all:.0f} MiB/s; "
             f"{len(rtts)} pings during the transfer: "
             f"p50 {rtts[len(rtts) // 2] * 1000:.1f} ms, p99 {p99:.1f} ms")
        self.assertGreater(len(rtts), 20)
        self.assertLess(p99, 500)
        # The channel is released on both sides once each closed.
        for _ in range(100):
            a, _ = link.call("activity")
            if a["streams"] == 0:
                break
            time.sleep(0.02)
        self.assertEqual(a["streams"], 0)

    def test_guest_half_closes_first(self):
        # The guest program says hello, shuts down its side, then still
        # reads what the host sends until the host's EOF.
        srv = (b"import socket\n"
               b"s = socket.socket()\n"
               b"s.bind(('127.0.0.1', 5002)); s.listen(4)\n"
               b"print('listening', flush=True)\n"
               b"for _ in range(3):\n"
               b"    c, _ = s.accept()\n"
               b"    c.sendall(b'hello'); c.shutdown(socket.SHUT_WR)\n"
               b"    n = 0\n"
               b"    while True:\n"
               b"        d = c.recv(65536)\n"
               b"        if not d: break\n"
               b"        n += len(d)\n"
               b"    print('got', n, flush=True)\n"
               b"    c.close()\n")
        self.call("file_write", body=srv, path="half.py")
        self.call("exec", job_id="half", command="exec python3 -u half.py")
        for _ in range(200):
            _, body = self.call("job_output", job_id="half")
            if b"listening" in body:
                break
            time.sleep(0.05)
        # Three streams at once, each finished independently.
        chans = [self.link.open(5002) for _ in range(3)]
        for i, ch in enumerate(chans):
            self.assertEqual(ch.recv_all(), b"hello")
            ch.send(b"z" * (300000 + i))
            ch.send_eof()
        for _ in range(200):
            out, _ = self.g.output("half")
            if out.count(b"got") == 3:
                break
            time.sleep(0.05)
        self.assertEqual(sorted(out.decode().split("\n")[1:4]),
                         ["got 300000", "got 300001", "got 300002"])
        for _ in range(100):
            a, _ = self.call("activity")
            if a["streams"] == 0:
                break
            time.sleep(0.02)
        self.assertEqual(a["streams"], 0)
        self.call("job_cancel", job_id="half")

    def test_hello_request_starts_a_session(self):
        ch = self.link.open(5001)
        ch.send(b"x" * 100000)
        a, _ = self.call("activity")
        self.assertEqual(a["streams"], 1)
        r = self.link.new_session()
        self.assertEqual(r["version"], 1)
        self.assertEqual(r["boot_id"], self.link.events[0]["boot_id"])
        a, _ = self.call("activity")
        self.assertEqual(a["streams"], 0)
        # Channel ids start over and work again.
        with self.assertRaises(glink.OpenFailed):
            self.link.open(5999)

    def test_link_drop_closes_streams(self):
        ch = self.g.link.open(5001)
        ch.send(b"abc")
        a, _ = self.g.link.call("activity")
        self.assertEqual(a["streams"], 1)
        self.g.link.close()
        self.g.link = self.g.accept()
        a, _ = self.g.link.call("activity")
        self.assertEqual(a["streams"], 0)


if __name__ == "__main__":
    main()
