#!/usr/bin/env python3
# Helpers for packaging/image/build: the parts of the guest image recipe that
# are easier in Python than in shell (apt source parsing, bzImage unpacking,
# module dependency order, the initramfs cpio, the manifest).  Run by the
# build script on the build host, as root; standard library only.
import argparse
import glob
import gzip
import hashlib
import io
import json
import lzma
import bz2
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

KERNEL_META = "linux-image-cloud-amd64"
DEBIAN_SUITES = {"buster", "bullseye", "bookworm", "trixie", "forky",
                 "sid", "unstable", "testing", "stable", "oldstable"}


def fail(msg):
    print(f"imagetool: {msg}", file=sys.stderr)
    sys.exit(1)


def run(cmd, **kw):
    try:
        return subprocess.run(cmd, check=True, text=True,
                              stdout=subprocess.PIPE, **kw).stdout
    except FileNotFoundError:
        fail(f"{cmd[0]}: not installed")
    except subprocess.CalledProcessError as e:
        fail(f"{' '.join(cmd)}: exit status {e.returncode}")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


# ---- apt sources --------------------------------------------------------

def apt_source_entries(root="/"):
    """Yields (uris, suites, components, signed_by) from apt's sources."""
    one = os.path.join(root, "etc/apt/sources.list")
    files = [one] + sorted(glob.glob(os.path.join(
        root, "etc/apt/sources.list.d/*.list")))
    for path in files:
        try:
            lines = open(path).read().splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if not line.startswith("deb "):
                continue
            # deb [opts] uri suite comp...
            opts = ""
            rest = line[4:].strip()
            if rest.startswith("["):
                end = rest.find("]")
                if end < 0:
                    continue
                opts, rest = rest[1:end], rest[end + 1:].split()
            else:
                rest = rest.split()
            if len(rest) < 2:
                continue
            m = re.search(r"signed-by=(\S+)", opts)
            yield [rest[0]], [rest[1]], rest[2:], m.group(1) if m else ""
    for path in sorted(glob.glob(os.path.join(
            root, "etc/apt/sources.list.d/*.sources"))):
        try:
            text = open(path).read()
        except OSError:
            continue
        for stanza in re.split(r"\n\s*\n", text):
            fields = {}
            key = None
            for line in stanza.splitlines():
                if line.startswith("#"):
                    continue
                if line[:1] in (" ", "\t") and key:
                    fields[key] += " " + line.strip()
                    continue
                if ":" in line:
                    key, val = line.split(":", 1)
                    key = key.strip().lower()
                    fields[key] = val.strip()
            if "deb" not in fields.get("types", "").split():
                continue
            if fields.get("enabled", "yes").lower() == "no":
                continue
            yield (fields.get("uris", "").split(),
                   fields.get("suites", "").split(),
                   fields.get("components", "").split(),
                   fields.get("signed-by", ""))


def find_mirror(root="/"):
    """The main Debian archive apt is configured with (not security)."""
    for uris, suites, comps, signed in apt_source_entries(root):
        if "main" not in comps:
            continue
        if not any(s.split("-")[0] in DEBIAN_SUITES and
                   not s.endswith("-security") for s in suites):
            continue
        for uri in uris:
            if "security" in uri or not re.match(r"https?://", uri):
                continue
            return uri.rstrip("/")
    return None


def cmd_mirror(args):
    uri = find_mirror(args.root)
    if not uri:
        fail("no Debian archive (main, not security) in /etc/apt/sources.list"
             " or /etc/apt/sources.list.d/*.sources; pass --mirror URL")
    print(uri)


# ---- hashing ------------------------------------------------------------

def cmd_hash(args):
    h = hashlib.sha256()
    for item in args.items:
        if item.startswith("str:"):
            h.update(b"S" + item[4:].encode() + b"\0")
            continue
        h.update(b"F" + os.path.basename(item).encode() + b"\0")
        h.update(bytes.fromhex(sha256_file(item)))
    print(h.hexdigest())


# ---- kernel -------------------------------------------------------------

