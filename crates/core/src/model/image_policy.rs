//! Which images may run: a signed document's image policy (rules per
//! registry or repository, each requiring sigstore signatures by given
//! public keys, or nothing), the public keys themselves (PEM
//! SubjectPublicKeyInfo, ECDSA P-256 or Ed25519, as cosign and
//! containers/image write them), and [`judge`], the pure verdict on an
//! image's manifest digest given the signatures a registry holds for it:
//! sigstore's key-based signatures, a simple-signing payload
//! (`critical.identity.docker-reference`, `critical.image.
//! docker-manifest-digest`, `critical.type`) signed as cosign signs it
//! (ECDSA over SHA-256 in ASN.1 DER, or Ed25519 over the payload); and
//! Sigstore bundles (v0.3, as cosign 3 attaches them through the OCI
//! referrers API), key-based: a `dsseEnvelope` of an in-toto statement
//! whose subject is the manifest digest, of predicate type [`COSIGN_SIGN`]
//! for a signature (or the rule's own for an attestation). A bundle's
//! `messageSignature` (what cosign makes for a blob, not an image) does
//! not count, and the bundle's transparency-log entries are not read (as
//! `cosign verify --key … --insecure-ignore-tlog`); a bundle binds the
//! digest only, not a repository or a tag (as cosign verifies it).
//!
//! The identity rule: the signature must name the image's repository; one
//! that names a tag too (as skopeo signs) binds that tag, so an image named
//! by another tag is refused (containers/image's `matchRepoDigestOrExact`);
//! one that names the repository alone (as cosign signs) is for its digest
//! under any tag.
//!
//! No I/O: the registry's fetches are the device's; this says only what
//! the bytes mean.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

use crate::model::reference::Reference;

/// The most rules one document's policy may hold.
pub const MAX_RULES: usize = 64;
/// The most keys one rule may name.
pub const MAX_KEYS: usize = 8;
/// The most signatures of one image looked at.
pub const MAX_SIGNATURES: usize = 16;
/// The most bytes a signature's payload may have.
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// The `critical.type` of a sigstore signature's payload.
pub const SIGSTORE_TYPE: &str = "cosign container image signature";
/// The media type of a cosign signature layer.
pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The media type of a cosign attestation layer (a DSSE envelope).
pub const DSSE_ENVELOPE: &str = "application/vnd.dsse.envelope.v1+json";
/// The payload type of an in-toto statement in a DSSE envelope.
pub const IN_TOTO: &str = "application/vnd.in-toto+json";
/// The most bytes an attestation's envelope may have.
pub const MAX_ATTESTATION: usize = 4 * 1024 * 1024;
/// The annotation a cosign signature layer carries its signature in.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The media types (and OCI artifact types) of a Sigstore bundle v0.3, as
/// the protobuf-specs name it; cosign writes the first.
pub const BUNDLE_TYPES: [&str; 2] = [
    "application/vnd.dev.sigstore.bundle.v0.3+json",
    "application/vnd.dev.sigstore.bundle+json;version=0.3",
];
/// The predicate type of the in-toto statement cosign signs an image with
/// in a bundle (`cosign sign` with the bundle format, cosign 3's default).
pub const COSIGN_SIGN: &str = "https://sigstore.dev/cosign/sign/v1";

/// DER SubjectPublicKeyInfo up to the key's bytes: id-ecPublicKey,
/// prime256v1, a 66-byte BIT STRING (no unused bits, then the point).
const P256_SPKI: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];
/// The same for Ed25519 (id-Ed25519, a 33-byte BIT STRING).
const ED25519_SPKI: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// A public key an image's signature may be made with.
#[derive(Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// ECDSA on P-256, the uncompressed point (65 bytes).
    P256(Vec<u8>),
    /// Ed25519 (32 bytes).
    Ed25519(Vec<u8>),
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.id())
    }
}

impl PublicKey {
    /// Reads a PEM `PUBLIC KEY` (SubjectPublicKeyInfo): ECDSA P-256 or
    /// Ed25519; anything else is named and refused.
    pub fn from_pem(text: &str) -> Result<PublicKey, String> {
        let text = text.trim();
        let body = text
            .strip_prefix("-----BEGIN PUBLIC KEY-----")
            .and_then(|t| t.strip_suffix("-----END PUBLIC KEY-----"))
            .ok_or(
                "not a PEM public key (-----BEGIN PUBLIC KEY----- … -----END PUBLIC KEY-----)",
            )?;
        let b64: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let der = STANDARD
            .decode(b64.as_bytes())
            .map_err(|e| format!("the PEM body is not base64: {e}"))?;
        PublicKey::from_der(&der)
    }

    /// Reads a DER SubjectPublicKeyInfo.
    pub fn from_der(der: &[u8]) -> Result<PublicKey, String> {
        if let Some(point) = der.strip_prefix(&P256_SPKI[..]) {
            if point.len() == 65 && point[0] == 0x04 {
                return Ok(PublicKey::P256(point.to_vec()));
            }
            return Err("an ECDSA P-256 key whose point is not 65 uncompressed bytes".into());
        }
        if let Some(key) = der.strip_prefix(&ED25519_SPKI[..]) {
            if key.len() == 32 {
                return Ok(PublicKey::Ed25519(key.to_vec()));
            }
        }
        Err("not an ECDSA P-256 or Ed25519 public key (RSA and other curves are not taken)".into())
    }

    /// The DER SubjectPublicKeyInfo.
    pub fn to_der(&self) -> Vec<u8> {
        let (prefix, key): (&[u8], &[u8]) = match self {
            PublicKey::P256(k) => (&P256_SPKI, k),
            PublicKey::Ed25519(k) => (&ED25519_SPKI, k),
        };
        [prefix, key].concat()
    }

    /// What the key is known by in refusals and the status: its kind and
    /// the first 16 hex digits of the SHA-256 of its DER.
    pub fn id(&self) -> String {
        let d = ring::digest::digest(&ring::digest::SHA256, &self.to_der());
        let hex: String = d.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
        match self {
            PublicKey::P256(_) => format!("ecdsa-p256:{hex}"),
            PublicKey::Ed25519(_) => format!("ed25519:{hex}"),
        }
    }

    /// Whether `sig` is this key's signature of `message` (ECDSA: ASN.1
    /// DER over SHA-256, as cosign makes it; Ed25519: over the message).
    pub fn verifies(&self, message: &[u8], sig: &[u8]) -> bool {
        use ring::signature::{ECDSA_P256_SHA256_ASN1, ED25519, UnparsedPublicKey};
        match self {
            PublicKey::P256(k) => UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, k)
                .verify(message, sig)
                .is_ok(),
            PublicKey::Ed25519(k) => UnparsedPublicKey::new(&ED25519, k)
                .verify(message, sig)
                .is_ok(),
        }
    }
}

