//! `cosign-ref`: a reference signer and verifier of cosign key-based image
//! signatures, built on the Sigstore project's own Rust crate `sigstore`
//! (its `cosign` module), for stead's tests. Debian's skopeo and podman are
//! built with sigstore signing and verification disabled, so the tests need
//! another implementation to make signatures and to cross-check the agent's
//! verdicts. See README.md beside Cargo.toml.
//!
//! It owns only the command line and the glue: key generation and key files
//! (the crate's `SigStoreKeyPair`), the simple-signing payload and its
//! signature (`SignatureLayer`, `PrivateKeySigner`), the push of a first
//! signature (`Client::push_signature`), and verification
//! (`trusted_signature_layers`, `PublicKeyVerifier`, `verify_constraints`)
//! are the crate's. What the crate lacks is done here with its own registry
//! client (`oci-client`): appending a layer to an existing `.sig` manifest
//! with the existing layers' bytes kept as they are, and telling an absent
//! signature from a registry error.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::IpAddr;
use std::process::ExitCode;

use oci_client::client::{
    ClientConfig as OciClientConfig, ClientProtocol as OciProtocol, ImageLayer,
};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OciImageManifest, OCI_IMAGE_MEDIA_TYPE};
use oci_client::secrets::RegistryAuth;
use sigstore::cosign::constraint::PrivateKeySigner;
use sigstore::cosign::verification_constraint::{PublicKeyVerifier, VerificationConstraintVec};
use sigstore::cosign::{verify_constraints, Constraint, CosignCapabilities, SignatureLayer};
use sigstore::crypto::signing_key::{kdf, SigStoreKeyPair};
use sigstore::crypto::SigningScheme;
use sigstore::registry::{Auth, ClientConfig, ClientProtocol, OciReference};
use zeroize::Zeroizing;

/// The media type of a cosign simple-signing layer (the crate keeps its own
/// constant private).
const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The config blob of a signature manifest, as the crate pushes it.
const CONFIG_DATA: &[u8] = b"{}";

const USAGE: &str = "\
usage:
  cosign-ref generate [--ed25519] <prefix>
      writes <prefix>.key (PEM ENCRYPTED SIGSTORE PRIVATE KEY, 0600, password
      from COSIGN_PASSWORD, unset = empty) and <prefix>.pub (PEM
      SubjectPublicKeyInfo); ECDSA P-256 unless --ed25519. Refuses to overwrite.
  cosign-ref sign --key <file> [--identity <docker-reference>] <registry>/<repo>(:<tag>|@<digest>)
      signs the manifest digest the reference names (simple-signing payload,
      docker-reference = the reference as given unless --identity) and pushes
      it to tag sha256-<hex>.sig of the same repository, appending a layer to
      a signature already there. Prints the digest signed.
  cosign-ref verify --key <file.pub> <registry>/<repo>(:<tag>|@<digest>)
      exit 0 and 'verified <digest>' when a signature layer for the digest
      verifies under the key; exit 1 and the reason when none does.

The key file of sign may be encrypted (ENCRYPTED SIGSTORE/COSIGN PRIVATE KEY,
password from COSIGN_PASSWORD) or a plain PKCS#8 PEM (PRIVATE KEY).
Registries on loopback (127.0.0.0/8, ::1, localhost) are spoken to over plain
HTTP, others over HTTPS; no authentication.
Exit codes: 0 done/verified, 1 not verified (a verdict), 2 usage or an error
that decides nothing (unreadable key, registry unreachable, image unknown).";

/// An error with the exit code it ends the program with.
struct Failure {
    code: u8,
    message: String,
}

fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: 2,
        message: format!("{}\n\n{USAGE}", message.into()),
    }
}

fn error(message: impl Into<String>) -> Failure {
    Failure {
        code: 2,
        message: message.into(),
    }
}

