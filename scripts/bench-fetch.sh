#!/usr/bin/env bash
# A module's image over a bad link (a benchmark, not a test): the device
# (the agent and a Docker Engine of the script's own) in a network
# namespace behind a veth pair to the registry (Distribution, on the host
# side). The link towards the device is shaped to RATE (tc tbf), a share
# LOSS of the packets each way is dropped at random (iptables' statistic
# match: this kernel has no netem; the lab VM's has), and the link is set
# down for CUT seconds every EVERY seconds. The image is the test image and
# one layer of SIZE MiB of random bytes (incompressible: its compressed
# size is its size). A module naming it by digest is written; the script
# waits until it runs and prints:
#   - how long it took and how many cuts it lived through;
#   - the layer's compressed size;
#   - the blob bytes the agent fetched (stead_image_fetch_bytes_total; with
#     FETCH=engine, none: the engine pulled);
#   - the bytes that crossed the link towards the device (the veth's tx
#     counter: IP and TCP headers and retransmissions included), and both
#     as a ratio of the compressed size.
# With FETCH=engine the engine pulls instead ([images] fetch = "engine"),
# for comparison: it starts a layer again from nothing after each cut.
#
# Usage: scripts/bench-fetch.sh [runs]          (default 1; each run alike)
# Env:   STEAD_BENCH_SIZE_MIB (8), STEAD_BENCH_RATE (1mbit),
#        STEAD_BENCH_LOSS (0.02), STEAD_BENCH_CUT (20), STEAD_BENCH_EVERY (60),
#        STEAD_BENCH_FETCH (agent | engine), STEAD_BENCH_TIMEOUT (1800 s),
#        STEAD_BIN (a stead binary; default: a release build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench-fetch.sh
. scripts/lib.sh

RUNS="${1:-1}"
SIZE="${STEAD_BENCH_SIZE_MIB:-8}"
RATE="${STEAD_BENCH_RATE:-1mbit}"
LOSS="${STEAD_BENCH_LOSS:-0.02}"
CUT="${STEAD_BENCH_CUT:-20}"
EVERY="${STEAD_BENCH_EVERY:-60}"
FETCH="${STEAD_BENCH_FETCH:-agent}"
TIMEOUT="${STEAD_BENCH_TIMEOUT:-1800}"
case "$FETCH" in agent | engine) ;; *) die "STEAD_BENCH_FETCH: agent or engine, not $FETCH" ;; esac
[ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces, tc, iptables)"
scripts/engine.sh
scripts/test-images.sh >/dev/null
command -v docker-registry >/dev/null || apt_install docker-registry
command -v iptables >/dev/null || apt_install iptables
if [ -n "${STEAD_BIN:-}" ]; then
    STEAD="$(realpath "$STEAD_BIN")"
else
    cargo build --release --locked -p stead >&2
    STEAD="$PWD/target/release/stead"
fi

