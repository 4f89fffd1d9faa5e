"""Runs the agent on the signed document, then 8 readers of every GET endpoint; reports peak RSS. Run by scripts/bench-memory.sh."""
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
