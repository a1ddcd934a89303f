#!/usr/bin/env python3
# Tests for packaging/image/imagetool.py's pieces that need no root and no
# network: apt source parsing, bzImage payload extraction, module load order,
# the newc writer and the static-binary check.  TAP on stdout.
import contextlib
import gzip
import io
import lzma
import os
import shutil
import struct
import subprocess
import sys
import tempfile

SRCDIR = os.environ.get("SRCDIR", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOL = os.path.join(SRCDIR, "packaging", "image", "imagetool.py")
sys.path.insert(0, os.path.dirname(TOOL))
import imagetool  # noqa: E402
import taplib  # noqa: E402
from taplib import ok  # noqa: E402

def raises_exit(fn, *a):
    """Runs fn; returns True when it called fail() (SystemExit 1)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            fn(*a)
    except SystemExit as e:
        return e.code == 1
    return False


def write(root, rel, text):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)


def test_mirror(tmp):
    r = os.path.join(tmp, "apt1")
    write(r, "etc/apt/sources.list.d/debian.sources",
          "Types: deb\nURIs: http://sec.example/debian-security\n"
          "Suites: bookworm-security\nComponents: main\n\n"
          "Types: deb-src\nURIs: http://src.example/debian\n"
          "Suites: bookworm\nComponents: main\n\n"
          "Types: deb\n# a comment\nURIs: http://mirror.example/debian/\n"
          "Suites: bookworm bookworm-updates\nComponents: main contrib\n")
    write(r, "etc/apt/sources.list.d/other.sources",
          "Types: deb\nURIs: https://vendor.example/apt\n"
          "Suites: nodistro\nComponents: main\n")
    got = imagetool.find_mirror(r)
    ok(got == "http://mirror.example/debian",
       "deb822: picks the main archive, not security, deb-src or a vendor",
       got)

    r = os.path.join(tmp, "apt2")
    write(r, "etc/apt/sources.list",
          "# deb http://commented.example/debian bookworm main\n"
          "deb http://security.example/debian-security bookworm-security "
          "main\n"
          "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian "
          "trixie main\n")
    got = imagetool.find_mirror(r)
    ok(got == "http://one.example/debian",
       "one-line sources.list with options", got)

    r = os.path.join(tmp, "apt3")
    write(r, "etc/apt/sources.list.d/x.sources",
          "Types: deb\nEnabled: no\nURIs: http://off.example/debian\n"
          "Suites: bookworm\nComponents: main\n")
    ok(imagetool.find_mirror(r) is None,
       "a disabled entry is no mirror")


def fake_elf(size=4096):
    hdr = bytearray(64)
    hdr[:4] = b"\x7fELF"
    hdr[4] = 2
    struct.pack_into("<H", hdr, 18, 62)
    return bytes(hdr) + bytes(range(256)) * ((size - 64) // 256)


def fake_bzimage(path, payload, setup_sects=2):
    d = bytearray((setup_sects + 1) * 512)
    d[0x1f1] = setup_sects
    d[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", d, 0x206, 0x20f)
    struct.pack_into("<II", d, 0x248, 16, len(payload))
    d += b"\xaa" * 16 + payload + b"\x00" * 64
    with open(path, "wb") as f:
        f.write(d)


def test_vmlinux(tmp):
    elf = fake_elf()
    p = os.path.join(tmp, "bz")
    fake_bzimage(p, lzma.compress(elf, format=lzma.FORMAT_XZ) +
                 struct.pack("<I", len(elf)))
    got, kind = imagetool.extract_vmlinux(p)
    ok(got == elf and kind == "xz", "xz payload with size suffix")

    fake_bzimage(p, gzip.compress(elf))
    got, kind = imagetool.extract_vmlinux(p)
    ok(got == elf and kind == "gzip", "gzip payload (no size suffix)")

    if shutil.which("lz4"):
        lz = subprocess.run(["lz4", "-l", "-c", "-q"], input=elf,
                            stdout=subprocess.PIPE, check=True).stdout
        fake_bzimage(p, lz + struct.pack("<I", len(elf)))
        got, kind = imagetool.extract_vmlinux(p)
        ok(got == elf and kind == "lz4",
           "lz4 legacy payload (Debian's cloud kernel)")
    else:
        ok(False, "lz4 legacy payload: lz4 is not installed")

    fake_bzimage(p, lzma.compress(elf, format=lzma.FORMAT_XZ) +
                 struct.pack("<I", len(elf) + 1))
    ok(raises_exit(imagetool.extract_vmlinux, p),
       "a size suffix that disagrees is refused")
    notelf = b"MZ" + elf[2:]
    fake_bzimage(p, gzip.compress(notelf))
    ok(raises_exit(imagetool.extract_vmlinux, p),
       "a payload that is not ELF is refused")
    fake_bzimage(p, b"\x00\x01\x02\x03" + elf)
    ok(raises_exit(imagetool.extract_vmlinux, p),
       "an unknown compression is refused")
    with open(p, "wb") as f:
        f.write(b"\x00" * 4096)
    ok(raises_exit(imagetool.extract_vmlinux, p), "not a bzImage")


def test_modules(tmp):
    d = os.path.join(tmp, "mods")
    write(d, "modules.dep",
          "kernel/a/virtio.ko: kernel/a/virtio_ring.ko\n"
          "kernel/a/virtio_ring.ko:\n"
          "kernel/b/virtio-rng.ko: kernel/a/virtio.ko kernel/a/virtio_ring.ko\n"
          "kernel/c/net_failover.ko: kernel/c/failover.ko\n"
          "kernel/c/failover.ko:\n"
          "kernel/c/virtio_net.ko: kernel/c/net_failover.ko "
          "kernel/c/failover.ko kernel/a/virtio.ko kernel/a/virtio_ring.ko\n"
          "kernel/d/loop1.ko: kernel/d/loop2.ko\n"
          "kernel/d/loop2.ko: kernel/d/loop1.ko\n")
    write(d, "modules.builtin", "kernel/fs/ext4/ext4.ko\n")
    order, builtin = imagetool.resolve_modules(
        d, ["virtio_net", "virtio_rng", "ext4", "virtio"])
    names = [x for x, _ in order]
    pos = {x: i for i, x in enumerate(names)}
    after = [("virtio_ring", "virtio"), ("virtio", "virtio_net"),
             ("failover", "net_failover"), ("net_failover", "virtio_net"),
             ("virtio", "virtio_rng")]
    ok(len(names) == len(pos) == 6 and builtin == ["ext4"] and
       all(pos[a] < pos[b] for a, b in after) and
       names[0] == "virtio_ring",
       "dependencies first, each once, dashes normalised, built-ins apart",
       names)
    ok(raises_exit(imagetool.resolve_modules, d, ["nosuchmod"]),
       "an unknown module is refused")
    ok(raises_exit(imagetool.resolve_modules, d, ["loop1"]),
       "a dependency loop is refused")


def test_cpio(tmp):
    c = imagetool.Cpio()
    c.dir("dev")
    c.chardev("dev/console", 5, 1)
    c.file("init", b"\x7fELF" + b"x" * 5, 0o755)
    data = c.finish()
    ok(len(data) % 4 == 0 and data.endswith(b"TRAILER!!!\0" + b"\0" *
                                            (-(110 + 11) % 4)),
       "newc archive is padded and ends with the trailer")
    ok(data == _twice(), "the archive is byte-for-byte reproducible")
    if shutil.which("cpio"):
        p = subprocess.run(["cpio", "-itv", "--quiet"], input=data,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = p.stdout.decode()
        ok(p.returncode == 0 and "crw-------" in out and
           "-rwxr-xr-x" in out and " init" in out,
           "cpio(1) lists it: console node and executable init",
           out + p.stderr.decode())
    else:
        ok(False, "cpio(1) to read the archive is not installed")


def _twice():
    c = imagetool.Cpio()
    c.dir("dev")
    c.chardev("dev/console", 5, 1)
    c.file("init", b"\x7fELF" + b"x" * 5, 0o755)
    return c.finish()


def test_static():
    stage1 = os.environ.get("STAGE1")
    with open("/bin/sh", "rb") as f:
        ok(imagetool.elf_interp(f.read()), "/bin/sh is seen as dynamic")
    if stage1:
        with open(stage1, "rb") as f:
            ok(not imagetool.elf_interp(f.read()),
               "guestd stage one is static")


def main():
    tmp = tempfile.mkdtemp(prefix="imagetool-")
    try:
        test_mirror(tmp)
        test_vmlinux(tmp)
        test_modules(tmp)
        test_cpio(tmp)
        test_static()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    taplib.done()


if __name__ == "__main__":
    main()
