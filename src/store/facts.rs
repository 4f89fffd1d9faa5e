//! The device's facts as last known (`facts` table, one value under
//! `facts`: a version byte and the facts' JSON, so a later field is a new
//! key; added without a schema change, since an agent that does not know
//! the table never opens it). Read at start, so the groups' `when` is
//! judged by the engine the device last had before the engine answers
//! again: a restart never takes a group's modules away and back.

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
        match v.value().split_first() {
            Some((&VERSION, json)) => match serde_json::from_slice(json) {
                Ok(f) => Ok(Some(f)),
                Err(e) => {
                    tracing::warn!(
                        "store: the device's facts kept do not read ({e}); learnt again"
                    );
                    Ok(None)
                }
            },
            _ => {
                tracing::warn!(
                    "store: the device's facts kept are of another version; learnt again"
                );
                Ok(None)
            }
        }
    }

    /// Keeps the device's facts, in one transaction.
    pub fn keep_facts(&self, facts: &Facts) -> Result<(), StoreError> {
        let mut bytes = vec![VERSION];
        bytes.extend(serde_json::to_vec(facts).unwrap_or_default());
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
            arch: "aarch64".into(),
            os: "linux".into(),
            engine: Some("podman".into()),
            engine_version: Some("4.3.1".into()),
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
