#!/usr/bin/env python3
# Guest networking end to end: real authd, vmmd, vmproxy and QEMU TCG VMs
# booting the `test` image with this tree's guestd, and the real netd in
# the namespace test world of netdlib.py (its "host" netns, uplink to
# an "internet" netns, a "private LAN").  vmmd runs in the machine's own
# netns and reaches netd by its socket; QEMU gets the TAP netd made.
# Everything is driven through the tools, as a client would.  Last, the
# same vmmd restarts with warm_pool = 1, and a networked vm_create and
# vm_run come from the pool, each in a slot of its own.  TAP on stdout;
# needs root and what the vmmd suites need (vmmdlib.py).
import base64
import json
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netdlib  # noqa: E402
import taplib  # noqa: E402
import vmmdlib as base  # noqa: E402
from vmmdlib import COUNTER, ok, note  # noqa: E402

IMAGE_OUT = os.path.join(base.CACHE, "netd-test")
# Each VM's conntrack bound and new-connection rate ([netd]), low enough
# for a guest under TCG to reach both within FLOOD_SECONDS.
CT_MAX = 64
CT_RATE = 50
FLOOD_SECONDS = 4

# The guest floods with the namespace world's own flooder, copied in:
# new UDP flows and TCP connections it holds open, then it prints what it
# tried and holds them until it is killed.
WORLD = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "netd_world.py")


def guest(a, vm, cmd, rid):
    state, code, out, err = a.sh(vm, cmd, rid, timeout_seconds=30)
    return code, out.strip(), err.strip()


def tcp(a, vm, addr, port, rid):
    """A TCP connection from the guest with bash's /dev/tcp, 3 s at most."""
    return guest(a, vm, "timeout 3 bash -c 'exec 3<>/dev/tcp/%s/%d && "
                 "cat <&3'" % (addr, port), rid)


def netd_objects(w):
    return (netdlib.mcpvm_links(netdlib.NS_H), sorted(os.listdir(w.netns_dir)))


def all_gone(w, h_before, timeout=10):
    """vmmd releases a network without waiting for netd: give it time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if netd_objects(w) == ([], []) and netdlib.h_ruleset() == h_before:
            return True
        time.sleep(0.1)
    return False


def guest_addr(a, vm, rid):
    """The address the guest's stack sends from (no ip(8) in the image)."""
    code, out, err = guest(a, vm, "python3 -c 'import socket; s=socket."
                           "socket(socket.AF_INET, socket.SOCK_DGRAM); "
                           "s.connect((\"203.0.113.10\", 7)); "
                           "print(s.getsockname()[0])'", rid)
    return out


def check_policy(h, a, nonet):
    okk, r = nonet("vm_create", request_id="n-1", network="on")
    ok(not okk and r["code"] == "forbidden", "network on without the "
       "workspace's grant: forbidden", r)


def check_egress(w, a, vm, tag):
    code, out, err = tcp(a, vm, "203.0.113.10", 80, tag + "-tcp")
    ok(code == 0 and out == "tcp 203.0.113.10 " + netdlib.UPLINK_ADDR,
       "%s: the guest reaches the internet through NAT" % tag, (out, err))
    code, out, err = guest(a, vm, "getent hosts " + netdlib.DNS_NAME,
                           tag + "-dns")
    ok(code == 0 and out.split()[:1] == [netdlib.DNS_ADDR],
       "%s: the test name resolves through the slot's forwarder" % tag,
       (code, out, err))
    code, out, err = guest(a, vm, "timeout 3 bash -c 'echo hi >"
                           "/dev/udp/203.0.113.10/7'", tag + "-udp")
    ok(code == 0, "%s: UDP leaves" % tag, (out, err))
    blocked = [("10.77.0.2", 80), ("192.168.77.2", 80), ("100.64.7.2", 80),
               ("169.254.169.254", 80), ("198.18.5.2", 80),
               (netdlib.UPLINK_ADDR, 8081)]
    # All six at once, in one job: a dropped connect takes its whole 3 s,
    # and six in a row took 18 s of every check.
    cmd = " ".join("(timeout 3 bash -c 'exec 3<>/dev/tcp/%s/%d && cat <&3' "
                   ">/dev/null 2>&1; echo %d $?) &" % (addr, port, i)
                   for i, (addr, port) in enumerate(blocked)) + " wait"
    code, out, err = guest(a, vm, cmd, tag + "-blocked")
    codes = dict(line.split() for line in out.splitlines() if line.strip())
    bad = [(addr, codes.get(str(i))) for i, (addr, port) in
           enumerate(blocked) if codes.get(str(i)) in (None, "0")]
    ok(code == 0 and len(codes) == len(blocked) and not bad, "%s: private, CGNAT, metadata, blocked and host addresses "
       "are unreachable" % tag, bad)