fn refused(message: impl Into<String>) -> Failure {
    Failure {
        code: 1,
        message: message.into(),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cosign-ref: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("cosign-ref: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// The parsed options of `sign` and `verify`.
struct Options {
    key: String,
    identity: Option<String>,
    ed25519: bool,
    positional: Vec<String>,
}

fn parse_options(args: &[String], allowed: &[&str]) -> Result<Options, Failure> {
    let mut options = Options {
        key: String::new(),
        identity: None,
        ed25519: false,
        positional: Vec::new(),
    };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value.to_string())),
            _ => (arg.as_str(), None),
        };
        if name.starts_with('-') && name != "-" {
            if !allowed.contains(&name) {
                return Err(usage(format!("unknown option {name}")));
            }
            if name == "--ed25519" {
                options.ed25519 = true;
                continue;
            }
            let value = match inline {
                Some(value) => value,
                None => iter
                    .next()
                    .cloned()
                    .ok_or_else(|| usage(format!("{name} needs a value")))?,
            };
            match name {
                "--key" => options.key = value,
                "--identity" => options.identity = Some(value),
                _ => return Err(usage(format!("unknown option {name}"))),
            }
        } else {
            options.positional.push(arg.clone());
        }
    }
    Ok(options)
}

async fn run(args: &[String]) -> Result<(), Failure> {
    let Some((command, rest)) = args.split_first() else {
        return Err(usage("no command"));
    };
    match command.as_str() {
        "generate" => {
            let options = parse_options(rest, &["--ed25519"])?;
            let [prefix] = options.positional.as_slice() else {
                return Err(usage("generate takes one <prefix>"));
            };
            generate(prefix, options.ed25519)
        }
        "sign" => {
            let options = parse_options(rest, &["--key", "--identity"])?;
            let [reference] = options.positional.as_slice() else {
                return Err(usage("sign takes one image reference"));
            };
            if options.key.is_empty() {
                return Err(usage("sign needs --key <file>"));
            }
            sign(&options.key, reference, options.identity.as_deref()).await
        }
        "verify" => {
            let options = parse_options(rest, &["--key"])?;
            let [reference] = options.positional.as_slice() else {
                return Err(usage("verify takes one image reference"));
            };
            if options.key.is_empty() {
                return Err(usage("verify needs --key <file.pub>"));
            }
            verify(&options.key, reference).await
        }
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(usage(format!("unknown command {other}"))),
    }
}

fn password() -> Zeroizing<Vec<u8>> {
    Zeroizing::new(
        std::env::var_os("COSIGN_PASSWORD")
            .map(|p| p.into_encoded_bytes())
            .unwrap_or_default(),
    )
}

/// `generate`: a key pair in cosign's format, written by the crate's exporters.
fn generate(prefix: &str, ed25519: bool) -> Result<(), Failure> {
    let scheme = if ed25519 {
        SigningScheme::ED25519
    } else {
        SigningScheme::ECDSA_P256_SHA256_ASN1
    };
    let key_path = format!("{prefix}.key");
    let pub_path = format!("{prefix}.pub");
    for path in [&key_path, &pub_path] {
        if std::path::Path::new(path).exists() {
            return Err(error(format!("{path} exists; not overwriting it")));
        }
    }
    let signer = scheme
        .create_signer()
        .map_err(|e| error(format!("cannot make a {scheme} key: {e}")))?;
    let pair = signer
        .to_sigstore_keypair()
        .map_err(|e| error(format!("cannot export the key: {e}")))?;
    let private = if ed25519 {
        // The crate writes Ed25519 keys as PKCS#8 v2 (RFC 5958, with the
        // public key), which some readers refuse (Debian's python3-cryptography
        // 48 does); v1 is what Go, OpenSSL and the crate all read.
        let der = pair
            .private_key_to_der()
            .map_err(|e| error(format!("cannot export the key: {e}")))?;
        let v1 = ed25519_pkcs8_v1(&der)?;
        let sealed = kdf::encrypt(&v1, &password())
            .map_err(|e| error(format!("cannot seal the private key: {e}")))?;
        Zeroizing::new(pem::encode(&pem::Pem::new(
            "ENCRYPTED SIGSTORE PRIVATE KEY",
            sealed,
        )))
    } else {
        pair.private_key_to_encrypted_pem(&password())
            .map_err(|e| error(format!("cannot seal the private key: {e}")))?
    };
    let public = pair
        .public_key_to_pem()
        .map_err(|e| error(format!("cannot export the public key: {e}")))?;
    write_new(&key_path, private.as_bytes(), 0o600)?;
    write_new(&pub_path, public.as_bytes(), 0o644)?;
    eprintln!("cosign-ref: wrote {key_path} and {pub_path} ({scheme})");
    Ok(())
}

