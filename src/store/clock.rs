//! The device's time floor (`clock` table, one value under `floor`,
//! seconds since the epoch; added without a schema change, since an agent
//! that does not know the table never opens it): the newest time the
//! device knows has passed, read at start before any network access and
//! raised, never lowered, in one transaction when a document is accepted
//! (the rule is the core's `model::clock::raised`).

use redb::{ReadableDatabase, TableDefinition};

use crate::store::{Store, StoreError};

pub(crate) const CLOCK: TableDefinition<&str, u64> = TableDefinition::new("clock");

const KEY: &str = "floor";

impl Store {
    /// The time floor kept (0: none yet).
    pub fn clock_floor(&self) -> Result<u64, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read clock"))?;
        let t = match tx.open_table(CLOCK) {
            Ok(t) => t,
            // Never written: a store from before the table.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
            Err(e) => return Err(self.io("read clock")(e)),
        };
        let found = redb::ReadableTable::get(&t, KEY).map_err(self.io("read clock"))?;
        Ok(found.map_or(0, |v| v.value()))
    }

    /// Raises the time floor to `seen` in one transaction when it is
    /// later than the floor kept; returns the floor kept after (nothing is
    /// written when it does not move).
    pub fn raise_clock_floor(&self, seen: u64) -> Result<u64, StoreError> {
        let held = self.clock_floor()?;
        let Some(new) = crate::model::clock::raised(held, seen) else {
            return Ok(held);
        };
        let tx = self.db()?.begin_write().map_err(self.io("clock"))?;
        let kept = {
            let mut t = tx.open_table(CLOCK).map_err(self.io("clock"))?;
            let now = redb::ReadableTable::get(&t, KEY)
                .map_err(self.io("clock"))?
                .map_or(0, |v| v.value());
            // Read again within the write: another writer may have raised
            // it meanwhile, and the floor never goes down.
            let kept = now.max(new);
            t.insert(KEY, kept).map_err(self.io("clock"))?;
            kept
        };
        tx.commit().map_err(self.io("clock"))?;
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_kept_raised_and_never_lowered_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        let s = Store::open(&path).unwrap();
        assert_eq!(s.clock_floor().unwrap(), 0, "a new store has none");
        assert_eq!(s.raise_clock_floor(1_700_000_000).unwrap(), 1_700_000_000);
        assert_eq!(s.raise_clock_floor(1_600_000_000).unwrap(), 1_700_000_000);
        assert_eq!(s.raise_clock_floor(1_700_000_100).unwrap(), 1_700_000_100);
        drop(s);
        let s = Store::open(&path).unwrap();
        assert_eq!(s.clock_floor().unwrap(), 1_700_000_100);
    }
}
