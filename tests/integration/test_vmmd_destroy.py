#!/usr/bin/env python3
# vm_destroy in every state a VM can be in while something else is under
# way, against a real vmmd with real QEMU TCG VMs (the set-up of
# vmmdlib.py): during the disk clone of a create, while QEMU starts,
# while the guest boots, while hibernating, while resuming, while pausing
# with the guest not answering, and with guest calls in flight.  Each case
# checks that the destroy answers, that whoever waited for the cancelled
# operation is answered too, that nothing of the VM is left, and that vmmd
# is still up for another workspace.  In the ASan build a use after free
# or a double free in vmmd ends vmmd, and so fails the case.
#
# The disk clone of a create takes milliseconds on a reflink volume, so
# the first case starts vmmd with MCPVM_TEST_DISK_DELAY_MS, a failpoint
# that holds each disk job on vmmd's worker thread (vmmd/disk.c).
#
# Environment: as vmmdlib.py.  TAP on stdout.  Needs root.
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmmdlib as base  # noqa: E402
from vmmdlib import ok, note, read, wait_for, err_code  # noqa: E402
from vmmdlib import vmmd_fds  # noqa: E402

MEM = base.MEM


def db_state(h, vm):
    return base.states(os.path.join(h.mnt, "vmmd.db")).get(vm)


def creating_vm(a, known):
    """The id of a VM of a's that vm_list shows as creating, not in
    known."""
    okk, r = a("vm_list")
    if not okk:
        return None
    for v in r["vms"]:
        if v["vm_id"] not in known and v["state"] == "creating":
            return v["vm_id"]
    return None


def check_gone(h, a, b, vm, what):
    """After a destroy: nothing of vm is left, vmmd is up and answers."""
    ok(h.vmmd.poll() is None, "%s: vmmd is still running" % what,
       read(h.vmmd_log)[-3000:])
    ok(err_code(a("vm_status", vm_id=vm)) == "not_found",
       "%s: the VM is not_found afterwards" % what)
    okk, r = a("vm_destroy", vm_id=vm)
    ok(okk and r["already_destroyed"] is True,
       "%s: destroying it again: already_destroyed" % what, r)
    vmdir = os.path.join(h.mnt, "vms", vm)
    rundir = os.path.join(h.run, "vms", vm)
    ok(not os.path.exists(vmdir) and not os.path.exists(rundir),
       "%s: its disk, kernel and run directory are gone" % what,
       (os.listdir(vmdir) if os.path.exists(vmdir) else None))
    uid = base.vm_uid(h, vm)
    left = [p for p in h.jail_processes() if uid is None or p[1] == uid]
    ok(left == [], "%s: no QEMU or vmproxy of it is left" % what, left)
    okk, r = b("vm_list")
    ok(okk, "%s: another workspace is answered" % what, r)


def case_disk_clone(h, a, b):
    """Destroy while the create's disk jobs are on the worker pool."""
    fds = vmmd_fds(h)
    create = base.Call(h, a.tok, "vm_create", request_id="d-clone",
                       memory_mib=MEM, idle_seconds=0)
    vm = wait_for(lambda: creating_vm(a, set()), 20, "a creating VM")
    ok(db_state(h, vm) == "creating", "clone: the VM is creating while "
       "its disk is cloned")
    d1 = base.Call(h, a.tok, "vm_destroy", vm_id=vm)
    d2 = base.Call(h, a.tok, "vm_destroy", vm_id=vm)
    r1, r2 = d1.wait(), d2.wait()
    ok(r1[0] and r1[1]["destroyed"] is True and r2[0] and
       r2[1]["destroyed"] is True, "clone: two destroys during the clone "
       "both answer destroyed", (r1, r2))
    okk, r = create.wait()
    ok(not okk and r["code"] == "conflict" and "destroyed" in r["message"],
       "clone: the create answers conflict: destroyed before it booted", r)
    okk, r = a("vm_create", request_id="d-clone", memory_mib=MEM,
               idle_seconds=0)
    ok(not okk and r["code"] == "conflict", "clone: the create retried "
       "with its request_id gets the same answer, not a new VM", r)
    okk, r = a("vm_list")
    ok(okk and r["vms"] == [], "clone: and no VM exists", r)
    check_gone(h, a, b, vm, "clone")
    now = vmmd_fds(h, fds)
    ok(now <= fds, "clone: vmmd holds no more descriptors than "
       "before (%d, was %d)" % (now, fds))


