#!/usr/bin/env python3
"""mcpd's side of a call that waits for a human's approval (issue #28):
what the agent sees on JSON HTTP, MCP 2025-11-25 and MCP 2026-07-28, with
and without URL-mode elicitation, and the page the elicitation's URL names.

vmmd is doubled here: its side (proposals, signatures, enforcement) is
another change, so mcpd-testd's fake backend answers as vmmd would (see
tests/integration/mcpd_testd.c: a vm_id of gated-required, gated-denied,
gated-expired or gated-once), its proposal passing mcpd's own decoder.  What
is asserted is mcpd's shaping: statuses, bodies, results and the words.
The product mcpd's decoding of hostile proposals from vmmd's socket is in
test_mcpd_ipc.py.  Then the official TypeScript SDK client
(tests/mcp/approvals.mjs), when node and tests/mcp/node_modules are there.
TAP output."""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcpdlib import MCP, TOKEN_A, Daemon, free_port, request  # noqa: E402
import taplib  # noqa: E402
from taplib import run_tests  # noqa: E402

D = None
PID = "p0123456789abcdef0123456789abcdef"
MEMBERS = {"id", "tool", "request_id", "args_digest", "effect", "gates",
           "approvals_needed", "approvals", "state", "requested_at",
           "expires_at"}
SL = "2026-07-28"
HERE = os.path.dirname(os.path.abspath(__file__))
MCPDIR = os.path.join(HERE, "..", "mcp")


def daemon():
    global D
    if D is None:
        D = Daemon()
    return D


def exec_args(vm, rid="r1"):
    a = {"vm_id": vm, "command": "make test"}
    if rid is not None:
        a["request_id"] = rid
    return a


def check_proposal(p, tool="vm_exec", rid="r1", state="pending"):
    assert set(p) == MEMBERS, p
    assert p["id"] == PID and p["tool"] == tool and p["state"] == state, p
    assert p["request_id"] == rid, p
    assert len(p["args_digest"]) == 64 and p["gates"], p


def test_rest_statuses_and_body():
    d = daemon()
    for vm, code, status, state in (
            ("gated-required", "approval_required", 202, "pending"),
            ("gated-denied", "approval_denied", 403, "denied"),
            ("gated-expired", "approval_expired", 410, "expired")):
        r = request(d, "POST", "/v1/tools/vm_exec", body=exec_args(vm))
        assert r.status == status, (vm, r.status, r.body)
        j = r.json()
        assert set(j) == {"error", "proposal"}, j
        assert j["error"]["code"] == code and j["error"]["message"], j
        check_proposal(j["proposal"], state=state)
    # A tool without request_id: the proposal says "" and two approvals.
    r = request(d, "POST", "/v1/tools/vm_destroy",
                body={"vm_id": "gated-required"})
    assert r.status == 202, r.body
    p = r.json()["proposal"]
    check_proposal(p, tool="vm_destroy", rid="")
    assert p["gates"] == ["destroy"] and p["approvals_needed"] == 2


def test_rest_retry_after_approval_runs():
    d = daemon()
    r = request(d, "POST", "/v1/tools/vm_exec",
                body=exec_args("gated-once", "rest-once"))
    assert r.status == 202, r.status
    r = request(d, "POST", "/v1/tools/vm_exec",
                body=exec_args("gated-once", "rest-once"))
    assert r.status == 200, r.body
    assert r.json()["job_id"] == "j1"


def tool_error(res, code, rid="r1"):
    """The 2025 shape: a tool error with the proposal, and the advice."""
    assert res["isError"] is True, res
    sc = res["structuredContent"]
    assert set(sc) == {"error", "proposal"} and \
        sc["error"]["code"] == code, sc
    assert json.loads(res["content"][0]["text"]) == sc
    advice = res["content"][1]["text"]
    assert res["content"][1]["type"] == "text"
    return sc, advice


