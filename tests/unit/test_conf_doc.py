#!/usr/bin/env python3
"""docs/mcpvm.conf.5 documents every configuration key with its default.

The list of keys comes from conf_reference, built from the same tables the
daemons parse with; a key added to common/conf.c without a line in the man
page fails here, and so does a default that changed without the page.
"""
import subprocess
import sys

ref, page = sys.argv[1], sys.argv[2]
text = open(page).read()
missing = []
for line in subprocess.check_output([ref], text=True).splitlines():
    section, key, default = line.split("\t")
    # Each key is an item of its section's list; its default follows it.
    anchor = ".It Cm %s" % key
    sec_start = text.find(".Ss \\&[%s" % section)
    if sec_start == -1:
        missing.append("section [%s]" % section)
        continue
    next_sec = text.find(".Ss ", sec_start + 4)
    body = text[sec_start:next_sec if next_sec != -1 else len(text)]
    pos = body.find(anchor)
    if pos == -1:
        missing.append("[%s] %s" % (section, key))
        continue
    item = body[pos:body.find(".It ", pos + 4) if body.find(".It ", pos + 4) != -1 else len(body)]
    if default == "(required)":
        if "Required." not in item:
            missing.append("[%s] %s: not said to be required" % (section, key))
    elif default != "(none)" and default not in item:
        missing.append("[%s] %s: default %s not stated" % (section, key, default))
for m in missing:
    print("not documented:", m)
sys.exit(1 if missing else 0)
