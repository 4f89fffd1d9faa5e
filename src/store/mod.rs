//! The node's records in one redb file: intentions and their settings
//! overlays, applied specs, observed containers and a bounded event log,
//! keyed by module name. What is on disk is described by the store's own
//! versioned record types ([`records`]), converted to and from the domain
//! types here, and brought up to date on open by [`migrate`]. Every write
//! is its own durable transaction: a kill -9 loses nothing that was
//! reported done.
//!
//! This file holds the domain types the store speaks and the tables of the
//! file; the [`Store`] is opened, reopened after an I/O error and asked for
//! its schema and agent id in `db.rs`; intentions, their overlays and the
//! rebuild from the containers' labels are in `intentions.rs`; applied,
//! observed and live records in `containers.rs`; the event log in
//! `events.rs`. Reload requests and update states ([`reloads`]), what the
//! node holds of the central plane ([`plane`]), the crash guard
//! ([`guard`]) and what disk stewardship keeps of images ([`images`]) are
//! tables of their own.

use std::collections::BTreeMap;
use std::sync::Arc;

use redb::TableDefinition;
use serde::{Deserialize, Serialize};

use crate::model::intention::Intention;
use crate::model::names::{Digest, InputName, ModuleName, SettingKey};
use crate::model::spec::ContainerSpec;
use crate::model::value::Value;

pub mod actions;
pub mod agent_updates;
pub mod clock;
mod containers;
mod db;
mod events;
pub mod facts;
pub mod guard;
pub mod images;
mod intentions;
pub mod locks;
pub mod migrate;
pub mod plane;
pub mod records;
pub mod reloads;

pub use db::{Store, StoreError};
pub use events::{EVENT_LOG_CAPACITY, MAX_EVENT_DETAIL};

/// The store's schema version (the core's [`crate::model::release::STORE_SCHEMA`],
/// where its history is, so that the operator's tool signs release
/// statements with this build's).
pub const SCHEMA_VERSION: u64 = crate::model::release::STORE_SCHEMA;

pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Meta key, present on a store created new and until its first pass has
/// taken back what the containers' labels say was stated.
pub(crate) const REBUILD: &str = "rebuild";
pub(crate) const INTENTIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("intentions");
pub(crate) const APPLIED: TableDefinition<&str, &[u8]> = TableDefinition::new("applied");
pub(crate) const OBSERVED: TableDefinition<&str, &[u8]> = TableDefinition::new("observed");
pub(crate) const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
pub(crate) const OVERLAYS: TableDefinition<&str, &[u8]> = TableDefinition::new("overlays");
pub(crate) const RELOADS: TableDefinition<u64, &[u8]> = TableDefinition::new("reloads");
pub(crate) const UPDATES: TableDefinition<&str, &[u8]> = TableDefinition::new("updates");
pub(crate) const PLANE: TableDefinition<&str, &[u8]> = TableDefinition::new("plane");
/// Per module with live files: the container and the live content it was
/// last signalled (or made) with.
pub(crate) const LIVE: TableDefinition<&str, &[u8]> = TableDefinition::new("live");
/// The crash guard (one record, key `guard`): added without a schema
/// change, since an agent that does not know the table never reads it.
pub(crate) const GUARD: TableDefinition<&str, &[u8]> = TableDefinition::new("guard");
/// Per group: the group document held (added without a schema change).
pub(crate) const GROUPS: TableDefinition<&str, &[u8]> = TableDefinition::new("groups");

/// Settings layered over a module's intention through the API, whichever
/// source the intention came from.
pub type Overlay = BTreeMap<SettingKey, Value>;

/// A module's stored intention and its settings overlay, read and written
/// together in one transaction by [`Store::modify`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Entry {
    /// The intention, if the module exists.
    pub record: Option<IntentionRecord>,
    /// Settings layered over it.
    pub overlay: Overlay,
}

impl Entry {
    /// The intention with the overlay's settings merged over its own (the
    /// stored one itself, shared, when there is no overlay).
    pub fn effective(&self) -> Option<Arc<Intention>> {
        self.record.as_ref().map(|r| {
            let mut i = r.intention.clone();
            if !self.overlay.is_empty() {
                let settings = &mut Arc::make_mut(&mut i).settings;
                for (k, v) in &self.overlay {
                    settings.insert(k.clone(), v.clone());
                }
            }
            i
        })
    }
}

