#!/usr/bin/env python3
# A QEMU boot harness for tests and benchmarks: boots a built guest image
# (kernel + initramfs + a private copy of its rootfs) the way vmmd's qemu
# backend does, with the guest link on a virtio-serial port, and tears it all
# down.  Runs in the test process, on the host; standard library only.
#
#   with QemuVM.from_manifest("/var/cache/.../manifest.json", tmpdir) as vm:
#       link = vm.accept_link(timeout=60)   # a connected socket
#       ...
#       vm.wait(timeout=30)                 # the guest powers off
#   vm.console() holds the serial console.
import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time

LINK_PORT = "org.mcpvm.link.0"
KVM_GET_API_VERSION = 0xAE00


def kvm_usable():
    """/dev/kvm opens read-write and speaks KVM API 12."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return fcntl.ioctl(fd, KVM_GET_API_VERSION) == 12
    except OSError:
        return False
    finally:
        os.close(fd)


_accel = None
KVM_PROBE_S = 15
# /run is emptied at every boot; a non-root run finds it read-only and probes.
PROBE_FILE = "/run/mcpvm-test-accel"


def _die_with_parent():
    # QEMU must not outlive a test killed by its timeout.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def kvm_boots(kernel):
    """
    Some hosts expose a /dev/kvm that QEMU cannot use: nested KVM that
    rejects MSR writes (QEMU aborts as soon as it resets the vCPU), or
    one where QEMU runs but the guest's kernel hangs before it prints a
    line.  So the guest's own kernel is booted under KVM, with no root,
    and must reach its panic (and QEMU exit, -no-reboot) within
    KVM_PROBE_S; KVM does it in about a second, TCG here in seven.
    """
    if not kvm_usable():
        return False
    p = subprocess.Popen([qemu_binary(), "-accel", "kvm", "-cpu", "host",
                          "-M", "q35", "-m", "128", "-nodefaults",
                          "-display", "none", "-no-reboot",
                          "-serial", "stdio", "-kernel", kernel,
                          "-append", "console=ttyS0 panic=-1"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL,
                         preexec_fn=_die_with_parent)
    try:
        out, _ = p.communicate(timeout=KVM_PROBE_S)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return False
    return b"Kernel panic" in out


def pick_accel(kernel):
    """MCPVM_QEMU_ACCEL=tcg|kvm forces one; otherwise kvm when kernel
    boots on it."""
    global _accel
    forced = os.environ.get("MCPVM_QEMU_ACCEL")
    if forced:
        return forced
    if _accel is None:
        _accel = probed_accel(kernel)
    return _accel


def probed_accel(kernel):
    """kvm_boots's verdict, kept for the rest of this host's boot in
    PROBE_FILE, so that the suites do not each spend up to KVM_PROBE_S
    on a KVM that does not work."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = None
    try:
        with open(PROBE_FILE) as f:
            was_boot, accel = f.read().split()
        if boot is not None and was_boot == boot and \
                accel in ("kvm", "tcg"):
            return accel
    except (OSError, ValueError):
        pass
    accel = "kvm" if kvm_boots(kernel) else "tcg"
    if boot is not None:
        try:
            tmp = "%s.%d" % (PROBE_FILE, os.getpid())
            with open(tmp, "w") as f:
                f.write("%s %s\n" % (boot, accel))
            os.rename(tmp, PROBE_FILE)
        except OSError:
            pass
    return accel


def qemu_binary():
    return os.environ.get("QEMU", shutil.which("qemu-system-x86_64") or
                          "qemu-system-x86_64")