def case_egress(h, w, h_before):
    """A workspace whose egress policy allows 203.0.113.0/24 only, and a
    VM narrowed below it: netd enforces the VM's policy from its first
    packet, vm_status shows it, and a widening is forbidden."""
    eg = base.Client(h, h.issue("egws", "--allow-network",
                                "--egress-allow", "203.0.113.0/24"))
    okk, r = eg("vm_create", request_id="e-0", network="on",
                egress={"mode": "allowlist", "allow": ["0.0.0.0/0"]})
    ok(not okk and r["code"] == "forbidden" and
       "0.0.0.0/0 is not inside the workspace's allowlist" in r["message"],
       "egress: a widening allowlist is forbidden, naming the entry", r)
    okk, r = eg("vm_create", request_id="e-1", network="on",
                egress={"mode": "public", "deny": ["203.0.113.10/32"]})
    ok(not okk and r["code"] == "forbidden" and
       "egress.mode: public" in r["message"],
       "egress: public under an allowlist is forbidden", r)
    okk, r = eg("vm_create", request_id="e-2", network="on",
                egress={"mode": "allowlist", "allow": ["203.0.113.1/24"]})
    ok(not okk and r["code"] == "invalid_argument" and
       "203.0.113.1/24 has host bits set" in r["message"],
       "egress: a prefix with host bits is refused, naming it", r)
    okk, r = eg("vm_create", request_id="e-3", network="off",
                egress={"mode": "allowlist", "allow": []})
    ok(not okk and r["code"] == "invalid_argument",
       "egress: without network there is nothing to narrow", r)
    ok(netd_objects(w) == ([], []), "egress: nothing was made for the "
       "refused requests", netd_objects(w))
    # Narrowed to the resolver's address alone: the workspace's
    # 203.0.113.10 is out of this VM's reach, and so is every name: its
    # one resolver is its forwarder, which refuses them all for an
    # allowlist without names, and the listed resolver is not asked.
    okk, r = eg("vm_create", request_id="e-4", network="on",
                idle_seconds=3600,
                egress={"mode": "allowlist", "allow": ["203.0.113.53/32"]})
    ok(okk and r.get("state") == "running", "egress: a narrowed VM", r)
    vm = r["vm_id"]
    okk, r = eg("vm_status", vm_id=vm)
    ok(okk and r.get("egress") == {"mode": "allowlist",
                                   "allow": ["203.0.113.53/32"]},
       "egress: vm_status shows the VM's policy", r)
    gw = guest_addr(eg, vm, "e-addr").rsplit(".", 1)[0] + ".1"
    code, out, err = guest(eg, vm, "cat /etc/resolv.conf", "e-conf")
    ok(("nameserver %s" % gw) in out and "203.0.113.53" not in out,
       "egress: its one resolver is the forwarder on its gateway", out)
    ok(rcode(eg, vm, gw, netdlib.DNS_NAME, "e-rc") == "5",
       "egress: which refuses a name for an allowlist of prefixes alone")
    ok(rcode(eg, vm, "203.0.113.53", netdlib.DNS_NAME, "e-rc53")
       .startswith("error"), "egress: and the listed resolver's address "
       "takes no DNS")
    code, out, err = tcp(eg, vm, "203.0.113.10", 80, "e-tcp")
    ok(code != 0, "egress: what only the workspace allows is dropped for "
       "the narrowed VM", (code, out, err))
    code, out, err = tcp(eg, vm, "10.77.0.2", 80, "e-lan")
    ok(code != 0, "egress: the private LAN stays blocked", (code, out))
    # Its policy is its own record's: a resume sets up the same.
    okk, r = eg("vm_suspend", vm_id=vm)
    ok(okk and eg.state(vm) == "hibernated", "egress: hibernated", r)
    code, out, err = tcp(eg, vm, "203.0.113.10", 80, "e-tcp2")
    ok(code != 0 and eg.state(vm) == "running", "egress: resumed from "
       "hibernation, the VM keeps its narrowed policy", (code, out, err))
    ok(rcode(eg, vm, gw, netdlib.DNS_NAME, "e-rc2") == "5",
       "egress: and its forwarder answers it again, by the same policy")
    # A fork may not widen its source's policy, and without egress its
    # child has the source's, in a slot of its own.
    okk, r = eg("vm_fork", vm_id=vm, request_id="e-f0", count=1,
                egress={"mode": "allowlist", "allow": ["203.0.113.0/24"]})
    ok(not okk and r["code"] == "forbidden" and
       "203.0.113.0/24" in r["message"], "egress: a fork wider than its "
       "source is forbidden", r)
    okk, f = eg("vm_fork", vm_id=vm, request_id="e-f1", count=1)
    ok(okk and len(f.get("vm_ids", [])) == 1, "egress: a fork", f)
    child = f["vm_ids"][0]
    okk, st = eg("vm_status", vm_id=child)
    ok(okk and st.get("egress") == {"mode": "allowlist",
                                    "allow": ["203.0.113.53/32"]},
       "egress: the fork has its source's policy", st)
    code, out, err = tcp(eg, child, "203.0.113.10", 80, "e-ftcp")
    ok(code != 0, "egress: and the fork's own slot enforces it",
       (code, out, err))
    fgw = guest_addr(eg, child, "e-faddr").rsplit(".", 1)[0] + ".1"
    code, out, err = guest(eg, child, "cat /etc/resolv.conf", "e-fconf")
    ok(fgw != gw and ("nameserver %s" % fgw) in out and
       ("nameserver %s" % gw) not in out, "egress: the fork's one "
       "resolver is the forwarder on its own slot's gateway", out)
    ok(rcode(eg, child, fgw, netdlib.DNS_NAME, "e-frc") == "5",
       "egress: which answers by the fork's policy")
    okk, r = eg("vm_destroy", vm_id=child)
    ok(okk, "egress: the fork is destroyed", r)
    okk, r = eg("vm_destroy", vm_id=vm)
    ok(okk and all_gone(w, h_before), "egress: destroy leaves nothing, "
       "the egress table included", (r, netd_objects(w)))
    case_egress_names(h, w, h_before)


