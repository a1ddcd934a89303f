#!/usr/bin/env python3
"""mcpd integration: the real HTTP, MCP and WebSocket layers of mcpd on a
real socket (mcpd-testd: test verifier, fake backend).  TAP output."""

import base64
import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcpdlib import (MCP, TOKEN_A, TOKEN_B, WS, Daemon, raw, request,
                     sse_events)
from taplib import run_tests

D = None


def daemon():
    global D
    if D is None:
        D = Daemon({"allowed_origins": "http://good.example"})
    return D


def err_code(r):
    return r.json()["error"]["code"]


# Front end: Host, Origin, routes, methods.

def test_healthz_needs_no_credential():
    r = request(daemon(), "GET", "/healthz", auth=None)
    assert r.status == 200, r.status
    assert r.json() == {"status": "ok"}


def test_host_allowlist():
    d = daemon()
    for host in ("evil.example", "evil.example:%d" % d.port,
                 "127.0.0.1:1", "127.0.0.1:%d.evil" % d.port, ""):
        r = request(d, "POST", "/v1/tools/vm_list", body={}, host=host)
        assert r.status in (400, 403), (host, r.status)
    for host in ("127.0.0.1:%d" % d.port, "localhost:%d" % d.port,
                 "LOCALHOST:%d" % d.port):
        r = request(d, "POST", "/v1/tools/vm_list", body={}, host=host)
        assert r.status == 200, (host, r.status)
    r = request(d, "POST", "/v1/tools/vm_list", body={}, host="evil.example")
    assert r.status == 403 and err_code(r) == "forbidden"
    assert b"allowed_hosts" in r.body


def test_missing_host_is_400():
    d = daemon()
    out = raw(d, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert out.startswith(b"HTTP/1.0 400") or out.startswith(b"HTTP/1.1 400"), out[:40]


def test_foreign_origin_is_403_everywhere():
    d = daemon()
    h = {"Origin": "http://evil.example"}
    for method, path in (("GET", "/healthz"), ("POST", "/mcp"),
                         ("POST", "/v1/tools/vm_list"),
                         ("GET", "/v1/vms/x/streams/5001")):
        r = request(d, method, path, headers=h, body={} if method == "POST"
                    else None)
        assert r.status == 403, (path, r.status)
    r = request(d, "POST", "/v1/tools/vm_list", body={},
                headers={"Origin": "http://good.example"})
    assert r.status == 200, r.status
    r = request(d, "POST", "/v1/tools/vm_list", body={},
                headers={"Origin": "null"})
    assert r.status == 403


def test_unknown_route_and_method():
    d = daemon()
    for path in ("/", "/mcp/", "/v1/tools/", "/v1/tools/a/b", "/metrics",
                 "/v1/vms/x/streams/70000", "/v1/vms/x/streams/01",
                 "/v1/tools/vm%5flist", "/../mcp"):
        r = request(d, "GET", path)
        assert r.status == 404, (path, r.status)
        assert err_code(r) == "not_found"
    r = request(d, "GET", "/v1/tools/vm_list")
    assert r.status == 405 and r.header("Allow") == "POST", r.status
    r = request(d, "PUT", "/mcp")
    assert r.status == 405 and "POST" in r.header("Allow")


# Authentication.

def test_bearer_required():
    d = daemon()
    r = request(d, "POST", "/v1/tools/vm_list", body={}, auth=None)
    assert r.status == 401, r.status
    assert r.header("WWW-Authenticate").startswith("Bearer")
    assert err_code(r) == "unauthorized"
    for authz in ("Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Bearer a b",
                  "Bearer " + "x" * 600, "Bearer \x01"):
        r = request(d, "POST", "/v1/tools/vm_list", body={}, auth=None,
                    headers={"Authorization": authz})
        assert r.status == 401, (authz, r.status)
    r = request(d, "POST", "/v1/tools/vm_list", body={}, auth="mcpvm_wrong")
    assert r.status == 401
    assert "invalid_token" in r.header("WWW-Authenticate")
    challenges = [v for k, v in r.headers if k.lower() == "www-authenticate"]
    assert len(challenges) == 1, challenges
    r = request(d, "POST", "/v1/tools/vm_list", body={},
                headers={"Authorization": "bearer " + TOKEN_A}, auth=None)
    assert r.status == 200, "scheme is case-insensitive"


def test_verifier_down_is_503():
    r = request(daemon(), "POST", "/v1/tools/vm_list", body={},
                auth="authd-down")
    assert r.status == 503 and err_code(r) == "unavailable"


def test_every_endpoint_but_healthz_needs_auth():
    d = daemon()
    for method, path in (("POST", "/mcp"), ("GET", "/mcp"),
                         ("DELETE", "/mcp"), ("POST", "/v1/tools/vm_list"),
                         ("GET", "/v1/vms/v/streams/5001")):
        r = request(d, method, path, auth=None,
                    body=b"{}" if method == "POST" else None,
                    headers={"Content-Type": "application/json"})
        assert r.status == 401, (method, path, r.status)


# JSON HTTP.

def test_rest_call_and_identity():
    d = daemon()
    r = request(d, "POST", "/v1/tools/vm_list", body={})
    assert r.status == 200, r.status
    assert r.header("Content-Type") == "application/json"
    assert r.json()["workspace"] == "ws-a"
    r = request(d, "POST", "/v1/tools/vm_list", body={}, auth=TOKEN_B)
    assert r.json()["workspace"] == "ws-b"
    # No tool takes a workspace: naming one anywhere is refused, never
    # obeyed.
    for body in ({"workspace": "ws-b"}, {"workspace_id": "ws-b"}):
        r = request(d, "POST", "/v1/tools/vm_list", body=body)
        assert r.status == 400 and err_code(r) == "invalid_argument", body
    r = request(d, "POST", "/v1/tools/vm_status",
                body={"vm_id": "ws-b", "workspace": "ws-b"})
    assert r.status == 400
    r = request(d, "POST", "/v1/tools/vm_status", body={"vm_id": "ws-b"})
    assert r.status == 200 and r.json()["workspace"] == "ws-a"


def test_rest_error_statuses():
    d = daemon()
    for code, status in (("invalid_argument", 400), ("unauthorized", 401),
                         ("forbidden", 403), ("not_found", 404),
                         ("conflict", 409), ("busy", 409),
                         ("quota_exceeded", 429), ("rate_limited", 429),
                         ("unavailable", 503), ("internal", 500)):
        r = request(d, "POST", "/v1/tools/vm_status",
                    body={"vm_id": "err-" + code})
        assert r.status == status, (code, r.status)
        j = r.json()
        assert j["error"]["code"] == code and j["error"]["message"], j
        if status == 401:
            assert r.header("WWW-Authenticate").startswith("Bearer")


def test_rest_bad_bodies():
    d = daemon()
    cases = [
        (b'{"a":', 400, "truncated"),
        (b'{"a":1} x', 400, ""),
        (b'[1,2]', 400, "object"),
        (b'"str"', 400, "object"),
        (b'{"a":"\xff\xfe"}', 400, "UTF-8"),
        (b'{"a":"\xc0\xaf"}', 400, "UTF-8"),
        (b'', 400, ""),
        (b'{"a":' + b'[' * 100 + b']' * 100 + b'}', 400, "deep"),
        (b"{'a':1}", 400, ""),
        # json-c alone takes these for 18446744073709551615 and infinity.
        (b'{"a":99999999999999999999999}', 400, "integer out of range"),
        (b'{"a":1e999}', 400, "number out of range"),
        (b'null', 400, "object"),
    ]
    for body, status, word in cases:
        r = request(d, "POST", "/v1/tools/vm_list", body=body,
                    headers={"Content-Type": "application/json"})
        assert r.status == status, (body[:20], r.status)
        assert err_code(r) == "invalid_argument"
        assert word.lower() in r.json()["error"]["message"].lower(), \
            (word, r.json())
    r = request(d, "POST", "/v1/tools/vm_list", body=b"{}",
                headers={"Content-Type": "text/plain"})
    assert r.status == 415
    r = request(d, "POST", "/v1/tools/vm_nothing", body={})
    assert r.status == 404 and err_code(r) == "not_found"
    # Schema validation: wrong types, unknown fields, missing ones.
    for body, word in (({"vm_id": 5}, "vm_id"), ({}, "vm_id"),
                       ({"vm_id": "a", "extra": 1}, "extra"),
                       ({"vm_id": "../etc"}, "vm_id")):
        r = request(d, "POST", "/v1/tools/vm_status", body=body)
        assert r.status == 400, (body, r.status)
        assert word in r.json()["error"]["message"], r.json()


def test_oversized_body_is_413():
    d = daemon()
    big = b'{"a":"' + b"x" * 70000 + b'"}'
    r = request(d, "POST", "/v1/tools/vm_list", body=big,
                headers={"Content-Type": "application/json"})
    assert r.status == 413, r.status
    r = request(d, "POST", "/mcp", body=big,
                headers={"Content-Type": "application/json"})
    assert r.status == 413, r.status
    assert request(d, "GET", "/healthz").status == 200


def test_header_flood_is_413():
    d = daemon()
    hdrs = "".join("X-Flood-%d: %s\r\n" % (i, "y" * 50) for i in range(400))
    out = raw(d, ("GET /healthz HTTP/1.1\r\nHost: %s\r\n%s\r\n"
                  % (d.host, hdrs)).encode())
    assert out.startswith(b"HTTP/1.1 413"), out[:40]
    out = raw(d, ("GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Long: %s\r\n\r\n"
                  % (d.host, "z" * 20000)).encode())
    assert out.startswith(b"HTTP/1.1 413"), out[:40]
    assert request(d, "GET", "/healthz").status == 200


def test_malformed_request_lines():
    d = daemon()
    for data in (b"GARBAGE\r\n\r\n", b"GET\r\n\r\n",
                 b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n",
                 b"\x00\x01\x02\r\n\r\n",
                 b"POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: -5\r\n\r\n"
                 % d.host.encode(),
                 b"POST /mcp HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked"
                 b"\r\n\r\nzz\r\n" % d.host.encode()):
        out = raw(d, data, timeout=4)
        assert out == b"" or out.startswith(b"HTTP/1.1 4") or \
            out.startswith(b"HTTP/1.0 4"), (data, out[:60])
    assert d.alive()
    assert request(d, "GET", "/healthz").status == 200


def test_slowloris_is_cut_off():
    d = daemon()
    socks = []
    t0 = time.time()
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", d.port), 10)
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: " + d.host.encode() +
                  b"\r\nX-Slow: ")
        socks.append(s)
    # Trickle a byte a second: each keeps the idle timer happy, but the
    # whole request must arrive within request_timeout (2 s here).
    for _ in range(3):
        time.sleep(1)
        for s in socks:
            try:
                s.sendall(b"a")
            except OSError:
                pass
        # Good clients are served meanwhile.
        assert request(d, "GET", "/healthz").status == 200
    for s in socks:
        s.settimeout(5)
        try:
            data = s.recv(4096)
            while data and not data.endswith(b"}"):
                more = s.recv(4096)
                if not more:
                    break
                data += more
        except (ConnectionResetError, socket.timeout):
            data = b""
        assert data == b"" or data.startswith(b"HTTP/1.1 408"), data[:40]
        s.close()
    assert time.time() - t0 < 8
    # The same for a body that never completes.
    s = socket.create_connection(("127.0.0.1", d.port), 10)
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: " + d.host.encode() +
              b"\r\nContent-Type: application/json\r\n"
              b"Content-Length: 100\r\n\r\n{")
    s.settimeout(6)
    t1 = time.time()
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        pass
    assert time.time() - t1 < 5
    s.close()