class QemuVM:
    """
    One guest.  The host listens on a Unix socket and QEMU connects to it as
    the chardev of the link port, so there is no window where the guest
    writes before anyone could accept.
    """

    def __init__(self, kernel, initrd, rootfs, workdir, memory_mib=512,
                 cmdline_extra="", accel=None, cpus=1, copy_rootfs=True):
        self.kernel = kernel
        self.initrd = initrd
        self.workdir = workdir
        self.memory_mib = memory_mib
        self.cmdline_extra = cmdline_extra
        self.accel = accel or pick_accel(kernel)
        self.cpus = cpus
        os.makedirs(workdir, exist_ok=True)
        self.disk = os.path.join(workdir, "rootfs.raw")
        if copy_rootfs:
            # The image stays pristine: its digest is pinned.
            subprocess.run(["cp", "--reflink=auto", "--sparse=always",
                            rootfs, self.disk], check=True)
        else:
            self.disk = rootfs
        self.console_path = os.path.join(workdir, "console.log")
        self.link_path = os.path.join(workdir, "link.sock")
        self.proc = None
        self.listener = None
        self.link = None
        self.started = None

    @classmethod
    def from_manifest(cls, manifest, workdir, **kw):
        with open(manifest) as f:
            m = json.load(f)
        d = os.path.dirname(os.path.abspath(manifest))
        fl = m["files"]
        kw.setdefault("memory_mib", 512)
        return cls(os.path.join(d, fl["kernel"]["path"]),
                   os.path.join(d, fl["initrd"]["path"]),
                   os.path.join(d, fl["rootfs"]["path"]), workdir, **kw)

    def add_file(self, src, dest, mode=0o755):
        """Puts a host file into the (copied) rootfs, owned by root."""
        if self.proc:
            raise RuntimeError("add_file before start()")
        cmds = (f"rm {dest}\nwrite {src} {dest}\n"
                f"set_inode_field {dest} mode 0{0o100000 | mode:o}\n"
                f"set_inode_field {dest} uid 0\n"
                f"set_inode_field {dest} gid 0\n")
        subprocess.run(["debugfs", "-w", "-f", "-", self.disk], input=cmds,
                       text=True, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def cmdline(self):
        return ("console=ttyS0 root=/dev/vda rw quiet panic=-1 "
                + self.cmdline_extra).strip()

    def argv(self):
        accel = self.accel
        cpu = os.environ.get("MCPVM_QEMU_CPU") or ("host" if accel == "kvm" else "max")
        return [
            qemu_binary(), "-accel", accel, "-M", "q35", "-cpu", cpu,
            "-m", str(self.memory_mib), "-smp", str(self.cpus),
            "-nodefaults", "-nographic", "-no-reboot",
            "-serial", f"file:{self.console_path}",
            "-kernel", self.kernel, "-initrd", self.initrd,
            "-append", self.cmdline(),
            "-drive", f"file={self.disk},if=none,id=disk0,format=raw,"
                      "cache=unsafe",
            "-device", "virtio-blk-pci,drive=disk0",
            "-device", "virtio-rng-pci",
            "-device", "virtio-serial-pci,id=vser0",
            "-chardev", f"socket,id=link0,path={self.link_path}",
            "-device", f"virtserialport,bus=vser0.0,chardev=link0,"
                       f"name={LINK_PORT}",
        ]

    def start(self):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.link_path)
        self.listener.listen(1)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv(), stdin=subprocess.DEVNULL,
            stdout=open(os.path.join(self.workdir, "qemu.out"), "wb"),
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_die_with_parent)
        return self

    def accept_link(self, timeout=60):
        """The host end of the link: a connected socket, or TimeoutError."""
        self.listener.settimeout(0.2)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.link, _ = self.listener.accept()
                self.link.settimeout(timeout)
                return self.link
            except socket.timeout:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"qemu exited ({self.proc.returncode}) "
                                   f"before connecting: {self.qemu_output()}")
            if time.monotonic() > deadline:
                raise TimeoutError("qemu did not connect the link socket")

    def read_line(self, timeout=60):
        """One line from the link (bytes, without the newline)."""
        buf = getattr(self, "_buf", b"")
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no line on the link in {timeout} s; "
                                   + self.diag())
            self.link.settimeout(left)
            try:
                chunk = self.link.recv(4096)
            except socket.timeout:
                continue
            if not chunk:
                raise EOFError("link closed; " + self.diag())
            buf += chunk
        line, _, self._buf = buf.partition(b"\n")
        return line

    def wait(self, timeout=60):
        """Waits for QEMU to exit (guest power-off); returns its status."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"guest did not power off in {timeout} s; "
                               + self.diag())

    def console(self):
        try:
            with open(self.console_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def diag(self):
        """QEMU's state, its own output and the console's tail."""
        if self.proc is None:
            state = "not started"
        elif self.proc.poll() is None:
            state = "running"
        elif self.proc.returncode < 0:
            state = f"killed by signal {-self.proc.returncode}"
        else:
            state = f"exited {self.proc.returncode}"
        return (f"qemu {state}; qemu said: {self.qemu_output() or '-'}; "
                f"console:\n{self.console()[-2000:]}")

    def qemu_output(self):
        try:
            with open(os.path.join(self.workdir, "qemu.out"), "rb") as f:
                return f.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def stop(self):
        if self.link:
            self.link.close()
            self.link = None
        if self.proc and self.proc.poll() is None:
            # Our own process group (start_new_session), nothing else.
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.listener:
            self.listener.close()
            self.listener = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
