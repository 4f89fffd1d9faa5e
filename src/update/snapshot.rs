//! The store across an update of stead itself. A candidate that would
//! migrate the store to its newer schema first copies the file, whole and
//! fsynced, to `<store>.before-update` (one kept). The version it replaced,
//! started again because the candidate failed, finds a store of a schema
//! it cannot read: it sets that file aside as `<store>.from-candidate` and
//! puts the snapshot back. So no record is lost in a fallback but what the
//! candidate wrote (kept in the file set aside), and the candidate's
//! failure is visible to the previous version: the launcher's state and
//! the candidate's last words are files of their own, and the update's
//! record was stored before the switch, in the snapshot too.

use std::path::{Path, PathBuf};

use crate::host::launch::Launched;
use crate::model::launch::Slot;
use crate::store::{SCHEMA_VERSION, Store};

/// Where the snapshot is.
pub fn snapshot_path(store: &Path) -> PathBuf {
    with_suffix(store, ".before-update")
}

/// Where a failed candidate's store is set aside.
pub fn aside_path(store: &Path) -> PathBuf {
    with_suffix(store, ".from-candidate")
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Before the store is opened: a candidate's snapshot, or the previous
/// version's return to it. Returns what was done, for the log.
pub fn before_open(store: &Path, launched: Option<&Launched>) -> Result<Option<String>, String> {
    let Some(l) = launched else { return Ok(None) };
    let schema = Store::schema_of_file(store).map_err(|e| e.to_string())?;
    let snap = snapshot_path(store);
    match (&l.slot, schema) {
        (Slot::Candidate(v), Some(s)) if s < SCHEMA_VERSION => {
            copy_durably(store, &snap)?;
            Ok(Some(format!(
                "candidate {v}: the store (schema {s}) copied to {} before it is migrated to schema {SCHEMA_VERSION}",
                snap.display()
            )))
        }
        (Slot::Current(_) | Slot::Package, Some(s)) if s > SCHEMA_VERSION => {
            let Some(t) = Store::schema_of_file(&snap)
                .ok()
                .flatten()
                .filter(|t| *t <= SCHEMA_VERSION)
            else {
                return Ok(None);
            };
            let failed = l.read_state().ok().and_then(|st| st.failed).map_or_else(
                || "a candidate".to_string(),
                |f| format!("candidate {}", f.version),
            );
            let aside = aside_path(store);
            std::fs::rename(store, &aside).map_err(|e| format!("{}: {e}", store.display()))?;
            std::fs::rename(&snap, store).map_err(|e| format!("{}: {e}", snap.display()))?;
            sync_dir(store)?;
            Ok(Some(format!(
                "the store {failed} migrated to schema {s} is set aside as {}; its snapshot from before (schema {t}) is the store again: what {failed} wrote is only in the file set aside",
                aside.display()
            )))
        }
        _ => Ok(None),
    }
}

/// A confirmed candidate no longer needs the snapshot.
pub fn forget(store: &Path) {
    let snap = snapshot_path(store);
    if snap.exists() {
        if let Err(e) = std::fs::remove_file(&snap) {
            tracing::warn!("{}: {e}", snap.display());
        }
    }
}

fn copy_durably(from: &Path, to: &Path) -> Result<(), String> {
    let tmp = with_suffix(to, ".tmp");
    let err = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    std::fs::copy(from, &tmp).map_err(|e| err(&tmp, e))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| err(&tmp, e))?;
    std::fs::rename(&tmp, to).map_err(|e| err(to, e))?;
    sync_dir(to)
}

