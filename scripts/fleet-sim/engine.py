"""The fleet simulation's engine stand-in: one process answering, on one
unix socket per simulated device, the part of the Docker Engine API that
stead speaks (engine/docker.rs), each socket an engine of its own. Many
agents cannot share one real engine when they run the same group module:
a module's container is named stead-<module> whichever node runs it.

What it does, as the Docker Engine does it:
- containers are created, started, stopped, killed, renamed and removed,
  each act with its event (create, start, kill, die with its exitCode,
  stop, rename, destroy), listed and inspected with the fields stead reads
  (names, labels, state, status line "Up 5 seconds", image ID, created,
  restart count, started/finished times, exit code);
- a container whose command ends in `exit N` (sh -c 'exit 3') dies at once
  with N, and so does one whose environment has SIM_FAILS=<percent> on
  that share of the devices, spread evenly over the devices file (device i
  fails when floor((i+1)p/100) > floor(ip/100)) with 3: a revision that
  fails on some devices only; any other runs until it is stopped;
- restart policies always, unless-stopped and on-failure restart a
  container that died by itself after a back-off that starts at 100 ms
  and doubles (reset after 10 s up, at most a minute), counting restarts;
  a container stopped through the API is not restarted;
- the event stream replays from `since` and then follows, close-delimited,
  with the `type` and `event` filters applied (each socket is one node, so
  the label filter is met by every container);
- one image, the one named on the command line, is there; a pull of it
  succeeds, of any other fails; creating from any other is 404.
- a device whose line in the devices file says `podman` after a tab is
  Podman's Docker-compatible service (its version names the component
  `Podman Engine` 4.3.1; the others say Docker 26.1.5), whose health
  filter lists nothing (no container here has a health check).
What it does not do: run anything, networks, volumes, health checks, logs.

Every create is appended to a log as one JSON line (time, device, name,
labels, whether it fails), the simulation's record of when each device
took what; so is each start and each stop of a running container, with
`act` (`start`, `stop`): when each device's module was down.

argv: SOCKET_DIR DEVICES_FILE CREATES_LOG IMAGE DATA_ROOT
Listens on SOCKET_DIR/<device>.sock for each line of DEVICES_FILE, then
writes SOCKET_DIR/ready.
"""

import asyncio
import hashlib
import json
import os
import re
import sys
import time
import urllib.parse

socket_dir, devices_file, creates_log, image_ref, data_root = sys.argv[1:6]
IMAGE_ID = "sha256:" + hashlib.sha256(image_ref.encode()).hexdigest()
ZERO_TIME = "0001-01-01T00:00:00Z"
log_file = open(creates_log, "a", buffering=1)
counter = 0


def rfc3339(t):
    whole = int(t)
    ns = int(round((t - whole) * 1e9))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{ns:09d}Z"


def ago(seconds):
    s = int(seconds)
    if s < 1:
        return "Less than a second"
    if s < 60:
        return f"{s} seconds"
    if s < 120:
        return "About a minute"
    if s < 3600:
        return f"{s // 60} minutes"
    if s < 7200:
        return "About an hour"
    return f"{s // 3600} hours"


class Container:
    def __init__(self, cid, name, body, index):
        self.id = cid
        self.name = name
        self.labels = body.get("Labels") or {}
        self.image = body.get("Image") or ""
        self.cmd = body.get("Cmd") or []
        host = body.get("HostConfig") or {}
        self.policy = ((host.get("RestartPolicy") or {}).get("Name") or "no")
        m = re.search(r"(?:^|;|\s)exit (\d+)\s*$", " ".join(self.cmd))
        self.crash = int(m.group(1)) if m else None
        env = dict(e.split("=", 1) for e in (body.get("Env") or []) if "=" in e)
        p = int(env["SIM_FAILS"]) if env.get("SIM_FAILS", "").isdigit() else 0
        if self.crash is None and (index + 1) * p // 100 > index * p // 100:
            self.crash = 3
        self.created = time.time()
        self.state = "created"
        self.started = None
        self.finished = None
        self.exit_code = 0
        self.restart_count = 0
        self.by_hand = False
        self.backoff = 0.1
        self.pending = None


