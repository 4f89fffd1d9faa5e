#!/usr/bin/env bash
# The test command: on a fresh Debian machine it sets up everything the tests
# need (a Docker Engine, the test images, the Rust components), then runs the
# format check, clippy and every test. Engine tests fail, never skip, when no
# engine answers. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

NAME=test.sh
. scripts/lib.sh
# Each stage says when it began in the run (the budget is 30 minutes).
stage() { say "$* (at $((SECONDS / 60))m$((SECONDS % 60))s)"; }

scripts/engine.sh
scripts/test-images.sh >/dev/null

if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

# The tools the tests use, installed before the first cargo step.
# cargo links with cc, and build scripts (ring's) compile C: a fresh Debian
# has no compiler.
command -v cc >/dev/null 2>&1 || apt_install gcc libc6-dev
# The release artefacts the dist tests check: static binaries for x86_64 and
# aarch64 (run under qemu against the engine) and the .deb.
command -v qemu-aarch64-static >/dev/null 2>&1 || apt_install qemu-user-static
command -v readelf >/dev/null 2>&1 || apt_install binutils
command -v systemd-analyze >/dev/null 2>&1 || apt_install systemd
# The .deb is held to Debian's checks (tests/dist.rs).
command -v lintian >/dev/null 2>&1 || apt_install lintian
# The registry tests: a real OCI registry (Distribution) on loopback, one
# plain and one with TLS from a test CA and htpasswd (bcrypt) auth.
command -v docker-registry >/dev/null 2>&1 || apt_install docker-registry
command -v htpasswd >/dev/null 2>&1 || apt_install apache2-utils
command -v openssl >/dev/null 2>&1 || apt_install openssl
# The central-plane tests: nginx on loopback (static files with ETags, and
# DAV PUT for reports), started by each test (tests/common/plane.rs); the
# system service the package brings is neither started nor enabled.
# libfaketime moves an agent's wall clock to 1970 or 2100.
if [ ! -x /usr/sbin/nginx ]; then
    apt_install_no_start nginx
    if command -v systemctl >/dev/null 2>&1; then systemctl disable nginx.service >/dev/null 2>&1 || true; fi
fi
command -v faketime >/dev/null 2>&1 || apt_install faketime
# tests/chunks.rs holds the chunk indexes and stores stead writes and reads
# to casync's own (index bytes, `casync extract` from the store over HTTP).
command -v casync >/dev/null 2>&1 || apt_install casync
# tests/nudge.rs: Debian's mosquitto as the operator's MQTT broker (each
# test starts its own on loopback), mosquitto_pub as its publisher.
command -v mosquitto >/dev/null 2>&1 || apt_install_no_start mosquitto
command -v mosquitto_pub >/dev/null 2>&1 || apt_install mosquitto-clients
# tests/import.rs runs a Compose file with docker-compose beside the agent.
command -v docker-compose >/dev/null 2>&1 || apt_install docker-compose
# venv NAME SPEC: a venv under /var/cache/stead-test/NAME with pip's SPEC
# (name==version) installed, kept between runs and made again when SPEC
# changes; prints its path.
venv() {
    local dir="/var/cache/stead-test/$1" spec="$2"
    if [ "$(cat "$dir/.stead-version" 2>/dev/null)" != "$spec" ]; then
        /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || apt_install python3-venv >&2
        rm -rf "$dir"
        /usr/bin/python3 -m venv "$dir"
        "$dir/bin/pip" install -q --disable-pip-version-check "$spec" >&2 \
            || die "pip install $spec failed"
        echo "$spec" >"$dir/.stead-version"
    fi
    echo "$dir"
}
# tests/plane_s3.rs: an S3-compatible server with signatures checked
# (moto's, from PyPI) in a venv kept between runs, keyed by its version.
moto_venv="$(venv moto "moto[server]==5.2.5")"
export STEAD_TEST_MOTO="$moto_venv"
# tests/signed.rs: image signatures made and checked by the Sigstore
# project's own implementation (scripts/cosign-ref, built once into a cache:
# Debian's skopeo and podman have sigstore disabled), and a key in the
# format skopeo reads made by scripts/sigstore-key.py.
/usr/bin/python3 -c 'import cryptography, nacl' 2>/dev/null || apt_install python3-cryptography python3-nacl
# In-toto attestations made by securesystemslib's DSSE (scripts/attest.py).
sslib_venv="$(venv sslib "securesystemslib[crypto]==1.6.0")"
export STEAD_TEST_SSLIB="$sslib_venv"
# tests/mdns.rs: python-zeroconf, a reference mDNS/DNS-SD implementation,
# reads what the agent answers and announces a listener it must find, in
# network namespaces joined by a veth pair (iproute2's `ip`).
command -v ip >/dev/null 2>&1 || apt_install iproute2
zeroconf_venv="$(venv zeroconf "zeroconf==0.154.0")"
export STEAD_TEST_ZEROCONF="$zeroconf_venv"
STEAD_TEST_COSIGN_REF="$(scripts/cosign-ref.sh)" || die "scripts/cosign-ref.sh failed"
export STEAD_TEST_COSIGN_REF
# Podman's Docker-compatible service, for the engine suites run again on it
# (netavark with aardvark-dns), and one whose user networks resolve no names
# (CNI without the dnsname plugin), each on a socket of its own.
podman_socket="$(scripts/podman.sh)"
podman_cni="$(STEAD_PODMAN_SOCKET=/run/stead-podman-cni/podman.sock STEAD_PODMAN_NETWORK_BACKEND=cni scripts/podman.sh)"
# What earlier runs left in the engines: the images the tests' registries
# (on loopback, gone with each test) named, and untagged ones. A machine
# that runs the tests day after day held 2,000 of them, which every pass
# and every pull looked through; a device holds tens. Images a container
# runs keep their ID (a forced removal only untags them).
for host in unix:///var/run/docker.sock "unix://$podman_socket" "unix://$podman_cni"; do
    docker --host "$host" images --format '{{.ID}} {{.Repository}}' 2>/dev/null \
        | awk '$2 ~ /^(127\.0\.0\.1|localhost):[0-9]+\// {print $1}' | sort -u \
        | xargs -r docker --host "$host" rmi -f >/dev/null 2>&1 || true
    docker --host "$host" image prune -f >/dev/null 2>&1 || true
