#!/usr/bin/env bash
# The test command: on a fresh Debian machine it sets up everything the tests
# need (a Docker Engine, the test images, the Rust components), then runs the
# format check, clippy and every test. Engine tests fail, never skip, when no
# engine answers. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf 'test.sh: %s\n' "$*" >&2; }

scripts/engine.sh
scripts/test-images.sh >/dev/null

if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

say "cargo fmt --check"
cargo fmt --check
say "cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
say "cargo test"
log="$(mktemp /tmp/stead-test.XXXXXX)"
trap 'rm -f "$log"' EXIT
cargo test --locked 2>&1 | tee "$log"
# One closing line for the whole run: the sum of every test binary's result.
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f; exit (f > 0 || p == 0) }' "$log"
