//! What the node holds of the central plane (`plane` table): the last
//! document it accepted, byte for byte (key `envelope`, read only when its
//! modules are taken again), with its revision, ETag and times ([`Held`]),
//! and what the last contact with the plane said ([`Contact`]).
//! The group documents it holds are in the `groups` table, by group name
//! ([`StoredGroup`]). A document is adopted in ONE transaction with the
//! group documents it was composed with and the intentions they state
//! ([`Store::adopt_plane`]): a crash leaves either the old documents and
//! their intentions or the new ones, never a mix. The records are the
//! core's (`stead_core::plane::accept::Held`, `stead_core::plane::held`'s
//! [`StoredGroup`], [`Contact`] and [`Refusal`]), re-exported here: the
//! store encodes and decodes them.

use crate::model::sort::Insert as _;
use std::collections::BTreeMap;

use redb::{ReadableDatabase, ReadableTable};

use crate::model::fleet::GroupName;
use crate::model::names::{Digest, ModuleName};
use crate::store::records::{self, groups::GroupRecord, v5};
use crate::store::{Entry, GROUPS, INTENTIONS, META, OVERLAYS, Overlay, PLANE, Store, StoreError};

const HELD: &str = "held";
const ENVELOPE: &str = "envelope";
const CONTACT: &str = "contact";
/// The newest root taken from the plane, as fetched (an envelope record).
const ROOT: &str = "root";
/// The allow-list of image digests taken last (an envelope record, as the
/// root's: no new record type, so no new schema).
const ALLOW_LIST: &str = "allow-list";

pub use stead_core::plane::accept::Held;
pub use stead_core::plane::held::{Contact, Refusal, StoredGroup};

