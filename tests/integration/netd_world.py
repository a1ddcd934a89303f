#!/usr/bin/env python3
"""The pieces of netd's test world that run inside its namespaces.

  netd_world.py serve SPEC...   servers, one per SPEC, until killed:
      tcp:ADDR:PORT  answers "tcp ADDR PEER" and closes
      udp:ADDR:PORT  echoes "udp ADDR PEER DATA"
      dns:ADDR       answers A queries for NAME (env DNS_NAME) with
                     env DNS_ADDR, and for each NAME=ADDR of env
                     DNS_EXTRA (comma-separated), NXDOMAIN for anything
                     else; TTL env DNS_TTL (60); a name starting "big."
                     has BIG_RRS A records, its address first (too many
                     for UDP: there the answer is cut, TC set); over
                     UDP and TCP (RFC 1035 framing) on port 53
      sink:ADDR:PORT appends each UDP datagram's "PEER DATA" to env SINK
      discard:ADDR:PORT  reads a TCP stream to its end, answers "done"
  netd_world.py pump FD MAC ADDR/PLEN GW
      the guest: makes TAP eth0 in the current netns with that MAC and
      address, default route via GW, and copies frames between it and
      FD (netd's TAP) both ways, as QEMU would; prints "ready"
  netd_world.py probe KIND ADDR PORT [SRC]
      one try from the current netns, prints a JSON result:
      tcp (connect, read), udp (send, await echo), dns (query NAME),
      resolve (query the name given as SRC: {"rcode", "addrs"}),
      resolve-tcp (the same over TCP, with "tc" and "bytes" too),
      udp-send (send one datagram, no answer expected), tcp6
  netd_world.py bench ADDR PORT MIB CONNECTS
      from the current netns: MIB MiB to a discard server at ADDR:PORT,
      then CONNECTS connections to a tcp server at ADDR:80; prints JSON
      {"mib_s": throughput, "connect_ms": median connect time, or null
      for no CONNECTS}
  netd_world.py flood ADDR TCPPORT UDPPORT SECONDS
      from the current netns, as fast as it goes for SECONDS: new UDP
      flows to ADDR:UDPPORT (a socket each) and new TCP connections to
      ADDR:TCPPORT, held open (at most 400); prints JSON {"udp": n,
      "tcp": n}, the flows attempted, then holds them until killed
  netd_world.py sniff IFNAME SECONDS
      counts frames arriving on IFNAME by ethertype, prints JSON

Python 3 stdlib only; the test drives these with nsenter(1).
"""
import fcntl
import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def dns_query(name, qid=0x1234):
    q = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + \
        b"\0" + struct.pack("!HH", 1, 1)


def dns_names():
    names = {os.environ["DNS_NAME"].lower(): os.environ["DNS_ADDR"]}
    for item in filter(None, os.environ.get("DNS_EXTRA", "").split(",")):
        n, a = item.split("=")
        names[n.lower()] = a
    return names


def dns_qname(query):
    """The question's name, lowercase, as text."""
    labels, i = [], 12
    while i < len(query) and query[i] != 0:
        labels.append(query[i + 1:i + 1 + query[i]].decode(errors="replace"))
        i += 1 + query[i]
    return ".".join(labels).lower()


BIG_RRS = 100


