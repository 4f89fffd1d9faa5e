//! What stead does on its own host, apart from the engine: content digests
//! of the files a container reads, atomic file writes, watching files for
//! change, the service manager's notify protocol, and running blocking work
//! off the async threads; the device-local key, randomness, and the failure points tests stop
//! the agent at.

pub mod blocking;
pub mod digest;
pub mod files;
pub mod keys;
pub mod live;
pub mod systemd;
pub mod watch;

/// Dies on the spot, as a kill -9 would, when `STEAD_CRASH_AT` names this
/// point (`create:after-start`, `reload:after-pull`, `plane:after-verify`,
/// …): lets the crash-safety tests stop the agent between two steps,
/// deterministically, against the real parts.
pub fn crash_point(point: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if AT
        .get_or_init(|| std::env::var("STEAD_CRASH_AT").ok())
        .as_deref()
        == Some(point)
    {
        eprintln!("STEAD_CRASH_AT={point}: aborting");
        std::process::abort();
    }
}

/// Eight random bytes from the system.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b));
    if read.is_err() {
        // No /dev/urandom: the time and the process, which differ between
        // two agents started on one node.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32);
        b = t.to_le_bytes();
    }
    u64::from_le_bytes(b)
}
