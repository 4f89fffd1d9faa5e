#!/usr/bin/env bash
# A site's update over one WAN link (a benchmark, not a test): DEVICES
# devices, each in a network namespace of its own with a Docker Engine of
# its own and the agent, on one LAN (a bridge in a "site" namespace that
# routes to the WAN); the registry (Distribution) on the other side of
# the WAN link, which is shaped to RATE (tc tbf) towards the site. Every
# device runs a module whose image is the test image and one layer of
# SIZE MiB of random bytes (incompressible), named by digest; device k
# starts STAGGER × k seconds after the first (devices poll at different
# moments; 0: all at once). Run twice: with `[site]` (every device serves
# the LAN and names the others as peers) and without. Prints, per run:
#   - the bytes that crossed the WAN link towards the site (the veth's tx
#     counter: IP and TCP headers included), and as a multiple of the
#     layer's compressed size;
#   - the seconds from the first device's start until every device runs
#     the module;
#   - the blob bytes the devices took from the registry and from peers, in
#     all (stead_image_fetch_bytes_total).
#
# Usage: scripts/bench-peers.sh [runs]          (default 1 of each)
# Env:   STEAD_BENCH_DEVICES (10), STEAD_BENCH_SIZE_MIB (16),
#        STEAD_BENCH_RATE (20mbit), STEAD_BENCH_STAGGER (2),
#        STEAD_BENCH_TIMEOUT (900 s), STEAD_BIN (default: a release build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench-peers.sh
. scripts/lib.sh

RUNS="${1:-1}"
DEVICES="${STEAD_BENCH_DEVICES:-10}"
SIZE="${STEAD_BENCH_SIZE_MIB:-16}"
RATE="${STEAD_BENCH_RATE:-20mbit}"
STAGGER="${STEAD_BENCH_STAGGER:-2}"
TIMEOUT="${STEAD_BENCH_TIMEOUT:-900}"
[ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces, tc, engines of its own)"
[ "$DEVICES" -ge 2 ] && [ "$DEVICES" -le 50 ] || die "STEAD_BENCH_DEVICES: 2 to 50"
scripts/engine.sh
scripts/test-images.sh >/dev/null
command -v docker-registry >/dev/null || apt_install docker-registry
if [ -n "${STEAD_BIN:-}" ]; then
    STEAD="$(realpath "$STEAD_BIN")"
else
    cargo build --release --locked -p stead >&2
    STEAD="$PWD/target/release/stead"
fi

