#!/bin/bash
# The packaged /etc/mcpvm/mcpvm.conf is exactly what conf_reference makes
# from the key tables: every key, commented out, with its current default;
# and it is a configuration each daemon accepts as it stands.
# usage: test_conffile.sh CONF_REFERENCE CONFFILE BUILD_DIR
set -euo pipefail
ref=$1 conf=$2 build=$3
if ! diff -u "$conf" <("$ref" --conffile); then
	echo "not ok - $conf is not what conf_reference --conffile prints;" \
	    "regenerate it with: conf_reference --conffile > $conf"
	exit 1
fi
echo "ok - $conf lists every key with its default"
# -n checks the file and exits; authd also needs its admin group, which
# a build host may not have, so only the parse is asked of it here.
"$build/vmmd/vmmd" -n -f "$conf" >/dev/null
"$build/mcpd/mcpd" -n -f "$conf" 2>/dev/null
echo "ok - vmmd and mcpd accept it unchanged"
