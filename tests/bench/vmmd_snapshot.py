#!/usr/bin/env python3
# vmmd's snapshots against bare QEMU, side by side, with real TCG VMs:
# vm_create to ready cold, from a disk-only snapshot and from a memory
# snapshot, against bare QEMU booting to guestd's hello and bare
# -incoming + cont from a migration file (vmmd_vm.py's references,
# measured in the same run); the source's pause, against bare QMP stop +
# migrate to a file + quit, and the wall time of vm_snapshot with memory
# and of vm_fork with count 1 and 2; vm_fork of a --big-mib (1 GiB) VM
# with count 1 and 4: the source's pause and the time until every child
# is ready; and the space on the volume of --many (10) VMs forked from one
# VM against as many cold-booted ones.
# Runs as root, with the image the vmmd integration test builds (or
# VMMD_TEST_IMAGE).
#
# Last, vm_create from the warm pool (warm_pool = 1): each create restores
# a pool snapshot; the pool refills before the next one is timed.  Its two
# references are bare -incoming + cont, and the same to the restored
# guestd's answer to a hello on its link (where vmmd's "ready" begins:
# vmmd then gives the clone its identity and thaws it).
#
# usage: tests/bench/vmmd_snapshot.py [--build DIR] [--runs N] [--warm-only]
#                                     [--big-mib N] [--many N]
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
sys.path.insert(0, HERE)
os.environ.setdefault("MCPVM_QEMU_ACCEL", "tcg")
import vmmdlib as tv  # noqa: E402
import vmmd_vm  # noqa: E402


def snap(c, **args):
    t, body, fd = c.c.call(tv.ipc.VM_TOOL, {
        "credential": c.tok, "tool": "vm_snapshot", "arguments": args})
    if fd is not None:
        os.close(fd)
    if t == tv.ipc.ERROR:
        raise RuntimeError("vm_snapshot: %r" % body)
    return body["result"]


def call(c, name, **args):
    okk, r = c(name, **args)
    if not okk:
        raise RuntimeError("%s: %r" % (name, r))
    return r


def timed(c, name, **args):
    t = time.monotonic()
    r = call(c, name, **args)
    return time.monotonic() - t, r


