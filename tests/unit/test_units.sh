#!/bin/bash
# The systemd units must pass `systemd-analyze verify` and stay within their
# `systemd-analyze security` budget.  The host's PID 1 is not systemd, so the
# units are checked as files, with ExecStart pointed at the binaries of this
# build (which must exist and run).
# usage: test_units.sh UNIT_DIR BUILD_DIR
set -euo pipefail
units=$1 build=$2
if ! command -v systemd-analyze >/dev/null; then
	echo "systemd-analyze is not installed" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for u in "$units"/*.service "$units"/*.target; do
	sed -e "s|/usr/sbin/authd|$build/authd/authd|" \
	    -e "s|/usr/sbin/vmmd|$build/vmmd/vmmd|" \
	    -e "s|/usr/sbin/netd|$build/netd/netd|" \
	    -e "s|/usr/sbin/mcpd|$build/mcpd/mcpd|" \
	    -e "s|/usr/libexec/mcpvm/vmhold|$build/vmmd/vmhold|" \
	    "$u" > "$tmp/$(basename "$u")"
done
out=$(cd "$tmp" && systemd-analyze verify --man=no ./*.service ./*.target 2>&1) || {
	echo "$out"
	exit 1
}
# verify warns without failing; a warning is an error here.
if [ -n "$out" ]; then
	echo "$out"
	exit 1
fi
echo "units verified: $(ls "$tmp" | tr '\n' ' ')"

# Exposure budgets: the front end and the credential store are held to
# 2.0, the others to what their work allows (each unit's comment says
# what remains and why).  A unit without a budget here fails: add one.
status=0
budget() {
	case "$1" in
	mcpvm-authd|mcpvm-mcpd) echo 2.0 ;;
	# 1.9 before each VM's mount namespace: CAP_SYS_ADMIN, mount and
	# RestrictNamespaces=mnt are the spawner's jail's.
	mcpvm-vmmd) echo 2.4 ;;
	# 3.0 before the DNS forwarder: AF_INET, no IPAddressDeny, and
	# CAP_NET_BIND_SERVICE CAP_SETUID CAP_SETGID are its.
	mcpvm-netd) echo 3.3 ;;
	# Root, for vmmd's writes in its cgroup; nothing else.
	mcpvm-vms) echo 1.5 ;;
	*) echo none ;;
	esac
}
for u in "$tmp"/*.service; do
	name=$(basename "$u" .service)
	score=$(systemd-analyze security --offline=true "$u" 2>&1 |
	    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
	max=$(budget "$name")
	if [ -z "$score" ] || [ "$max" = none ] ||
	    ! awk -v s="$score" -v m="$max" 'BEGIN { exit !(s <= m) }'; then
		echo "not ok - $name: exposure ${score:-unknown}, budget $max"
		status=1
	else
		echo "ok - $name: exposure $score (budget $max)"
	fi
	# Every daemon's directories exist before it runs, whoever starts
	# first, and a stop leaves the others' sockets alone.
	for key in Type=notify RuntimeDirectory=mcpvm \
	    RuntimeDirectoryPreserve=yes NoNewPrivileges=yes \
	    ProtectSystem=strict; do
		grep -qx "$key" "$u" || { echo "not ok - $name: no $key"; status=1; }
	done
	# The calls each daemon (and, for vmmd, QEMU's -sandbox) makes at
	# start: installing its own seccomp filter, dropping privileges.
	need="seccomp prctl capset setgroups setresgid setresuid"
	case "$name" in
	mcpvm-vmmd|mcpvm-netd) need="$need execve clone3 wait4 kill mbind" ;;
	# vmhold keeps root's uid: it only empties its capabilities.
	mcpvm-vms) need="seccomp prctl capset rt_sigtimedwait" ;;
	esac
	allowed=$(python3 "$(dirname "$0")/unit_syscalls.py" "$u")
	for sc in $need; do
		[ "$allowed" = "*" ] || grep -qx "$sc" <<<"$allowed" ||
		    { echo "not ok - $name: its SystemCallFilter denies $sc"; status=1; }
	done
	grep -q "^WantedBy=mcpvm.target" "$u" ||
	    { echo "not ok - $name: not part of mcpvm.target"; status=1; }
	grep -q "mcpvm-${name#mcpvm-}.service" "$tmp/mcpvm.target" ||
	    { echo "not ok - $name: mcpvm.target does not want it"; status=1; }
done
exit $status
