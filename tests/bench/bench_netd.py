"""netd benchmarks, in the namespace test world of netdlib.py, each
printed next to a reference measured in the same run:
  - setup+teardown of one VM's network (netns, veth, TAP, routes, both
    rulesets), the median of 50, with 100 other networks present against
    none;
  - guest-to-internet TCP throughput and connect latency through netd's
    per-VM ruleset against the same path with that ruleset removed (the
    host's NAT table stays: without it nothing gets back).  The guest is
    a TAP joined by a Python pump as in the tests, so both figures carry
    the pump's cost; the difference is the rules'.
Needs root.  Usage: NETD=build/netd/netd python3 tests/bench/bench_netd.py
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
import netdlib as tn  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "50"))
OTHERS = int(os.environ.get("BENCH_OTHERS", "100"))
MIB = int(os.environ.get("BENCH_MIB", "64"))
CONNECTS = int(os.environ.get("BENCH_CONNECTS", "200"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))


def row(what, val, unit, ref, refval):
    print("BENCH\t%s\t%.3f\t%s\t%s\t%.3f" % (what, val, unit, ref, refval),
          flush=True)


def cycle(c, slot):
    t = time.monotonic()
    ty, body = c.call(tn.NET_SETUP, {"slot": slot})
    if ty != tn.NET_SETUP_RESULT:
        raise RuntimeError("setup %d: %r" % (slot, body))
    os.close(c.fds.pop())
    ty, body = c.call(tn.NET_TEARDOWN, {"slot": slot})
    if ty != tn.NET_TEARDOWN_RESULT:
        raise RuntimeError("teardown %d: %r" % (slot, body))
    return (time.monotonic() - t) * 1000


def median_cycle(c, slot):
    return statistics.median(cycle(c, slot) for _ in range(RUNS))


def path(g):
    r = tn.sh(tn.PY, tn.WORLD, "bench", "203.0.113.10", "5001", str(MIB),
              str(CONNECTS), ns=g)
    return json.loads(r.stdout)


def main():
    if os.geteuid() != 0:
        print("needs root; skipping")
        sys.exit(77)
    # The connection limits are not what is measured: far above the
    # connects, so that none of them waits.
    w = tn.World(max_vms=OTHERS + 2, conntrack=1048576, conn_rate=100000)
    try:
        w.build()
        w.serve(tn.NS_I, "discard:203.0.113.10:5001")
        w.start_netd()
        c = w.conn()
        c.call(tn.NET_SYNC, {"slots": []})
        slot = OTHERS + 1
        alone = median_cycle(c, slot)
        fds = []
        t = time.monotonic()
        for s in range(OTHERS):
            ty, body = c.call(tn.NET_SETUP, {"slot": s})
            if ty != tn.NET_SETUP_RESULT:
                raise RuntimeError("setup %d: %r" % (s, body))
            fds.append(c.fds.pop())
        print("# %d networks set up in %.1f s" % (OTHERS,
              time.monotonic() - t))
        crowded = median_cycle(c, slot)
        row("netd setup+teardown, %d others (median of %d)" % (OTHERS, RUNS),
            crowded, "ms", "alone", alone)
        for s in range(OTHERS):
            c.call(tn.NET_TEARDOWN, {"slot": s})
        for fd in fds:
            os.close(fd)

        ty, body = c.call(tn.NET_SETUP, {"slot": 0})
        g = w.guest(0, body, c.fds.pop())
        vmns = os.path.join(w.netns_dir, "mcpvm-0")
        # Interleaved rounds, so that a busy neighbour on the machine
        # weighs on both sides alike; a sync re-applies the ruleset.
        runs = {True: [], False: []}
        for _ in range(ROUNDS):
            runs[True].append(path(g))
            tn.sh("nft", "delete table inet mcpvm_0; delete table netdev "
                  "mcpvm_0", ns=vmns)
            runs[False].append(path(g))
            ty, body = c.call(tn.NET_SYNC, {"slots": [0]})
            if ty != tn.NET_SYNC_RESULT or body["kept"] != [0]:
                raise RuntimeError("sync: %r" % body)

        def med(rules, key):
            return statistics.median(r[key] for r in runs[rules])
        row("guest->internet TCP, netd's rules (median of %d)" % ROUNDS,
            med(True, "mib_s"), "MiB/s", "without them",
            med(False, "mib_s"))
        row("guest->internet TCP connect, netd's rules",
            med(True, "connect_ms"), "ms", "without them",
            med(False, "connect_ms"))
        c.call(tn.NET_TEARDOWN, {"slot": 0})
        c.close()
    finally:
        w.cleanup()


if __name__ == "__main__":
    main()
