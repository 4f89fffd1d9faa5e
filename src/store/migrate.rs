//! Bringing a store written by an older stead up to this one's schema, on
//! open, in one write transaction: either every step lands or none does,
//! and a crash in the middle leaves the old store to migrate again. One
//! function per step, `vN → vN+1`, each rewriting only the tables whose
//! record version changed.

use std::path::Path;

use redb::{Database, ReadableTable, WriteTransaction};

use crate::store::db::io;
use crate::store::intentions::decode_intention;
use crate::store::records::{self, v1, v2, v3, v4, v6, v7, v8};
use crate::store::{
    APPLIED, EVENTS, GROUPS, GUARD, INTENTIONS, LIVE, META, OBSERVED, OVERLAYS, PLANE, RELOADS,
    SCHEMA_VERSION, StoreError, UPDATES,
};

/// Creates the tables of a new store, or migrates an older one, and
/// records the schema. Refuses a newer one (found here only when it was
/// written between the read-only look and this open).
pub fn bring_up_to_date(db: &Database, path: &Path) -> Result<(), StoreError> {
    let tx = db.begin_write().map_err(io("open"))?;
    let found = {
        let meta = tx.open_table(META).map_err(io("open"))?;
        meta.get("schema").map_err(io("open"))?.map(|v| v.value())
    };
    match found {
        Some(v) if v > SCHEMA_VERSION => {
            tx.abort().map_err(io("open"))?;
            return Err(StoreError::NewerSchema {
                path: path.display().to_string(),
                found: v,
            });
        }
        Some(v) if v == SCHEMA_VERSION => {
            // Nothing to do: no commit, so no write.
            tx.abort().map_err(io("open"))?;
            return Ok(());
        }
        Some(v) => {
            let mut at = v;
            while at < SCHEMA_VERSION {
                match at {
                    1 => v1_to_v2(&tx)?,
                    2 => v2_to_v3(&tx)?,
                    3 => v3_to_v4(&tx)?,
                    // Schema 5 adds the `plane` table, made below; no
                    // record changes.
                    4 => {}
                    5 => v5_to_v6(&tx)?,
                    6 => v6_to_v7(&tx)?,
                    7 => v7_to_v8(&tx)?,
                    8 => v8_to_v9(&tx)?,
                    other => {
                        return Err(StoreError::Corrupt {
                            table: "meta",
                            key: "schema".into(),
                            message: format!("unknown schema version {other}"),
                        });
                    }
                }
                at += 1;
                tracing::info!("store {}: migrated to schema version {at}", path.display());
            }
        }
        // A new store: the modules stated through the API, if containers
        // say so, are taken back from their labels at the first pass.
        None => {
            let mut meta = tx.open_table(META).map_err(io("open"))?;
            meta.insert(crate::store::REBUILD, 1).map_err(io("open"))?;
        }
    }
    for def in [
        INTENTIONS, APPLIED, OBSERVED, OVERLAYS, UPDATES, PLANE, LIVE, GUARD, GROUPS,
    ] {
        tx.open_table(def).map_err(io("open"))?;
    }
    tx.open_table(EVENTS).map_err(io("open"))?;
    tx.open_table(RELOADS).map_err(io("open"))?;
    tx.open_table(META)
        .map_err(io("open"))?
        .insert("schema", SCHEMA_VERSION)
        .map_err(io("open"))?;
    tx.commit().map_err(io("open"))
}

/// Schema 1 (0.1.0) → 2: intention records gain the plane revision (none,
/// for every record written before there was a plane).
fn v1_to_v2(tx: &WriteTransaction) -> Result<(), StoreError> {
    rewrite_intentions(tx, 1, 2, |r: v1::IntentionRecord| {
        v2::IntentionRecord::from(r)
    })
}

/// Schema 2 → 3: intentions gain their update order (stop-first, what every
/// recreate did before).
fn v2_to_v3(tx: &WriteTransaction) -> Result<(), StoreError> {
    rewrite_intentions(tx, 2, 3, |r: v2::IntentionRecord| {
        v3::IntentionRecord::from(r)
    })
}

/// Schema 3 → 4: intentions gain their `[update]` section (none, for every
/// record written before modules were updated from registries).
fn v3_to_v4(tx: &WriteTransaction) -> Result<(), StoreError> {
    rewrite_intentions(tx, 3, 4, |r: v3::IntentionRecord| {
        v4::IntentionRecord::from(r)
    })
}

