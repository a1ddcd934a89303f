#!/usr/bin/env python3
"""Integration tests for netd: the real daemon, real namespaces, veths,
TAPs and nftables, checked with real packets.

The test world is made of throwaway network namespaces:
  H  the "host": netd runs in it (nsenter), with IPv4 forwarding on, an
     iptables-nft style FORWARD chain whose policy drops, and servers on
     its own addresses
  I  the "internet", behind H's uplink up0 (a veth, never the machine's
     real interface): TCP, UDP echo, a UDP sink, DNS answering one name,
     a server in a blocked_cidrs range, and servers on Azure's and Oracle
     Classic's metadata addresses 168.63.129.16 and 192.0.0.192
  L  a "private LAN" behind H's lan0: servers on 10.x, 172.16.x,
     192.168.x, CGNAT 100.64.x and 169.254.169.254
  G<slot>  a guest: a TAP that a pump joins to the TAP netd returned, as
     QEMU would, so the guest has a real network stack
This test acts as vmmd on netd.sock.  The machine's own netns and its
nftables ruleset are only read (before and after, byte-identical).

Needs root; skipped without it or without ip(8), nsenter(1) or nft(8).
TAP on stdout: one line per test.
"""
import json
import os
import pwd
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpvm_ipc as ipc  # noqa: E402
import netdlib  # noqa: E402
import taplib  # noqa: E402
from netdlib import (NETD, WORLD, PY, PFX, NS_H, NS_I, DNS_ADDR,  # noqa: E402
                     UPLINK_ADDR, MAX_VMS, NET_SYNC, NET_SYNC_RESULT,
                     NET_SETUP, NET_SETUP_RESULT, NET_TEARDOWN,
                     NET_TEARDOWN_RESULT, NET_STATUS, NET_STATUS_RESULT,
                     NetConn, World, sh, ns_path, probe, host_ruleset,
                     h_ruleset, mcpvm_links, conntrack_from)

# The world's per-VM connection limits, small enough for a test to reach.
CT_MAX, CT_RATE = 64, 50
FLOOD_SECONDS = 3

