//! The device's time floor at work: read from the store at start, before
//! any network access, and raised to the build; raised in the store (one
//! transaction when it moves) and in the process's shared floor every TLS
//! client checks certificates at, whenever a document is accepted; and,
//! with `[clock] step = true`, the system clock stepped forward to the
//! floor at start and to a plane host's `Date` read over verified TLS.
//! The rules are the core's (`model::clock`); the floor shared with the
//! TLS clients is the host's ([`crate::host::clock::process_floor`]).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::host::clock::{StepError, process_floor};
use crate::model::time::format_rfc3339;
use crate::store::Store;

/// Whether `[clock] step = true` was asked (set once at start).
static STEP: AtomicBool = AtomicBool::new(false);

/// Whether the missing capability was said (said once per run).
static WARNED: AtomicBool = AtomicBool::new(false);

/// At start, before any network access: the floor kept in the store,
/// raised to this build's time (and kept so), shared with every TLS
/// client of the agent; with `step`, the system clock stepped forward to
/// it. Returns the floor. A store that cannot be read leaves the build's
/// time as the floor, saying so.
pub fn start(store: &Store, step: bool) -> u64 {
    STEP.store(step, Ordering::SeqCst);
    let build = crate::BUILD_TIME;
    let kept = match store.raise_clock_floor(build) {
        Ok(k) => k,
        Err(e) => {
            tracing::error!("clock: the time floor kept cannot be read or raised: {e}");
            build
        }
    };
    process_floor().raise(kept);
    let system = crate::host::clock::now();
    tracing::info!(
        "clock: time floor {} (the system clock reads {}); TLS is checked at the later",
        format_rfc3339(kept),
        format_rfc3339(system)
    );
    step_forward(system, kept, "the time floor");
    kept
}

/// Raises the time floor to `seen` (an accepted document's `issued_at`):
/// in the store, in one transaction when it moves, and in the floor the
/// TLS clients share. An error is said and the floor in memory still
/// rises.
pub fn raise(store: &Store, seen: u64) {
    let floor = process_floor();
    if crate::model::clock::raised(floor.get(), seen).is_none() {
        return;
    }
    if let Err(e) = store.raise_clock_floor(seen) {
        tracing::error!("clock: the time floor cannot be kept: {e}");
    }
    floor.raise(seen);
}

/// With `[clock] step = true`, steps the system clock from `system` to
/// `target` (`what` names where it comes from) when the core's rule says
/// so (forward only, past a threshold); says it. Without the capability,
/// says so once and changes nothing. Returns the time stepped to.
pub fn step_forward(system: u64, target: u64, what: &str) -> Option<u64> {
    if !STEP.load(Ordering::SeqCst) {
        return None;
    }
    let to = crate::model::clock::step_to(system, target)?;
    let result = if crate::host::clock::may_set_clock() {
        crate::host::clock::step_system_clock(to)
    } else {
        Err(StepError::NotPermitted(
            "the agent does not hold CAP_SYS_TIME".into(),
        ))
    };
    match result {
        Ok(()) => {
            tracing::warn!(
                "clock: stepped the system clock forward from {} to {} ({what})",
                format_rfc3339(system),
                format_rfc3339(to)
            );
            Some(to)
        }
        Err(StepError::NotPermitted(m)) => {
            if !WARNED.swap(true, Ordering::SeqCst) {
                tracing::warn!(
                    "clock: [clock] step is on but the system clock cannot be set ({m}); \
                     it is left as it is (docs/operations.md, \"The clock\")"
                );
            }
            None
        }
        Err(StepError::Failed(m)) => {
            tracing::warn!("clock: {m}");
            None
        }
    }
}
