//! `GET /v1/agent`: the agent itself (what runs, as the launcher started
//! it), the launcher's state, and the updates of stead itself; also the
//! plane report's `agent`. Fields in alphabetical order, as every view.

use serde::{Deserialize, Serialize};

use crate::model::agent_update::AgentUpdate;
use crate::model::launch::{Slot, State};

/// The agent and its updates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentView {
    /// A version on trial, and how many times the launcher started it.
    pub candidate: Option<CandidateView>,
    /// The version the launcher runs when no candidate is on trial
    /// (`null`: the package's binary).
    pub current: Option<String>,
    /// The last candidate given up on, and why.
    pub failed: Option<FailedView>,
    /// Whether the launcher started this agent (only then can it switch).
    pub launched: bool,
    /// Why the launcher's state does not read, when it does not.
    pub launcher_error: Option<String>,
    /// The version `current` replaced.
    pub previous: Option<String>,
    /// What runs now.
    pub running: RunningView,
    /// The updates kept, oldest first (the last one may be open).
    pub updates: Vec<AgentUpdateView>,
}

/// `GET /v1/status`'s `agent`: what runs, what the launcher holds, and the
/// last update of stead itself with its state (the whole history is
/// `GET /v1/agent`'s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStatusView {
    /// A version on trial, and how many times the launcher started it.
    pub candidate: Option<CandidateView>,
    /// The last candidate given up on, and why.
    pub failed: Option<FailedView>,
    /// The last update, open or finished.
    pub last_update: Option<LastUpdateView>,
    /// The version `current` replaced.
    pub previous: Option<String>,
    /// What runs now.
    pub running: RunningView,
}

/// An update in a line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastUpdateView {
    /// Why it failed or faulted.
    pub failure: Option<String>,
    pub id: u64,
    /// Its state: `requested`, `landing`, `switching`, `confirming`,
    /// `done`, `failed` or `faulted`.
    pub state: String,
    pub version: String,
}

impl From<&AgentView> for AgentStatusView {
    fn from(a: &AgentView) -> Self {
        AgentStatusView {
            candidate: a.candidate.clone(),
            failed: a.failed.clone(),
            last_update: a.updates.last().map(|u| LastUpdateView {
                failure: u.failure.clone(),
                id: u.id,
                state: u.state.clone(),
                version: u.version.clone(),
            }),
            previous: a.previous.clone(),
            running: a.running.clone(),
        }
    }
}