/// The PKCS#8 v1 form of an Ed25519 private key given as PKCS#8 v1 or v2
/// (`SEQUENCE { 0|1, { id-Ed25519 }, OCTET STRING { OCTET STRING seed } [, [1] public] }`).
fn ed25519_pkcs8_v1(der: &[u8]) -> Result<Zeroizing<Vec<u8>>, Failure> {
    // version INTEGER, AlgorithmIdentifier { 1.3.101.112 }, privateKey header.
    const MIDDLE: [u8; 14] = [
        0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
    ];
    let body = match der {
        [0x30, len, body @ ..] if usize::from(*len) == body.len() => body,
        _ => return Err(error("the crate's Ed25519 key is not the PKCS#8 expected")),
    };
    let seed = match body {
        [0x02, 0x01, 0x00 | 0x01, rest @ ..] if rest.starts_with(&MIDDLE[3..]) => {
            rest.get(MIDDLE.len() - 3..MIDDLE.len() - 3 + 32)
        }
        _ => None,
    }
    .ok_or_else(|| error("the crate's Ed25519 key is not the PKCS#8 expected"))?;
    let mut v1 = Zeroizing::new(Vec::with_capacity(48));
    v1.extend_from_slice(&[0x30, 0x2e]);
    v1.extend_from_slice(&MIDDLE);
    v1.extend_from_slice(seed);
    Ok(v1)
}

fn write_new(path: &str, data: &[u8], mode: u32) -> Result<(), Failure> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| error(format!("cannot create {path}: {e}")))?;
    file.write_all(data)
        .map_err(|e| error(format!("cannot write {path}: {e}")))
}

/// Reads a private key: cosign's encrypted PEM, or a plain PKCS#8 PEM.
fn load_signing_key(path: &str) -> Result<PrivateKeySigner, Failure> {
    let data =
        Zeroizing::new(std::fs::read(path).map_err(|e| error(format!("cannot read {path}: {e}")))?);
    let text = String::from_utf8_lossy(&data);
    // The crate's PrivateKeySigner::new_with_raw takes an empty password to
    // mean "not encrypted"; cosign allows an encrypted key with an empty
    // password, so the label decides here.
    let pair = if text.contains("-----BEGIN ENCRYPTED ") {
        SigStoreKeyPair::from_encrypted_pem(&data, &password())
            .map_err(|e| encrypted_key_error(path, &data, e))?
    } else {
        SigStoreKeyPair::from_pem(&data).map_err(|e| error(format!("cannot read {path}: {e}")))?
    };
    let scheme = match &pair {
        SigStoreKeyPair::ECDSA(_) => SigningScheme::ECDSA_P256_SHA256_ASN1,
        SigStoreKeyPair::ED25519(_) => SigningScheme::ED25519,
        SigStoreKeyPair::RSA(_) => {
            return Err(error(format!(
                "{path} is an RSA key; only ECDSA P-256 and Ed25519 are supported"
            )))
        }
    };
    let signer = pair
        .to_sigstore_signer(&scheme)
        .map_err(|e| error(format!("{path}: {e} (only ECDSA P-256 and Ed25519)")))?;
    Ok(PrivateKeySigner::new_with_signer(signer))
}

/// Why an encrypted key did not load: the crate's parser masks a wrong
/// password as "unsupported key type", so the sealed box is opened again
/// here to tell the two apart.
fn encrypted_key_error(path: &str, data: &[u8], e: sigstore::errors::SigstoreError) -> Failure {
    let opened = pem::parse(data)
        .map_err(|e| e.to_string())
        .and_then(|p| kdf::decrypt(p.contents(), &password()).map_err(|e| e.to_string()));
    match opened {
        Err(why) => error(format!(
            "cannot decrypt {path} (wrong COSIGN_PASSWORD?): {why}"
        )),
        Ok(_) => error(format!(
            "{path} decrypts, but holds no ECDSA P-256 or Ed25519 PKCS#8 key: {e}"
        )),
    }
}

/// True when the registry host (with or without a port) is a loopback one.
fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        registry.rsplit_once(':').map_or(registry, |(host, _)| host)
    };
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn parse_reference(reference: &str) -> Result<OciReference, Failure> {
    reference
        .parse::<OciReference>()
        .map_err(|e| usage(format!("not an image reference: {reference}: {e}")))
}