impl Store {
    /// The next epoch of report sequence numbers: one more than the last
    /// run's, kept, so a report's `seq` grows across restarts.
    pub fn next_report_epoch(&self) -> Result<u64, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("report epoch"))?;
        let epoch = {
            let mut meta = tx.open_table(META).map_err(self.io("report epoch"))?;
            let e = meta
                .get("report_epoch")
                .map_err(self.io("report epoch"))?
                .map_or(0, |v| v.value())
                + 1;
            meta.insert("report_epoch", e)
                .map_err(self.io("report epoch"))?;
            e
        };
        tx.commit().map_err(self.io("report epoch"))?;
        Ok(epoch)
    }

    /// The held document and the last contact.
    pub fn plane(&self) -> Result<(Option<Held>, Contact), StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read plane"))?;
        let t = tx.open_table(PLANE).map_err(self.io("read plane"))?;
        let held = match t.get(HELD).map_err(self.io("read plane"))? {
            Some(v) => Some(decode_held(v.value())?),
            None => None,
        };
        let contact = match t.get(CONTACT).map_err(self.io("read plane"))? {
            Some(v) => decode_contact(v.value())?,
            None => Contact::default(),
        };
        Ok((held, contact))
    }

    /// The group documents held, by group.
    pub fn plane_groups(&self) -> Result<BTreeMap<GroupName, StoredGroup>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read groups"))?;
        let t = match tx.open_table(GROUPS) {
            Ok(t) => t,
            // A store no agent that knows groups has opened for writing.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(BTreeMap::new()),
            Err(e) => return Err(self.io("read groups")(e)),
        };
        let mut out = BTreeMap::new();
        for row in t.iter().map_err(self.io("read groups"))? {
            let (k, v) = row.map_err(self.io("read groups"))?;
            let bad = |message: String| StoreError::Corrupt {
                table: "groups",
                key: k.value().to_string(),
                message,
            };
            let name = GroupName::try_from(k.value()).map_err(|e| bad(e.0))?;
            let r: GroupRecord = records::decode(records::GROUPS, v.value()).map_err(bad)?;
            out.insert(
                name,
                StoredGroup {
                    held: from_held_record(r.held).map_err(|e| bad(e.to_string()))?,
                    envelope: r.envelope,
                    took: match r.took {
                        Some(t) => {
                            Some(Digest::try_from(t.as_str()).map_err(|e| bad(e.to_string()))?)
                        }
                        None => None,
                    },
                },
            );
        }
        Ok(out)
    }

    /// The held document's bytes, as fetched.
    pub fn plane_envelope(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read plane"))?;
        let t = tx.open_table(PLANE).map_err(self.io("read plane"))?;
        match t.get(ENVELOPE).map_err(self.io("read plane"))? {
            None => Ok(None),
            Some(v) => {
                match records::decode(records::PLANE, v.value()).map_err(corrupt(ENVELOPE))? {
                    v5::PlaneRecord::Envelope(bytes) => Ok(Some(bytes)),
                    _ => Err(corrupt(ENVELOPE)("not an envelope record".into())),
                }
            }
        }
    }

    /// The newest root taken from the plane, as fetched: none while the
    /// config's keys are the root.
    pub fn plane_root(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read plane"))?;
        let t = tx.open_table(PLANE).map_err(self.io("read plane"))?;
        match t.get(ROOT).map_err(self.io("read plane"))? {
            None => Ok(None),
            Some(v) => match records::decode(records::PLANE, v.value()).map_err(corrupt(ROOT))? {
                v5::PlaneRecord::Envelope(bytes) => Ok(Some(bytes)),
                _ => Err(corrupt(ROOT)("not an envelope record".into())),
            },
        }
    }

    /// Keeps a root taken from the plane (each one, as the chain is
    /// walked: a crash between two keeps the last one taken).
    pub fn put_plane_root(&self, envelope: &[u8]) -> Result<(), StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("write plane"))?;
        {
            let mut t = tx.open_table(PLANE).map_err(self.io("write plane"))?;
            let bytes = records::encode(
                records::PLANE,
                &v5::PlaneRecord::Envelope(envelope.to_vec()),
            );
            t.insert(ROOT, bytes.as_slice())
                .map_err(self.io("write plane"))?;
        }
        tx.commit().map_err(self.io("write plane"))
    }

    /// The newest allow-list of image digests taken from the plane, as
    /// fetched: none before one is.
    pub fn plane_allow_list(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read plane"))?;
        let t = tx.open_table(PLANE).map_err(self.io("read plane"))?;
        match t.get(ALLOW_LIST).map_err(self.io("read plane"))? {
            None => Ok(None),
            Some(v) => {
                match records::decode(records::PLANE, v.value()).map_err(corrupt(ALLOW_LIST))? {
                    v5::PlaneRecord::Envelope(bytes) => Ok(Some(bytes)),
                    _ => Err(corrupt(ALLOW_LIST)("not an envelope record".into())),
                }
            }
        }
    }

    /// Keeps an allow-list taken from the plane.
    pub fn put_plane_allow_list(&self, envelope: &[u8]) -> Result<(), StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("write plane"))?;
        {
            let mut t = tx.open_table(PLANE).map_err(self.io("write plane"))?;
            let bytes = records::encode(
                records::PLANE,
                &v5::PlaneRecord::Envelope(envelope.to_vec()),
            );
            t.insert(ALLOW_LIST, bytes.as_slice())
                .map_err(self.io("write plane"))?;
        }
        tx.commit().map_err(self.io("write plane"))
    }

    /// Records a contact that adopted nothing (and, when given, the held
    /// document's record again: a new ETag for the same payload).
    pub fn plane_contact(&self, held: Option<&Held>, contact: &Contact) -> Result<(), StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("write plane"))?;
        {
            let mut t = tx.open_table(PLANE).map_err(self.io("write plane"))?;
            if let Some(h) = held {
                t.insert(HELD, encode_held(h).as_slice())
                    .map_err(self.io("write plane"))?;
            }
            t.insert(CONTACT, encode_contact(contact).as_slice())
                .map_err(self.io("write plane"))?;
        }
        tx.commit().map_err(self.io("write plane"))
    }

    /// Adopts a document: reads every module's entry, lets `f` bring them
    /// in line with it, and writes what changed, the document and the
    /// contact, all in one transaction. With `held` `None` only the
    /// entries are written (the held document taken again, for a module
    /// another source released).
    pub fn adopt_plane<T>(
        &self,
        held: Option<(&Held, &[u8])>,
        contact: Option<&Contact>,
        groups: &[(GroupName, StoredGroup)],
        f: impl FnOnce(&mut BTreeMap<ModuleName, Entry>) -> T,
    ) -> Result<T, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("adopt plane"))?;
        let out;
        let mut changed = false;
        {
            let mut it = tx.open_table(INTENTIONS).map_err(self.io("adopt plane"))?;
            let mut ot = tx.open_table(OVERLAYS).map_err(self.io("adopt plane"))?;
            // What is stored now is kept as its bytes, and compared with
            // what `f` leaves encoded the same way: a decoded copy of every
            // entry (a 1000-module document's) is not held twice.
            let mut before: BTreeMap<ModuleName, (Vec<u8>, Option<Vec<u8>>)> = BTreeMap::new();
            let mut after = BTreeMap::new();
            for row in it.iter().map_err(self.io("adopt plane"))? {
                let (k, v) = row.map_err(self.io("adopt plane"))?;
                let name = ModuleName::try_from(k.value()).map_err(|e| StoreError::Corrupt {
                    table: "intentions",
                    key: k.value().to_string(),
                    message: e.to_string(),
                })?;
                let record = self.intention(k.value(), v.value())?;
                let stored_overlay = ot.get(k.value()).map_err(self.io("adopt plane"))?;
                let overlay = match &stored_overlay {
                    Some(o) => super::intentions::decode_overlay(k.value(), o.value())?,
                    None => Overlay::new(),
                };
                before.insert(
                    name.clone(),
                    (
                        v.value().to_vec(),
                        stored_overlay.map(|o| o.value().to_vec()),
                    ),
                );
                after.insert(
                    name,
                    Entry {
                        record: Some(record),
                        overlay,
                    },
                );
            }
            out = f(&mut after);
            let names: std::collections::BTreeSet<&ModuleName> =
                before.keys().chain(after.keys()).into_set();
            for name in names {
                let a = after.get(name);
                let record = a
                    .and_then(|e| e.record.as_ref())
                    .map(|r| records::encode(records::INTENTIONS, &records::intention_record(r)));
                let overlay = a
                    .filter(|e| e.record.is_some() && !e.overlay.is_empty())
                    .map(|e| records::encode(records::OVERLAYS, &records::overlay(&e.overlay)));
                let stored = before.get(name);
                if stored.map(|(r, _)| r) == record.as_ref()
                    && stored.and_then(|(_, o)| o.as_ref()) == overlay.as_ref()
                {
                    continue;
                }
                changed = true;
                let key = name.as_str();
                match record {
                    Some(bytes) => {
                        it.insert(key, bytes.as_slice())
                            .map_err(self.io("adopt plane"))?;
                    }
                    None => {
                        it.remove(key).map_err(self.io("adopt plane"))?;
                    }
                }
                match overlay {
                    Some(bytes) => {
                        ot.insert(key, bytes.as_slice())
                            .map_err(self.io("adopt plane"))?;
                    }
                    None => {
                        ot.remove(key).map_err(self.io("adopt plane"))?;
                    }
                }
            }
            if held.is_some() || contact.is_some() {
                changed = true;
                let mut t = tx.open_table(PLANE).map_err(self.io("adopt plane"))?;
                if let Some((h, envelope)) = held {
                    t.insert(HELD, encode_held(h).as_slice())
                        .map_err(self.io("adopt plane"))?;
                    let bytes = records::encode(
                        records::PLANE,
                        &v5::PlaneRecord::Envelope(envelope.to_vec()),
                    );
                    t.insert(ENVELOPE, bytes.as_slice())
                        .map_err(self.io("adopt plane"))?;
                }
                if let Some(c) = contact {
                    t.insert(CONTACT, encode_contact(c).as_slice())
                        .map_err(self.io("adopt plane"))?;
                }
            }
            if !groups.is_empty() {
                changed = true;
                let mut t = tx.open_table(GROUPS).map_err(self.io("adopt plane"))?;
                for (name, g) in groups {
                    let record = GroupRecord {
                        held: held_record(&g.held),
                        envelope: g.envelope.clone(),
                        took: g.took.as_ref().map(Digest::to_string),
                    };
                    let bytes = records::encode(records::GROUPS, &record);
                    t.insert(name.as_str(), bytes.as_slice())
                        .map_err(self.io("adopt plane"))?;
                }
            }
        }
        if changed {
            crate::host::crash_point("plane:before-commit");
            tx.commit().map_err(self.io("adopt plane"))?;
        } else {
            tx.abort().map_err(self.io("adopt plane"))?;
        }
        Ok(out)
    }
}