def case_create(h, a, b, delay, what, rid):
    """Destroy a creating VM delay seconds after it shows in vm_list."""
    create = base.Call(h, a.tok, "vm_create", request_id=rid, memory_mib=MEM,
                       idle_seconds=0)
    vm = wait_for(lambda: creating_vm(a, set()), 30, "a creating VM")
    time.sleep(delay)
    st = db_state(h, vm)
    okk, r = a("vm_destroy", vm_id=vm)
    ok(okk and r["destroyed"] is True, "%s: vm_destroy of a VM that was "
       "%s answers destroyed" % (what, st), r)
    okk, r = create.wait()
    ok(not okk and r["code"] == "conflict", "%s: the create answers "
       "conflict" % what, r)
    check_gone(h, a, b, vm, what)


def running_vm(h, a, rid):
    okk, r = a("vm_create", request_id=rid, memory_mib=MEM, idle_seconds=0)
    if not okk or r["state"] != "running":
        raise RuntimeError("no running VM: %r" % (r,))
    return r["vm_id"]


def case_hibernating(h, a, b):
    vm = running_vm(h, a, "d-hib")
    sus = base.Call(h, a.tok, "vm_suspend", vm_id=vm, force=True)
    try:
        wait_for(lambda: db_state(h, vm) == "hibernating", 30,
                 "hibernating")
    except RuntimeError:
        pass
    st = db_state(h, vm)
    okk, r = a("vm_destroy", vm_id=vm)
    ok(st == "hibernating" and okk and r["destroyed"] is True,
       "hibernating: vm_destroy during the checkpoint answers destroyed",
       (st, r))
    okk, r = sus.wait()
    ok(not okk and r["code"] == "not_found", "hibernating: the suspend "
       "answers not_found: the VM was destroyed", r)
    check_gone(h, a, b, vm, "hibernating")


def case_resuming(h, a, b):
    vm = running_vm(h, a, "d-res")
    okk, r = a("vm_suspend", vm_id=vm, force=True)
    if not ok(okk and r["state"] == "hibernated", "resuming: hibernated "
              "first", r):
        return
    res = base.Call(h, a.tok, "vm_resume", vm_id=vm)
    try:
        wait_for(lambda: db_state(h, vm) == "resuming", 30, "resuming")
    except RuntimeError:
        pass
    st = db_state(h, vm)
    okk, r = a("vm_destroy", vm_id=vm)
    ok(st == "resuming" and okk and r["destroyed"] is True,
       "resuming: vm_destroy during the restore answers destroyed",
       (st, r))
    okk, r = res.wait()
    ok(not okk and r["code"] == "not_found", "resuming: the resume "
       "answers not_found", r)
    check_gone(h, a, b, vm, "resuming")


def qemu_pid(h, vm):
    uid = base.vm_uid(h, vm)
    for pid, u, cmd in h.jail_processes():
        if u == uid and "qemu" in cmd:
            return pid
    return None


def case_guest_silent(h, a, b):
    """A guest that stops answering (its QEMU is stopped with SIGSTOP):
    an exec and a pause are left waiting for it when the VM is
    destroyed."""
    vm = running_vm(h, a, "d-silent")
    pid = qemu_pid(h, vm)
    if not ok(pid is not None, "silent: the VM's QEMU is found"):
        return
    os.kill(pid, signal.SIGSTOP)
    try:
        exe = base.Call(h, a.tok, "vm_exec", vm_id=vm, request_id="d-silent-x",
                        command="echo never")
        time.sleep(1)
        pause = base.Call(h, a.tok, "vm_suspend", vm_id=vm, mode="pause",
                          force=True)
        time.sleep(1)
        ok(exe.res is None and pause.res is None, "silent: the exec and "
           "the pause wait for the guest", (exe.res, pause.res))
        okk, r = a("vm_destroy", vm_id=vm)
        ok(okk and r["destroyed"] is True, "silent: vm_destroy answers "
           "destroyed", r)
        okk, r = exe.wait(20)
        ok(not okk and r["code"] in ("unavailable", "not_found",
                                     "conflict"),
           "silent: the exec waiting for the guest is answered at once",
           r)
        okk, r = pause.wait(20)
        ok(not okk and r["code"] == "not_found", "silent: the pause "
           "waiting for the guest's freeze answers not_found", r)
        okk, r = a("vm_exec", vm_id=vm, request_id="d-silent-x",
                   command="echo never")
        ok(not okk and r["code"] == "conflict" and "unknown" in
           r["message"], "silent: the exec retried with its request_id "
           "is refused: it may have run, so it never runs twice", r)
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
    check_gone(h, a, b, vm, "silent")