def dns_answer(query, name, addr, tcp=False):
    qid, = struct.unpack("!H", query[:2])
    # The question, as asked: labels up to the root, then type and class.
    end = 12
    while end < len(query) and query[end] != 0:
        end += 1 + query[end]
    question = query[12:end + 5]
    labels, i = [], 12
    while i < end:
        labels.append(query[i + 1:i + 1 + query[i]].decode(errors="replace"))
        i += 1 + query[i]
    if isinstance(name, dict) and ".".join(labels).lower() in name:
        name, addr = ".".join(labels).lower(), name[".".join(labels).lower()]
    if isinstance(name, str) and ".".join(labels).lower() == name.lower():
        hdr = struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0)
        ttl = int(os.environ.get("DNS_TTL", "60"))
        rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, ttl, 4) + \
            socket.inet_aton(addr)
        if not name.startswith("big."):
            return hdr + question + rr
        # The rest in 198.51.100.0/24, which nothing serves.
        for i in range(1, BIG_RRS):
            rr += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, ttl, 4) + \
                socket.inet_aton("198.51.100.%d" % i)
        if tcp:
            return struct.pack("!HHHHHH", qid, 0x8180, 1, BIG_RRS, 0, 0) + \
                question + rr
        return struct.pack("!HHHHHH", qid, 0x8380, 1, 0, 0, 0) + question
    return struct.pack("!HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question


def parse_reply(data):
    """A reply's rcode and its A records' addresses."""
    def skip_name(i):
        while data[i] != 0:
            if data[i] & 0xC0 == 0xC0:
                return i + 2
            i += 1 + data[i]
        return i + 1
    qd, an = struct.unpack("!HH", data[4:8])
    i = 12
    for _ in range(qd):
        i = skip_name(i) + 4
    addrs = []
    for _ in range(an):
        i = skip_name(i)
        typ, cls, _ttl, rdlen = struct.unpack("!HHIH", data[i:i + 10])
        i += 10
        if typ == 1 and cls == 1 and rdlen == 4:
            addrs.append(socket.inet_ntoa(data[i:i + 4]))
        i += rdlen
    return {"rcode": data[3] & 0x0F, "addrs": addrs}


def recv_all(s, n):
    """n bytes from s, or fewer when it closes first."""
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def serve(specs):
    threads = []
    for spec in specs:
        kind, rest = spec.split(":", 1)
        if kind == "tcp":
            addr, port = rest.rsplit(":", 1)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, int(port)))
            s.listen(64)

            def tcp_loop(s=s, addr=addr):
                while True:
                    c, peer = s.accept()
                    try:
                        c.sendall(("tcp %s %s\n" % (addr, peer[0])).encode())
                    except OSError:
                        pass
                    c.close()
            threads.append(threading.Thread(target=tcp_loop, daemon=True))
        elif kind == "discard":
            addr, port = rest.rsplit(":", 1)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, int(port)))
            s.listen(8)

            def discard_loop(s=s):
                while True:
                    c, _ = s.accept()
                    while c.recv(1 << 18):
                        pass
                    c.sendall(b"done")
                    c.close()
            threads.append(threading.Thread(target=discard_loop,
                                            daemon=True))
        elif kind in ("udp", "sink"):
            addr, port = rest.rsplit(":", 1)
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((addr, int(port)))

            def udp_loop(s=s, addr=addr, kind=kind):
                while True:
                    data, peer = s.recvfrom(65536)
                    if kind == "udp":
                        s.sendto(b"udp %s %s " % (addr.encode(),
                                                  peer[0].encode()) + data,
                                 peer)
                    else:
                        with open(os.environ["SINK"], "a") as f:
                            f.write("%s %s\n" % (peer[0],
                                                 data.decode(errors="replace")))
            threads.append(threading.Thread(target=udp_loop, daemon=True))
        elif kind == "dns":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((rest, 53))

            def dns_loop(s=s):
                while True:
                    data, peer = s.recvfrom(512)
                    # A name under "silent." is never answered, as a
                    # zone whose servers drop queries; the sink says it
                    # was asked.
                    asked = dns_qname(data)
                    if asked.startswith("silent"):
                        with open(os.environ["SINK"], "a") as f:
                            f.write("dns-silent %s\n" % asked)
                        continue
                    s.sendto(dns_answer(data, dns_names(), None), peer)
            threads.append(threading.Thread(target=dns_loop, daemon=True))
            ts = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ts.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ts.bind((rest, 53))
            ts.listen(16)

            def dns_tcp_one(c):
                with c:
                    c.settimeout(5)
                    while True:
                        hdr = recv_all(c, 2)
                        if len(hdr) < 2:
                            return
                        data = recv_all(c, struct.unpack("!H", hdr)[0])
                        a = dns_answer(data, dns_names(), None, tcp=True)
                        c.sendall(struct.pack("!H", len(a)) + a)

            def dns_tcp_loop(ts=ts):
                while True:
                    c, _ = ts.accept()
                    threading.Thread(target=dns_tcp_one, args=(c,),
                                     daemon=True).start()
            threads.append(threading.Thread(target=dns_tcp_loop,
                                            daemon=True))
        else:
            sys.exit("unknown server kind " + kind)
    for t in threads:
        t.start()
    print("ready", flush=True)
    while True:
        time.sleep(3600)