fn sync_dir(p: &Path) -> Result<(), String> {
    let dir = p.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::launch::AgentVersion;

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-0.5.0.redb")
    }

    fn launched(dir: &Path, slot: Slot, state: &str) -> Launched {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("launch"), state).unwrap();
        Launched {
            dir: dir.to_path_buf(),
            slot,
            launcher: None,
        }
    }

    fn set_schema(path: &Path, v: u64) {
        let db = redb::Database::create(path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(crate::store::META)
            .unwrap()
            .insert("schema", v)
            .unwrap();
        tx.commit().unwrap();
    }

    #[test]
    fn a_candidate_snapshots_an_older_store_before_migrating_it() {
        let d = tempfile::tempdir().unwrap();
        let store = d.path().join("stead.redb");
        std::fs::copy(fixture(), &store).unwrap();
        let before = std::fs::read(&store).unwrap();
        let old = Store::schema_of_file(&store).unwrap().unwrap();
        assert!(old < SCHEMA_VERSION);
        let v = AgentVersion::parse("0.7.0").unwrap();
        let l = launched(
            &d.path().join("agent"),
            Slot::Candidate(v),
            "current 0.5.0\ncandidate 0.7.0 1\n",
        );
        let said = before_open(&store, Some(&l)).unwrap().unwrap();
        assert!(said.contains(&format!("schema {old}")), "{said}");
        assert_eq!(std::fs::read(snapshot_path(&store)).unwrap(), before);
        drop(Store::open(&store).unwrap());
        assert_eq!(Store::schema_of_file(&store).unwrap(), Some(SCHEMA_VERSION));
        assert_eq!(
            Store::schema_of_file(&snapshot_path(&store)).unwrap(),
            Some(old)
        );
        // A store of its own schema: nothing to keep.
        std::fs::remove_file(snapshot_path(&store)).unwrap();
        assert_eq!(before_open(&store, Some(&l)).unwrap(), None);
        assert!(!snapshot_path(&store).exists());
        // Not started by the launcher, or as the current version: nothing.
        std::fs::copy(fixture(), &store).unwrap();
        assert_eq!(before_open(&store, None).unwrap(), None);
        let cur = launched(&d.path().join("agent"), Slot::Package, "");
        assert_eq!(before_open(&store, Some(&cur)).unwrap(), None);
    }

    #[test]
    fn the_replaced_version_puts_the_snapshot_back_when_the_candidate_failed() {
        let d = tempfile::tempdir().unwrap();
        let store = d.path().join("stead.redb");
        // The snapshot: a store of this schema with a record in it.
        {
            let s = Store::open(&snapshot_path(&store)).unwrap();
            s.append_event(
                Some("m"),
                crate::store::EventKind::Created,
                "before the update",
            )
            .unwrap();
        }
        // What the failed candidate left: a newer schema.
        std::fs::copy(snapshot_path(&store), &store).unwrap();
        set_schema(&store, SCHEMA_VERSION + 1);
        assert!(matches!(
            Store::open(&store),
            Err(crate::store::StoreError::NewerSchema { .. })
        ));
        let l = launched(
            &d.path().join("agent"),
            Slot::Package,
            "failed 0.7.0 started 3 times and never confirmed\n",
        );
        let said = before_open(&store, Some(&l)).unwrap().unwrap();
        assert!(said.contains("candidate 0.7.0 migrated"), "{said}");
        let s = Store::open(&store).unwrap();
        assert!(
            s.events_since(0, 10)
                .unwrap()
                .iter()
                .any(|e| e.detail == "before the update"),
            "the records from before the switch are back"
        );
        assert_eq!(
            Store::schema_of_file(&aside_path(&store)).unwrap(),
            Some(SCHEMA_VERSION + 1)
        );
        assert!(!snapshot_path(&store).exists());
    }

    #[test]
    fn a_store_left_by_a_crash_is_repaired_and_read_not_refused() {
        let d = tempfile::tempdir().unwrap();
        let live = d.path().join("live.redb");
        let s = Store::open(&live).unwrap();
        s.append_event(None, crate::store::EventKind::Created, "x")
            .unwrap();
        // The file as a crash leaves it: copied while still open.
        let store = d.path().join("stead.redb");
        std::fs::copy(&live, &store).unwrap();
        drop(s);
        assert!(matches!(
            redb::Database::builder().open_read_only(&store),
            Err(redb::DatabaseError::RepairAborted)
        ));
        assert_eq!(Store::schema_of_file(&store).unwrap(), Some(SCHEMA_VERSION));
        // A candidate's start after such a crash goes on.
        let v = AgentVersion::parse("0.7.0").unwrap();
        let l = launched(
            &d.path().join("agent"),
            Slot::Candidate(v),
            "candidate 0.7.0 2\n",
        );
        assert_eq!(before_open(&store, Some(&l)).unwrap(), None);
    }

    #[test]
    fn without_a_snapshot_it_can_read_a_newer_store_is_left_as_it_is() {
        let d = tempfile::tempdir().unwrap();
        let store = d.path().join("stead.redb");
        drop(Store::open(&store).unwrap());
        set_schema(&store, SCHEMA_VERSION + 1);
        let bytes = std::fs::read(&store).unwrap();
        let l = launched(&d.path().join("agent"), Slot::Package, "failed 0.7.0 x\n");
        assert_eq!(before_open(&store, Some(&l)).unwrap(), None);
        assert_eq!(std::fs::read(&store).unwrap(), bytes);
    }
}
