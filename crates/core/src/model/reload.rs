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
//! requested | faulted → failed (cancelled, or superseded by an edit)
//! ```
//!
//! One style for every move: a transition (`begin_landing`, `finish`,
//! `fail`, …) asks the guard first ([`Request::can_become`], over the one
//! table [`Status::may_become`]), then sets the new [`State`], which
//! carries what that state has (when it ended, why, its fault). A refused
//! move returns a [`TransitionError`] naming the request, where it is and
//! where it was to go, and changes nothing. The store and the API spell
//! the state flat ([`Flat`]), as they always have.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::names::ModuleName;

/// Where a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Every status, for metrics.
    pub const ALL: [Status; 6] = [
        Status::Requested,
        Status::Landing,
        Status::Activating,
        Status::Done,
        Status::Failed,
        Status::Faulted,
    ];

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
                // Cancelled, or superseded by an edit, before it ended.
                | (Requested | Faulted, Failed)
        )
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the landed versions are activated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Activation {
    /// Exactly one restart per module: a recreate from the new image.
    Restart,
    /// Nothing to activate: every module already runs its target.
    NotNeeded,
}

/// One module of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// The module.
    pub module: String,
    /// The intention's `image` it was resolved against (empty: not known).
    /// An edit of it supersedes the request.
    pub image: String,
    /// The intention's `update.range` it was resolved against.
    pub range: String,
    /// The digest of the version found.
    pub found_digest: Option<String>,
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// When, seconds since the epoch.
    pub at: u64,
    /// The attempt it belongs to.
    pub attempt: u32,
    /// What happened.
    pub text: String,
}

/// A reload request.
///
/// Where it is and what that state has are one value ([`State`]), moved
/// only by the guarded transitions below; the store's record and the API's
/// JSON spell it flat ([`Flat`]), exactly as before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Flat", from = "Flat")]
pub struct Request {
    /// Its id.
    pub id: u64,
    /// The agent that wrote it (its store's agent id): the executor acts
    /// only on requests stead itself wrote.
    pub written_by: u64,
    /// The module, or every module with an `[update]` section.
    pub module: Option<String>,
    /// Why: carried into every log line.
    pub reason: String,
    /// Who asked (a user, `auto-update`, a watcher).
    pub requested_by: String,
    /// When, seconds since the epoch.
    pub requested_at: u64,
    /// Where it is, with what that state has.
    state: State,
    /// How many times a faulted attempt was re-armed.
    pub attempt: u32,
    /// Its modules.
    pub items: Vec<Item>,
    /// How it is activated, once decided.
    pub activation: Option<Activation>,
    /// The activation in words.
    pub activation_detail: Option<String>,
    /// When the one restart of this attempt was asked for. Stamped before
    /// the restart ([`Request::stamp_restart`]): a resumed executor that
    /// finds it does not ask again. It belongs to the attempt, not to a
    /// state: kept when the attempt ends, cleared by a re-arm.
    restart_requested_at: Option<u64>,
    /// Every step, in order.
    pub log: Vec<LogLine>,
}

/// Where a request is, with what that state has: the status of each
/// variant is [`State::status`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Filed; no step taken in this attempt yet.
    Requested,
    /// Resolving versions and pulling what is to land.
    Landing,
    /// The landed versions are being started and measured.
    Activating,
    /// Every module runs its target (or had nothing to do). Final.
    Done {
        /// When, seconds since the epoch.
        at: u64,
    },
    /// A decided answer. Final.
    Failed {
        /// When, seconds since the epoch.
        at: u64,
        /// Why, by name.
        failure: String,
        /// The fault it had when it was ended (cancelled or superseded
        /// while faulted), kept for the record.
        fault: Option<Fault>,
    },
    /// An answer that may clear: re-armed with backoff.
    Faulted {
        /// When and until when.
        fault: Fault,
        /// Why, by name.
        failure: String,
    },
}

/// When an attempt faulted, and the time before which it is not re-armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// When the attempt faulted.
    pub at: u64,
    /// Not re-armed before this time (a registry's `Retry-After`).
    pub not_before: Option<u64>,
}

