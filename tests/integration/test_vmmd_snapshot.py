#!/usr/bin/env python3
# Snapshots against a real vmmd with real QEMU TCG VMs on the XFS volume
# (vmmdlib.py's frame): a disk-only snapshot that later VMs boot on and
# that several share without changing it; a memory snapshot whose process
# goes on running, with its memory, in the VM restored from it, and
# independently of the source; vm_run from a stage and committing one
# (files written without sync are in it, a failure or a retry commits
# nothing more, a snapshot quota is said); vm_fork into two children, the process
# running on in each; ownership, quotas and retry receipts; and
# kill -9 of vmmd while a snapshot is made and while one is restored,
# and a damaged memory file that is refused before anything is restored.
#
# vmmd's disk failpoint (MCPVM_TEST_DISK_DELAY_MS, vmmd/disk.c and
# vmmd/snapshot.c) holds each disk job on the worker pool, the snapshot's
# clone included, so that the kill lands while the snapshot is made.
#
# Environment: as vmmdlib.py.  TAP on stdout.  Needs root.
import base64
import hashlib
import json
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmmdlib as base  # noqa: E402
from vmmdlib import ok, wait_for  # noqa: E402
from vmmdlib import COUNTER, snap, snapdir, out, counter  # noqa: E402

MEM = base.MEM

def sha256(path):
    d = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            d.update(b)
    return d.hexdigest()


def create(c, rid, **kw):
    okk, r = c("vm_create", request_id=rid, idle_seconds=0, **kw)
    if not okk:
        raise RuntimeError("vm_create %s: %r" % (rid, r))
    return r["vm_id"]


def destroy(c, *vms):
    for vm in vms:
        c("vm_destroy", vm_id=vm)


def case_disk(h, a, b):
    """A disk-only snapshot: a stage later VMs boot on, shared, unchanged."""
    src = create(a, "src-1", memory_mib=MEM)
    # As a user would: no sync before the snapshot (vmmd has the guest
    # sync and freeze its file systems).
    out(a, src, "echo before > /workspace/before", "w-before")
    okk, s = snap(a, vm_id=src, request_id="s-disk",
               name="stage-1")
    ok(okk and s["memory"] is False and s["source_vm_id"] == src and
       s["name"] == "stage-1" and s["paused_ms"] >= 0 and
       s["size_bytes"] > 0, "disk: vm_snapshot returns the snapshot, "
       "paused %s ms" % (s.get("paused_ms") if okk else "-"), s)
    sid = s["snapshot_id"]
    okk, again = snap(a, vm_id=src, request_id="s-disk",
                   name="stage-1")
    ok(okk and again["snapshot_id"] == sid, "disk: the retried request_id "
       "returns the same snapshot", again)
    okk, r = a("vm_snapshot_list")
    ok(okk and [x["snapshot_id"] for x in r["snapshots"]] == [sid],
       "disk: vm_snapshot_list lists it once", r)
    d = snapdir(h, sid)
    ok(sorted(os.listdir(d)) == ["disk.raw", "manifest.json"],
       "disk: its directory holds disk.raw and manifest.json",
       os.listdir(d))
    m = json.load(open(os.path.join(d, "manifest.json")))
    ok(m["id"] == sid and m["workspace"] == "alpha" and
       m["memory"] is False and m["source_vm"] == src and
       m["image_sha256"]["rootfs"] == h.image["rootfs"][1],
       "disk: the manifest describes it", m)
    before = sha256(os.path.join(d, "disk.raw"))
    out(a, src, "echo after > /workspace/after", "w-after")
    okk, st = a("vm_status", vm_id=src)
    ok(okk and st["state"] == "running" and st["origin"] == "booted" and
       st["snapshot_id"] is None, "disk: the source runs on, booted", st)

    c1 = create(a, "from-disk-1", snapshot=sid, memory_mib=MEM)
    c2 = create(a, "from-disk-2", snapshot=sid, memory_mib=MEM)
    okk, st = a("vm_status", vm_id=c1)
    ok(okk and st["origin"] == "snapshot" and st["snapshot_id"] == sid,
       "disk: vm_status says the VM came from the snapshot", st)
    ok(out(a, c1, "cat /workspace/before", "r1") == "before",
       "disk: a file written before the snapshot is in the new VM")
    ok(out(a, c1, "test -e /workspace/after && echo yes || echo no",
           "r2") == "no",
       "disk: a file written in the source afterwards is not")
    for vm, tag in ((src, "src"), (c1, "c1"), (c2, "c2")):
        out(a, vm, "echo %s > /workspace/mine" % tag, "w-" + tag)
    seen = {tag: out(a, vm, "cat /workspace/mine; ls /workspace | "
                     "tr '\\n' ' '", "rd-" + tag)
            for vm, tag in ((src, "src"), (c1, "c1"), (c2, "c2"))}
    ok(seen["src"].startswith("src") and "after" in seen["src"] and
       seen["c1"].startswith("c1") and "after" not in seen["c1"] and
       seen["c2"].startswith("c2") and "after" not in seen["c2"],
       "disk: the source and both new VMs diverge, each with its own "
       "writes", seen)
    destroy(a, c1, c2)
    ok(sha256(os.path.join(d, "disk.raw")) == before,
       "disk: two VMs from one snapshot left its disk.raw unchanged")

    # Another workspace's snapshot is as absent as one that never was.
    okk, r = b("vm_snapshot_list")
    ok(okk and r["snapshots"] == [], "another workspace lists none", r)
    okk, r = b("vm_snapshot_delete", snapshot_id=sid)
    ok(not okk and r["code"] == "not_found", "another workspace's "
       "delete: not_found", r)
    okk, r = b("vm_create", request_id="b-from", snapshot=sid)
    ok(not okk and r["code"] == "not_found" and sid in r["message"],
       "another workspace's create from it: not_found", r)
    okk, r = a("vm_create", request_id="a-none", snapshot="0" * 32)
    ok(not okk and r["code"] == "not_found", "a snapshot that never "
       "was: not_found, the same", r)
    return src, sid