def case_egress_names(h, w, h_before):
    """A workspace allowing one name: its VM's resolver is netd's
    forwarder on its gateway, the name resolves and opens its address,
    another name is refused, and vm_status counts and names the refusal."""
    nw = base.Client(h, h.issue("namews", "--allow-network",
                                "--egress-allow", netdlib.DNS_NAME))
    okk, r = nw("vm_create", request_id="nm-1", network="on",
                idle_seconds=3600)
    ok(okk and r.get("state") == "running", "names: a VM whose workspace "
       "allows one name", r)
    vm = r["vm_id"]
    addr = guest_addr(nw, vm, "nm-addr")
    gw = addr.rsplit(".", 1)[0] + ".1"
    code, out, err = guest(nw, vm, "cat /etc/resolv.conf", "nm-conf")
    ok(("nameserver %s" % gw) in out and "203.0.113.53" not in out,
       "names: its one resolver is the forwarder on its gateway", out)
    code, out, err = tcp(nw, vm, "203.0.113.10", 80, "nm-tcp0")
    ok(code != 0, "names: the name's address is shut before it is "
       "resolved", (code, out, err))
    code, out, err = guest(nw, vm, "getent hosts " + netdlib.DNS_NAME,
                           "nm-dns")
    ok(code == 0 and out.split()[:1] == [netdlib.DNS_ADDR],
       "names: the allowed name resolves", (code, out, err))
    code, out, err = tcp(nw, vm, "203.0.113.10", 80, "nm-tcp1")
    ok(code == 0, "names: and its address opens", (code, out, err))
    code, out, err = guest(nw, vm, "getent hosts other.mcpvm.example",
                           "nm-refused")
    ok(code != 0, "names: another name does not resolve", (code, out))
    # netd's counters reach vm_status with vmmd's next poll (10 s).
    st = base.wait_for(lambda: (lambda r: r[1] if r[0] and r[1].get(
        "drops", {}).get("dns_refused", 0) > 0 else None)(
        nw("vm_status", vm_id=vm)), 30, "the refused name in vm_status")
    ok(st["drops"]["dns_refused"] >= 1 and "other.mcpvm.example" in
       st["drops"]["dns_refused_last"], "names: vm_status counts the "
       "refused name and shows it", st["drops"])
    case_egress_names_fork(nw, vm, gw)
    okk, r = nw("vm_destroy", vm_id=vm)
    ok(okk and all_gone(w, h_before), "names: destroy leaves nothing, "
       "the forwarder's socket included", (r, netd_objects(w)))


# The rcode of an A query for argv[2] to argv[1], port 53, over UDP.
RCODE_PY = ("import socket,struct,sys; s=socket.socket(socket.AF_INET,"
            "socket.SOCK_DGRAM); s.settimeout(5); q=b''.join(bytes([len(l)])"
            "+l.encode() for l in sys.argv[2].split('.'))+b'\\0'; "
            "s.sendto(struct.pack('>HHHHHH',0x4d43,0x100,1,0,0,0)+q+"
            "struct.pack('>HH',1,1),(sys.argv[1],53)); "
            "print(s.recv(4096)[3]&15)")


def rcode(a, vm, server, name, rid):
    """The rcode the guest gets from server for name (5 is REFUSED)."""
    code, out, err = guest(a, vm, "python3 -c \"%s\" %s %s" %
                           (RCODE_PY, server, name), rid)
    return out if code == 0 else "error: %s %s" % (out, err)


def case_egress_names_fork(nw, vm, src_gw):
    """A fork of an allowlisted VM is allowlisted in its own slot: its
    guest's one resolver is the forwarder on its own slot's gateway (not
    the source's), through which the allowed name resolves and opens its
    address, and another name is REFUSED."""
    okk, f = nw("vm_fork", vm_id=vm, request_id="nm-f1", count=1)
    ok(okk and len(f.get("vm_ids", [])) == 1, "names: a fork", f)
    child = f["vm_ids"][0]
    addr = guest_addr(nw, child, "nm-faddr")
    gw = addr.rsplit(".", 1)[0] + ".1"
    ok(gw != src_gw, "names: the fork has a slot of its own", (gw, src_gw))
    code, out, err = guest(nw, child, "cat /etc/resolv.conf", "nm-fconf")
    ok(("nameserver %s" % gw) in out and ("nameserver %s" % src_gw) not in
       out and "203.0.113.53" not in out, "names: the fork's one resolver "
       "is the forwarder on its own slot's gateway", out)
    code, out, err = tcp(nw, child, "203.0.113.10", 80, "nm-ftcp0")
    ok(code != 0, "names: the fork's slot has not opened the name's "
       "address before the fork resolves it", (code, out, err))
    code, out, err = guest(nw, child, "getent hosts " + netdlib.DNS_NAME,
                           "nm-fdns")
    ok(code == 0 and out.split()[:1] == [netdlib.DNS_ADDR],
       "names: the allowed name resolves in the fork", (code, out, err))
    code, out, err = tcp(nw, child, "203.0.113.10", 80, "nm-ftcp1")
    ok(code == 0, "names: and its address opens in the fork's slot",
       (code, out, err))
    ok(rcode(nw, child, gw, "other.mcpvm.example", "nm-frc") == "5",
       "names: the fork's forwarder answers another name REFUSED")
    ok(rcode(nw, child, gw, netdlib.DNS_NAME, "nm-frc0") == "0",
       "names: and the allowed name NOERROR")
    okk, r = nw("vm_destroy", vm_id=child)
    ok(okk, "names: the fork is destroyed", r)


def applied(w):
    """How many egress changes netd has applied so far (its log)."""
    return w.log().count(": egress now ")


