#!/usr/bin/env python3
# Integration test: a clone is a new machine (#17).  One real guest (QEMU
# under TCG or KVM, the `test` image with this tree's guestd) with a vmgenid
# device is migrated to a file while a Python process in it holds state in
# memory; four QEMUs are started from that file, each on its own copy of the
# disk and with its own vmgenid GUID.  Three get the identity op and must
# differ in boot id, machine-id, hostname, os.urandom and uuid4 while the
# Python process lives on in each; the fourth, without the op, still has
# the snapshot's ids.  TAP on stdout.
#
# Environment: SRCDIR, BUILD_DIR (the meson build; guestd and stage one come
# from it, or from the gcc build beside it when SANITIZED=1),
# VMMD_TEST_IMAGE (a prebuilt image directory: skips the build),
# MCPVM_IMAGE_CACHE (optional).
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import glink  # noqa: E402
from qemu_boot import QemuVM, qemu_binary  # noqa: E402
from qmpclient import Qmp  # noqa: E402

import taplib  # noqa: E402
import vmmdlib as base  # noqa: E402
from vmmdlib import ok, note, skip_all  # noqa: E402

# The image the vmmd suites build (test_vmmd.build_image): the same
# recipe, profile, size and guestd, so one build serves both.
MEM = base.MEM
BOOT_TIMEOUT = 180
HOLDER_PORT = 5000


# ---- QEMU with QMP, vmgenid and -incoming ------------------------------

class CloneVM(QemuVM):
    """QemuVM with a QMP socket, a vmgenid GUID and -incoming defer."""

    def __init__(self, *a, vmgenid=None, incoming=False, **kw):
        super().__init__(*a, **kw)
        self.vmgenid = vmgenid
        self.incoming = incoming
        self.qmp_path = os.path.join(self.workdir, "qmp.sock")

    def argv(self):
        a = super().argv()
        a += ["-qmp", f"unix:{self.qmp_path},server=on,wait=off"]
        if self.vmgenid:
            a += ["-device", f"vmgenid,guid={self.vmgenid}"]
        if self.incoming:
            a += ["-S", "-incoming", "defer"]
        return a


def checkpoint(vm, path):
    """QMP stop and migrate to a file, as tests/bench/bare_qmp.py does."""
    q = Qmp(vm.qmp_path)
    q.cmd("stop")
    q.cmd("migrate-set-parameters", {"max-bandwidth": 1 << 40})
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        q.cmd("getfd", {"fdname": "ckpt"}, fd)
        q.cmd("migrate", {"uri": "fd:ckpt"})
        q.wait_migration()
        os.fsync(fd)
    finally:
        os.close(fd)
    q.close()


def restore(vm, path):
    q = Qmp(vm.qmp_path)
    fd = os.open(path, os.O_RDONLY)
    try:
        q.cmd("getfd", {"fdname": "ckpt"}, fd)
    finally:
        os.close(fd)
    q.cmd("migrate-incoming", {"uri": "fd:ckpt"})
    q.wait_migration()
    q.cmd("cont")
    st = q.cmd("query-status")["status"]
    q.close()
    return st


# ---- driving guestd ----------------------------------------------------

class Guest:
    def __init__(self, link):
        self.link = link
        self.jobs = 0

    def run(self, command, timeout=120):
        """(exit code, stdout, stderr) of a job run to its end."""
        self.jobs += 1
        jid = f"t{self.jobs}-{os.urandom(3).hex()}"
        st = self.link.call("exec", job_id=jid, command=command)[0]
        end = time.monotonic() + timeout
        while st["state"] == "running" or st.get("streams_open"):
            if time.monotonic() > end:
                raise TimeoutError(f"job {command!r} still running")
            time.sleep(0.1)
            st = self.link.call("job_status", job_id=jid)[0]
        msg, body = self.link.call("job_output", job_id=jid)
        out = body[:msg["stdout_len"]].decode()
        err = body[msg["stdout_len"]:].decode()
        return st.get("exit_code"), out, err

    def out(self, command):
        code, out, err = self.run(command)
        if code != 0:
            raise RuntimeError(f"{command!r}: exit {code}: {err}")
        return out.strip()

    def start(self, command):
        self.jobs += 1
        jid = f"bg{self.jobs}"
        self.link.call("exec", job_id=jid, command=command)
        return jid

    def holder(self, timeout=60):
        """What the in-memory Python process says, as a dict."""
        end = time.monotonic() + timeout
        while True:
            try:
                ch = self.link.open(HOLDER_PORT)
                break
            except glink.OpenFailed:
                if time.monotonic() > end:
                    raise
                time.sleep(0.3)
        data = ch.recv_all(timeout=30)
        ch.close()
        return json.loads(data)

    def identity(self, **fields):
        return self.link.call("identity", **fields)[0]

    def facts(self):
        return {
            "boot_id": self.out("cat /proc/sys/kernel/random/boot_id"),
            "machine_id": self.out("cat /etc/machine-id"),
            "hostname": self.out("uname -n"),
            "etc_hostname": self.out("cat /etc/hostname"),
            "urandom": self.out("python3 -c 'import os; "
                                "print(os.urandom(32).hex())'"),
            "uuid4": self.out("python3 -c 'import uuid; "
                              "print(uuid.uuid4())'"),
        }


