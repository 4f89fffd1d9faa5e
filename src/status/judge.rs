//! How a module is living, judged in one place, each judgement a pure
//! function: settling and crash-looping from a container's state, how long
//! it has been up and what an inspect said of its restarts ([`judge`]); the
//! restart baseline and the back-off forgiven once it settled
//! ([`settled`]); the state a pass leaves a module in ([`backing_off`],
//! [`standing`]); whether a reloaded version is unstable ([`unstable`]);
//! and every module's state while no pass runs ([`all_pending`],
//! [`all_held`]).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::engine::{ContainerState, Life};
use crate::model::names::ModuleName;
use crate::model::time::parse_human_duration;
use crate::status::{Board, ModuleState, ModuleStatus};

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
            let up = up_for.or_else(|| life.map(|l| up_since(l, now)));
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
        // Podman restarts at once, without a back-off: between two
        // restarts its container is seen created as often as running.
        ContainerState::Created if looping => Living::CrashLooping,
        ContainerState::Created if restarts > 0 => Living::Settling,
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

/// How long a container has been up since the start an inspect saw.
fn up_since(life: &Life, now: i64) -> Duration {
    Duration::from_secs((now - life.started_ns / 1_000_000_000).max(0) as u64)
}

/// How long a container has been up, when known: from the engine's status
/// line, else (while it runs) from the inspect.
pub fn up_time(
    state: ContainerState,
    up_for: Option<Duration>,
    life: Option<&Life>,
    now: i64,
) -> Option<Duration> {
    up_for.or_else(|| {
        life.filter(|_| state == ContainerState::Running)
            .map(|l| up_since(l, now))
    })
}

/// What a judgement changes of a container's past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reset {
    /// Its restart count from now on counted from this one (it settled).
    pub baseline: Option<u32>,
    /// Its module's past failures are forgiven (up long enough).
    pub forgive: bool,
}

/// A settled container counts its restarts from where they are; one up for
/// `forgive_after` has its module's back-off forgotten.
pub fn settled(
    living: Living,
    restarts: Option<u32>,
    up_for: Option<Duration>,
    forgive_after: Duration,
) -> Reset {
    let settled = living == Living::Settled;
    Reset {
        baseline: restarts.filter(|_| settled),
        forgive: settled && up_for.is_some_and(|u| u >= forgive_after),
    }
}

/// A module held back by the retry policy: a container that keeps dying is
/// crash-looping; one the engine refuses to create or start has failed.
pub fn backing_off(has_container: bool, refused: bool) -> ModuleState {
    if has_container && !refused {
        ModuleState::CrashLooping
    } else {
        ModuleState::Failed
    }
}

/// The state of a module a pass left as it was (or waiting), from how its
/// container lives and what its health check says; with the error that
/// replaces its last, when there is one. `probe` is what the last probe
/// printed; `restart` its restart policy's name.
pub fn standing(
    living: Option<Living>,
    health: Option<&str>,
    probe: Option<&str>,
    restart: &str,
) -> (ModuleState, Option<String>) {
    match living {
        // Up, and its health check says it is not well: whatever its
        // uptime, it is not converged.
        Some(Living::Settled | Living::Starting | Living::Settling)
            if health == Some("unhealthy") =>
        {
            let error = format!(
                "its health check fails{}",
                probe.map_or(String::new(), |o| format!(": {o}"))
            );
            (ModuleState::Unhealthy, Some(error))
        }
        // Converged only once its health check says healthy.
        Some(Living::Settled) if health == Some("starting") => (ModuleState::Starting, None),
        Some(Living::Settled) => (ModuleState::Converged, None),
        Some(Living::Starting) | None => (ModuleState::Starting, None),
        Some(Living::Settling) => (ModuleState::Settling, None),
        Some(Living::CrashLooping) => (ModuleState::CrashLooping, None),
        Some(Living::Exited(0)) => (ModuleState::Converged, None),
        Some(Living::Exited(code)) => (
            ModuleState::Failed,
            Some(format!(
                "exited with code {code} (restart policy {restart})"
            )),
        ),
    }
}

