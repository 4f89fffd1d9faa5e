#!/usr/bin/env bash
# The footprint budget, measured (a benchmark, not a test):
# - the stripped static binaries' sizes (budget: aarch64 at most 4 MiB);
# - the idle agent managing 50 modules: resident memory after settling
#   (budget: at most 8 MiB), sampled every 10 s for a minute (median, max),
#   and the CPU time it uses in that idle minute;
# - RSS and descriptors after 10,000 API requests and 1,000 rewrites.
# Runs x86_64 musl binaries natively, one after the other, against a Docker
# Engine of the script's own (its own data root, in a network namespace of
# its own) that holds only the test image: what a pass costs does not
# depend on what else the local engine keeps (a test machine's engine may
# hold thousands of images a device never has).
# Usage: scripts/footprint.sh [BINARY...]   (default: the release binary;
# give an older build first to measure before and after in one run).
# STEAD_FOOTPRINT_MODULES=200 for 200 modules. Prints a table, one column
# per binary, and the machine it was measured on.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=footprint.sh
. scripts/lib.sh

MODULES="${STEAD_FOOTPRINT_MODULES:-50}"
scripts/engine.sh
scripts/test-images.sh >/dev/null
[ -x dist/stead-x86_64-unknown-linux-musl ] && [ -x dist/stead-aarch64-unknown-linux-musl ] || scripts/release.sh >&2
bins=("$@")
[ "${#bins[@]}" -gt 0 ] || bins=(dist/stead-x86_64-unknown-linux-musl)

work="$(mktemp -d /tmp/stead-footprint.XXXXXX)"
ns="stead-footprint-$$"
D=(docker -H "unix://$work/docker.sock")
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    own_engine_down "$work" "$ns"
}
trap cleanup EXIT
own_engine_up "$work" "$ns" stead-test/busybox:1

mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }
declare -A out

# Measures one binary ($1, column $2) from a fresh store and directory.
measure() {
    local bin="$1" col="$2" run="$work/run$2" node="footprint-$$-$2"
    footprint_workload "$run" "$node" "$MODULES" "-$$-$col" "unix://$work/docker.sock"
    STEAD_LOG=warn "$bin" run --config "$run/c.toml" 2>"$run/log" &
    pid=$!
    say "$bin (agent $pid): waiting for $MODULES modules to converge"
    local up=0
    for _ in $(seq 1 300); do
        up="$("${D[@]}" ps -q --filter "label=stead.managed-by=$node" --filter status=running | wc -l)"
        [ "$up" -ge "$MODULES" ] && break
        sleep 1
    done
    [ "$up" -ge "$MODULES" ] || die "only $up of $MODULES containers running"
    sleep 20 # settle window and a couple of heartbeats
    ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
    local hz t0 t1 rss=() sorted
    hz="$(getconf CLK_TCK)"
    t0="$(ticks)"
    for _ in 1 2 3 4 5 6; do
        sleep 10
        rss+=("$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")")
    done
    t1="$(ticks)"
    # Of the resident memory: the binary's code mapped from its file (clean,
    # shared, reclaimable) and the agent's own (anonymous) memory.
    local file_kib anon_kib
    file_kib="$(awk '/^Pss_File/ {print $2}' "/proc/$pid/smaps_rollup")"
    anon_kib="$(awk '/^Anonymous/ {print $2}' "/proc/$pid/smaps_rollup")"
    mapfile -t sorted < <(printf '%s\n' "${rss[@]}" | sort -n)
    out[rss,$col]="$(mib $((sorted[2] * 1024))) (max $(mib $((sorted[5] * 1024))))"
    out[split,$col]="$(mib $((file_kib * 1024))) / $(mib $((anon_kib * 1024)))"
    out[cpu,$col]="$(awk -v a="$t0" -v b="$t1" -v hz="$hz" 'BEGIN { printf "%.2f s", (b - a) / hz }')"

    # Wear: 10,000 API requests and 1,000 rewrites of an intention file (its
    # bytes change, a comment line, its intention not: parsed again, no
    # recreate), then RSS and descriptors again.
    python3 scripts/footprint/requests.py "$(cat "$run/data/api-addr")"
    cp "$run/i/m1.toml" "$run/m1.orig"
    for k in $(seq 1 1000); do
        { cat "$run/m1.orig"; echo "# rewrite $k"; } >"$run/i/.m1.tmp"
        mv "$run/i/.m1.tmp" "$run/i/m1.toml"
    done
    sleep 15
    out[worn,$col]="$(mib $(($(awk '/VmRSS/ {print $2}' "/proc/$pid/status") * 1024)))"
    out[fds,$col]="$(ls "/proc/$pid/fd" | wc -l)"
    say "$bin: idle RSS ${out[rss,$col]}, code/anonymous ${out[split,$col]}, CPU ${out[cpu,$col]}/min; worn ${out[worn,$col]}, ${out[fds,$col]} descriptors"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=""
    # Bounded: a removal that hangs in the engine must not hold the run.
    "${D[@]}" ps -aq --filter "label=stead.managed-by=$node" | timeout 600 xargs -r "${D[@]}" rm -f >/dev/null \
        || say "removing $node's containers did not finish; the engine of our own goes with them"
}

for k in "${!bins[@]}"; do
    measure "${bins[$k]}" "$k"
done

row() {
    local key="$1" what="$2" budget="$3" line
    line="| $what |"
    for k in "${!bins[@]}"; do line+=" ${out[$key,$k]} |"; done
    echo "$line $budget |"
}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), engine $("${D[@]}" version --format '{{.Server.Version}}') (of the script's own, one image), $(date -u +%F)"
echo "stripped binaries: aarch64-unknown-linux-musl $(mib "$(stat -c %s dist/stead-aarch64-unknown-linux-musl)") (budget 4 MiB), x86_64-unknown-linux-musl $(mib "$(stat -c %s dist/stead-x86_64-unknown-linux-musl)")"
head="| $MODULES modules |"
rule="|---|"
for b in "${bins[@]}"; do head+=" $b ($(mib "$(stat -c %s "$b")")) |"; rule+="---|"; done
echo "$head budget |"
echo "$rule---|"
row rss "idle RSS (median of 6 samples, 10 s apart)" "8 MiB"
row split "of which code mapped from the binary / anonymous memory" "-"
row cpu "CPU time per idle minute, 10 s heartbeat" "-"
row worn "RSS after 10,000 API requests and 1,000 intention rewrites" "8 MiB"
row fds "open descriptors then" "1,024"
