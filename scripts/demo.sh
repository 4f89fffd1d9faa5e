#!/usr/bin/env bash
# The main job on a fresh Debian machine: start a Docker Engine if none
# answers, build the test image, create the host files the example module
# reads, build stead, and run the agent on examples/ in the foreground.
# Edit examples/intentions.d/sensor.toml or /srv/sensor/* while it runs;
# Ctrl-C stops it. `--once` does one pass and exits.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/engine.sh
scripts/test-images.sh >/dev/null
mkdir -p /srv/sensor
[ -f /srv/sensor/secrets.env ] || printf 'DB_PASSWORD=change-me\n' >/srv/sensor/secrets.env
[ -f /srv/sensor/model.bin ] || printf 'model v1\n' >/srv/sensor/model.bin
cargo build --release --locked
exec target/release/stead run --config examples/stead.toml "$@"
