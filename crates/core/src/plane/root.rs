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
//! A root may also delegate, as TUF's delegated targets roles (adapted):
//! each delegation names its keys, a threshold, and what it may sign (its
//! scope: group names, whose group documents it signs, and/or a
//! module-name prefix every module a document signed by it names must
//! start with), so a team's CI key cannot change another team's devices
//! ([`Delegation::out_of_scope`]). Every delegation is terminating: the
//! first, in the root's order, whose threshold a document's signatures
//! meet alone decides. And it may name the role of an allow-list of image
//! digests (`allow_list`: offline keys and a threshold;
//! [`crate::plane::allowlist`]), Uptane's image repository beside its
//! director: every image a document names must then be pinned by digest
//! and listed, so a stolen online key alone cannot ship an unlisted
//! image. Both are optional: a root without them reads as before.
//!
//! Published as `<base>/root.json` (the newest, polled) and
//! `<base>/roots/<version>.json` (each, walked), each a DSSE envelope
//! ([`crate::plane::envelope`]) of [`PAYLOAD_TYPE`]:
//!
//! ```json
//! {"version": 2, "expires": "2027-12-01T00:00:00Z",
//!  "root": {"keys": ["<base64>", "<base64>", "<base64>"], "threshold": 2},
//!  "documents": {"keys": ["<base64>"]},
//!  "delegations": [{"name": "team-a", "keys": ["<base64>"], "threshold": 1,
//!                   "groups": ["team-a-edge"], "modules": "team-a-"}],
//!  "allow_list": {"keys": ["<base64>", "<base64>"], "threshold": 2}}
//! ```

use serde::Deserialize;

use crate::model::fleet::GroupName;
use crate::model::names::ModuleName;
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
/// The most delegations a root names.
pub const MAX_DELEGATIONS: usize = 32;
/// The most groups a delegation names.
pub const MAX_DELEGATED_GROUPS: usize = 64;

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
    /// Keys that sign documents within a scope, in the order they are
    /// looked at (none: only the document keys sign).
    pub delegations: Vec<Delegation>,
    /// The keys that sign the allow-list of image digests, and how many
    /// must (none: no allow-list is asked for).
    pub allow_list: Option<Role>,
}

/// Keys that sign node and group documents within a scope, as TUF's
/// delegated role: its name, keys and threshold, and what it may sign.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delegation {
    /// Its name (`[a-z0-9][a-z0-9-]{0,62}`), said in every refusal.
    pub name: String,
    /// Its keys and how many of them must sign.
    pub role: Role,
    /// The groups whose documents it signs (none: any group, within its
    /// prefix); a node's document it signs may list only these.
    pub groups: Vec<GroupName>,
    /// The prefix every module a document it signs names must start with
    /// (none: any module of its groups' documents; it then signs no
    /// node's document).
    pub modules: Option<String>,
}

/// What a document names, for a delegation's scope: whose it is, the
/// groups a node's lists, every module it names (run, previous, removed,
/// overridden), and whether it asks for a version of stead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named<'a> {
    /// The group a group's document is for; none for a node's.
    pub group: Option<&'a GroupName>,
    /// The groups a node's document lists.
    pub groups: Vec<&'a GroupName>,
    /// Every module it names.
    pub modules: Vec<&'a ModuleName>,
    /// Whether it asks for a version of stead itself.
    pub agent: bool,
    /// Whether it carries an image policy (`images`), which applies to
    /// every image of the node, whoever's module it is.
    pub policy: bool,
}

