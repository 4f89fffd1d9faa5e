# Sourced by each device-lab step inside the VM (scripts/lab/run.sh copies it
# to /lab/in/lib.sh): a step runs as root in /lab/out/<step>/, and what it
# writes there is read back on the host. Steps collect facts; the tests on
# the host assert them.
set -euo pipefail

# Runs "$@" every second until it succeeds, for at most $1 seconds; says
# how long it took, or that it never did (status 1).
wait_until() {
    local secs="$1" t0=$SECONDS
    shift
    until "$@" >/dev/null 2>&1; do
        if [ $((SECONDS - t0)) -ge "$secs" ]; then
            echo "lab: not within ${secs} s: $*"
            return 1
        fi
        sleep 1
    done
    echo "lab: after $((SECONDS - t0)) s: $*"
}

# Installs the .deb under test, as an operator would.
install_stead() {
    DEBIAN_FRONTEND=noninteractive dpkg -i /lab/in/stead.deb
}

# stead-lab/busybox:1 in the VM's engine, made of Debian's static busybox
# passed in through the share (as scripts/test-images.sh makes the host's).
busybox_image() {
    local root
    root="$(mktemp -d)"
    mkdir -p "$root/bin" "$root/etc" "$root/tmp"
    chmod 1777 "$root/tmp"
    cp /lab/in/busybox "$root/bin/busybox"
    for a in $("$root/bin/busybox" --list); do
        [ "$a" = busybox ] || ln -s busybox "$root/bin/$a"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
    printf 'root:x:0:\n' >"$root/etc/group"
    tar -C "$root" --numeric-owner -cf - . \
        | docker import --change 'CMD ["sh"]' --change 'ENV PATH=/bin' - stead-lab/busybox:1 >/dev/null
    rm -rf "$root"
}

# A module's state as the agent's API says it (`converged`, `failed`, …).
module_state() {
    curl -fsS "http://127.0.0.1:7411/v1/modules/$1" | jq -r .state
}

# Whether module $1 reads state $2.
module_is() {
    [ "$(module_state "$1")" = "$2" ]
}

# Whether every module named reads converged.
all_converged() {
    local m
    for m in "$@"; do module_is "$m" converged || return 1; done
}

# Each module's container, one `NAME ID STATE` a line.
containers() {
    docker ps -a --filter label=stead.managed-by --format '{{.Names}} {{.ID}} {{.State}}' | sort
}

# The creates the engine saw since it started (this boot), one container
# name a line.
creates() {
    docker events --since 0 --until "$(date +%s)" --filter type=container --filter event=create \
        --format '{{.Actor.Attributes.name}}'
}

# The unit as systemd sees it, one KEY=VALUE a line.
unit_show() {
    systemctl show -p ActiveState,SubState,StatusText,Result,NRestarts,MainPID stead.service
}
