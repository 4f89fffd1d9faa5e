#!/usr/bin/env bash
# Make sure Podman's Docker-compatible service answers on a socket of its own
# and has the test images (idempotent). The test command runs the engine
# suites against it (STEAD_TEST_ENGINE_SOCKET); prints the socket's path.
#
# - Installs Debian's podman (and catatonit, Podman's init for `init = true`)
#   when missing; no service is started by the packages.
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
set -euo pipefail

NAME=podman.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SOCKET="${STEAD_PODMAN_SOCKET:-/run/stead-podman/podman.sock}"
TIMEOUT="${STEAD_PODMAN_TIMEOUT:-60}"
DIR="$(dirname "$SOCKET")"
CONF="$DIR/containers.conf"
LOG="$DIR/service.log"

up() { DOCKER_HOST="unix://$SOCKET" docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

[ "$(id -u)" -eq 0 ] || die "must run as root to install/start podman"

if ! command -v podman >/dev/null 2>&1 || [ ! -x /usr/libexec/podman/catatonit ]; then
    say "installing podman (apt-get)..."
    apt_install_no_start podman catatonit
    if command -v systemctl >/dev/null 2>&1; then
        systemctl disable --now podman.socket podman.service >/dev/null 2>&1 || true
    fi
fi

mkdir -p "$DIR"
printf '[containers]\ndefault_ulimits = []\n\n[engine]\nevents_logger = "file"\nevents_logfile_max_size = "64m"\n' >"$CONF"
export CONTAINERS_CONF="$CONF"

if ! up; then
    rm -f "$SOCKET"
    say "starting podman system service on $SOCKET (log: $LOG)"
    setsid nohup podman system service --time=0 "unix://$SOCKET" >>"$LOG" 2>&1 </dev/null &
    for _ in $(seq 1 $((TIMEOUT * 4))); do
        up && break
        sleep 0.25
    done
    up || { tail -n 20 "$LOG" >&2; die "podman's service did not answer on $SOCKET within ${TIMEOUT}s"; }
fi

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
