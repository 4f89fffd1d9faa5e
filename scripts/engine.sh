#!/usr/bin/env bash
# Make sure a Docker Engine answers on this machine (idempotent).
#
# - If `docker info` already works: exit 0 at once.
# - Else: install Debian's docker.io if dockerd/docker are missing, start
#   dockerd in the background (detached: setsid + nohup), and wait until
#   `docker info` answers. On failure print the tail of the dockerd log, exit 1.
#
# Env:
#   STEAD_DOCKERD_LOG      log file (default /var/log/stead-dockerd.log, or /tmp)
#   STEAD_DOCKERD_TIMEOUT  seconds to wait for the engine (default 90)
#   STEAD_DOCKERD_FLAGS    extra dockerd flags, used on every attempt
set -euo pipefail

NAME=engine.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

engine_up() { docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && engine_up; then
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root to install/start dockerd"

TIMEOUT="${STEAD_DOCKERD_TIMEOUT:-90}"
LOG="${STEAD_DOCKERD_LOG:-/var/log/stead-dockerd.log}"
if ! { : >>"$LOG"; } 2>/dev/null; then LOG=/tmp/stead-dockerd.log; fi

# Serialise concurrent callers: only one of them starts dockerd.
LOCK=/var/lock/stead-engine.lock
{ : >>"$LOCK"; } 2>/dev/null || LOCK=/tmp/stead-engine.lock
exec 9>>"$LOCK"
flock -w $((TIMEOUT + 120)) 9 || die "timed out waiting for another engine.sh"
if command -v docker >/dev/null 2>&1 && engine_up; then
    exit 0
fi

# --- install ------------------------------------------------------------
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    say "installing docker.io (apt-get)..."
    # Depends bring containerd, runc, iptables, tini. Recommends skipped
    # (apparmor, needrestart, git, ... are not needed here).
    apt_install docker.io
    command -v dockerd >/dev/null 2>&1 || die "dockerd still missing after installing docker.io"
    # On a machine with a working init, the package may have started it.
    if engine_up; then say "engine started by the package's init script"; exit 0; fi
fi

# --- prerequisites --------------------------------------------------------
# cgroups: dockerd/runc need a cgroup hierarchy. Mount cgroup2 if none is.
if ! grep -qE '^[^ ]+ [^ ]+ cgroup2? ' /proc/mounts; then
    say "no cgroup filesystem mounted; mounting cgroup2 on /sys/fs/cgroup"
    mkdir -p /sys/fs/cgroup
    mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null \
        || say "warning: could not mount cgroup2; dockerd may fail"
fi

# iptables: Debian 12 defaults to the nft backend. If it does not work but
# the legacy backend does, switch; if neither works, run without iptables
# (then port publishing is done by docker-proxy only, and containers have
# no NAT to the outside, which we do not need anyway).
iptables_ok() { iptables -t nat -nL >/dev/null 2>&1 && iptables -t filter -nL >/dev/null 2>&1; }
NO_IPTABLES=""
if command -v iptables >/dev/null 2>&1 && ! iptables_ok; then
    if [ -x /usr/sbin/iptables-legacy ] && /usr/sbin/iptables-legacy -t nat -nL >/dev/null 2>&1; then
        say "iptables (nft) does not work here; switching to iptables-legacy"
        update-alternatives --set iptables /usr/sbin/iptables-legacy >/dev/null 2>&1 || true
        update-alternatives --set ip6tables /usr/sbin/ip6tables-legacy >/dev/null 2>&1 || true
    fi
    iptables_ok || { say "iptables does not work here; starting dockerd with --iptables=false"; NO_IPTABLES="--iptables=false"; }
elif ! command -v iptables >/dev/null 2>&1; then
    say "iptables missing; starting dockerd with --iptables=false"
    NO_IPTABLES="--iptables=false"
fi

# --- start ----------------------------------------------------------------
pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

pidfile_pid() { cat /var/run/docker.pid 2>/dev/null || true; }

# Wait for `docker info`; returns 0 when up, 1 when the daemon died,
# 2 on timeout.
wait_engine() {
    local pid="$1" deadline=$((SECONDS + TIMEOUT))
    while [ "$SECONDS" -lt "$deadline" ]; do
        engine_up && return 0
        if ! pid_alive "$pid"; then
            sleep 0.5; engine_up && return 0
            return 1
        fi
        sleep 0.5
    done
    return 2
}

start_dockerd() {  # args: extra flags
    say "starting dockerd $* (log: $LOG)"
    {
        echo "=== $(date -u +%FT%TZ) engine.sh: dockerd $*"
    } >>"$LOG"
    # setsid: own session, so it survives the calling shell; nohup: ignore HUP.
    # shellcheck disable=SC2086
    setsid nohup dockerd $* >>"$LOG" 2>&1 </dev/null 9>&- &
    DOCKERD_PID=$!
}

# A dockerd may already be running but not answering yet (e.g. just started).
existing="$(pidfile_pid)"
if pid_alive "$existing" && grep -q dockerd "/proc/$existing/cmdline" 2>/dev/null; then
    say "dockerd (pid $existing) already running; waiting for it"
    t0=$SECONDS
    if wait_engine "$existing"; then say "engine up after $((SECONDS - t0))s"; exit 0; fi
    tail -n 40 "$LOG" >&2 || true
    die "existing dockerd (pid $existing) does not answer"
fi

# dockerd reuses the containerd named in its pid file if a process with that
# pid is alive. After dockerd was killed (a machine's processes stopped, not
# its files), the pid may since belong to another process: dockerd then waits
# for a containerd that is not there and gives up. Drop a pid file whose
# process is not a containerd, and stop an orphaned containerd whose dockerd
# is gone (its socket may be gone too); dockerd starts its own.
CONTAINERD_PIDFILE=/var/run/docker/containerd/containerd.pid
clear_stale_containerd() {
    local cpid
    cpid="$(cat "$CONTAINERD_PIDFILE" 2>/dev/null || true)"
    [ -n "$cpid" ] || return 0
    if pid_alive "$cpid" && grep -q containerd "/proc/$cpid/comm" 2>/dev/null; then
        say "stopping the containerd (pid $cpid) left by a dockerd that is gone"
        kill "$cpid" 2>/dev/null || true
        for _ in $(seq 1 20); do pid_alive "$cpid" || break; sleep 0.5; done
        pid_alive "$cpid" && kill -9 "$cpid" 2>/dev/null || true
    else
        say "removing a stale containerd pid file (pid $cpid is not a containerd)"
    fi
    rm -f "$CONTAINERD_PIDFILE"
}
clear_stale_containerd

# Start with the defaults (overlay2 where it works; dockerd itself falls back
# to vfs when overlay is unsupported). Only if the daemon dies during start-up
# add the flag its log points at: --storage-driver=vfs for a storage-driver
# error, --iptables=false for an iptables/NAT error.
STORAGE=""
flags_now() { echo "$STORAGE $NO_IPTABLES ${STEAD_DOCKERD_FLAGS:-}"; }

t0=$SECONDS
for _ in 1 2 3; do
    flags="$(flags_now)"
    log_start=$(wc -c <"$LOG")
    # shellcheck disable=SC2086
    start_dockerd $flags
    rc=0; wait_engine "$DOCKERD_PID" || rc=$?
    if [ "$rc" -eq 0 ]; then
        say "engine up after $((SECONDS - t0))s (storage driver: $(docker info --format '{{.Driver}}' 2>/dev/null))"
        exit 0
    fi
    if [ "$rc" -eq 2 ]; then
        say "dockerd did not answer within ${TIMEOUT}s; last log lines:"
        tail -n 40 "$LOG" >&2 || true
        exit 1
    fi
    rm -f /var/run/docker.pid
    errs="$(tail -c +"$((log_start + 1))" "$LOG" | grep -iE 'level=(error|fatal)|failed to start' || true)"
    say "dockerd exited during start-up (flags: '$(echo $flags)'):"
    printf '%s\n' "$errs" | tail -n 5 >&2
    if grep -qiE 'waiting for containerd' <<<"$errs"; then
        clear_stale_containerd; say "retrying"
    elif [ -z "$STORAGE" ] && grep -qiE 'storage.driver|graphdriver|overlay' <<<"$errs"; then
        STORAGE="--storage-driver=vfs"; say "retrying with $STORAGE"
    elif [ -z "$NO_IPTABLES" ] && grep -qiE 'iptables|nat|bridge' <<<"$errs"; then
        NO_IPTABLES="--iptables=false"; say "retrying with $NO_IPTABLES"
    else
        break
    fi
done

say "dockerd could not be started; last log lines:"
tail -n 40 "$LOG" >&2 || true
exit 1
