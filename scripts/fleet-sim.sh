#!/usr/bin/env bash
# A simulated fleet (a benchmark, not a test; scripts/test.sh runs a small
# one with STEAD_SIM_CHECK=1, which fails when a property below does not
# hold): STEAD_SIM_DEVICES agents (200), each its own node id, data dir,
# API and engine, against one Debian nginx on loopback that serves the
# signed documents and takes the reports (DAV PUT). The engines are one
# stand-in process (scripts/fleet-sim/engine.py, the part of the Docker
# Engine API stead speaks, one socket per device): many agents cannot share
# one real engine and run the same module, whose container is named after
# the module. The fleet is published with `stead plane publish` (one group,
# every node in it); then
# 1. a good revision rolls out over STEAD_SIM_WINDOW seconds (60): when each
#    device takes it (its container created) against its turn as the hash
#    predicts, and when the fleet reached 100 %;
# 2. a revision that fails on 20 % of devices (its module crash-loops
#    there) rolls out over 4 windows while `stead plane rollout watch` runs
#    every 2 s: when it halts against when 5 % of at least 10 devices on it
#    failed, and how many took it; then a revert brings them back;
# 3. nginx's log over STEAD_SIM_QUIET quiet seconds (60): requests and bytes
#    per device and per poll, extrapolated to a day and to 10k, 100k and 1M
#    devices; the agents' CPU over them.
# 4. with STEAD_SIM_NUDGE=1, each agent also subscribes to a Debian
#    mosquitto on loopback ([plane.nudge], its default 30 s jitter): the
#    node documents' poll goes to 1 h, a revision is published with no
#    rollout window, and one `poll` hint is published: when 50, 90 and
#    100 % of devices took it after the hint, and how many within 60 s;
#    the quiet minute (3.) then runs with the broker connected.
# STEAD_SIM_PHASES (rollout,quiet,nudge; rollout is 1. and 2.) runs only
# the phases named;
# STEAD_SIM_POLL sets the poll interval (5 s); STEAD_SIM_BIN measures that
# binary instead of building target/release/stead (with STEAD_PLANE_BIN,
# the operator's tool that one names, else the one beside it);
# STEAD_SIM_KEEP keeps the work directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=fleet-sim.sh
. scripts/lib.sh

DEVICES="${STEAD_SIM_DEVICES:-200}"
WINDOW="${STEAD_SIM_WINDOW:-60}"
POLL="${STEAD_SIM_POLL:-5}"
QUIET="${STEAD_SIM_QUIET:-60}"
CHECK="${STEAD_SIM_CHECK:-}"
NUDGE="${STEAD_SIM_NUDGE:-}"
PHASES="${STEAD_SIM_PHASES:-rollout,quiet${NUDGE:+,nudge}}"

need_nginx
if [ -n "$NUDGE" ]; then
    command -v mosquitto >/dev/null 2>&1 || apt_install_no_start mosquitto
    command -v mosquitto_pub >/dev/null 2>&1 || apt_install mosquitto-clients
fi

release_stead STEAD_SIM_BIN

# Many agents, each with files open and an event stream.
ulimit -n 65536 2>/dev/null || true
work="$(mktemp -d /tmp/stead-fleet-sim.XXXXXX)"
nginx_pid=""
driver_pid=""
broker_pid=""
cleanup() {
    [ -z "$driver_pid" ] || kill "$driver_pid" 2>/dev/null || true
    [ -z "$broker_pid" ] || kill "$broker_pid" 2>/dev/null || true
    for p in $(cat "$work/agent.pids" "$work/engine.pid" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    stop_nginx "$nginx_pid"
    [ -n "${STEAD_SIM_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/root" "$work/tmp"
token="fleet-sim-$$-$RANDOM"
nginx_conf() {
    cat <<NGINX
# Written by scripts/fleet-sim.sh.
$(nginx_head "$work" 4096)
    client_max_body_size 1m;
    keepalive_requests 100000;
    log_format sim "\$msec\t\$request_method\t\$uri\t\$status\t\$request_length\t\$bytes_sent";
    access_log "$work/access.log" sim;
    server {
        listen 127.0.0.1:$port;
        root "$work/root";
        location = /__sim { access_log off; return 200 "$token"; }
$(nginx_reports_location)
        location / { limit_except GET { deny all; } }
    }
}
NGINX
}
start_nginx "$work" nginx_conf /__sim "$token"
say "nginx (pid $nginx_pid) on 127.0.0.1:$port; $DEVICES devices, poll ${POLL}s, window ${WINDOW}s"

broker_port=""
if [ -n "$NUDGE" ]; then
    broker_port="$(free_port)"
    cat >"$work/mosquitto.conf" <<CONF
# Written by scripts/fleet-sim.sh.
listener $broker_port 127.0.0.1
allow_anonymous true
persistence false
sys_interval 2
CONF
    mosquitto -c "$work/mosquitto.conf" 2>"$work/mosquitto.log" &
    broker_pid=$!
    until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $broker_port), 1)" 2>/dev/null; do
        kill -0 "$broker_pid" 2>/dev/null || die "mosquitto exited: $(cat "$work/mosquitto.log" 2>/dev/null)"
        sleep 0.1
    done
    say "mosquitto $(mosquitto -h 2>/dev/null | sed -n 's/^mosquitto version //p') (pid $broker_pid) on 127.0.0.1:$broker_port"
fi

STEAD_SIM_BROKER="$broker_port" STEAD_SIM_BROKER_PID="$broker_pid" STEAD_SIM_PHASES="$PHASES" STEAD_PLANE="$stead_plane" python3 scripts/fleet-sim/drive.py "$stead" "$work" "$port" "$DEVICES" "$POLL" "$WINDOW" "$QUIET" "${CHECK:+check}" >"$work/results.txt" &
driver_pid=$!
rc=0
wait "$driver_pid" || rc=$?
driver_pid=""
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(/usr/sbin/nginx -v 2>&1 | sed 's/^nginx version: //'), $(date -u +%F)"
cat "$work/results.txt"
[ "$rc" -eq 0 ] || die "the simulation failed"
