//! The node's records in one redb file: intentions and their settings
//! overlays, applied specs, observed containers and a bounded event log,
//! keyed by module name. What is on disk is described by the store's own
//! versioned record types ([`records`]), converted to and from the domain
//! types here, and brought up to date on open by [`migrate`]. Every write
//! is its own durable transaction: a kill -9 loses nothing that was
//! reported done.
//!
//! Reload requests and update states ([`reloads`]) and what the node holds
//! of the central plane ([`plane`]) are tables of their own.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use redb::{
    Database, ReadOnlyDatabase, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    TableDefinition,
};
use serde::{Deserialize, Serialize};

use crate::model::intention::Intention;
use crate::model::names::{Digest, InputName, ModuleName, SettingKey};
use crate::model::spec::ContainerSpec;
use crate::model::value::Value;

pub mod guard;
pub mod migrate;
pub mod plane;
pub mod records;
pub mod reloads;

/// The store's schema version: which record version each table holds.
/// Version 1 is 0.1.0's; version 2 adds the plane revision to intentions;
/// version 3 their update order; version 4 reload requests and update
/// states; version 5 the central plane's held document; version 6 the
/// runtime fields of intentions; version 7 their views; version 8 what
/// each reload item was resolved against and the failed auto-update
/// digests.
pub const SCHEMA_VERSION: u64 = 9;
/// How many events the log keeps.
pub const EVENT_LOG_CAPACITY: u64 = 1000;
/// The longest event text kept, in bytes: with [`EVENT_LOG_CAPACITY`], the
/// log holds about a megabyte at most, and so does one `/v1/events` reply.
pub const MAX_EVENT_DETAIL: usize = 1024;

use crate::model::text::clip;

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
    /// The file was written by an agent with a newer schema; nothing was
    /// written to it.
    #[error(
        "the store at {path} has schema version {found}, newer than this agent's {SCHEMA_VERSION}; it was left untouched (run the newer agent, or move the file aside to start over)"
    )]
    NewerSchema {
        /// The file.
        path: String,
        /// The version found.
        found: u64,
    },
    /// The file is there but empty: a store is never empty, so this is
    /// not one (a truncation, a copy gone wrong). It is not taken as new.
    #[error(
        "the store at {path} is an empty file, not a store; it was left as it is. To start over, move it aside: containers are kept (they carry their labels), file intentions are read again, modules stated through the API must be stated again"
    )]
    Empty {
        /// The file.
        path: String,
    },
    /// The store could not be reopened after an I/O error; it is tried
    /// again at the next operation.
    #[error("the store at {path} is closed after an I/O error; reopening it is tried again")]
    Closed {
        /// The file.
        path: String,
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
    pub intention: Intention,
}

