//! What stead does on its own host, apart from the engine: content digests
//! of the files a container reads, atomic file writes, watching files for
//! change, the space of its filesystems, the service manager's notify protocol, and running blocking work
//! off the async threads; the device-local key, randomness, and the failure points tests stop
//! the agent at.

pub mod blocking;
pub mod clock;
pub mod digest;
pub mod disk;
pub mod files;
pub mod keyfile;
pub mod keys;
pub mod launch;
pub mod live;
pub mod log;
pub mod panic;
pub mod random;
pub mod systemd;
pub mod watch;

/// Dies on the spot, as a kill -9 would, when `STEAD_CRASH_AT` names this
/// point (`create:after-start`, `reload:after-pull`, `plane:after-verify`,
/// …): lets the crash-safety tests stop the agent between two steps,
/// deterministically, against the real parts.
pub fn crash_point(point: &str) {
    let Some(at) = crash_at().as_deref() else {
        return;
    };
    if at == point {
        eprintln!("STEAD_CRASH_AT={point}: aborting");
        std::process::abort();
    }
    // `pause:<point>`: the agent stops on the spot and stays there, for the
    // device lab to cut the power at exactly this point.
    if at.strip_prefix("pause:") == Some(point) {
        eprintln!("STEAD_CRASH_AT=pause:{point}: stopped here");
        loop {
            std::thread::park();
        }
    }
}

/// A bad candidate, for the tests of the way back (called only in a
/// candidate, once its store is open): `candidate:corrupt-store` writes
/// garbage over the store file's start, `candidate:fill-disk` fills the
/// data directory's filesystem (`<data_dir>/candidate-fill`); each fsyncs
/// what it wrote, then aborts.
pub fn candidate_damage(store: &std::path::Path, data_dir: &std::path::Path) {
    use std::io::Write;
    let (path, fill) = match crash_at().as_deref() {
        Some("candidate:corrupt-store") => (store.to_path_buf(), false),
        Some("candidate:fill-disk") => (data_dir.join("candidate-fill"), true),
        _ => return,
    };
    let garbage = vec![0xa5u8; 1 << 20];
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(fill)
        .open(&path)
    {
        while f.write_all(&garbage).is_ok() && fill {}
        let _ = f.sync_all();
    }
    eprintln!("STEAD_CRASH_AT: {} damaged, aborting", path.display());
    std::process::abort();
}

/// Panics on the spot when `STEAD_CRASH_AT` names this point: lets the
/// crash guard's tests make a pass panic as an unknown bug would (the panic
/// hook notes what the agent was acting on, then aborts).
pub fn panic_point(point: &str) {
    if crash_at().as_deref() == Some(point) {
        panic!("STEAD_CRASH_AT={point}: panicking");
    }
}

/// Never returns when `STEAD_CRASH_AT` names this point: the main loop
/// stops making progress as a deadlocked one would, while the rest of the
/// agent (the API, the watchdog's pinger) keeps running. The pinger sees no
/// progress and stops, so systemd's watchdog kills and restarts the agent
/// (`loop:hang`, the device lab's test of the unit's watchdog).
pub async fn hang_point(point: &str) {
    if crash_at().as_deref() == Some(point) {
        tracing::error!("STEAD_CRASH_AT={point}: the main loop hangs");
        std::future::pending::<()>().await;
    }
}

/// Whether any failure point is armed (so a point named per module is
/// only spelled out in tests).
pub fn crash_points_armed() -> bool {
    crash_at().is_some()
}

fn crash_at() -> &'static Option<String> {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    AT.get_or_init(|| std::env::var("STEAD_CRASH_AT").ok())
}

/// This boot of the machine (the kernel's boot id): a death across two
/// boots was a power cut or a reboot, not a crash.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The machine's memory, bytes (`/proc/meminfo`'s `MemTotal`), when it
/// says.
pub fn memory_total() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

pub use random::random_u64;
