//! An update of stead itself as one durable request, and the rule that
//! moves it on when an agent starts ([`resume`]).
//!
//! `Requested → Landing → Switching → Confirming → Done | Failed | Faulted`:
//! - Landing: the binary is fetched, its size, SHA-256 and the statement's
//!   signature checked, written beside the current one and run once
//!   (`--version`) before anything is switched;
//! - Switching: stamped (with the time the one restart was asked for)
//!   before the launcher's state names the candidate and the agent
//!   restarts; exactly one restart per attempt;
//! - Confirming: the candidate runs and proves itself (`update::confirm`);
//! - Done: confirmed; Failed: a decided answer (the statement, the binary,
//!   the launcher gave up on the candidate), never tried again; Faulted: an
//!   answer that may clear (a download that timed out, a switch cut short),
//!   tried again with a backoff, never final.
//!
//! Every step is stored before it acts, so an agent killed anywhere
//! (either version) finds where the request stood at its next start.
//!
//! Every move asks the guard first ([`AgentUpdate::can_become`], over the
//! one table [`Stage::may_become`]) and then sets the new [`Phase`], which
//! carries what that stage has (when it ended or faulted, why); a refused
//! move returns a [`TransitionError`] and changes nothing. The store's
//! record spells it flat ([`FlatState`]), as it always has.

use crate::model::launch::{AgentVersion, Slot, State};

/// Where a request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Requested,
    Landing,
    Switching,
    Confirming,
    Done,
    Failed,
    Faulted,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Requested => "requested",
            Stage::Landing => "landing",
            Stage::Switching => "switching",
            Stage::Confirming => "confirming",
            Stage::Done => "done",
            Stage::Failed => "failed",
            Stage::Faulted => "faulted",
        }
    }

    pub fn parse(s: &str) -> Option<Stage> {
        Some(match s {
            "requested" => Stage::Requested,
            "landing" => Stage::Landing,
            "switching" => Stage::Switching,
            "confirming" => Stage::Confirming,
            "done" => Stage::Done,
            "failed" => Stage::Failed,
            "faulted" => Stage::Faulted,
            _ => return None,
        })
    }

    /// Done and Failed are final; Faulted is retried.
    pub fn is_final(self) -> bool {
        matches!(self, Stage::Done | Stage::Failed)
    }

    /// Whether moving to `next` is allowed: the one table of the moves.
    pub fn may_become(self, next: Stage) -> bool {
        use Stage::*;
        matches!(
            (self, next),
            (Requested, Landing)
                | (Landing, Switching | Faulted)
                | (Switching, Confirming | Done | Faulted)
                // Started again: a start before ended without confirming.
                | (Confirming, Confirming | Done)
                | (Faulted, Requested)
                // A decided answer, or superseded before it switched.
                | (Requested | Landing | Switching | Confirming | Faulted, Failed)
        )
    }
}

/// Log lines kept per request.
pub const MAX_LOG: usize = 64;

/// Where a request stands, with what that stage has: the stage of each
/// variant is [`Phase::stage`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    Requested,
    Landing,
    Switching,
    Confirming,
    /// Confirmed. Final.
    Done {
        /// When, seconds since the epoch.
        at: u64,
    },
    /// A decided answer. Final.
    Failed {
        /// When, seconds since the epoch.
        at: u64,
        /// Why.
        failure: String,
    },
    /// An answer that may clear: tried again after the backoff.
    Faulted {
        /// When, seconds since the epoch.
        at: u64,
        /// Why.
        failure: String,
    },
}

impl Phase {
    /// Its stage.
    pub fn stage(&self) -> Stage {
        match self {
            Phase::Requested => Stage::Requested,
            Phase::Landing => Stage::Landing,
            Phase::Switching => Stage::Switching,
            Phase::Confirming => Stage::Confirming,
            Phase::Done { .. } => Stage::Done,
            Phase::Failed { .. } => Stage::Failed,
            Phase::Faulted { .. } => Stage::Faulted,
        }
    }
}

