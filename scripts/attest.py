#!/usr/bin/env python3
"""In-toto attestations of an image, made by securesystemslib's DSSE (a
third-party implementation), for tests/signed.rs, in the layout `cosign
attest --key` pushes: a DSSE envelope (payload type
application/vnd.in-toto+json) of an in-toto statement whose subject is the
image's manifest digest, as a layer of mediaType
application/vnd.dsse.envelope.v1+json of the manifest tagged
sha256-<hex>.att in the image's repository.

    python scripts/attest.py keygen <prefix>
        writes <prefix>.pem (the private key, PKCS#8) and <prefix>.pub
        (PEM SubjectPublicKeyInfo, as an image policy names it): ECDSA P-256
    python scripts/attest.py attest <prefix> <registry> <repo> <digest> <predicate-type>
        signs a statement about <digest> and pushes it to the plain-HTTP
        registry at <registry> (a loopback address)

Needs securesystemslib 1.6 with its crypto extra (the test command keeps a
venv of it).
"""
import base64
import hashlib
import json
import sys
import urllib.request

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner, SSlibKey


def keygen(prefix):
    key = ec.generate_private_key(ec.SECP256R1())
    with open(prefix + ".pem", "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    with open(prefix + ".pub", "wb") as f:
        f.write(
            key.public_key().public_bytes(
                serialization.Encoding.PEM,
                serialization.PublicFormat.SubjectPublicKeyInfo,
            )
        )


def put_blob(reg, repo, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    r = urllib.request.urlopen(
        urllib.request.Request(f"http://{reg}/v2/{repo}/blobs/uploads/", method="POST")
    )
    loc = r.headers["Location"]
    if not loc.startswith("http"):
        loc = f"http://{reg}{loc}"
    sep = "&" if "?" in loc else "?"
    urllib.request.urlopen(
        urllib.request.Request(
            f"{loc}{sep}digest={digest}",
            data=data,
            method="PUT",
            headers={"Content-Type": "application/octet-stream"},
        )
    )
    return digest


def attest(prefix, reg, repo, digest, predicate_type):
    with open(prefix + ".pem", "rb") as f:
        private = serialization.load_pem_private_key(f.read(), None)
    signer = CryptoSigner(private, SSlibKey.from_crypto(private.public_key()))
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": f"{reg}/{repo}", "digest": {"sha256": digest.split(":", 1)[1]}}],
        "predicateType": predicate_type,
        "predicate": {"buildDefinition": {"buildType": "https://stead.invalid/test"}},
    }
    env = Envelope(
        payload=json.dumps(statement).encode(),
        payload_type="application/vnd.in-toto+json",
        signatures={},
    )
    env.sign(signer)
    # securesystemslib checks its own signature before it is pushed.
    env.verify([signer.public_key], 1)
    body = json.dumps(env.to_dict()).encode()
    config = b"{}"
    m = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "size": len(config),
            "digest": put_blob(reg, repo, config),
        },
        "layers": [
            {
                "mediaType": "application/vnd.dsse.envelope.v1+json",
                "size": len(body),
                "digest": put_blob(reg, repo, body),
                "annotations": {"predicateType": predicate_type},
            }
        ],
    }
    tag = digest.replace(":", "-", 1) + ".att"
    urllib.request.urlopen(
        urllib.request.Request(
            f"http://{reg}/v2/{repo}/manifests/{tag}",
            data=json.dumps(m).encode(),
            method="PUT",
            headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
        )
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "keygen":
        keygen(sys.argv[2])
    elif len(sys.argv) == 7 and sys.argv[1] == "attest":
        attest(*sys.argv[2:])
    else:
        sys.exit(__doc__)