done
# The device lab (tests/lab.rs, its VMs under QEMU) is not run here: it is
# scripts/lab/all.sh's, which sets up its own tools and image. Under QEMU's
# software CPU it took 7 of this run's minutes, which the 30-minute budget
# no longer held.
# STEAD_TEST_SETUP_ONLY=1: stop here, everything installed
# (scripts/fresh-machine.sh checks a fresh machine up to this point).
if [ "${STEAD_TEST_SETUP_ONLY:-}" = 1 ]; then
    say "set up; stopping before the first cargo step (STEAD_TEST_SETUP_ONLY=1)"
    exit 0
fi

stage "cargo fmt --check"
cargo fmt --check
stage "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
# The release binaries and the .deb.
stage "release binaries and the .deb"
# The device's binaries for both targets; the operator's tool for none:
# the tests run the workspace's own build of it, and its release build
# (four of this run's minutes for x86_64 alone, built for speed) is checked
# static and stripped by scripts/release.sh itself when a release is built.
STEAD_RELEASE_TOOL_TARGETS=none scripts/release.sh
scripts/package.sh

stage "cargo test: building the tests"
log="$(mktemp /tmp/stead-test.XXXXXX)"
beside="$(mktemp -d /tmp/stead-test-beside.XXXXXX)"
trap 'rm -f "$log" "${doc_log:-}"; rm -rf "$beside"' EXIT
cargo test --workspace --locked --no-run
# The binaries of the other packages the tests run (the launcher, the
# operator's tool): built here, so the tests' own build of them
# (tests/common/bins.rs) finds them fresh and two passes never build at once.
cargo build --workspace --locked --bins
# The doc tests, alone and before the streams: a `--doc` build's
# dependencies are built for its own selection of targets, and run beside
# another cargo in the same target directory one of them was missing when
# rustdoc asked for it (2026-12-07: "extern location for ring does not
# exist").
doc_log="$(mktemp /tmp/stead-test-doc.XXXXXX)"
doc_failed=0
cargo test --workspace --locked --no-fail-fast --doc >"$doc_log" 2>&1 || doc_failed=1
# Beside the Docker Engine's pass, each into a log and an exit code of its
# own (said once the main pass is done): the Podman suites, and beside
# them the other two one after another. They mostly wait, on engines and
# servers of their own (2 cores).
# - The engine suites again, against Podman's Docker-compatible service:
#   the differences the engine layer handles, and the tests that name the
#   others (docs/operations.md, "On Podman").
# - A Podman whose user networks cannot resolve names (CNI without the
#   dnsname plugin, as Debian's podman installed without recommends had
#   it): the agent refuses a module on one, saying what to install.
# - A small simulated fleet (the shipped x86_64 binary, 20 agents against
#   nginx and a stand-in engine, a few seconds of CPU in all): a staged
#   rollout taken on each device's turn, a failing revision halted by the
#   watcher, a revert; a property that does not hold fails.
beside_run() {
    local name="$1" rc=0
    shift
    "$@" >"$beside/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$beside/$name.rc"
}
# What one of them said, into the run's log; its failure counted as `what`.
beside_said() {
    tee -a "$log" <"$beside/$1.log"
    [ "$(cat "$beside/$1.rc" 2>/dev/null)" = 0 ] || failed+=("$2")
}
# The workspace's tests on the Docker Engine in two streams side by side,
# as they mostly wait (on the engine, servers, a container's settling):
# the longest test files of the root package (about half the time) in one,
# every crate's unit and doc tests and every other test file in the other
# (listed from tests/ and crates/*/tests/, so a new file runs there by
# itself).
heavy=(plane reload fetch runtime disk systemd hardening)
heavy_args=()
for n in "${heavy[@]}"; do
    [ -f "tests/$n.rs" ] || die "scripts/test.sh names tests/$n.rs, which is not there"
    heavy_args+=(--test "$n")