def pump(fd, mac, addr, gw):
    fd = int(fd)
    tap = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(tap, TUNSETIFF, struct.pack("16sH", b"eth0",
                                            IFF_TAP | IFF_NO_PI))
    for cmd in (["ip", "link", "set", "lo", "up"],
                ["ip", "link", "set", "eth0", "address", mac],
                ["ip", "addr", "add", addr, "dev", "eth0"],
                ["ip", "link", "set", "eth0", "up"],
                ["ip", "route", "add", "default", "via", gw]):
        subprocess.run(cmd, check=True)
    print("ready", flush=True)
    while True:
        r, _, _ = select.select([fd, tap], [], [])
        for src in r:
            dst = tap if src == fd else fd
            try:
                frame = os.read(src, 65536)
            except BlockingIOError:
                continue
            except OSError:
                # netd deleted its TAP: the VM's NIC lost its link.
                if src == fd:
                    return
                continue
            if not frame and src == fd:
                return
            try:
                os.write(dst, frame)
            except OSError:
                pass


def probe(kind, addr, port, src=None):
    port = int(port)
    t0 = time.monotonic()
    res = {"ok": False}
    try:
        if kind in ("tcp", "tcp6"):
            fam = socket.AF_INET6 if kind == "tcp6" else socket.AF_INET
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(2.0)
            if src:
                s.bind((src, 0))
            s.connect((addr, port))
            res["connect_ms"] = (time.monotonic() - t0) * 1000
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            res["data"] = data.decode(errors="replace").strip()
            res["ok"] = True
        elif kind == "resolve-tcp":
            s = socket.create_connection((addr, port), timeout=3.0)
            q = dns_query(src)
            s.sendall(struct.pack("!H", len(q)) + q)
            n, = struct.unpack("!H", recv_all(s, 2))
            data = recv_all(s, n)
            res.update(parse_reply(data))
            res["tc"] = bool(data[2] & 0x02)
            res["bytes"] = len(data)
            res["ok"] = True
        elif kind in ("udp", "udp-send", "dns", "udp6", "resolve"):
            fam = socket.AF_INET6 if kind == "udp6" else socket.AF_INET
            s = socket.socket(fam, socket.SOCK_DGRAM)
            s.settimeout(2.0)
            if src and kind != "resolve":
                s.bind((src, 0))
            if kind == "resolve":
                s.sendto(dns_query(src), (addr, port))
                data, _ = s.recvfrom(1232)
                res.update(parse_reply(data))
                res["tc"] = bool(data[2] & 0x02)
                res["ok"] = True
            elif kind == "dns":
                s.sendto(dns_query(os.environ["DNS_NAME"]), (addr, port))
                data, _ = s.recvfrom(512)
                ancount, = struct.unpack("!H", data[6:8])
                res["ok"] = ancount == 1
                if ancount == 1:
                    res["data"] = socket.inet_ntoa(data[-4:])
            else:
                s.sendto(b"probe-%d" % os.getpid(), (addr, port))
                res["ok"] = True
                if kind == "udp":
                    data, _ = s.recvfrom(65536)
                    res["data"] = data.decode(errors="replace")
                else:
                    res["data"] = "probe-%d" % os.getpid()
    except OSError as e:
        res["ok"] = False
        res["error"] = str(e)
    print(json.dumps(res))


