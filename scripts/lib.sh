# Shared by the project's scripts: messages and a quiet apt-get install.
# Source it after setting NAME.

say() { printf '%s: %s\n' "${NAME:-stead}" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# Quiet, non-interactive apt-get install; output goes to a log shown only on failure.
apt_install() {
    local log rc=0
    log="$(mktemp /tmp/stead-apt.XXXXXX)"
    export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"; } >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then tail -n 30 "$log" >&2; rm -f "$log"; die "apt-get install $* failed"; fi
    rm -f "$log"
}

# apt_install, with no service started by the packages' maintainer scripts
# (nginx's would start the system nginx on port 80): a policy-rc.d denies
# every start while it installs, unless one is already in place (Docker
# images ship one).
apt_install_no_start() {
    local added="" rc=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\n# stead scripts/lib.sh: no service starts while it installs\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        added=1
    fi
    (apt_install "$@") || rc=$?
    [ -z "$added" ] || rm -f /usr/sbin/policy-rc.d
    [ "$rc" -eq 0 ] || exit "$rc"
}

# Stops the nginx whose master is $1 (nothing when empty or gone): SIGTERM
# to the master, which ends its worker first; SIGKILL to both if it has not
# within 5 s.
stop_nginx() {
    local pid="$1" p
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        for p in $(pgrep -P "$pid" || true); do kill -KILL "$p" 2>/dev/null || true; done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

# Starts a Docker Engine of the caller's own, with its own --data-root,
# --exec-root, socket ($1/docker.sock) and pidfile under $1, in the network
# namespace $2 (made by the caller: its bridge and rules never touch the
# host's engine); sets ENGINE_PID. The engine binaries come from
# scripts/engine.sh.
start_own_engine() {
    local dir="$1" ns="$2"
    nsenter --net="/run/netns/$ns" dockerd --data-root "$dir/docker" --exec-root "$dir/exec" \
        --host "unix://$dir/docker.sock" --pidfile "$dir/docker.pid" --iptables=false --ip-masq=false \
        >>"$dir/dockerd.log" 2>&1 &
    ENGINE_PID=$!
    for _ in $(seq 1 100); do docker -H "unix://$dir/docker.sock" info >/dev/null 2>&1 && return 0; sleep 0.2; done
    die "the engine of our own did not start: $(tail -5 "$dir/dockerd.log")"
}
