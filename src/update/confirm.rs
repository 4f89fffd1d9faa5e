//! A candidate proves itself, or gives up. Confirmation is measured, not
//! claimed: the candidate has opened the store (it is running), completed
//! a pass with the engine, and, with a plane, had a document taken from
//! the plane once, all within its window, each counted in the candidate
//! process's own memory (nothing stored by the version before counts). Then it writes itself into the launcher's state
//! as `current` (the version it replaced becomes `previous`). A candidate
//! that has not proved itself when its window ends leaves its last words
//! (what was missing), writes itself down as failed and asks for a
//! restart: the launcher runs the version it replaced. A crash or a hang
//! (the watchdog) before then is counted by the launcher, which goes back
//! after three starts.

use std::time::Duration;

use crate::host::launch::Launched;
use crate::model::launch::{AgentVersion, Failed};

/// The default window: from the candidate's start to its confirmation.
pub const WINDOW: Duration = Duration::from_secs(300);

/// What the candidate has shown so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Proof {
    /// A pass completed with the engine since the start.
    pub passed: bool,
    /// Why no pass completed yet (the engine away, passes failing).
    pub pass_missing: Option<String>,
    /// Whether the plane answered since the start; `None`: no plane.
    pub plane: Option<bool>,
    /// Why the plane did not answer (its last error).
    pub plane_missing: Option<String>,
}

/// The plane's part of the proof: whether the plane answered this process
/// with a document it took (`taken_here`, counted in the process's own
/// memory: a 304, the same document, one adopted), and, when not, why (the
/// last contact's error or refusal). The contact's time is no evidence:
/// the version before the candidate stored it, in the same second maybe.
pub fn plane_proof(
    taken_here: u64,
    contact: &crate::store::plane::Contact,
) -> (bool, Option<String>) {
    if taken_here > 0 {
        return (true, None);
    }
    let why = contact.error.clone().or_else(|| {
        contact
            .refusal
            .as_ref()
            .map(|r| format!("its document refused: {}", r.detail))
    });
    (false, why)
}

/// Where a candidate stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not proved yet; the window is still open.
    Wait,
    /// Proved: it becomes the current version.
    Confirmed,
    /// The window closed first: why, naming what was missing.
    GiveUp(String),
}

/// The rule: confirmed once every proof is in, whatever the time; given
/// up once the window has passed without them.
pub fn judge(p: &Proof, elapsed: Duration, window: Duration) -> Verdict {
    let plane_ok = p.plane.unwrap_or(true);
    if p.passed && plane_ok {
        return Verdict::Confirmed;
    }
    if elapsed < window {
        return Verdict::Wait;
    }
    let mut missing = Vec::new();
    if !p.passed {
        missing.push(match &p.pass_missing {
            Some(why) => format!("no pass completed ({why})"),
            None => "no pass completed".to_string(),
        });
    }
    if !plane_ok {
        missing.push(match &p.plane_missing {
            Some(why) => format!("the plane never answered ({why})"),
            None => "the plane never answered".to_string(),
        });
    }
    Verdict::GiveUp(format!(
        "not confirmed within {}: {}",
        crate::model::time::format_duration(window),
        missing.join("; ")
    ))
}

/// Writes the confirmed candidate into the launcher's state: it is
/// `current`, the version it replaced `previous`.
pub fn confirm(l: &Launched, me: &AgentVersion) -> Result<(), String> {
    l.change_state(|s| {
        if s.current.as_ref() != Some(me) {
            s.previous = s.current.take();
            s.current = Some(me.clone());
        }
        if s.candidate.as_ref().is_some_and(|c| &c.version == me) {
            s.candidate = None;
        }
        if s.failed.as_ref().is_some_and(|f| &f.version == me) {
            s.failed = None;
        }
    })
    .map(|_| ())
}

/// Gives up: last words, the failure in the launcher's state, the
/// candidate gone from it. The caller then asks for the restart.
pub fn give_up(l: &Launched, me: &AgentVersion, why: &str) -> Result<(), String> {
    l.leave_last_words(me, why);
    l.change_state(|s| {
        if s.candidate.as_ref().is_some_and(|c| &c.version == me) {
            s.candidate = None;
        }
        s.failed = Some(Failed {
            version: me.clone(),
            why: crate::model::launch::one_line(why),
        });
    })
    .map(|_| ())
}

/// How a candidate's watch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    Confirmed,
    /// Gave up: the agent must now restart through the launcher.
    GaveUp(String),
}

