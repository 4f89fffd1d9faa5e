//! The one writer of reload requests: the API handler (after its token
//! check), the auto lane and, later, the plane all file through [`file`],
//! which stamps each request as written by this agent. The executor acts on
//! nothing else.

use crate::model::names::ModuleName;
use crate::model::reload::{Request, RequestError, may_file};
use crate::store::{Store, StoreError};

/// Why a request was not filed. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// No such module.
    #[error("no module {0:?}")]
    NoModule(String),
    /// The module is not updated from a registry.
    #[error("module {0:?} has no [update] section: it is not updated from a registry")]
    NoUpdate(String),
    /// A field is wrong.
    #[error(transparent)]
    Invalid(#[from] RequestError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Files a request for `module` (or every module with an `[update]`
/// section), in one transaction.
pub fn file(
    store: &Store,
    agent: u64,
    module: Option<&ModuleName>,
    reason: &str,
    requested_by: &str,
    now: u64,
) -> Result<Request, FileError> {
    // The request's own fields first: a bad body is refused as such.
    Request::new(0, agent, module, reason, requested_by, now)?;
    if let Some(m) = module {
        let entries = store.entries()?;
        let Some(i) = entries.get(m).and_then(|e| e.effective()) else {
            return Err(FileError::NoModule(m.to_string()));
        };
        if i.update.is_none() {
            return Err(FileError::NoUpdate(m.to_string()));
        }
    }
    let r = store.file_reload_beside(|id, open| {
        // A record this agent did not write holds nothing up: it is never
        // acted on.
        let ours: Vec<&Request> = open
            .iter()
            .filter(|o| o.check_ours(agent).is_ok())
            .collect();
        may_file(module.map(ModuleName::as_str), &ours)?;
        Request::new(id, agent, module, reason, requested_by, now)
    })??;
    tracing::info!(
        id = r.id,
        module = r.module.as_deref().unwrap_or("(every module)"),
        "reload requested by {}: {}",
        r.requested_by,
        r.reason
    );
    Ok(r)
}
