//! The store's own record types, apart from the domain types: what is on
//! disk is described here and only here. Each table has a record version;
//! a record is that version byte followed by the record in postcard (which
//! does not describe its fields, so a record type is never changed in place:
//! a new field is a new version, with a migration in `migrate.rs`).
//!
//! One file per store schema holds the record types that schema brought in,
//! named by it: `v1.rs` … `v9.rs` (module `vN`). A table's record version
//! counts that table's own changes, so it is not the schema's number: the
//! intention record of schema 9 is version 7 ([`v9::IntentionRecord`]).
//!
//! - `intentions`: version 7 ([`v9::IntentionRecord`], since schema 9:
//!   the intention as its canonical document, the intention-file schema's
//!   JSON, which the document's own parser reads back, so that a new field
//!   of an intention is a new key of the document, never a new record
//!   version); version 6 ([`v7::IntentionRecord`], since schema 7:
//!   version 5 with the read-only mounts that are not inputs, by index);
//!   version 5 ([`v6::IntentionRecord`], since schema 6: version 4 with the
//!   runtime fields, kept as the intention document's own JSON for them and
//!   checked again on the way out); version 4
//!   ([`v4::IntentionRecord`]) added the intention's `[update]` section,
//!   version 3 the update order, version 2 the revision a central plane
//!   stamps to version 1.
//! - `overlays`, `applied`, `observed`, `events`: version 1.
//! - `reloads` (reload requests) and `updates` (per module: the version a
//!   reload landed, digests the auto lane skips): version 2, since schema 8
//!   ([`v8::ReloadRecord`]: each item also says the image and range it was
//!   resolved against and the digest found; [`v8::UpdateRecord`]: the
//!   digests whose auto-update request failed, with what they failed
//!   under); version 1 since schema 4 ([`v4::ReloadRecord`],
//!   [`v4::UpdateRecord`]).
//! - `plane` (the central plane's held document: its record, key `held`,
//!   and its bytes, key `envelope`; the last contact, key `contact`):
//!   version 1, since schema 5
//!   ([`v5::PlaneRecord`]).
//! - `live` (per module: the container its live files were last delivered
//!   to): version 1, since schema 6 ([`v6::LiveRecord`]).
//! - `guard` (the crash guard, key `guard`): version 1 ([`guard::GuardRecord`]),
//!   a table added without a schema change (an older agent never opens it).
//! - `groups` (per group: the group document held, its bytes and the
//!   revision this node took of it): version 1 ([`groups::GroupRecord`]), a
//!   table added without a schema change.
//! - `images` (images this node pulled, by ID) and `previous` (per module:
//!   the image it runs and the one before): version 1
//!   ([`images::PulledRecord`], [`images::HistoryRecord`]), tables added
//!   without a schema change.
//! - `image_checks` (per image reference: the manifest found signed as the
//!   image policy asks, under which policy): version 1
//!   ([`images::CheckedRecord`]), a table added without a schema change.
//!
//! The domain types are converted to their records and back in
//! `convert.rs`. Converting a record to its domain type checks it again
//! (names, digests, paths): a record that does not check is reported as
//! unreadable, never taken on trust.

use serde::Serialize;
use serde::de::DeserializeOwned;

pub mod agent_update;
mod convert;
pub mod groups;
pub mod guard;
pub mod images;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;
pub mod v5;
pub mod v6;
pub mod v7;
pub mod v8;
pub mod v9;

pub use convert::{
    applied, event, from_applied, from_event, from_intention_record, from_intention_record_v7,
    from_observed, from_overlay, intention_record, intention_record_v4, intention_record_v6,
    intention_record_v7, observed, overlay,
};

/// Record version of the `intentions` table.
pub const INTENTIONS: u8 = 7;
/// Record version of the `overlays` table.
pub const OVERLAYS: u8 = 1;
/// Record version of the `applied` table.
pub const APPLIED: u8 = 1;
/// Record version of the `observed` table.
pub const OBSERVED: u8 = 1;
/// Record version of the `events` table.
pub const EVENTS: u8 = 1;
/// Record version of the `reloads` table.
pub const RELOADS: u8 = 2;
/// Record version of the `updates` table.
pub const UPDATES: u8 = 2;
/// Record version of the `plane` table.
pub const PLANE: u8 = 1;
/// Record version of the `live` table.
pub const LIVE: u8 = 1;
/// Record version of the `guard` table.
pub const GUARD: u8 = 1;
/// Record version of the `groups` table.
pub const GROUPS: u8 = 1;
/// Record version of the `images` table.
pub const IMAGES: u8 = 1;
/// Record version of the `previous` table.
pub const PREVIOUS: u8 = 1;
/// Record version of the `image_checks` table.
pub const IMAGE_CHECKS: u8 = 1;
/// Record version of the `agent_updates` table (JSON: read by the version
/// that filed it and the one it installs).
pub const AGENT_UPDATES: u8 = 1;

/// Encodes a record behind its version byte.
pub fn encode<T: Serialize>(version: u8, v: &T) -> Vec<u8> {
    let mut out = vec![version];
    out.extend(postcard::to_allocvec(v).expect("records serialise"));
    out
}

/// Decodes a record of exactly this version.
pub fn decode<T: DeserializeOwned>(version: u8, bytes: &[u8]) -> Result<T, String> {
    match bytes.split_first() {
        Some((v, rest)) if *v == version => postcard::from_bytes(rest).map_err(|e| e.to_string()),
        Some((v, _)) => Err(format!("record version {v}, expected {version}")),
        None => Err("empty record".into()),
    }
}
