#!/usr/bin/env bash
# Peak memory of a node holding a 1000-module plane document (a benchmark,
# not a test): the release agent adopts a signed document of
# STEAD_BENCH_MODULES modules (1000; about 950 KB, near the 1 MiB limit)
# from Debian's nginx on loopback, against the running engine; the modules
# name an image on a loopback port where no registry listens, so they are
# held, not run (no 1000 containers). Then 8 clients read every GET
# endpoint three times each at once (half with the token, half without).
# Printed per run: the peak resident set (VmHWM) once the document is
# adopted and every module is on the board, and after the readers; then
# the medians over STEAD_BENCH_RUNS runs (3), and the machine. Each run has
# a data directory of its own. STEAD_BENCH_BIN measures that binary instead
# of building target/release/stead. The issue's goal: a peak of 32 MiB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench-memory.sh
. scripts/lib.sh

RUNS="${STEAD_BENCH_RUNS:-3}"
MODULES="${STEAD_BENCH_MODULES:-1000}"

if [ ! -x /usr/sbin/nginx ]; then
    apt_install_no_start nginx
    if command -v systemctl >/dev/null 2>&1; then systemctl disable nginx.service >/dev/null 2>&1 || true; fi
fi
command -v python3 >/dev/null 2>&1 || apt_install python3
docker version >/dev/null 2>&1 || die "no engine answers: start one (scripts/engine.sh)"

if [ -n "${STEAD_BENCH_BIN:-}" ]; then
    [ -x "$STEAD_BENCH_BIN" ] || die "STEAD_BENCH_BIN: $STEAD_BENCH_BIN is not an executable"
    stead="$(realpath "$STEAD_BENCH_BIN")"
else
    say "cargo build --release --locked"
    cargo build --release --locked >&2 || die "the release build failed"
    target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
    stead="$target_dir/release/stead"
    [ -x "$stead" ] || die "no $stead after the build"
fi

