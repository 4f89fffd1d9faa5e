#!/usr/bin/env bash
# The central plane's poll cycle, measured (a benchmark, not a test): the
# release agent polls Debian's nginx on loopback every second, and per cycle
# this prints the bytes on the wire (nginx's $request_length + $bytes_sent,
# from its access log) and the agent's CPU time, for
# - a 304 cycle: the document does not change (a 100-module document held);
# - a 100-module document cycle: every poll gets a newly signed revision of
#   the same 100 modules (only revision and issued_at change), fetched,
#   verified, parsed and written with its intentions in one transaction;
# - a 304 cycle with one group: the same 100 modules in a group's document
#   (published with `stead plane publish`), the node's document naming the
#   group; both unchanged, each a conditional GET answered 304.
# No engine: docker_socket names a path where nothing listens, so the agent
# waits for its engine (with backoff) and never creates a container; its
# poller starts after the 30 s it waits for a first pass. The baseline is a
# twin agent (same binary, same config but no [plane]) started beside it:
# its CPU over the same windows is subtracted. CPU is each process's CPU
# clock (clock_gettime on the pid's CLOCKID, ns; what /proc/<pid>/stat's
# utime+stime count in 10 ms ticks, shown as a cross-check). Medians over
# STEAD_BENCH_ROUNDS rounds (5) of STEAD_BENCH_CYCLES cycles (14) each;
# about 3 minutes after the build. STEAD_BENCH_LOG sets the agent's
# STEAD_LOG (info); STEAD_BENCH_BIN measures that binary instead of
# building target/release/stead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench-plane.sh
. scripts/lib.sh

ROUNDS="${STEAD_BENCH_ROUNDS:-5}"
CYCLES="${STEAD_BENCH_CYCLES:-14}"
MODULES=100
LOG_LEVEL="${STEAD_BENCH_LOG:-info}"

need_nginx

release_stead STEAD_BENCH_BIN

work="$(mktemp -d /tmp/stead-bench-plane.XXXXXX)"
nginx_pid=""
driver_pid=""
cleanup() {
    local p
    [ -z "$driver_pid" ] || kill "$driver_pid" 2>/dev/null || true
    # The agents the driver started (it ends them itself unless it died).
    for p in $(cat "$work/agent.pids" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    stop_nginx "$nginx_pid"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the plane: nginx on a free loopback port, everything in $work --------
mkdir -p "$work/root/nodes" "$work/tmp"
token="bench-plane-$$-$RANDOM"
nginx_conf() {
    cat <<NGINX
# Written by scripts/bench-plane.sh. Master and one worker, as root (the
# script runs as root; everything is in a root-only tempdir).
$(nginx_head "$work" 64)
    client_max_body_size 1m;
    # Bytes on the wire per request: the whole request (line, headers, body)
    # and the whole answer (status line, headers, body). Unbuffered: a line
    # is written as its request ends.
    log_format bench "\$msec\t\$request_method\t\$uri\t\$status\t\$request_length\t\$bytes_sent\t\$body_bytes_sent\t\$connection\t\$connection_requests";
    access_log "$work/access.log" bench;
    server {
        listen 127.0.0.1:$port;
        root "$work/root";
        location = /__bench { access_log off; return 200 "$token"; }
        location ~ ^/nodes/[^/]+/desired\.json\$ { limit_except GET { deny all; } }
$(nginx_reports_location)
        location / { limit_except GET { deny all; } }
    }
}
NGINX
}
start_nginx "$work" nginx_conf /__bench "$token"
say "nginx (pid $nginx_pid) on 127.0.0.1:$port"

# --- the key, the agents' configs ------------------------------------------
node="bench-plane"
"$stead_plane" keygen --out "$work/plane.key" >/dev/null || die "stead-plane keygen failed"
pub="$(cat "$work/plane.key.pub")"
for who in plane twin; do
    mkdir -p "$work/$who/i"
    cat >"$work/$who/c.toml" <<TOML
node_id = "$node"
data_dir = "data"
intentions_dir = "i"
api_listen = "127.0.0.1:0"
# Nothing listens here: the agent waits for its engine and creates nothing.
docker_socket = "$work/no-engine.sock"
TOML
done
cat >>"$work/plane/c.toml" <<TOML

[plane]
url = "http://127.0.0.1:$port"
trusted_keys = ["$pub"]
poll_interval = "1s"
TOML

# --- the driver: publishes, runs the agents, measures ----------------------
# In the background and waited for, so a signal to this script is acted on
# at once (the trap ends the driver, the agents and nginx).
STEAD_PLANE="$stead_plane" python3 scripts/bench-plane/drive.py "$stead" "$work" "$node" "$MODULES" "$ROUNDS" "$CYCLES" "$LOG_LEVEL" >"$work/results.json" &
driver_pid=$!
wait "$driver_pid" || die "the measurement failed"
driver_pid=""
results="$(cat "$work/results.json")"

# --- the report -------------------------------------------------------------
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(/usr/sbin/nginx -v 2>&1 | sed 's/^nginx version: //'), $(date -u +%F)"
libc="static"; ldd "$stead" 2>/dev/null | grep -q 'libc\.so' && libc="glibc"
echo "agent: $stead ($libc, release profile), STEAD_LOG=$LOG_LEVEL, no engine; $ROUNDS rounds of $CYCLES cycles, medians"
python3 scripts/bench-plane/report.py "$results" "$MODULES"