work="$(mktemp -d /tmp/stead-bench-fetch.XXXXXX)"
ns="stead-fetch-$$"
host_if="sfh$$" dev_if="sfd$$"
host_ip=10.77.0.1 dev_ip=10.77.0.2
port="$(free_port)"
reg="$host_ip:$port"
agent_pid="" registry_pid="" cutter_pid=""
cleanup() {
    [ -n "$cutter_pid" ] && kill "$cutter_pid" 2>/dev/null || true
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
    [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null || true
    ip link del "$host_if" 2>/dev/null || true
    own_engine_down "$work/engine" "$ns"
    [ "${keep:-0}" = 1 ] || rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT

# The link: a veth pair, the device's end in its namespace.
ip netns add "$ns"
ip -n "$ns" link set lo up
ip link add "$host_if" type veth peer name "$dev_if"
ip link set "$dev_if" netns "$ns"
ip addr add "$host_ip/24" dev "$host_if"
ip -n "$ns" addr add "$dev_ip/24" dev "$dev_if"
ip link set "$host_if" up
ip -n "$ns" link set "$dev_if" up
# Towards the device at RATE; loss each way, on the device's side.
tc qdisc add dev "$host_if" root tbf rate "$RATE" burst 32kbit latency 400ms
if [ "$LOSS" != 0 ]; then
    ip netns exec "$ns" iptables -A INPUT -i "$dev_if" -m statistic --mode random --probability "$LOSS" -j DROP
    ip netns exec "$ns" iptables -A OUTPUT -o "$dev_if" -m statistic --mode random --probability "$LOSS" -j DROP
fi

# The registry, on the host's end of the link (and on its loopback, for
# the host's engine to push to: it takes a registry on loopback as
# insecure, none on 10.x).
start_bench_registry "$work" "0.0.0.0:$port" "$reg"
registry_pid="$REGISTRY_PID"

# The device's engine, in the namespace; it has the test image (the base).
mkdir -p "$work/engine"
start_own_engine "$work/engine" "$ns" --insecure-registry "$reg"
D=(docker -H "unix://$work/engine/docker.sock")
docker save stead-test/busybox:1 | "${D[@]}" load >/dev/null

tx() { cat "/sys/class/net/$host_if/statistics/tx_bytes"; }
metric() { # name{labels} → value (0 when absent)
    local addr
    addr="$(cat "$work/data/api-addr" 2>/dev/null || true)"
    ip netns exec "$ns" curl -fsS "http://$addr/metrics" 2>/dev/null | awk -v m="$1" '$1 == m {print $2}' | tail -1 | grep . || echo 0
}

say "link: $RATE, loss $LOSS each way, down ${CUT}s every ${EVERY}s; a layer of $SIZE MiB; fetched by the $FETCH"
printf 'run\tseconds\tcuts\tcompressed\tfetched\ton_the_link\tfetched/compressed\tlink/compressed\n'
for run in $(seq 1 "$RUNS"); do
    # A new image each run: the base and SIZE MiB of random bytes.
    ctx="$work/ctx$run"
    mkdir -p "$ctx"
    head -c "$((SIZE * 1024 * 1024))" /dev/urandom >"$ctx/blob"
    printf 'FROM stead-test/busybox:1\nCOPY blob /blob\n' >"$ctx/Dockerfile"
    tag="127.0.0.1:$port/bench/app:$run"
    docker build -q -t "$tag" "$ctx" >/dev/null
    docker push "$tag" >/dev/null
    docker rmi "$tag" >/dev/null
    digest="$(curl -fsSI -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
        "http://$reg/v2/bench/app/manifests/$run" | awk -F': ' 'tolower($1) == "docker-content-digest" {print $2}' | tr -d '\r')"
    compressed="$(curl -fsS -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
        "http://$reg/v2/bench/app/manifests/$run" | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][-1]["size"])')"

    rm -rf "$work/data" "$work/i"
    mkdir -p "$work/i"
    cat >"$work/stead.toml" <<TOML
node_id = "bench-fetch"
data_dir = "data"
intentions_dir = "i"
docker_socket = "unix://$work/engine/docker.sock"
heartbeat = "2s"
api_listen = "127.0.0.1:0"
insecure_registries = ["$reg"]
[images]
fetch = "$FETCH"
TOML
    cat >"$work/i/app.toml" <<TOML
name = "app"
image = "$reg/bench/app@$digest"
command = ["sh", "-c", "trap 'exit 0' TERM; sleep 1000000 & wait"]
TOML
    before="$(tx)"
    start="$(date +%s.%N)"
    # The cuts, from the start.
    (
        while sleep "$((EVERY - CUT))"; do
            ip link set "$host_if" down
            sleep "$CUT"
            ip link set "$host_if" up
            tc qdisc replace dev "$host_if" root tbf rate "$RATE" burst 32kbit latency 400ms
            echo cut >>"$work/cuts.$run"
        done
    ) &
    cutter_pid=$!
    (cd "$work" && STEAD_LOG=info exec ip netns exec "$ns" "$STEAD" run --config "$work/stead.toml" 2>>"$work/agent.$run.log") &
    agent_pid=$!
    ran=""
    while [ "$(echo "$(date +%s.%N) - $start < $TIMEOUT" | bc)" = 1 ]; do
        if "${D[@]}" ps --filter label=stead.module=app --filter status=running -q | grep -q .; then
            ran=1
            break
        fi
        sleep 0.5
    done
    took="$(echo "$(date +%s.%N) - $start" | bc)"
    kill "$cutter_pid" 2>/dev/null || true
    wait "$cutter_pid" 2>/dev/null || true
    cutter_pid=""
    ip link set "$host_if" up
    tc qdisc replace dev "$host_if" root tbf rate "$RATE" burst 32kbit latency 400ms
    on_link=$(($(tx) - before))
    fetched="$(metric 'stead_image_fetch_bytes_total{source="registry"}')"
    kill "$agent_pid" 2>/dev/null || true
    wait "$agent_pid" 2>/dev/null || true
    agent_pid=""
    [ -n "$ran" ] || die "run $run: the module did not run within ${TIMEOUT}s: $(tail -5 "$work/agent.$run.log")"
    cuts="$(wc -l <"$work/cuts.$run" 2>/dev/null || echo 0)"
    printf '%s\t%.0f\t%s\t%s\t%s\t%s\t%.3f\t%.3f\n' "$run" "$took" "$cuts" "$compressed" "$fetched" "$on_link" \
        "$(echo "$fetched / $compressed" | bc -l)" "$(echo "$on_link / $compressed" | bc -l)"
    "${D[@]}" rm -f "$("${D[@]}" ps -aq --filter label=stead.module=app)" >/dev/null 2>&1 || true
done
say "on $(nproc) cores of $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), kernel $(uname -r)"
