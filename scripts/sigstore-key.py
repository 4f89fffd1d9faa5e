#!/usr/bin/env python3
"""Makes a sigstore (cosign) key pair in the format skopeo and podman read:
an ECDSA P-256 private key, PKCS#8 DER, sealed with NaCl secretbox under a
key from scrypt (N=32768, r=8, p=1) of a password, in the PEM block
`ENCRYPTED SIGSTORE PRIVATE KEY` (the JSON document cosign's
`generate-key-pair` writes); and its public key, PEM SubjectPublicKeyInfo,
the text an image policy names.

    scripts/sigstore-key.py <prefix>     # reads the password from
                                         # SIGSTORE_PASSWORD (may be empty)

writes <prefix>.private (0600) and <prefix>.pub. Needs Debian's
python3-cryptography and python3-nacl.
"""
import base64
import json
import os
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
import nacl.secret
import nacl.utils
import hashlib


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    prefix = sys.argv[1]
    password = os.environ.get("SIGSTORE_PASSWORD", "").encode()
    key = ec.generate_private_key(ec.SECP256R1())
    der = key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    salt = nacl.utils.random(32)
    n, r, p = 32768, 8, 1
    box_key = hashlib.scrypt(password, salt=salt, n=n, r=r, p=p, dklen=32, maxmem=64 * 1024 * 1024)
    nonce = nacl.utils.random(nacl.secret.SecretBox.NONCE_SIZE)
    sealed = nacl.secret.SecretBox(box_key).encrypt(der, nonce).ciphertext
    doc = {
        "kdf": {
            "name": "scrypt",
            "params": {"N": n, "r": r, "p": p},
            "salt": base64.b64encode(salt).decode(),
        },
        "cipher": {"name": "nacl/secretbox", "nonce": base64.b64encode(nonce).decode()},
        "ciphertext": base64.b64encode(sealed).decode(),
    }
    body = base64.encodebytes(json.dumps(doc).encode()).decode()
    fd = os.open(prefix + ".private", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
        f.write(body)
        f.write("-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with open(prefix + ".pub", "wb") as f:
        f.write(pub)


if __name__ == "__main__":
    main()
