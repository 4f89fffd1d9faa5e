//! What disk stewardship keeps in the store: the images this node pulled
//! (`images`, by ID: only those are collected unless `[images] collect =
//! "all"`), and per module the image it runs and the one it ran before
//! (`previous`: what a rollback goes back to, never collected). Tables
//! added without a schema change: an older agent never opens them. A
//! record that does not read is said and left out (an image then counts
//! as not pulled here: kept).

use std::collections::BTreeMap;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use crate::store::records::{self, images as rec};
use crate::store::{Store, StoreError};

pub(crate) const IMAGES: TableDefinition<&str, &[u8]> = TableDefinition::new("images");
pub(crate) const PREVIOUS: TableDefinition<&str, &[u8]> = TableDefinition::new("previous");
pub(crate) const IMAGE_CHECKS: TableDefinition<&str, &[u8]> = TableDefinition::new("image_checks");

pub use rec::{CheckedRecord as Checked, HistoryRecord as History, PulledRecord as Pulled};

impl Store {
    /// The images this node pulled, by ID.
    pub fn pulled_images(&self) -> Result<BTreeMap<String, Pulled>, StoreError> {
        self.read_all(IMAGES, records::IMAGES, "images")
    }

    /// Notes images this node pulled, in one transaction.
    pub fn note_pulled(&self, pulled: &[(String, Pulled)]) -> Result<(), StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("images"))?;
        {
            let mut t = tx.open_table(IMAGES).map_err(self.io("images"))?;
            for (id, p) in pulled {
                let bytes = records::encode(records::IMAGES, p);
                t.insert(id.as_str(), bytes.as_slice())
                    .map_err(self.io("images"))?;
            }
        }
        tx.commit().map_err(self.io("images"))
    }

    /// Forgets images that are gone.
    pub fn forget_pulled(&self, ids: &[String]) -> Result<(), StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("images"))?;
        {
            let mut t = tx.open_table(IMAGES).map_err(self.io("images"))?;
            for id in ids {
                t.remove(id.as_str()).map_err(self.io("images"))?;
            }
        }
        tx.commit().map_err(self.io("images"))
    }

    /// Per module, the image it runs and the one it ran before.
    pub fn image_history(&self) -> Result<BTreeMap<String, History>, StoreError> {
        self.read_all(PREVIOUS, records::PREVIOUS, "previous images")
    }

    /// Sets (or, with `None`, forgets) modules' image history, in one
    /// transaction.
    pub fn note_history(&self, changes: &[(String, Option<History>)]) -> Result<(), StoreError> {
        let tx = self
            .db()?
            .begin_write()
            .map_err(self.io("previous images"))?;
        {
            let mut t = tx
                .open_table(PREVIOUS)
                .map_err(self.io("previous images"))?;
            for (module, h) in changes {
                match h {
                    Some(h) => {
                        let bytes = records::encode(records::PREVIOUS, h);
                        t.insert(module.as_str(), bytes.as_slice())
                            .map_err(self.io("previous images"))?;
                    }
                    None => {
                        t.remove(module.as_str())
                            .map_err(self.io("previous images"))?;
                    }
                }
            }
        }
        tx.commit().map_err(self.io("previous images"))
    }

    /// Per image reference, the manifest found signed as the image policy
    /// asks (a check kept across restarts, so that a device without its
    /// registry still knows what it verified).
    pub fn image_checks(&self) -> Result<BTreeMap<String, Checked>, StoreError> {
        self.read_all(IMAGE_CHECKS, records::IMAGE_CHECKS, "image checks")
    }

    /// Keeps (or, with `None`, forgets) image references' checks, in one
    /// transaction.
    pub fn note_image_checks(
        &self,
        changes: &[(String, Option<Checked>)],
    ) -> Result<(), StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("image checks"))?;
        {
            let mut t = tx
                .open_table(IMAGE_CHECKS)
                .map_err(self.io("image checks"))?;
            for (reference, c) in changes {
                match c {
                    Some(c) => {
                        let bytes = records::encode(records::IMAGE_CHECKS, c);
                        t.insert(reference.as_str(), bytes.as_slice())
                            .map_err(self.io("image checks"))?;
                    }
                    None => {
                        t.remove(reference.as_str())
                            .map_err(self.io("image checks"))?;
                    }
                }
            }
        }
        tx.commit().map_err(self.io("image checks"))
    }

    fn read_all<T: serde::de::DeserializeOwned>(
        &self,
        table: TableDefinition<&str, &[u8]>,
        version: u8,
        what: &'static str,
    ) -> Result<BTreeMap<String, T>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io(what))?;
        let t = match tx.open_table(table) {
            Ok(t) => t,
            // A store an agent before this table wrote.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(BTreeMap::new()),
            Err(e) => return Err(self.io(what)(e)),
        };
        let mut out = BTreeMap::new();
        for row in t.iter().map_err(self.io(what))? {
            let (k, v) = row.map_err(self.io(what))?;
            match records::decode(version, v.value()) {
                Ok(r) => {
                    out.insert(k.value().to_string(), r);
                }
                Err(e) => tracing::error!(
                    "store: {what} record {:?} does not read ({e}); left out",
                    k.value()
                ),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pulled_images_and_history_round_trip_and_are_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("s.redb")).unwrap();
        assert!(s.pulled_images().unwrap().is_empty());
        let p = Pulled {
            reference: "localhost:5000/app:2".into(),
            at: 7,
            layers: vec![("sha256:aa".into(), 42)],
        };
        s.note_pulled(&[("sha256:11".into(), p.clone())]).unwrap();
        let h = History {
            current: "sha256:11".into(),
            previous: Some("sha256:10".into()),
            since: 9,
        };
        s.note_history(&[("app".into(), Some(h.clone()))]).unwrap();
        drop(s);
        let s = Store::open(&dir.path().join("s.redb")).unwrap();
        assert_eq!(s.pulled_images().unwrap().get("sha256:11"), Some(&p));
        assert_eq!(s.image_history().unwrap().get("app"), Some(&h));
        let c = Checked {
            policy: "sha256:pp".into(),
            manifest: "sha256:mm".into(),
            config: "sha256:cc".into(),
            by: vec![("the node document".into(), "ed25519:0011".into())],
            at: 5,
        };
        assert!(s.image_checks().unwrap().is_empty());
        s.note_image_checks(&[("r/app:1".into(), Some(c.clone()))])
            .unwrap();
        assert_eq!(s.image_checks().unwrap().get("r/app:1"), Some(&c));
        s.note_image_checks(&[("r/app:1".into(), None)]).unwrap();
        assert!(s.image_checks().unwrap().is_empty());
        s.forget_pulled(&["sha256:11".into()]).unwrap();
        s.note_history(&[("app".into(), None)]).unwrap();
        assert!(s.pulled_images().unwrap().is_empty());
        assert!(s.image_history().unwrap().is_empty());
    }
}
