"""Helpers for mcpd's integration tests: start mcpd-testd on free ports
with a throwaway configuration, and speak HTTP and WebSocket to it.
Python standard library only."""

import base64
import hashlib
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time

TOKEN_A = "mcpvm_testtokenAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
TOKEN_B = "mcpvm_testtokenBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    """mcpd-testd with its own config in a temporary directory."""

    def __init__(self, extra=None):
        self.binary = os.environ["MCPD_TESTD"]
        self.dir = tempfile.mkdtemp(prefix="mcpd-test-")
        extra = extra or {}
        self.port = int(extra["listen"].split(":")[1]) \
            if "listen" in extra else free_port()
        self.mport = free_port()
        self.host = "127.0.0.1:%d" % self.port
        conf = {
            "listen": "127.0.0.1:%d" % self.port,
            "metrics_listen": "127.0.0.1:%d" % self.mport,
            "request_timeout": "2",
            "idle_timeout": "5",
            "max_body_bytes": "65536",
            "max_header_bytes": "8192",
        }
        conf.update(extra or {})
        path = os.path.join(self.dir, "mcpvm.conf")
        with open(path, "w") as f:
            f.write("[paths]\nruntime_dir = %s\nstate_dir = %s\n[mcpd]\n"
                    % (self.dir, self.dir))
            for k, v in conf.items():
                f.write("%s = %s\n" % (k, v))
        tokens = os.path.join(self.dir, "tokens")
        with open(tokens, "w") as f:
            f.write("%s ws-a\n%s ws-b\n" % (TOKEN_A, TOKEN_B))
        env = dict(os.environ, MCPD_TEST_TOKENS=tokens)
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen([self.binary, "-d", "-f", path],
                                     env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                socket.create_connection(("127.0.0.1", self.mport), 0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("mcpd-testd did not start: " + self.logtext())

    def wait_idle(self, timeout=5):
        """Waits until mcpd holds no client connection (startup probes)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = request(self, "GET", "/metrics", port=self.mport, auth=None)
            if b"\nmcpd_open_connections 0\n" in m.body:
                return
            time.sleep(0.05)
        raise RuntimeError("mcpd kept connections open")

    def logtext(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        text = self.logtext()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        # A sanitizer report or a crash shows as a non-zero exit.
        if rc != 0:
            raise RuntimeError("mcpd-testd exited %s:\n%s" % (rc, text))
        return rc


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def json(self):
        return json.loads(self.body)


def request(d, method, path, headers=None, body=None, host=None,
            port=None, auth=TOKEN_A, timeout=10):
    """One request on a fresh connection; headers may override Host."""
    conn = http.client.HTTPConnection("127.0.0.1", port or d.port,
                                      timeout=timeout)
    hdrs = {"Host": host if host is not None else d.host}
    if auth is not None:
        hdrs["Authorization"] = "Bearer " + auth
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    if body is not None:
        hdrs["Content-Length"] = str(len(body))
    hdrs.update(headers or {})
    conn.putrequest(method, path, skip_host=True,
                    skip_accept_encoding=True)
    for k, v in hdrs.items():
        if v is not None:
            conn.putheader(k, v)
    conn.endheaders(body)
    r = conn.getresponse()
    data = r.read()
    res = Response(r.status, r.getheaders(), data)
    conn.close()
    return res


def raw(d, data, timeout=5, port=None):
    """Sends raw bytes and returns everything read until the server closes."""
    s = socket.create_connection(("127.0.0.1", port or d.port), timeout)
    s.sendall(data)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    return out


class MCP:
    """A minimal Streamable HTTP client."""

    def __init__(self, d, auth=TOKEN_A, version="2025-11-25"):
        self.d = d
        self.auth = auth
        self.session = None
        self.version = version
        self.next_id = 1

    def post(self, msg, accept="application/json, text/event-stream",
             session=True, headers=None, raw_body=None):
        h = {"Accept": accept, "Content-Type": "application/json"}
        if session and self.session:
            h["Mcp-Session-Id"] = self.session
            h["MCP-Protocol-Version"] = self.version
        h.update(headers or {})
        body = raw_body if raw_body is not None else json.dumps(msg).encode()
        return request(self.d, "POST", "/mcp", headers=h, body=body,
                       auth=self.auth)

    def initialize(self, version="2025-11-25"):
        r = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                       "params": {"protocolVersion": version,
                                  "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}}},
                      session=False)
        self.session = r.header("Mcp-Session-Id")
        if r.status == 200:
            self.version = r.json()["result"]["protocolVersion"]
        return r

    def call(self, method, params=None, **kw):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        return self.post(msg, **kw)


def sse_events(body):
    """Parses a text/event-stream body into the JSON of its data lines."""
    out = []
    for block in body.decode().split("\n\n"):
        data = [l[5:].lstrip() for l in block.split("\n")
                if l.startswith("data:")]
        if data:
            out.append(json.loads("\n".join(data)))
    return out


class WS:
    """A minimal RFC 6455 client over a raw socket."""

    def __init__(self, d, path, auth=TOKEN_A, headers=None, key=None):
        self.key = key or base64.b64encode(os.urandom(16)).decode()
        self.s = socket.create_connection(("127.0.0.1", d.port), 10)
        h = {"Host": d.host, "Upgrade": "websocket",
             "Connection": "Upgrade", "Sec-WebSocket-Key": self.key,
             "Sec-WebSocket-Version": "13"}
        if auth is not None:
            h["Authorization"] = "Bearer " + auth
        h.update(headers or {})
        req = "GET %s HTTP/1.1\r\n" % path
        for k, v in h.items():
            if v is not None:
                req += "%s: %s\r\n" % (k, v)
        self.s.sendall((req + "\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                break
            self.buf += chunk
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1]) if lines[0] else 0
        self.headers = dict((l.split(":", 1)[0].lower(),
                             l.split(":", 1)[1].strip())
                            for l in lines[1:] if ":" in l)
        if self.status != 101:
            n = int(self.headers.get("content-length", "0"))
            while len(self.buf) < n:
                chunk = self.s.recv(65536)
                if not chunk:
                    break
                self.buf += chunk
            self.body = self.buf[:n]

    def expected_accept(self):
        return base64.b64encode(hashlib.sha1(
            (self.key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()
        ).digest()).decode()

    @staticmethod
    def frame(opcode, payload=b"", fin=True, mask=True, rsv=0,
              length=None):
        b0 = (0x80 if fin else 0) | rsv << 4 | opcode
        n = len(payload) if length is None else length
        if n < 126:
            hdr = struct.pack("!BB", b0, (0x80 if mask else 0) | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", b0, (0x80 if mask else 0) | 126, n)
        else:
            hdr = struct.pack("!BBQ", b0, (0x80 if mask else 0) | 127, n)
        if not mask:
            return hdr + payload
        m = os.urandom(4)
        masked = bytes(b ^ m[i & 3] for i, b in enumerate(payload)) \
            if len(payload) < 4096 else _xor(payload, m)
        return hdr + m + masked

    def send(self, opcode, payload=b"", **kw):
        self.s.sendall(self.frame(opcode, payload, **kw))

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk

    def recv(self):
        """Returns (opcode, payload) of the next frame."""
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        assert not b1 & 0x80, "server frames must not be masked"
        n = b1 & 0x7f
        off = 2
        if n == 126:
            self._need(4)
            n = struct.unpack("!H", self.buf[2:4])[0]
            off = 4
        elif n == 127:
            self._need(10)
            n = struct.unpack("!Q", self.buf[2:10])[0]
            off = 10
        self._need(off + n)
        payload = self.buf[off:off + n]
        self.buf = self.buf[off + n:]
        return b0 & 0x0f, payload

    def recv_close(self):
        """Skips data frames until a close; returns (code, reason)."""
        while True:
            op, p = self.recv()
            if op == 8:
                if len(p) >= 2:
                    return struct.unpack("!H", p[:2])[0], p[2:].decode()
                return 1005, ""

    def close(self):
        self.s.close()


def _xor(data, m):
    n = len(data)
    key = (m * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^
            int.from_bytes(key, "big")).to_bytes(n, "big")