fn held_record(h: &Held) -> v5::HeldRecord {
    v5::HeldRecord {
        url: h.url.clone(),
        revision: h.revision,
        payload_digest: h.payload_digest.to_string(),
        etag: h.etag.clone(),
        issued_at: h.issued_at,
        expires: h.expires,
        newest_issued_at: h.newest_issued_at,
        accepted_at: h.accepted_at,
        key_id: h.key_id.clone(),
    }
}

fn encode_held(h: &Held) -> Vec<u8> {
    records::encode(records::PLANE, &v5::PlaneRecord::Held(held_record(h)))
}

fn encode_contact(c: &Contact) -> Vec<u8> {
    records::encode(
        records::PLANE,
        &v5::PlaneRecord::Contact(v5::ContactRecord {
            at: c.at,
            refusal: c.refusal.as_ref().map(|r| v5::RefusalRecord {
                class: r.class.as_str().to_string(),
                detail: r.detail.clone(),
                revision: r.revision,
                at: r.at,
            }),
            error: c.error.clone(),
            plane_date: c.plane_date,
        }),
    )
}

fn corrupt(key: &str) -> impl FnOnce(String) -> StoreError + '_ {
    move |message| StoreError::Corrupt {
        table: "plane",
        key: key.to_string(),
        message,
    }
}