/// A move refused by a guard: the request stays as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("update {id} is {}; it cannot become {}", from.as_str(), to.as_str())]
pub struct TransitionError {
    /// The request.
    pub id: u64,
    /// Where it is.
    pub from: Stage,
    /// Where it was to go.
    pub to: Stage,
}

/// A request's state as its record spells it: the stage and, beside it,
/// the optional fields some stages have. Reading one is total: a field
/// its stage does not have is not kept, a final or faulted stage's
/// missing time reads as 0 and its missing failure as empty (no version
/// wrote either).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlatState {
    pub stage: Stage,
    pub restart_requested_at: Option<u64>,
    pub finished_at: Option<u64>,
    pub failure: Option<String>,
    pub faulted_at: Option<u64>,
}

/// One request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentUpdate {
    pub id: u64,
    /// The version asked for.
    pub version: AgentVersion,
    /// The version that ran when it was asked for.
    pub from: String,
    /// The signed statement (its DSSE envelope), as received.
    pub statement: Vec<u8>,
    /// Where the statement came from, when from a URL: a binary's relative
    /// URL is read against it.
    pub statement_url: Option<String>,
    /// Who asked: `plane`, or the API's caller.
    pub requested_by: String,
    pub requested_at: u64,
    /// A deliberate downgrade.
    pub downgrade: bool,
    /// Where it stands, with what that stage has; moved only by the
    /// guarded transitions below.
    state: Phase,
    /// The binary is in place, checked and run once (it stays landed
    /// across attempts).
    pub landed: bool,
    /// When the one restart of this attempt was asked for: stamped by the
    /// move to switching, kept when the attempt ends, cleared by a re-arm.
    restart_requested_at: Option<u64>,
    /// Attempts so far after a fault (drives the backoff, never a cap).
    pub attempt: u32,
    /// What happened, in order: (time, line).
    pub log: Vec<(u64, String)>,
}

impl AgentUpdate {
    /// A new request: `statement` is the envelope and the URL it came from.
    pub fn new(
        id: u64,
        version: AgentVersion,
        from: &str,
        statement: (Vec<u8>, Option<String>),
        requested_by: &str,
        at: u64,
    ) -> AgentUpdate {
        AgentUpdate {
            id,
            version,
            from: from.to_string(),
            statement: statement.0,
            statement_url: statement.1,
            requested_by: requested_by.to_string(),
            requested_at: at,
            downgrade: false,
            state: Phase::Requested,
            landed: false,
            restart_requested_at: None,
            attempt: 0,
            log: Vec::new(),
        }
    }

    /// A request filed already failed: a decided refusal kept for the
    /// record (it was never open, so no move made it final).
    pub fn refused(mut self, at: u64, why: impl Into<String>) -> AgentUpdate {
        let why = crate::model::launch::one_line(&why.into());
        self.say(at, format!("failed: {why}"));
        self.state = Phase::Failed { at, failure: why };
        self
    }

    /// The state as read from its record ([`FlatState`]): for the store's
    /// reader, which restores what was written, not a move.
    pub fn restored(mut self, f: FlatState) -> AgentUpdate {
        let at = |t: Option<u64>| t.unwrap_or(0);
        self.state = match f.stage {
            Stage::Requested => Phase::Requested,
            Stage::Landing => Phase::Landing,
            Stage::Switching => Phase::Switching,
            Stage::Confirming => Phase::Confirming,
            Stage::Done => Phase::Done {
                at: at(f.finished_at),
            },
            Stage::Failed => Phase::Failed {
                at: at(f.finished_at),
                failure: f.failure.unwrap_or_default(),
            },
            Stage::Faulted => Phase::Faulted {
                at: at(f.faulted_at),
                failure: f.failure.unwrap_or_default(),
            },
        };
        self.restart_requested_at = f.restart_requested_at;
        self
    }

