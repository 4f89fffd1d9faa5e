//! The plane's root of trust, as TUF's root (adapted): a signed list of
//! the keys that sign the root itself (with a threshold) and of the keys
//! that sign documents, with a version and an expiry. A new version is
//! trusted only when a threshold of the held root's root keys and a
//! threshold of its own signed it, and only as the next version: a device
//! walks the chain from the root it holds, never skipping one, never going
//! back. So trust moves forward from the plane: a document key is replaced
//! or revoked by publishing a root without it, and the root keys may stay
//! offline (a threshold of several) while an online key signs documents.
//! The keys of `trusted_keys` in a device's config are its first root
//! (version 0: root and document keys alike, threshold 1). Pure.
//!
//! Published as `<base>/root.json` (the newest, polled) and
//! `<base>/roots/<version>.json` (each, walked), each a DSSE envelope
//! ([`crate::plane::envelope`]) of [`PAYLOAD_TYPE`]:
//!
//! ```json
//! {"version": 2, "expires": "2027-12-01T00:00:00Z",
//!  "root": {"keys": ["<base64>", "<base64>", "<base64>"], "threshold": 2},
//!  "documents": {"keys": ["<base64>"]}}
//! ```

use serde::Deserialize;

use crate::model::time::{format_rfc3339, parse_rfc3339};
use crate::plane::envelope::{Envelope, PublicKey, signers};

/// The payload type of a root.
pub const PAYLOAD_TYPE: &str = "application/vnd.stead.root.v1+json";
/// The most keys a role lists.
pub const MAX_KEYS: usize = 8;
/// The largest root taken (bytes of its envelope).
pub const MAX_ROOT: usize = 64 * 1024;
/// The highest version (2^53, as revisions).
pub const MAX_VERSION: u64 = 1 << 53;

/// Keys and how many of them must sign.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    /// The keys, none twice.
    pub keys: Vec<PublicKey>,
    /// How many distinct keys of them must sign: 1 to their number.
    pub threshold: usize,
}

/// A root: who signs the next root, who signs documents, until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// Its version: 0 for the config's keys, then 1, 2, … with no gap.
    pub version: u64,
    /// When it expires, seconds since the epoch (`u64::MAX`: never, the
    /// config's).
    pub expires: u64,
    /// The keys that sign the next root.
    pub root: Role,
    /// The keys that sign documents (node and group documents, release
    /// statements); one signature by any of them is enough.
    pub documents: Vec<PublicKey>,
}

