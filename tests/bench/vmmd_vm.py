#!/usr/bin/env python3
# vmmd against bare QEMU, side by side, with real TCG VMs: vm_create to
# ready against qemu-system-x86_64 booting the same kernel, initramfs and
# disk to guestd's hello; hibernate and resume against bare QMP migrate to a
# file and -incoming; the round trip of vm_exec `true` against the same job
# over a bare guest link; RSS of vmmd and of each vmproxy with 1 and 5 VMs.
# Runs as root on the host, with the image the vmmd integration test builds
# (tests/run --suite vmmd first).
#
# usage: tests/bench/vmmd_vm.py [--build DIR] [--runs N] [--vms N]
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
os.environ.setdefault("MCPVM_QEMU_ACCEL", "tcg")
import vmmdlib as tv  # noqa: E402
from glink import GuestLink  # noqa: E402
from qemu_boot import QemuVM  # noqa: E402


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def procs_named(h, word):
    return [pid for pid, _, cmd in h.jail_processes() if word in cmd]


# ---- bare QEMU -----------------------------------------------------------

def bare_boot(manifest, tmp, n):
    """Seconds from QEMU's start to guestd's hello, and the link's exec
    round trip of `true` (median of 10)."""
    vm = QemuVM.from_manifest(manifest, os.path.join(tmp, "bare%d" % n),
                              memory_mib=tv.MEM)
    with vm:
        t0 = time.monotonic()
        link = GuestLink(vm.accept_link(120))
        # guestd says hello once it has the link; ask, in case it did
        # before the host read.
        while not link.hello.wait(0.2):
            if time.monotonic() - t0 > 120:
                raise TimeoutError("no hello")
        boot = time.monotonic() - t0
        trips = []
        for i in range(10):
            t = time.monotonic()
            link.call("exec", job_id="t%d" % i, command="true")
            while link.call("job_status", job_id="t%d" % i)[0][
                    "state"] == "running":
                time.sleep(0.01)
            trips.append(time.monotonic() - t)
        link.close()
    shutil.rmtree(vm.workdir, ignore_errors=True)
    return boot, statistics.median(trips)


def bare_hibernate(manifest, tmp, cycles):
    """bare_qmp.py: stop + migrate to a file + quit, then -incoming + cont,
    on a guest booted to guestd like vmmd's.  Returns the hibernations,
    the restores to QEMU running, the file's bytes, and the restores to
    the guest's answer on its link."""
    vm = QemuVM.from_manifest(manifest, os.path.join(tmp, "bareqmp"),
                              memory_mib=tv.MEM)
    rundir = vm.workdir
    argv = [a.replace("path=%s" % vm.link_path,
                      "path=%s,server=on,wait=off" % vm.link_path)
            for a in vm.argv()]
    argv += ["-qmp", "unix:%s/qmp.sock,server=on,wait=off" % rundir]
    cfg = os.path.join(rundir, "cfg.json")
    with open(cfg, "w") as f:
        json.dump({"argv": argv, "rundir": rundir,
                   "ckpt": os.path.join(rundir, "ckpt"), "iterations": cycles,
                   "settle_s": 15}, f)
    p = subprocess.run([sys.executable, os.path.join(HERE, "bare_qmp.py"),
                        cfg], capture_output=True, text=True, timeout=300)
    shutil.rmtree(rundir, ignore_errors=True)
    if p.returncode != 0:
        raise RuntimeError("bare_qmp.py: " + p.stderr)
    r = json.loads(p.stdout)
    return ([x / 1000 for x in r["hibernate_ms"]],
            [x / 1000 for x in r["restore_ms"]], r["bytes"],
            [x / 1000 for x in r["ready_ms"]])


