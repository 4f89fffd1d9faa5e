#!/usr/bin/env bash
# Builds the Debian package dist/stead_<version>-1_<arch>.deb with cargo-deb
# from the static musl binary (scripts/release.sh builds it), the systemd
# unit, the default config and the docs ([package.metadata.deb] in
# Cargo.toml). Installs cargo-deb from crates.io when it is missing.
#
#   scripts/package.sh                               # x86_64 (amd64)
#   scripts/package.sh aarch64-unknown-linux-musl    # arm64
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=package.sh
. scripts/lib.sh

target="${1:-x86_64-unknown-linux-musl}"
command -v dpkg-deb >/dev/null 2>&1 || apt_install dpkg
if ! cargo deb --version >/dev/null 2>&1; then
    say "installing cargo-deb (cargo install; a few minutes, once)"
    cargo install cargo-deb --locked --version '^3' >&2
fi
[ -x "dist/stead-$target" ] || scripts/release.sh "$target" >&2
mkdir -p dist
# The package's version, shipped as /usr/lib/stead/package-version: the
# launcher lets a package of another version take over from a version stead
# updated itself to (docs/operations.md, "The launcher").
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
[ -n "$version" ] || die "no version in Cargo.toml"
deb_version="$version-1"
printf '%s\n' "$deb_version" >"target/$target/release/package-version"
cargo deb --no-build --no-strip --target "$target" --deb-version "$deb_version" --output dist/ >&2
ls -1 dist/*.deb