def case_run(h, a, b, sid):
    """vm_run with stages: from a snapshot, and leaving one behind."""
    okk, r = a("vm_run", request_id="run-stage", snapshot=sid,
               memory_mib=MEM, command="cat /workspace/before")
    ok(okk and r["exit_code"] == 0 and r["stdout"] == "before\n" and
       r["origin"] == "snapshot" and "commit" not in r,
       "run: vm_run from a stage sees its files, origin snapshot", r)
    okk, r = b("vm_run", request_id="run-b", snapshot=sid, command="true")
    ok(not okk and r["code"] == "not_found", "run: another workspace's "
       "stage is not_found", r)
    # As a user would: no sync; the commit's freeze makes it durable.
    args = dict(request_id="run-commit", snapshot=sid, memory_mib=MEM,
                commit={"name": "stage-2"},
                command="cp /workspace/before /workspace/two && "
                "head -c 4M /dev/urandom > /workspace/big && "
                "sha256sum < /workspace/big")
    okk, r = a("vm_run", **args)
    c = r.get("commit", {}) if okk else {}
    ok(okk and r["exit_code"] == 0 and r["origin"] == "snapshot" and
       c.get("committed") is True and c.get("name") == "stage-2" and
       len(c.get("snapshot_id", "")) == 32 and "reason" not in c,
       "run: commit on exit 0 makes a snapshot and names it", r)
    if not okk or not c.get("committed"):
        return
    sid2, digest = c["snapshot_id"], r["stdout"].split()[0]
    okk, again = a("vm_run", **args)
    ok(okk and again == r, "run: the retried commit (same request_id) "
       "returns the same answer, the same snapshot", again)
    okk, l = a("vm_snapshot_list")
    two = [x for x in l["snapshots"] if x["name"] == "stage-2"] if okk \
        else []
    ok(len(two) == 1 and two[0]["snapshot_id"] == sid2 and
       two[0]["memory"] is False and two[0]["source_vm_id"] == r["vm_id"],
       "run: one snapshot stage-2 is listed, disk-only, of the run's VM", l)
    okk, r = a("vm_run", request_id="run-after", snapshot=sid2,
               memory_mib=MEM, command="cat /workspace/two; "
               "sha256sum < /workspace/big")
    ok(okk and r["stdout"] == "before\n%s  -\n" % digest,
       "run: a later vm_run from the commit sees what the command wrote "
       "without sync, byte for byte", r)
    okk, r = a("vm_run", request_id="run-fail", snapshot=sid2,
               memory_mib=MEM, commit={"name": "stage-3"},
               command="echo x > /workspace/x; exit 3")
    c = r.get("commit", {}) if okk else {}
    ok(okk and r["exit_code"] == 3 and c.get("committed") is False and
       c.get("name") == "stage-3" and "snapshot_id" not in c and
       "code" not in c and "exited with 3" in c.get("reason", ""),
       "run: a failing command commits nothing, and says why", r)
    okk, l2 = a("vm_snapshot_list")
    ok(okk and sorted(x["snapshot_id"] for x in l2["snapshots"]) ==
       sorted(x["snapshot_id"] for x in l["snapshots"]),
       "run: and no snapshot was added", l2)
    okk, r = a("vm_snapshot_delete", snapshot_id=sid2)
    ok(okk, "run: the committed stage deletes as any snapshot", r)


