#!/usr/bin/env python3
# The warm pool against a real vmmd with real QEMU TCG VMs on the XFS
# volume (vmmdlib.py's frame), with [vmmd] warm_pool = 1: the pool
# builds a ready memory snapshot in the background; a plain vm_create
# restores from it (origin "warm") and the pool refills; no workspace
# ever lists the pool's VM or snapshot; vm_list answers within 100 ms
# while a pool snapshot is written; a changed image digest retires the
# pool's snapshot, the next vm_create cold-boots and the pool is rebuilt
# under a new key; a damaged pool snapshot makes vm_create boot instead;
# a plain vm_run takes the pool's VM as vm_create does; kill -9 of vmmd
# while the pool builds leaves neither a half snapshot nor a pool VM, and
# the pool is ready again; and SIGTERM while a pool VM boots hibernates
# the tenants' VMs and destroys the pool VM rather than waiting for it.
#
# vmmd's disk failpoint (MCPVM_TEST_DISK_DELAY_MS, vmmd/disk.c and
# vmmd/snapshot.c) holds each disk job 2 s on the worker pool, the pool
# snapshot's clone included, so that its making lasts long enough to be
# measured against and killed in.
#
# Environment: as vmmdlib.py.  TAP on stdout.  Needs root.
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmmdlib as base  # noqa: E402
from vmmdlib import ok, wait_for, snapdir, out  # noqa: E402

MEM = base.MEM
POOL = "@warm-pool"
BUILD_S = 600       # a TCG boot and a memory snapshot on a shared host


def pool_snaps(h):
    """The pool's ready snapshots, as vmctl lists them."""
    p = h.vmctl("-j", "snapshots", "--workspace", POOL)
    if p.returncode != 0:
        return []
    return json.loads(p.stdout)["snapshots"]


def pool_vms(h):
    p = h.vmctl("-j", "--workspace", POOL, "list")
    if p.returncode != 0:
        raise RuntimeError("vmctl list: " + p.stdout + p.stderr)
    return json.loads(p.stdout)["vms"]


def wait_ready(h, what, but=()):
    """One ready pool snapshot (none of but) whose directory is whole."""
    def ready():
        s = [x for x in pool_snaps(h) if x["snapshot_id"] not in but]
        return s[0] if s and os.path.exists(os.path.join(
            snapdir(h, s[0]["snapshot_id"]), "memory.bin")) else None
    wait_for(ready, BUILD_S, what)
    return ready()


def key_of(h, sid):
    with open(os.path.join(snapdir(h, sid), "manifest.json")) as f:
        return json.load(f)["name"]


def leftovers(h):
    return sorted(d for d in os.listdir(snapdir(h))
                  if d.endswith(".part") or d.endswith(".del"))


def making(h):
    return any(d.endswith(".part") for d in os.listdir(snapdir(h)))


def lists_nothing(c):
    okv, v = c("vm_list")
    oks, s = c("vm_snapshot_list")
    return okv and oks and v["vms"] == [] and s["snapshots"] == []


def case_ready_and_take(h, a, b):
    s = wait_ready(h, "the first pool snapshot")
    sid = s["snapshot_id"]
    ok(s["memory"] is True and s["workspace"] == POOL,
       "ready: the pool holds a memory snapshot of its own workspace", s)
    ok(sorted(os.listdir(snapdir(h, sid))) ==
       ["disk.raw", "manifest.json", "memory.bin"],
       "ready: its directory is whole", os.listdir(snapdir(h, sid)))
    wait_for(lambda: pool_vms(h) == [], 60, "the pool's VM destroyed")
    ok(True, "ready: and its VM was destroyed")
    ok([x["network"] for x in pool_snaps(h)] == ["off"] and
       "network on not built now (guest networking is unavailable" in
       base.read(h.vmmd_log), "ready: without netd the pool keeps no "
       "network-on snapshot, and its log says why")
    ok(lists_nothing(a) and lists_nothing(b), "ready: no workspace lists "
       "the pool's VM or snapshot")
    okk, r = a("vm_create", request_id="warm-1", idle_seconds=0)
    ok(okk, "take: a plain vm_create succeeds", r)
    vm = r["vm_id"]
    okk, st = a("vm_status", vm_id=vm)
    ok(okk and st["origin"] == "warm" and st["state"] == "running" and
       st["snapshot_id"] is None,
       "take: vm_status says origin warm", st)
    ok(out(a, vm, "echo hello-from-warm", "w-echo") == "hello-from-warm",
       "take: the VM runs commands")
    # vmmd hashed the memory file as it made it; the restore checked that
    # the file is still that one instead of hashing it again (the damaged
    # case below shows a changed file is hashed, and refused).
    ok("snapshot %s: its memory file is the one vmmd digested as it made "
       "it; not hashed again" % sid in base.read(h.vmmd_log),
       "take: the restore did not hash the pool's memory file again")
    ok(not os.path.exists(snapdir(h, sid)) and
       sid not in [x["snapshot_id"] for x in pool_snaps(h)],
       "take: the snapshot served that one VM and is gone")
    ok(lists_nothing(b), "take: another workspace still lists nothing")
    return vm, sid


