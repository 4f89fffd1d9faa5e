#!/usr/bin/env bash
# Builds the release binaries dist/stead-<target> (the agent),
# dist/stead-launch-<target> (the launcher, /usr/bin/stead in the .deb) and
# dist/stead-plane-<target> (the operator's tool): static (musl), stripped,
# linked by rust-lld (.cargo/config.toml); the device's two tuned for size
# ([profile.release] in Cargo.toml), the tool for speed ([profile.tool]).
# ring (rustls' cryptography) and the tool's allocator (mimalloc) compile a
# little C and assembly for the target: musl-gcc for x86_64, Debian's
# aarch64 cross gcc for aarch64 (installed when missing). Checks each
# binary is static (no program interpreter) and prints its size.
#
#   scripts/release.sh                      # x86_64 and aarch64
#   scripts/release.sh aarch64-unknown-linux-musl
#
# STEAD_RELEASE_TOOL_TARGETS (space-separated) limits the targets the
# operator's tool is built for (default: every target built; `none`: no
# target). The test command builds it for none: its tests run the tool of
# the workspace's own build.
#
# armv7-unknown-linux-musleabihf is built with `cross` (cross.toml): its
# standard library is not served to this project's build machines.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=release.sh
. scripts/lib.sh

targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)

command -v readelf >/dev/null 2>&1 || apt_install binutils
installed="$(rustup target list --installed 2>/dev/null || true)"
mkdir -p dist
for t in "${targets[@]}"; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t" >&2
    case "$t" in
        x86_64-unknown-linux-musl)
            command -v musl-gcc >/dev/null 2>&1 || apt_install musl-tools
            export CC_x86_64_unknown_linux_musl=musl-gcc ;;
        aarch64-unknown-linux-musl)
            { command -v aarch64-linux-gnu-gcc && [ -e /usr/aarch64-linux-gnu/include/stdint.h ]; } >/dev/null 2>&1 \
                || apt_install gcc-aarch64-linux-gnu libc6-dev-arm64-cross
            export CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc ;;
    esac
done
# Each target's three binaries: the device's agent and its launcher (the
# .deb's), and the operator's tool, stead-plane, static too, for a
# workstation or CI of that architecture. Each is its own crate's: the
# agent links none of the operator's code. The device's are built apart
# from the tool's: one build unifies the features of the dependencies they
# share (the tool's age and indicatif ask for more), which cost the
# device's binary 30 KB it never runs. Every target's device binaries are
# one build: its last step, each binary's link-time optimisation in one
# codegen unit, runs on one core, and the targets' run side by side.
target_args=()
tool_targets=()
for t in "${targets[@]}"; do
    target_args+=(--target "$t")
    if [ -z "${STEAD_RELEASE_TOOL_TARGETS:-}" ] || [[ " $STEAD_RELEASE_TOOL_TARGETS " == *" $t "* ]]; then
        tool_targets+=(--target "$t")
    fi
done
say "building ${targets[*]}: the device's agent and launcher"
cargo build --release --locked "${target_args[@]}" -p stead -p stead-launch >&2
if [ "${#tool_targets[@]}" -gt 0 ]; then
    say "building ${tool_targets[*]//--target /}: the operator's tool (built for speed: the tool profile)"
    cargo build --profile tool --locked "${tool_targets[@]}" -p stead-plane >&2
fi
for t in "${targets[@]}"; do
    bins=(stead stead-launch)
    [[ " ${tool_targets[*]} " != *" $t "* ]] || bins+=(stead-plane)
    for bin in "${bins[@]}"; do
        out="dist/$bin-$t"
        profile=release
        [ "$bin" != stead-plane ] || profile=tool
        cp "target/$t/$profile/$bin" "$out"
        if readelf -l "$out" | grep -q 'program interpreter'; then
            die "$out is not static: it names a program interpreter"
        fi
        if readelf -S "$out" | grep -q '\.symtab'; then
            die "$out is not stripped"
        fi
        printf '%s %s bytes\n' "$out" "$(stat -c %s "$out")"
    done
done