def case_live_policy(h, w, a, vm):
    """`authctl policy set` on the workspace of a running networked VM:
    what the guest reaches changes without a restart (authd pushes the
    policy, vmmd narrows the VM's by it, netd replaces its table), network
    off removes its reach, and vm_status shows the policy and the drops."""
    addr = guest_addr(a, vm, "lp-addr")
    okk, st = a("vm_status", vm_id=vm)
    ok(okk and st.get("egress") == {"mode": "public", "deny": []} and
       st.get("egress_rate") == 0 and st.get("network_cut") is False,
       "live: vm_status shows public egress, no rate, network not cut", st)
    gw = addr.rsplit(".", 1)[0] + ".1"
    n = applied(w)
    t = time.monotonic()
    h.authctl("policy", "set", "--workspace", "netws", "--egress-allow",
              netdlib.DNS_NAME, "--egress-rate", "65536")
    # netd answers vmmd once the kernel has the new table: its log line.
    base.wait_for(lambda: applied(w) > n, 10, "netd to apply the change")
    note("live policy: public to an allowlist of one name applied %.2f s "
         "after authctl started" % (time.monotonic() - t))
    code, out, err = tcp(a, vm, "203.0.113.10", 80, "lp-tcp1")
    ok(code != 0, "live: narrowed to one name, the running guest's "
       "connection to its address is dropped before it resolves it",
       (code, out, err))
    # The guest's resolver, its forwarder since boot, answers by the new
    # policy at once: no resume.
    code, out, err = guest(a, vm, "getent hosts " + netdlib.DNS_NAME,
                           "lp-dns1")
    ok(code == 0 and out.split()[:1] == [netdlib.DNS_ADDR],
       "live: the newly allowed name resolves without a resume",
       (code, out, err))
    code, out, err = tcp(a, vm, "203.0.113.10", 80, "lp-tcp1b")
    ok(code == 0, "live: and its address opens", (code, out, err))
    ok(rcode(a, vm, gw, "other.mcpvm.example", "lp-rc") == "5",
       "live: another name is REFUSED")
    okk, st = a("vm_status", vm_id=vm)
    ok(okk and st.get("egress") == {"mode": "allowlist",
                                    "allow": [netdlib.DNS_NAME]} and
       st.get("egress_rate") == 65536 and st.get("state") == "running",
       "live: vm_status shows the new policy and rate, the VM still "
       "running", st)
    ok("limit rate over 64 kbytes/second" in netdlib.sh(
        "nsenter", "--net=" + os.path.join(w.netns_dir, "mcpvm-%d" %
                                            int(addr.split(".")[2])),
        "nft", "list", "table", "inet", "mcpvm_%d_egress" %
        int(addr.split(".")[2])).stdout,
       "live: the rate is in the VM's egress table")
    # netd's counters reach vm_status with vmmd's next poll (10 s).
    st = base.wait_for(lambda: (lambda r: r[1] if r[0] and r[1].get(
        "drops", {}).get("egress", 0) > 0 else None)(
        a("vm_status", vm_id=vm)), 30, "the drops in vm_status")
    ok(st["drops"]["egress"] > 0 and set(st["drops"]) ==
       {"egress", "bandwidth", "conn_rate", "conn_count", "dns_refused",
        "dns_refused_last"},
       "live: vm_status counts the dropped packets", st["drops"])
    before = st["drops"]["egress"]
    n = applied(w)
    h.authctl("policy", "set", "--workspace", "netws", "--deny-network")
    base.wait_for(lambda: applied(w) > n, 10, "netd to apply network off")
    code, out, err = guest(a, vm, "getent hosts " + netdlib.DNS_NAME,
                           "lp-dns2")
    ok(code != 0, "live: network off, the running guest resolves nothing",
       (code, out, err))
    code, out, err = tcp(a, vm, "203.0.113.10", 80, "lp-tcp2")
    ok(code != 0, "live: and reaches nothing", (code, out, err))
    okk, st = a("vm_status", vm_id=vm)
    ok(okk and st.get("network_cut") is True and st.get("egress") ==
       {"mode": "allowlist", "allow": []}, "live: vm_status says the "
       "network is cut", st)
    st = base.wait_for(lambda: (lambda r: r[1] if r[0] and r[1].get(
        "drops", {}).get("egress", 0) > before else None)(
        a("vm_status", vm_id=vm)), 30, "more drops in vm_status")
    ok(st["drops"]["egress"] > before, "live: the drop count rises on, "
       "carried across the change", (before, st["drops"]))
    # Given back: the same running guest, its own address, public again.
    n = applied(w)
    h.authctl("policy", "set", "--workspace", "netws", "--allow-network",
              "--egress-public", "--egress-rate", "0")
    base.wait_for(lambda: applied(w) > n, 10, "netd to apply network on")
    code, out, err = tcp(a, vm, "203.0.113.10", 80, "lp-tcp3")
    ok(code == 0 and guest_addr(a, vm, "lp-addr2") == addr,
       "live: network on again, the same guest reaches the internet",
       (code, out, err))
    ok(rcode(a, vm, gw, "other.mcpvm.example", "lp-rc2") == "3",
       "live: public again, its forwarder passes every name on "
       "(NXDOMAIN from the world's resolver)")
    okk, st = a("vm_status", vm_id=vm)
    ok(okk and st.get("egress") == {"mode": "public", "deny": []} and
       st.get("egress_rate") == 0 and st.get("network_cut") is False,
       "live: vm_status shows public egress again", st)
    note("live policy: drops counted %d then %d packets"
         % (before, st.get("drops", {}).get("egress", -1)))


def counter(a, vm, rid):
    code, out, err = guest(a, vm, "cat /workspace/counter", rid)
    v = out.split()
    return (v[0], int(v[1])) if code == 0 and len(v) == 2 else (None, -1)


def wait_objects(w, n, timeout=15):
    """netd's objects for n slots: one netns and one host veth each."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        links, ns = netd_objects(w)
        if len(links) == n and len(ns) == n:
            return True
        time.sleep(0.1)
    return False


def nic(a, vm, rid):
    """eth0's MAC, the address the guest sends from, and its ARP table."""
    code, out, err = guest(a, vm, "cat /sys/class/net/eth0/address", rid)
    mac = out
    addr = guest_addr(a, vm, rid + "-a")
    code, out, err = guest(a, vm, "cat /proc/net/arp", rid + "-n")
    arp = [line.split()[0] for line in out.splitlines()[1:] if line.split()]
    return mac, addr, arp


def slot_nic(mac, addr):
    """The MAC and address netd gives one slot (netd.8): 02:6d:76:00:N and
    10.232.N.2, with N < 256 here."""
    parts = addr.split(".")
    return (len(parts) == 4 and parts[:2] == ["10", "232"] and
            parts[3] == "2" and
            mac == "02:6d:76:00:00:%02x" % int(parts[2]))