def case_loop(h, a, b, old):
    """While the pool refills, vm_list answers each time within 100 ms:
    the issue's bound for 'the pool never holds the loop' -- a loop held
    by the pool's work (a boot, a snapshot's file writes, its digest)
    would show as one call waiting for it."""
    worst, during, calls = 0.0, 0, 0
    deadline = time.monotonic() + BUILD_S
    ready = None
    while time.monotonic() < deadline:
        wrote = making(h)
        t = time.monotonic()
        okk, r = b("vm_list")
        dt = time.monotonic() - t
        calls += 1
        if not okk:
            ok(False, "loop: vm_list answers", r)
            return None
        if wrote or making(h):
            during += 1
            worst = max(worst, dt)
        s = [x for x in pool_snaps(h) if x["snapshot_id"] != old]
        if s and not making(h):
            ready = s[0]
            break
        time.sleep(0.02)
    ok(ready is not None, "refill: the pool is refilled after the take",
       ready)
    ok(during >= 10, "loop: %d vm_list calls while a pool snapshot was "
       "written (of %d)" % (during, calls), during)
    ok(worst < 0.1, "loop: the slowest of them took %.1f ms, under 100 ms"
       % (worst * 1000), worst)
    return ready


def case_key(h, a, old_sid):
    """A changed image digest retires the pool, cold boot, a new key."""
    old_key = key_of(h, old_sid)
    rc, _ = h.stop_vmmd()
    ok(rc == 0, "key: vmmd stops", rc)
    # Zero padding after an initramfs is skipped by the kernel: the image
    # still boots, its digest is another.
    path = h.image["initrd"][0]
    with open(path, "ab") as f:
        f.write(b"\0" * 512)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    h.image["initrd"] = (path, digest)
    h.write_conf(**CONF)
    h.start_vmmd()
    a.reconnect()
    ok(not os.path.exists(snapdir(h, old_sid)) and old_sid not in
       [x["snapshot_id"] for x in pool_snaps(h)],
       "key: the snapshot of the old key is retired at startup")
    ok("retired: its key is not the image's present one" in
       base.read(h.vmmd_log), "key: vmmd's log says why")
    okk, r = a("vm_create", request_id="cold-1", idle_seconds=0)
    ok(okk, "key: vm_create succeeds", r)
    okk, st = a("vm_status", vm_id=r["vm_id"])
    ok(okk and st["origin"] == "booted", "key: and cold-boots (origin "
       "booted)", st)
    a("vm_destroy", vm_id=r["vm_id"])
    s = wait_ready(h, "the pool rebuilt under the new key")
    new_key = key_of(h, s["snapshot_id"])
    ok(new_key != old_key and len(new_key) == 64,
       "key: the pool is rebuilt with a new key", (old_key, new_key))
    return s["snapshot_id"]


def case_damaged(h, a, sid):
    """A pool snapshot whose memory file is damaged is refused by the
    restore's check; the caller gets a booted VM, not the pool's error."""
    path = os.path.join(snapdir(h, sid), "memory.bin")
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))
    okk, r = a("vm_create", request_id="warm-damaged", idle_seconds=0)
    okk2, st = a("vm_status", vm_id=r["vm_id"]) if okk else (False, r)
    ok(okk2 and st["origin"] == "booted" and st["state"] == "running",
       "damaged: vm_create boots a VM instead of failing", st)
    ok("not restored from the warm pool" in base.read(h.vmmd_log) and
       not os.path.exists(snapdir(h, sid)), "damaged: vmmd says why, and "
       "the damaged snapshot is gone")
    if okk:
        a("vm_destroy", vm_id=r["vm_id"])
    return wait_ready(h, "the pool refilled after the damaged one",
                      but=(sid,))["snapshot_id"]