/// What a rule asks of the images in its scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Require {
    /// A sigstore signature by one of these keys.
    Sigstore(Vec<PublicKey>),
    /// Nothing: the scope is let through (a narrower exception to a wider
    /// rule).
    Nothing,
}

/// Where a rule applies: every image, a registry's, or a repository's
/// (and those below it).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Scope(String);

impl Scope {
    /// Reads a scope: `*`, a registry (`registry.example:5000`), or a
    /// repository with its registry (`registry.example/team/app`).
    pub fn parse(s: &str) -> Result<Scope, String> {
        if s == "*" {
            return Ok(Scope(s.into()));
        }
        if s.is_empty() || s.len() > 255 || s.ends_with('/') {
            return Err(format!(
                "scope {s:?}: `*`, a registry, or a registry/repository"
            ));
        }
        // A registry alone, or a repository: read as a reference would be.
        let r = Reference::parse(&format!("{s}/x")).map_err(|e| format!("scope {s:?}: {e}"))?;
        if !s.contains('.') && !s.contains(':') && !s.starts_with("localhost") {
            return Err(format!(
                "scope {s:?}: name the registry (docker.io/library/app, not library/app)"
            ));
        }
        let _ = r;
        Ok(Scope(s.to_string()))
    }

    /// How specific it is (longer is narrower; `*` is the widest).
    fn rank(&self) -> usize {
        if self.0 == "*" { 0 } else { self.0.len() }
    }

    /// Whether `image` is in it.
    pub fn covers(&self, image: &Reference) -> bool {
        if self.0 == "*" {
            return true;
        }
        let name = image.name();
        name == self.0
            || name
                .strip_prefix(self.0.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// The scope as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One rule of a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub scope: Scope,
    pub require: Require,
    /// An in-toto attestation the image must carry too.
    pub attestation: Option<Attestation>,
}

/// An attestation a rule asks for: a DSSE envelope of an in-toto
/// statement about the image's manifest digest, of this predicate type,
/// signed by one of these keys (as `cosign attest --key` makes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attestation {
    pub predicate_type: String,
    pub keys: Vec<PublicKey>,
}

/// A document's image policy: its rules, at most one per scope.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules(pub Vec<Rule>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDoc {
    scope: String,
    require: String,
    #[serde(default)]
    keys: Vec<String>,
    #[serde(default)]
    attestation: Option<AttestationDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttestationDoc {
    predicate_type: String,
    keys: Vec<String>,
}

/// Reads 1 to [`MAX_KEYS`] PEM keys at `at`.
fn read_keys(at: &str, texts: &[String], what: &str) -> Result<Vec<PublicKey>, (String, String)> {
    if texts.is_empty() || texts.len() > MAX_KEYS {
        return Err((
            format!("{at}.keys"),
            format!("1 to {MAX_KEYS} public keys (PEM) {what}"),
        ));
    }
    texts
        .iter()
        .enumerate()
        .map(|(k, text)| PublicKey::from_pem(text).map_err(|e| (format!("{at}.keys[{k}]"), e)))
        .collect()
}

impl Rules {
    /// Reads a document's `images` (a list of `{scope, require, keys}`);
    /// the error names the rule and what is wrong with it.
    pub fn parse(value: serde_json::Value) -> Result<Rules, (String, String)> {
        let docs: Vec<RuleDoc> =
            serde_json::from_value(value).map_err(|e| (String::new(), e.to_string()))?;
        if docs.len() > MAX_RULES {
            return Err((
                String::new(),
                format!("{} rules, more than {MAX_RULES}", docs.len()),
            ));
        }
        let mut rules: Vec<Rule> = Vec::with_capacity(docs.len());
        for (i, d) in docs.into_iter().enumerate() {
            let at = format!("[{i}]");
            let scope = Scope::parse(&d.scope).map_err(|e| (format!("{at}.scope"), e))?;
            if rules.iter().any(|r| r.scope == scope) {
                return Err((
                    format!("{at}.scope"),
                    format!("scope {} has a rule already", scope.as_str()),
                ));
            }
            let require = match d.require.as_str() {
                "sigstore" => Require::Sigstore(read_keys(&at, &d.keys, "for require = sigstore")?),
                "none" => {
                    if !d.keys.is_empty() || d.attestation.is_some() {
                        return Err((
                            format!("{at}.keys"),
                            "require = none takes no keys and no attestation".into(),
                        ));
                    }
                    Require::Nothing
                }
                other => {
                    return Err((
                        format!("{at}.require"),
                        format!("{other:?}: \"sigstore\" or \"none\""),
                    ));
                }
            };
            let attestation = match d.attestation {
                None => None,
                Some(a) => {
                    let at = format!("{at}.attestation");
                    if a.predicate_type.is_empty() || a.predicate_type.len() > 255 {
                        return Err((
                            format!("{at}.predicate_type"),
                            "1 to 255 characters (a URI: https://slsa.dev/provenance/v1)".into(),
                        ));
                    }
                    Some(Attestation {
                        keys: read_keys(&at, &a.keys, "for the attestation")?,
                        predicate_type: a.predicate_type,
                    })
                }
            };
            rules.push(Rule {
                scope,
                require,
                attestation,
            });
        }
        Ok(Rules(rules))
    }

    /// The narrowest rule whose scope covers `image`, if any.
    pub fn for_image(&self, image: &Reference) -> Option<&Rule> {
        self.0
            .iter()
            .filter(|r| r.scope.covers(image))
            .max_by_key(|r| r.scope.rank())
    }
}

/// The policy a node lives by: each signed document's rules (the node's
/// own and each group's), by what the document is called, the device's
/// own config's rules as one more document (a floor no document can
/// loosen), and the root's allow-list of image digests when the node's
/// plane has one. An image must satisfy every document's narrowest rule
/// covering it: one document cannot loosen what another requires; and,
/// with an allow-list, its manifest digest must be listed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// The rules, by the document that says them.
    pub documents: BTreeMap<String, Rules>,
    /// The allow-list every image's digest must be in, when there is one.
    pub allowed: Option<Allowed>,
}

/// The root's allow-list as the policy holds it (the plane's
/// `AllowList`, which it is made of, is read and verified above this).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowed {
    /// The list's version.
    pub version: u64,
    /// The digest of its payload: what a check kept under it names.
    pub payload: String,
    /// Each listed digest (`sha256:…`, lower case), with the repository
    /// it must come from when the entry names one.
    pub images: std::collections::BTreeSet<(Option<String>, String)>,
}

