#!/usr/bin/env bash
# Benchmarks (not tests): sets up the engine, the test image and Compose
# 1.29 (to compare against), then measures on this machine, in one run:
# change → running against the bare engine's create+start and against
# docker-compose doing the same change; the gap with no running container
# (stead stop-first, start-first, Compose, and the engine's own floor);
# drift made by hand → repaired. Prints medians and the machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench.sh
. scripts/lib.sh
scripts/engine.sh
scripts/test-images.sh >/dev/null
command -v docker-compose >/dev/null 2>&1 || apt_install docker-compose
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), engine $(docker version --format '{{.Server.Version}}'), $(docker-compose version --short 2>/dev/null | sed 's/^/compose /')"
cargo bench --locked --bench latency
