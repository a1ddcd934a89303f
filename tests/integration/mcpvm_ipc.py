"""A small client for mcpvm's internal IPC, for tests and benchmarks.

A frame is a 16-byte header {u32 type, u32 len, u32 id, u32 flags} in host
byte order followed by `len` bytes of one JSON object; the first frame each
way is HELLO {"version":1,"role":...}.  See proto/ipcmsg.h.
"""
import json
import socket
import struct

HDR = struct.Struct("=IIII")
IPC_HELLO = 1
IPC_ERROR = 2
IPC_FLAG_REPLY = 0x2

AUTH_VERIFY = 101
AUTH_VERIFY_RESULT = 102
AUTH_SUBSCRIBE = 103
AUTH_SUBSCRIBE_RESULT = 104
AUTH_EVENT = 105
AUTH_REVOKED = 106
AUTH_REVOKED_RESULT = 107
AUTH_REVOKED_MAX = 256

AUTHCTL_ISSUE = 201
AUTHCTL_ROTATE = 203
AUTHCTL_REVOKE_TOKEN = 205
AUTHCTL_REVOKE_WORKSPACE = 207
AUTHCTL_POLICY_SET = 209
AUTHCTL_LIST = 211
AUTHCTL_SHOW = 213


class Closed(Exception):
    """The peer closed the connection."""


def frame(mtype, body, mid=0, flags=0):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return HDR.pack(mtype, len(data), mid, flags) + data


class Conn:
    def __init__(self, path, role="test", timeout=5.0, hello=True):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 1
        self.events = []
        if hello:
            self.sock.sendall(frame(IPC_HELLO, {"version": 1, "role": role}))
            mtype, _, _, body = self.recv()
            if mtype != IPC_HELLO or body.get("version") != 1:
                raise Closed("no HELLO from the server")

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, mtype, body, mid=None):
        if mid is None:
            mid = self.next_id
            self.next_id += 1
        self.sock.sendall(frame(mtype, body, mid))
        return mid

    def _fill(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Closed("connection closed")
            self.buf += chunk

    def recv(self):
        """One frame: (type, id, flags, body)."""
        self._fill(HDR.size)
        mtype, length, mid, flags = HDR.unpack(self.buf[:HDR.size])
        self._fill(HDR.size + length)
        payload = self.buf[HDR.size:HDR.size + length]
        self.buf = self.buf[HDR.size + length:]
        return mtype, mid, flags, json.loads(payload)

    def call(self, mtype, body):
        """Sends a request; returns (type, body) of its reply.  Frames
        pushed meanwhile (events) are kept in self.events."""
        mid = self.send(mtype, body)
        while True:
            rtype, rid, flags, rbody = self.recv()
            if flags & IPC_FLAG_REPLY and rid == mid:
                return rtype, rbody
            self.events.append((rtype, rbody))

    def next_event(self):
        if self.events:
            return self.events.pop(0)
        rtype, _, _, body = self.recv()
        return rtype, body

    def is_closed(self, wait=2.0):
        """True when the server has closed this connection."""
        self.sock.settimeout(wait)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
