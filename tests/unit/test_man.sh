#!/bin/bash
# Every man page under docs/ formats without a single groff warning.
# usage: test_man.sh DOCS_DIR
set -euo pipefail
status=0
n=0
for page in "$1"/*.[1-8]; do
	n=$((n + 1))
	out=$(groff -mandoc -ww -z "$page" 2>&1) || status=1
	if [ -n "$out" ]; then
		echo "$page:"
		echo "$out"
		status=1
	fi
done
echo "$n man pages checked"
exit $status
