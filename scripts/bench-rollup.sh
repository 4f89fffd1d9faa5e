#!/usr/bin/env bash
# `stead plane status --reports` over a large fleet (a benchmark, not a
# test): STEAD_BENCH_REPORTS reports (100,000) written as a host keeps them
# (nodes/<id>/status.json, each a report as an agent of 0.7.0 PUTs it,
# signed by its device's report key: 3 modules, one group; a share failing,
# a share silent, revisions spread) with every device enrolled
# (fleet/device-keys.csv), then rolled up from the directory and through
# nginx's directory listings on loopback (`autoindex on`), every report's
# signature checked (`status --fleet`). Printed: the wall time of each (medians of
# STEAD_BENCH_RUNS runs, 3), reports per second, the peak resident set of
# the rolling process, and the machine. STEAD_BENCH_BIN measures that binary
# instead of building target/release/stead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=bench-rollup.sh
. scripts/lib.sh

REPORTS="${STEAD_BENCH_REPORTS:-100000}"
RUNS="${STEAD_BENCH_RUNS:-3}"

need_nginx
release_stead STEAD_BENCH_BIN

work="$(mktemp -d /tmp/stead-bench-rollup.XXXXXX)"
nginx_pid=""
cleanup() {
    stop_nginx "$nginx_pid"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "writing $REPORTS signed reports and their devices' keys"
mkdir -p "$work/fleet"
python3 - "$work/root" "$REPORTS" "$work/fleet/device-keys.csv" <<'PY'
import base64, hashlib, json, os, sys, time
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
root, n, keys_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
now = time.time()
RAW = (Encoding.Raw, PublicFormat.Raw)
# Bech32 (BIP 173), as age writes its recipients.
CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
def polymod(values):
    g = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3]
    chk = 1
    for v in values:
        b = chk >> 25
        chk = (chk & 0x1ffffff) << 5 ^ v
        for i in range(5):
            chk ^= g[i] if (b >> i) & 1 else 0
    return chk
def bech32(hrp, data):
    bits, acc, out = 0, 0, []
    for b in data:
        acc, bits = acc << 8 | b, bits + 8
        while bits >= 5:
            bits -= 5
            out.append(acc >> bits & 31)
    if bits:
        out.append(acc << (5 - bits) & 31)
    hrpx = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    pm = polymod(hrpx + out + [0] * 6) ^ 1
    return hrp + "1" + "".join(CHARSET[d] for d in out + [pm >> 5 * (5 - i) & 31 for i in range(6)])
def pae(t, body):
    return b"DSSEv1 %d %s %d %s" % (len(t), t.encode(), len(body), body)
PT = "application/vnd.stead.report.v1+json"
enrolled = open(keys_file, "w")
enrolled.write("# node,device key,report key (stead-plane enroll)\n")
def at(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
for i in range(n):
    node = f"edge-{i:06d}"
    failing = i % 50 == 0
    silent = i % 97 == 0
    sent = now - (3 * 86400 if silent else 600)
    module = lambda name, state: {
        "desired_digest": "sha256:" + "ab" * 32, "health": None, "image_id": "sha256:" + "cd" * 32,
        "last_error": {"class": state, "message": "it keeps restarting"} if state == "crash-looping" else None,
        "restart_count": 7 if state == "crash-looping" else 0, "running_digest": "sha256:" + "ab" * 32,
        "state": state,
    }
    report = {
        "agent_version": "0.6.0",
        "clock": {"plane_date": at(sent), "status": "ok", "system": at(sent)},
        "disk": None, "engine": "reachable",
        "modules": {"app": module("app", "crash-looping" if failing else "converged"),
                    "broker": module("broker", "converged"), "sensor": module("sensor", "converged")},
        "node": node, "passing": True,
        "plane": {"conflicts": [], "error": None,
                  "groups": [{"error": None, "group": "edge-eu", "revision": 7, "running": 7 if i % 3 else 6,
                              "rollout": {"taken": bool(i % 3), "until": None if i % 3 else at(now + 3600),
                                          "why": "its turn"}}],
                  "held": {"accepted_at": at(sent), "expires": at(now + 30 * 86400), "floor": True,
                           "issued_at": at(sent), "key_id": "ed25519:" + "ef" * 8, "revision": 1796290000 + i % 4,
                           "revoked": None},
                  "last_contact": at(sent), "refusal": None,
                  "url": f"https://plane.example/nodes/{node}/desired.json"},
        "quarantine": None, "sent_at": at(sent), "seq": i, "undelivered": 0,
    }
    seed = hashlib.sha256(f"bench {node}".encode()).digest()
    signer = Ed25519PrivateKey.from_private_bytes(seed)
    public = signer.public_key().public_bytes(*RAW)
    age = bech32("age", X25519PrivateKey.from_private_bytes(hashlib.sha256(seed).digest()).public_key().public_bytes(*RAW))
    report["device_key"] = age
    report["report_key"] = base64.b64encode(public).decode()
    payload = json.dumps(report, sort_keys=True, separators=(",", ":")).encode()
    envelope = {"payloadType": PT, "payload": base64.b64encode(payload).decode(),
                "signatures": [{"keyid": hashlib.sha256(public).hexdigest()[:16],
                                "sig": base64.b64encode(signer.sign(pae(PT, payload))).decode()}]}
    enrolled.write(f"{node},{age},{report['report_key']}\n")
    d = os.path.join(root, "nodes", node)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "status.json"), "w") as f:
        json.dump(envelope, f, indent=2)
