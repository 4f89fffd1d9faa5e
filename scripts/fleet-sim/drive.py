"""Drives scripts/fleet-sim.sh's fleet: publishes, starts the agents,
rolls revisions out, watches, and measures (see the script's header).

argv: stead work port devices poll window quiet [check]
With `check`, the properties below are asserted and a failed one exits 1.
They are behaviour and order, never a wall-clock bound (a loaded machine
stretches every delay; how long each step took is the benchmark's report,
printed either way): every device takes a rollout, none before its turn
(less a second of clock granularity); the watcher halts the bad revision,
after 5 % of at least 10 devices on it failed and before the whole fleet
took it; once every device reports the halting revision, none takes the
bad revision any more; the revert brings every device back.
"""

import base64
import calendar
import hashlib
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

stead, work, port, devices, poll, window, quiet = sys.argv[1:8]
devices, poll, window, quiet = int(devices), int(poll), int(window), int(quiet)
check = len(sys.argv) > 8 and sys.argv[8] == "check"
phases = set(os.environ.get("STEAD_SIM_PHASES", "rollout,quiet").split(","))
# The classes phase: devices of two architectures (a label, `cpu`: this
# machine has one) and two engines (the stand-in says Docker or Podman).
CLASSES = [(cpu, engine) for engine in ("docker", "podman") for cpu in ("arm64", "amd64")]


def class_of(i):
    return CLASSES[i % len(CLASSES)]
broker = os.environ.get("STEAD_SIM_BROKER", "")
if "nudge" in phases and not broker:
    raise SystemExit("the nudge phase needs STEAD_SIM_BROKER")
here = os.path.dirname(os.path.abspath(__file__))
run = os.path.basename(work)
prefix = "sim" + run.rsplit(".", 1)[-1].lower()
nodes = [f"{prefix}-{i:04d}" for i in range(devices)]
base = f"http://127.0.0.1:{port}"
root = os.path.join(work, "root")
fleet = os.path.join(work, "fleet")
group = "sim"
IMAGE = "stead-test/busybox:1"
# A pass follows a poll that changed something within a second; the
# engine's create within another.
SLACK = 3
# A report goes at most once every 10 s; the watcher runs every 2 s; a
# crash loop is judged after the engine's restarts (100 ms doubling) and a
# pass.
REPORT, WATCH, JUDGE = 10, 2, 8
# The bad revision fails on this share of devices.
FAILS = 20
failures = []


def log(msg):
    print(f"fleet-sim: {msg}", file=sys.stderr, flush=True)


def fail(msg):
    failures.append(msg)
    log("CHECK FAILED: " + msg)


