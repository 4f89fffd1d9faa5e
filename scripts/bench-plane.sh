#!/usr/bin/env bash
# The central plane's poll cycle, measured (a benchmark, not a test): the
# release agent polls Debian's nginx on loopback every second, and per cycle
# this prints the bytes on the wire (nginx's $request_length + $bytes_sent,
# from its access log) and the agent's CPU time, for
# - a 304 cycle: the document does not change (a 100-module document held);
# - a 100-module document cycle: every poll gets a newly signed revision of
#   the same 100 modules (only revision and issued_at change), fetched,
#   verified, parsed and written with its intentions in one transaction.
# No engine: docker_socket names a path where nothing listens, so the agent
# waits for its engine (with backoff) and never creates a container; its
# poller starts after the 30 s it waits for a first pass. The baseline is a
# twin agent (same binary, same config but no [plane]) started beside it:
# its CPU over the same windows is subtracted. CPU is each process's CPU
# clock (clock_gettime on the pid's CLOCKID, ns; what /proc/<pid>/stat's
# utime+stime count in 10 ms ticks, shown as a cross-check). Medians over
# STEAD_BENCH_ROUNDS rounds (5) of STEAD_BENCH_CYCLES cycles (14) each;
# about 3 minutes after the build. STEAD_BENCH_LOG sets the agent's
# STEAD_LOG (info); STEAD_BENCH_BIN measures that binary instead of
# building target/release/stead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench-plane.sh
. scripts/lib.sh

ROUNDS="${STEAD_BENCH_ROUNDS:-5}"
CYCLES="${STEAD_BENCH_CYCLES:-14}"
MODULES=100
LOG_LEVEL="${STEAD_BENCH_LOG:-info}"

if [ ! -x /usr/sbin/nginx ]; then
    apt_install_no_start nginx
    if command -v systemctl >/dev/null 2>&1; then systemctl disable nginx.service >/dev/null 2>&1 || true; fi
fi
command -v python3 >/dev/null 2>&1 || apt_install python3

if [ -n "${STEAD_BENCH_BIN:-}" ]; then
    # Another build to measure (e.g. dist/stead-x86_64-unknown-linux-musl).
    [ -x "$STEAD_BENCH_BIN" ] || die "STEAD_BENCH_BIN: $STEAD_BENCH_BIN is not an executable"
    stead="$(realpath "$STEAD_BENCH_BIN")"
else
    say "cargo build --release --locked"
    cargo build --release --locked >&2 || die "the release build failed"
    target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
    stead="$target_dir/release/stead"
    [ -x "$stead" ] || die "no $stead after the build"
fi