/// The crate's cosign client and a bare registry client, both speaking plain
/// HTTP to a loopback registry.
fn clients(
    image: &OciReference,
) -> Result<(sigstore::cosign::Client, oci_client::Client), Failure> {
    let registry = image.registry().to_string();
    let plain = is_loopback(&registry);
    let config = ClientConfig {
        protocol: if plain {
            ClientProtocol::HttpsExcept(vec![registry.clone()])
        } else {
            ClientProtocol::Https
        },
        ..Default::default()
    };
    let cosign = sigstore::cosign::ClientBuilder::default()
        .with_oci_client_config(config)
        .build()
        .map_err(|e| error(format!("cannot make the cosign client: {e}")))?;
    let oci = oci_client::Client::new(OciClientConfig {
        protocol: if plain {
            OciProtocol::HttpsExcept(vec![registry])
        } else {
            OciProtocol::Https
        },
        ..Default::default()
    });
    Ok((cosign, oci))
}

fn oci_reference(reference: &OciReference) -> Result<oci_client::Reference, Failure> {
    reference
        .to_string()
        .parse()
        .map_err(|e| error(format!("not an image reference: {reference}: {e}")))
}

/// True when the registry said that the manifest does not exist.
fn is_not_found(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NotFound | OciErrorCode::NameUnknown
            )
        }),
        OciDistributionError::ServerError { code, .. } => *code == 404,
        _ => false,
    }
}

/// The layers of the signature manifest at `sig`, bytes and annotations as
/// they are; `None` when there is no such manifest.
async fn existing_signature(
    oci: &oci_client::Client,
    sig: &oci_client::Reference,
) -> Result<Option<Vec<ImageLayer>>, Failure> {
    match oci
        .pull(
            sig,
            &RegistryAuth::Anonymous,
            vec![SIMPLE_SIGNING_MEDIA_TYPE],
        )
        .await
    {
        Ok(data) => Ok(Some(data.layers)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(error(format!(
            "cannot read the signature manifest {sig}: {e}"
        ))),
    }
}

/// `sign`: a simple-signing payload for the digest the reference names,
/// signed with the key, pushed to `sha256-<hex>.sig`.
async fn sign(key: &str, reference: &str, identity: Option<&str>) -> Result<(), Failure> {
    let signer = load_signing_key(key)?;
    let image = parse_reference(reference)?;
    let (mut cosign, oci) = clients(&image)?;
    let (sig_ref, digest) = cosign
        .triangulate(&image, &Auth::Anonymous)
        .await
        .map_err(|e| error(format!("cannot resolve {reference}: {e}")))?;
    let mut layer = SignatureLayer::new_unsigned(&image, &digest)
        .map_err(|e| error(format!("cannot make the payload: {e}")))?;
    // The crate writes its normalised form of the reference; the payload
    // names the reference as given (or --identity).
    layer.simple_signing.critical.identity.docker_reference =
        identity.unwrap_or(reference).to_string();
    signer
        .add_constraint(&mut layer)
        .map_err(|e| error(format!("cannot sign: {e}")))?;
    let sig_oci = oci_reference(&sig_ref)?;
    match existing_signature(&oci, &sig_oci).await? {
        None => {
            cosign
                .push_signature(None, &Auth::Anonymous, &sig_ref, vec![layer])
                .await
                .map_err(|e| error(format!("cannot push {sig_ref}: {e}")))?;
        }
        Some(mut layers) => {
            let signature = layer
                .signature
                .clone()
                .ok_or_else(|| error("the crate left the layer unsigned"))?;
            let annotations = BTreeMap::from([(SIGNATURE_ANNOTATION.to_string(), signature)]);
            layers.push(ImageLayer::new(
                layer.raw_data.clone(),
                SIMPLE_SIGNING_MEDIA_TYPE.to_string(),
                Some(annotations),
            ));
            let config = oci_client::client::Config::oci_v1(CONFIG_DATA.to_vec(), None);
            let mut manifest = OciImageManifest::build(&layers, &config, None);
            manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_string());
            oci.push(
                &sig_oci,
                &layers,
                config,
                &RegistryAuth::Anonymous,
                Some(manifest),
            )
            .await
            .map_err(|e| error(format!("cannot push {sig_ref}: {e}")))?;
        }
    }
    eprintln!("cosign-ref: pushed the signature of {digest} to {sig_ref}");
    println!("{digest}");
    Ok(())
}

