#!/usr/bin/env bash
# Build the test images stead-test/busybox:1 and :2 without any registry,
# from Debian's static busybox (idempotent; fast when they already exist).
#
# Each image: /bin/busybox + a symlink per applet, /etc (passwd, group),
# /tmp, and /variant containing 1 or 2. CMD ["sh"].
#
# Usage: scripts/test-images.sh [--verify]
#   --verify  also run a container from each image, and check that a
#             container publishing 127.0.0.1:18999->80 (busybox httpd)
#             starts and answers.
set -euo pipefail

NAME=test-images.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPO=stead-test/busybox
VARIANTS=(1 2)
LABEL=stead.test.variant
VERIFY=0
case "${1:-}" in
    "") ;;
    --verify) VERIFY=1 ;;
    *) die "usage: $0 [--verify]" ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! docker info >/dev/null 2>&1; then
    say "no Docker engine answers; running engine.sh"
    "$here/engine.sh"
fi

# Image ID of tag $1 if it exists and carries label variant $2, else empty.
image_ok() {
    docker image inspect --format "{{.Id}} {{index .Config.Labels \"$LABEL\"}}" "$1" 2>/dev/null \
        | awk -v v="$2" '$2 == v { print $1 }'
}

images_ok() {
    local ids=() v id
    for v in "${VARIANTS[@]}"; do
        id="$(image_ok "$REPO:$v" "$v")"
        [ -n "$id" ] || return 1
        ids+=("$id")
    done
    [ "${ids[0]}" != "${ids[1]}" ]
}

# --- build (skipped when both tags exist with the right label) ------------
if images_ok; then
    say "images $REPO:{1,2} already present"
else
    # A static busybox (no ELF interpreter), so it runs in an empty rootfs.
    is_static() {
        local f="$1"
        [ -x "$f" ] || return 1
        local info
        if command -v readelf >/dev/null 2>&1; then
            info="$(readelf -l "$f" 2>&1)" || return 1
            ! grep -q INTERP <<<"$info"
        elif command -v file >/dev/null 2>&1; then
            info="$(file -L "$f")"
            grep -qE 'statically linked|static-pie' <<<"$info"
        else
            info="$(LC_ALL=C ldd "$f" 2>&1 || true)"
            grep -qE 'not a dynamic executable|statically linked' <<<"$info"
        fi
    }
    BB=/bin/busybox
    if ! is_static "$BB"; then
        say "installing busybox-static (apt-get)..."
        apt_install busybox-static
        hash -r
        is_static "$BB" || die "$BB is still not a static binary"
    fi

    tmp="$(mktemp -d /tmp/stead-test-images.XXXXXX)"
    trap 'rm -rf "$tmp"' EXIT
    root="$tmp/root"
    mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/root"
    chmod 1777 "$root/tmp"
    cp "$BB" "$root/bin/busybox"
    n=0
    for applet in $("$BB" --list); do
        [ "$applet" = busybox ] && continue
        ln -sf busybox "$root/bin/$applet"
        n=$((n + 1))
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    say "rootfs: busybox + $n applet links"

    for v in "${VARIANTS[@]}"; do
        printf '%s\n' "$v" >"$root/variant"
        id="$(tar -C "$root" --numeric-owner --owner=0 --group=0 -cf - . \
            | docker import \
                --change 'CMD ["sh"]' \
                --change 'ENV PATH=/bin' \
                --change "LABEL $LABEL=$v" \
                - "$REPO:$v")"
        say "built $REPO:$v ($id)"
    done
    images_ok || die "images missing or not distinct after build"

    for v in "${VARIANTS[@]}"; do
        out="$(docker run --rm "$REPO:$v" sh -c 'cat /variant; echo hi')"
        [ "$out" = "$(printf '%s\nhi' "$v")" ] || die "$REPO:$v: unexpected output: $out"
    done
    say "smoke run ok"
fi

# --- optional verification -----------------------------------------------
if [ "$VERIFY" = 1 ]; then
    for v in "${VARIANTS[@]}"; do
        out="$(docker run --rm "$REPO:$v" sh -c 'cat /variant; echo hi')"
        [ "$out" = "$(printf '%s\nhi' "$v")" ] || die "$REPO:$v: unexpected output: $out"
        say "$REPO:$v runs: $(echo $out)"
    done

    name="stead-test-port-check-$$"
    port=18999
    trap 'docker rm -f "$name" >/dev/null 2>&1 || true' EXIT
    docker rm -f "$name" >/dev/null 2>&1 || true
    docker run -d --name "$name" -p "127.0.0.1:$port:80" "$REPO:1" \
        sh -c 'mkdir -p /www && cat /variant > /www/index.html && exec httpd -f -p 80 -h /www' >/dev/null \
        || die "could not create/start a container publishing 127.0.0.1:$port"
    say "container with -p 127.0.0.1:$port:80 started: $(docker port "$name" 80)"
    # Fetch from the host through the published port (busybox wget; curl
    # may be missing). Only 127.0.0.1 is contacted. Not `wget -T`: Debian's
    # busybox-static 1.35 wget segfaults with it; coreutils timeout instead.
    got=""
    for _ in $(seq 1 20); do
        got="$(timeout 3 /bin/busybox wget -q -O - "http://127.0.0.1:$port/" 2>/dev/null || true)"
        [ -n "$got" ] && break
        sleep 0.25
    done
    [ "$got" = 1 ] || die "published port 127.0.0.1:$port did not answer (got '$got')"
    say "published port 127.0.0.1:$port answers"
fi

for v in "${VARIANTS[@]}"; do
    printf '%s:%s %s\n' "$REPO" "$v" "$(docker image inspect --format '{{.Id}}' "$REPO:$v")"
done
