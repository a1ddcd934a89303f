#!/bin/sh
# The operator CLIs, authctl and vmctl, take their common options the same
# way: -c/--config FILE (and -f FILE, as the daemons spell it), -s/--socket,
# -j/--json, -h/--help on stdout with status 0, -V/--version, and a wrong
# option is the usage on stderr with status 2.  TAP.
# usage: test_cli_options.sh AUTHCTL VMCTL
set -u
authctl=$1 vmctl=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 failed=0
ok() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else
		echo "not ok $n - $2"; failed=1; fi
}
printf '[vmmd]\nctl_socket = %s/v.sock\n[authd]\nctl_socket = %s/a.sock\n' \
    "$tmp" "$tmp" > "$tmp/conf"
for tool in "$authctl" "$vmctl"; do
	name=$(basename "$tool")
	case $name in authctl) sock=a.sock ;; *) sock=v.sock ;; esac
	for h in -h --help; do
		"$tool" $h > "$tmp/out" 2> "$tmp/err"; rc=$?
		grep -q "^usage: $name " "$tmp/out" && [ ! -s "$tmp/err" ] &&
		    [ $rc = 0 ]
		ok $? "$name $h: the usage on stdout, status 0 (got $rc)"
	done
	for v in -V --version; do
		out=$("$tool" $v 2>&1); rc=$?
		case $out in "$name "[0-9]*) r=0 ;; *) r=1 ;; esac
		[ $rc = 0 ] && [ $r = 0 ]
		ok $? "$name $v: '$out'"
	done
	"$tool" --no-such-option > "$tmp/out" 2> "$tmp/err"; rc=$?
	[ $rc = 2 ] && grep -q "^usage: $name " "$tmp/err" && [ ! -s "$tmp/out" ]
	ok $? "$name with a wrong option: the usage on stderr, status 2 (got $rc)"
	for c in -c -f --config; do
		"$tool" $c "$tmp/conf" list > /dev/null 2> "$tmp/err"
		grep -q "$tmp/$sock" "$tmp/err"
		ok $? "$name $c FILE reads the socket from FILE"
	done
	for s in -s --socket; do
		"$tool" $s "$tmp/other.sock" list > /dev/null 2> "$tmp/err"
		grep -q "$tmp/other.sock" "$tmp/err"
		ok $? "$name $s PATH talks to PATH"
	done
done
echo "1..$n"
exit $failed
