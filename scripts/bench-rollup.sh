#!/usr/bin/env bash
# `stead plane status --reports` over a large fleet (a benchmark, not a
# test): STEAD_BENCH_REPORTS reports (100,000) written as a host keeps them
# by scripts/fleet-reports.py (nodes/<id>/status.json, each a report as an
# agent of 0.7.0 PUTs it, signed by its device's report key: 3 modules, one
# group; a share failing, a share silent, revisions spread) with every
# device enrolled (fleet/device-keys.csv), then rolled up from the directory and through
# nginx's directory listings on loopback (`autoindex on`), every report's
# signature checked (`status --fleet`). Printed: the wall time of each (medians of
# STEAD_BENCH_RUNS runs, 3), reports per second, the peak resident set of
# the rolling process, and the machine. STEAD_BENCH_BIN measures that binary
# instead of building target/release/stead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench-rollup.sh
. scripts/lib.sh

REPORTS="${STEAD_BENCH_REPORTS:-100000}"
RUNS="${STEAD_BENCH_RUNS:-3}"

need_nginx
release_stead STEAD_BENCH_BIN

work="$(mktemp -d /tmp/stead-bench-rollup.XXXXXX)"
nginx_pid=""
cleanup() {
    stop_nginx "$nginx_pid"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "writing $REPORTS signed reports and their devices' keys"
mkdir -p "$work/fleet"
scripts/fleet-reports.py "$work/root" "$REPORTS" "$work/fleet/device-keys.csv"
du_mb="$(du -sm "$work/root" | cut -f1)"

mkdir -p "$work/tmp"
token="bench-rollup-$$-$RANDOM"
nginx_conf() {
    cat <<NGINX
# Written by scripts/bench-rollup.sh.
$(nginx_head "$work" 1024)
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$port;
        root "$work/root";
        location = /__rollup { return 200 "$token"; }
        location / { autoindex on; limit_except GET { deny all; } }
    }
}
NGINX
}
start_nginx "$work" nginx_conf /__rollup "$token"

# One roll-up: wall seconds and the peak RSS (KiB) of stead; its output
# checked for the whole count.
roll() {
    STEAD_PLANE="$stead_plane" python3 - "$stead" "$1" "$REPORTS" "$work/fleet" <<'PY'
import json, os, resource, subprocess, sys, time
stead, source, n, fleet = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
t = time.monotonic()
out = subprocess.run([os.environ["STEAD_PLANE"], "status", "--reports", source, "--fleet", fleet, "--json"], capture_output=True, text=True)
wall = time.monotonic() - t
if out.returncode != 0:
    sys.exit(f"stead-plane status --reports {source}: {out.stderr}")
r = json.loads(out.stdout)
if r["devices"] != n or r["unreadable"] != 0 or r["unverified"] != 0:
    sys.exit(f"rolled up {r['devices']} devices, {r['unreadable']} unreadable, {r['unverified']} unverified, of {n}")
print(f"{wall:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
PY
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for source in dir http; do
    case "$source" in
        dir) arg="$work/root" ;;
        http) arg="http://127.0.0.1:$port/nodes/" ;;
    esac
    : >"$work/$source.times"
    for run in $(seq 1 "$RUNS"); do
        # The page cache warm for every run (the first run warms it).
        roll "$arg" >>"$work/$source.times" || die "the roll-up from $source failed"
        say "$source run $run: $(tail -1 "$work/$source.times")"
    done
done

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(/usr/sbin/nginx -v 2>&1 | sed 's/^nginx version: //'), $(date -u +%F)"
echo "stead: $stead; $REPORTS reports, $du_mb MB on disk; medians of $RUNS runs"
for source in dir http; do
    wall="$(cut -d' ' -f1 "$work/$source.times" | median)"
    rss="$(cut -d' ' -f2 "$work/$source.times" | median)"
    case "$source" in
        dir) what="a directory" ;;
        http) what="nginx's listings (autoindex), on loopback" ;;
    esac
    echo "from $what: ${wall} s ($(awk -v n="$REPORTS" -v w="$wall" 'BEGIN { printf "%.0f", n / w }') reports/s), peak RSS $((rss / 1024)) MiB"
done
