"""What the vmmd suites share: the guest image with this tree's guestd,
a Host (a loop-mounted XFS state volume, or btrfs with quotas when
MCPVM_TEST_VOLUME=btrfs, a real authd and a real vmmd,
the VM uids and cgroups, the cleanup), the tool clients, the frame a
suite runs in (run_suite), and the snapshot helpers.  TAP through
taplib: ok(), note(), skip_all() are taplib's.

Environment: SRCDIR, BUILD_DIR (the meson build this runs from), AUTHD,
AUTHCTL, VMMD, VMPROXY, VMCTL, SANITIZED (1 when BUILD_DIR is an ASan
build: the guest then gets guestd and stage one from the sibling gcc
build, build/test), MCPVM_IMAGE_CACHE, MCPVM_TEST_VOLUME (optional).
"""
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
import vmmd_ipc as ipc  # noqa: E402
from taplib import ok, note, skip, skip_all  # noqa: E402,F401

SRCDIR = os.environ.get("SRCDIR", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CACHE = os.environ.get("MCPVM_IMAGE_CACHE", "/var/cache/mcpvm-test-images")
# Not the image boot test's output: its stage two is a test init, ours is
# guestd, and sharing one directory would rebuild it on every alternation.
IMAGE_OUT = os.path.join(CACHE, "vmmd-test")
MEM = 256                       # MiB per test VM: quick checkpoints
# QEMU's own memory that admission counts beside each VM's (the
# qemu_overhead_mib key; vmmd's own default under TCG is 320), and what one
# test VM takes of max_memory_mib with it.
QEMU_MIB = 64
VM_MIB = MEM + QEMU_MIB
TAG = "vmmd-it-%d" % os.getpid()
UID_BASE = 930000 + (os.getpid() % 500) * 16
MAX_VMS = 3


def run(*cmd, check=True, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       **kw)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s%s" % (" ".join(cmd),
                           p.returncode, p.stdout, p.stderr))
    return p


# ---- the guest image ---------------------------------------------------

def guest_binaries():
    """guestd and stage one without sanitizers: they run inside the guest,
    static.  From this build, or from the gcc build beside an ASan one."""
    build = os.environ["BUILD_DIR"]
    if os.environ.get("SANITIZED") == "1":
        build = os.path.join(os.path.dirname(os.path.abspath(build)),
                             "test")
    g = os.path.join(build, "guestd", "guestd")
    s = os.path.join(build, "guestd", "mcpvm-stage1")
    for f in (g, s):
        if not os.access(f, os.X_OK):
            raise RuntimeError("%s is missing: the unsanitized gcc build "
                               "(build/test) must be built first" % f)
    return g, s


def build_image(profile="test", out=None, mem=MEM):
    """Builds or reuses an image with this tree's guestd; returns its
    manifest, with "dir" added: where the files are."""
    global IMAGE_OUT
    if profile == "test" and os.environ.get("VMMD_TEST_IMAGE"):
        # A prebuilt image with guestd, for quick runs by hand.
        IMAGE_OUT = os.environ["VMMD_TEST_IMAGE"]
        out = IMAGE_OUT
    else:
        out = out or IMAGE_OUT
        guestd, stage1 = guest_binaries()
        t = time.monotonic()
        p = subprocess.run([os.path.join(SRCDIR, "packaging/image/build"),
                            "--profile", profile, "--out", out,
                            "--cache", CACHE, "--guestd", guestd,
                            "--stage1", stage1, "--memory-mib", str(mem)],
                           capture_output=True, text=True, timeout=1200)
        ok(p.returncode == 0, "%s image with guestd built or reused "
           "(%.1f s)" % (profile, time.monotonic() - t),
           p.stdout + p.stderr)
        if p.returncode != 0:
            raise RuntimeError("no image")
    return built_image(out)


def built_image(out=None):
    """The manifest of an image already built into out (IMAGE_OUT), with
    "dir" added, or None when there is none."""
    out = out or IMAGE_OUT
    path = os.path.join(out, "manifest.json")
    if not os.path.exists(path):
        return None
    m = json.load(open(path))
    m["dir"] = out
    return m


# ---- the host side: XFS, authd, vmmd -----------------------------------

GARBAGE = b"\xee\x00\x00\x00" + b"this is not a link frame " * 40


