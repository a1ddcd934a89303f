#!/usr/bin/env python3
# "Run python3 -c 'print(4)' and read its output", the way an agent does
# it, against the real service (authd, vmmd, mcpd; real VMs of the `dev`
# image), three ways side by side in one run, each --runs times, reporting
# the median wall time and the number of tool calls it took:
#   - vm_exec, then vm_job_output polled (every 100 ms) until the job has
#     ended and its cursor stopped moving: the reference;
#   - vm_exec with wait_seconds: one call;
#   - vm_run: one call, its own VM created and destroyed; beside it, for
#     scale, the three calls it replaces (vm_create, vm_exec with a wait,
#     vm_destroy).
# Calls go over JSON HTTP (POST /v1/tools/{name}); a tool call costs the
# same wherever it comes from, and an agent pays a model turn for each.
# Then the stateless 2026-07-28 tools/call rate against the session-based
# one, both with wrk over the same 32 connections, vm_status of a VM.
# Runs as root; builds or reuses the `dev` image as the e2e suite does.
#
# usage: tests/bench/roundtrips.py [--build DIR] [--runs N] [--seconds S]
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
sys.path.insert(0, HERE)
from mcpdlib import MCP, free_port  # noqa: E402
os.environ.setdefault("E2E_PORT", str(free_port()))
import vmmdlib as tv  # noqa: E402
import test_e2e  # noqa: E402
import bench_mcpd as bm  # noqa: E402

COMMAND = "python3 -c 'print(4)'"
MEM = 512


class Stack(test_e2e.Stack):
    def __init__(self, manifest):
        super().__init__(manifest)
        self.vmmd_flags = ["-d"]     # no debug line per request


class Endpoint:
    def __init__(self, port):
        self.port = port
        self.host = "127.0.0.1:%d" % port


