#!/bin/bash
# Root vmmd reads no byte QEMU writes (#14, finding 7): the QMP client and
# QEMU's log belong to each VM's vmproxy.  This checks the binaries: vmmd
# links no QMP client (qmp.c) and no log drain of QEMU's output, vmproxy
# links both.  The running side (QEMU's QMP socket connected to vmproxy,
# vmmd holding no descriptor on it or on qemu.log) is checked with real
# VMs by vmmd-hostile-proxy.
# usage: test_vmmd_no_qmp.sh VMMD VMPROXY
set -euo pipefail
vmmd=$1 vmproxy=$2
syms='^(qmp_open|qmp_parse|qmp_command|vpq_call|console_new)$'
defined() { nm --defined-only "$1" | awk '{ print $3 }' | grep -E "$syms" |
	sort -u || true; }
in_vmmd=$(defined "$vmmd")
if [ -n "$in_vmmd" ]; then
	echo "not ok 1 - vmmd links QEMU's QMP client or log drain:" $in_vmmd
	exit 1
fi
echo "ok 1 - vmmd links no QMP client and no drain of QEMU's output"
in_proxy=$(defined "$vmproxy" | wc -l)
if [ "$in_proxy" -ne 5 ]; then
	echo "not ok 2 - vmproxy should define all of $syms, has:" \
	    $(defined "$vmproxy")
	exit 1
fi
echo "ok 2 - vmproxy has them (the check above looks for real names)"
echo "1..2"
