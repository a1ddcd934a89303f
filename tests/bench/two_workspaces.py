#!/usr/bin/env python3
# Two workspaces on one host (#25): workspace B's vm_list and vm_exec
# (with wait_seconds) through mcpd, alone and while workspace A runs each
# attack of tests/integration/tenants.py in its full form -- 300 dropped
# vm_read_file calls on a stopped guest, a fake vmproxy whose link goes
# down and stays silent, stream bursts on a paused VM, 256 stateless
# listens on one credential, 100,000 job rows and then vm_fork.  Prints
# B's p99 per tool under each attack beside its p99 alone, and the errors
# B got (there must be none: this exits 1 if there were).  The real
# authd, vmmd and mcpd over a loop-mounted XFS volume, real VMs of the e2e
# suite's `dev` image, as test_e2e.py starts them.  Runs as root.
#
# usage: tests/bench/two_workspaces.py [--build DIR] [--short]
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
sys.path.insert(0, HERE)
from mcpdlib import free_port  # noqa: E402
os.environ.setdefault("E2E_PORT", str(free_port()))
import vmmdlib as tv  # noqa: E402
import test_e2e  # noqa: E402
import tenants  # noqa: E402
import bench_mcpd as bm  # noqa: E402


class Stack(test_e2e.Stack):
    def __init__(self, manifest):
        super().__init__(manifest)
        self.vmmd_flags = ["-d"]     # no debug line per request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(TOP, "build", "test"))
    ap.add_argument("--short", action="store_true",
                    help="the e2e suite's short form")
    ap.add_argument("--only", action="append",
                    help="only the attacks whose name holds this: "
                    "readfile, linkdown, streams, listens, fork")
    ap.add_argument("--debug", action="store_true",
                    help="vmmd's debug log, kept in /tmp")
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
    h = Stack(manifest)
    if args.debug:
        h.vmmd_flags = ["-d", "-v"]
    bad = True
    try:
        h.setup()
        h.write_conf(mcpd_user="mcpvm", max_vms=4, max_memory_mib=4096,
                     stream_ports="1025-9999")
        h.start_authd()
        h.start_vmmd()
        h.start_mcpd()
        rows = tenants.run(
            h, test_e2e.PORT,
            h.issue("bench-a", "--max-vms", "3", "--memory-mib", "2048"),
            h.issue("bench-b", "--max-vms", "1", "--memory-mib", "1024"),
            tenants.SHORT if args.short else tenants.FULL, args.only)
        print(tenants.table(rows))
        for r in rows:
            print("%s: %s" % (r["name"], r["what"]))
            for e in r["errors"][:5]:
                print("  B's error: %r" % (e,))
            slow = [(t, dt) for t, dt in r["when"]["vm_list"] if dt > 0.25]
            if slow:
                print("  B's vm_list over 250 ms (start s, ms): " +
                      " ".join("%.1f:%.0f" % (t, dt * 1000)
                               for t, dt in slow[:20]))
        bad = any(r["errors"] for r in rows)
        alone = rows[0]["lat"]
        for r in rows[1:]:
            for tool in ("vm_list", "vm_exec"):
                bm.row("B's %s p99 while A runs: %s" % (tool, r["name"]),
                       tenants.p99(r["lat"][tool]) * 1000, "ms",
                       "B's %s p99 alone" % tool,
                       tenants.p99(alone[tool]) * 1000)
        print("B's errors: %d" % sum(len(r["errors"]) for r in rows))
    except Exception:
        for path in (h.authd_log, h.vmmd_log, h.mcpd_log):
            print("--- %s, last lines" % os.path.basename(path))
            print("\n".join(tv.read(path).splitlines()[-20:]))
        raise
    finally:
        if args.debug:
            for path in (h.vmmd_log, h.mcpd_log):
                keep = "/tmp/two-workspaces-" + os.path.basename(path)
                with open(keep, "w") as f:
                    f.write(tv.read(path))
                print("kept " + keep)
        h.cleanup()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
