#!/usr/bin/env python3
# A compromised vmproxy against a real vmmd (#14, finding 6 and the
# hostile-peer harness): vmmd starts fake_vmproxy.py in place of vmproxy
# for every VM, and it answers with a reply of the wrong type carrying a
# descriptor, reports absurd stream counts, sends a frame with three
# descriptors, floods events, or answers vmmd's QEMU operations with
# results of the wrong shape, unprintable text or unknown events.  For
# each, vmmd must stay up, answer another workspace while it happens, fail
# or refuse only that VM, and hold no more descriptors or memory than
# before.  QEMU and the guest are real; only vmproxy is the fake, so the
# VM's link is never read.
#
# Then a compromised QEMU (fake_qemu.py) against the real vmproxy, whose
# QMP client it attacks, and a QEMU log swapped for a FIFO; and with a
# real VM running, that QEMU's QMP socket and qemu.log are vmproxy's and
# never root vmmd's (#14, finding 7: root reads no byte QEMU writes).
#
# Environment: as vmmdlib.py.  TAP on stdout.  Needs root.
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmmdlib as base  # noqa: E402
import vmmd_ipc as ipc  # noqa: E402
from vmmdlib import ok, note, read, err_code  # noqa: E402
from vmmdlib import vmmd_fds, vmmd_paths, vmmd_rss_kib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MEM = base.MEM


class HostileHost(base.Host):
    """vmmd's vmproxy is fake_vmproxy.py while the mode file exists.  Its
    guests boot printing every kernel message to the serial console, far
    more than console_log_kib keeps."""

    def write_more_conf(self, f):
        f.write("append = ignore_loglevel\n")   # into the image's section

    def setup(self):
        super().setup()
        self.fake_vmproxy_switch()


class Prober(threading.Thread):
    """Asks vmmd for another workspace's list over and over, and keeps the
    slowest answer."""

    def __init__(self, h, tok):
        super().__init__(daemon=True)
        self.c = base.Client(h, tok)
        # A vmmd that blocks shows as an answer that does not come.
        self.c.c.sock.settimeout(5)
        self.stop = threading.Event()
        self.worst = 0.0
        self.answers = 0
        self.errors = []
        self.start()

    def run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            try:
                okk, r = self.c("vm_list")
            except (OSError, EOFError) as e:
                self.errors.append(str(e))
                return
            self.worst = max(self.worst, time.monotonic() - t)
            self.answers += 1
            if not okk:
                self.errors.append(r)
            time.sleep(0.01)

    def finish(self):
        self.stop.set()
        self.join(30)
        self.c.c.close()


def park_and_leave(h, a, tool, args):
    """70 calls of tool (args(i) for the i-th) on one connection as mcpd's:
    the workspace's 64 wait and 6 are refused at once, whose messages are
    returned once the connection is closed."""
    c = ipc.Conn(os.path.join(h.run, "vmmd.sock"), "mcpd")
    for i in range(70):
        c.send(ipc.VM_TOOL, {"credential": a.tok, "tool": tool,
                             "arguments": args(i)})
    busy = []
    for i in range(6):
        t, rid, body, fd = c.recv()
        busy.append(body.get("error", {}).get("message", ""))
    c.close()
    return busy


