#!/usr/bin/env bash
# Builds scripts/cosign-ref (the reference cosign signer/verifier the tests
# cross-check the agent with; see scripts/cosign-ref/README.md) once into a
# cache outside the checkout, and prints the binary's path.
#
#   bin="$(scripts/cosign-ref.sh)"     # then: "$bin" generate|sign|verify …
#
# The cache is keyed by the sha256 of its Cargo.lock, Cargo.toml and
# src/main.rs (12 hex): $STEAD_TEST_CACHE/cosign-ref-<key>/cosign-ref. The
# build's target dir, $STEAD_TEST_CACHE/cosign-ref-target, is shared by all
# keys, so a change to main.rs rebuilds only the tool, not its crates. A
# second call with nothing changed only hashes three files. Other keys'
# binaries are left alone (another checkout may use them).
# The first build (release, --locked, crates from crates.io) takes minutes.
#
# Env:
#   STEAD_TEST_CACHE   cache root (default /var/cache/stead-test)
set -euo pipefail

NAME=cosign-ref.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/cosign-ref" && pwd)"
cache_root="${STEAD_TEST_CACHE:-/var/cache/stead-test}"
key="$(cat "$src/Cargo.lock" "$src/Cargo.toml" "$src/src/main.rs" | sha256sum | cut -c1-12)"
dir="$cache_root/cosign-ref-$key"
bin="$dir/cosign-ref"

if [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi

command -v cargo >/dev/null 2>&1 || die "cargo is needed to build $src"
mkdir -p "$dir"
# One build at a time (tests may call this at once, and the target dir is
# shared); the second waits, then finds the binary.
exec 9>"$cache_root/cosign-ref.lock"
flock 9
if [ ! -x "$bin" ]; then
    say "building cosign-ref into $dir (first time: minutes)"
    log="$dir/build.log"
    start=$SECONDS
    if ! CARGO_INCREMENTAL=0 CARGO_TARGET_DIR="$cache_root/cosign-ref-target" \
        cargo build --release --locked --manifest-path "$src/Cargo.toml" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        die "cargo build of $src failed (log: $log)"
    fi
    cp "$cache_root/cosign-ref-target/release/cosign-ref" "$bin.tmp"
    mv "$bin.tmp" "$bin"
    say "built $bin in $((SECONDS - start)) s"
fi
echo "$bin"