def check_clone(w, a, vm, src_nic, token, tag):
    """A clone of the networked source: its own slot's MAC and address,
    no neighbour entry of the source's gateway, egress of its own, and
    the source's process running on with the memory it had."""
    mac, addr, arp = nic(a, vm, tag + "-nic")
    ok(slot_nic(mac, addr) and mac != src_nic[0] and addr != src_nic[1],
       "%s: eth0 has its own slot's MAC and address" % tag,
       (mac, addr, src_nic))
    old_gw = src_nic[1].rsplit(".", 1)[0] + ".1"
    ok(old_gw not in arp, "%s: no neighbour entry of the source's gateway "
       "%s survived" % (tag, old_gw), arp)
    code, out, err = guest(a, vm, "cat /etc/resolv.conf", tag + "-res")
    ok(("nameserver %s.1" % addr.rsplit(".", 1)[0]) in out and
       ("nameserver %s" % old_gw) not in out, "%s: resolv.conf names the "
       "forwarder on its own slot's gateway" % tag, out)
    check_egress(w, a, vm, tag)
    tok, n = counter(a, vm, tag + "-cnt")
    ok(tok == token, "%s: the source's process runs on with its memory "
       "(token %s)" % (tag, tok), (tok, token))
    return mac, addr


def conntrack_open_from(src):
    """The host's conntrack entries whose original source is src, and
    those of them not closing.  The bound (nftables ct count) counts the
    connections that are not closing; a TCP connection in TIME_WAIT or
    CLOSE stays in the table until it times out, limited by the rate
    instead."""
    out = netdlib.sh("cat", "/proc/net/nf_conntrack",
                     ns=netdlib.NS_H).stdout
    mine = [ln for ln in out.splitlines() if " src=%s " % src in ln]
    return len(mine), sum(1 for ln in mine if " TIME_WAIT " not in ln and
                          " CLOSE " not in ln)


def case_flood(h, a, vm, child):
    """The child floods new UDP and TCP flows from its guest: the host's
    conntrack entries from it stay within its bound, while the source's
    new connections succeed throughout."""
    src = guest_addr(a, child, "flood-addr")
    with open(WORLD, "rb") as f:
        okk, r = a("vm_write_file", vm_id=child, path="netd_world.py",
                   data_base64=base64.b64encode(f.read()).decode())
    ok(okk, "flood: the flooder is in the guest", r)
    before = conntrack_open_from(src)
    okk, r = a("vm_exec", vm_id=child, request_id="flood",
               command="python3 /workspace/netd_world.py flood 203.0.113.10 "
               "80 9999 %d" % FLOOD_SECONDS, timeout_seconds=600)
    ok(okk, "flood: started in the child", r)
    job = r["job_id"]
    samples, probes, printed = [], [], ""
    deadline = time.monotonic() + FLOOD_SECONDS + 60
    while time.monotonic() < deadline:
        samples.append(conntrack_open_from(src))
        probes.append(tcp(a, vm, "203.0.113.10", 80,
                          "flood-probe-%d" % len(probes))[0])
        okk, o = a("vm_job_output", vm_id=child, job_id=job,
                   cursor={"stdout": 0, "stderr": 0})
        printed = o.get("stdout", "") if okk else ""
        if printed.strip():
            break
    samples.append(conntrack_open_from(src))
    try:
        tried = json.loads(printed)
    except ValueError:
        tried = {"udp": 0, "tcp": 0}
    good = sum(1 for c in probes if c == 0)
    note("flood from a guest: %d UDP + %d TCP flows tried in %d s; the "
         "host's entries from it at most %d open (bound %d) and %d with "
         "those closing (%d and %d before); the source connected %d of %d "
         "times meanwhile"
         % (tried["udp"], tried["tcp"], FLOOD_SECONDS,
            max(s[1] for s in samples), CT_MAX, max(s[0] for s in samples),
            before[1], before[0], good, len(probes)))
    ok(tried["udp"] + tried["tcp"] > 4 * CT_MAX,
       "flood: the guest tried far more flows than its bound", tried)
    ok(max(s[1] for s in samples) <= CT_MAX, "flood: the host's open "
       "conntrack entries from the flooding guest stay within its bound",
       samples)
    ok(probes and good == len(probes), "flood: the other VM's new "
       "connections succeed throughout", probes)
    okk, r = a("vm_job_cancel", vm_id=child, job_id=job)
    ok(okk, "flood: the flood is cancelled", r)