impl State {
    /// Its status.
    pub fn status(&self) -> Status {
        match self {
            State::Requested => Status::Requested,
            State::Landing => Status::Landing,
            State::Activating => Status::Activating,
            State::Done { .. } => Status::Done,
            State::Failed { .. } => Status::Failed,
            State::Faulted { .. } => Status::Faulted,
        }
    }
}

/// A move refused by a guard: the request stays as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("request {id} is {from}; it cannot become {to}")]
pub struct TransitionError {
    /// The request.
    pub id: u64,
    /// Where it is.
    pub from: Status,
    /// Where it was to go.
    pub to: Status,
}

impl From<TransitionError> for RequestError {
    fn from(e: TransitionError) -> Self {
        RequestError::Transition {
            id: e.id,
            from: e.from,
            to: e.to,
        }
    }
}

/// A request as the store's record and the API's JSON spell it: the status
/// and, beside it, the optional fields some states have. Reading one is
/// total: a field its status does not have is not kept, and a final
/// status's missing time reads as 0 (no version wrote either).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flat {
    /// Its id.
    pub id: u64,
    /// The agent that wrote it (not in the JSON).
    #[serde(skip)]
    pub written_by: u64,
    /// The module, or every module with an `[update]` section.
    pub module: Option<String>,
    /// Why.
    pub reason: String,
    /// Who asked.
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
    /// When the one restart of this attempt was asked for.
    pub restart_requested_at: Option<u64>,
    /// Why it is red, by name.
    pub failure: Option<String>,
    /// When it was done or failed.
    pub finished_at: Option<u64>,
    /// Every step, in order.
    pub log: Vec<LogLine>,
}

impl From<Request> for Flat {
    fn from(r: Request) -> Flat {
        let status = r.state.status();
        let (faulted_at, not_before, failure, finished_at) = match r.state {
            State::Requested | State::Landing | State::Activating => (None, None, None, None),
            State::Done { at } => (None, None, None, Some(at)),
            State::Failed { at, failure, fault } => (
                fault.map(|f| f.at),
                fault.and_then(|f| f.not_before),
                Some(failure),
                Some(at),
            ),
            State::Faulted { fault, failure } => {
                (Some(fault.at), fault.not_before, Some(failure), None)
            }
        };
        Flat {
            id: r.id,
            written_by: r.written_by,
            module: r.module,
            reason: r.reason,
            requested_by: r.requested_by,
            requested_at: r.requested_at,
            status,
            attempt: r.attempt,
            faulted_at,
            not_before,
            items: r.items,
            activation: r.activation,
            activation_detail: r.activation_detail,
            restart_requested_at: r.restart_requested_at,
            failure,
            finished_at,
            log: r.log,
        }
    }
}

impl From<Flat> for Request {
    fn from(f: Flat) -> Request {
        let fault = f.faulted_at.map(|at| Fault {
            at,
            not_before: f.not_before,
        });
        let state = match f.status {
            Status::Requested => State::Requested,
            Status::Landing => State::Landing,
            Status::Activating => State::Activating,
            Status::Done => State::Done {
                at: f.finished_at.unwrap_or(0),
            },
            Status::Failed => State::Failed {
                at: f.finished_at.unwrap_or(0),
                failure: f.failure.unwrap_or_default(),
                fault,
            },
            Status::Faulted => State::Faulted {
                fault: fault.unwrap_or(Fault {
                    at: 0,
                    not_before: f.not_before,
                }),
                failure: f.failure.unwrap_or_default(),
            },
        };
        Request {
            id: f.id,
            written_by: f.written_by,
            module: f.module,
            reason: f.reason,
            requested_by: f.requested_by,
            requested_at: f.requested_at,
            state,
            attempt: f.attempt,
            items: f.items,
            activation: f.activation,
            activation_detail: f.activation_detail,
            restart_requested_at: f.restart_requested_at,
            log: f.log,
        }
    }
}

/// What a reload landed for a module: from then on the module's desired
/// image, until the next reload or an edit of its intention's `image` or
/// `update.range`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateState {
    /// What a reload landed, if anything stands.
    pub landed: Option<Landed>,
    /// Manifest digests the auto lane never picks again (rolled back).
    pub skipped: Vec<String>,
    /// When the auto lane last looked, seconds since the epoch.
    pub last_look: u64,
    /// Digests whose auto-update request failed (newest last, at most
    /// [`MAX_FAILED`]): not filed again while the image, the range and the
    /// agent's version are what they failed under.
    pub failed: Vec<FailedDigest>,
}

