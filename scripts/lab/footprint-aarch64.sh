#!/usr/bin/env bash
# The idle footprint on aarch64, measured (a benchmark, not a test; nothing
# in the test command calls it): the static aarch64 agent managing 50
# modules inside a Debian arm64 VM (Debian's arm64 kernel, docker.io) booted
# under QEMU's software CPU (qemu-system-aarch64 -M virt -cpu max, TCG) on
# any machine. The same config, intentions and sampling as
# scripts/footprint.sh: after all modules run and a settle of 20 s, VmRSS
# (and RssAnon, RssFile) sampled every 10 s for a minute, the median
# printed, with smaps_rollup's split of file-mapped code and anonymous
# memory, the kernel, the page size and transparent hugepage settings.
#
#   scripts/lab/footprint-aarch64.sh [BINARY]
#       BINARY: a static aarch64 stead (default
#       dist/stead-aarch64-unknown-linux-musl, built by scripts/release.sh).
#
# Installs what it needs (mmdebstrap, qemu-system-arm, qemu-user-static for
# building the foreign root filesystem), builds the arm64 image once and
# keeps it under $STEAD_LAB_CACHE/arm64-<hash>/ like scripts/lab/image.sh.
# The VM has no network (-nic none); the engine pulls nothing (the test
# image is imported from the image's own static busybox). Under TCG on 2
# Xeon cores: the image 25 min once, then 5 to 6 min a run (boot, engine,
# 50 containers in 165 s, settle, the minute of samples, poweroff). Env: STEAD_LAB_CACHE, STEAD_LAB_SUITE,
# STEAD_FOOTPRINT_MODULES (default 50), STEAD_LAB_TIMEOUT (seconds for the
# whole boot, default 3600).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME=lab/footprint-aarch64.sh
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"
# shellcheck source=scripts/lab/lib.sh
. "$here/lib.sh"

[ "$(id -u)" -eq 0 ] || die "must run as root (mmdebstrap, binfmt_misc, mke2fs)"
BIN="${1:-$here/../../dist/stead-aarch64-unknown-linux-musl}"
MODULES="${STEAD_FOOTPRINT_MODULES:-50}"
TIMEOUT="${STEAD_LAB_TIMEOUT:-3600}"

# Tools: mmdebstrap and mke2fs; qemu-system-aarch64 (from bookworm-backports
# when this machine's QEMU came from there, as lab_install_tools does);
# qemu-user-static, binfmt_misc and arch-test (mmdebstrap checks with it)
# to run the arm64 packages' scripts.
command -v mmdebstrap >/dev/null 2>&1 || apt_install mmdebstrap
command -v mke2fs >/dev/null 2>&1 || apt_install e2fsprogs
command -v arch-test >/dev/null 2>&1 || apt_install arch-test
if ! command -v qemu-system-aarch64 >/dev/null 2>&1; then
    case "$(dpkg-query -W -f '${Version}' qemu-system-common qemu-utils 2>/dev/null || true)" in
        *~bpo12*) lab_install_backports qemu-system-arm ;;
        *) apt_install qemu-system-arm ;;
    esac
fi
command -v qemu-aarch64-static >/dev/null 2>&1 || command -v qemu-aarch64 >/dev/null 2>&1 || apt_install qemu-user-static
mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    conf=/usr/lib/binfmt.d/qemu-aarch64.conf
    [ -f "$conf" ] || die "no $conf (qemu-user-static / qemu-user-binfmt provides it)"
    cat "$conf" >/proc/sys/fs/binfmt_misc/register
fi

# The image: minimal Debian arm64 with systemd, Debian's kernel, the Docker
# Engine, static busybox (the test image), procps; the lab's boot hook
# (scripts/lab/guest/) runs the step from the 9p share.
PACKAGES=(systemd-sysv udev kmod linux-image-arm64 initramfs-tools e2fsprogs
    docker.io apparmor iptables procps busybox-static)
MASK=(apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service
    fstrim.timer getty@tty1.service systemd-networkd-wait-online.service)
