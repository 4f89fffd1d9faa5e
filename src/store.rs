//! The node's records in one redb file: intentions, applied specs, observed
//! containers and a bounded event log, keyed by module name. Values are
//! postcard behind a one-byte schema version, so a newer agent can tell an
//! old record from garbage. Every write is its own durable transaction: a
//! kill -9 loses nothing that was reported done.
//!
//! Room is left for the records that come later (reload requests, the
//! plane's revision and ETag): each is a table of its own.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::intention::Intention;
use crate::names::{Digest, InputName, ModuleName, SettingKey};
use crate::spec::ContainerSpec;
use crate::value::Value;

/// The version byte in front of every record.
pub const SCHEMA_VERSION: u8 = 1;
/// How many events the log keeps.
pub const EVENT_LOG_CAPACITY: u64 = 1000;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const INTENTIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("intentions");
const APPLIED: TableDefinition<&str, &[u8]> = TableDefinition::new("applied");
const OBSERVED: TableDefinition<&str, &[u8]> = TableDefinition::new("observed");
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
const OVERLAYS: TableDefinition<&str, &[u8]> = TableDefinition::new("overlays");

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
    /// The intention with the overlay's settings merged over its own.
    pub fn effective(&self) -> Option<Intention> {
        self.record.as_ref().map(|r| {
            let mut i = r.intention.clone();
            for (k, v) in &self.overlay {
                i.settings.insert(k.clone(), v.clone());
            }
            i
        })
    }
}

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file could not be opened or created.
    #[error("cannot open the store at {path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: redb::DatabaseError,
    },
    /// The file was written by an agent with a newer schema.
    #[error(
        "the store at {path} has schema version {found}; this agent reads up to {SCHEMA_VERSION}"
    )]
    NewerSchema {
        /// The file.
        path: String,
        /// The version found.
        found: u64,
    },
    /// A transaction failed.
    #[error("store {op} failed: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// Why.
        #[source]
        source: redb::Error,
    },
    /// A record did not decode.
    #[error("store record {table}/{key} is unreadable: {message}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// The key.
        key: String,
        /// Why.
        message: String,
    },
}

fn io<E: Into<redb::Error>>(op: &'static str) -> impl FnOnce(E) -> StoreError {
    move |e| StoreError::Io {
        op,
        source: e.into(),
    }
}

/// Where an intention came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    /// A file in the intentions directory.
    File(String),
    /// The local HTTP API.
    Api,
    /// The central plane.
    Plane,
}

/// A stored intention.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntentionRecord {
    /// Where it came from.
    pub source: Source,
    /// Bumped on every change of the intention.
    pub revision: u64,
    /// The intention.
    pub intention: Intention,
}

/// Whether an applied spec is the target of an action under way or done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApplyState {
    /// Recorded before acting: the container may not carry it yet.
    Pending,
    /// The container was created from it.
    Applied,
}

/// The spec the module's current container was (or is being) created from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    let mut out = vec![SCHEMA_VERSION];
    out.extend(postcard::to_allocvec(v).expect("records serialise"));
    out
}

fn decode<T: DeserializeOwned>(
    table: &'static str,
    key: &str,
    bytes: &[u8],
) -> Result<T, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        table,
        key: key.to_string(),
        message,
    };
    match bytes.split_first() {
        Some((&SCHEMA_VERSION, rest)) => {
            postcard::from_bytes(rest).map_err(|e| corrupt(e.to_string()))
        }
        Some((v, _)) => Err(corrupt(format!("unknown record version {v}"))),
        None => Err(corrupt("empty record".into())),
    }
}

/// The store.
pub struct Store {
    db: Database,
}

/// Bytes of page cache: a device has little memory, and the records are few.
const CACHE_BYTES: usize = 2 * 1024 * 1024;

