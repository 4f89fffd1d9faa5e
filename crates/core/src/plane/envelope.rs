//! The signature around a plane document: a DSSE envelope (Dead Simple
//! Signing Envelope, v1) with Ed25519 signatures, the keys that make and
//! check them, and [`verify`], which says whether a document was signed by a
//! key this node trusts. A key is known by its [`KeyId`], derived from the
//! public key itself, so a node's config lists only public keys.
//!
//! A signature covers the pre-authentication encoding ([`pae`]) of the
//! payload type and the payload bytes exactly as carried: nothing is
//! canonicalised, and the payload is parsed only after it verified.

use std::borrow::Cow;
use std::fmt;
use std::io;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use serde::{Deserialize, Serialize};

use crate::model::names::Digest;
use crate::plane::document::{json_field, starts_an_object};

/// The payload type of a stead desired-state document.
pub const PAYLOAD_TYPE: &str = "application/vnd.stead.desired.v1+json";

/// The most signatures an envelope may carry.
pub const MAX_SIGNATURES: usize = 16;

/// The most verifications an envelope's signatures that name no trusted key
/// (no `keyid`, an empty one, or another tool's) are given in all, each
/// tried against every trusted key in turn: a bound on the work one
/// document can ask for.
pub const MAX_TRIALS: usize = 32;

pub use crate::model::dsse::pae;

/// A DSSE envelope: a payload, its type, and signatures over both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// What the payload is ([`PAYLOAD_TYPE`] for stead's documents).
    pub payload_type: String,
    /// The payload, as signed.
    pub payload: Vec<u8>,
    /// The signatures; any one by a trusted key is enough.
    pub signatures: Vec<Signature>,
}

/// One signature of an envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The signer's key id as the envelope states it: a hint, not trusted;
    /// empty when the envelope gives none (DSSE makes it optional).
    pub keyid: String,
    /// The signature bytes (64 for Ed25519).
    pub sig: Vec<u8>,
}

/// An envelope that could not be read: which field, what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("envelope: {field}: {message}")]
pub struct EnvelopeError {
    /// The field at fault (`payload`, `signatures[1].sig`, …), or
    /// `(document)` when the envelope is not JSON of the right shape.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// An envelope's JSON, its base64 borrowed from the text read where it
/// has no escapes (a report's payload is read, decoded and dropped a
/// million times over).
#[derive(Deserialize, Serialize)]
struct EnvelopeDoc<'a> {
    #[serde(rename = "payloadType")]
    payload_type: String,
    #[serde(borrow)]
    payload: Cow<'a, str>,
    #[serde(borrow)]
    signatures: Vec<SignatureDoc<'a>>,
}

#[derive(Deserialize, Serialize)]
struct SignatureDoc<'a> {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    keyid: String,
    #[serde(borrow)]
    sig: Cow<'a, str>,
}

impl Envelope {
    /// Reads an envelope's JSON: `payload` and each `sig` in base64
    /// (standard, or the URL-safe alphabet DSSE also allows), at most
    /// [`MAX_SIGNATURES`] signatures. Fields other than these are ignored.
    pub fn parse(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
        let err = |field: &str, message: String| EnvelopeError {
            field: field.to_string(),
            message,
        };
        // serde would also read a struct from a JSON array of its fields.
        if !starts_an_object(bytes) {
            return Err(err("(document)", "must be a JSON object".into()));
        }
        let doc: EnvelopeDoc = crate::model::json::read(bytes)
            .map_err(|e| err(&json_field(&e.path), e.error.to_string()))?;
        if doc.signatures.len() > MAX_SIGNATURES {
            return Err(err(
                "signatures",
                format!(
                    "{} signatures, more than the {MAX_SIGNATURES} an envelope may carry",
                    doc.signatures.len()
                ),
            ));
        }
        let payload = decode_base64(&doc.payload).map_err(|m| err("payload", m))?;
        let signatures = doc
            .signatures
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let sig =
                    decode_base64(&s.sig).map_err(|m| err(&format!("signatures[{i}].sig"), m))?;
                Ok(Signature {
                    keyid: s.keyid,
                    sig,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Envelope {
            payload_type: doc.payload_type,
            payload,
            signatures,
        })
    }

    /// The envelope's JSON (indented, ending in a newline), base64 in the
    /// standard alphabet.
    pub fn to_json(&self) -> Vec<u8> {
        let doc = EnvelopeDoc {
            payload_type: self.payload_type.clone(),
            payload: STANDARD.encode(&self.payload).into(),
            signatures: self
                .signatures
                .iter()
                .map(|s| SignatureDoc {
                    keyid: s.keyid.clone(),
                    sig: STANDARD.encode(&s.sig).into(),
                })
                .collect(),
        };
        let mut out = serde_json::to_vec_pretty(&doc).expect("an envelope serialises");
        out.push(b'\n');
        out
    }
}

/// Decodes base64 in the standard alphabet or the URL-safe one, padded.
fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    STANDARD
        .decode(s)
        .or_else(|e| URL_SAFE.decode(s).map_err(|_| e))
        .map_err(|e| format!("not base64: {e}"))
}

