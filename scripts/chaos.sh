#!/usr/bin/env bash
# Chaos (a benchmark-like script, not a test): N random setting changes over
# a few minutes while the agent is SIGKILLed and its Docker Engine restarted
# at random, against a second Docker Engine of the script's own: its own
# --data-root, --exec-root, socket and pidfile, in a network namespace of its
# own (so its bridge and rules never touch the host's engine). At the end it
# checks:
#   - creates == changes: the engine's own events count one container
#     created per module and per change, whatever the kills;
#   - one container per module;
#   - the store is consistent: every module's applied record names the
#     container that runs and the digest it carries.
# Usage: scripts/chaos.sh [changes] [modules]      (defaults: 40, 4)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=chaos.sh
. scripts/lib.sh

CHANGES="${1:-40}"
MODULES="${2:-4}"
scripts/engine.sh
scripts/test-images.sh >/dev/null
command -v dockerd >/dev/null || die "dockerd is needed (scripts/engine.sh installs it)"
cargo build --release --locked >&2
STEAD="$PWD/target/release/stead"

work="$(mktemp -d /tmp/stead-chaos.XXXXXX)"
sock="$work/docker.sock"
D=(docker -H "unix://$sock")
node="chaos-$$"
ns="stead-chaos-$$"
ip netns add "$ns"
ip -n "$ns" link set lo up
agent_pid=""
engine_pid=""
events_pid=""