work="$(mktemp -d /tmp/stead-bench-memory.XXXXXX)"
nginx_pid=""
cleanup() {
    local p
    for p in $(cat "$work/agent.pids" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    stop_nginx "$nginx_pid"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the plane: nginx on a free loopback port, everything in $work --------
node="bench-memory-$$"
mkdir -p "$work/root/nodes/$node" "$work/tmp"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat >"$work/nginx.conf" <<NGINX
# Written by scripts/bench-memory.sh: master and one worker, as root, in a
# root-only tempdir; loopback only.
user root root;
worker_processes 1;
daemon off;
pid "$work/nginx.pid";
error_log "$work/error.log" warn;
events { worker_connections 64; }
http {
    types { application/json json; }
    default_type application/octet-stream;
    client_body_temp_path "$work/tmp/body";
    proxy_temp_path "$work/tmp/proxy";
    fastcgi_temp_path "$work/tmp/fastcgi";
    uwsgi_temp_path "$work/tmp/uwsgi";
    scgi_temp_path "$work/tmp/scgi";
    access_log off;
    server {
        listen 127.0.0.1:$port;
        root "$work/root";
        location / { limit_except GET { deny all; } }
    }
}
NGINX
/usr/sbin/nginx -c "$work/nginx.conf" -p "$work" &
nginx_pid=$!

# --- the document ----------------------------------------------------------
"$stead" plane keygen --out "$work/plane.key" >/dev/null
python3 - "$MODULES" >"$work/payload.json" <<'PY'
import json, sys
n = int(sys.argv[1])
mods = []
for k in range(n):
    mods.append({
        "name": f"m{k}",
        "image": "127.0.0.1:9/stead-absent/app:1.0.0",
        "command": ["sh", "-c", "exec /app --config /etc/app/config.json"],
        "env": {"MODE": "production", "REGION": f"region-{k % 7}",
                "TOKEN": f"token-{k:08}-" + "s" * 40},
        "restart": "always",
        "config": {"path": "/etc/app/config.json", "format": "json",
                   "defaults": {"log": {"level": "warn"}, "http": {"port": 80}, "peer": {"url": ""}}},
        "settings": {"log.level": "info", "http.port": 8000 + k % 1000,
                     "peer.url": f"http://peer-{k}.local:9000/api/v1/endpoint"},
        "files": [{"path": "/etc/app/banner.txt", "content": f"module {k}: " + "b" * 145 + "\n"}],
    })
print(json.dumps({"poll": {"interval": "1h"}, "modules": mods}))
PY
"$stead" plane sign --key "$work/plane.key" --node "$node" --revision 1 \
    --in "$work/payload.json" --out "$work/root/nodes/$node/desired.json" >"$work/sign.log" 2>&1 ||
    { cat "$work/sign.log" >&2; die "stead plane sign failed"; }
say "a $MODULES-module document of $(stat -c %s "$work/root/nodes/$node/desired.json") bytes"

# --- the runs ----------------------------------------------------------------
python3 - "$stead" "$work" "$node" "$port" "$RUNS" "$MODULES" <<'PY'
import json, os, statistics, subprocess, sys, threading, time, urllib.request, urllib.error
stead, work, node, port, runs, modules = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
pub = open(f"{work}/plane.key.pub").read().strip()

def kib(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0

def get(addr, path, token=None):
    req = urllib.request.Request(f"http://{addr}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

adopted, peaks = [], []
for run in range(runs):
    d = f"{work}/run{run}"
    os.makedirs(f"{d}/intentions")
    with open(f"{d}/stead.toml", "w") as f:
        f.write(f'node_id = "{node}"\ndata_dir = "data"\nintentions_dir = "intentions"\n'
                f'heartbeat = "30s"\napi_listen = "127.0.0.1:0"\n'
                f'[plane]\nurl = "http://127.0.0.1:{port}"\ntrusted_keys = ["{pub}"]\n')
    log = open(f"{d}/agent.log", "w")
    agent = subprocess.Popen([stead, "run", "--config", f"{d}/stead.toml"], stdout=subprocess.DEVNULL, stderr=log)
    with open(f"{work}/agent.pids", "a") as f:
        f.write(f"{agent.pid}\n")
    try:
        end = time.time() + 300
        while not os.path.exists(f"{d}/data/api-addr"):
            assert time.time() < end and agent.poll() is None, "the agent did not start"
            time.sleep(0.1)
        time.sleep(0.2)
        addr = open(f"{d}/data/api-addr").read().strip()
        token = open(f"{d}/data/api-token").read().strip()
        while True:
            assert time.time() < end and agent.poll() is None, f"no adoption; see {d}/agent.log"
            try:
                p = json.loads(get(addr, "/v1/plane")[1])
                s = json.loads(get(addr, "/v1/status")[1])
                if (p.get("held") or {}).get("revision") == 1 and len(s["modules"]) == modules:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        adopted.append(kib(agent.pid, "VmHWM"))
        m = s["modules"][0]["name"]
        paths = ["/healthz", "/readyz", "/metrics", "/v1/status", "/v1/events?limit=1000",
                 "/v1/intentions", "/v1/plane", "/v1/reloads", f"/v1/modules/{m}", f"/v1/intentions/{m}"]
        failed = []
        def reader(c):
            for _ in range(3):
                for path in paths:
                    code, _ = get(addr, path, token if c % 2 == 0 else None)
                    if code not in (200, 503):
                        failed.append((path, code))
        threads = [threading.Thread(target=reader, args=(c,)) for c in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert agent.poll() is None, f"the agent died (OOM?); see {d}/agent.log"
        assert not failed, failed
        peaks.append(kib(agent.pid, "VmHWM"))
        print(f"run {run + 1}: peak RSS {adopted[-1] / 1024:.1f} MiB adopted, {peaks[-1] / 1024:.1f} MiB after 8 readers", flush=True)
    finally:
        agent.terminate()
        agent.wait()

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"machine: {os.uname().machine}, {os.cpu_count()} CPUs ({cpu}); binary {stead}")
print(f"median of {runs}: peak RSS {statistics.median(adopted) / 1024:.1f} MiB with the document adopted, "
      f"{statistics.median(peaks) / 1024:.1f} MiB with 8 clients reading every endpoint (goal: 32 MiB)")
PY