def df_used_mib(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize / (1 << 20)


def pool_ready(h):
    """A ready snapshot of the warm pool, with its memory file whole."""
    p = h.vmctl("-j", "snapshots", "--workspace", "@warm-pool")
    if p.returncode != 0:
        return False
    return any(os.path.exists(os.path.join(h.mnt, "snapshots",
                                           x["snapshot_id"], "memory.bin"))
               for x in json.loads(p.stdout)["snapshots"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(TOP, "build", "test"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big-mib", type=int, default=1024)
    ap.add_argument("--many", type=int, default=10)
    ap.add_argument("--warm-only", action="store_true",
                    help="only the warm pool's creates and their two "
                    "references")
    args = ap.parse_args()
    b = os.path.abspath(args.build)  # vmmd runs vmproxy from elsewhere
    os.environ.update({
        "AUTHD": b + "/authd/authd", "AUTHCTL": b + "/authd/authctl",
        "VMMD": b + "/vmmd/vmmd", "VMPROXY": b + "/vmproxy/vmproxy",
        "VMCTL": b + "/vmmd/vmctl"})
    if os.environ.get("VMMD_TEST_IMAGE"):
        tv.IMAGE_OUT = os.environ["VMMD_TEST_IMAGE"]
    manifest = tv.built_image()
    if manifest is None:
        sys.exit("vmmd_snapshot.py: no image in %s; run tests/run --suite "
                 "vmmd first" % tv.IMAGE_OUT)
    manifest_path = os.path.join(manifest["dir"], "manifest.json")
    tv.MAX_VMS = max(5, args.many + 1)
    tv.become_subreaper()
    tv.exit_cleanly_on_sigterm()
    tmp = tempfile.mkdtemp(prefix="mcpvm-bench-")
    h = tv.Host(manifest)
    # vmmd admits a VM only with room for its whole disk and two
    # checkpoints: --many of them need a bigger (sparse) volume.
    h.volume_gib = max(16, 5 * (args.many + 6))
    cold, fdisk, fmem, bares = [], [], [], []
    msnap, fork1, fork2 = [], [], []
    bigfork, many, warm = {}, {}, []
    try:
        h.setup()
        # Room for the source, the big VM and four children of it, or
        # for --many children of the source.
        h.write_conf(max_memory_mib=tv.MEM * (args.many + 2) +
                     args.big_mib * 5 + tv.QEMU_MIB * tv.MAX_VMS,
                     max_vms=tv.MAX_VMS, max_fork_count=max(4, args.many))
        h.start_authd()
        h.start_vmmd()
        a = tv.Client(h, h.issue("bench", "--max-vms", "64", "--memory-mib",
                                 "65536", "--storage-gib", "4096"))
        if not args.warm_only:
            src = call(a, "vm_create", request_id="src", memory_mib=tv.MEM,
                       idle_seconds=0)["vm_id"]
            a.sh(src, "echo stage > /workspace/stage && sync", "w")
            dsnap = snap(a, vm_id=src, request_id="d")["snapshot_id"]
            for n in range(args.runs):
                # Interleaved, so a busy neighbour slows every column alike.
                bares.append(vmmd_vm.bare_boot(manifest_path, tmp, n)[0])
                t, r = timed(a, "vm_create", request_id="c%d" % n,
                             memory_mib=tv.MEM, idle_seconds=0)
                cold.append(t)
                call(a, "vm_destroy", vm_id=r["vm_id"])
                t, r = timed(a, "vm_create", request_id="d%d" % n,
                             snapshot=dsnap, memory_mib=tv.MEM, idle_seconds=0)
                fdisk.append(t)
                call(a, "vm_destroy", vm_id=r["vm_id"])
                t = time.monotonic()
                s = snap(a, vm_id=src, request_id="m%d" % n, memory=True)
                msnap.append((time.monotonic() - t, s["paused_ms"] / 1000))
                t, r = timed(a, "vm_create", request_id="r%d" % n,
                             snapshot=s["snapshot_id"], idle_seconds=0)
                fmem.append(t)
                call(a, "vm_destroy", vm_id=r["vm_id"])
                call(a, "vm_snapshot_delete", snapshot_id=s["snapshot_id"])
                for count, out in ((1, fork1), (2, fork2)):
                    t, r = timed(a, "vm_fork", vm_id=src,
                                 request_id="f%d-%d" % (count, n), count=count)
                    out.append((t, r["paused_ms"] / 1000))
                    for k in r["vm_ids"]:
                        call(a, "vm_destroy", vm_id=k)

            # Storage: 2 VMs from the disk snapshot against 2 cold-booted, each
            # after writing the same 64 MiB.
            def used_by_two(prefix, **create):
                used0 = df_used_mib(h.mnt)
                ids = [call(a, "vm_create", request_id="%s%d" % (prefix, i),
                            memory_mib=tv.MEM, idle_seconds=0,
                            **create)["vm_id"] for i in range(2)]
                for i, vm in enumerate(ids):
                    a.sh(vm, "head -c 64M /dev/urandom > /workspace/x && "
                         "sync", "%sw%d" % (prefix, i))
                used = df_used_mib(h.mnt) - used0
                for vm in ids:
                    call(a, "vm_destroy", vm_id=vm)
                return used
            used_snap = used_by_two("s", snapshot=dsnap)
            time.sleep(2)
            used_cold = used_by_two("k")

            # vm_fork of a bigger VM, count 1 and 4.
            big = call(a, "vm_create", request_id="big",
                       memory_mib=args.big_mib,
                       idle_seconds=0)["vm_id"]
            time.sleep(3)
            for count in (1, 4):
                t, r = timed(a, "vm_fork", vm_id=big,
                             request_id="bf%d" % count,
                             count=count)
                bigfork[count] = (t, r["paused_ms"] / 1000)
                for k in r["vm_ids"]:
                    call(a, "vm_destroy", vm_id=k)
            call(a, "vm_destroy", vm_id=big)

            # Space: --many VMs forked from one VM, then as many cold-booted.
            used0 = df_used_mib(h.mnt)
            r = call(a, "vm_fork", vm_id=src, request_id="many",
                     count=args.many)
            many["fork"] = df_used_mib(h.mnt) - used0
            for k in r["vm_ids"]:
                call(a, "vm_destroy", vm_id=k)
            time.sleep(2)
            used0 = df_used_mib(h.mnt)
            ids = [call(a, "vm_create", request_id="mc%d" % i,
                        memory_mib=tv.MEM, idle_seconds=0)["vm_id"]
                   for i in range(args.many)]
            many["cold"] = df_used_mib(h.mnt) - used0
            for vm in ids:
                call(a, "vm_destroy", vm_id=vm)

        bhs, brs, _, bready = vmmd_vm.bare_hibernate(manifest_path, tmp,
                                                     args.runs)
        # The warm pool: vmmd again with warm_pool = 1.
        h.stop_vmmd()
        h.write_conf(max_memory_mib=tv.MEM * (args.many + 2) +
                     args.big_mib * 5 + tv.QEMU_MIB * tv.MAX_VMS,
                     max_vms=tv.MAX_VMS, warm_pool=1)
        h.start_vmmd()
        a.reconnect()
        if not args.warm_only:
            call(a, "vm_destroy", vm_id=src)
        for n in range(args.runs):
            tv.wait_for(lambda: pool_ready(h), 600, "a ready pool snapshot")
            t, r = timed(a, "vm_create", request_id="w%d" % n,
                         idle_seconds=0)
            st = call(a, "vm_status", vm_id=r["vm_id"])
            if st.get("origin") != "warm":
                raise RuntimeError("not from the pool: %r" % st)
            warm.append(t)
            call(a, "vm_destroy", vm_id=r["vm_id"])
        h.stop_vmmd()
    finally:
        h.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    med = statistics.median
    print("vmmd snapshot benchmark: TCG, %d MiB guests, %d runs (median), "
          "load %.1f" % (tv.MEM, args.runs, os.getloadavg()[0]))
    print("%-40s %10s %12s %8s" % ("", "vmmd", "reference", "ratio"))
    bench = []

    def row(label, v, base, name, ref, unit="s"):
        print("%-40s %8.3f %s %10.3f %s %7.2fx" % (label, v, unit, base,
                                                    unit, v / base))
        bench.append((name, v, unit, ref, base))
    br = med(brs)
    if not args.warm_only:
        bb = med(bares)
        row("vm_create cold / bare boot", med(cold), bb,
            "vmmd vm_create cold", "bare QEMU boot to guestd hello")
        row("vm_create from disk snapshot", med(fdisk), bb,
            "vmmd vm_create from a disk-only snapshot",
            "bare QEMU boot to guestd hello")
        row("vm_create from memory snapshot", med(fmem), br,
            "vmmd vm_create from a memory snapshot",
            "bare QEMU -incoming + cont")
    row("vm_create from the warm pool", med(warm), br,
        "vmmd vm_create from the warm pool", "bare QEMU -incoming + cont")
    row("  ... / bare to guestd's answer", med(warm), med(bready),
        "vmmd vm_create from the warm pool",
        "bare QEMU -incoming + cont + guestd's answer to hello")
    if not args.warm_only:
        row("vm_create from the warm pool / cold", med(warm), med(cold),
            "vmmd vm_create from the warm pool", "vmmd vm_create cold")
        bh = med(bhs)
        row("vm_snapshot memory: source paused", med(p for _, p in msnap), bh,
            "vmmd vm_snapshot memory, the source's pause",
            "bare QMP stop, migrate to file, quit")
        print("%-40s %8.3f s" % ("vm_snapshot memory: call", med(
            t for t, _ in msnap)))
        for label, f in (("vm_fork count 1", fork1),
                         ("vm_fork count 2", fork2)):
            print("%-40s %8.3f s  (source paused %.3f s)" % (
                label + ": to children ready", med(t for t, _ in f),
                med(p for _, p in f)))
            bench.append(("vmmd %s, source paused" % label,
                          med(p for _, p in f), "s",
                          "bare QMP stop, migrate to file, quit", bh))
        for count, (t, p) in sorted(bigfork.items()):
            print("%-40s %8.3f s  (source paused %.3f s)" % (
                "vm_fork %d MiB, count %d: children ready" % (args.big_mib,
                                                              count), t, p))
            bench.append(("vmmd vm_fork of a %d MiB VM, count %d, source "
                          "paused" % (args.big_mib, count), p, "s",
                          "bare QMP stop, migrate to file, quit (%d MiB)" %
                          tv.MEM, bh))
        print("%-40s %8.1f MiB %8.1f MiB  (%d VMs)" % (
            "space: forked from one VM / cold", many["fork"], many["cold"],
            args.many))
        bench.append(("space of %d VMs forked from one VM" % args.many,
                      many["fork"], "MiB", "%d cold-booted VMs" % args.many,
                      many["cold"]))
        print("%-40s %8.1f MiB %8.1f MiB  (2 VMs, 64 MiB written in each)" % (
            "storage: from one snapshot / cold", used_snap, used_cold))
        bench.append(("storage of 2 VMs from one snapshot", used_snap, "MiB",
                      "storage of 2 cold-booted VMs", used_cold))
    for name, v, unit, ref, base in bench:
        print("BENCH\t%s\t%.3f\t%s\t%s\t%.3f" % (name, v, unit, ref, base),
              flush=True)


if __name__ == "__main__":
    main()
