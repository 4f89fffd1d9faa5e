#!/usr/bin/env bash
# Runs the device lab's VM: Debian (scripts/lab/image.sh) under QEMU with
# systemd as PID 1, one machine per directory, each boot running one step.
#
#   scripts/lab/run.sh new DIR [--deb FILE]
#       A fresh machine in DIR (made; must not exist): DIR/disk.qcow2, a
#       copy-on-write overlay of the cached image (reboots and power cuts
#       keep it), and DIR/share, the 9p share the VM sees at /lab, holding
#       in/stead.deb (default: dist/stead_*_amd64.deb, built by
#       scripts/package.sh), in/busybox (Debian's static busybox, for a test
#       image made in the VM) and in/lib.sh (scripts/lab/step-lib.sh).
#   scripts/lab/run.sh boot DIR STEP [--then poweroff|reboot] [--timeout SECS]
#                                     [--cut-after MIN-MAX] [--rtc DATE]
#                                     [--host-net]
#       Boots the machine, which runs DIR/share/steps/STEP.sh (written by
#       the caller) as root in /lab/out/STEP/ (what it writes there is read
#       back in DIR/share/out/STEP/, its output in log, its exit status in
#       rc), then shuts down as --then says (default poweroff; reboot is
#       `systemctl reboot`, after which QEMU exits). --timeout (default 300)
#       bounds boot, step and shutdown. --cut-after cuts the power (SIGKILL
#       of QEMU, the disk written with cache=none) at a random moment MIN to
#       MAX seconds after the step opens its window (writes the file
#       cut-window in its directory); the step is not let end. --rtc
#       starts the machine's real-time clock at DATE (YYYY-MM-DD, UTC; it
#       runs on with the VM: clock=vm) instead of the host's time.
#       --host-net gives it one virtio NIC on QEMU's user network, which
#       the step configures itself (10.0.2.15/24, no route out): the host's
#       loopback answers at 10.0.2.2, nothing else does.
#
# Exits 0 when the step ran and exited 0 (or the power was cut as asked);
# otherwise says why, with the step's log or the serial console's tail: a
# machine that does not boot is a failure, never a skip. One VM runs at a
# time on this machine (a lock under $STEAD_LAB_CACHE); 2 vCPUs, 1.5 GiB.
# The accelerator is KVM when it boots the lab's kernel here (tried once per
# boot of this machine), else QEMU's software CPU (TCG); the choice is
# printed. VMs have no network (-nic none) unless --host-net.
#
# Env: STEAD_LAB_ACCEL=kvm|tcg forces the accelerator; STEAD_LAB_CACHE.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME=lab/run.sh
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"
# shellcheck source=scripts/lab/lib.sh
. "$here/lib.sh"

usage() { die "usage: scripts/lab/run.sh new DIR [--deb FILE] | boot DIR STEP [--then poweroff|reboot] [--timeout SECS] [--cut-after MIN-MAX] [--rtc YYYY-MM-DD] [--host-net]"; }

[ "$(id -u)" -eq 0 ] || die "must run as root"
cmd="${1:-}"
[ "$#" -ge 2 ] || usage
dir="$2"
shift 2

# The accelerator: KVM if it boots the lab's kernel to its first panic (no
# root given) within 20 s, else TCG; the probe is kept for this boot of the
# machine under /run.
accel() {
    local image="$1" kernel_key probe log t0
    if [ -n "${STEAD_LAB_ACCEL:-}" ]; then
        case "$STEAD_LAB_ACCEL" in kvm | tcg) ;; *) die "STEAD_LAB_ACCEL must be kvm or tcg, not '$STEAD_LAB_ACCEL'" ;; esac
        say "accelerator: $STEAD_LAB_ACCEL (STEAD_LAB_ACCEL)"
        echo "$STEAD_LAB_ACCEL"
        return
    fi
    kernel_key="$(basename "$image")"
    probe="/run/stead-lab/accel-$kernel_key"
    if [ ! -s "$probe" ]; then
        mkdir -p /run/stead-lab
        if [ ! -w /dev/kvm ]; then
            echo "tcg (no writable /dev/kvm)" >"$probe"
        else
            log="$(mktemp /tmp/stead-lab-probe.XXXXXX)"
            t0=$SECONDS
            timeout 20 qemu-system-x86_64 -accel kvm -cpu host -m 256 -nodefaults -display none \
                -no-reboot -nic none -serial "file:$log" -kernel "$image/vmlinuz" \
                -append "console=ttyS0 panic=-1" >/dev/null 2>&1 || true
            if grep -q 'Kernel panic' "$log"; then
                echo "kvm (Debian's kernel ran to its first panic in $((SECONDS - t0)) s)" >"$probe"
            else
                echo "tcg (KVM is there but did not run Debian's kernel within 20 s: $(tail -c 200 "$log" | tr -d '\r' | tr '\n' ' '))" >"$probe"
            fi
            rm -f "$log"
        fi
    fi
    say "accelerator: $(cat "$probe")"
    cut -d' ' -f1 "$probe"
}