impl Delegation {
    /// What `named` names outside this delegation's scope, in a sentence
    /// (none: all of it is within). A group's document: its group among
    /// the delegation's groups (when it names any) and each module within
    /// its prefix (when it has one). A node's document: only with a
    /// prefix, each module within it, each group listed among its groups,
    /// and no version of stead (stead itself is the root's document keys'
    /// to move).
    pub fn out_of_scope(&self, named: &Named) -> Option<String> {
        let groups = || {
            if self.groups.is_empty() {
                "none".to_string()
            } else {
                self.groups
                    .iter()
                    .map(GroupName::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        match named.group {
            Some(g) => {
                if !self.groups.is_empty() && !self.groups.contains(g) {
                    return Some(format!("group {g} is not one of its groups ({})", groups()));
                }
            }
            None => {
                if self.modules.is_none() {
                    return Some(format!(
                        "a node's document is signed only by the root's document keys or a delegation with a module prefix; it signs the documents of groups {}",
                        groups()
                    ));
                }
                if let Some(g) = named.groups.iter().find(|g| !self.groups.contains(g)) {
                    return Some(format!(
                        "the node's document lists group {g}, not one of its groups ({})",
                        groups()
                    ));
                }
                if named.agent {
                    return Some(
                        "the node's document asks for a version of stead, which only the root's document keys may"
                            .into(),
                    );
                }
            }
        }
        if named.policy {
            return Some(
                "it carries an image policy (images), which covers every module of the node: only the root's document keys set one"
                    .into(),
            );
        }
        if let Some(prefix) = &self.modules
            && let Some(m) = named
                .modules
                .iter()
                .find(|m| !m.as_str().starts_with(prefix.as_str()))
        {
            return Some(format!(
                "module {m} does not start with its prefix {prefix:?}"
            ));
        }
        None
    }
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
    #[serde(default)]
    delegations: Vec<DelegationDoc>,
    #[serde(default)]
    allow_list: Option<RoleDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DelegationDoc {
    name: String,
    keys: Vec<String>,
    threshold: usize,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    modules: Option<String>,
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
            delegations: Vec::new(),
            allow_list: None,
        }
    }

    /// Reads a root's payload and checks it whole.
    pub fn parse(payload: &[u8]) -> Result<Root, RootError> {
        crate::model::json::no_repeated_keys(payload).map_err(|r| RootError::Invalid {
            version: None,
            field: r.path,
            message: r.message,
        })?;
        let doc: RootDoc = crate::model::json::read(payload).map_err(|e| RootError::Invalid {
            version: None,
            field: e.path,
            message: crate::model::intention::without_values(&e.error.to_string()),
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
        let root = role(&doc.root, "root").map_err(|(f, m)| invalid(&f, m))?;
        let documents =
            keys(&doc.documents.keys, "documents.keys").map_err(|(f, m)| invalid(&f, m))?;
        let delegations = delegations(doc.delegations).map_err(|(f, m)| invalid(&f, m))?;
        let allow_list = match &doc.allow_list {
            None => None,
            Some(r) => Some(role(r, "allow_list").map_err(|(f, m)| invalid(&f, m))?),
        };
        Ok(Root {
            version: v,
            expires,
            root,
            documents,
            delegations,
            allow_list,
        })
    }

    /// The payload this root reads from.
    pub fn to_payload(&self) -> Vec<u8> {
        let b64 = |ks: &[PublicKey]| ks.iter().map(PublicKey::to_base64).collect::<Vec<_>>();
        let mut doc = serde_json::json!({
            "version": self.version,
            "expires": format_rfc3339(self.expires),
            "root": {"keys": b64(&self.root.keys), "threshold": self.root.threshold},
            "documents": {"keys": b64(&self.documents)},
        });
        // Written only when there are some: a root without them reads
        // (and is written) as before.
        if !self.delegations.is_empty() {
            doc["delegations"] = self
                .delegations
                .iter()
                .map(|d| {
                    let mut o = serde_json::json!({
                        "name": d.name,
                        "keys": b64(&d.role.keys),
                        "threshold": d.role.threshold,
                    });
                    if !d.groups.is_empty() {
                        o["groups"] = d.groups.iter().map(GroupName::as_str).collect();
                    }
                    if let Some(p) = &d.modules {
                        o["modules"] = p.as_str().into();
                    }
                    o
                })
                .collect();
        }
        if let Some(a) = &self.allow_list {
            doc["allow_list"] = serde_json::json!({"keys": b64(&a.keys), "threshold": a.threshold});
        }
        serde_json::to_vec_pretty(&doc).expect("a root serialises")
    }

    /// Whether it has expired at `now` (the config's never does).
    pub fn expired(&self, now: u64) -> bool {
        self.expires <= now
    }
}

/// A checked role (`field`: its place): its keys, and a threshold of 1 to
/// their number.
fn role(doc: &RoleDoc, field: &str) -> Result<Role, (String, String)> {
    let r = Role {
        keys: keys(&doc.keys, &format!("{field}.keys"))?,
        threshold: doc.threshold,
    };
    if r.threshold == 0 || r.threshold > r.keys.len() {
        return Err((
            format!("{field}.threshold"),
            format!(
                "{} with {} key(s): at least 1 and at most the keys",
                r.threshold,
                r.keys.len()
            ),
        ));
    }
    Ok(r)
}

/// Checked delegations: at most [`MAX_DELEGATIONS`], each named once,
/// each a role, with a scope (groups, a prefix, or both), each group
/// once.
fn delegations(docs: Vec<DelegationDoc>) -> Result<Vec<Delegation>, (String, String)> {
    if docs.len() > MAX_DELEGATIONS {
        return Err((
            "delegations".into(),
            format!(
                "{} delegations, over the {MAX_DELEGATIONS} a root may name",
                docs.len()
            ),
        ));
    }
    let mut out: Vec<Delegation> = Vec::with_capacity(docs.len());
    for (i, d) in docs.into_iter().enumerate() {
        let at = format!("delegations[{i}]");
        ModuleName::try_from(d.name.as_str()).map_err(|_| {
            (
                format!("{at}.name"),
                format!(
                    "{:?} is not a delegation's name: [a-z0-9][a-z0-9-]{{0,62}}",
                    d.name.chars().take(64).collect::<String>()
                ),
            )
        })?;
        if out.iter().any(|o| o.name == d.name) {
            return Err((
                format!("{at}.name"),
                format!("delegation {} is named twice", d.name),
            ));
        }
        let role = role(
            &RoleDoc {
                keys: d.keys,
                threshold: d.threshold,
            },
            &at,
        )?;
        if d.groups.len() > MAX_DELEGATED_GROUPS {
            return Err((
                format!("{at}.groups"),
                format!(
                    "{} groups, over the {MAX_DELEGATED_GROUPS} a delegation may name",
                    d.groups.len()
                ),
            ));
        }
        let mut groups: Vec<GroupName> = Vec::with_capacity(d.groups.len());
        for (j, g) in d.groups.into_iter().enumerate() {
            let g = GroupName::try_from(g).map_err(|e| (format!("{at}.groups[{j}]"), e.0))?;
            if groups.contains(&g) {
                return Err((
                    format!("{at}.groups[{j}]"),
                    format!("group {g} is listed twice"),
                ));
            }
            groups.push(g);
        }
        if let Some(p) = &d.modules {
            // A prefix is the start of a module name: a name's characters.
            let ok = !p.is_empty() && ModuleName::try_from(p.as_str()).is_ok();
            if !ok {
                return Err((
                    format!("{at}.modules"),
                    format!(
                        "{:?} is not the start of a module name: [a-z0-9][a-z0-9-]{{0,62}}",
                        p.chars().take(64).collect::<String>()
                    ),
                ));
            }
        }
        if groups.is_empty() && d.modules.is_none() {
            return Err((
                at,
                "names no scope: groups, a module prefix (modules), or both".into(),
            ));
        }
        out.push(Delegation {
            name: d.name,
            role,
            groups,
            modules: d.modules,
        });
    }
    Ok(out)
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
    use serde_json::json as j;

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
            delegations: Vec::new(),
            allow_list: None,
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

    #[test]
    fn delegations_and_the_allow_list_role_are_read_whole_and_optional() {
        let (r, d, a, b) = (key(), key(), key(), key());
        let b64 = |k: &SecretKey| k.public().to_base64();
        let base = |extra: serde_json::Value| {
            let mut v = serde_json::json!({
                "version": 2, "expires": "2030-01-01T00:00:00Z",
                "root": {"keys": [b64(&r)], "threshold": 1},
                "documents": {"keys": [b64(&d)]},
            });
            if let (Some(o), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
                o.extend(e);
            }
            serde_json::to_vec(&v).unwrap()
        };
        let del = |extra: serde_json::Value| {
            let mut v = serde_json::json!({"name": "team-a", "keys": [b64(&a)], "threshold": 1});
            if let (Some(o), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
                o.extend(e);
            }
            base(serde_json::json!({"delegations": [v]}))
        };
        let word = |r: Result<Root, RootError>| match r {
            Ok(r) => format!("ok {} {}", r.delegations.len(), r.allow_list.is_some()),
            Err(RootError::Invalid { field, .. }) => format!("invalid {field}"),
            Err(e) => format!("{e}"),
        };
        // (what, the payload, what is said)
        #[rustfmt::skip]
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("neither: as before", base(j!({})), "ok 0 false"),
            ("a delegation of groups", del(j!({"groups": ["edge-eu"]})), "ok 1 false"),
            ("a delegation of a prefix", del(j!({"modules": "team-a-"})), "ok 1 false"),
            ("both", del(j!({"groups": ["edge-eu"], "modules": "a-"})), "ok 1 false"),
            ("no scope", del(j!({})), "invalid delegations[0]"),
            ("an empty prefix", del(j!({"modules": ""})), "invalid delegations[0].modules"),
            ("a prefix no module starts with", del(j!({"modules": "Team"})), "invalid delegations[0].modules"),
            ("a group that is not a name", del(j!({"groups": ["Edge EU"]})), "invalid delegations[0].groups[0]"),
            ("a group twice", del(j!({"groups": ["eu", "eu"]})), "invalid delegations[0].groups[1]"),
            ("a threshold over its keys", del(j!({"groups": ["eu"], "threshold": 2})), "invalid delegations[0].threshold"),
            ("a threshold of 0", del(j!({"groups": ["eu"], "threshold": 0})), "invalid delegations[0].threshold"),
            ("no key", del(j!({"groups": ["eu"], "keys": []})), "invalid delegations[0].keys"),
            ("a key twice", del(j!({"groups": ["eu"], "keys": [b64(&a), b64(&a)]})), "invalid delegations[0].keys[1]"),
            ("a name that is not one", del(j!({"groups": ["eu"], "name": "Team A"})), "invalid delegations[0].name"),
            ("an unknown field", del(j!({"groups": ["eu"], "paths": ["x"]})), "invalid delegations[0].paths"),
            ("a name twice", base(j!({"delegations": [
                {"name": "t", "keys": [b64(&a)], "threshold": 1, "groups": ["eu"]},
                {"name": "t", "keys": [b64(&b)], "threshold": 1, "groups": ["us"]}]})), "invalid delegations[1].name"),
            ("too many", base(j!({"delegations": (0..=MAX_DELEGATIONS).map(|i| j!({"name": format!("t{i}"), "keys": [b64(&a)], "threshold": 1, "groups": ["eu"]})).collect::<Vec<_>>()})), "invalid delegations"),
            ("an allow-list role", base(j!({"allow_list": {"keys": [b64(&a), b64(&b)], "threshold": 2}})), "ok 0 true"),
            ("an allow-list threshold over its keys", base(j!({"allow_list": {"keys": [b64(&a)], "threshold": 2}})), "invalid allow_list.threshold"),
            ("an allow-list of no key", base(j!({"allow_list": {"keys": [], "threshold": 1}})), "invalid allow_list.keys"),
        ];
        for (what, payload, says) in cases {
            assert_eq!(word(Root::parse(&payload)), says, "{what}");
        }
        // Written as read; a root without them is written as before.
        let full = Root::parse(&del(j!({"groups": ["edge-eu"], "modules": "a-"}))).unwrap();
        assert_eq!(Root::parse(&full.to_payload()), Ok(full.clone()));
        let plain = Root::parse(&base(j!({}))).unwrap();
        let text = String::from_utf8(plain.to_payload()).unwrap();
        assert!(
            !text.contains("delegations") && !text.contains("allow_list"),
            "{text}"
        );
        let mut listed = plain.clone();
        listed.allow_list = Some(Role {
            keys: vec![a.public()],
            threshold: 1,
        });
        assert_eq!(Root::parse(&listed.to_payload()), Ok(listed));
    }

    #[test]
    fn a_delegation_s_scope_names_what_is_outside_it() {
        let k = key();
        let g = |s: &str| GroupName::try_from(s).unwrap();
        let m = |s: &str| ModuleName::try_from(s).unwrap();
        let (eu, us) = (g("edge-eu"), g("edge-us"));
        let (web, a_web) = (m("web"), m("a-web"));
        let d = |groups: &[&GroupName], prefix: Option<&str>| Delegation {
            name: "team-a".into(),
            role: Role {
                keys: vec![k.public()],
                threshold: 1,
            },
            groups: groups.iter().map(|g| (*g).clone()).collect(),
            modules: prefix.map(str::to_string),
        };
        let group = |g: &'static GroupName, ms: Vec<&'static ModuleName>| Named {
            group: Some(g),
            groups: vec![],
            modules: ms,
            agent: false,
            policy: false,
        };
        let node = |gs: Vec<&'static GroupName>, ms: Vec<&'static ModuleName>, agent| Named {
            group: None,
            groups: gs,
            modules: ms,
            agent,
            policy: false,
        };
        let (eu, us, web, a_web): (&'static _, &'static _, &'static _, &'static _) = (
            Box::leak(Box::new(eu)),
            Box::leak(Box::new(us)),
            Box::leak(Box::new(web)),
            Box::leak(Box::new(a_web)),
        );
        // (what, the delegation, what is named, None: within, or words)
        #[rustfmt::skip]
        let cases: Vec<(&str, Delegation, Named, Option<&str>)> = vec![
            ("its group", d(&[eu], None), group(eu, vec![web]), None),
            ("another group", d(&[eu], None), group(us, vec![web]), Some("group edge-us is not one of its groups (edge-eu)")),
            ("any group, its prefix", d(&[], Some("a-")), group(us, vec![a_web]), None),
            ("any group, outside its prefix", d(&[], Some("a-")), group(us, vec![a_web, web]), Some("module web does not start with its prefix \"a-\"")),
            ("its group, outside its prefix", d(&[eu], Some("a-")), group(eu, vec![web]), Some("module web")),
            ("a node's, no prefix", d(&[eu], None), node(vec![], vec![], false), Some("a node's document is signed only by")),
            ("a node's, its prefix", d(&[], Some("a-")), node(vec![], vec![a_web], false), None),
            ("a node's, a group of none", d(&[], Some("a-")), node(vec![eu], vec![a_web], false), Some("lists group edge-eu, not one of its groups (none)")),
            ("a node's, its group", d(&[eu], Some("a-")), node(vec![eu], vec![a_web], false), None),
            ("a node's, asking for stead", d(&[eu], Some("a-")), node(vec![eu], vec![a_web], true), Some("asks for a version of stead")),
            ("a node's, outside its prefix", d(&[eu], Some("a-")), node(vec![eu], vec![web], false), Some("module web")),
            ("its group, an image policy", d(&[eu], None), Named { policy: true, ..group(eu, vec![web]) }, Some("it carries an image policy")),
            ("a node's, an image policy", d(&[eu], Some("a-")), Named { policy: true, ..node(vec![eu], vec![a_web], false) }, Some("only the root's document keys set one")),
            ("its group, an image policy", d(&[eu], None), Named { policy: true, ..group(eu, vec![web]) }, Some("it carries an image policy")),
            ("a node's, an image policy", d(&[eu], Some("a-")), Named { policy: true, ..node(vec![eu], vec![a_web], false) }, Some("only the root's document keys set one")),
        ];
        for (what, d, named, says) in cases {
            match (d.out_of_scope(&named), says) {
                (None, None) => {}
                (Some(e), Some(s)) => assert!(e.contains(s), "{what}: {e}"),
                (got, want) => panic!("{what}: {got:?}, wanted {want:?}"),
            }
        }
    }
}
