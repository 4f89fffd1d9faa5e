#!/usr/bin/env bash
# The fuzz targets of tests/fuzz.rs run for longer than `cargo test` runs
# them: STEAD_FUZZ_SECS (600) seconds in all, shared among the targets,
# two at a time (STEAD_FUZZ_THREADS). Each target runs batches of cases
# with fresh random seeds until its share is spent; a failing case is
# shrunk, its seed written to tests/fuzz.proptest-regressions (commit it
# with the fix: it is replayed first on every run), and the script fails.
# Extra arguments go to the test binary (a target's name runs only it).
#   STEAD_FUZZ_SECS=3600 scripts/fuzz.sh
#   STEAD_FUZZ_SECS=600 scripts/fuzz.sh plane
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=fuzz.sh
. scripts/lib.sh

SECS="${STEAD_FUZZ_SECS:-600}"
THREADS="${STEAD_FUZZ_THREADS:-2}"
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

cargo test --test fuzz --no-run
targets="$(cargo test -q --test fuzz -- --list "$@" 2>/dev/null | grep -c ': test$' || true)"
[ "$targets" -gt 0 ] || die "no fuzz target matches: $*"
per=$(( SECS * THREADS / targets ))
[ "$per" -gt 0 ] || per=1
say "$targets targets, ${per}s each, $THREADS at a time"
STEAD_FUZZ_SECS="$per" cargo test --test fuzz -- --nocapture --test-threads="$THREADS" "$@"