def case_frozen_process(h, a, b):
    """A process in the VM's cgroup that cannot die at once: it is also
    in a frozen cgroup v1 freezer, so the SIGKILL waits for a thaw.
    vmmd's cgroup kill polls for it for seconds, on its worker pool
    (#14 finding 11): another workspace is answered all the while, and
    the destroy answers.  Where the host has no v1 freezer (cgroup v2
    kills through cgroup.kill, frozen or not) the case says so."""
    freezer = os.path.join("/sys/fs/cgroup/freezer", h.cg_parent +
                           "-frozen")
    if not os.path.isdir("/sys/fs/cgroup/freezer"):
        note("frozen: no cgroup v1 freezer on this host; case skipped")
        return
    vm = running_vm(h, a, "d-frozen")
    p = h.vmctl("--json", "status", vm)
    slot = json.loads(p.stdout).get("slot") if p.returncode == 0 else None
    mine = [c for c in h.cgroups() if c.endswith("/vm-%s" % slot)]
    if not ok(slot is not None and mine, "frozen: the VM's cgroups are "
              "found", (p.stdout, h.cgroups())):
        return
    os.makedirs(freezer, exist_ok=True)
    victim = subprocess.Popen(["sleep", "600"])
    try:
        for c in mine + [freezer]:
            with open(os.path.join(c, "cgroup.procs"), "w") as f:
                f.write(str(victim.pid))
        with open(os.path.join(freezer, "freezer.state"), "w") as f:
            f.write("FROZEN")
        d = base.Call(h, a.tok, "vm_destroy", vm_id=vm)
        lat = []
        while d.res is None and len(lat) < 2000:
            t0 = time.monotonic()
            good, _ = b("vm_list")
            if good:
                lat.append(time.monotonic() - t0)
            time.sleep(0.02)
        okk, r = d.wait(60)
        ok(d.res is not None, "frozen: vm_destroy answers (%s)" % (
            r.get("destroyed", r.get("code")),), r)
        ok(len(lat) >= 10 and max(lat) < 1.0, "frozen: another workspace "
           "is answered while vmmd waits for the process (%d answers, "
           "slowest %.0f ms)" % (len(lat), max(lat, default=0) * 1000))
    finally:
        with open(os.path.join(freezer, "freezer.state"), "w") as f:
            f.write("THAWED")
        victim.kill()
        victim.wait()
        os.rmdir(freezer)
    # What vmmd could not remove while the process was frozen goes now.
    for c in mine:
        for _ in range(50):
            try:
                os.rmdir(c)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
    check_gone(h, a, b, vm, "frozen")


def suite(h):
    h.write_conf()
    h.start_authd()
    os.environ["MCPVM_TEST_DISK_DELAY_MS"] = "2000"
    h.start_vmmd()
    del os.environ["MCPVM_TEST_DISK_DELAY_MS"]
    a = base.Client(h, h.issue("alpha"))
    b = base.Client(h, h.issue("beta"))
    case_disk_clone(h, a, b)
    rc, _ = h.stop_vmmd()
    ok(rc == 0, "vmmd with the disk failpoint exits 0", rc)
    h.start_vmmd()
    a.reconnect()
    b.reconnect()
    fds = vmmd_fds(h)
    case_create(h, a, b, 0, "starting", "d-start")
    case_create(h, a, b, 2.0, "booting", "d-boot")
    case_hibernating(h, a, b)
    case_resuming(h, a, b)
    case_guest_silent(h, a, b)
    case_frozen_process(h, a, b)
    now = vmmd_fds(h, fds)
    ok(now <= fds, "vmmd holds no more descriptors than after "
       "its start (%d, was %d)" % (now, fds))
    ok(h.cgroups() == [], "no VM cgroup is left", h.cgroups())
    p = h.vmctl("audit", "verify")
    ok(p.returncode == 0, "the audit chain holds", p.stdout + p.stderr)
    rc, secs = h.stop_vmmd()
    ok(rc == 0, "vmmd exits 0 (%.1f s)" % secs, rc)


def main():
    base.run_suite("vmmd-destroy", suite)


if __name__ == "__main__":
    main()