def test_keepalive_and_requests_per_connection():
    d = Daemon({"max_requests_per_connection": "3"})
    try:
        s = socket.create_connection(("127.0.0.1", d.port), 5)
        req = ("GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n" % d.host).encode()
        got = b""
        for i in range(3):
            s.sendall(req)
            deadline = time.time() + 5
            while got.count(b'{"status":"ok"}') < i + 1 and \
                    time.time() < deadline:
                got += s.recv(4096)
        assert got.count(b"HTTP/1.1 200") == 3, got
        assert b"Connection: close" in got.split(b"HTTP/1.1 200")[3]
        s.settimeout(3)
        assert s.recv(4096) == b"", "closed after the limit"
        s.close()
    finally:
        d.stop()


def test_connection_limits():
    d = Daemon({"max_connections": "6", "max_connections_per_client": "4",
                "request_timeout": "30"})
    try:
        d.wait_idle()
        held = []
        for _ in range(4):
            held.append(socket.create_connection(("127.0.0.1", d.port), 5))
        time.sleep(0.3)
        # A fifth from the same address is refused with 429.
        out = raw(d, b"GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n"
                  % d.host.encode())
        assert out.startswith(b"HTTP/1.1 429"), out[:60]
        assert b"max_connections_per_client" in out
        # Other addresses fill the server; then 503.
        for src in ("127.0.0.2", "127.0.0.3"):
            s = socket.socket()
            s.bind((src, 0))
            s.connect(("127.0.0.1", d.port))
            held.append(s)
        time.sleep(0.3)
        s = socket.socket()
        s.bind(("127.0.0.4", 0))
        s.connect(("127.0.0.1", d.port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n"
                  % d.host.encode())
        s.settimeout(5)
        out = b""
        try:
            while True:
                c = s.recv(4096)
                if not c:
                    break
                out += c
        except ConnectionResetError:
            pass
        assert out.startswith(b"HTTP/1.1 503"), out[:60]
        assert b"max_connections" in out
        s.close()
        for h in held:
            h.close()
        time.sleep(0.3)
        assert request(d, "GET", "/healthz").status == 200
        m = request(d, "GET", "/metrics", port=d.mport, auth=None)
        assert b"mcpd_connections_rejected_total 2" in m.body, m.body
    finally:
        d.stop()


# MCP.

def test_mcp_initialize_versions():
    d = daemon()
    for asked, answered in (("2025-11-25", "2025-11-25"),
                            ("2025-06-18", "2025-06-18"),
                            ("2025-03-26", "2025-03-26"),
                            ("2099-01-01", "2025-11-25"),
                            ("2024-11-05", "2025-11-25"),
                            ("garbage", "2025-11-25")):
        c = MCP(d)
        r = c.initialize(asked)
        assert r.status == 200, r.status
        j = r.json()
        assert j["jsonrpc"] == "2.0" and j["id"] == 0
        assert j["result"]["protocolVersion"] == answered, (asked, j)
        assert "tools" in j["result"]["capabilities"]
        assert j["result"]["serverInfo"]["name"] == "mcpvm"
        sid = r.header("Mcp-Session-Id")
        assert sid and len(sid) == 32 and all(
            ch in "0123456789abcdef" for ch in sid), sid


def test_mcp_session_lifecycle():
    d = daemon()
    c = MCP(d)
    c.initialize()
    r = c.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert r.status == 202 and r.body == b"", (r.status, r.body)
    r = c.call("ping")
    assert r.status == 200 and r.json()["result"] == {}, r.body
    # No session header, unknown session, another workspace's session.
    r = c.call("ping", session=False)
    assert r.status == 400, r.status
    r = c.call("ping", session=False,
               headers={"Mcp-Session-Id": "0" * 32})
    assert r.status == 404, r.status
    other = MCP(d, auth=TOKEN_B)
    other.session = c.session
    r = other.call("ping")
    assert r.status == 404, "another credential must not use the session"
    r = request(d, "DELETE", "/mcp", auth=TOKEN_B,
                headers={"Mcp-Session-Id": c.session})
    assert r.status == 404
    # Protocol version header checks.
    r = c.call("ping", headers={"MCP-Protocol-Version": "1999-01-01"})
    assert r.status == 400, r.status
    r = c.call("ping", headers={"MCP-Protocol-Version": None})
    assert r.status == 200, "absent header means 2025-03-26"
    # DELETE ends it.
    r = request(d, "DELETE", "/mcp", headers={"Mcp-Session-Id": c.session})
    assert r.status == 204, r.status
    r = c.call("ping")
    assert r.status == 404
    r = request(d, "DELETE", "/mcp", headers={"Mcp-Session-Id": c.session})
    assert r.status == 404


def test_mcp_jsonrpc_errors():
    d = daemon()
    c = MCP(d)
    c.initialize()
    cases = [
        (b"{", 400, -32700),
        (b"\xff", 400, -32700),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', 400, -32600),
        (b'{"id":1,"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":5}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1}', 400, -32600),
        (b'42', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"nope/nope"}', 200, -32601),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', 200,
         -32602),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}', 200,
         -32602),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
         b'"params":{"name":"rm_rf"}}', 200, -32602),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list",'
         b'"params":{"cursor":"x"}}', 200, -32602),
    ]
    for body, status, code in cases:
        r = c.post(None, raw_body=body)
        assert r.status == status, (body, r.status, r.body)
        assert r.json()["error"]["code"] == code, (body, r.body)
    r = c.post(None, raw_body=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status == 415
    r = c.call("ping", accept="image/png")
    assert r.status == 406
    r = c.post({"jsonrpc": "2.0", "id": 9, "result": {}})
    assert r.status == 202 and r.body == b"", "responses are accepted"


def test_mcp_tools_list_and_call():
    d = daemon()
    c = MCP(d)
    c.initialize()
    r = c.call("tools/list")
    tools = r.json()["result"]["tools"]
    names = {t["name"] for t in tools}
    assert names == {"vm_create", "vm_list", "vm_status", "vm_exec",
                     "vm_job_status", "vm_job_output", "vm_job_cancel",
                     "vm_read_file", "vm_write_file", "vm_suspend",
                     "vm_resume", "vm_destroy", "vm_run", "vm_snapshot",
                     "vm_snapshot_list", "vm_snapshot_delete",
                     "vm_fork"}, names
    for t in tools:
        assert t["description"] and t["inputSchema"]["type"] == "object"
        assert t["outputSchema"]["type"] == "object"
    r = c.call("tools/call", {"name": "vm_status",
                              "arguments": {"vm_id": "v1"}})
    res = r.json()["result"]
    assert res["isError"] is False
    assert res["structuredContent"]["workspace"] == "ws-a"
    assert json.loads(res["content"][0]["text"]) == res["structuredContent"]
    r = c.call("tools/call", {"name": "vm_status",
                              "arguments": {"vm_id": "err-not_found"}})
    res = r.json()["result"]
    assert res["isError"] is True
    assert "structuredContent" not in res
    assert json.loads(res["content"][0]["text"])["error"]["code"] == \
        "not_found"
    for args in ([1], {"workspace": "ws-b"}):
        r = c.call("tools/call", {"name": "vm_list", "arguments": args})
        res = r.json()["result"]
        assert res["isError"] is True and json.loads(res["content"][0][
            "text"])["error"]["code"] == "invalid_argument"


def test_mcp_accept_negotiation():
    d = daemon()
    c = MCP(d)
    c.initialize()
    r = c.call("ping", accept="text/event-stream")
    assert r.status == 200
    assert r.header("Content-Type") == "text/event-stream"
    assert r.header("X-Accel-Buffering") == "no"
    ev = sse_events(r.body)
    assert ev[0]["result"] == {}, ev
    r = c.call("ping", accept="application/json")
    assert r.header("Content-Type") == "application/json"
    r = c.call("ping", accept=None)
    assert r.status == 200
    r = c.call("ping", accept="application/json;q=0, text/event-stream")
    assert r.header("Content-Type") == "text/event-stream"


def test_mcp_progress_over_sse():
    d = daemon()
    c = MCP(d)
    c.initialize()
    r = c.call("tools/call", {"name": "vm_create",
                              "arguments": {"request_id": "r1"},
                              "_meta": {"progressToken": "tok-1"}})
    assert r.header("Content-Type") == "text/event-stream"
    assert r.header("X-Accel-Buffering") == "no"
    ev = sse_events(r.body)
    prog = [e for e in ev if e.get("method") == "notifications/progress"]
    assert len(prog) == 3, ev
    assert all(p["params"]["progressToken"] == "tok-1" for p in prog)
    assert [p["params"]["progress"] for p in prog] == [1, 2, 3]
    assert ev[-1]["id"] == c.next_id and \
        ev[-1]["result"]["isError"] is False


def test_mcp_cancel():
    d = daemon()
    c = MCP(d)
    c.initialize()
    out = {}

    def slow():
        t0 = time.time()
        out["r"] = c.call("tools/call", {"name": "vm_suspend",
                                         "arguments": {"vm_id": "v1"}},
                          accept="application/json")
        out["t"] = time.time() - t0
    th = threading.Thread(target=slow)
    th.start()
    time.sleep(0.5)
    cid = c.next_id
    r = c.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": cid, "reason": "test"}})
    assert r.status == 202
    th.join(10)
    assert not th.is_alive()
    assert out["t"] < 5, out["t"]
    assert out["r"].json()["error"]["code"] == -32800, out["r"].body


def test_mcp_get_stream_and_delete():
    d = daemon()
    c = MCP(d)
    c.initialize()
    s = socket.create_connection(("127.0.0.1", d.port), 5)
    s.sendall(("GET /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
               "Accept: text/event-stream\r\nMcp-Session-Id: %s\r\n\r\n"
               % (d.host, TOKEN_A, c.session)).encode())
    head = b""
    while b"stream open" not in head:
        head += s.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"Content-Type: text/event-stream" in head
    r = request(d, "GET", "/mcp", headers={"Accept": "text/event-stream",
                                           "Mcp-Session-Id": c.session})
    assert r.status == 409, r.status
    r = request(d, "GET", "/mcp", headers={"Accept": "application/json",
                                           "Mcp-Session-Id": c.session})
    assert r.status == 406, r.status
    r = request(d, "DELETE", "/mcp", headers={"Mcp-Session-Id": c.session})
    assert r.status == 204
    s.settimeout(5)
    rest = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        rest += chunk
        if rest.endswith(b"0\r\n\r\n"):
            break
    assert rest.endswith(b"0\r\n\r\n"), rest
    s.close()


def test_mcp_session_limit():
    d = Daemon({"max_sessions_per_workspace": "2"})
    try:
        for _ in range(2):
            assert MCP(d).initialize().status == 200
        r = MCP(d).initialize()
        assert r.status == 429, r.status
        assert MCP(d, auth=TOKEN_B).initialize().status == 200
    finally:
        d.stop()


# WebSocket streams.

# MCP 2026-07-28: stateless requests beside the sessions above.

SL = "2026-07-28"
SL_META = {"io.modelcontextprotocol/protocolVersion": SL,
           "io.modelcontextprotocol/clientCapabilities": {}}


def sl_post(d, method, params=None, rid=1, name=None, headers=None,
            auth=TOKEN_A, accept="application/json, text/event-stream"):
    """One stateless request with conformant headers unless overridden."""
    p = dict(params or {})
    p.setdefault("_meta", SL_META)
    h = {"Accept": accept, "MCP-Protocol-Version": SL, "Mcp-Method": method}
    if name is not None:
        h["Mcp-Name"] = name
    h.update(headers or {})
    return request(d, "POST", "/mcp", headers=h, auth=auth,
                   body={"jsonrpc": "2.0", "id": rid, "method": method,
                         "params": p})


def sl_metric(d, name):
    body = request(d, "GET", "/metrics", port=d.mport, auth=None).body
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError("no metric " + name)


def test_mcp_stateless_requests():
    d = daemon()
    r = sl_post(d, "server/discover")
    assert r.status == 200, r.body
    assert r.header("Mcp-Session-Id") is None
    res = r.json()["result"]
    assert SL in res["supportedVersions"] and \
        "2025-11-25" in res["supportedVersions"]
    assert res["resultType"] == "complete" and "tools" in res["capabilities"]
    assert res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == \
        "mcpvm"
    r = sl_post(d, "tools/list", accept="application/json")
    res = r.json()["result"]
    assert len(res["tools"]) == 17 and res["ttlMs"] > 0 and \
        res["cacheScope"] == "public"
    # The bearer credential alone authorizes, and names the workspace.
    for tok, ws in ((TOKEN_A, "ws-a"), (TOKEN_B, "ws-b")):
        r = sl_post(d, "tools/call", {"name": "vm_status",
                                      "arguments": {"vm_id": "v1"}},
                    name="vm_status", auth=tok, accept="application/json")
        assert r.status == 200, r.body
        res = r.json()["result"]
        assert res["resultType"] == "complete" and res["isError"] is False
        assert res["structuredContent"]["workspace"] == ws
    r = sl_post(d, "tools/call", {"name": "vm_status",
                                  "arguments": {"vm_id": "v1"}},
                name="vm_status", auth=None)
    assert r.status == 401
    # Body arguments claiming a workspace are still refused.
    r = sl_post(d, "tools/call", {"name": "vm_list",
                                  "arguments": {"workspace": "ws-b"}},
                name="vm_list")
    assert r.json()["result"]["isError"] is True
    # Progress on the request's own stream, then the result.
    r = sl_post(d, "tools/call", {"name": "vm_create",
                                  "arguments": {"request_id": "sl1"},
                                  "_meta": dict(SL_META,
                                                progressToken="p1")},
                name="vm_create", rid=7)
    assert r.header("Content-Type") == "text/event-stream"
    ev = sse_events(r.body)
    assert [e["params"]["progress"] for e in ev
            if e.get("method") == "notifications/progress"] == [1, 2, 3]
    assert ev[-1]["id"] == 7 and ev[-1]["result"]["resultType"] == \
        "complete"
    # A session's id on a stateless request is ignored, not looked up.
    r = sl_post(d, "tools/list", headers={"Mcp-Session-Id": "f" * 32})
    assert r.status == 200 and "result" in r.json()


def test_mcp_stateless_errors():
    d = daemon()
    cases = [
        # (method, params, name, headers, status, code)
        ("tools/list", {"_meta": {}}, None, None, 400, -32602),
        ("tools/list", None, None, {"Mcp-Method": "prompts/list"}, 400,
         -32020),
        ("tools/list", None, None, {"Mcp-Method": None}, 400, -32020),
        ("tools/list", None, None, {"MCP-Protocol-Version": "2025-11-25"},
         400, -32020),
        ("tools/call", {"name": "vm_list", "arguments": {}}, "vm_status",
         None, 400, -32020),
        ("tools/call", {"name": "vm_list", "arguments": {}}, None, None,
         400, -32020),
        ("tools/call", {"name": "vm_list", "arguments": {}},
         "=?base64?bad!?=", None, 400, -32020),
        ("initialize", None, None, None, 404, -32601),
        ("ping", None, None, None, 404, -32601),
        ("resources/list", None, None, None, 404, -32601),
    ]
    for method, params, name, hdrs, status, code in cases:
        r = sl_post(d, method, params, rid=41, name=name, headers=hdrs)
        assert r.status == status, (method, hdrs, r.status, r.body)
        body = r.json()
        assert body["error"]["code"] == code and body["id"] == 41, \
            (method, hdrs, body)
    r = sl_post(d, "tools/list", {"_meta": dict(
        SL_META, **{"io.modelcontextprotocol/protocolVersion": "v9"})},
        headers={"MCP-Protocol-Version": "v9"})
    assert r.status == 400
    e = r.json()["error"]
    assert e["code"] == -32022 and e["data"]["requested"] == "v9" and \
        SL in e["data"]["supported"]
    # Base64 and optional whitespace in Mcp-Name are decoded, not refused.
    for name in ("=?base64?dm1fbGlzdA==?=", "  vm_list "):
        r = sl_post(d, "tools/call", {"name": "vm_list", "arguments": {}},
                    name=name, accept="application/json")
        assert r.status == 200 and "result" in r.json(), (name, r.body)
    # No GET stream or DELETE in the stateless revision.
    for method in ("GET", "DELETE"):
        r = request(d, method, "/mcp", headers={
            "Accept": "text/event-stream", "MCP-Protocol-Version": SL})
        assert r.status == 405 and r.header("Allow") == "POST", r.status
    # Sessions still work beside it.
    c = MCP(d)
    assert c.initialize().status == 200 and c.session
    assert c.call("tools/list").status == 200


# The tasks extension (io.modelcontextprotocol/tasks) of 2026-07-28, on the
# wire, against the fake backend's jobs (mcpd_testd.c: job "j1" runs,
# "done..." has ended, vm "err-<code>" fails with that code).  The real
# jobs, workspaces and restarts are tests/mcp/tasks.mjs and test_e2e.py's.
TASKS = "io.modelcontextprotocol/tasks"
SL_TASKS_META = dict(SL_META, **{
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {
        TASKS: {}}}})


