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
# What Debian asks of a package beside the binaries, made here from the
# tree so it never drifts (target/debian/, Cargo.toml's assets name it):
# - the manual page, from the command line's own help (scripts/manpage.sh;
#   the x86_64 binary prints it for every target, the text is the same);
# - the Debian changelog: this version, pointing to the upstream one
#   (CHANGELOG.md, shipped as changelog.gz);
# - the copyright file: stead's own, and every crate linked into the
#   static binary with the license its manifest states.
mkdir -p target/debian
help_bin="dist/stead-x86_64-unknown-linux-musl"
[ -x "$help_bin" ] || help_bin="target/$target/release/stead"
scripts/manpage.sh "$help_bin" "$version" | gzip -9n >target/debian/stead.8.gz
gzip -9n <CHANGELOG.md >target/debian/changelog.gz
maintainer="$(sed -n 's/^maintainer = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
when="$(git log -1 --format=%cD 2>/dev/null || date -R)"
cat >target/debian/changelog <<CHANGES
stead ($deb_version) stable; urgency=medium

  * stead $version: what it brought is in /usr/share/doc/stead/changelog.gz.

 -- $maintainer  $when
CHANGES
year="$(git log -1 --format=%cd --date=format:%Y 2>/dev/null || date +%Y)"
{
    cat <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: stead
Upstream-Contact: $maintainer

Files: *
Copyright: $year stead developers
License: Apache-2.0
Comment: usr/lib/stead/stead and usr/bin/stead are statically linked with
 the Rust crates below (each as its version names it, under the license its
 Cargo manifest states), and with the Rust standard library (MIT OR
 Apache-2.0) and musl libc (MIT).
 .
COPY
    cargo tree --locked -e normal,no-proc-macro --target "$target" --prefix none \
        -f ' {p}: {l}' -p stead 2>/dev/null | sed 's/ (\*)$//' | grep -v '^ stead v' | sort -u
    cat <<'COPY'

License: Apache-2.0
 On Debian systems, the complete text of the Apache License, Version 2.0,
 can be found in /usr/share/common-licenses/Apache-2.0.
COPY
} >target/debian/copyright
cargo deb --no-build --no-strip --target "$target" --deb-version "$deb_version" --output dist/ >&2
# cargo-deb writes an empty Depends: field when there is nothing to depend
# on (a static binary); Debian's tools call that malformed. The field goes.
deb="dist/stead_${deb_version}_$(dpkg --print-architecture 2>/dev/null || echo amd64).deb"
case "$target" in aarch64-*) deb="dist/stead_${deb_version}_arm64.deb" ;; x86_64-*) deb="dist/stead_${deb_version}_amd64.deb" ;; esac
if dpkg-deb -f "$deb" Depends 2>/dev/null | grep -q . || ! dpkg-deb -I "$deb" control | grep -q '^Depends: *$'; then
    :
else
    unpacked="$(mktemp -d)"
    dpkg-deb -R "$deb" "$unpacked/pkg"
    sed -i '/^Depends: *$/d' "$unpacked/pkg/DEBIAN/control"
    dpkg-deb --root-owner-group -Zxz --build "$unpacked/pkg" "$deb" >/dev/null
    rm -rf "$unpacked"
fi
ls -1 dist/*.deb
