//! What the node knows of each module's container: the spec it was (or is
//! being) created from, what the engine said of it on the last pass, and
//! the live files it was last given.

use std::collections::BTreeMap;

use redb::{ReadableDatabase, ReadableTable};

use super::db::corrupt;
use super::{APPLIED, AppliedRecord, LIVE, OBSERVED, ObservedRecord, Store, StoreError, records};
use crate::model::names::{Digest, ModuleName};

fn decode_applied(key: &str, bytes: &[u8]) -> Result<AppliedRecord, StoreError> {
    records::decode(records::APPLIED, bytes)
        .and_then(records::from_applied)
        .map_err(corrupt("applied", key))
}

fn decode_observed(key: &str, bytes: &[u8]) -> Result<ObservedRecord, StoreError> {
    records::decode(records::OBSERVED, bytes)
        .and_then(records::from_observed)
        .map_err(corrupt("observed", key))
}

impl Store {
    /// Every applied record, by module name.
    pub fn all_applied(&self) -> Result<BTreeMap<String, AppliedRecord>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(APPLIED).map_err(self.io("read"))?;
        let mut out = BTreeMap::new();
        for row in table.iter().map_err(self.io("read"))? {
            let (k, v) = row.map_err(self.io("read"))?;
            out.insert(k.value().to_string(), decode_applied(k.value(), v.value())?);
        }
        Ok(out)
    }

    /// Records what a module's container is (being) created from.
    pub fn put_applied(&self, name: &ModuleName, r: &AppliedRecord) -> Result<(), StoreError> {
        let bytes = records::encode(records::APPLIED, &records::applied(r));
        self.put(APPLIED, name.as_str(), &bytes)
    }

    /// Forgets a module's applied and observed records.
    pub fn forget(&self, name: &str) -> Result<(), StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("delete"))?;
        tx.open_table(APPLIED)
            .map_err(self.io("delete"))?
            .remove(name)
            .map_err(self.io("delete"))?;
        tx.open_table(OBSERVED)
            .map_err(self.io("delete"))?
            .remove(name)
            .map_err(self.io("delete"))?;
        tx.commit().map_err(self.io("delete"))
    }

    /// Every observed record, by module name.
    pub fn all_observed(&self) -> Result<BTreeMap<String, ObservedRecord>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read"))?;
        let table = tx.open_table(OBSERVED).map_err(self.io("read"))?;
        let mut out = BTreeMap::new();
        for row in table.iter().map_err(self.io("read"))? {
            let (k, v) = row.map_err(self.io("read"))?;
            out.insert(
                k.value().to_string(),
                decode_observed(k.value(), v.value())?,
            );
        }
        Ok(out)
    }

    /// Writes the observations that changed, in one transaction.
    pub fn put_observed(&self, changed: &[(String, ObservedRecord)]) -> Result<(), StoreError> {
        if changed.is_empty() {
            return Ok(());
        }
        let tx = self.db()?.begin_write().map_err(self.io("write"))?;
        {
            let mut t = tx.open_table(OBSERVED).map_err(self.io("write"))?;
            for (name, r) in changed {
                let bytes = records::encode(records::OBSERVED, &records::observed(r));
                t.insert(name.as_str(), bytes.as_slice())
                    .map_err(self.io("write"))?;
            }
        }
        tx.commit().map_err(self.io("write"))
    }

    /// The container a module's live files were last delivered to, and
    /// their digest.
    pub fn live(&self, name: &ModuleName) -> Result<Option<(String, Digest)>, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read live"))?;
        let t = tx.open_table(LIVE).map_err(self.io("read live"))?;
        let Some(v) = t.get(name.as_str()).map_err(self.io("read live"))? else {
            return Ok(None);
        };
        let r: records::v6::LiveRecord =
            records::decode(records::LIVE, v.value()).map_err(corrupt("live", name.as_str()))?;
        let d = Digest::try_from(r.digest.as_str())
            .map_err(|e| corrupt("live", name.as_str())(e.to_string()))?;
        Ok(Some((r.container, d)))
    }

    /// Records that a module's container holds these live files.
    pub fn put_live(
        &self,
        name: &ModuleName,
        container: &str,
        digest: &Digest,
    ) -> Result<(), StoreError> {
        let bytes = records::encode(
            records::LIVE,
            &records::v6::LiveRecord {
                container: container.to_string(),
                digest: digest.to_string(),
            },
        );
        self.put(LIVE, name.as_str(), &bytes)
    }
}