def tool_call(d, tool, args, meta=SL_TASKS_META):
    """A stateless tools/call of tool, declaring the tasks extension
    unless meta is None."""
    params = {"name": tool, "arguments": args}
    if meta is not None:
        params["_meta"] = meta
    return sl_post(d, "tools/call", params, name=tool,
                   accept="application/json")


def task_post(d, method, task_id, meta=SL_TASKS_META, name=None, rid=5,
              extra=None, auth=TOKEN_A):
    p = {"taskId": task_id, "_meta": meta}
    p.update(extra or {})
    return sl_post(d, method, p, rid=rid,
                   name=task_id if name is None else name, auth=auth,
                   accept="application/json")


def test_mcp_tasks_wire():
    d = daemon()
    caps = sl_post(d, "server/discover").json()["result"]["capabilities"]
    assert caps["extensions"] == {TASKS: {}}, caps
    c = MCP(d)
    assert "extensions" not in c.initialize().json()["result"][
        "capabilities"], "the session revisions have no tasks"
    # A client that declares the extension gets its vm_exec as a task.
    args = {"vm_id": "v1", "request_id": "r.1:x", "command": "sleep 9",
            "wait_seconds": 30}
    r = tool_call(d, "vm_exec", args)
    assert r.status == 200, r.body
    t = r.json()["result"]
    assert t["resultType"] == "task" and t["taskId"] == "v1.j1.r.1:x" and \
        t["status"] == "working" and t["ttlMs"] is None and \
        t["pollIntervalMs"] == 1000 and \
        t["createdAt"] == "2026-12-01T10:00:00Z" and \
        "result" not in t and "task" not in t, t
    # Without it, nothing changes; other tools are never tasks.
    r = tool_call(d, "vm_exec", args, meta=None)
    res = r.json()["result"]
    assert res["resultType"] == "complete" and \
        res["structuredContent"]["arguments"]["wait_seconds"] == 30, res
    r = tool_call(d, "vm_status", {"vm_id": "v1"})
    assert r.json()["result"]["resultType"] == "complete"
    # A tool error is the answer, not a task.
    r = tool_call(d, "vm_exec", dict(args, vm_id="err-not_found"))
    res = r.json()["result"]
    assert res["resultType"] == "complete" and res["isError"] is True, res
    # tasks/get: running, then ended with vm_exec's result inlined.
    r = task_post(d, "tasks/get", "v1.j1.r.1:x")
    assert r.status == 200, r.body
    g = r.json()["result"]
    assert g["resultType"] == "complete" and g["status"] == "working" and \
        g["taskId"] == "v1.j1.r.1:x" and "result" not in g, g
    g = task_post(d, "tasks/get", "v1.done7.r9").json()["result"]
    assert g["status"] == "completed" and \
        g["lastUpdatedAt"] == "2026-12-01T10:00:01Z", g
    sc = g["result"]["structuredContent"]
    assert g["result"]["isError"] is False and \
        g["result"]["resultType"] == "complete", g
    assert (sc["vm_id"], sc["job_id"], sc["request_id"], sc["state"],
            sc["exit_code"], sc["output"]["stdout"],
            sc["output"]["next_cursor"]) == (
        "v1", "done7", "r9", "completed", 0, "out\n",
        {"stdout": 4, "stderr": 0}), sc
    assert "vm_id" not in sc["output"]
    # cancel and update answer an empty acknowledgement.
    for method, extra in (("tasks/cancel", None),
                          ("tasks/update", {"inputResponses": {}})):
        r = task_post(d, method, "v1.j1.r1", extra=extra)
        a = r.json()["result"]
        assert r.status == 200 and a["resultType"] == "complete" and \
            "taskId" not in a and "status" not in a, (method, a)
    # Unknown and malformed ids are not found (-32602), never forwarded.
    for tid in ("err-not_found.j1.r1", "v1.j1", "v1..r1", ".j1.r1",
                "v1.j1.", "v1.j/1.r1", "v1.j1.r 1", "-v.j1.r1",
                "v" * 65 + ".j1.r1", "v1.j1." + "r" * 129, "v1.j1.r\u00e9",
                "", "x" * 5000):
        # Base64 in Mcp-Name carries what a header cannot.
        r = task_post(d, "tasks/get", tid, name="=?base64?%s?=" % (
            base64.b64encode(tid.encode()).decode()) if tid else "")
        e = r.json()["error"]
        assert r.status == 400 and e["code"] == -32602 and \
            r.json()["id"] == 5, (tid, r.body)
    for params in ({}, {"taskId": 7}, {"taskId": None}):
        r = sl_post(d, "tasks/get", dict(params, _meta=SL_TASKS_META),
                    accept="application/json")
        assert r.json()["error"]["code"] == -32602, (params, r.body)
    r = task_post(d, "tasks/update", "v1.j1.r1")
    assert r.json()["error"]["code"] == -32602, "inputResponses required"
    r = task_post(d, "tasks/get", "err-unavailable.j1.r1")
    assert r.json()["error"]["code"] == -32603, r.body
    # Without the extension: -32021, naming it.
    for method in ("tasks/get", "tasks/cancel", "tasks/update"):
        r = task_post(d, method, "v1.j1.r1", meta=SL_META,
                      extra={"inputResponses": {}})
        e = r.json()["error"]
        assert r.status == 400 and e["code"] == -32021 and \
            e["data"]["requiredCapabilities"]["extensions"] == {
                TASKS: {}}, (method, r.body)
    # Mcp-Name is the task id.
    r = task_post(d, "tasks/get", "v1.j1.r1", name="v1.j1.r2")
    assert r.status == 400 and r.json()["error"]["code"] == -32020
    r = sl_post(d, "tasks/get", {"taskId": "v1.j1.r1",
                                 "_meta": SL_TASKS_META})
    assert r.status == 400 and r.json()["error"]["code"] == -32020
    # Removed and never-defined methods of the extension.
    for method in ("tasks/result", "tasks/list"):
        r = task_post(d, method, "v1.j1.r1")
        assert r.json()["error"]["code"] == -32601, (method, r.body)
    # The session revisions: no such methods.
    for method in ("tasks/get", "tasks/cancel"):
        r = c.call(method, {"taskId": "v1.j1.r1"})
        assert r.status == 200 and \
            r.json()["error"]["code"] == -32601, (method, r.body)