class Engine:
    """One device's engine."""

    def __init__(self, device, index, podman=False):
        self.device = device
        self.index = index
        self.podman = podman
        self.containers = {}
        self.events = []
        self.listeners = []

    def emit(self, c, action, extra=None):
        now = time.time()
        attrs = dict(c.labels)
        attrs.update({"name": c.name, "image": c.image})
        if extra:
            attrs.update(extra)
        e = {"Type": "container", "Action": action, "status": action, "id": c.id,
             "from": c.image, "Actor": {"ID": c.id, "Attributes": attrs},
             "scope": "local", "time": int(now), "timeNano": int(now * 1e9)}
        self.events.append(e)
        if len(self.events) > 2000:
            del self.events[:1000]
        for q in self.listeners:
            q.put_nowait(e)

    def find(self, ref):
        ref = urllib.parse.unquote(ref)
        if ref in self.containers:
            return self.containers[ref]
        for c in self.containers.values():
            if c.name == ref or c.name == ref.lstrip("/"):
                return c
        hits = [c for c in self.containers.values() if c.id.startswith(ref)]
        return hits[0] if len(hits) == 1 else None

    def start(self, c):
        if c.pending:
            c.pending.cancel()
            c.pending = None
        c.state = "running"
        c.started = time.time()
        c.by_hand = False
        self.emit(c, "start")
        self.note(c, "start")
        if c.crash is not None:
            asyncio.get_running_loop().call_later(0.05, self.died, c, c.started, c.crash)

    def died(self, c, started, code):
        """The container's process ended by itself."""
        if c.state != "running" or c.started != started or c.id not in self.containers:
            return
        c.finished = time.time()
        c.exit_code = code
        self.emit(c, "die", {"exitCode": str(code)})
        restart = c.policy in ("always", "unless-stopped") or (c.policy == "on-failure" and code != 0)
        if not restart:
            c.state = "exited"
            return
        if c.finished - started >= 10:
            c.backoff = 0.1
        c.state = "restarting"
        delay = c.backoff
        c.backoff = min(c.backoff * 2, 60)
        c.pending = asyncio.get_running_loop().call_later(delay, self.restart, c)

    def restart(self, c):
        c.pending = None
        if c.state != "restarting" or c.id not in self.containers:
            return
        c.restart_count += 1
        self.start(c)

    def stop(self, c, signal_code=143):
        if c.pending:
            c.pending.cancel()
            c.pending = None
        was = c.state
        c.by_hand = True
        if was == "running":
            self.emit(c, "kill", {"signal": "15"})
            c.finished = time.time()
            c.exit_code = signal_code
            self.emit(c, "die", {"exitCode": str(signal_code)})
        c.state = "exited" if was != "created" else "created"
        if was in ("running", "restarting"):
            self.emit(c, "stop")
            self.note(c, "stop")
        return was in ("running", "restarting")

    def note(self, c, act):
        log_file.write(json.dumps({"t": time.time(), "device": self.device, "act": act,
                                   "name": c.name, "labels": c.labels}) + "\n")

    def status_line(self, c):
        now = time.time()
        if c.state == "running":
            return "Up " + ago(now - c.started)
        if c.state == "restarting":
            return f"Restarting ({c.exit_code}) {ago(now - c.finished)} ago"
        if c.state == "exited":
            return f"Exited ({c.exit_code}) {ago(now - c.finished)} ago"
        return "Created"

    def listed(self, c):
        return {"Id": c.id, "Names": ["/" + c.name], "Image": c.image, "ImageID": IMAGE_ID,
                "Command": " ".join(c.cmd), "Created": int(c.created), "Labels": c.labels,
                "State": c.state, "Status": self.status_line(c), "Mounts": []}

    def inspected(self, c):
        return {"Id": c.id, "Name": "/" + c.name, "Image": IMAGE_ID, "RestartCount": c.restart_count,
                "Created": rfc3339(c.created),
                "State": {"Status": c.state, "Running": c.state == "running",
                          "Restarting": c.state == "restarting", "ExitCode": c.exit_code,
                          "StartedAt": rfc3339(c.started) if c.started else ZERO_TIME,
                          "FinishedAt": rfc3339(c.finished) if c.finished else ZERO_TIME},
                "Config": {"Labels": c.labels, "Image": c.image, "Cmd": c.cmd},
                "HostConfig": {"NetworkMode": "bridge", "RestartPolicy": {"Name": c.policy}},
                "NetworkSettings": {"Networks": {"bridge": {}}}}