def bench(addr, port, mib, connects):
    import statistics
    block = b"x" * (1 << 16)
    s = socket.create_connection((addr, int(port)), timeout=30)
    t0 = time.monotonic()
    for _ in range(int(mib) * 16):
        s.sendall(block)
    s.shutdown(socket.SHUT_WR)
    s.recv(16)
    secs = time.monotonic() - t0
    s.close()
    times = []
    for _ in range(int(connects)):
        t = time.monotonic()
        c = socket.create_connection((addr, 80), timeout=5)
        times.append((time.monotonic() - t) * 1000)
        c.close()
    print(json.dumps({"mib_s": int(mib) / secs,
                      "connect_ms": statistics.median(times) if times
                      else None}))


def rates(addr, port, resolver, name, seconds):
    """For the egress benchmark: DNS answers a second for name from
    resolver (one query at a time), the same over one TCP connection,
    then new TCP connections a second to addr:port (each opened and
    closed), each for the given seconds.  The answers come first: with
    names, they open the address."""
    secs = float(seconds)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2.0)
    n, bad, t0 = 0, 0, time.monotonic()
    while time.monotonic() - t0 < secs:
        s.sendto(dns_query(name, n & 0xffff), (resolver, 53))
        data, _ = s.recvfrom(1232)
        if parse_reply(data)["rcode"] != 0:
            bad += 1
        n += 1
    dns = n / (time.monotonic() - t0)
    s = socket.create_connection((resolver, 53), timeout=2.0)
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < secs:
        q = dns_query(name, n & 0xffff)
        s.sendall(struct.pack("!H", len(q)) + q)
        ln, = struct.unpack("!H", recv_all(s, 2))
        if parse_reply(recv_all(s, ln))["rcode"] != 0:
            bad += 1
        n += 1
    dns_tcp = n / (time.monotonic() - t0)
    s.close()
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < secs:
        socket.create_connection((addr, int(port)), timeout=5).close()
        n += 1
    print(json.dumps({"conns_s": n / (time.monotonic() - t0),
                      "dns_s": dns, "dns_tcp_s": dns_tcp,
                      "dns_failed": bad}))


def flood(addr, tcp_port, udp_port, seconds):
    end = time.monotonic() + float(seconds)
    held, udp = [], 0
    while time.monotonic() < end:
        for _ in range(4):
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                u.sendto(b"flood", (addr, int(udp_port)))
            except OSError:
                pass
            u.close()
            udp += 1
        # Closed, a connection would leave the limit's count: held.
        if len(held) < 400:
            t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            t.setblocking(False)
            try:
                t.connect((addr, int(tcp_port)))
            except BlockingIOError:
                pass
            held.append(t)
        time.sleep(0.001)
    print(json.dumps({"udp": udp, "tcp": len(held)}), flush=True)
    while True:
        time.sleep(3600)


def sniff(ifname, seconds):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((ifname, 0))
    s.settimeout(0.1)
    counts = {}
    print("ready", flush=True)
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        try:
            frame, addr = s.recvfrom(65536)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        et = "%04x" % struct.unpack("!H", frame[12:14])[0]
        counts[et] = counts.get(et, 0) + 1
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "serve":
        serve(sys.argv[2:])
    elif cmd == "pump":
        pump(*sys.argv[2:6])
    elif cmd == "probe":
        probe(*sys.argv[2:])
    elif cmd == "bench":
        bench(*sys.argv[2:6])
    elif cmd == "flood":
        flood(*sys.argv[2:6])
    elif cmd == "rates":
        rates(*sys.argv[2:7])
    elif cmd == "sniff":
        sniff(*sys.argv[2:4])
    else:
        sys.exit("usage: see the docstring")
