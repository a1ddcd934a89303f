"""The egress policy's cost (issue 30), in the namespace test world of
netdlib.py, each figure next to the same measured without a policy in the
same run:
  - new TCP connections a second from a guest to an allowed address: a
    slot whose allowlist names the host (the address opened by netd's DNS
    forwarder into the slot's allow4 set) against a public slot;
  - DNS answers a second for that name, one query at a time, over UDP
    and over one TCP connection (the forwarder asks its upstream over a
    new TCP connection each time): through the allowlisted slot's
    forwarder (which asks the upstream and has netd open the address
    before it answers) against the public slot's, which passes the
    answer on as it came;
  - the public slot's answers through its forwarder against the upstream
    asked directly from the host's namespace: a guest has no direct way
    (DNS to anywhere but its forwarder is dropped), so that figure lacks
    the guest's pump as well as the forwarder.
The guests are TAPs joined by a Python pump as in the tests, so both
guest sides carry the pump's cost; the difference is the policy's.
Needs root.  Usage: NETD=build/netd/netd python3 tests/bench/bench_egress.py
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
import netdlib as tn  # noqa: E402

SECONDS = os.environ.get("BENCH_SECONDS", "3")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
NAME, ADDR = "pkg.bench.example", "203.0.113.20"


def row(what, val, unit, ref, refval):
    print("BENCH\t%s\t%.1f\t%s\t%s\t%.1f" % (what, val, unit, ref, refval),
          flush=True)


def rates(g, resolver):
    r = tn.sh(tn.PY, tn.WORLD, "rates", ADDR, "80", resolver, NAME,
              SECONDS, ns=g)
    return json.loads(r.stdout)


def main():
    if os.geteuid() != 0:
        print("needs root; skipping")
        sys.exit(77)
    # The connection limits are not what is measured: far above the rate.
    w = tn.World(conntrack=1048576, conn_rate=100000,
                 dns_extra="%s=%s" % (NAME, ADDR))
    try:
        w.build()
        tn.sh("ip", "addr", "add", ADDR + "/32", "dev", "lo", ns=tn.NS_I)
        w.serve(tn.NS_I, "tcp:%s:80" % ADDR)
        w.start_netd()
        c = w.conn()
        c.call(tn.NET_SYNC, {"slots": []})
        guests = {}
        for slot, egress in ((0, None),
                             (1, {"mode": "allowlist", "allow": [NAME]})):
            body = {"slot": slot}
            if egress is not None:
                body["egress"] = egress
            ty, reply = c.call(tn.NET_SETUP, body)
            if ty != tn.NET_SETUP_RESULT:
                raise RuntimeError("setup %d: %r" % (slot, reply))
            guests[slot] = (w.guest(slot, reply, c.fds.pop()),
                            reply["dns"][0])
        # Interleaved rounds, so that a busy neighbour on the machine
        # weighs on both sides alike.
        guests["host"] = (tn.NS_H, "203.0.113.53")
        runs = {0: [], 1: [], "host": []}
        for _ in range(ROUNDS):
            for slot in (1, 0, "host"):
                r = rates(*guests[slot])
                if r["dns_failed"]:
                    raise RuntimeError("%s: %d DNS queries failed"
                                       % (slot, r["dns_failed"]))
                runs[slot].append(r)

        def med(slot, key):
            return statistics.median(r[key] for r in runs[slot])
        row("new TCP connections to an allowed name's address (median of "
            "%d)" % ROUNDS, med(1, "conns_s"), "conn/s", "no policy",
            med(0, "conns_s"))
        row("DNS answers through an allowlist's forwarder, one at a time",
            med(1, "dns_s"), "answers/s", "a public slot's forwarder",
            med(0, "dns_s"))
        row("DNS answers over TCP through an allowlist's forwarder, one at "
            "a time", med(1, "dns_tcp_s"), "answers/s", "a public slot's "
            "forwarder over TCP", med(0, "dns_tcp_s"))
        row("DNS answers through a public slot's forwarder, one at a time",
            med(0, "dns_s"), "answers/s", "upstream direct from the host's "
            "namespace", med("host", "dns_s"))
        row("DNS answers over TCP through a public slot's forwarder, one at "
            "a time", med(0, "dns_tcp_s"), "answers/s", "upstream direct "
            "over TCP from the host's namespace", med("host", "dns_tcp_s"))
        for slot in (0, 1):
            c.call(tn.NET_TEARDOWN, {"slot": slot})
        c.close()
    finally:
        w.cleanup()


if __name__ == "__main__":
    main()
