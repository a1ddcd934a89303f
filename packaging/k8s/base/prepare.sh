#!/bin/sh
# The init container: the directories the daemons expect, as their
# systemd units would make them; the guest image on the state volume,
# built once; and the configuration with the image's [image] block.
set -eu
profile=${MCPVM_IMAGE_PROFILE:-dev}
install -d -m 0755 /run/mcpvm
install -d -m 0755 -o mcpvm-auth -g mcpvm-auth /run/mcpvm/authd
install -d -m 0711 /var/lib/mcpvm
install -d -m 0700 -o mcpvm-auth -g mcpvm-auth /var/lib/mcpvm/authd
if [ ! -s "/var/lib/mcpvm/images/$profile.conf" ]; then
	mkdir -p /var/lib/mcpvm/images /var/lib/mcpvm/image-cache
	# mcpvm-image asks apt which kernel to take; the image has no lists.
	apt-get update -q >&2
	mcpvm-image --profile "$profile" --out "/var/lib/mcpvm/images/$profile" \
	    --cache /var/lib/mcpvm/image-cache > "/var/lib/mcpvm/images/$profile.conf.new"
	mv "/var/lib/mcpvm/images/$profile.conf.new" "/var/lib/mcpvm/images/$profile.conf"
fi
cat /etc/mcpvm-config/mcpvm.conf "/var/lib/mcpvm/images/$profile.conf" \
    > /etc/mcpvm/mcpvm.conf
chmod 0644 /etc/mcpvm/mcpvm.conf