key="$({
    printf '%s\n' "${PACKAGES[@]}" "${MASK[@]}" "suite=$LAB_SUITE" arm64-v1
    cat "$here"/guest/stead-lab-step*
} | sha256sum | cut -c1-16)"
image="$LAB_CACHE/arm64-$LAB_SUITE-$key"
mkdir -p "$LAB_CACHE"
exec 9>"$LAB_CACHE/.image-arm64.lock"
flock 9
if [ ! -f "$image/done" ]; then
    start=$SECONDS
    tmp="$(mktemp -d "$LAB_CACHE/.build-arm64.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    say "making the arm64 image ($LAB_SUITE, ${#PACKAGES[@]} packages) with mmdebstrap..."
    # shellcheck disable=SC2086 # the mirror is one word or none
    mmdebstrap --quiet --arch=arm64 --variant=minbase --include="$(
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
        "$LAB_SUITE" "$tmp/root" ${STEAD_LAB_MIRROR:-} >&2
    out="$tmp/image"
    mkdir -p "$out"
    cp "$tmp"/root/boot/vmlinuz-* "$out/vmlinuz"
    cp "$tmp"/root/boot/initrd.img-* "$out/initrd.img"
    mv "$tmp/root/.packages" "$out/packages"
    truncate -s 4G "$out/disk.raw"
    mke2fs -q -F -t ext4 -L stead-lab -E root_owner=0:0 -d "$tmp/root" "$out/disk.raw" >&2
    chmod 0444 "$out/disk.raw"
    touch "$out/done"
    rm -rf "$image"
    mv "$out" "$image"
    rm -rf "$tmp"
    trap - EXIT
    say "built $image in $((SECONDS - start)) s"
fi
touch "$image/done"
exec 9>&-

[ -f "$BIN" ] || die "no binary $BIN (scripts/release.sh builds dist/stead-aarch64-unknown-linux-musl)"

# The machine: a copy-on-write overlay of the image, and the 9p share with
# the binary and the step.
vm="$(mktemp -d /tmp/stead-footprint-aarch64.XXXXXX)"
qemu=""
cleanup() {
    [ -z "$qemu" ] || kill -KILL "$qemu" 2>/dev/null || true
    rm -f "$vm/disk.qcow2"
}
trap cleanup EXIT
share="$vm/share"
mkdir -p "$share/in" "$share/steps" "$share/out"
qemu-img create -q -f qcow2 -F raw -b "$image/disk.raw" "$vm/disk.qcow2"
cp "$BIN" "$share/in/stead"
chmod 0755 "$share/in/stead"
# The workload, made here as scripts/footprint.sh makes it.
footprint_workload "$share/in/run" footprint-aarch64 "$MODULES" "" "unix:///var/run/docker.sock"
echo footprint >"$share/next"
echo poweroff >"$share/then"
cat >"$share/steps/footprint.sh" <<STEP
set -euo pipefail
MODULES=$MODULES
STEP
cat >>"$share/steps/footprint.sh" <<'STEP'
log() { echo "$(date -u +%T) $*"; }
uname -r >kernel
getconf PAGESIZE >pagesize
for f in enabled defrag shmem_enabled; do
    printf '%s: %s\n' "$f" "$(cat /sys/kernel/mm/transparent_hugepage/$f 2>/dev/null || echo -)"
done >thp
nproc >cpus
grep MemTotal /proc/meminfo >mem
log "waiting for the engine"
systemctl start docker.service
for _ in $(seq 1 600); do docker info >/dev/null 2>&1 && break; sleep 1; done
docker version --format '{{.Server.Version}}' >engine
log "engine $(cat engine) up"
# The test image, as scripts/test-images.sh makes it, of the image's own
# static busybox.
r="$(mktemp -d)"
mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/root"
chmod 1777 "$r/tmp"
cp /bin/busybox "$r/bin/busybox"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$r/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$r/etc/passwd"
printf 'root:x:0:\n' >"$r/etc/group"
tar -C "$r" --numeric-owner --owner=0 --group=0 -cf - . \
    | docker import --change 'CMD ["sh"]' --change 'ENV PATH=/bin' - stead-test/busybox:1 >/dev/null
log "test image imported"
run=/root/run
node=footprint-aarch64
mkdir -p "$run"
cp -r /lab/in/run/. "$run/"
cp /lab/in/stead "$run/stead"
cd "$run"
STEAD_LOG=warn ./stead run --config c.toml 2>agent.log &
pid=$!
log "agent $pid: waiting for $MODULES modules"
up=0
t0=$SECONDS
for _ in $(seq 1 2400); do
    up="$(docker ps -q --filter "label=stead.managed-by=$node" --filter status=running | wc -l)"
    [ "$up" -ge "$MODULES" ] && break
    kill -0 "$pid" || { cp agent.log /lab/out/footprint/; exit 1; }
    sleep 1
