//! The store's file: opening it (a newer schema refused before anything
//! is written, an older one migrated), reopening it after an I/O error,
//! the errors of every store operation, and what the file says of itself
//! (its schema version, the agent id).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use redb::{Database, ReadOnlyDatabase, ReadableDatabase, ReadableTable, TableDefinition};

use super::{META, SCHEMA_VERSION, intentions, migrate};

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
    /// The store did not open and its snapshot from before an update of
    /// stead could not be put back.
    #[error(
        "the store at {path} did not open, and its snapshot from before the update could not be put back: {why}"
    )]
    Restore {
        /// The file.
        path: String,
        /// Why.
        why: String,
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
    /// A transaction refused because an earlier one met an I/O error
    /// (redb's "previous I/O error"), with that error: the store is
    /// reopened at its next operation.
    #[error(
        "store {op} failed: an earlier write failed ({first}); the store is reopened at its next operation"
    )]
    Broken {
        /// The operation.
        op: &'static str,
        /// The earlier I/O error.
        first: String,
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

/// A redb error of `op`, as a store error (for a database not yet held by
/// a [`Store`], which notes an I/O error with [`Store::io`]).
pub(super) fn io<E: Into<redb::Error>>(op: &'static str) -> impl FnOnce(E) -> StoreError {
    move |e| StoreError::Io {
        op,
        source: e.into(),
    }
}

/// A record of `table` under `key` that does not read, and why.
pub(super) fn corrupt(table: &'static str, key: &str) -> impl FnOnce(String) -> StoreError {
    move |message| StoreError::Corrupt {
        table,
        key: key.to_string(),
        message,
    }
}

/// The store.
pub struct Store {
    path: PathBuf,
    /// `None` only while it is being reopened.
    db: RwLock<Option<Database>>,
    /// An I/O error was seen: redb refuses every later transaction ("a
    /// previous I/O error occurred"), so the next operation reopens the
    /// file first.
    broken: AtomicBool,
    /// The I/O error that broke it last, said again when a transaction
    /// begun before the reopen is refused for it.
    first_io: std::sync::Mutex<Option<String>>,
    /// Events are not written: the store's filesystem is below its reserve.
    pub(super) events_paused: AtomicBool,
    /// Each stored intention as last decoded.
    pub(super) decoded: intentions::Decoded,
}

/// The database, borrowed for one operation.
pub(super) struct Db<'a>(std::sync::RwLockReadGuard<'a, Option<Database>>);

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
            db: RwLock::new(Some(db)),
            broken: AtomicBool::new(false),
            first_io: std::sync::Mutex::new(None),
            events_paused: AtomicBool::new(false),
            decoded: Default::default(),
        })
    }

    /// The schema of the store file at `path`, read without writing to it
    /// (`None`: no file, an empty one, or a new store).
    pub fn schema_of_file(path: &Path) -> Result<Option<u64>, StoreError> {
        if !std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
            return Ok(None);
        }
        let open_err = |source| StoreError::Open {
            path: path.display().to_string(),
            source,
        };
        let ro = match Database::builder().open_read_only(path) {
            Ok(ro) => ro,
            // Left by a crash or a power cut: a writable open repairs it
            // (its records and schema as they were committed), then it
            // reads as any other.
            Err(redb::DatabaseError::RepairAborted | redb::DatabaseError::Storage(_)) => {
                drop(
                    Database::builder()
                        .set_cache_size(CACHE_BYTES)
                        .create(path)
                        .map_err(open_err)?,
                );
                Database::builder().open_read_only(path).map_err(open_err)?
            }
            Err(e) => return Err(open_err(e)),
        };
        schema_of(&ro)
    }

    /// Copies the store file to `to` (made anew, fsynced) while a write
    /// transaction is held open, so no commit lands mid-copy: the copy is
    /// the last commit, as a crash would leave it (opened, it is repaired).
    /// Returns the bytes copied.
    pub fn copy_to(&self, to: &Path) -> Result<u64, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("copy"))?;
        let copied = std::fs::copy(&self.path, to)
            .and_then(|n| std::fs::File::open(to)?.sync_all().map(|()| n))
            .map_err(|e| StoreError::Io {
                op: "copy",
                source: redb::Error::Io(e),
            });
        tx.abort().map_err(self.io("copy"))?;
        copied
    }

    /// The database for one operation, reopened first when an I/O error
    /// broke it (a full disk that has room again, say).
    pub(super) fn db(&self) -> Result<Db<'_>, StoreError> {
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
                        *self.first_io.lock().unwrap_or_else(|e| e.into_inner()) = None;
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
    /// A redb error of `op`, as a store error (for a database not yet held by
    /// a [`Store`], which notes an I/O error with [`Store::io`]).
    pub(super) fn io<E: Into<redb::Error>>(
        &self,
        op: &'static str,
    ) -> impl FnOnce(E) -> StoreError + '_ {
        move |e| {
            let source = e.into();
            if matches!(source, redb::Error::Io(_) | redb::Error::PreviousIo) {
                self.broken
                    .store(true, std::sync::atomic::Ordering::Release);
            }
            let mut first = self.first_io.lock().unwrap_or_else(|e| e.into_inner());
            match &source {
                redb::Error::Io(io) => *first = Some(io.to_string()),
                redb::Error::PreviousIo => {
                    if let Some(f) = first.clone() {
                        return StoreError::Broken { op, first: f };
                    }
                }
                _ => {}
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

    /// The schema version the store holds.
    pub fn schema_version(&self) -> Result<u64, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let meta = tx.open_table(META).map_err(self.io("read"))?;
        Ok(meta
            .get("schema")
            .map_err(self.io("read"))?
            .map_or(0, |v| v.value()))
    }

    /// Writes one record, replacing any under its key.
    pub(super) fn put(
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
    use crate::store::testing::{intention, put_raw};
    use crate::store::{EventKind, IntentionRecord, Source};

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
                intention: i.clone().into(),
            })
            .unwrap();
            s.append_event(Some("m"), EventKind::Created, "hello")
                .unwrap();
        }
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let all = s.intentions().unwrap();
        let r = &all[&i.name];
        assert_eq!(*r.intention, i);
        assert_eq!(r.revision, 3);
        assert_eq!(r.plane_revision, Some(41));
        let ev = s.events_since(0, 10).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].detail, "hello");
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
