//! The crash guard's one record (`guard` table): read at start, and changed
//! in one transaction each time (before a start's first pass and after it,
//! before a plane document is judged and after). A record that does not
//! read is said and taken as empty: the guard must never be what stops an
//! agent from starting.

use redb::{ReadableDatabase, ReadableTable};

use std::collections::BTreeMap;

use crate::model::guard::Guard;
use crate::model::names::{Digest, ModuleName};
use crate::store::records::{self, guard};
use crate::store::{Entry, GUARD, Source, Store, StoreError};

const KEY: &str = "guard";

impl Store {
    /// The crash guard.
    pub fn guard(&self) -> Result<Guard, StoreError> {
        let tx = self.db()?.begin_read().map_err(self.io("read guard"))?;
        let t = tx.open_table(GUARD).map_err(self.io("read guard"))?;
        let found = t.get(KEY).map_err(self.io("read guard"))?;
        Ok(found.map_or_else(Guard::default, |v| decode(v.value())))
    }

    /// Changes the crash guard in one transaction; returns what `f` made.
    pub fn change_guard<T>(&self, f: impl FnOnce(&mut Guard) -> T) -> Result<T, StoreError> {
        let tx = self.db()?.begin_write().map_err(self.io("guard"))?;
        let out = {
            let mut t = tx.open_table(GUARD).map_err(self.io("guard"))?;
            let found = t
                .get(KEY)
                .map_err(self.io("guard"))?
                .map(|v| decode(v.value()));
            let mut g = found.unwrap_or_default();
            let out = f(&mut g);
            let bytes = records::encode(records::GUARD, &guard::record(&g));
            t.insert(KEY, bytes.as_slice()).map_err(self.io("guard"))?;
            out
        };
        tx.commit().map_err(self.io("guard"))?;
        Ok(out)
    }
}

fn decode(bytes: &[u8]) -> Guard {
    match records::decode(records::GUARD, bytes).and_then(guard::from_record) {
        Ok(g) => g,
        Err(e) => {
            tracing::error!(
                "store: the crash guard's record does not read ({e}); starting it over"
            );
            Guard::default()
        }
    }
}

/// What the crash guard knows of a module's entry: a different key is a
/// changed intention (or overlay, or source), which lifts its hold.
pub fn entry_key(e: &Entry) -> Digest {
    let source = e.record.as_ref().map(|r| match &r.source {
        Source::File(f) => format!("file:{f}"),
        Source::Api => "api".into(),
        Source::Plane => format!("plane:{}", r.plane_revision.unwrap_or(0)),
    });
    Digest::canonical(
        "stead.guard.entry",
        &(source, e.effective().map(|i| i.to_json())),
    )
}

/// The key of every entry together.
pub fn all_key(entries: &BTreeMap<ModuleName, Entry>) -> Digest {
    let keys: Vec<(&str, Digest)> = entries
        .iter()
        .map(|(n, e)| (n.as_str(), entry_key(e)))
        .collect();
    Digest::canonical("stead.guard.all", &keys)
}

/// Whether the plane states the module.
pub fn from_plane(e: &Entry) -> bool {
    e.record.as_ref().is_some_and(|r| r.source == Source::Plane)
}
