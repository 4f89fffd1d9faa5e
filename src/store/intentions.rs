//! Intentions and their settings overlays, read and written together
//! (`modify`, batches by module), each stored intention decoded once per
//! change of its bytes, and the rebuild of a new store from what the
//! containers' labels say was stated.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::{ReadableDatabase, ReadableTable};

use super::db::corrupt;
use super::{
    Entry, INTENTIONS, IntentionRecord, META, OVERLAYS, Overlay, REBUILD, Readable, Restated,
    Source, Store, StoreError, records,
};
use crate::model::names::ModuleName;

/// Each stored intention as last decoded, with the SHA-256 of the bytes it
/// was decoded from: a record is parsed once per change, not once per read.
#[derive(Default)]
pub(super) struct Decoded {
    records: Mutex<HashMap<String, ([u8; 32], IntentionRecord)>>,
    /// How many intention records were decoded.
    count: AtomicU64,
}

/// A stored intention from its record, of the version this schema writes
/// or of the one a record the migration to schema 9 left as it was.
pub(super) fn decode_intention(key: &str, bytes: &[u8]) -> Result<IntentionRecord, StoreError> {
    match bytes.first() {
        // A record the migration to schema 9 could not convert (it did not
        // check then either): read as it was written, unreadable as it was.
        Some(6) => records::decode(6, bytes).and_then(records::from_intention_record_v7),
        _ => records::decode(records::INTENTIONS, bytes).and_then(records::from_intention_record),
    }
    .map_err(corrupt("intentions", key))
}

pub(super) fn decode_overlay(key: &str, bytes: &[u8]) -> Result<Overlay, StoreError> {
    records::decode(records::OVERLAYS, bytes)
        .and_then(records::from_overlay)
        .map_err(corrupt("overlays", key))
}

impl Store {
    /// A stored intention from its record's bytes: decoded again only when
    /// they differ (by SHA-256) from the last decoded under `key`.
    pub(super) fn intention(&self, key: &str, bytes: &[u8]) -> Result<IntentionRecord, StoreError> {
        let d = ring::digest::digest(&ring::digest::SHA256, bytes);
        let mut sum = [0u8; 32];
        sum.copy_from_slice(d.as_ref());
        let mut decoded = self
            .decoded
            .records
            .lock()
            .expect("decoded intentions lock");
        if let Some((s, r)) = decoded.get(key) {
            if *s == sum {
                return Ok(r.clone());
            }
        }
        self.decoded.count.fetch_add(1, Ordering::Relaxed);
        let r = decode_intention(key, bytes)?;
        decoded.insert(key.to_string(), (sum, r.clone()));
        Ok(r)
    }

    /// How many intention records this store has decoded since it opened.
    pub fn intention_decodes(&self) -> u64 {
        self.decoded.count.load(Ordering::Relaxed)
    }

    /// Forgets the decoded intentions of modules no longer stored.
    fn keep_decoded(&self, stored: &BTreeMap<ModuleName, Entry>) {
        self.decoded
            .records
            .lock()
            .expect("decoded intentions lock")
            .retain(|k, _| ModuleName::try_from(k.as_str()).is_ok_and(|n| stored.contains_key(&n)));
    }