/// A digest whose auto-update request failed, and what it failed under.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedDigest {
    /// The manifest digest.
    pub digest: String,
    /// Its version (tag).
    pub version: String,
    /// The intention's `image` then.
    pub image: String,
    /// The intention's `update.range` then.
    pub range: String,
    /// The agent's version then.
    pub agent: String,
    /// The request that failed.
    pub request: u64,
}

/// Failed digests kept per module.
pub const MAX_FAILED: usize = 16;

impl UpdateState {
    /// Whether the auto lane is to leave `digest` alone for this image,
    /// range and agent version (it failed under them).
    pub fn failed_under(&self, digest: &str, image: &str, range: &str, agent: &str) -> bool {
        self.failed
            .iter()
            .any(|f| f.digest == digest && f.image == image && f.range == range && f.agent == agent)
    }

    /// Remembers a failed digest (once; the oldest go first).
    pub fn remember_failed(&mut self, f: FailedDigest) {
        self.failed.retain(|o| o.digest != f.digest);
        if self.failed.len() >= MAX_FAILED {
            self.failed.remove(0);
        }
        self.failed.push(f);
    }
}

impl Landed {
    /// Whether it still stands for an intention with this `image` and
    /// `range` (an edit of either sets it aside).
    pub fn stands_for(&self, image: &str, range: &str) -> bool {
        self.from_image == image && self.from_range == range
    }
}

/// This agent's version: a failed auto-update is tried again by a newer one.
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Who the auto lane files its requests as (refused from the API).
pub const AUTO_UPDATE: &str = "auto-update";

/// The largest reason or requester accepted.
pub const MAX_TEXT: usize = 512;
/// Open requests at most, over every module.
pub const MAX_OPEN: usize = 32;
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
    /// A request for the module (or for every module) is open: one at a
    /// time per module.
    #[error(
        "{module} has an open reload request {id} ({status}); wait for it to end, or cancel it (DELETE /v1/reloads/{id})"
    )]
    Open {
        /// The open request.
        id: u64,
        /// Its status.
        status: Status,
        /// What it is for.
        module: String,
    },
    /// Too many requests are open.
    #[error("{MAX_OPEN} reload requests are open; wait for one to end, or cancel one")]
    TooMany,
    /// The record was not written by this agent.
    #[error("request {id} was not written by this agent; refused, nothing landed")]
    NotOurs {
        /// The request.
        id: u64,
    },
}

