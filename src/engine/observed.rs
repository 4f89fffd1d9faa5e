//! A container as the engine lists it, parsed once into a typed
//! observation: its state, its status line, and what its labels say.

use crate::model::labels::Labels;
use crate::model::names::NodeId;

/// A container's state as the engine reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerState {
    /// Created, never started.
    Created,
    /// Running.
    Running,
    /// Paused.
    Paused,
    /// Being restarted by the engine.
    Restarting,
    /// Being removed.
    Removing,
    /// Exited.
    Exited,
    /// Dead.
    Dead,
    /// Anything else.
    Unknown,
}

impl ContainerState {
    /// Parses the engine's state word.
    pub fn parse(s: &str) -> ContainerState {
        match s {
            // Podman's words: made and not started; ended (and, with a
            // restart policy, about to start again).
            "created" | "configured" => ContainerState::Created,
            "running" => ContainerState::Running,
            "paused" => ContainerState::Paused,
            "restarting" => ContainerState::Restarting,
            "removing" => ContainerState::Removing,
            "exited" | "stopped" => ContainerState::Exited,
            "dead" => ContainerState::Dead,
            _ => ContainerState::Unknown,
        }
    }

    /// The engine's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            ContainerState::Created => "created",
            ContainerState::Running => "running",
            ContainerState::Paused => "paused",
            ContainerState::Restarting => "restarting",
            ContainerState::Removing => "removing",
            ContainerState::Exited => "exited",
            ContainerState::Dead => "dead",
            ContainerState::Unknown => "unknown",
        }
    }
}

/// One container as listed by the engine.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The container ID.
    pub id: String,
    /// Its names, without the leading `/`.
    pub names: Vec<String>,
    /// What its labels say.
    pub labels: Labels,
    /// Its state.
    pub state: ContainerState,
    /// The engine's status line ("Up 3 minutes").
    pub status: String,
    /// The image ID it runs.
    pub image_id: String,
    /// When it was created, seconds since the epoch.
    pub created: i64,
    /// The host sources of its bind mounts.
    pub mount_sources: Vec<String>,
}

impl Observed {
    /// Its health, as the status line says it (`Up 5 minutes (healthy)`):
    /// `starting`, `healthy` or `unhealthy`; `None` without a health check.
    pub fn health(&self) -> Option<&'static str> {
        let s = &self.status;
        if s.contains("(health: starting)") {
            Some("starting")
        } else if s.contains("(unhealthy)") {
            Some("unhealthy")
        } else if s.contains("(healthy)") {
            Some("healthy")
        } else {
            None
        }
    }

    /// Its exit code, as the status line says it (`Exited (3) 5 seconds
    /// ago`), when it exited.
    pub fn exit_code(&self) -> Option<i64> {
        let rest = self.status.strip_prefix("Exited (")?;
        rest.split_once(')')?.0.parse().ok()
    }

    /// The module it runs, when `node` manages it.
    pub fn module_of(&self, node: &NodeId) -> Option<&str> {
        if self.labels.managed_by(node) {
            self.labels.module.as_deref()
        } else {
            None
        }
    }
}