/// A key's id: the first 16 hex digits of the sha256 of its 32 public key
/// bytes. Derived, never chosen, so it is the same wherever the key is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId(String);

impl KeyId {
    /// The 16 lowercase hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for KeyId {
    type Error = String;
    fn try_from(s: &str) -> Result<KeyId, String> {
        if s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(KeyId(s.to_string()))
        } else {
            Err(format!(
                "invalid key id {:?}: must be 16 lowercase hex digits",
                s.chars().take(40).collect::<String>()
            ))
        }
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a key (or a key file) was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The text is not a key.
    #[error("not an Ed25519 {what} key: {message}")]
    Malformed {
        /// `public` or `secret`.
        what: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A key file could not be read.
    #[error("cannot read key file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A key file's content is not a key.
    #[error("key file {path}: {source}")]
    File {
        /// The file.
        path: String,
        /// What is wrong with its content.
        #[source]
        source: Box<KeyError>,
    },
}

/// The 32 key bytes of base64 text (surrounding white space dropped).
fn key_bytes(s: &str, what: &'static str) -> Result<[u8; 32], KeyError> {
    let malformed = |message: String| KeyError::Malformed { what, message };
    let bytes = STANDARD
        .decode(s.trim())
        .map_err(|e| malformed(format!("not standard base64: {e}")))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| malformed(format!("{} bytes where a key has 32", bytes.len())))
}

/// A public key that signatures are checked with: an Ed25519 key's 32
/// bytes (ring's Ed25519, which TLS links already, checks them as it
/// verifies: bytes that are no point on the curve verify nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    /// Reads a public key from the standard base64 of its 32 bytes.
    pub fn parse(s: &str) -> Result<PublicKey, KeyError> {
        key_bytes(s, "public").map(PublicKey)
    }

    /// The standard base64 of the key's 32 bytes, as [`PublicKey::parse`] reads it.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// The key's 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key's id.
    pub fn id(&self) -> KeyId {
        KeyId(Digest::of(&self.0).hex()[..16].to_string())
    }

    /// Whether `sig` is this key's signature of `message` (RFC 8032's
    /// check, ring's).
    pub fn verifies(&self, message: &[u8], sig: &[u8]) -> bool {
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &self.0)
            .verify(message, sig)
            .is_ok()
    }
}

/// A secret key that signs documents: its 32-byte seed and the key pair
/// made of it. Its bytes are never printed.
pub struct SecretKey {
    seed: [u8; 32],
    pair: ring::signature::Ed25519KeyPair,
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretKey")
            .field("id", &self.public().id())
            .finish_non_exhaustive()
    }
}

