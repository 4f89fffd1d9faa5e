# The device lab's shared parts: where the cached images live, the tools it
# needs, and which accelerator boots the lab's kernel here. Source it after
# scripts/lib.sh.

# Images are cached outside the checkout, keyed by a hash of their inputs
# (scripts/lab/image.sh says which), so a second run and CI reuse them.
LAB_CACHE="${STEAD_LAB_CACHE:-/var/cache/stead-lab}"
# The Debian release the images are made of (what this machine runs).
LAB_SUITE="${STEAD_LAB_SUITE:-bookworm}"

# The tools the lab needs: QEMU (system emulator and qemu-img), mmdebstrap,
# mke2fs, and Debian's static busybox (the VM's engine runs an image made
# of it). A machine whose qemu-utils came from bookworm-backports cannot
# install bookworm's qemu-system-x86 beside it (qemu-utils 10 breaks
# qemu-system-common < 8): there it comes from bookworm-backports too,
# through a package list of its own (the machine's sources are not changed).
lab_install_tools() {
    command -v mmdebstrap >/dev/null 2>&1 || apt_install mmdebstrap
    command -v mke2fs >/dev/null 2>&1 || apt_install e2fsprogs
    if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
        local utils
        utils="$(dpkg-query -W -f '${Version}' qemu-utils 2>/dev/null || true)"
        case "$utils" in
            *~bpo12*) lab_install_backports qemu-system-x86 ;;
            *) apt_install qemu-system-x86 qemu-utils ;;
        esac
    fi
    command -v qemu-img >/dev/null 2>&1 || apt_install qemu-utils
    lab_busybox >/dev/null
}

# Installs packages $@ from bookworm-backports (what is not there comes from
# the machine's own sources), with a package list kept under $LAB_CACHE.
lab_install_backports() {
    local dir="$LAB_CACHE/apt-backports" log rc=0
    mkdir -p "$dir/lists/partial" "$dir/archives/partial"
    printf 'deb http://deb.debian.org/debian bookworm-backports main\n' >"$dir/sources.list"
    local opts=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o "Dir::State::lists=$dir/lists"
        -o "Dir::Cache::archives=$dir/archives")
    log="$(mktemp /tmp/stead-apt.XXXXXX)"
    export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
    { apt-get "${opts[@]}" update -qq \
        && apt-get "${opts[@]}" install -y -qq --no-install-recommends -t bookworm-backports "$@"; } >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then tail -n 30 "$log" >&2; rm -f "$log"; die "apt-get install $* (bookworm-backports) failed"; fi
    rm -f "$log"
}

# The path of Debian's static busybox on this machine (installed when
# missing): the VM's test image is made of it.
lab_busybox() {
    local bb=/bin/busybox
    command -v readelf >/dev/null 2>&1 || apt_install binutils
    if ! { [ -x "$bb" ] && ! readelf -l "$bb" 2>/dev/null | grep -q INTERP; }; then
        apt_install busybox-static
        readelf -l "$bb" | grep -q INTERP && die "$bb is not a static binary"
    fi
    echo "$bb"
}