def test_mcp_run_tasks_wire():
    """A task-augmented vm_run against the fake backend's runs
    (mcpd_testd.c: vm_run is taken on, then runs; request_id "live..."
    runs in v1 as j1, "done..." ended, "bad..." was refused; workspace B
    has none)."""
    d = daemon()
    calls = sl_metric(d, "mcpd_inflight_tool_calls")
    args = {"request_id": "live-1", "command": "make test"}
    r = tool_call(d, "vm_run", args)
    assert r.status == 200, r.body
    t = r.json()["result"]
    assert t["resultType"] == "task" and t["taskId"] == "run:live-1" and \
        t["status"] == "working" and "result" not in t, t
    # Answered, the call goes on: one of the workspace's calls in flight.
    assert sl_metric(d, "mcpd_inflight_tool_calls") == calls + 1
    # Running: where its output so far is.
    g = task_post(d, "tasks/get", "run:live-1").json()["result"]
    assert g["status"] == "working" and g["taskId"] == "run:live-1" and \
        "VM v1 as job j1; 4 bytes of stdout" in g["statusMessage"] and \
        g["createdAt"] == "2026-12-01T10:00:00.000Z", g
    # Ended: vm_run's result as a plain vm_run gives it.
    g = task_post(d, "tasks/get", "run:done.7").json()["result"]
    sc = g["result"]["structuredContent"]
    assert g["status"] == "completed" and \
        g["lastUpdatedAt"] == "2026-12-01T10:00:01.000Z" and \
        g["result"]["isError"] is False and sc["origin"] == "warm" and \
        sc["stdout"] == "out\n", g
    # vm_run's error is a tool error: completed, isError.
    g = task_post(d, "tasks/get", "run:bad-1").json()["result"]
    assert g["status"] == "completed" and \
        g["result"]["isError"] is True and \
        "max_vms" in g["statusMessage"], g
    # Cancel acknowledges, whether the run is under way or ended (which
    # changes nothing), as a job's.
    r = task_post(d, "tasks/cancel", "run:live-1")
    assert r.status == 200 and "status" not in r.json()["result"], r.body
    # ... and the run's end ends mcpd's call, unheard.
    assert sl_metric(d, "mcpd_inflight_tool_calls") == calls
    r = task_post(d, "tasks/cancel", "run:done.7")
    assert r.status == 200 and "status" not in r.json()["result"], r.body
    # Another workspace's, an unknown one and malformed ids: not found.
    for tid, auth in (("run:live-1", TOKEN_B), ("run:nope", TOKEN_A),
                      ("run:", TOKEN_A), ("run:a b", TOKEN_A),
                      ("run:" + "r" * 129, TOKEN_A)):
        r = task_post(d, "tasks/get", tid, auth=auth, name="=?base64?%s?=" %
                      base64.b64encode(tid.encode()).decode())
        assert r.status == 400 and \
            r.json()["error"]["code"] == -32602, (tid, r.body)
    # A retry of a run that had ended (answered before any progress) is
    # its task, ended.
    r = tool_call(d, "vm_run", dict(args, request_id="done.7"))
    t = r.json()["result"]
    assert t["resultType"] == "task" and t["taskId"] == "run:done.7" and \
        t["status"] == "completed", t
    # Without the extension, vm_run is no task.
    r = tool_call(d, "vm_run", dict(args, request_id="done-plain"),
                  meta=None)
    assert r.json()["result"]["resultType"] == "complete", r.body


