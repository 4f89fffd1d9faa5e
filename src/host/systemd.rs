//! The systemd notify protocol, without libsystemd: `READY=1` once the
//! store is open and the API listens, `WATCHDOG=1` from the main loop,
//! `STOPPING=1` on the way out, each a datagram to `$NOTIFY_SOCKET`
//! (a path, or `@name` for an abstract socket).

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Talks to the service manager, when there is one.
#[derive(Debug, Default)]
pub struct Notifier {
    socket: Option<String>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` and `WATCHDOG_USEC` (honouring `WATCHDOG_PID`).
    pub fn from_env() -> Notifier {
        let socket = std::env::var("NOTIFY_SOCKET")
            .ok()
            .filter(|s| !s.is_empty());
        let for_us = std::env::var("WATCHDOG_PID")
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
            .is_none_or(|p| p == std::process::id());
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|u| *u > 0 && for_us)
            .map(Duration::from_micros);
        Notifier { socket, watchdog }
    }

    /// How often the main loop must ping: half the watchdog interval.
    pub fn ping_interval(&self) -> Option<Duration> {
        self.watchdog.map(|w| w / 2)
    }

    fn send(&self, msg: &str) {
        let Some(path) = &self.socket else { return };
        let result = UnixDatagram::unbound().and_then(|s| {
            if let Some(name) = path.strip_prefix('@') {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
                s.send_to_addr(msg.as_bytes(), &addr)
            } else {
                s.send_to(msg.as_bytes(), path)
            }
        });
        if let Err(e) = result {
            tracing::warn!("cannot notify the service manager at {path}: {e}");
        }
    }

    /// The agent is up: its store is open and its API listens.
    pub fn ready(&self) {
        self.send("READY=1\nSTATUS=running");
    }

    /// The main loop is alive.
    pub fn watchdog(&self) {
        if self.watchdog.is_some() {
            self.send("WATCHDOG=1");
        }
    }

    /// A line for `systemctl status`.
    pub fn status(&self, s: &str) {
        self.send(&format!("STATUS={s}"));
    }

    /// The agent is stopping.
    pub fn stopping(&self) {
        self.send("STOPPING=1");
    }
}
