//! The device's facts as last known that it learns only as it runs (its
//! engine, the engine's version, its free disk: `facts` table, one value
//! under `facts`, a version byte and `key=value` lines, so a later fact is
//! a new key; added without a schema change, since an agent that does not
//! know the table never opens it). Read at start, so the groups' `when` is
//! judged by the engine the device last had before the engine answers
//! again: a restart never takes a group's modules away and back. What it
//! knows at start (its architecture, system, labels, memory) is not kept.

use redb::{ReadableDatabase, TableDefinition};

use crate::model::facts::Facts;
use crate::store::{Store, StoreError};

pub(crate) const FACTS: TableDefinition<&str, &[u8]> = TableDefinition::new("facts");

const KEY: &str = "facts";
/// The record's version.
const VERSION: u8 = 1;

impl Store {
    /// The facts last kept (none: never kept, or unreadable, which is said).
    pub fn facts(&self) -> Result<Option<Facts>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read facts"))?;
        let t = match tx.open_table(FACTS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(self.io("read facts")(e)),
        };
        let found = redb::ReadableTable::get(&t, KEY).map_err(self.io("read facts"))?;
        let Some(v) = found else { return Ok(None) };
        let Some((&VERSION, text)) = v.value().split_first() else {
            tracing::warn!("store: the device's facts kept are of another version; learnt again");
            return Ok(None);
        };
        let mut f = Facts::default();
        for line in String::from_utf8_lossy(text).lines() {
            match line.split_once('=') {
                Some(("engine", e)) => f.engine = Some(e.to_string()),
                Some(("engine_version", v)) => f.engine_version = Some(v.to_string()),
                Some(("disk_free", d)) => f.disk_free = d.parse().ok(),
                _ => {}
            }
        }
        Ok(Some(f))
    }

    /// Keeps the device's facts learnt as it runs, in one transaction.
    pub fn keep_facts(&self, facts: &Facts) -> Result<(), StoreError> {
        use std::fmt::Write as _;
        let mut text = String::new();
        if let Some(e) = &facts.engine {
            let _ = writeln!(text, "engine={e}");
        }
        if let Some(v) = &facts.engine_version {
            let _ = writeln!(text, "engine_version={}", v.replace('\n', " "));
        }
        if let Some(d) = facts.disk_free {
            let _ = writeln!(text, "disk_free={d}");
        }
        let mut bytes = vec![VERSION];
        bytes.extend(text.into_bytes());
        let tx = self.db()?.begin_write().map_err(self.io("facts"))?;
        {
            let mut t = tx.open_table(FACTS).map_err(self.io("facts"))?;
            t.insert(KEY, bytes.as_slice()).map_err(self.io("facts"))?;
        }
        tx.commit().map_err(self.io("facts"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facts_are_kept_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stead.redb");
        let facts = Facts {
            engine: Some("podman".into()),
            engine_version: Some("4.3.1".into()),
            disk_free: Some(5 << 30),
            ..Facts::default()
        };
        {
            let s = Store::open(&path).unwrap();
            assert_eq!(s.facts().unwrap(), None);
            s.keep_facts(&facts).unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.facts().unwrap(), Some(facts));
    }
}
