//! Reload requests (`reloads`, by id) and each module's update state
//! (`updates`, by module): one transaction per change, each request's
//! record read back and checked on the way out. Finished requests beyond
//! the newest [`KEEP_FINISHED`] are dropped when a new one is filed.

use std::collections::BTreeMap;

use redb::{ReadableDatabase, ReadableTable};

use crate::model::names::ModuleName;
use crate::model::reload::{
    Activation, FailedDigest, Flat, Item, Landed, LogLine, Request, RequestError, Status,
    UpdateState,
};
use crate::store::records::{self, v4, v8};
use crate::store::{META, RELOADS, Store, StoreError, UPDATES};

/// Finished (done or failed) requests kept.
pub const KEEP_FINISHED: usize = 100;
/// The bytes of finished requests kept (their records), at most.
pub const KEEP_FINISHED_BYTES: usize = 2 << 20;

/// The oldest finished requests (id, record size; oldest first) to drop so
/// that at most [`KEEP_FINISHED`] and [`KEEP_FINISHED_BYTES`] stay.
fn to_drop(finished: &[(u64, usize)]) -> Vec<u64> {
    let mut bytes = 0usize;
    let mut keep_from = finished.len();
    for (kept, (k, (_, size))) in finished.iter().enumerate().rev().enumerate() {
        if kept == KEEP_FINISHED || bytes + size > KEEP_FINISHED_BYTES {
            break;
        }
        bytes += size;
        keep_from = k;
    }
    finished[..keep_from].iter().map(|(id, _)| *id).collect()
}

impl Store {
    /// Files a new request made by `make` with the next id, in one
    /// transaction (also dropping the oldest finished requests beyond what
    /// is kept).
    pub fn file_reload<E>(
        &self,
        make: impl FnOnce(u64) -> Result<Request, E>,
    ) -> Result<Result<Request, E>, StoreError> {
        self.file_reload_beside(|id, _| make(id))
    }

