//! A reload request: one durable record per reload, its states and the
//! guards on moving between them. The request is the whole truth of a
//! reload: every step is written to it before the step acts, so an agent
//! killed anywhere resumes the request where it was.
//!
//! ```text
//! requested → landing → activating → done
//!                 │          │
//!                 ├──────────┴──→ failed   (a decided answer; final)
//!                 └──────────┴──→ faulted  (may clear; re-armed to requested)
//! landing → done (nothing to activate)
//! ```

use std::fmt;

use serde::Serialize;

use crate::model::names::ModuleName;

/// Where a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Filed; no step taken in this attempt yet.
    Requested,
    /// Resolving versions and pulling what is to land.
    Landing,
    /// The landed versions are being started and measured.
    Activating,
    /// Every module runs its target and held for its health window (or
    /// had nothing to do).
    Done,
    /// A decided answer: asking again would get the same. Final.
    Failed,
    /// A crash or an answer that may clear on its own. Never final: re-armed
    /// with backoff.
    Faulted,
}

impl Status {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Requested => "requested",
            Status::Landing => "landing",
            Status::Activating => "activating",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Faulted => "faulted",
        }
    }

    /// Whether the request is over (nothing more happens to it).
    pub fn is_final(self) -> bool {
        matches!(self, Status::Done | Status::Failed)
    }

    /// Whether moving to `next` is allowed.
    pub fn may_become(self, next: Status) -> bool {
        use Status::*;
        matches!(
            (self, next),
            (Requested, Landing)
                | (Landing, Activating | Done | Failed | Faulted)
                | (Activating, Done | Failed | Faulted)
                | (Faulted, Requested)
        )
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the landed versions are activated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Activation {
    /// Exactly one restart per module: a recreate from the new image.
    Restart,
    /// Nothing to activate: every module already runs its target.
    NotNeeded,
}

/// One module of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Item {
    /// The module.
    pub module: String,
    /// The version (tag) it ran when the attempt began, and its image ID.
    pub running_version: Option<String>,
    /// The image ID it ran.
    pub running_image: Option<String>,
    /// The newest compatible version found, its floor and the registry.
    pub found_version: Option<String>,
    /// The oldest agent the found version declares it needs.
    pub found_floor: Option<String>,
    /// The registry asked.
    pub registry: Option<String>,
    /// What the module is to run: its version, manifest digest and image ID.
    pub target_version: Option<String>,
    /// The manifest digest landed (pulls are by digest).
    pub target_digest: Option<String>,
    /// The image ID of the target.
    pub target_image: Option<String>,
    /// The image declares a health check (then "held" means healthy).
    pub healthcheck: bool,
    /// The target's image is present on the node.
    pub landed: bool,
    /// What was decided for it, in words.
    pub decision: String,
    /// Why it failed, by name.
    pub failure: Option<String>,
    /// Its failure may clear on its own.
    pub transient: bool,
    /// Its running container carries the target since this time (seconds
    /// since the epoch); the health window counts from here.
    pub running_target_since: Option<u64>,
    /// Its restart count when it began running the target.
    pub restarts_at_start: Option<u32>,
}

/// One line of a request's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// When, seconds since the epoch.
    pub at: u64,
    /// The attempt it belongs to.
    pub attempt: u32,
    /// What happened.
    pub text: String,
}

/// A reload request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Request {
    /// Its id.
    pub id: u64,
    /// The agent that wrote it (its store's agent id): the executor acts
    /// only on requests stead itself wrote.
    #[serde(skip)]
    pub written_by: u64,
    /// The module, or every module with an `[update]` section.
    pub module: Option<String>,
    /// Why: carried into every log line.
    pub reason: String,
    /// Who asked (a user, `auto-update`, a watcher).
    pub requested_by: String,
    /// When, seconds since the epoch.
    pub requested_at: u64,
    /// Where it is.
    pub status: Status,
    /// How many times a faulted attempt was re-armed.
    pub attempt: u32,
    /// When the current attempt faulted.
    pub faulted_at: Option<u64>,
    /// Not re-armed before this time (a registry's `Retry-After`).
    pub not_before: Option<u64>,
    /// Its modules.
    pub items: Vec<Item>,
    /// How it is activated, once decided.
    pub activation: Option<Activation>,
    /// The activation in words.
    pub activation_detail: Option<String>,
    /// When the one restart of this attempt was asked for. Stamped before
    /// the restart: a resumed executor that finds it does not ask again.
    pub restart_requested_at: Option<u64>,
    /// Why it is red, by name.
    pub failure: Option<String>,
    /// When it was done or failed.
    pub finished_at: Option<u64>,
    /// Every step, in order.
    pub log: Vec<LogLine>,
}