start_engine() {
    since="$(date +%s.%N)"
    start_own_engine "$work" "$ns"
    engine_pid="$ENGINE_PID"
    # The engine's events, kept across its restarts (its own log of them is
    # in memory only); from the engine's start, so an event before the
    # recorder has subscribed is replayed, not missed.
    "${D[@]}" events --since "$since" --filter type=container --filter "label=stead.managed-by=$node" \
        --format '{{.Action}} {{index .Actor.Attributes "stead.module"}} {{.Actor.ID}}' >>"$work/events" 2>/dev/null &
    events_pid=$!
}
stop_engine() {
    # The engine first: a create the killed agent had already asked for
    # still lands, and its event reaches the recorder before the stream ends.
    kill "$engine_pid" 2>/dev/null || true
    wait "$engine_pid" 2>/dev/null || true
    kill "$events_pid" 2>/dev/null || true
    wait "$events_pid" 2>/dev/null || true
}
start_agent() {
    STEAD_LOG=warn "$STEAD" run --config "$work/stead.toml" 2>>"$work/agent.log" &
    agent_pid=$!
}
kill_agent() { kill -9 "$agent_pid" 2>/dev/null || true; wait "$agent_pid" 2>/dev/null || true; }
cleanup() {
    kill_agent
    "${D[@]}" ps -aq 2>/dev/null | xargs -r "${D[@]}" rm -f >/dev/null 2>&1 || true
    stop_engine
    umount "$work/exec"/*/* 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    [ "${keep:-0}" = 1 ] || rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT

start_engine
docker save stead-test/busybox:1 | "${D[@]}" load >/dev/null

mkdir -p "$work/i"
cat >"$work/stead.toml" <<TOML
node_id = "$node"
data_dir = "data"
intentions_dir = "i"
docker_socket = "unix://$sock"
heartbeat = "2s"
backoff_min = "100ms"
backoff_max = "1s"
api_listen = "127.0.0.1:0"
settle_window = "1s"
TOML
intention() { # module value
    cat <<TOML
name = "$1"
image = "stead-test/busybox:1"
command = ["sh", "-c", "trap 'exit 0' TERM; sleep 1000000 & wait"]
restart = "unless-stopped"
[config]
path = "/etc/m/config.json"
format = "json"
defaults = { value = $2 }
TOML
}
write_intention() { intention "$1" "$2" >"$work/i/.$1.tmp"; mv "$work/i/.$1.tmp" "$work/i/$1.toml"; }
digest_running() { # module → the digest its running container carries
    "${D[@]}" ps --filter "label=stead.module=$1" --filter status=running \
        --format '{{.Names}} {{.Label "stead.digest"}}' 2>/dev/null | awk '$1 !~ /\.next$/ {print $2}'
}

declare -A value
for m in $(seq 1 "$MODULES"); do value[m$m]=0; write_intention "m$m" 0; done
start_agent
for m in $(seq 1 "$MODULES"); do
    for _ in $(seq 1 100); do [ -n "$(digest_running "m$m")" ] && break; sleep 0.2; done
done

kills=0 restarts=0
say "$CHANGES changes over $MODULES modules, with kills and engine restarts"
for c in $(seq 1 "$CHANGES"); do
    m="m$(( (RANDOM % MODULES) + 1 ))"
    before="$(digest_running "$m")"
    value[$m]=$(( ${value[$m]} + 1 ))
    write_intention "$m" "${value[$m]}"
    case $(( RANDOM % 6 )) in
        0) sleep "0.$(( RANDOM % 9 ))"; kill_agent; start_agent; kills=$((kills + 1)) ;;
        1) sleep "0.$(( RANDOM % 9 ))"; kill_agent; stop_engine; start_engine; start_agent
           restarts=$((restarts + 1)) ;;
        *) ;;
    esac
    # Each change lands before the next: the module runs a new digest.
    for _ in $(seq 1 300); do
        now="$(digest_running "$m")"
        [ -n "$now" ] && [ "$now" != "$before" ] && break
        sleep 0.1
    done
    [ -n "$now" ] && [ "$now" != "$before" ] || die "change $c of $m did not land: $(tail -5 "$work/agent.log")"
done
sleep 3
kill -TERM "$agent_pid"; wait "$agent_pid" 2>/dev/null || true
sleep 1

fail=0
creates_total=0
for m in $(seq 1 "$MODULES"); do
    creates=$(awk -v m="m$m" '$1 == "create" && $2 == m' "$work/events" | sort -u | wc -l)
    want=$(( ${value[m$m]} + 1 ))
    count=$("${D[@]}" ps -aq --filter "label=stead.module=m$m" | wc -l)
    printf 'm%-3s changes %3d  creates %3d  containers %d\n' "$m" "${value[m$m]}" "$creates" "$count"
    [ "$creates" -eq "$want" ] || { say "m$m: $creates creates for $want (the first and one per change)"; fail=1; }
    [ "$count" -eq 1 ] || { say "m$m: $count containers"; fail=1; }
    creates_total=$((creates_total + creates))
done
# The store, read as the agent left it: every module's applied record is
# applied (no action left half-way) and names the container that runs and
# the digest it carries, and so does its observed record.
cargo build --release --locked --example store-dump >&2
target/release/examples/store-dump "$work/data/stead.redb" >"$work/store.txt"
for m in $(seq 1 "$MODULES"); do
    running=$("${D[@]}" ps --no-trunc --filter "label=stead.module=m$m" --filter status=running \
        --format '{{.ID}} {{.Label "stead.digest"}}' | head -1)
    id=${running%% *} digest=${running#* }
    want="m$m applied $digest $id $id $digest"
    got=$(awk -v m="m$m" '$1 == m' "$work/store.txt")
    [ "$got" = "$want" ] || { say "m$m: the store says '$got', the engine '$want'"; fail=1; }
done
# And a pass after it all has nothing to do.
"$STEAD" run --once --config "$work/stead.toml" >"$work/once.txt" 2>&1 || true
if grep -v ' unchanged ' "$work/once.txt" | grep -q .; then
    say "a pass after the chaos still had work: $(cat "$work/once.txt")"; fail=1
fi
echo "chaos: $CHANGES changes, $kills agent kills, $restarts engine restarts, $creates_total creates"
[ "$fail" -eq 0 ] || { keep=1; die "chaos found a fault (work dir kept: $work)"; }
echo "chaos: creates == changes, one container per module, the store names what runs, a last pass with nothing to do"
