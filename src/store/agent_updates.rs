//! Updates of stead itself (`agent_updates` table, keyed by id): filed in
//! one transaction that supersedes an open request not yet switching,
//! changed one transaction per step, the finished ones kept by count. A
//! record that does not read is said and left out: it must never stop an
//! agent from starting.

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use crate::model::agent_update::{AgentUpdate, Stage, TransitionError};
use crate::store::records::agent_update::{decode, encode};
use crate::store::{Store, StoreError};

pub(crate) const AGENT_UPDATES: TableDefinition<u64, &[u8]> = TableDefinition::new("agent_updates");

/// Finished requests kept (the oldest go first).
pub const KEEP_FINISHED: usize = 20;

/// Why a request was not filed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// One is switching or confirming: a second restart would be asked for
    /// before the first is known.
    #[error("update {id} to {version} is {stage}; file again once it has ended")]
    Busy {
        id: u64,
        version: String,
        stage: &'static str,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn read_all(
    t: &impl ReadableTable<u64, &'static [u8]>,
) -> Result<Vec<AgentUpdate>, redb::StorageError> {
    let mut out = Vec::new();
    for row in t.iter()? {
        let (k, v) = row?;
        match decode(v.value()) {
            Ok(u) => out.push(u),
            Err(e) => tracing::error!(
                "store: agent update {} does not read ({e}); left out",
                k.value()
            ),
        }
    }
    Ok(out)
}

impl Store {
    /// Every update request kept, oldest first.
    pub fn agent_updates(&self) -> Result<Vec<AgentUpdate>, StoreError> {
        let tx = self
            .db()?
            .begin_read()
            .map_err(self.io("read agent updates"))?;
        let t = match tx.open_table(AGENT_UPDATES) {
            Ok(t) => t,
            // Never written: a store from before the table.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(self.io("read agent updates")(e)),
        };
        read_all(&t).map_err(self.io("read agent updates"))
    }

    /// The request not finished (at most one), if any.
    pub fn open_agent_update(&self) -> Result<Option<AgentUpdate>, StoreError> {
        Ok(self
            .agent_updates()?
            .into_iter()
            .rev()
            .find(|u| !u.stage().is_final()))
    }

    /// Files a request made by `make` from its new id, in one transaction:
    /// an open one that has not switched is failed as superseded by it;
    /// one switching or confirming refuses it. A request made finished (a
    /// refusal kept for the record) is only added.
    pub fn file_agent_update(
        &self,
        at: u64,
        make: impl FnOnce(u64) -> AgentUpdate,
    ) -> Result<AgentUpdate, FileError> {
        let tx = self
            .db()?
            .begin_write()
            .map_err(self.io("file agent update"))?;
        let filed = {
            let mut t = tx
                .open_table(AGENT_UPDATES)
                .map_err(self.io("file agent update"))?;
            let all = read_all(&t).map_err(self.io("file agent update"))?;
            let id = all.iter().map(|u| u.id).max().unwrap_or(0) + 1;
            let new = make(id);
            // A request filed already finished (a refusal kept for the
            // record) leaves the open one alone.
            let open = all
                .iter()
                .filter(|u| !u.stage().is_final() && !new.stage().is_final());
            for mut u in open.cloned() {
                if matches!(u.stage(), Stage::Switching | Stage::Confirming) {
                    return Err(FileError::Busy {
                        id: u.id,
                        version: u.version.to_string(),
                        stage: u.stage().as_str(),
                    });
                }
                // Requested, landing or faulted: each may fail.
                match u.fail(at, format!("superseded by update {id} to {}", new.version)) {
                    Ok(()) => t
                        .insert(u.id, encode(&u).as_slice())
                        .map(drop)
                        .map_err(self.io("file agent update"))?,
                    Err(e) => {
                        tracing::error!("agent update: invariant breach, left as stored: {e}")
                    }
                }
            }
            t.insert(id, encode(&new).as_slice())
                .map_err(self.io("file agent update"))?;
            // The finished ones beyond the count go, oldest first.
            let finished: Vec<u64> = all
                .iter()
                .filter(|u| u.stage().is_final())
                .map(|u| u.id)
                .collect();
            for id in finished
                .iter()
                .take(finished.len().saturating_sub(KEEP_FINISHED))
            {
                t.remove(*id).map_err(self.io("file agent update"))?;
            }
            new
        };
        tx.commit().map_err(self.io("file agent update"))?;
        Ok(filed)
    }

