#!/bin/bash
# The systemd units must pass `systemd-analyze verify`.  The host's PID 1
# is not systemd, so the units are verified as files, with ExecStart
# pointed at the binaries of this build (which must exist and run).
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
	    -e "s|/usr/sbin/mcpd|$build/mcpd/mcpd|" "$u" > "$tmp/$(basename "$u")"
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