work="$(mktemp -d /tmp/stead-bench-plane.XXXXXX)"
nginx_pid=""
driver_pid=""
cleanup() {
    local p
    [ -z "$driver_pid" ] || kill "$driver_pid" 2>/dev/null || true
    # The agents the driver started (it ends them itself unless it died).
    for p in $(cat "$work/agent.pids" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    stop_nginx "$nginx_pid"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the plane: nginx on a free loopback port, everything in $work --------
mkdir -p "$work/root/nodes" "$work/tmp"
token="bench-plane-$$-$RANDOM"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
answers() {
    python3 - "$1" "$token" <<'PY' 2>/dev/null
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/__bench", timeout=1) as r:
    sys.exit(0 if r.read().decode() == sys.argv[2] else 1)
PY
}
nginx_conf() {
    cat <<NGINX
# Written by scripts/bench-plane.sh. Master and one worker, as root (the
# script runs as root; everything is in a root-only tempdir).
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
    client_max_body_size 1m;
    # Bytes on the wire per request: the whole request (line, headers, body)
    # and the whole answer (status line, headers, body). Unbuffered: a line
    # is written as its request ends.
    log_format bench "\$msec\t\$request_method\t\$uri\t\$status\t\$request_length\t\$bytes_sent\t\$body_bytes_sent\t\$connection\t\$connection_requests";
    access_log "$work/access.log" bench;
    server {
        listen 127.0.0.1:$port;
        root "$work/root";
        location = /__bench { access_log off; return 200 "$token"; }
        location ~ ^/nodes/[^/]+/desired\.json\$ { limit_except GET { deny all; } }
        location ~ ^/nodes/[^/]+/status\.json\$ {
            dav_methods PUT;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
            limit_except GET PUT { deny all; }
        }
        location / { limit_except GET { deny all; } }
    }
}
NGINX
}
for _ in 1 2 3 4 5; do
    port="$(free_port)"
    nginx_conf >"$work/nginx.conf"
    : >"$work/error.log"
    /usr/sbin/nginx -p "$work/" -c "$work/nginx.conf" -e "$work/error.log" </dev/null >/dev/null 2>"$work/nginx.stderr" &
    nginx_pid=$!
    up=""
    for _ in $(seq 1 100); do
        kill -0 "$nginx_pid" 2>/dev/null || break
        if answers "$port"; then up=1; break; fi
        sleep 0.1
    done
    [ -n "$up" ] && break
    kill -0 "$nginx_pid" 2>/dev/null && die "nginx runs but does not answer on 127.0.0.1:$port"
    wait "$nginx_pid" 2>/dev/null || true
    nginx_pid=""
    grep -q 'Address already in use' "$work/error.log" "$work/nginx.stderr" 2>/dev/null && continue
    cat "$work/error.log" "$work/nginx.stderr" >&2 2>/dev/null || true
    die "nginx did not start"
done
[ -n "$nginx_pid" ] || die "nginx found no free port in 5 tries"
say "nginx (pid $nginx_pid) on 127.0.0.1:$port"

# --- the key, the agents' configs ------------------------------------------
node="bench-plane"
"$stead" plane keygen --out "$work/plane.key" >/dev/null || die "stead plane keygen failed"
pub="$(cat "$work/plane.key.pub")"
for who in plane twin; do
    mkdir -p "$work/$who/i"
    cat >"$work/$who/c.toml" <<TOML
node_id = "$node"
data_dir = "data"
intentions_dir = "i"
api_listen = "127.0.0.1:0"
# Nothing listens here: the agent waits for its engine and creates nothing.
docker_socket = "$work/no-engine.sock"
TOML
done
cat >>"$work/plane/c.toml" <<TOML

[plane]
url = "http://127.0.0.1:$port"
trusted_keys = ["$pub"]
poll_interval = "1s"
TOML

# --- the driver: publishes, runs the agents, measures ----------------------
# In the background and waited for, so a signal to this script is acted on
# at once (the trap ends the driver, the agents and nginx).
python3 - "$stead" "$work" "$node" "$MODULES" "$ROUNDS" "$CYCLES" "$LOG_LEVEL" <<'PY' >"$work/results.json" &
import json, os, statistics, subprocess, sys, time, urllib.request

stead, work, node, modules, rounds, cycles, log_level = sys.argv[1:]
modules, rounds, cycles = int(modules), int(rounds), int(cycles)
root = f"{work}/root/nodes/{node}"
desired = f"{root}/desired.json"
access_log = f"{work}/access.log"
SETTLE = 0.5  # after a GET is logged: the agent is done with it, the next is >= 1 s away


def fail(msg):
    sys.stderr.write(f"bench-plane.sh: ERROR: {msg}\n")
    for who in ("plane", "twin"):
        try:
            tail = open(f"{work}/{who}/agent.log").read().splitlines()[-20:]
            sys.stderr.write(f"--- {who} agent log (last lines)\n" + "\n".join(tail) + "\n")
        except OSError:
            pass
    try:
        sys.stderr.write("--- nginx error log\n" + open(f"{work}/error.log").read())
    except OSError:
        pass
    sys.exit(1)


# The payload: 100 modules, the same in every revision; sign sets node,
# revision, issued_at and expires.
mods = [
    {
        "name": f"sensor-{n:03}",
        "image": "registry.example:5000/acme/sensor:1.4.2",
        "command": ["/usr/bin/sensor", "--config", "/etc/sensor/config.json"],
        "env": {"SENSOR_ID": f"{n:03}", "LOG_LEVEL": "info"},
        "restart": "unless-stopped",
        "config": {
            "path": "/etc/sensor/config.json",
            "format": "json",
            "defaults": {"poll_ms": 1000, "channel": n, "upstream": {"url": "mqtt://broker:1883"}},
        },
    }
    for n in range(1, modules + 1)
]
with open(f"{work}/payload.json", "w") as f:
    json.dump({"poll": {"interval": "1s", "jitter": "100ms"}, "modules": mods}, f)

os.makedirs(root, exist_ok=True)
last_mtime = 0


def publish(revision):
    """Signs revision `revision` and renames it into place with an mtime past
    any given before (nginx's ETag is mtime-seconds + size)."""
    global last_mtime
    tmp = f"{root}/.desired.json.publishing"
    r = subprocess.run(
        [stead, "plane", "sign", "--key", f"{work}/plane.key", "--node", node,
         "--revision", str(revision), "--in", f"{work}/payload.json", "--out", tmp],
        capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"stead plane sign --revision {revision}: {r.stderr.strip()}")
    last_mtime = max(int(time.time()), last_mtime + 1)
    os.utime(tmp, (last_mtime, last_mtime))
    os.rename(tmp, desired)


# --- the access log
lines = []
_pos = 0


def read_log():
    global _pos
    with open(access_log) as f:
        f.seek(_pos)
        data = f.read()
    # Only whole lines.
    end = data.rfind("\n") + 1
    _pos += len(data[:end].encode())
    for l in data[:end].splitlines():
        t, method, uri, status, req, sent, body, conn, conn_req = l.split("\t")
        lines.append({"t": float(t), "method": method, "uri": uri, "status": int(status),
                      "req": int(req), "sent": int(sent), "body": int(body),
                      "conn": int(conn), "conn_req": int(conn_req)})


def gets(ls):
    return [l for l in ls if l["method"] == "GET" and l["uri"].endswith("/desired.json")]


def puts(ls):
    return [l for l in ls if l["method"] == "PUT" and l["uri"].endswith("/status.json")]


# --- the agents
agents = {}


def start(who):
    env = dict(os.environ, STEAD_LOG=log_level)
    log = open(f"{work}/{who}/agent.log", "w")
    p = subprocess.Popen([stead, "run", "--config", f"{work}/{who}/c.toml"], cwd=f"{work}/{who}",
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    agents[who] = p
    with open(f"{work}/agent.pids", "a") as f:
        f.write(f"{p.pid}\n")


def alive():
    for who, p in agents.items():
        if p.poll() is not None:
            fail(f"the {who} agent exited ({p.returncode})")


def cpu_ns(pid):
    # The process's CPU clock: CPUCLOCK_SCHED of the whole thread group
    # (clock_getcpuclockid(pid)), its threads that ended included.
    return time.clock_gettime_ns(((~pid) << 3) | 2)


def ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])  # utime + stime