    /// [`Store::file_reload`], with `make` also given every open request
    /// (in the same transaction, so two filings never both pass a check
    /// made on them).
    pub fn file_reload_beside<E>(
        &self,
        make: impl FnOnce(u64, &[Request]) -> Result<Request, E>,
    ) -> Result<Result<Request, E>, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("file reload"))?;
        let out = {
            let mut meta = tx.open_table(META).map_err(self.io("file reload"))?;
            let id = meta
                .get("reload_seq")
                .map_err(self.io("file reload"))?
                .map_or(0, |v| v.value())
                + 1;
            let mut open = Vec::new();
            {
                let t = tx.open_table(RELOADS).map_err(self.io("file reload"))?;
                for row in t.iter().map_err(self.io("file reload"))? {
                    let (k, v) = row.map_err(self.io("file reload"))?;
                    let rec = decode(k.value(), v.value())?;
                    if !rec.status().is_final() {
                        open.push(rec);
                    }
                }
            }
            let r = match make(id, &open) {
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
            // Drop the oldest finished requests beyond what is kept, by
            // count and by bytes.
            let mut finished = Vec::new();
            for row in t.iter().map_err(self.io("file reload"))? {
                let (k, v) = row.map_err(self.io("file reload"))?;
                let rec = decode(k.value(), v.value())?;
                if rec.status().is_final() {
                    finished.push((k.value(), v.value().len()));
                }
            }
            for id in to_drop(&finished) {
                t.remove(id).map_err(self.io("file reload"))?;
            }
            r
        };
        tx.commit().map_err(self.io("file reload"))?;
        Ok(Ok(out))
    }

    /// Writes a request as it is now, unless the stored one has ended
    /// (cancelled meanwhile): then nothing is written and the stored one is
    /// returned. A request that ends failed as `auto-update` also records
    /// its digests in the modules' update states, in the same transaction.
    pub fn put_reload(&self, r: &Request) -> Result<Option<Request>, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("write reload"))?;
        {
            let mut t = tx.open_table(RELOADS).map_err(self.io("write reload"))?;
            let stored = match t.get(r.id).map_err(self.io("write reload"))? {
                Some(v) => Some(decode(r.id, v.value())?),
                None => None,
            };
            if let Some(stored) = stored.filter(|s| s.status().is_final()) {
                drop(t);
                tx.abort().map_err(self.io("write reload"))?;
                return Ok((stored != *r).then_some(stored));
            }
            let bytes = records::encode(records::RELOADS, &record(r));
            t.insert(r.id, bytes.as_slice())
                .map_err(self.io("write reload"))?;
        }
        remember_failed(&tx, r).map_err(self.io("write reload"))?;
        tx.commit().map_err(self.io("write reload"))?;
        Ok(None)
    }

    /// Ends an open request as failed, `why` (a cancel), in one
    /// transaction; a version it landed is set aside (the module goes back
    /// to what it ran before). Returns it, or why not.
    pub fn end_reload(
        &self,
        id: u64,
        why: String,
        now: u64,
    ) -> Result<Result<Request, RequestError>, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("end reload"))?;
        let out = {
            let mut t = tx.open_table(RELOADS).map_err(self.io("end reload"))?;
            let Some(mut r) = t
                .get(id)
                .map_err(self.io("end reload"))?
                .map(|v| decode(id, v.value()))
                .transpose()?
            else {
                drop(t);
                tx.abort().map_err(self.io("end reload"))?;
                return Ok(Err(RequestError::Invalid {
                    field: "id",
                    message: format!("no reload request {id}"),
                }));
            };
            if let Err(e) = r.end_failed(why, now) {
                drop(t);
                tx.abort().map_err(self.io("end reload"))?;
                return Ok(Err(e));
            }
            let bytes = records::encode(records::RELOADS, &record(&r));
            t.insert(id, bytes.as_slice())
                .map_err(self.io("end reload"))?;
            let mut u = tx.open_table(UPDATES).map_err(self.io("end reload"))?;
            for item in &r.items {
                let key = item.module.as_str();
                let Some(v) = u.get(key).map_err(self.io("end reload"))? else {
                    continue;
                };
                let mut state = decode_update(key, v.value())?;
                drop(v);
                // Only what this request landed is set aside.
                if state.landed.as_ref().is_some_and(|l| l.request == id) {
                    let landed = state.landed.take();
                    // Back to what it ran before this request.
                    if let (Some(l), Some(previous)) = (landed, item.running_image.clone()) {
                        state.landed = Some(Landed {
                            version: item.running_version.clone().unwrap_or_default(),
                            digest: String::new(),
                            image_id: previous.clone(),
                            reference: previous,
                            previous_image: None,
                            ..l
                        });
                    }
                    let bytes = records::encode(records::UPDATES, &update_record(&state));
                    u.insert(key, bytes.as_slice())
                        .map_err(self.io("end reload"))?;
                }
            }
            drop(u);
            remember_failed(&tx, &r).map_err(self.io("end reload"))?;
            r
        };
        tx.commit().map_err(self.io("end reload"))?;
        Ok(Ok(out))
    }

    /// Writes `landed` as a module's landed version only while request
    /// `id` is open (a cancelled request lands nothing), in one
    /// transaction. Says whether it changed anything.
    pub fn land_for(&self, id: u64, name: &ModuleName, landed: Landed) -> Result<bool, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("write update"))?;
        let changed = {
            let t = tx.open_table(RELOADS).map_err(self.io("write update"))?;
            let open = match t.get(id).map_err(self.io("write update"))? {
                Some(v) => !decode(id, v.value())?.status().is_final(),
                None => false,
            };
            drop(t);
            let mut u = tx.open_table(UPDATES).map_err(self.io("write update"))?;
            let mut state = match u.get(name.as_str()).map_err(self.io("write update"))? {
                Some(v) => decode_update(name.as_str(), v.value())?,
                None => UpdateState::default(),
            };
            if !open || state.landed.as_ref() == Some(&landed) {
                false
            } else {
                state.landed = Some(landed);
                let bytes = records::encode(records::UPDATES, &update_record(&state));
                u.insert(name.as_str(), bytes.as_slice())
                    .map_err(self.io("write update"))?;
                true
            }
        };
        if changed {
            tx.commit().map_err(self.io("write update"))?;
        } else {
            tx.abort().map_err(self.io("write update"))?;
        }
        Ok(changed)
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
            let rec: v8::UpdateRecord =
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