    /// The state as its record spells it.
    pub fn flat(&self) -> FlatState {
        let (finished_at, failure, faulted_at) = match &self.state {
            Phase::Done { at } => (Some(*at), None, None),
            Phase::Failed { at, failure } => (Some(*at), Some(failure.clone()), None),
            Phase::Faulted { at, failure } => (None, Some(failure.clone()), Some(*at)),
            _ => (None, None, None),
        };
        FlatState {
            stage: self.stage(),
            restart_requested_at: self.restart_requested_at,
            finished_at,
            failure,
            faulted_at,
        }
    }

    /// Where it stands, with what that stage has.
    pub fn state(&self) -> &Phase {
        &self.state
    }

    /// Its stage.
    pub fn stage(&self) -> Stage {
        self.state.stage()
    }

    /// Why it failed or faulted.
    pub fn failure(&self) -> Option<&str> {
        match &self.state {
            Phase::Failed { failure, .. } | Phase::Faulted { failure, .. } => Some(failure),
            _ => None,
        }
    }

    /// When it was done or failed.
    pub fn finished_at(&self) -> Option<u64> {
        match self.state {
            Phase::Done { at } | Phase::Failed { at, .. } => Some(at),
            _ => None,
        }
    }

    /// When the one restart of this attempt was asked for.
    pub fn restart_requested_at(&self) -> Option<u64> {
        self.restart_requested_at
    }

    /// The guard: whether it may become `to` from where it stands.
    pub fn can_become(&self, to: Stage) -> Result<(), TransitionError> {
        let from = self.stage();
        if from.may_become(to) {
            Ok(())
        } else {
            Err(TransitionError {
                id: self.id,
                from,
                to,
            })
        }
    }

    /// Moves to `to`, saying why in the log (for failed and faulted, the
    /// line is the failure; a move to requested is [`AgentUpdate::rearm`],
    /// the line aside; a move to switching stamps the one restart).
    pub fn step(
        &mut self,
        to: Stage,
        at: u64,
        line: impl Into<String>,
    ) -> Result<(), TransitionError> {
        match to {
            Stage::Failed => return self.fail(at, line),
            Stage::Faulted => return self.fault(at, line),
            Stage::Requested => return self.rearm(at),
            _ => {}
        }
        self.can_become(to)?;
        self.state = match to {
            Stage::Landing => Phase::Landing,
            Stage::Switching => {
                self.restart_requested_at = Some(at);
                Phase::Switching
            }
            Stage::Confirming => Phase::Confirming,
            _ => Phase::Done { at },
        };
        self.say(at, line);
        Ok(())
    }

    pub fn say(&mut self, at: u64, line: impl Into<String>) {
        self.log
            .push((at, crate::model::launch::one_line(&line.into())));
        if self.log.len() > MAX_LOG {
            self.log.remove(0);
        }
    }

    /// Fails it: a decided answer.
    pub fn fail(&mut self, at: u64, why: impl Into<String>) -> Result<(), TransitionError> {
        self.can_become(Stage::Failed)?;
        let why = crate::model::launch::one_line(&why.into());
        self.say(at, format!("failed: {why}"));
        self.state = Phase::Failed { at, failure: why };
        Ok(())
    }

    /// Faults it: tried again after the backoff.
    pub fn fault(&mut self, at: u64, why: impl Into<String>) -> Result<(), TransitionError> {
        self.can_become(Stage::Faulted)?;
        let why = crate::model::launch::one_line(&why.into());
        self.say(at, format!("faulted: {why}"));
        self.state = Phase::Faulted { at, failure: why };
        Ok(())
    }

    /// Takes a faulted request up again from the top (what was landed and
    /// checked stays landed): its restart is asked for again if it gets
    /// there.
    pub fn rearm(&mut self, at: u64) -> Result<(), TransitionError> {
        self.can_become(Stage::Requested)?;
        self.attempt += 1;
        self.restart_requested_at = None;
        self.state = Phase::Requested;
        self.say(at, format!("attempt {}", self.attempt + 1));
        Ok(())
    }

