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
}

/// Log lines kept per request.
pub const MAX_LOG: usize = 64;

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
    pub stage: Stage,
    /// The binary is in place, checked and run once.
    pub landed: bool,
    /// When the one restart of this attempt was asked for.
    pub restart_requested_at: Option<u64>,
    pub finished_at: Option<u64>,
    /// Why it failed or faulted.
    pub failure: Option<String>,
    /// Attempts so far after a fault (drives the backoff, never a cap).
    pub attempt: u32,
    pub faulted_at: Option<u64>,
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
            stage: Stage::Requested,
            landed: false,
            restart_requested_at: None,
            finished_at: None,
            failure: None,
            attempt: 0,
            faulted_at: None,
            log: Vec::new(),
        }
    }

    /// Moves to `stage`, saying why in the log.
    pub fn step(&mut self, stage: Stage, at: u64, line: impl Into<String>) {
        self.stage = stage;
        self.say(at, line);
        if stage.is_final() {
            self.finished_at = Some(at);
        }
        if stage == Stage::Faulted {
            self.faulted_at = Some(at);
        }
    }

    pub fn say(&mut self, at: u64, line: impl Into<String>) {
        self.log
            .push((at, crate::model::launch::one_line(&line.into())));
        if self.log.len() > MAX_LOG {
            self.log.remove(0);
        }
    }

    /// Fails it: a decided answer.
    pub fn fail(&mut self, at: u64, why: impl Into<String>) {
        let why = crate::model::launch::one_line(&why.into());
        self.failure = Some(why.clone());
        self.step(Stage::Failed, at, format!("failed: {why}"));
    }

    /// Faults it: tried again after the backoff.
    pub fn fault(&mut self, at: u64, why: impl Into<String>) {
        let why = crate::model::launch::one_line(&why.into());
        self.failure = Some(why.clone());
        self.step(Stage::Faulted, at, format!("faulted: {why}"));
    }

    /// Takes a faulted request up again from the top (what was landed and
    /// checked stays landed): its restart is asked for again if it gets
    /// there.
    pub fn rearm(&mut self, at: u64) {
        self.attempt += 1;
        self.failure = None;
        self.restart_requested_at = None;
        self.step(
            Stage::Requested,
            at,
            format!("attempt {}", self.attempt + 1),
        );
    }

    /// When a faulted request is tried again: `interval × 2^attempt`, the
    /// doubling stopping at 32×.
    pub fn retry_at(&self, interval_secs: u64) -> Option<u64> {
        let at = self.faulted_at?;
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
    if !matches!(u.stage, Stage::Switching | Stage::Confirming) {
        return Resume::Keep;
    }
    let target = &u.version;
    match slot {
        Slot::Candidate(v) if v == target => {
            let start = launch.candidate.as_ref().map_or(1, |c| c.attempts);
            Resume::To(
                Stage::Confirming,
                match u.stage {
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
            match u.stage {
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
        let mut u = AgentUpdate::new(1, v("0.7.0"), "0.6.0", (vec![], None), "plane", 100);
        u.stage = stage;
        u.landed = true;
        u.restart_requested_at = Some(110);
        u
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
        u.fault(1000, "the download timed out");
        assert_eq!(u.retry_at(60), Some(1060));
        for (attempt, wait) in [(1, 120), (2, 240), (5, 1920), (9, 1920)] {
            u.attempt = attempt;
            assert_eq!(u.retry_at(60), Some(1000 + wait));
        }
        u.attempt = 0;
        u.rearm(2000);
        assert_eq!(
            (u.stage, u.attempt, u.failure.clone()),
            (Stage::Requested, 1, None)
        );
        assert!(u.landed);
        assert_eq!(
            u.restart_requested_at, None,
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
