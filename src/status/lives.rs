//! What the engine's events say of each managed container's life: when it
//! last started and stopped, how it exited, how many times it has been
//! started again. Fed by the event stream while it is open, so a container
//! settling or crash-looping is judged without inspecting it; while the
//! stream is closed (or for `run --once`) the book keeps what inspects said,
//! each valid until the container's state moves.

use std::collections::HashMap;

use crate::engine::{ContainerEvent, ContainerState, EventAction, Life};

/// Events kept for a container the book has not yet got a starting point
/// for; older ones are dropped (they can only make a count low by one
/// more, and an inspect follows within a pass).
const PENDING_CAP: usize = 64;

/// What is known of one container.
#[derive(Clone, Debug)]
enum Tracked {
    /// Events seen before its life was known: replayed onto the inspect
    /// that gives it.
    Unseeded(Vec<ContainerEvent>),
    /// Its life; `seen` is the state it had when an inspect said so (it
    /// stands for a closed stream only while the state stays).
    Known {
        life: Life,
        seen: ContainerState,
        /// The next start is already in the restart count: the engine
        /// counts a restart when it schedules it, so an inspect while it
        /// is restarting includes the start still to come.
        counted: bool,
        /// The inspect saw it dead, and the event of that death is still to
        /// come: a start before it is the start that death ended (stamped
        /// after the death when the process exited at once), not a new one.
        death_due: bool,
    },
}

/// The lives of the containers this node manages.
#[derive(Debug, Default)]
pub struct LifeBook {
    /// When the open event stream began, nanoseconds since the epoch;
    /// `None` while no stream is open.
    open_since_ns: Option<i64>,
    tracked: HashMap<String, Tracked>,
    /// The containers seen starting, while the stream was open, whose
    /// health check has not run since: the health an engine lists for
    /// them may be the last life's (Podman 4.3 keeps it across a restart
    /// until the next check).
    unchecked: std::collections::HashSet<String>,
}

/// What the book can say of a container, or that it needs an inspect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Its life, as far as it is known.
    Life(Life),
    /// Nothing is known and nothing needs to be: judged from the list.
    Unknown,
    /// Inspect it, then [`LifeBook::seed`].
    Inspect,
}

impl LifeBook {
    /// A stream of events from `since_ns` on is being opened: what was kept
    /// is forgotten (events may have been missed while none was open).
    pub fn opened(&mut self, since_ns: i64) {
        self.open_since_ns = Some(since_ns);
        self.tracked.clear();
        self.unchecked.clear();
    }

    /// The stream ended: lives stand only as inspects give them again.
    pub fn closed(&mut self) {
        self.open_since_ns = None;
        self.tracked.clear();
        self.unchecked.clear();
    }

    /// Whether the engine's health of container `id` may be an earlier
    /// life's: it was seen starting and no health check has run since.
    pub fn health_unchecked(&self, id: &str) -> bool {
        self.unchecked.contains(id)
    }

    /// Whether an event stream is open.
    pub fn is_open(&self) -> bool {
        self.open_since_ns.is_some()
    }

    /// Applies one event.
    pub fn apply(&mut self, ev: ContainerEvent) {
        tracing::debug!(?ev, "life event");
        if self.open_since_ns.is_none() {
            return;
        }
        match ev.action {
            EventAction::Start => {
                self.unchecked.insert(ev.id.clone());
            }
            EventAction::Health => {
                self.unchecked.remove(&ev.id);
            }
            EventAction::Destroy => {
                self.unchecked.remove(&ev.id);
                self.tracked.remove(&ev.id);
                return;
            }
            _ => {}
        }
        match self
            .tracked
            .entry(ev.id.clone())
            .or_insert_with(|| Tracked::Unseeded(Vec::new()))
        {
            Tracked::Unseeded(pending) => {
                if pending.len() == PENDING_CAP {
                    pending.remove(0);
                }
                pending.push(ev);
            }
            Tracked::Known {
                life,
                counted,
                death_due,
                ..
            } => advance(life, counted, death_due, &ev),
        }
    }