def sl_stream(d, method, params, name=None, auth=TOKEN_A):
    """Opens a stateless request on a raw socket and returns it."""
    p = dict(params)
    p.setdefault("_meta", SL_META)
    body = json.dumps({"jsonrpc": "2.0", "id": 99, "method": method,
                       "params": p}).encode()
    head = ("POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            "MCP-Protocol-Version: %s\r\nMcp-Method: %s\r\n%s"
            "Content-Length: %d\r\n\r\n" % (
                d.host, auth, SL, method,
                "Mcp-Name: %s\r\n" % name if name else "", len(body)))
    s = socket.create_connection(("127.0.0.1", d.port), 5)
    s.sendall(head.encode() + body)
    return s


def read_until(s, marker, timeout=5):
    s.settimeout(timeout)
    buf = b""
    while marker not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def read_events(s, buf):
    """buf and what follows on s, to the end of an event (and of its
    chunk)."""
    while not buf or not buf.endswith((b"\n\n", b"\n\n\r\n")):
        more = read_until(s, b"\n\n")
        assert more, buf
        buf += more
    return buf


def sse_messages(buf):
    return [json.loads(line[5:]) for line in buf.decode().split("\n")
            if line.startswith("data:")]


def test_mcp_listen_task_notifications():
    """subscriptions/listen with notifications.taskIds, from a client
    with the tasks extension: acknowledged with the ids that parse, then
    notifications/tasks as each task's status is first seen and changes,
    asked with the listen's credential, so another workspace's tasks are
    never told (fake backend: run "done..." ended, "live..." runs)."""
    d = daemon()
    ids = ["run:done.7", "v1.done7.r9", "run:live-x", "run:nope",
           "bad id", 7]
    s = sl_stream(d, "subscriptions/listen", {
        "notifications": {"taskIds": ids}, "_meta": SL_TASKS_META})
    try:
        buf = read_events(s, read_until(s, b"acknowledged"))
        msgs = sse_messages(buf)
        assert msgs[0]["params"]["notifications"] == {
            "taskIds": ids[:4]}, msgs[0]
        seen = {}
        while True:
            for m in msgs[1:]:
                assert m["method"] == "notifications/tasks", m
                seen[m["params"]["taskId"]] = m["params"]
            if len(seen) >= 3:
                break
            msgs = [None] + sse_messages(read_events(s, b""))
        assert seen["run:done.7"]["status"] == "completed" and \
            seen["run:done.7"]["result"]["structuredContent"][
                "origin"] == "warm" and \
            "resultType" not in seen["run:done.7"], seen
        assert seen["v1.done7.r9"]["status"] == "completed"
        assert seen["run:live-x"]["status"] == "working"
        assert "run:nope" not in seen
    finally:
        s.close()
    # Workspace B: its vm_run tasks are not found, so nothing of
    # run:done.7 is told before the job's notification (asked in order).
    s = sl_stream(d, "subscriptions/listen", {
        "notifications": {"taskIds": ["run:done.7", "v1.done7.r9"]},
        "_meta": SL_TASKS_META}, auth=TOKEN_B)
    try:
        buf = read_until(s, b"acknowledged")
        while b"notifications/tasks" not in buf:
            more = read_until(s, b"\n\n")
            assert more, buf
            buf += more
        buf = read_events(s, buf)
        told = [m["params"]["taskId"] for m in sse_messages(buf)
                if m.get("method") == "notifications/tasks"]
        assert told == ["v1.done7.r9"], told
    finally:
        s.close()
    # Without the extension, taskIds are not taken.
    s = sl_stream(d, "subscriptions/listen",
                  {"notifications": {"taskIds": ["run:done.7"]}})
    try:
        buf = read_events(s, read_until(s, b"acknowledged"))
        assert sse_messages(buf)[0]["params"]["notifications"] == {}, buf
    finally:
        s.close()