/// Records the digests a failed auto-update request failed on, in the
/// modules' update states (in the caller's transaction).
fn remember_failed(tx: &redb::WriteTransaction, r: &Request) -> Result<(), redb::Error> {
    let failed = r.failed_digests(crate::model::reload::AGENT_VERSION);
    if failed.is_empty() {
        return Ok(());
    }
    let mut u = tx.open_table(UPDATES)?;
    for (module, f) in failed {
        let mut state = match u.get(module.as_str())? {
            // An unreadable state is left as it is (its reader names it).
            Some(v) => match decode_update(&module, v.value()) {
                Ok(s) => s,
                Err(_) => continue,
            },
            None => UpdateState::default(),
        };
        state.remember_failed(f);
        let bytes = records::encode(records::UPDATES, &update_record(&state));
        u.insert(module.as_str(), bytes.as_slice())?;
    }
    Ok(())
}

fn decode_update(key: &str, bytes: &[u8]) -> Result<UpdateState, StoreError> {
    let rec: v8::UpdateRecord =
        records::decode(records::UPDATES, bytes).map_err(|message| StoreError::Corrupt {
            table: "updates",
            key: key.to_string(),
            message,
        })?;
    Ok(from_update(rec))
}

fn decode(id: u64, bytes: &[u8]) -> Result<Request, StoreError> {
    let rec: v8::ReloadRecord =
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

fn record(r: &Request) -> v8::ReloadRecord {
    // The record spells the request's state flat, as it always has.
    let r = Flat::from(r.clone());
    let base = v4::ReloadRecord {
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
    };
    v8::ReloadRecord {
        base,
        items: r
            .items
            .iter()
            .map(|i| v8::ItemExtra {
                image: i.image.clone(),
                range: i.range.clone(),
                found_digest: i.found_digest.clone(),
            })
            .collect(),
    }
}

fn from_record(rec: v8::ReloadRecord) -> Request {
    let mut extras = rec.items.into_iter();
    let r = rec.base;
    Request::from(Flat {
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
            .map(|i| {
                let extra = extras.next().unwrap_or_default();
                (i, extra)
            })
            .map(|(i, extra)| Item {
                module: i.module,
                image: extra.image,
                range: extra.range,
                found_digest: extra.found_digest,
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
    })
}

fn update_record(u: &UpdateState) -> v8::UpdateRecord {
    let base = v4::UpdateRecord {
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
    };
    v8::UpdateRecord {
        base,
        failed: u
            .failed
            .iter()
            .map(|f| v8::FailedRecord {
                digest: f.digest.clone(),
                version: f.version.clone(),
                image: f.image.clone(),
                range: f.range.clone(),
                agent: f.agent.clone(),
                request: f.request,
            })
            .collect(),
    }
}

fn from_update(rec: v8::UpdateRecord) -> UpdateState {
    let u = rec.base;
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
        failed: rec
            .failed
            .into_iter()
            .map(|f| FailedDigest {
                digest: f.digest,
                version: f.version,
                image: f.image,
                range: f.range,
                agent: f.agent,
                request: f.request,
            })
            .collect(),
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
        r.begin_landing(101).unwrap();
        r.items.push(Item {
            module: "sensor".into(),
            image: "r/x:1.4.2".into(),
            range: "^1.4".into(),
            found_digest: Some("sha256:f".into()),
            target_version: Some("1.5.0".into()),
            failure: Some("503".into()),
            transient: true,
            restarts_at_start: Some(2),
            ..Item::default()
        });
        r.begin_activating(Activation::Restart, "one restart".into(), 102)
            .unwrap();
        r.stamp_restart(102).unwrap();
        r.fault_with("sensor: 503".into(), Some(200), 103).unwrap();
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
            u.remember_failed(FailedDigest {
                digest: "sha256:e".into(),
                version: "1.6.0".into(),
                image: "r/x:1.4.2".into(),
                range: "^1.4".into(),
                agent: "0.5.0".into(),
                request: 2,
            });
        })
        .unwrap();
        let u = &s.updates().unwrap()[&m];
        assert!(u.failed_under("sha256:e", "r/x:1.4.2", "^1.4", "0.5.0"));
        for (digest, image, range, agent) in [
            ("sha256:x", "r/x:1.4.2", "^1.4", "0.5.0"),
            ("sha256:e", "r/x:1.4.3", "^1.4", "0.5.0"),
            ("sha256:e", "r/x:1.4.2", "^1", "0.5.0"),
            ("sha256:e", "r/x:1.4.2", "^1.4", "0.6.0"),
        ] {
            assert!(
                !u.failed_under(digest, image, range, agent),
                "{digest} {image} {range} {agent}"
            );
        }
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
            r.begin_landing(1).unwrap();
            r.finish(None, 2).unwrap();
            s.put_reload(&r).unwrap();
        }
        s.file_reload(|id| Request::new(id, 1, None, "last", "x", 0))
            .unwrap()
            .unwrap();
        let all = s.reloads().unwrap();
        assert_eq!(
            all.iter().filter(|r| r.status().is_final()).count(),
            KEEP_FINISHED
        );
        assert_eq!(all[0], open, "an open request is never dropped");
    }

    #[test]
    fn a_schema_7_store_s_requests_and_update_states_are_migrated() {
        use redb::Database;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        drop(Store::open(&p).unwrap());
        let m = ModuleName::try_from("sensor").unwrap();
        let r = Request::new(4, 9, Some(&m), "why", "ops", 100).unwrap();
        // What schema 7 wrote: version 1 records.
        let mut old = record(&r).base;
        old.items.push(v4::ItemRecord {
            module: "sensor".into(),
            running_version: Some("1.0.0".into()),
            running_image: None,
            found_version: None,
            found_floor: None,
            registry: None,
            target_version: None,
            target_digest: None,
            target_image: None,
            healthcheck: false,
            landed: false,
            decision: "looking".into(),
            failure: None,
            transient: false,
            running_target_since: None,
            restarts_at_start: None,
        });
        let update = v4::UpdateRecord {
            landed: None,
            skipped: vec!["sha256:d".into()],
            last_look: 7,
        };
        {
            let db = Database::create(&p).unwrap();
            let tx = db.begin_write().unwrap();
            tx.open_table(RELOADS)
                .unwrap()
                .insert(4, records::encode(1, &old).as_slice())
                .unwrap();
            tx.open_table(UPDATES)
                .unwrap()
                .insert("sensor", records::encode(1, &update).as_slice())
                .unwrap();
            tx.open_table(META).unwrap().insert("schema", 7).unwrap();
            tx.commit().unwrap();
        }
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), crate::store::SCHEMA_VERSION);
        let back = s.reload(4).unwrap().unwrap();
        assert_eq!(back.items.len(), 1);
        assert_eq!(back.items[0].running_version.as_deref(), Some("1.0.0"));
        assert_eq!(
            (back.items[0].image.as_str(), back.items[0].range.as_str()),
            ("", "")
        );
        let u = &s.updates().unwrap()[&m];
        assert_eq!((u.skipped.len(), u.last_look, u.failed.len()), (1, 7, 0));
    }

    #[test]
    fn finished_requests_are_kept_by_count_and_by_bytes() {
        let many = |n: u64, size: usize| (1..=n).map(|id| (id, size)).collect::<Vec<_>>();
        type Case = (&'static str, Vec<(u64, usize)>, usize);
        let cases: Vec<Case> = vec![
            ("few and small", many(5, 100), 0),
            ("over the count", many(KEEP_FINISHED as u64 + 5, 100), 5),
            ("over the bytes", many(10, KEEP_FINISHED_BYTES / 4), 6),
            (
                "one over the bytes alone",
                vec![(1, KEEP_FINISHED_BYTES + 1)],
                1,
            ),
            ("none", vec![], 0),
        ];
        for (case, finished, dropped) in cases {
            let d = to_drop(&finished);
            assert_eq!(d.len(), dropped, "{case}");
            // The oldest go.
            assert!(
                d.iter().enumerate().all(|(k, id)| *id == k as u64 + 1),
                "{case}"
            );
        }
    }
}
