#!/bin/bash
# packaging/image/rootfs.sh: debootstraps and configures a guest root tree.
# Run by packaging/image/build, as root, into an empty directory in its
# cache; what this file and the profile do decides the rootfs cache key, so
# the tree is rebuilt only when one of them changes.
#
# usage: rootfs.sh SUITE MIRROR KEYRING DEBS-DIR PROFILE-FILE TREE
set -euo pipefail

[ $# -eq 6 ] || { echo "usage: rootfs.sh SUITE MIRROR KEYRING DEBS PROFILE TREE" >&2; exit 2; }
suite=$1 mirror=$2 keyring=$3 debs=$4 pfile=$5 tree=$6
say() { echo "image: $*" >&2; }
die() { echo "image: error: $*" >&2; exit 1; }

packages= strip_docs=0
# shellcheck source=/dev/null
. "$pfile"
profile=$(basename "$pfile")

log=$(mktemp)
trap 'rm -f "$log"' EXIT
mkdir -p "$debs"
say "debootstrap $suite ($profile profile) from $mirror"
ts=$(date +%s)
# shellcheck disable=SC2086
if ! debootstrap --variant=minbase --components=main \
    --include="$(echo $packages | tr ' ' ',')" --keyring="$keyring" \
    --cache-dir="$debs" "$suite" "$tree" "$mirror" >"$log" 2>&1; then
	tail -n 20 "$log" >&2
	[ -f "$tree/debootstrap/debootstrap.log" ] &&
	    tail -n 20 "$tree/debootstrap/debootstrap.log" >&2
	die "debootstrap $suite failed (log above)"
fi
say "debootstrap took $(( $(date +%s) - ts )) s"

# The workspace user: uid 1000, no sudo, owns /workspace.
chroot "$tree" /usr/sbin/useradd --uid 1000 --user-group \
    --create-home --home-dir /home/dev --shell /bin/bash dev
install -d -o 1000 -g 1000 -m 0755 "$tree/workspace"
[ ! -e "$tree/usr/bin/sudo" ] ||
    die "sudo is in the $profile rootfs; remove what pulls it in from the profile"
echo mcpvm >"$tree/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tmcpvm\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    >"$tree/etc/hosts"
# debootstrap copied the build host's resolver; guestd writes the guest's
# own when the VM has network.
rm -f "$tree/etc/resolv.conf"
: >"$tree/etc/resolv.conf"
printf '# The root disk is mounted by guestd stage one.\n' >"$tree/etc/fstab"
rm -rf "$tree"/var/lib/apt/lists/* "$tree"/var/cache/apt/*.bin \
    "$tree"/var/cache/apt/archives/*.deb "$tree"/var/log/*.log \
    "$tree"/var/log/apt/*
if [ "$strip_docs" = 1 ]; then
	rm -rf "$tree"/usr/share/doc/* "$tree"/usr/share/man/* \
	    "$tree"/usr/share/info/* "$tree"/usr/share/locale/*
fi