def case_stream_cancel(h, a, vm):
    """Stream opens out at a vmproxy that never answers them, cancelled
    by their caller as mcpd cancels one whose WebSocket client left: each
    is answered at once, not at vmproxy's timeout, while its place in
    the VM's stream limit stays held, since vmproxy may still open it."""
    c = ipc.Conn(os.path.join(h.run, "vmmd.sock"), "mcpd")
    other = ipc.Conn(os.path.join(h.run, "vmmd.sock"), "mcpd")
    body = {"credential": a.tok, "vm_id": vm, "port": 8080}
    ids = [c.send(ipc.VM_STREAM_OPEN, body) for _ in range(4)]

    def opening():
        p = h.vmctl("--json", "status", vm)
        try:
            return json.loads(p.stdout).get("opening_streams")
        except ValueError:
            return None
    # The four hold the VM's four places once vmmd has admitted them;
    # a fifth sent before that would take a place and wait on the mute
    # guest itself.
    base.wait_for(lambda: opening() == 4, 30, "four opens out")

    def fifth():
        t, r, fd = other.call(ipc.VM_STREAM_OPEN, body)
        if fd is not None:
            os.close(fd)
        return r.get("error", {})
    e = fifth()
    ok(e.get("code") == "quota_exceeded" and "max_streams_per_vm" in
       e.get("message", ""), "mute: 4 stream opens out at a silent "
       "vmproxy hold the VM's 4 places", e)
    t0 = time.monotonic()
    for i in ids:
        c.send(ipc.VM_CANCEL, {"id": i})
    got = {}
    c.sock.settimeout(5)
    try:
        while len(got) < len(ids):
            t, rid, r, fd = c.recv()
            if fd is not None:
                os.close(fd)
            got[rid] = r.get("error", {})
    except (OSError, EOFError) as e:
        got["recv"] = {"message": str(e)}
    secs = time.monotonic() - t0
    ok(sorted(got) == sorted(ids) and all(
        e.get("code") == "unavailable" and "cancelled" in
        e.get("message", "") for e in got.values()),
       "mute: 4 stream opens out at a silent vmproxy, cancelled, are "
       "answered unavailable in %.2f s (vmproxy's own bound is 10 s)" %
       secs, got)
    e = fifth()
    ok(e.get("code") == "quota_exceeded" and "max_streams_per_vm" in
       e.get("message", ""), "mute: and their places stay held while "
       "vmproxy may still open them", e)
    c.close()
    other.close()


def run_mode(h, a, b, mode, check):
    with open(h.mode_file, "w") as f:
        f.write(mode + "\n")
    fds, rss = vmmd_fds(h), vmmd_rss_kib(h)
    probe = Prober(h, b.tok)
    res = a("vm_create", request_id="h-" + mode, memory_mib=MEM,
            idle_seconds=0)
    time.sleep(1.0)     # what the fake sends after the reply arrives too
    check(res)
    okk, r = a("vm_list")
    for v in (r["vms"] if okk else []):
        a("vm_destroy", vm_id=v["vm_id"])
    probe.finish()
    os.unlink(h.mode_file)
    ok(h.vmmd.poll() is None, "%s: vmmd is still running" % mode,
       read(h.vmmd_log)[-3000:])
    ok(probe.answers > 0 and probe.errors == [], "%s: another workspace "
       "was answered throughout (%d answers, slowest %.0f ms)" % (
           mode, probe.answers, probe.worst * 1000), probe.errors)
    note("%s: slowest answer to the other workspace %.1f ms" % (
        mode, probe.worst * 1000))
    now = vmmd_fds(h, fds)
    ok(now <= fds, "%s: vmmd holds no more descriptors than "
       "before (%d, was %d)" % (mode, now, fds))
    grown, bound = vmmd_rss_kib(h) - rss, base.rss_bound_kib(16 * 1024)
    ok(grown < bound, "%s: vmmd's resident memory grew by %d KiB (bound "
       "%d KiB)" % (mode, grown, bound))
    ok(h.jail_processes() == [], "%s: nothing of the VM runs" % mode,
       h.jail_processes())


def failed_vm(h, a, res, mode, why):
    okk, r = res
    if not ok(okk, "%s: the create itself went through" % mode, r):
        return
    p = h.vmctl("--json", "status", r["vm_id"])
    ok('"failed"' in p.stdout and why in p.stdout, "%s: vmmd failed the VM: "
       "%s" % (mode, why), p.stdout + p.stderr)


def vmmd_reads_qemu(h):
    """vmmd's descriptors on QEMU's log, or on any file of a VM's run
    directory: there must be none."""
    return [p for p in vmmd_paths(h)
            if p.endswith("/qemu.log") or p.endswith("/qmp.sock") or
            p.startswith(os.path.join(h.run, "vms") + "/")]