/// What a reload landed for a module: from then on the module's desired
/// image, until the next reload or an edit of its intention's `image` or
/// `update.range`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Landed {
    /// The version (tag).
    pub version: String,
    /// Its manifest digest.
    pub digest: String,
    /// Its image ID.
    pub image_id: String,
    /// What the engine is asked for: `repo@digest`, or an image ID after a
    /// rollback.
    pub reference: String,
    /// The request that landed it.
    pub request: u64,
    /// The intention's `image` when it landed.
    pub from_image: String,
    /// The intention's `update.range` when it landed.
    pub from_range: String,
    /// The image ID it replaced (kept for a rollback).
    pub previous_image: Option<String>,
}

/// A module's update state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UpdateState {
    /// What a reload landed, if anything stands.
    pub landed: Option<Landed>,
    /// Manifest digests the auto lane never picks again (rolled back).
    pub skipped: Vec<String>,
    /// When the auto lane last looked, seconds since the epoch.
    pub last_look: u64,
}

impl Landed {
    /// Whether it still stands for an intention with this `image` and
    /// `range` (an edit of either sets it aside).
    pub fn stands_for(&self, image: &str, range: &str) -> bool {
        self.from_image == image && self.from_range == range
    }
}

/// The largest reason or requester accepted.
pub const MAX_TEXT: usize = 512;
/// Log lines kept per request (the oldest go first).
pub const MAX_LOG: usize = 200;

/// Why a request may not be filed or moved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A field is missing or wrong.
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The move is not allowed from where the request is.
    #[error("request {id} is {from}; it cannot become {to}")]
    Transition {
        /// The request.
        id: u64,
        /// Where it is.
        from: Status,
        /// Where it was to go.
        to: Status,
    },
    /// The record was not written by this agent.
    #[error("request {id} was not written by this agent; refused, nothing landed")]
    NotOurs {
        /// The request.
        id: u64,
    },
}