def test_mcp_stateless_listen_and_disconnect_cancels():
    d = daemon()
    base = sl_metric(d, "mcpd_open_streams")
    s = sl_stream(d, "subscriptions/listen",
                  {"notifications": {"toolsListChanged": True}})
    buf = read_until(s, b"\n\n", 5)
    buf = read_until(s, b"acknowledged", 5) if b"acknowledged" not in buf \
        else buf
    assert b"200 OK" in buf and b"text/event-stream" in buf, buf
    data = [line for line in buf.decode().split("\n")
            if line.startswith("data:")]
    ack = json.loads(data[0][5:])
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"][
        "io.modelcontextprotocol/subscriptionId"] == 99
    assert ack["params"]["notifications"] == {}
    assert sl_metric(d, "mcpd_open_streams") == base + 1
    s.close()
    deadline = time.time() + 5
    while sl_metric(d, "mcpd_open_streams") != base and \
            time.time() < deadline:
        time.sleep(0.05)
    assert sl_metric(d, "mcpd_open_streams") == base
    # Closing a tool call's stream cancels it (vm_suspend takes 30 s).
    base = sl_metric(d, "mcpd_inflight_tool_calls")
    s = sl_stream(d, "tools/call", {"name": "vm_suspend",
                                    "arguments": {"vm_id": "v1"},
                                    "_meta": dict(SL_META,
                                                  progressToken="c1")},
                  name="vm_suspend")
    read_until(s, b"\r\n\r\n", 5)
    assert sl_metric(d, "mcpd_inflight_tool_calls") == base + 1
    s.close()
    deadline = time.time() + 5
    while sl_metric(d, "mcpd_inflight_tool_calls") != base and \
            time.time() < deadline:
        time.sleep(0.05)
    assert sl_metric(d, "mcpd_inflight_tool_calls") == base
    assert d.alive()


def wait_metric(d, name, value):
    deadline = time.time() + 5
    while sl_metric(d, name) != value and time.time() < deadline:
        time.sleep(0.05)
    return sl_metric(d, name)


def held_call(d, auth):
    """A JSON HTTP vm_suspend (the fake backend takes 30 s) left waiting
    on its own connection."""
    body = json.dumps({"vm_id": "v1"}).encode()
    s = socket.create_connection(("127.0.0.1", d.port), 5)
    s.sendall(("POST /v1/tools/vm_suspend HTTP/1.1\r\nHost: %s\r\n"
               "Authorization: Bearer %s\r\nContent-Type: application/json"
               "\r\nContent-Length: %d\r\n\r\n" % (d.host, auth, len(body))
               ).encode() + body)
    return s


def test_workspace_limits_behind_one_address():
    """Every client here has one address, as behind the TLS proxy: the
    limits per workspace keep workspace A's load from reaching B."""
    d = Daemon({"max_calls_per_workspace": "2",
                "max_listens_per_workspace": "2",
                "max_connections_per_workspace": "5"})
    held = []
    try:
        d.wait_idle()
        calls = sl_metric(d, "mcpd_inflight_tool_calls")
        # A keep-alive connection of A's, answered and then idle.
        idle = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)

        def idle_call():
            idle.request("POST", "/v1/tools/vm_status",
                         body=json.dumps({"vm_id": "v1"}),
                         headers={"Authorization": "Bearer " + TOKEN_A,
                                  "Content-Type": "application/json"})
            r = idle.getresponse()
            return r.status, r.read()
        assert idle_call()[0] == 200
        # A's two calls in flight: its limit.
        held += [held_call(d, TOKEN_A) for _ in range(2)]
        assert wait_metric(d, "mcpd_inflight_tool_calls", calls + 2) == \
            calls + 2
        r = request(d, "POST", "/v1/tools/vm_status", body={"vm_id": "v1"})
        assert r.status == 429, (r.status, r.body)
        e = r.json()["error"]
        assert e["code"] == "rate_limited" and \
            e["message"].startswith("max_calls_per_workspace (2):"), e
        r = sl_post(d, "tools/call", {"name": "vm_status",
                                      "arguments": {"vm_id": "v1"}},
                    name="vm_status", rid=5, accept="application/json")
        assert r.status == 429, (r.status, r.body)
        e = r.json()
        assert e["id"] == 5 and e["error"]["code"] == -32002 and \
            "max_calls_per_workspace (2)" in e["error"]["message"], e
        c = MCP(d)
        assert c.initialize().status == 200
        r = c.call("tools/call", {"name": "vm_status",
                                  "arguments": {"vm_id": "v1"}},
                   accept="application/json")
        assert r.status == 429 and r.json()["error"]["code"] == -32002 and \
            "max_calls_per_workspace" in r.json()["error"]["message"], r.body
        # B is answered meanwhile, through the same address.
        r = request(d, "POST", "/v1/tools/vm_status", body={"vm_id": "v1"},
                    auth=TOKEN_B)
        assert r.status == 200 and r.json()["workspace"] == "ws-b", r.body
        # A's two listens: its limit; the third is refused, B's is not.
        for _ in range(2):
            s = sl_stream(d, "subscriptions/listen", {"notifications": {}})
            held.append(s)
            assert b"acknowledged" in read_until(s, b"acknowledged")
        s = sl_stream(d, "subscriptions/listen", {"notifications": {}})
        out = read_until(s, b"}}")
        s.close()
        assert out.startswith(b"HTTP/1.1 429"), out
        assert b"-32002" in out and b"max_listens_per_workspace (2)" in out, \
            out
        s = sl_stream(d, "subscriptions/listen", {"notifications": {}},
                      auth=TOKEN_B)
        assert b"acknowledged" in read_until(s, b"acknowledged")
        s.close()
        # The idle keep-alive connection counts only against the address:
        # the WebSocket stream is A's fifth busy connection.
        w = WS(d, "/v1/vms/vm1/streams/5001")
        assert w.status == 101, w.status
        r = request(d, "POST", "/v1/tools/vm_status", body={"vm_id": "v1"})
        assert r.status == 429, (r.status, r.body)
        e = r.json()["error"]
        assert e["code"] == "rate_limited" and e["message"].startswith(
            "max_connections_per_workspace (5):"), e
        w2 = WS(d, "/v1/vms/vm1/streams/5001", auth=TOKEN_B)
        assert w2.status == 101, w2.status
        w2.close()
        assert request(d, "POST", "/v1/tools/vm_status", body={"vm_id": "v1"},
                       auth=TOKEN_B).status == 200
        # What A gives back is A's again.
        w.close()
        for s in held:
            s.close()
        held = []
        assert wait_metric(d, "mcpd_inflight_tool_calls", calls) == calls
        st, body = idle_call()
        assert st == 200 and json.loads(body)["workspace"] == "ws-a", body
        idle.close()
    finally:
        for s in held:
            s.close()
        d.stop()


