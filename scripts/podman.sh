#!/usr/bin/env bash
# Make sure Podman's Docker-compatible service answers on a socket of its own
# and has the test images (idempotent). The test command runs the engine
# suites against it (STEAD_TEST_ENGINE_SOCKET); prints the socket's path.
#
# - Installs Debian's podman (and catatonit, Podman's init for `init = true`)
#   when missing, and netavark with aardvark-dns: installed without
#   recommends, Podman 4.3 would use CNI without a DNS plugin and a user
#   network would not resolve module names. No service is started by the
#   packages.
# - The service's containers.conf names `network_backend = "netavark"`: a
#   machine where Podman ran before with CNI (it picks CNI by itself where
#   CNI networks or containers exist) gets netavark for this service without
#   a `podman system reset`; its CNI networks stay, unseen by this service.
#   A service already answering on the socket (an earlier run of this
#   script) is stopped and started again: each run gets a fresh one.
# - Starts `podman system service --time=0` detached on the socket, with a
#   containers.conf of its own: `default_ulimits = []`, as Podman's default
#   open-files limit for containers is above the hard limit of a machine like
#   this one (a container would not start); and a larger events log, as
#   Podman's file events logger ends every event stream when its file is
#   rotated (1m by default): the agent follows again, and the tests that
#   count its inspects would count those of each new stream.
# - Loads stead-test/busybox:{1,2} from the Docker Engine (scripts/test-images.sh
#   builds them there) unless Podman has the same image IDs.
#
# Env:
#   STEAD_PODMAN_SOCKET   the socket (default /run/stead-podman/podman.sock)
#   STEAD_PODMAN_TIMEOUT  seconds to wait for the service (default 60)
#   STEAD_PODMAN_NETWORK_BACKEND  netavark (default), or cni: Podman's CNI,
#                         which without the dnsname plugin (not installed
#                         here) resolves no names on user networks; the test
#                         command runs one test against such a service, on
#                         a socket of its own
set -euo pipefail

NAME=podman.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SOCKET="${STEAD_PODMAN_SOCKET:-/run/stead-podman/podman.sock}"
TIMEOUT="${STEAD_PODMAN_TIMEOUT:-60}"
BACKEND="${STEAD_PODMAN_NETWORK_BACKEND:-netavark}"
case "$BACKEND" in netavark | cni) ;; *) die "STEAD_PODMAN_NETWORK_BACKEND must be netavark or cni, not '$BACKEND'" ;; esac
DIR="$(dirname "$SOCKET")"
CONF="$DIR/containers.conf"
LOG="$DIR/service.log"
PIDFILE="$DIR/service.pid"

up() { DOCKER_HOST="unix://$SOCKET" docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
# The network backend of the service answering on the socket (libpod's info).
backend() { podman --remote --url "unix://$SOCKET" info --format '{{.Host.NetworkBackend}}' 2>/dev/null || true; }
# The pid of the service on the socket: the one this script started (its pid
# file), else the process running exactly the command this script starts (an
# earlier version of it kept no pid file).
service_pid() {
    if [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
        cat "$PIDFILE"
        return
    fi
    local want c p
    want="$(printf 'podman\0system\0service\0--time=0\0unix://%s\0' "$SOCKET" | od -An -tx1 | tr -d ' \n')"
    for c in /proc/[0-9]*/cmdline; do
        p="${c#/proc/}"
        p="${p%/cmdline}"
        [ "$(od -An -tx1 "$c" 2>/dev/null | tr -d ' \n')" = "$want" ] && { echo "$p"; return; }
    done
}

[ "$(id -u)" -eq 0 ] || die "must run as root to install/start podman"

if ! command -v podman >/dev/null 2>&1 || [ ! -x /usr/libexec/podman/catatonit ] \
    || [ ! -x /usr/lib/podman/netavark ] || [ ! -x /usr/lib/podman/aardvark-dns ]; then
    say "installing podman, netavark and aardvark-dns (apt-get)..."
    apt_install_no_start podman catatonit netavark aardvark-dns
    if command -v systemctl >/dev/null 2>&1; then
        systemctl disable --now podman.socket podman.service >/dev/null 2>&1 || true
    fi
fi

# CNI's own plugins, for a service with that backend: netavark stands in for
# them in Debian's dependencies, so a machine with netavark may have none
# (a network is then made and not found).
if [ "$BACKEND" = cni ] && [ ! -x /usr/lib/cni/bridge ]; then
    say "installing containernetworking-plugins (apt-get)..."
    apt_install_no_start containernetworking-plugins
fi

mkdir -p "$DIR"
printf '[containers]\ndefault_ulimits = []\n\n[engine]\nevents_logger = "file"\nevents_logfile_max_size = "64m"\n\n[network]\nnetwork_backend = "%s"\n' "$BACKEND" >"$CONF"
export CONTAINERS_CONF="$CONF"

# A service already answering (an earlier run's) is stopped and started
# again: each run gets a fresh one. One that had served for hours failed
# the Podman suites (a restart counted twice, a create `docker events` did
# not show) where a fresh one passed them.
if up; then
    pid="$(service_pid)"
    [ -n "$pid" ] || die "a service answers on $SOCKET (network backend '$(backend)') and its process is not found: stop it"
    say "the service on $SOCKET (pid $pid, network backend '$(backend)'): starting a fresh one with $BACKEND"
    kill "$pid"
    for _ in $(seq 1 $((TIMEOUT * 4))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
    done
    ! kill -0 "$pid" 2>/dev/null || die "the service on $SOCKET (pid $pid) did not stop"
fi

if ! up; then
    rm -f "$SOCKET"
    say "starting podman system service on $SOCKET (log: $LOG)"
    # From /: the service's conmon processes inherit its working directory,
    # and one that is removed later (a checkout, a temp dir) fails every
    # container start ("Failed to get working directory").
    env -C / setsid nohup podman system service --time=0 "unix://$SOCKET" >>"$LOG" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    for _ in $(seq 1 $((TIMEOUT * 4))); do
        up && break
        sleep 0.25
    done
    up || { tail -n 20 "$LOG" >&2; die "podman's service did not answer on $SOCKET within ${TIMEOUT}s"; }
fi
[ "$(backend)" = "$BACKEND" ] || die "podman's service on $SOCKET uses the network backend '$(backend)', not $BACKEND (see $LOG)"

# The test images, by ID: Podman names them localhost/stead-test/busybox:N.
need=()
for v in 1 2; do
    want="$(docker image inspect --format '{{.Id}}' "stead-test/busybox:$v")" \
        || die "stead-test/busybox:$v missing from the Docker Engine: run scripts/test-images.sh"
    have="$(podman image inspect --format '{{.Id}}' "localhost/stead-test/busybox:$v" 2>/dev/null || true)"
    [ "sha256:${have#sha256:}" = "$want" ] || need+=("stead-test/busybox:$v")
done
if [ "${#need[@]}" -gt 0 ]; then
    say "loading ${need[*]} into podman"
    docker save "${need[@]}" | podman load >/dev/null
fi

say "podman $(DOCKER_HOST="unix://$SOCKET" docker version --format '{{.Server.Version}}') answers on $SOCKET"
printf '%s\n' "$SOCKET"
