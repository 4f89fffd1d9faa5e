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
# host's engine), with any further dockerd flags ($3...); sets ENGINE_PID.
# The engine binaries come from scripts/engine.sh.
start_own_engine() {
    local dir="$1" ns="$2"
    shift 2
    nsenter --net="/run/netns/$ns" dockerd --data-root "$dir/docker" --exec-root "$dir/exec" \
        --host "unix://$dir/docker.sock" --pidfile "$dir/docker.pid" --iptables=false --ip-masq=false "$@" \
        >>"$dir/dockerd.log" 2>&1 &
    ENGINE_PID=$!
    for _ in $(seq 1 100); do docker -H "unix://$dir/docker.sock" info >/dev/null 2>&1 && return 0; sleep 0.2; done
    die "the engine of our own did not start: $(tail -5 "$dir/dockerd.log")"
}

# An engine of a benchmark's own, in a network namespace of its own ($2),
# its data under $1 (its socket: unix://$1/docker.sock), holding the images
# named after them (copied from the machine's engine). own_engine_down
# takes all of it away again (the script's EXIT trap).
own_engine_up() {
    local dir="$1" ns="$2"
    shift 2
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    start_own_engine "$dir" "$ns"
    [ "$#" -eq 0 ] || docker save "$@" | docker -H "unix://$dir/docker.sock" load >/dev/null
}
own_engine_down() {
    local dir="$1" ns="$2" D=(docker -H "unix://$1/docker.sock")
    "${D[@]}" ps -aq 2>/dev/null | timeout 600 xargs -r "${D[@]}" rm -f >/dev/null 2>&1 || true
    [ -n "${ENGINE_PID:-}" ] && { kill "$ENGINE_PID" 2>/dev/null; timeout 60 tail --pid="$ENGINE_PID" -f /dev/null || kill -9 "$ENGINE_PID" 2>/dev/null; } || true
    # Whatever the engine left mounted under its directory.
    mount | awk -v w="$dir/" 'index($3, w) == 1 {print $3}' | sort -r | xargs -r umount -l 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$dir" 2>/dev/null || true
}

# The footprint benchmarks' workload, in one place (scripts/footprint.sh on
# x86_64, scripts/lab/footprint-aarch64.sh in an arm64 VM): an agent's
# config in $1/c.toml for node $2 on the engine at socket $5, and $3
# intentions in $1/i/, named fp<n>$4, each an idle busybox with a composed
# config file.
footprint_workload() {
    local run="$1" node="$2" modules="$3" suffix="$4" socket="$5" n
    mkdir -p "$run/i"
    cat >"$run/c.toml" <<TOML
node_id = "$node"
data_dir = "data"
intentions_dir = "i"
api_listen = "127.0.0.1:0"
settle_window = "5s"
docker_socket = "$socket"
TOML
    for n in $(seq 1 "$modules"); do
        cat >"$run/i/m$n.toml" <<TOML
name = "fp$n$suffix"
image = "stead-test/busybox:1"
command = ["sh", "-c", "trap 'exit 0' TERM; sleep 1000000 & wait"]
restart = "unless-stopped"
[config]
path = "/etc/m/config.json"
format = "json"
defaults = { module = $n, poll_ms = 1000 }
TOML
    done
}

# Debian's nginx (no service started: the system one would take port 80)
# and python3, for the benchmarks that serve a plane on loopback.
need_nginx() {
    if [ ! -x /usr/sbin/nginx ]; then
        apt_install_no_start nginx
        if command -v systemctl >/dev/null 2>&1; then systemctl disable nginx.service >/dev/null 2>&1 || true; fi
    fi
    command -v python3 >/dev/null 2>&1 || apt_install python3
}

