//! The store across an update of stead itself. The running version
//! copies the store, whole and fsynced, to `<store>.before-update` (one
//! kept, its room checked first) before it names any candidate to the
//! launcher ([`take`]); a candidate that would migrate an older store
//! copies it too when it starts (a version before 0.6.0 took none). The
//! version that comes back after a candidate, finding a store it cannot
//! open (damaged, or of a newer schema), sets that file aside as
//! `<store>.from-candidate` and puts the snapshot back ([`open`]). So no
//! record is lost in a fallback but what was written since the switch
//! (kept in the file set aside), and the candidate's failure is visible to
//! the previous version: the launcher's state and the candidate's last
//! words are files of their own, and the update's record was stored
//! before the snapshot. Every step is a whole file renamed into place and
//! the directory fsynced: a power cut anywhere leaves a store that opens.

use std::path::{Path, PathBuf};

use crate::host::launch::Launched;
use crate::model::launch::Slot;
use crate::store::{SCHEMA_VERSION, Store, StoreError};

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

fn err(p: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", p.display())
}

/// Before a switch: the store copied to its snapshot (the one before
/// removed first, the room for it checked), fsynced, renamed into place.
pub fn take(store: &Store, path: &Path) -> Result<String, String> {
    let snap = snapshot_path(path);
    let tmp = with_suffix(&snap, ".tmp");
    for p in [&snap, &tmp] {
        match std::fs::remove_file(p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err(p)(e)),
            _ => {}
        }
    }
    let len = std::fs::metadata(path).map_err(err(path))?.len();
    let dir = path.parent().unwrap_or(Path::new("."));
    let free = crate::host::disk::space(dir).map_err(err(dir))?.free;
    crate::model::agent_update::snapshot_room(len, free)?;
    if let Err(e) = store.copy_to(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("the store's snapshot: {e}"));
    }
    std::fs::rename(&tmp, &snap).map_err(err(&snap))?;
    sync_dir(&snap)?;
    Ok(format!(
        "the store ({len} bytes) copied to {} before the switch",
        snap.display()
    ))
}

/// Before the store is opened: a candidate's snapshot of an older store
/// it is about to migrate. Returns what was done, for the log.
pub fn before_open(store: &Path, launched: Option<&Launched>) -> Result<Option<String>, String> {
    let Some(Slot::Candidate(v)) = launched.map(|l| &l.slot) else {
        return Ok(None);
    };
    match Store::schema_of_file(store).map_err(|e| e.to_string())? {
        Some(s) if s < SCHEMA_VERSION => {
            let snap = snapshot_path(store);
            copy_durably(store, &snap)?;
            Ok(Some(format!(
                "candidate {v}: the store (schema {s}) copied to {} before it is migrated to schema {SCHEMA_VERSION}",
                snap.display()
            )))
        }
        _ => Ok(None),
    }
}

/// Opens the store. A version that is not a candidate, finding a store it
/// cannot open and a snapshot, puts the snapshot back (the store it could
/// not open set aside) and opens that; one that opens the store forgets a
/// snapshot left (a switch cut short, a candidate that failed harmlessly)
/// unless the launcher still has a candidate on trial.
/// Returns the store and what was done, for the log.
pub fn open(
    path: &Path,
    launched: Option<&Launched>,
) -> Result<(Store, Option<String>), StoreError> {
    let Some(l) = launched.filter(|l| !matches!(l.slot, Slot::Candidate(_))) else {
        return Store::open(path).map(|s| (s, None));
    };
    match Store::open(path) {
        Ok(s) => {
            // Kept while the launcher still has a candidate on trial (a
            // start it could not count ran this version instead).
            if l.read_state().is_ok_and(|st| st.candidate.is_none()) {
                forget(path);
            }
            Ok((s, None))
        }
        Err(e) if snapshot_path(path).is_file() => {
            let failed = l.read_state().ok().and_then(|st| st.failed).map_or_else(
                || "a candidate".to_string(),
                |f| format!("candidate {}", f.version),
            );
            let aside = aside_path(path);
            restore(path).map_err(|why| StoreError::Restore {
                path: path.display().to_string(),
                why,
            })?;
            let s = Store::open(path)?;
            Ok((
                s,
                Some(format!(
                    "the store did not open after {failed} ran ({e}): it is set aside as {} and the snapshot taken before the switch is the store again; what was written since the switch is only in the file set aside",
                    aside.display()
                )),
            ))
        }
        Err(e) => Err(e),
    }
}

/// The snapshot put back: the store linked aside (the one set aside before
/// replaced), then the snapshot renamed over it, the directory fsynced. A
/// power cut before the rename leaves the store as it was and the
/// snapshot, to be put back at the next start.
fn restore(path: &Path) -> Result<(), String> {
    let aside = aside_path(path);
    match std::fs::remove_file(&aside) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err(&aside)(e)),
        _ => {}
    }
    if path.exists() {
        std::fs::hard_link(path, &aside).map_err(err(&aside))?;
    }
    let snap = snapshot_path(path);
    std::fs::rename(&snap, path).map_err(err(&snap))?;
    sync_dir(path)
}