impl Allowed {
    /// Whether the manifest `digest` of `image`'s repository is listed,
    /// alone or with that repository; why not.
    pub fn admits(&self, image: &Reference, digest: &str) -> Result<(), String> {
        let name = image.name();
        let digest = digest.to_ascii_lowercase();
        let listed = self
            .images
            .iter()
            .any(|(repo, d)| *d == digest && repo.as_ref().is_none_or(|r| *r == name));
        if listed {
            Ok(())
        } else {
            Err(format!(
                "{digest} of {name} is not in the allow-list (version {})",
                self.version
            ))
        }
    }
}

/// What the device's config's rules are called among the documents.
pub const CONFIG_DOCUMENT: &str = "the device's config";

impl Policy {
    /// A node document's rules, before any group's.
    pub fn of_node(rules: Rules) -> Policy {
        let mut p = Policy::default();
        p.documents.insert("the node document".into(), rules);
        p
    }

    /// Adds group `name`'s rules.
    pub fn add_group(&mut self, name: &str, rules: Rules) {
        self.documents.insert(format!("group {name}"), rules);
    }

    /// Adds the device's own config's rules (none: nothing is added).
    pub fn with_config(mut self, rules: &Rules) -> Policy {
        if !rules.0.is_empty() {
            self.documents.insert(CONFIG_DOCUMENT.into(), rules.clone());
        }
        self
    }

    /// A digest of the policy, for what is kept of a check made under it:
    /// every document's rules, scopes, requirements and keys, and the
    /// allow-list's version and payload.
    pub fn digest(&self) -> String {
        let mut text = String::new();
        let keys = |ks: &[PublicKey]| -> String {
            ks.iter()
                .map(|k| {
                    k.to_der()
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        for (doc, rules) in &self.documents {
            text.push_str(&format!("{doc:?}\n"));
            for r in &rules.0 {
                let require = match &r.require {
                    Require::Sigstore(k) => format!("sigstore {}", keys(k)),
                    Require::Nothing => "none".into(),
                };
                let attestation = r
                    .attestation
                    .as_ref()
                    .map(|a| format!("{:?} {}", a.predicate_type, keys(&a.keys)))
                    .unwrap_or_default();
                text.push_str(&format!(
                    "  {:?} {require} {attestation}\n",
                    r.scope.as_str()
                ));
            }
        }
        if let Some(l) = &self.allowed {
            text.push_str(&format!("allow-list {} {}\n", l.version, l.payload));
        }
        crate::model::names::Digest::of(text.as_bytes()).to_string()
    }

    /// Whether nothing is asked of any image: no document has a rule and
    /// there is no allow-list.
    pub fn is_empty(&self) -> bool {
        self.allowed.is_none() && self.documents.values().all(|r| r.0.is_empty())
    }

    /// Whether anything is asked of `image`: a rule asks for a signature,
    /// or an allow-list must list its digest.
    pub fn covers(&self, image: &Reference) -> bool {
        self.allowed.is_some() || !self.asks(image).is_empty()
    }

    /// Why the manifest `digest` of `image` may not run by the allow-list
    /// (`refused (unlisted-image): …`), when there is one and it does not
    /// list it (alone, or with the image's repository).
    pub fn unlisted(&self, image: &Reference, digest: &str) -> Option<String> {
        let l = self.allowed.as_ref()?;
        l.admits(image, digest)
            .err()
            .map(|why| format!("refused (unlisted-image): {why}"))
    }

    /// What `image` must satisfy: per document, its narrowest rule that
    /// requires a signature (a `none` rule asks nothing). Empty when
    /// nothing is asked of it.
    pub fn asks(&self, image: &Reference) -> Vec<(&str, &Rule)> {
        self.documents
            .iter()
            .filter_map(|(doc, rules)| rules.for_image(image).map(|r| (doc.as_str(), r)))
            .filter(|(_, r)| matches!(r.require, Require::Sigstore(_)))
            .collect()
    }
}

/// The policy as a device knows it: not yet (its plane's documents are
/// still being read after a start: nothing is let through), or the one
/// its documents compose now (empty without a plane).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Known {
    NotYet,
    Is(std::sync::Arc<Policy>),
}

/// A signature as the registry holds it: the payload's bytes and the
/// signature (base64, as the annotation carries it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub payload: Vec<u8>,
    pub signature: String,
}

/// An image found to satisfy the policy: which key of each document's
/// rule signed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The manifest digest verified.
    pub digest: String,
    /// Per document, the key that signed it.
    pub by: Vec<(String, String)>,
}

#[derive(Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    identity: Identity,
    image: ImageDoc,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Deserialize)]
struct ImageDoc {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// Why one signature does not count for `image` at `digest` (its
/// signature already checked).
fn payload_refusal(payload: &[u8], image: &Reference, digest: &str) -> Option<String> {
    let p: Payload = match serde_json::from_slice(payload) {
        Ok(p) => p,
        Err(e) => return Some(format!("a payload that is not a simple-signing one ({e})")),
    };
    if p.critical.kind != SIGSTORE_TYPE {
        return Some(format!(
            "a payload of type {:?}, not {SIGSTORE_TYPE:?}",
            p.critical.kind
        ));
    }
    if !p
        .critical
        .image
        .docker_manifest_digest
        .eq_ignore_ascii_case(digest)
    {
        return Some(format!(
            "a signature of another digest ({})",
            crate::model::text::clip(&p.critical.image.docker_manifest_digest, 80)
        ));
    }
    let text = &p.critical.identity.docker_reference;
    let who = match Reference::parse(text) {
        Ok(r) => r,
        Err(e) => return Some(format!("a signed identity that is not a reference ({e})")),
    };
    if who.registry != image.registry || who.repository != image.repository {
        return Some(format!(
            "a signature for another repository ({})",
            who.name()
        ));
    }
    // A signature that names a tag binds it: an image named by another
    // tag is not the one signed. One that names the repository alone (as
    // cosign signs) is for the digest wherever it is tagged.
    let names_a_tag = !text.contains('@')
        && text
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains(':'));
    if image.digest.is_none() && names_a_tag && who.tag != image.tag {
        return Some(format!(
            "a signature for another tag ({})",
            who.tag.as_deref().unwrap_or("none")
        ));
    }
    None
}