enrolled.close()
PY
du_mb="$(du -sm "$work/root" | cut -f1)"

mkdir -p "$work/tmp"
token="bench-rollup-$$-$RANDOM"
nginx_conf() {
    cat <<NGINX
# Written by scripts/bench-rollup.sh.
$(nginx_head "$work" 1024)
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$port;
        root "$work/root";
        location = /__rollup { return 200 "$token"; }
        location / { autoindex on; limit_except GET { deny all; } }
    }
}
NGINX
}
start_nginx "$work" nginx_conf /__rollup "$token"

# One roll-up: wall seconds and the peak RSS (KiB) of stead; its output
# checked for the whole count.
roll() {
    STEAD_PLANE="$stead_plane" python3 - "$stead" "$1" "$REPORTS" "$work/fleet" <<'PY'
import json, os, resource, subprocess, sys, time
stead, source, n, fleet = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
t = time.monotonic()
out = subprocess.run([os.environ["STEAD_PLANE"], "status", "--reports", source, "--fleet", fleet, "--json"], capture_output=True, text=True)
wall = time.monotonic() - t
if out.returncode != 0:
    sys.exit(f"stead-plane status --reports {source}: {out.stderr}")
r = json.loads(out.stdout)
if r["devices"] != n or r["unreadable"] != 0 or r["unverified"] != 0:
    sys.exit(f"rolled up {r['devices']} devices, {r['unreadable']} unreadable, {r['unverified']} unverified, of {n}")
print(f"{wall:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
PY
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for source in dir http; do
    case "$source" in
        dir) arg="$work/root" ;;
        http) arg="http://127.0.0.1:$port/nodes/" ;;
    esac
    : >"$work/$source.times"
    for run in $(seq 1 "$RUNS"); do
        # The page cache warm for every run (the first run warms it).
        roll "$arg" >>"$work/$source.times" || die "the roll-up from $source failed"
        say "$source run $run: $(tail -1 "$work/$source.times")"
    done
done

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(/usr/sbin/nginx -v 2>&1 | sed 's/^nginx version: //'), $(date -u +%F)"
echo "stead: $stead; $REPORTS reports, $du_mb MB on disk; medians of $RUNS runs"
for source in dir http; do
    wall="$(cut -d' ' -f1 "$work/$source.times" | median)"
    rss="$(cut -d' ' -f2 "$work/$source.times" | median)"
    case "$source" in
        dir) what="a directory" ;;
        http) what="nginx's listings (autoindex), on loopback" ;;
    esac
    echo "from $what: ${wall} s ($(awk -v n="$REPORTS" -v w="$wall" 'BEGIN { printf "%.0f", n / w }') reports/s), peak RSS $((rss / 1024)) MiB"
done