/// Watches a candidate's proof once a second until it is confirmed or its
/// window passes; writes the outcome into the launcher's state. A state
/// that cannot be written is tried again the next second: the window's
/// end then still gives up (a candidate that cannot write its own state
/// is not one to keep).
pub async fn watch(
    l: Launched,
    me: AgentVersion,
    window: Duration,
    proof: impl Fn() -> Proof,
) -> Ended {
    let start = tokio::time::Instant::now();
    tracing::info!(
        "candidate {me}: confirming within {}",
        crate::model::time::format_duration(window)
    );
    loop {
        match judge(&proof(), start.elapsed(), window) {
            Verdict::Wait => {}
            Verdict::Confirmed => match confirm(&l, &me) {
                Ok(()) => {
                    tracing::info!(
                        "candidate {me}: confirmed (a pass completed and the plane, if any, answered); it is the current version"
                    );
                    return Ended::Confirmed;
                }
                Err(e) => tracing::error!("candidate {me}: cannot write its confirmation: {e}"),
            },
            Verdict::GiveUp(why) => {
                tracing::error!("candidate {me}: {why}; going back to the version it replaced");
                if let Err(e) = give_up(&l, &me, &why) {
                    tracing::error!("candidate {me}: cannot write its failure: {e}");
                }
                return Ended::GaveUp(why);
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judge_table() {
        let w = Duration::from_secs(300);
        let early = Duration::from_secs(10);
        let late = Duration::from_secs(301);
        let p = |passed: bool, plane: Option<bool>| Proof {
            passed,
            pass_missing: (!passed).then(|| "engine not reachable: no socket".to_string()),
            plane,
            plane_missing: (plane == Some(false)).then(|| "connection refused".to_string()),
        };
        // (proof, elapsed, verdict or the words of its reason)
        #[rustfmt::skip]
        let cases: Vec<(Proof, Duration, Result<Verdict, &str>)> = vec![
            (p(true, None), early, Ok(Verdict::Confirmed)),
            (p(true, Some(true)), early, Ok(Verdict::Confirmed)),
            (p(true, Some(true)), late, Ok(Verdict::Confirmed)),
            (p(false, None), early, Ok(Verdict::Wait)),
            (p(true, Some(false)), early, Ok(Verdict::Wait)),
            (p(false, None), late, Err("not confirmed within 5m: no pass completed (engine not reachable: no socket)")),
            (p(true, Some(false)), late, Err("not confirmed within 5m: the plane never answered (connection refused)")),
            (p(false, Some(false)), late, Err("no pass completed (engine not reachable: no socket); the plane never answered")),
            (Proof::default(), w, Err("not confirmed within 5m: no pass completed")),
        ];
        for (proof, elapsed, want) in cases {
            let got = judge(&proof, elapsed, w);
            match want {
                Ok(v) => assert_eq!(got, v, "{proof:?} at {elapsed:?}"),
                Err(words) => match &got {
                    Verdict::GiveUp(why) => assert!(why.contains(words), "{why}"),
                    other => panic!("{proof:?} at {elapsed:?}: {other:?}"),
                },
            }
        }
    }

    #[test]
    fn only_what_the_candidate_itself_took_from_the_plane_proves_it() {
        use crate::store::plane::Contact;
        let at_start = Some(1_800_000_000);
        let contact = |at: Option<u64>, error: Option<&str>, refused: bool| Contact {
            at,
            error: error.map(str::to_string),
            refusal: refused.then(|| crate::store::plane::Refusal {
                class: crate::plane::RefusalClass::Rollback,
                detail: "revision 3 is older than 4".into(),
                revision: Some(3),
                at: 1_800_000_000,
            }),
            plane_date: None,
        };
        type Case = (u64, Contact, (bool, Option<&'static str>));
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // (taken by this process, the last contact, proof)
            // The version before answered in the candidate's first second:
            // its contact is not the candidate's.
            (0, contact(at_start, None, false), (false, None)),
            (0, contact(Some(u64::MAX), None, false), (false, None)),
            // Every fetch of the candidate refused by the host.
            (0, contact(at_start, Some("HTTP 403"), false), (false, Some("HTTP 403"))),
            // An answer the candidate refused is not one it took.
            (0, contact(at_start, None, true), (false, Some("its document refused: revision 3 is older than 4"))),
            (1, contact(None, None, false), (true, None)),
            (3, contact(at_start, Some("HTTP 503"), false), (true, None)),
        ];
        for (taken, c, (proved, why)) in cases {
            let got = plane_proof(*taken, c);
            assert_eq!(got, (*proved, why.map(str::to_string)), "{taken} {c:?}");
        }
    }
}