def test_mcp_2025_tool_error():
    c = MCP(daemon())
    c.initialize()
    r = c.call("tools/call", {"name": "vm_exec",
                              "arguments": exec_args("gated-required")})
    sc, advice = tool_error(r.json()["result"], "approval_required")
    check_proposal(sc["proposal"])
    # A human approves outside the agent's reach; the agent retries.
    assert "vmctl approval approve " + PID in advice, advice
    assert "cannot approve it yourself" in advice, advice
    assert 'same request_id ("r1") and the same arguments' in advice, advice
    r = c.call("tools/call", {"name": "vm_exec",
                              "arguments": exec_args("gated-denied")})
    sc, advice = tool_error(r.json()["result"], "approval_denied")
    assert "denied proposal " + PID in advice and "Do not retry" in advice
    r = c.call("tools/call", {"name": "vm_exec",
                              "arguments": exec_args("gated-expired")})
    sc, advice = tool_error(r.json()["result"], "approval_expired")
    assert "new request_id" in advice, advice
    r = c.call("tools/call", {"name": "vm_destroy",
                              "arguments": {"vm_id": "gated-required"}})
    sc, advice = tool_error(r.json()["result"], "approval_required", "")
    assert "no request_id" in advice, advice


def test_tools_list_says_which_calls_may_wait():
    c = MCP(daemon())
    c.initialize()
    tools = {t["name"]: t for t in
             c.call("tools/list").json()["result"]["tools"]}
    for name in ("vm_create", "vm_run", "vm_exec", "vm_destroy",
                 "vm_snapshot_delete"):
        desc = tools[name]["description"]
        assert "human's approval" in desc and "approval_required" in desc \
            and "vm_status" in desc and '"approvals"' in desc, name
        shapes = tools[name]["outputSchema"]["oneOf"]
        assert shapes[1]["required"] == ["error", "proposal"], name
    for name in ("vm_list", "vm_status", "vm_read_file"):
        assert "approval" not in tools[name]["description"], name