def qmp_clients(h, vm):
    """The processes at the other end of QEMU's QMP connections for vm
    (from the kernel's socket table, ss -xp): a list of (name, pid)."""
    out = subprocess.run(["ss", "-xpn"], capture_output=True,
                         text=True).stdout
    who, peers = {}, []
    path = os.path.join(h.run, "vms", vm, "qmp.sock")
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) < 8:
            continue
        m = re.search(r'users:\(\("([^"]+)",pid=(\d+)', line)
        who[f[5]] = (m.group(1), int(m.group(2))) if m else ("?", 0)
        if f[4] == path:
            peers.append(f[7])
    return [who.get(p, ("?", 0)) for p in peers]


def case_qmp_owner(h, a, vm):
    """With a real VM running: QEMU's QMP socket is connected to the
    VM's vmproxy, and to nothing of vmmd's; vmmd holds no descriptor on
    qemu.log or any other file of the VM's run directory."""
    peers = qmp_clients(h, vm)
    ok(len(peers) == 1 and peers[0][0] == "vmproxy" and
       peers[0][1] != h.vmmd.pid, "qmp: QEMU's QMP socket is vmproxy's "
       "(its one client: %s)" % (peers,), peers)
    ok(vmmd_reads_qemu(h) == [], "qmp: vmmd holds no descriptor on "
       "qemu.log, qmp.sock or the VM's run directory",
       vmmd_reads_qemu(h))
    log = os.path.join(h.run, "vms", vm, "qemu.log")
    st = os.stat(log)
    ok(st.st_uid == base.vm_uid(h, vm), "qmp: qemu.log is the VM uid's "
       "file, kept by its vmproxy", st)


def case_log_fifo(h, a, b):
    """A compromised QEMU replaces its log with a FIFO and dies while it
    restores a checkpoint: the error still comes (vmproxy gives QEMU's
    last words from the descriptor it holds, and never opens the name
    again), and vmmd, which never opens QEMU's log at all, answers every
    tenant throughout."""
    fds = vmmd_fds(h)
    okk, r = a("vm_create", request_id="h-fifo", memory_mib=MEM,
               idle_seconds=0)
    if not ok(okk, "fifo: a VM with the real vmproxy", r):
        return
    vm = r["vm_id"]
    okk, r = a("vm_suspend", vm_id=vm, force=True)
    ok(okk and r["state"] == "hibernated", "fifo: hibernated", r)
    res = {}

    def resume():
        c = base.Client(h, a.tok)
        res["r"] = c("vm_resume", vm_id=vm)
        c.c.close()
    th = threading.Thread(target=resume, daemon=True)
    probe = Prober(h, b.tok)
    th.start()
    db = os.path.join(h.mnt, "vmmd.db")
    uid = base.vm_uid(h, vm)

    def restoring_qemu():
        return [pid for pid, u, cmd in h.jail_processes()
                if u == uid and "qemu" in cmd]
    # QEMU stopped as soon as it is there, so that the restore cannot
    # finish while its log is swapped (waiting for the store to say
    # "resuming" first let a quick restore end before the stop); then
    # killed with the FIFO in place.
    try:
        qemu = base.wait_for(restoring_qemu, 30, "the restoring QEMU")
    except RuntimeError:
        qemu = []
    for pid in qemu:
        os.kill(pid, signal.SIGSTOP)
    st = base.states(db).get(vm)
    log = os.path.join(h.run, "vms", vm, "qemu.log")
    owner = os.stat(log).st_uid
    os.unlink(log)
    os.mkfifo(log, 0o666)
    for pid in qemu:
        os.kill(pid, signal.SIGKILL)
    ok(owner == uid and vmmd_reads_qemu(h) == [], "fifo: QEMU's log is "
       "the VM uid's, and vmmd holds no descriptor on it",
       (owner, vmmd_reads_qemu(h)))
    th.join(30)
    msg = res.get("r", (True, {}))[1].get("message", "")
    ok(st == "resuming" and not th.is_alive() and
       res.get("r", (True,))[0] is False and "QEMU died" in msg,
       "fifo: the resume, whose QEMU died, is answered with an error "
       "that says so: %s" % msg, (st, res))
    ok(vmmd_reads_qemu(h) == [], "fifo: vmmd opened none of it",
       vmmd_reads_qemu(h))
    time.sleep(0.5)
    probe.finish()
    ok(h.vmmd.poll() is None and probe.answers > 0 and
       probe.errors == [], "fifo: vmmd never blocked on the FIFO: another "
       "workspace was answered throughout (%d answers, slowest %.0f ms)" %
       (probe.answers, probe.worst * 1000), probe.errors)
    okk, r = a("vm_destroy", vm_id=vm)
    ok(okk, "fifo: the VM is destroyed", r)
    now = vmmd_fds(h, fds)
    ok(now <= fds, "fifo: vmmd holds no more descriptors than "
       "before (%d, was %d)" % (now, fds))