    /// Changes request `id` in one transaction; returns it as written
    /// (`None`: no such request). A move `f` asks for that its guard
    /// refuses writes nothing: the refusal is returned, the record stays
    /// as stored.
    pub fn change_agent_update(
        &self,
        id: u64,
        f: impl FnOnce(&mut AgentUpdate) -> Result<(), TransitionError>,
    ) -> Result<Option<Result<AgentUpdate, TransitionError>>, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("agent update"))?;
        let out = {
            let mut t = tx
                .open_table(AGENT_UPDATES)
                .map_err(self.io("agent update"))?;
            let found = t
                .get(id)
                .map_err(self.io("agent update"))?
                .map(|v| decode(v.value()));
            match found {
                Some(Ok(mut u)) => {
                    if let Err(e) = f(&mut u) {
                        drop(t);
                        tx.abort().map_err(self.io("agent update"))?;
                        return Ok(Some(Err(e)));
                    }
                    t.insert(id, encode(&u).as_slice())
                        .map_err(self.io("agent update"))?;
                    Some(Ok(u))
                }
                Some(Err(e)) => {
                    return Err(StoreError::Corrupt {
                        table: "agent_updates",
                        key: id.to_string(),
                        message: e,
                    });
                }
                None => None,
            }
        };
        tx.commit().map_err(self.io("agent update"))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::launch::AgentVersion;

    fn request(id: u64, v: &str) -> AgentUpdate {
        let mut u = AgentUpdate::new(
            id,
            AgentVersion::parse(v).unwrap(),
            "0.6.0",
            (
                b"{\"payloadType\":\"x\"}".to_vec(),
                Some("http://127.0.0.1/release.json".into()),
            ),
            "api",
            5,
        );
        u.say(5, "filed");
        u
    }

    #[test]
    fn filed_changed_superseded_refused_while_switching_and_kept_by_count() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        assert!(s.agent_updates().unwrap().is_empty());
        let a = s.file_agent_update(10, |id| request(id, "0.7.0")).unwrap();
        assert_eq!(a.id, 1);
        assert_eq!(s.open_agent_update().unwrap(), Some(a.clone()));
        // A second one supersedes it while it only lands.
        s.change_agent_update(1, |u| u.step(Stage::Landing, 11, "landing"))
            .unwrap()
            .unwrap()
            .unwrap();
        let b = s.file_agent_update(12, |id| request(id, "0.7.1")).unwrap();
        let all = s.agent_updates().unwrap();
        assert_eq!(all[0].stage(), Stage::Failed);
        assert_eq!(all[0].failure(), Some("superseded by update 2 to 0.7.1"));
        assert_eq!(s.open_agent_update().unwrap().unwrap().id, b.id);
        // Switching: a third is refused, nothing changes.
        s.change_agent_update(2, |u| {
            u.step(Stage::Landing, 13, "landing")?;
            u.step(Stage::Switching, 13, "switching")
        })
        .unwrap()
        .unwrap()
        .unwrap();
        let e = s
            .file_agent_update(14, |id| request(id, "0.8.0"))
            .unwrap_err();
        assert!(
            e.to_string().contains("update 2 to 0.7.1 is switching"),
            "{e}"
        );
        assert_eq!(s.agent_updates().unwrap().len(), 2);
        // A move its guard refuses writes nothing.
        let stored = s.agent_updates().unwrap();
        assert_eq!(
            s.change_agent_update(2, |u| u.step(Stage::Landing, 15, "again"))
                .unwrap(),
            Some(Err(TransitionError {
                id: 2,
                from: Stage::Switching,
                to: Stage::Landing
            }))
        );
        assert_eq!(s.agent_updates().unwrap(), stored);
        // What was written reads back whole.
        let got = s
            .change_agent_update(2, |u| u.fail(15, "x"))
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(s.agent_updates().unwrap()[1], got);
        assert_eq!(got.statement, b"{\"payloadType\":\"x\"}");
        for n in 0..30 {
            let u = s
                .file_agent_update(20 + n, |id| request(id, "0.9.0"))
                .unwrap();
            s.change_agent_update(u.id, |u| u.fail(21 + n, "no"))
                .unwrap()
                .unwrap()
                .unwrap();
        }
        assert!(s.agent_updates().unwrap().len() <= KEEP_FINISHED + 1);
        assert_eq!(s.change_agent_update(999, |_| Ok(())).unwrap(), None);
        // A refusal kept for the record supersedes nothing, even while one
        // switches.
        let open = s.file_agent_update(90, |id| request(id, "1.0.0")).unwrap();
        s.change_agent_update(open.id, |u| {
            u.step(Stage::Landing, 91, "landing")?;
            u.step(Stage::Switching, 91, "switching")
        })
        .unwrap()
        .unwrap()
        .unwrap();
        s.file_agent_update(92, |id| {
            request(id, "1.0.1").refused(92, "not signed by a trusted key")
        })
        .unwrap();
        assert_eq!(s.open_agent_update().unwrap().unwrap().id, open.id);
    }

    #[test]
    fn a_later_versions_record_reads_with_its_unknown_keys_ignored() {
        let mut bytes = vec![crate::store::records::AGENT_UPDATES];
        bytes.extend_from_slice(br#"{"id":3,"version":"0.9.0","from":"0.8.0","statement":"","requested_by":"plane","requested_at":1,"stage":"verifying","landed":true,"future":{"x":1}}"#);
        let u = decode(&bytes).unwrap();
        assert_eq!(u.version.as_str(), "0.9.0");
        assert_eq!(
            u.stage(),
            Stage::Faulted,
            "a stage it does not know is retried, never final"
        );
    }
}