class Garbage(threading.Thread):
    """A fake guest link: whoever connects gets bytes that are no frame."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        os.chmod(path, 0o777)
        self.srv.listen(4)
        self.accepted = 0
        self.start()

    def run(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                c.settimeout(5)
                c.sendall(GARBAGE)
                c.recv(4096)
                time.sleep(2)
            except OSError:
                pass
            c.close()

    def close(self):
        self.srv.close()


class Host:
    # The sparse XFS volume made for the run; vmmd admits a VM only with
    # room for its whole disk and two checkpoints, reflinks or not.
    volume_gib = 16

    def __init__(self, manifest):
        # Not under /tmp: QEMU and vmproxy get a /tmp of their own (the
        # spawner's jail), and they run the wrappers made here.
        self.dir = tempfile.mkdtemp(prefix="vmmd-it.", dir="/var/tmp")
        os.chmod(self.dir, 0o755)   # the VM uids reach vmproxy's wrapper
        self.loop = None
        self.mnt = os.path.join(self.dir, "state")
        self.run = os.path.join(self.dir, "run")
        self.cg_parent = TAG
        self.authd = self.vmmd = None
        self.vmmd_log = os.path.join(self.dir, "vmmd.log")
        self.authd_log = os.path.join(self.dir, "authd.log")
        self.conf = os.path.join(self.dir, "mcpvm.conf")
        self.manifest = manifest
        self.garbage = None
        self.authd_peers = "root"     # who may ask authd: vmmd, and mcpd
        self.vmmd_flags = ["-d", "-v"]  # foreground, debug log

    def setup(self):
        # MCPVM_TEST_VOLUME=btrfs: a btrfs volume with quotas enabled
        # instead, where vmmd limits each VM with its subvolume's qgroup.
        self.fs = os.environ.get("MCPVM_TEST_VOLUME", "xfs")
        img = os.path.join(self.dir, self.fs + ".img")
        with open(img, "wb") as f:
            f.truncate(self.volume_gib << 30)
        if self.fs == "btrfs":
            run("mkfs.btrfs", "-q", img)
        else:
            run("mkfs.xfs", "-q", "-m", "reflink=1", img)
        self.loop = run("losetup", "--find", "--show", img).stdout.strip()
        os.mkdir(self.mnt)
        if self.fs == "btrfs":
            run("mount", self.loop, self.mnt)
            run("btrfs", "quota", "enable", self.mnt)
            # The volume limits each VM (storage_quota = auto).
            self.prjquota = True
        else:
            # Project quotas, so that vmmd limits each VM's storage
            # (storage_quota = auto); a kernel built without XFS quota
            # support refuses the option, and vmmd then warns and goes on
            # without.
            self.prjquota = subprocess.run(
                ["mount", "-o", "prjquota", self.loop, self.mnt],
                capture_output=True).returncode == 0
            if not self.prjquota:
                run("mount", self.loop, self.mnt)
        os.chmod(self.mnt, 0o755)
        os.mkdir(self.run)
        os.chmod(self.run, 0o755)
        imgdir = os.path.join(self.mnt, "images")
        os.mkdir(imgdir)
        os.chmod(imgdir, 0o755)
        files = self.manifest["files"]
        self.image = {}
        for role in ("rootfs", "kernel", "initrd"):
            src = os.path.join(self.manifest["dir"], files[role]["path"])
            dst = os.path.join(imgdir, os.path.basename(src))
            run("cp", "--sparse=always", src, dst)
            self.image[role] = (dst, files[role]["sha256"])
        self.wrapper = os.path.join(self.dir, "vmproxy-wrapper")
        real = self.jail_copy(os.environ["VMPROXY"])
        self.garbage_sock = os.path.join(self.dir, "garbage.sock")
        # vmmd's configured vmproxy: the real one, except that a VM named
        # in a garbage-<id> file gets the fake guest instead of QEMU's
        # link.  vmproxy itself is unchanged and does all the parsing.
        with open(self.wrapper, "w") as f:
            f.write("""#!/bin/sh
vm= prev=
for a in "$@"; do [ "$prev" = --vm ] && vm=$a; prev=$a; done
if [ -n "$vm" ] && [ -e "%(dir)s/garbage-$vm" ]; then
	n=$# prev=
	for a in "$@"; do
		o=$a
		[ "$prev" = --link ] && a=%(sock)s
		set -- "$@" "$a"
		prev=$o
	done
	shift $n
