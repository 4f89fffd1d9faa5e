//! A release of stead itself, as its signed statement says it (the payload
//! of a DSSE envelope of type [`PAYLOAD_TYPE`], signed by a key the plane's
//! documents are trusted by), and the rule that admits one to this agent
//! ([`admit`]): newer than what runs (or a deliberate downgrade), built for
//! this target, able to open this store.
//!
//! ```json
//! {
//!   "version": "0.7.0",
//!   "schema": 9,
//!   "reads_from": 1,
//!   "binaries": {
//!     "aarch64-unknown-linux-musl": {
//!       "url": "stead-aarch64-unknown-linux-musl",
//!       "sha256": "…64 hex digits…",
//!       "size": 4190000
//!     }
//!   }
//! }
//! ```
//! A binary's `url` may be relative to the statement's own URL.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::launch::AgentVersion;

/// The store schema this build of stead writes (`stead::store`): which
/// record version each table holds; a new one is a step in the store's
/// migrations (`src/store/migrate.rs`).
/// Version 1 is 0.1.0's; version 2 adds the plane revision to intentions;
/// version 3 their update order; version 4 reload requests and update
/// states; version 5 the central plane's held document; version 6 the
/// runtime fields of intentions; version 7 their views; version 8 what
/// each reload item was resolved against and the failed auto-update
/// digests; version 9 each intention as its canonical document.
pub const STORE_SCHEMA: u64 = 9;

/// The payload type of a release statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.stead.release.v1+json";

/// The largest statement read (envelope and all).
pub const MAX_STATEMENT: usize = 64 * 1024;

/// The largest agent binary accepted.
pub const MAX_BINARY: u64 = 64 * 1024 * 1024;

/// One target's binary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binary {
    /// Where it is: absolute, or relative to the statement's URL.
    pub url: String,
    /// Its SHA-256, 64 lowercase hex digits.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A release statement, checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// The version, SemVer.
    pub version: String,
    /// The store schema this release writes.
    pub schema: u64,
    /// The oldest store schema it opens (and migrates from).
    #[serde(default = "one")]
    pub reads_from: u64,
    /// Its binaries, by target triple.
    pub binaries: BTreeMap<String, Binary>,
}

fn one() -> u64 {
    1
}

impl Release {
    /// Reads a statement's payload (its JSON, no key given twice) and
    /// checks every field.
    pub fn parse(payload: &[u8]) -> Result<Release, String> {
        crate::model::json::no_repeated_keys(payload)
            .map_err(|e| format!("release statement: {}: {}", e.path, e.message))?;
        let r: Release = serde_json::from_slice(payload).map_err(|e| {
            format!(
                "release statement: {}",
                crate::model::text::clip(&e.to_string(), 200)
            )
        })?;
        r.check()?;
        Ok(r)
    }

    fn check(&self) -> Result<(), String> {
        let v = self.semver()?;
        AgentVersion::parse(&v.to_string())
            .map_err(|e| format!("release statement: version: {e}"))?;
        if self.schema == 0 || self.reads_from == 0 || self.reads_from > self.schema {
            return Err(format!(
                "release statement: schema {} and reads_from {}: both from 1, reads_from at most schema",
                self.schema, self.reads_from
            ));
        }
        if self.binaries.is_empty() {
            return Err("release statement: binaries: none listed".into());
        }
        for (t, b) in &self.binaries {
            let at = |m: String| format!("release statement: binaries.{t}: {m}");
            if t.is_empty()
                || t.len() > 64
                || !t
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
            {
                return Err(format!(
                    "release statement: '{}' is not a target triple",
                    t.escape_debug()
                ));
            }
            if b.sha256.len() != 64
                || !b
                    .sha256
                    .bytes()
                    .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
            {
                return Err(at("sha256 must be 64 lowercase hex digits".into()));
            }
            if b.size == 0 || b.size > MAX_BINARY {
                return Err(at(format!("size {} is not from 1 to {MAX_BINARY}", b.size)));
            }
            if b.url.is_empty() || b.url.len() > 2048 || b.url.contains(char::is_whitespace) {
                return Err(at("url is empty, over 2048 bytes or holds blanks".into()));
            }
        }
        Ok(())
    }

    /// The version as SemVer.
    pub fn semver(&self) -> Result<semver::Version, String> {
        semver::Version::parse(&self.version).map_err(|e| {
            format!(
                "release statement: version '{}': {e}",
                self.version.escape_debug()
            )
        })
    }

    /// The version as the launcher names its directory (checked at
    /// parse; checked again here for a release made otherwise).
    pub fn agent_version(&self) -> Result<AgentVersion, String> {
        AgentVersion::parse(&self.version)
    }
}

/// What this agent is, as far as admitting a release goes.
#[derive(Clone, Debug)]
pub struct Running<'a> {
    pub version: &'a semver::Version,
    pub target: &'a str,
    /// The schema of the store the agent has open.
    pub store_schema: u64,
}

/// Why a release is not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotTaken {
    /// It is the version running: nothing to do.
    Running,
    /// Refused, and why (a decided answer: the same statement is refused
    /// again).
    Refused(String),
}