def case_clones(h, w, a, vm):
    """Memory snapshots and forks of a VM with network: each clone in a
    slot of its own, the source keeping its own."""
    okk, r = a("vm_write_file", vm_id=vm, path="counter.py",
               data_base64=base64.b64encode(COUNTER.encode()).decode())
    ok(okk, "clones: the counter script is written", r)
    okk, r = a("vm_exec", vm_id=vm, request_id="counter",
               command="python3 /workspace/counter.py",
               timeout_seconds=3600)
    ok(okk, "clones: the counter runs as a job in the source", r)
    base.wait_for(lambda: counter(a, vm, "cw-%d" % time.monotonic_ns())[1]
                  > 3, 60, "the counter")
    token, _ = counter(a, vm, "c-tok")
    src_nic = nic(a, vm, "src-nic")
    ok(slot_nic(src_nic[0], src_nic[1]), "clones: the source has its "
       "slot's MAC and address", src_nic)

    okk, s = a("vm_snapshot", vm_id=vm, request_id="s-net", memory=True)
    ok(okk and s["memory"] is True and s["network"] == "on",
       "clones: a memory snapshot of a VM with network on, network on", s)
    sid = s["snapshot_id"]
    m = json.load(open(os.path.join(h.mnt, "snapshots", sid,
                                    "manifest.json")))
    ok(m.get("network") is True, "clones: its manifest records the NIC", m)
    okk, r = a("vm_snapshot_list")
    ok(okk and [x["network"] for x in r["snapshots"]] == ["on"],
       "clones: vm_snapshot_list says network on", r)
    okk, r = a("vm_create", request_id="n-off", snapshot=sid,
               network="off")
    ok(not okk and r["code"] == "invalid_argument" and
       r["message"].startswith("network"), "clones: an explicit network "
       "off with a networked memory snapshot is invalid_argument naming "
       "it", r)
    h.authctl("policy", "set", "--workspace", "netws", "--deny-network")
    okk, r = a("vm_create", request_id="n-deny", snapshot=sid)
    ok(not okk and r["code"] == "forbidden", "clones: a workspace denied "
       "network is forbidden to restore a networked snapshot", r)
    okk, r = a("vm_fork", vm_id=vm, request_id="f-deny", count=1)
    ok(not okk and r["code"] == "forbidden", "clones: and to fork a "
       "networked VM", r)
    # The source and two clones at once: more than a workspace's default.
    h.authctl("policy", "set", "--workspace", "netws", "--allow-network",
              "--max-vms", "3")

    kids = []
    for i in range(2):
        okk, r = a("vm_create", request_id="n-c%d" % i, snapshot=sid,
                   idle_seconds=3600)
        ok(okk and r.get("network") == "on" and r.get("state") ==
           "running", "clones: VM %d restored from it, network on" % i, r)
        kids.append(r["vm_id"])
    ok(wait_objects(w, 3), "clones: netd holds three slots' objects",
       netd_objects(w))
    nics = [check_clone(w, a, kid, src_nic, token, "clone%d" % i)
            for i, kid in enumerate(kids)]
    ok(len({n[0] for n in nics} | {src_nic[0]}) == 3 and
       len({n[1] for n in nics} | {src_nic[1]}) == 3,
       "clones: three MACs and three addresses", (nics, src_nic))
    check_egress(w, a, vm, "source-with-clones")
    for kid in kids:
        okk, r = a("vm_destroy", vm_id=kid)
        ok(okk, "clones: destroyed", r)
    ok(wait_objects(w, 1), "clones: destroying them removed their slots' "
       "objects", netd_objects(w))
    check_egress(w, a, vm, "source-after-clones")
    ok(nic(a, vm, "src-nic2")[:2] == src_nic[:2], "clones: the source "
       "kept its MAC and address", src_nic)
    okk, r = a("vm_snapshot_delete", snapshot_id=sid)
    ok(okk, "clones: the snapshot is deleted", r)

    okk, f = a("vm_fork", vm_id=vm, request_id="f-net", count=1)
    ok(okk and len(f.get("vm_ids", [])) == 1, "fork: one child of the "
       "networked source", f)
    child = f["vm_ids"][0]
    okk, st = a("vm_status", vm_id=child)
    ok(okk and st["network"] == "on" and st["origin"] == "fork",
       "fork: the child has network on", st)
    ok(wait_objects(w, 2), "fork: netd holds two slots' objects",
       netd_objects(w))
    check_clone(w, a, child, src_nic, token, "fork")
    check_egress(w, a, vm, "source-with-fork")
    case_flood(h, a, vm, child)
    okk, r = a("vm_destroy", vm_id=child)
    ok(okk and wait_objects(w, 1), "fork: destroying the child removed "
       "its slot's objects", (r, netd_objects(w)))
    check_egress(w, a, vm, "source-after-fork")
    guest(a, vm, "pkill -f counter.py; true", "c-kill")


POOL = "@warm-pool"


def pool_ready(h, network):
    """The warm pool's ready snapshots with that network, with no pool VM
    left (its build is over)."""
    p = h.vmctl("-j", "snapshots", "--workspace", POOL)
    v = h.vmctl("-j", "--workspace", POOL, "list")
    if p.returncode != 0 or v.returncode != 0 or json.loads(v.stdout)["vms"]:
        return []
    return [x for x in json.loads(p.stdout)["snapshots"]
            if x["network"] == network]


def set_up_since(w, mark):
    """The guest addresses netd set up since its log was mark long."""
    return [ln.split("network up, guest ")[1].split(",")[0]
            for ln in w.log()[mark:].splitlines()
            if "network up, guest " in ln]


def resolvers_own(a, vm, addr, rid):
    """The guest's resolvers are the world's or its own slot's gateway
    (netd's forwarder), never another slot's."""
    code, out, err = guest(a, vm, "cat /etc/resolv.conf", rid)
    ns = [ln.split()[1] for ln in out.splitlines()
          if ln.startswith("nameserver ")]
    gw = addr.rsplit(".", 1)[0] + ".1"
    return ns and all(n in ("203.0.113.53", gw) for n in ns), ns