/// Why a module running a reloaded version is unstable (it is rolled
/// back), if it is: it crash-loops, failed or restarted since it began
/// running the version (`restarts_at_start`), or its health check fails.
pub fn unstable(st: &ModuleStatus, restarts_at_start: Option<u32>) -> Option<&'static str> {
    let unhealthy = st.health.as_deref() == Some("unhealthy");
    let restarted = st.restart_count.unwrap_or(0) > restarts_at_start.unwrap_or(0);
    let bad = st.state == ModuleState::CrashLooping
        || st.state == ModuleState::Failed
        || unhealthy
        || restarted;
    match (bad, unhealthy) {
        (false, _) => None,
        (true, true) => Some("turned unhealthy"),
        (true, false) => Some("kept restarting"),
    }
}

/// While no pass can run: every module the node holds (`held`, by name,
/// with why the crash guard holds it; `None` while the store cannot be
/// read, and the modules already shown stay) reads pending with `reason`,
/// or quarantined; what is known of its container is kept.
pub fn all_pending(
    board: &mut Board,
    held: Option<&BTreeMap<String, Option<String>>>,
    reason: &str,
) {
    if let Some(held) = held {
        board.retain(|n, _| held.contains_key(n));
        for name in held.keys() {
            board
                .entry(name.clone())
                .or_insert_with(|| ModuleStatus::pending(name));
        }
    }
    for (name, m) in board.iter_mut() {
        m.next_attempt_at = None;
        match held.and_then(|h| h.get(name).cloned().flatten()) {
            Some(why) => {
                m.state = ModuleState::Quarantined;
                m.last_error = Some(why);
            }
            None => {
                m.state = ModuleState::Pending;
                m.last_error = Some(reason.to_string());
            }
        }
    }
}

/// While the crash guard holds everything: only the modules it holds are
/// shown, each quarantined with why.
pub fn all_held(board: &mut Board, held: BTreeMap<ModuleName, String>) {
    board.retain(|n, _| held.keys().any(|h| h.as_str() == n));
    for (name, reason) in held {
        let st = board
            .entry(name.to_string())
            .or_insert_with(|| ModuleStatus::pending(name.as_str()));
        st.state = ModuleState::Quarantined;
        st.last_error = Some(reason);
    }
}

