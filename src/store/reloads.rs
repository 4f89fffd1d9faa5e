//! Reload requests (`reloads`, by id) and each module's update state
//! (`updates`, by module): one transaction per change, each request's
//! record read back and checked on the way out. Finished requests beyond
//! the newest [`KEEP_FINISHED`] are dropped when a new one is filed.

use std::collections::BTreeMap;

use redb::{ReadableDatabase, ReadableTable};

use crate::model::names::ModuleName;
use crate::model::reload::{Activation, Item, Landed, LogLine, Request, Status, UpdateState};
use crate::store::records::{self, v4};
use crate::store::{META, RELOADS, Store, StoreError, UPDATES};

/// Finished (done or failed) requests kept.
pub const KEEP_FINISHED: usize = 100;

impl Store {
    /// Files a new request made by `make` with the next id, in one
    /// transaction (also dropping the oldest finished requests beyond what
    /// is kept).
    pub fn file_reload<E>(
        &self,
        make: impl FnOnce(u64) -> Result<Request, E>,
    ) -> Result<Result<Request, E>, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("file reload"))?;
        let out = {
            let mut meta = tx.open_table(META).map_err(self.io("file reload"))?;
            let id = meta
                .get("reload_seq")
                .map_err(self.io("file reload"))?
                .map_or(0, |v| v.value())
                + 1;
            let r = match make(id) {
                Ok(r) => r,
                Err(e) => {
                    drop(meta);
                    tx.abort().map_err(self.io("file reload"))?;
                    return Ok(Err(e));
                }
            };
            meta.insert("reload_seq", id)
                .map_err(self.io("file reload"))?;
            let mut t = tx.open_table(RELOADS).map_err(self.io("file reload"))?;
            let bytes = records::encode(records::RELOADS, &record(&r));
            t.insert(id, bytes.as_slice())
                .map_err(self.io("file reload"))?;
            // Drop the oldest finished requests beyond what is kept.
            let mut finished = Vec::new();
            for row in t.iter().map_err(self.io("file reload"))? {
                let (k, v) = row.map_err(self.io("file reload"))?;
                let rec = decode(k.value(), v.value())?;
                if rec.status.is_final() {
                    finished.push(k.value());
                }
            }
            if finished.len() > KEEP_FINISHED {
                for id in &finished[..finished.len() - KEEP_FINISHED] {
                    t.remove(*id).map_err(self.io("file reload"))?;
                }
            }
            r
        };
        tx.commit().map_err(self.io("file reload"))?;
        Ok(Ok(out))
    }

    /// Writes a request as it is now.
    pub fn put_reload(&self, r: &Request) -> Result<(), StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("write reload"))?;
        {
            let mut t = tx.open_table(RELOADS).map_err(self.io("write reload"))?;
            let bytes = records::encode(records::RELOADS, &record(r));
            t.insert(r.id, bytes.as_slice())
                .map_err(self.io("write reload"))?;
        }
        tx.commit().map_err(self.io("write reload"))
    }

    /// Every request kept, oldest first.
    pub fn reloads(&self) -> Result<Vec<Request>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let t = tx.open_table(RELOADS).map_err(self.io("read"))?;
        let mut out = Vec::new();
        for row in t.iter().map_err(self.io("read"))? {
            let (k, v) = row.map_err(self.io("read"))?;
            out.push(decode(k.value(), v.value())?);
        }
        Ok(out)
    }

    /// One request.
    pub fn reload(&self, id: u64) -> Result<Option<Request>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let t = tx.open_table(RELOADS).map_err(self.io("read"))?;
        t.get(id)
            .map_err(self.io("read"))?
            .map(|v| decode(id, v.value()))
            .transpose()
    }

    /// Every module's update state.
    pub fn updates(&self) -> Result<BTreeMap<ModuleName, UpdateState>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let t = tx.open_table(UPDATES).map_err(self.io("read"))?;
        let mut out = BTreeMap::new();
        for row in t.iter().map_err(self.io("read"))? {
            let (k, v) = row.map_err(self.io("read"))?;
            let key = k.value();
            let name = ModuleName::try_from(key).map_err(|e| StoreError::Corrupt {
                table: "updates",
                key: key.to_string(),
                message: e.0,
            })?;
            let rec: v4::UpdateRecord =
                records::decode(records::UPDATES, v.value()).map_err(|message| {
                    StoreError::Corrupt {
                        table: "updates",
                        key: key.to_string(),
                        message,
                    }
                })?;
            out.insert(name, from_update(rec));
        }
        Ok(out)
    }

    /// Changes a module's update state in one transaction.
    pub fn modify_update<T>(
        &self,
        name: &ModuleName,
        f: impl FnOnce(&mut UpdateState) -> T,
    ) -> Result<T, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("write update"))?;
        let out = {
            let mut t = tx.open_table(UPDATES).map_err(self.io("write update"))?;
            let mut state = match t.get(name.as_str()).map_err(self.io("write update"))? {
                Some(v) => from_update(records::decode(records::UPDATES, v.value()).map_err(
                    |message| StoreError::Corrupt {
                        table: "updates",
                        key: name.to_string(),
                        message,
                    },
                )?),
                None => UpdateState::default(),
            };
            let out = f(&mut state);
            let bytes = records::encode(records::UPDATES, &update_record(&state));
            t.insert(name.as_str(), bytes.as_slice())
                .map_err(self.io("write update"))?;
            out
        };
        tx.commit().map_err(self.io("write update"))?;
        Ok(out)
    }
}

