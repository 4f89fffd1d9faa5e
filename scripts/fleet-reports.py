#!/usr/bin/env python3
"""A generated fleet's reports, for the benchmarks (scripts/bench-rollup.sh,
scripts/bench-exposure.sh): N reports written as a host keeps them
(ROOT/nodes/<id>/status.json), each as an agent of 0.7.0 PUTs it: compact
JSON signed by its device's report key (a DSSE envelope), three modules and
one group; a share failing, a share silent, revisions spread. Each module
runs one of a few versions of its image (app: 20, broker: 5, sensor: 3),
named by reference, manifest digest and image ID as the agent reports
them. Every device is enrolled in KEYS (device-keys.csv). With --sboms DIR,
a CycloneDX SBOM per image version is written there (app's hold busybox,
1.30.0 to 1.39.0 by its version modulo 10). Written by as many processes as there are cores.

    scripts/fleet-reports.py ROOT N KEYS [--sboms DIR]
"""
import base64
import hashlib
import json
import multiprocessing
import os
import sys
import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

RAW = (Encoding.Raw, PublicFormat.Raw)
PT = "application/vnd.stead.report.v1+json"
REGISTRY = "registry.example:5000"
# How many versions of each module's image run in the fleet.
VERSIONS = {"app": 20, "broker": 5, "sensor": 3}
NOW = time.time()

# Bech32 (BIP 173), as age writes its recipients.
CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def polymod(values):
    g = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3]
    chk = 1
    for v in values:
        b = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
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


def at(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def image(name, version):
    """A module's image version: its reference, manifest digest and ID."""
    h = lambda what: "sha256:" + hashlib.sha256(f"{what} {name} {version}".encode()).hexdigest()
    return f"{REGISTRY}/{name}:1.{version}", h("manifest"), h("config")


def module(name, version, state):
    reference, digest, image_id = image(name, version)
    return {
        "desired_digest": "sha256:" + "ab" * 32, "health": None,
        "image": reference, "image_digests": [f"{REGISTRY}/{name}@{digest}"], "image_id": image_id,
        "last_error": {"class": state, "message": "it keeps restarting"} if state == "crash-looping" else None,
        "restart_count": 7 if state == "crash-looping" else 0, "running_digest": "sha256:" + "ab" * 32,
        "state": state,
    }


def write(args):
    root, start, end = args
    lines = []
    for i in range(start, end):
        node = f"edge-{i:07d}"
        failing = i % 50 == 0
        silent = i % 97 == 0
        sent = NOW - (3 * 86400 if silent else 600)
        report = {
            "agent_version": "0.7.0",
            "clock": {"plane_date": at(sent), "status": "ok", "system": at(sent)},
            "disk": None, "engine": "reachable",
            "modules": {
                "app": module("app", i % VERSIONS["app"], "crash-looping" if failing else "converged"),
                "broker": module("broker", i % VERSIONS["broker"], "converged"),
                "sensor": module("sensor", i % VERSIONS["sensor"], "converged"),
            },
            "node": node, "passing": True,
            "plane": {"conflicts": [], "error": None,
                      "groups": [{"error": None, "group": "edge-eu", "revision": 7, "running": 7 if i % 3 else 6,
                                  "rollout": {"taken": bool(i % 3), "until": None if i % 3 else at(NOW + 3600),
                                              "why": "its turn"}}],
                      "held": {"accepted_at": at(sent), "expires": at(NOW + 30 * 86400), "floor": True,
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
        lines.append(f"{node},{age},{report['report_key']}\n")
        d = os.path.join(root, "nodes", node)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "status.json"), "w") as f:
            json.dump(envelope, f, separators=(",", ":"))
    return lines


def sboms(out):
    os.makedirs(out, exist_ok=True)
    for name, versions in VERSIONS.items():
        for v in range(versions):
            reference, digest, _ = image(name, v)
            packages = [{"type": "library", "name": f"lib{k}", "version": f"{k}.{v}",
                         "purl": f"pkg:deb/debian/lib{k}@{k}.{v}"} for k in range(200)]
            if name == "app":
                packages.append({"type": "application", "name": "busybox", "version": f"1.3{v % 10}.0",
                                 "purl": f"pkg:deb/debian/busybox@1.3{v % 10}.0"})
            bom = {"bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
                   "metadata": {"component": {"type": "container", "name": reference, "version": digest}},
                   "components": packages}
            with open(os.path.join(out, f"{name}-{v}.cdx.json"), "w") as f:
                json.dump(bom, f)


def main():
    args = sys.argv[1:]
    sbom_dir = None
    if "--sboms" in args:
        at_ = args.index("--sboms")
        sbom_dir = args[at_ + 1]
        del args[at_:at_ + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    root, n, keys_file = args[0], int(args[1]), args[2]
    step = 5000
    chunks = [(root, s, min(s + step, n)) for s in range(0, n, step)]
    with open(keys_file, "w") as enrolled, multiprocessing.Pool() as pool:
        enrolled.write("# node,device key,report key (stead-plane enroll)\n")
        for lines in pool.imap(write, chunks):
            enrolled.writelines(lines)
    if sbom_dir:
        sboms(sbom_dir)


if __name__ == "__main__":
    main()