impl SecretKey {
    /// A new key from 32 bytes of the system's random source (ring's,
    /// the `getrandom` system call).
    pub fn generate() -> io::Result<SecretKey> {
        let mut seed = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed)
            .map_err(|_| io::Error::other("the system's random source failed"))?;
        Ok(SecretKey::from_seed(seed))
    }

    /// The key of a seed (any 32 bytes are one): a key file's, or one
    /// derived for one use from a device's local key
    /// ([`crate::model::seal::LocalKey::report_seed`]).
    pub fn from_seed(seed: [u8; 32]) -> SecretKey {
        let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(&seed)
            .expect("any 32 bytes are an Ed25519 seed");
        SecretKey { seed, pair }
    }

    /// Reads a key file's text: the standard base64 of the 32-byte seed
    /// (`stead_host::host::keyfile` reads and writes the file).
    pub fn from_text(text: &str) -> Result<SecretKey, KeyError> {
        Ok(SecretKey::from_seed(key_bytes(text, "secret")?))
    }

    /// A key file's text: the base64 of the seed and a newline. Its only
    /// reader is the file it is written to.
    pub fn to_text(&self) -> String {
        format!("{}\n", STANDARD.encode(self.seed))
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        use ring::signature::KeyPair as _;
        let mut key = [0u8; 32];
        key.copy_from_slice(self.pair.public_key().as_ref());
        PublicKey(key)
    }

    /// An envelope of the payload with this key's one signature over
    /// [`pae`] of the type and payload.
    pub fn sign(&self, payload_type: &str, payload: &[u8]) -> Envelope {
        let mut envelope = Envelope {
            payload_type: payload_type.to_string(),
            payload: payload.to_vec(),
            signatures: Vec::new(),
        };
        envelope.countersign(self);
        envelope
    }
}

impl Envelope {
    /// Adds `key`'s signature over [`pae`] of the envelope's type and
    /// payload, unless it already carries one naming that key.
    pub fn countersign(&mut self, key: &SecretKey) {
        let keyid = key.public().id();
        if self.signatures.iter().all(|s| s.keyid != keyid.as_str()) {
            let sig = key.pair.sign(&pae(&self.payload_type, &self.payload));
            self.signatures.push(Signature {
                keyid: keyid.to_string(),
                sig: sig.as_ref().to_vec(),
            });
        }
    }
}

/// Why an envelope was not accepted as a stead document from a trusted key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Not a stead desired-state document (or not what was expected).
    #[error("the payload type is {0:?}, not {1:?}: not a {2}")]
    PayloadType(String, &'static str, &'static str),
    /// No signature at all.
    #[error("the document carries no signature")]
    Unsigned,
    /// A trusted key's signature that does not verify.
    #[error(
        "the signature by trusted key {keyid} does not verify: the document was changed after it was signed, or the signature is damaged"
    )]
    BadSignature {
        /// The trusted key it names.
        keyid: KeyId,
    },
    /// Signed, but by no trusted key.
    #[error("signed only by keys this node does not trust ({})", .keyids.join(", "))]
    UnknownKey {
        /// The key ids the signatures name (each cut to 64 characters).
        keyids: Vec<String>,
    },
}

impl VerifyError {
    /// Its refusal class.
    pub fn class(&self) -> crate::plane::RefusalClass {
        use crate::plane::RefusalClass;
        match self {
            VerifyError::PayloadType(..) => RefusalClass::PayloadType,
            VerifyError::Unsigned => RefusalClass::Unsigned,
            VerifyError::BadSignature { .. } => RefusalClass::BadSignature,
            VerifyError::UnknownKey { .. } => RefusalClass::UnknownKey,
        }
    }
}

/// Checks that an envelope holds a stead document signed by one of the
/// `trusted` keys, and returns that key. A signature whose key id names a
/// trusted key is verified with that key; one that names none (no `keyid`,
/// an empty one, or another tool's id for the key: DSSE makes it a hint) is
/// tried against each trusted key, [`MAX_TRIALS`] verifications at most in
/// all. Each is verified over [`pae`] by ring's Ed25519 (a signature
/// whose `s` is not reduced is refused: none is malleable); one good signature by a trusted key is enough, so during a
/// key rotation a document signed by the old key, the new one or both
/// verifies on a node that trusts both.
pub fn verify<'k>(env: &Envelope, trusted: &'k [PublicKey]) -> Result<&'k PublicKey, VerifyError> {
    verify_as(env, trusted, PAYLOAD_TYPE, "stead desired-state document")
}