case "$cmd" in
    new)
        deb=""
        while [ "$#" -gt 0 ]; do
            case "$1" in
                --deb) [ "$#" -ge 2 ] || usage; deb="$2"; shift 2 ;;
                *) usage ;;
            esac
        done
        if [ -z "$deb" ]; then
            shopt -s nullglob
            debs=("$here"/../../dist/stead_*_amd64.deb)
            shopt -u nullglob
            [ "${#debs[@]}" -gt 0 ] || die "no dist/stead_*_amd64.deb: scripts/release.sh x86_64-unknown-linux-musl && scripts/package.sh build it"
            deb="$(ls -t "${debs[@]}" | head -n 1)"
        fi
        [ -f "$deb" ] || die "no such .deb: $deb"
        [ ! -e "$dir" ] || die "$dir exists: a new machine needs a directory of its own"
        image="$("$here/image.sh")"
        mkdir -p "$dir/share/in" "$dir/share/steps" "$dir/share/out"
        qemu-img create -q -f qcow2 -F raw -b "$image/disk.raw" "$dir/disk.qcow2"
        echo "$image" >"$dir/image"
        cp "$deb" "$dir/share/in/stead.deb"
        cp "$(lab_busybox)" "$dir/share/in/busybox"
        cp "$here/step-lib.sh" "$dir/share/in/lib.sh"
        say "new machine in $dir ($(basename "$deb") over $(basename "$image"))"
        ;;
    boot)
        [ "$#" -ge 1 ] || usage
        step="$1"
        shift
        then=poweroff timeout=300 cut="" rtc=() nic=(-nic none)
        while [ "$#" -gt 0 ]; do
            case "$1" in
                --rtc)
                    [ "$#" -ge 2 ] || usage
                    [[ "$2" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || die "--rtc must be a date YYYY-MM-DD, not '$2'"
                    rtc=(-rtc "base=$2T00:00:00,clock=vm")
                    shift 2
                    ;;
                --host-net) nic=(-nic user,model=virtio-net-pci); shift ;;
                --then) [ "$#" -ge 2 ] || usage; then="$2"; shift 2 ;;
                --timeout) [ "$#" -ge 2 ] || usage; timeout="$2"; shift 2 ;;
                --cut-after) [ "$#" -ge 2 ] || usage; cut="$2"; shift 2 ;;
                *) usage ;;
            esac
        done
        case "$then" in poweroff | reboot) ;; *) die "--then must be poweroff or reboot, not '$then'" ;; esac
        [[ "$timeout" =~ ^[0-9]+$ ]] || die "--timeout must be whole seconds, not '$timeout'"
        cut_min="" cut_max=""
        if [ -n "$cut" ]; then
            [[ "$cut" =~ ^([0-9]+)-([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] \
                || die "--cut-after must be MIN-MAX whole seconds, MIN <= MAX, not '$cut'"
            cut_min="${BASH_REMATCH[1]}" cut_max="${BASH_REMATCH[2]}"
        fi
        [ -f "$dir/disk.qcow2" ] && [ -f "$dir/image" ] || die "$dir is not a lab machine (scripts/lab/run.sh new makes one)"
        share="$dir/share"
        [ -f "$share/steps/$step.sh" ] || die "no step $share/steps/$step.sh"
        [ ! -e "$share/out/$step" ] || die "step $step already ran on this machine ($share/out/$step)"
        image="$(cat "$dir/image")"
        [ -f "$image/done" ] || die "the machine's image $image is gone (scripts/lab/image.sh makes it again; make a new machine)"

        exec 9>"$LAB_CACHE/.run.lock"
        if ! flock -n 9; then
            say "waiting for the other lab VM to end..."
            flock 9
        fi
        acc="$(accel "$image")"
        cpu=max
        [ "$acc" = kvm ] && cpu=host
        printf '%s\n' "$step" >"$share/next"
        printf '%s\n' "$then" >"$share/then"
        n=1
        while [ -e "$dir/serial.$n.log" ]; do n=$((n + 1)); done
        serial="$dir/serial.$n.log"
        out="$share/out/$step"
        start=$SECONDS
        qemu-system-x86_64 -name "stead-lab-$step" -accel "$acc" -cpu "$cpu" -smp 2 -m 1536 \
            -nodefaults -display none -no-reboot "${nic[@]}" ${rtc[@]+"${rtc[@]}"} \
            -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
            -append "root=/dev/vda rw console=ttyS0 panic=-1 quiet" \
            -drive "file=$dir/disk.qcow2,format=qcow2,if=virtio,cache=none" \
            -virtfs "local,path=$share,mount_tag=lab,security_model=none,id=lab" \
            -serial "file:$serial" >"$dir/qemu.$n.log" 2>&1 &
        qemu=$!
        echo "$qemu" >"$dir/qemu.pid"
        # Fails the boot, showing what the machine said.
        fail() {
            kill -KILL "$qemu" 2>/dev/null || true
            wait "$qemu" 2>/dev/null || true
            say "ERROR: $*"
            say "serial console ($serial), last lines:"
            tail -n 40 "$serial" | sed 's/^/  | /' >&2
            [ ! -s "$dir/qemu.$n.log" ] || { say "qemu said:"; sed 's/^/  | /' "$dir/qemu.$n.log" >&2; }
            [ ! -f "$out/log" ] || { say "step $step's log, last lines:"; tail -n 40 "$out/log" | sed 's/^/  | /' >&2; }
            exit 1
        }
        trap 'kill -KILL "$qemu" 2>/dev/null || true' EXIT
        deadline=$((start + timeout))
        began=""
        cut_at=""
        while kill -0 "$qemu" 2>/dev/null; do
            if [ -z "$began" ] && [ -f "$out/started" ]; then
                began=$SECONDS
                say "booted: the step began $((began - start)) s after start ($acc)"
            fi
            if [ -n "$cut_min" ] && [ -z "$cut_at" ] && [ -f "$out/cut-window" ]; then
                cut_at=$((SECONDS + cut_min + RANDOM % (cut_max - cut_min + 1)))
            fi
            if [ -n "$cut_at" ] && [ "$SECONDS" -ge "$cut_at" ]; then
                kill -KILL "$qemu"
                wait "$qemu" 2>/dev/null || true
                echo "$((SECONDS - began))" >"$out/cut"
                say "power cut $((SECONDS - began)) s into step $step, $((SECONDS - start)) s after start (SIGKILL of qemu)"
                trap - EXIT
                exit 0
            fi
            [ "$SECONDS" -lt "$deadline" ] || fail "step $step: no end within ${timeout} s (started: ${began:+yes}${began:-no})"
            sleep 0.2
        done
        wait "$qemu" || fail "qemu exited with $? before step $step ended"
        trap - EXIT
        rm -f "$dir/qemu.pid"
        [ -z "$cut_min" ] || fail "step $step ended before the power cut it was given (${cut})"
        [ -f "$out/rc" ] || fail "the machine stopped without running step $step"
        rc="$(cat "$out/rc")"
        say "step $step: exit $rc in $((SECONDS - began)) s from its start; $((SECONDS - start)) s with boot and $then"
        if [ "$rc" != 0 ]; then
            say "step $step failed ($rc); its log:"
            sed 's/^/  | /' "$out/log" >&2
            exit 1
        fi
        ;;
    *) usage ;;
esac