/// The verdict on running `image`, whose manifest digest is `digest`,
/// given the signatures the registry holds for that digest and what the
/// policy asks of it (`asks`, from [`Policy::asks`]): every document's
/// rule must be met by one signature whose payload names this digest and
/// this image, signed by one of the rule's keys; or by one Sigstore
/// bundle (`bundles`, each as the registry holds it) whose DSSE statement
/// about this digest, of predicate type [`COSIGN_SIGN`], is signed by one
/// of them. A bundle's statement of another predicate type counts as an
/// attestation, beside `attestations` (DSSE envelopes). The refusal says
/// why, the nearest miss first.
pub fn judge(
    asks: &[(&str, &Rule)],
    image: &Reference,
    digest: &str,
    signatures: &[Signature],
    attestations: &[Vec<u8>],
    bundles: &[Vec<u8>],
) -> Result<Verified, String> {
    let mut by = Vec::new();
    if asks.is_empty() {
        return Ok(Verified {
            digest: digest.to_string(),
            by,
        });
    }
    // Each signature checked once: its bytes, then what it says.
    let mut good: Vec<(usize, &PublicKey)> = Vec::new();
    let mut misses: Vec<String> = Vec::new();
    let keys: Vec<&PublicKey> = asks
        .iter()
        .flat_map(|(_, r)| match &r.require {
            Require::Sigstore(k) => k.iter().collect(),
            Require::Nothing => vec![],
        })
        .collect();
    for (n, s) in signatures.iter().take(MAX_SIGNATURES).enumerate() {
        if s.payload.len() > MAX_PAYLOAD {
            misses.push(format!("a payload of {} bytes", s.payload.len()));
            continue;
        }
        let Ok(sig) = STANDARD.decode(s.signature.trim().as_bytes()) else {
            misses.push("a signature that is not base64".into());
            continue;
        };
        let signers: Vec<&PublicKey> = keys
            .iter()
            .copied()
            .filter(|k| k.verifies(&s.payload, &sig))
            .collect();
        if signers.is_empty() {
            misses.push("a signature by no key the policy names".into());
            continue;
        }
        if let Some(why) = payload_refusal(&s.payload, image, digest) {
            misses.push(why);
            continue;
        }
        for k in signers {
            good.push((n, k));
        }
    }
    // The bundles: each one's envelope read once, counted as a signature
    // when it is one, and as an attestation in any case.
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let mut envelopes: Vec<Vec<u8>> = Vec::new();
    for (n, bytes) in bundles.iter().take(MAX_SIGNATURES).enumerate() {
        let env = match bundle_envelope(bytes) {
            Ok(env) => env,
            Err(why) => {
                misses.push(why);
                continue;
            }
        };
        if let Ok(raw) = serde_json::to_vec(&env) {
            envelopes.push(raw);
        }
        let Ok(env) = serde_json::from_value::<DsseDoc>(env) else {
            misses.push("a bundle whose envelope is not a DSSE one".into());
            continue;
        };
        match open_statement(&env, &keys, hex) {
            Ok((signers, st)) => {
                if st.predicate_type != COSIGN_SIGN {
                    misses.push(format!(
                        "a bundle of predicate type {}, not {COSIGN_SIGN}",
                        crate::model::text::clip(&st.predicate_type, 120)
                    ));
                    continue;
                }
                for k in signers {
                    good.push((usize::MAX - n, k));
                }
            }
            Err((_, why)) => misses.push(
                why.replacen(NOUN, "a bundle", 1)
                    .replace("the rule names", "the policy names"),
            ),
        }
    }
    for (doc, rule) in asks {
        let Require::Sigstore(rule_keys) = &rule.require else {
            continue;
        };
        match good.iter().find(|(_, k)| rule_keys.contains(k)) {
            Some((_, k)) => {
                by.push((doc.to_string(), k.id()));
                if let Some(a) = &rule.attestation {
                    let all: Vec<Vec<u8>> =
                        attestations.iter().chain(&envelopes).cloned().collect();
                    let k = attested(a, digest, &all).map_err(|why| {
                        format!(
                            "{doc}'s rule for {} asks for an attestation of {} by {}: found {why}",
                            rule.scope.as_str(),
                            a.predicate_type,
                            a.keys
                                .iter()
                                .map(PublicKey::id)
                                .collect::<Vec<_>>()
                                .join(" or ")
                        )
                    })?;
                    by.push((format!("{doc} (attestation)"), k));
                }
            }
            None => {
                let nearest = misses
                    .iter()
                    .rev()
                    .min_by_key(|m| miss_rank(m))
                    .cloned()
                    .unwrap_or_else(|| {
                        if signatures.is_empty() && bundles.is_empty() {
                            "no signature".into()
                        } else {
                            "a signature by another document's key only".into()
                        }
                    });
                return Err(format!(
                    "{doc}'s rule for {} asks for a signature by {}: found {nearest}",
                    rule.scope.as_str(),
                    rule_keys
                        .iter()
                        .map(PublicKey::id)
                        .collect::<Vec<_>>()
                        .join(" or ")
                ));
            }
        }
    }
    Ok(Verified {
        digest: digest.to_string(),
        by,
    })
}

#[derive(Deserialize)]
struct DsseDoc {
    #[serde(rename = "payloadType")]
    payload_type: String,
    payload: String,
    signatures: Vec<DsseSignature>,
}

#[derive(Deserialize)]
struct DsseSignature {
    sig: String,
}

#[derive(Deserialize)]
struct Statement {
    #[serde(rename = "_type")]
    kind: String,
    subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    predicate_type: String,
}

#[derive(Deserialize)]
struct Subject {
    digest: BTreeMap<String, String>,
}

/// Which key of `a` signed an attestation of the manifest `digest` of the
/// predicate type `a` asks for, among `envelopes` (DSSE envelopes, as the
/// registry holds them); or the nearest miss.
fn attested(a: &Attestation, digest: &str, envelopes: &[Vec<u8>]) -> Result<String, String> {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let keys: Vec<&PublicKey> = a.keys.iter().collect();
    let mut misses: Vec<(u8, String)> = Vec::new();
    for bytes in envelopes.iter().take(MAX_SIGNATURES) {
        if bytes.len() > MAX_ATTESTATION {
            misses.push((2, format!("an attestation of {} bytes", bytes.len())));
            continue;
        }
        let Ok(env) = serde_json::from_slice::<DsseDoc>(bytes) else {
            misses.push((2, "an attestation that is not a DSSE envelope".into()));
            continue;
        };
        let (signers, st) = match open_statement(&env, &keys, hex) {
            Ok(found) => found,
            Err((rank, why)) => {
                misses.push((rank, why.replacen(NOUN, "an attestation", 1)));
                continue;
            }
        };
        if st.predicate_type != a.predicate_type {
            misses.push((
                0,
                format!(
                    "an attestation of another predicate type ({})",
                    crate::model::text::clip(&st.predicate_type, 120)
                ),
            ));
            continue;
        }
        if let Some(key) = signers.first() {
            return Ok(key.id());
        }
    }
    Err(misses
        .into_iter()
        .min_by_key(|(rank, _)| *rank)
        .map_or_else(|| "no attestation".into(), |(_, m)| m))
}

/// What [`open_statement`]'s misses call the envelope; its caller names it.
const NOUN: &str = "{envelope}";