fn decode(id: u64, bytes: &[u8]) -> Result<Request, StoreError> {
    let rec: v4::ReloadRecord =
        records::decode(records::RELOADS, bytes).map_err(|message| StoreError::Corrupt {
            table: "reloads",
            key: id.to_string(),
            message,
        })?;
    Ok(from_record(rec))
}

fn status(s: Status) -> v4::ReloadStatus {
    match s {
        Status::Requested => v4::ReloadStatus::Requested,
        Status::Landing => v4::ReloadStatus::Landing,
        Status::Activating => v4::ReloadStatus::Activating,
        Status::Done => v4::ReloadStatus::Done,
        Status::Failed => v4::ReloadStatus::Failed,
        Status::Faulted => v4::ReloadStatus::Faulted,
    }
}

fn from_status(s: v4::ReloadStatus) -> Status {
    match s {
        v4::ReloadStatus::Requested => Status::Requested,
        v4::ReloadStatus::Landing => Status::Landing,
        v4::ReloadStatus::Activating => Status::Activating,
        v4::ReloadStatus::Done => Status::Done,
        v4::ReloadStatus::Failed => Status::Failed,
        v4::ReloadStatus::Faulted => Status::Faulted,
    }
}

fn record(r: &Request) -> v4::ReloadRecord {
    v4::ReloadRecord {
        id: r.id,
        written_by: r.written_by,
        module: r.module.clone(),
        reason: r.reason.clone(),
        requested_by: r.requested_by.clone(),
        requested_at: r.requested_at,
        status: status(r.status),
        attempt: r.attempt,
        faulted_at: r.faulted_at,
        not_before: r.not_before,
        items: r
            .items
            .iter()
            .map(|i| v4::ItemRecord {
                module: i.module.clone(),
                running_version: i.running_version.clone(),
                running_image: i.running_image.clone(),
                found_version: i.found_version.clone(),
                found_floor: i.found_floor.clone(),
                registry: i.registry.clone(),
                target_version: i.target_version.clone(),
                target_digest: i.target_digest.clone(),
                target_image: i.target_image.clone(),
                healthcheck: i.healthcheck,
                landed: i.landed,
                decision: i.decision.clone(),
                failure: i.failure.clone(),
                transient: i.transient,
                running_target_since: i.running_target_since,
                restarts_at_start: i.restarts_at_start,
            })
            .collect(),
        activation: r.activation.map(|a| match a {
            Activation::Restart => v4::Activation::Restart,
            Activation::NotNeeded => v4::Activation::NotNeeded,
        }),
        activation_detail: r.activation_detail.clone(),
        restart_requested_at: r.restart_requested_at,
        failure: r.failure.clone(),
        finished_at: r.finished_at,
        log: r
            .log
            .iter()
            .map(|l| v4::LogRecord {
                at: l.at,
                attempt: l.attempt,
                text: l.text.clone(),
            })
            .collect(),
    }
}

fn from_record(r: v4::ReloadRecord) -> Request {
    Request {
        id: r.id,
        written_by: r.written_by,
        module: r.module,
        reason: r.reason,
        requested_by: r.requested_by,
        requested_at: r.requested_at,
        status: from_status(r.status),
        attempt: r.attempt,
        faulted_at: r.faulted_at,
        not_before: r.not_before,
        items: r
            .items
            .into_iter()
            .map(|i| Item {
                module: i.module,
                running_version: i.running_version,
                running_image: i.running_image,
                found_version: i.found_version,
                found_floor: i.found_floor,
                registry: i.registry,
                target_version: i.target_version,
                target_digest: i.target_digest,
                target_image: i.target_image,
                healthcheck: i.healthcheck,
                landed: i.landed,
                decision: i.decision,
                failure: i.failure,
                transient: i.transient,
                running_target_since: i.running_target_since,
                restarts_at_start: i.restarts_at_start,
            })
            .collect(),
        activation: r.activation.map(|a| match a {
            v4::Activation::Restart => Activation::Restart,
            v4::Activation::NotNeeded => Activation::NotNeeded,
        }),
        activation_detail: r.activation_detail,
        restart_requested_at: r.restart_requested_at,
        failure: r.failure,
        finished_at: r.finished_at,
        log: r
            .log
            .into_iter()
            .map(|l| LogLine {
                at: l.at,
                attempt: l.attempt,
                text: l.text,
            })
            .collect(),
    }
}

