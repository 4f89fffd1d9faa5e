#!/usr/bin/env bash
# Builds the release binaries dist/stead-<target>: static (musl), stripped,
# tuned for size (see [profile.release] in Cargo.toml), linked by rust-lld
# (.cargo/config.toml): no target C toolchain needed. Checks each is static
# (no program interpreter) and prints its size.
#
#   scripts/release.sh                      # x86_64 and aarch64
#   scripts/release.sh aarch64-unknown-linux-musl
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
    say "building $t"
    cargo build --release --locked --target "$t" >&2
    cp "target/$t/release/stead" "dist/stead-$t"
    if readelf -l "dist/stead-$t" | grep -q 'program interpreter'; then
        die "dist/stead-$t is not static: it names a program interpreter"
    fi
    if readelf -S "dist/stead-$t" | grep -q '\.symtab'; then
        die "dist/stead-$t is not stripped"
    fi
    printf '%s %s bytes\n' "dist/stead-$t" "$(stat -c %s "dist/stead-$t")"
done