impl Request {
    /// A new request, checked: the reason is required; texts are bounded.
    pub fn new(
        id: u64,
        written_by: u64,
        module: Option<&ModuleName>,
        reason: &str,
        requested_by: &str,
        now: u64,
    ) -> Result<Request, RequestError> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(RequestError::Invalid {
                field: "reason",
                message: "a reload needs a reason".into(),
            });
        }
        for (field, v) in [("reason", reason), ("requested_by", requested_by)] {
            if v.len() > MAX_TEXT || v.chars().any(char::is_control) {
                return Err(RequestError::Invalid {
                    field,
                    message: format!("at most {MAX_TEXT} bytes of text without control characters"),
                });
            }
        }
        let mut r = Request {
            id,
            written_by,
            module: module.map(|m| m.to_string()),
            reason: reason.to_string(),
            requested_by: requested_by.trim().to_string(),
            requested_at: now,
            status: Status::Requested,
            attempt: 0,
            faulted_at: None,
            not_before: None,
            items: Vec::new(),
            activation: None,
            activation_detail: None,
            restart_requested_at: None,
            failure: None,
            finished_at: None,
            log: Vec::new(),
        };
        let who = if r.requested_by.is_empty() {
            "someone".to_string()
        } else {
            r.requested_by.clone()
        };
        r.note(
            now,
            format!(
                "requested by {who} for {}: {}",
                r.module
                    .as_deref()
                    .unwrap_or("every module with an [update] section"),
                r.reason
            ),
        );
        Ok(r)
    }

    /// Adds a log line.
    pub fn note(&mut self, at: u64, text: impl Into<String>) {
        if self.log.len() >= MAX_LOG {
            self.log.remove(0);
        }
        self.log.push(LogLine {
            at,
            attempt: self.attempt,
            text: text.into(),
        });
    }

    /// Moves the request to `next`, if the move is allowed; logs it.
    pub fn advance(&mut self, next: Status, at: u64) -> Result<(), RequestError> {
        if !self.status.may_become(next) {
            return Err(RequestError::Transition {
                id: self.id,
                from: self.status,
                to: next,
            });
        }
        self.status = next;
        match next {
            Status::Done | Status::Failed => self.finished_at = Some(at),
            Status::Faulted => self.faulted_at = Some(at),
            _ => {}
        }
        self.note(at, format!("now {next}"));
        Ok(())
    }

    /// The executor's guard: it acts only on a request this agent wrote.
    pub fn check_ours(&self, agent: u64) -> Result<(), RequestError> {
        if self.written_by == agent {
            Ok(())
        } else {
            Err(RequestError::NotOurs { id: self.id })
        }
    }

    /// When a faulted request is due to be re-armed: `faulted_at +
    /// interval × 2^min(attempt, 5)`, or later when the registry asked.
    pub fn due_at(&self, interval_secs: u64) -> Option<u64> {
        if self.status != Status::Faulted {
            return None;
        }
        let backoff = interval_secs.saturating_mul(1 << self.attempt.min(5));
        let due = self.faulted_at.unwrap_or(0).saturating_add(backoff);
        Some(due.max(self.not_before.unwrap_or(0)))
    }

    /// Re-arms a faulted request for a new attempt: the log stays, the
    /// attempt counts up, every field the executor wrote is cleared (the
    /// one-restart stamp too: the rule holds per attempt).
    pub fn rearm(&mut self, at: u64) -> Result<(), RequestError> {
        self.advance(Status::Requested, at)?;
        self.attempt += 1;
        self.items.clear();
        self.activation = None;
        self.activation_detail = None;
        self.restart_requested_at = None;
        self.failure = None;
        self.faulted_at = None;
        self.not_before = None;
        self.note(at, format!("attempt {} begins", self.attempt));
        Ok(())
    }

    /// Every failing item, named: `module: why; …`.
    pub fn failures(&self) -> String {
        let names: Vec<String> = self
            .items
            .iter()
            .filter_map(|i| i.failure.as_ref().map(|f| format!("{}: {f}", i.module)))
            .collect();
        names.join("; ")
    }

    /// What a request with several modules comes to when items failed:
    /// faulted when ANY failing item is transient (its answer is still
    /// unknown), failed otherwise.
    pub fn outcome_of_failures(&self) -> Option<Status> {
        let failing: Vec<&Item> = self.items.iter().filter(|i| i.failure.is_some()).collect();
        if failing.is_empty() {
            None
        } else if failing.iter().any(|i| i.transient) {
            Some(Status::Faulted)
        } else {
            Some(Status::Failed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::*;

    fn req() -> Request {
        Request::new(
            7,
            42,
            Some(&ModuleName::try_from("sensor").unwrap()),
            "needs 1.5",
            "ops",
            1000,
        )
        .unwrap()
    }

    #[test]
    fn a_request_needs_a_reason_and_bounded_text() {
        for (reason, by, field) in [
            ("", "ops", "reason"),
            ("   ", "ops", "reason"),
            ("x\u{7}", "ops", "reason"),
            ("ok", &*"b".repeat(600), "requested_by"),
        ] {
            match Request::new(1, 1, None, reason, by, 0) {
                Err(RequestError::Invalid { field: f, .. }) => assert_eq!(f, field, "{reason:?}"),
                other => panic!("{reason:?}: {other:?}"),
            }
        }
        let r = req();
        assert_eq!(r.status, Requested);
        assert_eq!(r.log[0].text, "requested by ops for sensor: needs 1.5");
    }

    #[test]
    fn requested_may_only_begin_landing() {
        let mut r = req();
        for to in [Activating, Done, Failed, Faulted, Requested] {
            assert!(r.clone().advance(to, 1).is_err(), "{to}");
        }
        r.advance(Landing, 1).unwrap();
        assert_eq!(r.status, Landing);
    }

    #[test]
    fn landing_ends_in_activating_done_failed_or_faulted() {
        for to in [Activating, Done, Failed, Faulted] {
            let mut r = req();
            r.advance(Landing, 1).unwrap();
            r.advance(to, 2).unwrap();
        }
        let mut r = req();
        r.advance(Landing, 1).unwrap();
        assert!(r.clone().advance(Requested, 2).is_err());
        assert!(r.advance(Landing, 2).is_err());
    }

    #[test]
    fn activating_ends_in_done_failed_or_faulted() {
        for to in [Done, Failed, Faulted] {
            let mut r = req();
            r.advance(Landing, 1).unwrap();
            r.advance(Activating, 2).unwrap();
            r.advance(to, 3).unwrap();
            assert_eq!(r.finished_at.is_some(), to != Faulted);
        }
        let mut r = req();
        r.advance(Landing, 1).unwrap();
        r.advance(Activating, 2).unwrap();
        assert!(r.advance(Landing, 3).is_err());
    }

    #[test]
    fn done_and_failed_are_final() {
        for end in [Done, Failed] {
            let mut r = req();
            r.advance(Landing, 1).unwrap();
            r.advance(end, 2).unwrap();
            assert!(r.status.is_final());
            for to in [Requested, Landing, Activating, Done, Failed, Faulted] {
                assert!(r.clone().advance(to, 3).is_err(), "{end} → {to}");
            }
            assert!(r.rearm(3).is_err());
        }
    }

    #[test]
    fn faulted_is_never_final_and_is_rearmed_with_backoff() {
        let mut r = req();
        r.advance(Landing, 1).unwrap();
        r.items.push(Item {
            module: "sensor".into(),
            failure: Some("503".into()),
            transient: true,
            ..Item::default()
        });
        r.restart_requested_at = Some(1);
        r.advance(Faulted, 100).unwrap();
        assert!(!r.status.is_final());
        // faulted_at + interval × 2^min(attempt, 5)
        assert_eq!(r.due_at(60), Some(160));
        r.not_before = Some(500);
        assert_eq!(r.due_at(60), Some(500), "Retry-After when longer");
        let lines = r.log.len();
        r.rearm(600).unwrap();
        assert_eq!((r.status, r.attempt), (Requested, 1));
        assert!(r.items.is_empty() && r.restart_requested_at.is_none() && r.failure.is_none());
        assert!(r.log.len() > lines, "the log is kept");
        r.attempt = 9;
        r.advance(Landing, 700).unwrap();
        r.advance(Faulted, 1000).unwrap();
        assert_eq!(
            r.due_at(60),
            Some(1000 + 60 * 32),
            "the doubling stops at 32"
        );
    }

    #[test]
    fn one_transient_failure_makes_the_request_faulted() {
        let mut r = req();
        let item = |failure: Option<&str>, transient| Item {
            module: "m".into(),
            failure: failure.map(str::to_string),
            transient,
            ..Item::default()
        };
        r.items = vec![item(None, false), item(Some("404"), false)];
        assert_eq!(r.outcome_of_failures(), Some(Failed));
        r.items.push(item(Some("503"), true));
        assert_eq!(r.outcome_of_failures(), Some(Faulted));
        r.items = vec![item(None, false)];
        assert_eq!(r.outcome_of_failures(), None);
    }

    #[test]
    fn only_a_request_this_agent_wrote_is_acted_on() {
        let r = req();
        assert!(r.check_ours(42).is_ok());
        assert_eq!(r.check_ours(43), Err(RequestError::NotOurs { id: 7 }));
    }

    #[test]
    fn the_log_is_bounded() {
        let mut r = req();
        for k in 0..(MAX_LOG as u64 + 10) {
            r.note(k, "x");
        }
        assert_eq!(r.log.len(), MAX_LOG);
    }
}