    /// Whether the store is new and not yet rebuilt from the containers.
    pub fn rebuild_pending(&self) -> Result<bool, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let meta = tx.open_table(META).map_err(self.io("read"))?;
        Ok(meta.get(REBUILD).map_err(self.io("read"))?.is_some())
    }

    /// Takes back what the containers say was stated, in one transaction
    /// that also ends the rebuild: an API module only where no source
    /// states the module now, an overlay only over an intention without
    /// one. Returns the modules taken back.
    pub fn rebuild(&self, found: &[(ModuleName, Restated)]) -> Result<Vec<ModuleName>, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("rebuild"))?;
        let mut taken = Vec::new();
        {
            let mut it = tx.open_table(INTENTIONS).map_err(self.io("rebuild"))?;
            let mut ot = tx.open_table(OVERLAYS).map_err(self.io("rebuild"))?;
            for (name, what) in found {
                let key = name.as_str();
                let stated = it.get(key).map_err(self.io("rebuild"))?.is_some();
                let layered = ot.get(key).map_err(self.io("rebuild"))?.is_some();
                match what {
                    Restated::Api(i) if !stated => {
                        let r = IntentionRecord::new(Source::Api, 1, (**i).clone());
                        let bytes =
                            records::encode(records::INTENTIONS, &records::intention_record(&r));
                        it.insert(key, bytes.as_slice())
                            .map_err(self.io("rebuild"))?;
                    }
                    Restated::Overlay(o) if stated && !layered && !o.is_empty() => {
                        let bytes = records::encode(records::OVERLAYS, &records::overlay(o));
                        ot.insert(key, bytes.as_slice())
                            .map_err(self.io("rebuild"))?;
                    }
                    _ => continue,
                }
                taken.push(name.clone());
            }
            let mut meta = tx.open_table(META).map_err(self.io("rebuild"))?;
            meta.remove(REBUILD).map_err(self.io("rebuild"))?;
        }
        tx.commit().map_err(self.io("rebuild"))?;
        Ok(taken)
    }

    /// Every stored intention, by module.
    pub fn intentions(&self) -> Result<BTreeMap<ModuleName, IntentionRecord>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(INTENTIONS).map_err(self.io("read"))?;
        let mut out = BTreeMap::new();
        for row in table.iter().map_err(self.io("read"))? {
            let (k, v) = row.map_err(self.io("read"))?;
            let r = self.intention(k.value(), v.value())?;
            out.insert(r.intention.name.clone(), r);
        }
        Ok(out)
    }

    /// Every module's intention with its overlay, by module.
    pub fn entries(&self) -> Result<BTreeMap<ModuleName, Entry>, StoreError> {
        self.entries_readable().map(|(entries, _)| entries)
    }

    /// Every module's entry that reads, and the modules whose stored
    /// intention does not (with why): one record that no longer checks
    /// (an intention a newer check refuses, a damaged page) holds only its
    /// own module, never the pass of every other.
    pub fn entries_readable(&self) -> Result<Readable, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(INTENTIONS).map_err(self.io("read"))?;
        let overlays = tx.open_table(OVERLAYS).map_err(self.io("read"))?;
        let mut out = BTreeMap::new();
        let mut unreadable = Vec::new();
        for row in table.iter().map_err(self.io("read"))? {
            let (k, v) = row.map_err(self.io("read"))?;
            let record = match self.intention(k.value(), v.value()) {
                Ok(r) => r,
                Err(e) => {
                    if let Ok(name) = ModuleName::try_from(k.value()) {
                        unreadable.push((name, e.to_string()));
                    }
                    continue;
                }
            };
            let overlay = match overlays.get(k.value()).map_err(self.io("read"))? {
                Some(o) => decode_overlay(k.value(), o.value())?,
                None => Overlay::new(),
            };
            out.insert(
                record.intention.name.clone(),
                Entry {
                    record: Some(record),
                    overlay,
                },
            );
        }
        self.keep_decoded(&out);
        Ok((out, unreadable))
    }

    /// At most `limit` entries, by module, after `after` (from the first
    /// when `None`): every entry read a batch at a time, each batch in a
    /// read transaction of its own.
    pub fn entries_after(
        &self,
        after: Option<&ModuleName>,
        limit: usize,
    ) -> Result<Vec<(ModuleName, Entry)>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(INTENTIONS).map_err(self.io("read"))?;
        let overlays = tx.open_table(OVERLAYS).map_err(self.io("read"))?;
        let start = match after {
            Some(n) => std::ops::Bound::Excluded(n.as_str()),
            None => std::ops::Bound::Unbounded,
        };
        let rows = table
            .range::<&str>((start, std::ops::Bound::Unbounded))
            .map_err(self.io("read"))?;
        let mut out = Vec::new();
        for row in rows.take(limit) {
            let (k, v) = row.map_err(self.io("read"))?;
            let record = self.intention(k.value(), v.value())?;
            let overlay = match overlays.get(k.value()).map_err(self.io("read"))? {
                Some(o) => decode_overlay(k.value(), o.value())?,
                None => Overlay::new(),
            };
            out.push((
                record.intention.name.clone(),
                Entry {
                    record: Some(record),
                    overlay,
                },
            ));
        }
        Ok(out)
    }

    /// One module's intention with its overlay, when it has an intention.
    pub fn entry(&self, name: &ModuleName) -> Result<Option<Entry>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(INTENTIONS).map_err(self.io("read"))?;
        let overlays = tx.open_table(OVERLAYS).map_err(self.io("read"))?;
        let Some(v) = table.get(name.as_str()).map_err(self.io("read"))? else {
            return Ok(None);
        };
        let record = self.intention(name.as_str(), v.value())?;
        let overlay = match overlays.get(name.as_str()).map_err(self.io("read"))? {
            Some(o) => decode_overlay(name.as_str(), o.value())?,
            None => Overlay::new(),
        };
        Ok(Some(Entry {
            record: Some(record),
            overlay,
        }))
    }

    /// Reads a module's entry, lets `f` change it, and writes back what
    /// changed, all in one write transaction: concurrent writers (the API,
    /// the intentions directory) never interleave or lose an update. The
    /// entry is written only if `f` returns `Ok`.
    pub fn modify<T, E>(
        &self,
        name: &ModuleName,
        f: impl FnOnce(&mut Entry) -> Result<T, E>,
    ) -> Result<Result<T, E>, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("modify"))?;
        let out;
        let mut changed = false;
        {
            let mut it = tx.open_table(INTENTIONS).map_err(self.io("modify"))?;
            let mut ot = tx.open_table(OVERLAYS).map_err(self.io("modify"))?;
            let key = name.as_str();
            let record = match it.get(key).map_err(self.io("modify"))? {
                Some(v) => Some(self.intention(key, v.value())?),
                None => None,
            };
            let overlay = match ot.get(key).map_err(self.io("modify"))? {
                Some(v) => decode_overlay(key, v.value())?,
                None => Overlay::new(),
            };
            let before = Entry { record, overlay };
            let mut entry = before.clone();
            out = f(&mut entry);
            if out.is_ok() && entry != before {
                changed = true;
                match &entry.record {
                    Some(r) => {
                        let bytes =
                            records::encode(records::INTENTIONS, &records::intention_record(r));
                        it.insert(key, bytes.as_slice()).map(|_| ())
                    }
                    None => it.remove(key).map(|_| ()),
                }
                .map_err(self.io("modify"))?;
                if entry.overlay.is_empty() || entry.record.is_none() {
                    ot.remove(key).map_err(self.io("modify"))?;
                } else {
                    let bytes =
                        records::encode(records::OVERLAYS, &records::overlay(&entry.overlay));
                    ot.insert(key, bytes.as_slice())
                        .map_err(self.io("modify"))?;
                }
            }
        }
        // Nothing to write: no commit, so no fsync on a quiet pass.
        if changed {
            tx.commit().map_err(self.io("modify"))?;
        } else {
            tx.abort().map_err(self.io("modify"))?;
        }
        Ok(out)
    }

    /// Stores an intention (replacing any, keeping its overlay).
    pub fn put_intention(&self, r: &IntentionRecord) -> Result<(), StoreError> {
        let bytes = records::encode(records::INTENTIONS, &records::intention_record(r));
        self.put(INTENTIONS, r.intention.name.as_str(), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intention::Intention;
    use crate::store::SCHEMA_VERSION;
    use crate::store::testing::{intention, put_raw};

    #[test]
    fn entries_read_in_batches_and_one_by_name_are_the_entries() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        for name in ["a", "b", "c", "d", "e"] {
            let mut i = intention();
            i.name = ModuleName::try_from(name).unwrap();
            s.put_intention(&IntentionRecord::new(Source::Api, 1, i))
                .unwrap();
        }
        let all = s.entries().unwrap();
        let mut batched = Vec::new();
        let mut after: Option<ModuleName> = None;
        loop {
            let batch = s.entries_after(after.as_ref(), 2).unwrap();
            let Some((last, _)) = batch.last() else { break };
            assert!(batch.len() <= 2);
            after = Some(last.clone());
            batched.extend(batch);
        }
        assert_eq!(batched, all.clone().into_iter().collect::<Vec<_>>());
        let b = ModuleName::try_from("b").unwrap();
        assert_eq!(s.entry(&b).unwrap().as_ref(), all.get(&b));
        assert_eq!(s.entry(&ModuleName::try_from("z").unwrap()).unwrap(), None);
    }

    #[test]
    fn a_record_of_another_version_is_named_not_guessed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        drop(Store::open(&p).unwrap());
        put_raw(&p, "m", &[9, 1], None);
        let e = Store::open(&p).unwrap().intentions().unwrap_err();
        assert!(e.to_string().contains("intentions/m"), "{e}");
        assert!(
            e.to_string().contains("record version 9, expected 7"),
            "{e}"
        );
    }

    #[test]
    fn a_version_1_store_is_migrated_on_open_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let i = intention();
        let old = records::v1::IntentionRecord {
            source: records::v1::Source::Api,
            revision: 7,
            intention: records::intention_record_v4(&IntentionRecord::new(
                Source::Api,
                7,
                i.clone(),
            ))
            .intention
            .base
            .base,
        };
        put_raw(&p, "m", &records::encode(1, &old), Some(1));
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let r = &s.intentions().unwrap()[&i.name];
        assert_eq!(
            (r.revision, r.plane_revision, &r.source),
            (7, None, &Source::Api)
        );
        assert_eq!(*r.intention, i);
        drop(s);
        // Opened again, it is read as it is.
        let s = Store::open(&p).unwrap();
        assert_eq!(s.intentions().unwrap()[&i.name].revision, 7);
    }

    #[test]
    fn a_version_2_store_is_migrated_keeping_the_plane_revision() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let i = intention();
        let v4 = records::intention_record_v4(&IntentionRecord {
            source: Source::Plane,
            revision: 4,
            plane_revision: Some(99),
            intention: i.clone().into(),
        });
        let v2 = records::v2::IntentionRecord {
            source: v4.source,
            revision: v4.revision,
            intention: v4.intention.base.base,
            plane_revision: v4.plane_revision,
        };
        put_raw(&p, "m", &records::encode(2, &v2), Some(2));
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let r = &s.intentions().unwrap()[&i.name];
        assert_eq!((r.revision, r.plane_revision), (4, Some(99)));
        assert_eq!(*r.intention, i, "stop-first, as every recreate was");
    }

    #[test]
    fn a_version_3_store_is_migrated_without_an_update_section() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let mut i = intention();
        i.update_order = crate::model::intention::UpdateOrder::StartFirst;
        let v3 = records::v3::IntentionRecord {
            source: records::v1::Source::Api,
            revision: 2,
            intention: records::intention_record_v4(&IntentionRecord::new(
                Source::Api,
                2,
                i.clone(),
            ))
            .intention
            .base,
            plane_revision: None,
        };
        put_raw(&p, "m", &records::encode(3, &v3), Some(3));
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let r = &s.intentions().unwrap()[&i.name];
        assert_eq!(*r.intention, i);
        assert_eq!(r.intention.update, None);
    }

    #[test]
    fn the_runtime_fields_are_kept_and_a_version_5_store_reads_without_them() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let s = Store::open(&p).unwrap();
        let i = Intention::parse(
            "name = \"m\"\nimage = \"busybox:1\"\nuser = \"1000\"\nmem_limit = \"64m\"\ndevices = [\"/dev/ttyUSB0\"]\n[healthcheck]\ntest = \"true\"\n",
            crate::model::intention::DocFormat::Toml,
            "t",
        )
        .unwrap();
        assert_ne!(i.runtime, Default::default());
        assert!(i.config.is_none());
        s.put_intention(&IntentionRecord::new(Source::Api, 1, i.clone()))
            .unwrap();
        assert_eq!(*s.intentions().unwrap()[&i.name].intention, i);
        let live = Intention::parse(
            "name = \"l\"\nimage = \"busybox:1\"\n[config]\npath = \"/etc/l/c.json\"\nformat = \"json\"\nreload = \"signal:SIGHUP\"\n",
            crate::model::intention::DocFormat::Toml,
            "t",
        )
        .unwrap();
        s.put_intention(&IntentionRecord::new(Source::Api, 1, live.clone()))
            .unwrap();
        assert_eq!(*s.intentions().unwrap()[&live.name].intention, live);
        drop(s);
        // A store written before the runtime fields: schema 5, record
        // version 4; migrated, every field unset.
        let p5 = d.path().join("s5.redb");
        let mut plain = intention();
        plain.runtime = Default::default();
        let v4 = records::intention_record_v4(&IntentionRecord::new(Source::Api, 3, plain.clone()));
        put_raw(&p5, "m", &records::encode(4, &v4), Some(5));
        let s = Store::open(&p5).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let r = &s.intentions().unwrap()[&plain.name];
        assert_eq!((r.revision, &*r.intention), (3, &plain));
    }

    #[test]
    fn a_mount_that_is_not_an_input_is_kept_and_a_version_6_store_reads_every_one_as_input() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let s = Store::open(&p).unwrap();
        let i = Intention::parse(
            "name = \"m\"\nimage = \"busybox:1\"\nuser = \"65534\"\n[[mounts]]\nsource = \"/srv/a\"\ntarget = \"/a\"\nread_only = true\n[[mounts]]\nsource = \"/\"\ntarget = \"/host\"\nread_only = true\ninput = false\n[[mounts]]\nsource = \"/srv/b\"\ntarget = \"/b\"\n",
            crate::model::intention::DocFormat::Toml,
            "t",
        )
        .unwrap();
        use crate::model::intention::Access;
        let modes: Vec<Access> = i.mounts.iter().map(|m| m.access).collect();
        assert_eq!(
            modes,
            [Access::ReadOnly, Access::ReadOnlyView, Access::ReadWrite]
        );
        s.put_intention(&IntentionRecord::new(Source::Api, 1, i.clone()))
            .unwrap();
        assert_eq!(*s.intentions().unwrap()[&i.name].intention, i);
        drop(s);
        // A store written before: schema 6, record version 5; migrated,
        // every read-only mount an input as it was.
        let p6 = d.path().join("s6.redb");
        let mut was = i.clone();
        was.mounts[1].source = crate::model::names::HostPath::try_from("/proc").unwrap();
        was.mounts[1].access = Access::ReadOnly;
        let v6 = records::intention_record_v6(&IntentionRecord::new(Source::Api, 4, was.clone()));
        put_raw(&p6, "m", &records::encode(5, &v6), Some(6));
        let s = Store::open(&p6).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let r = &s.intentions().unwrap()[&was.name];
        assert_eq!((r.revision, &*r.intention), (4, &was));
        // A record naming a read-write mount as a view does not check.
        let bad = records::v7::IntentionRecord {
            base: v6,
            views: vec![2],
        };
        drop(s);
        put_raw(&p6, "m", &records::encode(6, &bad), None);
        let e = Store::open(&p6).unwrap().intentions().unwrap_err();
        assert!(e.to_string().contains("mounts[2]"), "{e}");
    }

    #[test]
    fn a_schema_8_store_keeps_each_intention_as_its_document_and_one_that_does_not_read_as_it_was()
    {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s8.redb");
        let i = Intention::parse(
            "name = \"m\"\nimage = \"127.0.0.1:5000/acme/m:1.0.0\"\nuser = \"65534\"\nshm_size = \"64m\"\n[config]\npath = \"/etc/m/c.json\"\nformat = \"json\"\nreload = \"signal:SIGHUP\"\ndefaults = { a = 1 }\n[[mounts]]\nsource = \"/\"\ntarget = \"/host\"\nread_only = true\ninput = false\n[update]\nlane = \"auto\"\nrange = \"^1\"\n",
            crate::model::intention::DocFormat::Toml,
            "t",
        )
        .unwrap();
        let mut r = IntentionRecord::new(Source::Plane, 5, i.clone());
        r.plane_revision = Some(42);
        put_raw(
            &p,
            "m",
            &records::encode(6, &records::intention_record_v7(&r)),
            Some(8),
        );
        // A record of version 6 that did not check at schema 8 either.
        let mut bad =
            records::intention_record_v7(&IntentionRecord::new(Source::Api, 1, i.clone()));
        bad.views = vec![7];
        put_raw(&p, "n", &records::encode(6, &bad), None);
        let s = Store::open(&p).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let (entries, unreadable) = s.entries_readable().unwrap();
        assert_eq!(entries[&i.name].record.as_ref(), Some(&r));
        assert_eq!(unreadable.len(), 1);
        assert!(unreadable[0].1.contains("mounts[7]"), "{unreadable:?}");
        drop(s);
        // On disk: the document of version 7, and the other as it was.
        let db = redb::Database::open(&p).unwrap();
        let tx = db.begin_read().unwrap();
        let t = tx.open_table(INTENTIONS).unwrap();
        assert_eq!(t.get("m").unwrap().unwrap().value()[0], records::INTENTIONS);
        assert_eq!(
            t.get("n").unwrap().unwrap().value(),
            records::encode(6, &bad)
        );
    }

    #[test]
    fn a_stored_intention_is_decoded_once_per_change() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        let r = IntentionRecord::new(Source::Api, 1, intention());
        s.put_intention(&r).unwrap();
        let before = s.intention_decodes();
        for _ in 0..3 {
            assert_eq!(
                s.entries().unwrap()[&r.intention.name].record.as_ref(),
                Some(&r)
            );
        }
        assert_eq!(s.intention_decodes() - before, 1);
        let mut changed = r.clone();
        changed.revision = 2;
        std::sync::Arc::make_mut(&mut changed.intention).image = "busybox:2".into();
        s.put_intention(&changed).unwrap();
        for _ in 0..3 {
            let e = s.entry(&r.intention.name).unwrap().unwrap();
            assert_eq!(e.record.as_ref(), Some(&changed));
        }
        assert_eq!(s.intention_decodes() - before, 2);
    }

    #[test]
    fn an_update_section_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.redb")).unwrap();
        let i = Intention::parse(
            "name = \"m\"\nimage = \"127.0.0.1:5000/acme/sensor:1.4.2\"\n[update]\nlane = \"auto\"\nrange = \"^1.4\"\ninterval = \"90m\"\nhealth_window = \"30s\"\n",
            crate::model::intention::DocFormat::Toml,
            "t",
        )
        .unwrap();
        s.put_intention(&IntentionRecord::new(Source::Api, 1, i.clone()))
            .unwrap();
        let back = &s.intentions().unwrap()[&i.name].intention;
        assert_eq!(**back, i);
        let u = back.update.as_ref().unwrap();
        assert_eq!(
            (
                u.lane.as_str(),
                u.range.as_str(),
                u.interval.as_secs(),
                u.health_window.as_secs()
            ),
            ("auto", "^1.4", 5400, 30)
        );
    }
}
