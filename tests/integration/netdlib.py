"""netd's test world, shared by the netd suites (test_netd.py,
test_netd_vm.py) and the netd benchmarks: throwaway network namespaces
H (the "host", where netd runs), I (the "internet" behind H's uplink),
L (a private LAN) and the guests' G<slot>, the servers in them
(netd_world.py), one netd, and a connection to it as vmmd's.  See
test_netd.py for the world's shape.
"""
import array
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpvm_ipc as ipc  # noqa: E402

NETD = os.environ.get("NETD", "")
WORLD = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "netd_world.py")
PY = sys.executable

NET_SYNC, NET_SYNC_RESULT = 501, 502
NET_SETUP, NET_SETUP_RESULT = 503, 504
NET_TEARDOWN, NET_TEARDOWN_RESULT = 505, 506
NET_STATUS, NET_STATUS_RESULT = 507, 508
NET_EGRESS, NET_EGRESS_RESULT = 509, 510
NET_COUNTERS, NET_COUNTERS_RESULT = 511, 512

PFX = "nd%d" % (os.getpid() % 100000)
NS_H, NS_I, NS_L = PFX + "h", PFX + "i", PFX + "l"
DNS_NAME, DNS_ADDR = "test.mcpvm.example", "203.0.113.10"
UPLINK_ADDR = "198.51.100.1"
MAX_VMS = 16


def sh(*args, check=True, ns=None, **kw):
    cmd = list(args)
    if ns is not None:
        cmd = ["nsenter", "--net=" + ns_path(ns)] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)
    if check and r.returncode != 0:
        raise AssertionError("%s: %d\n%s%s" % (" ".join(cmd), r.returncode,
                                              r.stdout, r.stderr))
    return r


def ns_path(ns):
    return ns if ns.startswith("/") else "/run/netns/" + ns


class NetConn(ipc.Conn):
    """An ipc.Conn that also takes the descriptors that come along."""

    def __init__(self, *a, **kw):
        self.fds = []
        super().__init__(*a, **kw)

    def _fill(self, n):
        while len(self.buf) < n:
            fds = array.array("i")
            data, anc, _, _ = self.sock.recvmsg(
                65536, socket.CMSG_SPACE(4 * fds.itemsize))
            for level, typ, cdata in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[:len(cdata) - len(cdata) %
                                        fds.itemsize])
                    self.fds.extend(fds)
            if not data:
                raise ipc.Closed("connection closed")
            self.buf += data


