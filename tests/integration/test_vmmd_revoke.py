#!/usr/bin/env python3
# A workspace's snapshots go with it (vmmd/snapshot_revoke.c), against a
# real authd and a real vmmd with real QEMU TCG VMs on the XFS volume
# (vmmdlib.py's frame):
#   - authctl revoke-workspace deletes the workspace's snapshots, disk-only
#     and with memory, each audited, and leaves another workspace's whole
#     and usable, and the VMs of the revoked one alone; a credential
#     revoked alone deletes nothing;
#   - a revoke made while vmmd is stopped, and one made while authd was
#     restarted where vmmd could not reach it, are found by vmmd's
#     IPC_AUTH_REVOKED query after it subscribes again;
#   - a snapshot being made when its workspace is revoked is deleted as it
#     becomes ready, and its caller hears unauthorized.
#
# Environment: as vmmdlib.py.  TAP on stdout.  Needs root.
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmmdlib as base  # noqa: E402
from vmmdlib import ok, wait_for  # noqa: E402
from vmmdlib import snap, snapdir  # noqa: E402

MEM = base.MEM
ACTOR = "authd:revoke-workspace"


def create(c, rid, **kw):
    okk, r = c("vm_create", request_id=rid, idle_seconds=0, memory_mib=MEM,
               **kw)
    if not okk:
        raise RuntimeError("vm_create %s: %r" % (rid, r))
    return r["vm_id"]


def one_snapshot(c, ws, memory=False, keep=False):
    """A VM of c's, a snapshot of it, and the VM destroyed unless keep."""
    vm = create(c, "src-" + ws)
    st, code, o, e = c.sh(vm, "echo %s > /workspace/mark && sync" % ws,
                          "w-" + ws)
    okk, s = snap(c, vm_id=vm, request_id="s-" + ws, memory=memory)
    if not okk:
        raise RuntimeError("vm_snapshot %s: %r" % (ws, s))
    if not keep:
        c("vm_destroy", vm_id=vm)
    return vm, s["snapshot_id"]


def listed(h):
    p = h.vmctl("-j", "snapshots")
    if p.returncode != 0:
        raise RuntimeError("vmctl snapshots: " + p.stdout + p.stderr)
    return {x["snapshot_id"]: x["workspace"]
            for x in json.loads(p.stdout)["snapshots"]}


def gone(h, *sids):
    """Every one of sids has neither a directory nor a row."""
    left = os.listdir(snapdir(h))
    rows = listed(h)
    return not any(s in rows or any(p.startswith(s) for p in left)
                   for s in sids)


def audit_lines(h):
    with open(os.path.join(h.mnt, "audit.log")) as f:
        return [json.loads(x) for x in f if x.strip()]


def audited(h, ws, sid):
    return any(x["tool"] == ACTOR and x["workspace"] == ws and
               x["vm"] == sid and x["outcome"] == "ok"
               for x in audit_lines(h))


def start_authd_away(h):
    """authd on a socket vmmd does not use: up for authctl, out of
    vmmd's reach."""
    alt = h.conf + ".away"
    with open(h.conf) as f:
        text = f.read()
    with open(alt, "w") as f:
        f.write(text.replace("[authd]\n", "[authd]\nsocket = %s\n" %
                             os.path.join(h.run, "authd-away.sock"), 1))
    conf, h.conf = h.conf, alt
    try:
        h.start_authd()
    finally:
        h.conf = conf


def stop_authd(h):
    h.authd.terminate()
    h.authd.wait(10)
    h.authd = None