fi
exec %(real)s "$@"
""" % {"dir": self.dir, "sock": self.garbage_sock, "real": real})
        os.chmod(self.wrapper, 0o755)
        self.garbage = Garbage(self.garbage_sock)

    def jail_copy(self, path):
        """A copy of path in this host's bin/, which QEMU and vmproxy see
        from their jail: the build or source tree may lie under /tmp,
        which the jail hides."""
        bindir = os.path.join(self.dir, "bin")
        os.makedirs(bindir, mode=0o755, exist_ok=True)
        dst = os.path.join(bindir, os.path.basename(path))
        shutil.copy2(path, dst)
        os.chmod(dst, 0o755)
        return dst

    def fake_vmproxy_switch(self):
        """From here on vmmd's configured vmproxy starts fake_vmproxy.py
        instead of the real one while self.mode_file exists, in the mode
        it names; call after setup, before write_conf."""
        self.mode_file = os.path.join(self.dir, "fake-vmproxy-mode")
        real = self.wrapper
        self.wrapper = os.path.join(self.dir, "hostile-wrapper")
        with open(self.wrapper, "w") as f:
            f.write("""#!/bin/sh
if [ -e %(mode)s ]; then
	FAKE_VMPROXY_MODE=%(mode)s exec python3 %(fake)s "$@"
