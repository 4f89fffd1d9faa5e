#!/usr/bin/env bash
# The bytes of an update rebuilt from chunks against a plain pull (a
# benchmark, not a test). On loopback: a registry (Distribution), nginx as
# the plane's static host, the Docker Engine. Two pairs of images, each
# pushed to one repository:
#   - app: the test image, a 50 MiB layer of random bytes (the base), and
#     an application layer of 500 files of 100 KiB each (50 MiB); the new
#     version changes one of those files;
#   - debian: Debian 12 minbase as its mirror has it (its latest point
#     release), and the same with bookworm-proposed-updates and
#     bookworm-security (what its next point release folds in), each made
#     by mmdebstrap with the suite's date as SOURCE_DATE_EPOCH (as Debian's
#     own images are built) and imported as one layer.
# `stead-plane chunks` publishes the chunks of both; benches/chunks.rs
# then pulls each new image with the old one held, with the chunks and
# without, RUNS times, and prints the medians.
#
# Usage: scripts/bench-chunks.sh [runs]      (default 3)
# Env:   STEAD_BENCH_SKIP_DEBIAN=1 (the app pair alone: no mirror needed)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench-chunks.sh
. scripts/lib.sh

RUNS="${1:-3}"
[ "$(id -u)" -eq 0 ] || die "must run as root (the engine's socket, mmdebstrap)"
scripts/engine.sh
scripts/test-images.sh >/dev/null
command -v docker-registry >/dev/null || apt_install docker-registry
need_nginx
[ -n "${STEAD_BENCH_SKIP_DEBIAN:-}" ] || command -v mmdebstrap >/dev/null || apt_install mmdebstrap
say "cargo build --profile tool --locked -p stead-plane"
cargo build --profile tool --locked -p stead-plane >&2 || die "the tool's build failed"
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
stead_plane="$target_dir/tool/stead-plane"

work="$(mktemp -d /tmp/stead-bench-chunks.XXXXXX)"
registry_pid="" nginx_pid=""
cleanup() {
    [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null || true
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
    rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rport="$(free_port)"
reg="127.0.0.1:$rport"
start_bench_registry "$work" "$reg"
registry_pid="$REGISTRY_PID"

mkdir -p "$work/root" "$work/tmp"
token="bench-chunks-$$-$RANDOM"
nginx_conf() {
    cat <<NGINX
# Written by scripts/bench-chunks.sh.
$(nginx_head "$work" 64)
    log_format bench "\$msec\t\$request_method\t\$uri\t\$status\t\$request_length\t\$bytes_sent\t\$body_bytes_sent";
    access_log "$work/access.log" bench;
    server {
        listen 127.0.0.1:$port;
        root "$work/root";
        location = /__bench { access_log off; return 200 "$token"; }
        location / { limit_except GET { deny all; } }
    }
}
NGINX
}
start_nginx "$work" nginx_conf /__bench "$token"
say "registry on $reg, nginx (pid $nginx_pid) on 127.0.0.1:$port"

# --- the app pair ------------------------------------------------------------
build_push() { # context tag
    docker build -q --no-cache -t "$reg/$2" "$1" >/dev/null
    docker push -q "$reg/$2" >/dev/null
    docker rmi "$reg/$2" >/dev/null
}
ctx="$work/app"
mkdir -p "$ctx/app"
head -c $((50 << 20)) /dev/urandom >"$ctx/base.bin"
for i in $(seq -w 1 500); do head -c $((100 << 10)) /dev/urandom >"$ctx/app/file-$i"; done
printf 'FROM stead-test/busybox:1\nCOPY base.bin /base.bin\nCOPY app /app\n' >"$ctx/Dockerfile"
build_push "$ctx" bench/app:1
old_mtime="$(stat -c %Y "$ctx/app/file-250")"
head -c $((100 << 10)) /dev/urandom >"$ctx/app/file-250"
touch -d "@$old_mtime" "$ctx/app/file-250"
build_push "$ctx" bench/app:2
pairs="$reg/bench/app:1 $reg/bench/app:2"
images=("$reg/bench/app:1" "$reg/bench/app:2")

# --- the Debian pair ---------------------------------------------------------
if [ -z "${STEAD_BENCH_SKIP_DEBIAN:-}" ]; then
    mirror=http://deb.debian.org/debian
    epoch() { # suite: its Release file's date
        date -d "$(curl -fsS "$mirror/dists/$1/Release" | sed -n 's/^Date: //p')" +%s
    }
    say "mmdebstrap bookworm (the mirror's point release), then with proposed-updates and security"
    SOURCE_DATE_EPOCH="$(epoch bookworm)" mmdebstrap --quiet --variant=minbase bookworm "$work/deb12.tar" \
        "deb $mirror bookworm main" >&2
    SOURCE_DATE_EPOCH="$(epoch bookworm-proposed-updates)" mmdebstrap --quiet --variant=minbase bookworm "$work/deb12next.tar" \
        "deb $mirror bookworm main" "deb $mirror bookworm-proposed-updates main" \
        "deb http://security.debian.org/debian-security bookworm-security main" >&2
    for t in deb12 deb12next; do
        docker import "$work/$t.tar" "$reg/bench/debian:$t" >/dev/null
        docker push -q "$reg/bench/debian:$t" >/dev/null
        docker rmi "$reg/bench/debian:$t" >/dev/null
    done
    pairs="$pairs
$reg/bench/debian:deb12 $reg/bench/debian:deb12next"
    images+=("$reg/bench/debian:deb12" "$reg/bench/debian:deb12next")
fi

say "stead-plane chunks"
"$stead_plane" chunks --site "$work/root" "${images[@]}" >&2
say "the store: $(du -sh "$work/root/chunks" | cut -f1)"
: >"$work/access.log"

STEAD_BENCH_SOCKET=/var/run/docker.sock \
    STEAD_BENCH_BASE="http://127.0.0.1:$port" \
    STEAD_BENCH_ACCESS_LOG="$work/access.log" \
    STEAD_BENCH_PAIRS="$pairs" \
    STEAD_BENCH_RUNS="$RUNS" \
    cargo bench --locked --bench chunks
say "on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