# 200 files of 32 B to 1.6 KiB, each its own bytes, written without sync;
# then the digest of all of them, in the order of their names.
WRITE_200 = r"""
import hashlib, os, sys
d = "/workspace/c" + sys.argv[1]
os.makedirs(d)
for k in range(200):
    with open("%s/f%03d" % (d, k), "wb") as f:
        f.write(hashlib.sha256(b"%s-%d" % (sys.argv[1].encode(), k))
                .digest() * (k % 50 + 1))
"""
DIGEST_DIR = "cd /workspace/c%d && ls | wc -l && cat $(ls) | sha256sum"


def case_consistent(h, a, src):
    """Five disk-only snapshots, each right after 200 files were written
    without sync: every file is in the VM made from it, byte for byte."""
    okk, r = a("vm_write_file", vm_id=src, path="write200.py",
               data_base64=base64.b64encode(WRITE_200.encode()).decode())
    if not ok(okk, "consistency: the writer is in the VM", r):
        return
    held = 0
    for i in range(1, 6):
        out(a, src, "python3 /workspace/write200.py %d" % i, "w200-%d" % i)
        want = out(a, src, DIGEST_DIR % i, "d200-%d" % i)
        okk, s = snap(a, vm_id=src, request_id="s-200-%d" % i)
        if not okk:
            ok(False, "consistency: snapshot %d right after the writes" % i,
               s)
            continue
        vm = create(a, "from-200-%d" % i, snapshot=s["snapshot_id"],
                    memory_mib=MEM)
        got = out(a, vm, DIGEST_DIR % i, "g200-%d" % i)
        if got == want and want.startswith("200\n"):
            held += 1
        else:
            print("# snapshot %d: source %r, its VM %r" % (i, want, got))
        destroy(a, vm)
        a("vm_snapshot_delete", snapshot_id=s["snapshot_id"])
    ok(held == 5, "consistency: 200 files written without sync just before "
       "each of 5 disk-only snapshots are all in the VMs made from them, "
       "byte for byte (%d of 5)" % held)


