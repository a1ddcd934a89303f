"""Host side of the mcpvm guest link (proto/guest.h), in Python stdlib.

Used by the integration tests and benchmarks to drive a real guestd: frames,
channel 0 requests with raw bodies, and byte-stream channels with credit
windows.  A reader thread demultiplexes replies and channel frames, so a
request can be answered while a stream is moving bytes.
"""

import itertools
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time

HDR = struct.Struct("<BBHII")
CTRL, BODY, OPEN, OPEN_OK, OPEN_FAIL, DATA, EOF, CLOSE, WINDOW, ACCEPT = \
    range(1, 11)
GUEST_CHAN = 0x80000000
F_BODY = F_END = 0x01
MAX_PAYLOAD = 65536
INITIAL_WINDOW = 256 * 1024


class LinkError(Exception):
    pass


class OpenFailed(Exception):
    pass


class GuestError(Exception):
    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def frame(ftype, flags, channel, payload=b""):
    return HDR.pack(ftype, flags, 0, channel, len(payload)) + payload


class Channel:
    def __init__(self, link, cid):
        self.link = link
        self.id = cid
        self.cond = threading.Condition(link.lock)
        self.state = "opening"
        self.reason = None
        self.send_credit = 0
        self.rx = bytearray()
        self.rx_eof = False
        self.closed = False
        self.unacked = 0

    def send(self, data):
        view = memoryview(data)
        while view:
            with self.cond:
                while self.send_credit == 0 and not self.closed:
                    self.cond.wait(30)
                if self.closed:
                    raise LinkError(f"channel {self.id} closed")
                n = min(len(view), self.send_credit, MAX_PAYLOAD)
                self.send_credit -= n
            self.link._write(frame(DATA, 0, self.id, bytes(view[:n])))
            view = view[n:]

    def send_eof(self):
        self.link._write(frame(EOF, 0, self.id))

    def close(self):
        with self.cond:
            if self.closed or self.state == "closing":
                return
            self.state = "closing"
        self.link._write(frame(CLOSE, 0, self.id))

    def recv(self, maxn=1 << 20, timeout=30):
        """Up to maxn bytes; b"" at EOF or close."""
        with self.cond:
            end = time.monotonic() + timeout
            while not self.rx and not self.rx_eof and not self.closed:
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"channel {self.id}: no data")
                self.cond.wait(left)
            data = bytes(self.rx[:maxn])
            del self.rx[:len(data)]
            self.unacked += len(data)
            grant = 0
            if self.unacked >= INITIAL_WINDOW // 4 and not self.closed:
                grant, self.unacked = self.unacked, 0
        if grant:
            self.link._write(frame(WINDOW, 0, self.id,
                                   struct.pack("<I", grant)))
        return data

    def recv_all(self, timeout=60):
        out = bytearray()
        while True:
            d = self.recv(timeout=timeout)
            if not d:
                return bytes(out)
            out += d