def answer(status, value=None, raw=None):
    body = raw if raw is not None else (b"" if value is None else json.dumps(value).encode())
    reason = {200: "OK", 201: "Created", 204: "No Content", 304: "Not Modified", 400: "Bad Request",
              404: "Not Found", 409: "Conflict", 500: "Internal Server Error",
              501: "Not Implemented"}.get(status, "Status")
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode() + body


def refused(status, message):
    return answer(status, {"message": message})


async def read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = b""
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
    return method, target, body


async def follow(engine, query, writer):
    """The event stream: the past from `since`, then what comes."""
    since = float(query.get("since", ["0"])[0] or 0)
    wanted = None
    try:
        filters = json.loads(query.get("filters", ["{}"])[0] or "{}")
        if filters.get("event"):
            wanted = set(filters["event"])
    except ValueError:
        pass
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
    q = asyncio.Queue()
    engine.listeners.append(q)
    try:
        for e in list(engine.events):
            if e["timeNano"] / 1e9 >= since and (wanted is None or e["Action"] in wanted):
                writer.write(json.dumps(e).encode() + b"\n")
        await writer.drain()
        while True:
            e = await q.get()
            if wanted is None or e["Action"] in wanted:
                writer.write(json.dumps(e).encode() + b"\n")
                await writer.drain()
    finally:
        engine.listeners.remove(q)