/// The snapshot is no longer needed: a confirmed candidate, or a store
/// its version opened.
pub fn forget(store: &Path) {
    let snap = snapshot_path(store);
    for p in [with_suffix(&snap, ".tmp"), snap] {
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!("{}: {e}", p.display())
            }
            _ => {}
        }
    }
}

fn copy_durably(from: &Path, to: &Path) -> Result<(), String> {
    let tmp = with_suffix(to, ".tmp");
    std::fs::copy(from, &tmp).map_err(err(&tmp))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(err(&tmp))?;
    std::fs::rename(&tmp, to).map_err(err(to))?;
    sync_dir(to)
}

fn sync_dir(p: &Path) -> Result<(), String> {
    let dir = p.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(err(dir))
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
    fn the_replaced_version_puts_the_snapshot_back_when_the_store_does_not_open() {
        let d = tempfile::tempdir().unwrap();
        let store = d.path().join("stead.redb");
        let l = launched(
            &d.path().join("agent"),
            Slot::Package,
            "failed 0.7.0 started 3 times and never confirmed\n",
        );
        // What a failed candidate leaves: a newer schema, or garbage over
        // a store of this one.
        let newer = |p: &Path| set_schema(p, SCHEMA_VERSION + 1);
        let garbage = |p: &Path| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.write_all(&[0xa5; 8192]).unwrap();
        };
        type Damage<'a> = (&'a str, &'a dyn Fn(&Path));
        let damages: [Damage; 2] = [("newer schema", &newer), ("garbage", &garbage)];
        for (what, damage) in damages {
            for p in [store.clone(), aside_path(&store)] {
                let _ = std::fs::remove_file(p);
            }
            // The store, then its snapshot taken by the running version
            // before the switch, with a record in it.
            {
                let s = Store::open(&store).unwrap();
                s.append_event(
                    Some("m"),
                    crate::store::EventKind::Created,
                    "before the update",
                )
                .unwrap();
                take(&s, &store).unwrap();
            }
            damage(&store);
            let damaged = std::fs::read(&store).unwrap();
            assert!(Store::open(&store).is_err(), "{what}");
            // A candidate does not put it back: its failure is counted.
            let cand = Launched {
                slot: Slot::Candidate(AgentVersion::parse("0.7.0").unwrap()),
                ..l.clone()
            };
            assert!(open(&store, Some(&cand)).is_err(), "{what}");
            assert!(snapshot_path(&store).exists());
            let (s, said) = open(&store, Some(&l)).unwrap();
            let said = said.unwrap();
            assert!(said.contains("after candidate 0.7.0 ran"), "{what}: {said}");
            assert!(
                s.events_since(0, 10)
                    .unwrap()
                    .iter()
                    .any(|e| e.detail == "before the update"),
                "{what}: the records from before the switch are back"
            );
            assert_eq!(
                std::fs::read(aside_path(&store)).unwrap(),
                damaged,
                "{what}"
            );
            assert!(!snapshot_path(&store).exists(), "{what}");
        }
    }

    #[test]
    fn a_restore_cut_short_is_done_again_and_a_store_that_opens_forgets_the_snapshot() {
        let d = tempfile::tempdir().unwrap();
        let store = d.path().join("stead.redb");
        let l = launched(&d.path().join("agent"), Slot::Package, "");
        {
            let s = Store::open(&store).unwrap();
            take(&s, &store).unwrap();
        }
        std::fs::write(&store, b"not a store").unwrap();
        // The power went after the store was linked aside, before the
        // snapshot was renamed over it: both names are the damaged file.
        std::fs::hard_link(&store, aside_path(&store)).unwrap();
        let (s, _) = open(&store, Some(&l)).unwrap();
        drop(s);
        assert_eq!(std::fs::read(aside_path(&store)).unwrap(), b"not a store");
        // A snapshot left beside a store that opens (a switch cut short)
        // is forgotten: one is kept only across a switch.
        {
            let s = Store::open(&store).unwrap();
            take(&s, &store).unwrap();
        }
        std::fs::write(with_suffix(&snapshot_path(&store), ".tmp"), b"half").unwrap();
        // Not while a candidate is on trial: it may yet run.
        std::fs::write(l.state_path(), "candidate 0.7.0 1\n").unwrap();
        drop(open(&store, Some(&l)).unwrap());
        assert!(snapshot_path(&store).exists());
        std::fs::write(l.state_path(), "failed 0.7.0 x\n").unwrap();
        drop(open(&store, Some(&l)).unwrap());
        assert!(!snapshot_path(&store).exists());
        assert!(!with_suffix(&snapshot_path(&store), ".tmp").exists());
        // Not started by the launcher: nothing is put back.
        {
            let s = Store::open(&store).unwrap();
            take(&s, &store).unwrap();
        }
        std::fs::write(&store, b"not a store").unwrap();
        assert!(open(&store, None).is_err());
        assert!(snapshot_path(&store).exists());
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
        assert!(matches!(
            open(&store, Some(&l)),
            Err(StoreError::NewerSchema { .. })
        ));
        assert_eq!(std::fs::read(&store).unwrap(), bytes);
    }
}