impl AgentStatusView {
    /// The line `stead status` prints: what runs, and what is under way
    /// or went wrong.
    pub fn line(&self) -> String {
        use std::fmt::Write as _;
        let r = &self.running;
        let mut out = format!("stead {} ({})", r.version, r.slot);
        if let Some(p) = &self.previous {
            let _ = write!(out, "  previous {p}");
        }
        if let Some(c) = &self.candidate {
            let _ = write!(
                out,
                "  candidate {} (started {} times)",
                c.version, c.starts
            );
        }
        if let Some(u) = &self.last_update {
            let _ = write!(out, "  update {} to {}: {}", u.id, u.version, u.state);
            if let Some(f) = u.failure.as_deref().filter(|_| u.state != "done") {
                let _ = write!(out, " ({f})");
            }
        }
        if let Some(f) = &self.failed {
            let _ = write!(out, "  given up: {} ({})", f.version, f.why);
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateView {
    pub starts: u32,
    pub version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedView {
    pub version: String,
    pub why: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningView {
    /// `package`, `current`, `candidate`, or `unlaunched`.
    pub slot: String,
    pub target: String,
    pub version: String,
}

/// One update request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentUpdateView {
    pub attempt: u32,
    pub downgrade: bool,
    pub failure: Option<String>,
    pub finished_at: Option<u64>,
    pub from: String,
    pub id: u64,
    pub landed: bool,
    pub log: Vec<LogLine>,
    pub requested_at: u64,
    pub requested_by: String,
    pub restart_requested_at: Option<u64>,
    pub state: String,
    pub version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    pub at: u64,
    pub line: String,
}

impl From<&AgentUpdate> for AgentUpdateView {
    fn from(u: &AgentUpdate) -> Self {
        AgentUpdateView {
            attempt: u.attempt,
            downgrade: u.downgrade,
            failure: u.failure().map(str::to_string),
            finished_at: u.finished_at(),
            from: u.from.clone(),
            id: u.id,
            landed: u.landed,
            log: u
                .log
                .iter()
                .map(|(at, line)| LogLine {
                    at: *at,
                    line: line.clone(),
                })
                .collect(),
            requested_at: u.requested_at,
            requested_by: u.requested_by.clone(),
            restart_requested_at: u.restart_requested_at(),
            state: u.stage().as_str().to_string(),
            version: u.version.to_string(),
        }
    }
}

impl AgentView {
    /// `slot`: how the launcher started this agent (`None`: it did not);
    /// `state`: the launcher's state, or why it does not read. A candidate
    /// the state names as current confirmed itself: it runs as current.
    pub fn new(
        version: &str,
        target: &str,
        slot: Option<&Slot>,
        state: Result<State, String>,
        updates: &[AgentUpdate],
    ) -> AgentView {
        let (st, launcher_error) = match state {
            Ok(s) => (s, None),
            Err(e) => (State::default(), Some(e)),
        };
        AgentView {
            candidate: st.candidate.as_ref().map(|c| CandidateView {
                starts: c.attempts,
                version: c.version.to_string(),
            }),
            current: st.current.as_ref().map(|v| v.to_string()),
            failed: st.failed.as_ref().map(|f| FailedView {
                version: f.version.to_string(),
                why: f.why.clone(),
            }),
            launched: slot.is_some(),
            launcher_error,
            previous: st.previous.as_ref().map(|v| v.to_string()),
            running: RunningView {
                slot: match slot {
                    None => "unlaunched",
                    Some(Slot::Candidate(v)) if st.current.as_ref() == Some(v) => "current",
                    Some(s) => s.name(),
                }
                .to_string(),
                target: target.to_string(),
                version: version.to_string(),
            },
            updates: updates.iter().map(AgentUpdateView::from).collect(),
        }
    }

    /// The agent in the Prometheus text format (a part of `GET /metrics`).
    pub fn metrics_text(&self) -> String {
        let c = self.candidate.as_ref();
        let mut o = format!(
            "# HELP stead_agent_info The agent as the launcher runs it (always 1): its version and slot, the launcher's current, previous and candidate versions (empty: none; current empty: the package's).\n\
             # TYPE stead_agent_info gauge\n\
             stead_agent_info{{version=\"{}\",slot=\"{}\",current=\"{}\",previous=\"{}\",candidate=\"{}\"}} 1\n\
             # HELP stead_agent_candidate_starts How many times the launcher started the candidate on trial (0: none on trial).\n\
             # TYPE stead_agent_candidate_starts gauge\n\
             stead_agent_candidate_starts {}\n\
             # HELP stead_agent_candidate_failed 1 while the launcher's last candidate is one it gave up on.\n\
             # TYPE stead_agent_candidate_failed gauge\n\
             stead_agent_candidate_failed{{version=\"{}\"}} {}\n\
             # HELP stead_agent_updates Updates of stead itself kept, by state.\n\
             # TYPE stead_agent_updates gauge\n",
            self.running.version,
            self.running.slot,
            self.current.as_deref().unwrap_or(""),
            self.previous.as_deref().unwrap_or(""),
            c.map_or("", |c| c.version.as_str()),
            c.map_or(0, |c| c.starts),
            self.failed.as_ref().map_or("", |f| f.version.as_str()),
            u8::from(self.failed.is_some()),
        );
        for state in [
            "requested",
            "landing",
            "switching",
            "confirming",
            "done",
            "failed",
            "faulted",
        ] {
            let n = self.updates.iter().filter(|u| u.state == state).count();
            o.push_str(&format!("stead_agent_updates{{state=\"{state}\"}} {n}\n"));
        }
        o
    }

    /// The update not finished, if any.
    pub fn open_update(&self) -> Option<&AgentUpdateView> {
        self.updates
            .iter()
            .rev()
            .find(|u| !matches!(u.state.as_str(), "done" | "failed"))
    }
}

/// `POST /v1/agent/update` when the version asked for runs already.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlreadyRunningView {
    /// The version that runs.
    pub running: String,
}