fn decode_held(bytes: &[u8]) -> Result<Held, StoreError> {
    match records::decode(records::PLANE, bytes).map_err(corrupt(HELD))? {
        v5::PlaneRecord::Held(h) => from_held_record(h).map_err(corrupt(HELD)),
        _ => Err(corrupt(HELD)("not a held document's record".into())),
    }
}

fn from_held_record(h: v5::HeldRecord) -> Result<Held, String> {
    Ok(Held {
        payload_digest: Digest::try_from(h.payload_digest.as_str()).map_err(|e| e.to_string())?,
        url: h.url,
        revision: h.revision,
        etag: h.etag,
        issued_at: h.issued_at,
        expires: h.expires,
        newest_issued_at: h.newest_issued_at,
        accepted_at: h.accepted_at,
        key_id: h.key_id,
    })
}

fn decode_contact(bytes: &[u8]) -> Result<Contact, StoreError> {
    match records::decode(records::PLANE, bytes).map_err(corrupt(CONTACT))? {
        v5::PlaneRecord::Contact(c) => Ok(Contact {
            at: c.at,
            // A class this version does not know (none was ever renamed)
            // forgets the refusal, which only informs: the next poll says
            // it again.
            refusal: c.refusal.and_then(|r| {
                Some(Refusal {
                    class: crate::model::refusal::RefusalClass::parse(&r.class)?,
                    detail: r.detail,
                    revision: r.revision,
                    at: r.at,
                })
            }),
            error: c.error,
            plane_date: c.plane_date,
        }),
        _ => Err(corrupt(CONTACT)("not a contact record".into())),
    }
}

#[cfg(test)]
mod tests {
    /// The allow-list and the root are kept apart, each read back as kept,
    /// through a reopen.
    #[test]
    fn the_allow_list_is_kept_beside_the_root_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.redb");
        let s = crate::store::Store::open(&p).unwrap();
        assert_eq!(s.plane_allow_list().unwrap(), None);
        s.put_plane_root(b"root").unwrap();
        s.put_plane_allow_list(b"list 1").unwrap();
        s.put_plane_allow_list(b"list 2").unwrap();
        drop(s);
        let s = crate::store::Store::open(&p).unwrap();
        assert_eq!(
            s.plane_allow_list().unwrap().as_deref(),
            Some(&b"list 2"[..])
        );
        assert_eq!(s.plane_root().unwrap().as_deref(), Some(&b"root"[..]));
    }
}
