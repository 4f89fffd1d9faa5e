//! This machine's wall clock, read in one place.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Nanoseconds since the epoch, as the engine times its events.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The time now, for what the status says happened when.
pub fn now_system() -> SystemTime {
    SystemTime::now()
}