    /// When a faulted request is tried again: `interval × 2^attempt`, the
    /// doubling stopping at 32×.
    pub fn retry_at(&self, interval_secs: u64) -> Option<u64> {
        let Phase::Faulted { at, .. } = self.state else {
            return None;
        };
        Some(at + interval_secs.saturating_mul(1 << self.attempt.min(5)))
    }
}

/// What a starting agent does with the open request it finds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Nothing to change now (the executor moves it on).
    Keep,
    /// Moves it to `stage`, with this line (or this failure).
    To(Stage, String),
}

/// The rule at an agent's start: `me` is the version this agent is (as
/// the launcher ran it: its slot), `launch` the launcher's state now, and
/// `last_words` what the candidate left, if anything.
pub fn resume(u: &AgentUpdate, slot: &Slot, launch: &State, last_words: Option<&str>) -> Resume {
    if !matches!(u.stage(), Stage::Switching | Stage::Confirming) {
        return Resume::Keep;
    }
    let target = &u.version;
    match slot {
        Slot::Candidate(v) if v == target => {
            let start = launch.candidate.as_ref().map_or(1, |c| c.attempts);
            Resume::To(
                Stage::Confirming,
                match u.stage() {
                    Stage::Switching => {
                        format!("candidate {target} started (start {start} of the launcher's)")
                    }
                    // A crash, a watchdog kill or a power cut ended the
                    // start before: the history says so.
                    _ => format!(
                        "candidate {target} started again (start {start} of the launcher's): the start before ended without confirming"
                    ),
                },
            )
        }
        Slot::Current(v) if v == target => Resume::To(
            Stage::Done,
            format!("{target} confirmed; it is the current version"),
        ),
        _ => {
            if let Some(f) = launch.failed.as_ref().filter(|f| &f.version == target) {
                let words = last_words
                    .filter(|w| !f.why.contains(w))
                    .map(|w| format!("; its last words: {w}"))
                    .unwrap_or_default();
                return Resume::To(
                    Stage::Failed,
                    format!("candidate {target}: {}{words}", f.why),
                );
            }
            if launch
                .candidate
                .as_ref()
                .is_some_and(|c| &c.version == target)
            {
                // The launcher still has it on trial and ran this one (the
                // CLI, or a start it could not count): not decided yet.
                return Resume::Keep;
            }
            match u.stage() {
                Stage::Switching => Resume::To(
                    Stage::Faulted,
                    "the switch was cut short before the candidate started".into(),
                ),
                _ => Resume::To(
                    Stage::Failed,
                    format!("candidate {target} is no longer the launcher's and never confirmed"),
                ),
            }
        }
    }
}

/// What must stay free beside the store's snapshot for a switch: the
/// candidate's room to run (its store, its log) and the way back's.
pub const SNAPSHOT_SLACK: u64 = 32 << 20;