def case_warm(h, w, a, h_before):
    """vmmd restarted with warm_pool = 1: the pool keeps a network-on
    snapshot besides the network-off one, built in a slot netd gives its
    VM for the build only.  A networked vm_create and a networked vm_run
    are restored from it (origin warm), each in a slot of its own, not
    the build's (a VM holds the lowest slot while the pool builds, and
    gives it up before each take), with the workspace's egress policy
    or the run's narrowing from their first packet."""
    okk, r = a("vm_create", request_id="wp-hold", idle_seconds=3600)
    ok(okk, "warm: a VM holds the lowest slot", r)
    hold = r.get("vm_id")
    rc, secs = h.stop_vmmd()
    ok(rc == 0, "warm: vmmd stops, hibernating it", rc)
    h.write_conf(netd_socket=w.sock, warm_pool=1)
    mark = len(w.log())
    h.start_vmmd()
    a.reconnect()
    base.wait_for(lambda: pool_ready(h, "on"), 600, "the pool's network-on "
                  "snapshot")
    builds = set_up_since(w, mark)
    ok(len(builds) == 1, "warm: netd set up one slot for the pool's "
       "network-on build", builds)
    ok(len(pool_ready(h, "off")) == 1, "warm: and the pool keeps a "
       "network-off snapshot besides", pool_ready(h, "off"))
    ok(all_gone(w, h_before), "warm: the build's slot was released with "
       "its VM", netd_objects(w))
    okk, r = a("vm_destroy", vm_id=hold)
    ok(okk, "warm: the holding VM is destroyed", r)

    okk, r = a("vm_create", request_id="wp-c", network="on",
               idle_seconds=3600)
    ok(okk and r.get("network") == "on", "warm: a networked vm_create", r)
    vm = r.get("vm_id")
    okk, st = a("vm_status", vm_id=vm)
    ok(okk and st["origin"] == "warm" and st["network"] == "on",
       "warm: it comes from the pool (origin warm)", st)
    mac, addr, arp = nic(a, vm, "wp-nic")
    ok(slot_nic(mac, addr) and addr not in builds, "warm: its own slot's "
       "MAC and address, not the build's %s" % builds, (mac, addr))
    old_gw = builds[0].rsplit(".", 1)[0] + ".1" if builds else None
    ok(old_gw not in arp, "warm: no neighbour entry of the build's "
       "gateway", arp)
    good, ns = resolvers_own(a, vm, addr, "wp-res")
    ok(good, "warm: its resolvers are re-applied for its slot", ns)
    check_egress(w, a, vm, "warm-create")

    # The pool refills (its build in the next free slot); a network-off
    # VM from the pool then holds that slot, so that the run's is new.
    base.wait_for(lambda: pool_ready(h, "on"), 600, "the pool refilled")
    builds = [b for b in set_up_since(w, mark) if b != addr]
    okk, r = a("vm_create", request_id="wp-off", idle_seconds=3600)
    okk2, st = a("vm_status", vm_id=r.get("vm_id")) if okk else (False, r)
    ok(okk2 and st["origin"] == "warm" and st["network"] == "off",
       "warm: a network-off vm_create takes the network-off snapshot", st)
    off = r.get("vm_id")
    okk, r = a("vm_run", request_id="wp-run", network="on",
               egress={"mode": "allowlist", "allow": ["203.0.113.10/32"]},
               timeout_seconds=60,
               command="python3 -c 'import socket; s=socket.socket(socket."
               "AF_INET, socket.SOCK_DGRAM); s.connect((\"203.0.113.10\", "
               "7)); print(s.getsockname()[0])'; "
               "timeout 3 bash -c 'exec 3<>/dev/tcp/203.0.113.10/80 && "
               "cat <&3'; echo; timeout 3 bash -c "
               "'exec 3<>/dev/tcp/203.0.113.53/53'; echo dns-tcp $?")
    lines = r.get("stdout", "").split("\n") if okk else []
    ok(okk and r.get("origin") == "warm" and r.get("exit_code") == 0,
       "warm: a networked vm_run comes from the pool (origin warm)", r)
    run_addr = lines[0] if lines else ""
    ok(run_addr.startswith("10.232.") and run_addr not in builds and
       run_addr != addr, "warm: the run has a slot of its own, not the "
       "create's %s nor the builds' %s" % (addr, builds), run_addr)
    ok(len(lines) > 1 and lines[1] == "tcp 203.0.113.10 " +
       netdlib.UPLINK_ADDR, "warm: the run reaches what its narrowing "
       "allows, through NAT", lines)
    ok("dns-tcp 124" in lines, "warm: and what only the workspace allows "
       "is dropped (timed out, not refused)", lines)
    for v in (vm, off):
        okk, r = a("vm_destroy", vm_id=v)
        ok(okk, "warm: destroyed", r)


