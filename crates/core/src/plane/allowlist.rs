//! The allow-list of image digests, Uptane's image repository beside its
//! director: a document of its own kind, signed by a threshold of the
//! keys of the role the root names (`allow_list`, offline keys), versioned
//! (only forward), with an expiry, listing image digests (`sha256:…`,
//! optionally with the repository, `registry/repo@sha256:…`). When the
//! root names the role, every image a node's or a group's document names
//! must be pinned by digest (`repo@sha256:…`) and listed
//! ([`AllowList::admits`]), so a stolen online document key alone cannot
//! ship an unlisted image. How a list is taken after the one held is
//! [`next`]; the trusted set holds it. Pure.
//!
//! Published as `<base>/allow-list.json`, a DSSE envelope
//! ([`crate::plane::envelope`]) of [`PAYLOAD_TYPE`]:
//!
//! ```json
//! {"version": 3, "expires": "2027-06-01T00:00:00Z",
//!  "images": ["sha256:<64 hex>", "registry.example/app@sha256:<64 hex>"]}
//! ```

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::model::names::Digest;
use crate::model::reference::Reference;
use crate::model::time::{format_rfc3339, parse_rfc3339};
use crate::plane::envelope::{Envelope, signers};
use crate::plane::root::{MAX_VERSION, Role};

/// The payload type of an allow-list.
pub const PAYLOAD_TYPE: &str = "application/vnd.stead.allow-list.v1+json";
/// The largest allow-list taken (bytes of its envelope).
pub const MAX_ALLOW_LIST: usize = 1 << 20;
/// The most images a list names.
pub const MAX_IMAGES: usize = 10_000;

/// A listed image: a digest, alone (any repository) or of one repository
/// (`registry/repository`, as [`Reference::name`] names it).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listed {
    /// The repository it must come from, when the entry names one.
    pub repository: Option<String>,
    /// `sha256:<64 hex>`, lower case.
    pub digest: String,
}

/// An allow-list taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowList {
    /// Its version, 1 to 2^53; only a later one replaces it.
    pub version: u64,
    /// When it expires, seconds since the epoch: documents are refused
    /// after (the offline keys sign it again before).
    pub expires: u64,
    /// The images listed.
    pub images: BTreeSet<Listed>,
    /// The digest of its payload: the same version with another payload
    /// is an equivocation.
    pub payload_digest: Digest,
}

/// Why an allow-list was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllowListError {
    /// The root names no allow-list role.
    #[error("the root held (version {0}) names no allow-list role: an allow-list is not asked for")]
    NotAsked(u64),
    /// Not a DSSE envelope of an allow-list.
    #[error("not a signed allow-list: {0}")]
    Malformed(String),
    /// Too few of the role's keys signed it.
    #[error(
        "the allow-list is signed by {signed} of the allow-list role's keys, which needs {threshold}"
    )]
    Short { signed: usize, threshold: usize },
    /// Its payload does not read as an allow-list.
    #[error("allow-list: {field}: {message}")]
    Invalid { field: String, message: String },
    /// Older than the one held.
    #[error(
        "allow-list version {got} is older than version {held} held (a stale copy, or a replay)"
    )]
    Rollback { held: u64, got: u64 },
    /// The version held, with another payload.
    #[error("allow-list version {0} is held with another payload")]
    Equivocation(u64),
    /// Expired.
    #[error("allow-list version {version} expired at {expires}")]
    Expired { version: u64, expires: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListDoc {
    version: u64,
    expires: String,
    images: Vec<String>,
}

impl Listed {
    /// Reads an entry: `sha256:<64 hex>` or `<repository>@sha256:<64 hex>`.
    pub fn parse(s: &str) -> Result<Listed, String> {
        if let Some(hex) = s.strip_prefix("sha256:") {
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err("a digest is sha256:<64 hex digits>".into());
            }
            return Ok(Listed {
                repository: None,
                digest: s.to_ascii_lowercase(),
            });
        }
        let r = Reference::parse(s)?;
        match (&r.digest, &r.tag) {
            (Some(d), None) => Ok(Listed {
                repository: Some(r.name()),
                digest: d.clone(),
            }),
            _ => Err("an entry is sha256:<digest> or <repository>@sha256:<digest>, no tag".into()),
        }
    }

    /// The entry as written.
    pub fn to_text(&self) -> String {
        match &self.repository {
            None => self.digest.clone(),
            Some(r) => format!("{r}@{}", self.digest),
        }
    }
}

