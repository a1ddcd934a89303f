#!/usr/bin/env python3
# The host daemons' idle memory, side by side: authd, vmmd, vmmd's spawner,
# mcpd (the e2e stack: real sockets, the vmmd suite's image, no VM) and
# netd (in netd's namespace test world), each measured as PSS once it has
# settled, so that pages the spawner shares with vmmd are counted once.
# One request has gone through mcpd and vmmd first, as a service that has
# been used; nothing runs while measuring.
#
# With --detail, each daemon's mappings by name (heap, libraries, stacks)
# follow, for finding where its memory goes.  Needs root
# and the image the vmmd integration test builds (tests/run --suite vmmd
# first); it boots no VM.
#
# usage: tests/bench/idle_pss.py [--build DIR] [--detail]
import argparse
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
import vmmdlib as tv  # noqa: E402
import test_e2e  # noqa: E402
import netdlib  # noqa: E402
import mcpd_vmmd  # noqa: E402
from mcpdlib import free_port  # noqa: E402

GOAL_MIB = 16.0     # issue 29: all host daemons, netd included


def pss_kib(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise RuntimeError("no Pss for pid %d" % pid)


def children(pid):
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
            out += [int(c) for c in f.read().split()]
    return out


def exe_name(pid):
    try:
        return os.path.basename(os.readlink("/proc/%d/exe" % pid))
    except OSError:
        return "?"


def cpu_ticks(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def settle(pids, timeout=120):
    """Waits until none of pids used CPU for a second (vmmd checks its
    image's digests after it says ready)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = [cpu_ticks(p) for p in pids]
        time.sleep(1)
        if [cpu_ticks(p) for p in pids] == before:
            return
    raise RuntimeError("the daemons did not go idle")


def detail(name, pid):
    """PSS by mapping name, largest first."""
    agg, cur = {}, None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                p = line.split()
                cur = p[5] if len(p) > 5 else "[anon]"
            elif line.startswith("Pss:"):
                agg[cur] = agg.get(cur, 0) + int(line.split()[1])
    print("%s (pid %d), PSS by mapping:" % (name, pid))
    for k, v in sorted(agg.items(), key=lambda kv: -kv[1])[:6]:
        print("  %7d KiB  %s" % (v, k))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(TOP, "build", "test"))
    ap.add_argument("--detail", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root")
        sys.exit(77)
    b = os.path.abspath(args.build)
    os.environ.update({
        "AUTHD": b + "/authd/authd", "AUTHCTL": b + "/authd/authctl",
        "VMMD": b + "/vmmd/vmmd", "VMPROXY": b + "/vmproxy/vmproxy",
        "VMCTL": b + "/vmmd/vmctl", "MCPD": b + "/mcpd/mcpd"})
    netdlib.NETD = b + "/netd/netd"
    manifest = tv.built_image()
    if manifest is None:
        sys.exit("idle_pss.py: no image in %s; run tests/run --suite vmmd "
                 "first" % tv.IMAGE_OUT)
    tv.become_subreaper()
    tv.exit_cleanly_on_sigterm()
    # It boots no VM and so runs outside the VM tests' lock: not on the
    # e2e suite's fixed port, which a running suite may hold.
    test_e2e.PORT = free_port()
    h = mcpd_vmmd.Stack(manifest)
    world = netdlib.World()
    try:
        h.setup()
        h.write_conf(mcpd_user="mcpvm")
        h.start_authd()
        h.start_vmmd()
        h.start_mcpd()
        world.build()
        world.start_netd()
        tok = h.issue("idle")
        body = json.loads(mcpd_vmmd.post(test_e2e.PORT, tok, "vm_list", {}))
        assert body["vms"] == [], body
        spawners = [c for c in children(h.vmmd.pid)
                    if exe_name(c) == exe_name(h.vmmd.pid)]
        procs = [("authd", h.authd.pid), ("vmmd", h.vmmd.pid)]
        procs += [("vmmd spawner", p) for p in spawners]
        # nsenter execs netd: the same pid.
        procs += [("mcpd", h.mcpd.pid), ("netd", world.netd.pid)]
        settle([p for _, p in procs])
        total = 0
        for name, pid in procs:
            kib = pss_kib(pid)
            total += kib
            print("idle PSS  %-13s %6.2f MiB" % (name, kib / 1024))
        print("BENCH\tidle PSS, the five host daemons together\t%.2f\tMiB"
              "\tgoal (issue 29)\t%.2f" % (total / 1024, GOAL_MIB))
        if args.detail:
            for name, pid in procs:
                detail(name, pid)
    finally:
        world.cleanup()
        h.cleanup()


if __name__ == "__main__":
    main()
