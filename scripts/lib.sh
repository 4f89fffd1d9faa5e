# Shared by the project's scripts: messages and a quiet apt-get install.
# Source it after setting NAME.

say() { printf '%s: %s\n' "${NAME:-stead}" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# Quiet, non-interactive apt-get install; output goes to a log shown only on failure.
apt_install() {
    local log rc=0
    log="$(mktemp /tmp/stead-apt.XXXXXX)"
    export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"; } >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then tail -n 30 "$log" >&2; rm -f "$log"; die "apt-get install $* failed"; fi
    rm -f "$log"
}