class GuestLink:
    def __init__(self, sock):
        self.sock = sock
        self.lock = threading.Lock()
        self.wlock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.ids = itertools.count(1)
        self.replies = {}
        self.channels = {}
        self.events = []
        self.hello = threading.Event()
        self.dead = None
        self.pending_ctrl = None
        self.body = bytearray()
        self.lenient = False
        self.accepted = []      # channels the guest opened (ACCEPT)
        self.reader = threading.Thread(target=self._read_loop, daemon=True)
        self.reader.start()

    # --- writing
    def _write(self, data):
        with self.wlock:
            self.sock.sendall(data)

    def send_raw(self, data):
        self._write(data)

    # --- reading
    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise LinkError("link closed")
            buf += chunk
        return bytes(buf)

    def _read_loop(self):
        try:
            while True:
                hdr = self._recv_exact(HDR.size)
                ftype, flags, res, ch, ln = HDR.unpack(hdr)
                if res != 0 or ln > MAX_PAYLOAD:
                    raise LinkError("bad frame header from guest")
                payload = self._recv_exact(ln) if ln else b""
                self._dispatch(ftype, flags, ch, payload)
        except (OSError, LinkError) as e:
            with self.cond:
                self.dead = str(e) or "link closed"
                for c in self.channels.values():
                    c.closed = True
                self.cond.notify_all()

    def _dispatch(self, ftype, flags, ch, payload):
        with self.cond:
            if ftype == CTRL:
                if flags & F_BODY:
                    self.pending_ctrl = payload
                    self.body = bytearray()
                    return
                self._deliver(payload, None)
            elif ftype == BODY:
                self.body += payload
                if flags & F_END:
                    self._deliver(self.pending_ctrl, bytes(self.body))
                    self.pending_ctrl = None
            elif ftype == ACCEPT:
                if not ch & GUEST_CHAN or ch in self.channels or payload:
                    raise LinkError(f"bad ACCEPT of channel {ch}")
                c = Channel(self, ch)
                c.state = "open"
                c.send_credit = INITIAL_WINDOW
                self.channels[ch] = c
                self.accepted.append(c)
            else:
                c = self.channels.get(ch)
                if c is None:
                    if self.lenient:
                        return      # from before our "hello"
                    raise LinkError(f"frame {ftype} for unknown channel {ch}")
                if ftype == OPEN_OK:
                    c.state = "open"
                    c.send_credit = INITIAL_WINDOW
                elif ftype == OPEN_FAIL:
                    c.state = "failed"
                    c.reason = payload.decode()
                    c.closed = True
                    del self.channels[ch]
                elif ftype == DATA:
                    c.rx += payload
                elif ftype == EOF:
                    c.rx_eof = True
                elif ftype == WINDOW:
                    c.send_credit += struct.unpack("<I", payload)[0]
                elif ftype == CLOSE:
                    if c.state != "closing":
                        self._write(frame(CLOSE, 0, ch))
                    c.closed = True
                    del self.channels[ch]
                c.cond.notify_all()
            self.cond.notify_all()

    def _deliver(self, payload, body):
        msg = json.loads(payload)
        if "event" in msg:
            self.events.append(msg)
            if msg["event"] == "hello":
                self.hello.set()
            return
        self.replies[msg["id"]] = (msg, body)

    # --- control
    def send_request(self, op, body=None, **fields):
        rid = next(self.ids)
        msg = dict(fields, id=rid, op=op)
        data = json.dumps(msg).encode()
        out = frame(CTRL, F_BODY if body is not None else 0, 0, data)
        if body is not None:
            chunks = [body[i:i + MAX_PAYLOAD]
                      for i in range(0, len(body), MAX_PAYLOAD)] or [b""]
            for i, c in enumerate(chunks):
                out += frame(BODY, F_END if i == len(chunks) - 1 else 0, 0,
                             c)
        self._write(out)
        return rid

    def wait_reply(self, rid, timeout=30):
        with self.cond:
            end = time.monotonic() + timeout
            while rid not in self.replies:
                if self.dead:
                    raise LinkError(self.dead)
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no reply to request {rid}")
                self.cond.wait(left)
            return self.replies.pop(rid)

    def call(self, op, body=None, timeout=30, **fields):
        """Returns (reply, body); raises GuestError on an error reply."""
        msg, rbody = self.wait_reply(self.send_request(op, body, **fields),
                                     timeout)
        if not msg.get("ok"):
            raise GuestError(msg["error"]["code"], msg["error"]["message"])
        return msg, rbody

    def new_session(self):
        """The "hello" request: the guest forgets every channel."""
        with self.cond:
            self.lenient = True
            for c in self.channels.values():
                c.closed = True
                c.cond.notify_all()
            self.channels.clear()
        try:
            return self.call("hello")[0]
        finally:
            with self.cond:
                self.lenient = False

    # --- streams
    def open(self, port, timeout=10):
        with self.cond:
            cid = 1
            while cid in self.channels:
                cid += 1
            c = Channel(self, cid)
            self.channels[cid] = c
        self._write(frame(OPEN, 0, cid, struct.pack("<I", port)))
        with self.cond:
            end = time.monotonic() + timeout
            while c.state == "opening":
                left = end - time.monotonic()
                if left <= 0 or self.dead:
                    raise TimeoutError("no answer to OPEN")
                self.cond.wait(left)
        if c.state == "failed":
            raise OpenFailed(c.reason)
        return c

    def wait_accept(self, timeout=10):
        """The next channel the guest opened, or None."""
        with self.cond:
            end = time.monotonic() + timeout
            while not self.accepted:
                left = end - time.monotonic()
                if left <= 0 or self.dead:
                    return None
                self.cond.wait(left)
            return self.accepted.pop(0)

    def wait_dead(self, timeout=10):
        with self.cond:
            end = time.monotonic() + timeout
            while not self.dead:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def cgroup2_root():
    """A cgroup2 mount to create test cgroups under."""
    with open("/proc/self/mounts") as f:
        mounts = [line.split() for line in f]
    for m in mounts:
        if m[2] == "cgroup2" and m[1] == "/sys/fs/cgroup":
            return m[1]
    for m in mounts:
        if m[2] == "cgroup2":
            return m[1]
    return None