def main():
    if os.geteuid() != 0:
        base.skip_all("needs root")
    for tool in ("qemu-system-x86_64", "mkfs.xfs", "losetup", "nsenter",
                 "nft", "ip"):
        if shutil.which(tool) is None:
            base.skip_all("%s is not installed" % tool)
    base.become_subreaper()
    base.exit_cleanly_on_sigterm()
    real_ruleset = netdlib.host_ruleset()
    manifest = base.build_image(out=IMAGE_OUT)
    w = netdlib.World(conntrack=CT_MAX, conn_rate=CT_RATE)
    h = base.Host(manifest)
    try:
        w.build()
        h_before = netdlib.h_ruleset()
        w.start_netd()
        h.setup()
        h.write_conf(netd_socket=w.sock)
        h.start_authd()
        h.start_vmmd()
        base.wait_for(lambda: "netd: in step" in base.read(h.vmmd_log),
                      10, "vmmd's sync with netd")
        for _ in range(50):
            p = h.vmctl("--json", "preflight")
            try:
                checks = {c["check"]: c
                          for c in json.loads(p.stdout)["checks"]}
            except (ValueError, KeyError):
                checks = {}
            net = checks.get("network", {})
            if net.get("ok"):
                break
            time.sleep(0.1)
        ok(net.get("ok") and "uplink up0" in net.get("message", "") and
           "forwarding on" in net["message"] and
           "drops by policy" in net["message"],
           "vmctl preflight reports netd's uplink, forwarding and the "
           "dropping forward chain", p.stdout + p.stderr)
        a = base.Client(h, h.issue("netws", "--allow-network"))
        nonet = base.Client(h, h.issue("nonet"))
        check_policy(h, a, nonet)

        t = time.monotonic()
        okk, r = a("vm_create", request_id="c-1", network="on",
                   idle_seconds=3600)
        ok(okk and r.get("state") == "running" and r.get("network") == "on",
           "a VM with network on (%.1f s)" % (time.monotonic() - t), r)
        vm = r["vm_id"]
        okk, r = a("vm_status", vm_id=vm)
        ok(okk and r["network"] == "on", "vm_status says network on", r)
        okk, r = a("vm_list")
        ok(okk and [v["network"] for v in r["vms"]] == ["on"],
           "vm_list says network on", r)
        code, out, err = guest(a, vm, "cat /etc/resolv.conf; "
                               "cat /sys/class/net/eth0/address", "g-1")
        ok("nameserver 10.232." in out and "203.0.113.53" not in out and
           "02:6d:76:00:00:" in out, "eth0 has netd's MAC and resolv.conf "
           "the forwarder on its gateway", out)
        check_egress(w, a, vm, "booted")
        addr = guest_addr(a, vm, "addr-1")
        ok(addr.startswith("10.232.") and addr.endswith(".2"),
           "the guest's address is its slot's", addr)
        links, ns = netd_objects(w)
        ok(len(ns) == 1 and len(links) == 1, "one netns, one host veth",
           (links, ns))

        okk, r = a("vm_suspend", vm_id=vm)
        ok(okk and a.state(vm) == "hibernated", "hibernated", r)
        ok(all_gone(w, h_before),
           "hibernation leaves no network object and the ruleset as it was",
           (netd_objects(w), netdlib.h_ruleset()))
        code, out, err = guest(a, vm, "cat /sys/class/net/eth0/address; "
                               "cat /proc/net/route | wc -l", "g-2")
        ok(code == 0 and a.state(vm) == "running", "a job resumes it", out)
        check_egress(w, a, vm, "resumed")
        ok(guest_addr(a, vm, "addr-2") == addr, "the resumed guest keeps "
           "its address", addr)

        # netd restarts under a running VM: the TAP stays with QEMU, the
        # rest is in place, and vmmd's sync on reconnect brings the host
        # table back.
        w.stop_netd()
        code, out, err = tcp(a, vm, "203.0.113.10", 80, "r-tcp1")
        ok(code != 0, "netd stopped: egress stops (closed, not open)",
           (code, out))
        w.start_netd()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            code, out, err = tcp(a, vm, "203.0.113.10", 80,
                                 "r-tcp-%d" % int(time.monotonic() * 10))
            if code == 0:
                break
            time.sleep(0.5)
        ok(code == 0, "netd restarted: vmmd's sync restores egress to the "
           "same running guest", (code, out, err))
        code, out, err = guest(a, vm, "getent hosts " + netdlib.DNS_NAME,
                               "r-dns")
        ok(code == 0 and out.split()[:1] == [netdlib.DNS_ADDR],
           "and its public slot's forwarder, made again, resolves",
           (code, out, err))
        code, out, err = tcp(a, vm, "10.77.0.2", 80, "r-tcp2")
        ok(code != 0, "and the private LAN stays blocked", out)

        okk, r = a("vm_suspend", vm_id=vm, mode="pause")
        ok(okk and a.state(vm) == "paused" and len(netd_objects(w)[0]) == 1,
           "pause keeps the network", (r, netd_objects(w)))
        okk, r = a("vm_resume", vm_id=vm)
        ok(okk, "resumed from pause", r)
        code, out, err = tcp(a, vm, "203.0.113.10", 80, "p-tcp")
        ok(code == 0, "egress after pause", (out, err))

        case_live_policy(h, w, a, vm)
        case_clones(h, w, a, vm)

        # vmmd dies with the VM running: the next vmmd takes it up, and
        # its first sync keeps the VM's network.
        h.kill_vmmd()
        ok(len(netd_objects(w)[0]) == 1, "vmmd killed: the network stays",
           netd_objects(w))
        h.start_vmmd()
        a.reconnect()
        nonet.reconnect()
        ok(a.state(vm) == "running" and len(netd_objects(w)[0]) == 1,
           "the restarted vmmd took the VM up, and its sync kept the "
           "network", (a.state(vm), netd_objects(w)))
        check_egress(w, a, vm, "taken-up")
        # vmmd dies, and the VM's QEMU with it: the next vmmd fails the VM
        # and its first sync has netd remove the orphaned network.
        h.kill_vmmd()
        for pid, _, cmd in h.jail_processes():
            if "qemu-system" in cmd:
                os.kill(pid, signal.SIGKILL)
        h.start_vmmd()
        ok(all_gone(w, h_before, 20), "QEMU gone too: the restarted "
           "vmmd's sync removed the orphaned network")
        a.reconnect()
        nonet.reconnect()
        ok(a.state(vm) == "failed", "and the VM is failed", a.state(vm))
        okk, r = a("vm_destroy", vm_id=vm)
        ok(okk, "destroyed the failed VM", r)

        # A workspace granted network later by `authctl policy set`.
        h.authctl("policy", "set", "--workspace", "nonet",
                  "--allow-network")
        okk, r = nonet("vm_create", request_id="c-2", network="on",
                       idle_seconds=3600)
        ok(okk and r.get("state") == "running", "after policy set "
           "--allow-network the other workspace gets network", r)
        vm2 = r["vm_id"]
        code, out, err = tcp(nonet, vm2, "203.0.113.10", 80, "v2-tcp")
        ok(code == 0, "it reaches the internet", (out, err))
        # QEMU dies under vmmd: the VM is failed and its network goes.
        qemu = [pid for pid, _, cmd in h.jail_processes()
                if "qemu-system" in cmd]
        ok(len(qemu) == 1, "one QEMU", h.jail_processes())
        os.kill(qemu[0], signal.SIGKILL)
        base.wait_for(lambda: nonet.state(vm2) == "failed", 20,
                      "the VM to be failed")
        ok(all_gone(w, h_before), "a failed VM's network is released",
           netd_objects(w))
        okk, r = nonet("vm_create", request_id="c-3", network="on",
                       idle_seconds=3600)
        ok(okk and r.get("state") == "running", "and a new VM gets one", r)
        vm3 = r["vm_id"]
        code, out, err = tcp(nonet, vm3, "203.0.113.10", 80, "v3-tcp")
        ok(code == 0, "it reaches the internet", (out, err))
        okk, r = nonet("vm_destroy", vm_id=vm2)
        ok(okk, "the failed VM is destroyed", r)
        okk, r = nonet("vm_destroy", vm_id=vm3)
        ok(okk and all_gone(w, h_before),
           "destroy leaves no network object and the ruleset as it was",
           (r, netd_objects(w)))
        case_egress(h, w, h_before)
        case_warm(h, w, a, h_before)
        ok(all_gone(w, h_before), "warm: nothing of the pool's network is "
           "left", netd_objects(w))
        rc, secs = h.stop_vmmd()
        ok(rc == 0, "vmmd exits 0", rc)
    except Exception:
        import traceback
        ok(False, "the run went through", traceback.format_exc())
        note(base.read(h.vmmd_log)[-3000:])
        note(w.log()[-2000:])
    finally:
        h.cleanup()
        w.cleanup()
    ok(netdlib.host_ruleset() == real_ruleset, "the machine's ruleset is "
       "unchanged")
    taplib.done()


if __name__ == "__main__":
    main()