/// The rule: a release is taken when it is another version than the one
/// running (below it only with `downgrade`), lists a binary for this
/// target, and can open this store: it reads from a schema at or below
/// the store's and writes one at or above it (an older schema than the
/// store's would not open it).
pub fn admit<'r>(r: &'r Release, me: &Running, downgrade: bool) -> Result<&'r Binary, NotTaken> {
    let v = r.semver().map_err(NotTaken::Refused)?;
    if &v == me.version {
        return Err(NotTaken::Running);
    }
    if &v < me.version && !downgrade {
        return Err(NotTaken::Refused(format!(
            "{v} is below the running {}: a downgrade must say downgrade = true",
            me.version
        )));
    }
    let Some(b) = r.binaries.get(me.target) else {
        return Err(NotTaken::Refused(format!(
            "{v} has no binary for {} (it lists {})",
            me.target,
            r.binaries.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    };
    if r.reads_from > me.store_schema {
        return Err(NotTaken::Refused(format!(
            "{v} opens stores of schema {} and later; this store is schema {}",
            r.reads_from, me.store_schema
        )));
    }
    if r.schema < me.store_schema {
        return Err(NotTaken::Refused(format!(
            "{v} writes store schema {}; this store is schema {}, which it cannot open",
            r.schema, me.store_schema
        )));
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const T: &str = "aarch64-unknown-linux-musl";

    fn statement(version: &str, schema: u64, reads_from: u64) -> String {
        format!(
            r#"{{"version":"{version}","schema":{schema},"reads_from":{reads_from},"binaries":{{"{T}":{{"url":"stead-{T}","sha256":"{SHA}","size":4190000}}}}}}"#
        )
    }

    #[test]
    fn a_statement_reads_back_and_bad_ones_are_refused_by_field() {
        let r = Release::parse(statement("0.7.0", 10, 1).as_bytes()).unwrap();
        assert_eq!(r.version, "0.7.0");
        assert_eq!(r.binaries[T].size, 4190000);
        assert_eq!(Release::parse(&serde_json::to_vec(&r).unwrap()).unwrap(), r);
        #[rustfmt::skip]
        let bad: &[(&str, &str)] = &[
            (r#"{"version":"seven","schema":1,"binaries":{}}"#, "version 'seven'"),
            (r#"{"version":"0.7.0","schema":0,"binaries":{}}"#, "schema 0"),
            (r#"{"version":"0.7.0","schema":3,"reads_from":4,"binaries":{}}"#, "reads_from 4"),
            (r#"{"version":"0.7.0","schema":3,"binaries":{}}"#, "none listed"),
            (r#"{"version":"0.7.0","version":"0.8.0","schema":3,"binaries":{}}"#, "version"),
            (r#"{"version":"0.7.0","schema":3,"binaries":{"a/b":{"url":"x","sha256":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","size":1}}}"#, "not a target triple"),
            (r#"{"version":"0.7.0","schema":3,"binaries":{"t":{"url":"x","sha256":"ABC","size":1}}}"#, "binaries.t: sha256"),
            (r#"{"version":"0.7.0","schema":3,"binaries":{"t":{"url":"x","sha256":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","size":0}}}"#, "binaries.t: size 0"),
            (r#"{"version":"0.7.0","schema":3,"binaries":{"t":{"url":"a b","sha256":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","size":1}}}"#, "binaries.t: url"),
            (r#"[1,2]"#, "release statement"),
        ];
        for (text, says) in bad {
            let e = Release::parse(text.as_bytes()).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn admit_table() {
        let v060 = semver::Version::new(0, 6, 0);
        let me = |schema: u64| Running {
            version: &v060,
            target: T,
            store_schema: schema,
        };
        let r = |v: &str, schema: u64, from: u64| {
            Release::parse(statement(v, schema, from).as_bytes()).unwrap()
        };
        // (release, store schema, downgrade, taken or the words of why not)
        #[rustfmt::skip]
        let cases: Vec<(Release, u64, bool, Result<(), &str>)> = vec![
            (r("0.7.0", 9, 1), 9, false, Ok(())),
            (r("0.7.0", 10, 1), 9, false, Ok(())),
            (r("0.7.0", 10, 9), 9, false, Ok(())),
            (r("0.6.0", 9, 1), 9, false, Err("running")),
            (r("0.6.0", 9, 1), 9, true, Err("running")),
            (r("0.5.0", 9, 1), 9, false, Err("0.5.0 is below the running 0.6.0: a downgrade must say downgrade = true")),
            (r("0.5.0", 9, 1), 9, true, Ok(())),
            (r("0.5.0", 8, 1), 9, true, Err("writes store schema 8; this store is schema 9")),
            (r("0.7.0", 12, 10), 9, false, Err("opens stores of schema 10 and later; this store is schema 9")),
            (r("0.7.0-rc.1", 9, 1), 9, false, Ok(())),
        ];
        for (rel, schema, downgrade, want) in cases {
            let got = admit(&rel, &me(schema), downgrade);
            match (want, got) {
                (Ok(()), Ok(b)) => assert_eq!(b.size, 4190000),
                (Err("running"), Err(NotTaken::Running)) => {}
                (Err(words), Err(NotTaken::Refused(why))) => assert!(why.contains(words), "{why}"),
                (want, got) => panic!(
                    "{} schema {schema} downgrade {downgrade}: want {want:?}, got {got:?}",
                    rel.version
                ),
            }
        }
        let mut other = r("0.7.0", 9, 1);
        other.binaries.insert(
            "x86_64-unknown-linux-musl".into(),
            other.binaries[T].clone(),
        );
        other.binaries.remove(T);
        assert_eq!(
            admit(&other, &me(9), false),
            Err(NotTaken::Refused("0.7.0 has no binary for aarch64-unknown-linux-musl (it lists x86_64-unknown-linux-musl)".into()))
        );
    }
}
