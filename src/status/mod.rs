//! What the agent says of the node and of each module: the engine's
//! reachability and the last pass ([`NodeStatus`]); each module's state
//! (converged, pending, waiting, drifted, recreating, starting, settling,
//! crash-looping, unhealthy, conflict, failed, quarantined), its digests, its container and what was
//! last done ([`ModuleStatus`]). Every judgement of how a module is living
//! is here ([`judge`]): settling and crash-looping from what the engine
//! reports, the restart baseline and back-off forgiveness, the state a pass
//! leaves each module in, whether a reloaded version is unstable, and the
//! board while no pass runs; each a pure function. [`metrics`] serves the
//! counters.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::model::names::Digest;
use crate::model::spec::Moved;

pub mod counted;
pub mod depends;
pub mod judge;
pub mod lives;
pub mod metrics;

/// A module's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModuleState {
    /// Running what its inputs say, and up for the settle window (or
    /// finished, as its restart policy allows).
    Converged,
    /// Not acted on yet (no pass since it was stated, or the engine is away).
    Pending,
    /// A module it depends on does not meet its condition yet: not
    /// started until it does.
    Waiting,
    /// Its inputs moved and its policy is to report, not recreate.
    Drifted,
    /// Being replaced.
    Recreating,
    /// Created or started recently, no restarts yet.
    Starting,
    /// Restarted a few times since it was started, not yet up for the
    /// settle window.
    Settling,
    /// Keeps restarting.
    CrashLooping,
    /// Running, and its health check fails.
    Unhealthy,
    /// A container this node does not manage holds its name.
    Conflict,
    /// An action failed, an input is missing, or it exited with an error.
    Failed,
    /// Held by the crash guard: the agent died acting on it, a few times in
    /// a row; neither run nor removed until it changes.
    Quarantined,
    /// Its inputs moved, and its recreate waits for a maintenance window:
    /// what ran runs on.
    Deferred,
}

impl ModuleState {
    /// Every state, for metrics.
    pub const ALL: [ModuleState; 13] = [
        ModuleState::Converged,
        ModuleState::Pending,
        ModuleState::Waiting,
        ModuleState::Drifted,
        ModuleState::Recreating,
        ModuleState::Starting,
        ModuleState::Settling,
        ModuleState::CrashLooping,
        ModuleState::Unhealthy,
        ModuleState::Conflict,
        ModuleState::Failed,
        ModuleState::Quarantined,
        ModuleState::Deferred,
    ];

    /// Its name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            ModuleState::Converged => "converged",
            ModuleState::Pending => "pending",
            ModuleState::Waiting => "waiting",
            ModuleState::Drifted => "drifted",
            ModuleState::Recreating => "recreating",
            ModuleState::Starting => "starting",
            ModuleState::Settling => "settling",
            ModuleState::CrashLooping => "crash-looping",
            ModuleState::Unhealthy => "unhealthy",
            ModuleState::Conflict => "conflict",
            ModuleState::Failed => "failed",
            ModuleState::Quarantined => "quarantined",
            ModuleState::Deferred => "deferred",
        }
    }
}

/// What the agent last did to a module (its name in the API is the
/// variant's, in kebab case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Act {
    /// Its container was created.
    Created,
    /// Its stopped container was started.
    Started,
    /// Its container was replaced.
    Recreated,
    /// Its drift was reported (once, as it began).
    DriftReported,
    /// Its running container was told its live files changed.
    ReloadedLive,
}

impl Act {
    /// Its name, as the API and the CLI spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Act::Created => "created",
            Act::Started => "started",
            Act::Recreated => "recreated",
            Act::DriftReported => "drift-reported",
            Act::ReloadedLive => "reloaded-live",
        }
    }
}

impl std::fmt::Display for Act {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The last thing the agent did to a module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LastAction {
    /// What.
    pub action: Act,
    /// When, seconds since the epoch.
    pub at: u64,
}

/// What the agent says of one module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModuleStatus {
    /// The module.
    pub name: String,
    /// Its state.
    pub state: ModuleState,
    /// The digest its inputs give now.
    pub desired_digest: Option<Digest>,
    /// The digest its container carries.
    pub running_digest: Option<Digest>,
    /// Its container.
    pub container_id: Option<String>,
    /// The image ID its container runs.
    pub image_id: Option<String>,
    /// The image reference its intention names.
    pub image: Option<String>,
    /// The manifest digests the engine knows for the image its container
    /// runs (`repo@sha256:…`, its `RepoDigests`: the digest it was pulled
    /// by; a local build has none).
    pub image_digests: Vec<String>,
    /// Its container's health, when it has a health check (`starting`,
    /// `healthy`, `unhealthy`).
    pub health: Option<String>,
    /// What the last probe printed, while it is unhealthy.
    pub health_output: Option<String>,
    /// How many times the engine restarted the container, when known.
    pub restart_count: Option<u32>,
    /// The inputs that differ between the container and what they say now.
    pub inputs_differ: Vec<Moved>,
    /// The last action taken.
    pub last_action: Option<LastAction>,
    /// The last error, while it holds.
    pub last_error: Option<String>,
    /// When the agent acts on it again, seconds since the epoch, while it
    /// waits out a back-off (failed creates and pulls, crash loops).
    pub next_attempt_at: Option<u64>,
    /// The image ID the last pass wanted it to run (a reload measures a
    /// landed version against it: a pass that wanted the target and could
    /// not make it run is a decided answer).
    #[serde(skip)]
    pub desired_image: Option<String>,
    /// When the pass that wrote this looked at the engine, seconds since
    /// the epoch (a reload holds a version only on a look taken after its
    /// window, never on a status no pass has renewed).
    #[serde(skip)]
    pub observed_at: Option<u64>,
}

