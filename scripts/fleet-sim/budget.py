"""Drives scripts/budget-sim.sh (see its header): a fleet of sites on a
private bucket of moto's S3 server, a group with a site disruption budget,
two revisions, one holder killed.

argv: stead work sites per_site lease poll
Exits 1 when, at any moment, two devices of one site were down at once,
when a device of the dead holder's site went down before its lease ended,
or when a device never took a revision.
"""

import calendar
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

stead, work, sites, per_site, lease, poll = sys.argv[1:7]
sites, per_site, poll = int(sites), int(per_site), int(poll)
lease_s = int(lease.rstrip("s"))
here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))
moto_venv = os.environ["STEAD_MOTO"]
tool = os.environ["STEAD_PLANE"]
run = os.path.basename(work).rsplit(".", 1)[-1].lower()
nodes = [f"b{run}-{i:04d}" for i in range(sites * per_site)]
site_of = {n: f"s-{i // per_site:02d}" for i, n in enumerate(nodes)}
GROUP = "sites"
IMAGE = "stead-test/busybox:1"
failures = []
results = []


def log(msg):
    print(f"budget-sim: {msg}", file=sys.stderr, flush=True)


def fail(msg):
    failures.append(msg)
    log("FAILED: " + msg)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text if isinstance(text, str) else json.dumps(text))


def started(pidfile, p):
    with open(os.path.join(work, pidfile), "a") as f:
        f.write(f"{p.pid}\n")
    return p


# --- moto's S3 server, a key, a bucket ---------------------------------------
port = free_port()
url = f"http://127.0.0.1:{port}"
started("moto.pid", subprocess.Popen(
    [f"{moto_venv}/bin/python", os.path.join(repo, "tests/data/s3/serve.py"),
     "-H", "127.0.0.1", "-p", str(port)],
    stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "moto.log"), "w"),
    env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3"}))
for _ in range(600):
    try:
        socket.create_connection(("127.0.0.1", port), 1).close()
        break
    except OSError:
        time.sleep(0.1)


def moto(*args):
    out = subprocess.run([f"{moto_venv}/bin/python", os.path.join(repo, "tests/data/s3/moto.py"),
                          args[0], url, *args[1:]], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"moto.py {args}: {out.stderr}")
    return out.stdout


key = json.loads(moto("setup"))
key_file = os.path.join(work, "key.json")
write(key_file, key)
creds = os.path.join(work, "credentials")
write(creds, f"[default]\naws_access_key_id = {key['AccessKeyId']}\n"
             f"aws_secret_access_key = {key['SecretAccessKey']}\n")
os.chmod(creds, 0o600)

# --- the engines' stand-in --------------------------------------------------
sockets = os.path.join(work, "engines")
os.makedirs(sockets)
acts_log = os.path.join(work, "acts.jsonl")
write(os.path.join(work, "devices.txt"), "".join(n + "\n" for n in nodes))
started("engine.pid", subprocess.Popen(
    [sys.executable, os.path.join(here, "engine.py"), sockets, os.path.join(work, "devices.txt"),
     acts_log, IMAGE, work]))
for _ in range(600):
    if os.path.exists(os.path.join(sockets, "ready")):
        break
    time.sleep(0.1)
else:
    raise SystemExit("the engine stand-in did not start")


def acts():
    """(time, device, act, version) of every create, start and stop."""
    out = []
    with open(acts_log) as f:
        for line in f:
            try:
                a = json.loads(line)
            except ValueError:
                continue
            out.append((a["t"], a["device"], a.get("act", "create"), a["labels"].get("sim.v")))
    return out


# --- the fleet, published to the bucket --------------------------------------
fleet = os.path.join(work, "fleet")
plane_key = os.path.join(work, "plane.key")
subprocess.run([tool, "keygen", "--out", plane_key], check=True, capture_output=True)
pub = open(plane_key + ".pub").read().strip()
write(os.path.join(fleet, "nodes.csv"), "node,groups\n" + "".join(f"{n},{GROUP}\n" for n in nodes))
write(os.path.join(fleet, "node-defaults.json"),
      {"poll": {"interval": f"{poll}s", "jitter": f"{poll * 200}ms"}})


def publish(v):
    write(os.path.join(fleet, "groups", f"{GROUP}.json"), {
        "modules": [{"name": "app", "image": IMAGE, "command": ["sh", "-c", "exec sleep 100000"],
                     "env": {"V": v}, "restart": "always", "labels": {"sim.v": v}}],
        "budget": {"per": "site", "max_updating": 1, "lease": lease},
    })
    out = subprocess.run([tool, "publish", "--key", plane_key, "--fleet", fleet,
                          "--site", os.path.join(work, "site"), "--upload", "s3://fleet/prod",
                          "--s3-credentials", creds, "--s3-endpoint", url],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"publish: {out.stdout}{out.stderr}")
    return time.time()


publish("1")
agents = {}
for n in nodes:
    d = os.path.join(work, "agents", n)
    os.makedirs(os.path.join(d, "i"))
    write(os.path.join(d, "c.toml"), f"""node_id = "{n}"
data_dir = "data"
intentions_dir = "i"
docker_socket = "unix://{sockets}/{n}.sock"
api_listen = "127.0.0.1:0"
heartbeat = "30s"
settle_window = "3s"

[labels]
site = "{site_of[n]}"

[plane]
url = "{url}/fleet/prod"
trusted_keys = ["{pub}"]
poll_interval = "{poll}s"
s3_credentials = "{creds}"
s3_region = "us-east-1"
""")
    agents[n] = started("agent.pids", subprocess.Popen(
        [stead, "run", "--config", "c.toml"], cwd=d,
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "agent.log"), "w"),
        env={**os.environ, "STEAD_LOG": "warn"}))


