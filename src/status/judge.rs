//! Settling and crash-loop judgement: a pure function of a container's
//! state, how long it has been up and what an inspect said of its restarts.

use std::time::Duration;

use crate::engine::{ContainerState, Life};

/// The windows that tell settling from crash-looping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settle {
    /// Up this long since its last start: settled.
    pub window: Duration,
    /// This many restarts since it last settled, and not up for the window:
    /// crash-looping.
    pub crash_restarts: u32,
}

/// How a container is living, judged from its state and life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Living {
    /// Up for the settle window.
    Settled,
    /// Started recently, no restarts since it last settled.
    Starting,
    /// A few restarts since it last settled; not up for the window yet.
    Settling,
    /// Keeps restarting.
    CrashLooping,
    /// Exited (and not being restarted) with this code.
    Exited(i64),
}

/// Judges a container. `up_for` is how long it has been up when known
/// without an inspect; `life` is the inspect, when one was made;
/// `baseline` the restart count when it last settled.
pub fn judge(
    state: ContainerState,
    up_for: Option<Duration>,
    life: Option<&Life>,
    baseline: u32,
    now: i64,
    s: Settle,
) -> Living {
    let restarts = life.map_or(0, |l| l.restart_count.saturating_sub(baseline));
    let looping = restarts >= s.crash_restarts;
    match state {
        ContainerState::Running | ContainerState::Paused => {
            let up = up_for.or_else(|| {
                life.map(
                    |l| Duration::from_secs((now - l.started_ns / 1_000_000_000).max(0) as u64),
                )
            });
            if up.is_some_and(|u| u >= s.window) {
                Living::Settled
            } else if looping {
                Living::CrashLooping
            } else if restarts > 0 {
                Living::Settling
            } else {
                Living::Starting
            }
        }
        ContainerState::Restarting => {
            if looping {
                Living::CrashLooping
            } else {
                Living::Settling
            }
        }
        ContainerState::Created => Living::Starting,
        ContainerState::Exited
        | ContainerState::Dead
        | ContainerState::Removing
        | ContainerState::Unknown => {
            if looping {
                Living::CrashLooping
            } else {
                Living::Exited(life.map_or(0, |l| l.exit_code))
            }
        }
    }
}

/// Reads how long a running container has been up from the engine's status
/// line ("Up 5 minutes", "Up About an hour (healthy)"), as a lower bound.
/// `None` when the line says nothing readable, and the container must be
/// inspected instead.
pub fn up_for(status: &str) -> Option<Duration> {
    let rest = status.strip_prefix("Up ")?;
    let rest = rest.split(" (").next().unwrap_or(rest).trim();
    if rest == "Less than a second" {
        return Some(Duration::ZERO);
    }
    if rest == "About a minute" {
        return Some(Duration::from_secs(60));
    }
    if rest == "About an hour" {
        return Some(Duration::from_secs(3600));
    }
    let (n, unit) = rest.split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    let secs = match unit.trim_end_matches('s') {
        "second" => 1,
        "minute" => 60,
        "hour" => 3600,
        "day" => 86_400,
        "week" => 7 * 86_400,
        "month" => 30 * 86_400,
        "year" => 365 * 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(n * secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        let s = |x: u64| Some(Duration::from_secs(x));
        assert_eq!(up_for("Up Less than a second"), s(0));
        assert_eq!(up_for("Up 1 second"), s(1));
        assert_eq!(up_for("Up 45 seconds"), s(45));
        assert_eq!(up_for("Up About a minute"), s(60));
        assert_eq!(up_for("Up 5 minutes (healthy)"), s(300));
        assert_eq!(up_for("Up 2 hours (Paused)"), s(7200));
        assert_eq!(up_for("Up 3 days"), s(3 * 86_400));
        assert_eq!(up_for("Exited (0) 5 minutes ago"), None);
        assert_eq!(up_for("Restarting (1) 2 seconds ago"), None);
        assert_eq!(up_for("Up for a while"), None);
    }

    #[test]
    fn judging_table() {
        use ContainerState::*;
        let s = Settle {
            window: Duration::from_secs(30),
            crash_restarts: 5,
        };
        let life = |restarts: u32, started: i64, code: i64| Life {
            restart_count: restarts,
            started_ns: started * 1_000_000_000,
            finished_ns: 0,
            exit_code: code,
            restarting: false,
            health_output: None,
        };
        let now = 1000;
        type Case = (
            &'static str,
            ContainerState,
            Option<u64>,
            Option<Life>,
            u32,
            Living,
        );
        let cases: Vec<Case> = vec![
            (
                "up long, from the status line",
                Running,
                Some(600),
                None,
                0,
                Living::Settled,
            ),
            (
                "up long, from the inspect",
                Running,
                None,
                Some(life(2, 900, 0)),
                0,
                Living::Settled,
            ),
            (
                "just started",
                Running,
                Some(3),
                Some(life(0, 997, 0)),
                0,
                Living::Starting,
            ),
            (
                "restarted three times, up 3 s",
                Running,
                Some(3),
                Some(life(3, 997, 1)),
                0,
                Living::Settling,
            ),
            (
                "restarted five times, up 3 s",
                Running,
                Some(3),
                Some(life(5, 997, 1)),
                0,
                Living::CrashLooping,
            ),
            (
                "old restarts before it settled do not count",
                Running,
                Some(3),
                Some(life(12, 997, 1)),
                10,
                Living::Settling,
            ),
            (
                "being restarted, few",
                Restarting,
                None,
                Some(life(2, 990, 1)),
                0,
                Living::Settling,
            ),
            (
                "being restarted, many",
                Restarting,
                None,
                Some(life(9, 990, 1)),
                0,
                Living::CrashLooping,
            ),
            (
                "exited with an error",
                Exited,
                None,
                Some(life(0, 900, 3)),
                0,
                Living::Exited(3),
            ),
            (
                "exited after many restarts",
                Exited,
                None,
                Some(life(7, 900, 3)),
                0,
                Living::CrashLooping,
            ),
            ("created", Created, None, None, 0, Living::Starting),
        ];
        for (what, state, up, life, baseline, want) in cases {
            let got = judge(
                state,
                up.map(Duration::from_secs),
                life.as_ref(),
                baseline,
                now,
                s,
            );
            assert_eq!(got, want, "{what}");
        }
    }
}