def apt_lists_stamp():
    """Changes whenever apt-get update brought new package lists."""
    h = hashlib.sha256()
    for p in sorted(glob.glob("/var/lib/apt/lists/*")):
        try:
            st = os.stat(p)
        except OSError:
            continue
        h.update(f"{p}\0{st.st_mtime_ns}\0{st.st_size}\0".encode())
    return h.hexdigest()


def kernel_package(cache):
    """
    Resolves the metapackage to the real image package and its version.
    apt-cache takes a second or more per call here, so the answer is kept
    until the package lists change.
    """
    memo = os.path.join(cache, "kernel-resolve.json")
    stamp = apt_lists_stamp()
    try:
        m = json.load(open(memo))
        if m["stamp"] == stamp:
            return m["package"], m["version"]
    except (OSError, ValueError, KeyError):
        pass
    out = run(["apt-cache", "show", "--no-all-versions", KERNEL_META])
    m = re.search(r"^Depends:.*?\b(linux-image-[^\s,(]+)\s*\(=\s*([^)\s]+)\)",
                  out, re.M)
    if not m:
        fail(f"{KERNEL_META}: no 'linux-image-* (= version)' dependency in "
             "apt-cache show (apt-get update?)")
    pkg, version = m.group(1), m.group(2)
    with open(memo + ".tmp", "w") as f:
        json.dump({"stamp": stamp, "package": pkg, "version": version}, f)
    os.replace(memo + ".tmp", memo)
    return pkg, version