def snapshot():
    alive()
    read_log()
    return {"t": time.monotonic(), "n": len(lines),
            "cpu": {w: cpu_ns(p.pid) for w, p in agents.items()},
            "ticks": {w: ticks(p.pid) for w, p in agents.items()}}


def api(path):
    addr = open(f"{work}/plane/data/api-addr").read().strip()
    with urllib.request.urlopen(f"http://{addr}{path}", timeout=5) as r:
        return json.load(r)


def held():
    return (api("/v1/plane").get("held") or {}).get("revision")


revision = 1
served = None  # the revision the last GET answered with a 200
processed = 0  # log lines watch() has seen


def watch(until, timeout, on_get=None):
    """Reads the log until `until()`; on_get(line) for every new GET."""
    global served, processed
    end = time.monotonic() + timeout
    while True:
        alive()
        read_log()
        for l in gets(lines[processed:]):
            if l["status"] == 200:
                served = revision
            if on_get:
                on_get(l)
        processed = len(lines)
        if until():
            return
        if time.monotonic() > end:
            fail(f"timed out after {timeout} s; the plane logged, last: {lines[-5:]}")
        time.sleep(0.02)


def next_revision(l):
    global revision
    if l["status"] == 200:
        revision += 1
        publish(revision)


def measure(label, on_get=None):
    """Rounds of `cycles` polls each: CPU and bytes per poll."""
    out = []
    # A window opens SETTLE after a GET and closes SETTLE after the
    # cycles-th GET after it: it holds exactly `cycles` whole polls.
    n = len(gets(lines))
    watch(lambda: len(gets(lines)) >= n + 1, 30, on_get)
    time.sleep(SETTLE)
    a = snapshot()
    for r in range(rounds):
        n = len(gets(lines[:a["n"]]))
        watch(lambda: len(gets(lines)) >= n + cycles, 30 + 3 * cycles, on_get)
        time.sleep(SETTLE)
        b = snapshot()
        w = lines[a["n"]:b["n"]]
        g, p = gets(w), puts(w)
        if len(g) != cycles:
            fail(f"{label} round {r + 1}: {len(g)} GETs in a window of {cycles} cycles")
        want = 304 if on_get is None else 200
        if any(l["status"] != want for l in g):
            fail(f"{label} round {r + 1}: GET statuses {[l['status'] for l in g]}, want all {want}")
        if on_get is not None and held() != served:
            fail(f"{label} round {r + 1}: the agent holds revision {held()}, the plane served {served}")
        d = {w_: b["cpu"][w_] - a["cpu"][w_] for w_ in agents}
        out.append({
            "cpu_ms": (d["plane"] - d["twin"]) / cycles / 1e6,
            "plane_ms": d["plane"] / cycles / 1e6,
            "twin_ms": d["twin"] / cycles / 1e6,
            "ticks": {w_: b["ticks"][w_] - a["ticks"][w_] for w_ in agents},
            "wall": b["t"] - a["t"],
            "get_bytes": sum(l["req"] + l["sent"] for l in g) / cycles,
            "get_req": sum(l["req"] for l in g) / cycles,
            "get_sent": sum(l["sent"] for l in g) / cycles,
            "body": sum(l["body"] for l in g) / cycles,
            "put_bytes": sum(l["req"] + l["sent"] for l in p) / cycles,
            "puts": len(p),
            "put_total": sum(l["req"] + l["sent"] for l in p),
            # Requests that opened a TCP connection (the rest reused one).
            "new_conns": sum(1 for l in w if l["conn_req"] == 1),
        })
        a = b
    return out