class NetdTest(unittest.TestCase):
    world = None

    @classmethod
    def setUpClass(cls):
        cls.real_ruleset = host_ruleset()
        cls.real_netns = sorted(os.listdir("/run/netns")) \
            if os.path.isdir("/run/netns") else []
        cls.world = World(conntrack=CT_MAX, conn_rate=CT_RATE)
        try:
            cls.world.build()
            # The uplink is the test world's own veth, never the
            # machine's: the machine has no up0, and H's up0 is a veth.
            if sh("ip", "link", "show", "up0", check=False).returncode == 0:
                raise unittest.SkipTest("this machine has an up0 of its "
                                        "own; refusing to use that name")
            info = sh("ip", "-d", "link", "show", "up0", ns=NS_H).stdout
            assert "veth" in info, info
            cls.h_before = h_ruleset()
            cls.world.start_netd()
            c = cls.world.conn()
            t, body = c.call(NET_SYNC, {"slots": []})
            assert t == NET_SYNC_RESULT, body
            c.close()
        except BaseException:
            cls.world.cleanup()
            raise
        cls.c = cls.world.conn()

    @classmethod
    def tearDownClass(cls):
        try:
            cls.c.close()
        finally:
            cls.world.cleanup()
        assert host_ruleset() == cls.real_ruleset, \
            "the machine's nft ruleset changed"
        now = sorted(os.listdir("/run/netns")) \
            if os.path.isdir("/run/netns") else []
        leaked = [n for n in now if n.startswith(PFX) or
                  n.startswith("mcpvm")]
        assert not leaked, "namespaces left: %s" % leaked

    def tearDown(self):
        # The machine's own ruleset is never touched, test after test.
        self.assertEqual(host_ruleset(), self.real_ruleset,
                         "the machine's nft ruleset changed")

    # -- helpers ---------------------------------------------------------

    def setup_slot(self, slot, conn=None):
        c = conn or self.c
        before = len(c.fds)
        t, body = c.call(NET_SETUP, {"slot": slot})
        self.assertEqual(t, NET_SETUP_RESULT, body)
        self.assertEqual(len(c.fds), before + 1, "no TAP fd came along")
        fd = c.fds.pop()
        self.assertEqual(body["address"], "10.232.%d.2" % slot)
        self.assertEqual(body["gateway"], "10.232.%d.1" % slot)
        self.assertEqual(body["prefix"], 30)
        # Its one resolver: netd's forwarder on its gateway.
        self.assertEqual(body["dns"], ["10.232.%d.1" % slot])
        return body, fd

    def teardown_slot(self, slot, conn=None):
        c = conn or self.c
        if slot in self.world.guests:
            self.world.drop_guest(slot)
        t, body = c.call(NET_TEARDOWN, {"slot": slot})
        self.assertEqual(t, NET_TEARDOWN_RESULT, body)

    def guest(self, slot):
        if slot not in self.world.guests:
            body, fd = self.setup_slot(slot)
            self.world.guest(slot, body, fd)
        return self.world.guests[slot][0]

    def assertReach(self, ns, kind, addr, port, src=None):
        r = probe(ns, kind, addr, port, src)
        self.assertTrue(r["ok"], "%s %s:%s from %s: %s" % (kind, addr, port,
                                                         ns, r))
        return r

    def assertNoReach(self, ns, kind, addr, port, src=None):
        r = probe(ns, kind, addr, port, src)
        self.assertFalse(r["ok"], "%s %s:%s from %s got through: %s"
                         % (kind, addr, port, ns, r))

    def sink_lines(self):
        try:
            with open(self.world.sink_i) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    # -- tests -----------------------------------------------------------

    def test_01_status(self):
        t, b = self.c.call(NET_STATUS, {})
        self.assertEqual(t, NET_STATUS_RESULT, b)
        self.assertTrue(b["available"], b)
        self.assertTrue(b["uplink_ok"])
        self.assertTrue(b["ip_forward"])
        self.assertTrue(b["forward_drop"], "H's FORWARD policy drop unseen")
        self.assertEqual(b["host_range"], "10.231.0.0/16")
        self.assertEqual(b["guest_range"], "10.232.0.0/16")

    def test_01_privileges(self):
        with open("/proc/%d/status" % self.world.netd.pid) as f:
            st = dict(ln.split(":", 1) for ln in f.read().splitlines()
                      if ":" in ln)
        # CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_NET_BIND_SERVICE (the DNS
        # forwarder's port 53 in a slot's netns)
        caps = (1 << 12) | (1 << 21) | (1 << 10)
        for key in ("CapEff", "CapPrm", "CapBnd"):
            self.assertEqual(int(st[key].strip(), 16), caps, key)
        self.assertEqual(int(st["CapInh"].strip(), 16), 0)
        self.assertEqual(st["NoNewPrivs"].strip(), "1")
        self.assertEqual(st["Seccomp"].strip(), "2")
        # Its DNS forwarder: nobody, no capabilities, its own seccomp.
        pid = self.world.netd.pid
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = f.read().split()
        self.assertEqual(len(kids), 1, kids)
        with open("/proc/%s/status" % kids[0]) as f:
            st = dict(ln.split(":", 1) for ln in f.read().splitlines()
                      if ":" in ln)
        self.assertEqual(st["Uid"].split(), ["65534"] * 4)
        for key in ("CapEff", "CapPrm", "CapInh"):
            self.assertEqual(int(st[key].strip(), 16), 0, key)
        self.assertEqual(st["NoNewPrivs"].strip(), "1")
        self.assertEqual(st["Seccomp"].strip(), "2")

    def test_01_unavailable_without_forwarding(self):
        sh("sysctl", "-qw", "net.ipv4.ip_forward=0", ns=NS_H)
        try:
            t, b = self.c.call(NET_STATUS, {})
            self.assertFalse(b["available"])
            self.assertIn("forwarding", b["reason"])
            t, b = self.c.call(NET_SETUP, {"slot": 2})
            self.assertEqual(t, ipc.IPC_ERROR)
            self.assertEqual(b["error"]["code"], "unavailable")
            self.assertIn("ip_forward", b["error"]["message"])
            self.assertEqual(mcpvm_links(NS_H), [])
        finally:
            sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=NS_H)

    def test_01_ranges_checked_against_host_routes(self):
        sh("ip", "route", "add", "10.232.40.0/24", "via", "192.168.77.2",
           ns=NS_H)
        try:
            r = sh(NETD, "-n", "-f", self.world.conf, ns=NS_H, check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("guest_range 10.232.0.0/16 overlaps the host's "
                          "route 10.232.40.0/24 on lan0", r.stderr)
        finally:
            sh("ip", "route", "del", "10.232.40.0/24", ns=NS_H)
        r = sh(NETD, "-n", "-f", self.world.conf, ns=NS_H, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_01_connection_limits_checked(self):
        bad = os.path.join(self.world.dir, "bad.conf")
        for line, why in (
                ("max_conntrack_per_vm = 5",
                 "max_conntrack_per_vm: 5 is out of range 16..1048576"),
                ("max_conntrack_per_vm = 0x100",
                 "max_conntrack_per_vm: '0x100' is not a whole number"),
                ("connection_rate_per_vm = 0",
                 "connection_rate_per_vm: 0 is out of range 1..100000")):
            key = line.split()[0]
            with open(self.world.conf) as f, open(bad, "w") as g:
                g.writelines(ln for ln in f if not ln.startswith(key))
                g.write(line + "\n")
            r = sh(NETD, "-n", "-f", bad, ns=NS_H, check=False)
            self.assertNotEqual(r.returncode, 0, line)
            self.assertIn(why, r.stderr)
        os.unlink(bad)

    def test_02_public_egress_through_nat(self):
        g = self.guest(3)
        r = self.assertReach(g, "tcp", "203.0.113.10", 80)
        # The internet sees the uplink's address: masqueraded.
        self.assertEqual(r["data"], "tcp 203.0.113.10 " + UPLINK_ADDR)
        r = self.assertReach(g, "udp", "203.0.113.10", 7)
        self.assertTrue(r["data"].startswith("udp 203.0.113.10 " +
                                             UPLINK_ADDR), r)
        # Names resolve through the forwarder on its gateway, which asks
        # the configured resolver; that one is not the guest's to ask.
        r = self.assertReach(g, "dns", "10.232.3.1", 53)
        self.assertEqual(r["data"], DNS_ADDR)
        self.assertNoReach(g, "dns", "203.0.113.53", 53)
        # netd's accept rules sit in H's dropping FORWARD chain.
        self.assertIn('comment "mcpvm-netd"', h_ruleset())

    def test_03_private_and_host_destinations_blocked(self):
        g = self.guest(3)
        targets = [("10.77.0.2", 80), ("192.168.77.2", 80),
                   ("172.16.5.2", 80), ("100.64.7.2", 80),
                   ("169.254.169.254", 80), ("168.63.129.16", 80),
                   ("192.0.0.192", 80), ("198.18.5.2", 80),
                   (UPLINK_ADDR, 8081), ("192.168.77.1", 8081),
                   ("10.231.3.1", 8081), ("10.232.3.1", 8081),
                   ("127.0.0.1", 8081)]
        for addr, port in targets:
            # Each one is really there: the host itself reaches it.
            if not addr.startswith("10.23") and addr != "127.0.0.1":
                self.assertReach(NS_H, "tcp", addr, port)
            self.assertNoReach(g, "tcp", addr, port)

    def test_04_spoofed_sources_do_not_leave(self):
        g = self.guest(3)
        # Another slot's guest address, and a public one.
        sh("ip", "addr", "add", "10.232.4.2/32", "dev", "eth0", ns=g)
        sh("ip", "addr", "add", "203.0.113.99/32", "dev", "eth0", ns=g)
        try:
            mark = len(self.sink_lines())
            self.assertReach(g, "udp-send", "203.0.113.10", 9, "10.232.4.2")
            self.assertReach(g, "udp-send", "203.0.113.10", 9,
                             "203.0.113.99")
            ok = self.assertReach(g, "udp-send", "203.0.113.10", 9)
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                lines = self.sink_lines()[mark:]
                if any(ok["data"] in ln for ln in lines):
                    break
                time.sleep(0.05)
            time.sleep(0.3)
            lines = self.sink_lines()[mark:]
            self.assertEqual(lines, ["%s %s" % (UPLINK_ADDR, ok["data"])],
                             "only the real source gets out")
            self.assertNoReach(g, "tcp", "203.0.113.10", 80, "10.232.4.2")
        finally:
            sh("ip", "addr", "del", "10.232.4.2/32", "dev", "eth0", ns=g)
            sh("ip", "addr", "del", "203.0.113.99/32", "dev", "eth0", ns=g)

    def arp_request(self, mac, spa, tpa):
        m = bytes.fromhex(mac.replace(":", ""))
        return (b"\xff" * 6 + m + b"\x08\x06" +
                struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + m +
                socket.inet_aton(spa) + b"\0" * 6 + socket.inet_aton(tpa))

    def test_05_arp_spoofing_dropped(self):
        self.guest(3)
        _, _, fd = self.world.guests[3]
        vmns = os.path.join(self.world.netns_dir, "mcpvm-3")
        mac = "02:6d:76:00:00:03"

        def neigh(addr):
            return sh("ip", "neigh", "show", addr, ns=vmns).stdout.strip()

        # The gateway's MAC is fixed per slot: a guest resumed from
        # hibernation finds it where its ARP cache says.
        self.assertIn("02:6d:76:01:00:03", sh("ip", "link", "show",
                                              "mcpvm-3t", ns=vmns).stdout)

        # Control: a well-formed request about an address we may claim
        # (the guest's own, on a fresh entry) creates a neighbour entry.
        sh("ip", "neigh", "flush", "dev", "mcpvm-3t", ns=vmns)
        self.assertEqual(neigh("10.232.3.2"), "")
        os.write(fd, self.arp_request(mac, "10.232.3.2", "10.232.3.1"))
        time.sleep(0.3)
        self.assertIn("lladdr " + mac, neigh("10.232.3.2"))
        # Another sender address, or another sender MAC: nothing.
        os.write(fd, self.arp_request(mac, "10.232.3.3", "10.232.3.1"))
        os.write(fd, self.arp_request("02:6d:76:00:00:09", "10.232.3.2",
                                      "10.232.3.1"))
        time.sleep(0.3)
        self.assertEqual(neigh("10.232.3.3"), "")
        self.assertNotIn("00:09", neigh("10.232.3.2"))

    def test_06_inbound_connections_dropped(self):
        g = self.guest(3)
        self.world.serve(g, "tcp:10.232.3.2:2222")
        self.assertReach(g, "tcp", "10.232.3.2", 2222)
        sh("ip", "route", "add", "10.232.0.0/16", "via", UPLINK_ADDR,
           ns=NS_I)
        try:
            self.assertNoReach(NS_I, "tcp", "10.232.3.2", 2222)
            self.assertNoReach(NS_H, "tcp", "10.232.3.2", 2222)
        finally:
            sh("ip", "route", "del", "10.232.0.0/16", ns=NS_I)

    def test_07_ipv6_does_not_leave(self):
        g = self.guest(3)
        vmns = os.path.join(self.world.netns_dir, "mcpvm-3")
        self.assertEqual(sh("cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6",
                            ns=vmns).stdout.strip(), "1")
        sh("sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=0", ns=g)
        sh("ip", "-6", "addr", "add", "2001:db8:1::2/64", "dev", "eth0",
           "nodad", ns=g)
        sh("ip", "-6", "route", "add", "default", "via", "2001:db8:1::1",
           ns=g)
        sh("ip", "-6", "neigh", "replace", "2001:db8:1::1", "lladdr",
           "02:00:00:00:00:01", "dev", "eth0", ns=g)
        sniff = subprocess.Popen(
            ["nsenter", "--net=" + ns_path(NS_H), PY, WORLD, "sniff",
             "mcpvm-3h", "2.5"], stdout=subprocess.PIPE, text=True)
        self.assertEqual(sniff.stdout.readline().strip(), "ready")
        for _ in range(3):
            probe(g, "udp6", "2001:db8:2::1", 9)
            probe(g, "udp-send", "203.0.113.10", 9)
        counts = json.loads(sniff.stdout.readline())
        sniff.wait()
        sniff.stdout.close()
        self.assertGreater(counts.get("0800", 0), 0, counts)
        self.assertEqual(counts.get("86dd", 0), 0, counts)

    def test_08_concurrent_setups_are_separate(self):
        results = {}

        def one(slot):
            c = self.world.conn()
            try:
                t, body = c.call(NET_SETUP, {"slot": slot})
                results[slot] = (t, body, c.fds[:])
            finally:
                c.close()
        threads = [threading.Thread(target=one, args=(s,)) for s in (7, 9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in (7, 9):
            t, body, fds = results[s]
            self.assertEqual(t, NET_SETUP_RESULT, body)
            self.assertEqual(body["address"], "10.232.%d.2" % s)
            self.assertEqual(len(fds), 1)
        g7 = self.world.guest(7, results[7][1], results[7][2][0])
        os.close(results[9][2][0])
        g3 = self.guest(3)
        self.assertReach(g7, "tcp", "203.0.113.10", 80)
        # One guest never reaches another.
        self.world.serve(g7, "tcp:10.232.7.2:2222")
        self.assertNoReach(g3, "tcp", "10.232.7.2", 2222)
        # A slot in use is refused, not taken over.
        t, body = self.c.call(NET_SETUP, {"slot": 7})
        self.assertEqual(t, ipc.IPC_ERROR)
        self.assertEqual(body["error"]["code"], "conflict")
        self.assertReach(g7, "tcp", "203.0.113.10", 80)
        self.teardown_slot(9)
        self.assertNotIn("mcpvm-9h", mcpvm_links(NS_H))
        self.assertReach(g7, "tcp", "203.0.113.10", 80)

    def test_09_hostile_requests_refused(self):
        bad = [
            (NET_SETUP, {"slot": MAX_VMS}),
            (NET_SETUP, {"slot": 256}),
            (NET_SETUP, {"slot": -1}),
            (NET_SETUP, {"slot": 2 ** 40}),
            (NET_SETUP, {"slot": "3"}),
            (NET_SETUP, {"slot": 3.0}),
            (NET_SETUP, {"slot": None}),
            (NET_SETUP, {}),
            (NET_SETUP, {"slot": 4, "name": "eth0"}),
            (NET_SETUP, {"slot": 4, "ifname": "up0"}),
            (NET_SETUP, {"slot": 4, "netns": "/proc/1/ns/net"}),
            (NET_TEARDOWN, {"slot": 99}),
            (NET_SYNC, {"slots": [1, 1]}),
            (NET_SYNC, {"slots": [MAX_VMS]}),
            (NET_SYNC, {"slots": "all"}),
            (NET_SYNC, {}),
            (NET_STATUS, {"slot": 1}),
        ]
        for mtype, body in bad:
            t, reply = self.c.call(mtype, body)
            self.assertEqual(t, ipc.IPC_ERROR, (body, reply))
            self.assertEqual(reply["error"]["code"], "invalid_argument",
                             (body, reply))
        self.assertEqual(mcpvm_links(NS_H).count("mcpvm-4h"), 0)
        # Frames outside vmmd's table, or malformed: that connection
        # closes, nothing else does.
        for raw in (ipc.frame(301, {"slot": 1}, 1),
                    ipc.frame(NET_SETUP, b'{"slot":', 1),
                    ipc.frame(NET_SETUP, b"[1]", 1),
                    ipc.frame(NET_SETUP, {"slot": 1}, 1, flags=0x80),
                    ipc.frame(ipc.AUTH_VERIFY, {"credential": "x"}, 1)):
            c = self.world.conn()
            c.send_raw(raw)
            self.assertTrue(c.is_closed(), raw[:40])
            c.close()
        t, b = self.c.call(NET_STATUS, {})
        self.assertEqual(t, NET_STATUS_RESULT)
        self.assertIsNone(self.world.netd.poll())

    def test_10_wrong_uid_refused(self):
        pw = pwd.getpwnam("nobody")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            res = b"error"
            try:
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)
                c = NetConn(self.world.sock, "vmmd", hello=False)
                c.send_raw(ipc.frame(ipc.IPC_HELLO,
                                     {"version": 1, "role": "vmmd"}))
                c.send_raw(ipc.frame(NET_SETUP, {"slot": 5}, 1))
                res = b"closed" if c.is_closed() else b"open"
            except (OSError, ipc.Closed):
                res = b"closed"
            os.write(w, res)
            os._exit(0)
        os.close(w)
        res = os.read(r, 16)
        os.close(r)
        os.waitpid(pid, 0)
        self.assertEqual(res, b"closed")
        self.assertNotIn("mcpvm-5h", mcpvm_links(NS_H))

    def test_11_netd_restart_keeps_networks(self):
        g = self.guest(3)
        self.assertReach(g, "tcp", "203.0.113.10", 80)
        self.assertEqual(self.world.stop_netd(), 0)
        # The netns, links and rulesets stay; the host table was owned by
        # netd's socket and went with it: egress stops, nothing is open.
        self.assertIn("mcpvm-3h", mcpvm_links(NS_H))
        self.assertNotIn("mcpvm_host", h_ruleset())
        self.assertNotIn("mcpvm-netd", h_ruleset())
        self.assertNoReach(g, "tcp", "203.0.113.10", 80)
        self.assertNoReach(g, "tcp", "10.77.0.2", 80)
        # The VM's own tables stay, dropping and limiting, netd or not.
        vmns = os.path.join(self.world.netns_dir, "mcpvm-3")
        rules = sh("nft", "list", "ruleset", ns=vmns).stdout
        for want in ("table netdev mcpvm_3", "table inet mcpvm_3",
                     "hook forward priority filter; policy drop;",
                     "ct count over %d" % CT_MAX,
                     "limit rate over %d/second" % CT_RATE,
                     "ip daddr @hostaddrs drop"):
            self.assertIn(want, rules)
        self.world.start_netd()
        self.c.close()
        self.__class__.c = self.world.conn()
        t, b = self.c.call(NET_SYNC, {"slots": [3, 7]})
        self.assertEqual(t, NET_SYNC_RESULT, b)
        self.assertEqual(sorted(b["kept"]), [3, 7])
        self.assertEqual(b["removed"], [])
        r = self.assertReach(g, "tcp", "203.0.113.10", 80)
        self.assertEqual(r["data"], "tcp 203.0.113.10 " + UPLINK_ADDR)
        self.assertNoReach(g, "tcp", "10.77.0.2", 80)

    def test_12_kill9_orphans_removed_at_sync(self):
        body, fd = self.setup_slot(11)
        os.close(fd)
        self.world.stop_netd(signal.SIGKILL)
        self.assertIn("mcpvm-11h", mcpvm_links(NS_H))
        self.world.start_netd()
        self.c.close()
        self.__class__.c = self.world.conn()
        # vmmd (restarted too, say) knows only slots 3 and 7.
        t, b = self.c.call(NET_SYNC, {"slots": [3, 7, 12]})
        self.assertEqual(t, NET_SYNC_RESULT, b)
        self.assertEqual(b["removed"], [11])
        self.assertEqual(b["missing"], [12])
        self.assertNotIn("mcpvm-11h", mcpvm_links(NS_H))
        self.assertFalse(os.path.exists(os.path.join(self.world.netns_dir,
                                                     "mcpvm-11")))
        self.assertReach(self.guest(3), "tcp", "203.0.113.10", 80)

    def test_13_flooding_guest_held_to_its_bound(self):
        """Slot 5 floods new UDP and TCP flows; the host's conntrack
        entries from it stay within its bound, slot 3 connects all along,
        and slot 5 itself can open nothing more."""
        g3 = self.guest(3)
        g5 = self.guest(5)
        src = "10.232.5.2"
        vmns = os.path.join(self.world.netns_dir, "mcpvm-5")
        self.assertEqual(conntrack_from(NS_H, src), 0)
        flood = subprocess.Popen(
            ["nsenter", "--net=" + ns_path(g5), PY, WORLD, "flood",
             "203.0.113.10", "80", "9999", str(FLOOD_SECONDS)],
            stdout=subprocess.PIPE, text=True)
        try:
            samples, others = [], []
            while not select.select([flood.stdout], [], [], 0)[0]:
                samples.append(conntrack_from(NS_H, src))
                others.append(probe(g3, "tcp", "203.0.113.10", 80))
            attempted = json.loads(flood.stdout.readline())
            # Its flows still held: the flooder opens nothing new.
            own = probe(g5, "tcp", "203.0.113.10", 80)
            samples.append(conntrack_from(NS_H, src))
            counters = {}
            for name in ("over_rate", "over_count"):
                out = sh("nft", "list", "counter", "inet", "mcpvm_5", name,
                         ns=vmns).stdout
                counters[name] = int(out.split("packets ")[1].split()[0])
            in_ns = int(sh("cat", "/proc/sys/net/netfilter/"
                           "nf_conntrack_count", ns=vmns).stdout)
        finally:
            flood.kill()
            flood.wait()
            flood.stdout.close()
        ok = sum(1 for r in others if r["ok"])
        taplib.note("flood: %d UDP + %d TCP flows attempted; host's "
                    "entries from slot 5 at most %d (bound %d), %d in its "
                    "netns; dropped over the rate %d, over the bound %d; "
                    "slot 3 connected %d of %d times"
                    % (attempted["udp"], attempted["tcp"], max(samples),
                       CT_MAX, in_ns, counters["over_rate"],
                       counters["over_count"], ok, len(others)))
        self.assertGreater(attempted["udp"] + attempted["tcp"], 10 * CT_MAX)
        self.assertLessEqual(max(samples), CT_MAX, samples)
        self.assertGreater(counters["over_rate"], 0)
        self.assertGreater(counters["over_count"], 0)
        self.assertGreater(len(others), 0)
        self.assertEqual(ok, len(others), [r for r in others
                                           if not r["ok"]])
        self.assertFalse(own["ok"], own)
        self.teardown_slot(5)

    def test_14_host_addresses_kept_current(self):
        """An address the host gains is in each VM's hostaddrs set while
        netd runs, stays blocked while netd is down, and one gained while
        netd was down is blocked when netd starts, before vmmd's sync."""
        g = self.guest(3)
        vmns = os.path.join(self.world.netns_dir, "mcpvm-3")
        new, later = "203.0.113.77", "203.0.113.78"

        def in_set(addr):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                out = sh("nft", "list", "set", "inet", "mcpvm_3",
                         "hostaddrs", ns=vmns).stdout
                if addr in out:
                    return True
                time.sleep(0.05)
            return False

        sh("ip", "addr", "add", new + "/32", "dev", "lo", ns=NS_H)
        try:
            self.assertTrue(in_set(new), self.world.log()[-2000:])
            self.assertReach(NS_H, "tcp", new, 8081)
            self.assertNoReach(g, "tcp", new, 8081)
            self.assertEqual(self.world.stop_netd(), 0)
            # netd's host table is gone: the VM's netns alone drops it.
            self.assertNotIn("mcpvm_host", h_ruleset())
            self.assertNoReach(g, "tcp", new, 8081)
            sh("ip", "addr", "add", later + "/32", "dev", "lo", ns=NS_H)
            # Control: what the set is for.  An address it does not
            # hold yet is reachable while nothing else drops it.
            self.assertReach(g, "tcp", later, 8081)
            mark = len(self.world.log())
            self.world.start_netd()
            self.assertTrue(in_set(later), self.world.log()[mark:])
            self.assertNoReach(g, "tcp", later, 8081)
            self.c.close()
            self.__class__.c = self.world.conn()
            t, b = self.c.call(NET_SYNC, {"slots": [3, 7]})
            self.assertEqual(t, NET_SYNC_RESULT, b)
            self.assertEqual(sorted(b["kept"]), [3, 7])
            # The same rules stay in place, their counts with them.
            self.assertNotIn("ruleset replaced", self.world.log()[mark:])
            self.assertNoReach(g, "tcp", later, 8081)
            self.assertReach(g, "tcp", "203.0.113.10", 80)
        finally:
            for a in (new, later):
                sh("ip", "addr", "del", a + "/32", "dev", "lo", ns=NS_H,
                   check=False)

    def test_99_teardown_leaves_nothing(self):
        for s in (3, 7):
            self.teardown_slot(s)
        self.assertEqual(mcpvm_links(NS_H), [])
        self.assertEqual(os.listdir(self.world.netns_dir), [])
        self.assertEqual(h_ruleset(), self.h_before)
        routes = sh("ip", "route", "show", ns=NS_H).stdout
        self.assertNotIn("10.232.", routes)
        self.assertNotIn("10.231.", routes)
        # Tearing down what is not there is fine, and changes nothing.
        self.teardown_slot(3)
        self.assertEqual(h_ruleset(), self.h_before)


if __name__ == "__main__":
    netdlib.run_tests()
