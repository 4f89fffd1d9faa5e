#!/usr/bin/env bash
# Benchmarks (not tests): sets up the engine, the test image and Compose
# 1.29 (to compare against), then measures on this machine, in one run:
# change → running against the bare engine's create+start and against
# docker-compose doing the same change; the gap with no running container
# (stead stop-first, start-first, Compose, and the engine's own floor);
# drift made by hand → repaired. Prints medians and the machine. The engine
# is one of the script's own, holding only the test images (below).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench.sh
. scripts/lib.sh
scripts/engine.sh
scripts/test-images.sh >/dev/null
command -v docker-compose >/dev/null 2>&1 || apt_install docker-compose
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), engine $(docker version --format '{{.Server.Version}}'), $(docker-compose version --short 2>/dev/null | sed 's/^/compose /')"
cargo bench --locked --bench latency --no-run

# Measured against an engine of the script's own (its own data root, in a
# network namespace of its own) holding only the test image, as a device's
# holds a few: a test machine's engine may keep hundreds of images, and
# every pass lists them (STEAD_BENCH_SHARED_ENGINE=1 measures against the
# machine's engine instead). DOCKER_HOST names it to the bench, `docker`
# and Compose alike.
if [ "${STEAD_BENCH_SHARED_ENGINE:-}" != 1 ]; then
    work="$(mktemp -d /tmp/stead-bench.XXXXXX)"
    ns="stead-bench-$$"
    trap 'own_engine_down "$work" "$ns"' EXIT
    own_engine_up "$work" "$ns" stead-test/busybox:1 stead-test/busybox:2
    export DOCKER_HOST="unix://$work/docker.sock"
    echo "engine: the script's own, holding $(docker images -q | wc -l) images"
fi
cargo bench --locked --bench latency