# --- warm-up: the first document, the agents, the poller's first-pass wait
publish(revision)
start("plane")
start("twin")
sys.stderr.write("bench-plane.sh: agents started; the poller waits 30 s for a first pass that never comes\n")
watch(lambda: any(l["status"] == 200 for l in gets(lines)), 60)
end = time.monotonic() + 10
while held() != 1:
    if time.monotonic() > end:
        fail(f"revision 1 not adopted: {api('/v1/plane')}")
    time.sleep(0.1)
# The boot report and the one saying revision 1 are sent; then nothing
# changes while the plane answers 304.
n304 = len([l for l in gets(lines) if l["status"] == 304])
watch(lambda: len([l for l in gets(lines) if l["status"] == 304]) >= n304 + 2, 30)

sys.stderr.write(f"bench-plane.sh: 304 cycles: {rounds} rounds of {cycles}\n")
r304 = measure("304")
sys.stderr.write(f"bench-plane.sh: 100-module document cycles: {rounds} rounds of {cycles}\n")
revision += 1
publish(revision)
rdoc = measure("document", next_revision)
doc_size = os.path.getsize(desired)
for p in agents.values():
    p.terminate()
for p in agents.values():
    p.wait(timeout=10)
open(f"{work}/agent.pids", "w").close()

med = lambda rs, k: statistics.median(r[k] for r in rs)
hz = os.sysconf("SC_CLK_TCK")
def ticks_ms(rs):
    c = rounds * cycles
    return (sum(r["ticks"]["plane"] for r in rs) - sum(r["ticks"]["twin"] for r in rs)) * 1000 / hz / c
json.dump({"r304": r304, "rdoc": rdoc, "doc_size": doc_size,
           "payload_size": os.path.getsize(f"{work}/payload.json"),
           "ticks_ms": {"304": ticks_ms(r304), "doc": ticks_ms(rdoc)},
           "revisions": revision}, sys.stdout)
PY
driver_pid=$!
wait "$driver_pid" || die "the measurement failed"
driver_pid=""
results="$(cat "$work/results.json")"

# --- the report -------------------------------------------------------------
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(/usr/sbin/nginx -v 2>&1 | sed 's/^nginx version: //'), $(date -u +%F)"
libc="static"; ldd "$stead" 2>/dev/null | grep -q 'libc\.so' && libc="glibc"
echo "agent: $stead ($libc, release profile), STEAD_LOG=$LOG_LEVEL, no engine; $ROUNDS rounds of $CYCLES cycles, medians"
python3 - "$results" "$MODULES" <<'PY'
import json, statistics, sys
d = json.loads(sys.argv[1])
modules = int(sys.argv[2])
med = lambda rs, k: statistics.median(r[k] for r in rs)
a, b = d["r304"], d["rdoc"]
print("| cycle | GET: request + response bytes | status PUTs: count, bytes each, bytes per cycle | agent CPU per cycle, less the baseline | the agent's own | the baseline (twin, no plane) |")
print("|---|---|---|---|---|---|")
for name, rs in (("304 (document unchanged)", a), (f"new revision, {modules} modules ({d['doc_size']} B document)", b)):
    puts = sum(r["puts"] for r in rs)
    each = sum(r["put_total"] for r in rs) / puts if puts else 0
    print(f"| {name} | {med(rs, 'get_req'):.0f} + {med(rs, 'get_sent'):.0f} = {med(rs, 'get_bytes'):.0f} B"
          f" | {puts} in {len(rs)} rounds, {each:.0f} B, {med(rs, 'put_bytes'):.0f} B"
          f" | {med(rs, 'cpu_ms'):.3f} ms | {med(rs, 'plane_ms'):.3f} ms | {med(rs, 'twin_ms'):.3f} ms |")
ratio = med(b, "cpu_ms") / med(a, "cpu_ms") if med(a, "cpu_ms") > 0 else float("inf")
print(f"CPU per {modules}-module cycle / CPU per 304 cycle: {ratio:.1f}x")
per_round = lambda rs: ", ".join("%.3f" % r["cpu_ms"] for r in rs)
print(f"per round, ms per cycle: 304 {per_round(a)}; document {per_round(b)}")
print(f"cross-check, /proc/<pid>/stat utime+stime over all rounds (10 ms ticks): 304 {d['ticks_ms']['304']:.2f} ms, document {d['ticks_ms']['doc']:.2f} ms per cycle")
print(f"TCP connections opened in all rounds: 304 {sum(r['new_conns'] for r in a)}, document {sum(r['new_conns'] for r in b)} (the rest reused a kept-alive one)")
PY