/// The distinct keys of `keys` whose signature of the envelope verifies,
/// in `keys`' order: for a threshold (a root, signed by several keys). A
/// key that signed twice counts once; a signature that names no key of
/// `keys` is tried against each, [`MAX_TRIALS`] verifications at most in
/// all.
pub fn signers<'k>(env: &Envelope, keys: &'k [PublicKey]) -> Vec<&'k PublicKey> {
    let message = pae(&env.payload_type, &env.payload);
    let ids: Vec<KeyId> = keys.iter().map(PublicKey::id).collect();
    let mut signed = vec![false; keys.len()];
    let mut trials = 0;
    for s in &env.signatures {
        if s.sig.len() != 64 {
            continue;
        }
        match ids.iter().position(|id| id.as_str() == s.keyid) {
            Some(i) => signed[i] |= keys[i].verifies(&message, &s.sig),
            None => {
                for (i, key) in keys.iter().enumerate() {
                    if trials == MAX_TRIALS || signed[i] {
                        continue;
                    }
                    trials += 1;
                    if key.verifies(&message, &s.sig) {
                        signed[i] = true;
                        break;
                    }
                }
            }
        }
    }
    keys.iter()
        .zip(signed)
        .filter(|(_, s)| *s)
        .map(|(k, _)| k)
        .collect()
}