def test_ws_echo():
    d = daemon()
    w = WS(d, "/v1/vms/vm1/streams/5001")
    assert w.status == 101, w.status
    assert w.headers["sec-websocket-accept"] == w.expected_accept()
    w.send(2, b"hello")
    assert w.recv() == (2, b"hello")
    w.send(1, "héllo ✓".encode())
    op, p = w.recv()
    assert op == 2 and p == "héllo ✓".encode()
    # Fragmented message, with a ping in the middle.
    w.send(2, b"ab", fin=False)
    w.send(9, b"pp")
    got = b""
    while True:
        op, p = w.recv()
        if op == 10:
            assert p == b"pp"
            break
        assert op == 2
        got += p
    w.send(0, b"cd", fin=True)
    while len(got) < 4:
        got += w.recv()[1]
    assert got == b"abcd"
    w.send(8, b"\x03\xe8bye")
    assert w.recv_close()[0] == 1000
    w.close()


def test_ws_eof_half_close():
    d = daemon()
    w = WS(d, "/v1/vms/vm1/streams/5002")
    assert w.status == 101
    w.send(2, b"x" * 1000)
    w.send(2, b"y" * 24)
    w.send(2, b"")                      # EOF to the guest
    got = b""
    while True:
        op, p = w.recv()
        if op == 8:
            code = int.from_bytes(p[:2], "big")
            break
        got += p
    assert got == b"bytes=1024\n", got
    assert code == 1000, code
    w.close()


def test_ws_guest_close():
    w = WS(daemon(), "/v1/vms/vm1/streams/5003")
    assert w.status == 101
    assert w.recv_close()[0] == 1000
    w.close()


def test_ws_refusals():
    d = daemon()
    cases = [
        ("/v1/vms/nope/streams/5001", {}, TOKEN_A, 404),
        ("/v1/vms/vm1/streams/4444", {}, TOKEN_A, 409),
        ("/v1/vms/vm1/streams/1024", {}, TOKEN_A, 403),
        ("/v1/vms/vm1/streams/1023", {}, TOKEN_A, 403),
        ("/v1/vms/vm1/streams/5001", {}, None, 401),
        ("/v1/vms/vm1/streams/5001", {}, "mcpvm_bad", 401),
        ("/v1/vms/vm1/streams/5001", {"Origin": "http://evil.example"},
         TOKEN_A, 403),
        ("/v1/vms/vm1/streams/5001", {"Sec-WebSocket-Version": "8"},
         TOKEN_A, 426),
        ("/v1/vms/vm1/streams/5001", {"Sec-WebSocket-Key": "short"},
         TOKEN_A, 400),
        ("/v1/vms/vm1/streams/5001", {"Upgrade": None}, TOKEN_A, 400),
        ("/v1/vms/vm1/streams/5001", {"Connection": "keep-alive"},
         TOKEN_A, 400),
    ]
    for path, h, auth, status in cases:
        w = WS(d, path, auth=auth, headers=h)
        assert w.status == status, (path, h, w.status)
        if status == 426:
            assert w.headers.get("sec-websocket-version") == "13"
        w.close()


def test_ws_protocol_errors():
    d = daemon()
    bad = [
        (WS.frame(2, b"abc", mask=False), 1002),
        (WS.frame(2, b"abc", rsv=4), 1002),
        (WS.frame(3, b"abc"), 1002),
        (WS.frame(9, b"x" * 126), 1002),
        (WS.frame(9, b"x", fin=False), 1002),
        (WS.frame(0, b"abc"), 1002),
        (WS.frame(1, b"\xff\xfe"), 1007),
        (WS.frame(2, b"", length=(1 << 20) + 1), 1009),
        (WS.frame(8, b"\x03\xe8" + b"\xff"), 1007),
        (WS.frame(8, b"\x03"), 1002),
        (WS.frame(8, b"\x03\xed"), 1002),   # 1005 may not be sent
    ]
    for data, code in bad:
        w = WS(d, "/v1/vms/vm1/streams/5001")
        assert w.status == 101
        w.s.sendall(data)
        got = w.recv_close()[0]
        assert got == code, (data[:12], got, code)
        w.close()
    # Text split in the middle of a character across fragments is fine.
    w = WS(d, "/v1/vms/vm1/streams/5001")
    s = "✓".encode()
    w.send(1, s[:1], fin=False)
    w.send(0, s[1:], fin=True)
    got = b""
    while len(got) < 3:
        got += w.recv()[1]
    assert got == s
    w.close()
    assert d.alive()


