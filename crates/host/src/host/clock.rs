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

/// A time floor shared by whoever checks a time against it (every TLS
/// client of the agent): the newest time known to have passed, seconds
/// since the epoch, only ever raised. Cheap to clone (one value shared).
#[derive(Clone, Debug, Default)]
pub struct Floor(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Floor {
    /// A floor at `t`.
    pub fn at(t: u64) -> Floor {
        Floor(std::sync::Arc::new(std::sync::atomic::AtomicU64::new(t)))
    }

    /// The floor now.
    pub fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Raises the floor to `t` when `t` is later; never lowers it.
    pub fn raise(&self, t: u64) {
        self.0.fetch_max(t, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The floor of this process: the agent raises it (from its store at
/// start, then with every document it accepts) and hands it to its TLS
/// clients; the operator's tool never does (0: its TLS sees the plain
/// clock).
pub fn process_floor() -> &'static Floor {
    static FLOOR: std::sync::LazyLock<Floor> = std::sync::LazyLock::new(Floor::default);
    &FLOOR
}

/// Why the system clock was not stepped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepError {
    /// The process may not set the clock (no CAP_SYS_TIME, or a seccomp
    /// filter or systemd's `ProtectClock=` forbids it).
    NotPermitted(String),
    /// Any other failure.
    Failed(String),
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::NotPermitted(m) | StepError::Failed(m) => f.write_str(m),
        }
    }
}

/// Sets the system clock (CLOCK_REALTIME) to `t`, seconds since the
/// epoch. Needs CAP_SYS_TIME; the caller decides that `t` is forward.
pub fn step_system_clock(t: u64) -> Result<(), StepError> {
    let secs = libc::time_t::try_from(t)
        .map_err(|_| StepError::Failed(format!("{t} is past what the system clock holds")))?;
    let ts = libc::timespec {
        tv_sec: secs,
        tv_nsec: 0,
    };
    // SAFETY: clock_settime(2) with a valid clock id and a pointer to a
    // timespec that lives across the call.
    let rc = unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &ts) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => Err(StepError::NotPermitted(format!(
            "the system clock cannot be set ({e}): CAP_SYS_TIME is needed"
        ))),
        _ => Err(StepError::Failed(format!(
            "the system clock cannot be set: {e}"
        ))),
    }
}

/// Whether this process holds CAP_SYS_TIME in its effective set (read
/// from `/proc/self/status`): asked before the clock is stepped, since a
/// unit's syscall filter may kill a process that tries without it.
pub fn may_set_clock() -> bool {
    const CAP_SYS_TIME: u32 = 25;
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| cap_in(&s, CAP_SYS_TIME))
}

/// Whether `/proc/<pid>/status` text says capability `cap` is effective.
fn cap_in(status: &str, cap: u32) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|bits| bits & (1u64 << cap) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_is_read_from_the_effective_set() {
        for (status, cap, want) in [
            ("CapEff:\t0000000002000000\n", 25, true),
            ("CapEff:\t000001ffffffffff\n", 25, true),
            ("CapEff:\t0000000000000000\n", 25, false),
            (
                "CapPrm:\t0000000002000000\nCapEff:\t0000000000000000\n",
                25,
                false,
            ),
            ("CapEff:\tzz\n", 25, false),
            ("", 25, false),
            ("CapEff:\t0000000000000001\n", 0, true),
        ] {
            assert_eq!(cap_in(status, cap), want, "{status:?} {cap}");
        }
    }

    #[test]
    fn a_floor_is_raised_never_lowered() {
        let f = Floor::at(10);
        let shared = f.clone();
        f.raise(5);
        assert_eq!(shared.get(), 10);
        shared.raise(20);
        assert_eq!(f.get(), 20);
    }
}