/// Schema 5 → 6: intentions gain the runtime fields (none, for every
/// record written before a module could ask for them).
fn v5_to_v6(tx: &WriteTransaction) -> Result<(), StoreError> {
    rewrite_intentions(tx, 4, 5, |r: v4::IntentionRecord| {
        v6::IntentionRecord::from(r)
    })
}

/// Schema 6 → 7: intentions say which read-only mounts are not inputs
/// (none, for every record written before a mount could say so).
fn v6_to_v7(tx: &WriteTransaction) -> Result<(), StoreError> {
    rewrite_intentions(tx, 5, 6, |r: v6::IntentionRecord| {
        v7::IntentionRecord::from(r)
    })
}

/// Schema 7 → 8: reload items say the image and range they were resolved
/// against (not known, for every request before), and update states the
/// digests whose auto-update failed (none).
fn v7_to_v8(tx: &WriteTransaction) -> Result<(), StoreError> {
    let mut t = tx.open_table(RELOADS).map_err(io("migrate"))?;
    let mut rewritten = Vec::new();
    for row in t.iter().map_err(io("migrate"))? {
        let (k, v) = row.map_err(io("migrate"))?;
        let old: v4::ReloadRecord =
            records::decode(1, v.value()).map_err(|message| StoreError::Corrupt {
                table: "reloads",
                key: k.value().to_string(),
                message,
            })?;
        rewritten.push((k.value(), records::encode(2, &v8::ReloadRecord::from(old))));
    }
    for (k, bytes) in rewritten {
        t.insert(k, bytes.as_slice()).map_err(io("migrate"))?;
    }
    let mut t = tx.open_table(UPDATES).map_err(io("migrate"))?;
    let mut rewritten = Vec::new();
    for row in t.iter().map_err(io("migrate"))? {
        let (k, v) = row.map_err(io("migrate"))?;
        let old: v4::UpdateRecord =
            records::decode(1, v.value()).map_err(|message| StoreError::Corrupt {
                table: "updates",
                key: k.value().to_string(),
                message,
            })?;
        rewritten.push((
            k.value().to_string(),
            records::encode(2, &v8::UpdateRecord::from(old)),
        ));
    }
    for (k, bytes) in rewritten {
        t.insert(k.as_str(), bytes.as_slice())
            .map_err(io("migrate"))?;
    }
    Ok(())
}

/// Schema 8 → 9: each intention is kept as its canonical document. A
/// record that does not read (it did not check before either) is left as
/// it was, and is read as version 6 is: the module stays held as it was,
/// and the store still opens.
fn v8_to_v9(tx: &WriteTransaction) -> Result<(), StoreError> {
    let mut t = tx.open_table(INTENTIONS).map_err(io("migrate"))?;
    let mut rewritten = Vec::new();
    for row in t.iter().map_err(io("migrate"))? {
        let (k, v) = row.map_err(io("migrate"))?;
        match decode_intention(k.value(), v.value()) {
            Ok(r) => rewritten.push((
                k.value().to_string(),
                records::encode(records::INTENTIONS, &records::intention_record(&r)),
            )),
            Err(e) => tracing::warn!("intention {} left as it was: {e}", k.value()),
        }
    }
    for (k, bytes) in rewritten {
        t.insert(k.as_str(), bytes.as_slice())
            .map_err(io("migrate"))?;
    }
    Ok(())
}

/// Rewrites every intention record from one record version to the next.
fn rewrite_intentions<A, B>(
    tx: &WriteTransaction,
    from: u8,
    to: u8,
    step: impl Fn(A) -> B,
) -> Result<(), StoreError>
where
    A: serde::de::DeserializeOwned,
    B: serde::Serialize,
{
    let mut t = tx.open_table(INTENTIONS).map_err(io("migrate"))?;
    let mut rewritten = Vec::new();
    for row in t.iter().map_err(io("migrate"))? {
        let (k, v) = row.map_err(io("migrate"))?;
        let old: A = records::decode(from, v.value()).map_err(|message| StoreError::Corrupt {
            table: "intentions",
            key: k.value().to_string(),
            message,
        })?;
        rewritten.push((k.value().to_string(), records::encode(to, &step(old))));
    }
    for (k, bytes) in rewritten {
        t.insert(k.as_str(), bytes.as_slice())
            .map_err(io("migrate"))?;
    }
    Ok(())
}