    /// What the book says of container `id`, now in `state`, created at
    /// `created` (seconds since the epoch); `young` when it is running and
    /// not yet up for the settle window.
    pub fn answer(&mut self, id: &str, state: ContainerState, created: i64, young: bool) -> Answer {
        let known = match self.tracked.get(id) {
            Some(Tracked::Known { life, seen, .. }) => Some((life.clone(), *seen)),
            _ => None,
        };
        let Some(since) = self.open_since_ns else {
            // No stream: an inspect stands only while nothing can move.
            let stale = match state {
                ContainerState::Running => young,
                ContainerState::Created => false,
                // Being restarted by the engine: its count moves while its
                // state reads the same.
                ContainerState::Restarting => true,
                // Stopped: nothing moves until its state does.
                _ => known.as_ref().is_none_or(|(_, seen)| *seen != state),
            };
            return match known {
                _ if stale => Answer::Inspect,
                Some((life, _)) => Answer::Life(life),
                None => Answer::Unknown,
            };
        };
        if let Some((life, _)) = known {
            return Answer::Life(self.as_engine_counts(id, state, life));
        }
        // Created in a later second than the stream began (the list says
        // whole seconds): every start and death of it was seen.
        if created > since.div_euclid(1_000_000_000) {
            tracing::debug!(id, ?state, "life born");
            return Answer::Life(self.known(id, state, Life::default(), false, false));
        }
        // Up for its window: its life does not matter until it moves (its
        // events meanwhile are kept for when it does).
        if state == ContainerState::Running && !young {
            return Answer::Unknown;
        }
        Answer::Inspect
    }

    /// A life as the engine counts restarts: while the engine is restarting
    /// a container that died after its last start, the restart it has
    /// scheduled already counts (as an inspect would say).
    fn as_engine_counts(&self, id: &str, state: ContainerState, mut life: Life) -> Life {
        let counted = matches!(
            self.tracked.get(id),
            Some(Tracked::Known { counted: true, .. })
        );
        if state == ContainerState::Restarting
            && !counted
            && life.started_ns > 0
            && life.finished_ns >= life.started_ns
        {
            life.restart_count = life.restart_count.saturating_add(1);
        }
        life
    }

    /// Records what an inspect said of container `id` in `state`; events
    /// that came while it was asked are laid over it.
    pub fn seed(&mut self, id: &str, state: ContainerState, inspected: Life) -> Life {
        tracing::debug!(id, ?state, ?inspected, "life seeded");
        // The engine counts a restart when it schedules it: the start to
        // come is counted already while the container is dead after its
        // last start. A list that said `restarting` may be older than the
        // inspect: once started again, that start is in the count and in
        // `started_ns`, and the next one is new.
        let dead = inspected.finished_ns >= inspected.started_ns;
        let counted = (inspected.restarting || state == ContainerState::Restarting) && dead;
        // A death stamped at or after the stream began has its event in the
        // stream (the event is stamped no earlier than the death).
        let death_due = dead
            && inspected.started_ns > 0
            && self
                .open_since_ns
                .is_some_and(|since| inspected.finished_ns >= since);
        self.known(id, state, inspected, counted, death_due)
    }

    /// Records a container's life from `life` on, with the events kept for
    /// it laid over.
    fn known(
        &mut self,
        id: &str,
        state: ContainerState,
        life: Life,
        counted: bool,
        death_due: bool,
    ) -> Life {
        let (mut life, mut counted, mut death_due) = (life, counted, death_due);
        if let Some(Tracked::Unseeded(events)) = self.tracked.get(id) {
            for ev in events {
                advance(&mut life, &mut counted, &mut death_due, ev);
            }
        }
        self.tracked.insert(
            id.to_string(),
            Tracked::Known {
                life: life.clone(),
                seen: state,
                counted,
                death_due,
            },
        );
        life
    }

    /// Forgets every container but those in `ids`.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.tracked.retain(|id, _| keep(id));
        self.unchecked.retain(|id| keep(id));
    }
}

