#!/usr/bin/env bash
# Benchmarks (not tests): sets up the engine and test image, then measures,
# on this machine, the latency from a settings change to the new container
# running against the bare engine's create+start. Prints medians and the
# machine they were measured on.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/engine.sh
scripts/test-images.sh >/dev/null
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), engine $(docker version --format '{{.Server.Version}}')"
cargo bench --locked --bench latency