/// The in-toto statement a DSSE envelope signs about the manifest whose
/// sha256 is `hex`, with the keys among `keys` that signed it (at least
/// one); or why not, ranked (0: signed by a key given, about something
/// else; 1: by none of them; 2: not readable), its envelope called
/// [`NOUN`].
fn open_statement<'k>(
    env: &DsseDoc,
    keys: &[&'k PublicKey],
    hex: &str,
) -> Result<(Vec<&'k PublicKey>, Statement), (u8, String)> {
    let Ok(payload) = STANDARD
        .decode(env.payload.as_bytes())
        .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(env.payload.as_bytes()))
    else {
        return Err((2, format!("{NOUN} whose payload is not base64")));
    };
    let message = crate::model::dsse::pae(&env.payload_type, &payload);
    let sigs: Vec<Vec<u8>> = env
        .signatures
        .iter()
        .take(MAX_SIGNATURES)
        .filter_map(|s| STANDARD.decode(s.sig.as_bytes()).ok())
        .collect();
    let signers: Vec<&'k PublicKey> = keys
        .iter()
        .copied()
        .filter(|k| sigs.iter().any(|sig| k.verifies(&message, sig)))
        .collect();
    if signers.is_empty() {
        return Err((1, format!("{NOUN} signed by no key the rule names")));
    }
    if env.payload_type != IN_TOTO {
        return Err((
            0,
            format!(
                "{NOUN} of payload type {:?}",
                crate::model::text::clip(&env.payload_type, 80)
            ),
        ));
    }
    let Ok(st) = serde_json::from_slice::<Statement>(&payload) else {
        return Err((0, format!("{NOUN} that is not an in-toto statement")));
    };
    if !st.kind.starts_with("https://in-toto.io/Statement/") {
        return Err((
            0,
            format!(
                "an in-toto statement of type {:?}",
                crate::model::text::clip(&st.kind, 80)
            ),
        ));
    }
    let about = st.subject.iter().any(|s| {
        s.digest
            .get("sha256")
            .is_some_and(|d| d.eq_ignore_ascii_case(hex))
    });
    if !about {
        return Err((0, format!("{NOUN} about another digest")));
    }
    Ok((signers, st))
}

#[derive(Deserialize)]
struct BundleDoc {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    #[serde(rename = "dsseEnvelope", default)]
    dsse_envelope: Option<serde_json::Value>,
    #[serde(rename = "messageSignature", default)]
    message_signature: Option<serde_json::Value>,
}

/// The DSSE envelope a Sigstore bundle v0.3 carries, or why it carries
/// none that can sign an image.
fn bundle_envelope(bytes: &[u8]) -> Result<serde_json::Value, String> {
    if bytes.len() > MAX_ATTESTATION {
        return Err(format!("a bundle of {} bytes", bytes.len()));
    }
    let b: BundleDoc = serde_json::from_slice(bytes)
        .map_err(|e| format!("a bundle that is not a Sigstore bundle ({e})"))?;
    if !BUNDLE_TYPES.contains(&b.media_type.as_str()) {
        return Err(format!(
            "a bundle of media type {:?}, not {}",
            crate::model::text::clip(&b.media_type, 80),
            BUNDLE_TYPES[0]
        ));
    }
    match (b.dsse_envelope, b.message_signature) {
        (Some(env), _) => Ok(env),
        (None, Some(_)) => Err(
            "a bundle with a message signature (cosign signs an image with a DSSE statement)"
                .into(),
        ),
        (None, None) => Err("a bundle with no DSSE envelope".into()),
    }
}