done
rest_args=()
for f in tests/*.rs crates/*/tests/*.rs; do
    n="$(basename "$f" .rs)"
    [[ " ${heavy[*]} " == *" $n "* ]] || rest_args+=(--test "$n")
done
stage "cargo test in two streams, and beside them the engine suites on Podman ($podman_socket), the test on Podman with CNI ($podman_cni) and the simulated fleet"
beside_run heavy cargo test --locked --no-fail-fast -p stead "${heavy_args[@]}" \
    -- --include-ignored --skip lab_ &
heavy_pid=$!
beside_run podman env STEAD_TEST_ENGINE_SOCKET="$podman_socket" cargo test --locked --no-fail-fast \
    --test engine --test runtime --test hardening --test waiting --test api --test cli --test images --test signed --test exposure --test fetch --test chunks --test peers \
    -- --include-ignored &
podman_pid=$!
(
    beside_run cni env STEAD_TEST_ENGINE_SOCKET="$podman_cni" cargo test --locked --no-fail-fast --test runtime \
        a_user_network_that_cannot_resolve_names_is_refused_naming_the_backend -- --exact
    beside_run fleet env STEAD_SIM_BIN=dist/stead-x86_64-unknown-linux-musl STEAD_PLANE_BIN=target/debug/stead-plane STEAD_SIM_DEVICES=20 STEAD_SIM_WINDOW=20 \
        STEAD_SIM_POLL=2 STEAD_SIM_QUIET=10 STEAD_SIM_CHECK=1 STEAD_SIM_NUDGE=1 \
        STEAD_SIM_PHASES=classes,rollout,quiet,nudge scripts/fleet-sim.sh
) &
beside_pid=$!
# Tests named lab_ (the device lab's VMs) are scripts/lab/all.sh's.
failed=()
tee "$log" <"$doc_log"
[ "$doc_failed" = 0 ] || failed+=("cargo test --doc")
cargo test --workspace --locked --no-fail-fast --lib --bins "${rest_args[@]}" \
    -- --include-ignored --skip lab_ 2>&1 | tee -a "$log" || failed+=("cargo test")
wait "$heavy_pid" || true
stage "cargo test, the longest test files: what they said"
beside_said heavy "cargo test (${heavy[*]})"
wait "$podman_pid" || true
wait "$beside_pid" || true
stage "the engine suites on Podman: what they said"
beside_said podman "the engine suites on Podman"
stage "cargo test (a user network without DNS, on Podman with CNI): what it said"
beside_said cni "the test on Podman with CNI"
stage "a simulated fleet of 20 (scripts/fleet-sim.sh, checked): what it said"
beside_said fleet "the simulated fleet"
stage "done"
[ "${#failed[@]}" -eq 0 ] || say "failed: $(IFS=,; echo "${failed[*]}")"
# One closing line for the whole run: the sum of every test binary's result.
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f; exit (f > 0 || p == 0) }' "$log"
[ "${#failed[@]}" -eq 0 ]