done
cp agent.log /lab/out/footprint/agent-start.log
[ "$up" -ge "$MODULES" ] || { log "only $up of $MODULES running"; exit 1; }
log "$up modules running after $((SECONDS - t0)) s"
echo "$((SECONDS - t0))" >/lab/out/footprint/converge-s
sleep 20
cd /lab/out/footprint
for k in 1 2 3 4 5 6; do
    sleep 10
    awk -v k="$k" '/^(VmRSS|RssAnon|RssFile|RssShmem):/ {printf "%s %s %s\n", k, $1, $2}' "/proc/$pid/status" >>samples
    { echo "# sample $k"; cat "/proc/$pid/smaps_rollup"; } >>smaps_rollup
done
grep -v '^#' "/proc/$pid/status" >status
cat "/proc/$pid/maps" >maps
kill -0 "$pid"
up="$(docker ps -q --filter "label=stead.managed-by=$node" --filter status=running | wc -l)"
echo "$up" >up-after
log "sampled; $up modules still running"
kill "$pid"
wait "$pid" 2>/dev/null || true
STEP

say "booting the arm64 VM under TCG (qemu-system-aarch64 -M virt -cpu max, 2 vCPUs, 2 GiB)..."
start=$SECONDS
qemu-system-aarch64 -name stead-footprint-aarch64 -M virt -accel tcg,thread=multi -cpu max,pauth-impdef=on \
    -smp 2 -m 2048 -nodefaults -display none -no-reboot -nic none \
    -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
    -append "root=/dev/vda rw console=ttyAMA0 panic=-1 quiet" \
    -drive "file=$vm/disk.qcow2,format=qcow2,if=virtio" \
    -virtfs "local,path=$share,mount_tag=lab,security_model=none,id=lab" \
    -serial "file:$vm/serial.log" >"$vm/qemu.log" 2>&1 &
qemu=$!
out="$share/out/footprint"
began=""
while kill -0 "$qemu" 2>/dev/null; do
    if [ -z "$began" ] && [ -f "$out/started" ]; then
        began=$SECONDS
        say "booted: the step began $((began - start)) s after start"
    fi
    if [ "$((SECONDS - start))" -ge "$TIMEOUT" ]; then
        tail -n 30 "$vm/serial.log" >&2 || true
        [ ! -f "$out/log" ] || tail -n 30 "$out/log" >&2
        die "no end within $TIMEOUT s (kept: $vm)"
    fi
    sleep 2
done
wait "$qemu" || true
qemu=""
if [ ! -f "$out/rc" ] || [ "$(cat "$out/rc")" != 0 ]; then
    tail -n 30 "$vm/serial.log" >&2 || true
    [ ! -f "$out/log" ] || sed 's/^/  | /' "$out/log" >&2
    die "the step failed (kept: $vm)"
fi
say "done in $((SECONDS - start)) s with boot and poweroff; results in $out"

mib() { awk -v k="$1" 'BEGIN { printf "%.2f MiB", k / 1024 }'; }
median() { awk -v f="$1" '$2 == f":" {print $3}' "$out/samples" | sort -n | sed -n 3p; }
maxof() { awk -v f="$1" '$2 == f":" {print $3}' "$out/samples" | sort -n | tail -n 1; }
last() { awk -v f="$1" '$1 == f":" {v = $2} END {print v}' "$out/smaps_rollup"; }
echo "machine: aarch64 VM under TCG (qemu-system-aarch64 $(qemu-system-aarch64 --version | head -n 1 | awk '{print $4}') -M virt -cpu max, $(cat "$out/cpus") vCPUs, $(awk '{print $2}' "$out/mem") kB) on $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); kernel $(cat "$out/kernel"), page size $(cat "$out/pagesize"), engine $(cat "$out/engine"), $(date -u +%F)"
echo "transparent hugepages: $(tr '\n' ';' <"$out/thp")"
echo "binary: $BIN ($(stat -c %s "$BIN") B); $MODULES modules running after $(cat "$out/converge-s") s, $(cat "$out/up-after") still running after the samples"
echo "| $MODULES modules, aarch64 (TCG) | median of 6 samples, 10 s apart | max |"
echo "|---|---|---|"
for f in VmRSS RssAnon RssFile; do
    echo "| $f | $(mib "$(median $f)") | $(mib "$(maxof $f)") |"
done
echo "smaps_rollup (last sample): Rss $(mib "$(last Rss)"), Pss_File $(mib "$(last Pss_File)"), Anonymous $(mib "$(last Anonymous)")"
echo "samples (kB):"
awk '{printf "  %s %s %s\n", $1, $2, $3}' "$out/samples"