# The stead binary a benchmark measures, in $stead: the one the variable
# named $1 gives (STEAD_BENCH_BIN, …) when set, else target/release/stead,
# built now; and the operator's tool beside it, in $stead_plane (built
# now: target/tool/stead-plane, as scripts/release.sh builds it), or the
# one STEAD_PLANE_BIN names.
release_stead() {
    local given="${!1:-}" target_dir
    if [ -n "$given" ] && [ -n "${STEAD_PLANE_BIN:-}" ]; then
        [ -x "$given" ] || die "$1: $given is not an executable"
        [ -x "$STEAD_PLANE_BIN" ] || die "STEAD_PLANE_BIN: $STEAD_PLANE_BIN is not an executable"
        stead="$(realpath "$given")"
        stead_plane="$(realpath "$STEAD_PLANE_BIN")"
        return 0
    fi
    if [ -n "$given" ]; then
        [ -x "$given" ] || die "$1: $given is not an executable"
        stead="$(realpath "$given")"
        # Beside it: stead-plane in a target directory, or
        # dist/stead-plane-<target> beside dist/stead-<target>.
        stead_plane="$(dirname "$stead")/stead-plane"
        case "$(basename "$stead")" in
            stead-*) [ -x "$stead_plane" ] || stead_plane="$(dirname "$stead")/stead-plane-$(basename "$stead" | sed 's/^stead-//')" ;;
        esac
        [ -x "$stead_plane" ] || die "$1: no stead-plane beside $given"
        return 0
    fi
    say "cargo build --release --locked -p stead; cargo build --profile tool --locked -p stead-plane"
    cargo build --release --locked -p stead >&2 || die "the release build failed"
    cargo build --profile tool --locked -p stead-plane >&2 || die "the tool's build failed"
    target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
    stead="$target_dir/release/stead"
    stead_plane="$target_dir/tool/stead-plane"
    [ -x "$stead" ] && [ -x "$stead_plane" ] || die "no $stead or $stead_plane after the build"
}

# A TCP port free on loopback when asked.
# A benchmark's registry (Distribution) storing under $1/registry,
# listening on $2 (host:port), probed at $3 (host:port, default $2); its
# pid in REGISTRY_PID, its log $1/registry.log.
start_bench_registry() {
    local dir="$1" addr="$2" probe="${3:-$2}"
    mkdir -p "$dir/registry"
    cat >"$dir/registry.yml" <<YML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/registry
http:
  addr: $addr
YML
    docker-registry serve "$dir/registry.yml" >"$dir/registry.log" 2>&1 &
    REGISTRY_PID=$!
    for _ in $(seq 1 100); do curl -fsS "http://$probe/v2/" >/dev/null 2>&1 && return 0; sleep 0.1; done
    die "the registry did not start: $(tail -3 "$dir/registry.log")"
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Starts nginx with its prefix, config ($1/nginx.conf, written by the
# function $2, which reads $port) and logs in $1, on a free loopback port:
# up once GET http://127.0.0.1:$port$3 answers $4. Another process may take
# the port between its pick and nginx's bind: five ports are tried. Sets
# port and nginx_pid (stop_nginx ends it).
start_nginx() {
    local work="$1" conf="$2" probe="$3" token="$4" up
    nginx_pid=""
    for _ in 1 2 3 4 5; do
        port="$(free_port)"
        "$conf" >"$work/nginx.conf"
        : >"$work/error.log"
        /usr/sbin/nginx -p "$work/" -c "$work/nginx.conf" -e "$work/error.log" </dev/null >/dev/null 2>"$work/nginx.stderr" &
        nginx_pid=$!
        up=""
        for _ in $(seq 1 100); do
            kill -0 "$nginx_pid" 2>/dev/null || break
            if [ "$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=1).read().decode())' "http://127.0.0.1:$port$probe" 2>/dev/null)" = "$token" ]; then
                up=1
                break
            fi
            sleep 0.1
        done
        [ -n "$up" ] && return 0
        kill -0 "$nginx_pid" 2>/dev/null && die "nginx runs but does not answer on 127.0.0.1:$port"
        wait "$nginx_pid" 2>/dev/null || true
        nginx_pid=""
        grep -q 'Address already in use' "$work/error.log" "$work/nginx.stderr" 2>/dev/null && continue
        cat "$work/error.log" "$work/nginx.stderr" >&2 2>/dev/null || true
        die "nginx did not start"
    done
    die "nginx found no free port in 5 tries"
}

# The start of an nginx config for a benchmark's plane, up to inside its
# http block: master and one worker as root (everything in the root-only
# directory $1), $2 connections, JSON typed, temporary files in $1/tmp.
nginx_head() {
    cat <<NGINX
user root root;
worker_processes 1;
daemon off;
pid "$1/nginx.pid";
error_log "$1/error.log" warn;
events { worker_connections $2; }
http {
    types { application/json json; }
    default_type application/octet-stream;
    client_body_temp_path "$1/tmp/body";
    proxy_temp_path "$1/tmp/proxy";
    fastcgi_temp_path "$1/tmp/fastcgi";
    uwsgi_temp_path "$1/tmp/uwsgi";
    scgi_temp_path "$1/tmp/scgi";
NGINX
}

# The location that takes the devices' reports (WebDAV PUT), for a server
# block.
nginx_reports_location() {
    cat <<'NGINX'
        location ~ ^/nodes/[^/]+/status\.json$ {
            dav_methods PUT;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
            limit_except GET PUT { deny all; }
        }
NGINX
}