fi
exec %(real)s "$@"
""" % {"mode": self.mode_file,
                "fake": self.fake_vmproxy_copy(),
                "real": real})
        os.chmod(self.wrapper, 0o755)

    def fake_vmproxy_copy(self):
        here = os.path.dirname(os.path.abspath(__file__))
        self.jail_copy(os.path.join(here, "vmmd_ipc.py"))
        return self.jail_copy(os.path.join(here, "fake_vmproxy.py"))

    def write_conf(self, authd=None, **vmmd):
        """[vmmd] keys as arguments; authd, a dict of [authd] keys."""
        keys = {"vmproxy": self.wrapper, "accel": "tcg",
                "cgroup_parent": self.cg_parent, "uid_base": UID_BASE,
                "max_vms": MAX_VMS, "max_memory_mib": 1024,
                "qemu_overhead_mib": QEMU_MIB, "max_vcpus": 2 * MAX_VMS,
                "max_storage_gib": 100, "min_free_mib": 64,
                "boot_timeout_seconds": 120, "mcpd_user": "root"}
        keys.update(vmmd)
        with open(self.conf, "w") as f:
            f.write("[paths]\nruntime_dir = %s\nstate_dir = %s\n"
                    % (self.run, self.mnt))
            f.write("[authd]\npeers = %s\ndefault_ttl = 0\n" %
                    self.authd_peers)
            for k, v in (authd or {}).items():
                f.write("%s = %s\n" % (k, v))
            f.write("[vmmd]\n")
            for k, v in keys.items():
                f.write("%s = %s\n" % (k, v))
            f.write("[image %s]\n" % self.manifest["id"])
            for role, (path, digest) in self.image.items():
                f.write("%s = %s\n%s_sha256 = %s\n" % (role, path, role,
                                                       digest))
            f.write("default = yes\nmemory_mib = %d\n" % MEM)
            self.write_more_conf(f)

    def write_more_conf(self, f):
        """Sections a subclass adds (mcpd's, for the end-to-end suite)."""

    def start_authd(self):
        mark = len(read(self.authd_log))
        log = open(self.authd_log, "ab")
        self.authd = subprocess.Popen([os.environ["AUTHD"], "-d", "-f",
                                       self.conf], stdout=log, stderr=log)
        log.close()
        wait_for(lambda: "ready" in read(self.authd_log)[mark:], 10,
                 "authd ready")

    def start_vmmd(self):
        mark = len(read(self.vmmd_log))
        log = open(self.vmmd_log, "ab")
        self.vmmd = subprocess.Popen([os.environ["VMMD"]] + self.vmmd_flags +
                                     ["-f", self.conf], stdout=log, stderr=log)
        log.close()
        # A first start reads every byte of the suite's image to check its
        # digests: on a loaded two-core machine that took over 30 s.
        wait_for(lambda: "ready:" in read(self.vmmd_log)[mark:] or
                 self.vmmd.poll() is not None, 120, "vmmd ready")
        if self.vmmd.poll() is not None:
            raise RuntimeError("vmmd exited %d:\n%s" % (
                self.vmmd.returncode, read(self.vmmd_log)[mark:]))
        # vmmd connects to authd after it says ready.
        time.sleep(0.3)

    def kill_vmmd(self):
        self.vmmd.kill()
        self.vmmd.wait()
        self.vmmd = None

    def stop_vmmd(self, timeout=120):
        """SIGTERM; returns (exit status, seconds)."""
        t = time.monotonic()
        self.vmmd.send_signal(signal.SIGTERM)
        try:
            rc = self.vmmd.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.vmmd.kill()
            rc = self.vmmd.wait()
        self.vmmd = None
        return rc, time.monotonic() - t

    def issue(self, ws, *flags):
        out = os.path.join(self.dir, "tok-%s-%d" % (ws, time.monotonic_ns()))
        self.authctl("issue", "--workspace", ws, "--output", out, *flags)
        with open(out) as f:
            return f.read().strip()

    def authctl(self, *args):
        return run(os.environ["AUTHCTL"], "--socket",
                   os.path.join(self.run, "authctl.sock"), *args)

    def vmctl(self, *args):
        return run(os.environ["VMCTL"], "--socket",
                   os.path.join(self.run, "vmctl.sock"), *args, check=False)

    def conn(self):
        return ipc.Conn(os.path.join(self.run, "vmmd.sock"), "mcpd",
                        timeout=300)

    def vm_uids(self):
        return range(UID_BASE, UID_BASE + MAX_VMS + 1)

    def jail_processes(self):
        """Every process running as one of this test's VM uids.  Orphans
        come to this process (a child subreaper) and are reaped here, so
        a zombie that remains is one a live vmmd did not reap."""
        mine = {p.pid for p in (self.vmmd, self.authd) if p is not None}
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/status" % pid) as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            uid = int(line.split()[1])
                            break
                    else:
                        continue
                if uid in self.vm_uids():
                    if reap_orphan(int(pid), mine):
                        continue
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        cmd = f.read().replace(b"\0", b" ")[:80]
                    found.append((int(pid), uid, cmd.decode(
                        errors="replace")))
            except (OSError, ValueError):
                pass
        return found

    def cgroups(self):
        """Every VM cgroup under this test's parent, any controller."""
        out = []
        for ctl in os.listdir("/sys/fs/cgroup"):
            p = os.path.join("/sys/fs/cgroup", ctl, self.cg_parent)
            if os.path.isdir(p):
                out += [os.path.join(p, d) for d in os.listdir(p)
                        if d.startswith("vm-")]
        return out

    def cleanup(self):
        for p in (self.vmmd, self.authd):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        for pid, _, _ in self.jail_processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.2)
        for ctl in os.listdir("/sys/fs/cgroup"):
            p = os.path.join("/sys/fs/cgroup", ctl, self.cg_parent)
            if not os.path.isdir(p):
                continue
            for d in os.listdir(p):
                sub = os.path.join(p, d)
                if os.path.isdir(sub):
                    try:
                        os.rmdir(sub)
                    except OSError:
                        pass
            try:
                os.rmdir(p)
            except OSError:
                pass
        if self.garbage is not None:
            self.garbage.close()
        if self.loop is not None:
            subprocess.run(["umount", "-l", self.mnt], capture_output=True)
            subprocess.run(["losetup", "-d", self.loop], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def reap_orphan(pid, mine):
    """Reaps pid if it is a zombie child of this process (an orphan of a
    killed vmmd); True if it was."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return True
    if fields[0] != "Z" or int(fields[1]) != os.getpid() or pid in mine:
        return False
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return True


def exit_cleanly_on_sigterm():
    """meson's timeout sends SIGTERM: unwind through the finally blocks,
    so the daemons, VMs, cgroups, mount and loop device go too."""
    def term(signum, frame):
        raise SystemExit("killed by signal %d (a timeout?); cleaning up"
                         % signum)
    signal.signal(signal.SIGTERM, term)


def become_subreaper():
    import ctypes
    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


def settle(cond, timeout=10):
    """Waits for cond, quietly: a failed VM's processes are killed at
    once, but its cgroup is emptied on vmmd's worker pool, so the last
    of them may still be on its way out when vmmd answers.  The check
    that follows says whether they went."""
    try:
        wait_for(cond, timeout, "processes to go")
    except RuntimeError:
        pass


# ---- tool helpers ------------------------------------------------------

class Client:
    def __init__(self, host, tok):
        self.host = host
        self.tok = tok
        self.c = host.conn()

    def reconnect(self):
        self.c.close()
        self.c = self.host.conn()

    def __call__(self, name, **args):
        return ipc.tool(self.c, self.tok, name, **args)

    def state(self, vm):
        okk, r = self("vm_status", vm_id=vm)
        return r["state"] if okk else "error:" + r["code"]

    def wait_job(self, vm, job, timeout=60):
        """Polls vm_job_output until the job ends; returns all output."""
        out, err, cur = "", "", {"stdout": 0, "stderr": 0}
        deadline = time.monotonic() + timeout
        while True:
            okk, r = self("vm_job_output", vm_id=vm, job_id=job,
                          cursor=cur)
            if not okk:
                raise RuntimeError("job_output: %r" % r)
            out += r["stdout"]
            err += r["stderr"]
            cur = r["next_cursor"]
            if r["state"] != "running":
                return r["state"], r.get("exit_code"), out, err
            if time.monotonic() > deadline:
                raise RuntimeError("job %s still running" % job)
            time.sleep(0.2)

    def sh(self, vm, cmd, rid, **kw):
        okk, r = self("vm_exec", vm_id=vm, request_id=rid, command=cmd,
                      **kw)
        if not okk:
            raise RuntimeError("exec %r: %r" % (cmd, r))
        return self.wait_job(vm, r["job_id"])


class Call(threading.Thread):
    """One tool call on a connection of its own, answered in the
    background; .res is (ok, result) once it is back."""

    def __init__(self, h, tok, name, **args):
        super().__init__(daemon=True)
        self.h, self.tok, self.name, self.args = h, tok, name, args
        self.res = None
        self.start()

    def run(self):
        c = Client(self.h, self.tok)
        try:
            self.res = c(self.name, **self.args)
        except (OSError, EOFError) as e:
            self.res = (False, {"code": "eof", "message": str(e)})
        finally:
            c.c.close()

    def wait(self, timeout=120):
        self.join(timeout)
        return self.res if self.res is not None else \
            (False, {"code": "no answer", "message": "still waiting"})


def err_code(res):
    okk, r = res
    return None if okk else r.get("code")


def states(db):
    try:
        c = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=1)
        try:
            return dict(c.execute("SELECT id, state FROM vms").fetchall())
        finally:
            c.close()
    except sqlite3.Error:
        return {}


def vm_uid(h, vm):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(h.mnt, "vmmd.db"),
                         uri=True)
    try:
        row = db.execute("SELECT slot FROM vms WHERE id = ?",
                         (vm,)).fetchone()
    finally:
        db.close()
    return UID_BASE + row[0] if row else -1


# ---- for the other vmmd suites (test_vmmd_destroy, _hostile, _peer) ----

def vmmd_fds(h, settle_to=None):
    """vmmd's open descriptors; with settle_to, waits up to 10 s for the
    count to come down to it (a client's close reaches vmmd a moment
    after the client returns, and on a loaded two-core machine 3 s was
    once not enough).  A descriptor really leaked stays above."""
    deadline = time.monotonic() + 10
    while True:
        n = len(os.listdir("/proc/%d/fd" % h.vmmd.pid))
        if settle_to is None or n <= settle_to or \
                time.monotonic() > deadline:
            return n
        time.sleep(0.05)


def vmmd_paths(h):
    """What vmmd's descriptors point at (socket:[inode], files...)."""
    out = []
    d = "/proc/%d/fd" % h.vmmd.pid
    for n in os.listdir(d):
        try:
            out.append(os.readlink(os.path.join(d, n)))
        except OSError:
            pass
    return out


def vmmd_rss_kib(h):
    with open("/proc/%d/status" % h.vmmd.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def rss_bound_kib(kib):
    """How much vmmd's resident memory may grow in a check that allows
    kib.  Under ASan freed memory is held back in a quarantine of up to
    256 MiB (ASan's default) rather than returned, so there the bound
    says only that nothing ran away; leaks are LeakSanitizer's to find
    when vmmd exits, and each suite checks that exit is 0."""
    if os.environ.get("SANITIZED") == "1":
        return kib + 256 * 1024
    return kib


def run_suite(name, body, host_class=None):
    """The frame of a vmmd suite: skips without root, QEMU or free VM
    uids; a subreaper for orphans; the image; a Host set up; body(h);
    and whatever happens the cleanup, authd's and vmmd's logs kept for a
    person when a check failed, and the TAP plan."""
    if os.geteuid() != 0:
        skip_all("needs root (loop devices, mounts, cgroups, VM uids)")
    for tool in ("qemu-system-x86_64", "mkfs.xfs", "losetup"):
        if shutil.which(tool) is None:
            skip_all("%s is not installed" % tool)
    import pwd
    for uid in range(UID_BASE, UID_BASE + MAX_VMS + 1):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            continue
        skip_all("uid %d exists; the test's VM uids must be free" % uid)
    # Orphans of a killed vmmd come here, not to a PID 1 that may never
    # reap them (as in some containers).
    become_subreaper()
    exit_cleanly_on_sigterm()
    manifest = build_image()
    h = (host_class or Host)(manifest)
    try:
        h.setup()
        body(h)
    except Exception:
        import traceback
        ok(False, "the run went through", traceback.format_exc())
        note(read(h.vmmd_log)[-4000:])
    finally:
        if taplib.failed:
            # The temporary directory goes; the logs stay for a person.
            keep = "/tmp/%s-%d.log" % (name, os.getpid())
            with open(keep, "w") as f:
                f.write(read(h.authd_log) + "\n----\n" + read(h.vmmd_log))
            note("authd and vmmd logs kept in " + keep)
        h.cleanup()
    taplib.done()


# ---- snapshots (test_vmmd_snapshot, _revoke, _warmpool, netd-vm) -------

# A guest process whose memory only a memory snapshot keeps: a random
# token and a count it bumps into /workspace/counter five times a second.
COUNTER = r"""
import os, time
token = os.urandom(8).hex()      # held in this process's memory only
n = 0
while True:
    n += 1
    with open("/workspace/counter.tmp", "w") as f:
        f.write("%s %d" % (token, n))
    os.rename("/workspace/counter.tmp", "/workspace/counter")
    time.sleep(0.2)
"""


def add_history(h, vm, n):
    """n finished jobs for vm, written straight into vmmd's database, as
    vmmd would have recorded them: making them through vm_exec would take
    hours (and now cannot: the guest keeps 256 jobs, and vmmd keeps no row
    for an exec the guest refused, nor more finished ones than its
    max_finished_jobs_per_vm).
    They started and finished now, after the VM's own jobs."""
    now = int(time.time() * 1000)
    db = sqlite3.connect(os.path.join(h.mnt, "vmmd.db"), timeout=10)
    with db:
        db.executemany(
            "INSERT INTO jobs (vm_id, job_id, request_id, state, exit_code, "
            "started_at, finished_at) VALUES (?, ?, 'history', 'completed', "
            "0, ?, ?)", ((vm, "h%06d" % i, now - 1, now) for i in range(n)))
    db.close()


def snap(c, **args):
    """vm_snapshot: its "name" argument is the Client call's own."""
    t, body, fd = c.c.call(ipc.VM_TOOL, {
        "credential": c.tok, "tool": "vm_snapshot", "arguments": args})
    if fd is not None:
        os.close(fd)
    return (False, body["error"]) if t == ipc.ERROR else \
        (True, body["result"])


def snapdir(h, sid=""):
    return os.path.join(h.mnt, "snapshots", sid)


def out(c, vm, cmd, rid):
    """A command's stdout, stripped, or "exit N: stderr"."""
    st, code, o, e = c.sh(vm, cmd, rid)
    return o.strip() if code == 0 else "exit %s: %s" % (code, e.strip())


def counter(c, vm, rid):
    """COUNTER's (token, count) in vm, or (None, -1)."""
    v = out(c, vm, "cat /workspace/counter", rid).split()
    return (v[0], int(v[1])) if len(v) == 2 else (None, -1)


def __getattr__(name):
    # vmmdlib.n and vmmdlib.failed: taplib's counts as they are now, for
    # the suites that end on them.
    if name in ("n", "failed"):
        return getattr(taplib, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