# ---- vmmd ----------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(TOP, "build", "test"))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--vms", type=int, default=5)
    ap.add_argument("--cycles", type=int, default=4,
                    help="hibernate/resume cycles per created VM")
    args = ap.parse_args()
    b = os.path.abspath(args.build)  # vmmd runs vmproxy from elsewhere
    os.environ.update({
        "AUTHD": b + "/authd/authd", "AUTHCTL": b + "/authd/authctl",
        "VMMD": b + "/vmmd/vmmd", "VMPROXY": b + "/vmproxy/vmproxy",
        "VMCTL": b + "/vmmd/vmctl"})
    manifest = tv.built_image()
    if manifest is None:
        sys.exit("vmmd_vm.py: no image in %s; run tests/run --suite vmmd "
                 "first" % tv.IMAGE_OUT)
    manifest_path = os.path.join(manifest["dir"], "manifest.json")
    tv.MAX_VMS = max(args.vms, 2)
    tv.become_subreaper()
    tv.exit_cleanly_on_sigterm()
    tmp = tempfile.mkdtemp(prefix="mcpvm-bench-")
    h = tv.Host(manifest)
    fig = {}
    try:
        h.setup()
        h.write_conf(max_memory_mib=tv.VM_MIB * (args.vms + 1),
                     max_vms=tv.MAX_VMS)
        h.start_authd()
        h.start_vmmd()
        a = tv.Client(h, h.issue("bench", "--max-vms", "64", "--memory-mib",
                                 "65536", "--storage-gib", "4096"))
        creates, bares, hib, res, trips, btrips = [], [], [], [], [], []
        for n in range(args.runs):
            # Interleaved, so a busy neighbour slows both columns alike.
            bt, btrip = bare_boot(manifest_path, tmp, n)
            bares.append(bt)
            btrips.append(btrip)
            t = time.monotonic()
            okk, r = a("vm_create", request_id="b%d" % n, memory_mib=tv.MEM,
                       idle_seconds=0)
            creates.append(time.monotonic() - t)
            if not okk:
                raise RuntimeError("vm_create: %r" % (r,))
            vm = r["vm_id"]
            for i in range(10):
                t = time.monotonic()
                okk, r = a("vm_exec", vm_id=vm, request_id="t%d-%d" % (n, i),
                           command="true")
                a.wait_job(vm, r["job_id"])
                trips.append(time.monotonic() - t)
            if n == 0:
                fig["rss1"] = (rss_kib(h.vmmd.pid),
                               [rss_kib(p) for p in procs_named(h,
                                                                "vmproxy")],
                               [rss_kib(p) for p in procs_named(h, "qemu")])
            time.sleep(3)       # let it settle like the bare one
            # Several cycles a VM: a slow resume that comes now and then
            # (a lost hello cost 3 s) shows in the maximum, not hidden
            # between two samples.
            for c in range(args.cycles):
                t = time.monotonic()
                okk, r = a("vm_suspend", vm_id=vm, force=True)
                hib.append(time.monotonic() - t)
                if not okk:
                    raise RuntimeError("vm_suspend: %r" % (r,))
                ckpt = os.path.getsize(os.path.join(h.mnt, "vms", vm,
                                                    "checkpoint.bin"))
                t = time.monotonic()
                okk, r = a("vm_resume", vm_id=vm)
                res.append(time.monotonic() - t)
                if not okk:
                    raise RuntimeError("vm_resume: %r" % (r,))
            a("vm_destroy", vm_id=vm)
        bhs, brs, bbytes, _ = bare_hibernate(manifest_path, tmp, args.cycles)

        # RSS with several VMs booted at once.
        ids = []
        for n in range(args.vms):
            okk, r = a("vm_create", request_id="m%d" % n, memory_mib=tv.MEM,
                       idle_seconds=0)
            if not okk:
                raise RuntimeError("vm_create: %r" % (r,))
            ids.append(r["vm_id"])
        fig["rssN"] = (rss_kib(h.vmmd.pid),
                       [rss_kib(p) for p in procs_named(h, "vmproxy")],
                       [rss_kib(p) for p in procs_named(h, "qemu")])
        for vm in ids:
            a("vm_destroy", vm_id=vm)
        h.stop_vmmd()
    finally:
        h.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    med = statistics.median
    print("vmmd VM benchmark: TCG, %d MiB guests, %d runs, %d hibernate/resume "
          "cycles each (median), load %.1f" % (tv.MEM, args.runs, args.cycles, os.getloadavg()[0]))
    print("%-34s %12s %12s %8s" % ("", "vmmd", "bare QEMU", "ratio"))

    bench = []

    def row(label, v, base, unit, name, ref):
        print("%-34s %10.3f %s %10.3f %s %7.2fx" % (label, v, unit, base,
                                                    unit, v / base))
        bench.append((name, v, unit, ref, base))
    row("create to ready / boot to hello", med(creates), med(bares), "s",
        "vmmd vm_create to ready", "bare QEMU boot to guestd hello")
    bh, br = med(bhs), med(brs)
    row("hibernate (stop, migrate, quit)", med(hib), bh, "s",
        "vmmd vm_suspend hibernate", "bare QMP migrate to file")
    row("resume (incoming, cont, thaw)", med(res), br, "s",
        "vmmd vm_resume from hibernation", "bare QEMU -incoming + cont")
    print("%-34s %10.3f s %10.3f s  (the slowest of %d / %d)" % (
        "  slowest resume", max(res), max(brs), len(res), len(brs)))
    row("exec `true` round trip", med(trips) * 1000, med(btrips) * 1000,
        "ms", "vmmd vm_exec true, to its end", "guest link exec true")
    print("%-34s %10.1f MB %10.1f MB" % ("checkpoint size", ckpt / 1e6,
                                         bbytes / 1e6))
    for key, nvm in (("rss1", 1), ("rssN", args.vms)):
        vmmd, proxies, qemus = fig[key]
        print("RSS with %d VM(s): vmmd %d KiB; vmproxy %s KiB each "
              "(mean %d); QEMU mean %d MiB" % (
                  nvm, vmmd, "/".join(str(x) for x in proxies),
                  statistics.mean(proxies) if proxies else 0,
                  statistics.mean(qemus) / 1024 if qemus else 0))
    vmmd1, prox1, _ = fig["rss1"]
    vmmdN, proxN, _ = fig["rssN"]
    bench.append(("vmmd RSS with %d VMs" % args.vms, vmmdN / 1024, "MiB",
                  "vmmd RSS with 1 VM", vmmd1 / 1024))
    if prox1 and proxN:
        bench.append(("vmproxy RSS, mean of %d" % len(proxN),
                      statistics.mean(proxN) / 1024, "MiB",
                      "vmproxy RSS with 1 VM", statistics.mean(prox1) / 1024))
    for name, v, unit, ref, base in bench:
        print("BENCH\t%s\t%.2f\t%s\t%s\t%.2f" % (name, v, unit, ref, base),
              flush=True)


if __name__ == "__main__":
    main()
