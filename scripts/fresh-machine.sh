#!/usr/bin/env bash
# The test command on a freshly installed Debian machine, as a new user runs
# it: a Debian image made here with mmdebstrap (Debian's `standard` variant:
# what a fresh install from the installer has, plus git to clone with), a
# clean clone of this repository's HEAD made inside it, then the README's
# command. Nothing else is installed beforehand: whatever the test command
# needs, it must install itself.
#
#   scripts/fresh-machine.sh            # up to the first cargo step
#                                       # (STEAD_TEST_SETUP_ONLY=1): the engine,
#                                       # the test images, the Rust components,
#                                       # every tool, both Podman services
#   scripts/fresh-machine.sh --podman   # that, then the user-network tests
#                                       # of tests/runtime.rs on both Podman
#                                       # services (one test binary built)
#   scripts/fresh-machine.sh --all      # the whole scripts/test.sh
#   scripts/fresh-machine.sh --cargo-test ARGS...
#                                       # the setup, then `cargo test --locked
#                                       # ARGS` (one failure looked at alone)
#
# The container is privileged (it runs its own Docker Engine and Podman, as
# the machine would); /var/lib/docker and /var/lib/containers are volumes of
# their own (an overlay filesystem cannot hold another), removed at the end
# unless STEAD_FRESH_KEEP=1.
#
# Rust: the README names no way to get it and Debian 12's rustc (1.63) is
# older than the crate's rust-version (1.85). STEAD_FRESH_RUST=host (the
# default) lends the container this machine's rustup toolchains and cargo's
# registry cache, read-only under overlays (what the container writes stays
# in their upper layers), and cargo runs offline (a machine whose way out
# is a proxy with a CA of its own cannot fetch crates from a fresh image;
# for the same reason pip, which the test command runs for moto, is given
# the host's PIP_CERT bundle when it has one);
# STEAD_FRESH_RUST=rustup installs rustup inside from sh.rustup.rs
# instead and fetches crates, as a new user would (needs the internet).
#
# Env:
#   STEAD_FRESH_SUITE    the Debian release (default bookworm)
#   STEAD_FRESH_MIRROR   the Debian mirror (default: mmdebstrap's, deb.debian.org)
#   STEAD_FRESH_REBUILD  1: make the image again
#   STEAD_FRESH_RUST     host (default) or rustup
#   STEAD_FRESH_KEEP     1: keep the container's volumes and the clone
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

NAME=fresh-machine.sh
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

MODE=setup
TEST_ARGS=""
case "${1:-}" in
    "") ;;
    --all) MODE=all ;;
    --podman) MODE=podman ;;
    --cargo-test)
        MODE=cargo-test
        shift
        [ "$#" -gt 0 ] || die "--cargo-test needs the arguments of cargo test"
        TEST_ARGS="$(printf '%q ' "$@")"
        ;;
    *) die "usage: scripts/fresh-machine.sh [--podman | --all | --cargo-test ARGS...]" ;;
esac
SUITE="${STEAD_FRESH_SUITE:-bookworm}"
RUST="${STEAD_FRESH_RUST:-host}"
case "$RUST" in host | rustup) ;; *) die "STEAD_FRESH_RUST must be host or rustup, not '$RUST'" ;; esac
IMAGE="stead-fresh/debian:$SUITE"

[ "$(id -u)" -eq 0 ] || die "must run as root (mmdebstrap, a privileged container)"
scripts/engine.sh

# --- the image ------------------------------------------------------------
if [ "${STEAD_FRESH_REBUILD:-}" = 1 ] || ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
    command -v mmdebstrap >/dev/null 2>&1 || apt_install mmdebstrap
    tar="$(mktemp /tmp/stead-fresh.XXXXXX.tar)"
    trap 'rm -f "$tar"' EXIT
    say "making $IMAGE with mmdebstrap (variant standard, plus git)..."
    # shellcheck disable=SC2086 # the mirror is one word or none
    mmdebstrap --quiet --variant=standard --include=git "$SUITE" "$tar" ${STEAD_FRESH_MIRROR:-} >&2
    docker import --change 'CMD ["/bin/bash"]' "$tar" "$IMAGE" >/dev/null
    rm -f "$tar"
fi

# --- the clone's origin: HEAD of this repository ----------------------------
work="$(mktemp -d /tmp/stead-fresh.XXXXXX)"
vols=("stead-fresh-docker-$$" "stead-fresh-containers-$$" "stead-fresh-rustup-$$")
cleanup() {
    if [ "${STEAD_FRESH_KEEP:-}" = 1 ]; then
        say "kept: $work and the volumes ${vols[*]}"
        return
    fi
    rm -rf "$work"
    docker volume rm "${vols[@]}" >/dev/null 2>&1 || true
}
trap cleanup EXIT
git clone --quiet --bare --no-hardlinks . "$work/origin.git"
say "origin: $(git rev-parse --short HEAD) ($(git rev-parse --abbrev-ref HEAD))"

mounts=(-v "$work/origin.git:/mnt/origin.git:ro"
    -v "${vols[0]}:/var/lib/docker" -v "${vols[1]}:/var/lib/containers")