def case_memory(h, a, src):
    """A memory snapshot: the process goes on in the restored VM."""
    okk, r = a("vm_write_file", vm_id=src, path="counter.py",
               data_base64=base64.b64encode(COUNTER.encode()).decode())
    ok(okk, "memory: the counter script is written", r)
    okk, r = a("vm_exec", vm_id=src, request_id="counter",
               command="python3 /workspace/counter.py",
               timeout_seconds=3600)
    ok(okk, "memory: the counter runs as a job", r)
    wait_for(lambda: counter(a, src, "c-%d" % time.monotonic_ns())[1] > 3,
             60, "the counter")
    okk, s = snap(a, vm_id=src, request_id="s-mem", memory=True,
               name="with-memory")
    ok(okk and s["memory"] is True and s["paused_ms"] > 0,
       "memory: vm_snapshot with memory, the source paused %s ms" %
       (s.get("paused_ms") if okk else "-"), s)
    msid = s["snapshot_id"]
    tok_src, n_src = counter(a, src, "c-after")
    d = snapdir(h, msid)
    ok(sorted(os.listdir(d)) == ["disk.raw", "manifest.json", "memory.bin"],
       "memory: its directory holds disk.raw, memory.bin, manifest.json",
       os.listdir(d))
    m = json.load(open(os.path.join(d, "manifest.json")))
    ok(m["memory_sha256"] == sha256(os.path.join(d, "memory.bin")) and
       m["memory_bytes"] == os.path.getsize(os.path.join(d, "memory.bin")),
       "memory: the manifest has memory.bin's size and SHA-256")

    okk, r = a("vm_create", request_id="m-bad", snapshot=msid,
               memory_mib=MEM * 2)
    ok(not okk and r["code"] == "invalid_argument" and
       r["message"].startswith("memory_mib"),
       "memory: another memory_mib is invalid_argument naming it", r)
    clone = create(a, "from-mem-1", snapshot=msid)
    okk, st = a("vm_status", vm_id=clone)
    ok(okk and st["origin"] == "snapshot" and st["memory_mib"] == MEM and
       st["state"] == "running", "memory: the VM restored from it runs",
       st)
    tok_c, n_c = counter(a, clone, "cc-1")
    ok(tok_c == tok_src, "memory: the process runs on in the restored VM "
       "with the memory it had (token %s)" % tok_c, (tok_c, tok_src))
    wait_for(lambda: counter(a, clone, "cc-%d" % time.monotonic_ns())[1] >
             n_c + 3, 60, "the restored counter to count")
    ok(True, "memory: and it goes on counting there (from %d)" % n_c)
    out(a, src, "pkill -f counter.py; sleep 0.5; true", "kill-src")
    _, n_stop = counter(a, src, "c-stopped")
    _, n_c2 = counter(a, clone, "cc-x")
    time.sleep(1.5)
    _, n_stop2 = counter(a, src, "c-stopped2")
    _, n_c3 = counter(a, clone, "cc-y")
    ok(n_stop2 == n_stop and n_c3 > n_c2, "memory: stopped in the source, "
       "it counts on in the restored VM: independent",
       (n_stop, n_stop2, n_c2, n_c3))
    destroy(a, clone)
    return msid



IDENTITY = ("echo machine_id=$(cat /etc/machine-id); "
            "echo boot_id=$(cat /proc/sys/kernel/random/boot_id); "
            "echo hostname=$(hostname); python3 -c 'import os, uuid; "
            "print(\"urandom=\" + os.urandom(32).hex()); "
            "print(\"uuid4=\" + str(uuid.uuid4()))'")
IDENTITY_NAMES = ("machine_id", "boot_id", "hostname", "urandom", "uuid4")


def identity_of(a, vm, rid):
    kv = dict(line.split("=", 1) for line in
              out(a, vm, IDENTITY, rid).splitlines() if "=" in line)
    return {k: kv.get(k, "") for k in IDENTITY_NAMES}


def case_identity(h, a, src, msid):
    """Three clones of one memory snapshot are three machines: machine-id,
    boot id, hostname and the random bytes their processes draw differ
    between them, and from the source they were made of."""
    source = identity_of(a, src, "id-src")
    clones = [create(a, "id-%d" % i, snapshot=msid) for i in range(3)]
    seen = [identity_of(a, vm, "id-x%d" % i) for i, vm in enumerate(clones)]
    for name in IDENTITY_NAMES:
        vals = [v[name] for v in seen]
        ok(all(vals) and len(set(vals)) == 3 and source[name] not in vals,
           "identity: %s differs between the 3 clones, and from the "
           "source's" % name, (vals, source[name]))
    okk, st = a("vm_status", vm_id=clones[0])
    ok(okk and st["origin"] == "snapshot" and st["snapshot_id"] == msid,
       "identity: a clone's vm_status says where it came from", st)
    destroy(a, *clones)

# A long history: the issue's 100,000 job rows.  KEPT is
# max_finished_jobs_per_vm's default.
HISTORY = 100000
KEPT = 1024