impl AllowList {
    /// Reads an allow-list's payload and checks it whole.
    pub fn parse(payload: &[u8]) -> Result<AllowList, AllowListError> {
        let invalid = |field: &str, message: String| AllowListError::Invalid {
            field: field.to_string(),
            message,
        };
        crate::model::json::no_repeated_keys(payload).map_err(|r| invalid(&r.path, r.message))?;
        let doc: ListDoc = crate::model::json::read(payload).map_err(|e| {
            invalid(
                &e.path,
                crate::model::intention::without_values(&e.error.to_string()),
            )
        })?;
        if !(1..=MAX_VERSION).contains(&doc.version) {
            return Err(invalid(
                "version",
                format!("{} is not in 1..=2^53", doc.version),
            ));
        }
        let expires = parse_rfc3339(&doc.expires).map_err(|m| invalid("expires", m))?;
        if doc.images.len() > MAX_IMAGES {
            return Err(invalid(
                "images",
                format!(
                    "{} images, over the {MAX_IMAGES} a list may name",
                    doc.images.len()
                ),
            ));
        }
        let mut images = BTreeSet::new();
        for (i, t) in doc.images.iter().enumerate() {
            let l = Listed::parse(t).map_err(|m| invalid(&format!("images[{i}]"), m))?;
            if !images.insert(l) {
                return Err(invalid(&format!("images[{i}]"), "listed twice".into()));
            }
        }
        Ok(AllowList {
            version: doc.version,
            expires,
            images,
            payload_digest: Digest::of(payload),
        })
    }

    /// The payload of a list (the operator's tool writes it).
    pub fn payload(version: u64, expires: u64, images: &[Listed]) -> Vec<u8> {
        serde_json::to_vec_pretty(&serde_json::json!({
            "version": version,
            "expires": format_rfc3339(expires),
            "images": images.iter().map(Listed::to_text).collect::<Vec<_>>(),
        }))
        .expect("an allow-list serialises")
    }

    /// The list as an image policy holds it.
    pub fn allowed(&self) -> crate::model::image_policy::Allowed {
        crate::model::image_policy::Allowed {
            version: self.version,
            payload: self.payload_digest.to_string(),
            images: self
                .images
                .iter()
                .map(|l| (l.repository.clone(), l.digest.clone()))
                .collect(),
        }
    }

    /// Whether it has expired at `now`.
    pub fn expired(&self, now: u64) -> bool {
        self.expires <= now
    }

