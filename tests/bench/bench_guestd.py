"""guestd benchmarks, each printed next to a reference measured in the
same run on the same machine:
  - exec round trip of `true` over the link (exec, then job_status until
    completed) against forking `/bin/bash -lc true` locally;
  - stream throughput through guestd over the link against socat relaying
    the same bytes from a Unix socket to the same TCP sink.
Usage: GUESTD=build/test/guestd/guestd python3 tests/bench/bench_guestd.py
"""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..",
                                "integration"))
import glink  # noqa: E402

MIB = 1 << 20
SIZE = int(os.environ.get("BENCH_MIB", "256")) * MIB
RUNS = int(os.environ.get("BENCH_RUNS", "50"))

SINK = r"""
import socket, sys
size = int(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(4)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    while c.recv(1 << 18):
        pass
    block = b"z" * (1 << 18)
    left = size
    while left:
        left -= c.send(block[:min(left, len(block))])
    c.close()
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def bench_exec(g):
    link = g.link
    times = []
    for i in range(RUNS):
        t = time.monotonic()
        link.call("exec", job_id=f"b{i}", command="true")
        while True:
            st, _ = link.call("job_status", job_id=f"b{i}")
            if st["state"] != "running":
                break
        times.append(time.monotonic() - t)
    # The same user, environment and directory as guestd's job.
    env = {"HOME": "/home/dev", "PATH": "/usr/local/bin:/usr/bin:/bin",
           "SHELL": "/bin/bash", "USER": "dev", "LOGNAME": "dev",
           "LANG": "C.UTF-8", "TERM": "dumb"}
    ref = []
    for _ in range(RUNS):
        t = time.monotonic()
        subprocess.run(["/bin/bash", "-lc", "true"], check=True, env=env,
                       user=1000, group=1000, extra_groups=[],
                       cwd=g.workspace)
        ref.append(time.monotonic() - t)
    print(f"exec `true` round trip over the link: median "
          f"{statistics.median(times) * 1000:.2f} ms, p99 "
          f"{pct(times, 0.99) * 1000:.2f} ms  ({RUNS} runs)")
    print(f"  reference, local fork+exec of bash -lc true as uid 1000: "
          f"median "
          f"{statistics.median(ref) * 1000:.2f} ms, p99 "
          f"{pct(ref, 0.99) * 1000:.2f} ms")
    bench_row("guestd exec of true, round trip", statistics.median(times)
              * 1000, "ms", "local bash -lc true as uid 1000",
              statistics.median(ref) * 1000)


def bench_row(name, value, unit, ref_name, ref_value):
    """A row for tests/bench/run's table."""
    print(f"BENCH\t{name}\t{value:.2f}\t{unit}\t{ref_name}\t"
          f"{ref_value:.2f}", flush=True)


def pump(send, recv, shut):
    chunk = b"a" * MIB
    t = time.monotonic()
    for _ in range(SIZE // MIB):
        send(chunk)
    shut()
    up = time.monotonic() - t
    t = time.monotonic()
    got = 0
    while True:
        d = recv()
        if not d:
            break
        got += len(d)
    down = time.monotonic() - t
    assert got == SIZE, got
    return SIZE / MIB / up, SIZE / MIB / down


def bench_stream(g):
    g.link.call("file_write", body=SINK.encode(), path="sink.py")
    g.link.call("exec", job_id="sink", command=f"exec python3 sink.py "
                f"6001 {SIZE}")
    for _ in range(200):
        _, body = g.link.call("job_output", job_id="sink")
        if b"listening" in body:
            break
        time.sleep(0.05)
    ch = g.link.open(6001)
    up, down = pump(ch.send, ch.recv, ch.send_eof)
    print(f"stream through guestd over the link ({SIZE // MIB} MiB): "
          f"up {up:.0f} MiB/s, down {down:.0f} MiB/s")
    ours = (up, down)

    # Reference: the same client bytes into socat, socat to the same sink.
    tmp = tempfile.mkdtemp(prefix="bench-socat-")
    path = os.path.join(tmp, "s.sock")
    sink = subprocess.Popen([sys.executable, "-c", SINK, "6002", str(SIZE)],
                            stdout=subprocess.PIPE)
    sink.stdout.readline()
    relay = subprocess.Popen(["socat", f"UNIX-LISTEN:{path}",
                              "TCP:127.0.0.1:6002"])
    for _ in range(100):
        if os.path.exists(path):
            break
        time.sleep(0.02)
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    up, down = pump(s.sendall, lambda: s.recv(1 << 18),
                    lambda: s.shutdown(socket.SHUT_WR))
    print(f"  reference, socat unix->tcp relay ({SIZE // MIB} MiB): "
          f"up {up:.0f} MiB/s, down {down:.0f} MiB/s")
    bench_row("guestd stream, host to guest", ours[0], "MiB/s",
              "socat unix->tcp relay", up)
    bench_row("guestd stream, guest to host", ours[1], "MiB/s",
              "socat unix->tcp relay", down)
    s.close()
    relay.wait(5)
    sink.kill()
    sink.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    if os.geteuid() != 0 or not os.environ.get("GUESTD"):
        print("SKIP: needs root and GUESTD=")
        return 77
    g = glink.Guestd()
    try:
        bench_exec(g)
        bench_stream(g)
    finally:
        g.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