/// The rule for the snapshot taken before a switch: a store of `len`
/// bytes is copied only when its filesystem has `free` for it and
/// [`SNAPSHOT_SLACK`] besides; otherwise the switch is not made, saying
/// what is missing.
pub fn snapshot_room(len: u64, free: u64) -> Result<(), String> {
    let need = len.saturating_add(SNAPSHOT_SLACK);
    if free >= need {
        return Ok(());
    }
    Err(format!(
        "no room for the store's snapshot before the switch: {free} bytes free on its filesystem, {need} needed (the store's {len} and {SNAPSHOT_SLACK} to run on)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::launch::{Candidate, Failed};

    fn v(s: &str) -> AgentVersion {
        AgentVersion::parse(s).unwrap()
    }

    fn update(stage: Stage) -> AgentUpdate {
        let mut u = AgentUpdate::new(1, v("0.7.0"), "0.6.0", (vec![], None), "plane", 100)
            .restored(FlatState {
                stage,
                restart_requested_at: Some(110),
                finished_at: None,
                failure: None,
                faulted_at: None,
            });
        u.landed = true;
        u
    }

    /// Every transition a request has.
    #[derive(Clone, Copy, Debug)]
    enum Move {
        Land,
        Switch,
        Confirm,
        Finish,
        Fail,
        Fault,
        Rearm,
    }

    fn apply(u: &mut AgentUpdate, m: Move) -> Result<(), TransitionError> {
        match m {
            Move::Land => u.step(Stage::Landing, 500, "landing"),
            Move::Switch => u.step(Stage::Switching, 500, "switching"),
            Move::Confirm => u.step(Stage::Confirming, 500, "started"),
            Move::Finish => u.step(Stage::Done, 500, "confirmed"),
            Move::Fail => u.fail(500, "decided"),
            Move::Fault => u.fault(500, "may clear"),
            Move::Rearm => u.rearm(500),
        }
    }

    #[test]
    fn every_stage_and_transition_is_allowed_or_refused_by_name() {
        use Move::*;
        use Stage::{Confirming, Done, Failed, Faulted, Landing, Requested, Switching};
        // (from, transition, Ok(where it is then) or Err(the refused target))
        #[rustfmt::skip]
        let cases: &[(Stage, Move, Result<Stage, Stage>)] = &[
            (Requested, Land, Ok(Landing)),
            (Requested, Switch, Err(Switching)),
            (Requested, Confirm, Err(Confirming)),
            (Requested, Finish, Err(Done)),
            (Requested, Fail, Ok(Failed)),
            (Requested, Fault, Err(Faulted)),
            (Requested, Rearm, Err(Requested)),
            (Landing, Land, Err(Landing)),
            (Landing, Switch, Ok(Switching)),
            (Landing, Confirm, Err(Confirming)),
            (Landing, Finish, Err(Done)),
            (Landing, Fail, Ok(Failed)),
            (Landing, Fault, Ok(Faulted)),
            (Landing, Rearm, Err(Requested)),
            (Switching, Land, Err(Landing)),
            (Switching, Switch, Err(Switching)),
            (Switching, Confirm, Ok(Confirming)),
            (Switching, Finish, Ok(Done)),
            (Switching, Fail, Ok(Failed)),
            (Switching, Fault, Ok(Faulted)),
            (Switching, Rearm, Err(Requested)),
            (Confirming, Land, Err(Landing)),
            (Confirming, Switch, Err(Switching)),
            (Confirming, Confirm, Ok(Confirming)),
            (Confirming, Finish, Ok(Done)),
            (Confirming, Fail, Ok(Failed)),
            (Confirming, Fault, Err(Faulted)),
            (Confirming, Rearm, Err(Requested)),
            (Done, Land, Err(Landing)),
            (Done, Switch, Err(Switching)),
            (Done, Confirm, Err(Confirming)),
            (Done, Finish, Err(Done)),
            (Done, Fail, Err(Failed)),
            (Done, Fault, Err(Faulted)),
            (Done, Rearm, Err(Requested)),
            (Failed, Land, Err(Landing)),
            (Failed, Switch, Err(Switching)),
            (Failed, Confirm, Err(Confirming)),
            (Failed, Finish, Err(Done)),
            (Failed, Fail, Err(Failed)),
            (Failed, Fault, Err(Faulted)),
            (Failed, Rearm, Err(Requested)),
            (Faulted, Land, Err(Landing)),
            (Faulted, Switch, Err(Switching)),
            (Faulted, Confirm, Err(Confirming)),
            (Faulted, Finish, Err(Done)),
            (Faulted, Fail, Ok(Failed)),
            (Faulted, Fault, Err(Faulted)),
            (Faulted, Rearm, Ok(Requested)),
        ];
        assert_eq!(cases.len(), 7 * 7, "every pair");
        for &(from, m, want) in cases {
            let mut u = update(from);
            let before = u.clone();
            match (apply(&mut u, m), want) {
                (Ok(()), Ok(to)) => assert_eq!(u.stage(), to, "{from:?} {m:?}"),
                (Err(e), Err(to)) => {
                    assert_eq!(e, TransitionError { id: 1, from, to }, "{from:?} {m:?}");
                    assert_eq!(u, before, "{from:?} {m:?}: a refused move changes nothing");
                }
                (got, want) => panic!("{from:?} {m:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn each_stage_has_its_own_data_and_spells_it_flat_as_before() {
        let mut u = AgentUpdate::new(1, v("0.7.0"), "0.6.0", (vec![], None), "plane", 100);
        u.step(Stage::Landing, 101, "landing").unwrap();
        assert_eq!(u.restart_requested_at(), None);
        u.step(Stage::Switching, 102, "switching").unwrap();
        assert_eq!(u.restart_requested_at(), Some(102), "stamped by the switch");
        u.fault(103, "cut\nshort").unwrap();
        assert_eq!(
            u.flat(),
            FlatState {
                stage: Stage::Faulted,
                restart_requested_at: Some(102),
                finished_at: None,
                failure: Some("cut short".into()),
                faulted_at: Some(103),
            }
        );
        assert_eq!(u.retry_at(60), Some(163));
        u.rearm(200).unwrap();
        assert_eq!(
            (u.failure(), u.retry_at(60), u.restart_requested_at()),
            (None, None, None)
        );
        u.fail(201, "superseded").unwrap();
        assert_eq!(
            (u.finished_at(), u.failure()),
            (Some(201), Some("superseded"))
        );
        assert_eq!(
            u.log.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>(),
            [
                "landing",
                "switching",
                "faulted: cut short",
                "attempt 2",
                "failed: superseded"
            ]
        );
        // Every state reads back from its flat spelling as it was.
        for s in [
            Phase::Requested,
            Phase::Landing,
            Phase::Switching,
            Phase::Confirming,
            Phase::Done { at: 5 },
            Phase::Failed {
                at: 5,
                failure: "no".into(),
            },
            Phase::Faulted {
                at: 5,
                failure: "later".into(),
            },
        ] {
            let mut u = update(Stage::Requested);
            u.state = s;
            assert_eq!(u.clone().restored(u.flat()), u, "{:?}", u.state);
        }
        let refused = AgentUpdate::new(2, v("0.7.0"), "0.6.0", (vec![], None), "plane", 100)
            .refused(100, "not signed");
        assert_eq!(
            (refused.stage(), refused.failure()),
            (Stage::Failed, Some("not signed"))
        );
    }

    #[test]
    fn resume_table() {
        let cand = |n| State {
            current: Some(v("0.6.0")),
            candidate: Some(Candidate {
                version: v("0.7.0"),
                attempts: n,
            }),
            ..Default::default()
        };
        let failed = State {
            current: Some(v("0.6.0")),
            failed: Some(Failed {
                version: v("0.7.0"),
                why: "started 3 times and never confirmed".into(),
            }),
            ..Default::default()
        };
        let plain = State {
            current: Some(v("0.6.0")),
            ..Default::default()
        };
        let (cand1, cand2) = (cand(1), cand(2));
        let confirmed = State {
            current: Some(v("0.7.0")),
            previous: Some(v("0.6.0")),
            ..Default::default()
        };
        let c07 = Slot::Candidate(v("0.7.0"));
        let cur06 = Slot::Current(v("0.6.0"));
        let cur07 = Slot::Current(v("0.7.0"));
        // (stage, slot, launcher state, last words, outcome or its words)
        type Case<'a> = (
            Stage,
            &'a Slot,
            &'a State,
            Option<&'a str>,
            Result<Option<Stage>, &'a str>,
        );
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            (Stage::Landing, &cur06, &plain, None, Ok(None)),
            (Stage::Done, &cur07, &confirmed, None, Ok(None)),
            (Stage::Switching, &c07, &cand1, None, Err("confirming: candidate 0.7.0 started (start 1")),
            (Stage::Confirming, &c07, &cand2, None, Err("confirming: candidate 0.7.0 started again (start 2 of the launcher's): the start before ended")),
            (Stage::Switching, &cur07, &confirmed, None, Err("done: 0.7.0 confirmed")),
            (Stage::Confirming, &cur07, &confirmed, None, Err("done: 0.7.0 confirmed")),
            (Stage::Confirming, &cur06, &failed, None, Err("failed: candidate 0.7.0: started 3 times and never confirmed")),
            (Stage::Confirming, &cur06, &failed, Some("could not open the store: …"), Err("failed: candidate 0.7.0: started 3 times and never confirmed; its last words: could not open the store")),
            (Stage::Switching, &cur06, &failed, None, Err("failed: candidate 0.7.0: started 3 times")),
            (Stage::Confirming, &Slot::Package, &failed, None, Err("failed: candidate 0.7.0")),
            (Stage::Confirming, &cur06, &cand1, None, Ok(None)),
            (Stage::Switching, &cur06, &plain, None, Err("faulted: the switch was cut short")),
            (Stage::Confirming, &cur06, &plain, None, Err("failed: candidate 0.7.0 is no longer the launcher's")),
        ];
        for (stage, slot, launch, words, want) in cases {
            let got = resume(&update(stage), slot, launch, words);
            match (want, &got) {
                (Ok(None), Resume::Keep) => {}
                (Err(w), Resume::To(s, line)) => {
                    let said = format!("{}: {line}", s.as_str());
                    assert!(said.starts_with(w), "{stage:?} {slot:?}: {said}");
                }
                (want, got) => panic!("{stage:?} {slot:?} {launch:?}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn a_fault_backs_off_doubling_to_32_intervals_and_a_rearm_keeps_what_landed() {
        let mut u = update(Stage::Landing);
        u.fault(1000, "the download timed out").unwrap();
        assert_eq!(u.retry_at(60), Some(1060));
        for (attempt, wait) in [(1, 120), (2, 240), (5, 1920), (9, 1920)] {
            u.attempt = attempt;
            assert_eq!(u.retry_at(60), Some(1000 + wait));
        }
        u.attempt = 0;
        u.rearm(2000).unwrap();
        assert_eq!(
            (u.stage(), u.attempt, u.failure()),
            (Stage::Requested, 1, None)
        );
        assert!(u.landed);
        assert_eq!(
            u.restart_requested_at(),
            None,
            "the one restart is per attempt"
        );
        assert!(!Stage::Faulted.is_final() && Stage::Failed.is_final() && Stage::Done.is_final());
        for s in [
            Stage::Requested,
            Stage::Landing,
            Stage::Switching,
            Stage::Confirming,
            Stage::Done,
            Stage::Failed,
            Stage::Faulted,
        ] {
            assert_eq!(Stage::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn the_log_is_bounded_and_one_line_each() {
        let mut u = update(Stage::Landing);
        for i in 0..100 {
            u.say(i, format!("line\n{i}"));
        }
        assert_eq!(u.log.len(), MAX_LOG);
        assert_eq!(u.log[0].1, "line 36");
    }

    #[test]
    fn the_snapshot_is_taken_only_with_room_for_it_and_to_run_on() {
        const M: u64 = 1 << 20;
        #[rustfmt::skip]
        let cases: &[(u64, u64, Result<(), &str>)] = &[
            // (store bytes, free bytes, verdict)
            (M, 33 * M, Ok(())),
            (M, 100 * M, Ok(())),
            (0, SNAPSHOT_SLACK, Ok(())),
            (M, 33 * M - 1, Err("34603007 bytes free on its filesystem, 34603008 needed")),
            (M, 0, Err("no room for the store's snapshot")),
            (u64::MAX, u64::MAX - 1, Err("needed")),
        ];
        for (len, free, want) in cases {
            match (snapshot_room(*len, *free), want) {
                (Ok(()), Ok(())) => {}
                (Err(e), Err(w)) => assert!(e.contains(w), "{len} {free}: {e}"),
                (got, want) => panic!("{len} {free}: {got:?}, want {want:?}"),
            }
        }
    }
}