impl IntentionRecord {
    /// A record of a local source (a file or the API).
    pub fn new(source: Source, revision: u64, intention: Intention) -> IntentionRecord {
        IntentionRecord {
            source,
            revision,
            plane_revision: None,
            intention,
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

use crate::host::clock::now;

fn corrupt(table: &'static str, key: &str) -> impl FnOnce(String) -> StoreError {
    move |message| StoreError::Corrupt {
        table,
        key: key.to_string(),
        message,
    }
}

fn decode_intention(key: &str, bytes: &[u8]) -> Result<IntentionRecord, StoreError> {
    match bytes.first() {
        // A record the migration to schema 9 could not convert (it did not
        // check then either): read as it was written, unreadable as it was.
        Some(6) => records::decode(6, bytes).and_then(records::from_intention_record_v7),
        _ => records::decode(records::INTENTIONS, bytes).and_then(records::from_intention_record),
    }
    .map_err(corrupt("intentions", key))
}

fn decode_overlay(key: &str, bytes: &[u8]) -> Result<Overlay, StoreError> {
    records::decode(records::OVERLAYS, bytes)
        .and_then(records::from_overlay)
        .map_err(corrupt("overlays", key))
}

fn decode_applied(key: &str, bytes: &[u8]) -> Result<AppliedRecord, StoreError> {
    records::decode(records::APPLIED, bytes)
        .and_then(records::from_applied)
        .map_err(corrupt("applied", key))
}

fn decode_observed(key: &str, bytes: &[u8]) -> Result<ObservedRecord, StoreError> {
    records::decode(records::OBSERVED, bytes)
        .and_then(records::from_observed)
        .map_err(corrupt("observed", key))
}

fn decode_event(key: u64, bytes: &[u8]) -> Result<Event, StoreError> {
    records::decode(records::EVENTS, bytes)
        .map(records::from_event)
        .map_err(corrupt("events", &key.to_string()))
}

/// The store.
pub struct Store {
    path: std::path::PathBuf,
    /// `None` only while it is being reopened.
    db: std::sync::RwLock<Option<Database>>,
    /// An I/O error was seen: redb refuses every later transaction ("a
    /// previous I/O error occurred"), so the next operation reopens the
    /// file first.
    broken: std::sync::atomic::AtomicBool,
    /// Each stored intention as last decoded, with the SHA-256 of the bytes
    /// it was decoded from: a record is parsed once per change, not once
    /// per read.
    decoded: std::sync::Mutex<std::collections::HashMap<String, ([u8; 32], IntentionRecord)>>,
    /// How many intention records were decoded.
    decodes: std::sync::atomic::AtomicU64,
}

/// The database, borrowed for one operation.
struct Db<'a>(std::sync::RwLockReadGuard<'a, Option<Database>>);

impl std::ops::Deref for Db<'_> {
    type Target = Database;
    fn deref(&self) -> &Database {
        self.0.as_ref().expect("the store is open")
    }
}

/// Bytes of redb's own page cache. A device has little memory: pages beyond
/// it are read again through the kernel's page cache (measured at 200
/// modules: 0.7 MiB less resident than with 2 MiB, CPU per idle minute the
/// same within noise).
const CACHE_BYTES: usize = 64 * 1024;

impl Store {
    /// Opens (or creates) the store file and brings an older schema up to
    /// date, in one transaction. A store of a newer schema is refused
    /// before anything is written to it.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.display().to_string(),
            source,
        };
        // redb would take an empty file for a new store.
        if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
            return Err(StoreError::Empty {
                path: path.display().to_string(),
            });
        }
        // Read the schema without opening for writing: a newer agent's
        // store is left byte for byte as it was.
        if std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
            match Database::builder().open_read_only(path) {
                Ok(ro) => {
                    let found = schema_of(&ro)?;
                    drop(ro);
                    if let Some(v) = found.filter(|v| *v > SCHEMA_VERSION) {
                        return Err(StoreError::NewerSchema {
                            path: path.display().to_string(),
                            found: v,
                        });
                    }
                }
                // A store that needs recovery (a crash) is repaired by the
                // writable open below; anything else is refused as is.
                Err(redb::DatabaseError::RepairAborted | redb::DatabaseError::Storage(_)) => {}
                Err(e) => return Err(open_err(e)),
            }
        }
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(open_err)?;
        migrate::bring_up_to_date(&db, path)?;
        Ok(Store {
            path: path.to_path_buf(),
            db: std::sync::RwLock::new(Some(db)),
            broken: std::sync::atomic::AtomicBool::new(false),
            decoded: Default::default(),
            decodes: Default::default(),
        })
    }

    /// A stored intention from its record's bytes: decoded again only when
    /// they differ (by SHA-256) from the last decoded under `key`.
    fn intention(&self, key: &str, bytes: &[u8]) -> Result<IntentionRecord, StoreError> {
        use sha2::Digest as _;
        let sum: [u8; 32] = sha2::Sha256::digest(bytes).into();
        let mut decoded = self.decoded.lock().expect("decoded intentions lock");
        if let Some((s, r)) = decoded.get(key) {
            if *s == sum {
                return Ok(r.clone());
            }
        }
        self.decodes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let r = decode_intention(key, bytes)?;
        decoded.insert(key.to_string(), (sum, r.clone()));
        Ok(r)
    }

    /// How many intention records this store has decoded since it opened.
    pub fn intention_decodes(&self) -> u64 {
        self.decodes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Forgets the decoded intentions of modules no longer stored.
    fn keep_decoded(&self, stored: &BTreeMap<ModuleName, Entry>) {
        self.decoded
            .lock()
            .expect("decoded intentions lock")
            .retain(|k, _| ModuleName::try_from(k.as_str()).is_ok_and(|n| stored.contains_key(&n)));
    }

    /// The database for one operation, reopened first when an I/O error
    /// broke it (a full disk that has room again, say).
    fn db(&self) -> Result<Db<'_>, StoreError> {
        use std::sync::atomic::Ordering;
        if self.broken.load(Ordering::Acquire) {
            let mut w = self.db.write().unwrap_or_else(|e| e.into_inner());
            if self.broken.load(Ordering::Acquire) {
                // The old handle holds the file's lock: closed first.
                *w = None;
                let db = Database::builder()
                    .set_cache_size(CACHE_BYTES)
                    .create(&self.path)
                    .map_err(|source| StoreError::Open {
                        path: self.path.display().to_string(),
                        source,
                    });
                match db {
                    Ok(db) => {
                        *w = Some(db);
                        self.broken.store(false, Ordering::Release);
                        tracing::info!(
                            "store {}: reopened after an I/O error",
                            self.path.display()
                        );
                    }
                    Err(e) => {
                        // Tried again at the next operation.
                        *w = None;
                        return Err(e);
                    }
                }
            }
        }
        let r = self.db.read().unwrap_or_else(|e| e.into_inner());
        if r.is_none() {
            self.broken
                .store(true, std::sync::atomic::Ordering::Release);
            return Err(StoreError::Closed {
                path: self.path.display().to_string(),
            });
        }
        Ok(Db(r))
    }

    /// Maps a redb error, noting an I/O error so the next operation reopens.
    fn io<E: Into<redb::Error>>(&self, op: &'static str) -> impl FnOnce(E) -> StoreError + '_ {
        move |e| {
            let source = e.into();
            if matches!(source, redb::Error::Io(_) | redb::Error::PreviousIo) {
                self.broken
                    .store(true, std::sync::atomic::Ordering::Release);
            }
            StoreError::Io { op, source }
        }
    }

    /// Whether the store works now: a read answers (reopening it first if
    /// an I/O error broke it).
    pub fn check(&self) -> Result<(), StoreError> {
        self.events_since(u64::MAX - 1, 1).map(|_| ())
    }

    /// Runs store work off the async threads: redb's fsyncs and reads block.
    pub async fn blocking<T, F>(self: &Arc<Self>, f: F) -> T
    where
        F: FnOnce(&Store) -> T + Send + 'static,
        T: Send + 'static,
    {
        let store = self.clone();
        crate::host::blocking::run(move || f(&store)).await
    }

    /// This store's agent id: made once, when the store is new, and kept
    /// (an agent is its store).
    pub fn agent_id(&self) -> Result<u64, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("agent id"))?;
        let id = {
            let mut meta = tx.open_table(META).map_err(self.io("agent id"))?;
            let found = meta
                .get("agent")
                .map_err(self.io("agent id"))?
                .map(|v| v.value());
            match found {
                Some(id) => id,
                None => {
                    let id = crate::host::random_u64();
                    meta.insert("agent", id).map_err(self.io("agent id"))?;
                    id
                }
            }
        };
        tx.commit().map_err(self.io("agent id"))?;
        Ok(id)
    }

    /// Whether the store is new and not yet rebuilt from the containers.
    pub fn rebuild_pending(&self) -> Result<bool, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let meta = tx.open_table(META).map_err(self.io("read"))?;
        Ok(meta.get(REBUILD).map_err(self.io("read"))?.is_some())
    }

    /// Takes back what the containers say was stated, in one transaction
    /// that also ends the rebuild: an API module only where no source
    /// states the module now, an overlay only over an intention without
    /// one. Returns the modules taken back.
    pub fn rebuild(&self, found: &[(ModuleName, Restated)]) -> Result<Vec<ModuleName>, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("rebuild"))?;
        let mut taken = Vec::new();
        {
            let mut it = tx.open_table(INTENTIONS).map_err(self.io("rebuild"))?;
            let mut ot = tx.open_table(OVERLAYS).map_err(self.io("rebuild"))?;
            for (name, what) in found {
                let key = name.as_str();
                let stated = it.get(key).map_err(self.io("rebuild"))?.is_some();
                let layered = ot.get(key).map_err(self.io("rebuild"))?.is_some();
                match what {
                    Restated::Api(i) if !stated => {
                        let r = IntentionRecord::new(Source::Api, 1, (**i).clone());
                        let bytes =
                            records::encode(records::INTENTIONS, &records::intention_record(&r));
                        it.insert(key, bytes.as_slice())
                            .map_err(self.io("rebuild"))?;
                    }
                    Restated::Overlay(o) if stated && !layered && !o.is_empty() => {
                        let bytes = records::encode(records::OVERLAYS, &records::overlay(o));
                        ot.insert(key, bytes.as_slice())
                            .map_err(self.io("rebuild"))?;
                    }
                    _ => continue,
                }
                taken.push(name.clone());
            }
            let mut meta = tx.open_table(META).map_err(self.io("rebuild"))?;
            meta.remove(REBUILD).map_err(self.io("rebuild"))?;
        }
        tx.commit().map_err(self.io("rebuild"))?;
        Ok(taken)
    }

    /// The schema version the store holds.
    pub fn schema_version(&self) -> Result<u64, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let meta = tx.open_table(META).map_err(self.io("read"))?;
        Ok(meta
            .get("schema")
            .map_err(self.io("read"))?
            .map_or(0, |v| v.value()))
    }

    /// Every stored intention, by module.
    pub fn intentions(&self) -> Result<BTreeMap<ModuleName, IntentionRecord>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(INTENTIONS).map_err(self.io("read"))?;
        let mut out = BTreeMap::new();
        for row in table.iter().map_err(self.io("read"))? {
            let (k, v) = row.map_err(self.io("read"))?;
            let r = self.intention(k.value(), v.value())?;
            out.insert(r.intention.name.clone(), r);
        }
        Ok(out)
    }

    /// Every module's intention with its overlay, by module.
    pub fn entries(&self) -> Result<BTreeMap<ModuleName, Entry>, StoreError> {
        self.entries_readable().map(|(entries, _)| entries)
    }

    /// Every module's entry that reads, and the modules whose stored
    /// intention does not (with why): one record that no longer checks
    /// (an intention a newer check refuses, a damaged page) holds only its
    /// own module, never the pass of every other.
    pub fn entries_readable(&self) -> Result<Readable, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(INTENTIONS).map_err(self.io("read"))?;
        let overlays = tx.open_table(OVERLAYS).map_err(self.io("read"))?;
        let mut out = BTreeMap::new();
        let mut unreadable = Vec::new();
        for row in table.iter().map_err(self.io("read"))? {
            let (k, v) = row.map_err(self.io("read"))?;
            let record = match self.intention(k.value(), v.value()) {
                Ok(r) => r,
                Err(e) => {
                    if let Ok(name) = ModuleName::try_from(k.value()) {
                        unreadable.push((name, e.to_string()));
                    }
                    continue;
                }
            };
            let overlay = match overlays.get(k.value()).map_err(self.io("read"))? {
                Some(o) => decode_overlay(k.value(), o.value())?,
                None => Overlay::new(),
            };
            out.insert(
                record.intention.name.clone(),
                Entry {
                    record: Some(record),
                    overlay,
                },
            );
        }
        self.keep_decoded(&out);
        Ok((out, unreadable))
    }

    /// At most `limit` entries, by module, after `after` (from the first
    /// when `None`): every entry read a batch at a time, each batch in a
    /// read transaction of its own.
    pub fn entries_after(
        &self,
        after: Option<&ModuleName>,
        limit: usize,
    ) -> Result<Vec<(ModuleName, Entry)>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(INTENTIONS).map_err(self.io("read"))?;
        let overlays = tx.open_table(OVERLAYS).map_err(self.io("read"))?;
        let start = match after {
            Some(n) => std::ops::Bound::Excluded(n.as_str()),
            None => std::ops::Bound::Unbounded,
        };
        let rows = table
            .range::<&str>((start, std::ops::Bound::Unbounded))
            .map_err(self.io("read"))?;
        let mut out = Vec::new();
        for row in rows.take(limit) {
            let (k, v) = row.map_err(self.io("read"))?;
            let record = self.intention(k.value(), v.value())?;
            let overlay = match overlays.get(k.value()).map_err(self.io("read"))? {
                Some(o) => decode_overlay(k.value(), o.value())?,
                None => Overlay::new(),
            };
            out.push((
                record.intention.name.clone(),
                Entry {
                    record: Some(record),
                    overlay,
                },
            ));
        }
        Ok(out)
    }

    /// One module's intention with its overlay, when it has an intention.
    pub fn entry(&self, name: &ModuleName) -> Result<Option<Entry>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(INTENTIONS).map_err(self.io("read"))?;
        let overlays = tx.open_table(OVERLAYS).map_err(self.io("read"))?;
        let Some(v) = table.get(name.as_str()).map_err(self.io("read"))? else {
            return Ok(None);
        };
        let record = self.intention(name.as_str(), v.value())?;
        let overlay = match overlays.get(name.as_str()).map_err(self.io("read"))? {
            Some(o) => decode_overlay(name.as_str(), o.value())?,
            None => Overlay::new(),
        };
        Ok(Some(Entry {
            record: Some(record),
            overlay,
        }))
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
        let tx = self.db()?.begin_write().map_err(self.io("modify"))?;
        let out;
        let mut changed = false;
        {
            let mut it = tx.open_table(INTENTIONS).map_err(self.io("modify"))?;
            let mut ot = tx.open_table(OVERLAYS).map_err(self.io("modify"))?;
            let key = name.as_str();
            let record = match it.get(key).map_err(self.io("modify"))? {
                Some(v) => Some(self.intention(key, v.value())?),
                None => None,
            };
            let overlay = match ot.get(key).map_err(self.io("modify"))? {
                Some(v) => decode_overlay(key, v.value())?,
                None => Overlay::new(),
            };
            let before = Entry { record, overlay };
            let mut entry = before.clone();
            out = f(&mut entry);
            if out.is_ok() && entry != before {
                changed = true;
                match &entry.record {
                    Some(r) => {
                        let bytes =
                            records::encode(records::INTENTIONS, &records::intention_record(r));
                        it.insert(key, bytes.as_slice()).map(|_| ())
                    }
                    None => it.remove(key).map(|_| ()),
                }
                .map_err(self.io("modify"))?;
                if entry.overlay.is_empty() || entry.record.is_none() {
                    ot.remove(key).map_err(self.io("modify"))?;
                } else {
                    let bytes =
                        records::encode(records::OVERLAYS, &records::overlay(&entry.overlay));
                    ot.insert(key, bytes.as_slice())
                        .map_err(self.io("modify"))?;
                }
            }
        }
        // Nothing to write: no commit, so no fsync on a quiet pass.
        if changed {
            tx.commit().map_err(self.io("modify"))?;
        } else {
            tx.abort().map_err(self.io("modify"))?;
        }
        Ok(out)
    }

    /// Stores an intention (replacing any, keeping its overlay).
    pub fn put_intention(&self, r: &IntentionRecord) -> Result<(), StoreError> {
        let bytes = records::encode(records::INTENTIONS, &records::intention_record(r));
        self.put(INTENTIONS, r.intention.name.as_str(), &bytes)
    }

    fn put(
        &self,
        def: TableDefinition<&str, &[u8]>,
        key: &str,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("write"))?;
        tx.open_table(def)
            .map_err(self.io("write"))?
            .insert(key, bytes)
            .map_err(self.io("write"))?;
        tx.commit().map_err(self.io("write"))
    }

    /// Every applied record, by module name.
    pub fn all_applied(&self) -> Result<BTreeMap<String, AppliedRecord>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(APPLIED).map_err(self.io("read"))?;
        let mut out = BTreeMap::new();
        for row in table.iter().map_err(self.io("read"))? {
            let (k, v) = row.map_err(self.io("read"))?;
            out.insert(k.value().to_string(), decode_applied(k.value(), v.value())?);
        }
        Ok(out)
    }

    /// Records what a module's container is (being) created from.
    pub fn put_applied(&self, name: &ModuleName, r: &AppliedRecord) -> Result<(), StoreError> {
        let bytes = records::encode(records::APPLIED, &records::applied(r));
        self.put(APPLIED, name.as_str(), &bytes)
    }

    /// Forgets a module's applied and observed records.
    pub fn forget(&self, name: &str) -> Result<(), StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("delete"))?;
        tx.open_table(APPLIED)
            .map_err(self.io("delete"))?
            .remove(name)
            .map_err(self.io("delete"))?;
        tx.open_table(OBSERVED)
            .map_err(self.io("delete"))?
            .remove(name)
            .map_err(self.io("delete"))?;
        tx.commit().map_err(self.io("delete"))
    }

    /// Every observed record, by module name.
    pub fn all_observed(&self) -> Result<BTreeMap<String, ObservedRecord>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(OBSERVED).map_err(self.io("read"))?;
        let mut out = BTreeMap::new();
        for row in table.iter().map_err(self.io("read"))? {
            let (k, v) = row.map_err(self.io("read"))?;
            out.insert(
                k.value().to_string(),
                decode_observed(k.value(), v.value())?,
            );
        }
        Ok(out)
    }

    /// Writes the observations that changed, in one transaction.
    pub fn put_observed(&self, changed: &[(String, ObservedRecord)]) -> Result<(), StoreError> {
        if changed.is_empty() {
            return Ok(());
        }
        let tx = self.db()?.begin_write().map_err(self.io("write"))?;
        {
            let mut t = tx.open_table(OBSERVED).map_err(self.io("write"))?;
            for (name, r) in changed {
                let bytes = records::encode(records::OBSERVED, &records::observed(r));
                t.insert(name.as_str(), bytes.as_slice())
                    .map_err(self.io("write"))?;
            }
        }
        tx.commit().map_err(self.io("write"))
    }

    /// Appends to the event log, dropping the oldest beyond its capacity.
    pub fn append_event(
        &self,
        module: Option<&str>,
        kind: EventKind,
        detail: impl Into<String>,
    ) -> Result<Event, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("append event"))?;
        let ev;
        {
            let mut t = tx.open_table(EVENTS).map_err(self.io("append event"))?;
            let last = t
                .last()
                .map_err(self.io("append event"))?
                .map(|(k, _)| k.value())
                .unwrap_or(0);
            let detail = detail.into();
            ev = Event {
                seq: last + 1,
                at: now(),
                module: module.map(|m| clip(m, 64).into_owned()),
                kind,
                detail: clip(&detail, MAX_EVENT_DETAIL).into_owned(),
            };
            let bytes = records::encode(records::EVENTS, &records::event(&ev));
            t.insert(ev.seq, bytes.as_slice())
                .map_err(self.io("append event"))?;
            while t.len().map_err(self.io("append event"))? > EVENT_LOG_CAPACITY {
                t.pop_first().map_err(self.io("append event"))?;
            }
        }
        tx.commit().map_err(self.io("append event"))?;
        Ok(ev)
    }

    /// The container a module's live files were last delivered to, and
    /// their digest.
    pub fn live(&self, name: &ModuleName) -> Result<Option<(String, Digest)>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read live"))?;
        let t = tx.open_table(LIVE).map_err(self.io("read live"))?;
        let Some(v) = t.get(name.as_str()).map_err(self.io("read live"))? else {
            return Ok(None);
        };
        let r: records::v6::LiveRecord =
            records::decode(records::LIVE, v.value()).map_err(corrupt("live", name.as_str()))?;
        let d = Digest::try_from(r.digest.as_str())
            .map_err(|e| corrupt("live", name.as_str())(e.to_string()))?;
        Ok(Some((r.container, d)))
    }

    /// Records that a module's container holds these live files.
    pub fn put_live(
        &self,
        name: &ModuleName,
        container: &str,
        digest: &Digest,
    ) -> Result<(), StoreError> {
        let bytes = records::encode(
            records::LIVE,
            &records::v6::LiveRecord {
                container: container.to_string(),
                digest: digest.to_string(),
            },
        );
        self.put(LIVE, name.as_str(), &bytes)
    }

    /// Events with a sequence number above `since`, oldest first, at most `limit`.
    pub fn events_since(&self, since: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read events"))?;
        let t = tx.open_table(EVENTS).map_err(self.io("read events"))?;
        let mut out = Vec::new();
        for row in t
            .range(since.saturating_add(1)..)
            .map_err(self.io("read events"))?
            .take(limit)
        {
            let (k, v) = row.map_err(self.io("read events"))?;
            out.push(decode_event(k.value(), v.value())?);
        }
        Ok(out)
    }
}