/// Whether a request for `module` (`None`: every module with an `[update]`
/// section) may be filed beside the `open` ones (this agent's, not
/// ended): one open request per module, [`MAX_OPEN`] at most.
pub fn may_file(module: Option<&str>, open: &[&Request]) -> Result<(), RequestError> {
    if let Some(o) = open
        .iter()
        .find(|o| module.is_none() || o.module.is_none() || o.module.as_deref() == module)
    {
        return Err(RequestError::Open {
            id: o.id,
            status: o.status(),
            module: match (module, o.module.as_deref()) {
                (Some(m), _) | (None, Some(m)) => m.to_string(),
                (None, None) => "every module".into(),
            },
        });
    }
    if open.len() >= MAX_OPEN {
        return Err(RequestError::TooMany);
    }
    Ok(())
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
            state: State::Requested,
            attempt: 0,
            items: Vec::new(),
            activation: None,
            activation_detail: None,
            restart_requested_at: None,
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

    /// Where it is, with what that state has.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Its status.
    pub fn status(&self) -> Status {
        self.state.status()
    }

    /// Why it is red, by name (failed or faulted).
    pub fn failure(&self) -> Option<&str> {
        match &self.state {
            State::Failed { failure, .. } | State::Faulted { failure, .. } => Some(failure),
            _ => None,
        }
    }

    /// When it was done or failed.
    pub fn finished_at(&self) -> Option<u64> {
        match self.state {
            State::Done { at } | State::Failed { at, .. } => Some(at),
            _ => None,
        }
    }

    /// The fault of this attempt: the one it is in, or the one it had
    /// when it was ended.
    pub fn fault(&self) -> Option<Fault> {
        match self.state {
            State::Faulted { fault, .. } => Some(fault),
            State::Failed { fault, .. } => fault,
            _ => None,
        }
    }

    /// When the one restart of this attempt was asked for.
    pub fn restart_requested_at(&self) -> Option<u64> {
        self.restart_requested_at
    }

    /// The guard: whether it may become `to` from where it is.
    pub fn can_become(&self, to: Status) -> Result<(), TransitionError> {
        let from = self.status();
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

    /// Sets the state its guard allowed, and logs it.
    fn enter(&mut self, state: State, at: u64) {
        let now = state.status();
        self.state = state;
        self.note(at, format!("now {now}"));
    }

    /// `requested → landing`.
    pub fn begin_landing(&mut self, at: u64) -> Result<(), TransitionError> {
        self.can_become(Status::Landing)?;
        self.enter(State::Landing, at);
        Ok(())
    }

    /// `landing → activating`, with how (decided at the end of landing).
    pub fn begin_activating(
        &mut self,
        activation: Activation,
        detail: String,
        at: u64,
    ) -> Result<(), TransitionError> {
        self.can_become(Status::Activating)?;
        self.activation = Some(activation);
        self.activation_detail = Some(detail);
        self.enter(State::Activating, at);
        Ok(())
    }

    /// Stamps the one restart of this attempt, once, while activating.
    /// Says whether it stamped (false: it was stamped before).
    pub fn stamp_restart(&mut self, at: u64) -> Result<bool, TransitionError> {
        if self.status() != Status::Activating {
            return Err(TransitionError {
                id: self.id,
                from: self.status(),
                to: Status::Activating,
            });
        }
        if self.restart_requested_at.is_some() {
            return Ok(false);
        }
        self.restart_requested_at = Some(at);
        Ok(true)
    }

    /// While activating, and the restart asked waits for a maintenance
    /// window: the time the restart was asked moves to `at` (the limit
    /// on running the landed versions counts from the window's opening),
    /// once a minute at most. Whether it moved.
    pub fn restart_waits(&mut self, at: u64) -> bool {
        match self.restart_requested_at {
            Some(asked) if self.status() == Status::Activating && at >= asked + 60 => {
                self.restart_requested_at = Some(at);
                true
            }
            _ => false,
        }
    }

    /// `landing → done` with nothing to activate (said why), or
    /// `activating → done` (`None`: the activation stands as decided).
    pub fn finish(&mut self, not_needed: Option<String>, at: u64) -> Result<(), TransitionError> {
        self.can_become(Status::Done)?;
        if let Some(detail) = not_needed {
            self.activation = Some(Activation::NotNeeded);
            self.activation_detail = Some(detail);
        }
        self.enter(State::Done { at }, at);
        Ok(())
    }

    /// `landing | activating → faulted`: an answer that may clear, not
    /// re-armed before `not_before` if a registry asked so.
    pub fn fault_with(
        &mut self,
        failure: String,
        not_before: Option<u64>,
        at: u64,
    ) -> Result<(), TransitionError> {
        self.can_become(Status::Faulted)?;
        let fault = Fault { at, not_before };
        self.enter(State::Faulted { fault, failure }, at);
        Ok(())
    }

    /// `→ failed`: a decided answer (from landing or activating), a
    /// cancel or a supersede (from requested or faulted).
    pub fn fail(&mut self, failure: String, at: u64) -> Result<(), TransitionError> {
        self.can_become(Status::Failed)?;
        let fault = self.fault();
        self.enter(State::Failed { at, failure, fault }, at);
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
        let State::Faulted { fault, .. } = self.state else {
            return None;
        };
        let backoff = interval_secs.saturating_mul(1 << self.attempt.min(5));
        let due = fault.at.saturating_add(backoff);
        Some(due.max(fault.not_before.unwrap_or(0)))
    }

    /// Re-arms a faulted request for a new attempt: the log stays, the
    /// attempt counts up, every field the executor wrote is cleared (the
    /// one-restart stamp too: the rule holds per attempt).
    pub fn rearm(&mut self, at: u64) -> Result<(), TransitionError> {
        self.can_become(Status::Requested)?;
        self.enter(State::Requested, at);
        self.attempt += 1;
        self.items.clear();
        self.activation = None;
        self.activation_detail = None;
        self.restart_requested_at = None;
        self.note(at, format!("attempt {} begins", self.attempt));
        Ok(())
    }

    /// Marks every item whose module's `image` or `update.range` was
    /// edited since it was resolved as failed, superseded (a decided
    /// answer: the edit is what the module runs now, never overwritten by
    /// this request). `now` gives a module's current image and range (none:
    /// no such module, or no `[update]` section). Says whether one was.
    pub fn supersede(&mut self, now: impl Fn(&str) -> Option<(String, String)>, at: u64) -> bool {
        let mut any = false;
        let mut lines = Vec::new();
        for item in self.items.iter_mut() {
            if item.image.is_empty() || item.failure.is_some() {
                continue;
            }
            let (image, range) = now(&item.module).unwrap_or_default();
            if image == item.image && range == item.range {
                continue;
            }
            let what = if image != item.image {
                format!(
                    "image was edited ({} → {})",
                    item.image,
                    none_if_empty(&image)
                )
            } else {
                format!(
                    "update.range was edited ({} → {})",
                    item.range,
                    none_if_empty(&range)
                )
            };
            let text = format!("superseded: its {what}");
            lines.push(format!("{}: {text}", item.module));
            item.failure = Some(text);
            item.transient = false;
            any = true;
        }
        for l in lines {
            self.note(at, l);
        }
        any
    }

    /// Ends an open request as failed with this reason (cancelled, or every
    /// item superseded while it was faulted).
    pub fn end_failed(&mut self, why: String, at: u64) -> Result<(), RequestError> {
        Ok(self.fail(why, at)?)
    }

    /// The digests an auto-update request failed on, by module, under this
    /// agent version: what the auto lane leaves alone from then on (empty
    /// for any other request, or one not failed).
    pub fn failed_digests(&self, agent: &str) -> Vec<(String, FailedDigest)> {
        if self.requested_by != AUTO_UPDATE || self.status() != Status::Failed {
            return Vec::new();
        }
        self.items
            .iter()
            .filter(|i| i.failure.is_some() && !i.transient)
            .filter_map(|i| {
                let digest = i.target_digest.clone().or_else(|| i.found_digest.clone())?;
                Some((
                    i.module.clone(),
                    FailedDigest {
                        digest,
                        version: i
                            .target_version
                            .clone()
                            .or_else(|| i.found_version.clone())
                            .unwrap_or_default(),
                        image: i.image.clone(),
                        range: i.range.clone(),
                        agent: agent.to_string(),
                        request: self.id,
                    },
                ))
            })
            .collect()
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

fn none_if_empty(s: &str) -> &str {
    if s.is_empty() { "none" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::*;

    /// Moves `r` to `to` by the transition that goes there.
    fn go(r: &mut Request, to: Status, at: u64) -> Result<(), TransitionError> {
        match to {
            Requested => r.rearm(at),
            Landing => r.begin_landing(at),
            Activating => r.begin_activating(Activation::Restart, "one restart".into(), at),
            Done => r.finish(None, at),
            Failed => r.fail("decided".into(), at),
            Faulted => r.fault_with("may clear".into(), None, at),
        }
    }

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

    /// A request at `s`, reached by the transitions that go there.
    fn at(s: Status) -> Request {
        let path: &[Status] = match s {
            Requested => &[],
            Landing => &[Landing],
            Activating => &[Landing, Activating],
            Done => &[Landing, Done],
            Failed => &[Landing, Failed],
            Faulted => &[Landing, Faulted],
        };
        let mut r = req();
        for (k, to) in path.iter().enumerate() {
            go(&mut r, *to, k as u64 + 1).unwrap();
        }
        r
    }

    /// Every transition a request has.
    #[derive(Clone, Copy, Debug)]
    enum Move {
        BeginLanding,
        BeginActivating,
        StampRestart,
        Finish,
        Fail,
        Fault,
        Rearm,
    }

    fn apply(r: &mut Request, m: Move) -> Result<(), TransitionError> {
        match m {
            Move::BeginLanding => r.begin_landing(9),
            Move::BeginActivating => r.begin_activating(Activation::Restart, "x".into(), 9),
            Move::StampRestart => r.stamp_restart(9).map(|_| ()),
            Move::Finish => r.finish(None, 9),
            Move::Fail => r.fail("x".into(), 9),
            Move::Fault => r.fault_with("x".into(), None, 9),
            Move::Rearm => r.rearm(9),
        }
    }

    #[test]
    fn every_state_and_transition_is_allowed_or_refused_by_name() {
        use Move::*;
        // (from, transition, Ok(where it is then) or Err(the refused target))
        #[rustfmt::skip]
        let cases: &[(Status, Move, Result<Status, Status>)] = &[
            (Requested, BeginLanding, Ok(Landing)),
            (Requested, BeginActivating, Err(Activating)),
            (Requested, StampRestart, Err(Activating)),
            (Requested, Finish, Err(Done)),
            (Requested, Fail, Ok(Failed)),
            (Requested, Fault, Err(Faulted)),
            (Requested, Rearm, Err(Requested)),
            (Landing, BeginLanding, Err(Landing)),
            (Landing, BeginActivating, Ok(Activating)),
            (Landing, StampRestart, Err(Activating)),
            (Landing, Finish, Ok(Done)),
            (Landing, Fail, Ok(Failed)),
            (Landing, Fault, Ok(Faulted)),
            (Landing, Rearm, Err(Requested)),
            (Activating, BeginLanding, Err(Landing)),
            (Activating, BeginActivating, Err(Activating)),
            (Activating, StampRestart, Ok(Activating)),
            (Activating, Finish, Ok(Done)),
            (Activating, Fail, Ok(Failed)),
            (Activating, Fault, Ok(Faulted)),
            (Activating, Rearm, Err(Requested)),
            (Done, BeginLanding, Err(Landing)),
            (Done, BeginActivating, Err(Activating)),
            (Done, StampRestart, Err(Activating)),
            (Done, Finish, Err(Done)),
            (Done, Fail, Err(Failed)),
            (Done, Fault, Err(Faulted)),
            (Done, Rearm, Err(Requested)),
            (Failed, BeginLanding, Err(Landing)),
            (Failed, BeginActivating, Err(Activating)),
            (Failed, StampRestart, Err(Activating)),
            (Failed, Finish, Err(Done)),
            (Failed, Fail, Err(Failed)),
            (Failed, Fault, Err(Faulted)),
            (Failed, Rearm, Err(Requested)),
            (Faulted, BeginLanding, Err(Landing)),
            (Faulted, BeginActivating, Err(Activating)),
            (Faulted, StampRestart, Err(Activating)),
            (Faulted, Finish, Err(Done)),
            (Faulted, Fail, Ok(Failed)),
            (Faulted, Fault, Err(Faulted)),
            (Faulted, Rearm, Ok(Requested)),
        ];
        assert_eq!(cases.len(), Status::ALL.len() * 7, "every pair");
        for &(from, m, want) in cases {
            let mut r = at(from);
            assert_eq!(r.status(), from);
            let before = r.clone();
            match (apply(&mut r, m), want) {
                (Ok(()), Ok(to)) => assert_eq!(r.status(), to, "{from} {m:?}"),
                (Err(e), Err(to)) => {
                    assert_eq!(e, TransitionError { id: 7, from, to }, "{from} {m:?}");
                    assert_eq!(r, before, "{from} {m:?}: a refused move changes nothing");
                }
                (got, want) => panic!("{from} {m:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn each_state_has_its_own_data_and_spells_it_flat_as_before() {
        let mut r = req();
        r.begin_landing(1).unwrap();
        r.begin_activating(Activation::Restart, "one restart".into(), 2)
            .unwrap();
        r.stamp_restart(3).unwrap();
        r.fault_with("503".into(), Some(500), 4).unwrap();
        assert_eq!(
            r.state(),
            &State::Faulted {
                fault: Fault {
                    at: 4,
                    not_before: Some(500)
                },
                failure: "503".into()
            }
        );
        r.end_failed("cancelled by ops".into(), 5).unwrap();
        // Ended while faulted: the fault is kept for the record, as the
        // flat record kept `faulted_at` and `not_before`.
        assert_eq!(
            (r.failure(), r.finished_at(), r.fault().map(|f| f.at)),
            (Some("cancelled by ops"), Some(5), Some(4))
        );
        r.log.truncate(1);
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"id":7,"module":"sensor","reason":"needs 1.5","requested_by":"ops","requested_at":1000,"status":"failed","attempt":0,"faulted_at":4,"not_before":500,"items":[],"activation":"restart","activation_detail":"one restart","restart_requested_at":3,"failure":"cancelled by ops","finished_at":5,"log":[{"at":1000,"attempt":0,"text":"requested by ops for sensor: needs 1.5"}]}"#
        );
        let mut back: Request = serde_json::from_str(&json).unwrap();
        assert_eq!(back.written_by, 0, "not in the JSON");
        back.written_by = r.written_by;
        assert_eq!(back, r);
        // Every state reads back from its flat spelling as it was.
        for s in Status::ALL {
            let r = at(s);
            assert_eq!(Request::from(Flat::from(r.clone())), r, "{s}");
        }
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
        assert_eq!(r.status(), Requested);
        assert_eq!(r.log[0].text, "requested by ops for sensor: needs 1.5");
    }

    #[test]
    fn requested_may_only_begin_landing_or_end_failed() {
        let mut r = req();
        assert!(go(&mut r.clone(), Failed, 1).is_ok(), "cancelled");
        for to in [Activating, Done, Faulted, Requested] {
            assert!(go(&mut r.clone(), to, 1).is_err(), "{to}");
        }
        go(&mut r, Landing, 1).unwrap();
        assert_eq!(r.status(), Landing);
    }

    #[test]
    fn landing_ends_in_activating_done_failed_or_faulted() {
        for to in [Activating, Done, Failed, Faulted] {
            let mut r = req();
            go(&mut r, Landing, 1).unwrap();
            go(&mut r, to, 2).unwrap();
        }
        let mut r = req();
        go(&mut r, Landing, 1).unwrap();
        assert!(go(&mut r.clone(), Requested, 2).is_err());
        assert!(go(&mut r, Landing, 2).is_err());
    }

    #[test]
    fn activating_ends_in_done_failed_or_faulted() {
        for to in [Done, Failed, Faulted] {
            let mut r = req();
            go(&mut r, Landing, 1).unwrap();
            go(&mut r, Activating, 2).unwrap();
            go(&mut r, to, 3).unwrap();
            assert_eq!(r.finished_at().is_some(), to != Faulted);
        }
        let mut r = req();
        go(&mut r, Landing, 1).unwrap();
        go(&mut r, Activating, 2).unwrap();
        assert!(go(&mut r, Landing, 3).is_err());
    }

    #[test]
    fn done_and_failed_are_final() {
        for end in [Done, Failed] {
            let mut r = req();
            go(&mut r, Landing, 1).unwrap();
            go(&mut r, end, 2).unwrap();
            assert!(r.status().is_final());
            for to in [Requested, Landing, Activating, Done, Failed, Faulted] {
                assert!(go(&mut r.clone(), to, 3).is_err(), "{end} → {to}");
            }
            assert!(r.rearm(3).is_err());
        }
    }

    #[test]
    fn faulted_is_never_final_and_is_rearmed_with_backoff() {
        let mut r = req();
        go(&mut r, Landing, 1).unwrap();
        r.items.push(Item {
            module: "sensor".into(),
            failure: Some("503".into()),
            transient: true,
            ..Item::default()
        });
        go(&mut r, Activating, 2).unwrap();
        assert_eq!(r.stamp_restart(3), Ok(true));
        assert_eq!(r.stamp_restart(4), Ok(false), "once per attempt");
        assert_eq!(r.restart_requested_at(), Some(3));
        // A restart waiting for a maintenance window: moved once a minute.
        let mut waits = r.clone();
        assert!(!waits.restart_waits(62), "within the minute");
        assert!(waits.restart_waits(63));
        assert_eq!(waits.restart_requested_at(), Some(63));
        assert!(!waits.restart_waits(100));
        let mut later = r.clone();
        go(&mut r, Faulted, 100).unwrap();
        assert!(!r.status().is_final());
        // faulted_at + interval × 2^min(attempt, 5)
        assert_eq!(r.due_at(60), Some(160));
        later.fault_with("503".into(), Some(500), 100).unwrap();
        assert_eq!(later.due_at(60), Some(500), "Retry-After when longer");
        let lines = r.log.len();
        r.rearm(600).unwrap();
        assert_eq!((r.status(), r.attempt), (Requested, 1));
        assert!(r.items.is_empty() && r.restart_requested_at().is_none() && r.failure().is_none());
        assert!(r.log.len() > lines, "the log is kept");
        r.attempt = 9;
        go(&mut r, Landing, 700).unwrap();
        go(&mut r, Faulted, 1000).unwrap();
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

    #[test]
    fn an_edit_of_image_or_range_supersedes_the_item() {
        let item = |image: &str, range: &str| Item {
            module: "m".into(),
            image: image.into(),
            range: range.into(),
            ..Item::default()
        };
        type Case = (
            &'static str,
            Item,
            Option<(&'static str, &'static str)>,
            Option<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "unchanged",
                item("r/x:1", "^1"),
                Some(("r/x:1", "^1")),
                None,
            ),
            ("not known", item("", ""), Some(("r/x:2", "^2")), None),
            (
                "image",
                item("r/x:1", "^1"),
                Some(("r/x:2", "^1")),
                Some("superseded: its image was edited (r/x:1 → r/x:2)"),
            ),
            (
                "range",
                item("r/x:1", "^1"),
                Some(("r/x:1", "^2")),
                Some("superseded: its update.range was edited (^1 → ^2)"),
            ),
            (
                "section gone",
                item("r/x:1", "^1"),
                None,
                Some("superseded: its image was edited (r/x:1 → none)"),
            ),
        ];
        for (case, it, now, want) in cases {
            let mut r = req();
            r.items = vec![it];
            let now = now.map(|(a, b)| (a.to_string(), b.to_string()));
            let any = r.supersede(|_| now.clone(), 5);
            assert_eq!(any, want.is_some(), "{case}");
            assert_eq!(r.items[0].failure.as_deref(), want, "{case}");
        }
    }

    #[test]
    fn an_open_request_may_be_ended_failed_and_a_final_one_not() {
        for steps in [
            &[][..],
            &[Landing][..],
            &[Landing, Activating][..],
            &[Landing, Faulted][..],
        ] {
            let mut r = req();
            for s in steps {
                go(&mut r, *s, 1).unwrap();
            }
            r.end_failed("cancelled by ops".into(), 2).unwrap();
            assert_eq!(
                (r.status(), r.failure()),
                (Failed, Some("cancelled by ops"))
            );
            assert!(r.end_failed("again".into(), 3).is_err(), "{steps:?}");
        }
    }

    #[test]
    fn one_open_request_per_module_and_a_cap_overall() {
        let open = |id: u64, module: Option<&str>| {
            let mut r = req();
            r.id = id;
            r.module = module.map(str::to_string);
            r
        };
        let (a, every) = (open(1, Some("a")), open(2, None));
        type Case<'a> = (
            &'static str,
            Option<&'static str>,
            Vec<&'a Request>,
            Option<u64>,
        );
        let cases: Vec<Case> = vec![
            ("none open", Some("a"), vec![], None),
            ("another module", Some("b"), vec![&a], None),
            ("the same module", Some("a"), vec![&a], Some(1)),
            ("every module open", Some("b"), vec![&every], Some(2)),
            ("every module asked", None, vec![&a], Some(1)),
        ];
        for (case, module, open, want) in cases {
            let got = match may_file(module, &open) {
                Ok(()) => None,
                Err(RequestError::Open { id, .. }) => Some(id),
                Err(e) => panic!("{case}: {e}"),
            };
            assert_eq!(got, want, "{case}");
        }
        let many: Vec<Request> = (0..MAX_OPEN as u64)
            .map(|k| {
                let mut r = open(k, None);
                r.module = Some(format!("m{k}"));
                r
            })
            .collect();
        let many: Vec<&Request> = many.iter().collect();
        assert_eq!(may_file(Some("new"), &many), Err(RequestError::TooMany));
        let e = may_file(Some("a"), &[&a]).unwrap_err().to_string();
        assert!(
            e.contains("open reload request 1") && e.contains("DELETE /v1/reloads/1"),
            "{e}"
        );
    }
}