def plane(*args):
    out = subprocess.run([os.environ["STEAD_PLANE"], *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"stead plane {args}: {out.stdout}{out.stderr}")
    return out.stdout


def module(v, fails=0):
    env = {"V": v}
    if fails:
        env["SIM_FAILS"] = str(fails)
    return {
        "name": "app",
        "image": IMAGE,
        "command": ["sh", "-c", "echo V=$V; exec sleep 100000"],
        "env": env,
        "restart": "always",
        "labels": {"sim.run": run, "sim.v": v},
    }


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        if isinstance(value, str):
            f.write(value)
        else:
            json.dump(value, f)


def publish():
    return plane("publish", "--key", key, "--fleet", fleet, "--site", root)


def published_group():
    with open(os.path.join(root, "groups", group, "desired.json"), "rb") as f:
        env = json.load(f)
    return json.loads(base64.b64decode(env["payload"]))


def published_group_revision():
    return published_group()["revision"]


def reported(node):
    """The device's last report (None before one)."""
    try:
        with open(os.path.join(root, "nodes", node, "status.json")) as f:
            r = json.load(f)
        # A report is signed by its device: its payload is the report.
        if "payloadType" in r:
            r = json.loads(base64.b64decode(r["payload"]))
    except (OSError, ValueError, KeyError):
        return None
    return r


def reported_revision(node):
    """The group's revision the device last reported holding (0 before)."""
    for g in ((reported(node) or {}).get("plane") or {}).get("groups") or []:
        if g.get("group") == group:
            return g.get("revision") or 0
    return 0


def reported_facts(node):
    """The facts the device last reported (None before)."""
    return (reported(node) or {}).get("facts")


def position(node, salt):
    d = hashlib.sha256(salt.encode() + b"\0" + node.encode()).digest()
    return int.from_bytes(d[:8], "big")


def turn(node, start, duration, salt):
    return start + -(-position(node, salt) * duration // (1 << 64))


def rfc3339(s):
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


# --- the engine stand-in and its record of creates ---------------------------
sockets = os.path.join(work, "engines")
os.makedirs(sockets)
creates_log = os.path.join(work, "creates.jsonl")
write(os.path.join(work, "devices.txt"),
      "".join(n + ("\tpodman" if "classes" in phases and class_of(i)[1] == "podman" else "") + "\n"
              for i, n in enumerate(nodes)))
engine = subprocess.Popen([sys.executable, os.path.join(here, "engine.py"), sockets,
                           os.path.join(work, "devices.txt"), creates_log, IMAGE, work])
with open(os.path.join(work, "engine.pid"), "w") as f:
    f.write(str(engine.pid))
for _ in range(300):
    if os.path.exists(os.path.join(sockets, "ready")) or engine.poll() is not None:
        break
    time.sleep(0.1)
if not os.path.exists(os.path.join(sockets, "ready")):
    raise SystemExit("the engine stand-in did not start")


def creates():
    """Every create so far: (time, device, version, fails)."""
    out = []
    try:
        with open(creates_log) as f:
            for line in f:
                try:
                    c = json.loads(line)
                except ValueError:
                    continue
                if "act" in c:
                    continue
                out.append((c["t"], c["device"], c["labels"].get("sim.v"), c["fails"]))
    except FileNotFoundError:
        pass
    return out


def took(v, since):
    """device -> when it first created a container of version v after since."""
    out = {}
    for t, n, cv, _ in creates():
        if cv == v and t >= since and (n not in out or t < out[n]):
            out[n] = t
    return out


def listed(node):
    """The containers the device's engine has."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(sockets, node + ".sock"))
    s.sendall(b"GET /containers/json?all=1 HTTP/1.1\r\nHost: sim\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def wait_until(what, limit, f):
    end = time.time() + limit
    while time.time() < end:
        if f():
            return True
        time.sleep(0.5)
    log(f"timed out: {what}")
    return False


# --- the fleet --------------------------------------------------------------
key = os.path.join(work, "plane.key")
plane("keygen", "--out", key)
with open(key + ".pub") as f:
    pub = f.read().strip()
write(os.path.join(fleet, "groups", f"{group}.json"), {"modules": [module("1")]})
write(os.path.join(fleet, "nodes.csv"), "node,groups\n" + "".join(f"{n},{group}\n" for n in nodes))
write(os.path.join(fleet, "node-defaults.json"),
      {"poll": {"interval": f"{poll}s", "jitter": f"{max(poll * 100, 100)}ms"}})
publish()

pids = []
for i, n in enumerate(nodes):
    d = os.path.join(work, "agents", n)
    os.makedirs(os.path.join(d, "i"))
    labels = f'labels = {{ cpu = "{class_of(i)[0]}" }}\n' if "classes" in phases else ""
    write(os.path.join(d, "c.toml"), labels + f"""node_id = "{n}"
data_dir = "data"
intentions_dir = "i"
docker_socket = "unix://{sockets}/{n}.sock"
api_listen = "127.0.0.1:0"
heartbeat = "30s"

[plane]
url = "{base}"
trusted_keys = ["{pub}"]
poll_interval = "{poll}s"
""" + (f"""
[plane.nudge]
broker = "mqtt://127.0.0.1:{broker}"
""" if broker else ""))
    out = open(os.path.join(d, "agent.log"), "w")
    p = subprocess.Popen([stead, "run", "--config", "c.toml"], cwd=d, stdout=out, stderr=out,
                         env={**os.environ, "STEAD_LOG": "warn"})
    pids.append(p)
    # The script's cleanup ends every agent started, whatever ends this.
    with open(os.path.join(work, "agent.pids"), "a") as f:
        f.write(f"{p.pid}\n")
t_start = time.time()
if not wait_until("every device running revision 1", 120 + devices, lambda: len(took("1", 0)) == devices):
    raise SystemExit(f"only {len(took('1', 0))} of {devices} devices started")
log(f"{devices} devices up in {time.time() - t_start:.0f} s")
time.sleep(2 * poll)


def running_fraction(v):
    up = 0
    for n in nodes:
        up += any(c["State"] == "running" and c["Labels"].get("sim.v") == v and c["Names"] == ["/stead-app"]
                  for c in listed(n))
    return up / devices


results = []


def say(line):
    results.append(line)


say(f"devices {devices}, poll interval {poll} s, rollout window {window} s"
    + (f", each subscribed to one MQTT broker" if broker else ""))

# --- 0. classes: a group per class of device, each device takes its own ----------
def cls_name(c):
    return f"cls-{c[0]}-{c[1]}"


if "classes" in phases:
    for c in CLASSES:
        write(os.path.join(fleet, "groups", f"{cls_name(c)}.json"),
              {"modules": [{**module(cls_name(c)), "name": "cls"}],
               "when": {"labels": {"cpu": c[0]}, "engine": c[1]}})
    write(os.path.join(fleet, "nodes.csv"), "node,groups\n" + "".join(
        f"{n},{group} {' '.join(cls_name(c) for c in CLASSES)}\n" for n in nodes))
    t_cls = time.time()
    publish()

    def class_creates(since):
        """device -> the class versions it created since."""
        out = {}
        for t, n, v, _ in creates():
            if t >= since and v and v.startswith("cls-"):
                out.setdefault(n, []).append(v)
        return out

    wait_until("every device on its class's module", 4 * poll + 60 + devices // 10,
               lambda: len(class_creates(t_cls)) == devices)
    # One class's new revision: only its devices take it.
    moved = CLASSES[0]
    write(os.path.join(fleet, "groups", f"{cls_name(moved)}.json"),
          {"modules": [{**module(cls_name(moved) + "-2"), "name": "cls"}],
           "when": {"labels": {"cpu": moved[0]}, "engine": moved[1]}})
    t_cls2 = time.time()
    publish()
    ones = sum(1 for i in range(devices) if class_of(i) == moved)
    wait_until("the class's devices on its new revision", 4 * poll + 60 + devices // 10,
               lambda: sum(1 for v in class_creates(t_cls2).values() if cls_name(moved) + "-2" in v) == ones)
    time.sleep(poll + SLACK)
    made = class_creates(t_cls)
    wrong = 0
    for i, n in enumerate(nodes):
        mine = cls_name(class_of(i))
        for v in made.get(n, []):
            if v not in (mine, mine + "-2") or (v == mine + "-2" and class_of(i) != moved):
                wrong += 1
                fail(f"{n} ({mine}) installed {v}")
        if mine not in made.get(n, []):
            fail(f"{n} never installed its class's module {mine}")
    counts = {cls_name(c): sum(1 for i in range(devices) if class_of(i) == c) for c in CLASSES}
    say(f"classes ({', '.join(f'{k}: {v}' for k, v in counts.items())}; each node lists the four "
        f"groups, each group's when names a cpu label and an engine): {len(made)} of {devices} devices "
        f"installed their class's module, {wrong} installs on the wrong class; one class's new revision "
        f"reached {sum(1 for v in class_creates(t_cls2).values() if cls_name(moved) + '-2' in v)} devices "
        f"(its {ones})")
    # The roll-up counts the devices by their facts.
    log(plane("enroll", "--fleet", fleet, "--reports", root).strip().splitlines()[-1])
    wait_until("every device reporting its facts", 4 * REPORT + 60, lambda: all(
        reported_facts(n) is not None for n in nodes))
    status = json.loads(plane("status", "--reports", root, "--fleet", fleet, "--json"))
    say(f"roll-up of the facts: {json.dumps(status.get('facts'))}")


if "rollout" in phases:
    # --- 1. a good rollout ----------------------------------------------------------
    write(os.path.join(fleet, "groups", f"{group}.json"),
          {"modules": [module("2")], "rollout": {"duration": f"{window}s"}})
    t0 = time.time()
    publish()
    g = published_group()
    start, salt = rfc3339(g["rollout"]["start"]), g["rollout"]["salt"]
    wait_until("the good rollout everywhere", window + 4 * poll + 60, lambda: len(took("2", t0)) == devices)
    taken = took("2", t0)
    late = []
    # Devices later than a poll and a pass after their turn: a figure of the
    # report, not a check (a loaded machine makes any device late).
    slow = []
    for n in nodes:
        if n not in taken:
            fail(f"{n} never took revision 2")
            continue
        t = turn(n, start, window, salt)
        lateness = taken[n] - t
        late.append(lateness)
        if lateness < -1:
            fail(f"{n} took revision 2 {-lateness:.1f} s before its turn")
        if lateness > poll + SLACK:
            slow.append(n)
    if late:
        done = max(taken.values()) - start
        say(f"good rollout: 100 % at {done:.1f} s of a {window} s window "
            f"(planned {window} s ± a {poll} s poll); lateness after each device's turn: "
            f"median {statistics.median(late):.1f} s, max {max(late):.1f} s, min {min(late):.1f} s; "
            f"{len(slow)} later than a poll and {SLACK} s")
        spread = []
        for q in (0.1, 0.25, 0.5, 0.75, 0.9):
            by = sum(1 for n in taken if taken[n] <= start + q * window + poll) / devices
            exp = sum(1 for n in nodes if position(n, salt) / 2**64 <= q) / devices
            spread.append(f"{int(q * 100)} %: {by * 100:.0f} % (hash {exp * 100:.0f} %)")
        say("cohorts taken by each point of the window (+ a poll): " + ", ".join(spread))

    # --- 2. a bad rollout, watched --------------------------------------------------
    # Checked, the window is long enough that the halt comes before the whole
    # fleet took the revision on a loaded machine too (the watcher needs 10
    # devices on it); measured, the figures of docs/fleet.md's runs.
    bad_window = (6 if check else 4) * window
    # The watcher counts only reports signed by their devices' enrolled keys:
    # every device has reported by now (the good rollout), and is enrolled.
    log(plane("enroll", "--fleet", fleet, "--reports", root).strip().splitlines()[-1])
    write(os.path.join(fleet, "groups", f"{group}.json"),
          {"modules": [module("bad", fails=FAILS)], "rollout": {"duration": f"{bad_window}s"}})
    t1 = time.time()
    publish()
    halted_at = None
    end = time.time() + bad_window + 60
    while time.time() < end:
        out = plane("rollout", "watch", "--key", key, "--reports", root, "--fleet", fleet, "--site", root)
        if "halted group" in out:
            halted_at = time.time()
            log(out.strip())
            break
        time.sleep(WATCH)


    def crossing(since):
        """When the devices on the bad revision first were at least 10, at
        least 5 % of them failing (from the engine's record), and how many."""
        first = {}
        for t, n, v, fails in creates():
            if v == "bad" and t >= since and n not in first:
                first[n] = (t, fails)
        on = failing = 0
        for t, fails in sorted(first.values()):
            on += 1
            failing += fails
            if on >= 10 and failing * 1000 >= 50 * on:
                return t, on, failing
        return None


    if halted_at is None:
        fail("the watcher never halted the bad revision")
    else:
        crossed = crossing(t1)
        # Devices keep taking until they see the halt. Once every device has
        # reported the halting revision (a report follows the adoption), none
        # may take it after: an order, whatever the machine's load.
        halting = published_group_revision()
        if not wait_until("every device reporting the halting revision", 4 * poll + 4 * REPORT + 120,
                          lambda: all(reported_revision(n) >= halting for n in nodes)):
            fail(f"{sum(reported_revision(n) < halting for n in nodes)} devices never reported "
                 f"the halting revision {halting}")
        all_seen = time.time()
        time.sleep(poll + 2 * SLACK)
        bad = took("bad", t1)
        after = [n for n, t in bad.items() if t > all_seen]
        if after:
            fail(f"{len(after)} devices took the bad revision after they reported the halt")
        late_takers = [n for n, t in bad.items() if t > halted_at + poll + SLACK]
        if len(bad) >= devices:
            fail("every device took the bad revision before the halt")
        failing = len({n for t, n, v, f in creates() if v == "bad" and t >= t1 and f})
        if crossed is None:
            fail("the watcher halted before 5 % of at least 10 devices on the bad revision failed")
        else:
            latency = halted_at - crossed[0]
            bound = poll + REPORT + WATCH + JUDGE
            over = f" (over the expected {bound} s)" if latency > bound else ""
            say(f"bad rollout (fails on {FAILS} % of devices): 5 % of at least 10 crossed "
                f"{crossed[0] - t1:.1f} s into a {bad_window} s window ({crossed[2]} of {crossed[1]} failing); "
                f"halted {latency:.1f} s later{over} (a poll {poll} s + a report interval {REPORT} s + the watch "
                f"period {WATCH} s + judging a crash loop); {len(bad)} of {devices} devices "
                f"({100 * len(bad) / devices:.0f} %) took it, {failing} failing, "
                f"{len(late_takers)} of them more than a poll and {SLACK} s after the halt")
        # The revert: every device on the good modules again.
        write(os.path.join(fleet, "groups", f"{group}.json"),
              {"modules": [module("bad", fails=FAILS)],
               "rollout": {"duration": f"{bad_window}s", "halt": True, "revert": True}})
        t2 = time.time()
        publish()
        back = lambda: set(took("2", t2)) >= set(bad)
        if not wait_until("the revert", 4 * poll + 60, back):
            fail(f"{len(set(bad) - set(took('2', t2)))} devices not back after the revert")
        else:
            last = max([t for n, t in took("2", t2).items() if n in bad], default=t2)
            say(f"revert: the {len(bad)} devices back on revision 2's modules {last - t2:.1f} s after the publish")
        if not wait_until("every device running revision 2", 60, lambda: running_fraction("2") == 1.0):
            fail(f"{running_fraction('2') * 100:.0f} % of devices run revision 2 after the revert")

# --- 3. a quiet minute: the plane's traffic, the agents' CPU ---------------------
def cpu():
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


if "quiet" in phases:
    time.sleep(2 * poll)
    with open(os.path.join(work, "access.log")) as f:
        f.seek(0, 2)
        mark = f.tell()
    c0, q0 = cpu(), time.time()
    time.sleep(quiet)
    c1, q1 = cpu(), time.time()
    gets = cycles = get_bytes = puts = put_bytes = 0
    by_status = {}
    with open(os.path.join(work, "access.log")) as f:
        f.seek(mark)
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 6 or not (q0 <= float(parts[0]) <= q1):
                continue
            size = int(parts[4]) + int(parts[5])
            if parts[1] == "GET":
                gets += 1
                get_bytes += size
                # A poll cycle starts with the node's document.
                cycles += parts[2].startswith("/nodes/")
            else:
                puts += 1
                put_bytes += size
            by_status[parts[3]] = by_status.get(parts[3], 0) + 1
    span = q1 - q0
    per_cycle = get_bytes / max(cycles, 1)
    gets_per_cycle = gets / max(cycles, 1)
    say(f"quiet {quiet} s: {cycles / devices / span * poll:.2f} poll cycles per device per {poll} s "
        f"(the poll's jitter lengthens them), {gets_per_cycle:.2f} GETs each (its document and its groups'), "
        f"{per_cycle:.0f} bytes each; {puts} report PUTs ({put_bytes} B) from {devices} devices; "
        f"statuses {', '.join(f'{k}: {v}' for k, v in sorted(by_status.items()))}")
    for interval, name in ((900, "15 min (the default)"), (60, "1 min")):
        per_day = per_cycle * 86400 / interval
        rps = 1000 / interval * gets_per_cycle
        say(f"at a {name} poll: {per_day / 1024:.0f} KiB per device per day of polls; "
            f"{rps:.2f} requests/s per 1,000 devices, {rps * 10:.1f} per 10k, {rps * 100:.0f} per 100k, "
            f"{rps * 1000:.0f} per 1M; {per_cycle * 1000 / interval * 8 / 1000:.2f} kbit/s per 1,000 devices")
    with open(os.path.join(work, "access.log")) as f:
        put_sizes = [int(p[4]) + int(p[5]) for p in (l.rstrip("\n").split("\t") for l in f)
                     if len(p) >= 6 and p[1] == "PUT"]
    if put_sizes:
        say(f"reports over the whole run: {len(put_sizes)} PUTs ({len(put_sizes) / devices:.1f} per device), "
            f"median {statistics.median(put_sizes):.0f} B each (a device with one module; one a day when nothing changes)")
    say(f"agents' CPU over the quiet {quiet} s: {(c1 - c0) / devices / span * 1000:.2f} ms per device per second "
        f"({(c1 - c0) / max(cycles, 1) * 1000:.2f} ms per poll cycle, heartbeat passes every 30 s included)")


# --- 4. a nudge: an hour's poll, one hint --------------------------------------
def node_fetches(since):
    """device -> when it last fetched its node document whole (200) after since."""
    out = {}
    with open(os.path.join(work, "access.log")) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 6 or parts[1] != "GET" or parts[3] != "200" or float(parts[0]) < since:
                continue
            segs = parts[2].split("/")
            if len(segs) == 4 and segs[1] == "nodes" and segs[3] == "desired.json":
                out[segs[2]] = float(parts[0])
    return out


def broker_rss():
    try:
        with open(f"/proc/{os.environ.get('STEAD_SIM_BROKER_PID', '')}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


if "nudge" in phases:
    # The node documents' poll becomes an hour: after its next poll at the
    # interval it runs on, a device asks the host again only in an hour or
    # when nudged.
    write(os.path.join(fleet, "node-defaults.json"), {"poll": {"interval": "1h", "jitter": "1s"}})
    t_hour = time.time()
    publish()
    if not wait_until("every device on the hour's poll", 4 * poll + 60 + devices // 10,
                      lambda: len(node_fetches(t_hour)) == devices):
        fail(f"{devices - len(node_fetches(t_hour))} devices never fetched the hour's poll")
    # The pass that follows each adoption.
    time.sleep(SLACK)
    write(os.path.join(fleet, "groups", f"{group}.json"), {"modules": [module("n")]})
    t_pub = time.time()
    publish()
    nudged = published_group_revision()
    # Without a nudge nobody would take it for an hour; a few seconds show
    # that no device polls.
    time.sleep(2 * poll)
    early = took("n", t_pub)
    if early:
        fail(f"{len(early)} devices took the nudged revision before the hint, on an hour's poll")
    # Every agent subscribed: the broker's own count ($SYS, every 2 s).
    def subscribers():
        out = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", broker, "-C", "1", "-W", "10",
                              "-t", "$SYS/broker/clients/connected"], capture_output=True, text=True)
        try:
            return int(out.stdout.strip())
        except ValueError:
            return 0
    if not wait_until("every agent subscribed", 60, lambda: subscribers() >= devices):
        fail(f"only {subscribers()} of {devices} agents are connected to the broker")
    hint = json.dumps({"group": group, "revision": nudged})
    t_hint = time.time()
    subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", broker, "-t", "stead/nudge", "-m", hint],
                   check=True)
    # The default jitter is 30 s; a loaded machine stretches the pass.
    wait_until("every device on the nudged revision", 30 + 4 * SLACK + 60 + devices // 10,
               lambda: len(took("n", t_pub)) == devices)
    after = sorted(t - t_hint for t in took("n", t_pub).values())
    if len(after) < devices:
        fail(f"{devices - len(after)} of {devices} devices never took the nudged revision")
    if after:
        def at(q):
            return after[min(len(after) - 1, math.ceil(q * devices) - 1)]
        within = sum(1 for t in after if t <= 60)
        gets = [p for p in (l.rstrip("\n").split("\t") for l in open(os.path.join(work, "access.log")))
                if len(p) >= 6 and p[1] == "GET" and float(p[0]) >= t_hint]
        rss = broker_rss()
        say(f"nudged (poll 1 h, jitter 30 s, one hint {hint}): {within} of {devices} devices took the "
            f"revision within 60 s of the hint; 50 % at {at(0.5):.1f} s, 90 % at {at(0.9):.1f} s, "
            + (f"100 % at {after[-1]:.1f} s" if len(after) == devices else f"{len(after)} in all")
            + f"; {len(gets)} GETs after the hint ({len(gets) / devices:.2f} per device)"
            + (f"; the broker's RSS {rss / 1048576:.1f} MiB for {devices} subscribers" if rss else ""))

for p in pids:
    p.terminate()
for p in pids:
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
engine.terminate()
print("\n".join(results))
if failures:
    print("checks failed:\n  " + "\n  ".join(failures[:20]))
    sys.exit(1 if check else 0)