    /// Whether `image` (a module's image reference) may run: pinned by
    /// digest, and that digest listed alone or with the image's
    /// repository. The error says why not.
    pub fn admits(&self, image: &str) -> Result<(), String> {
        let r = Reference::parse(image).map_err(|e| format!("does not read: {e}"))?;
        let Some(digest) = &r.digest else {
            return Err(
                "is not pinned by digest (repo@sha256:…), which the allow-list asks of every image"
                    .into(),
            );
        };
        let name = r.name();
        let listed = self
            .images
            .iter()
            .any(|l| &l.digest == digest && l.repository.as_ref().is_none_or(|repo| *repo == name));
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

/// Takes `bytes` (an allow-list's envelope) after `held` under `role` (the
/// root's allow-list role): signed by a threshold of its keys, not older
/// than the one held (the same version: the same payload, `Ok(None)`),
/// not expired at `now`.
pub fn next(
    role: &Role,
    held: Option<&AllowList>,
    bytes: &[u8],
    now: u64,
) -> Result<Option<AllowList>, AllowListError> {
    let list = verified(role, bytes)?;
    if let Some(h) = held {
        if list.version < h.version {
            return Err(AllowListError::Rollback {
                held: h.version,
                got: list.version,
            });
        }
        if list.version == h.version {
            if list.payload_digest == h.payload_digest {
                return Ok(None);
            }
            return Err(AllowListError::Equivocation(h.version));
        }
    }
    if list.expired(now) {
        return Err(AllowListError::Expired {
            version: list.version,
            expires: format_rfc3339(list.expires),
        });
    }
    Ok(Some(list))
}

/// Reads `bytes` as an allow-list signed by a threshold of `role`'s keys
/// (no version or expiry judged: a list kept is read again by it).
pub fn verified(role: &Role, bytes: &[u8]) -> Result<AllowList, AllowListError> {
    if bytes.len() > MAX_ALLOW_LIST {
        return Err(AllowListError::Malformed(format!(
            "{} bytes, over the {MAX_ALLOW_LIST} an allow-list may have",
            bytes.len()
        )));
    }
    let env = Envelope::parse(bytes).map_err(|e| AllowListError::Malformed(e.to_string()))?;
    if env.payload_type != PAYLOAD_TYPE {
        return Err(AllowListError::Malformed(format!(
            "the payload type is {:?}, not {PAYLOAD_TYPE:?}",
            env.payload_type.chars().take(100).collect::<String>()
        )));
    }
    let signed = signers(&env, &role.keys).len();
    if signed < role.threshold {
        return Err(AllowListError::Short {
            signed,
            threshold: role.threshold,
        });
    }
    AllowList::parse(&env.payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plane::envelope::SecretKey;

    const T0: u64 = 1_793_491_200;

    fn key() -> SecretKey {
        SecretKey::generate().unwrap()
    }

    fn hex(c: char) -> String {
        std::iter::repeat_n(c, 64).collect()
    }

    fn signed(payload: &[u8], by: &[&SecretKey]) -> Vec<u8> {
        let (first, more) = by.split_first().unwrap();
        let mut env = first.sign(PAYLOAD_TYPE, payload);
        for k in more {
            env.countersign(k);
        }
        env.to_json()
    }

    fn list(version: u64, expires: u64, images: &[&str]) -> Vec<u8> {
        let images: Vec<Listed> = images.iter().map(|i| Listed::parse(i).unwrap()).collect();
        AllowList::payload(version, expires, &images)
    }

    #[test]
    fn a_list_is_taken_signed_by_its_threshold_only_forward_and_fresh() {
        let (a, b, c, online) = (key(), key(), key(), key());
        let role = Role {
            keys: vec![a.public(), b.public(), c.public()],
            threshold: 2,
        };
        let d = format!("sha256:{}", hex('a'));
        let v3 = list(3, T0 + 100, &[&d]);
        let held = verified(&role, &signed(&v3, &[&a, &b])).unwrap();
        let word = |r: Result<Option<AllowList>, AllowListError>| match r {
            Ok(Some(l)) => format!("v{}", l.version),
            Ok(None) => "same".into(),
            Err(AllowListError::NotAsked(_)) => "not-asked".into(),
            Err(AllowListError::Malformed(_)) => "malformed".into(),
            Err(AllowListError::Short { signed, .. }) => format!("short {signed}"),
            Err(AllowListError::Invalid { field, .. }) => format!("invalid {field}"),
            Err(AllowListError::Rollback { .. }) => "rollback".into(),
            Err(AllowListError::Equivocation(_)) => "equivocation".into(),
            Err(AllowListError::Expired { .. }) => "expired".into(),
        };
        let raw = |p: &str| signed(p.as_bytes(), &[&a, &b]);
        // (what, the list held, the envelope, what is said)
        #[rustfmt::skip]
        let cases: Vec<(&str, Option<&AllowList>, Vec<u8>, &str)> = vec![
            ("a first list, two of three", None, signed(&v3, &[&a, &b]), "v3"),
            ("a first list, all three", None, signed(&v3, &[&a, &b, &c]), "v3"),
            ("one of three", None, signed(&v3, &[&a]), "short 1"),
            ("the same key twice counts once", None, signed(&v3, &[&a, &a]), "short 1"),
            ("the online document key", None, signed(&v3, &[&online]), "short 0"),
            ("the online key beside one offline key", None, signed(&v3, &[&online, &c]), "short 1"),
            ("a newer version", Some(&held), signed(&list(4, T0 + 100, &[&d]), &[&b, &c]), "v4"),
            ("the version held, the same payload", Some(&held), signed(&v3, &[&b, &c]), "same"),
            ("the version held, another payload", Some(&held), signed(&list(3, T0 + 100, &[]), &[&a, &b]), "equivocation"),
            ("an older version (stale)", Some(&held), signed(&list(2, T0 + 100, &[&d]), &[&a, &b]), "rollback"),
            ("expired", Some(&held), signed(&list(4, T0, &[&d]), &[&a, &b]), "expired"),
            ("version 0", None, signed(&list(0, T0 + 100, &[&d]), &[&a, &b]), "invalid version"),
            ("over 2^53", None, signed(&list(MAX_VERSION + 1, T0 + 100, &[&d]), &[&a, &b]), "invalid version"),
            ("an entry with a tag", None, raw(&format!(r#"{{"version": 1, "expires": "2099-01-01T00:00:00Z", "images": ["app:1@{d}"]}}"#)), "invalid images[0]"),
            ("an entry not a digest", None, raw(r#"{"version": 1, "expires": "2099-01-01T00:00:00Z", "images": ["sha256:abc"]}"#), "invalid images[0]"),
            ("a tag alone", None, raw(r#"{"version": 1, "expires": "2099-01-01T00:00:00Z", "images": ["app:1"]}"#), "invalid images[0]"),
            ("an entry twice", None, raw(&format!(r#"{{"version": 1, "expires": "2099-01-01T00:00:00Z", "images": ["{d}", "{}"]}}"#, d.to_uppercase().replace("SHA256", "sha256"))), "invalid images[1]"),
            ("an unknown field", None, raw(r#"{"version": 1, "expires": "2099-01-01T00:00:00Z", "images": [], "x": 1}"#), "invalid "),
            ("a root's payload type", None, a.sign(crate::plane::root::PAYLOAD_TYPE, &v3).to_json(), "malformed"),
            ("not an envelope", None, b"{}".to_vec(), "malformed"),
            ("over the size of a list", None, vec![b' '; MAX_ALLOW_LIST + 1], "malformed"),
        ];
        for (what, held, bytes, says) in cases {
            let got = word(next(&role, held, &bytes, T0));
            assert!(got.starts_with(says), "{what}: {got}, wanted {says}");
        }
    }

    #[test]
    fn an_image_runs_only_pinned_and_listed() {
        let (da, db) = (
            format!("sha256:{}", hex('a')),
            format!("sha256:{}", hex('b')),
        );
        let l = AllowList::parse(&list(
            7,
            T0,
            &[&da, &format!("registry.example/team/app@{db}")],
        ))
        .unwrap();
        // (what, the image, None: admitted, or words of why not)
        #[rustfmt::skip]
        let cases: Vec<(&str, String, Option<&str>)> = vec![
            ("a digest listed alone, any repository", format!("busybox@{da}"), None),
            ("the same with a tag beside it", format!("busybox:1.36@{da}"), None),
            ("upper-case hex", format!("busybox@{}", da.to_uppercase().replace("SHA256", "sha256")), None),
            ("a digest listed with its repository", format!("registry.example/team/app@{db}"), None),
            ("that digest from another repository", format!("registry.example/other/app@{db}"), Some("is not in the allow-list (version 7)")),
            ("that digest from Docker Hub", format!("team/app@{db}"), Some("of docker.io/team/app is not in")),
            ("a digest not listed", format!("busybox@sha256:{}", hex('c')), Some("is not in the allow-list")),
            ("a tag alone", "busybox:1.36".into(), Some("is not pinned by digest")),
            ("no tag at all", "busybox".into(), Some("is not pinned by digest")),
            ("not a reference", "Busy Box".into(), Some("does not read")),
        ];
        let allowed = l.allowed();
        for (what, image, says) in cases {
            let got = l.admits(&image);
            // The image policy's copy of the list (the device's gate)
            // says the same of every pinned reference.
            if let Ok(r) = Reference::parse(&image) {
                if let Some(d) = &r.digest {
                    assert_eq!(allowed.admits(&r, d), got, "{what}");
                }
            }
            match (got, says) {
                (Ok(()), None) => {}
                (Err(e), Some(s)) => assert!(e.contains(s), "{what}: {e}"),
                (got, want) => panic!("{what}: {got:?}, wanted {want:?}"),
            }
        }
        assert!(l.expired(T0) && !l.expired(T0 - 1));
    }
}