/// Moves a life on by one event; an event it already holds changes nothing.
/// The engine stamps an event a little after the time an inspect gives for
/// the same start or death, so times alone cannot tell them apart: a start
/// is new only after a death that followed the last start, and later than
/// that death. The engine stamps a start's event after its process began,
/// which for a process that exits at once may be after its death: while an
/// inspected death's own event is due, the one start after that death and
/// before its event is old.
fn advance(life: &mut Life, counted: &mut bool, death_due: &mut bool, ev: &ContainerEvent) {
    match ev.action {
        EventAction::Start if *death_due && ev.at_ns > life.started_ns.max(life.finished_ns) => {
            *death_due = false;
        }
        EventAction::Die(_) if *death_due && ev.at_ns >= life.finished_ns => {
            *death_due = false;
            life.finished_ns = ev.at_ns;
        }
        EventAction::Start
            if life.finished_ns >= life.started_ns
                && ev.at_ns > life.started_ns.max(life.finished_ns) =>
        {
            if life.started_ns > 0 && !std::mem::take(counted) {
                life.restart_count = life.restart_count.saturating_add(1);
            }
            life.started_ns = ev.at_ns;
        }
        EventAction::Die(code) if ev.at_ns > life.finished_ns => {
            life.finished_ns = ev.at_ns;
            life.exit_code = code;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_health_is_the_present_lifes_only_once_a_check_ran_since_its_start() {
        let mut b = LifeBook::default();
        // Nothing seen while no stream is open: the engine's word stands.
        b.apply(ev("c", EventAction::Start, 100));
        assert!(!b.health_unchecked("c"));
        b.opened(0);
        #[rustfmt::skip]
        let steps = [
            (EventAction::Start,   true),  // restarted: the listed health may be the last life's
            (EventAction::Other,   true),
            (EventAction::Health,  false), // a check ran since
            (EventAction::Die(1),  false),
            (EventAction::Start,   true),
            (EventAction::Health,  false),
            (EventAction::Start,   true),
            (EventAction::Destroy, false),
        ];
        for (i, (action, unchecked)) in steps.into_iter().enumerate() {
            b.apply(ev("c", action, 101 + i as i64));
            assert_eq!(b.health_unchecked("c"), unchecked, "after step {i}");
        }
        b.apply(ev("d", EventAction::Start, 120));
        b.retain(|id| id != "d");
        assert!(!b.health_unchecked("d"));
        b.apply(ev("e", EventAction::Start, 121));
        b.closed();
        assert!(!b.health_unchecked("e"));
    }

    const S: i64 = 1_000_000_000;

    fn ev(id: &str, action: EventAction, at_s: i64) -> ContainerEvent {
        ContainerEvent {
            id: id.into(),
            action,
            at_ns: at_s * S,
        }
    }

    fn life(restarts: u32, started: i64, finished: i64, code: i64) -> Life {
        Life {
            restart_count: restarts,
            started_ns: started * S,
            finished_ns: finished * S,
            exit_code: code,
            restarting: false,
            health_output: None,
        }
    }

    #[test]
    fn a_container_born_under_an_open_stream_is_never_inspected() {
        let mut b = LifeBook::default();
        b.opened(100 * S);
        b.apply(ev("c", EventAction::Start, 103));
        b.apply(ev("c", EventAction::Die(3), 104));
        b.apply(ev("c", EventAction::Start, 105));
        assert_eq!(
            b.answer("c", ContainerState::Running, 101, true),
            Answer::Life(life(1, 105, 104, 3))
        );
        // Later events move the life on.
        b.apply(ev("c", EventAction::Die(3), 106));
        b.apply(ev("c", EventAction::Start, 107));
        b.apply(ev("c", EventAction::Other, 108));
        assert_eq!(
            b.answer("c", ContainerState::Running, 102, true),
            Answer::Life(life(2, 107, 106, 3))
        );
        // Died and being restarted by the engine: the restart it scheduled
        // counts at once, and once only.
        b.apply(ev("c", EventAction::Die(3), 109));
        let Answer::Life(l) = b.answer("c", ContainerState::Restarting, 101, true) else {
            panic!()
        };
        assert_eq!(l.restart_count, 3);
        b.apply(ev("c", EventAction::Start, 110));
        let Answer::Life(l) = b.answer("c", ContainerState::Running, 101, true) else {
            panic!()
        };
        assert_eq!(l.restart_count, 3);
        // Never started yet.
        assert_eq!(
            b.answer("d", ContainerState::Created, 102, false),
            Answer::Life(Life::default())
        );
    }

    #[test]
    fn an_older_container_is_inspected_once_and_replayed_events_count_once() {
        let mut b = LifeBook::default();
        b.opened(100 * S);
        // Created in the stream's first second: it may have started before.
        assert_eq!(
            b.answer("c", ContainerState::Running, 100, true),
            Answer::Inspect
        );
        // Settled: not needed.
        assert_eq!(
            b.answer("c", ContainerState::Running, 100, false),
            Answer::Unknown
        );
        // Events from the replay, some of them already in the inspect.
        b.apply(ev("c", EventAction::Start, 90));
        b.apply(ev("c", EventAction::Die(1), 110));
        b.apply(ev("c", EventAction::Start, 111));
        let seeded = b.seed("c", ContainerState::Running, life(4, 90, 80, 1));
        assert_eq!(seeded, life(5, 111, 110, 1));
        assert_eq!(
            b.answer("c", ContainerState::Exited, 50, false),
            Answer::Life(life(5, 111, 110, 1))
        );
        b.apply(ev("c", EventAction::Destroy, 120));
        assert_eq!(
            b.answer("c", ContainerState::Running, 50, true),
            Answer::Inspect
        );
    }

    #[test]
    fn the_events_of_an_inspected_start_or_death_count_once() {
        let mut b = LifeBook::default();
        b.opened(100 * S);
        // Running: started at 90.0; its start event is stamped a moment later.
        let running = Life {
            restart_count: 2,
            started_ns: 90 * S,
            finished_ns: 80 * S,
            exit_code: 1,
            restarting: false,
            health_output: None,
        };
        b.seed("r", ContainerState::Running, running.clone());
        b.apply(ContainerEvent {
            id: "r".into(),
            action: EventAction::Start,
            at_ns: 90 * S + 3_000,
        });
        assert_eq!(
            b.answer("r", ContainerState::Running, 0, true),
            Answer::Life(running)
        );
        // Stopped after a start: both events replayed after the inspect.
        let stopped = life(0, 90, 95, 1);
        b.seed("s", ContainerState::Exited, stopped.clone());
        b.apply(ev("s", EventAction::Start, 90));
        b.apply(ContainerEvent {
            id: "s".into(),
            action: EventAction::Start,
            at_ns: 90 * S + 3_000,
        });
        b.apply(ContainerEvent {
            id: "s".into(),
            action: EventAction::Die(1),
            at_ns: 95 * S + 2_000,
        });
        assert_eq!(
            b.answer("s", ContainerState::Exited, 0, false).clone(),
            Answer::Life(Life {
                finished_ns: 95 * S + 2_000,
                ..stopped
            })
        );
        // Then started again: one restart.
        b.apply(ev("s", EventAction::Start, 97));
        // Inspected while the engine restarts it (whatever the list said):
        // the count already holds the start to come.
        b.seed(
            "t",
            ContainerState::Running,
            Life {
                restarting: true,
                health_output: None,
                ..life(1, 90, 95, 1)
            },
        );
        b.apply(ev("t", EventAction::Start, 96));
        b.apply(ev("t", EventAction::Die(1), 97));
        b.apply(ev("t", EventAction::Start, 98));
        let Answer::Life(t) = b.answer("t", ContainerState::Running, 0, true) else {
            panic!()
        };
        assert_eq!((t.restart_count, t.started_ns), (2, 98 * S));
        // Listed as being restarted, inspected once it ran again (started
        // after its death; the count holds that start): the next start is
        // a new restart.
        b.seed("u", ContainerState::Restarting, life(1, 96, 95, 1));
        b.apply(ev("u", EventAction::Start, 96));
        b.apply(ev("u", EventAction::Die(1), 97));
        b.apply(ev("u", EventAction::Start, 98));
        let Answer::Life(u) = b.answer("u", ContainerState::Running, 0, true) else {
            panic!()
        };
        assert_eq!((u.restart_count, u.started_ns), (2, 98 * S));
        let Answer::Life(l) = b.answer("s", ContainerState::Running, 0, true) else {
            panic!()
        };
        assert_eq!((l.restart_count, l.started_ns), (1, 97 * S));
    }

    #[test]
    fn a_start_stamped_after_its_own_quick_death_is_not_a_restart() {
        const MS: i64 = 1_000_000;
        let at = |ms: i64| 100 * S + ms * MS;
        let e = |action, ms| ContainerEvent {
            id: "q".into(),
            action,
            at_ns: at(ms),
        };
        // A process that exits at once, restarted by the engine (Podman
        // restarts without a back-off); its start events are stamped a few
        // ms after it began, here after it had already died.
        let quick = [
            (EventAction::Start, 5),
            (EventAction::Die(1), 25),
            (EventAction::Start, 108),
            (EventAction::Die(1), 125),
            (EventAction::Start, 208),
        ];
        // Inspected dead after its first restart (started at 100 ms, died
        // at 103 ms), every event replayed, in any split between those
        // that came before the inspect and those after.
        for split in 0..=quick.len() {
            let mut b = LifeBook::default();
            b.opened(100 * S);
            assert_eq!(
                b.answer("q", ContainerState::Running, 100, true),
                Answer::Inspect
            );
            for &(action, ms) in &quick[..split] {
                b.apply(e(action, ms));
            }
            let inspected = Life {
                restart_count: 1,
                started_ns: at(100),
                finished_ns: at(103),
                exit_code: 1,
                restarting: false,
                health_output: None,
            };
            b.seed("q", ContainerState::Exited, inspected);
            for &(action, ms) in &quick[split..] {
                b.apply(e(action, ms));
            }
            let Answer::Life(l) = b.answer("q", ContainerState::Running, 100, true) else {
                panic!()
            };
            assert_eq!(
                (l.restart_count, l.started_ns),
                (2, at(208)),
                "{split} events before the inspect"
            );
        }
        // Dead before the stream began: its death's event is not coming,
        // and the first start is new.
        let mut b = LifeBook::default();
        b.opened(100 * S);
        b.seed("p", ContainerState::Exited, life(3, 90, 95, 1));
        b.apply(ev("p", EventAction::Start, 101));
        let Answer::Life(l) = b.answer("p", ContainerState::Running, 0, true) else {
            panic!()
        };
        assert_eq!(l.restart_count, 4);
    }

    #[test]
    fn without_a_stream_an_inspect_stands_while_nothing_can_move() {
        let mut b = LifeBook::default();
        assert!(!b.is_open());
        let c = "c";
        // Stopped: inspected once per state.
        assert_eq!(
            b.answer(c, ContainerState::Exited, 0, false),
            Answer::Inspect
        );
        b.seed(c, ContainerState::Exited, life(0, 1, 2, 1));
        // Events without a stream are not counted.
        b.apply(ev(c, EventAction::Start, 3));
        assert_eq!(
            b.answer(c, ContainerState::Exited, 0, false),
            Answer::Life(life(0, 1, 2, 1))
        );
        assert_eq!(b.answer(c, ContainerState::Dead, 0, false), Answer::Inspect);
        // Running and young, or being restarted: inspected every time.
        assert_eq!(
            b.answer(c, ContainerState::Running, 0, true),
            Answer::Inspect
        );
        assert_eq!(
            b.answer(c, ContainerState::Restarting, 0, false),
            Answer::Inspect
        );
        // Settled: what was known stands.
        assert_eq!(
            b.answer(c, ContainerState::Running, 0, false),
            Answer::Life(life(0, 1, 2, 1))
        );
        assert_eq!(
            b.answer("d", ContainerState::Running, 0, false),
            Answer::Unknown
        );
        assert_eq!(
            b.answer("d", ContainerState::Created, 0, false),
            Answer::Unknown
        );
    }

    #[test]
    fn opening_or_closing_the_stream_forgets() {
        let mut b = LifeBook::default();
        b.opened(100 * S);
        b.seed("c", ContainerState::Running, life(1, 1, 1, 0));
        b.closed();
        assert_eq!(
            b.answer("c", ContainerState::Running, 0, true),
            Answer::Inspect
        );
        b.seed("c", ContainerState::Running, life(1, 1, 1, 0));
        b.opened(200 * S);
        assert_eq!(
            b.answer("c", ContainerState::Running, 0, true),
            Answer::Inspect
        );
        for k in 0..50 {
            b.apply(ev("c", EventAction::Die(1), 300 + 2 * k));
            b.apply(ev("c", EventAction::Start, 301 + 2 * k));
        }
        // The pending list is bounded; the newest are kept (32 deaths and
        // restarts of the 50).
        let l = b.seed("c", ContainerState::Running, life(0, 1, 0, 0));
        assert_eq!((l.restart_count, l.started_ns), (32, 399 * S));
    }
}