/// Reads how long a running container has been up from the engine's status
/// line ("Up 5 minutes", "Up About an hour (healthy)"), as a lower bound.
/// `None` when the line says nothing readable, and the container must be
/// inspected instead.
pub fn up_for(status: &str) -> Option<Duration> {
    let rest = status.strip_prefix("Up ")?;
    parse_human_duration(rest.split(" (").next().unwrap_or(rest).trim())
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
            (
                "created again between many restarts (Podman's)",
                Created,
                None,
                Some(life(54, 999, 3)),
                0,
                Living::CrashLooping,
            ),
            (
                "created again after a few restarts",
                Created,
                None,
                Some(life(2, 999, 3)),
                0,
                Living::Settling,
            ),
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

    #[test]
    fn up_time_table() {
        use ContainerState::*;
        let life = Life {
            restart_count: 0,
            started_ns: 900 * 1_000_000_000,
            finished_ns: 0,
            exit_code: 0,
            restarting: false,
            health_output: None,
        };
        let s = |x: u64| Some(Duration::from_secs(x));
        for (what, state, up, life, want) in [
            ("the status line first", Running, s(5), Some(&life), s(5)),
            (
                "else the inspect, while it runs",
                Running,
                None,
                Some(&life),
                s(100),
            ),
            (
                "not from the inspect once it stopped",
                Exited,
                None,
                Some(&life),
                None,
            ),
            ("nothing known", Running, None, None, None),
        ] {
            assert_eq!(up_time(state, up, life, 1000), want, "{what}");
        }
    }

    #[test]
    fn settled_table() {
        let s = |x: u64| Some(Duration::from_secs(x));
        let reset = |baseline, forgive| Reset { baseline, forgive };
        let after = Duration::from_secs(600);
        for (what, living, restarts, up, want) in [
            (
                "settled: restarts counted from here",
                Living::Settled,
                Some(4),
                s(40),
                reset(Some(4), false),
            ),
            (
                "settled, not inspected",
                Living::Settled,
                None,
                s(40),
                reset(None, false),
            ),
            (
                "settled long: forgiven",
                Living::Settled,
                Some(4),
                s(600),
                reset(Some(4), true),
            ),
            (
                "settled, uptime unknown",
                Living::Settled,
                Some(4),
                None,
                reset(Some(4), false),
            ),
            (
                "settling: nothing changes",
                Living::Settling,
                Some(4),
                s(900),
                reset(None, false),
            ),
            (
                "crash-looping: nothing changes",
                Living::CrashLooping,
                Some(9),
                s(1),
                reset(None, false),
            ),
            (
                "exited: nothing changes",
                Living::Exited(1),
                Some(0),
                None,
                reset(None, false),
            ),
        ] {
            assert_eq!(settled(living, restarts, up, after), want, "{what}");
        }
    }

    #[test]
    fn backing_off_table() {
        for (what, container, refused, want) in [
            (
                "its container keeps dying",
                true,
                false,
                ModuleState::CrashLooping,
            ),
            (
                "the engine refused its start",
                true,
                true,
                ModuleState::Failed,
            ),
            (
                "the engine refused its create",
                false,
                true,
                ModuleState::Failed,
            ),
            (
                "no container, nothing refused",
                false,
                false,
                ModuleState::Failed,
            ),
        ] {
            assert_eq!(backing_off(container, refused), want, "{what}");
        }
    }

    #[test]
    fn standing_table() {
        use ModuleState::*;
        let e = |s: &str| Some(s.to_string());
        type Case = (
            &'static str,
            Option<Living>,
            Option<&'static str>,
            Option<&'static str>,
            (ModuleState, Option<String>),
        );
        let cases: Vec<Case> = vec![
            (
                "settled",
                Some(Living::Settled),
                None,
                None,
                (Converged, None),
            ),
            (
                "settled and healthy",
                Some(Living::Settled),
                Some("healthy"),
                None,
                (Converged, None),
            ),
            (
                "settled, health not known yet",
                Some(Living::Settled),
                Some("starting"),
                None,
                (Starting, None),
            ),
            (
                "settled, unhealthy, with a probe",
                Some(Living::Settled),
                Some("unhealthy"),
                Some("refused"),
                (Unhealthy, e("its health check fails: refused")),
            ),
            (
                "settling, unhealthy",
                Some(Living::Settling),
                Some("unhealthy"),
                None,
                (Unhealthy, e("its health check fails")),
            ),
            (
                "starting, unhealthy",
                Some(Living::Starting),
                Some("unhealthy"),
                None,
                (Unhealthy, e("its health check fails")),
            ),
            (
                "starting",
                Some(Living::Starting),
                None,
                None,
                (Starting, None),
            ),
            ("not judged", None, None, None, (Starting, None)),
            (
                "settling",
                Some(Living::Settling),
                None,
                None,
                (Settling, None),
            ),
            (
                "crash-looping, whatever its health",
                Some(Living::CrashLooping),
                Some("unhealthy"),
                None,
                (CrashLooping, None),
            ),
            (
                "finished",
                Some(Living::Exited(0)),
                None,
                None,
                (Converged, None),
            ),
            (
                "exited with an error",
                Some(Living::Exited(2)),
                None,
                None,
                (Failed, e("exited with code 2 (restart policy no)")),
            ),
        ];
        for (what, living, health, probe, want) in cases {
            assert_eq!(standing(living, health, probe, "no"), want, "{what}");
        }
    }

    #[test]
    fn unstable_table() {
        use ModuleState::*;
        let st = |state, restarts: Option<u32>, health: Option<&str>| ModuleStatus {
            state,
            restart_count: restarts,
            health: health.map(str::to_string),
            ..ModuleStatus::pending("m")
        };
        let why = |s| Some(s);
        for (what, st, at_start, want) in [
            ("converged", st(Converged, Some(0), None), Some(0), None),
            (
                "starting, healthy",
                st(Starting, Some(0), Some("healthy")),
                Some(0),
                None,
            ),
            (
                "restarts from before it began",
                st(Settling, Some(3), None),
                Some(3),
                None,
            ),
            (
                "restarted since",
                st(Starting, Some(1), None),
                Some(0),
                why("kept restarting"),
            ),
            (
                "restarted, none known at start",
                st(Starting, Some(1), None),
                None,
                why("kept restarting"),
            ),
            (
                "crash-looping",
                st(CrashLooping, None, None),
                None,
                why("kept restarting"),
            ),
            (
                "failed",
                st(Failed, None, None),
                None,
                why("kept restarting"),
            ),
            (
                "unhealthy",
                st(Unhealthy, Some(0), Some("unhealthy")),
                Some(0),
                why("turned unhealthy"),
            ),
            (
                "unhealthy and restarted",
                st(Starting, Some(2), Some("unhealthy")),
                Some(0),
                why("turned unhealthy"),
            ),
        ] {
            assert_eq!(unstable(&st, at_start), want, "{what}");
        }
    }

    fn board(states: &[(&str, ModuleState)]) -> Board {
        states
            .iter()
            .map(|(n, s)| {
                let mut st = ModuleStatus::pending(n);
                st.state = *s;
                st.next_attempt_at = Some(5);
                st.container_id = Some(format!("c-{n}"));
                (n.to_string(), st)
            })
            .collect()
    }

    fn shown(b: &Board) -> Vec<(String, ModuleState, Option<String>, Option<String>)> {
        b.values()
            .map(|m| {
                (
                    m.name.clone(),
                    m.state,
                    m.last_error.clone(),
                    m.container_id.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn all_pending_table() {
        use ModuleState::*;
        let row = |n: &str, s, e: &str, c: bool| {
            (
                n.to_string(),
                s,
                Some(e.to_string()),
                c.then(|| format!("c-{n}")),
            )
        };
        let held = |h: &[(&str, Option<&str>)]| -> BTreeMap<String, Option<String>> {
            h.iter()
                .map(|(n, w)| (n.to_string(), w.map(str::to_string)))
                .collect()
        };
        type Case = (
            &'static str,
            Option<BTreeMap<String, Option<String>>>,
            Vec<(String, ModuleState, Option<String>, Option<String>)>,
        );
        let cases: Vec<Case> = vec![
            (
                "the store unread: those shown read pending",
                None,
                vec![
                    row("a", Pending, "away", true),
                    row("b", Pending, "away", true),
                ],
            ),
            (
                "one gone, one new, one held",
                Some(held(&[("a", None), ("c", None), ("b", Some("killed"))])),
                vec![
                    row("a", Pending, "away", true),
                    row("b", Quarantined, "killed", true),
                    row("c", Pending, "away", false),
                ],
            ),
            ("none held", Some(held(&[])), vec![]),
        ];
        for (what, held, want) in cases {
            let mut b = board(&[("a", Converged), ("b", CrashLooping)]);
            all_pending(&mut b, held.as_ref(), "away");
            assert_eq!(shown(&b), want, "{what}");
            assert!(b.values().all(|m| m.next_attempt_at.is_none()), "{what}");
        }
    }

    #[test]
    fn all_held_table() {
        use ModuleState::*;
        let name = |n: &str| ModuleName::try_from(n).unwrap();
        let row = |n: &str, e: &str, c: bool| {
            (
                n.to_string(),
                Quarantined,
                Some(e.to_string()),
                c.then(|| format!("c-{n}")),
            )
        };
        for (what, held, want) in [
            (
                "only the held shown",
                vec![("b", "killed")],
                vec![row("b", "killed", true)],
            ),
            (
                "a new one shown too",
                vec![("a", "x"), ("c", "y")],
                vec![row("a", "x", true), row("c", "y", false)],
            ),
        ] {
            let mut b = board(&[("a", Converged), ("b", Pending)]);
            all_held(
                &mut b,
                held.iter().map(|(n, w)| (name(n), w.to_string())).collect(),
            );
            assert_eq!(shown(&b), want, "{what}");
        }
    }
}