/// Why a root was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RootError {
    /// Not a DSSE envelope of a root.
    #[error("not a signed root: {0}")]
    Malformed(String),
    /// Its payload does not read as a root.
    #[error("root version {version:?}: {field}: {message}")]
    Invalid {
        version: Option<u64>,
        field: String,
        message: String,
    },
    /// Not the version after the one held.
    #[error(
        "root version {got} is not the next one after version {held}: a root is taken only as the next version, in order"
    )]
    NotNext { held: u64, got: u64 },
    /// Too few of the held root's root keys signed it.
    #[error(
        "root version {version} is signed by {signed} of the root keys of version {held}, which needs {threshold}"
    )]
    ShortOfHeld {
        version: u64,
        held: u64,
        signed: usize,
        threshold: usize,
    },
    /// Too few of its own root keys signed it.
    #[error(
        "root version {version} is signed by {signed} of its own root keys, which needs {threshold}"
    )]
    ShortOfOwn {
        version: u64,
        signed: usize,
        threshold: usize,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RootDoc {
    version: u64,
    expires: String,
    root: RoleDoc,
    documents: KeysDoc,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleDoc {
    keys: Vec<String>,
    threshold: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysDoc {
    keys: Vec<String>,
}

impl Root {
    /// The first root: the config's `trusted_keys`, each signing documents
    /// and the next root alone.
    pub fn initial(trusted: &[PublicKey]) -> Root {
        Root {
            version: 0,
            expires: u64::MAX,
            root: Role {
                keys: trusted.to_vec(),
                threshold: 1,
            },
            documents: trusted.to_vec(),
        }
    }

    /// Reads a root's payload and checks it whole.
    pub fn parse(payload: &[u8]) -> Result<Root, RootError> {
        crate::model::json::no_repeated_keys(payload).map_err(|r| RootError::Invalid {
            version: None,
            field: r.path,
            message: r.message,
        })?;
        let doc: RootDoc =
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(payload))
                .map_err(|e| RootError::Invalid {
                    version: None,
                    field: e.path().to_string(),
                    message: crate::model::intention::without_values(&e.inner().to_string()),
                })?;
        let v = doc.version;
        let invalid = |field: &str, message: String| RootError::Invalid {
            version: Some(v),
            field: field.to_string(),
            message,
        };
        if !(1..=MAX_VERSION).contains(&v) {
            return Err(invalid("version", format!("{v} is not in 1..=2^53")));
        }
        let expires = parse_rfc3339(&doc.expires).map_err(|m| invalid("expires", m))?;
        let root = Role {
            keys: keys(&doc.root.keys, "root.keys").map_err(|(f, m)| invalid(&f, m))?,
            threshold: doc.root.threshold,
        };
        if root.threshold == 0 || root.threshold > root.keys.len() {
            return Err(invalid(
                "root.threshold",
                format!(
                    "{} with {} key(s): at least 1 and at most the keys",
                    root.threshold,
                    root.keys.len()
                ),
            ));
        }
        let documents =
            keys(&doc.documents.keys, "documents.keys").map_err(|(f, m)| invalid(&f, m))?;
        Ok(Root {
            version: v,
            expires,
            root,
            documents,
        })
    }

    /// The payload this root reads from.
    pub fn to_payload(&self) -> Vec<u8> {
        let b64 = |ks: &[PublicKey]| ks.iter().map(PublicKey::to_base64).collect::<Vec<_>>();
        serde_json::to_vec_pretty(&serde_json::json!({
            "version": self.version,
            "expires": format_rfc3339(self.expires),
            "root": {"keys": b64(&self.root.keys), "threshold": self.root.threshold},
            "documents": {"keys": b64(&self.documents)},
        }))
        .expect("a root serialises")
    }

    /// Whether it has expired at `now` (the config's never does).
    pub fn expired(&self, now: u64) -> bool {
        self.expires <= now
    }
}

/// Checked keys of a role: at least one, at most [`MAX_KEYS`], none twice.
fn keys(texts: &[String], field: &str) -> Result<Vec<PublicKey>, (String, String)> {
    if texts.is_empty() || texts.len() > MAX_KEYS {
        return Err((
            field.to_string(),
            format!("{} keys: 1 to {MAX_KEYS}", texts.len()),
        ));
    }
    let mut out: Vec<PublicKey> = Vec::with_capacity(texts.len());
    for (i, t) in texts.iter().enumerate() {
        let k = PublicKey::parse(t).map_err(|e| (format!("{field}[{i}]"), e.to_string()))?;
        if out.contains(&k) {
            return Err((
                format!("{field}[{i}]"),
                format!("key {} is listed twice", k.id()),
            ));
        }
        out.push(k);
    }
    Ok(out)
}

/// Takes `bytes` (a root's envelope) as the root after `held`: it must be
/// the next version, signed by a threshold of `held`'s root keys and a
/// threshold of its own (TUF's 5.3.4–5.3.8). Its expiry is not judged
/// here: a root that expired on the way is still a step of the chain;
/// whether the last one taken has is the caller's to say.
pub fn next(held: &Root, bytes: &[u8]) -> Result<Root, RootError> {
    if bytes.len() > MAX_ROOT {
        return Err(RootError::Malformed(format!(
            "{} bytes, over the {MAX_ROOT} a root may have",
            bytes.len()
        )));
    }
    let env = Envelope::parse(bytes).map_err(|e| RootError::Malformed(e.to_string()))?;
    if env.payload_type != PAYLOAD_TYPE {
        return Err(RootError::Malformed(format!(
            "the payload type is {:?}, not {PAYLOAD_TYPE:?}",
            env.payload_type.chars().take(100).collect::<String>()
        )));
    }
    let new = Root::parse(&env.payload)?;
    if new.version != held.version + 1 {
        return Err(RootError::NotNext {
            held: held.version,
            got: new.version,
        });
    }
    let by_held = signers(&env, &held.root.keys).len();
    if by_held < held.root.threshold {
        return Err(RootError::ShortOfHeld {
            version: new.version,
            held: held.version,
            signed: by_held,
            threshold: held.root.threshold,
        });
    }
    let by_own = signers(&env, &new.root.keys).len();
    if by_own < new.root.threshold {
        return Err(RootError::ShortOfOwn {
            version: new.version,
            signed: by_own,
            threshold: new.root.threshold,
        });
    }
    Ok(new)
}

/// The version a root's envelope says, unverified: whether there is a
/// newer one to walk to.
pub fn version_said(bytes: &[u8]) -> Option<u64> {
    let env = Envelope::parse(bytes).ok()?;
    #[derive(Deserialize)]
    struct V {
        version: u64,
    }
    serde_json::from_slice::<V>(&env.payload)
        .ok()
        .map(|v| v.version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plane::envelope::SecretKey;

    fn key() -> SecretKey {
        SecretKey::generate().unwrap()
    }

    fn root(version: u64, root: &[&SecretKey], threshold: usize, docs: &[&SecretKey]) -> Root {
        Root {
            version,
            expires: 2_000_000_000,
            root: Role {
                keys: root.iter().map(|k| k.public()).collect(),
                threshold,
            },
            documents: docs.iter().map(|k| k.public()).collect(),
        }
    }

    fn signed(r: &Root, by: &[&SecretKey]) -> Vec<u8> {
        let payload = r.to_payload();
        let (first, more) = by.split_first().unwrap();
        let mut env = first.sign(PAYLOAD_TYPE, &payload);
        for k in more {
            env.countersign(k);
        }
        env.to_json()
    }

    #[test]
    fn a_root_is_taken_only_as_the_next_version_signed_by_both_thresholds() {
        let (a, b, c, d, online) = (key(), key(), key(), key(), key());
        let held = root(1, &[&a, &b, &c], 2, &[&online]);
        let next2 = root(2, &[&b, &c, &d], 2, &[&online]);
        let word = |r: Result<Root, RootError>| match r {
            Ok(r) => format!("v{}", r.version),
            Err(RootError::Malformed(_)) => "malformed".into(),
            Err(RootError::Invalid { field, .. }) => format!("invalid {field}"),
            Err(RootError::NotNext { .. }) => "not-next".into(),
            Err(RootError::ShortOfHeld { signed, .. }) => format!("short-of-held {signed}"),
            Err(RootError::ShortOfOwn { signed, .. }) => format!("short-of-own {signed}"),
        };
        // (what, the envelope, what is said)
        #[rustfmt::skip]
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("two old and two new", signed(&next2, &[&b, &c]), "v2"),
            ("one old and two new", signed(&next2, &[&a, &d]), "short-of-held 1"),
            ("two old, one of them new", signed(&next2, &[&a, &b]), "short-of-own 1"),
            ("the same key twice counts once", signed(&next2, &[&b, &b, &a]), "short-of-own 1"),
            ("three, the new key among them", signed(&next2, &[&a, &b, &d]), "v2"),
            ("the online key alone", signed(&next2, &[&online]), "short-of-held 0"),
            ("a version skipped", signed(&root(3, &[&b, &c, &d], 2, &[&online]), &[&b, &c]), "not-next"),
            ("the held version again", signed(&root(1, &[&b, &c, &d], 2, &[&online]), &[&b, &c]), "not-next"),
            ("an older version", signed(&root(0, &[&b, &c], 1, &[&online]), &[&b, &c]), "invalid version"),
            ("a threshold over its keys", signed(&root(2, &[&b], 2, &[&online]), &[&b, &c]), "invalid root.threshold"),
            ("a threshold of 0", signed(&root(2, &[&b], 0, &[&online]), &[&b, &c]), "invalid root.threshold"),
            ("a key listed twice", signed(&root(2, &[&b, &b, &c], 2, &[&online]), &[&b, &c]), "invalid root.keys[1]"),
            ("no document key", signed(&root(2, &[&b, &c], 1, &[]), &[&b, &c]), "invalid documents.keys"),
            ("a document's payload type", a.sign("application/vnd.stead.desired.v1+json", &next2.to_payload()).to_json(), "malformed"),
            ("not an envelope", b"{}".to_vec(), "malformed"),
        ];
        for (what, bytes, says) in cases {
            assert_eq!(word(next(&held, &bytes)), says, "{what}");
        }
        // A root that expired is still a step of the chain.
        let mut old = next2.clone();
        old.expires = 1;
        assert_eq!(next(&held, &signed(&old, &[&b, &c])), Ok(old.clone()));
        assert!(old.expired(2) && !next2.expired(2));
    }

    #[test]
    fn the_config_s_keys_are_version_0_and_a_first_root_moves_from_them() {
        let (old, r1, r2, online) = (key(), key(), key(), key());
        let initial = Root::initial(&[old.public()]);
        assert!(!initial.expired(u64::MAX - 1));
        let first = root(1, &[&r1, &r2], 2, &[&online]);
        assert_eq!(
            next(&initial, &signed(&first, &[&old, &r1, &r2])),
            Ok(first.clone())
        );
        assert!(matches!(
            next(&initial, &signed(&first, &[&r1, &r2])),
            Err(RootError::ShortOfHeld { signed: 0, .. })
        ));
        assert_eq!(
            version_said(&signed(&first, &[&r1])),
            Some(1),
            "read unverified"
        );
        assert_eq!(Root::parse(&first.to_payload()), Ok(first));
        let e = Root::parse(br#"{"version": 1, "version": 2}"#).unwrap_err();
        assert!(e.to_string().contains("version"), "{e}");
    }
}
