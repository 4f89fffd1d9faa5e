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

# Follows the engine's container events from its start into ./events, one
# `TIME NAME ACTION` a line (TIME in nanoseconds since the epoch), in the
# background: the engine keeps only its last 256 events, and a health
# check's execs push a create out of them within minutes.
follow_events() {
    docker events --since 0 --filter type=container \
        --format '{{.TimeNano}} {{.Actor.Attributes.name}} {{.Action}}' >>events &
    sleep 1
}

# The creates the engine saw since it started (this boot), one container
# name a line, from what follow_events wrote.
creates() {
    [ -f events ] || { echo "creates: no ./events: follow_events first" >&2; return 1; }
    awk '$3 == "create" { print $2 }' events
}

# The unit as systemd sees it, one KEY=VALUE a line.
unit_show() {
    systemctl show -p ActiveState,SubState,StatusText,Result,NRestarts,MainPID stead.service
}

# Serves DIR on 127.0.0.1:PORT as a device's thin link would: a GET gets
# 64 KiB every quarter second (about 256 KiB/s), from where a `Range:
# bytes=N-` asks (206); a PUT's body is kept as ./put-NAME (NAME: the last
# part of its path; a plane report, say). Each connection is a process of
# its own (busybox's nc). Each request is written to ./requests-PORT as
# `METHOD PATH FROM`: the step's directory is on the host's side of the
# share, so what was asked before a power cut is still there after it.
serve_slowly() {
    local port="$1" dir="$2" handler="/usr/local/sbin/lab-http-$1"
    cat >"$handler" <<HANDLER
#!/bin/sh
read -r method path rest
from=0 len=0
while read -r line; do
    line=\$(printf '%s' "\$line" | tr -d '\r')
    [ -n "\$line" ] || break
    case "\$line" in
        [Rr]ange:\ bytes=*-) from=\${line#*=}; from=\${from%-} ;;
        [Cc]ontent-[Ll]ength:*) len=\${line#*:}; len=\${len# } ;;
    esac
done
echo "\$method \$path \$from" >>"$PWD/requests-$port"
if [ "\$method" = PUT ]; then
    head -c "\$len" >"$PWD/.put.\$\$" && mv "$PWD/.put.\$\$" "$PWD/put-\${path##*/}"
    printf 'HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n'
    exit 0
fi
f="$dir\$path"
if [ ! -f "\$f" ]; then
    printf 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'
    exit 0
fi
size=\$(stat -c %s "\$f")
if [ "\$from" -gt 0 ] && [ "\$from" -lt "\$size" ]; then
    printf 'HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\nContent-Length: %d\r\nConnection: close\r\n\r\n' \
        "\$from" \$((size - 1)) "\$size" \$((size - from))
else
    from=0
    printf 'HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n' "\$size"
fi
at=\$from
while [ "\$at" -lt "\$size" ]; do
    dd if="\$f" bs=65536 skip="\$at" count=65536 iflag=skip_bytes,count_bytes status=none || exit 0
    at=\$((at + 65536))
    sleep 0.25
done
HANDLER
    chmod +x "$handler"
    /lab/in/busybox nc -ll -p "$port" -e "$handler" &
}


# Whether jq's FILTER ($2) is true of what command $1 prints (jq 1.6's -e
# says yes to no input at all, as when the agent is restarting: the
# answer must be `true`).
says() {
    [ "$(sh -c "$1" 2>/dev/null | jq -r "$2" 2>/dev/null)" = true ]
}