/// `verify`: as cosign verifies with a public key (no transparency log):
/// some layer of `sha256-<hex>.sig` whose payload names the digest verifies.
async fn verify(key: &str, reference: &str) -> Result<(), Failure> {
    let pem = std::fs::read(key).map_err(|e| error(format!("cannot read {key}: {e}")))?;
    let verifier =
        PublicKeyVerifier::try_from(&pem).map_err(|e| error(format!("cannot use {key}: {e}")))?;
    let image = parse_reference(reference)?;
    let (mut cosign, oci) = clients(&image)?;
    let (sig_ref, digest) = cosign
        .triangulate(&image, &Auth::Anonymous)
        .await
        .map_err(|e| error(format!("cannot resolve {reference}: {e}")))?;
    // Everything below is about this digest, whatever the tag says by now.
    let pinned = OciReference::with_digest(
        image.registry().to_string(),
        image.repository().to_string(),
        digest.clone(),
    );
    let sig_oci = oci_reference(&sig_ref)?;
    let present = match oci
        .pull_image_manifest(&sig_oci, &RegistryAuth::Anonymous)
        .await
    {
        Ok((manifest, _)) => Some(manifest.layers.len()),
        Err(e) if is_not_found(&e) => None,
        Err(e) => return Err(error(format!("cannot read {sig_ref}: {e}"))),
    };
    let layers = cosign
        .trusted_signature_layers(&Auth::Anonymous, &pinned)
        .await
        .map_err(|e| error(format!("cannot read the signatures of {digest}: {e}")))?;
    if layers.is_empty() {
        return Err(refused(match present {
            None => format!("{reference}: no signature: {digest} has no {sig_ref}"),
            Some(found) => format!(
                "{reference}: no signature layer for {digest}: {sig_ref} has {found} layer(s), none a signed simple-signing payload naming this digest"
            ),
        }));
    }
    let constraints: VerificationConstraintVec = vec![Box::new(verifier)];
    match verify_constraints(&layers, constraints.iter()) {
        Ok(()) => {
            println!("verified {digest}");
            Ok(())
        }
        Err(_) => Err(refused(format!(
            "{reference}: no signature of {digest} verifies with {key} ({} layer(s) checked)",
            layers.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn loopback_hosts() {
        for (registry, want) in [
            ("127.0.0.1:5000", true),
            ("127.0.0.1", true),
            ("127.3.4.5:80", true),
            ("localhost:5000", true),
            ("[::1]:5000", true),
            ("registry.example:5000", false),
            ("10.0.0.1:5000", false),
            ("docker.io", false),
        ] {
            assert_eq!(is_loopback(registry), want, "{registry}");
        }
    }

    #[test]
    fn ed25519_pkcs8_forms() {
        let seed: Vec<u8> = (1..=32).collect();
        let head = |version: u8, len: u8| {
            let mut d = vec![0x30, len, 0x02, 0x01, version, 0x30, 0x05, 0x06, 0x03];
            d.extend_from_slice(&[0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]);
            d.extend_from_slice(&seed);
            d
        };
        let v1 = head(0, 0x2e);
        let mut v2 = head(1, 0x51);
        v2.extend_from_slice(&[0x81, 0x21, 0x00]);
        v2.extend_from_slice(&[7; 32]);
        let mut wrong_oid = v1.clone();
        wrong_oid[11] = 0x71;
        for (name, der, ok) in [
            ("v1 stays v1", v1.clone(), true),
            ("v2 becomes v1", v2, true),
            ("another algorithm", wrong_oid, false),
            ("short", v1[..20].to_vec(), false),
            ("empty", Vec::new(), false),
        ] {
            match super::ed25519_pkcs8_v1(&der) {
                Ok(out) => {
                    assert!(ok, "{name}");
                    assert_eq!(*out, v1, "{name}");
                }
                Err(_) => assert!(!ok, "{name}"),
            }
        }
    }
}