work="$(mktemp -d /tmp/stead-bench-peers.XXXXXX)"
tag="$$"
site="sp-site-$tag"
wan_host="spw$tag" wan_site="sps$tag"
port="$(free_port)"
reg="10.78.0.1:$port"
registry_pid=""
engines=()
agents=()
stop_agents() {
    local p
    for p in "${agents[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${agents[@]}"; do wait "$p" 2>/dev/null || true; done
    agents=()
}
cleanup() {
    stop_agents
    local k
    for k in $(seq 1 "$DEVICES"); do
        ENGINE_PID="${engines[$k]:-}" own_engine_down "$work/e$k" "sp-d$k-$tag"
    done
    [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null || true
    ip link del "$wan_host" 2>/dev/null || true
    ip netns del "$site" 2>/dev/null || true
    [ "${keep:-0}" = 1 ] || rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT

# The WAN: a veth pair from this namespace to the site's router, shaped
# towards the site.
ip netns add "$site"
ip -n "$site" link set lo up
ip link add "$wan_host" type veth peer name "$wan_site"
ip link set "$wan_site" netns "$site"
ip addr add 10.78.0.1/30 dev "$wan_host"
ip -n "$site" addr add 10.78.0.2/30 dev "$wan_site"
ip link set "$wan_host" up
ip -n "$site" link set "$wan_site" up
ip route add 10.79.0.0/24 via 10.78.0.2
tc qdisc add dev "$wan_host" root tbf rate "$RATE" burst 64kbit latency 400ms
# The LAN: a bridge in the site's namespace, which routes.
ip -n "$site" link add br0 type bridge
ip -n "$site" addr add 10.79.0.1/24 dev br0
ip -n "$site" link set br0 up
ip netns exec "$site" sysctl -qw net.ipv4.ip_forward=1
ip netns exec "$site" ip route add default via 10.78.0.1

# The registry, on this side of the WAN.
start_bench_registry "$work" "0.0.0.0:$port" "$reg"
registry_pid="$REGISTRY_PID"

# The devices: a namespace, an address on the LAN, an engine holding the
# base image.
say "starting $DEVICES devices' engines"
for k in $(seq 1 "$DEVICES"); do
    ns="sp-d$k-$tag"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "spd$k-$tag" type veth peer name "spb$k-$tag"
    ip link set "spd$k-$tag" netns "$ns"
    ip link set "spb$k-$tag" netns "$site"
    ip -n "$site" link set "spb$k-$tag" master br0 up
    ip -n "$ns" addr add "10.79.0.$((10 + k))/24" dev "spd$k-$tag"
    ip -n "$ns" link set "spd$k-$tag" up
    ip -n "$ns" route add default via 10.79.0.1
    mkdir -p "$work/e$k"
    start_own_engine "$work/e$k" "$ns" --insecure-registry "$reg"
    engines[k]="$ENGINE_PID"
    docker save stead-test/busybox:1 | docker -H "unix://$work/e$k/docker.sock" load >/dev/null
done

tx() { cat "/sys/class/net/$wan_host/statistics/tx_bytes"; }
metric() { # device, name{labels} → value (0 when absent)
    local addr
    addr="$(cat "$work/d$1/data/api-addr" 2>/dev/null || true)"
    ip netns exec "sp-d$1-$tag" curl -fsS "http://$addr/metrics" 2>/dev/null | awk -v m="$2" '$1 == m {print $2}' | tail -1 | grep . || echo 0
}
running() { docker -H "unix://$work/e$1/docker.sock" ps --filter label=stead.module=app --filter status=running -q | grep -q .; }

say "WAN: $RATE towards the site; $DEVICES devices, one starting every ${STAGGER}s; a layer of $SIZE MiB"
printf 'run\tpeers\tcompressed\twan_bytes\twan/compressed\tseconds\tfrom_registry\tfrom_peers\n'
for run in $(seq 1 "$RUNS"); do
    for peers in yes no; do
        # A new image each time.
        ctx="$work/ctx"
        rm -rf "$ctx"
        mkdir -p "$ctx"
        head -c "$((SIZE * 1024 * 1024))" /dev/urandom >"$ctx/blob"
        printf 'FROM stead-test/busybox:1\nCOPY blob /blob\n' >"$ctx/Dockerfile"
        name="bench/site"
        t="$run-$peers"
        docker build -q -t "127.0.0.1:$port/$name:$t" "$ctx" >/dev/null
        docker push "127.0.0.1:$port/$name:$t" >/dev/null
        docker rmi "127.0.0.1:$port/$name:$t" >/dev/null
        accept='Accept: application/vnd.docker.distribution.manifest.v2+json'
        digest="$(curl -fsSI -H "$accept" "http://$reg/v2/$name/manifests/$t" | awk -F': ' 'tolower($1) == "docker-content-digest" {print $2}' | tr -d '\r')"
        compressed="$(curl -fsS -H "$accept" "http://$reg/v2/$name/manifests/$t" | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][-1]["size"])')"
        before="$(tx)"
        start="$(date +%s.%N)"
        for k in $(seq 1 "$DEVICES"); do
            d="$work/d$k"
            rm -rf "$d"
            mkdir -p "$d/i"
            site_toml=""
            if [ "$peers" = yes ]; then
                list="$(for j in $(seq 1 "$DEVICES"); do [ "$j" = "$k" ] || printf '"10.79.0.%s", ' "$((10 + j))"; done)"
                site_toml="[site]
listen = \"10.79.0.$((10 + k)):7412\"
allow = [\"10.79.0.0/24\"]
rate = \"64m\"
peers = [${list%, }]"
            fi
            cat >"$d/stead.toml" <<TOML
node_id = "site-$k"
data_dir = "data"
intentions_dir = "i"
docker_socket = "unix://$work/e$k/docker.sock"
heartbeat = "1s"
api_listen = "127.0.0.1:0"
insecure_registries = ["$reg"]
$site_toml
TOML
            cat >"$d/i/app.toml" <<TOML
name = "app"
image = "$reg/$name@$digest"
command = ["sh", "-c", "trap 'exit 0' TERM; sleep 1000000 & wait"]
TOML
            (cd "$d" && STEAD_LOG=info exec ip netns exec "sp-d$k-$tag" "$STEAD" run --config "$d/stead.toml" 2>>"$d/agent.log") &
            agents+=("$!")
            [ "$k" = "$DEVICES" ] || sleep "$STAGGER"
        done
        left=1
        while [ "$(echo "$(date +%s.%N) - $start < $TIMEOUT" | bc)" = 1 ]; do
            left=0
            for k in $(seq 1 "$DEVICES"); do running "$k" || left=$((left + 1)); done
            [ "$left" = 0 ] && break
            sleep 0.5
        done
        took="$(echo "$(date +%s.%N) - $start" | bc)"
        wan=$(($(tx) - before))
        registry=0 lan=0
        for k in $(seq 1 "$DEVICES"); do
            registry=$((registry + $(metric "$k" 'stead_image_fetch_bytes_total{source="registry"}')))
            lan=$((lan + $(metric "$k" 'stead_image_fetch_bytes_total{source="peers"}')))
        done
        stop_agents
        [ "$left" = 0 ] || die "run $run ($peers peers): $left devices did not run the module within ${TIMEOUT}s: $(tail -3 "$work/d1/agent.log")"
        printf '%s\t%s\t%s\t%s\t%.2f\t%.0f\t%s\t%s\n' "$run" "$peers" "$compressed" "$wan" \
            "$(echo "$wan / $compressed" | bc -l)" "$took" "$registry" "$lan"
        for k in $(seq 1 "$DEVICES"); do
            D=(docker -H "unix://$work/e$k/docker.sock")
            "${D[@]}" ps -aq --filter label=stead.module=app | xargs -r "${D[@]}" rm -f >/dev/null 2>&1 || true
            "${D[@]}" images -q "$reg/$name" | xargs -r "${D[@]}" rmi -f >/dev/null 2>&1 || true
        done
    done
done
say "on $(nproc) cores of $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), kernel $(uname -r)"
