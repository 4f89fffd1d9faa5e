#!/usr/bin/env bash
# `stead-plane exposure` over a large fleet (a benchmark, not a test):
# STEAD_BENCH_REPORTS reports (1,000,000) written by scripts/fleet-reports.py
# as a host keeps them (nodes/<id>/status.json, each signed by its device's
# report key, every device enrolled; three modules, each running one of a
# few versions of its image, named by manifest digest) and a CycloneDX SBOM
# per image version, then asked three questions from the directory, every
# report's signature checked: the devices per digest (no question), the
# devices running one digest (--digest: 5 % of the fleet), and those running
# an image whose SBOM lists a vulnerable version (--sbom --vulnerable: 10 %).
# Printed: the wall time of each (medians of STEAD_BENCH_RUNS runs, 3), the
# CPU time, reports per second, the peak resident set, and the machine.
# STEAD_BENCH_BIN measures that binary instead of building
# target/release/stead; STEAD_BENCH_BASELINE names another stead-plane
# (an earlier version's) run before it in every round, on the same fleet,
# and prints its medians and the ratio of the two (this machine's speed
# varies from hour to hour: the ratio is the figure to compare);
# STEAD_BENCH_DIR keeps the generated fleet there (made once, reused while
# its count is the same) instead of a temporary directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench-exposure.sh
. scripts/lib.sh

REPORTS="${STEAD_BENCH_REPORTS:-1000000}"
RUNS="${STEAD_BENCH_RUNS:-3}"

release_stead STEAD_BENCH_BIN

if [ -n "${STEAD_BENCH_DIR:-}" ]; then
    work="$STEAD_BENCH_DIR"
    mkdir -p "$work"
    trap 'exit 130' INT TERM
else
    work="$(mktemp -d /tmp/stead-bench-exposure.XXXXXX)"
    trap 'rm -rf "$work"' EXIT
    trap 'exit 130' INT TERM
fi

if [ "$(cat "$work/count" 2>/dev/null)" != "$REPORTS" ]; then
    say "writing $REPORTS signed reports, their devices' keys and the SBOMs"
    rm -rf "$work/root" "$work/fleet" "$work/sboms" "$work/count"
    mkdir -p "$work/fleet"
    scripts/fleet-reports.py "$work/root" "$REPORTS" "$work/fleet/device-keys.csv" --sboms "$work/sboms"
    echo "$REPORTS" >"$work/count"
fi
du_mb="$(du -sm "$work/root" | cut -f1)"
# app's version 3 (one device in 20); busybox 1.33.0 is in app's versions 3
# and 13 (one in 10).
digest="sha256:$(printf 'manifest app 3' | sha256sum | cut -d' ' -f1)"
printf '# an advisory\nbusybox@1.33.0\n' >"$work/vulnerable.txt"

# One question: wall seconds, CPU seconds and peak RSS (KiB); the answer
# checked for the whole count and the devices affected.
ask() {
    local plane="$1" affected="$2"
    shift 2
    python3 - "$plane" "$REPORTS" "$affected" "$@" <<'PY'
import json, resource, subprocess, sys, time
plane, n, affected, args = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
t = time.monotonic()
out = subprocess.run([plane, "exposure", *args, "--json"], capture_output=True, text=True)
wall = time.monotonic() - t
if out.returncode != 0:
    sys.exit(f"stead-plane exposure {args}: {out.stderr}")
r = json.loads(out.stdout)
if r["devices"] != n or r["unverified"] or r["unreadable"] or r["affected_devices"] != affected:
    sys.exit(f"counted {r['devices']} of {n}, {r['unverified']} unverified, {r['unreadable']} unreadable, "
             f"{r['affected_devices']} affected (expected {affected})")
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{wall:.3f} {u.ru_utime + u.ru_stime:.3f} {u.ru_maxrss}")
PY
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

base=(--reports "$work/root" --fleet "$work/fleet")
baseline="${STEAD_BENCH_BASELINE:-}"
[ -z "$baseline" ] || [ -x "$baseline" ] || die "STEAD_BENCH_BASELINE=$baseline is not an executable"
planes=("$stead_plane")
[ -z "$baseline" ] || planes=("$baseline" "$stead_plane")
for q in table digest packages; do
    : >"$work/$q.times"
    : >"$work/$q.base.times"
    for run in $(seq 1 "$RUNS"); do
        for plane in "${planes[@]}"; do
            out="$work/$q.times"
            [ "$plane" = "$stead_plane" ] || out="$work/$q.base.times"
            case "$q" in
                table) ask "$plane" 0 "${base[@]}" ;;
                digest) ask "$plane" $(((REPORTS + 19) / 20)) "${base[@]}" --digest "$digest" ;;
                packages) ask "$plane" $(((REPORTS + 9) / 10)) "${base[@]}" --sbom "$work/sboms" --vulnerable "$work/vulnerable.txt" ;;
            esac >>"$out" || die "the question '$q' failed ($plane)"
            say "$q run $run ($plane): $(tail -1 "$out")"
        done
    done
done

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(date -u +%F)"
echo "stead-plane: $stead_plane; $REPORTS reports, $du_mb MB on disk; medians of $RUNS runs"
[ -z "$baseline" ] || echo "baseline: $baseline, run before it in every round"
for q in table digest packages; do
    wall="$(cut -d' ' -f1 "$work/$q.times" | median)"
    cpu="$(cut -d' ' -f2 "$work/$q.times" | median)"
    rss="$(cut -d' ' -f3 "$work/$q.times" | median)"
    case "$q" in
        table) what="devices per digest" ;;
        digest) what="--digest (5 % affected)" ;;
        packages) what="--sbom --vulnerable (10 % affected)" ;;
    esac
    line="$what: ${wall} s wall, ${cpu} s CPU ($(awk -v n="$REPORTS" -v w="$wall" 'BEGIN { printf "%.0f", n / w }') reports/s), peak RSS $((rss / 1024)) MiB"
    if [ -n "$baseline" ]; then
        bwall="$(cut -d' ' -f1 "$work/$q.base.times" | median)"
        bcpu="$(cut -d' ' -f2 "$work/$q.base.times" | median)"
        line="$line; baseline ${bwall} s wall, ${bcpu} s CPU: $(awk -v a="$wall" -v b="$bwall" 'BEGIN { printf "%.2f", a / b }') of its time"
    fi
    echo "$line"
done