class Guestd:
    """A real guestd in fresh mount/pid/net namespaces, its link on a Unix
    socket, jobs in a private cgroup2 subtree, a temporary /workspace."""

    def __init__(self, extra_args=(), init=False, cmdline=None, veth=False):
        self.bin = os.environ.get("GUESTD")
        if not self.bin:
            raise RuntimeError("GUESTD= must name the guestd binary")
        if os.geteuid() != 0:
            raise PermissionError("guestd tests need root")
        root = cgroup2_root()
        if root is None:
            raise PermissionError("no cgroup2 mount on this host")
        # PID 1 mode mounts a tmpfs on /tmp: keep our files elsewhere.
        self.tmp = tempfile.mkdtemp(prefix="guestd-test-",
                                    dir="/var/tmp" if init else None)
        os.chmod(self.tmp, 0o755)
        self.workspace = os.path.join(self.tmp, "workspace")
        os.mkdir(self.workspace)
        os.chown(self.workspace, 1000, 1000)
        self.cgroup = os.path.join(root, os.path.basename(self.tmp))
        os.mkdir(self.cgroup)
        self.sockpath = os.path.join(self.tmp, "link.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sockpath)
        self.listener.listen(4)
        self.log = open(os.path.join(self.tmp, "guestd.log"), "w+")
        if init:
            # PID 1 mode: guestd mounts /proc, /sys, cgroup2 ... itself,
            # sets the hostname (hence a UTS namespace) and brings up lo.
            ns = ["--mount", "--uts", "--net", "--pid", "--fork"]
            mode = ["--cgroup", "/sys/fs/cgroup/" +
                    os.path.relpath(self.cgroup, root)]
        else:
            ns = ["--mount", "--net", "--pid", "--fork", "--mount-proc"]
            mode = ["--no-init", "--lo", "--cgroup", self.cgroup]
        if cmdline is not None:
            path = os.path.join(self.tmp, "cmdline")
            with open(path, "w") as f:
                f.write(cmdline + "\n")
            mode += ["--cmdline", path]
        pre = []
        if veth:
            # An eth0 for mcpvm.net= to configure (no dummy module here).
            pre = ["sh", "-c", "ip link add eth0 type veth peer name peer0 "
                   "&& ip link set peer0 up && exec \"$@\"", "sh"]
        cmd = ["unshare", *ns, "--kill-child=SIGTERM", "--", *pre,
               self.bin, *mode, "--link-unix", self.sockpath, "--workspace",
               self.workspace, "--home", "/home/dev", *extra_args]
        self.proc = subprocess.Popen(cmd, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.link = self.accept()

    def accept(self, timeout=10):
        self.listener.settimeout(timeout)
        conn, _ = self.listener.accept()
        conn.settimeout(None)
        link = GuestLink(conn)
        if not link.hello.wait(timeout):
            raise TimeoutError("no hello from guestd")
        return link

    def exec_wait(self, job_id, command, timeout=30, **kw):
        self.link.call("exec", job_id=job_id, command=command, **kw)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st, _ = self.link.call("job_status", job_id=job_id)
            if st["state"] != "running" and not st["streams_open"]:
                return st
            time.sleep(0.02)
        raise TimeoutError(f"job {job_id} still running")

    def output(self, job_id, stream="stdout", max_bytes=16384):
        """All retained bytes of one stream, paging by cursor."""
        cur = {"stdout_cursor": 0, "stderr_cursor": 0}
        out = bytearray()
        while True:
            r, body = self.link.call("job_output", job_id=job_id,
                                     max_bytes=max_bytes, **cur)
            n_out, n_err = r["stdout_len"], r["stderr_len"]
            data = body[:n_out] if stream == "stdout" else body[n_out:]
            if not data:
                return bytes(out), r
            out += data
            key = stream + "_cursor"
            cur[key] = r[stream + "_next"]
            cur["stderr_cursor" if stream == "stdout" else
                "stdout_cursor"] = 0

    def stop(self):
        try:
            self.link.call("shutdown", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.link.close()
        self.listener.close()
        for _ in range(100):
            try:
                for d in sorted(os.listdir(self.cgroup)):
                    p = os.path.join(self.cgroup, d)
                    if os.path.isdir(p):
                        for sub in os.listdir(p):
                            sp = os.path.join(p, sub)
                            if os.path.isdir(sp):
                                os.rmdir(sp)
                        os.rmdir(p)
                os.rmdir(self.cgroup)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
        self.log.seek(0)
        self.logtext = self.log.read()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
