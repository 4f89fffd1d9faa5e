//! The crash guard's record, version 1 of the `guard` table (a table added
//! without a schema change), and its conversions. Field order and variant
//! order are the encoding: never change them.

use crate::model::sort::Insert as _;
use serde::{Deserialize, Serialize};

use super::convert::checked;
use crate::model::guard as g;
use crate::model::names::{Digest, ModuleName};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Attempt {
    pub boot: String,
    pub plane: Option<u64>,
    pub module: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Hold {
    pub key: String,
    pub crashes: u32,
    pub since: u64,
    pub cause: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct GuardRecord {
    pub open: Option<Attempt>,
    pub crashes: u32,
    pub last: Option<Attempt>,
    pub judging: Option<(String, String)>,
    pub document_crashes: Option<(String, u32)>,
    pub modules: Vec<(String, Hold)>,
    pub revision: Option<(u64, Hold)>,
    pub everything: Option<Hold>,
    pub document: Option<(String, Hold)>,
}

fn attempt(a: &g::Attempt) -> Attempt {
    Attempt {
        boot: a.boot.clone(),
        plane: a.plane,
        module: a.module.as_ref().map(|m| m.to_string()),
    }
}

fn hold(h: &g::Hold) -> Hold {
    Hold {
        key: h.key.to_string(),
        crashes: h.crashes,
        since: h.since,
        cause: h.cause.clone(),
    }
}

/// The record of a guard.
pub fn record(x: &g::Guard) -> GuardRecord {
    let q = &x.quarantine;
    GuardRecord {
        open: x.open.as_ref().map(attempt),
        crashes: x.crashes,
        last: x.last.as_ref().map(attempt),
        judging: x.judging.as_ref().map(|(d, b)| (d.to_string(), b.clone())),
        document_crashes: x
            .document_crashes
            .as_ref()
            .map(|(d, n)| (d.to_string(), *n)),
        modules: q
            .modules
            .iter()
            .map(|(m, h)| (m.to_string(), hold(h)))
            .collect(),
        revision: q.revision.as_ref().map(|(r, h)| (*r, hold(h))),
        everything: q.everything.as_ref().map(hold),
        document: q.document.as_ref().map(|(d, h)| (d.to_string(), hold(h))),
    }
}

fn from_attempt(a: Attempt) -> Result<g::Attempt, String> {
    Ok(g::Attempt {
        boot: a.boot,
        plane: a.plane,
        module: a.module.map(checked::<ModuleName>).transpose()?,
    })
}

fn from_hold(h: Hold) -> Result<g::Hold, String> {
    Ok(g::Hold {
        key: checked::<Digest>(h.key)?,
        crashes: h.crashes,
        since: h.since,
        cause: h.cause,
    })
}

/// A guard from its record.
pub fn from_record(r: GuardRecord) -> Result<g::Guard, String> {
    Ok(g::Guard {
        open: r.open.map(from_attempt).transpose()?,
        crashes: r.crashes,
        last: r.last.map(from_attempt).transpose()?,
        judging: r
            .judging
            .map(|(d, b)| checked::<Digest>(d).map(|d| (d, b)))
            .transpose()?,
        document_crashes: r
            .document_crashes
            .map(|(d, n)| checked::<Digest>(d).map(|d| (d, n)))
            .transpose()?,
        quarantine: g::Quarantine {
            modules: r
                .modules
                .into_iter()
                .map(|(m, h)| Ok((checked::<ModuleName>(m)?, from_hold(h)?)))
                .try_into_map::<_, _, String>()?,
            revision: r
                .revision
                .map(|(n, h)| from_hold(h).map(|h| (n, h)))
                .transpose()?,
            everything: r.everything.map(from_hold).transpose()?,
            document: r
                .document
                .map(|(d, h)| Ok::<_, String>((checked::<Digest>(d)?, from_hold(h)?)))
                .transpose()?,
        },
    })
}