/// [`verify`] for an envelope of another payload type (`what` names it in
/// the error): a release statement of stead itself.
pub fn verify_as<'k>(
    env: &Envelope,
    trusted: &'k [PublicKey],
    payload_type: &'static str,
    what: &'static str,
) -> Result<&'k PublicKey, VerifyError> {
    if env.payload_type != payload_type {
        return Err(VerifyError::PayloadType(
            env.payload_type.chars().take(100).collect(),
            payload_type,
            what,
        ));
    }
    if env.signatures.is_empty() {
        return Err(VerifyError::Unsigned);
    }
    let message = pae(&env.payload_type, &env.payload);
    let ids: Vec<KeyId> = trusted.iter().map(PublicKey::id).collect();
    let good = |s: &Signature, key: &PublicKey| s.sig.len() == 64 && key.verifies(&message, &s.sig);
    let mut bad = None;
    let mut unnamed = Vec::new();
    for s in &env.signatures {
        let Some(i) = ids.iter().position(|id| id.as_str() == s.keyid) else {
            unnamed.push(s);
            continue;
        };
        if good(s, &trusted[i]) {
            return Ok(&trusted[i]);
        }
        bad.get_or_insert_with(|| ids[i].clone());
    }
    // A signature that names a trusted key and fails is a damaged one;
    // the others may be by any key.
    if bad.is_none() {
        let mut trials = 0;
        for s in unnamed {
            for key in trusted {
                if trials == MAX_TRIALS {
                    break;
                }
                trials += 1;
                if good(s, key) {
                    return Ok(key);
                }
            }
        }
    }
    match bad {
        Some(keyid) => Err(VerifyError::BadSignature { keyid }),
        None => Err(VerifyError::UnknownKey {
            keyids: env
                .signatures
                .iter()
                .map(|s| match s.keyid.as_str() {
                    "" => "(no key id)".to_string(),
                    id => id.chars().take(64).collect(),
                })
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SecretKey {
        SecretKey::from_seed([seed; 32])
    }

    #[test]
    fn pae_matches_the_dsse_vector() {
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ");
    }

    #[test]
    fn an_envelope_reads_back_what_it_wrote() {
        let env = key(1).sign(PAYLOAD_TYPE, b"{\"node\":\"n\"}\n\xff");
        let json = env.to_json();
        assert!(json.ends_with(b"\n"));
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["payloadType"], PAYLOAD_TYPE);
        assert_eq!(v["payload"], STANDARD.encode(&env.payload));
        assert_eq!(v["signatures"][0]["keyid"], key(1).public().id().as_str());
        assert_eq!(Envelope::parse(&json).unwrap(), env);
        // The URL-safe alphabet DSSE allows reads the same.
        let mut v = v;
        v["payload"] = URL_SAFE.encode(&env.payload).into();
        assert_eq!(Envelope::parse(v.to_string().as_bytes()).unwrap(), env);
        // Fields of other tools are left alone.
        v["extra"] = 1.into();
        assert!(Envelope::parse(v.to_string().as_bytes()).is_ok());
    }

    #[test]
    fn malformed_envelopes_are_refused_naming_the_field() {
        let sig = serde_json::json!({"keyid": "k", "sig": STANDARD.encode([0u8; 64])});
        let ok = serde_json::json!({"payloadType": PAYLOAD_TYPE, "payload": "e30=", "signatures": [sig]});
        let with = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = ok.clone();
            f(&mut v);
            v.to_string()
        };
        assert!(Envelope::parse(ok.to_string().as_bytes()).is_ok());
        for (text, field, message) in [
            (
                "not json".to_string(),
                "(document)",
                "must be a JSON object",
            ),
            ("{".to_string(), "(document)", "EOF"),
            ("[]".into(), "(document)", "must be a JSON object"),
            (
                format!("[{PAYLOAD_TYPE:?}, \"e30=\", []]"),
                "(document)",
                "must be a JSON object",
            ),
            (format!("{ok} {{}}"), "(document)", "trailing"),
            (
                with(&|v| {
                    v.as_object_mut().unwrap().remove("payloadType");
                }),
                "(document)",
                "missing field `payloadType`",
            ),
            (
                with(&|v| {
                    v.as_object_mut().unwrap().remove("payload");
                }),
                "(document)",
                "missing field `payload`",
            ),
            (
                with(&|v| {
                    v.as_object_mut().unwrap().remove("signatures");
                }),
                "(document)",
                "missing field `signatures`",
            ),
            (
                with(&|v| v["payload"] = 7.into()),
                "payload",
                "invalid type",
            ),
            (
                with(&|v| v["payload"] = "e30".into()),
                "payload",
                "not base64",
            ),
            (
                with(&|v| v["payload"] = "!!!!".into()),
                "payload",
                "not base64",
            ),
            (
                with(&|v| v["signatures"][0]["sig"] = "a b".into()),
                "signatures[0].sig",
                "not base64",
            ),
            (
                with(&|v| v["signatures"] = vec![sig.clone(); MAX_SIGNATURES + 1].into()),
                "signatures",
                "17 signatures",
            ),
        ] {
            let e = Envelope::parse(text.as_bytes()).unwrap_err();
            assert_eq!(e.field, field, "{text}: {e}");
            assert!(e.message.contains(message), "{text}: {e}");
        }
        let many = with(&|v| v["signatures"] = vec![sig.clone(); MAX_SIGNATURES].into());
        assert!(Envelope::parse(many.as_bytes()).is_ok());
        // DSSE makes the key id optional: none reads as an empty one.
        let keyless = with(&|v| {
            v["signatures"][0].as_object_mut().unwrap().remove("keyid");
        });
        assert_eq!(
            Envelope::parse(keyless.as_bytes()).unwrap().signatures[0].keyid,
            ""
        );
    }

    #[test]
    fn keys_read_back_and_have_stable_ids() {
        let k = key(7).public();
        assert_eq!(PublicKey::parse(&k.to_base64()).unwrap(), k);
        assert_eq!(
            PublicKey::parse(&format!("  {}\n", k.to_base64())).unwrap(),
            k
        );
        let id = k.id();
        assert_eq!(id.as_str().len(), 16);
        assert_eq!(KeyId::try_from(id.as_str()).unwrap(), id);
        let full = Digest::of(&k.0);
        assert!(full.hex().starts_with(id.as_str()));
        assert_ne!(key(8).public().id(), id);
        // The RFC 8032 test 1 key, for a fixed point.
        let rfc = PublicKey::parse("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=").unwrap();
        assert_eq!(rfc.id().as_str(), "21fe31dfa154a261");
        for bad in ["", "AAAA", "not base64!", &STANDARD.encode([0u8; 33])] {
            assert!(
                matches!(PublicKey::parse(bad), Err(KeyError::Malformed { .. })),
                "{bad}"
            );
        }
        for bad in ["0123456789abcde", "0123456789ABCDEF", "0123456789abcdefa"] {
            assert!(KeyId::try_from(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_secret_key_reads_back_from_its_text_which_debug_never_shows() {
        let k = SecretKey::generate().unwrap();
        let text = k.to_text();
        assert!(text.ends_with('\n') && text.len() == 45, "{text:?}");
        let back = SecretKey::from_text(&text).unwrap();
        assert_eq!(back.public(), k.public());
        assert_ne!(SecretKey::generate().unwrap().public(), k.public());
        let debug = format!("{k:?}");
        assert!(!debug.contains(text.trim()), "{debug}");
        assert!(debug.contains(k.public().id().as_str()), "{debug}");
        let e = SecretKey::from_text("short\n").unwrap_err();
        assert!(e.to_string().contains("secret key"), "{e}");
    }

    #[test]
    fn verification_takes_one_good_signature_by_a_trusted_key() {
        let (old, new, other) = (key(1), key(2), key(3));
        let payload = b"{\"node\":\"edge-0042\"}";
        let by = |keys: &[&SecretKey]| {
            let mut e = keys[0].sign(PAYLOAD_TYPE, payload);
            for k in &keys[1..] {
                e.countersign(k);
            }
            e
        };
        let tampered = |mut e: Envelope, f: &dyn Fn(&mut Envelope)| {
            f(&mut e);
            e
        };
        let ids = |keys: &[&SecretKey]| -> Vec<String> {
            keys.iter().map(|k| k.public().id().to_string()).collect()
        };
        let both: &[PublicKey] = &[old.public(), new.public()];
        let only_old: &[PublicKey] = &[old.public()];
        let only_new: &[PublicKey] = &[new.public()];
        let none: &[PublicKey] = &[];
        let bad = |k: &SecretKey| {
            Err(VerifyError::BadSignature {
                keyid: k.public().id(),
            })
        };
        for (what, env, trusted, expected) in [
            ("good", by(&[&old]), only_old, Ok(old.public())),
            (
                "tampered payload",
                tampered(by(&[&old]), &|e| e.payload[3] ^= 1),
                only_old,
                bad(&old),
            ),
            (
                "tampered signature",
                tampered(by(&[&old]), &|e| e.signatures[0].sig[10] ^= 1),
                only_old,
                bad(&old),
            ),
            (
                "a signature of the wrong length",
                tampered(by(&[&old]), &|e| e.signatures[0].sig.truncate(63)),
                only_old,
                bad(&old),
            ),
            (
                "another payload type",
                tampered(by(&[&old]), &|e| e.payload_type = "text/plain".into()),
                only_old,
                Err(VerifyError::PayloadType(
                    "text/plain".into(),
                    PAYLOAD_TYPE,
                    "stead desired-state document",
                )),
            ),
            (
                "signed under another payload type",
                tampered(old.sign("text/plain", payload), &|e| {
                    e.payload_type = PAYLOAD_TYPE.into()
                }),
                only_old,
                bad(&old),
            ),
            (
                "unsigned",
                tampered(by(&[&old]), &|e| e.signatures.clear()),
                only_old,
                Err(VerifyError::Unsigned),
            ),
            (
                "an unknown key",
                by(&[&other]),
                only_old,
                Err(VerifyError::UnknownKey {
                    keyids: ids(&[&other]),
                }),
            ),
            (
                "a key id that lies",
                tampered(by(&[&other]), &|e| {
                    e.signatures[0].keyid = old.public().id().to_string()
                }),
                only_old,
                bad(&old),
            ),
            ("rotation: old only", by(&[&old]), both, Ok(old.public())),
            ("rotation: new only", by(&[&new]), both, Ok(new.public())),
            ("rotation: both", by(&[&old, &new]), both, Ok(old.public())),
            (
                "rotation: both, in the other order",
                by(&[&new, &old]),
                both,
                Ok(new.public()),
            ),
            (
                "old removed: signed by both",
                by(&[&old, &new]),
                only_new,
                Ok(new.public()),
            ),
            (
                "old removed: signed by old",
                by(&[&old]),
                only_new,
                Err(VerifyError::UnknownKey {
                    keyids: ids(&[&old]),
                }),
            ),
            (
                "one bad, one good",
                tampered(by(&[&old, &new]), &|e| e.signatures[0].sig[0] ^= 1),
                both,
                Ok(new.public()),
            ),
            (
                "an unknown key and a bad trusted one",
                tampered(by(&[&other, &new]), &|e| e.signatures[1].sig[0] ^= 1),
                both,
                bad(&new),
            ),
            (
                "no key id (DSSE's is optional)",
                tampered(by(&[&old]), &|e| e.signatures[0].keyid.clear()),
                only_old,
                Ok(old.public()),
            ),
            (
                "no key id, the second trusted key",
                tampered(by(&[&new]), &|e| e.signatures[0].keyid.clear()),
                both,
                Ok(new.public()),
            ),
            (
                "another tool's key id for a trusted key",
                tampered(by(&[&old]), &|e| e.signatures[0].keyid = "a".repeat(64)),
                only_old,
                Ok(old.public()),
            ),
            (
                "no key id, an untrusted key",
                tampered(by(&[&other]), &|e| e.signatures[0].keyid.clear()),
                both,
                Err(VerifyError::UnknownKey {
                    keyids: vec!["(no key id)".into()],
                }),
            ),
            (
                "no key id, a tampered payload",
                tampered(by(&[&old]), &|e| {
                    e.signatures[0].keyid.clear();
                    e.payload[3] ^= 1;
                }),
                only_old,
                Err(VerifyError::UnknownKey {
                    keyids: vec!["(no key id)".into()],
                }),
            ),
            (
                "no trusted keys",
                by(&[&old]),
                none,
                Err(VerifyError::UnknownKey {
                    keyids: ids(&[&old]),
                }),
            ),
        ] {
            assert_eq!(verify(&env, trusted).cloned(), expected, "{what}");
            // Through JSON and back, the same.
            let back = Envelope::parse(&env.to_json()).unwrap();
            assert_eq!(verify(&back, trusted).cloned(), expected, "{what} (JSON)");
        }
    }

    #[test]
    fn signatures_without_a_usable_key_id_are_tried_a_bounded_number_of_times() {
        let keys: Vec<SecretKey> = (1..=8).map(key).collect();
        let trusted: Vec<PublicKey> = keys.iter().map(SecretKey::public).collect();
        let payload = b"{}";
        // Four strangers' signatures before the last trusted key's, none
        // naming its key: 4 × 8 trials, then the good one is the 33rd.
        let mut e = key(20).sign(PAYLOAD_TYPE, payload);
        for s in 21..24 {
            e.countersign(&key(s));
        }
        e.countersign(&keys[7]);
        for s in &mut e.signatures {
            s.keyid.clear();
        }
        assert!(matches!(
            verify(&e, &trusted),
            Err(VerifyError::UnknownKey { .. })
        ));
        // One stranger fewer: found within the bound.
        e.signatures.remove(0);
        assert_eq!(verify(&e, &trusted), Ok(&trusted[7]));
        // Without a key id it is written without one, and read back so.
        let json = String::from_utf8(e.to_json()).unwrap();
        assert!(!json.contains("keyid"), "{json}");
        assert_eq!(Envelope::parse(json.as_bytes()).unwrap(), e);
    }

    #[test]
    fn a_key_countersigns_once() {
        let (a, b) = (key(1), key(2));
        let mut e = a.sign(PAYLOAD_TYPE, b"{}");
        e.countersign(&b);
        e.countersign(&a);
        e.countersign(&b);
        let ids: Vec<&str> = e.signatures.iter().map(|s| s.keyid.as_str()).collect();
        assert_eq!(ids, [a.public().id().as_str(), b.public().id().as_str()]);
        for k in [a.public(), b.public()] {
            assert_eq!(verify(&e, std::slice::from_ref(&k)), Ok(&k));
        }
    }

    #[test]
    fn refusals_say_what_is_wrong_and_have_a_class() {
        let k = key(1).public().id();
        for (e, class, says) in [
            (
                VerifyError::PayloadType(
                    "text/plain".into(),
                    PAYLOAD_TYPE,
                    "stead desired-state document",
                ),
                "payload-type",
                "\"text/plain\"",
            ),
            (VerifyError::Unsigned, "unsigned", "no signature"),
            (
                VerifyError::BadSignature { keyid: k.clone() },
                "bad-signature",
                k.as_str(),
            ),
            (
                VerifyError::UnknownKey {
                    keyids: vec!["a".into(), "b".into()],
                },
                "unknown-key",
                "does not trust (a, b)",
            ),
        ] {
            assert_eq!(e.class().as_str(), class);
            assert!(e.to_string().contains(says), "{e}");
        }
        let long = Envelope {
            payload_type: "x".repeat(10_000),
            payload: vec![],
            signatures: vec![Signature {
                keyid: "y".repeat(10_000),
                sig: vec![],
            }],
        };
        assert!(verify(&long, &[]).unwrap_err().to_string().len() < 300);
        let long = Envelope {
            payload_type: PAYLOAD_TYPE.into(),
            ..long
        };
        assert!(verify(&long, &[]).unwrap_err().to_string().len() < 300);
    }
}