CONSOLE_KIB = 16


def case_fake_qemu(h, a, b):
    """A compromised QEMU (fake_qemu.py, as [vmmd] qemu) that answers QMP
    with garbage, one endless line, a greeting nested 100000 deep, or
    nothing.  Its QMP client is the VM's vmproxy, which reads all of it;
    vmmd gets only vmproxy's typed verdict.  Each create fails with
    unavailable, QMP named, vmmd answers another workspace throughout,
    keeps no descriptor of it, and never connects to the fake's socket."""
    mode_file = os.path.join(h.dir, "fake-qemu-mode")
    wrapper = os.path.join(h.dir, "fake-qemu")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec /usr/bin/python3 %s --mode-file %s "
                "\"$@\"\n" % (h.jail_copy(os.path.join(HERE,
                                                       "fake_qemu.py")),
                                 mode_file))
    os.chmod(wrapper, 0o755)
    with open(mode_file, "w") as f:
        f.write("garbage\n")
    os.chmod(mode_file, 0o644)
    h.stop_vmmd()
    h.write_conf(console_log_kib=CONSOLE_KIB, qemu=wrapper)
    h.start_vmmd()
    a.reconnect()
    for mode in ("garbage", "endless", "deep", "silent"):
        with open(mode_file, "w") as f:
            f.write(mode + "\n")
        fds, rss = vmmd_fds(h), vmmd_rss_kib(h)
        probe = Prober(h, b.tok)
        seen = []

        def watch():
            # vmmd's descriptors while the fake QEMU runs.
            while not probe.stop.is_set():
                seen.extend(vmmd_reads_qemu(h))
                time.sleep(0.05)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        t = time.monotonic()
        res = a("vm_create", request_id="q-" + mode, memory_mib=MEM,
                idle_seconds=0)
        secs = time.monotonic() - t
        probe.finish()
        watcher.join(5)
        ok(seen == [], "qemu %s: vmmd opened neither the QMP socket nor "
           "qemu.log" % mode, seen)
        msg = res[1].get("message", "") if not res[0] else ""
        note("qemu %s: %s" % (mode, msg))
        # QMP's own words: the fake ran and was read, it did not just die.
        ok(err_code(res) == "unavailable" and "QMP" in msg and
           "exited" not in msg, "qemu %s: the create fails with "
           "unavailable, QMP named (%.1f s)" % (mode, secs), res)
        ok(h.vmmd.poll() is None and probe.answers > 0 and
           probe.errors == [], "qemu %s: vmmd answered another workspace "
           "throughout (%d answers, slowest %.0f ms)" % (
               mode, probe.answers, probe.worst * 1000), probe.errors)
        now = vmmd_fds(h, fds)
        ok(now <= fds, "qemu %s: vmmd holds no more descriptors than "
           "before (%d, was %d)" % (mode, now, fds))
        grown, bound = vmmd_rss_kib(h) - rss, base.rss_bound_kib(16 * 1024)
        ok(grown < bound, "qemu %s: vmmd's resident memory grew by %d KiB "
           "(bound %d KiB)" % (mode, grown, bound))
        base.settle(lambda: h.jail_processes() == [])
        ok(h.jail_processes() == [], "qemu %s: nothing of the VM runs" %
           mode, h.jail_processes())
    h.stop_vmmd()
    h.write_conf(console_log_kib=CONSOLE_KIB)
    h.start_vmmd()
    a.reconnect()