class Calls:
    """JSON HTTP tool calls, counted."""

    def __init__(self, port, tok):
        self.port, self.tok, self.n = port, tok, 0

    def __call__(self, name, **args):
        self.n += 1
        req = urllib.request.Request(
            "http://127.0.0.1:%d/v1/tools/%s" % (self.port, name),
            data=json.dumps(args).encode(), method="POST",
            headers={"Authorization": "Bearer " + self.tok,
                     "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())


rid = 0


def request_id():
    global rid
    rid += 1
    return "rt-%d-%d" % (os.getpid(), rid)


def by_polling(c, vm):
    job = c("vm_exec", vm_id=vm, request_id=request_id(), command=COMMAND)
    cursor, out = {"stdout": 0, "stderr": 0}, ""
    while True:
        r = c("vm_job_output", vm_id=vm, job_id=job["job_id"],
              cursor=cursor)
        out += r["stdout"]
        moved = r["next_cursor"] != cursor
        cursor = r["next_cursor"]
        if r["state"] != "running" and not moved:
            return out
        if not moved:
            time.sleep(0.1)


def by_waiting(c, vm):
    r = c("vm_exec", vm_id=vm, request_id=request_id(), command=COMMAND,
          wait_seconds=30)
    return r["output"]["stdout"]


def by_run(c, vm):
    return c("vm_run", request_id=request_id(), command=COMMAND,
             memory_mib=MEM)["stdout"]


def by_three(c, vm):
    v = c("vm_create", request_id=request_id(), memory_mib=MEM)["vm_id"]
    r = c("vm_exec", vm_id=v, request_id=request_id(), command=COMMAND,
          wait_seconds=30)
    c("vm_destroy", vm_id=v)
    return r["output"]["stdout"]


def measure(port, tok, vm, fn, runs):
    """Median wall seconds and tool calls of fn over runs."""
    times, counts = [], []
    for _ in range(runs):
        c = Calls(port, tok)
        t = time.monotonic()
        out = fn(c, vm)
        times.append(time.monotonic() - t)
        counts.append(c.n)
        if out != "4\n":
            raise RuntimeError("%s printed %r" % (fn.__name__, out))
    print("%-12s wall %s s, calls %s" % (fn.__name__, " ".join(
        "%.3f" % x for x in times), counts))
    return statistics.median(times), statistics.median(counts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(TOP, "build", "test"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", default=os.environ.get("BENCH_SECONDS",
                                                       "10"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root")
        sys.exit(77)
    b = os.path.abspath(args.build)  # vmmd runs vmproxy from elsewhere
    os.environ.update({
        "AUTHD": b + "/authd/authd", "AUTHCTL": b + "/authd/authctl",
        "VMMD": b + "/vmmd/vmmd", "VMPROXY": b + "/vmproxy/vmproxy",
        "VMCTL": b + "/vmmd/vmctl", "MCPD": b + "/mcpd/mcpd",
        "SRCDIR": TOP, "BUILD_DIR": b})
    tv.become_subreaper()
    tv.exit_cleanly_on_sigterm()
    manifest = tv.build_image("dev", os.path.join(tv.CACHE, "e2e-dev"),
                              768)
    tv.MAX_VMS = 3
    h = Stack(manifest)
    tmp = tempfile.mkdtemp(prefix="bench-roundtrips.")
    try:
        h.setup()
        h.write_conf(mcpd_user="mcpvm", max_vms=3, max_memory_mib=4096)
        h.start_authd()
        h.start_vmmd()
        h.start_mcpd()
        port = test_e2e.PORT
        tok = h.issue("bench", "--max-vms", "3", "--memory-mib", "4096")
        c = Calls(port, tok)
        vm = c("vm_create", request_id=request_id(), memory_mib=MEM)["vm_id"]
        by_waiting(c, vm)   # warm the guest's python3 and page cache

        ref = measure(port, tok, vm, by_polling, args.runs)
        wait = measure(port, tok, vm, by_waiting, args.runs)
        run = measure(port, tok, vm, by_run, args.runs)
        three = measure(port, tok, vm, by_three, args.runs)
        what = "print(4) and its output"
        bm.row(what + ": vm_exec wait_seconds, wall", wait[0], "s",
               "vm_exec + vm_job_output polling", ref[0])
        bm.row(what + ": vm_exec wait_seconds, tool calls", wait[1],
               "calls", "vm_exec + vm_job_output polling", ref[1])
        bm.row(what + ": vm_run (fresh VM), wall", run[0], "s",
               "vm_exec + vm_job_output polling", ref[0])
        bm.row(what + ": vm_run (fresh VM), tool calls", run[1], "calls",
               "vm_exec + vm_job_output polling", ref[1])
        bm.row(what + ": vm_run (fresh VM), wall", run[0], "s",
               "vm_create + vm_exec wait + vm_destroy", three[0])
        bm.row(what + ": vm_run (fresh VM), tool calls", run[1], "calls",
               "vm_create + vm_exec wait + vm_destroy", three[1])

        if bm.WRK is None:
            print("wrk missing: no tools/call rates")
            return
        hdr = {"Authorization": "Bearer " + tok,
               "Content-Type": "application/json",
               "Host": "127.0.0.1:%d" % port,
               "Accept": "application/json, text/event-stream"}
        sess = MCP(Endpoint(port), auth=tok)
        sess.initialize()
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "vm_status",
                           "arguments": {"vm_id": vm}}}
        sh = dict(hdr, **{"Mcp-Session-Id": sess.session,
                          "MCP-Protocol-Version": sess.version})
        sl_call = json.loads(json.dumps(call))
        sl_call["params"]["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
        slh = dict(hdr, **{"MCP-Protocol-Version": "2026-07-28",
                           "Mcp-Method": "tools/call",
                           "Mcp-Name": "vm_status"})
        bm.SECONDS = args.seconds
        s_lua = bm.lua(os.path.join(tmp, "s.lua"), json.dumps(call), sh)
        l_lua = bm.lua(os.path.join(tmp, "l.lua"), json.dumps(sl_call), slh)
        url = "http://127.0.0.1:%d/mcp" % port
        s_runs, l_runs = [], []
        for i in range(3):      # in turns: a shared machine drifts
            s_runs.append(bm.wrk(url, s_lua))
            l_runs.append(bm.wrk(url, l_lua))
            print("round %d: session %.0f req/s, stateless %.0f req/s" % (
                i + 1, s_runs[-1][0], l_runs[-1][0]))
        med = statistics.median
        bm.row("MCP tools/call vm_status, stateless 2026-07-28, 32 "
               "connections, median", med(r[0] for r in l_runs), "req/s",
               "the same on one session (2025-11-25), 32 connections",
               med(r[0] for r in s_runs))
        bm.row("MCP tools/call stateless p99, median",
               med(r[2] for r in l_runs), "ms", "session p99",
               med(r[2] for r in s_runs))
    except Exception:
        for path in (h.authd_log, h.vmmd_log, h.mcpd_log):
            print("--- %s, last lines" % os.path.basename(path))
            print("\n".join(tv.read(path).splitlines()[-20:]))
        raise
    finally:
        h.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