class World:
    """The namespaces, servers and one netd, built once for the class."""

    def __init__(self, max_vms=MAX_VMS, conntrack=None, conn_rate=None,
                 extra_conf="", dns_extra="", dns_ttl=60):
        self.dns_extra, self.dns_ttl = dns_extra, dns_ttl
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="netd-it.")
        os.chmod(self.dir, 0o755)
        self.run = os.path.join(self.dir, "run")
        self.netns_dir = os.path.join(self.dir, "netns")
        os.mkdir(self.run)
        self.sock = os.path.join(self.run, "netd.sock")
        self.sink_i = os.path.join(self.dir, "sink-i")
        self.conf = os.path.join(self.dir, "mcpvm.conf")
        self.logpath = os.path.join(self.dir, "netd.log")
        with open(self.conf, "w") as f:
            f.write("[paths]\nruntime_dir = %s\nstate_dir = %s\n"
                    "[vmmd]\nmax_vms = %d\n"
                    "[netd]\nuplink = up0\ndns = 203.0.113.53\n"
                    "blocked_cidrs = 198.18.5.0/24\nnetns_dir = %s\n"
                    % (self.run, self.dir, max_vms, self.netns_dir))
            # Unset, netd's defaults hold.
            if conntrack is not None:
                f.write("max_conntrack_per_vm = %d\n" % conntrack)
            if conn_rate is not None:
                f.write("connection_rate_per_vm = %d\n" % conn_rate)
            f.write(extra_conf)
        self.netd = None
        self.guests = {}

    def build(self):
        for ns in (NS_H, NS_I, NS_L):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
        # The uplink: a veth from H into I, made inside H.
        sh("ip", "link", "add", "up0", "type", "veth", "peer", "name",
           "eth0", "netns", ns_path(NS_I), ns=NS_H)
        sh("ip", "link", "add", "lan0", "type", "veth", "peer", "name",
           "eth0", "netns", ns_path(NS_L), ns=NS_H)
        for cmd in (["ip", "addr", "add", UPLINK_ADDR + "/24", "dev", "up0"],
                    ["ip", "link", "set", "up0", "up"],
                    ["ip", "addr", "add", "192.168.77.1/24", "dev", "lan0"],
                    ["ip", "link", "set", "lan0", "up"],
                    ["ip", "route", "add", "default", "via", "198.51.100.2"],
                    ["sysctl", "-qw", "net.ipv4.ip_forward=1"]):
            sh(*cmd, ns=NS_H)
        for net in ("10.77.0.0/24", "100.64.7.0/24", "169.254.169.254/32",
                    "172.16.5.0/24"):
            sh("ip", "route", "add", net, "via", "192.168.77.2", ns=NS_H)
        for cmd in (["ip", "addr", "add", "198.51.100.2/24", "dev", "eth0"],
                    ["ip", "link", "set", "eth0", "up"]):
            sh(*cmd, ns=NS_I)
        # Cloud host services on public-looking addresses sit where a
        # cloud puts them: behind the uplink, as Azure's 168.63.129.16
        # and Oracle Classic's 192.0.0.192 do.
        for a in ("203.0.113.10", "203.0.113.53", "198.18.5.2",
                  "168.63.129.16", "192.0.0.192"):
            sh("ip", "addr", "add", a + "/32", "dev", "lo", ns=NS_I)
        for cmd in (["ip", "addr", "add", "192.168.77.2/24", "dev", "eth0"],
                    ["ip", "link", "set", "eth0", "up"],
                    ["ip", "route", "add", "default", "via", "192.168.77.1"]):
            sh(*cmd, ns=NS_L)
        for a in ("10.77.0.2", "100.64.7.2", "169.254.169.254", "172.16.5.2"):
            sh("ip", "addr", "add", a + "/32", "dev", "lo", ns=NS_L)
        # What iptables-nft leaves on many hosts: forwarding dropped.
        sh("nft", "add table ip filter; add chain ip filter FORWARD "
           "{ type filter hook forward priority filter; policy drop; }",
           ns=NS_H)
        self.serve(NS_I, "tcp:203.0.113.10:80", "udp:203.0.113.10:7",
                   "sink:203.0.113.10:9", "dns:203.0.113.53",
                   "tcp:198.18.5.2:80", "tcp:168.63.129.16:80",
                   "tcp:192.0.0.192:80")
        self.serve(NS_L, "tcp:10.77.0.2:80", "tcp:192.168.77.2:80",
                   "tcp:100.64.7.2:80", "tcp:169.254.169.254:80",
                   "tcp:172.16.5.2:80")
        self.serve(NS_H, "tcp:0.0.0.0:8081")

    def serve(self, ns, *specs):
        env = dict(os.environ, DNS_NAME=DNS_NAME, DNS_ADDR=DNS_ADDR,
                   SINK=self.sink_i, DNS_EXTRA=self.dns_extra,
                   DNS_TTL=str(self.dns_ttl))
        p = subprocess.Popen(["nsenter", "--net=" + ns_path(ns), PY, WORLD,
                              "serve", *specs], stdout=subprocess.PIPE,
                             env=env, text=True)
        self.procs.append(p)
        if p.stdout.readline().strip() != "ready":
            raise AssertionError("servers %s did not start" % (specs,))
        return p

    def start_netd(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        mark = len(self.log())
        log = open(self.logpath, "ab")
        self.netd = subprocess.Popen(
            ["nsenter", "--net=" + ns_path(NS_H), NETD, "-d", "-v", "-f",
             self.conf], stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if "ready:" in self.log()[mark:]:
                return
            if self.netd.poll() is not None:
                raise AssertionError("netd exited %d:\n%s"
                                     % (self.netd.returncode, self.log()))
            time.sleep(0.02)
        raise AssertionError("netd not ready:\n" + self.log())

    def stop_netd(self, sig=signal.SIGTERM):
        p, self.netd = self.netd, None
        if p is None or p.poll() is not None:
            return None
        p.send_signal(sig)
        rc = p.wait(timeout=15)
        if sig == signal.SIGTERM and rc != 0:
            raise AssertionError("netd exited %d after SIGTERM:\n%s"
                                 % (rc, self.log()[-6000:]))
        return rc

    def log(self):
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def conn(self):
        return NetConn(self.sock, "vmmd")

    def guest(self, slot, reply, fd):
        """A guest netns joined to netd's TAP fd by a pump."""
        ns = "%sg%d" % (PFX, slot)
        sh("ip", "netns", "add", ns)
        p = subprocess.Popen(
            ["nsenter", "--net=" + ns_path(ns), PY, WORLD, "pump", str(fd),
             reply["mac"], "%s/%d" % (reply["address"], reply["prefix"]),
             reply["gateway"]], pass_fds=(fd,), stdout=subprocess.PIPE,
            text=True)
        if p.stdout.readline().strip() != "ready":
            raise AssertionError("pump for slot %d did not start" % slot)
        self.guests[slot] = (ns, p, fd)
        return ns

    def drop_guest(self, slot):
        ns, p, fd = self.guests.pop(slot)
        p.kill()
        p.wait()
        p.stdout.close()
        os.close(fd)
        sh("ip", "netns", "del", ns, check=False)

    def cleanup(self):
        if self.netd is not None:
            try:
                c = self.conn()
                c.call(NET_SYNC, {"slots": []})
                c.close()
            except (OSError, ipc.Closed):
                pass
        self.stop_netd()
        for slot in list(self.guests):
            self.drop_guest(slot)
        for p in self.procs:
            p.kill()
            p.wait()
            p.stdout.close()
        for ns in (NS_H, NS_I, NS_L):
            sh("ip", "netns", "del", ns, check=False)
        # Whatever netd left (it should be nothing) goes with the tree.
        if os.path.isdir(self.netns_dir):
            for name in os.listdir(self.netns_dir):
                path = os.path.join(self.netns_dir, name)
                subprocess.run(["umount", "-l", path], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def probe(ns, kind, addr, port, src=None):
    args = [PY, WORLD, "probe", kind, addr, str(port)]
    if src:
        args.append(src)
    r = sh(*args, ns=ns, env=dict(os.environ, DNS_NAME=DNS_NAME))
    return json.loads(r.stdout)


def host_ruleset():
    return subprocess.run(["nft", "list", "ruleset"], capture_output=True,
                          text=True, check=True).stdout


def h_ruleset():
    return sh("nft", "list", "ruleset", ns=NS_H).stdout


def conntrack_from(ns, src):
    """The conntrack entries of ns whose original source is src."""
    out = sh("cat", "/proc/net/nf_conntrack", ns=ns).stdout
    return sum(1 for ln in out.splitlines() if " src=%s " % src in ln)


def mcpvm_links(ns):
    out = sh("ip", "-o", "link", "show", ns=ns).stdout
    return [ln.split(":")[1].strip().split("@")[0]
            for ln in out.splitlines() if "mcpvm" in ln]


def run_tests():
    """A netd namespace-world test's entry point: skips without root or
    the tools, refuses to run without the netd binary, then runs the
    module's TestCases as TAP."""
    import taplib
    if os.geteuid() != 0:
        taplib.skip_all("netd integration tests need root")
    for tool in ("ip", "nsenter", "nft"):
        if shutil.which(tool) is None:
            taplib.skip_all("%s(8) is missing" % tool)
    if not NETD:
        sys.exit("NETD= must name the netd binary")
    taplib.run_unittest()
