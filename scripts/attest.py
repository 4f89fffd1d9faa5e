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
    python scripts/attest.py bundle <prefix> <name> <digest> <predicate-type>
        prints a key-based Sigstore bundle (v0.3, protobuf-specs' JSON) whose
        dsseEnvelope is securesystemslib's DSSE of an in-toto statement
        about <digest> (subject name <name>) of <predicate-type>: with
        https://sigstore.dev/cosign/sign/v1 it is what `cosign sign` (the
        bundle format) attaches to an image; the caller pushes it as an OCI
        referrer. No transparency-log entry, as cosign's --tlog-upload=false

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


def envelope(prefix, name, digest, predicate_type, predicate):
    """securesystemslib's DSSE envelope of an in-toto statement about digest."""
    with open(prefix + ".pem", "rb") as f:
        private = serialization.load_pem_private_key(f.read(), None)
    signer = CryptoSigner(private, SSlibKey.from_crypto(private.public_key()))
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": name, "digest": {"sha256": digest.split(":", 1)[1]}}],
        "predicateType": predicate_type,
        "predicate": predicate,
    }
    env = Envelope(
        payload=json.dumps(statement).encode(),
        payload_type="application/vnd.in-toto+json",
        signatures={},
    )
    env.sign(signer)
    # securesystemslib checks its own signature before it is used.
    env.verify([signer.public_key], 1)
    return env.to_dict()


def bundle(prefix, name, digest, predicate_type):
    predicate = {} if predicate_type.startswith("https://sigstore.dev/") else {
        "buildDefinition": {"buildType": "https://stead.invalid/test"}
    }
    env = envelope(prefix, name, digest, predicate_type, predicate)
    # protobuf-specs' Envelope JSON: payload, payloadType, signatures[{sig, keyid}].
    for s in env["signatures"]:
        s.setdefault("keyid", "")
    b = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {"publicKey": {"hint": ""}},
        "dsseEnvelope": env,
    }
    sys.stdout.write(json.dumps(b))


def attest(prefix, reg, repo, digest, predicate_type):
    predicate = {"buildDefinition": {"buildType": "https://stead.invalid/test"}}
    env = envelope(prefix, f"{reg}/{repo}", digest, predicate_type, predicate)
    body = json.dumps(env).encode()
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
    elif len(sys.argv) == 6 and sys.argv[1] == "bundle":
        bundle(*sys.argv[2:])
    else:
        sys.exit(__doc__)