def test_ws_bulk_both_ways():
    d = daemon()
    w = WS(d, "/v1/vms/vm1/streams/5001")
    total = 8 << 20
    chunk = os.urandom(256 << 10)
    got = []

    def reader():
        n = 0
        while n < total:
            op, p = w.recv()
            assert op == 2
            got.append(p)
            n += len(p)
    th = threading.Thread(target=reader)
    th.start()
    for _ in range(total // len(chunk)):
        w.send(2, chunk)
    th.join(60)
    assert not th.is_alive()
    data = b"".join(got)
    assert len(data) == total and data[:len(chunk)] == chunk
    w.close()


def attach(d, vm, port, data, token=TOKEN_A, extra=()):
    tok = os.path.join(d.dir, "attach-token")
    with open(tok, "w") as f:
        f.write(token + "\n")
    return subprocess.run([os.environ["MCPVM_ATTACH"], "--endpoint",
                           "http://%s" % d.host, "--token-file", tok,
                           "--vm", vm, "--port", str(port), *extra],
                          input=data, capture_output=True, timeout=60)


def test_mcp_stateless_open_at_exit():
    """SIGTERM with a subscriptions/listen stream and a stateless tool call
    open: both are ended and freed (the ASan build reports a leak
    otherwise), and the exit is clean."""
    d = Daemon()
    try:
        s1 = sl_stream(d, "subscriptions/listen", {"notifications": {}})
        assert b"acknowledged" in read_until(s1, b"acknowledged")
        s2 = sl_stream(d, "tools/call", {"name": "vm_suspend",
                                         "arguments": {"vm_id": "v1"}},
                       name="vm_suspend")
        read_until(s2, b"\r\n\r\n")
    finally:
        rc = d.stop()
    assert rc == 0, rc


def test_mcpvm_stdio_stateless():
    """mcpvm-stdio forwards a 2026-07-28 message with the headers that
    revision mirrors from the body, and no session."""
    d = daemon()
    tok = os.path.join(d.dir, "stdio-token")
    with open(tok, "w") as f:
        f.write(TOKEN_A)
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
         "params": {"_meta": SL_META}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "vm_status", "arguments": {"vm_id": "v1"},
                    "_meta": SL_META}},
        # Not header-safe: sent base64-encoded, decoded by mcpd, so the
        # answer is "unknown tool", not a header mismatch.
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "vm_st\u00e4tus", "arguments": {},
                    "_meta": SL_META}},
    ]
    p = subprocess.run([os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "mcpd", "mcpvm-stdio"), "--endpoint",
        "http://%s" % d.host, "--token-file", tok],
        input="".join(json.dumps(m) + "\n" for m in msgs),
        capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    replies = {m["id"]: m for m in map(json.loads, p.stdout.splitlines())}
    assert SL in replies[1]["result"]["supportedVersions"], replies
    res = replies[2]["result"]
    assert res["resultType"] == "complete" and \
        res["structuredContent"]["workspace"] == "ws-a", replies[2]
    assert replies[3]["error"]["code"] == -32602, replies[3]


def test_attach_bridges_stdio():
    d = daemon()
    r = attach(d, "vm1", 5001, b"hello through the guest\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello through the guest\n", r.stdout
    # EOF reaches the guest after the data: it counts and answers.
    data = os.urandom(3 << 20)
    r = attach(d, "vm1", 5002, data)
    assert r.returncode == 0 and r.stdout == b"bytes=%d\n" % len(data)
    r = attach(d, "vm1", 5001, data)
    assert r.returncode == 0 and r.stdout == data
    r = attach(d, "vm1", 5003, b"")
    assert r.returncode == 0 and r.stdout == b""


def test_attach_100_mib_each_way():
    d = daemon()
    data = os.urandom(100 << 20)
    r = attach(d, "vm1", 5001, data)
    assert r.returncode == 0, r.stderr
    assert r.stdout == data


def test_attach_refusals_exit_1():
    d = daemon()
    r = attach(d, "vm1", 4444, b"x")
    assert r.returncode == 1 and b"409" in r.stderr, r.stderr
    r = attach(d, "nope", 5001, b"x")
    assert r.returncode == 1 and b"404" in r.stderr
    r = attach(d, "vm1", 5001, b"x", token="mcpvm_wrong")
    assert r.returncode == 1 and b"401" in r.stderr
    assert b"mcpvm_wrong" not in r.stderr


def test_ws_rate_limit():
    d = Daemon({"stream_rate_bytes": "1048576"})
    try:
        w = WS(d, "/v1/vms/vm1/streams/5001")
        total = 3 << 20
        chunk = b"r" * (256 << 10)
        got = [0]

        def reader():
            while got[0] < total:
                got[0] += len(w.recv()[1])
        th = threading.Thread(target=reader)
        t0 = time.time()
        th.start()
        for _ in range(total // len(chunk)):
            w.send(2, chunk)
        th.join(30)
        elapsed = time.time() - t0
        assert got[0] == total
        # 3 MiB at 1 MiB/s with a 1 MiB burst: at least about 2 s.
        assert elapsed > 1.7, elapsed
        w.close()
    finally:
        d.stop()


def ws_frames(w, timeout):
    """Yields (opcode, payload) from w's socket until EOF or timeout."""
    w.s.settimeout(timeout)
    buf, pos = w.buf, 0
    while True:
        while True:
            if len(buf) - pos < 2:
                break
            n, off = buf[pos + 1] & 0x7f, 2
            if n == 126:
                if len(buf) - pos < 4:
                    break
                n, off = struct.unpack("!H", buf[pos + 2:pos + 4])[0], 4
            elif n == 127:
                if len(buf) - pos < 10:
                    break
                n, off = struct.unpack("!Q", buf[pos + 2:pos + 10])[0], 10
            if len(buf) - pos < off + n:
                break
            yield buf[pos] & 0x0f, buf[pos + off:pos + off + n]
            pos += off + n
        try:
            chunk = w.s.recv(1 << 20)
        except (socket.timeout, ConnectionResetError):
            return
        if not chunk:
            return
        buf, pos = buf[pos:] + chunk, 0


def test_ws_ping_flood_is_bounded():
    # Issue 14, finding 8: a client that pings and never reads must not
    # grow mcpd without limit.  Replies beyond stream_control_queue_bytes
    # (default 16384) end the stream with 1008 and a reason.
    d = daemon()
    w = WS(d, "/v1/vms/vm1/streams/5001")
    assert w.status == 101
    ping = WS.frame(9, b"p" * 125)
    blob = ping * ((1 << 20) // len(ping))
    sent = 0
    try:
        for _ in range(32):         # 32 MiB, far past the kernel's buffers
            w.s.sendall(blob)
            sent += len(blob) // len(ping)
    except OSError:
        pass                        # closed on us: what we want
    pongs, close = 0, None
    for op, p in ws_frames(w, 5):
        if op == 10:
            pongs += 1
        elif op == 8:
            close = (struct.unpack("!H", p[:2])[0], p[2:].decode())
            break
    w.close()
    assert close is not None, "no close after %d pings, %d pongs" % (
        sent, pongs)
    assert close[0] == 1008 and "control frames" in close[1], close
    assert pongs < sent, (pongs, sent)
    assert d.alive()
    assert "control frames" in d.logtext()


def test_ws_pings_cost_rate_tokens():
    # Pings are charged to the client's rate like data: a flood of them
    # answered promptly by a reading client still takes its time.
    d = Daemon({"stream_rate_bytes": "65536"})
    try:
        w = WS(d, "/v1/vms/vm1/streams/5001")
        ping = WS.frame(9, b"q" * 125)
        n = (256 << 10) // len(ping)
        t0 = time.time()
        w.s.sendall(ping * n)
        pongs = 0
        for op, p in ws_frames(w, 10):
            assert op == 10, op
            pongs += 1
            if pongs == n:
                break
        elapsed = time.time() - t0
        assert pongs == n, (pongs, n)
        # 256 KiB at 64 KiB/s with a 64 KiB burst: about 3 s at least.
        assert elapsed > 2.5, elapsed
        w.close()
    finally:
        d.stop()


def test_metrics_listener():
    d = daemon()
    request(d, "POST", "/v1/tools/vm_list", body={})
    r = request(d, "GET", "/metrics", port=d.mport, auth=None)
    assert r.status == 200
    assert r.header("Content-Type").startswith("text/plain; version=0.0.4")
    body = r.body.decode()
    assert 'mcpd_http_requests_total{route="tools",code="200"}' in body
    assert 'mcpd_http_request_duration_seconds_bucket{route="tools",' \
        'le="+Inf"}' in body
    assert "mcpd_open_streams " in body
    r = request(d, "GET", "/metrics", port=d.mport, auth=None,
                headers={"Origin": "http://good.example"})
    assert r.status == 403
    r = request(d, "GET", "/mcp", port=d.mport, auth=None)
    assert r.status == 404


def test_daemon_survived():
    d = daemon()
    assert d.alive()
    rc = d.stop()
    assert rc == 0, "clean exit on SIGTERM, got %s" % rc


if __name__ == "__main__":
    run_tests([v for k, v in list(globals().items())
               if k.startswith("test_")])