impl Store {
    /// Opens (or creates) the store file.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(|source| StoreError::Open {
                path: path.display().to_string(),
                source,
            })?;
        let store = Store { db };
        let tx = store.db.begin_write().map_err(io("open"))?;
        {
            let mut meta = tx.open_table(META).map_err(io("open"))?;
            let found = meta.get("schema").map_err(io("open"))?.map(|v| v.value());
            match found {
                Some(v) if v > u64::from(SCHEMA_VERSION) => {
                    return Err(StoreError::NewerSchema {
                        path: path.display().to_string(),
                        found: v,
                    });
                }
                Some(_) => {}
                None => {
                    meta.insert("schema", u64::from(SCHEMA_VERSION))
                        .map_err(io("open"))?;
                }
            }
            tx.open_table(INTENTIONS).map_err(io("open"))?;
            tx.open_table(APPLIED).map_err(io("open"))?;
            tx.open_table(OBSERVED).map_err(io("open"))?;
            tx.open_table(EVENTS).map_err(io("open"))?;
            tx.open_table(OVERLAYS).map_err(io("open"))?;
        }
        tx.commit().map_err(io("open"))?;
        Ok(store)
    }

    fn all<T: DeserializeOwned>(
        &self,
        def: TableDefinition<&str, &[u8]>,
        name: &'static str,
    ) -> Result<BTreeMap<String, T>, StoreError> {
        let tx = self.db.begin_read().map_err(io("read"))?;
        let table = tx.open_table(def).map_err(io("read"))?;
        let mut out = BTreeMap::new();
        for row in table.iter().map_err(io("read"))? {
            let (k, v) = row.map_err(io("read"))?;
            out.insert(k.value().to_string(), decode(name, k.value(), v.value())?);
        }
        Ok(out)
    }

    fn get<T: DeserializeOwned>(
        &self,
        def: TableDefinition<&str, &[u8]>,
        name: &'static str,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        let tx = self.db.begin_read().map_err(io("read"))?;
        let table = tx.open_table(def).map_err(io("read"))?;
        let v = table.get(key).map_err(io("read"))?;
        v.map(|v| decode(name, key, v.value())).transpose()
    }

    fn put<T: Serialize>(
        &self,
        def: TableDefinition<&str, &[u8]>,
        key: &str,
        v: &T,
    ) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(io("write"))?;
        tx.open_table(def)
            .map_err(io("write"))?
            .insert(key, encode(v).as_slice())
            .map_err(io("write"))?;
        tx.commit().map_err(io("write"))
    }

    /// Every stored intention, by module.
    pub fn intentions(&self) -> Result<BTreeMap<ModuleName, IntentionRecord>, StoreError> {
        let raw: BTreeMap<String, IntentionRecord> = self.all(INTENTIONS, "intentions")?;
        Ok(raw
            .into_values()
            .map(|r| (r.intention.name.clone(), r))
            .collect())
    }

    /// Every module's intention with its overlay, by module.
    pub fn entries(&self) -> Result<BTreeMap<ModuleName, Entry>, StoreError> {
        let records = self.intentions()?;
        let mut overlays: BTreeMap<String, Overlay> = self.all(OVERLAYS, "overlays")?;
        Ok(records
            .into_iter()
            .map(|(name, record)| {
                let overlay = overlays.remove(name.as_str()).unwrap_or_default();
                (
                    name,
                    Entry {
                        record: Some(record),
                        overlay,
                    },
                )
            })
            .collect())
    }

    /// Reads a module's entry, lets `f` change it, and writes back what
    /// changed, all in one write transaction: concurrent writers (the API,
    /// the intentions directory) never interleave or lose an update. The
    /// entry is written only if `f` returns `Ok`.
    pub fn modify<T, E>(
        &self,
        name: &ModuleName,
        f: impl FnOnce(&mut Entry) -> Result<T, E>,
    ) -> Result<Result<T, E>, StoreError> {
        let tx = self.db.begin_write().map_err(io("modify"))?;
        let out;
        let mut changed = false;
        {
            let mut it = tx.open_table(INTENTIONS).map_err(io("modify"))?;
            let mut ot = tx.open_table(OVERLAYS).map_err(io("modify"))?;
            let key = name.as_str();
            let record = match it.get(key).map_err(io("modify"))? {
                Some(v) => Some(decode::<IntentionRecord>("intentions", key, v.value())?),
                None => None,
            };
            let overlay = match ot.get(key).map_err(io("modify"))? {
                Some(v) => decode::<Overlay>("overlays", key, v.value())?,
                None => Overlay::new(),
            };
            let before = Entry { record, overlay };
            let mut entry = before.clone();
            out = f(&mut entry);
            if out.is_ok() && entry != before {
                changed = true;
                match &entry.record {
                    Some(r) => it.insert(key, encode(r).as_slice()).map(|_| ()),
                    None => it.remove(key).map(|_| ()),
                }
                .map_err(io("modify"))?;
                if entry.overlay.is_empty() || entry.record.is_none() {
                    ot.remove(key).map_err(io("modify"))?;
                } else {
                    ot.insert(key, encode(&entry.overlay).as_slice())
                        .map_err(io("modify"))?;
                }
            }
        }
        // Nothing to write: no commit, so no fsync on a quiet pass.
        if changed {
            tx.commit().map_err(io("modify"))?;
        } else {
            tx.abort().map_err(io("modify"))?;
        }
        Ok(out)
    }

    /// Stores an intention (replacing any, keeping its overlay).
    pub fn put_intention(&self, r: &IntentionRecord) -> Result<(), StoreError> {
        self.put(INTENTIONS, r.intention.name.as_str(), r)
    }

    /// The applied record of a module.
    pub fn applied(&self, name: &ModuleName) -> Result<Option<AppliedRecord>, StoreError> {
        self.get(APPLIED, "applied", name.as_str())
    }

    /// Every applied record, by module name.
    pub fn all_applied(&self) -> Result<BTreeMap<String, AppliedRecord>, StoreError> {
        self.all(APPLIED, "applied")
    }

    /// Records what a module's container is (being) created from.
    pub fn put_applied(&self, name: &ModuleName, r: &AppliedRecord) -> Result<(), StoreError> {
        self.put(APPLIED, name.as_str(), r)
    }

    /// Forgets a module's applied and observed records.
    pub fn forget(&self, name: &str) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(io("delete"))?;
        tx.open_table(APPLIED)
            .map_err(io("delete"))?
            .remove(name)
            .map_err(io("delete"))?;
        tx.open_table(OBSERVED)
            .map_err(io("delete"))?
            .remove(name)
            .map_err(io("delete"))?;
        tx.commit().map_err(io("delete"))
    }

    /// Every observed record, by module name.
    pub fn all_observed(&self) -> Result<BTreeMap<String, ObservedRecord>, StoreError> {
        self.all(OBSERVED, "observed")
    }

    /// Records what the engine said of a module's container.
    pub fn put_observed(&self, name: &str, r: &ObservedRecord) -> Result<(), StoreError> {
        self.put(OBSERVED, name, r)
    }

    /// Appends to the event log, dropping the oldest beyond its capacity.
    pub fn append_event(
        &self,
        module: Option<&str>,
        kind: EventKind,
        detail: impl Into<String>,
    ) -> Result<Event, StoreError> {
        let tx = self.db.begin_write().map_err(io("append event"))?;
        let ev;
        {
            let mut t = tx.open_table(EVENTS).map_err(io("append event"))?;
            let last = t
                .last()
                .map_err(io("append event"))?
                .map(|(k, _)| k.value())
                .unwrap_or(0);
            ev = Event {
                seq: last + 1,
                at: now(),
                module: module.map(str::to_string),
                kind,
                detail: detail.into(),
            };
            t.insert(ev.seq, encode(&ev).as_slice())
                .map_err(io("append event"))?;
            while t.len().map_err(io("append event"))? > EVENT_LOG_CAPACITY {
                t.pop_first().map_err(io("append event"))?;
            }
        }
        tx.commit().map_err(io("append event"))?;
        Ok(ev)
    }

    /// Events with a sequence number above `since`, oldest first, at most `limit`.
    pub fn events_since(&self, since: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let tx = self.db.begin_read().map_err(io("read events"))?;
        let t = tx.open_table(EVENTS).map_err(io("read events"))?;
        let mut out = Vec::new();
        for row in t
            .range(since.saturating_add(1)..)
            .map_err(io("read events"))?
            .take(limit)
        {
            let (k, v) = row.map_err(io("read events"))?;
            out.push(decode("events", &k.value().to_string(), v.value())?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intention::{DocFormat, Intention};

    #[test]
    fn records_survive_reopen() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("stead.redb");
        let i = Intention::parse(
            "name = \"m\"\nimage = \"x\"\n[config]\npath = \"/c\"\nformat = \"json\"\ndefaults = { a = { b = 1.5 } }",
            DocFormat::Toml,
            "t",
        )
        .unwrap();
        {
            let s = Store::open(&p).unwrap();
            s.put_intention(&IntentionRecord {
                source: Source::File("/x/m.toml".into()),
                revision: 3,
                intention: i.clone(),
            })
            .unwrap();
            s.append_event(Some("m"), EventKind::Created, "hello")
                .unwrap();
        }
        let s = Store::open(&p).unwrap();
        let all = s.intentions().unwrap();
        let r = &all[&i.name];
        assert_eq!(r.intention, i);
        assert_eq!(r.revision, 3);
        let ev = s.events_since(0, 10).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].detail, "hello");
    }

    #[test]
    fn event_log_is_bounded() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        for n in 0..EVENT_LOG_CAPACITY + 5 {
            s.append_event(None, EventKind::Engine, n.to_string())
                .unwrap();
        }
        let ev = s.events_since(0, 10_000).unwrap();
        assert_eq!(ev.len() as u64, EVENT_LOG_CAPACITY);
        assert_eq!(ev[0].seq, 6);
        assert_eq!(s.events_since(EVENT_LOG_CAPACITY + 3, 10).unwrap().len(), 2);
    }

    #[test]
    fn unknown_record_versions_are_named() {
        let e = decode::<u32>("applied", "m", &[9, 1]).unwrap_err();
        assert!(e.to_string().contains("applied/m"), "{e}");
        assert!(e.to_string().contains("version 9"), "{e}");
    }
}
