#!/usr/bin/env bash
# Site disruption budgets on a simulated fleet (a benchmark, not a test:
# tests/budget.rs proves the behaviour on the real engine): STEAD_SIM_SITES
# sites (50) of STEAD_SIM_PER_SITE devices (4), each a real agent with its
# own node id, data dir and engine (scripts/fleet-sim/engine.py, the stand-in
# the fleet simulation uses, which logs when each device's module stopped
# and started), labelled `site = s-NN`, in one group with `budget = {per =
# "site", max_updating = 1, lease = STEAD_SIM_LEASE}` (20s). The plane is a
# private bucket on moto's S3 server (tests/data/s3/serve.py: its
# conditional PUTs whole, as S3's are), published to with `stead plane
# publish --upload` (which checks the conditional writes first). Then
# 1. a new revision: every device's module is down from its old container's
#    stop to its new one's start; per site, how many were down at once (at
#    most 1, or the script fails), and how long the fleet and each site took;
# 2. another revision, and the agent of the first device seen going down
#    killed: its site waits for its lease to end, then goes on (how long it
#    waited against the lease, and whether every other device of the site
#    took the revision).
# STEAD_SIM_POLL sets the poll interval (5 s); STEAD_SIM_BIN measures that
# binary (with STEAD_PLANE_BIN, the tool); STEAD_SIM_KEEP keeps the work
# directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=budget-sim.sh
. scripts/lib.sh

SITES="${STEAD_SIM_SITES:-50}"
PER_SITE="${STEAD_SIM_PER_SITE:-4}"
LEASE="${STEAD_SIM_LEASE:-20s}"
POLL="${STEAD_SIM_POLL:-5}"

# moto's server in the venv the test command keeps (made here if absent).
moto="/var/cache/stead-test/moto"
if [ ! -x "$moto/bin/moto_server" ]; then
    /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || apt_install python3-venv
    rm -rf "$moto"
    /usr/bin/python3 -m venv "$moto"
    "$moto/bin/pip" install -q --disable-pip-version-check "moto[server]==5.2.5" >&2 || die "pip install moto failed"
    echo "moto[server]==5.2.5" >"$moto/.stead-version"
fi

release_stead STEAD_SIM_BIN

ulimit -n 65536 2>/dev/null || true
work="$(mktemp -d /tmp/stead-budget-sim.XXXXXX)"
driver_pid=""
cleanup() {
    [ -z "$driver_pid" ] || kill "$driver_pid" 2>/dev/null || true
    for p in $(cat "$work/agent.pids" "$work/engine.pid" "$work/moto.pid" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    [ -n "${STEAD_SIM_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

STEAD_PLANE="$stead_plane" STEAD_MOTO="$moto" python3 scripts/fleet-sim/budget.py \
    "$stead" "$work" "$SITES" "$PER_SITE" "$LEASE" "$POLL" >"$work/results.txt" &
driver_pid=$!
rc=0
wait "$driver_pid" || rc=$?
driver_pid=""
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), moto $("$moto/bin/python" -c 'import moto; print(moto.__version__)'), $(date -u +%F)"
cat "$work/results.txt"
[ "$rc" -eq 0 ] || die "the simulation failed"
