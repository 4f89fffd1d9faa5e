#!/usr/bin/env bash
# Peak memory of a node holding a 1000-module plane document (a benchmark,
# not a test): the release agent adopts a signed document of
# STEAD_BENCH_MODULES modules (1000; about 950 KB, near the 1 MiB limit)
# from Debian's nginx on loopback, against the running engine; the modules
# name an image on a loopback port where no registry listens, so they are
# held, not run (no 1000 containers). Then 8 clients read every GET
# endpoint three times each at once (half with the token, half without).
# Printed per run: the peak resident set (VmHWM) once the document is
# adopted and every module is on the board, and after the readers; then
# the medians over STEAD_BENCH_RUNS runs (3), and the machine. Each run has
# a data directory of its own. STEAD_BENCH_BIN measures that binary instead
# of building target/release/stead. The issue's goal: a peak of 32 MiB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench-memory.sh
. scripts/lib.sh

RUNS="${STEAD_BENCH_RUNS:-3}"
MODULES="${STEAD_BENCH_MODULES:-1000}"

need_nginx
docker version >/dev/null 2>&1 || die "no engine answers: start one (scripts/engine.sh)"

release_stead STEAD_BENCH_BIN

work="$(mktemp -d /tmp/stead-bench-memory.XXXXXX)"
nginx_pid=""
cleanup() {
    local p
    for p in $(cat "$work/agent.pids" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    stop_nginx "$nginx_pid"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the plane: nginx on a free loopback port, everything in $work --------
node="bench-memory-$$"
mkdir -p "$work/root/nodes/$node" "$work/tmp"
port="$(free_port)"
cat >"$work/nginx.conf" <<NGINX
# Written by scripts/bench-memory.sh: master and one worker, as root, in a
# root-only tempdir; loopback only.
$(nginx_head "$work" 64)
    access_log off;
    server {
        listen 127.0.0.1:$port;
        root "$work/root";
        location / { limit_except GET { deny all; } }
    }
}
NGINX
/usr/sbin/nginx -c "$work/nginx.conf" -p "$work" &
nginx_pid=$!

# --- the document ----------------------------------------------------------
"$stead_plane" keygen --out "$work/plane.key" >/dev/null
python3 scripts/bench-memory/payload.py "$MODULES" >"$work/payload.json"
"$stead_plane" sign --key "$work/plane.key" --node "$node" --revision 1 \
    --in "$work/payload.json" --out "$work/root/nodes/$node/desired.json" >"$work/sign.log" 2>&1 ||
    { cat "$work/sign.log" >&2; die "stead-plane sign failed"; }
say "a $MODULES-module document of $(stat -c %s "$work/root/nodes/$node/desired.json") bytes"

# --- the runs ----------------------------------------------------------------
python3 scripts/bench-memory/drive.py "$stead" "$work" "$node" "$port" "$RUNS" "$MODULES"