def case_event(h, a, b, sa, sam, sb, vma):
    h.authctl("revoke-workspace", "--workspace", "rv-a")
    wait_for(lambda: gone(h, sa, sam), 30, "rv-a's snapshots deleted")
    ok(True, "event: rv-a's disk and memory snapshots are gone, directory "
       "and row")
    rows = listed(h)
    ok(rows.get(sb) == "rv-b" and sa not in rows and sam not in rows,
       "event: vmctl snapshots lists rv-b's only of the two workspaces",
       rows)
    ok(audited(h, "rv-a", sa) and audited(h, "rv-a", sam),
       "event: the audit log has both deletions as %s" % ACTOR,
       audit_lines(h)[-6:])
    log = base.read(h.vmmd_log)
    ok("workspace rv-a revoked (event): 2 snapshots deleted" in log,
       "event: vmmd logs one line with the count", log[-2000:])
    ok(sorted(os.listdir(snapdir(h, sb))) == ["disk.raw", "manifest.json"],
       "event: rv-b's snapshot directory is untouched",
       os.listdir(snapdir(h, sb)))
    p = h.vmctl("-j", "status", vma)
    ok(p.returncode == 0 and json.loads(p.stdout)["state"] == "running",
       "event: rv-a's VM is left running (vmctl stop-workspace is for "
       "it)", p.stdout + p.stderr)
    okk, r = a("vm_list")
    ok(not okk and r["code"] == "unauthorized", "event: and rv-a's "
       "credential is refused", r)
    vm = create(b, "from-b", snapshot=sb)
    st, code, o, e = b.sh(vm, "cat /workspace/mark", "r-b")
    ok(code == 0 and o.strip() == "rv-b", "event: rv-b's snapshot still "
       "creates a VM with its disk", (code, o, e))
    b("vm_destroy", vm_id=vm)
    p = h.vmctl("stop-workspace", "rv-a")
    ok(p.returncode == 0, "event: the operator stops rv-a's VM",
       p.stdout + p.stderr)
    p = h.vmctl("destroy", vma)
    ok(p.returncode == 0, "event: and destroys it", p.stdout + p.stderr)


def case_token_only(h, b, sb):
    """A credential revoked, not its workspace: the snapshots stay."""
    path = os.path.join(h.dir, "tok-rv-b")
    with open(path, "w") as f:
        f.write(b.tok)
    h.authctl("revoke-token", "--token-file", path)
    okk, r = b("vm_list")
    ok(not okk and r["code"] == "unauthorized", "token: rv-b's only "
       "credential is revoked", r)
    # authd's events come in order: once rv-f's is handled, rv-b's was.
    h.issue("rv-f")
    h.authctl("revoke-workspace", "--workspace", "rv-f")
    wait_for(lambda: "workspace rv-f revoked (event): 0 snapshots "
             "deleted" in base.read(h.vmmd_log), 30, "rv-f's event")
    ok(sb in listed(h) and os.path.isdir(snapdir(h, sb)),
       "token: rv-b's snapshot stays when only a credential is revoked")


def case_vmmd_down(h, sb, sc):
    rc, _ = h.stop_vmmd()
    ok(rc == 0, "down: vmmd exits 0", rc)
    h.authctl("revoke-workspace", "--workspace", "rv-c")
    ok(os.path.isdir(snapdir(h, sc)), "down: rv-c is revoked with vmmd "
       "down, its snapshot still on disk")
    mark = len(base.read(h.vmmd_log))
    # The disk failpoint holds the snapshot's clone 3 s (case_making).
    os.environ["MCPVM_TEST_DISK_DELAY_MS"] = "3000"
    h.start_vmmd()
    del os.environ["MCPVM_TEST_DISK_DELAY_MS"]
    wait_for(lambda: gone(h, sc), 30, "rv-c's snapshot deleted")
    log = base.read(h.vmmd_log)[mark:]
    ok("workspace rv-c revoked (while vmmd was away from authd" in log,
       "down: vmmd asked authd after it subscribed and deleted rv-c's "
       "snapshot", log[-2000:])
    ok(audited(h, "rv-c", sc), "down: audited as %s" % ACTOR)
    ok(sb in listed(h) and os.path.isdir(snapdir(h, sb)),
       "down: rv-b's snapshot stays")


