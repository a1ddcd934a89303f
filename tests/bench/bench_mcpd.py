#!/usr/bin/env python3
"""mcpd throughput and latency with wrk, beside nginx serving a static file
of the same size on the same machine in the same run.

mcpd here is mcpd-testd: mcpd's real HTTP, authentication step, schema
check and JSON path, with the fake backend answering at once (vm_list
lists 10 VMs).  So this measures mcpd's own cost per request, without
authd's or vmmd's.  nginx runs one worker, as mcpd has one event loop.
Prints BENCH rows for tests/bench/run."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
from mcpdlib import MCP, TOKEN_A, Daemon, free_port, request  # noqa: E402

WRK = shutil.which("wrk")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SECONDS = os.environ.get("BENCH_SECONDS", "10")


def wrk(url, script=None):
    argv = [WRK, "-t2", "-c32", "-d%ss" % SECONDS, "--latency", url]
    if script:
        argv[1:1] = ["-s", script]
    out = subprocess.run(argv, capture_output=True, text=True,
                         timeout=int(SECONDS) + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def pct(p):
        m = re.search(r"\s%s%%\s+([\d.]+)(us|ms|s)" % p, out)
        v = float(m.group(1))
        return v / 1000 if m.group(2) == "us" else \
            v * 1000 if m.group(2) == "s" else v
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise RuntimeError("wrk saw errors:\n" + out)
    print(out)
    return rps, pct(50), pct(99)


def lua(path, body, headers):
    with open(path, "w") as f:
        f.write('wrk.method = "POST"\n')
        f.write("wrk.body = %s\n" % json.dumps(body))
        for k, v in headers.items():
            f.write('wrk.headers["%s"] = "%s"\n' % (k, v))
    return path


def row(what, val, unit, ref, refval):
    print("BENCH\t%s\t%.2f\t%s\t%s\t%.2f" % (what, val, unit, ref, refval))


def start_nginx(tmp, body):
    """nginx with one worker (mcpd has one event loop) serving body as
    /vm_list.json from tmp; (process, port)."""
    www = os.path.join(tmp, "www")
    os.mkdir(www)
    with open(os.path.join(www, "vm_list.json"), "wb") as f:
        f.write(body)
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write("worker_processes 1;\nerror_log %s/error.log;\n"
                "pid %s/nginx.pid;\nevents { worker_connections 1024; }\n"
                "http { access_log off; default_type application/json;\n"
                "  client_body_temp_path %s; proxy_temp_path %s;\n"
                "  fastcgi_temp_path %s; uwsgi_temp_path %s;\n"
                "  scgi_temp_path %s;\n"
                "  server { listen 127.0.0.1:%d; root %s; } }\n"
                % ((tmp,) * 7 + (port, www)))
    p = subprocess.Popen([NGINX, "-c", conf, "-p", tmp, "-g",
                          "daemon off;"])
    time.sleep(0.5)
    return p, port


def main():
    if WRK is None or not os.path.exists(NGINX):
        print("wrk or nginx missing")
        sys.exit(77)
    os.environ["MCPD_TEST_EXAMPLES"] = "1"
    os.environ["MCPD_TEST_VMS"] = "10"
    d = Daemon({"max_connections_per_client": "1024",
                "request_timeout": "60"})
    tmp = tempfile.mkdtemp(prefix="bench-mcpd.")
    nginx = None
    try:
        body = request(d, "POST", "/v1/tools/vm_list", body={}).body
        nginx, nport = start_nginx(tmp, body)
        print("response body: %d bytes (10 VMs)" % len(body))

        hdr = {"Authorization": "Bearer " + TOKEN_A,
               "Content-Type": "application/json", "Host": d.host}
        m_rps, m50, m99 = wrk("http://127.0.0.1:%d/v1/tools/vm_list"
                              % d.port, lua(os.path.join(tmp, "rest.lua"),
                                            "{}", hdr))
        n_rps, n50, n99 = wrk("http://127.0.0.1:%d/vm_list.json" % nport)
        row("mcpd POST /v1/tools/vm_list (10 VMs, fake backend)", m_rps,
            "req/s", "nginx static file, same size", n_rps)
        row("mcpd vm_list p50", m50, "ms", "nginx p50", n50)
        row("mcpd vm_list p99", m99, "ms", "nginx p99", n99)

        c = MCP(d)
        c.initialize()
        mh = dict(hdr, **{"Mcp-Session-Id": c.session,
                          "MCP-Protocol-Version": c.version,
                          "Accept": "application/json, text/event-stream"})
        call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "vm_status",
                                      "arguments": {"vm_id": "vm-1"}}})
        t_rps, t50, t99 = wrk("http://127.0.0.1:%d/mcp" % d.port,
                              lua(os.path.join(tmp, "mcp.lua"), call, mh))
        row("mcpd MCP tools/call vm_status, one session", t_rps, "req/s",
            "nginx static file", n_rps)
        row("mcpd tools/call p99", t99, "ms", "nginx p99", n99)

        # The same call stateless (2026-07-28), over as many connections.
        sl = json.loads(call)
        sl["params"]["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
        slh = dict(hdr, **{"MCP-Protocol-Version": "2026-07-28",
                           "Mcp-Method": "tools/call",
                           "Mcp-Name": "vm_status",
                           "Accept": "application/json, text/event-stream"})
        s_rps, s50, s99 = wrk("http://127.0.0.1:%d/mcp" % d.port,
                              lua(os.path.join(tmp, "sl.lua"),
                                  json.dumps(sl), slh))
        row("mcpd MCP tools/call vm_status, stateless 2026-07-28", s_rps,
            "req/s", "the same on one session, 32 connections", t_rps)
        row("mcpd stateless tools/call p99", s99, "ms", "session p99", t99)
    finally:
        if nginx is not None:
            nginx.terminate()
            nginx.wait(10)
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