rust_setup=""
if [ "$RUST" = host ]; then
    rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
    cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
    [ -d "$rustup_home/toolchains" ] || die "no rustup toolchains in $rustup_home: use STEAD_FRESH_RUST=rustup"
    registry="${CARGO_HOME:-$HOME/.cargo}/registry"
    [ -d "$registry" ] || die "no cargo registry cache in $registry: use STEAD_FRESH_RUST=rustup"
    mounts+=(-v "$rustup_home:/opt/rustup-host:ro" -v "$cargo_bin:/opt/cargo-host-bin:ro"
        -v "$registry:/opt/registry-host:ro" -v "${vols[2]}:/opt/rustup-rw")
    # The host's toolchains under an overlay; its rustup and cargo proxies
    # after the container's own ~/.cargo/bin (cargo-deb lands there).
    rust_setup='mkdir -p /opt/rustup-rw/upper /opt/rustup-rw/work /root/.rustup
mount -t overlay overlay -o lowerdir=/opt/rustup-host,upperdir=/opt/rustup-rw/upper,workdir=/opt/rustup-rw/work /root/.rustup
mkdir -p /opt/rustup-rw/reg-upper /opt/rustup-rw/reg-work /root/.cargo/registry
mount -t overlay overlay -o lowerdir=/opt/registry-host,upperdir=/opt/rustup-rw/reg-upper,workdir=/opt/rustup-rw/reg-work /root/.cargo/registry
export PATH="/root/.cargo/bin:/opt/cargo-host-bin:$PATH" CARGO_NET_OFFLINE=true'
    # PyPI (the test command's moto venv) as this machine reaches it: through
    # its CA bundle, which trusts a proxy's CA where the way out has one.
    if [ -n "${PIP_CERT:-}" ] && [ -r "$PIP_CERT" ]; then
        mounts+=(-v "$PIP_CERT:/opt/host-ca.crt:ro")
        rust_setup+='
export PIP_CERT=/opt/host-ca.crt'
    fi
else
    rust_setup='apt-get update -qq && apt-get install -y -qq --no-install-recommends curl ca-certificates >/dev/null
curl --proto =https --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
export PATH="/root/.cargo/bin:$PATH"'
fi

if [ "$MODE" = all ]; then
    run='scripts/test.sh'
else
    # What scripts/test.sh installs and starts before its first cargo step.
    run='STEAD_TEST_SETUP_ONLY=1 scripts/test.sh
podman --remote --url unix:///run/stead-podman/podman.sock info --format "podman: network backend {{.Host.NetworkBackend}}"
cargo --version
echo "fresh-machine: setup stages passed"'
    if [ "$MODE" = podman ]; then
        run+='
STEAD_TEST_ENGINE_SOCKET=/run/stead-podman/podman.sock cargo test --locked --test runtime -- \
    named_volumes_are_kept_and_user_networks_resolve_module_names_and_go_when_unused \
    a_user_network_that_cannot_resolve_names_is_refused_naming_the_backend
STEAD_TEST_ENGINE_SOCKET=/run/stead-podman-cni/podman.sock cargo test --locked --test runtime -- \
    --exact a_user_network_that_cannot_resolve_names_is_refused_naming_the_backend
echo "fresh-machine: the user-network tests passed on both Podman services"'
    fi
    if [ "$MODE" = cargo-test ]; then
        run+="
cargo test --locked $TEST_ARGS"
    fi
fi

# --privileged, unless the engine cannot grant every capability (a machine
# that is itself a container): then each one it has, without seccomp and
# AppArmor, and the cgroup hierarchies remounted read-write inside.
command -v capsh >/dev/null 2>&1 || apt_install libcap2-bin
if docker run --rm --privileged "$IMAGE" true >/dev/null 2>&1; then
    priv=(--privileged)
    cgroups=""
else
    have="$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)"
    # Every device, as --privileged allows: a container's devices cgroup
    # bounds its children's, so the engine inside could not grant a
    # module's device_cgroup_rules otherwise.
    priv=(--cap-add ALL --security-opt seccomp=unconfined --security-opt apparmor=unconfined
        --security-opt systempaths=unconfined --device-cgroup-rule 'a *:* rwm')
    # The capabilities this machine's bounding set lacks (capsh's numbering).
    for n in $(seq 0 40); do
        if ((((0x$have >> n) & 1) == 0)); then
            c="$(capsh --decode="$(printf '%x' $((1 << n)))" 2>/dev/null | sed 's/.*=cap_//')"
            [ -n "$c" ] && priv+=(--cap-drop "${c^^}")
        fi
    done
    priv+=(--cgroupns private)
    # Each cgroup (v1) hierarchy mounted again read-write, in the
    # container's own cgroup namespace.
    cgroups='mount -o remount,rw /sys/fs/cgroup
awk '"'"'$3 == "cgroup" { print $2, $4 }'"'"' /proc/mounts | while read -r m o; do
    umount "$m" && mount -t cgroup -o "${o/ro,/rw,}" cgroup "$m"
done'
    say "this machine cannot grant --privileged; using ${priv[*]}"
fi

say "running ${MODE} in a fresh $SUITE container"
docker run --rm "${priv[@]}" --hostname fresh "${mounts[@]}" "$IMAGE" bash -euo pipefail -c "
$cgroups
$rust_setup
git clone --quiet /mnt/origin.git /src
cd /src
$run"
