//! The update locks modules hold (`locks` table, one record per module
//! that holds one: a version byte and the lock's `key=value` lines, see
//! `model::lock`). Added without a schema change: an agent that does not
//! know the table never opens it, and one whose records it cannot read
//! treats them as not held (a lock stands for one life of a container, so
//! an agent run before this one's holds none that matter).

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use crate::model::lock::Lock;
use crate::model::names::ModuleName;
use crate::store::{EventKind, Store, StoreError};

pub(crate) const LOCKS: TableDefinition<&str, &[u8]> = TableDefinition::new("locks");

/// The record's version.
const VERSION: u8 = 1;

/// A change to the locks held, or what the event log says of one.
#[derive(Clone, Debug)]
pub enum LockChange {
    /// Keeps a lock (by its key, replacing one of the same key).
    Keep(Lock),
    /// Releases the lock of this key.
    Release(String),
    /// Says this of the module in the event log.
    Say(ModuleName, String),
}

impl Store {
    /// Makes the changes of one pass to the locks, in order: each lock's
    /// own in one transaction, each event in the log's.
    pub fn change_locks(&self, changes: Vec<LockChange>) -> Result<(), StoreError> {
        for c in changes {
            match c {
                LockChange::Keep(l) => self.keep_lock(&l)?,
                LockChange::Release(key) => {
                    self.release_lock(&key)?;
                }
                LockChange::Say(m, said) => {
                    self.append_event(Some(m.as_str()), EventKind::Intention, said)?;
                }
            }
        }
        Ok(())
    }

    /// Every lock held, by module (a record that does not read is said and
    /// skipped).
    pub fn locks(&self) -> Result<Vec<Lock>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read locks"))?;
        let t = match tx.open_table(LOCKS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(self.io("read locks")(e)),
        };
        let mut out = Vec::new();
        for row in t.iter().map_err(self.io("read locks"))? {
            let (k, v) = row.map_err(self.io("read locks"))?;
            let lock = match v.value().split_first() {
                Some((&VERSION, text)) => Lock::from_text(&String::from_utf8_lossy(text)),
                _ => None,
            };
            match lock {
                Some(l) => out.push(l),
                None => tracing::warn!(
                    module = k.value(),
                    "store: an update lock that does not read is not held"
                ),
            }
        }
        Ok(out)
    }

    /// Keeps a lock (its module's one, replaced), in one transaction.
    pub fn keep_lock(&self, lock: &Lock) -> Result<(), StoreError> {
        let mut bytes = vec![VERSION];
        bytes.extend(lock.to_text().into_bytes());
        let tx = self.db()?.begin_write().map_err(self.io("lock"))?;
        {
            let mut t = tx.open_table(LOCKS).map_err(self.io("lock"))?;
            t.insert(lock.key().as_str(), bytes.as_slice())
                .map_err(self.io("lock"))?;
        }
        tx.commit().map_err(self.io("lock"))
    }

    /// Releases the lock of key `key` ([`Lock::key`]: the module's name
    /// for its lock through the API), in one transaction; says whether it
    /// was held.
    pub fn release_lock(&self, key: &str) -> Result<bool, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("release lock"))?;
        let held = {
            let mut t = tx.open_table(LOCKS).map_err(self.io("release lock"))?;
            t.remove(key).map_err(self.io("release lock"))?.is_some()
        };
        tx.commit().map_err(self.io("release lock"))?;
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::lock::Scope;

    #[test]
    fn a_lock_is_kept_across_a_reopen_and_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stead.redb");
        let lock = Lock {
            module: ModuleName::try_from("till").unwrap(),
            reason: "taking a payment".into(),
            scope: Scope::Device,
            taken_at: 1_000,
            container: "c1".into(),
            started_ns: 5,
            waited_since: Some(1_200),
            file: false,
        };
        {
            let s = Store::open(&path).unwrap();
            assert_eq!(s.locks().unwrap(), vec![]);
            s.keep_lock(&lock).unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.locks().unwrap(), vec![lock.clone()]);
        let file = Lock {
            file: true,
            ..lock.clone()
        };
        s.keep_lock(&file).unwrap();
        assert_eq!(s.locks().unwrap(), vec![lock.clone(), file.clone()]);
        assert!(s.release_lock("till").unwrap());
        assert!(!s.release_lock("till").unwrap());
        assert_eq!(s.locks().unwrap(), vec![file]);
        assert!(s.release_lock("till#file").unwrap());
        assert_eq!(s.locks().unwrap(), vec![]);
    }
}