def job_counts(h, vm):
    """(finished, running) rows of vm's jobs, read as an operator would."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(h.mnt, "vmmd.db"),
                         uri=True, timeout=10)
    try:
        return db.execute(
            "SELECT COALESCE(SUM(state <> 'running'), 0), "
            "COALESCE(SUM(state = 'running'), 0) FROM jobs WHERE vm_id = ?",
            (vm,)).fetchone()
    finally:
        db.close()


def case_fork(h, a, src):
    """vm_fork: the process runs on in each child, independently."""
    # The first counter's last count must not pass for this one's: a fork
    # made before this one has drawn its token would give each child a
    # token of its own, drawn after the child's reseed.
    out(a, src, "rm -f /workspace/counter", "rm-counter")
    okk, r = a("vm_exec", vm_id=src, request_id="counter-2",
               command="python3 /workspace/counter.py",
               timeout_seconds=3600)
    ok(okk, "fork: a counter runs in the source again", r)
    job = r.get("job_id") if okk else None
    wait_for(lambda: counter(a, src, "f-%d" % time.monotonic_ns())[1] > 3,
             60, "the counter")
    before = sorted(os.listdir(snapdir(h)))
    okk, r = a("vm_fork", vm_id=src, request_id="fork-3", count=3)
    ok(not okk and r["code"] == "quota_exceeded" and
       r["message"].startswith("max_fork_count"),
       "fork: count over max_fork_count is quota_exceeded naming it", r)
    # The source has a long history: the children's copies of it are
    # made off vmmd's loop, which answers others meanwhile.
    base.add_history(h, src, HISTORY)
    t0 = time.monotonic()
    fk = base.Call(h, a.tok, "vm_fork", vm_id=src, request_id="fork-1",
                   count=2)
    waits = []
    while fk.res is None:
        t = time.monotonic()
        okk, r = a("vm_list")
        if fk.res is None and okk:
            waits.append(time.monotonic() - t)
        time.sleep(0.05)
    fk.join()
    took = time.monotonic() - t0
    okk, f = fk.res
    ok(okk and len(f["vm_ids"]) == 2 and f["source_vm_id"] == src and
       f["paused_ms"] > 0, "fork: two VMs forked, the source paused %s ms"
       % (f.get("paused_ms") if okk else "-"), f)
    ok(okk and waits, "fork: with %d finished jobs in the source's history, "
       "vm_fork took %.1f s, and %d vm_list calls were answered meanwhile, "
       "the slowest in %.0f ms" % (HISTORY, took, len(waits),
                                   max(waits or [0]) * 1000), waits)
    kids = f["vm_ids"] if okk else []
    counts = [job_counts(h, k) for k in kids]
    ok(counts and all(fin == KEPT and run >= 1 for fin, run in counts),
       "fork: each child has the newest %d of the source's finished jobs "
       "and its running ones" % KEPT, counts)
    okk, again = a("vm_fork", vm_id=src, request_id="fork-1", count=2)
    ok(okk and again["vm_ids"] == kids, "fork: the retried request_id "
       "returns the same VMs, no more", again)
    # Renamed to .del at once, its files removed on vmmd's worker pool.
    base.settle(lambda: sorted(os.listdir(snapdir(h))) == before)
    ok(sorted(os.listdir(snapdir(h))) == before, "fork: its snapshot is "
       "not kept", (before, os.listdir(snapdir(h))))
    okk, r = a("vm_snapshot_list")
    ok(okk and len(r["snapshots"]) == 2, "fork: nor listed", r)
    tok_src, _ = counter(a, src, "f-src")
    # That exec finished: the source's history is cut to the cap.
    fin, run = job_counts(h, src)
    ok(fin == KEPT, "history: a job that finished cut the source's %d "
       "finished jobs to max_finished_jobs_per_vm, %d" % (HISTORY, KEPT),
       (fin, run))
    toks = {}
    for i, k in enumerate(kids):
        okk, st = a("vm_status", vm_id=k)
        ok(okk and st["origin"] == "fork" and st["snapshot_id"] is None and
           st["state"] == "running" and
           job in [j["job_id"] for j in st["jobs"]],
           "fork: child %d runs, origin fork, with the source's job %s "
           "in its vm_status" % (i, job), st)
        toks[k] = counter(a, k, "fk-%d" % i)
    ok(all(t == tok_src for t, _ in toks.values()), "fork: the process "
       "runs on in each child with its memory (token %s)" % tok_src,
       (tok_src, toks))
    out(a, kids[0], "pkill -f counter.py; sleep 0.5; true", "kill-k0")
    _, k0 = counter(a, kids[0], "k0-a")
    _, k1 = counter(a, kids[1], "k1-a")
    _, s0 = counter(a, src, "s-a")
    time.sleep(1.5)
    _, k0b = counter(a, kids[0], "k0-b")
    _, k1b = counter(a, kids[1], "k1-b")
    _, s0b = counter(a, src, "s-b")
    ok(k0b == k0 and k1b > k1 and s0b > s0, "fork: stopped in one child, "
       "it counts on in the other and in the source: independent",
       (k0, k0b, k1, k1b, s0, s0b))
    # The guest runs 4 jobs at once (its counter is one): the exec past
    # them is refused, and leaves no row, so refusals never add up.
    refused, before = None, None
    for i in range(5):
        before = job_counts(h, kids[1])
        okk, r = a("vm_exec", vm_id=kids[1], request_id="busy-%d" % i,
                   command="sleep 120")
        if not okk:
            refused = r
            break
    after = job_counts(h, kids[1])
    ok(refused is not None and refused["code"] == "quota_exceeded" and
       after == before, "jobs: an exec the guest refuses for the jobs it "
       "runs leaves no row (%s rows before and after)" % (after,),
       (refused, before, after))
    destroy(a, *kids)
    out(a, src, "pkill -f counter.py; true", "kill-src-2")


def case_limits(h, a, src, sid):
    """max_snapshots_per_workspace (3 here), storage, delete."""
    okk, s3 = snap(a, vm_id=src, request_id="s-3")
    ok(okk, "limits: a third snapshot fits", s3)
    okk, r = snap(a, vm_id=src, request_id="s-4")
    ok(not okk and r["code"] == "quota_exceeded" and
       r["message"].startswith("max_snapshots_per_workspace"),
       "limits: a fourth is quota_exceeded naming "
       "max_snapshots_per_workspace", r)
    okk, r = a("vm_run", request_id="run-over", snapshot=sid,
               memory_mib=MEM, commit={"name": "over"}, command="true")
    c = r.get("commit", {}) if okk else {}
    ok(okk and r["exit_code"] == 0 and c.get("committed") is False and
       c.get("code") == "quota_exceeded" and
       c.get("reason", "").startswith("max_snapshots_per_workspace"),
       "limits: a vm_run whose commit is over the quota still answers, "
       "with the snapshot's error", r)
    okk, r = a("vm_snapshot_delete", snapshot_id=s3["snapshot_id"])
    ok(okk and r == {"snapshot_id": s3["snapshot_id"], "deleted": True},
       "limits: vm_snapshot_delete deletes it", r)
    ok(not os.path.exists(snapdir(h, s3["snapshot_id"])),
       "limits: and its directory is gone at once (renamed away)")
    okk, r = a("vm_create", request_id="from-deleted",
               snapshot=s3["snapshot_id"])
    ok(not okk and r["code"] == "not_found", "limits: creating from a "
       "deleted snapshot is not_found", r)
    okk, r = a("vm_snapshot_delete", snapshot_id=s3["snapshot_id"])
    ok(not okk and r["code"] == "not_found", "limits: deleting it again "
       "is not_found", r)
    # alpha holds its VM's disk and two snapshots (about 3 + 3 + 3.3 GiB).
    h.authctl("policy", "set", "--workspace", "alpha", "--storage-gib",
              "10")
    okk, r = snap(a, vm_id=src, request_id="s-5")
    ok(not okk and r["code"] == "quota_exceeded" and
       r["message"].startswith("workspace storage_gib"),
       "limits: a snapshot past the workspace's storage_gib is "
       "quota_exceeded naming it", r)
    okk, r = a("vm_create", request_id="c-over", snapshot=sid)
    ok(not okk and r["code"] == "quota_exceeded" and
       r["message"].startswith("workspace storage_gib"),
       "limits: snapshots count against a new VM's storage too", r)
    h.authctl("policy", "set", "--workspace", "alpha", "--storage-gib",
              "1000")


def case_kill_making(h, a, src):
    """kill -9 while the snapshot's disk is cloned, with the guest's file
    systems frozen for it: none is left, and the guest is thawed."""
    call = base.Call(h, a.tok, "vm_snapshot", vm_id=src, request_id="s-crash")
    parts = lambda: [p for p in os.listdir(snapdir(h))  # noqa: E731
                     if p.endswith(".part")]
    wait_for(parts, 30, "a snapshot being made")
    ok(True, "crash: the snapshot is being made in %s" % parts()[0])
    # The freeze and QEMU's stop follow the .part directory within a few
    # hundred ms; the failpoint then holds the clone 3 s.  The kill lands
    # in that hold, with the guest frozen.
    time.sleep(1)
    h.kill_vmmd()
    call.join(10)
    h.start_vmmd()
    a.reconnect()
    left = os.listdir(snapdir(h))
    ok(not any(p.endswith(".part") or p.endswith(".del") for p in left),
       "crash: after the restart no .part or .del directory is left", left)
    okk, r = a("vm_snapshot_list")
    ids = [x["snapshot_id"] for x in r["snapshots"]] if okk else []
    ok(okk and len(ids) == 2 and all(i in left for i in ids) and
       len(left) == 2, "crash: only the complete snapshots are listed, "
       "each with its directory", (r, left))
    # guestd would thaw by itself only after 60 s of guest time, and
    # refuses an exec while frozen: this one runs because the new vmmd
    # thawed the VM it took up.
    try:
        st, code, o, e = a.sh(src, "echo thawed > /workspace/thawed && "
                              "cat /workspace/thawed", "after-freeze-kill")
    except RuntimeError as x:
        st, code, o, e = "refused", -1, "", str(x)
    ok(code == 0 and o == "thawed\n", "crash while frozen: the VM taken up "
       "is thawed, and its file systems take writes", (st, code, o, e))
    return ids


def case_kill_restoring(h, a, msid):
    """kill -9 while a VM is restored: the snapshot is whole, and works."""
    d = snapdir(h, msid)
    before = (sha256(os.path.join(d, "disk.raw")),
              sha256(os.path.join(d, "memory.bin")))
    call = base.Call(h, a.tok, "vm_create", request_id="r-crash",
                     snapshot=msid, idle_seconds=0)

    def creating():
        okk, r = a("vm_list")
        return okk and any(v["state"] == "creating" for v in r["vms"])
    wait_for(creating, 30, "the VM being restored")
    time.sleep(1)
    h.kill_vmmd()
    call.join(10)
    h.start_vmmd()
    a.reconnect()
    okk, r = a("vm_snapshot_list")
    ok(okk and msid in [x["snapshot_id"] for x in r["snapshots"]],
       "crash: the snapshot a restore was reading is still listed", r)
    after = (sha256(os.path.join(d, "disk.raw")),
             sha256(os.path.join(d, "memory.bin")))
    ok(after == before, "crash: and its files are unchanged")
    okk, r = a("vm_list")
    destroy(a, *[v["vm_id"] for v in r["vms"]])
    clone = create(a, "r-after", snapshot=msid)
    okk, st = a("vm_status", vm_id=clone)
    ok(okk and st["state"] == "running", "crash: a restore from it works "
       "after the restart", st)
    tok, n = counter(a, clone, "ra-1")
    ok(tok is not None and n > 0, "crash: with its process's state "
       "(%s %d)" % (tok, n))
    destroy(a, clone)


def case_damaged(h, a, msid):
    """A flipped byte in memory.bin: refused, naming it, nothing runs."""
    path = os.path.join(snapdir(h, msid), "memory.bin")
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))
    okk, r = a("vm_create", request_id="r-damaged", snapshot=msid)
    ok(not okk and r["code"] == "conflict" and "memory.bin" in
       r["message"], "damaged: a flipped byte in memory.bin is refused "
       "before the restore, naming the file", r)
    okk, r = a("vm_list")
    ok(okk and r["vms"] == [], "damaged: and no VM is left of it", r)


def suite(h):
    # The source and three clones of it at once (case_identity).
    h.write_conf(max_snapshots_per_workspace=3, max_fork_count=2, max_vms=4,
                 max_memory_mib=4 * base.VM_MIB)
    h.start_authd()
    h.start_vmmd()
    a = base.Client(h, h.issue("alpha"))
    b = base.Client(h, h.issue("beta"))
    h.authctl("policy", "set", "--workspace", "alpha", "--max-vms", "8",
              "--storage-gib", "1000")
    src, sid = case_disk(h, a, b)
    case_run(h, a, b, sid)
    case_consistent(h, a, src)
    msid = case_memory(h, a, src)
    case_identity(h, a, src, msid)
    case_fork(h, a, src)
    case_limits(h, a, src, sid)
    rc, _ = h.stop_vmmd()
    ok(rc == 0, "vmmd exits 0 with snapshots kept", rc)
    # The disk failpoint holds the snapshot's clone (and each disk job
    # of a create) 3 s on the worker pool.
    os.environ["MCPVM_TEST_DISK_DELAY_MS"] = "3000"
    h.start_vmmd()
    del os.environ["MCPVM_TEST_DISK_DELAY_MS"]
    a.reconnect()
    okk, r = a("vm_snapshot_list")
    ok(okk and sorted(x["snapshot_id"] for x in r["snapshots"]) ==
       sorted([sid, msid]), "both snapshots survive the restart", r)
    # The source is hibernated now (vmmd's SIGTERM did that).
    okk, r = snap(a, vm_id=src, request_id="s-hib-mem", memory=True)
    ok(not okk and r["code"] == "conflict" and "resume" in r["message"],
       "a memory snapshot of a hibernated VM is conflict: resume first", r)
    okk, r = snap(a, vm_id=src, request_id="s-hib")
    ok(okk and r["paused_ms"] == 0 and r["memory"] is False,
       "a disk-only snapshot of a hibernated VM clones its disk as it is",
       r)
    okk, st = a("vm_status", vm_id=src)
    ok(okk and st["state"] == "hibernated", "and the VM stays hibernated",
       st)
    if okk:
        a("vm_snapshot_delete", snapshot_id=r.get("snapshot_id", ""))
    okk, r = a("vm_resume", vm_id=src)
    ok(okk and r["state"] == "running", "the source resumes", r)
    case_kill_making(h, a, src)
    case_kill_restoring(h, a, msid)
    case_damaged(h, a, msid)
    p = h.vmctl("-j", "snapshots", "--workspace", "alpha")
    ok(p.returncode == 0 and sorted(x["snapshot_id"] for x in json.loads(
        p.stdout)["snapshots"]) == sorted([sid, msid]),
       "vmctl -j snapshots --workspace lists alpha's", p.stdout + p.stderr)
    p = h.vmctl("snapshot-delete", msid)
    ok(p.returncode == 0 and not os.path.exists(snapdir(h, msid)),
       "vmctl snapshot-delete deletes one", p.stdout + p.stderr)
    p = h.vmctl("snapshots")
    ok(p.returncode == 0 and sid in p.stdout and msid not in p.stdout,
       "vmctl snapshots lists what is left", p.stdout + p.stderr)
    p = h.vmctl("audit", "verify")
    ok(p.returncode == 0, "the audit chain holds", p.stdout + p.stderr)
    log = base.read(os.path.join(h.mnt, "audit.log"))
    ok(all(t in log for t in ('"vm_snapshot"', '"vm_snapshot_delete"',
                              '"vm_create:snapshot"', '"vm_run:snapshot"',
                              '"vm_run:commit"',
                              '"vmctl:snapshot-delete"')),
       "the audit log has the making, deleting and creating from "
       "snapshots", log[-2000:])
    rc, secs = h.stop_vmmd()
    ok(rc == 0, "vmmd exits 0 (%.1f s)" % secs, rc)


def main():
    base.run_suite("vmmd-snapshot", suite)


if __name__ == "__main__":
    main()
