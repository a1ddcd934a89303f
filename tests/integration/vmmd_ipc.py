"""A client for vmmd's sockets (tool calls as mcpd makes them, vmctl), for tests.

Frames are a 16-byte header in host byte order {type, len, id, flags} and a
JSON object; one descriptor may ride along by SCM_RIGHTS.  The first frame
each way is HELLO.  This speaks it from Python's standard library only.
"""
import array
import json
import os
import socket
import struct

HELLO = 1
ERROR = 2
FLAG_FD = 1
FLAG_REPLY = 2

AUTH_VERIFY = 101
AUTH_VERIFY_RESULT = 102
VM_TOOL = 301
VM_TOOL_RESULT = 302
VM_PROGRESS = 303
VM_CANCEL = 304
VM_STREAM_OPEN = 305
VM_STREAM_OPEN_RESULT = 306
VM_STATS = 308
VM_BROKER_OPEN = 310
VMCTL_RESULT = 420


class Conn:
    def __init__(self, path, role="test", timeout=120):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.next_id = 1
        self.fds = []
        self.send(HELLO, {"version": 1, "role": role}, id=0)
        t, _, body, _ = self.recv()
        if t != HELLO:
            raise RuntimeError("no HELLO from %s" % path)
        self.peer = body

    def close(self):
        self.sock.close()

    def send(self, type, body, id=None, flags=0, fd=None):
        payload = json.dumps(body).encode()
        if id is None:
            id = self.next_id
            self.next_id += 1
        if fd is not None:
            flags |= FLAG_FD
        hdr = struct.pack("=IIII", type, len(payload), id, flags)
        anc = []
        if fd is not None:
            anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                    array.array("i", [fd]))]
        self.sock.sendmsg([hdr + payload], anc)
        return id

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            data, anc, _, _ = self.sock.recvmsg(
                n - len(buf), socket.CMSG_SPACE(4 * 4))
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds = array.array("i")
                    fds.frombytes(cdata[:len(cdata) - len(cdata) % 4])
                    self.fds.extend(fds)
            if not data:
                raise EOFError("connection closed")
            buf += data
        return buf

    def recv(self):
        """Returns (type, id, body, fd or None)."""
        type, length, id, flags = struct.unpack("=IIII", self._recv_exact(16))
        body = json.loads(self._recv_exact(length)) if length else {}
        fd = self.fds.pop(0) if flags & FLAG_FD and self.fds else None
        return type, id, body, fd

    def call(self, type, body, fd=None, on_push=None):
        """Sends a request and returns (type, body, fd) of its reply."""
        id = self.send(type, body, fd=fd)
        while True:
            t, rid, rbody, rfd = self.recv()
            if rid == id and t != VM_PROGRESS:
                return t, rbody, rfd
            if on_push is not None:
                on_push(t, rid, rbody)


def tool(conn, credential, name, **args):
    """Calls a tool on vmmd as mcpd would; returns (ok, result or error)."""
    t, body, fd = conn.call(VM_TOOL, {"credential": credential,
                                      "tool": name, "arguments": args})
    if fd is not None:
        os.close(fd)
    if t == ERROR:
        return False, body["error"]
    return True, body["result"]