def check_console(h, vm):
    """The boot prints far more than console_log_kib (16 KiB here) to the
    serial console: console.log holds the newest 8 to 16 KiB of it."""
    path = os.path.join(h.run, "vms", vm, "console.log")
    try:
        st = os.stat(path)
        data = open(path, "rb").read()
    except OSError as e:
        ok(False, "console: console.log exists", e)
        return
    ok(st.st_uid != 0 and CONSOLE_KIB * 512 <= len(data) <= CONSOLE_KIB *
       1024, "console: console.log is the VM uid's and holds %d bytes, "
       "within %d..%d" % (len(data), CONSOLE_KIB * 512, CONSOLE_KIB * 1024),
       st)
    ok(b"Linux version" not in data and b"\n" in data,
       "console: the oldest output (the kernel's first line) was dropped, "
       "the newest kept", data[-300:])


LINK_DOWN_S = 5


def suite(h):
    h.write_conf(console_log_kib=CONSOLE_KIB, link_down_seconds=LINK_DOWN_S)
    h.start_authd()
    h.start_vmmd()
    a = base.Client(h, h.issue("alpha"))
    b = base.Client(h, h.issue("beta"))

    def wrongtype(res):
        ok(err_code(res) == "unavailable", "wrongtype: a reply of "
           "another type with a descriptor fails the create", res)
        log = read(h.vmmd_log)
        ok("wants type" in log, "wrongtype: and vmmd says why",
           log[-1500:])
    run_mode(h, a, b, "wrongtype", wrongtype)
    run_mode(h, a, b, "streamsneg", lambda res: failed_vm(
        h, a, res, "streamsneg", "vmproxy broke the protocol"))
    run_mode(h, a, b, "streamshuge", lambda res: failed_vm(
        h, a, res, "streamshuge", "vmproxy broke the protocol"))
    run_mode(h, a, b, "manyfds", lambda res: failed_vm(
        h, a, res, "manyfds", "vmproxy exited"))
    run_mode(h, a, b, "flood", lambda res: ok(
        res[0], "flood: the create answers despite 20000 events",
        res))

    def qmp_bad(mode, what):
        def check(res):
            log = read(h.vmmd_log)
            ok(err_code(res) == "unavailable", "%s: %s fails the create" %
               (mode, what), res)
            ok("vmproxy sent a malformed" in log, "%s: and vmmd says why" %
               mode, log[-1500:])
        return check
    run_mode(h, a, b, "qmpshape", qmp_bad(
        "qmpshape", "a QEMU result of the wrong shape"))
    run_mode(h, a, b, "qmptext", qmp_bad(
        "qmptext", "a QEMU error message of terminal escapes"))

    def qmpevent(res):
        log = read(h.vmmd_log)
        okk, r = res
        p = h.vmctl("--json", "status", r["vm_id"]) if okk else None
        ok(not okk or ('"failed"' in p.stdout and
                       "vmproxy broke the protocol" in p.stdout),
           "qmpevent: an unknown QEMU event fails the VM", (res, p))
        ok("vmproxy sent a malformed event" in log, "qmpevent: and vmmd "
           "says why", log[-1500:])
    run_mode(h, a, b, "qmpevent", qmpevent)

    def freeze_refused(mode, what):
        def check(res):
            okk, r = res
            if not ok(okk, "%s: the create went through" % mode, r):
                return
            t0 = time.monotonic()
            okk, s = a("vm_snapshot", vm_id=r["vm_id"],
                       request_id="s-" + mode)
            ok(not okk and s.get("code") == "unavailable" and
               "freezing the guest's file systems" in s.get("message", ""),
               "%s: a disk-only snapshot of a guest that %s fails, "
               "unavailable, naming the freeze (%.1f s)" % (
                   mode, what, time.monotonic() - t0), s)
            okk, st = a("vm_status", vm_id=r["vm_id"])
            ok(okk and st["state"] == "running", "%s: and the VM runs on"
               % mode, st)
            okk, sl = a("vm_snapshot_list")
            ok(okk and sl["snapshots"] == [], "%s: no snapshot is left of "
               "it" % mode, sl)
        return check
    run_mode(h, a, b, "nofreeze", freeze_refused(
        "nofreeze", "never answers the freeze"))
    run_mode(h, a, b, "oldfreeze", freeze_refused(
        "oldfreeze", "cannot freeze its file systems"))

    def linkdown(res):
        okk, r = res
        if not ok(okk, "linkdown: the create went through", r):
            return
        # A caller that parks the workspace's whole budget on the VM and
        # goes away leaves nothing counted behind.
        busy = park_and_leave(h, a, "vm_exec", lambda i: {
            "vm_id": r["vm_id"], "request_id": "lp-%d" % i,
            "command": "true"})
        ok(all("max_requests_per_workspace" in m for m in busy),
           "linkdown: 64 execs park on the VM, and the rest are busy "
           "naming max_requests_per_workspace", busy)
        okk, lst = a("vm_list")
        ok(okk, "linkdown: their caller gone, the workspace's next "
           "request is answered at once", lst)
        t0 = time.monotonic()
        calls = [base.Call(h, a.tok, "vm_exec", vm_id=r["vm_id"],
                           request_id="ld-%d" % i, command="true")
                 for i in range(20)]
        got = [c.wait(60) for c in calls]
        secs = time.monotonic() - t0
        ok(all(not okk and e.get("code") == "unavailable" and
               "link_down_seconds" in e.get("message", "")
               for okk, e in got),
           "linkdown: 20 execs parked on a VM whose link went down and "
           "stayed silent all hear unavailable, naming link_down_seconds, "
           "after %.1f s (the bound is %d s)" % (secs, LINK_DOWN_S),
           got[:2])
        p = h.vmctl("--json", "status", r["vm_id"])
        ok('"failed"' in p.stdout and "stayed down" in p.stdout,
           "linkdown: the VM is failed, saying why", p.stdout)
    run_mode(h, a, b, "linkdown", linkdown)

    def mute(res):
        okk, r = res
        if not ok(okk, "mute: the create went through", r):
            return
        # Guest calls out at a guest that never answers, their caller
        # gone: they stop counting against the workspace at once, not at
        # their 60 s timeout.
        busy = park_and_leave(h, a, "vm_read_file", lambda i: {
            "vm_id": r["vm_id"], "path": "f%d" % i})
        ok(all("max_requests_per_workspace" in m for m in busy),
           "mute: 64 file reads wait on the silent guest, and the rest "
           "are busy naming max_requests_per_workspace", busy)
        okk, lst = a("vm_list")
        ok(okk, "mute: their caller gone, the workspace's next request is "
           "answered at once", lst)
        case_stream_cancel(h, a, r["vm_id"])
    run_mode(h, a, b, "mute", mute)
    case_log_fifo(h, a, b)
    case_fake_qemu(h, a, b)
    okk, r = a("vm_create", request_id="h-real", memory_mib=MEM,
               idle_seconds=0)
    ok(okk and r["state"] == "running", "a VM with the real vmproxy "
       "still works afterwards", r)
    if okk:
        st, _, out, _ = a.sh(r["vm_id"], "echo fine", "h-real-x")
        ok(out == "fine\n", "and runs a command", (st, out))
        check_console(h, r["vm_id"])
        case_qmp_owner(h, a, r["vm_id"])
        a("vm_destroy", vm_id=r["vm_id"])
    rc, secs = h.stop_vmmd()
    ok(rc == 0, "vmmd exits 0 (%.1f s)" % secs, rc)


def main():
    base.run_suite("vmmd-hostile", suite, HostileHost)


if __name__ == "__main__":
    main()