BZ_MAGICS = [
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x5d\x00\x00", "lzma"),
    (b"BZh", "bzip2"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x02\x21\x4c\x18", "lz4"),
    (b"\x89LZO", "lzo"),
]


def decompress(kind, data):
    if kind == "gzip":
        return zlib.decompressobj(31).decompress(data)
    if kind == "xz":
        return lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(data)
    if kind == "lzma":
        return lzma.LZMADecompressor(lzma.FORMAT_ALONE).decompress(data)
    if kind == "bzip2":
        return bz2.BZ2Decompressor().decompress(data)
    tool = {"zstd": ["zstd", "-dcq"], "lz4": ["lz4", "-dcq"],
            "lzo": ["lzop", "-dcq"]}[kind]
    try:
        p = subprocess.run(tool, input=data, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, check=True)
    except FileNotFoundError:
        fail(f"vmlinux: the payload is {kind}; install {tool[0]}")
    except subprocess.CalledProcessError as e:
        fail(f"vmlinux: {tool[0]} failed: {e.stderr.decode(errors='replace')}")
    return p.stdout


def extract_vmlinux(bzimage):
    """
    The x86 boot protocol (2.08+) gives the offset and length of the
    compressed kernel in the setup header; the payload is an ELF vmlinux.
    Every format but gzip carries the uncompressed size as a 4-byte suffix.
    """
    d = open(bzimage, "rb").read()
    if len(d) < 0x250 or d[0x202:0x206] != b"HdrS":
        fail(f"{bzimage}: not a bzImage (no HdrS setup header)")
    version = struct.unpack_from("<H", d, 0x206)[0]
    if version < 0x208:
        fail(f"{bzimage}: boot protocol {version:#x} has no payload fields")
    setup_sects = d[0x1f1] or 4
    poff, plen = struct.unpack_from("<II", d, 0x248)
    start = (setup_sects + 1) * 512 + poff
    payload = d[start:start + plen]
    if len(payload) != plen:
        fail(f"{bzimage}: payload runs past the end of the file")
    for magic, kind in BZ_MAGICS:
        if payload.startswith(magic):
            break
    else:
        fail(f"{bzimage}: unknown payload compression "
             f"(magic {payload[:6].hex()})")
    want = None
    if kind != "gzip":
        want = struct.unpack("<I", payload[-4:])[0]
        payload = payload[:-4]
    elf = decompress(kind, payload)
    if want is not None and len(elf) != want:
        fail(f"{bzimage}: {kind} payload gave {len(elf)} bytes, "
             f"header says {want}")
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or \
            struct.unpack_from("<H", elf, 18)[0] != 62:
        fail(f"{bzimage}: decompressed payload is not an x86-64 ELF")
    return elf, kind


def modname(path):
    base = os.path.basename(path)
    for ext in (".ko", ".ko.xz", ".ko.gz", ".ko.zst"):
        if base.endswith(ext):
            base = base[:-len(ext)]
    return base.replace("-", "_")


def resolve_modules(moddir, wanted):
    """Returns [(name, path)] in load order, and the wanted built-ins."""
    deps = {}
    paths = {}
    for line in open(os.path.join(moddir, "modules.dep")):
        if ":" not in line:
            continue
        mod, rest = line.split(":", 1)
        n = modname(mod)
        paths[n] = mod
        deps[n] = [modname(x) for x in rest.split()]
    builtin = set()
    try:
        for line in open(os.path.join(moddir, "modules.builtin")):
            builtin.add(modname(line.strip()))
    except OSError:
        pass
    order, seen, builtins = [], set(), []

    def visit(n, chain):
        if n in seen:
            return
        if n in chain:
            fail(f"module dependency loop: {' -> '.join(chain + [n])}")
        # modules.dep lists the deepest dependency last (modprobe loads
        # the list backwards); visiting it backwards keeps that order.
        for dep in reversed(deps[n]):
            visit(dep, chain + [n])
        seen.add(n)
        order.append((n, paths[n]))

    for w in wanted:
        n = w.replace("-", "_")
        if n in deps:
            visit(n, [])
        elif n in builtin:
            builtins.append(n)
        else:
            fail(f"module {w}: neither in modules.dep nor built into "
                 f"the kernel ({moddir})")
    return order, builtins


def read_list(path):
    out = []
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line:
            out.extend(line.split())
    return out


def cmd_kernel(args):
    pkg, version = kernel_package(args.cache)
    key = hashlib.sha256()
    for f in (__file__, args.modules):
        key.update(open(f, "rb").read())
    key.update(f"{pkg}={version}".encode())
    name = f"kernel-{version}-{key.hexdigest()[:12]}"
    final = os.path.join(args.cache, name)
    if os.path.exists(os.path.join(final, "kernel.json")):
        print(final)
        return
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix=".kernel-", dir=args.cache)
    try:
        dl = os.path.join(tmp, "dl")
        os.mkdir(dl)
        print(f"imagetool: fetching {pkg} {version}", file=sys.stderr)
        run(["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root",
             f"{pkg}={version}"], cwd=dl)
        debs = glob.glob(os.path.join(dl, "*.deb"))
        if len(debs) != 1:
            fail(f"apt-get download {pkg}: expected one .deb, got {debs}")
        x = os.path.join(tmp, "x")
        run(["dpkg-deb", "-x", debs[0], x])
        vmlinuz = glob.glob(os.path.join(x, "boot", "vmlinuz-*"))
        if len(vmlinuz) != 1:
            fail(f"{pkg}: expected one /boot/vmlinuz-*, got {vmlinuz}")
        release = os.path.basename(vmlinuz[0])[len("vmlinuz-"):]
        # The package ships no modules.dep (its postinst runs depmod).
        run(["depmod", "-b", x, release])
        moddir = os.path.join(x, "lib", "modules", release)
        order, builtins = resolve_modules(moddir, read_list(args.modules))
        out = os.path.join(tmp, "out")
        os.makedirs(os.path.join(out, "modules"))
        shutil.copyfile(vmlinuz[0], os.path.join(out, "vmlinuz"))
        elf, kind = extract_vmlinux(vmlinuz[0])
        with open(os.path.join(out, "vmlinux"), "wb") as f:
            f.write(elf)
        for n, rel in order:
            src = os.path.join(moddir, rel)
            data = open(src, "rb").read()
            if src.endswith(".xz"):
                data = lzma.decompress(data)
            elif src.endswith(".gz"):
                data = gzip.decompress(data)
            with open(os.path.join(out, "modules", n + ".ko"), "wb") as f:
                f.write(data)
        with open(os.path.join(out, "kernel.json"), "w") as f:
            json.dump({"package": pkg, "version": version,
                       "release": release, "payload": kind,
                       "modules": [n for n, _ in order],
                       "builtin": builtins}, f, indent=1)
        os.rename(out, final)
        print(f"imagetool: kernel {release}: {len(order)} modules "
              f"({', '.join(builtins) or 'none'} built in), vmlinux from "
              f"{kind} payload, {time.monotonic() - t0:.1f} s",
              file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # The build script evicts the least recently used extracts.
    print(final)


def cmd_vmlinux(args):
    elf, kind = extract_vmlinux(args.bzimage)
    with open(args.out, "wb") as f:
        f.write(elf)
    print(f"{args.out}: {len(elf)} bytes of ELF from a {kind} payload")


# ---- initramfs ----------------------------------------------------------

class Cpio:
    """A deterministic newc archive: fixed inode numbers, mtime 0, root."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.ino = 1

    def _entry(self, name, mode, data=b"", rdev=(0, 0), nlink=1):
        nb = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08x}" for v in (
            self.ino, mode, 0, 0, nlink, 0, len(data), 0, 0,
            rdev[0], rdev[1], len(nb), 0))
        self.ino += 1
        self.buf.write(hdr.encode() + nb)
        self.buf.write(b"\0" * (-(110 + len(nb)) % 4))
        self.buf.write(data)
        self.buf.write(b"\0" * (-len(data) % 4))

    def dir(self, name, perm=0o755):
        self._entry(name, 0o040000 | perm, nlink=2)

    def file(self, name, data, perm=0o644):
        self._entry(name, 0o100000 | perm, data)

    def chardev(self, name, major, minor, perm=0o600):
        self._entry(name, 0o020000 | perm, rdev=(major, minor))

    def finish(self):
        self.ino = 0
        self._entry("TRAILER!!!", 0, nlink=1)
        return self.buf.getvalue()


def elf_interp(elf):
    """True when a 64-bit ELF asks for a program interpreter."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or len(elf) < 64:
        return False
    phoff = struct.unpack_from("<Q", elf, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 4 <= len(elf) and \
                struct.unpack_from("<I", elf, off)[0] == 3:  # PT_INTERP
            return True
    return False


def cmd_static(args):
    """Exit 0 when the file is an ELF without a program interpreter."""
    with open(args.path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        fail(f"{args.path}: not an ELF executable")
    if elf_interp(data):
        fail(f"{args.path}: dynamically linked (a sanitizer build?); the "
             "guest has no libraries for it, link it statically")


def cmd_initrd(args):
    info = json.load(open(os.path.join(args.kernel_dir, "kernel.json")))
    stage1 = open(args.stage1, "rb").read()
    if stage1[:4] != b"\x7fELF":
        fail(f"{args.stage1}: not an ELF executable")
    # A dynamic stage one would die with ENOENT before printing anything.
    if elf_interp(stage1):
        fail(f"{args.stage1}: dynamically linked; stage one must be static")
    c = Cpio()
    for d in ("dev", "proc", "sys", "root", "lib", "lib/modules",
              "lib/modules/mcpvm"):
        c.dir(d)
    c.chardev("dev/console", 5, 1)
    c.file("init", stage1, 0o755)
    names = info["modules"]
    for n in names:
        c.file(f"lib/modules/mcpvm/{n}.ko", open(os.path.join(
            args.kernel_dir, "modules", n + ".ko"), "rb").read())
    listing = (f"# {info['release']}: load order, resolved from modules.dep"
               "\n" + "".join(f"{n}.ko\n" for n in names))
    c.file("lib/modules/mcpvm/modules.list", listing.encode())
    raw = c.finish()
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as f:
        # mtime=0 and no name keep the archive reproducible.
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="",
                           compresslevel=6) as g:
            g.write(raw)
    os.replace(tmp, args.out)


# ---- manifest -----------------------------------------------------------

def cmd_manifest(args):
    out = os.path.abspath(args.out)
    kinfo = json.load(open(os.path.join(args.kernel_dir, "kernel.json")))
    files = {}
    for role, name in (("kernel", "vmlinuz"), ("vmlinux", "vmlinux"),
                       ("initrd", "initrd.img"), ("rootfs", "rootfs.raw")):
        p = os.path.join(out, name)
        st = os.stat(p)
        files[role] = {"path": name, "sha256": sha256_file(p),
                       "size": st.st_size,
                       "allocated": st.st_blocks * 512}
    ini = [f"[image {args.id}]",
           f"rootfs = {out}/rootfs.raw",
           f"kernel = {out}/vmlinuz",
           f"initrd = {out}/initrd.img",
           f"rootfs_sha256 = {files['rootfs']['sha256']}",
           f"kernel_sha256 = {files['kernel']['sha256']}",
           f"initrd_sha256 = {files['initrd']['sha256']}",
           f"default = {'true' if args.default else 'false'}",
           f"memory_mib = {args.memory_mib}",
           f"# firecracker needs the ELF kernel: {out}/vmlinux",
           f"# vmlinux_sha256 = {files['vmlinux']['sha256']}"]
    manifest = {
        "id": args.id,
        "profile": args.profile,
        "key": args.key,
        "suite": args.suite,
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": args.seconds,
        "kernel": {k: kinfo[k] for k in ("package", "version", "release")},
        "modules": kinfo["modules"],
        "builtin_modules": kinfo["builtin"],
        "stage2": args.stage2,
        "files": files,
        "config": "\n".join(ini) + "\n",
    }
    with open(os.path.join(out, "image.ini.tmp"), "w") as f:
        f.write(manifest["config"])
    os.replace(os.path.join(out, "image.ini.tmp"),
               os.path.join(out, "image.ini"))
    with open(os.path.join(out, "manifest.json.tmp"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(os.path.join(out, "manifest.json.tmp"),
               os.path.join(out, "manifest.json"))


def cmd_cached(args):
    """Exit 0 when OUT holds a complete image built with this key."""
    try:
        m = json.load(open(os.path.join(args.out, "manifest.json")))
    except (OSError, ValueError):
        sys.exit(1)
    if m.get("key") != args.key:
        sys.exit(1)
    for f in m.get("files", {}).values():
        p = os.path.join(args.out, f["path"])
        try:
            if os.stat(p).st_size != f["size"]:
                sys.exit(1)
        except OSError:
            sys.exit(1)
    sys.exit(0)


def main():
    ap = argparse.ArgumentParser(prog="imagetool")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("mirror")
    p.add_argument("--root", default="/")
    p.set_defaults(fn=cmd_mirror)
    p = sub.add_parser("hash")
    p.add_argument("items", nargs="+")
    p.set_defaults(fn=cmd_hash)
    p = sub.add_parser("kernel")
    p.add_argument("--cache", required=True)
    p.add_argument("--modules", required=True)
    p.set_defaults(fn=cmd_kernel)
    p = sub.add_parser("vmlinux")
    p.add_argument("bzimage")
    p.add_argument("out")
    p.set_defaults(fn=cmd_vmlinux)
    p = sub.add_parser("static")
    p.add_argument("path")
    p.set_defaults(fn=cmd_static)
    p = sub.add_parser("initrd")
    p.add_argument("--kernel-dir", required=True)
    p.add_argument("--stage1", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_initrd)
    p = sub.add_parser("manifest")
    for a in ("--out", "--kernel-dir", "--id", "--profile", "--key",
              "--suite", "--stage2"):
        p.add_argument(a, required=True)
    p.add_argument("--memory-mib", type=int, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--default", action="store_true")
    p.set_defaults(fn=cmd_manifest)
    p = sub.add_parser("cached")
    p.add_argument("--out", required=True)
    p.add_argument("--key", required=True)
    p.set_defaults(fn=cmd_cached)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