/// The schema a store holds, read without writing (`None`: a new file).
fn schema_of(db: &ReadOnlyDatabase) -> Result<Option<u64>, StoreError> {
    let tx = db.begin_read().map_err(io("open"))?;
    let meta = match tx.open_table(META) {
        Ok(m) => m,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(io("open")(e)),
    };
    Ok(meta.get("schema").map_err(io("open"))?.map(|v| v.value()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intention::DocFormat;

    fn intention() -> Intention {
        Intention::parse(
            "name = \"m\"\nimage = \"x\"\n[config]\npath = \"/c\"\nformat = \"json\"\ndefaults = { a = { b = 1.5 } }",
            DocFormat::Toml,
            "t",
        )
        .unwrap()
    }

    #[test]
    fn records_survive_reopen() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("stead.redb");
        let i = intention();
        {
            let s = Store::open(&p).unwrap();
            s.put_intention(&IntentionRecord {
                source: Source::Plane,
                revision: 3,
                plane_revision: Some(41),
                intention: i.clone(),
            })
            .unwrap();
            s.append_event(Some("m"), EventKind::Created, "hello")
                .unwrap();
        }
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let all = s.intentions().unwrap();
        let r = &all[&i.name];
        assert_eq!(r.intention, i);
        assert_eq!(r.revision, 3);
        assert_eq!(r.plane_revision, Some(41));
        let ev = s.events_since(0, 10).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].detail, "hello");
    }

    #[test]
    fn entries_read_in_batches_and_one_by_name_are_the_entries() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        for name in ["a", "b", "c", "d", "e"] {
            let mut i = intention();
            i.name = ModuleName::try_from(name).unwrap();
            s.put_intention(&IntentionRecord::new(Source::Api, 1, i))
                .unwrap();
        }
        let all = s.entries().unwrap();
        let mut batched = Vec::new();
        let mut after: Option<ModuleName> = None;
        loop {
            let batch = s.entries_after(after.as_ref(), 2).unwrap();
            let Some((last, _)) = batch.last() else { break };
            assert!(batch.len() <= 2);
            after = Some(last.clone());
            batched.extend(batch);
        }
        assert_eq!(batched, all.clone().into_iter().collect::<Vec<_>>());
        let b = ModuleName::try_from("b").unwrap();
        assert_eq!(s.entry(&b).unwrap().as_ref(), all.get(&b));
        assert_eq!(s.entry(&ModuleName::try_from("z").unwrap()).unwrap(), None);
    }

    #[test]
    fn an_event_is_bounded_in_bytes() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        let ev = s
            .append_event(None, EventKind::Error, "é".repeat(1_000_000))
            .unwrap();
        assert!(ev.detail.len() <= MAX_EVENT_DETAIL, "{}", ev.detail.len());
        assert!(ev.detail.ends_with("bytes cut)"), "{}", ev.detail);
        assert_eq!(s.events_since(0, 10).unwrap()[0], ev);
        assert_eq!(clip("short", 10), "short");
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

    /// Writes a raw record into a table, as another version of stead would.
    fn put_raw(p: &Path, key: &str, bytes: &[u8], schema: Option<u64>) {
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

    #[test]
    fn a_record_of_another_version_is_named_not_guessed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        drop(Store::open(&p).unwrap());
        put_raw(&p, "m", &[9, 1], None);
        let e = Store::open(&p).unwrap().intentions().unwrap_err();
        assert!(e.to_string().contains("intentions/m"), "{e}");
        assert!(
            e.to_string().contains("record version 9, expected 7"),
            "{e}"
        );
    }

    #[test]
    fn a_version_1_store_is_migrated_on_open_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let i = intention();
        let old = records::v1::IntentionRecord {
            source: records::v1::Source::Api,
            revision: 7,
            intention: records::intention_record_v4(&IntentionRecord::new(
                Source::Api,
                7,
                i.clone(),
            ))
            .intention
            .base
            .base,
        };
        put_raw(&p, "m", &records::encode(1, &old), Some(1));
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let r = &s.intentions().unwrap()[&i.name];
        assert_eq!(
            (r.revision, r.plane_revision, &r.source),
            (7, None, &Source::Api)
        );
        assert_eq!(r.intention, i);
        drop(s);
        // Opened again, it is read as it is.
        let s = Store::open(&p).unwrap();
        assert_eq!(s.intentions().unwrap()[&i.name].revision, 7);
    }

    #[test]
    fn a_version_2_store_is_migrated_keeping_the_plane_revision() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let i = intention();
        let v4 = records::intention_record_v4(&IntentionRecord {
            source: Source::Plane,
            revision: 4,
            plane_revision: Some(99),
            intention: i.clone(),
        });
        let v2 = records::v2::IntentionRecord {
            source: v4.source,
            revision: v4.revision,
            intention: v4.intention.base.base,
            plane_revision: v4.plane_revision,
        };
        put_raw(&p, "m", &records::encode(2, &v2), Some(2));
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let r = &s.intentions().unwrap()[&i.name];
        assert_eq!((r.revision, r.plane_revision), (4, Some(99)));
        assert_eq!(r.intention, i, "stop-first, as every recreate was");
    }

    #[test]
    fn a_version_3_store_is_migrated_without_an_update_section() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let mut i = intention();
        i.update_order = crate::model::intention::UpdateOrder::StartFirst;
        let v3 = records::v3::IntentionRecord {
            source: records::v1::Source::Api,
            revision: 2,
            intention: records::intention_record_v4(&IntentionRecord::new(
                Source::Api,
                2,
                i.clone(),
            ))
            .intention
            .base,
            plane_revision: None,
        };
        put_raw(&p, "m", &records::encode(3, &v3), Some(3));
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let r = &s.intentions().unwrap()[&i.name];
        assert_eq!(r.intention, i);
        assert_eq!(r.intention.update, None);
    }

    #[test]
    fn the_runtime_fields_are_kept_and_a_version_5_store_reads_without_them() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let s = Store::open(&p).unwrap();
        let i = Intention::parse(
            "name = \"m\"\nimage = \"busybox:1\"\nuser = \"1000\"\nmem_limit = \"64m\"\ndevices = [\"/dev/ttyUSB0\"]\n[healthcheck]\ntest = \"true\"\n",
            crate::model::intention::DocFormat::Toml,
            "t",
        )
        .unwrap();
        assert_ne!(i.runtime, Default::default());
        assert!(i.config.is_none());
        s.put_intention(&IntentionRecord::new(Source::Api, 1, i.clone()))
            .unwrap();
        assert_eq!(s.intentions().unwrap()[&i.name].intention, i);
        let live = Intention::parse(
            "name = \"l\"\nimage = \"busybox:1\"\n[config]\npath = \"/etc/l/c.json\"\nformat = \"json\"\nreload = \"signal:SIGHUP\"\n",
            crate::model::intention::DocFormat::Toml,
            "t",
        )
        .unwrap();
        s.put_intention(&IntentionRecord::new(Source::Api, 1, live.clone()))
            .unwrap();
        assert_eq!(s.intentions().unwrap()[&live.name].intention, live);
        drop(s);
        // A store written before the runtime fields: schema 5, record
        // version 4; migrated, every field unset.
        let p5 = d.path().join("s5.redb");
        let mut plain = intention();
        plain.runtime = Default::default();
        let v4 = records::intention_record_v4(&IntentionRecord::new(Source::Api, 3, plain.clone()));
        put_raw(&p5, "m", &records::encode(4, &v4), Some(5));
        let s = Store::open(&p5).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let r = &s.intentions().unwrap()[&plain.name];
        assert_eq!((r.revision, &r.intention), (3, &plain));
    }

    #[test]
    fn a_mount_that_is_not_an_input_is_kept_and_a_version_6_store_reads_every_one_as_input() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let s = Store::open(&p).unwrap();
        let i = Intention::parse(
            "name = \"m\"\nimage = \"busybox:1\"\nuser = \"65534\"\n[[mounts]]\nsource = \"/srv/a\"\ntarget = \"/a\"\nread_only = true\n[[mounts]]\nsource = \"/\"\ntarget = \"/host\"\nread_only = true\ninput = false\n[[mounts]]\nsource = \"/srv/b\"\ntarget = \"/b\"\n",
            crate::model::intention::DocFormat::Toml,
            "t",
        )
        .unwrap();
        use crate::model::intention::Access;
        let modes: Vec<Access> = i.mounts.iter().map(|m| m.access).collect();
        assert_eq!(
            modes,
            [Access::ReadOnly, Access::ReadOnlyView, Access::ReadWrite]
        );
        s.put_intention(&IntentionRecord::new(Source::Api, 1, i.clone()))
            .unwrap();
        assert_eq!(s.intentions().unwrap()[&i.name].intention, i);
        drop(s);
        // A store written before: schema 6, record version 5; migrated,
        // every read-only mount an input as it was.
        let p6 = d.path().join("s6.redb");
        let mut was = i.clone();
        was.mounts[1].source = crate::model::names::HostPath::try_from("/proc").unwrap();
        was.mounts[1].access = Access::ReadOnly;
        let v6 = records::intention_record_v6(&IntentionRecord::new(Source::Api, 4, was.clone()));
        put_raw(&p6, "m", &records::encode(5, &v6), Some(6));
        let s = Store::open(&p6).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let r = &s.intentions().unwrap()[&was.name];
        assert_eq!((r.revision, &r.intention), (4, &was));
        // A record naming a read-write mount as a view does not check.
        let bad = records::v7::IntentionRecord {
            base: v6,
            views: vec![2],
        };
        drop(s);
        put_raw(&p6, "m", &records::encode(6, &bad), None);
        let e = Store::open(&p6).unwrap().intentions().unwrap_err();
        assert!(e.to_string().contains("mounts[2]"), "{e}");
    }

    #[test]
    fn a_schema_8_store_keeps_each_intention_as_its_document_and_one_that_does_not_read_as_it_was()
    {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s8.redb");
        let i = Intention::parse(
            "name = \"m\"\nimage = \"127.0.0.1:5000/acme/m:1.0.0\"\nuser = \"65534\"\nshm_size = \"64m\"\n[config]\npath = \"/etc/m/c.json\"\nformat = \"json\"\nreload = \"signal:SIGHUP\"\ndefaults = { a = 1 }\n[[mounts]]\nsource = \"/\"\ntarget = \"/host\"\nread_only = true\ninput = false\n[update]\nlane = \"auto\"\nrange = \"^1\"\n",
            crate::model::intention::DocFormat::Toml,
            "t",
        )
        .unwrap();
        let mut r = IntentionRecord::new(Source::Plane, 5, i.clone());
        r.plane_revision = Some(42);
        put_raw(
            &p,
            "m",
            &records::encode(6, &records::intention_record_v7(&r)),
            Some(8),
        );
        // A record of version 6 that did not check at schema 8 either.
        let mut bad =
            records::intention_record_v7(&IntentionRecord::new(Source::Api, 1, i.clone()));
        bad.views = vec![7];
        put_raw(&p, "n", &records::encode(6, &bad), None);
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let (entries, unreadable) = s.entries_readable().unwrap();
        assert_eq!(entries[&i.name].record.as_ref(), Some(&r));
        assert_eq!(unreadable.len(), 1);
        assert!(unreadable[0].1.contains("mounts[7]"), "{unreadable:?}");
        drop(s);
        // On disk: the document of version 7, and the other as it was.
        let db = redb::Database::open(&p).unwrap();
        let tx = db.begin_read().unwrap();
        let t = tx.open_table(INTENTIONS).unwrap();
        assert_eq!(t.get("m").unwrap().unwrap().value()[0], records::INTENTIONS);
        assert_eq!(
            t.get("n").unwrap().unwrap().value(),
            records::encode(6, &bad)
        );
    }

    #[test]
    fn a_stored_intention_is_decoded_once_per_change() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        let r = IntentionRecord::new(Source::Api, 1, intention());
        s.put_intention(&r).unwrap();
        let before = s.intention_decodes();
        for _ in 0..3 {
            assert_eq!(
                s.entries().unwrap()[&r.intention.name].record.as_ref(),
                Some(&r)
            );
        }
        assert_eq!(s.intention_decodes() - before, 1);
        let mut changed = r.clone();
        changed.revision = 2;
        changed.intention.image = "busybox:2".into();
        s.put_intention(&changed).unwrap();
        for _ in 0..3 {
            let e = s.entry(&r.intention.name).unwrap().unwrap();
            assert_eq!(e.record.as_ref(), Some(&changed));
        }
        assert_eq!(s.intention_decodes() - before, 2);
    }

    #[test]
    fn an_update_section_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        let i = Intention::parse(
            "name = \"m\"\nimage = \"127.0.0.1:5000/acme/sensor:1.4.2\"\n[update]\nlane = \"auto\"\nrange = \"^1.4\"\ninterval = \"90m\"\nhealth_window = \"30s\"\n",
            crate::model::intention::DocFormat::Toml,
            "t",
        )
        .unwrap();
        s.put_intention(&IntentionRecord::new(Source::Api, 1, i.clone()))
            .unwrap();
        let back = &s.intentions().unwrap()[&i.name].intention;
        assert_eq!(back, &i);
        let u = back.update.as_ref().unwrap();
        assert_eq!(
            (
                u.lane.as_str(),
                u.range.as_str(),
                u.interval.as_secs(),
                u.health_window.as_secs()
            ),
            ("auto", "^1.4", 5400, 30)
        );
    }

    #[test]
    fn a_newer_store_is_refused_and_left_byte_for_byte() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        put_raw(&p, "m", &[3, 0], Some(SCHEMA_VERSION + 1));
        let before = std::fs::read(&p).unwrap();
        let e = Store::open(&p).err().expect("refused");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("schema version {}", SCHEMA_VERSION + 1))
                && msg.contains(&format!("this agent's {SCHEMA_VERSION}")),
            "{msg}"
        );
        assert!(std::fs::read(&p).unwrap() == before, "nothing was written");
    }
}
