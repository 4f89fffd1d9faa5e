#!/usr/bin/env bash
# The footprint budget, measured (a benchmark, not a test):
# - the stripped static binaries' sizes (budget: aarch64 at most 4 MiB);
# - the idle agent managing 50 modules: resident memory after settling
#   (budget: at most 8 MiB), sampled every 10 s for a minute (median, max),
#   and the CPU time it uses in that idle minute.
# Runs the x86_64 musl binary natively against the local engine. Prints a
# table and the machine it was measured on.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=footprint.sh
. scripts/lib.sh

MODULES="${STEAD_FOOTPRINT_MODULES:-50}"
scripts/engine.sh
scripts/test-images.sh >/dev/null
[ -x dist/stead-x86_64-unknown-linux-musl ] && [ -x dist/stead-aarch64-unknown-linux-musl ] || scripts/release.sh >&2

work="$(mktemp -d /tmp/stead-footprint.XXXXXX)"
node="footprint-$$"
cleanup() {
    [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
    docker ps -aq --filter "label=stead.managed-by=$node" | xargs -r docker rm -f >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/i"
cat >"$work/c.toml" <<TOML
node_id = "$node"
data_dir = "data"
intentions_dir = "i"
api_listen = "127.0.0.1:0"
settle_window = "5s"
TOML
for n in $(seq 1 "$MODULES"); do
    cat >"$work/i/m$n.toml" <<TOML
name = "fp$n-$$"
image = "stead-test/busybox:1"
command = ["sh", "-c", "trap 'exit 0' TERM; sleep 1000000 & wait"]
restart = "unless-stopped"
[config]
path = "/etc/m/config.json"
format = "json"
defaults = { module = $n, poll_ms = 1000 }
TOML
done

STEAD_LOG=warn dist/stead-x86_64-unknown-linux-musl run --config "$work/c.toml" 2>"$work/log" &
pid=$!
say "agent $pid: waiting for $MODULES modules to converge"
for _ in $(seq 1 120); do
    up="$(docker ps -q --filter "label=stead.managed-by=$node" --filter status=running | wc -l)"
    [ "$up" -ge "$MODULES" ] && break
    sleep 1
done
[ "$up" -ge "$MODULES" ] || die "only $up of $MODULES containers running"
sleep 20   # settle window and a couple of heartbeats
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz="$(getconf CLK_TCK)"
t0="$(ticks)"
rss=()
for _ in 1 2 3 4 5 6; do
    sleep 10
    rss+=("$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")")
done
t1="$(ticks)"
# Of the resident memory: the binary's code mapped from its file (clean,
# shared, reclaimable) and the agent's own (anonymous) memory.
file_kib="$(awk '/^Pss_File/ {print $2}' "/proc/$pid/smaps_rollup")"
anon_kib="$(awk '/^Anonymous/ {print $2}' "/proc/$pid/smaps_rollup")"
sorted=($(printf '%s\n' "${rss[@]}" | sort -n))
median_kib="${sorted[2]}"
max_kib="${sorted[5]}"
cpu_s="$(awk -v a="$t0" -v b="$t1" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')"

# Wear: 10,000 API requests and 1,000 rewrites of an intention file (its
# bytes change, a comment line, its intention not: parsed again, no
# recreate), then RSS and descriptors again.
addr="$(cat "$work/data/api-addr")"
python3 scripts/footprint/requests.py "$addr"
cp "$work/i/m1.toml" "$work/m1.orig"
for k in $(seq 1 1000); do
    { cat "$work/m1.orig"; echo "# rewrite $k"; } >"$work/i/.m1.tmp"
    mv "$work/i/.m1.tmp" "$work/i/m1.toml"
done
sleep 15
worn_kib="$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")"
worn_fds="$(ls "/proc/$pid/fd" | wc -l)"
size() { stat -c %s "$1"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), engine $(docker version --format '{{.Server.Version}}'), $(date -u +%F)"
printf '| what | measured | budget |\n|---|---|---|\n'
printf '| stripped binary, aarch64-unknown-linux-musl | %s | 4 MiB |\n' "$(mib "$(size dist/stead-aarch64-unknown-linux-musl)")"
printf '| stripped binary, x86_64-unknown-linux-musl | %s | - |\n' "$(mib "$(size dist/stead-x86_64-unknown-linux-musl)")"
printf '| idle RSS, %s modules (median of 6 samples, 10 s apart) | %s (max %s) | 8 MiB |\n' "$MODULES" "$(mib $((median_kib * 1024)))" "$(mib $((max_kib * 1024)))"
printf '| of which code mapped from the binary / anonymous memory | %s / %s | - |\n' "$(mib $((file_kib * 1024)))" "$(mib $((anon_kib * 1024)))"
printf '| CPU time per idle minute, %s modules, 10 s heartbeat | %s s | - |\n' "$MODULES" "$cpu_s"
printf '| RSS after 10,000 API requests and 1,000 intention rewrites, %s modules | %s | 8 MiB |\n' "$MODULES" "$(mib $((worn_kib * 1024)))"
printf '| open descriptors then | %s | 1,024 |\n' "$worn_fds"