def wait(what, limit, f):
    end = time.time() + limit
    while time.time() < end:
        if f():
            return True
        time.sleep(0.5)
    fail(f"timed out: {what}")
    return False


def took(v, since, who=None):
    return {d for t, d, a, cv in acts() if a == "start" and cv == v and t >= since
            and (who is None or d in who)}


t0 = time.time()
if not wait("every device on revision 1", 300 + len(nodes), lambda: len(took("1", 0)) == len(nodes)):
    raise SystemExit(1)
log(f"{len(nodes)} devices up in {time.time() - t0:.0f} s")
results.append(f"{sites} sites of {per_site} devices ({len(nodes)} agents), budget max_updating 1, "
               f"lease {lease}, poll {poll} s, settle window 3 s; the plane a private bucket on "
               "moto's S3 server")


def downs(old, new, since, dead=None):
    """device -> (down from, up at) for the switch from old to new since."""
    out = {}
    for t, d, a, v in acts():
        if t < since:
            continue
        if a == "stop" and v == old and d not in out:
            out[d] = [t, None]
        elif a == "start" and v == new and d in out and out[d][1] is None:
            out[d][1] = t
    return out


def most_at_once(spans):
    """The most spans open at one moment (a start at an end is not both)."""
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def by_site(d):
    by = {}
    for n, span in d.items():
        by.setdefault(site_of[n], []).append(span)
    return by


# --- 1. a new revision, one device of a site at a time -------------------------
t1 = publish("2")
ok = wait("every device on revision 2", 60 + 8 * per_site * lease_s, lambda: len(took("2", t1)) == len(nodes))
d1 = {n: s for n, s in downs("1", "2", t1).items() if s[1] is not None}
worst = max((most_at_once(s) for s in by_site(d1).values()), default=0)
if worst > 1:
    fail(f"revision 2: {worst} devices of one site down at once")
site_time = [max(b for _, b in s) - t1 for s in by_site(d1).values()]
down_time = [b - a for a, b in d1.values()]
results.append(
    f"revision 2: {len(d1)} of {len(nodes)} devices took it, the last {max(b for _, b in d1.values()) - t1:.0f} s "
    f"after the publish; most devices of one site down at once: {worst} (of {per_site}); "
    f"a site done in {statistics.median(site_time):.0f} s on median ({max(site_time):.0f} s at most); "
    f"a device down {statistics.median(down_time) * 1000:.0f} ms on median")

# --- 2. the first holder killed -------------------------------------------------
t2 = publish("3")
dead = None
end = time.time() + 120
while dead is None and time.time() < end:
    for t, d, a, v in acts():
        if t >= t2 and a == "stop" and v == "2":
            dead = d
            break
    else:
        time.sleep(0.05)
if dead is None:
    raise SystemExit("no device went down for revision 3")
agents[dead].send_signal(signal.SIGKILL)
t_kill = time.time()
site = site_of[dead]
key_of = f"prod/leases/{GROUP}/site/{site}/0.json"
held = json.loads(moto("get", key_file, "fleet", key_of))
expires = calendar.timegm(time.strptime(held["expires"], "%Y-%m-%dT%H:%M:%SZ"))
if held["holder"] != dead or held["released"]:
    fail(f"the killed {dead} did not hold {site}'s lease: {held}")
others = {n for n in nodes if site_of[n] == site and n != dead}
wait("the dead holder's site on revision 3", 60 + 8 * per_site * lease_s,
     lambda: len(took("3", t2, others)) == len(others))
wait("every other device on revision 3", 60 + 8 * per_site * lease_s,
     lambda: len(took("3", t2)) >= len(nodes) - 1)
d2 = downs("2", "3", t2)
first_other = min((d2[n][0] for n in others if n in d2), default=None)
if first_other is None:
    fail(f"no other device of {site} went down after the kill")
elif first_other < expires - 1:
    fail(f"a device of {site} went down at {first_other:.1f}, before the dead holder's lease ended at {expires:.0f}")
spans = {n: (s[0], s[1] if n != dead else expires) for n, s in d2.items() if s[1] is not None or n == dead}
worst2 = max((most_at_once(s) for s in by_site(spans).values()), default=0)
if worst2 > 1:
    fail(f"revision 3: {worst2} devices of one site down at once")
results.append(
    f"revision 3, {dead}'s agent killed {t_kill - d2[dead][0]:.2f} s after its module went down: its site "
    f"{site} waited {first_other - t_kill:.1f} s (its lease ended {expires - t_kill:.1f} s after the kill; "
    f"lease {lease}), then {len(took('3', t2, others))} of its {len(others)} other devices took the "
    f"revision; the fleet's other sites: {len(took('3', t2)) - len(took('3', t2, others | {dead}))} of "
    f"{len(nodes) - per_site} devices; most devices of one site down at once: {worst2}"
    if first_other is not None else f"revision 3: {site} did not go on after the kill")

print("\n".join(results))
if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
