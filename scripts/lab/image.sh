#!/usr/bin/env bash
# The device lab's VM image: a minimal Debian made with mmdebstrap from
# Debian's packages only (systemd as init, Debian's kernel, docker.io with
# AppArmor, what the tests use), kept outside the checkout in
# $STEAD_LAB_CACHE/<hash>/ (default /var/cache/stead-lab), the hash taken of
# this script (the package list is in it), the boot hook it installs
# (scripts/lab/guest/) and the suite, so a second run and CI reuse it. Prints the image's directory:
#
#   vmlinuz, initrd.img   the kernel and initramfs, booted with -kernel/-initrd
#   disk.raw              the root filesystem, ext4 (each boot of a test runs
#                         on a copy-on-write overlay of it; never written)
#   packages              what the image holds (dpkg -l)
#
# The image boots to multi-user.target, mounts the lab's 9p share (tag
# `lab`) at /lab, runs the step the host named there and writes its output
# back (scripts/lab/run.sh says how), then powers off or reboots as told.
#
#   scripts/lab/image.sh             # build when missing, print the directory
#   scripts/lab/image.sh --rebuild   # build again even when cached
#
# Env: STEAD_LAB_CACHE, STEAD_LAB_SUITE (default bookworm), STEAD_LAB_MIRROR
# (default: mmdebstrap's, deb.debian.org).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME=lab/image.sh
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"
# shellcheck source=scripts/lab/lib.sh
. "$here/lib.sh"

REBUILD=0
case "${1:-}" in
    "") ;;
    --rebuild) REBUILD=1 ;;
    *) die "usage: scripts/lab/image.sh [--rebuild]" ;;
esac
[ "$(id -u)" -eq 0 ] || die "must run as root (mmdebstrap, mke2fs of a root filesystem)"

# What the image holds, from Debian's archive alone: systemd as PID 1 and
# udev (device units for the root disk), Debian's kernel with its initramfs
# (e2fsck in it: a power cut is followed by a journal replay), kmod (9p and
# the engine's modules), the Docker Engine and the AppArmor its default
# profile needs, curl and jq for the API.
PACKAGES=(systemd-sysv udev kmod linux-image-amd64 initramfs-tools e2fsprogs
    docker.io apparmor iptables curl jq procps)
# The root filesystem's size (sparse; a test's overlay grows only by what
# it writes).
DISK_SIZE=4G

key="$({
    cat "${BASH_SOURCE[0]}" "$here"/guest/stead-lab-step*
    printf 'suite=%s\n' "$LAB_SUITE"
} | sha256sum | cut -c1-16)"
dir="$LAB_CACHE/$LAB_SUITE-$key"

mkdir -p "$LAB_CACHE"
exec 9>"$LAB_CACHE/.image.lock"
flock 9
if [ "$REBUILD" = 0 ] && [ -f "$dir/done" ]; then
    touch "$dir/done"
    echo "$dir"
    exit 0
fi

lab_install_tools
start=$SECONDS
tmp="$(mktemp -d "$LAB_CACHE/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
root="$tmp/root"

# What a boot does not need here (timers that would wake on a test's
# clock, a getty on a console nobody types on).
MASK=(apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service
    fstrim.timer getty@tty1.service systemd-networkd-wait-online.service)

say "making the lab image ($LAB_SUITE, ${#PACKAGES[@]} packages) with mmdebstrap..."
# shellcheck disable=SC2086 # the mirror is one word or none
mmdebstrap --quiet --variant=minbase --include="$(
    IFS=,
    echo "${PACKAGES[*]}"
)" \
    --customize-hook='echo lab >"$1/etc/hostname"' \
    --customize-hook='printf "127.0.0.1 localhost\n127.0.1.1 lab\n" >"$1/etc/hosts"' \
    --customize-hook='printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\n" >"$1/etc/fstab"' \
    --customize-hook="install -m 0755 '$here/guest/stead-lab-step' \"\$1/usr/local/sbin/\"" \
    --customize-hook="install -m 0644 '$here/guest/stead-lab-step.service' \"\$1/etc/systemd/system/\"" \
    --customize-hook='chroot "$1" systemctl enable stead-lab-step.service' \
    --customize-hook="chroot \"\$1\" systemctl mask ${MASK[*]}" \
    --customize-hook='chroot "$1" passwd -d root >/dev/null' \
    --customize-hook='chroot "$1" dpkg -l >"$1/.packages"' \
    "$LAB_SUITE" "$root" ${STEAD_LAB_MIRROR:-} >&2

out="$tmp/image"
mkdir -p "$out"
cp "$root"/boot/vmlinuz-* "$out/vmlinuz"
cp "$root"/boot/initrd.img-* "$out/initrd.img"
mv "$root/.packages" "$out/packages"
truncate -s "$DISK_SIZE" "$out/disk.raw"
mke2fs -q -F -t ext4 -L stead-lab -E root_owner=0:0 -d "$root" "$out/disk.raw" >&2
chmod 0444 "$out/disk.raw"
touch "$out/done"
rm -rf "$dir"
mv "$out" "$dir"
# Images of other inputs unused for a week go.
for old in "$LAB_CACHE"/*/done; do
    [ "$old" = "$dir/done" ] || [ -z "$(find "$old" -mtime +7)" ] || rm -rf "$(dirname "$old")"
done
say "built $dir in $((SECONDS - start)) s ($(du -sh --apparent-size "$dir/disk.raw" | cut -f1) disk, $(du -sh "$dir/disk.raw" | cut -f1) used)"
echo "$dir"
