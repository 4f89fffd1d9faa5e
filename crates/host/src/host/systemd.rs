//! The systemd notify protocol, without libsystemd: `READY=1` once the
//! store is open and the API listens, `WATCHDOG=1` from a task of its own
//! ([`keep_alive`]) for as long as the main loop makes [`Progress`],
//! `STOPPING=1` on the way out, each a datagram to `$NOTIFY_SOCKET`
//! (a path, or `@name` for an abstract socket).

use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Talks to the service manager, when there is one.
#[derive(Clone, Debug, Default)]
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

    /// How often the watchdog is pinged (and the main loop, idle, says it
    /// is alive): a quarter of the watchdog interval, so one late wake-up
    /// on a busy device is no missed ping.
    pub fn ping_interval(&self) -> Option<Duration> {
        self.watchdog.map(|w| w / 4)
    }

    /// How long the main loop may go without progress, outside an engine
    /// call within its own limit, before it counts as stuck: half the
    /// watchdog interval (a pass's own work between engine calls is
    /// hashing and store writes).
    pub fn stuck_after(&self) -> Option<Duration> {
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

/// Whether the main loop counts as alive at `now` (all times since the
/// same origin): it made progress within `bound`, or it is inside engine
/// calls and the latest of their own time limits has not passed. An engine
/// call that outlives its limit fails (the engine counts as away), so a
/// loop past that is stuck.
pub fn alive(
    now: Duration,
    last_beat: Duration,
    busy_until: Option<Duration>,
    bound: Duration,
) -> bool {
    now.saturating_sub(last_beat) <= bound || busy_until.is_some_and(|u| now <= u)
}

/// What the main loop last did, for the watchdog's pinger: a beat at each
/// step, and the engine calls it is inside, each with its time limit.
#[derive(Debug)]
pub struct Progress {
    origin: Instant,
    beats: Mutex<Beats>,
}

#[derive(Debug, Default)]
struct Beats {
    /// The last beat, since the origin.
    last: Duration,
    /// Engine calls under way.
    calls: u32,
    /// The latest limit of the calls under way, since the origin.
    until: Duration,
}

impl Progress {
    /// A loop that just made progress.
    pub fn new() -> Arc<Progress> {
        Arc::new(Progress {
            origin: Instant::now(),
            beats: Mutex::new(Beats::default()),
        })
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// The loop made progress.
    pub fn beat(&self) {
        let now = self.now();
        self.beats.lock().expect("progress lock").last = now;
    }

    /// The loop enters an engine call that may take up to `limit`; it is
    /// done (and a beat) when the guard drops, finished or cancelled.
    pub fn call(self: &Arc<Self>, limit: Duration) -> Call {
        let now = self.now();
        let mut b = self.beats.lock().expect("progress lock");
        b.last = now;
        b.calls = b.calls.saturating_add(1);
        b.until = b.until.max(now.saturating_add(limit));
        Call(self.clone())
    }

    /// Whether the loop counts as alive now ([`alive`]).
    pub fn alive(&self, bound: Duration) -> bool {
        let now = self.now();
        let b = self.beats.lock().expect("progress lock");
        alive(now, b.last, (b.calls > 0).then_some(b.until), bound)
    }
}

/// An engine call under way (see [`Progress::call`]).
#[derive(Debug)]
pub struct Call(Arc<Progress>);

impl Drop for Call {
    fn drop(&mut self) {
        let now = self.0.now();
        if let Ok(mut b) = self.0.beats.lock() {
            b.last = now;
            b.calls = b.calls.saturating_sub(1);
            if b.calls == 0 {
                b.until = Duration::ZERO;
            }
        }
    }
}

/// Pings the watchdog every [`Notifier::ping_interval`] while the main loop
/// is alive ([`Progress::alive`]), from a task of its own: a pass that
/// waits out long stop grace periods is not killed, a loop that is stuck
/// stops the pings and systemd restarts the agent. Returns at once without
/// a watchdog.
pub async fn keep_alive(notifier: Notifier, progress: Arc<Progress>) {
    let (Some(every), Some(bound)) = (notifier.ping_interval(), notifier.stuck_after()) else {
        return;
    };
    let mut said = false;
    loop {
        if progress.alive(bound) {
            notifier.watchdog();
            said = false;
        } else if !said {
            tracing::error!(
                "the main loop made no progress for {}s; no longer pinging the watchdog",
                bound.as_secs()
            );
            said = true;
        }
        tokio::time::sleep(every).await;
    }
}

/// Asks systemd to reboot the machine (`systemctl reboot --no-block`: the
/// job is queued and the command returns; this process is then stopped
/// with the others). `systemctl` is looked up on `PATH`.
pub fn reboot() -> Result<(), String> {
    let out = std::process::Command::new("systemctl")
        .args(["reboot", "--no-block"])
        .output()
        .map_err(|e| format!("cannot run systemctl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "systemctl reboot: {}: {}",
            out.status,
            crate::model::text::clip(String::from_utf8_lossy(&out.stderr).trim(), 200)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_is_alive_while_it_beats_or_is_inside_a_call_within_its_limit() {
        let s = Duration::from_secs;
        let bound = s(300);
        for (now, last, busy, is) in [
            (s(10), s(0), None, true),            // beat lately
            (s(300), s(0), None, true),           // at the bound
            (s(301), s(0), None, false),          // stuck, no call
            (s(1000), s(0), Some(s(360)), false), // stuck inside a call past its limit
            (s(359), s(0), Some(s(360)), true),   // a long stop within its limit
            (s(360), s(0), Some(s(360)), true),   // at its limit
            (s(361), s(300), Some(s(360)), true), // past the limit, a beat lately
            (s(0), s(5), None, true),             // a beat stamped after now
        ] {
            assert_eq!(
                alive(now, last, busy, bound),
                is,
                "{now:?} {last:?} {busy:?}"
            );
        }
    }

    #[test]
    fn calls_under_way_keep_the_latest_limit_until_the_last_ends() {
        let p = Progress::new();
        let bound = Duration::ZERO;
        let long = p.call(Duration::from_secs(3600));
        let short = p.call(Duration::from_millis(1));
        drop(short);
        std::thread::sleep(Duration::from_millis(5));
        assert!(p.alive(bound), "the long call is still under way");
        drop(long);
        std::thread::sleep(Duration::from_millis(5));
        assert!(!p.alive(bound), "no call, no beat within the bound");
        p.beat();
        assert!(p.alive(Duration::from_secs(1)));
    }
}
