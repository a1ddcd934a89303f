#!/usr/bin/env python3
"""README.md's examples hold: every tool request and response shown there
is valid against proto/tools.json (checked by the same C validator mcpd and
vmmd use), every tool has one, and the commands it opens with exist.
usage: test_readme.py README SCHEMA_CHECK SRCDIR
"""
import os
import re
import subprocess
import sys

readme, check, srcdir = sys.argv[1:4]
text = open(readme).read()
blocks = re.findall(r"<!-- example (\w+) (input|output) -->\s*```json\n"
                    r"(.*?)```", text, re.S)
failed = 0
seen = set()
for tool, kind, body in blocks:
    p = subprocess.run([check, tool, kind], input=body, text=True,
                       capture_output=True)
    good = p.returncode == 0
    print("%s - README %s %s example" % ("ok" if good else "not ok", tool,
                                          kind))
    if not good:
        failed += 1
        print("# " + p.stderr.strip())
    seen.add(tool)
tools = {"vm_create", "vm_list", "vm_status", "vm_exec", "vm_job_status",
         "vm_job_output", "vm_job_cancel", "vm_read_file", "vm_write_file",
         "vm_suspend", "vm_resume", "vm_destroy", "vm_run", "vm_snapshot",
         "vm_snapshot_list", "vm_snapshot_delete", "vm_fork"}
# vm_job_status is described in words beside vm_job_cancel.
missing = tools - seen - {"vm_job_status"}
if missing:
    failed += 1
    print("not ok - README has no example for %s" % ", ".join(sorted(missing)))
for cmd in ("packaging/dev/up", "tests/run", "tests/bench/run"):
    if cmd not in text.split("## How it is put together")[0] and \
            cmd != "tests/bench/run":
        failed += 1
        print("not ok - README does not open with %s" % cmd)
    if not os.access(os.path.join(srcdir, cmd), os.X_OK):
        failed += 1
        print("not ok - %s is not an executable in the tree" % cmd)
# The packaged path: build, install, storage, images, enable.
install = text.split("## Installing from Debian packages")[1:2]
install = install[0].split("\n## ")[0] if install else ""
for need in ("packaging/debian/build", "apt-get install ./build/debs/",
             "mcpvm-image --out", "/etc/mcpvm/mcpvm.conf", "reflink",
             "systemctl enable --now mcpvm.target"):
    if need not in install:
        failed += 1
        print("not ok - README's install section does not say %s" % need)
for cmd in ("packaging/debian/build", "packaging/image/mcpvm-image"):
    if not os.access(os.path.join(srcdir, cmd), os.X_OK):
        failed += 1
        print("not ok - %s is not an executable in the tree" % cmd)
print("1..%d" % (len(blocks) + 1))
sys.exit(1 if failed else 0)
