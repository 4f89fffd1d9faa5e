//! Intentions and settings stated through the local HTTP API: a module
//! stated whole (put), deleted, or its settings patched. Each is one store
//! transaction under the ownership rule, then one event. The HTTP layer
//! only parses the request and maps the outcome to a status.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::intake::{NotYours, may_write};
use crate::model::intention::Intention;
use crate::model::names::{ModuleName, SettingKey};
use crate::model::value::Value;
use crate::store::{EventKind, IntentionRecord, Source, Store, StoreError};

/// Why a write through the API was not taken. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// No such module.
    #[error("no module {0:?}")]
    NotFound(String),
    /// Another source owns the module (or the setting).
    #[error(transparent)]
    NotYours(#[from] NotYours),
    /// Well-formed, but not a valid intention or setting.
    #[error("{field}: {message}")]
    Invalid {
        /// The field at fault.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a put did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutOutcome {
    /// The module's revision now.
    pub revision: u64,
    /// The module did not exist before.
    pub created: bool,
    /// Anything changed (a put of the same intention changes nothing).
    pub changed: bool,
}

/// States a module through the API, replacing its intention and any
/// layered settings.
pub fn put(store: &Store, intention: Intention) -> Result<PutOutcome, WriteError> {
    let name = intention.name.clone();
    let outcome = store.modify(&name, |e| {
        may_write(&name, e.record.as_ref().map(|r| &r.source), &Source::Api)?;
        if let Some(r) = &e.record {
            if *r.intention == intention && e.overlay.is_empty() {
                return Ok(PutOutcome {
                    revision: r.revision,
                    created: false,
                    changed: false,
                });
            }
        }
        let created = e.record.is_none();
        let revision = e.record.as_ref().map_or(1, |r| r.revision + 1);
        e.record = Some(IntentionRecord::new(
            Source::Api,
            revision,
            intention.clone(),
        ));
        // A full intention replaces the settings too.
        e.overlay.clear();
        Ok::<_, WriteError>(PutOutcome {
            revision,
            created,
            changed: true,
        })
    })??;
    if outcome.changed {
        let verb = if outcome.created {
            "stated"
        } else {
            "replaced"
        };
        store.append_event(
            Some(name.as_str()),
            EventKind::Intention,
            format!(
                "intention {verb} through the API (revision {})",
                outcome.revision
            ),
        )?;
    }
    Ok(outcome)
}

/// Deletes a module stated through the API (its container goes at the
/// next pass).
pub fn delete(store: &Store, name: &ModuleName) -> Result<(), WriteError> {
    store.modify(name, |e| {
        let Some(r) = &e.record else {
            return Err(WriteError::NotFound(name.to_string()));
        };
        may_write(name, Some(&r.source), &Source::Api)?;
        e.record = None;
        Ok(())
    })??;
    store.append_event(
        Some(name.as_str()),
        EventKind::Intention,
        "intention deleted through the API",
    )?;
    Ok(())
}

/// A settings patch: a value sets the key, `None` removes it.
pub type Patch = BTreeMap<SettingKey, Option<Value>>;

/// What a settings patch did.
#[derive(Debug, Clone, PartialEq)]
pub struct Patched {
    /// The module's revision now.
    pub revision: u64,
    /// The effective settings now.
    pub settings: BTreeMap<SettingKey, Value>,
    /// Anything changed (an empty patch, or one that sets what is already
    /// set, changes nothing and keeps the revision).
    pub changed: bool,
}

/// Patches a module's settings. A module stated through the API owns its
/// settings and they change in its intention; any other module's settings
/// are layered in its overlay, over what its source says.
pub fn patch_settings(
    store: &Store,
    name: &ModuleName,
    patch: &Patch,
) -> Result<Patched, WriteError> {
    let out = store.modify(name, |e| {
        let before = e.clone();
        let Some(record) = e.record.as_mut() else {
            return Err(WriteError::NotFound(name.to_string()));
        };
        let owner = match &record.source {
            Source::Api => None,
            Source::File(p) => Some(format!("the file {p}")),
            Source::Plane => Some("the central plane".to_string()),
        };
        for (k, v) in patch {
            match (v, &owner) {
                (Some(v), None) => {
                    Arc::make_mut(&mut record.intention)
                        .settings
                        .insert(k.clone(), v.clone());
                }
                (None, None) => {
                    Arc::make_mut(&mut record.intention).settings.remove(k);
                }
                (Some(v), Some(_)) => {
                    e.overlay.insert(k.clone(), v.clone());
                }
                (None, Some(owner)) => {
                    if e.overlay.remove(k).is_none() && record.intention.settings.contains_key(k) {
                        return Err(WriteError::NotYours(NotYours(format!(
                            "setting {:?} is set by {owner}; remove it there",
                            k.as_str()
                        ))));
                    }
                }
            }
        }
        if *e == before {
            let effective = e.effective().expect("a record is present");
            return Ok(Patched {
                revision: before.record.map_or(0, |r| r.revision),
                settings: effective.settings.clone(),
                changed: false,
            });
        }
        let record = e.record.as_mut().expect("checked above");
        record.revision += 1;
        let revision = record.revision;
        let effective = e.effective().expect("a record is present");
        effective
            .check_settings()
            .map_err(|r| WriteError::Invalid {
                field: r.field,
                message: r.message,
            })?;
        Ok(Patched {
            revision,
            settings: effective.settings.clone(),
            changed: true,
        })
    })??;
    if out.changed {
        let keys: Vec<&str> = patch.keys().map(SettingKey::as_str).collect();
        store.append_event(
            Some(name.as_str()),
            EventKind::Intention,
            format!(
                "settings {} changed through the API (revision {})",
                keys.join(", "),
                out.revision
            ),
        )?;
    }
    Ok(out)
}
