"""Publishes revisions, runs the plane agent and its twin, measures bytes and CPU per poll cycle; prints the results as JSON. Run by scripts/bench-plane.sh."""
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
        [os.environ["STEAD_PLANE"], "sign", "--key", f"{work}/plane.key", "--node", node,
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
    """GETs of a document: the node's and its groups'."""
    return [l for l in ls if l["method"] == "GET" and l["uri"].endswith("/desired.json")]


def node_gets(ls):
    """GETs of the node's document: one per poll cycle."""
    return [l for l in gets(ls) if l["uri"].startswith("/nodes/")]


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
        for l in node_gets(lines[processed:]):
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


def measure(label, on_get=None, groups=0):
    """Rounds of `cycles` polls each: CPU and bytes per poll (the node's
    document and its `groups` groups' documents, each a GET)."""
    out = []
    # A window opens SETTLE after a GET and closes SETTLE after the
    # cycles-th GET after it: it holds exactly `cycles` whole polls.
    n = len(node_gets(lines))
    watch(lambda: len(node_gets(lines)) >= n + 1, 30, on_get)
    time.sleep(SETTLE)
    a = snapshot()
    for r in range(rounds):
        n = len(node_gets(lines[:a["n"]]))
        watch(lambda: len(node_gets(lines)) >= n + cycles, 30 + 3 * cycles, on_get)
        time.sleep(SETTLE)
        b = snapshot()
        w = lines[a["n"]:b["n"]]
        g, p = gets(w), puts(w)
        if len(node_gets(w)) != cycles or len(g) != cycles * (1 + groups):
            fail(f"{label} round {r + 1}: {len(node_gets(w))} GETs of the node's document and "
                 f"{len(g) - len(node_gets(w))} of its groups' in a window of {cycles} cycles")
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


def adopted(rev, timeout):
    """Waits for the agent to hold revision `rev`, then for two more 304s:
    the reports saying it are sent, and nothing changes while the plane
    answers 304."""
    end = time.monotonic() + timeout
    while held() != rev:
        if time.monotonic() > end:
            fail(f"revision {rev} not adopted: {api('/v1/plane')}")
        time.sleep(0.1)
    n304 = len([l for l in node_gets(lines) if l["status"] == 304])
    watch(lambda: len([l for l in node_gets(lines) if l["status"] == 304]) >= n304 + 2, 30)


adopted(1, 10)

sys.stderr.write(f"bench-plane.sh: 304 cycles: {rounds} rounds of {cycles}\n")
r304 = measure("304")
sys.stderr.write(f"bench-plane.sh: 100-module document cycles: {rounds} rounds of {cycles}\n")
revision += 1
publish(revision)
rdoc = measure("document", next_revision)
doc_size = os.path.getsize(desired)

# --- the same 100 modules from one group: `stead plane publish` of a fleet
# whose one node is in group "bench" (the modules) and has none of its own;
# each poll GETs the node's document and the group's.
fleet = f"{work}/fleet"
os.makedirs(f"{fleet}/groups", exist_ok=True)
with open(f"{work}/payload.json") as f:
    payload = json.load(f)
with open(f"{fleet}/groups/bench.json", "w") as f:
    json.dump({"modules": payload["modules"]}, f)
with open(f"{fleet}/node-defaults.json", "w") as f:
    json.dump({"poll": payload["poll"]}, f)
with open(f"{fleet}/nodes.csv", "w") as f:
    f.write(f"node,groups\n{node},bench\n")
r = subprocess.run([os.environ["STEAD_PLANE"], "publish", "--key", f"{work}/plane.key", "--fleet", fleet,
                    "--site", f"{work}/root"], capture_output=True, text=True)
if r.returncode != 0:
    fail(f"stead plane publish: {r.stderr.strip()}")
group_doc = f"{work}/root/groups/bench/desired.json"
node_rev = json.loads(__import__("base64").b64decode(json.load(open(desired))["payload"]))["revision"]
adopted(node_rev, 30)
sys.stderr.write(f"bench-plane.sh: 304 cycles with one group: {rounds} rounds of {cycles}\n")
rgroup = measure("304 with a group", groups=1)
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
json.dump({"r304": r304, "rdoc": rdoc, "rgroup": rgroup, "doc_size": doc_size,
           "group_size": os.path.getsize(group_doc), "grouped_node_size": os.path.getsize(desired),
           "payload_size": os.path.getsize(f"{work}/payload.json"),
           "ticks_ms": {"304": ticks_ms(r304), "doc": ticks_ms(rdoc), "group": ticks_ms(rgroup)},
           "revisions": revision}, sys.stdout)