def route(engine, method, path, query, body):
    global counter
    if path == "/_ping":
        return answer(200, raw=b"OK")
    if path == "/version":
        if engine.podman:
            return answer(200, {"ApiVersion": "1.41", "MinAPIVersion": "1.24", "Version": "4.3.1",
                                "Components": [{"Name": "Podman Engine", "Version": "4.3.1"}]})
        return answer(200, {"ApiVersion": "1.43", "MinAPIVersion": "1.12", "Version": "26.1.5",
                            "Components": [{"Name": "Engine", "Version": "26.1.5"}]})
    if path == "/info":
        return answer(200, {"DockerRootDir": data_root, "Containers": len(engine.containers)})
    if path == "/images/json":
        return answer(200, [{"Id": IMAGE_ID, "RepoTags": [image_ref], "RepoDigests": [],
                             "Size": 1_000_000, "Created": 0}])
    if path == "/images/create" and method == "POST":
        ref = query.get("fromImage", [""])[0]
        if ref == image_ref:
            return answer(200, raw=b'{"status":"Image is up to date"}\n')
        return answer(200, raw=json.dumps({"error": f"pull access denied for {ref}",
                                           "errorDetail": {"message": f"pull access denied for {ref}"}}).encode() + b"\n")
    if path == "/containers/json":
        if "health" in (query.get("filters", [""])[0] or ""):
            return answer(200, [])
        return answer(200, [engine.listed(c) for c in engine.containers.values()])
    if path == "/containers/create" and method == "POST":
        name = query.get("name", [""])[0]
        spec = json.loads(body or b"{}")
        if spec.get("Image") != image_ref and spec.get("Image") != IMAGE_ID:
            return refused(404, f"No such image: {spec.get('Image')}")
        for c in engine.containers.values():
            if c.name == name:
                return refused(409, f'Conflict. The container name "/{name}" is already in use by container "{c.id}". '
                                    "You have to remove (or rename) that container to be able to reuse that name.")
        counter += 1
        cid = hashlib.sha256(f"{engine.device}/{counter}/{time.time()}".encode()).hexdigest()
        c = Container(cid, name, spec, engine.index)
        engine.containers[cid] = c
        engine.emit(c, "create")
        log_file.write(json.dumps({"t": time.time(), "device": engine.device, "name": name,
                                   "labels": c.labels, "fails": c.crash is not None}) + "\n")
        return answer(201, {"Id": cid, "Warnings": []})
    m = re.fullmatch(r"/containers/([^/]+)(/[a-z]+)?", path)
    if m:
        c = engine.find(m.group(1))
        if c is None:
            return refused(404, f"No such container: {urllib.parse.unquote(m.group(1))}")
        act = m.group(2)
        if act == "/json" and method == "GET":
            return answer(200, engine.inspected(c))
        if act == "/start" and method == "POST":
            if c.state == "running":
                return answer(304)
            engine.start(c)
            return answer(204)
        if act == "/stop" and method == "POST":
            return answer(204) if engine.stop(c) else answer(304)
        if act == "/kill" and method == "POST":
            if c.state != "running":
                return refused(409, f"Container {c.id} is not running")
            sig = query.get("signal", ["KILL"])[0].upper().removeprefix("SIG")
            if sig in ("KILL", "TERM", "INT", "9", "15", "2"):
                engine.emit(c, "kill", {"signal": sig})
                engine.died(c, c.started, 137 if sig in ("KILL", "9") else 143)
            else:
                engine.emit(c, "kill", {"signal": sig})
            return answer(204)
        if act == "/rename" and method == "POST":
            name = query.get("name", [""])[0]
            if any(o.name == name for o in engine.containers.values() if o is not c):
                return refused(409, f'Conflict. The container name "/{name}" is already in use')
            c.name = name
            engine.emit(c, "rename")
            return answer(204)
        if act is None and method == "DELETE":
            if c.state in ("running", "restarting") and query.get("force", ["false"])[0] not in ("1", "true"):
                return refused(409, f"You cannot remove a running container {c.id}. Stop the container before attempting removal or force remove")
            engine.stop(c, 137)
            del engine.containers[c.id]
            engine.emit(c, "destroy")
            return answer(204)
    return refused(501, f"{method} {path} is not in the fleet simulation's engine stand-in")


def serve(engine):
    async def handle(reader, writer):
        try:
            method, target, body = await read_request(reader)
            u = urllib.parse.urlsplit(target)
            path = re.sub(r"^/v\d+\.\d+", "", u.path)
            query = urllib.parse.parse_qs(u.query)
            if path == "/events" and method == "GET":
                await follow(engine, query, writer)
            else:
                writer.write(route(engine, method, path, query, body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception as e:  # one bad request does not end the stand-in
            try:
                writer.write(refused(500, f"stand-in: {type(e).__name__}: {e}"))
                await writer.drain()
            except ConnectionError:
                pass
        finally:
            try:
                writer.close()
            except Exception:
                pass
    return handle


async def main():
    with open(devices_file) as f:
        devices = [line.strip().split("\t") for line in f if line.strip()]
    servers = []
    for i, (d, *kind) in enumerate(devices):
        path = os.path.join(socket_dir, d + ".sock")
        if os.path.exists(path):
            os.unlink(path)
        engine = Engine(d, i, podman=kind == ["podman"])
        servers.append(await asyncio.start_unix_server(serve(engine), path=path, limit=1 << 20))
    with open(os.path.join(socket_dir, "ready"), "w") as f:
        f.write(str(len(servers)))
    await asyncio.Event().wait()


asyncio.run(main())
