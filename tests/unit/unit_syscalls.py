#!/usr/bin/env python3
"""Prints the system calls a unit file's SystemCallFilter= lines leave
allowed, one per line, with the groups expanded the way this machine's
systemd expands them (`systemd-analyze syscall-filter`).  test_units.sh
checks that what each daemon itself calls is among them: a call the unit
denies fails with EPERM under systemd, and nothing else would show it on
a host whose PID 1 is not systemd.
usage: unit_syscalls.py UNIT_FILE
"""
import subprocess
import sys

listing = subprocess.run(["systemd-analyze", "syscall-filter"],
                         capture_output=True, text=True).stdout
groups, cur = {}, None
for line in listing.splitlines():
    if line.startswith("@"):
        cur = line.strip()
        groups[cur] = []
    elif cur is not None and line.strip() and \
            not line.strip().startswith("#"):
        groups[cur].append(line.strip())


def expand(names, seen=None):
    seen = set() if seen is None else seen
    out = set()
    for n in names:
        if n.startswith("@"):
            if n not in seen:
                seen.add(n)
                out |= expand(groups.get(n, []), seen)
        else:
            out.add(n)
    return out


allowed = None
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("SystemCallFilter="):
        continue
    v = line.split("=", 1)[1].strip()
    if v.startswith("~"):
        names = expand(v[1:].split())
        if allowed is not None:
            allowed -= names
    else:
        names = expand(v.split())
        allowed = names if allowed is None else allowed | names
if allowed is None:
    print("*")       # no filter: everything
else:
    print("\n".join(sorted(allowed)))