/// Which miss says most: one by a trusted key that names something else
/// before one by no trusted key.
fn miss_rank(m: &str) -> u8 {
    if m.starts_with("a signature by no key")
        || m.starts_with("a signature that is not")
        || m.starts_with("a bundle signed by no key")
        || m.starts_with("a bundle whose payload")
        || m.starts_with("a bundle that is not")
    {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair};

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    struct Signer(EcdsaKeyPair);

    fn p256() -> Signer {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        Signer(
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
                .unwrap(),
        )
    }

    impl Signer {
        fn key(&self) -> PublicKey {
            PublicKey::P256(self.0.public_key().as_ref().to_vec())
        }
        fn sign(&self, payload: &[u8]) -> Signature {
            let sig = self.0.sign(&SystemRandom::new(), payload).unwrap();
            Signature {
                payload: payload.to_vec(),
                signature: STANDARD.encode(sig.as_ref()),
            }
        }
    }

    fn payload(reference: &str, digest: &str, kind: &str) -> Vec<u8> {
        serde_json::json!({
            "critical": {
                "identity": {"docker-reference": reference},
                "image": {"docker-manifest-digest": digest},
                "type": kind
            },
            "optional": {"creator": "test"}
        })
        .to_string()
        .into_bytes()
    }

    fn rule(scope: &str, keys: Vec<PublicKey>) -> Rule {
        Rule {
            scope: Scope::parse(scope).unwrap(),
            require: if keys.is_empty() {
                Require::Nothing
            } else {
                Require::Sigstore(keys)
            },
            attestation: None,
        }
    }

    fn pem(k: &PublicKey) -> String {
        let b = STANDARD.encode(k.to_der());
        format!("-----BEGIN PUBLIC KEY-----\n{b}\n-----END PUBLIC KEY-----\n")
    }

    #[test]
    fn a_signature_counts_only_for_its_digest_its_repository_and_its_tag_by_a_named_key() {
        let (a, b) = (p256(), p256());
        let image = "reg.example:5000/team/app:v1";
        let at = |s: &str| Reference::parse(s).unwrap();
        let good = payload(image, D1, SIGSTORE_TYPE);
        let by_digest = "reg.example:5000/team/app@".to_string() + D1;
        // (what is signed, by whom, the image, its digest, the verdict or the refusal's end)
        type Case<'a> = (Vec<Signature>, &'a str, &'a str, Result<(), &'a str>);
        let cases: Vec<Case> = vec![
            (vec![a.sign(&good)], image, D1, Ok(())),
            (vec![], image, D1, Err("found no signature")),
            (
                vec![b.sign(&good)],
                image,
                D1,
                Err("found a signature by no key the policy names"),
            ),
            (
                vec![a.sign(&good)],
                image,
                D2,
                Err(
                    "found a signature of another digest (sha256:1111111111111111111111111111111111111111111111111111111111111111)",
                ),
            ),
            (
                vec![a.sign(&payload(
                    "reg.example:5000/team/other:v1",
                    D1,
                    SIGSTORE_TYPE,
                ))],
                image,
                D1,
                Err("found a signature for another repository (reg.example:5000/team/other)"),
            ),
            (
                vec![a.sign(&payload("reg.example:5000/team/app:v2", D1, SIGSTORE_TYPE))],
                image,
                D1,
                Err("found a signature for another tag (v2)"),
            ),
            // Signed for the repository alone (as cosign signs): any tag.
            (
                vec![a.sign(&payload("reg.example:5000/team/app", D1, SIGSTORE_TYPE))],
                image,
                D1,
                Ok(()),
            ),
            // Named by digest: any tag of the repository.
            (
                vec![a.sign(&payload("reg.example:5000/team/app:v2", D1, SIGSTORE_TYPE))],
                &by_digest,
                D1,
                Ok(()),
            ),
            (
                vec![a.sign(&payload(image, D1, "atomic container signature"))],
                image,
                D1,
                Err(
                    "found a payload of type \"atomic container signature\", not \"cosign container image signature\"",
                ),
            ),
            (
                vec![a.sign(b"not json")],
                image,
                D1,
                Err(
                    "found a payload that is not a simple-signing one (expected ident at line 1 column 2)",
                ),
            ),
            (
                vec![Signature {
                    payload: good.clone(),
                    signature: "%%%".into(),
                }],
                image,
                D1,
                Err("found a signature that is not base64"),
            ),
            // A signature of the payload, with another payload beside it.
            (
                vec![Signature {
                    payload: payload(image, D2, SIGSTORE_TYPE),
                    signature: a.sign(&good).signature,
                }],
                image,
                D1,
                Err("found a signature by no key the policy names"),
            ),
            // One bad signature does not hide a good one.
            (
                vec![
                    b.sign(&good),
                    a.sign(&payload(image, D2, SIGSTORE_TYPE)),
                    a.sign(&good),
                ],
                image,
                D1,
                Ok(()),
            ),
            // A trusted key's miss is said before an unknown key's.
            (
                vec![a.sign(&payload(image, D2, SIGSTORE_TYPE)), b.sign(&good)],
                image,
                D1,
                Err(
                    "found a signature of another digest (sha256:2222222222222222222222222222222222222222222222222222222222222222)",
                ),
            ),
        ];
        let r = rule("reg.example:5000/team", vec![a.key()]);
        for (n, (sigs, image, digest, want)) in cases.into_iter().enumerate() {
            let asks = [("node", &r)];
            let got = judge(&asks, &at(image), digest, &sigs, &[], &[]);
            match want {
                Ok(()) => assert_eq!(
                    got.map(|v| v.by),
                    Ok(vec![("node".into(), a.key().id())]),
                    "case {n}"
                ),
                Err(end) => {
                    let e = got.unwrap_err();
                    assert!(e.ends_with(end), "case {n}: {e}");
                    assert!(e.starts_with("node's rule for reg.example:5000/team asks for a signature by ecdsa-p256:"), "case {n}: {e}");
                }
            }
        }
    }

    #[test]
    fn ed25519_keys_verify_and_every_document_must_be_met() {
        let rng = SystemRandom::new();
        let ed = Ed25519KeyPair::from_pkcs8(Ed25519KeyPair::generate_pkcs8(&rng).unwrap().as_ref())
            .unwrap();
        let ed_key = PublicKey::Ed25519(ed.public_key().as_ref().to_vec());
        let a = p256();
        let image = Reference::parse("reg.example/app:1").unwrap();
        let p = payload("reg.example/app:1", D1, SIGSTORE_TYPE);
        let ed_sig = Signature {
            payload: p.clone(),
            signature: STANDARD.encode(ed.sign(&p).as_ref()),
        };
        let (r_ed, r_a) = (
            rule("reg.example", vec![ed_key.clone()]),
            rule("*", vec![a.key()]),
        );
        let both = [("group g", &r_ed), ("node", &r_a)];
        assert_eq!(
            judge(&both, &image, D1, std::slice::from_ref(&ed_sig), &[], &[]).unwrap_err(),
            format!(
                "node's rule for * asks for a signature by {}: found a signature by another document's key only",
                a.key().id()
            )
        );
        let v = judge(&both, &image, D1, &[ed_sig, a.sign(&p)], &[], &[]).unwrap();
        assert_eq!(
            v.by,
            vec![
                ("group g".into(), ed_key.id()),
                ("node".into(), a.key().id())
            ]
        );
    }

    #[test]
    fn the_narrowest_rule_of_each_document_applies() {
        let a = p256();
        let mut p = Policy::default();
        p.documents.insert(
            "node".into(),
            Rules(vec![
                rule("*", vec![a.key()]),
                rule("reg.example/public", vec![]),
                rule("reg.example:5000", vec![a.key()]),
            ]),
        );
        // (image, documents asking)
        let cases = [
            ("reg.example/app:1", vec!["* (node)"]),
            ("reg.example/public:1", vec![]),
            ("reg.example/public/x:1", vec![]),
            ("reg.example/publicity:1", vec!["* (node)"]),
            ("reg.example:5000/app:1", vec!["reg.example:5000 (node)"]),
            ("busybox", vec!["* (node)"]),
        ];
        for (image, want) in cases {
            let r = Reference::parse(image).unwrap();
            let got: Vec<String> = p
                .asks(&r)
                .iter()
                .map(|(d, r)| format!("{} ({d})", r.scope.as_str()))
                .collect();
            assert_eq!(got, want, "{image}");
        }
        p.documents.insert(
            "group g".into(),
            Rules(vec![rule("reg.example/public", vec![a.key()])]),
        );
        let r = Reference::parse("reg.example/public:1").unwrap();
        assert_eq!(
            p.asks(&r).len(),
            1,
            "a group's rule is not loosened by the node's none"
        );
    }

    #[test]
    fn rules_are_read_with_each_fault_named() {
        let a = p256();
        let key = pem(&a.key());
        // (the rules, the field at fault and its message's start, or None)
        let cases: Vec<(serde_json::Value, Option<(&str, &str)>)> = vec![
            (
                serde_json::json!([{"scope": "*", "require": "sigstore", "keys": [key]}]),
                None,
            ),
            (
                serde_json::json!([{"scope": "reg.example/a", "require": "none"}]),
                None,
            ),
            (
                serde_json::json!([{"scope": "reg.example/a", "require": "gpg", "keys": [key]}]),
                Some(("[0].require", "\"gpg\"")),
            ),
            (
                serde_json::json!([{"scope": "reg.example/a", "require": "sigstore"}]),
                Some(("[0].keys", "1 to 8")),
            ),
            (
                serde_json::json!([{"scope": "reg.example/a", "require": "none", "keys": [key]}]),
                Some(("[0].keys", "require = none")),
            ),
            (
                serde_json::json!([{"scope": "library/app", "require": "none"}]),
                Some(("[0].scope", "scope \"library/app\": name the registry")),
            ),
            (
                serde_json::json!([{"scope": "reg.example/", "require": "none"}]),
                Some(("[0].scope", "scope")),
            ),
            (
                serde_json::json!([{"scope": "reg.example/A", "require": "none"}]),
                Some(("[0].scope", "scope")),
            ),
            (
                serde_json::json!([{"scope": "*", "require": "none"}, {"scope": "*", "require": "none"}]),
                Some(("[1].scope", "scope * has a rule already")),
            ),
            (
                serde_json::json!([{"scope": "*", "require": "sigstore", "keys": ["-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"]}]),
                Some(("[0].keys[0]", "not an ECDSA P-256 or Ed25519")),
            ),
            (
                serde_json::json!([{"scope": "*", "require": "sigstore", "keys": ["ssh-ed25519 AAAA"]}]),
                Some(("[0].keys[0]", "not a PEM public key")),
            ),
            (
                serde_json::json!([{"scope": "*", "require": "none", "extra": 1}]),
                Some(("", "unknown field `extra`")),
            ),
        ];
        for (v, want) in cases {
            let got = Rules::parse(v.clone());
            match want {
                None => assert!(got.is_ok(), "{v}: {got:?}"),
                Some((field, start)) => {
                    let (f, m) = got.unwrap_err();
                    assert_eq!(f, field, "{v}");
                    assert!(m.starts_with(start), "{v}: {m}");
                }
            }
        }
    }

    /// A DSSE envelope of an in-toto statement about `digest`, signed by `by`.
    fn attestation(
        by: &Signer,
        payload_type: &str,
        kind: &str,
        digest: &str,
        predicate: &str,
    ) -> Vec<u8> {
        let statement = serde_json::json!({
            "_type": kind,
            "subject": [{"name": "reg.example/app", "digest": {"sha256": digest.trim_start_matches("sha256:")}}],
            "predicateType": predicate,
            "predicate": {"builder": {"id": "ci"}}
        })
        .to_string();
        let sig =
            by.0.sign(
                &SystemRandom::new(),
                &crate::model::dsse::pae(payload_type, statement.as_bytes()),
            )
            .unwrap();
        serde_json::json!({
            "payloadType": payload_type,
            "payload": STANDARD.encode(statement.as_bytes()),
            "signatures": [{"keyid": "", "sig": STANDARD.encode(sig.as_ref())}]
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn an_attestation_counts_only_signed_by_its_keys_about_this_digest_of_its_predicate_type() {
        let (a, b, ci) = (p256(), p256(), p256());
        let image = Reference::parse("reg.example/app:1").unwrap();
        let sig = a.sign(&payload("reg.example/app:1", D1, SIGSTORE_TYPE));
        const SLSA: &str = "https://slsa.dev/provenance/v1";
        let r = Rule {
            attestation: Some(Attestation {
                predicate_type: SLSA.into(),
                keys: vec![ci.key()],
            }),
            ..rule("reg.example", vec![a.key()])
        };
        // (the attestations held, the refusal's end or None)
        let cases: Vec<(Vec<Vec<u8>>, Option<&str>)> = vec![
            (vec![attestation(&ci, IN_TOTO, V1, D1, SLSA)], None),
            (
                vec![attestation(
                    &ci,
                    IN_TOTO,
                    "https://in-toto.io/Statement/v0.1",
                    D1,
                    SLSA,
                )],
                None,
            ),
            (vec![], Some("found no attestation")),
            (
                vec![attestation(&b, IN_TOTO, V1, D1, SLSA)],
                Some("found an attestation signed by no key the rule names"),
            ),
            (
                vec![attestation(&ci, IN_TOTO, V1, D2, SLSA)],
                Some("found an attestation about another digest"),
            ),
            (
                vec![attestation(
                    &ci,
                    IN_TOTO,
                    V1,
                    D1,
                    "https://spdx.dev/Document",
                )],
                Some("found an attestation of another predicate type (https://spdx.dev/Document)"),
            ),
            (
                vec![attestation(&ci, "application/json", V1, D1, SLSA)],
                Some("found an attestation of payload type \"application/json\""),
            ),
            (
                vec![attestation(
                    &ci,
                    IN_TOTO,
                    "https://example.com/Statement",
                    D1,
                    SLSA,
                )],
                Some("found an in-toto statement of type \"https://example.com/Statement\""),
            ),
            (
                vec![b"{}".to_vec()],
                Some("found an attestation that is not a DSSE envelope"),
            ),
            // A good one after misses is found; the nearest miss is said.
            (
                vec![
                    attestation(&b, IN_TOTO, V1, D1, SLSA),
                    attestation(&ci, IN_TOTO, V1, D1, SLSA),
                ],
                None,
            ),
            (
                vec![
                    attestation(&b, IN_TOTO, V1, D1, SLSA),
                    attestation(&ci, IN_TOTO, V1, D2, SLSA),
                ],
                Some("found an attestation about another digest"),
            ),
        ];
        for (n, (atts, want)) in cases.into_iter().enumerate() {
            let got = judge(
                &[("node", &r)],
                &image,
                D1,
                std::slice::from_ref(&sig),
                &atts,
                &[],
            );
            match want {
                None => assert_eq!(
                    got.map(|v| v.by.len()),
                    Ok(2),
                    "case {n}: the signature's key and the attestation's"
                ),
                Some(end) => {
                    let e = got.unwrap_err();
                    assert!(e.ends_with(end), "case {n}: {e}");
                    assert!(e.contains("asks for an attestation of https://slsa.dev/provenance/v1 by ecdsa-p256:"), "case {n}: {e}");
                }
            }
        }
        // Without the signature, the signature is what is missing.
        let e = judge(
            &[("node", &r)],
            &image,
            D1,
            &[],
            &[attestation(&ci, IN_TOTO, V1, D1, SLSA)],
            &[],
        )
        .unwrap_err();
        assert!(e.ends_with("found no signature"), "{e}");
    }

    /// A Sigstore bundle (v0.3, key-based) whose DSSE envelope signs an
    /// in-toto statement about `digest` of `predicate`.
    fn bundle(by: &Signer, digest: &str, predicate: &str) -> Vec<u8> {
        let env: serde_json::Value =
            serde_json::from_slice(&attestation(by, IN_TOTO, V1, digest, predicate)).unwrap();
        serde_json::json!({
            "mediaType": BUNDLE_TYPES[0],
            "verificationMaterial": {"publicKey": {"hint": "test"}},
            "dsseEnvelope": env,
        })
        .to_string()
        .into_bytes()
    }

    const V1: &str = "https://in-toto.io/Statement/v1";

    #[test]
    fn a_bundle_counts_as_a_signature_signed_by_a_policy_key_about_this_digest_of_cosigns_predicate()
     {
        let (a, b) = (p256(), p256());
        let image = Reference::parse("reg.example/app:1").unwrap();
        let r = rule("reg.example", vec![a.key()]);
        let good = bundle(&a, D1, COSIGN_SIGN);
        // A bundle whose envelope's signature is of another statement.
        let mut forged: serde_json::Value = serde_json::from_slice(&good).unwrap();
        forged["dsseEnvelope"]["signatures"] = serde_json::from_slice::<serde_json::Value>(
            &bundle(&a, D2, COSIGN_SIGN),
        )
        .unwrap()["dsseEnvelope"]["signatures"]
            .clone();
        let forged = forged.to_string().into_bytes();
        let alt_type = String::from_utf8(good.clone())
            .unwrap()
            .replace(BUNDLE_TYPES[0], BUNDLE_TYPES[1])
            .into_bytes();
        let message = serde_json::json!({
            "mediaType": BUNDLE_TYPES[0],
            "messageSignature": {"messageDigest": {"algorithm": "SHA2_256", "digest": ""}, "signature": ""},
        })
        .to_string()
        .into_bytes();
        let old = String::from_utf8(good.clone())
            .unwrap()
            .replace(
                BUNDLE_TYPES[0],
                "application/vnd.dev.sigstore.bundle+json;version=0.1",
            )
            .into_bytes();
        // (the bundles held, the refusal's end or None)
        let cases: Vec<(Vec<Vec<u8>>, Option<&str>)> = vec![
            (vec![good.clone()], None),
            (vec![alt_type], None),
            (
                vec![bundle(&b, D1, COSIGN_SIGN)],
                Some("found a bundle signed by no key the policy names"),
            ),
            (
                vec![bundle(&a, D2, COSIGN_SIGN)],
                Some("found a bundle about another digest"),
            ),
            (
                vec![bundle(&a, D1, "https://slsa.dev/provenance/v1")],
                Some(
                    "found a bundle of predicate type https://slsa.dev/provenance/v1, not https://sigstore.dev/cosign/sign/v1",
                ),
            ),
            (
                vec![forged],
                Some("found a bundle signed by no key the policy names"),
            ),
            (
                vec![message],
                Some(
                    "found a bundle with a message signature (cosign signs an image with a DSSE statement)",
                ),
            ),
            (
                vec![old],
                Some(
                    "found a bundle of media type \"application/vnd.dev.sigstore.bundle+json;version=0.1\", not application/vnd.dev.sigstore.bundle.v0.3+json",
                ),
            ),
            (
                vec![b"not json".to_vec()],
                Some("found a bundle that is not a Sigstore bundle"),
            ),
            // A good one after misses is found; a trusted key's miss is
            // said before an unknown key's.
            (vec![bundle(&b, D1, COSIGN_SIGN), good.clone()], None),
            (
                vec![bundle(&a, D2, COSIGN_SIGN), bundle(&b, D1, COSIGN_SIGN)],
                Some("found a bundle about another digest"),
            ),
        ];
        for (n, (bundles, want)) in cases.into_iter().enumerate() {
            let got = judge(&[("node", &r)], &image, D1, &[], &[], &bundles);
            match want {
                None => assert_eq!(
                    got.map(|v| v.by),
                    Ok(vec![("node".into(), a.key().id())]),
                    "case {n}"
                ),
                Some(end) => {
                    let e = got.unwrap_err();
                    assert!(e.contains(end), "case {n}: {e}");
                    assert!(
                        e.starts_with(
                            "node's rule for reg.example asks for a signature by ecdsa-p256:"
                        ),
                        "case {n}: {e}"
                    );
                }
            }
        }
        // A bundle's attestation of the rule's predicate type counts as the
        // attestation; a .sig signature and a bundle work together.
        const SLSA: &str = "https://slsa.dev/provenance/v1";
        let ci = p256();
        let r = Rule {
            attestation: Some(Attestation {
                predicate_type: SLSA.into(),
                keys: vec![ci.key()],
            }),
            ..rule("reg.example", vec![a.key()])
        };
        let sig = a.sign(&payload("reg.example/app:1", D1, SIGSTORE_TYPE));
        let v = judge(
            &[("node", &r)],
            &image,
            D1,
            std::slice::from_ref(&sig),
            &[],
            &[bundle(&ci, D1, SLSA)],
        )
        .unwrap();
        assert_eq!(v.by.len(), 2);
        let e = judge(
            &[("node", &r)],
            &image,
            D1,
            &[],
            &[],
            &[good, bundle(&ci, D2, SLSA)],
        )
        .unwrap_err();
        assert!(
            e.ends_with("found an attestation about another digest"),
            "{e}"
        );
    }

    #[test]
    fn the_allow_list_and_the_configs_rules_are_part_of_the_policy() {
        let a = p256();
        let listed = D1;
        let list = Allowed {
            version: 4,
            payload: "sha256:00".into(),
            images: [
                (None, listed.to_string()),
                (Some("reg.example/team/app".to_string()), D2.to_string()),
            ]
            .into_iter()
            .collect(),
        };
        let mut p = Policy::default();
        let free = Reference::parse("reg.example/other:1").unwrap();
        assert!(p.is_empty() && !p.covers(&free));
        p.allowed = Some(list);
        // (image, digest, refused or not)
        let cases = [
            ("reg.example/other:1", D1, None),
            ("reg.example/team/app:1", D2, None),
            (
                "reg.example/other:1",
                D2,
                Some(format!(
                    "refused (unlisted-image): {D2} of reg.example/other is not in the allow-list (version 4)"
                )),
            ),
            (
                "reg.example/team/app:1",
                "sha256:3333333333333333333333333333333333333333333333333333333333333333",
                Some("refused (unlisted-image): sha256:3333333333333333333333333333333333333333333333333333333333333333 of reg.example/team/app is not in the allow-list (version 4)".into()),
            ),
        ];
        for (image, digest, want) in cases {
            let r = Reference::parse(image).unwrap();
            assert!(p.covers(&r), "{image}");
            assert!(p.asks(&r).is_empty(), "{image}");
            assert_eq!(p.unlisted(&r, digest), want, "{image} {digest}");
        }
        let before = p.digest();
        // The config's rules are one more document, a floor: a document's
        // `none` does not lift them.
        let config = Rules(vec![rule("reg.example", vec![a.key()])]);
        let mut p = p.with_config(&config);
        p.documents.insert(
            "the node document".into(),
            Rules(vec![rule("reg.example/team", vec![])]),
        );
        assert_ne!(p.digest(), before);
        let r = Reference::parse("reg.example/team/app:1").unwrap();
        let asks: Vec<&str> = p.asks(&r).iter().map(|(d, _)| *d).collect();
        assert_eq!(asks, vec![CONFIG_DOCUMENT]);
        assert_eq!(
            Policy::default().with_config(&Rules::default()),
            Policy::default()
        );
    }

    #[test]
    fn a_key_reads_back_from_its_pem() {
        let a = p256();
        assert_eq!(PublicKey::from_pem(&pem(&a.key())).unwrap(), a.key());
    }
}