/// Every module's entry that reads, and the modules whose stored intention
/// does not, with why ([`Store::entries_readable`]).
pub type Readable = (BTreeMap<ModuleName, Entry>, Vec<(ModuleName, String)>);

/// What a container's labels say was stated for its module, to be taken
/// back into a new store.
#[derive(Clone, Debug, PartialEq)]
pub enum Restated {
    /// A module stated through the API, whole.
    Api(Box<Intention>),
    /// Settings layered over a module's intention.
    Overlay(Overlay),
}

/// Where an intention came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A file in the intentions directory.
    File(String),
    /// The local HTTP API.
    Api,
    /// The central plane.
    Plane,
}

/// A stored intention.
#[derive(Clone, Debug, PartialEq)]
pub struct IntentionRecord {
    /// Where it came from.
    pub source: Source,
    /// Bumped on every change of the intention.
    pub revision: u64,
    /// The revision of the central plane's document that stated it (plane
    /// modules only).
    pub plane_revision: Option<u64>,
    /// The intention.
    pub intention: Arc<Intention>,
}

impl IntentionRecord {
    /// A record of a local source (a file or the API).
    pub fn new(
        source: Source,
        revision: u64,
        intention: impl Into<Arc<Intention>>,
    ) -> IntentionRecord {
        IntentionRecord {
            source,
            revision,
            plane_revision: None,
            intention: intention.into(),
        }
    }
}

/// Whether an applied spec is the target of an action under way or done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyState {
    /// Recorded before acting: the container may not carry it yet.
    Pending,
    /// The container was created from it.
    Applied,
}

/// The spec the module's current container was (or is being) created from.
#[derive(Clone, Debug, PartialEq)]
pub struct AppliedRecord {
    /// Pending or applied.
    pub state: ApplyState,
    /// The spec digest.
    pub digest: Digest,
    /// Every input's digest.
    pub inputs: BTreeMap<InputName, Digest>,
    /// The resolved spec.
    pub spec: ContainerSpec,
    /// The container created from it, once known.
    pub container_id: Option<String>,
    /// When it was recorded, seconds since the epoch.
    pub at: u64,
}

/// What the engine said of the module's container on the last pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedRecord {
    /// The container ID.
    pub container_id: String,
    /// The spec digest it carries.
    pub digest: Option<Digest>,
    /// Its state word.
    pub state: String,
    /// The image ID it runs.
    pub image_id: String,
    /// When it was created.
    pub created: i64,
}

/// What kind of thing happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A container was created.
    Created,
    /// A container was replaced because inputs moved.
    Recreated,
    /// A stopped container was started.
    Started,
    /// An orphaned container was removed.
    Removed,
    /// Drift was found and, by policy, only reported.
    Drift,
    /// A container not managed here holds a module's name.
    Conflict,
    /// An intention was refused.
    Rejected,
    /// An intention was taken or changed.
    Intention,
    /// Something failed.
    Error,
    /// The engine came or went.
    Engine,
}

/// One entry of the event log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Its sequence number, increasing.
    pub seq: u64,
    /// When, seconds since the epoch.
    pub at: u64,
    /// The module, if it concerns one.
    pub module: Option<String>,
    /// What happened.
    pub kind: EventKind,
    /// The details, for people.
    pub detail: String,
}

/// What the tests of the store's files share: an intention, and a raw
/// record written as another version of stead would.
#[cfg(test)]
mod testing {
    use std::path::Path;

    use redb::Database;

    use super::{INTENTIONS, META};
    use crate::model::intention::{DocFormat, Intention};

    pub(super) fn intention() -> Intention {
        Intention::parse(
            "name = \"m\"\nimage = \"x\"\n[config]\npath = \"/c\"\nformat = \"json\"\ndefaults = { a = { b = 1.5 } }",
            DocFormat::Toml,
            "t",
        )
        .unwrap()
    }

    /// Writes a raw record into a table, as another version of stead would.
    pub(super) fn put_raw(p: &Path, key: &str, bytes: &[u8], schema: Option<u64>) {
        let db = Database::create(p).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(INTENTIONS)
            .unwrap()
            .insert(key, bytes)
            .unwrap();
        if let Some(v) = schema {
            tx.open_table(META).unwrap().insert("schema", v).unwrap();
        }
        tx.commit().unwrap();
    }
}
