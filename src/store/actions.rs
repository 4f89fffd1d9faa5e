//! What the device keeps of the one-shot actions its documents asked
//! (`actions` table, one record per action id: a version byte and the
//! record's `key=value` lines, see `model::action`). A record is written
//! before the action acts (`begun`, with what shows it had not acted
//! yet) and again when it ends, each in one transaction: an id runs at
//! most once, a power cut anywhere included. Added without a schema
//! change: an agent that does not know the table never opens it.

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use crate::model::action::Record;
use crate::store::{EventKind, Store, StoreError};

pub(crate) const ACTIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("actions");

/// The record's version.
const VERSION: u8 = 1;

impl Store {
    /// Every action's record, by id (a record that does not read is said
    /// and skipped: its id would run again, which its evidence then
    /// judges).
    pub fn actions(&self) -> Result<Vec<Record>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read actions"))?;
        let t = match tx.open_table(ACTIONS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(self.io("read actions")(e)),
        };
        let mut out = Vec::new();
        for row in t.iter().map_err(self.io("read actions"))? {
            let (k, v) = row.map_err(self.io("read actions"))?;
            let record = match v.value().split_first() {
                Some((&VERSION, text)) => Record::from_text(&String::from_utf8_lossy(text)),
                _ => None,
            };
            match record {
                Some(r) => out.push(r),
                None => tracing::warn!(id = k.value(), "store: an action's record does not read"),
            }
        }
        Ok(out)
    }

    /// Keeps an action's record (replacing the one of its id) and says
    /// `said` of it in the event log, in one transaction each: the record
    /// first.
    pub fn keep_action(&self, record: &Record, said: String) -> Result<(), StoreError> {
        let mut bytes = vec![VERSION];
        bytes.extend(record.to_text().into_bytes());
        let tx = self.db()?.begin_write().map_err(self.io("keep action"))?;
        {
            let mut t = tx.open_table(ACTIONS).map_err(self.io("keep action"))?;
            t.insert(record.id.as_str(), bytes.as_slice())
                .map_err(self.io("keep action"))?;
        }
        tx.commit().map_err(self.io("keep action"))?;
        self.append_event(
            record.module.as_ref().map(|m| m.as_str()),
            EventKind::Intention,
            said,
        )
        .map(drop)
    }

    /// Forgets the records of these ids (ended actions no document in
    /// force carries any more), in one transaction.
    pub fn forget_actions(&self, ids: &[String]) -> Result<(), StoreError> {
        let tx = self
            .db()?
            .begin_write()
            .map_err(self.io("forget actions"))?;
        {
            let mut t = tx.open_table(ACTIONS).map_err(self.io("forget actions"))?;
            for id in ids {
                t.remove(id.as_str()).map_err(self.io("forget actions"))?;
            }
        }
        tx.commit().map_err(self.io("forget actions"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::action::{Action, Kind, Status};

    #[test]
    fn a_record_is_kept_across_a_reopen_moved_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stead.redb");
        let a = Action {
            id: "restart-web-1".into(),
            kind: Kind::Restart,
            module: Some(crate::model::names::ModuleName::try_from("web").unwrap()),
            not_before: None,
            expires: 2_000,
            upload_to: None,
            since: None,
            until: None,
        };
        let begun = Record::begin(&a, "container=c1 started=5".into(), 1_000);
        {
            let s = Store::open(&path).unwrap();
            assert_eq!(s.actions().unwrap(), vec![]);
            s.keep_action(&begun, "begun".into()).unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.actions().unwrap(), vec![begun.clone()]);
        let mut done = begun.clone();
        done.finish("restarted".into(), 1_010).unwrap();
        s.keep_action(&done, "done".into()).unwrap();
        let read = s.actions().unwrap();
        assert_eq!(read, vec![done]);
        assert_eq!(read[0].status, Status::Done);
        s.forget_actions(&["restart-web-1".into(), "other".into()])
            .unwrap();
        assert_eq!(s.actions().unwrap(), vec![]);
    }
}