# The process a snapshot must carry: a secret drawn once and 1 MiB of
# random bytes in memory, their digest taken at start, and a counter.
HOLDER = r"""
import hashlib, json, os, socket
blob = bytearray(os.urandom(1 << 20))
first = hashlib.sha256(blob).hexdigest()
secret = os.urandom(16).hex()
count = 0
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", %d))
s.listen(4)
while True:
    c, _ = s.accept()
    count += 1
    c.sendall(json.dumps({"pid": os.getpid(), "secret": secret,
                          "count": count, "digest_at_start": first,
                          "digest_now": hashlib.sha256(blob).hexdigest()
                          }).encode())
    c.close()
""" % HOLDER_PORT


def new_identity(name):
    return {"machine_id": os.urandom(16).hex(),
            "boot_id": str(uuid.uuid4()),
            "hostname": name,
            "entropy_b64": base64.b64encode(os.urandom(64)).decode()}


def connect(vm):
    link = glink.GuestLink(vm.accept_link(BOOT_TIMEOUT))
    return link


# ---- the test ----------------------------------------------------------

def test_clones(manifest, tmp):
    src = CloneVM.from_manifest(manifest, os.path.join(tmp, "source"),
                                memory_mib=MEM, vmgenid=str(uuid.uuid4()))
    ckpt = os.path.join(tmp, "source.ckpt")
    with src:
        link = connect(src)
        if not ok(link.hello.wait(BOOT_TIMEOUT), f"source boots to hello "
                  f"on {src.accel}", src.diag()):
            return
        g = Guest(link)
        acpi = g.out("ls /sys/bus/acpi/devices")
        ok("QEMUVGID:00" in acpi.split(), "the guest sees the vmgenid "
           "device (ACPI QEMUVGID)", acpi)
        kernel_boot_id = g.out("cat /proc/sys/kernel/random/boot_id")

        # Refused before anything is touched.
        bad = new_identity("-bad")
        try:
            g.identity(**bad)
            ok(False, "a bad hostname is refused")
        except glink.GuestError as e:
            ok(e.code == "invalid_argument" and "hostname" in e.message,
               f"a bad hostname is refused ({e})")

        link.call("file_write", body=HOLDER.encode(), path="holder.py")
        g.start("exec python3 /workspace/holder.py")
        before = g.holder()
        ok(before["count"] == 1 and before["digest_now"] ==
           before["digest_at_start"], "the Python holder runs in the "
           f"source (pid {before['pid']})", before)

        # The snapshot's own identity, so the op-less clone can show it.
        ida = new_identity("source")
        rep = g.identity(**ida)
        hello = link.new_session()
        ok(rep.get("boot_id") == ida["boot_id"] and
           hello["boot_id"] == ida["boot_id"], "identity answers with the "
           "new boot id, and hello says it from then on",
           f"{rep} {hello}")
        snap = g.facts()
        ok(snap["boot_id"] == ida["boot_id"] and
           snap["machine_id"] == ida["machine_id"] and
           snap["hostname"] == "source" and
           snap["etc_hostname"] == "source" and
           ida["boot_id"] != kernel_boot_id,
           "the source has its new boot id (over the kernel's), machine-id "
           "and hostname", f"{snap} kernel's {kernel_boot_id}")
        mode = g.out("stat -c %a /etc/machine-id")
        ok(mode == "444", f"/etc/machine-id is mode {mode}")
        code, _, err = g.run("echo x > /proc/sys/kernel/random/boot_id")
        ok(code != 0, "the overlaid boot id is not writable by jobs", err)

        t0 = time.monotonic()
        checkpoint(src, ckpt)
        note(f"checkpoint of {MEM} MiB: {time.monotonic() - t0:.1f} s, "
             f"{os.path.getsize(ckpt) >> 20} MiB")
        link.close()
        src.stop()

    clones = []
    for i in range(4):
        with_op = i < 3
        d = os.path.join(tmp, f"clone{i}")
        os.makedirs(d)
        disk = os.path.join(d, "rootfs.raw")
        subprocess.run(["cp", "--reflink=auto", "--sparse=always",
                        src.disk, disk], check=True)
        vm = CloneVM(src.kernel, src.initrd, disk, d, memory_mib=MEM,
                     accel=src.accel, copy_rootfs=False,
                     vmgenid=str(uuid.uuid4()), incoming=True)
        with vm:
            t0 = time.monotonic()
            sock_wait = vm.accept_link(60)
            st = restore(vm, ckpt)
            ok(st == "running", f"clone {i} restored from the file with "
               f"vmgenid {vm.vmgenid} ({time.monotonic() - t0:.1f} s)",
               vm.diag())
            link = glink.GuestLink(sock_wait)
            g = Guest(link)
            hello = link.new_session()
            ok(hello["boot_id"] == ida["boot_id"], f"clone {i} says the "
               "snapshot's boot id before any identity op", hello)
            ident = None
            if with_op:
                ident = new_identity(f"clone-{i}-{os.urandom(2).hex()}")
                rep = g.identity(**ident)
                ok(rep["boot_id"] == ident["boot_id"],
                   f"clone {i}: identity op answered", rep)
                if i == 0:
                    # Idempotent, and the overlay replaced, not stacked.
                    rep = g.identity(**ident)
                    mounts = g.out("grep -c ' /proc/sys/kernel/random/"
                                   "boot_id ' /proc/self/mountinfo")
                    ok(rep["boot_id"] == ident["boot_id"] and
                       mounts == "1", "the op applied twice leaves one "
                       f"overlay ({mounts})", rep)
                hello = link.new_session()
                ok(hello["boot_id"] == ident["boot_id"], f"clone {i}: "
                   "hello says the new boot id", hello)
            facts = g.facts()
            h = g.holder()
            ok(h["pid"] == before["pid"] and
               h["secret"] == before["secret"] and
               h["digest_now"] == before["digest_at_start"] and
               h["count"] == before["count"] + 1,
               f"clone {i}: the Python process survived with its memory "
               f"(pid {h['pid']}, count {h['count']})", f"{before}\n{h}")
            clones.append((ident, facts))
            try:
                link.call("shutdown", timeout=10)
            except (glink.LinkError, TimeoutError, OSError):
                pass
            link.close()

    renewed = clones[:3]
    for ident, f in renewed:
        ok(f["boot_id"] == ident["boot_id"] and
           f["machine_id"] == ident["machine_id"] and
           f["hostname"] == ident["hostname"] and
           f["etc_hostname"] == ident["hostname"],
           f"clone {ident['hostname']} has the ids it was given", f)
    for key in ("boot_id", "machine_id", "hostname", "urandom", "uuid4"):
        vals = [f[key] for _, f in renewed]
        ok(len(set(vals)) == 3 and snap[key] not in vals,
           f"{key} differs across the 3 clones and from the snapshot",
           "\n".join(vals + [f"snapshot: {snap[key]}"]))
    _, plain = clones[3]
    ok(plain["machine_id"] == snap["machine_id"] and
       plain["boot_id"] == snap["boot_id"] and
       plain["hostname"] == snap["hostname"],
       "without the op a clone keeps the snapshot's machine-id, boot id "
       "and hostname", f"{plain}\n{snap}")


def main():
    for tool in ("qemu-system-x86_64", "debugfs"):
        if not shutil.which(tool):
            skip_all(f"{tool} is not installed (tests/run installs it)")
    p = subprocess.run([qemu_binary(), "-device", "help"],
                       capture_output=True, text=True)
    if '"vmgenid"' not in p.stdout + p.stderr:
        skip_all("this QEMU has no vmgenid device")
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    try:
        m = base.build_image()
        manifest = os.path.join(m["dir"], "manifest.json")
    except RuntimeError as e:
        ok(False, "the guest image is there", str(e))
        taplib.done()
    tmp = tempfile.mkdtemp(prefix="mcpvm-clone-", dir="/var/tmp")
    try:
        test_clones(manifest, tmp)
    except Exception as e:  # a harness failure is a test failure
        import traceback
        ok(False, f"clone test ran to its end: {e}", traceback.format_exc())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    taplib.done()


if __name__ == "__main__":
    main()
