#!/usr/bin/env python3
# Boot benchmark for the guest image: the same kernel, initramfs and rootfs
# booted under QEMU to (a) a trivial init that only says hello on the link
# and (b) the image's stage two, side by side.  The difference is what stage
# two costs.  With guestd as stage two, hello is its hello event and python3
# runs as an exec job over the link (tests/integration/glink.py).  Runs on
# the host, as root (debugfs on a copy of the rootfs).
#
# usage: tests/bench/boot.py [--manifest PATH] [--runs N] [--trivial PATH]
#   --manifest  image manifest (default: the image the image_boot test built
#               for build/test)
#   --trivial   a static init that takes "mcpvm.trivial" on the kernel
#               command line (default: build/test/tests/integration/boot_init)
import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import json

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
from qemu_boot import QemuVM  # noqa: E402

TRIVIAL_DEST = "/usr/local/sbin/mcpvm-trivial-init"


def guestd_run(vm, fig, t0):
    """hello, exec python3 -c 'print(2+2)', shutdown, over the real link."""
    import glink
    link = glink.GuestLink(vm.accept_link(300))
    try:
        if not link.hello.wait(300):
            raise RuntimeError("no hello from guestd")
        fig["hello"] = time.monotonic() - t0
        t1 = time.monotonic()
        link.call("exec", job_id="bench", command="python3 -c 'print(2+2)'")
        while True:
            st, _ = link.call("job_status", job_id="bench")
            if st["state"] != "running" and not st["streams_open"]:
                break
            time.sleep(0.02)
        _, out = link.call("job_output", job_id="bench")
        if out != b"4\n":
            raise RuntimeError(f"python3 in the guest: {st} {out!r}")
        fig["python"] = time.monotonic() - t1
        link.call("shutdown")
    finally:
        link.close()


def one(manifest, tmp, trivial, n, stage2):
    """Boots once; returns a dict of figures in seconds."""
    extra = f"init={TRIVIAL_DEST} mcpvm.trivial" if trivial else ""
    vm = QemuVM.from_manifest(manifest, os.path.join(tmp, f"run{n}"),
                              cmdline_extra=extra)
    if trivial:
        vm.add_file(trivial, TRIVIAL_DEST)
    fig = {}
    t0 = time.monotonic()
    with vm:
        if not trivial and stage2 == "guestd":
            guestd_run(vm, fig, t0)
            vm.wait(300)
            fig["exit"] = time.monotonic() - t0
            m = re.search(r"mcpvm-stage1: .* at (\d+) ms", vm.console())
            if m:
                fig["stage1"] = int(m.group(1)) / 1000
            shutil.rmtree(vm.workdir, ignore_errors=True)
            return fig
        vm.accept_link(300)
        hello = vm.read_line(300).decode()
        fig["hello"] = time.monotonic() - t0
        m = re.search(r"uptime_ms=(\d+)", hello)
        if m:
            fig["uptime_hello"] = int(m.group(1)) / 1000
        while True:
            line = vm.read_line(300).decode()
            m = re.search(r"python3 rc=(\d+) ms=(\d+) out=(.*)", line)
            if m:
                if m.group(1) != "0" or m.group(3) != "4":
                    raise RuntimeError(f"python3 in the guest: {line}")
                fig["python"] = int(m.group(2)) / 1000
            if line == "bye":
                break
        vm.wait(300)
        fig["exit"] = time.monotonic() - t0
        m = re.search(r"mcpvm-stage1: .* at (\d+) ms", vm.console())
        if m:
            fig["stage1"] = int(m.group(1)) / 1000
    shutil.rmtree(vm.workdir, ignore_errors=True)
    return fig


def main():
    ap = argparse.ArgumentParser()
    cache = os.environ.get("MCPVM_IMAGE_CACHE",
                           "/var/cache/mcpvm-test-images")
    ap.add_argument("--manifest")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--trivial", default=os.path.join(
        TOP, "build", "test", "tests", "integration", "boot_init"))
    args = ap.parse_args()
    if not args.manifest:
        # Where test_image_boot.py put this build tree's image.
        h = hashlib.sha256(os.path.realpath(args.trivial).encode())
        args.manifest = os.path.join(cache, "test-" + h.hexdigest()[:12],
                                     "manifest.json")
    if not os.path.exists(args.trivial):
        sys.exit(f"boot.py: {args.trivial}: missing (build first, or pass "
                 "--trivial)")
    if not os.path.exists(args.manifest):
        if not (os.environ.get("STAGE1") and os.environ.get("GUESTD")):
            sys.exit(f"boot.py: {args.manifest}: missing (run tests/run "
                     "--suite image first, or pass --manifest)")
        # Under meson: build the image the image_boot test would.
        subprocess.run([os.path.join(TOP, "packaging/image/build"),
                        "--profile", "test", "--cache", cache,
                        "--out", os.path.dirname(args.manifest),
                        "--stage1", os.environ["STAGE1"],
                        "--guestd", os.environ["GUESTD"]], check=True)
    stage2 = json.load(open(args.manifest)).get("stage2", "?")
    tmp = tempfile.mkdtemp(prefix="mcpvm-bench-")
    res = {"trivial": [], "stage2": []}
    try:
        for n in range(args.runs):
            # Interleaved, so a busy neighbour slows both columns alike.
            res["trivial"].append(one(args.manifest, tmp, args.trivial,
                                      2 * n, stage2))
            res["stage2"].append(one(args.manifest, tmp, None, 2 * n + 1,
                                     stage2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(col, key):
        v = [r[key] for r in res[col] if key in r]
        return statistics.median(v) if v else None

    def fmt(x):
        return "-" if x is None else f"{x:6.2f} s"

    print(f"boot benchmark: {args.runs} runs each, median; "
          f"accel {os.environ.get('MCPVM_QEMU_ACCEL', 'auto')}, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'':34}{'trivial init':>14}{'stage two (' + stage2 + ')':>26}"
          f"{'difference':>14}")
    rows = [("stage one hands over (uptime)", "stage1"),
            ("hello on the link (uptime)", "uptime_hello"),
            ("hello on the link (host wall)", "hello"),
            ("python3 -c 'print(2+2)' in the guest", "python"),
            ("QEMU start to exit (host wall)", "exit")]
    for label, key in rows:
        a, b = med("trivial", key), med("stage2", key)
        d = None if a is None or b is None else b - a
        print(f"{label:34}{fmt(a):>14}{fmt(b):>26}"
              f"{('+' if d and d > 0 else '') + fmt(d).strip():>14}")
    # Rows for tests/bench/run's table: figure, then its same-run reference.
    for what, key in (("guest boot to hello on the link", "hello"),
                      ("guest boot, python3 job, power-off", "exit")):
        a, b = med("trivial", key), med("stage2", key)
        if a is not None and b is not None:
            print(f"BENCH\t{what} ({stage2}, TCG)\t{b:.2f}\ts\t"
                  f"trivial init\t{a:.2f}")


if __name__ == "__main__":
    main()