def case_kill(h, a, ready_sid):
    """kill -9 while the pool builds: nothing half made is left.  The
    take is a vm_run's: it uses the pool as a plain vm_create does."""
    okk, r = a("vm_run", request_id="warm-kill", command="echo warm-run")
    ok(okk and r["origin"] == "warm" and r["stdout"] == "warm-run\n",
       "kill: a plain vm_run takes the pool's snapshot (origin warm)", r)
    ok(not os.path.exists(snapdir(h, ready_sid)),
       "kill: and the snapshot served that one VM", ready_sid)
    wait_for(lambda: making(h), BUILD_S, "the pool's next snapshot being "
             "written")
    crashed = [v["vm_id"] for v in pool_vms(h)]
    h.kill_vmmd()
    ok(making(h) and len(crashed) == 1, "kill: vmmd killed while a pool "
       "snapshot's .part directory was being written, of pool VM %s" %
       crashed, os.listdir(snapdir(h)))
    h.start_vmmd()
    a.reconnect()
    ok(leftovers(h) == [], "kill: after the restart no .part or .del "
       "directory is left", os.listdir(snapdir(h)))
    ready = [x["snapshot_id"] for x in pool_snaps(h)]
    left = [d for d in os.listdir(snapdir(h)) if d not in ready]
    ok(left == [], "kill: no snapshot directory without its ready row",
       left)
    wait_for(lambda: not any(v["vm_id"] in crashed for v in pool_vms(h)),
             60, "the crash's pool VM gone")
    ok("left by an earlier vmmd; destroyed" in base.read(h.vmmd_log),
       "kill: the pool VM the crash left is destroyed at startup")
    s = wait_ready(h, "the pool ready again after the crash")
    wait_for(lambda: pool_vms(h) == [], 60, "the rebuilt pool's VM gone")
    ok(s is not None and s["snapshot_id"] != ready_sid,
       "kill: the pool is ready again, with no pool VM left", s)
    okk, r = a("vm_list")
    for v in r["vms"]:
        a("vm_destroy", vm_id=v["vm_id"])


def case_stop_while_building(h, a):
    """SIGTERM while a pool VM boots, with a tenant's VM running: the
    tenant's VM is hibernated, the pool VM destroyed, not waited for."""
    okk, r = a("vm_create", request_id="warm-stop", idle_seconds=0)
    okk2, st = a("vm_status", vm_id=r["vm_id"]) if okk else (False, r)
    ok(okk2 and st["origin"] == "warm" and st["state"] == "running",
       "stop: a tenant's VM is running, restored from the pool", st)
    wait_for(lambda: [v for v in pool_vms(h) if v["state"] == "creating"],
             BUILD_S, "the pool's next VM booting")
    booting = [v["vm_id"] for v in pool_vms(h)]
    mark = len(base.read(h.vmmd_log))
    rc, secs = h.stop_vmmd()
    log = base.read(h.vmmd_log)[mark:]
    ok(rc == 0 and "hibernated 1 VM(s); every VM is on disk" in log,
       "stop: SIGTERM while pool VM %s booted: vmmd hibernated the "
       "tenant's VM and exited 0 (%.1f s)" % (booting, secs), log[-3000:])
    ok("warm pool: VM %s destroyed: vmmd is stopping" % booting[0] in log
       if booting else False, "stop: the booting pool VM was destroyed "
       "at shutdown", log[-3000:])
    h.start_vmmd()
    a.reconnect()
    okk, st = a("vm_status", vm_id=r["vm_id"]) if okk else (False, r)
    ok(okk and st["state"] == "hibernated",
       "stop: after a restart the tenant's VM is hibernated", st)
    ok(not any(v["vm_id"] in booting for v in pool_vms(h)) and
       "left by an earlier vmmd" not in base.read(h.vmmd_log)[mark:],
       "stop: no pool VM was left for the next vmmd", pool_vms(h))
    if okk:
        a("vm_destroy", vm_id=r["vm_id"])


CONF = dict(warm_pool=1, max_vms=4, max_memory_mib=4 * base.VM_MIB)


def suite(h):
    h.write_conf(**CONF)
    h.start_authd()
    os.environ["MCPVM_TEST_DISK_DELAY_MS"] = "2000"
    h.start_vmmd()
    a = base.Client(h, h.issue("alpha"))
    b = base.Client(h, h.issue("beta"))
    ok(lists_nothing(a), "while the pool builds, the workspace lists "
       "nothing")
    vm, sid = case_ready_and_take(h, a, b)
    s = case_loop(h, a, b, sid)
    ok(lists_nothing(b), "after the refill, another workspace still lists "
       "nothing")
    a("vm_destroy", vm_id=vm)
    if s is None:
        return
    sid = case_key(h, a, s["snapshot_id"])
    sid = case_damaged(h, a, sid)
    case_kill(h, a, sid)
    case_stop_while_building(h, a)
    del os.environ["MCPVM_TEST_DISK_DELAY_MS"]
    rc, secs = h.stop_vmmd()
    ok(rc == 0, "vmmd exits 0 (%.1f s)" % secs, rc)


def main():
    base.run_suite("vmmd-warmpool", suite)


if __name__ == "__main__":
    main()