impl ModuleStatus {
    /// A module known but not acted on yet.
    pub fn pending(name: &str) -> ModuleStatus {
        ModuleStatus {
            name: name.to_string(),
            state: ModuleState::Pending,
            desired_digest: None,
            running_digest: None,
            container_id: None,
            image_id: None,
            image: None,
            image_digests: Vec::new(),
            health: None,
            health_output: None,
            restart_count: None,
            inputs_differ: vec![],
            last_action: None,
            last_error: None,
            next_attempt_at: None,
            desired_image: None,
            observed_at: None,
        }
    }
}

/// Every module's status, by name.
pub type Board = BTreeMap<String, ModuleStatus>;

/// Whether the engine answers, as the status reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineStatus {
    /// Not tried yet.
    Unknown,
    /// Answering.
    Reachable,
    /// Away since this time; the agent is waiting for it.
    Waiting {
        /// Since when.
        since: SystemTime,
        /// The last error.
        error: String,
    },
}

/// The node's status, shared with whoever reports it.
#[derive(Clone, Debug)]
pub struct NodeStatus {
    /// The engine.
    pub engine: EngineStatus,
    /// When the last pass finished, and how long it took.
    pub last_pass: Option<(SystemTime, Duration)>,
    /// How many passes have completed.
    pub passes: u64,
    /// The last pass failed (the engine answered with errors, the store
    /// failed): since when passes fail, and the last error. Cleared by a
    /// pass that completes.
    pub failing: Option<(SystemTime, String)>,
    /// Another agent shares this node id (what the last pass saw).
    pub other_agent: Option<String>,
    /// What the crash guard holds.
    pub quarantine: crate::model::guard::Quarantine,
    /// The filesystems that matter, as the last pass measured them.
    pub disk: crate::model::disk::Disks,
    /// The agent's own pulls under way, as the last pass saw them.
    pub fetching: crate::model::fetch::Fetching,
    /// What the last image the agent fetched itself brought.
    pub fetched: Option<crate::model::fetch::Brought>,
    /// This device's public key (`age1…`), what values are sealed to.
    pub device_key: Option<String>,
    /// This device's report key (Ed25519, base64), what its reports are
    /// signed with.
    pub report_key: Option<String>,
    /// What the device is, as a group's `when` judges it.
    pub facts: crate::model::facts::Facts,
}

impl Default for NodeStatus {
    fn default() -> Self {
        NodeStatus {
            engine: EngineStatus::Unknown,
            last_pass: None,
            passes: 0,
            failing: None,
            other_agent: None,
            quarantine: Default::default(),
            disk: Default::default(),
            fetching: Default::default(),
            fetched: None,
            device_key: None,
            report_key: None,
            facts: Default::default(),
        }
    }
}

impl NodeStatus {
    /// Whether passes run and complete: the engine answers, a pass has
    /// completed since start, the last one did, and the crash guard does
    /// not hold everything. False while the agent does not know.
    pub fn passing(&self) -> bool {
        self.engine == EngineStatus::Reachable
            && self.passes > 0
            && self.failing.is_none()
            && self.quarantine.everything.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acts_read_as_the_api_says_them() {
        for (act, said) in [
            (Act::Created, "created"),
            (Act::Started, "started"),
            (Act::Recreated, "recreated"),
            (Act::DriftReported, "drift-reported"),
            (Act::ReloadedLive, "reloaded-live"),
        ] {
            assert_eq!(serde_json::to_value(act).unwrap(), said);
        }
    }

    #[test]
    fn passing_only_when_passes_are_known_to_complete() {
        let waiting = EngineStatus::Waiting {
            since: SystemTime::UNIX_EPOCH,
            error: "gone".into(),
        };
        let failing = Some((SystemTime::UNIX_EPOCH, "refused".to_string()));
        let hold = crate::model::guard::Hold {
            key: Digest::of(b"all"),
            crashes: 3,
            since: 0,
            cause: "killed".into(),
        };
        let node = |engine: EngineStatus, passes, failing: Option<(SystemTime, String)>, all| {
            let mut s = NodeStatus {
                engine,
                passes,
                failing,
                ..Default::default()
            };
            s.quarantine.everything = all;
            s
        };
        for (status, passing) in [
            (node(EngineStatus::Reachable, 1, None, None), true),
            (node(EngineStatus::Unknown, 0, None, None), false),
            (node(EngineStatus::Reachable, 0, None, None), false),
            (node(waiting.clone(), 0, None, None), false),
            (node(waiting, 5, None, None), false),
            (node(EngineStatus::Reachable, 5, failing, None), false),
            (node(EngineStatus::Reachable, 5, None, Some(hold)), false),
        ] {
            assert_eq!(status.passing(), passing, "{status:?}");
        }
    }
}
