#!/usr/bin/env bash
# The device lab's long run: every test of tests/lab.rs, the power-cut test
# with 20 cuts (STEAD_LAB_CUTS; the test command runs 1). Needs the .deb
# (scripts/release.sh x86_64-unknown-linux-musl && scripts/package.sh); sets
# up the lab's tools and image as scripts/test.sh does. About a minute per
# cut under TCG; 31 minutes in all here (2026-12-02), with nothing else
# running: a TCG machine starved of CPU stalls.
#
#   scripts/lab/all.sh [CUTS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
NAME=lab/all.sh
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source=scripts/lab/lib.sh
. scripts/lab/lib.sh

cuts="${1:-20}"
[[ "$cuts" =~ ^[1-9][0-9]*$ ]] || die "usage: scripts/lab/all.sh [CUTS] (a whole number, at least 1; not '$cuts')"
lab_install_tools
scripts/lab/image.sh >/dev/null
say "tests/lab.rs with $cuts power cuts"
STEAD_LAB_CUTS="$cuts" cargo test --locked --test lab -- --include-ignored --nocapture