fn update_record(u: &UpdateState) -> v4::UpdateRecord {
    v4::UpdateRecord {
        landed: u.landed.as_ref().map(|l| v4::LandedRecord {
            version: l.version.clone(),
            digest: l.digest.clone(),
            image_id: l.image_id.clone(),
            reference: l.reference.clone(),
            request: l.request,
            from_image: l.from_image.clone(),
            from_range: l.from_range.clone(),
            previous_image: l.previous_image.clone(),
        }),
        skipped: u.skipped.clone(),
        last_look: u.last_look,
    }
}

fn from_update(u: v4::UpdateRecord) -> UpdateState {
    UpdateState {
        landed: u.landed.map(|l| Landed {
            version: l.version,
            digest: l.digest,
            image_id: l.image_id,
            reference: l.reference,
            request: l.request,
            from_image: l.from_image,
            from_range: l.from_range,
            previous_image: l.previous_image,
        }),
        skipped: u.skipped,
        last_look: u.last_look,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_update_states_read_back_as_written() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        let m = ModuleName::try_from("sensor").unwrap();
        let mut r = s
            .file_reload(|id| Request::new(id, 9, Some(&m), "why", "ops", 100))
            .unwrap()
            .unwrap();
        assert_eq!(r.id, 1);
        r.advance(Status::Landing, 101).unwrap();
        r.items.push(Item {
            module: "sensor".into(),
            target_version: Some("1.5.0".into()),
            failure: Some("503".into()),
            transient: true,
            restarts_at_start: Some(2),
            ..Item::default()
        });
        r.activation = Some(Activation::Restart);
        r.restart_requested_at = Some(102);
        s.put_reload(&r).unwrap();
        assert_eq!(s.reload(1).unwrap().as_ref(), Some(&r));
        let second = s
            .file_reload(|id| Request::new(id, 9, None, "all", "auto-update", 200))
            .unwrap()
            .unwrap();
        assert_eq!(second.id, 2);
        assert_eq!(s.reloads().unwrap(), vec![r, second]);
        // A refused request takes no id.
        let refused = s
            .file_reload(|id| Request::new(id, 9, None, "", "x", 0))
            .unwrap();
        assert!(refused.is_err());
        assert_eq!(
            s.file_reload(|id| Request::new(id, 9, None, "again", "x", 0))
                .unwrap()
                .unwrap()
                .id,
            3
        );

        let landed = Landed {
            version: "1.5.0".into(),
            digest: format!("sha256:{}", "a".repeat(64)),
            image_id: format!("sha256:{}", "b".repeat(64)),
            reference: "r/x@sha256:a".into(),
            request: 1,
            from_image: "r/x:1.4.2".into(),
            from_range: "^1.4".into(),
            previous_image: Some("sha256:c".into()),
        };
        s.modify_update(&m, |u| {
            u.landed = Some(landed.clone());
            u.skipped.push("sha256:d".into());
            u.last_look = 5;
        })
        .unwrap();
        let u = &s.updates().unwrap()[&m];
        assert_eq!(u.landed.as_ref(), Some(&landed));
        assert_eq!((u.skipped.len(), u.last_look), (1, 5));
    }

    #[test]
    fn finished_requests_beyond_what_is_kept_are_dropped() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        let open = s
            .file_reload(|id| Request::new(id, 1, None, "stays open", "x", 0))
            .unwrap()
            .unwrap();
        for k in 0..(KEEP_FINISHED + 5) {
            let mut r = s
                .file_reload(|id| Request::new(id, 1, None, "x", "x", k as u64))
                .unwrap()
                .unwrap();
            r.advance(Status::Landing, 1).unwrap();
            r.advance(Status::Done, 2).unwrap();
            s.put_reload(&r).unwrap();
        }
        s.file_reload(|id| Request::new(id, 1, None, "last", "x", 0))
            .unwrap()
            .unwrap();
        let all = s.reloads().unwrap();
        assert_eq!(
            all.iter().filter(|r| r.status.is_final()).count(),
            KEEP_FINISHED
        );
        assert_eq!(all[0], open, "an open request is never dropped");
    }
}