def case_making(h, d, vmd):
    """vmd is hibernated (vmmd's SIGTERM did that): its disk-only
    snapshot clones the disk under the 3 s failpoint."""
    call = base.Call(h, d.tok, "vm_snapshot", vm_id=vmd, request_id="s-d2")

    def parts():
        return [p for p in os.listdir(snapdir(h)) if p.endswith(".part")]
    wait_for(parts, 30, "a snapshot being made")
    part = parts()[0]
    h.authctl("revoke-workspace", "--workspace", "rv-d")
    okk, r = call.wait()
    ok(not okk and r["code"] == "unauthorized" and "revoked" in r["message"],
       "making: the vm_snapshot under way is answered unauthorized", r)
    sid = part[:-len(".part")]
    wait_for(lambda: gone(h, sid), 30, "the snapshot made deleted")
    ok(True, "making: the snapshot that became ready after the revoke is "
       "deleted")
    ok(audited(h, "rv-d", sid), "making: audited as %s" % ACTOR)
    p = h.vmctl("-j", "status", vmd)
    ok(p.returncode == 0 and json.loads(p.stdout)["state"] == "hibernated",
       "making: the source VM is left as it was", p.stdout + p.stderr)


def case_authd_away(h, sb, se):
    stop_authd(h)
    start_authd_away(h)
    h.authctl("revoke-workspace", "--workspace", "rv-e")
    stop_authd(h)
    mark = len(base.read(h.vmmd_log))
    h.start_authd()
    wait_for(lambda: gone(h, se), 30, "rv-e's snapshot deleted")
    log = base.read(h.vmmd_log)[mark:]
    ok("workspace rv-e revoked (while vmmd was away from authd" in log,
       "authd away: a revoke vmmd could not hear of is found once authd "
       "is back", log[-2000:])
    ok(audited(h, "rv-e", se), "authd away: audited as %s" % ACTOR)
    ok(sb in listed(h), "authd away: rv-b's snapshot stays")


def suite(h):
    h.write_conf(max_vms=3, max_memory_mib=3 * base.VM_MIB)
    h.start_authd()
    h.start_vmmd()
    cl = {w: base.Client(h, h.issue(w))
          for w in ("rv-a", "rv-b", "rv-c", "rv-d", "rv-e")}
    for w in cl:
        h.authctl("policy", "set", "--workspace", w, "--storage-gib",
                  "1000")
    vma, sa = one_snapshot(cl["rv-a"], "rv-a", keep=True)
    okk, s = snap(cl["rv-a"], vm_id=vma, request_id="s-rv-a-mem",
                  memory=True)
    ok(okk and s["memory"] is True, "a memory snapshot of rv-a's VM", s)
    sam = s.get("snapshot_id", "")
    _, sb = one_snapshot(cl["rv-b"], "rv-b")
    _, sc = one_snapshot(cl["rv-c"], "rv-c")
    _, se = one_snapshot(cl["rv-e"], "rv-e")
    ok(all(os.path.isdir(snapdir(h, x)) for x in (sa, sam, sb, sc, se)),
       "four workspaces' snapshots are on disk")
    case_event(h, cl["rv-a"], cl["rv-b"], sa, sam, sb, vma)
    case_token_only(h, cl["rv-b"], sb)
    vmd = create(cl["rv-d"], "src-rv-d")
    case_vmmd_down(h, sb, sc)
    for c in cl.values():
        c.reconnect()
    case_making(h, cl["rv-d"], vmd)
    case_authd_away(h, sb, se)
    p = h.vmctl("audit", "verify")
    ok(p.returncode == 0, "the audit chain holds", p.stdout + p.stderr)
    rc, _ = h.stop_vmmd()
    ok(rc == 0, "vmmd exits 0", rc)


def main():
    base.run_suite("vmmd-revoke", suite)


if __name__ == "__main__":
    main()