def sl_call(d, args, caps=None, responses=None, rid=1, tool="vm_exec",
            host=None):
    meta = {"io.modelcontextprotocol/protocolVersion": SL,
            "io.modelcontextprotocol/clientCapabilities": caps or {}}
    params = {"name": tool, "arguments": args, "_meta": meta}
    if responses is not None:
        params["inputResponses"] = responses
    h = {"Accept": "application/json, text/event-stream",
         "MCP-Protocol-Version": SL, "Mcp-Method": "tools/call",
         "Mcp-Name": tool}
    return request(d, "POST", "/mcp", headers=h, host=host,
                   body={"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                         "params": params})


URL_CAPS = {"elicitation": {"url": {}}}


def test_mcp_2026_without_url_elicitation_is_the_2025_error():
    d = daemon()
    for caps in ({}, {"elicitation": {}}, {"elicitation": {"form": {}}}):
        r = sl_call(d, exec_args("gated-required"), caps)
        assert r.status == 200, r.body
        res = r.json()["result"]
        assert res["resultType"] == "complete", res
        sc, advice = tool_error(res, "approval_required")
        assert "vmctl approval approve " + PID in advice


def test_mcp_2026_input_required_with_url_elicitation():
    d = daemon()
    r = sl_call(d, exec_args("gated-required"), URL_CAPS)
    assert r.status == 200, r.body
    res = r.json()["result"]
    assert res["resultType"] == "input_required", res
    assert "isError" not in res and "content" not in res
    assert res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == \
        "mcpvm"
    reqs = res["inputRequests"]
    assert list(reqs) == ["approval"], reqs
    assert reqs["approval"]["method"] == "elicitation/create"
    p = reqs["approval"]["params"]
    assert p["mode"] == "url" and p["elicitationId"] == PID, p
    assert p["url"] == "http://%s/v1/approvals/%s" % (d.host, PID), p
    assert "vmctl approval approve " + PID in p["message"], p
    # Denied and expired are final: the 2025 error, no question.
    for vm, code in (("gated-denied", "approval_denied"),
                     ("gated-expired", "approval_expired")):
        res = sl_call(d, exec_args(vm), URL_CAPS).json()["result"]
        assert res["resultType"] == "complete"
        tool_error(res, code)


def test_elicitation_url_behind_a_tls_proxy():
    # A remote client reaches mcpd through a TLS proxy that passes its Host:
    # the URL it is given is https on that name.
    port = free_port()
    d = Daemon({"listen": "127.0.0.1:%d" % port,
                "allowed_hosts": "127.0.0.1:%d mcpvm.example.org" % port})
    try:
        r = sl_call(d, exec_args("gated-required"), URL_CAPS,
                    host="mcpvm.example.org")
        p = r.json()["result"]["inputRequests"]["approval"]["params"]
        assert p["url"] == "https://mcpvm.example.org/v1/approvals/" + PID, p
        r = sl_call(d, exec_args("gated-required"), URL_CAPS)
        p = r.json()["result"]["inputRequests"]["approval"]["params"]
        assert p["url"] == "http://127.0.0.1:%d/v1/approvals/%s" % (port,
                                                                    PID), p
    finally:
        d.stop()


def test_mcp_2026_retry_returns_the_outcome():
    d = daemon()
    args = exec_args("gated-once", "sl-once")
    res = sl_call(d, args, URL_CAPS).json()["result"]
    assert res["resultType"] == "input_required", res
    # The person accepted (the approval happened meanwhile): the same call
    # with the answer runs and returns the tool's result.
    res = sl_call(d, args, URL_CAPS,
                  {"approval": {"action": "accept"}}).json()["result"]
    assert res["resultType"] == "complete" and res["isError"] is False, res
    assert res["structuredContent"]["job_id"] == "j1", res


def test_mcp_2026_task_augmented_exec_waits_too():
    # With the tasks extension a vm_exec becomes a task once its job runs;
    # a gated one has no job yet, so it is the same question or error.
    d = daemon()
    tasks = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    res = sl_call(d, exec_args("gated-required"),
                  dict(tasks, **URL_CAPS)).json()["result"]
    assert res["resultType"] == "input_required", res
    res = sl_call(d, exec_args("gated-required"), tasks).json()["result"]
    assert res["resultType"] == "complete", res
    tool_error(res, "approval_required")


def test_mcp_2026_decline_ends_the_question():
    d = daemon()
    for action in ("decline", "cancel"):
        res = sl_call(d, exec_args("gated-required"), URL_CAPS,
                      {"approval": {"action": action}}).json()["result"]
        assert res["resultType"] == "complete", (action, res)
        tool_error(res, "approval_required")
    # Answers mcpd cannot read are refused, not guessed at.
    for bad in ([], {"approval": "yes"}, {"approval": {"action": "ok"}},
                {"approval": {}}):
        r = sl_call(d, exec_args("gated-required"), URL_CAPS, bad)
        assert r.status == 400 and r.json()["error"]["code"] == -32602, \
            (bad, r.body)
    # Another key's answer is not ours: the question stands.
    res = sl_call(d, exec_args("gated-required"), URL_CAPS,
                  {"other": {"action": "decline"}}).json()["result"]
    assert res["resultType"] == "input_required", res


def test_approval_page():
    d = daemon()
    # What the person's browser opens: no credential, and nothing but how.
    r = request(d, "GET", "/v1/approvals/" + PID, auth=None)
    assert r.status == 200, r.status
    assert r.header("Content-Type").startswith("text/plain")
    text = r.body.decode()
    for cmd in ("show", "approve", "deny"):
        assert "vmctl approval %s %s" % (cmd, PID) in text, text
    for path in ("/v1/approvals/p0123", "/v1/approvals/" + PID.upper(),
                 "/v1/approvals/" + PID + "/approve",
                 "/v1/approvals/" + PID + "0", "/v1/approvals/"):
        assert request(d, "GET", path, auth=None).status == 404, path
    # There is no way to approve over HTTP or MCP.
    for method in ("POST", "PUT", "DELETE"):
        r = request(d, method, "/v1/approvals/" + PID, body={})
        assert r.status == 405, (method, r.status)
    r = request(d, "POST", "/v1/tools/vm_approve", body={})
    assert r.status == 404


NODE = shutil.which("node")
HAVE_SDK = NODE is not None and os.path.isdir(os.path.join(MCPDIR,
                                                           "node_modules"))


def test_sdk_client():
    d = daemon()
    r = subprocess.run([NODE, os.path.join(MCPDIR, "approvals.mjs"),
                        "http://%s" % d.host, TOKEN_A],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_daemon_survived():
    d = daemon()
    assert d.alive()
    assert d.stop() == 0


if __name__ == "__main__":
    if not HAVE_SDK:
        taplib.skip("test_sdk_client", "node or tests/mcp/node_modules "
                    "missing (npm ci in tests/mcp)")
    run_tests([v for k, v in list(globals().items())
               if k.startswith("test_") and
               (HAVE_SDK or k != "test_sdk_client")])
