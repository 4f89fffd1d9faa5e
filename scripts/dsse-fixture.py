#!/usr/bin/env python3
"""Makes tests/fixtures/dsse/: stead documents signed by securesystemslib's
DSSE (a third-party implementation), for tests/plane_cli.rs.

    python3 -m venv /tmp/sslib && /tmp/sslib/bin/pip install securesystemslib==1.6.0
    /tmp/sslib/bin/python scripts/dsse-fixture.py tests/fixtures/dsse

The key is made from a fixed seed, so the files are the same on every run
(Ed25519 signatures are deterministic). Written:
- securesystemslib.pub: the public key, as stead's trusted_keys take it;
- securesystemslib.json: signed by securesystemslib, its own key id in
  `keyid` (the sha256 of its key's JSON, not stead's 16 hex digits);
- securesystemslib-nokeyid.json: the same signature with no `keyid` at all
  (DSSE makes it optional).
It also checks that securesystemslib verifies the first one.
"""

import base64
import json
import pathlib
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner, SSlibKey

out = pathlib.Path(sys.argv[1])
private = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
public = SSlibKey.from_crypto(private.public_key())
signer = CryptoSigner(private, public)

payload = json.dumps(
    {
        "node": "edge-1",
        "revision": 1,
        "issued_at": "2026-01-01T00:00:00Z",
        "expires": "2099-01-01T00:00:00Z",
        "modules": [{"name": "web", "image": "stead-test/busybox:1"}],
    },
    separators=(",", ":"),
).encode()
env = Envelope(payload, "application/vnd.stead.desired.v1+json", {})
env.sign(signer)
env.verify([public], 1)

raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
(out / "securesystemslib.pub").write_text(base64.b64encode(raw).decode() + "\n")
doc = env.to_dict()
(out / "securesystemslib.json").write_text(json.dumps(doc, indent=2) + "\n")
for s in doc["signatures"]:
    del s["keyid"]
(out / "securesystemslib-nokeyid.json").write_text(json.dumps(doc, indent=2) + "\n")
